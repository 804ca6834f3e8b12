#!/usr/bin/env bash
# Regenerates the README's pictures and measured figures on this machine:
#   bench/figures.sh [BUILD_DIR]        (default: build; KILN_BENCH_MIN_TIME=0.05)
# builds what it runs, then writes
#   docs/data/jit.json, compile.json    Google Benchmark JSON (--benchmark_out)
#   docs/data/gpu_breakeven.csv         bench_gpu's CPU vs GPU matmul sweep
#   docs/data/speedup.txt, speedup.json `kiln bench speedup`'s table and figures
#   docs/figures/fusion.svg, compile_per_kernel.svg, matmul_sweep.svg   (bench/plot.py)
#   docs/figures/speedup.svg            `kiln bench speedup`'s own plot
#   docs/figures/two_layer_step_kernels.svg   the course's two-layer net's compiled
#                                       training step, one box per kernel (a dump's fused.svg)
#   docs/data/two_layer_step.trace.json one step of it profiled (Traced::profile): open it
#                                       at https://ui.perfetto.dev or chrome://tracing
# Short runs (the machine may be shared); raise KILN_BENCH_MIN_TIME for steadier figures.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
min=${KILN_BENCH_MIN_TIME:-0.05}
data=$root/docs/data
out=$root/docs/figures
mkdir -p "$data" "$out"
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
cmake --build "$build" --target bench_jit bench_compile bench_gpu kiln_cli eager_vs_traced

echo "== fused vs unfused vs eager (bench_jit) =="
"$build/bench/bench_jit" --benchmark_filter='BM_(Triad|Chain8|SoftmaxRows|LayerNormRows)/' \
  --benchmark_min_time="$min" --benchmark_out="$data/jit.json" --benchmark_out_format=json
echo "== compile cost per kernel (bench_compile) =="
"$build/bench/bench_compile" --benchmark_filter='BM_CompilePerKernel' --benchmark_min_time="$min" \
  --benchmark_counters_tabular=false \
  --benchmark_out="$data/compile.json" --benchmark_out_format=json >/dev/null
echo "== CPU vs GPU matmul sweep (bench_gpu) =="
"$build/bench/bench_gpu" --benchmark_filter='^$' --sweep_max=4096 --sweep_csv="$data/gpu_breakeven.csv" 2>/dev/null
# Debian's python3-matplotlib belongs to /usr/bin/python3 (a python3 first on the PATH may lack it).
py=python3
"$py" -c 'import matplotlib' 2>/dev/null || py=/usr/bin/python3
"$py" "$root/bench/plot.py" "$data" "$out"

echo "== kiln bench speedup =="
"$build/tools/kiln" bench speedup --out "$data" --no-progress | grep -v '^written: ' | tee "$data/speedup.txt"
mv -f "$data/speedup.svg" "$out/speedup.svg"

echo "== a graph picture: the two-layer net's training step, compiled =="
tmp=$(mktemp -d)
"$build/examples/eager_vs_traced" "$tmp" >/dev/null
cp "$tmp"/two_layer_step/*/fused.svg "$out/two_layer_step_kernels.svg"
cp "$tmp"/two_layer_step.trace.json "$data/two_layer_step.trace.json"
rm -rf "$tmp"
echo "written: $out"
