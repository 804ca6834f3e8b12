#!/usr/bin/env python3
"""Prints PyTorch 1.13's values for tests/frontend/nn_decoder_test.cpp and
tests/frontend/nn_bag_test.cpp: TransformerDecoderLayer and Transformer with
parameters set from formulas (in named_parameters() order, libtorch's too),
EmbeddingBag in each mode (PyTorch 1.13 corrupts its heap in mode max
with include_last_offset when the last offset is short of the input's end,
so that case ends at the end) and
bilinear, on inputs made from sin/cos of a scaled arange. Each tensor is
printed as a C++ map entry: its first 6 values, its sum and its sum weighted by
cos(0.7 i). Run: /usr/bin/python3 make_nn_more_reference.py"""
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float32)


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


def show(name, t):
    t = t.detach().flatten().double()
    w = torch.cos(torch.arange(t.numel(), dtype=torch.float64) * 0.7)
    vals = t[:6].tolist() + [t.sum().item(), (t * w).sum().item()]
    print('    {"%s", {%s}},' % (name, ", ".join("%.9g" % v for v in vals)))


def set_parameters(m, base, step, scale):
    # The i-th parameter: sin(arange * (base + step i)) * scale, +1 for norm weights.
    with torch.no_grad():
        for i, (name, p) in enumerate(m.named_parameters()):
            v = iota_sin(p.shape, base + step * i) * scale
            if "norm" in name and name.endswith("weight"):
                v = v + 1.0
            p.copy_(v)


def causal(n):
    return torch.zeros(n, n).masked_fill(torch.ones(n, n).triu(1).bool(), float("-inf"))


# TransformerDecoderLayer: ReLU, every mask.
E, H, T, S, N = 8, 2, 4, 5, 2
layer = torch.nn.TransformerDecoderLayer(E, H, dim_feedforward=12, dropout=0.0)
set_parameters(layer, 0.31, 0.05, 0.4)
print("// decoder layer names:", [n for n, _ in layer.named_parameters()])
tgt = iota_cos((T, N, E), 0.23).requires_grad_()
memory = iota_sin((S, N, E), 0.37).requires_grad_()
tgt_pad = torch.tensor([[False, False, False, False], [False, False, False, True]])
mem_pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
mem_mask = torch.zeros(T, S)
mem_mask[0, 4] = float("-inf")
mem_mask[2, 1] = -0.5
y = layer(tgt, memory, tgt_mask=causal(T), memory_mask=mem_mask, tgt_key_padding_mask=tgt_pad,
          memory_key_padding_mask=mem_pad)
(y * iota_sin(y.shape, 0.7)).sum().backward()
show("decoder_layer", y)
show("decoder_layer dtgt", tgt.grad)
show("decoder_layer dmemory", memory.grad)
show("decoder_layer d multihead_attn.in_proj_weight", layer.multihead_attn.in_proj_weight.grad)
show("decoder_layer d norm3.weight", layer.norm3.weight.grad)

# Transformer: GELU, 2 + 2 layers, the final norms, causal target mask, padding.
model = torch.nn.Transformer(E, H, 2, 2, dim_feedforward=12, dropout=0.0, activation="gelu")
set_parameters(model, 0.29, 0.013, 0.35)
print("// transformer parameters:", len(list(model.parameters())))
src = iota_cos((S, N, E), 0.19).requires_grad_()
tgt2 = iota_sin((T, N, E), 0.41).requires_grad_()
src_pad = torch.tensor([[False] * 5, [False] * 4 + [True]])
out = model(src, tgt2, tgt_mask=model.generate_square_subsequent_mask(T),
            src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad)
(out * iota_cos(out.shape, 0.9)).sum().backward()
show("transformer", out)
show("transformer dsrc", src.grad)
show("transformer dtgt", tgt2.grad)
show("transformer d encoder.layers.0.linear1.weight", model.encoder.layers[0].linear1.weight.grad)
show("transformer d decoder.norm.weight", model.decoder.norm.weight.grad)

# embedding_bag: a table [10, 3]; bags of a 1-D input (one empty), a 2-D input.
table = (iota_sin((10, 3), 0.83) * 1.5).requires_grad_()
flat = torch.tensor([1, 4, 4, 9, 0, 2, 7, 3, 3, 5, 8])
offsets = torch.tensor([0, 3, 3, 7])
psw = (0.5 + iota_cos((11,), 0.6)).requires_grad_()
cases = [
    ("bag sum psw", lambda: F.embedding_bag(flat, table, offsets, mode="sum", per_sample_weights=psw)),
    ("bag mean pad", lambda: F.embedding_bag(flat, table, offsets, mode="mean", padding_idx=3)),
    ("bag max pad last", lambda: F.embedding_bag(flat, table, torch.tensor([0, 2, 5, 5, 11]), mode="max",
                                                padding_idx=4, include_last_offset=True)),
    ("bag 2d mean", lambda: F.embedding_bag(flat[:10].reshape(5, 2), table, mode="mean")),
    ("bag 2d max", lambda: F.embedding_bag(flat[1:10].reshape(3, 3), table, mode="max")),
    ("bag 2d sum pad", lambda: F.embedding_bag(flat[:10].reshape(2, 5), table, mode="sum", padding_idx=4)),
]
for name, f in cases:
    table.grad = None
    psw.grad = None
    yb = f()
    (yb * iota_sin(yb.shape, 1.1)).sum().backward()
    show(name, yb)
    show(name + " dweight", table.grad)
    if psw.grad is not None:
        show(name + " dpsw", psw.grad)

# bilinear on [3, 4] x [3, 5] and on [2, 3, 4] x [2, 3, 5].
for name, lead in [("bilinear", (3,)), ("bilinear 3d", (2, 3))]:
    x1 = iota_sin(lead + (4,), 0.53).requires_grad_()
    x2 = iota_cos(lead + (5,), 0.29).requires_grad_()
    w = (iota_sin((2, 4, 5), 0.17) * 0.5).requires_grad_()
    b = torch.tensor([0.25, -0.5], requires_grad=True)
    yl = F.bilinear(x1, x2, w, b)
    (yl * iota_cos(yl.shape, 0.8)).sum().backward()
    show(name, yl)
    show(name + " dx1", x1.grad)
    show(name + " dx2", x2.grad)
    show(name + " dweight", w.grad)
    show(name + " dbias", b.grad)
