#!/usr/bin/env python3
"""Prints PyTorch 1.13's values for tests/frontend/nn_activation_test.cpp: the
activations of frontend/nn_activation.h and the 1-d pools of
frontend/nn_pool1d.h with their gradients, on x = linspace(-3, 3, 13) (which
holds each function's kink: 0, +-0.5, 1.0) and on sin of a scaled arange.
Run: /usr/bin/python3 make_nn_activation_reference.py"""
import torch
import torch.nn.functional as F


def show(name, t):
    print("%s: %s" % (name, ", ".join("%.8g" % v for v in t.detach().flatten().tolist())))


fns = [
    ("logsigmoid", F.logsigmoid),
    ("softmin", lambda x: F.softmin(x.view(13, 1).expand(13, 2) * torch.tensor([1.0, 0.5]), dim=1)[:, 0]),
    ("tanhshrink", F.tanhshrink),
    ("softshrink", lambda x: F.softshrink(x, 0.5)),
    ("hardshrink", lambda x: F.hardshrink(x, 0.5)),
    ("threshold", lambda x: F.threshold(x, 1.0, -2.0)),
    ("celu", lambda x: F.celu(x, 0.7)),
    ("glu", lambda x: F.glu(torch.cat([x, x.flip(0)]), 0)),
    ("relu6", F.relu6),
    ("softsign", F.softsign),
]
for name, f in fns:
    x = torch.linspace(-3, 3, 13, requires_grad=True)
    y = f(x)
    (y * torch.arange(1.0, y.numel() + 1)).sum().backward()
    show(name, y)
    show(name + " grad", x.grad)

xp = torch.sin(torch.arange(2 * 3 * 11, dtype=torch.float32) * 0.37).reshape(2, 3, 11).requires_grad_()
w = torch.cos(torch.arange(200, dtype=torch.float32) * 0.1)
pools = [
    ("max_pool1d", lambda x: F.max_pool1d(x, 3, stride=2, padding=1)),
    ("max_pool1d dilated ceil", lambda x: F.max_pool1d(x, 2, stride=3, dilation=2, ceil_mode=True)),
    ("avg_pool1d", lambda x: F.avg_pool1d(x, 4, stride=2, padding=2, count_include_pad=False)),
    ("adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 4)),
    ("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 4)),
]
for name, f in pools:
    xp.grad = None
    y = f(xp)
    (y * w[: y.numel()].reshape(y.shape)).sum().backward()
    print("%s shape %s" % (name, list(y.shape)))
    show(name, y)
    show(name + " grad", xp.grad)
