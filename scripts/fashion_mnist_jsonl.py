#!/usr/bin/env python3
"""Debian's Fashion-MNIST (package dataset-fashion-mnist) as image-text JSON lines.

Reads the gzipped IDX files the package installs (/usr/share/datasets/fashion-mnist:
train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz,
t10k-labels-idx1-ubyte.gz: 60,000 training and 10,000 test photographs of clothing, 28x28 grey,
10 classes) and writes, for each split as shipped, OUT/images/SPLIT/NNNNN.png (8-bit grey PNG)
and OUT/SPLIT.jsonl with one line per image:

  {"image": "images/train/00000.png", "text": "a photo of an ankle boot", "label": 9}

(image paths relative to the JSON-lines file).
--train N / --test N keep the first N of a split. Standard library only.

Usage: fashion_mnist_jsonl.py OUT [--source DIR] [--train N] [--test N]
"""
import argparse
import gzip
import json
import os
import struct
import sys
import zlib

CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot"]


def caption(label):
    name = CLASSES[label]
    return f"a photo of {'an' if name[0] in 'aeiou' else 'a'} {name}"


def read_idx(path, magic):
    with gzip.open(path, "rb") as f:
        data = f.read()
    found, count = struct.unpack(">II", data[:8])
    if found != magic:
        raise ValueError(f"{path}: magic {found:#010x}, expected {magic:#010x} (not an IDX file of that kind)")
    header, rows, cols = (16, *struct.unpack(">II", data[8:16])) if magic == 0x803 else (8, 1, 1)
    if len(data) != header + count * rows * cols:
        raise ValueError(f"{path}: {len(data)} bytes, but its header announces {count} items of {rows * cols} "
                         f"(truncated or damaged)")
    if magic == 0x803:
        return [data[16 + i * rows * cols:16 + (i + 1) * rows * cols] for i in range(count)], (rows, cols)
    labels = list(data[8:])
    if any(label >= len(CLASSES) for label in labels):
        raise ValueError(f"{path}: a label above {len(CLASSES) - 1} (Fashion-MNIST has {len(CLASSES)} classes)")
    return labels, None


def png(pixels, rows, cols):
    """An 8-bit greyscale PNG (filter 0 on every row)."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + pixels[r * cols:(r + 1) * cols] for r in range(rows))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", cols, rows, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def convert(source, out, split, prefix, limit):
    images, (rows, cols) = read_idx(os.path.join(source, f"{prefix}-images-idx3-ubyte.gz"), 0x803)
    labels, _ = read_idx(os.path.join(source, f"{prefix}-labels-idx1-ubyte.gz"), 0x801)
    if len(images) != len(labels):
        raise ValueError(f"{source}: {len(images)} {prefix} images but {len(labels)} labels")
    count = len(images) if limit is None else min(limit, len(images))
    os.makedirs(os.path.join(out, "images", split), exist_ok=True)
    with open(os.path.join(out, f"{split}.jsonl"), "w") as lines:
        for i in range(count):
            relative = f"images/{split}/{i:05d}.png"
            with open(os.path.join(out, relative), "wb") as f:
                f.write(png(images[i], rows, cols))
            lines.write(json.dumps({"image": relative, "text": caption(labels[i]), "label": labels[i]}) + "\n")
    return count


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--source", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--train", type=int)
    parser.add_argument("--test", type=int)
    args = parser.parse_args(argv[1:])
    try:
        train = convert(args.source, args.out, "train", "train", args.train)
        test = convert(args.source, args.out, "test", "t10k", args.test)
    except (OSError, ValueError) as e:
        print(f"fashion_mnist_jsonl.py: {e} (install the Debian package dataset-fashion-mnist)", file=sys.stderr)
        return 1
    print(f"fashion_mnist_jsonl.py: {train} training and {test} test images in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
