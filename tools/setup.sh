#!/usr/bin/env bash
# Kiln's set-up: installs what is missing (Debian packages, idempotent), builds,
# then runs the main demo (`tools/setup.sh demo`) or every test (`tools/setup.sh test`).
set -euo pipefail
mode=${1:-demo}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}

packages=(cmake ninja-build g++ ccache pkg-config python3
  llvm-19-dev libopenblas-dev doctest-dev libbenchmark-dev libfmt-dev libcli11-dev
  zlib1g-dev libzstd-dev libxml2-dev libedit-dev libcurl4-openssl-dev libffi-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kiln setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j"$(nproc)"

case "$mode" in
  demo)
    cd "$build" && ./examples/demo "$build/tangent_lines.svg" "$build/kiln_dump" ;;
  test)
    cd "$build" && ctest --output-on-failure --timeout 1200 ;;
  *)
    echo "usage: tools/setup.sh [demo|test]" >&2; exit 2 ;;
esac
