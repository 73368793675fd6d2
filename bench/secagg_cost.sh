#!/usr/bin/env bash
# Double masking's cost against single masking, in one run (docs/SECAGG.md §9.2): bench/secagg_cost.c at star50
# and star200 with the words of a tied masked part at d = 1280, C = 7 (828,800 words, 6.63 MB). CPU seconds,
# alternated single/double, best of REPEAT. A benchmark, not a test.
#
# usage: bash bench/secagg_cost.sh [--build DIR] [--words 828800] [--repeat 2] [--sizes "50 200"]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=$here/build words=828800 repeat=2 sizes="50 200"
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --words) words=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--words N] [--repeat N] [--sizes \"50 200\"]" >&2; exit 2 ;;
    esac
done
for lib in "$build/wire/libpft_wire.a" "$build/topology/libpft_topology.a" "$build/core/libpft_core.a"; do
    [ -f "$lib" ] || { echo "no $lib: build Release first (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release)" >&2; exit 2; }
done
out=$here/build-bench
mkdir -p "$out"
cc -O2 -std=c11 -I"$here/core" -I"$here/wire" -I"$here/topology" "$here/bench/secagg_cost.c" \
    "$build/topology/libpft_topology.a" "$build/wire/libpft_wire.a" "$build/core/libpft_core.a" \
    $(pkg-config --libs libsodium msgpack libzmq libcgraph jansson lapacke openblas) -lm -o "$out/secagg_cost"
for n in $sizes; do
    "$out/secagg_cost" "$n" "$words" "$repeat"
    echo
done
