#!/usr/bin/env python3
"""Prints PyTorch 1.13's values for tests/frontend/tensor_extra_test.cpp, as the
C++ table kReference there: each case's result (flattened) and shape, and for
the differentiable ones the gradient of sum(result * w) for each input, with
w = cos(0.1 * arange). Input k of a case is 2 * sin(0.37 * arange + 0.5 k)
in the case's shape; a few cases use fixed inputs, written in both files.
Run: /usr/bin/python3 make_tensor_extra_reference.py"""
import math

import torch


def inp(k, shape):
    n = math.prod(shape)
    return (torch.sin(torch.arange(n, dtype=torch.float32) * 0.37 + 0.5 * k) * 2).reshape(shape)


def num(v):
    v = float(v)
    if math.isnan(v):
        return "kNaN"
    if math.isinf(v):
        return "kInf" if v > 0 else "-kInf"
    return "%.9g" % v


def fmt(t):
    return ", ".join(num(v) for v in t.detach().flatten().tolist())


def unsqueeze_then(a):
    y = a * 1
    y.unsqueeze_(1)
    return y * y.sum(0, keepdim=True)


def squeeze_then(a):
    y = a * 2
    y.squeeze_()
    return y.exp()


def squeeze_dim_then(a):
    y = a.sin()
    y.squeeze_(0)
    return y * 3


def t_view_write(a):
    z = a * 1
    v = z.narrow(0, 0, 2)
    v.t_()
    v.mul_(torch.arange(8.0).reshape(4, 2))
    return z


def transpose_then(a, b):
    y = a * 1
    y.transpose_(0, 1)
    return y * b


# name, function of the inputs, input shapes, whether to differentiate.
cases = [
    ("diag 1-d above", lambda a: torch.diag(a, 1), [[4]], True),
    ("diag 1-d below", lambda a: torch.diag(a, -2), [[3]], True),
    ("diag 2-d", lambda a: torch.diag(a, -1), [[3, 4]], True),
    ("diagonal 3-d", lambda a: torch.diagonal(a, 1, 2, 0), [[2, 3, 4]], True),
    ("trace", lambda a: torch.trace(a), [[3, 4]], True),
    ("lerp 0.3", lambda a, b: torch.lerp(a, b, 0.3), [[5], [5]], True),
    ("lerp 0.75", lambda a, b: torch.lerp(a, b, 0.75), [[5], [5]], True),
    ("lerp tensor", lambda a, b, w: torch.lerp(a, b, w * 0.5 + 0.4), [[6], [6], [6]], True),
    ("baddbmm", lambda i, a, b: torch.baddbmm(i, a, b, beta=0.5, alpha=2), [[2, 3, 5], [2, 3, 4], [2, 4, 5]], True),
    ("addbmm", lambda i, a, b: torch.addbmm(i, a, b, alpha=0.5), [[3, 5], [2, 3, 4], [2, 4, 5]], True),
    ("addmv", lambda i, m, v: torch.addmv(i, m, v, beta=2, alpha=-1), [[3], [3, 4], [4]], True),
    ("addr", lambda i, a, b: torch.addr(i, a, b), [[3, 4], [3], [4]], True),
    ("median", lambda a: torch.median(a), [[3, 5]], True),
    ("median dim", lambda a: torch.median(a, 1)[0], [[3, 4]], True),
    ("median dim indices", lambda a: torch.median(a, 1)[1], [[3, 4]], False),
    ("repeat_interleave dim", lambda a: a.repeat_interleave(2, 1), [[2, 3]], True),
    ("repeat_interleave flat", lambda a: a.repeat_interleave(3), [[2, 2]], True),
    ("aminmax min", lambda a: torch.aminmax(a, dim=1)[0], [[3, 4]], False),
    ("aminmax max", lambda a: torch.aminmax(a)[1], [[3, 4]], False),
    ("movedim", lambda a: torch.movedim(a, [0, 2], [2, 1]) * 1, [[2, 3, 4]], True),
    ("unflatten", lambda a: a.unflatten(1, (2, -1)), [[2, 6]], True),
    ("diff", lambda a, p: torch.diff(a, 2, 0, prepend=p), [[4, 3], [1, 3]], True),
    ("logical_xor", lambda a, b: torch.logical_xor(a > 0, b > 0), [[7], [7]], False),
    ("floor_divide", lambda a, b: torch.floor_divide(a * 3, b), [[9], [9]], False),
    ("cross", lambda a, b: torch.cross(a, b, dim=1), [[2, 3], [2, 3]], True),
    ("cross first 3", lambda a, b: torch.cross(a, b), [[3, 2], [3, 2]], True),
    ("kron", lambda a, b: torch.kron(a, b), [[2, 3], [3, 2]], True),
    ("kron ranks", lambda a, b: torch.kron(a, b), [[3], [2, 2]], True),
    ("rot90 1", lambda a: torch.rot90(a, 1, [0, 1]) * 1, [[2, 3]], True),
    ("rot90 2", lambda a: torch.rot90(a, 2, [1, 2]) * 1, [[2, 3, 4]], True),
    ("rot90 -1", lambda a: torch.rot90(a, -1, [0, 1]) * 1, [[2, 3]], True),
    ("histc", lambda a: torch.histc(a, 5, -1.5, 1.5), [[40]], False),
    ("histc range", lambda a: torch.histc(a, 7), [[40]], False),
    ("meshgrid xy", lambda a, b: torch.meshgrid(a, b, indexing="xy")[0] * 2 + torch.meshgrid(a, b, indexing="xy")[1], [[3], [2]], True),
    ("cartesian_prod", lambda a, b: torch.cartesian_prod(a, b), [[3], [2]], True),
    ("combinations", lambda a: torch.combinations(a), [[4]], True),
    ("combinations 3 repl", lambda a: torch.combinations(a, 3, with_replacement=True), [[3]], True),
    ("cdist", lambda a, b: torch.cdist(a, b), [[2, 3, 4], [2, 5, 4]], True),
    ("cdist p1", lambda a, b: torch.cdist(a, b, p=1.0), [[3, 4], [2, 4]], True),
    ("tensordot", lambda a, b: torch.tensordot(a, b, dims=([2, 0], [0, 1])), [[2, 3, 4], [4, 2, 5]], True),
    ("block_diag", lambda a, b, c: torch.block_diag(a, b, c), [[2, 2], [3], [2, 1]], True),
    ("vector_norm", lambda a: torch.linalg.vector_norm(a, 3, dim=1), [[3, 4]], True),
    ("matrix_norm fro", lambda a: torch.linalg.matrix_norm(a), [[2, 3, 4]], True),
    ("matrix_norm 1", lambda a: torch.linalg.matrix_norm(a, 1), [[3, 4]], True),
    ("matrix_norm -inf", lambda a: torch.linalg.matrix_norm(a, -math.inf, keepdim=True), [[3, 4]], True),
    ("linalg norm", lambda a: torch.linalg.norm(a), [[3, 4]], True),
    ("masked_select", lambda a, b: torch.masked_select(a, b > 0), [[3, 4], [4]], True),
    ("nonzero", lambda a: torch.nonzero(a > 0.5), [[3, 4]], False),
    ("bincount", lambda a: torch.bincount((a.abs() * 2).long()), [[12]], False),
    ("bincount weights", lambda a, w: torch.bincount((a.abs() * 2).long(), w, minlength=7), [[12], [12]], False),
    ("repeat_interleave tensor", lambda a: a.repeat_interleave(torch.tensor([1, 0, 3]), dim=0), [[3, 2]], True),
    ("index pairs", lambda a: a[torch.tensor([0, 1, -1]), torch.tensor([2, 0, 1])], [[2, 3, 4]], True),
    ("index apart", lambda a: a[torch.tensor([0, 1]), :, torch.tensor([3, -4])], [[2, 3, 4]], True),
    ("index int then tensor", lambda a: a[1, :, torch.tensor([0, 2, 2])], [[2, 3, 4]], True),
    ("index 2-d indices", lambda a: a[:, torch.tensor([[0, 2], [1, 1]])], [[2, 3, 4]], True),
    ("index broadcast", lambda a: a[:, torch.tensor([[0], [2]]), torch.tensor([1, 3, 0])], [[2, 3, 4]], True),
    ("index mask", lambda a: a[a[:, :, 0] > 0], [[2, 3, 4]], True),
    ("index mask dim 1", lambda a: a[:, torch.tensor([True, False, True])], [[2, 3, 4]], True),
    ("index_put pairs", lambda a, b: a.clone().index_put_((torch.tensor([0, 1, -1]), torch.tensor([2, 0, 1])), b), [[2, 3, 4], [3, 4]], True),
    ("index_put accumulate", lambda a, b: a.clone().index_put_((torch.tensor([0, 0, 1]), torch.tensor([1, 1, 2])), b, accumulate=True), [[2, 3, 4], [4]], True),
    ("index_put mask", lambda a, b: a.clone().index_put_((a[:, :, 0] > 0,), b), [[2, 3, 4], [4]], True),
    ("index_copy", lambda a, b: a.index_copy(1, torch.tensor([2, 0]), b), [[2, 3, 4], [2, 2, 4]], True),
    ("index_fill", lambda a: a.index_fill(2, torch.tensor([1, 3]), -1.5), [[2, 3, 4]], True),
    ("take", lambda a: a.take(torch.tensor([[0, 5], [-1, 7]])), [[2, 3, 4]], True),
    ("unfold", lambda a: a.unfold(1, 2, 1) * 1, [[2, 3, 4]], True),
    ("tile", lambda a: a.tile((2, 1, 2)), [[3, 2]], True),
    ("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=0.5), [[5], [5], [5]], True),
    ("addcdiv", lambda a, b, c: torch.addcdiv(a, b, c + 3, value=-2), [[5], [5], [5]], True),
    ("nansum", lambda a: torch.nansum(torch.where(a > 1, torch.tensor(float("nan")), a), 1), [[3, 4]], True),
    ("nanmean", lambda a: torch.nanmean(torch.where(a > 1, torch.tensor(float("nan")), a), 1), [[3, 4]], True),
    ("logit", lambda a: torch.logit(a * 0.3 + 0.5, eps=0.2), [[7]], True),
    ("xlogy", lambda a, b: torch.xlogy(torch.relu(a), b.abs() + 0.1), [[7], [7]], True),
    ("sinc", lambda a: torch.sinc(torch.where(a.abs() < 0.5, torch.zeros_like(a), a)), [[7]], True),
    ("frac", lambda a: torch.frac(a * 2), [[7]], True),
    ("copysign", lambda a, b: torch.copysign(a, b), [[7], [7]], True),
    ("float_power", lambda a: torch.float_power(a.abs() + 0.5, 1.5), [[7]], True),
    ("count_nonzero", lambda a: torch.count_nonzero(torch.relu(a), 1), [[3, 4]], False),
    ("std_mean", lambda a: torch.std_mean(a, 1)[0] + 2 * torch.std_mean(a, 1)[1], [[3, 4]], True),
    ("var_mean", lambda a: torch.var_mean(a)[0] + torch.var_mean(a)[1], [[3, 4]], True),
    ("hstack", lambda a, b: torch.hstack([a, b]), [[2, 3], [2, 1]], True),
    ("vstack", lambda a, b: torch.vstack([a, b]), [[3], [2, 3]], True),
    ("dstack", lambda a, b: torch.dstack([a, b]), [[2, 3], [2, 3]], True),
    ("column_stack", lambda a, b: torch.column_stack([a, b]), [[3], [3, 2]], True),
    ("fill_diagonal wrap", lambda a: a.clone().fill_diagonal_(0.5, wrap=True), [[7, 3]], True),
    ("fill_diagonal", lambda a: a.clone().fill_diagonal_(-1.0), [[3, 5]], True),
    # One int where libtorch takes an IntArrayRef.
    ("nansum one dim", lambda a: torch.nansum(torch.where(a > 1, torch.tensor(float("nan")), a), 0, True), [[3, 4]], True),
    ("amax one dim", lambda a: a.amax(1), [[3, 4]], True),
    ("tile one rep", lambda a: torch.tile(a, (2,)), [[2, 3]], True),
    ("flip one dim", lambda a: a.flip(1), [[2, 3]], True),
    ("permute 1-d", lambda a: a.permute(0) * 1, [[4]], True),
    # cummax / cummin: equal values (a rounded) take the last index, as PyTorch.
    ("cummax", lambda a: torch.cummax(a, 1)[0], [[3, 5]], True),
    ("cummax indices", lambda a: torch.cummax(torch.round(a), 1)[1], [[3, 5]], False),
    ("cummin", lambda a: torch.cummin(a, 0)[0], [[6, 2]], True),
    ("cummin indices", lambda a: torch.cummin(torch.round(a), 0)[1], [[6, 2]], False),
    ("cummax ties", lambda a: torch.cummax(torch.round(a), -1)[0] * a, [[9]], True),
    ("cummax int", lambda a: torch.cummax((a * 3).long(), 0)[0], [[7]], False),
    # In-place view changes, then ops (and a write through a rebased view).
    ("unsqueeze_", lambda a: unsqueeze_then(a), [[2, 3]], True),
    ("squeeze_", lambda a: squeeze_then(a), [[2, 1, 3]], True),
    ("squeeze_ dim", lambda a: squeeze_dim_then(a), [[1, 3]], True),
    ("t_ view write", lambda a: t_view_write(a), [[3, 4]], True),
    ("transpose_", lambda a, b: transpose_then(a, b), [[2, 3, 4], [3, 2, 4]], True),
    # torch.linalg, eagerly.
    ("det", lambda a: torch.linalg.det(a + 3 * torch.eye(3)), [[2, 3, 3]], True),
    ("inv", lambda a: torch.linalg.inv(a + 3 * torch.eye(3)), [[3, 3]], True),
    ("solve", lambda a, b: torch.linalg.solve(a + 3 * torch.eye(3), b), [[3, 3], [3, 2]], True),
    ("solve vector", lambda a, b: torch.linalg.solve(a + 3 * torch.eye(3), b), [[2, 3, 3], [2, 3]], True),
    ("solve right", lambda a, b: torch.linalg.solve(a + 3 * torch.eye(3), b, left=False), [[3, 3], [2, 3]], True),
    ("solve broadcast", lambda a, b: torch.linalg.solve(a + 3 * torch.eye(3), b), [[3, 3], [2, 3, 1]], True),
]

print("// Generated by tests/frontend/data/make_tensor_extra_reference.py (PyTorch %s)." % torch.__version__)
for name, f, shapes, grad in cases:
    xs = [inp(k, s).requires_grad_(grad) for k, s in enumerate(shapes)]
    y = f(*xs)
    print('      {"%s", {%s}},' % (name, fmt(y)))
    print('      {"%s shape", {%s}},' % (name, ", ".join(str(v) for v in y.shape)))
    if grad:
        w = torch.cos(torch.arange(y.numel(), dtype=torch.float32) * 0.1).reshape(y.shape)
        gs = torch.autograd.grad((y * w).sum(), xs, allow_unused=True)
        for k, g in enumerate(gs):
            g = torch.zeros_like(xs[k]) if g is None else g
            print('      {"%s grad %d", {%s}},' % (name, k, fmt(g)))

# Fixed inputs (the same in tensor_extra_test.cpp).
special = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.5, -2.0])
print('      {"nan_to_num", {%s}},' % fmt(torch.nan_to_num(special)))
print('      {"nan_to_num given", {%s}},' % fmt(torch.nan_to_num(special, 1.0, 2.0, -3.0)))
a = torch.tensor([1.0, 1.0, float("nan"), float("inf"), 2.0, 0.0])
b = torch.tensor([1.0 + 1e-6, 1.1, float("nan"), float("inf"), -float("inf"), 1e-9])
print('      {"isclose", {%s}},' % fmt(torch.isclose(a, b)))
print('      {"isclose equal_nan", {%s}},' % fmt(torch.isclose(a, b, rtol=0.2, equal_nan=True)))
x = torch.tensor([-1.5, 0.0, 2.0, 0.0])
print('      {"heaviside", {%s}},' % fmt(torch.heaviside(x, torch.tensor([0.5]))))
n = torch.tensor([7, -7, 7, -7, 0, 5])
d = torch.tensor([2, 2, -2, -2, 3, -5])
print('      {"floor_divide int", {%s}},' % fmt(torch.floor_divide(n, d)))
fl = torch.tensor([7.5, -7.5, 1.0, -0.0, 5.0, 1.0])
fd = torch.tensor([2.0, 2.0, 0.1, 3.0, 0.0, -0.0])
print('      {"floor_divide float", {%s}},' % fmt(torch.floor_divide(fl, fd)))
seq = torch.tensor([1.0, 3.0, 3.0, 5.0, 7.0])
vals = torch.tensor([[0.0, 3.0, 6.0], [7.0, 9.0, float("nan")]])
print('      {"searchsorted left", {%s}},' % fmt(torch.searchsorted(seq, vals)))
print('      {"searchsorted right", {%s}},' % fmt(torch.searchsorted(seq, vals, right=True)))
seq2 = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])
vals2 = torch.tensor([[2.0, 2.5], [2.0, 7.0]])
print('      {"searchsorted 2-d", {%s}},' % fmt(torch.searchsorted(seq2, vals2, side="right")))
print('      {"bucketize", {%s}},' % fmt(torch.bucketize(torch.tensor([0.0, 1.0, 4.0, 9.0]), torch.tensor([1.0, 4.0, 8.0]))))
print('      {"median nan", {%s}},' % fmt(torch.median(torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [4.0, 2.0, 3.0, 1.0]]), 1)[0]))
print('      {"median nan indices", {%s}},' % fmt(torch.median(torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [4.0, 2.0, 3.0, 1.0]]), 1)[1]))
nan = float("nan")
c = torch.tensor([1.0, nan, 3.0, nan, 0.0])
print('      {"cummax nan", {%s}},' % fmt(torch.cummax(c, 0)[0]))
print('      {"cummax nan indices", {%s}},' % fmt(torch.cummax(c, 0)[1]))
print('      {"cummin nan indices", {%s}},' % fmt(torch.cummin(c, 0)[1]))
bools = torch.tensor([True, False, True])
print('      {"cummax bool", {%s}},' % fmt(torch.cummax(bools, 0)[0]))
print('      {"cummax bool indices", {%s}},' % fmt(torch.cummax(bools, 0)[1]))
print('      {"cummin bool indices", {%s}},' % fmt(torch.cummin(bools, 0)[1]))
