#!/usr/bin/env python3
"""Prints PyTorch 1.13's values for tests/frontend/nn_image_test.cpp: pad's
reflect, replicate and circular modes, pixel_shuffle and pixel_unshuffle,
instance_norm (input statistics, running statistics, their update),
cosine_similarity, pairwise_distance and Adagrad, on inputs that are sin/cos
of a scaled arange. Each result y is shown as its sum, the sum of y * w for a
fixed w (which sees every element's place) and its first values.
Run: /usr/bin/python3 make_nn_image_reference.py"""
import torch
import torch.nn.functional as F


def iota_sin(shape, scale=1.0):
    n = 1
    for s in shape:
        n *= s
    return torch.sin(torch.arange(n, dtype=torch.float32) * scale).reshape(shape)


def iota_cos(shape, scale=1.0):
    n = 1
    for s in shape:
        n *= s
    return torch.cos(torch.arange(n, dtype=torch.float32) * scale).reshape(shape)


def show(name, t, k=6):
    t = t.detach()
    w = iota_cos(t.shape, 0.1)
    print("%s shape %s sum %.9g weighted %.9g first %s" % (
        name, list(t.shape), t.sum().item(), (t * w).sum().item(),
        ", ".join("%.8g" % v for v in t.flatten()[:k].tolist())))


x4 = iota_sin((2, 3, 5, 6), 0.37)
for mode in ("reflect", "replicate", "circular"):
    show("pad2d " + mode, F.pad(x4, (1, 2, 2, 1), mode=mode))
x3 = iota_sin((2, 3, 7), 0.41)
for mode in ("reflect", "replicate", "circular"):
    show("pad1d " + mode, F.pad(x3, (3, 2), mode=mode))
x5 = iota_sin((1, 2, 3, 4, 5), 0.23)
show("pad3d replicate", F.pad(x5, (1, 1, 1, 0, 0, 2), mode="replicate"))

show("pixel_shuffle", F.pixel_shuffle(iota_sin((2, 8, 3, 3), 0.19), 2))
show("pixel_unshuffle", F.pixel_unshuffle(iota_sin((2, 2, 6, 4), 0.19), 2))

xi = (iota_sin((3, 4, 5, 6), 0.29) * 2 + 0.5).requires_grad_()
wi = iota_cos((4,), 0.7) + 1
bi = iota_sin((4,), 0.9)
rm = torch.zeros(4)
rv = torch.ones(4)
y = F.instance_norm(xi, rm, rv, wi, bi, use_input_stats=True, momentum=0.2, eps=1e-5)
(y * iota_sin(y.shape, 0.05)).sum().backward()
show("instance_norm", y)
show("instance_norm dx", xi.grad)
show("instance_norm running_mean", rm)
show("instance_norm running_var", rv)
show("instance_norm eval", F.instance_norm(xi.detach(), rm, rv, wi, bi, use_input_stats=False, eps=1e-5))

a = iota_sin((4, 6), 0.7)
a[2] = 0
a.requires_grad_()
b = iota_cos((4, 6), 0.3)
c = F.cosine_similarity(a, b, dim=1, eps=1e-8)
(c * torch.tensor([1.0, -2.0, 3.0, 0.5])).sum().backward()
show("cosine_similarity", c)
show("cosine_similarity da", a.grad, 24)
show("cosine_similarity broadcast", F.cosine_similarity(iota_sin((3, 5), 0.3), iota_cos((5,), 0.2), dim=-1))
s = torch.tensor([[1e-3, 0.0]], requires_grad=True)
cs = F.cosine_similarity(s, torch.tensor([[1.0, 2.0]]), eps=1e-2)
cs.sum().backward()
show("cosine_similarity clamped", cs)
show("cosine_similarity clamped ds", s.grad)
show("pairwise_distance", F.pairwise_distance(iota_sin((4, 6), 0.7), iota_cos((4, 6), 0.3)))
show("pairwise_distance p1 keepdim", F.pairwise_distance(iota_sin((4, 6), 0.7), iota_cos((6,), 0.3), p=1.0, keepdim=True))

p = iota_sin((5,), 0.5).requires_grad_()
opt = torch.optim.Adagrad([p], lr=0.1, lr_decay=0.05, weight_decay=0.01, initial_accumulator_value=0.2)
for step in range(3):
    opt.zero_grad()
    ((p * iota_cos((5,), 0.3)) ** 2).sum().backward()
    opt.step()
show("adagrad p", p, 5)
