#!/usr/bin/env python3
"""PyTorch on the same GPU, for the workloads that bench_gpu times in Kiln
(bench/gpu_bench.cpp), so that one device run gives both sides:

  matmul_course        10000x1024 @ (5000x1024)^T, f32, data on the device,
                       with the host<->device transfers, and on the CPU
  matmul_square_2000   2000x2000 @ 2000x2000 on the device and with transfers
  sweep                N x N @ N x N for N = 64 .. --sweep-max: best time on
                       the CPU, on the GPU, on the GPU with transfers, and the
                       break-even N of each (written as CSV, as bench_gpu does)
  d2d_copy             device-to-device copy of 256 MiB (bytes read + written)
  chain8, chain8_transcendental
                       bench_gpu's elementwise chains over 16M floats
  softmax_rows         softmax over the rows of 4096x4096
  layer_norm_rows      bench_gpu's layer norm (mean, centre, scale) over the
                       rows of 4096x1024; layer_norm_rows_aten is F.layer_norm
  mlp_forward          batch 256, 784-1024-1024-10 with bias and ReLU, no grad
  two_layer_step       the course's two-layer net (64x1000-100-10), SGD by hand
  mlp_adam_step        the MLP with cross-entropy and Adam (lr 1e-3), eager;
                       mlp_adam_step_fused with Adam(fused=True)

Memory-bound rows report GB/s (input read + output written, as bench_gpu
counts them) and the fraction of the d2d copy's GB/s. Every time is the mean
of a loop synchronised with the device after each call, as bench_gpu's are
(the sweep: best of several, as bench_gpu's sweep). TF32 is off: Kiln's cuBLAS
calls compute in f32. With --compile, torch.compile'd elementwise, softmax and
layer norm rows are added (each compile takes seconds).

Usage: python3 tools/gpu/torch_reference.py [--json F] [--csv F] [--sweep-max N]
         [--min-time S] [--budget S] [--compile] [--device cuda|cpu] [--quick]
--device cpu --quick only checks the script on a machine without a GPU.
Exit status 0 when every workload ran (or torch is missing: says so), 1 when one failed.
"""
import argparse
import json
import math
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", default="torch_reference.json")
    ap.add_argument("--csv", default="torch_breakeven.csv")
    ap.add_argument("--sweep-max", type=int, default=4096)
    ap.add_argument("--min-time", type=float, default=0.1, help="seconds per timed loop")
    ap.add_argument("--budget", type=float, default=150,
                    help="seconds; workloads not started by then are skipped")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="small sizes (script check only)")
    args = ap.parse_args()
    start = time.perf_counter()

    try:
        import torch
    except ImportError:
        print("torch_reference: skipped: PyTorch is not installed for " + sys.executable)
        return 0
    import torch.nn.functional as F

    dev = torch.device(args.device)
    on_gpu = dev.type == "cuda"
    if on_gpu and not torch.cuda.is_available():
        print("torch_reference: skipped: torch.cuda.is_available() is False "
              f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(os.cpu_count() or 1)
    q = args.quick

    def sync():
        if on_gpu:
            torch.cuda.synchronize()

    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0) if on_gpu else "cpu",
        "python": sys.version.split()[0],
        "cpu_threads": torch.get_num_threads(),
        "tf32": False,
    }
    if on_gpu:
        p = torch.cuda.get_device_properties(0)
        info["sm_count"] = p.multi_processor_count
        info["memory_GiB"] = round(p.total_memory / 2**30, 1)
    print("torch_reference: " + ", ".join(f"{k} {v}" for k, v in info.items()), flush=True)

    results, errors, skipped = {}, {}, []

    def timed(fn, min_time=None, warmup=2, max_iters=100000):
        """Mean and best ms per call over a loop of at least min_time seconds (3 calls at least)."""
        min_time = args.min_time if min_time is None else min_time
        for _ in range(warmup):
            fn()
            sync()
        n, total, best = 0, 0.0, math.inf
        while n < 3 or (total < min_time and n < max_iters):
            t0 = time.perf_counter()
            fn()
            sync()
            dt = time.perf_counter() - t0
            n, total, best = n + 1, total + dt, min(best, dt)
        return total / n * 1e3, best * 1e3, n

    def best_ms(fn):
        """bench_gpu's sweep: one warm-up, then the best of 3 to 20 runs (until 300 ms)."""
        fn()
        sync()
        best, total = math.inf, 0.0
        for r in range(20):
            if r >= 3 and total >= 0.3:
                break
            t0 = time.perf_counter()
            fn()
            sync()
            dt = time.perf_counter() - t0
            best, total = min(best, dt), total + dt
        return best * 1e3

    def record(name, ms, best=None, iters=None, **extra):
        row = {"ms": round(ms, 4)}
        if best is not None:
            row["best_ms"] = round(best, 4)
        if iters is not None:
            row["iters"] = iters
        row.update({k: (round(v, 4) if isinstance(v, float) else v) for k, v in extra.items()})
        results[name] = row
        more = "  ".join(f"{k} {row[k]}" for k in extra)
        print(f"torch  {name:34s} {ms:11.4f} ms  {more}", flush=True)

    def run(name, fn):
        if time.perf_counter() - start > args.budget:
            skipped.append(name)
            print(f"torch  {name:34s} skipped: past the {args.budget:.0f} s budget", flush=True)
            return
        try:
            fn()
        except Exception as e:  # one failing workload leaves the others
            errors[name] = f"{type(e).__name__}: {e}"
            print(f"torch  {name:34s} FAILED: {errors[name]}", flush=True)

    gen = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    # ---- matmuls ----
    def matmul_course():
        n, k, m = (1000, 128, 500) if q else (10000, 1024, 5000)
        flop = 2.0 * n * k * m
        a, b = randn(n, k), randn(m, k)
        ga, gb = a.to(dev), b.to(dev)
        ms, best, it = timed(lambda: ga @ gb.t())
        record("matmul_course_gpu", ms, best, it, TFLOPs=flop / ms / 1e9)
        ms, best, it = timed(lambda: (a.to(dev) @ b.to(dev).t()).cpu())
        record("matmul_course_gpu_transfers", ms, best, it, TFLOPs=flop / ms / 1e9)
        ms, best, it = timed(lambda: a @ b.t(), min_time=min(args.min_time, 0.5), warmup=1)
        record("matmul_course_cpu", ms, best, it, TFLOPs=flop / ms / 1e9)

    def matmul_square():
        n = 200 if q else 2000
        a, b = randn(n, n), randn(n, n)
        ga, gb = a.to(dev), b.to(dev)
        flop = 2.0 * n**3
        ms, best, it = timed(lambda: ga @ gb)
        record("matmul_square_2000_gpu", ms, best, it, TFLOPs=flop / ms / 1e9)
        ms, best, it = timed(lambda: (a.to(dev) @ b.to(dev)).cpu())
        record("matmul_square_2000_gpu_transfers", ms, best, it, TFLOPs=flop / ms / 1e9)

    def sweep():
        rows, be, be_t = [], None, None
        n = 64
        while n <= args.sweep_max:
            a, b = randn(n, n), randn(n, n)
            cpu = best_ms(lambda: a @ b)
            ga, gb = a.to(dev), b.to(dev)
            g = best_ms(lambda: ga @ gb)
            gt = best_ms(lambda: (a.to(dev) @ b.to(dev)).cpu())
            rows.append((n, cpu, g, gt))
            if g < cpu and be is None:
                be = n
            if gt < cpu and be_t is None:
                be_t = n
            print(f"torch  sweep N={n:<5d} cpu {cpu:10.3f} ms  gpu {g:9.3f} ms  "
                  f"gpu+transfers {gt:9.3f} ms", flush=True)
            n *= 2
        with open(args.csv + ".tmp", "w") as f:
            f.write("n,cpu_ms,gpu_ms,gpu_with_transfers_ms\n")
            for r in rows:
                f.write(f"{r[0]},{r[1]:.3f},{r[2]:.3f},{r[3]:.3f}\n")
        os.replace(args.csv + ".tmp", args.csv)
        results["sweep"] = {"rows": [list(r) for r in rows], "breakeven_n": be,
                            "breakeven_n_with_transfers": be_t}
        print(f"torch  sweep: GPU faster from N = {be} with the data on the device, "
              f"from N = {be_t} counting the transfers", flush=True)

    # ---- memory-bound rows against the device's copy bandwidth ----
    d2d = {"GBps": None}

    def d2d_copy():
        nbytes = (16 if q else 256) << 20
        src = torch.zeros(nbytes, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        best = math.inf
        for _ in range(10):
            if on_gpu:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                dst.copy_(src)
                e1.record()
                e1.synchronize()
                best = min(best, e0.elapsed_time(e1))
            else:
                t0 = time.perf_counter()
                dst.copy_(src)
                best = min(best, (time.perf_counter() - t0) * 1e3)
        d2d["GBps"] = 2.0 * nbytes / best / 1e6
        record("d2d_copy", best, GBps=d2d["GBps"], bytes=2 * nbytes)

    def bandwidth_row(name, fn, x):
        nbytes = 2.0 * 4 * x.numel()  # read once, written once (bench_gpu's count)
        ms, best, it = timed(lambda: fn(x))
        gbps = nbytes / ms / 1e6
        frac = gbps / d2d["GBps"] if d2d["GBps"] else None
        record(name, ms, best, it, GBps=gbps, of_d2d=frac)

    def chain(x):
        return ((x * 1.5 + 2) - x * x).abs().clamp(0.5, 4) * 0.25

    def chain_transcendental(x):
        return ((x * 1.5 + 2).tanh().exp() - x.sigmoid()).relu() / (x * x + 1)

    def layer_norm(x):
        mu = x.mean(1, keepdim=True)
        d = x - mu
        return d / ((d * d).mean(1, keepdim=True) + 1e-5).sqrt()

    def softmax_rows(x):
        return x.softmax(1)

    def layer_norm_aten(x):
        return F.layer_norm(x, (x.shape[1],), eps=1e-5)

    def elementwise():
        x = randn(1 << (16 if q else 24)).to(dev)
        bandwidth_row("chain8", chain, x)
        bandwidth_row("chain8_transcendental", chain_transcendental, x)

    def rows():
        s = randn(*((256, 256) if q else (4096, 4096))).to(dev)
        bandwidth_row("softmax_rows", softmax_rows, s)
        ln = randn(*((256, 128) if q else (4096, 1024))).to(dev)
        bandwidth_row("layer_norm_rows", layer_norm, ln)
        bandwidth_row("layer_norm_rows_aten", layer_norm_aten, ln)

    def compiled():
        x = randn(1 << (16 if q else 24)).to(dev)
        s = randn(*((256, 256) if q else (4096, 4096))).to(dev)
        ln = randn(*((256, 128) if q else (4096, 1024))).to(dev)
        for name, fn, arg in (("chain8", chain, x), ("chain8_transcendental", chain_transcendental, x),
                              ("softmax_rows", softmax_rows, s), ("layer_norm_rows", layer_norm, ln)):
            t0 = time.perf_counter()
            c = torch.compile(fn)
            c(arg)
            sync()
            first = (time.perf_counter() - t0) * 1e3
            bandwidth_row(name + "_compiled", c, arg)
            results[name + "_compiled"]["first_call_ms"] = round(first, 1)

    # ---- networks ----
    def mlp():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(),
                                   torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                   torch.nn.Linear(1024, 10)).to(dev)

    mlp_flop = 2.0 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10)

    def mlp_forward():
        model = mlp()
        x = randn(256, 784).to(dev)
        with torch.no_grad():
            ms, best, it = timed(lambda: model(x))
        record("mlp_forward", ms, best, it, TFLOPs=mlp_flop / ms / 1e9)

    def two_layer_step():
        x, y = randn(64, 1000).to(dev), randn(64, 10).to(dev)
        w1 = randn(1000, 100).to(dev).requires_grad_()
        w2 = randn(100, 10).to(dev).requires_grad_()
        lr = 1e-6

        def step():
            loss = (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum()
            loss.backward()
            with torch.no_grad():
                w1.sub_(lr * w1.grad)
                w2.sub_(lr * w2.grad)
                w1.grad.zero_()
                w2.grad.zero_()
            return loss

        ms, best, it = timed(step)
        record("two_layer_step", ms, best, it)

    def adam_step(name, **adam_kwargs):
        model = mlp()
        x = randn(256, 784).to(dev)
        labels = (torch.rand(256, generator=gen) * 10).long().to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, **adam_kwargs)

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), labels)
            loss.backward()
            opt.step()
            return loss

        ms, best, it = timed(step)
        record(name, ms, best, it, TFLOPs=3 * mlp_flop / ms / 1e9)

    run("matmul_course", matmul_course)
    run("matmul_square_2000", matmul_square)
    run("d2d_copy", d2d_copy)
    run("elementwise", elementwise)
    run("rows", rows)
    run("mlp_forward", mlp_forward)
    run("two_layer_step", two_layer_step)
    run("mlp_adam_step", lambda: adam_step("mlp_adam_step"))
    run("mlp_adam_step_fused", lambda: adam_step("mlp_adam_step_fused", fused=True))
    run("sweep", sweep)
    if args.compile:
        run("compiled", compiled)

    out = {"info": info, "results": results, "errors": errors, "skipped": skipped,
           "seconds": round(time.perf_counter() - start, 1)}
    with open(args.json + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(args.json + ".tmp", args.json)
    print(f"torch_reference: {len(results)} rows, {len(errors)} failed, {len(skipped)} skipped, "
          f"{out['seconds']} s; written: {args.json}", flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
