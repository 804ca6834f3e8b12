#!/usr/bin/env bash
# Builds the consumer project against Kiln both ways: add_subdirectory, and
# cmake --install + find_package(Kiln CONFIG).
set -euo pipefail
src=$1       # Kiln's source dir
kbuild=$2    # Kiln's (already built) build dir
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CCACHE_BASEDIR="$src" CCACHE_NOHASHDIR=1

cmake --install "$kbuild" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$src/tests/install/consumer" -B "$work/pkg" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/pkg.log"
cmake --build "$work/pkg" > "$work/pkg-build.log"
"$work/pkg/consumer" | tee "$work/pkg.out"
grep -q "consumer ok 12" "$work/pkg.out"
"$work/pkg/torch_consumer" | tee "$work/pkg-torch.out"
grep -q "torch consumer ok 12" "$work/pkg-torch.out"

cmake -S "$src/tests/install/consumer" -B "$work/sub" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DKILN_SOURCE_DIR="$src" > "$work/sub.log"
cmake --build "$work/sub" -j"$(nproc)" > "$work/sub-build.log"
"$work/sub/consumer" | tee "$work/sub.out"
grep -q "consumer ok 12" "$work/sub.out"
"$work/sub/torch_consumer" | tee "$work/sub-torch.out"
grep -q "torch consumer ok 12" "$work/sub-torch.out"
echo "install test: both ways ok"
