#!/usr/bin/env python3
"""Prints PyTorch 1.13's values for tests/frontend/nn_losses_test.cpp: the
losses of frontend/nn_losses.h, each reduced by mean, by sum and not at all,
with the gradient of the summed loss times a fixed weight with respect to the
first input, on inputs that are sin/cos of a scaled arange.
Run: /usr/bin/python3 make_nn_losses_reference.py"""
import torch
import torch.nn.functional as F


def iota_sin(shape, scale=1.0):
    n = 1
    for s in shape:
        n *= s
    return torch.sin(torch.arange(n, dtype=torch.float32) * scale).reshape(shape)


def show(name, t):
    print("%s: %s" % (name, ", ".join("%.8g" % v for v in t.detach().flatten().tolist())))


sign = torch.tensor([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])
cases = {
    "margin_ranking": lambda x, r: F.margin_ranking_loss(x, iota_sin((6,), 0.3), sign, margin=0.2, reduction=r),
    "hinge_embedding": lambda x, r: F.hinge_embedding_loss(x, torch.tensor([1.0, -1.0, 1.0, -1.0, 0.5, -1.0]), margin=0.8, reduction=r),
    "soft_margin": lambda x, r: F.soft_margin_loss(x, sign, reduction=r),
    "cosine_embedding": lambda x, r: F.cosine_embedding_loss(x.reshape(2, 3), iota_sin((2, 3), 0.9), torch.tensor([1.0, -1.0]), margin=-0.5, reduction=r),
    "triplet_margin": lambda x, r: F.triplet_margin_loss(x.reshape(2, 3), iota_sin((2, 3), 0.9), iota_sin((2, 3), 1.7), margin=1.5, p=2, swap=True, reduction=r),
    "triplet_margin_p1": lambda x, r: F.triplet_margin_loss(x.reshape(2, 3), iota_sin((2, 3), 0.9), iota_sin((2, 3), 1.7), margin=0.5, p=1, reduction=r),
    "multilabel_soft_margin": lambda x, r: F.multilabel_soft_margin_loss(x.reshape(2, 3), torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]), weight=torch.tensor([0.5, 1.0, 2.0]), reduction=r),
    "poisson_nll": lambda x, r: F.poisson_nll_loss(x, torch.tensor([0.0, 1.0, 2.0, 3.0, 0.5, 4.0]), reduction=r),
    "poisson_nll_full_rate": lambda x, r: F.poisson_nll_loss(x.abs() + 0.1, torch.tensor([0.0, 1.0, 2.0, 3.0, 0.5, 4.0]), log_input=False, full=True, reduction=r),
}
for name, f in cases.items():
    for r in ("mean", "sum", "none"):
        x = (iota_sin((6,), 0.7) * 1.5).requires_grad_()
        y = f(x, r)
        (y * torch.arange(1.0, y.numel() + 1).reshape(y.shape)).sum().backward()
        show("%s %s" % (name, r), y)
        show("%s %s grad" % (name, r), x.grad)
