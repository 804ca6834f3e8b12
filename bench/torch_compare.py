#!/usr/bin/env python3
"""Runs the training-step workloads of bench/train_bench.cpp in PyTorch (eager
and TorchScript): the course's two-layer net, the MLP with Adam, and the digits
CNN and transformer block of bench/models.h; and the eager unary ops of
bench_jit's BM_Unary (the op table's math ops over 16M floats); and the
real-model sizes of bench_scale (GPT-2's embedding forward+backward, a gather
from 4096 x 32000, cumsum and sort of 1M, top-5 over 64 x 50257, causal
attention at T = 1024 and 4096). Prints Kiln/PyTorch ratios from one run of
each, then the peak resident memory of bench_scale's workloads against
PyTorch's, each workload (and each Kiln mode) in a process of its own.

Usage: python3 bench/torch_compare.py [path/to/bench_train [path/to/bench_jit [path/to/bench_scale]]]
(bench_jit and bench_scale default to the ones next to bench_train);
python3 bench/torch_compare.py --peak [path/to/bench_scale]: the peak-memory table only.
python3 bench/torch_compare.py --steps [path/to/bench_train [rounds]]: the training steps only,
PyTorch and Kiln alternated for `rounds` rounds (default 3), each round's ratios printed.
python3 bench/torch_compare.py --check-ops path/to/bench_jit [path/to/ops.def]: checks (without
PyTorch) that the unary ops read from the op table are the ones bench_jit registers (a ctest).
Skipped with a message (exit 0) when torch is not installed. It installs
nothing: on Debian, `apt-get install python3-torch` (1.13) and run it with
/usr/bin/python3; elsewhere `pip install torch`.
"""
import json
import math
import os
import re
import subprocess
import sys
import time


OPS_DEF = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "ir", "ops.def")

# PyTorch's spelling of a unary math op of the op table, where it is not torch.<op>.
TORCH_SPELLING = {"gelu": "nn.functional.gelu"}


def table_rows(ops_def=OPS_DEF):
    """The rows of the op table (ir/ops.def), in table order: each its list of
    fields (name, arity, category, shape, dtype, vjp, cost, scalar, domain)."""
    with open(ops_def) as f:
        text = re.sub(r"//[^\n]*", "", f.read())
    rows, pos = [], 0
    while (start := text.find("KILN_OP(", pos)) >= 0:
        fields, field, depth, i = [], "", 0, start + len("KILN_OP(")
        while depth > 0 or text[i] != ")":
            c = text[i]
            depth += {"(": 1, ")": -1}.get(c, 0)
            if c == "," and depth == 0:
                fields.append(field.strip())
                field = ""
            else:
                field += c
            i += 1
        rows.append(fields + [field.strip()])
        pos = i + 1
    return rows


def unary_math_ops(ops_def=OPS_DEF):
    """The op table's unary math ops (scalar column math(k), arity 1): the ops of
    bench_jit's BM_Unary, which registers them from the same table."""
    return [r[0] for r in table_rows(ops_def) if r[1] == "1" and r[7].startswith("math(")]


def torch_op(torch, name):
    """PyTorch's function for the op table's op `name` (TORCH_SPELLING, else torch.<name>)."""
    fn = torch
    for part in TORCH_SPELLING.get(name, name).split("."):
        fn = getattr(fn, part)
    return fn


def check_ops(bench_jit, ops_def=OPS_DEF):
    """Fails (1), naming the op, where the unary ops read from the op table differ
    from bench_jit's BM_Unary ops, or TORCH_SPELLING names an op that is not one."""
    out = subprocess.run([bench_jit, "--benchmark_list_tests", "--benchmark_filter=^BM_Unary/"],
                         check=True, capture_output=True, text=True).stdout
    registered = {line.split("/")[1] for line in out.split()}
    ours = set(unary_math_ops(ops_def))
    problems = [f"{op}: bench_jit runs BM_Unary/{op} but torch_compare.py does not read it from {ops_def}"
                for op in sorted(registered - ours)]
    problems += [f"{op}: torch_compare.py reads it from {ops_def} but bench_jit has no BM_Unary/{op}"
                 for op in sorted(ours - registered)]
    problems += [f"{op}: TORCH_SPELLING names it but it is not a unary math op of the table"
                 for op in sorted(set(TORCH_SPELLING) - ours)]
    for p in problems:
        print("torch_compare --check-ops: " + p)
    print(f"torch_compare --check-ops: {len(ours)} unary math ops, {len(problems)} problem(s)")
    return 1 if problems else 0


def transformer_class(torch):
    """bench/models.h's transformer block, written so that TorchScript compiles it."""
    # --steps [bench_train [rounds]]: the training steps alone, alternated.
    steps = sys.argv[2:] or ["build/bench/bench_train"] if sys.argv[1:2] == ["--steps"] else None
    nn, F = torch.nn, torch.nn.functional

    class TinyTransformer(nn.Module):
        def __init__(self, vocab: int = 80, block: int = 32, dim: int = 64, heads: int = 4):
            super().__init__()
            self.heads = heads
            self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
            self.ln1, self.ln2, self.ln_f = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
            self.proj = nn.Linear(dim, dim)
            self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
            self.head = nn.Linear(dim, vocab)

        def forward(self, idx):
            b, t = idx.size(0), idx.size(1)
            x = self.tok(idx) + self.pos(torch.arange(t))
            d = x.size(2)
            hd = d // self.heads
            h = self.ln1(x)
            q = self.q(h).reshape(b, t, self.heads, hd).transpose(1, 2)
            k = self.k(h).reshape(b, t, self.heads, hd).transpose(1, 2)
            v = self.v(h).reshape(b, t, self.heads, hd).transpose(1, 2)
            future = torch.ones(t, t).tril() == 0
            scores = (q.matmul(k.transpose(-2, -1)) / math.sqrt(hd)).masked_fill(future, float("-inf"))
            x = x + self.proj(scores.softmax(-1).matmul(v).transpose(1, 2).reshape(b, t, d))
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return self.head(self.ln_f(x))

    return TinyTransformer


def scale_workloads(torch):
    """bench_scale's workloads: name -> a function that makes the inputs and
    returns the call."""
    F = torch.nn.functional

    def embedding():
        # GPT-2's token embedding, forward and backward into .grad.
        table = (torch.randn(50257, 768) * 0.02).requires_grad_()
        tokens, weight = torch.randint(0, 50257, (8192,)), torch.randn(8192, 768)

        def step():
            loss = (F.embedding(tokens, table) * weight).sum()
            loss.backward()
            with torch.no_grad():
                table.grad.zero_()
            return loss
        return step

    def gather():
        x, i = torch.randn(4096, 32000), torch.randint(0, 32000, (4096, 8))
        return lambda: x.gather(1, i)

    def cumsum():
        x = torch.randn(1 << 20)
        return lambda: x.cumsum(0)

    def sort():
        x = torch.randn(1 << 20)
        return lambda: x.sort()[0]

    def topk():
        x = torch.randn(64, 50257)
        return lambda: x.topk(5, 1)[0]

    # Causal attention, 8 heads of 64, forward and backward. PyTorch 1.13 has no
    # fused attention: the composite holds the T x T scores.
    def attention(T):
        def make():
            q, k, v = (torch.randn(1, 8, T, 64, requires_grad=True) for _ in range(3))
            hidden = torch.ones(T, T, dtype=torch.bool).triu(1)

            def step():
                s = (q @ k.transpose(-2, -1)) / 8.0
                out = s.masked_fill(hidden, float("-inf")).softmax(-1) @ v
                return torch.autograd.grad(out.sum(), (q, k, v))
            return step
        return make

    return {"BM_EmbeddingStep": embedding, "BM_Gather": gather, "BM_Cumsum": cumsum, "BM_Sort": sort,
            "BM_Topk": topk, "BM_Attention T=1024": attention(1024), "BM_Attention T=4096": attention(4096)}


# bench_scale's rows for the peak-memory table: (workload, its Google Benchmark
# name without the mode, the extra argument).
PEAK_ROWS = (("BM_EmbeddingStep", "BM_EmbeddingStep", ""), ("BM_Gather", "BM_Gather", ""),
             ("BM_Cumsum", "BM_Cumsum", ""), ("BM_Sort", "BM_Sort", ""), ("BM_Topk", "BM_Topk", ""),
             ("BM_Attention T=1024", "BM_Attention", "/1024"),
             ("BM_Attention T=4096", "BM_Attention", "/4096"))


def status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def reset_peak():
    """VmHWM back to VmRSS (and getrusage's ru_maxrss with it), as bench/memory.h."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_child(name):
    """One workload in this process (torch imported): the same marks as
    bench_scale's RowMemory, printed as one JSON line of MiB."""
    import ctypes
    import gc
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 1)
    libc = ctypes.CDLL("libc.so.6")
    gc.collect()
    libc.malloc_trim(0)
    base = status_kib("VmRSS")
    reset = reset_peak()
    step = scale_workloads(torch)[name]()
    inputs_peak = status_kib("VmHWM")
    gc.collect()
    libc.malloc_trim(0)
    inputs = status_kib("VmRSS")
    reset = reset_peak() and reset
    for _ in range(2 + (2 if "T=4096" in name else 5)):  # warm-up, then timed calls as bench_scale's
        step()
    calls = status_kib("VmHWM")
    print(json.dumps({"base_MiB": base / 1024, "peak_MiB": (max(inputs_peak, calls) - base) / 1024,
                      "inputs_MiB": (inputs_peak - base) / 1024, "calls_MiB": (calls - inputs) / 1024,
                      "peak_reset": int(reset)}))
    return 0


def peak_table(bench_scale):
    """Kiln's and PyTorch's resident peaks for bench_scale's workloads, each in a
    process of its own; returns the lines to print."""
    lines = ["peak memory (VmHWM), MiB above the process's RSS before the inputs are made (base), one",
             "process per row: peak (making the inputs, warm-up and calls), inputs (the peak while making",
             "them), calls (the peak of the calls above the RSS once the inputs exist and free memory went",
             "back), cached (Kiln's allocator's free blocks at the end); ratios Kiln / PyTorch",
             f"{'workload':26} {'torch base':>10} {'peak':>7} {'inputs':>7} {'calls':>7}"
             f" {'| Kiln base':>11} {'peak':>7} {'inputs':>7} {'calls':>7} {'cached':>7}"
             f" {'peak ratio':>10} {'calls ratio':>11}"]
    for workload, gb_name, extra in PEAK_ROWS:
        t = json.loads(subprocess.run([sys.executable, os.path.abspath(__file__), "--peak-child", workload],
                                      check=True, capture_output=True, text=True).stdout)
        for mode, label in ((0, "eager"), (1, "traced")):
            out = subprocess.run([bench_scale, f"--benchmark_filter=^{gb_name}/{mode}{extra}/",
                                  "--benchmark_format=json", "--benchmark_min_time=0.1"],
                                 check=True, capture_output=True, text=True).stdout
            k = json.loads(out)["benchmarks"][0]
            def ratio(key):
                return k[key] / t[key] if t[key] > 0 else float("nan")
            flag = "" if k["peak_reset"] and t["peak_reset"] else "  (peak not reset)"
            lines.append(f"{workload + ' ' + label:26} {t['base_MiB']:10.0f} {t['peak_MiB']:7.1f}"
                         f" {t['inputs_MiB']:7.1f} {t['calls_MiB']:7.1f} {'|':>4} {k['base_MiB']:6.0f}"
                         f" {k['peak_MiB']:7.1f} {k['inputs_MiB']:7.1f} {k['calls_MiB']:7.1f}"
                         f" {k['cached_MiB']:7.1f} {ratio('peak_MiB'):10.2f} {ratio('calls_MiB'):11.2f}{flag}")
    return lines


def kiln_rows(path, extra, kiln_ms):
    """Runs one of Kiln's benchmarks and keeps each row's best time in ms, by (name, label)."""
    out = subprocess.run([path, "--benchmark_format=json", "--benchmark_min_time=0.5"] + extra,
                         check=True, capture_output=True, text=True).stdout
    out = out if out.startswith("{") else out[out.find("\n{") + 1:]  # lines before the JSON
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue  # repeated rows: the best repetition, as best_ms takes PyTorch's
        parts, label = b["name"].split("/"), b.get("label", "")
        name = "/".join(parts[:2]) if parts[0] == "BM_Unary" else parts[0]
        unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0}[b["time_unit"]]
        kiln_ms[(name, label)] = min(kiln_ms.get((name, label), float("inf")), b["real_time"] * unit)
        if "of_gemms" in b and "alternated" in label:  # a ratio: every repetition's, for a median
            kiln_ms.setdefault((name, "of_gemms alternated"), []).append(b["of_gemms"])


def steps_rounds(torch_ms_of, bench, rounds):
    """--steps: the training steps only, PyTorch and Kiln alternated `rounds` times,
    each round's ratios printed (the figures a loaded machine can still give)."""
    print(f"{'round':>5} {'workload':34} {'PyTorch ms':>11} {'Kiln eager':>11} {'Kiln traced':>12}"
          f" {'traced/torch':>13} {'eager/torch':>12}")
    for r in range(rounds):
        torch_ms = torch_ms_of()
        kiln_ms = {}
        kiln_rows(bench, [], kiln_ms)
        for name, t in torch_ms.items():
            base = name.split(" ")[0]
            e, tr = kiln_ms.get((base, "eager")), kiln_ms.get((base, "traced"))
            print(f"{r + 1:5} {name:34} {t:11.3f} {e or float('nan'):11.3f} {tr or float('nan'):12.3f}"
                  f" {(f'{tr / t:.2f}' if tr else '-'):>13} {(f'{e / t:.2f}' if e else '-'):>12}",
                  flush=True)
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--peak-child":
        return peak_child(sys.argv[2])
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--check-ops":
        return check_ops(*sys.argv[2:])
    try:
        import torch
    except ImportError:
        print("torch_compare: skipped: PyTorch is not installed for " + sys.executable +
              " (Debian: apt-get install python3-torch, then run with /usr/bin/python3;"
              " elsewhere: pip install torch)")
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--peak":
        del torch  # each row imports it in a process of its own
        bench_scale = sys.argv[2] if len(sys.argv) > 2 else "build/bench/bench_scale"
        print("\n".join(peak_table(bench_scale)))
        return 0
    # --steps [bench_train [rounds]]: the training steps alone, alternated.
    steps = sys.argv[2:] or ["build/bench/bench_train"] if sys.argv[1:2] == ["--steps"] else None
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 1)

    def best_ms(fn, reps=30):
        fn()
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            best = min(best, (time.perf_counter() - t0) * 1e3)
        return best

    # The course's two-layer net, raw tensors with a manual update.
    x, y = torch.randn(64, 1000), torch.randn(64, 10)
    w1 = torch.randn(1000, 100, requires_grad=True)
    w2 = torch.randn(100, 10, requires_grad=True)

    def two_layer():
        loss = (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():  # in place: `w1 -= ...` here would make w1 a local name
            w1.sub_(1e-6 * w1.grad)
            w2.sub_(1e-6 * w2.grad)
            w1.grad.zero_()
            w2.grad.zero_()

    # The 784-1024-1024-10 MLP with Adam and cross-entropy.
    model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    xm, labels = torch.randn(256, 784), torch.randint(0, 10, (256,))

    def mlp_step(m):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(xm), labels)
        loss.backward()
        opt.step()

    # The models of bench/models.h: the digits CNN (batch 64, Adam) and one GPT
    # block (batch 16 x 32 tokens, AdamW), cross-entropy over every row.
    cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Dropout(0.1), nn.Linear(128, 10))
    cnn_opt = torch.optim.Adam(cnn.parameters(), 5e-3)
    cnn_x, cnn_y = torch.rand(64, 1, 8, 8), torch.randint(0, 10, (64,))
    block = transformer_class(torch)()
    block_opt = torch.optim.AdamW(block.parameters(), 1e-3, weight_decay=0.01)
    block_x, block_y = torch.randint(0, 80, (16, 32)), torch.randint(0, 80, (16, 32))

    def model_step(m, opt, x, y):
        opt.zero_grad()
        logits = m(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()

    scripted = torch.jit.script(model)
    scripted_cnn, scripted_block = torch.jit.script(cnn), torch.jit.script(block)
    torch_ms_of = lambda: {
        "BM_TwoLayerStep": best_ms(two_layer, 200),
        "BM_MlpAdamStep": best_ms(lambda: mlp_step(model)),
        "BM_MlpAdamStep (TorchScript)": best_ms(lambda: mlp_step(scripted)),
        "BM_DigitsCnnStep": best_ms(lambda: model_step(cnn, cnn_opt, cnn_x, cnn_y), 100),
        "BM_DigitsCnnStep (TorchScript)":
            best_ms(lambda: model_step(scripted_cnn, cnn_opt, cnn_x, cnn_y), 100),
        "BM_TransformerStep": best_ms(lambda: model_step(block, block_opt, block_x, block_y), 100),
        "BM_TransformerStep (TorchScript)":
            best_ms(lambda: model_step(scripted_block, block_opt, block_x, block_y), 100),
    }
    if steps:
        return steps_rounds(torch_ms_of, steps[0] if steps else "build/bench/bench_train",
                            int(steps[1]) if len(steps) > 1 else 3)
    torch_ms = torch_ms_of()

    # One unary op over 16M floats, eager, into a new tensor (as Kiln's BM_Unary):
    # every unary math op of the op table.
    xu = torch.randn(1 << 24)
    unary = {name: torch_op(torch, name) for name in unary_math_ops()}
    torch_unary_ms = {name: best_ms(lambda f=f: f(xu), 10) for name, f in unary.items()}
    del xu

    # bench_scale's workloads, eager PyTorch.
    work = scale_workloads(torch)
    torch_scale_ms = {name: best_ms(work[name](), reps)
                      for name, reps in (("BM_EmbeddingStep", 10), ("BM_Gather", 30), ("BM_Cumsum", 30),
                                         ("BM_Sort", 10), ("BM_Topk", 30))}
    torch_attention_ms = {T: best_ms(work[f"BM_Attention T={T}"](), 3 if T > 2048 else 10)
                          for T in (1024, 4096)}

    # The course's matmul 10000x1024 @ (5000x1024)^T on the CPU: PyTorch and NumPy
    # into a preallocated result (out=), and PyTorch allocating it.
    import numpy as np
    ca, cb = torch.randn(10000, 1024), torch.randn(5000, 1024)
    cout = torch.empty(10000, 5000)
    na, nb, nout = ca.numpy(), cb.numpy(), cout.numpy()
    course_ms = {"PyTorch, out=": best_ms(lambda: torch.matmul(ca, cb.t(), out=cout), 5),
                 "PyTorch": best_ms(lambda: torch.matmul(ca, cb.t()), 5),
                 "NumPy, out=": best_ms(lambda: np.matmul(na, nb.T, out=nout), 5)}
    del ca, cb, cout, na, nb, nout

    bench = sys.argv[1] if len(sys.argv) > 1 else "build/bench/bench_train"
    bench_jit = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(bench), "bench_jit")
    bench_scale = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(bench), "bench_scale")
    bench_gpu = os.path.join(os.path.dirname(bench), "bench_gpu")
    kiln_ms = {}
    for path, extra in ((bench, []), (bench_jit, ["--benchmark_filter=BM_Unary"]), (bench_scale, []),
                        (bench_gpu, ["--benchmark_filter=BM_Matmul10000", "--sweep_max=0",
                                     "--benchmark_repetitions=5"])):
        kiln_rows(path, extra, kiln_ms)

    print(f"{'workload':34} {'PyTorch ms':>11} {'Kiln eager':>11} {'Kiln traced':>12} {'traced/torch':>13}"
          f" {'eager/torch':>12}")
    for name, t in torch_ms.items():
        base = name.split(" ")[0]
        e, tr = kiln_ms.get((base, "eager")), kiln_ms.get((base, "traced"))
        ratio = f"{tr / t:.2f}" if tr else "-"
        eager_ratio = f"{e / t:.2f}" if e else "-"
        print(f"{name:34} {t:11.3f} {e or float('nan'):11.3f} {tr or float('nan'):12.3f} {ratio:>13}"
              f" {eager_ratio:>12}")
    for base, label in (("BM_TwoLayerStep", "two-layer step"), ("BM_MlpAdamStep", "MLP Adam step")):
        g, tr = kiln_ms.get((base, "gemms alone")), kiln_ms.get((base, "traced"))
        if g and tr:
            print(f"{label}: Kiln traced {tr:.3f} ms, its matrix products alone {g:.3f} ms:"
                  f" {tr / g:.2f}x (target <= 1.05)")
        alternated = sorted(kiln_ms.get((base, "of_gemms alternated"), []))
        if alternated:
            print(f"{label}, a traced call and the products alone in turn: the median pair's ratio"
                  f" {alternated[len(alternated) // 2]:.2f}x")
    kc = kiln_ms.get(("BM_Matmul10000x1024_by_5000x1024T", "cpu (OpenBLAS via kiln)"))
    kf = kiln_ms.get(("BM_Matmul10000x1024_by_5000x1024T", "cpu, result in fresh memory (first touch)"))
    peers = "; ".join(f"{k} {v:.1f} ms" for k, v in course_ms.items())
    best = min(course_ms["PyTorch, out="], course_ms["NumPy, out="])
    if kc:
        print(f"course matmul 10000x1024 @ (5000x1024)^T: Kiln {kc:.1f} ms"
              + (f" ({kf:.1f} ms with the result in fresh memory)" if kf else "")
              + f"; {peers}; the best peer's time over Kiln's: {best / kc:.2f} (target >= 1.0)")
    print()
    print(f"{'eager op, 16M floats':34} {'PyTorch ms':>11} {'Kiln eager':>11} {'Kiln traced':>12} {'eager/torch':>13}")
    for name, t in torch_unary_ms.items():
        e, tr = kiln_ms.get((f"BM_Unary/{name}", "eager")), kiln_ms.get((f"BM_Unary/{name}", "fused"))
        ratio = f"{e / t:.2f}" if e else "-"
        print(f"{name:34} {t:11.3f} {e or float('nan'):11.3f} {tr or float('nan'):12.3f} {ratio:>13}")
    print()
    print(f"{'real-model size':34} {'PyTorch ms':>11} {'Kiln eager':>11} {'Kiln traced':>12} {'traced/torch':>13}"
          f" {'eager/torch':>12}")
    for name, t in torch_scale_ms.items():
        e, tr = kiln_ms.get((name, "eager")), kiln_ms.get((name, "traced"))
        ratio = f"{tr / t:.2f}" if tr else "-"
        eager_ratio = f"{e / t:.2f}" if e else "-"
        print(f"{name:34} {t:11.3f} {e or float('nan'):11.3f} {tr or float('nan'):12.3f} {ratio:>13}"
              f" {eager_ratio:>12}")
    for T, t in torch_attention_ms.items():
        e, tr = kiln_ms.get(("BM_Attention", f"eager T={T}")), kiln_ms.get(("BM_Attention", f"traced T={T}"))
        ratio = f"{tr / t:.2f}" if tr else "-"
        eager_ratio = f"{e / t:.2f}" if e else "-"
        name = f"BM_Attention T={T} (fwd+bwd)"
        print(f"{name:34} {t:11.3f} {e or float('nan'):11.3f} {tr or float('nan'):12.3f} {ratio:>13}"
              f" {eager_ratio:>12}")
    print()
    print("\n".join(peak_table(bench_scale)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
