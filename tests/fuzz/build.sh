#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan + libFuzzer) into build-fuzz/fuzz/, and make_seeds.
# Usage: tests/fuzz/build.sh [BUILD_DIR]   (default: build-fuzz at the top of the repository)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bdir="${1:-$root/build-fuzz}"
CC="${CC:-clang}"
sanflags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

# The project libraries, instrumented for coverage (fuzzer-no-link) and sanitized (PFT_SANITIZE);
# Debug keeps asserts on, -O1 keeps the fuzzer fast enough.
cmake -S "$root" -B "$bdir" -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Debug -DPFT_SANITIZE=ON \
    -DBUILD_TESTING=OFF -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" -DCMAKE_C_FLAGS_DEBUG="-O1 -g" >/dev/null
cmake --build "$bdir" --target pft_core pft_wire pft_topology pft_common pft_peer pft_launch pft_report pft_cmds -j"$(nproc)"

incs=(-I"$root/core" -I"$root/wire" -I"$root/topology" -I"$root/node/common" -I"$root/node/peer" -I"$root/node/launch"
    -I"$root/node/report" -I"$root/node/pftnet" $(pkg-config --cflags libcgraph))
libs=("$bdir/node/libpft_cmds.a" "$bdir/node/libpft_launch.a" "$bdir/node/libpft_report.a" "$bdir/node/libpft_peer.a"
    "$bdir/node/libpft_common.a" "$bdir/wire/libpft_wire.a" "$bdir/topology/libpft_topology.a" "$bdir/core/libpft_core.a")
# shellcheck disable=SC2207
deps=($(pkg-config --libs libzmq msgpack libsodium libcgraph lapacke openblas jansson) -lm)
cflags=(-std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -O1 -g -Wall -Wextra -Wshadow -Werror
    -Wno-unused-parameter)

mkdir -p "$bdir/fuzz"
for t in bundle topo npy; do
    # shellcheck disable=SC2086
    "$CC" "${cflags[@]}" "${incs[@]}" -fsanitize=fuzzer $sanflags "$root/tests/fuzz/fuzz_$t.c" \
        "${libs[@]}" "${deps[@]}" -o "$bdir/fuzz/fuzz_$t"
    echo "built $bdir/fuzz/fuzz_$t"
done
# shellcheck disable=SC2086
"$CC" "${cflags[@]}" "${incs[@]}" $sanflags "$root/tests/fuzz/make_seeds.c" "${libs[@]}" "${deps[@]}" \
    -o "$bdir/fuzz/make_seeds"
echo "built $bdir/fuzz/make_seeds"
