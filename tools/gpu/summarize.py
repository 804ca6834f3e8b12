#!/usr/bin/env python3
"""The key figures of a GPU run (tools/gpu/run.sh), as ratios against the
targets of the GPU issue and against PyTorch on the same GPU.

Usage: python3 tools/gpu/summarize.py LOG_DIR
LOG_DIR holds what run.sh's steps wrote: bench_gpu.json (Google Benchmark's
JSON), kiln_breakeven.csv, first_call.log, torch_reference.json and
torch_breakeven.csv; whatever is missing is reported as n/a.
Prints text; exit status 0 (it judges nothing by its exit status).
"""
import csv
import json
import os
import re
import sys

UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def kiln_rows(logs):
    data = load_json(os.path.join(logs, "bench_gpu.json"))
    rows, context = {}, {}
    if not data:
        return rows, context
    context = data.get("context", {})
    for b in data.get("benchmarks", []):
        name = b.get("run_name") or b.get("name", "")
        name = re.sub(r"/real_time$", "", name)
        if b.get("error_occurred"):
            rows[name] = {"error": b.get("error_message", "error")}
            continue
        row = dict(b)
        row["ms"] = b["real_time"] * UNIT_MS.get(b.get("time_unit", "ns"), 1e-6)
        rows[name] = row
    return rows, context


def breakeven(path):
    """(N with the data on the device, N counting transfers) from a sweep CSV."""
    try:
        with open(path) as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return None
    dev = trans = None
    measured = False
    for r in rows:
        try:
            n, cpu = int(r["n"]), float(r["cpu_ms"])
            g, gt = float(r["gpu_ms"]), float(r["gpu_with_transfers_ms"])
        except (ValueError, KeyError):
            continue
        measured = True
        if dev is None and g < cpu:
            dev = n
        if trans is None and gt < cpu:
            trans = n
    return (dev, trans) if measured else None


def main():
    logs = sys.argv[1] if len(sys.argv) > 1 else "."
    k, ctx = kiln_rows(logs)
    tref = load_json(os.path.join(logs, "torch_reference.json")) or {}
    t = tref.get("results", {})
    lines = ["key figures (Kiln from bench_gpu, PyTorch from torch_reference; "
             "target in brackets; ok / MISS / n/a)"]

    def ms(name):
        r = k.get(name)
        return r["ms"] if r and "ms" in r else None

    def tms(name):
        r = t.get(name)
        return r["ms"] if r else None

    def ratio(a, b):
        return a / b if a is not None and b else None

    def line(what, value, fmt="{:.2f}", target=None, ok=None, extra=""):
        if value is None:
            lines.append(f"  {what}: n/a{extra}")
            return
        v = fmt.format(value)
        verdict = ""
        if ok is not None:
            verdict = "  ok" if ok(value) else "  MISS"
        tgt = f" [{target}]" if target else ""
        lines.append(f"  {what}: {v}{tgt}{verdict}{extra}")

    def err(name):
        r = k.get(name)
        return f" (error: {r['error'][:120]})" if r and "error" in r else ""

    if ctx:
        lines.append(f"  device: {ctx.get('cuda_device', '?')}; cuBLAS: {ctx.get('cublas', '?')}")
    # the course's matmul, GPU against this machine's CPU
    c = "BM_Matmul10000x1024_by_5000x1024T"
    line("course matmul 10000x1024 @ (5000x1024)^T, GPU vs CPU (x)", ratio(ms(c + "/0"), ms(c + "/1")),
         "{:.1f}x", ">= 100x", lambda v: v >= 100, err(c + "/1"))
    line("  the same with the transfers (x)", ratio(ms(c + "/0"), ms(c + "/2")), "{:.1f}x",
         extra=err(c + "/2"))
    for label, name in (("cpu", "/0"), ("gpu", "/1"), ("gpu + transfers", "/2")):
        line(f"  Kiln {label} ms", ms(c + name), "{:.3f} ms")
    s = "BM_MatmulSquare2000"
    line("square 2000 matmul, GPU vs CPU (x)", ratio(ms(s + "/0"), ms(s + "/1")), "{:.1f}x",
         extra=err(s + "/1"))
    kb = breakeven(os.path.join(logs, "kiln_breakeven.csv"))
    tb = breakeven(os.path.join(logs, "torch_breakeven.csv"))
    def n_or_never(n):
        return str(n) if n else "never (up to the sweep's largest N)"

    if kb:
        lines.append(f"  Kiln break-even N (GPU faster than the CPU from): {n_or_never(kb[0])} with the "
                     f"data on the device, {n_or_never(kb[1])} counting the transfers")
    else:
        lines.append("  Kiln break-even N: n/a")
    if tb:
        lines.append(f"  PyTorch break-even N: {n_or_never(tb[0])} on the device, {n_or_never(tb[1])} "
                     "with the transfers (its CPU column is PyTorch's own CPU matmul)")
    # Kiln's matmul path against cuBLAS alone and against PyTorch
    for n in (256, 2000):
        m = f"BM_MatmulKilnVsCublas/{n}"
        line(f"Kiln eager matmul {n}^3 / cuBLAS alone (time ratio)", ratio(ms(m + "/0"), ms(m + "/1")),
             "{:.3f}", "<= 1.05", lambda v: v <= 1.05, err(m + "/0"))
    line("Kiln / PyTorch, course matmul on the GPU (time ratio)",
         ratio(ms(c + "/1"), tms("matmul_course_gpu")), "{:.3f}", "<= 1.05", lambda v: v <= 1.05)
    line("Kiln / PyTorch, square 2000 on the GPU (time ratio)",
         ratio(ms(s + "/1"), tms("matmul_square_2000_gpu")), "{:.3f}", "<= 1.05", lambda v: v <= 1.05)
    # memory-bound rows against the device's copy
    d2d = ctx.get("d2d_GBps")
    td2d = t.get("d2d_copy", {}).get("GBps")
    lines.append(f"  device copy GB/s (read + write): Kiln {d2d or 'n/a'}, PyTorch {td2d or 'n/a'}")
    for bench, tname in (("BM_GpuChain8", "chain8"), ("BM_GpuChain8Transcendental", "chain8_transcendental"),
                         ("BM_GpuSoftmaxRows", "softmax_rows"), ("BM_GpuLayerNormRows", "layer_norm_rows")):
        fused = k.get(bench + "/2", {})
        frac = fused.get("of_d2d")
        tr = t.get(tname, {})
        extra = err(bench + "/2")
        if tr:
            extra += (f"; PyTorch eager {tr.get('of_d2d', 0):.2f} of its copy, Kiln fused is "
                      f"{tr['ms'] / fused['ms']:.2f}x PyTorch eager" if "ms" in fused else "")
        trc = t.get(tname + "_compiled")
        if trc and "ms" in fused:
            extra += f", {trc['ms'] / fused['ms']:.2f}x torch.compile"
        line(f"{bench} fused, of the device copy", frac, "{:.2f}", ">= 0.80", lambda v: v >= 0.8, extra)
        line(f"  {bench} fused vs eager (x)", ratio(ms(bench + "/0"), ms(bench + "/2")), "{:.1f}x")
    line("MLP forward 256x784-1024-1024-10, Kiln fused vs PyTorch (x)",
         ratio(tms("mlp_forward"), ms("BM_GpuMlpForward/2")), "{:.2f}x", extra=err("BM_GpuMlpForward/2"))
    # training steps
    a = "BM_GpuMlpAdamStep"
    line("MLP Adam step: PyTorch eager / Kiln traced (x)", ratio(tms("mlp_adam_step"), ms(a + "/1")),
         "{:.2f}x", ">= 1.5x", lambda v: v >= 1.5, err(a + "/1"))
    line("  against PyTorch's fused Adam (x)", ratio(tms("mlp_adam_step_fused"), ms(a + "/1")), "{:.2f}x")
    line("  MLP Adam step, Kiln traced vs eager on the GPU (x)", ratio(ms(a + "/0"), ms(a + "/1")),
         "{:.2f}x", extra=err(a + "/0"))
    w = "BM_GpuTwoLayerStep"
    line("two-layer net step, Kiln traced vs eager on the GPU (x)", ratio(ms(w + "/0"), ms(w + "/1")),
         "{:.2f}x", ">= 5x", lambda v: v >= 5, err(w + "/1"))
    line("  two-layer net step: PyTorch eager / Kiln traced (x)", ratio(tms("two_layer_step"), ms(w + "/1")),
         "{:.2f}x")
    # first call: cold (NVRTC) and warm (the disk cache, a second process)
    try:
        with open(os.path.join(logs, "first_call.log")) as f:
            fc = [l.strip() for l in f if l.startswith("first_call:")]
    except OSError:
        fc = []
    if len(fc) >= 2:
        lines.append(f"  first call, cold: {fc[0][12:]}")
        lines.append(f"  first call, warm: {fc[1][12:]}")
    elif fc:
        lines.append(f"  first call: {fc[0][12:]}")
    else:
        lines.append("  first call: n/a")
    if tref.get("errors"):
        lines.append("  PyTorch reference errors: " + "; ".join(f"{n}: {e[:100]}" for n, e in tref["errors"].items()))
    if tref.get("info"):
        i = tref["info"]
        lines.append(f"  PyTorch {i.get('torch')} (CUDA {i.get('cuda')}) on {i.get('device')}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
