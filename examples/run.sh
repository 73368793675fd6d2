#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build pftnet (Release), run a ring of five local
# peers on the bundled PACS example features (examples/ring5.dot), print the per-node table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
./build/node/pftnet launch examples/ring5.dot --out "${1:-runs/ring5}" --force
