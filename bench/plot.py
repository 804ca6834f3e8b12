#!/usr/bin/env python3
"""Draws Kiln's benchmark figures from Google Benchmark JSON (--benchmark_out).

    bench/plot.py DATA_DIR OUT_DIR

reads, from DATA_DIR, whichever of these exist:
  jit.json            bench_jit: BM_Triad, BM_Chain8, BM_SoftmaxRows, BM_LayerNormRows
  compile.json        bench_compile: BM_CompilePerKernel
  gpu_breakeven.csv   bench_gpu's matmul sweep (--sweep_csv)
and writes to OUT_DIR:
  fusion.svg              fused vs unfused vs eager across sizes for the chain,
                          softmax and layer-norm rows, in GB/s, with the machine's
                          triad bandwidth (measured in the same run) as the roofline
  compile_per_kernel.svg  each kernel's compile time by phase (lower, LLVM IR,
                          optimise, machine code, load), the MLP step compiled cold
  matmul_sweep.svg        CPU vs GPU N x N matmul times with the break-even N
                          marked (CPU only, and said so, without GPU figures)

bench/figures.sh runs the benchmarks and this script (README: Measured results).
Needs matplotlib (Debian: python3-matplotlib); a script, not a library dependency.
"""
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Small, reproducible SVGs: text stays text, no date, fixed ids.
plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "kiln", "font.size": 9,
                     "axes.grid": True, "grid.alpha": 0.3})
SAVE = {"metadata": {"Date": None, "Creator": "bench/plot.py"}, "bbox_inches": "tight"}
COLOURS = {"eager": "#7f7f7f", "unfused": "#ff7f0e", "fused": "#2ca02c"}


def load_benchmarks(path):
    """(context, [runs]) of a Google Benchmark JSON file, iteration runs only."""
    with open(path) as f:
        doc = json.load(f)
    runs = [b for b in doc.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"]
    return doc.get("context", {}), runs


def args_of(run):
    """The integer arguments of a run's name: BM_Chain8/1048576/2/real_time -> [1048576, 2]."""
    out = []
    for part in run["name"].split("/")[1:]:
        try:
            out.append(int(part))
        except ValueError:
            pass
    return out


def triad_gbps(context, runs):
    for r in runs:
        if r["name"].startswith("BM_Triad") and "bytes_per_second" in r:
            return r["bytes_per_second"] / 1e9
    return float(context.get("triad_GBps", "nan"))


def plot_fusion(path, out):
    context, runs = load_benchmarks(path)
    roof = triad_gbps(context, runs)
    panels = [("BM_Chain8", "8-op elementwise chain", "elements"),
              ("BM_SoftmaxRows", "softmax over rows (N x N)", "N"),
              ("BM_LayerNormRows", "layer norm (rows x 1024)", "rows")]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, (prefix, title, xlabel) in zip(axes, panels):
        series = {}
        for r in runs:
            if not r["name"].startswith(prefix + "/") or "bytes_per_second" not in r:
                continue
            size = args_of(r)[0]
            series.setdefault(r.get("label", "?"), []).append((size, r["bytes_per_second"] / 1e9))
        for mode in ("eager", "unfused", "fused"):
            if mode in series:
                pts = sorted(series[mode])
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=mode,
                        color=COLOURS[mode])
        if roof == roof:  # not NaN
            ax.axhline(roof, color="#d62728", linestyle="--", linewidth=1)
            ax.text(0.02, roof, f" triad {roof:.1f} GB/s", color="#d62728", va="bottom",
                    transform=ax.get_yaxis_transform())
        ax.set_xscale("log", base=2)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("GB/s (minimal bytes / time)")
        ax.set_ylim(bottom=0)
        ax.legend(loc="best")
    fig.suptitle("Fused vs unfused vs eager (CPU, float32); the roofline is the triad bandwidth")
    fig.savefig(out, **SAVE)
    plt.close(fig)


def plot_compile(path, out):
    _, runs = load_benchmarks(path)
    run = next((r for r in runs if r["name"].startswith("BM_CompilePerKernel")), None)
    if run is None:
        return False
    phases = ["lower_ms", "irgen_ms", "optimize_ms", "machine_code_ms", "load_ms"]
    names = {"lower_ms": "lower to kernel IR", "irgen_ms": "LLVM IR", "optimize_ms": "optimise",
             "machine_code_ms": "machine code", "load_ms": "load"}
    kernels = sorted({k.rsplit("/", 1)[0] for k in run if k.endswith("_ms") and "/" in k},
                     key=lambda k: sum(run.get(f"{k}/{p}", 0) for p in phases))
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(kernels) + 1.2))
    left = [0.0] * len(kernels)
    for p, colour in zip(phases, ["#9edae5", "#aec7e8", "#1f77b4", "#ff7f0e", "#98df8a"]):
        widths = [run.get(f"{k}/{p}", 0) for k in kernels]
        ax.barh(kernels, widths, left=left, label=names[p], color=colour)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlabel("milliseconds to compile")
    ax.set_title(f"Compile cost per kernel: MLP training step, cold ({len(kernels)} kernels)")
    ax.legend(loc="lower right")
    ax.grid(axis="y", alpha=0)
    fig.savefig(out, **SAVE)
    plt.close(fig)
    return True


def plot_sweep(path, out):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.append(r)

    def num(v):
        try:
            return float(v)
        except (TypeError, ValueError):
            return None

    n = [int(r["n"]) for r in rows]
    cpu = [num(r["cpu_ms"]) for r in rows]
    gpu = [num(r.get("gpu_ms")) for r in rows]
    gpu_t = [num(r.get("gpu_with_transfers_ms")) for r in rows]
    has_gpu = any(v is not None for v in gpu)
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.plot(n, cpu, "o-", label="CPU (OpenBLAS via Kiln)", color="#1f77b4")
    title = "N x N matmul, float32: CPU vs GPU"
    if has_gpu:
        ax.plot(n, gpu, "o-", label="GPU (cuBLAS via Kiln)", color="#d62728")
        ax.plot(n, gpu_t, "o--", label="GPU + transfers", color="#d62728", alpha=0.6)
        even = next((x for x, c, g in zip(n, cpu, gpu) if g is not None and g < c), None)
        if even is not None:
            ax.axvline(even, color="#2ca02c", linestyle=":")
            ax.text(even, 0.95, f" GPU faster from N = {even}", color="#2ca02c",
                    transform=ax.get_xaxis_transform(), va="top")
    else:
        title += " (no GPU figures: this machine has no GPU)"
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N")
    ax.set_ylabel("milliseconds (best)")
    ax.set_title(title)
    ax.legend(loc="upper left")
    fig.savefig(out, **SAVE)
    plt.close(fig)


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    data, out = argv[1], argv[2]
    os.makedirs(out, exist_ok=True)
    written = []
    if os.path.exists(os.path.join(data, "jit.json")):
        plot_fusion(os.path.join(data, "jit.json"), os.path.join(out, "fusion.svg"))
        written.append("fusion.svg")
    if os.path.exists(os.path.join(data, "compile.json")):
        if plot_compile(os.path.join(data, "compile.json"), os.path.join(out, "compile_per_kernel.svg")):
            written.append("compile_per_kernel.svg")
    if os.path.exists(os.path.join(data, "gpu_breakeven.csv")):
        plot_sweep(os.path.join(data, "gpu_breakeven.csv"), os.path.join(out, "matmul_sweep.svg"))
        written.append("matmul_sweep.svg")
    if not written:
        print(f"plot.py: no benchmark data in {data} (jit.json, compile.json, gpu_breakeven.csv)",
              file=sys.stderr)
        return 1
    print("written: " + ", ".join(os.path.join(out, w) for w in written))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
