#!/usr/bin/env bash
# Builds what Kiln's GPU run needs (Release, CUDA backend on) and packs it, with
# the run-time libraries a bare CUDA machine lacks, into one ignored folder that
# the device tool can carry (README "GPU device run"; tools/gpu/run.sh unpacks
# and runs it there).
#
#   tools/gpu/bundle.sh [--no-build] [--out DIR]
#
# Build directory: $KILN_BUILD_DIR, else build-gpu (configured here when new).
# Output: DIR (default .gpu-bundle) holding kiln-gpu.tar.xz and MANIFEST.txt.
# The archive holds kiln-gpu/{bin,lib,lib-fallback,MANIFEST.txt}:
#   bin/           the test and bench binaries, and the fake CUDA driver module
#   lib/           libkiln and every library they load that is neither the C
#                  library's nor CUDA's (LLVM 19, OpenBLAS, Open MPI, z3, ...)
#   lib-fallback/  libstdc++ and libgcc_s, used there only when the machine's
#                  own are older than the binaries need
# The CUDA driver, NVRTC, cuBLAS and NCCL are never packed: they come from the
# device's own CUDA 13 (run.sh finds them and prints where).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${KILN_BUILD_DIR:-$root/build-gpu}
out=$root/.gpu-bundle
do_build=1
while (($#)); do
  case "$1" in
    --no-build) do_build=0 ;;
    --out) out=$(realpath -m "$2"); shift ;;
    *) echo "usage: tools/gpu/bundle.sh [--no-build] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
case "$build" in /*) ;; *) build=$root/$build ;; esac  # relative to the checkout
build=$(realpath -m "$build")
limit_mib=60

# The binaries the GPU run uses: every suite with GPU-only cases and the GPU benchmark.
tests=(test_cuda test_conformance test_distributed test_frontend test_codegen)
benches=(bench_gpu)

if ((do_build)); then
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  fi
  cmake --build "$build" -j"${KILN_JOBS:-2}" --target "${tests[@]}" "${benches[@]}" kiln_fake_cuda
fi

cache_get() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -1; }
[ "$(cache_get CMAKE_BUILD_TYPE)" = Release ] ||
  { echo "bundle: $build is not a Release build (CMAKE_BUILD_TYPE=$(cache_get CMAKE_BUILD_TYPE))" >&2; exit 1; }
src_dir=$(cache_get CMAKE_HOME_DIRECTORY)
host_cxx=$(cache_get CMAKE_CXX_COMPILER)

stage=$build/gpu-bundle-stage
rm -rf "$stage"
mkdir -p "$stage/kiln-gpu/bin" "$stage/kiln-gpu/lib" "$stage/kiln-gpu/lib-fallback"
kg=$stage/kiln-gpu

bins=()
for t in "${tests[@]}"; do bins+=("$build/tests/$t"); done
for b in "${benches[@]}"; do bins+=("$build/bench/$b"); done
fake=$build/tests/libkiln_fake_cuda.so
for f in "${bins[@]}" "$fake"; do
  [ -f "$f" ] || { echo "bundle: missing $f (build it, or drop --no-build)" >&2; exit 1; }
done
# The CUDA backend must be on: libkiln links NVRTC.
libkiln=$(ldd "$build/tests/test_cuda" | awk '$1 == "libkiln.so.0" {print $3}')
[ -n "$libkiln" ] || { echo "bundle: test_cuda does not load libkiln.so.0" >&2; exit 1; }
readelf -d "$libkiln" | grep -q 'NEEDED.*libnvrtc\.so\.13' ||
  { echo "bundle: $libkiln does not link libnvrtc.so.13: configure with the CUDA 13 toolkit" >&2; exit 1; }

for f in "${bins[@]}" "$fake"; do cp "$f" "$kg/bin/"; done

# Libraries by soname. Left to the machine: the C library's (every Linux has
# them, newer there) and CUDA's (the device's own toolkit and driver).
system_re='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1)$'
cuda_re='^lib(cuda|nvrtc|nvrtc-builtins|cublas|cublasLt|nccl|cudart|nvJitLink)\.so'
fallback_re='^(libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'
declare -A seen=()
missing=0
for f in "${bins[@]}" "$fake"; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ $name =~ $system_re ]] && continue
    [[ $name =~ $cuda_re ]] && continue
    if [ "$path" = "not" ]; then
      echo "bundle: $(basename "$f") needs $name, which is not found here" >&2
      missing=1
      continue
    fi
    [ -n "${seen[$name]:-}" ] && continue
    seen[$name]=$path
    if [[ $name =~ $fallback_re ]]; then
      cp -L "$path" "$kg/lib-fallback/$name"
    else
      cp -L "$path" "$kg/lib/$name"
    fi
  done < <(ldd "$f")
done
((missing == 0)) || exit 1

# What the binaries ask of the machine: the newest glibc and libstdc++ symbol versions.
need_versions() {
  for f in "$kg"/bin/* "$kg"/lib/*; do objdump -T "$f" 2>/dev/null; done |
    grep -o "$1_[0-9.]*" | sort -Vu | tail -1
}
glibc_need=$(need_versions GLIBC)
glibcxx_need=$(need_versions GLIBCXX)

# The build's paths, which the tests compiled in: run.sh recreates them on the device.
{
  echo "# Kiln GPU bundle (tools/gpu/bundle.sh); read by tools/gpu/run.sh"
  echo "commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "dirty=$([ -z "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ] && echo no || echo yes)"
  echo "built_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "built_on=$(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -1)"
  echo "source_dir=$src_dir"
  echo "binary_dir=$build"
  echo "fake_cuda=$fake"
  echo "host_cxx=$host_cxx"
  echo "cuda_toolkit=$("$(cache_get CUDAToolkit_NVCC_EXECUTABLE)" --version 2>/dev/null | grep -o 'release [0-9.]*' | cut -d' ' -f2) (libnvrtc.so.13 linked from $(ldd "$libkiln" | awk '$1 == "libnvrtc.so.13" {print $3}'))"
  echo "needs_glibc=$glibc_need"
  echo "needs_glibcxx=$glibcxx_need"
  echo "needs_from_device=libcuda.so.1 (driver), libnvrtc.so.13, libcublas.so.13, libcublasLt.so.13, libnccl.so.2"
  echo "binaries=$(cd "$kg/bin" && ls | tr '\n' ' ')"
  echo "libraries:"
  (cd "$kg" && for f in lib/* lib-fallback/*; do printf '  %-40s %6d KiB  from %s\n' "$f" $(($(stat -c %s "$f") / 1024)) "${seen[$(basename "$f")]:-build}"; done)
} >"$kg/MANIFEST.txt"

# Nothing that the binaries load may resolve outside the bundle but the C
# library and the device's CUDA (checked with the bundle's libraries first).
bad=0
for f in "$kg"/bin/* "$kg"/lib/*; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ $name =~ $system_re || $name =~ $cuda_re || $name =~ $fallback_re ]] && continue
    case "$path" in
      "$kg"/lib/*) ;;
      *) echo "bundle: $(basename "$f"): $name resolves to $path, not the bundle" >&2; bad=1 ;;
    esac
  done < <(LD_LIBRARY_PATH="$kg/lib" ldd "$f")
done
((bad == 0)) || exit 1

raw=$(du -sb "$kg" | cut -f1)
mkdir -p "$out"
tmp=$(mktemp "$out/.kiln-gpu.tar.xz.XXXXXX")
echo "bundle: compressing $((raw / 1048576)) MiB (xz -9e; a few minutes on two cores)"
tar -C "$stage" -cf - kiln-gpu | xz -9e -T"${KILN_JOBS:-2}" -c >"$tmp"
mv -f "$tmp" "$out/kiln-gpu.tar.xz"
cp "$kg/MANIFEST.txt" "$out/MANIFEST.txt.tmp" && mv -f "$out/MANIFEST.txt.tmp" "$out/MANIFEST.txt"
rm -rf "$stage"

packed=$(du -sb "$out" | cut -f1)
cat "$out/MANIFEST.txt"
echo "bundle: $out: $((packed / 1048576)).$(((packed % 1048576) * 10 / 1048576)) MiB packed ($packed bytes), $((raw / 1048576)) MiB unpacked"
if ((packed > limit_mib * 1048576)); then
  echo "bundle: over the ${limit_mib} MiB limit (the device tool carries 64 MiB with the working tree)" >&2
  exit 1
fi
