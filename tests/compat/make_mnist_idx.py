#!/usr/bin/env python3
"""Writes MNIST-format idx files made from the digits data set
(examples/data/digits.csv.gz: 1797 images of 8x8 pixels, 0..16, and their
labels), for the libtorch-style programs in tests/compat:

    train-images-idx3-ubyte  train-labels-idx1-ubyte   (the first 1500 images)
    t10k-images-idx3-ubyte   t10k-labels-idx1-ubyte    (the other 297)

Each image becomes 28 x 28 bytes: every pixel a 3 x 3 block (24 x 24),
centred with 2 blank rows and columns on each side, its value scaled from
0..16 to 0..255. With --full the files have MNIST's own counts (60000 and
10000 images, the digits repeated with small shifts), which real libtorch's
datasets::MNIST insists on.

usage: make_mnist_idx.py DIGITS_CSV_GZ OUT_DIR [--full]
"""
import gzip
import os
import struct
import sys


def read_digits(path):
    rows = []
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.strip():
                v = [int(x) for x in line.split(",")]
                rows.append((v[:64], v[64]))
    return rows


def image_28(pixels, dy=0, dx=0):
    out = bytearray(28 * 28)
    for r in range(8):
        for c in range(8):
            value = (pixels[r * 8 + c] * 255 + 8) // 16
            for i in range(3):
                for j in range(3):
                    y, x = 2 + dy + 3 * r + i, 2 + dx + 3 * c + j
                    if 0 <= y < 28 and 0 <= x < 28:
                        out[y * 28 + x] = value
    return bytes(out)


def write(out_dir, prefix, items):
    tmp_images = os.path.join(out_dir, prefix + "-images-idx3-ubyte.tmp")
    tmp_labels = os.path.join(out_dir, prefix + "-labels-idx1-ubyte.tmp")
    with open(tmp_images, "wb") as f:
        f.write(struct.pack(">IIII", 0x803, len(items), 28, 28))
        for image, _ in items:
            f.write(image)
    with open(tmp_labels, "wb") as f:
        f.write(struct.pack(">II", 0x801, len(items)))
        f.write(bytes(label for _, label in items))
    os.replace(tmp_images, tmp_images[:-4])
    os.replace(tmp_labels, tmp_labels[:-4])


def main():
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] != "--full"):
        sys.exit(__doc__)
    rows = read_digits(sys.argv[1])
    out_dir = sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    train, test = rows[:1500], rows[1500:]
    if len(sys.argv) == 4:
        shifts = [(dy, dx) for dy in (-2, -1, 0, 1, 2) for dx in (-2, -1, 0, 1, 2)]

        def repeat(part, n):
            return [
                (image_28(part[i % len(part)][0], *shifts[(i // len(part)) % len(shifts)]), part[i % len(part)][1])
                for i in range(n)
            ]

        write(out_dir, "train", repeat(train, 60000))
        write(out_dir, "t10k", repeat(test, 10000))
    else:
        write(out_dir, "train", [(image_28(p), label) for p, label in train])
        write(out_dir, "t10k", [(image_28(p), label) for p, label in test])


if __name__ == "__main__":
    main()
