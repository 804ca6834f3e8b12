#!/usr/bin/env bash
# Builds the consumer project against Kiln both ways: find_package(Kiln CONFIG)
# after a cmake --install of the build it is given (nothing of Kiln is compiled
# again), and add_subdirectory of the source tree (Kiln's library is compiled
# as part of the consumer). Both are built under <build>/install-test and kept
# there, so a second run rebuilds only what changed, and through ccache when
# there is one, so a fresh build tree at the same place finds Kiln's objects in
# the cache.
set -euo pipefail
src=$1       # Kiln's source dir
kbuild=$2    # Kiln's (already built) build dir
work=$kbuild/install-test
mkdir -p "$work"
export CCACHE_BASEDIR="$src" CCACHE_NOHASHDIR=1
launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# step NAME COMMAND...: runs COMMAND with its output in $work/NAME.log, shown if it fails.
step() {
  local name=$1
  shift
  local t0=$SECONDS
  if ! "$@" > "$work/$name.log" 2>&1; then
    cat "$work/$name.log"
    echo "install test: $name failed (log: $work/$name.log)" >&2
    exit 1
  fi
  echo "install test: $name: $((SECONDS - t0)) s"
}

# A fresh prefix, so that a header no longer installed is not found there
# (cmake --install keeps the files' times, so the consumer does not recompile).
rm -rf "$work/prefix"
step install cmake --install "$kbuild" --prefix "$work/prefix"
step pkg-configure cmake -S "$src/tests/install/consumer" -B "$work/pkg" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" "${launcher[@]}"
step pkg-build cmake --build "$work/pkg"
"$work/pkg/consumer" | tee "$work/pkg.out"
grep -q "consumer ok 12" "$work/pkg.out"
"$work/pkg/torch_consumer" | tee "$work/pkg-torch.out"
grep -q "torch consumer ok 12" "$work/pkg-torch.out"

step sub-configure cmake -S "$src/tests/install/consumer" -B "$work/sub" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DKILN_SOURCE_DIR="$src" "${launcher[@]}"
step sub-build cmake --build "$work/sub" -j"$(nproc)"
"$work/sub/consumer" | tee "$work/sub.out"
grep -q "consumer ok 12" "$work/sub.out"
"$work/sub/torch_consumer" | tee "$work/sub-torch.out"
grep -q "torch consumer ok 12" "$work/sub-torch.out"
echo "install test: both ways ok"
