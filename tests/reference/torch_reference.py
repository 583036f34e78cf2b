#!/usr/bin/env python3
"""PyTorch's side of tests/io/test_torch_save.cpp (/usr/bin/python3 with Debian's python3-torch).

  torch_reference.py write FILE        torch.save(python_sample(), FILE)
  torch_reference.py check FILE        torch.load(FILE) (megacpp's torch_save output) must equal
                                       megacpp_sample() exactly, with the storage sharing and
                                       requires_grad megacpp wrote
  torch_reference.py check-weights-only FILE
                                       torch.load(FILE, weights_only=True) must give a dict of
                                       tensors equal to dtype_sample() (the restricted unpickler
                                       PyTorch 2.x uses for DCP chunks)
  torch_reference.py deflate IN OUT    rewrite the zip IN with every record deflated
  torch_reference.py load FILE         torch.load(FILE) and print repr (for zip64 archives)
Tensor values come from values(dtype, shape): ((i % 7) - 3) * 0.5 for floats, (i % 7) - 3 for
signed ints, i % 7 for uint8, i % 3 == 0 for bool; test_torch_save.cpp builds the same bytes.
Exit status 0 on success; otherwise the first difference on stderr and 1.
"""
import collections
import math
import sys
import zipfile

import torch

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
    "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}


def values(dtype, shape):
    i = torch.arange(math.prod(shape), dtype=torch.int64)
    if dtype == torch.bool:
        t = i % 3 == 0
    elif dtype == torch.uint8:
        t = (i % 7).to(dtype)
    elif dtype.is_floating_point:
        t = (((i % 7) - 3).to(torch.float64) * 0.5).to(dtype)
    else:
        t = ((i % 7) - 3).to(dtype)
    return t.reshape(shape)


def dtype_sample():
    return {name: values(dtype, (2, 3)) for name, dtype in DTYPES.items()}


def python_sample():
    """What Python's torch.save writes and megacpp's torch_load must read."""
    x = torch.arange(6, dtype=torch.int32)
    lin = torch.nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.arange(4.0).view(2, 2))
        lin.bias.copy_(torch.tensor([0.5, -0.5]))
    sample = dtype_sample()
    sample.update({
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "empty": torch.zeros(0, 3),
        "view": torch.arange(20.0).view(4, 5)[:, 1:3],  # non-contiguous: strides (5, 1), offset 1
        "narrow": torch.arange(10.0)[3:7],               # offset 3 into a storage of 10
        "transposed": torch.arange(6.0).view(2, 3).t(),  # strides (1, 3)
        "shared_a": x[:3], "shared_b": x[2:],            # one storage
        "param": torch.nn.Parameter(torch.ones(2)),
        "state_dict": lin.state_dict(),                  # an OrderedDict with a _metadata attribute
        "lr": 0.001, "tuple": (1, "two", 3.0), "text": "héllo", "none": None,
    })
    return sample


def megacpp_sample():
    """What test_torch_save.cpp writes with torch_save."""
    sample = dtype_sample()
    sample.update({
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "empty": torch.zeros(0, 3),
        "view": torch.arange(20.0).view(4, 5)[:, 1:3],
        "shared_a": torch.arange(6, dtype=torch.int32)[:3],
        "shared_b": torch.arange(6, dtype=torch.int32)[2:],
        "requires_grad": torch.ones(2, requires_grad=True),
        "nested": {"list": [values(torch.int64, (4,))]},
        "lr": 0.001, "tuple": (1, "two", 3.0), "text": "héllo", "bytes": b"\x00\xff", "none": None,
    })
    return sample


def difference(a, b, path="value"):
    if type(a) is not type(b) and not (isinstance(a, dict) and isinstance(b, dict)):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
            return f"{path}: {a!r} vs {b!r}"
        if a.requires_grad != b.requires_grad:
            return f"{path}: requires_grad {a.requires_grad} vs {b.requires_grad}"
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := difference(x, y, f"{path}[{i}]"))), None)
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} vs {list(b)}"
        return next((d for k in a if (d := difference(a[k], b[k], f"{path}[{k!r}]"))), None)
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def main():
    command, path = sys.argv[1], sys.argv[2]
    if command == "write":
        torch.save(python_sample(), path)
        return 0
    if command == "check":
        loaded = torch.load(path)
        d = difference(loaded, megacpp_sample())
        if not d and loaded["shared_a"].storage().data_ptr() != loaded["shared_b"].storage().data_ptr():
            d = "shared_a and shared_b do not share a storage"
        if not d and loaded["view"].stride() != (5, 1):
            d = f"view has strides {loaded['view'].stride()}"
    elif command == "check-weights-only":
        d = difference(torch.load(path, weights_only=True), dtype_sample())
    elif command == "deflate":
        with zipfile.ZipFile(path) as src, zipfile.ZipFile(sys.argv[3], "w", zipfile.ZIP_DEFLATED) as dst:
            for name in src.namelist():
                dst.writestr(name, src.read(name))
        return 0
    elif command == "load":
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
        print(repr(torch.load(path)))
        d = f"bad CRC in {bad}" if bad else None
    else:
        print(__doc__, file=sys.stderr)
        return 2
    if d:
        print(d, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
