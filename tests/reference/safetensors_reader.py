#!/usr/bin/env python3
"""An independent reader and writer of safetensors files, in Python 3 (standard library + numpy).

Purpose: check the files megacpp's io/serialization/safetensors.cpp writes, and give it files to
read, without trusting any of its code and without the `safetensors` package. Everything
here follows the format as the reference implementation (huggingface/safetensors,
safetensors/src/tensor.rs) defines it:

  * u64 little-endian N, then N bytes of UTF-8 JSON, then the byte buffer;
  * header {"__metadata__": {str: str} (optional), name: {"dtype", "shape", "data_offsets"}};
  * the writer (`prepare`, behind safetensors.torch.save_file) sorts tensors by DESCENDING
    position in the Dtype enum (declared in increasing alignment), then by name, lays them
    out back to back from offset 0, writes compact JSON (serde_json::to_string) with
    "__metadata__" first and each entry as dtype, shape, data_offsets, and pads the header
    with spaces to a multiple of 8 bytes;
  * the reader (`read_metadata` + `Metadata::validate`) wants N <= 100,000,000, a header
    starting with '{', and, sorted by offsets, tensors tiling the buffer exactly with
    end - begin == prod(shape) * dtype size.

Usage:
  safetensors_reader.py dump FILE     parse FILE, validate it, print one JSON object:
      {"header_size", "header_aligned", "metadata" (null when absent), "file_order",
       "reference_order", "reserialized_identical" (our own reference serialization of the
       same tensors and metadata, byte for byte equal to FILE), "tensors": {name: {"dtype",
       "shape", "data_offsets", "hex", "values"}}}
  safetensors_reader.py write FILE    write a fixed set of tensors (every common dtype, a 0-d
      tensor, empty tensors, names needing JSON escapes) with metadata {"format": "pt"}, the
      way safetensors.torch.save_file would, then print FILE's dump as above.
  safetensors_reader.py index DIR     check DIR/model.safetensors.index.json against its
      shards as transformers writes them: the text is json.dumps(index, indent=2,
      sort_keys=True) + "\\n", shard names are model-XXXXX-of-YYYYY.safetensors with all
      1..YYYYY present, each shard holds exactly the tensors mapped to it, total_size is the
      sum of their sizes. Prints {"total_size", "shards": {file: [names]}}.
"values" are the elements flattened in C order: floats (BF16/F16 widened exactly; "nan",
"inf", "-inf" as strings), ints, or bools; raw bytes for dtypes numpy lacks (F8_*, F4, F6_*,
C64 as pairs of floats). Exit status 0 on success; otherwise the reason on stderr and 1.
Used by tests/io/test_safetensors.cpp.
"""
import json
import math
import os
import re
import struct
import sys

import numpy as np

MAX_HEADER_SIZE = 100_000_000

# The reference Dtype enum in declaration order: (name, bits, numpy dtype or None).
DTYPES = [
    ("BOOL", 8, "?"),
    ("F4", 4, None),
    ("F6_E2M3", 6, None),
    ("F6_E3M2", 6, None),
    ("U8", 8, "<u1"),
    ("I8", 8, "<i1"),
    ("F8_E5M2", 8, None),
    ("F8_E4M3", 8, None),
    ("F8_E8M0", 8, None),
    ("F8_E4M3FNUZ", 8, None),
    ("F8_E5M2FNUZ", 8, None),
    ("I16", 16, "<i2"),
    ("U16", 16, "<u2"),
    ("F16", 16, "<f2"),
    ("BF16", 16, None),
    ("I32", 32, "<i4"),
    ("U32", 32, "<u4"),
    ("F32", 32, "<f4"),
    ("C64", 64, "<c8"),
    ("F64", 64, "<f8"),
    ("I64", 64, "<i8"),
    ("U64", 64, "<u8"),
]
RANK = {name: i for i, (name, _, _) in enumerate(DTYPES)}
BITS = {name: bits for name, bits, _ in DTYPES}
NUMPY = {name: np_dtype for name, _, np_dtype in DTYPES}


class FormatError(Exception):
    pass


def nbytes_of(dtype, shape):
    n = 1
    for d in shape:
        n *= d
    bits = n * BITS[dtype]
    if bits % 8:
        raise FormatError(f"{dtype} {shape} is not a whole number of bytes")
    return bits // 8


def float_value(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def decode_values(dtype, data):
    if dtype == "BF16":
        bits = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
        return [float_value(v) for v in bits.view(np.float32)]
    np_dtype = NUMPY[dtype]
    if np_dtype is None:
        return list(data)
    arr = np.frombuffer(data, dtype=np_dtype)
    if dtype == "BOOL":
        if any(b not in (0, 1) for b in data):
            raise FormatError("BOOL tensor holds a byte other than 0 or 1")
        return [bool(v) for v in arr]
    if dtype == "C64":
        return [[float_value(v.real), float_value(v.imag)] for v in arr]
    if dtype.startswith("F"):
        return [float_value(v) for v in arr]
    return [int(v) for v in arr]


def reference_order(entries):
    """Descending dtype rank, then name (Rust str order = UTF-8 byte order)."""
    return sorted(entries, key=lambda name: (-RANK[entries[name]["dtype"]], name.encode("utf-8")))


def serialize(tensors, metadata):
    """The reference serializer. tensors: {name: (dtype, shape, bytes)}; metadata: dict or None.
    Several metadata keys are written sorted (the reference uses a HashMap: unspecified)."""
    infos = {name: {"dtype": t[0], "shape": list(t[1])} for name, t in tensors.items()}
    order = reference_order(infos)
    header = {}
    if metadata is not None:
        header["__metadata__"] = {k: metadata[k] for k in sorted(metadata, key=lambda k: k.encode("utf-8"))}
    offset = 0
    for name in order:
        dtype, shape, data = tensors[name]
        if len(data) != nbytes_of(dtype, shape):
            raise FormatError(f"tensor {name!r}: {len(data)} bytes for {dtype} {shape}")
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(tensors[name][2] for name in order)


def parse(blob):
    if len(blob) < 8:
        raise FormatError(f"{len(blob)} bytes: too small for the header size")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > MAX_HEADER_SIZE:
        raise FormatError(f"header size {n} over the limit")
    if 8 + n > len(blob):
        raise FormatError(f"header size {n} past the end of the {len(blob)}-byte file")
    raw = blob[8:8 + n]
    text = raw.decode("utf-8")  # raises on invalid UTF-8
    if not text.startswith("{"):
        raise FormatError("header does not start with '{'")

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise FormatError("duplicate key in header")
        return dict(pairs)

    header = json.loads(text, object_pairs_hook=no_duplicates)
    if not isinstance(header, dict):
        raise FormatError("header is not an object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            raise FormatError("__metadata__ is not an object of strings")
    buffer = blob[8 + n:]
    entries = {}
    for name, info in header.items():
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
            raise FormatError(f"tensor {name!r}: missing fields")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in RANK:
            raise FormatError(f"tensor {name!r}: unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise FormatError(f"tensor {name!r}: bad shape {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(type(o) is int and o >= 0 for o in offsets)):
            raise FormatError(f"tensor {name!r}: bad data_offsets {offsets!r}")
        entries[name] = {"dtype": dtype, "shape": shape, "data_offsets": offsets}
    file_order = sorted(entries, key=lambda k: tuple(entries[k]["data_offsets"]))
    start = 0
    for name in file_order:
        begin, end = entries[name]["data_offsets"]
        if begin != start or end < begin:
            raise FormatError(f"tensor {name!r}: data_offsets {[begin, end]} do not start at {start}")
        if end - begin != nbytes_of(entries[name]["dtype"], entries[name]["shape"]):
            raise FormatError(f"tensor {name!r}: data_offsets {[begin, end]} disagree with dtype and shape")
        start = end
    if start != len(buffer):
        raise FormatError(f"tensors cover {start} of {len(buffer)} buffer bytes")
    return n, metadata, entries, file_order, buffer


def dump(path):
    with open(path, "rb") as f:
        blob = f.read()
    n, metadata, entries, file_order, buffer = parse(blob)
    tensors = {}
    raw = {}
    for name, info in entries.items():
        begin, end = info["data_offsets"]
        data = buffer[begin:end]
        raw[name] = (info["dtype"], info["shape"], data)
        tensors[name] = dict(info, hex=data.hex(), values=decode_values(info["dtype"], data))
    return {
        "header_size": n,
        "header_aligned": n % 8 == 0,
        "metadata": metadata,
        "file_order": file_order,
        "reference_order": reference_order(entries),
        "reserialized_identical": serialize(raw, metadata) == blob,
        "tensors": tensors,
    }


def bf16_bytes(values):
    """float32 -> bfloat16 by round-to-nearest-even on the bit pattern (values here are exact)."""
    bits = np.array(values, dtype="<f4").view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    return rounded.tobytes()


def fixed_tensors():
    """A state dict as a PyTorch model might hold it, every common dtype and edge case."""
    t = {}

    def add(name, dtype, shape, data):
        t[name] = (dtype, list(shape), data)

    add("model.embed_tokens.weight", "F32", [4, 3], (np.arange(12, dtype="<f4") * 0.5 - 1.25).tobytes())
    add("model.norm.weight", "BF16", [5], bf16_bytes([1.0, -2.5, 0.15625, 3.0e38, -0.0]))
    add("lm_head.bias", "F16", [2, 2], np.array([0.5, -1.0, 65504.0, 6.1035156e-05], dtype="<f2").tobytes())
    add("double", "F64", [2], np.array([math.pi, -1e-300], dtype="<f8").tobytes())
    add("step", "I64", [], np.array([1234567890123], dtype="<i8").tobytes())
    add("big", "U64", [1], np.array([2**64 - 1], dtype="<u8").tobytes())
    add("tokens", "I32", [2, 3], np.array([[-7, 0, 7], [2**31 - 1, -2**31, 42]], dtype="<i4").tobytes())
    add("u32", "U32", [2], np.array([0, 2**32 - 1], dtype="<u4").tobytes())
    add("small", "I16", [3], np.array([-32768, 0, 32767], dtype="<i2").tobytes())
    add("u16", "U16", [2], np.array([1, 65535], dtype="<u2").tobytes())
    add("signed", "I8", [4], np.array([-128, -1, 0, 127], dtype="<i1").tobytes())
    add("bytes", "U8", [2, 2], bytes([0, 1, 128, 255]))
    add("mask", "BOOL", [3], bytes([1, 0, 1]))
    add("fp8", "F8_E4M3", [3], bytes([0x38, 0xB8, 0x7E]))
    add("empty", "F32", [0], b"")
    add("empty2d", "BF16", [3, 0], b"")
    add("zero_rows", "I64", [0, 4], b"")
    add("caf\u00e9.\u03b1\"quoted\"\\back\nline\t\u0001", "F32", [1], np.array([2.0], dtype="<f4").tobytes())
    return t


def check_index(directory):
    path = os.path.join(directory, "model.safetensors.index.json")
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    index = json.loads(text)
    expected_text = json.dumps(index, indent=2, sort_keys=True) + "\n"
    if text != expected_text:
        raise FormatError("index text is not json.dumps(index, indent=2, sort_keys=True) + '\\n'")
    if set(index) != {"metadata", "weight_map"}:
        raise FormatError(f"index keys {sorted(index)}")
    weight_map = index["weight_map"]
    shards = {}
    for name, filename in weight_map.items():
        shards.setdefault(filename, []).append(name)
    pattern = re.compile(r"^model-(\d{5})-of-(\d{5})\.safetensors$")
    numbers, counts = set(), set()
    for filename in shards:
        m = pattern.match(filename)
        if not m:
            raise FormatError(f"shard name {filename!r}")
        numbers.add(int(m.group(1)))
        counts.add(int(m.group(2)))
    if len(counts) != 1 or numbers != set(range(1, counts.pop() + 1)):
        raise FormatError(f"shard numbering {sorted(shards)}")
    total = 0
    for filename, names in shards.items():
        with open(os.path.join(directory, filename), "rb") as f:
            _, _, entries, _, _ = parse(f.read())
        if set(entries) != set(names):
            raise FormatError(f"{filename} holds {sorted(entries)}, index maps {sorted(names)}")
        total += sum(nbytes_of(e["dtype"], e["shape"]) for e in entries.values())
    if index["metadata"].get("total_size") != total:
        raise FormatError(f"total_size {index['metadata'].get('total_size')} != {total}")
    return {"total_size": total, "shards": {k: sorted(v) for k, v in sorted(shards.items())}}


def main(argv):
    if len(argv) != 3 or argv[1] not in ("dump", "write", "index"):
        print(__doc__, file=sys.stderr)
        return 2
    command, path = argv[1], argv[2]
    try:
        if command == "write":
            blob = serialize(fixed_tensors(), {"format": "pt"})
            with open(path, "wb") as f:
                f.write(blob)
            result = dump(path)
        elif command == "dump":
            result = dump(path)
        else:
            result = check_index(path)
    except (FormatError, ValueError, OSError) as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, ensure_ascii=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
