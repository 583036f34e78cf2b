#!/usr/bin/env python3
"""Python's side of tests/io/test_pickle.cpp (standard library only).

  pickle_reference.py dump PROTOCOL FILE [plain]
      pickle.dump(sample(), FILE, protocol=PROTOCOL); `plain` leaves out the dataclass
      objects (protocols 0 and 1 spell them with copyreg._reconstructor).
  pickle_reference.py dump-sets PROTOCOL FILE
      pickle.dump({"set": {3}, "frozen": frozenset({4}), "empty": set()}, ...).
  pickle_reference.py check FILE
      load FILE (megacpp's pickle) with an Unpickler whose find_class knows pickle_sample,
      compare it strictly with sample() (types, float bits, dataclass fields), and check that
      it is protocol 2 using only opcodes PyTorch's weights_only unpickler reads.
Exit status 0 on success; otherwise the first difference on stderr and 1.
"""
import os
import pickle
import pickletools
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pickle_sample  # noqa: E402

# torch/_weights_only_unpickler.py's opcodes (no STACK_GLOBAL, MEMOIZE, BINBYTES, LONG4, ...).
WEIGHTS_ONLY_OPCODES = {
    "PROTO", "STOP", "GLOBAL", "NEWOBJ", "REDUCE", "BUILD", "APPEND", "APPENDS", "SETITEM",
    "SETITEMS", "MARK", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "NONE", "NEWFALSE", "NEWTRUE",
    "EMPTY_TUPLE", "EMPTY_LIST", "EMPTY_DICT", "EMPTY_SET", "BININT", "BININT1", "BININT2",
    "BINFLOAT", "BINUNICODE", "SHORT_BINSTRING", "BINPERSID", "BINGET", "LONG_BINGET", "BINPUT",
    "LONG_BINPUT", "LONG1",
}


class SampleUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module == "pickle_sample":
            return getattr(pickle_sample, name)
        if (module, name) in {("_codecs", "encode"), ("__builtin__", "bytes"), ("builtins", "bytes"),
                              ("__builtin__", "bytearray"), ("builtins", "bytearray")}:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"unexpected global {module}.{name}")


def difference(a, b, path="value"):
    """The first way a differs from b, or None. bytes and bytearray count as one type."""
    norm = lambda t: bytes if t is bytearray else t  # noqa: E731
    if norm(type(a)) is not norm(type(b)):
        return f"{path}: {type(a).__name__} {a!r:.80} vs {type(b).__name__} {b!r:.80}"
    if isinstance(a, float):
        return None if struct.pack("<d", a) == struct.pack("<d", b) else f"{path}: {a!r} vs {b!r}"
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            return f"{path}: keys {list(a)!r:.200} vs {list(b)!r:.200}"
        for k in a:
            d = difference(a[k], b[k], f"{path}[{k!r}]")
            if d:
                return d
        return None
    if hasattr(a, "__dict__"):
        return difference(vars(a), vars(b), f"{path}.__dict__")
    return None if a == b else f"{path}: {a!r:.80} vs {b!r:.80}"


def main():
    command = sys.argv[1]
    if command == "dump":
        protocol, path = int(sys.argv[2]), sys.argv[3]
        plain = len(sys.argv) > 4 and sys.argv[4] == "plain"
        with open(path, "wb") as f:
            pickle.dump(pickle_sample.sample(with_objects=not plain), f, protocol=protocol)
        return 0
    if command == "dump-sets":
        with open(sys.argv[3], "wb") as f:
            pickle.dump({"set": {3}, "frozen": frozenset({4}), "empty": set()}, f, protocol=int(sys.argv[2]))
        return 0
    if command == "check":
        with open(sys.argv[2], "rb") as f:
            data = f.read()
        ops = [op.name for op, _, _ in pickletools.genops(data)]
        extra = sorted(set(ops) - WEIGHTS_ONLY_OPCODES)
        if data[:2] != b"\x80\x02" or extra:
            print(f"not protocol 2 or opcodes outside weights_only's set: {extra}", file=sys.stderr)
            return 1
        import io
        d = difference(SampleUnpickler(io.BytesIO(data)).load(), pickle_sample.sample())
        if d:
            print(d, file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
