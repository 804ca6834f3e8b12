#!/usr/bin/python3
"""Trains a small CNN on the digits (examples/data/digits.csv.gz) with
PyTorch, and writes, in the safetensors format:

    digits_cnn.safetensors     its state_dict (parameters and buffers, float32,
                               with BatchNorm's num_batches_tracked as int64)
    digits_cnn_io.safetensors  "input": 16 test images [16, 1, 8, 8], and
                               "output": the model's logits for them in
                               evaluation mode [16, 10]

tests/frontend/safetensors_test.cpp loads the weights into the same model
written with Kiln and checks that its outputs equal "output".

Run with Debian's PyTorch (apt-get install python3-torch):
    /usr/bin/python3 tests/frontend/data/make_safetensors_model.py
The safetensors files are written by hand (the format is a length, a JSON
header and the raw little-endian data), so no safetensors package is needed.
"""
import gzip
import json
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DIGITS = os.path.join(HERE, "..", "..", "..", "examples", "data", "digits.csv.gz")
DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.int32: "I32"}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.fc1 = nn.Linear(64, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt", "made_by": "tests/frontend/data/make_safetensors_model.py"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    rows = [[float(v) for v in line.split(",")] for line in gzip.open(DIGITS, "rt") if line.strip()]
    data = torch.tensor(rows)
    x = (data[:, :64] / 16.0).reshape(-1, 1, 8, 8)
    y = data[:, 64].long()
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for step in range(60):
        idx = torch.randint(0, 1500, (64,))
        opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
    model.eval()
    inputs = x[1500:1516].clone()
    with torch.no_grad():
        outputs = model(inputs)
    print("final training loss %.4f, test logits %s" % (loss.item(), tuple(outputs.shape)))
    write_safetensors(os.path.join(HERE, "digits_cnn.safetensors"), model.state_dict())
    write_safetensors(os.path.join(HERE, "digits_cnn_io.safetensors"), {"input": inputs, "output": outputs})


if __name__ == "__main__":
    main()
