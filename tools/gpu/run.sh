#!/usr/bin/env bash
# Kiln's GPU run on the device machine (README "GPU device run"): unpacks the
# bundle that tools/gpu/bundle.sh made, prints what the machine has, then runs
# every GPU test, the GPU benchmarks and the PyTorch reference on the same GPU,
# each step under its own time limit, and writes one summary to $OUT.
#
#   tools/gpu/run.sh [--only LIST] [--budget SECONDS] [--bundle DIR] [--list]
#
# Run it from the repository root (the device tool starts there). LIST is
# comma-separated: groups (tests, bench, torch) or step names (--list shows
# them); the environment step always runs. --budget is the whole run's limit
# (default 450 s; each step also has its own). Results in $OUT (default
# .gpu-run-out): summary.txt (each step: result, time, key figures),
# logs.tar.gz (every log), bench_gpu.json, kiln_breakeven.csv,
# torch_reference.json, torch_breakeven.csv. A failing or hanging step is
# recorded and the run goes on. Exit status: 0 when every step that ran passed
# or skipped, 1 otherwise. KILN_GPU_DOCTEST_ARGS adds doctest arguments to the
# test steps (e.g. '-tc=*cuBLAS*' with --only test_cuda); KILN_GPU_KEEP=1 keeps
# the unpacked bundle and logs (the temporary folder printed first).
set -uo pipefail
t_start=$EPOCHREALTIME
repo=$(cd "$(dirname "$0")/../.." && pwd)
bundle_dir=$repo/.gpu-bundle
only=""
budget=450
while (($#)); do
  case "$1" in
    --only) only=$2; shift ;;
    --only=*) only=${1#--only=} ;;
    --budget) budget=$2; shift ;;
    --bundle) bundle_dir=$(cd "$2" && pwd); shift ;;
    --list) list=1 ;;
    *) echo "usage: tools/gpu/run.sh [--only LIST] [--budget SECONDS] [--bundle DIR] [--list]" >&2
       exit 2 ;;
  esac
  shift
done

# name group budget(s) description
steps=(
  "test_cuda tests 80 every CUDA test (on a GPU: the cases that use it; else all, NVRTC and emulation too)"
  "conformance_gpu tests 280 conformance matrix: traced equals eager on the real GPU"
  "test_distributed tests 25 distributed suite: NCCL in a world of one, MPI paths"
  "test_frontend tests 15 Module::to(kCUDA) checkpoint case"
  "test_codegen tests 10 CUDA backend selection case"
  "bench_gpu bench 85 bench_gpu: matmuls, break-even sweep, fused rows, training steps"
  "first_call bench 25 traced MLP Adam step first call: cold NVRTC, then warm disk cache"
  "torch_reference torch 60 PyTorch on the same GPU, the same workloads"
)
if [ -n "${list:-}" ]; then
  printf '%-18s %-6s %6s  %s\n' step group budget what
  for s in "${steps[@]}"; do
    read -r n g b d <<<"$s"
    printf '%-18s %-6s %5ss  %s\n' "$n" "$g" "$b" "$d"
  done
  exit 0
fi
selected() {  # selected NAME GROUP
  [ -z "$only" ] && return 0
  local x
  for x in ${only//,/ }; do [ "$x" = "$1" ] || [ "$x" = "$2" ] && return 0; done
  return 1
}

out=${OUT:-$repo/.gpu-run-out}
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-gpu-run.XXXXXX")
logs=$work/logs
echo "run: working in $work"
mkdir -p "$logs" "$work/tmp" "$work/cache"
trap '[ -n "${KILN_GPU_KEEP:-}" ] || rm -rf "$work"' EXIT

now() { awk -v a="$EPOCHREALTIME" -v b="$t_start" 'BEGIN { printf "%.1f", a - b }'; }
elapsed_int() { awk -v a="$EPOCHREALTIME" -v b="$t_start" 'BEGIN { printf "%d", a - b }'; }

rows=()      # summary rows: step result seconds budget notes
failed=0
env_lines=()
figures=""
note() { env_lines+=("$*"); echo "run: $*"; }

write_summary() {
  local tmp=$out/.summary.txt.tmp
  {
    echo "Kiln GPU run, $(date -u +%Y-%m-%dT%H:%M:%SZ); elapsed $(now) s of a ${budget} s budget"
    for l in "${env_lines[@]}"; do echo "  $l"; done
    echo
    printf '%-18s %-9s %8s %7s  %s\n' step result time budget notes
    local r
    for r in "${rows[@]}"; do echo "$r"; done
    if [ -n "$figures" ]; then
      echo
      echo "$figures"
    fi
    echo
    echo "total: $(now) s"
  } >"$tmp" && mv -f "$tmp" "$out/summary.txt"
  tar -C "$work" -czf "$out/.logs.tar.gz.tmp" logs 2>/dev/null && mv -f "$out/.logs.tar.gz.tmp" "$out/logs.tar.gz"
}

add_row() {  # add_row STEP RESULT SECONDS BUDGET NOTES
  rows+=("$(printf '%-18s %-9s %7ss %6ss  %s' "$1" "$2" "$3" "$4" "$5")")
  case "$2" in pass | skip | ok) ;; *) failed=1 ;; esac
  write_summary
}

# ---- unpack ----
archive=$bundle_dir/kiln-gpu.tar.xz
if [ ! -f "$archive" ]; then
  note "no bundle at $archive: run tools/gpu/bundle.sh here first, and carry .gpu-bundle"
  add_row unpack fail "$(now)" - "no bundle"
  exit 1
fi
if command -v xz >/dev/null; then
  xz -dc "$archive" | tar -xf - -C "$work"
else
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
    "$archive" "$work"
fi
kg=$work/kiln-gpu
if [ ! -x "$kg/bin/test_cuda" ]; then
  note "the bundle did not unpack ($archive)"
  add_row unpack fail "$(now)" - "archive unreadable"
  exit 1
fi
manifest() { sed -n "s/^$1=//p" "$kg/MANIFEST.txt" | head -1; }
note "bundle: commit $(manifest commit) (uncommitted changes: $(manifest dirty)), built $(manifest built_at) on $(manifest built_on); unpacked in $(now) s"

# ---- the machine ----
{
  echo "== date, kernel, OS"; date -u; uname -a; (. /etc/os-release && echo "$PRETTY_NAME")
  echo "== glibc"; ldd --version 2>&1 | head -1
  echo "== CPU and memory"; nproc; free -g 2>/dev/null | head -2
  grep -m1 'model name' /proc/cpuinfo
  echo "vector flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -ow 'avx2\|fma\|avx512f\|avx512bw\|avx512_bf16\|amx_tile' | tr '\n' ' ')"
  echo "== nvidia-smi"; nvidia-smi 2>&1
  echo "== nvcc"; nvcc --version 2>&1 || /usr/local/cuda/bin/nvcc --version 2>&1
} >"$logs/env.txt" 2>&1
os=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")
glibc=$(ldd --version 2>&1 | head -1 | grep -o '[0-9]\+\.[0-9]\+$')
note "machine: $os, glibc $glibc (bundle needs $(manifest needs_glibc)), $(nproc) CPUs"
gpu_present=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  gpu_present=1
  q=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -1)
  cuda_v=$(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -1)
  note "GPU: $q; driver's $cuda_v"
else
  note "GPU: none ($(command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | head -1 || echo "no nvidia-smi")); the GPU cases will skip"
fi
nvcc_v=$( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | grep -o 'release [0-9.]*' | head -1)
note "toolkit: nvcc ${nvcc_v:-not found}; bundle built against CUDA $(manifest cuda_toolkit)"

# A python with torch: for the reference, and where its nvidia/* wheels are a fallback for CUDA's libraries.
torch_py=""
for p in python3 /opt/torch/.venv/bin/python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import torch' 2>/dev/null; then
    torch_py=$(command -v "$p")
    break
  fi
done
site_dirs=()
if [ -n "$torch_py" ]; then
  note "python: $torch_py, $("$torch_py" -c 'import sys, torch; print("Python", sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda)' 2>&1)"
  mapfile -t site_dirs < <("$torch_py" -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null)
else
  note "python: no python3 with torch found"
fi

# CUDA's libraries: the toolkit's folders, the loader's cache, then PyTorch's nvidia wheels.
ldconfig_bin=$(command -v ldconfig || echo /sbin/ldconfig)
find_cuda_lib() {
  local name=$1 d p
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
    /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/local/nvidia/lib64 \
    /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [ -e "$d/$name" ] && { echo "$d/$name"; return; }
  done
  p=$("$ldconfig_bin" -p 2>/dev/null | awk -v n="$name" '$1 == n && /x86-64/ {print $NF; exit}')
  [ -n "$p" ] && { echo "$p"; return; }
  for d in "${site_dirs[@]}"; do
    p=$(find "$d/nvidia" -maxdepth 4 -name "$name" 2>/dev/null | head -1)
    [ -n "$p" ] && { echo "$p"; return; }
  done
}
lib_path=$kg/lib
declare -A added=()
found_libs=""
for name in libcuda.so.1 libnvrtc.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  p=$(find_cuda_lib "$name")
  found_libs+="$name=${p:-NOT FOUND} "
  [ -n "$p" ] || continue
  d=$(dirname "$p")
  if [ -z "${added[$d]:-}" ]; then
    added[$d]=1
    lib_path+=":$d"
  fi
done
note "CUDA libraries: $found_libs"

# libstdc++ and libgcc_s: the machine's, unless older than the binaries need.
if ! env LD_LIBRARY_PATH="$lib_path" "$kg/bin/test_codegen" --version >/dev/null 2>"$logs/libstdcxx_probe.txt"; then
  lib_path="$kg/lib:$kg/lib-fallback:${lib_path#"$kg/lib:"}"
  note "libstdc++: the machine's is too old ($(head -c 200 "$logs/libstdcxx_probe.txt")); the bundle's used"
else
  note "libstdc++: the machine's (needs $(manifest needs_glibcxx))"
fi

kiln_env=(LD_LIBRARY_PATH="$lib_path" KILN_CACHE_DIR="$work/cache" TMPDIR="$work/tmp")
# The bundle's OpenBLAS (0.3.21) did not know the H200 machines' CPU model and ran
# its Prescott kernels (blas_info says so): choose by the CPU's features instead.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then
    kiln_env+=(OPENBLAS_CORETYPE=SkylakeX)
  elif grep -qw avx2 /proc/cpuinfo; then
    kiln_env+=(OPENBLAS_CORETYPE=Haswell)
  fi
  for e in "${kiln_env[@]}"; do
    case "$e" in OPENBLAS_CORETYPE=*) echo "run: OpenBLAS kernels chosen by the CPU's features: $e" ;; esac
  done
fi
# The CUDA emulation tests run the host C++ compiler the build used, or another.
host_cxx=$(manifest host_cxx)
if [ ! -x "$host_cxx" ]; then
  for c in c++ g++ clang++; do
    if command -v "$c" >/dev/null; then
      host_cxx=$(command -v "$c")
      kiln_env+=(KILN_HOST_CXX="$host_cxx")
      break
    fi
  done
fi
note "host compiler for the emulation tests: $( [ -x "$host_cxx" ] && echo "$host_cxx" || echo "none (those cases will fail)")"

# What the binaries load, and from where; nothing may be missing.
{
  for f in "$kg"/bin/test_cuda "$kg"/bin/bench_gpu "$kg"/lib/libkiln.so.0; do
    echo "== ldd $(basename "$f")"
    env "${kiln_env[@]}" ldd "$f"
  done
} >"$logs/ldd.txt" 2>&1
missing=$(grep 'not found' "$logs/ldd.txt" | awk '{print $1}' | sort -u | tr '\n' ' ')
nvrtc_at=$(awk '$1 == "libnvrtc.so.13" {print $3; exit}' "$logs/ldd.txt")
note "libkiln loads: libnvrtc.so.13 from ${nvrtc_at:-?}, libLLVM from $(awk '$1 ~ /^libLLVM/ {print $3; exit}' "$logs/ldd.txt")${missing:+; MISSING: $missing}"

# The tests read sources and the fake driver at the paths the build compiled in.
src=$(manifest source_dir)
if [ "$src" -ef "$repo" ]; then
  note "sources: the tests' compiled-in $src is this checkout"
elif [ -e "$src" ]; then
  note "sources: the tests read $src (it exists here; this checkout is $repo)"
elif mkdir -p "$(dirname "$src")" 2>/dev/null && ln -s "$repo" "$src" 2>/dev/null; then
  note "sources: linked the tests' compiled-in $src -> $repo"
else
  note "sources: could not create $src -> $repo: the cases that read sources will fail"
fi
fake=$(manifest fake_cuda)
if [ ! -e "$fake" ]; then
  if mkdir -p "$(dirname "$fake")" 2>/dev/null && cp "$kg/bin/libkiln_fake_cuda.so" "$fake"; then
    note "fake driver: copied to the compiled-in $fake"
  else
    note "fake driver: could not place it at $fake: the fake-driver cases will fail"
  fi
fi
add_row environment ok "$(now)" - "${missing:+MISSING LIBRARIES: $missing}"

# ---- steps ----
# run_step NAME BUDGET LOG CMD...: runs under the step's limit (and the run's), records the result.
last_rc=0
last_secs=0
run_cmd() {  # run_cmd NAME BUDGET CMD...: sets last_rc, last_secs, limit
  local name=$1 b=$2
  shift 2
  local left=$((budget - $(elapsed_int)))
  limit=$((b < left ? b : left))
  if ((limit < 5)); then
    last_rc=-1
    return
  fi
  local t0=$EPOCHREALTIME
  echo "run: $name (limit ${limit} s): $*" | sed "s|$kg|<bundle>|g"
  timeout -k 5 "$limit" env "${kiln_env[@]}" "$@" >>"$logs/$name.log" 2>&1
  last_rc=$?
  last_secs=$(awk -v a="$EPOCHREALTIME" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
}

# Doctest: counts, GPU skips, first failures.
doctest_step() {  # doctest_step NAME BUDGET BINARY [ARGS...]
  local name=$1 b=$2
  shift 2
  # shellcheck disable=SC2086  # KILN_GPU_DOCTEST_ARGS: extra doctest arguments, split on spaces
  run_cmd "$name" "$b" "$@" --duration=true ${KILN_GPU_DOCTEST_ARGS:-}
  local log=$logs/$name.log
  if ((last_rc == -1)); then
    add_row "$name" not-run 0 "$b" "out of time (run budget ${budget} s)"
    return
  fi
  local counts skips result notes
  counts=$(grep -o 'test cases: .*' "$log" | tail -1 | tr -s ' ')
  skips=$(grep -c 'MESSAGE: skipped' "$log")
  if ((last_rc == 124 || last_rc == 137)); then
    result=timeout
    notes="killed at ${limit} s; last case: $(grep -o 'TEST CASE: .*' "$log" | tail -1 | cut -c1-80)"
  elif ((last_rc != 0)); then
    result=fail
    notes="exit $last_rc; $counts; first errors: $(grep -m3 -E 'ERROR|FATAL|error:' "$log" | cut -c1-160 | tr '\n' '|')"
  else
    result=pass
    notes="$counts"
  fi
  if ((skips > 0)); then
    notes+="; $skips cases said 'skipped'"
    if ((gpu_present)) && grep -q 'skipped.*no CUDA device\|skipped: no cuBLAS' "$log"; then
      result=$([ "$result" = pass ] && echo "gpu-skip" || echo "$result")
      notes+=" FOR WANT OF A GPU ON A GPU MACHINE: $(grep -m1 -o 'skipped.*no C[^)]*)' "$log" | cut -c1-200)"
    fi
  fi
  add_row "$name" "$result" "$last_secs" "$b" "$notes"
}

for s in "${steps[@]}"; do
  read -r name group b _ <<<"$s"
  selected "$name" "$group" || continue
  case "$name" in
    test_cuda)
      # On a GPU the host-only cases (NVRTC compiles and emulation, which CI runs on
      # every commit) are left out: the first H200 run spent its 90 s on them.
      if ((gpu_present)); then
        doctest_step test_cuda "$b" "$kg/bin/test_cuda" -sfe='*cuda_ops_test.cpp' \
          -tce='*emulation*,*compile with NVRTC*,*compiles with NVRTC*'
      else
        doctest_step test_cuda "$b" "$kg/bin/test_cuda"
      fi
      ;;
    conformance_gpu) doctest_step conformance_gpu "$b" "$kg/bin/test_conformance" -tc="*on a real GPU" ;;
    test_distributed) doctest_step test_distributed "$b" "$kg/bin/test_distributed" ;;
    test_frontend) doctest_step test_frontend "$b" "$kg/bin/test_frontend" -tc="checkpoint: Module::to*" ;;
    test_codegen) doctest_step test_codegen "$b" "$kg/bin/test_codegen" -tc="the CPU executor refuses a CUDA step*" ;;
    bench_gpu)
      run_cmd bench_gpu "$b" "$kg/bin/bench_gpu" --benchmark_min_time=0.05 \
        --benchmark_out="$logs/bench_gpu.json" --benchmark_out_format=json \
        --sweep_max=4096 --sweep_csv="$logs/kiln_breakeven.csv"
      log=$logs/bench_gpu.log
      if ((last_rc == -1)); then
        add_row bench_gpu not-run 0 "$b" "out of time"
      else
        errs=$(grep -c 'ERROR OCCURRED' "$log")
        rows_n=$(grep -c '/real_time' "$log")
        res=pass
        ((last_rc == 124 || last_rc == 137)) && res=timeout
        ((last_rc != 0 && last_rc != 124 && last_rc != 137)) && res=fail
        ((errs > 0)) && [ "$res" = pass ] && res=fail
        ((gpu_present)) && grep -q 'GPU benchmarks skipped' "$log" && res=gpu-skip
        notes="exit $last_rc; $rows_n rows, $errs with errors$(grep -m1 -o 'GPU benchmarks skipped.*' "$log" | cut -c1-120 | sed 's/^/; /')"
        notes+="$(grep -m1 -o 'GPU faster from N = .*' "$log" | sed 's/^/; /')"
        add_row bench_gpu "$res" "$last_secs" "$b" "$notes"
      fi
      ;;
    first_call)
      # Two processes, one fresh cache directory: the first compiles with NVRTC,
      # the second must find every kernel in the disk cache.
      fc_cache=$work/first-call-cache
      kiln_env+=(KILN_CACHE_DIR="$fc_cache")
      run_cmd first_call "$((b / 2))" "$kg/bin/bench_gpu" --first_call
      rc1=$last_rc s1=$last_secs
      run_cmd first_call "$((b / 2))" "$kg/bin/bench_gpu" --first_call
      rc2=$last_rc s2=$last_secs
      kiln_env+=(KILN_CACHE_DIR="$work/cache")
      log=$logs/first_call.log
      cold=$(grep -m1 '^first_call: [0-9]' "$log" | cut -c13-)
      warm=$(grep '^first_call: [0-9]' "$log" | sed -n 2p | cut -c13-)
      if ((rc1 == -1)); then
        add_row first_call not-run 0 "$b" "out of time"
      elif grep -q '^first_call: skipped' "$log"; then
        add_row first_call skip "$s1" "$b" "$(grep -m1 -o 'skipped: .*' "$log" | cut -c1-120)"
      elif ((rc1 != 0 || rc2 != 0)) || [ -z "$warm" ]; then
        add_row first_call fail "$(awk -v a="$s1" -v b="$s2" 'BEGIN{print a+b}')" "$b" \
          "exit $rc1/$rc2; $(grep -m1 'failed' "$log" | cut -c1-200)"
      else
        # The second process must compile nothing: every kernel from the disk cache.
        k=$(sed -n 's/.*kernels compiled here \([0-9]*\), from the disk cache \([0-9]*\);.*/\1 \2/p' <<<"$warm")
        read -r kc kd <<<"$k"
        res=pass
        [ "${kc:-x}" = 0 ] && [ "${kd:-0}" -gt 0 ] || res=fail
        add_row first_call "$res" "$(awk -v a="$s1" -v b="$s2" 'BEGIN{print a+b}')" "$b" \
          "cold: $cold | warm (second process): $warm"
      fi
      ;;
    torch_reference)
      if [ -z "$torch_py" ]; then
        add_row torch_reference skip 0 "$b" "no python3 with torch"
        continue
      fi
      left=$((budget - $(elapsed_int)))
      lim=$((b < left ? b : left))
      if ((lim < 10)); then
        add_row torch_reference not-run 0 "$b" "out of time"
        continue
      fi
      t0=$EPOCHREALTIME
      echo "run: torch_reference (limit ${lim} s)"
      # Its own environment: the machine's libraries, not the bundle's.
      (cd "$work" && PYTHONUNBUFFERED=1 timeout -k 5 "$lim" "$torch_py" "$repo/tools/gpu/torch_reference.py" \
        --json "$logs/torch_reference.json" --csv "$logs/torch_breakeven.csv" \
        --budget "$((lim * 3 / 4))" >"$logs/torch_reference.log" 2>&1)
      rc=$?
      secs=$(awk -v a="$EPOCHREALTIME" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
      log=$logs/torch_reference.log
      if grep -q '^torch_reference: skipped' "$log"; then
        add_row torch_reference skip "$secs" "$b" "$(grep -m1 -o 'skipped: .*' "$log" | cut -c1-150)"
      elif ((rc == 0)); then
        add_row torch_reference pass "$secs" "$b" "$(tail -1 "$log" | cut -c1-150)"
      else
        res=fail
        ((rc == 124 || rc == 137)) && res=timeout
        add_row torch_reference "$res" "$secs" "$b" "exit $rc; $(grep -m2 'FAILED\|Error' "$log" | cut -c1-150 | tr '\n' '|')"
      fi
      ;;
  esac
done

# ---- key figures, Kiln against its targets and against PyTorch ----
py=${torch_py:-$(command -v python3)}
if [ -n "$py" ]; then
  figures=$("$py" "$repo/tools/gpu/summarize.py" "$logs" 2>&1)
fi
for f in bench_gpu.json kiln_breakeven.csv torch_reference.json torch_breakeven.csv; do
  [ -f "$logs/$f" ] && cp "$logs/$f" "$out/$f"
done
write_summary
cat "$out/summary.txt"
echo "run: results in $out: $(cd "$out" && ls | tr '\n' ' ')"
exit $failed
