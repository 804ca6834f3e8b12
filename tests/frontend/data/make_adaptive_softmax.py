#!/usr/bin/python3
"""PyTorch's torch.nn.AdaptiveLogSoftmaxWithLoss on fixed weights and inputs,
written in the safetensors format as the reference for Kiln's module:

    adaptive_softmax.safetensors     the module's state_dict (float64):
                                     head.weight, head.bias, tail.<i>.0.weight,
                                     tail.<i>.1.weight
    adaptive_softmax_io.safetensors  "input" [12, 16], "target" [12] (every
                                     cluster, both ends of each), and what
                                     PyTorch computes from them: "output",
                                     "loss", "log_prob" [12, 40], "predict",
                                     the gradients of loss ("grad_loss.input",
                                     "grad_loss.<parameter>") and of
                                     (log_prob * "log_prob_weight").sum()
                                     ("grad_lp.input", "grad_lp.<parameter>")

The module: in_features 16, n_classes 40, cutoffs [6, 15, 28], div_value 2,
head_bias true (so the clusters project to 8, 4 and 2 features).
tests/frontend/adaptive_softmax_test.cpp loads both files and checks Kiln's
forward, log_prob, predict and gradients against them, eagerly and traced, in
float64 and float32.

Run with Debian's PyTorch (apt-get install python3-torch):
    /usr/bin/python3 tests/frontend/data/make_adaptive_softmax.py
"""
import os

import torch
import torch.nn as nn

from make_safetensors_model import write_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    torch.manual_seed(0)
    asm = nn.AdaptiveLogSoftmaxWithLoss(16, 40, [6, 15, 28], div_value=2.0, head_bias=True,
                                        dtype=torch.float64)
    x = (torch.randn(12, 16, dtype=torch.float64) * 2).requires_grad_()
    target = torch.tensor([0, 5, 6, 14, 15, 27, 28, 39, 3, 20, 33, 10])
    lp_weight = torch.rand(12, 40, dtype=torch.float64)
    params = dict(asm.named_parameters())

    out = asm(x, target)
    grads = torch.autograd.grad(out.loss, [x] + list(params.values()))
    log_prob = asm.log_prob(x)
    grads_lp = torch.autograd.grad((log_prob * lp_weight).sum(), [x] + list(params.values()))
    with torch.no_grad():
        predict = asm.predict(x)
        head_best = asm.head(x).argmax(1)
    # The rows exercise both ways predict answers: from the head, and from the full distribution.
    in_shortlist = int((head_best < asm.shortlist_size).sum())
    assert 0 < in_shortlist < 12, in_shortlist
    # log_prob is a distribution, and forward's output is log_prob at the targets.
    assert torch.allclose(log_prob.exp().sum(1), torch.ones(12, dtype=torch.float64))
    assert torch.allclose(out.output, log_prob.gather(1, target[:, None]).squeeze(1))

    io = {"input": x.detach(), "target": target, "log_prob_weight": lp_weight,
          "output": out.output.detach(), "loss": out.loss.detach(), "log_prob": log_prob.detach(),
          "predict": predict}
    for name, g in zip(["input"] + list(params), grads):
        io["grad_loss." + name] = g
    for name, g in zip(["input"] + list(params), grads_lp):
        io["grad_lp." + name] = g
    write_safetensors(os.path.join(HERE, "adaptive_softmax.safetensors"),
                      {k: v.detach() for k, v in asm.state_dict().items()})
    write_safetensors(os.path.join(HERE, "adaptive_softmax_io.safetensors"), io)
    print("loss %.6f; %d of 12 rows predicted from the head alone; parameters %s" %
          (out.loss.item(), in_shortlist, ", ".join(params)))


if __name__ == "__main__":
    main()
