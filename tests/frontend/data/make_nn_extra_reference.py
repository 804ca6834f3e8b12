#!/usr/bin/env python3
"""Prints PyTorch 1.13's values for tests/frontend/nn_extra_test.cpp: the same
inputs (sin/cos of a scaled arange), MultiheadAttention and
TransformerEncoderLayer with parameters set from the same formulas, and the
functions of frontend/nn_extra.h. Run: python3 make_nn_extra_reference.py"""
import torch
import torch.nn.functional as F

torch.set_printoptions(precision=8)


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


def show(name, t, k=8):
    t = t.detach()
    print(name, "sum %.9g" % t.sum().item(), "first", ", ".join("%.8g" % v for v in t.flatten()[:k].tolist()))


def set_mha(m):
    with torch.no_grad():
        for i, (name, p) in enumerate(m.named_parameters()):
            p.copy_(iota_sin(p.shape, 0.37 + 0.11 * i) * 0.3)


# MultiheadAttention: self-attention, causal float mask, key padding mask.
E, H, L, N = 8, 2, 5, 3
m = torch.nn.MultiheadAttention(E, H)
set_mha(m)
print("mha names", [n for n, _ in m.named_parameters()])
x = iota_cos((L, N, E), 0.23).requires_grad_()
causal = torch.zeros(L, L).masked_fill(torch.ones(L, L).triu(1).bool(), float("-inf"))
pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
out, w = m(x, x, x, key_padding_mask=pad, attn_mask=causal)
loss = out.pow(2).sum() + (w * iota_sin(w.shape, 0.5)).sum()
loss.backward()
show("mha out", out)
show("mha weights", w)
print("mha loss %.9g" % loss.item())
show("mha dx", x.grad)
show("mha d in_proj_weight", m.in_proj_weight.grad)
show("mha d in_proj_bias", m.in_proj_bias.grad, 24)

# Cross-attention with kdim/vdim, add_bias_kv, add_zero_attn, per-head weights.
m2 = torch.nn.MultiheadAttention(E, H, kdim=6, vdim=4, add_bias_kv=True, add_zero_attn=True)
set_mha(m2)
print("mha2 names", [n for n, _ in m2.named_parameters()])
q = iota_cos((L, N, E), 0.31).requires_grad_()
k = iota_sin((4, N, 6), 0.17)
v = iota_cos((4, N, 4), 0.41)
pad2 = torch.tensor([[False] * 4, [False] * 2 + [True] * 2, [False] * 3 + [True]])
out2, w2 = m2(q, k, v, key_padding_mask=pad2, average_attn_weights=False)
(out2.pow(2).sum() + w2.sum()).backward()
print("mha2 weights shape", list(w2.shape))
show("mha2 out", out2)
show("mha2 weights", w2)
show("mha2 dq", q.grad)
show("mha2 d bias_k", m2.bias_k.grad)

# TransformerEncoderLayer, GELU, no dropout.
layer = torch.nn.TransformerEncoderLayer(E, H, dim_feedforward=12, dropout=0.0, activation="gelu")
with torch.no_grad():
    for i, (name, p) in enumerate(layer.named_parameters()):
        p.copy_(iota_sin(p.shape, 0.29 + 0.07 * i) * 0.4 + (1.0 if name.endswith("norm1.weight") or name.endswith("norm2.weight") else 0.0))
print("layer names", [n for n, _ in layer.named_parameters()])
src = iota_cos((L, N, E), 0.19).requires_grad_()
y = layer(src, src_mask=causal, src_key_padding_mask=pad)
(y * iota_sin(y.shape, 0.7)).sum().backward()
show("layer out", y)
show("layer dsrc", src.grad)
show("layer d linear1.weight", layer.linear1.weight.grad)

# group_norm, prelu, adaptive_max_pool2d, kl_div, embedding padding_idx.
xg = iota_sin((2, 6, 3, 2), 0.7).requires_grad_()
wg, bg = (1 + 0.1 * iota_cos((6,), 1.3)).requires_grad_(), (0.1 * iota_sin((6,), 0.9)).requires_grad_()
yg = F.group_norm(xg, 3, wg, bg, 1e-5)
(yg * iota_cos(yg.shape, 0.3)).sum().backward()
show("group_norm out", yg)
show("group_norm dx", xg.grad)
show("group_norm dw", wg.grad, 6)
show("group_norm db", bg.grad, 6)

xp = iota_sin((2, 3, 2, 2), 0.9).requires_grad_()
wp = torch.tensor([0.25, -0.5, 0.1], requires_grad=True)
yp = F.prelu(xp, wp)
(yp * iota_cos(yp.shape, 0.4)).sum().backward()
show("prelu out", yp)
show("prelu dw", wp.grad, 3)

xa = iota_sin((2, 2, 7, 5), 1.7).requires_grad_()
ya = F.adaptive_max_pool2d(xa, (3, 2))
(ya * iota_cos(ya.shape, 0.6)).sum().backward()
show("adaptive_max_pool2d out", ya, 12)
show("adaptive_max_pool2d dx", xa.grad, 35)

inp = F.log_softmax(iota_sin((4, 5), 0.8), 1).requires_grad_()
tgt = F.softmax(iota_cos((4, 5), 0.5) * 2, 1)
tgt[0, 1] = 0.0
for red in ["batchmean", "sum", "mean", "none"]:
    print("kl_div", red, "%.9g" % F.kl_div(inp, tgt, reduction=red).sum().item())
print("kl_div log_target %.9g" % F.kl_div(inp, tgt.clamp_min(1e-3).log(), reduction="batchmean", log_target=True).item())
F.kl_div(inp, tgt, reduction="batchmean").backward()
show("kl_div dinput", inp.grad, 6)
