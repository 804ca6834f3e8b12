#!/usr/bin/env bash
# Kiln's set-up: installs what is missing (Debian packages, idempotent), builds,
# then runs the main demo (`tools/setup.sh demo`: builds only the demo and the
# library), every test (`tools/setup.sh test`: builds everything, runs ctest with
# one test per core; tests/CMakeLists.txt says which run alone),
# or the sanitized suites (`tools/setup.sh sanitize`): every test but `install`
# built with AddressSanitizer and UndefinedBehaviorSanitizer (build-asan; the
# suites in KILN_SANITIZE_TESTS only, when set: "ir runtime passes frontend"),
# then the concurrency tests built with ThreadSanitizer (build-tsan).
# KILN_SANITIZE_TSAN=0 skips TSan, KILN_SANITIZE_ASAN=0 ASan+UBSan;
# KILN_ASAN_BUILD_DIR and KILN_TSAN_BUILD_DIR choose other build directories.
set -euo pipefail
mode=${1:-demo}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}
case "$mode" in
  demo | test | sanitize) ;;
  *)
    echo "usage: tools/setup.sh [demo|test|sanitize]" >&2; exit 2 ;;
esac

packages=(cmake ninja-build g++ ccache pkg-config python3
  llvm-19-dev libopenblas-dev libxsmm-dev doctest-dev libbenchmark-dev libfmt-dev libcli11-dev
  zlib1g-dev libzstd-dev libxml2-dev libedit-dev libcurl4-openssl-dev libffi-dev
  libopenmpi-dev openmpi-bin nlohmann-json3-dev graphviz python3-matplotlib)
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

# configure_sanitized DIR FLAGS: the library, examples and tests (no benchmarks)
# at -O1 (with sanitizers on, several times faster to compile than -O3), with FLAGS on
# every compile and link.
configure_sanitized() {
  cmake -S "$root" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DKILN_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS="$2 -fno-omit-frame-pointer -g1" \
    -DCMAKE_EXE_LINKER_FLAGS="$2" -DCMAKE_SHARED_LINKER_FLAGS="$2" \
    -DCMAKE_MODULE_LINKER_FLAGS="$2"
}

case "$mode" in
  demo | test)
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ;;
esac

case "$mode" in
  demo)
    cmake --build "$build" -j"$(nproc)" --target demo
    cd "$build" && ./examples/demo "$build/tangent_lines.svg" "$build/kiln_dump" ;;
  test)
    cmake --build "$build" -j"$(nproc)"
    cd "$build" && ctest --output-on-failure --timeout 1200 -j"$(nproc)" ;;
  sanitize)
    asan=${KILN_ASAN_BUILD_DIR:-$root/build-asan}
    tsan=${KILN_TSAN_BUILD_DIR:-$root/build-tsan}
    # JIT-compiled kernels are not instrumented; everything Kiln compiles is.
    # Suppressions, if any, go in tools/sanitizers/<name>.supp, each entry with a
    # comment saying why it is not a Kiln bug (a Kiln finding is fixed instead).
    supp() { [ -f "$root/tools/sanitizers/$1.supp" ] && echo ":suppressions=$root/tools/sanitizers/$1.supp" || true; }
    export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1$(supp asan)"
    export LSAN_OPTIONS="print_suppressions=0$(supp lsan)"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1$(supp ubsan)"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1$(supp tsan)"
    # step NAME: prints how long the previous step took, then NAME.
    step() {
      [ -z "${step_name:-}" ] || echo "kiln sanitize: $step_name: $((SECONDS - step_start)) s"
      step_name=$1 step_start=$SECONDS
      [ -z "$1" ] || echo "=== kiln sanitize: $1"
    }
    tests=${KILN_SANITIZE_TESTS:-}
    if [ -n "$tests" ]; then
      targets=$(printf 'test_%s ' $tests) select=(-R "^($(echo $tests | tr ' ' '|'))\$")
    else
      targets=all tests="all but install" select=(-E '^install$')
    fi
    if [ "${KILN_SANITIZE_ASAN:-1}" != 0 ]; then
      step "AddressSanitizer+UBSan: build ($asan; suites: $tests)"
      configure_sanitized "$asan" "-fsanitize=address,undefined -fno-sanitize-recover=undefined"
      cmake --build "$asan" -j"$(nproc)" --target $targets
      step "AddressSanitizer+UBSan: run (suites: $tests)"
      (cd "$asan" && ctest --output-on-failure --timeout 1800 "${select[@]}")
    fi
    # ThreadSanitizer: the tests that run Kiln from several threads at once
    # (KILN_SANITIZE_TSAN=0 skips them).
    if [ "${KILN_SANITIZE_TSAN:-1}" = 0 ]; then step "" && exit 0; fi
    step "ThreadSanitizer: build ($tsan; test_runtime, test_codegen, test_frontend)"
    configure_sanitized "$tsan" "-fsanitize=thread"
    cmake --build "$tsan" -j"$(nproc)" --target test_runtime test_codegen test_frontend
    step "ThreadSanitizer: run (thread pool, concurrent compiles, concurrent first calls, background compiles)"
    "$tsan/tests/test_runtime" --source-file='*thread_pool_test.cpp'
    "$tsan/tests/test_codegen" --test-case='*concurrently*'
    "$tsan/tests/test_frontend" --test-case='*threads*,*background*,*becomes dynamic*'
    step "" ;;
esac
