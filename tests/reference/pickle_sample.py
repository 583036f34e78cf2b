"""The sample value that tests/io/test_pickle.cpp and pickle_reference.py both build: Python
pickles it for megacpp's reader, and megacpp pickles its own copy for Python to compare.
Keep the two in step (sample_value() in test_pickle.cpp)."""
import dataclasses


@dataclasses.dataclass
class Point:
    x: int
    y: float


@dataclasses.dataclass(frozen=True)
class Key:  # hashable, so usable as a dict key (as DCP's MetadataIndex)
    name: str
    offset: tuple = None


def sample(with_objects=True):
    shared = [1, "two"]
    value = {
        "ints": [0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31 - 1, 2**31, -2**31 - 1,
                 2**39, -2**39, 2**40, -2**40, 2**63 - 1, -2**63],
        "floats": (0.0, -0.0, 1.5, -2.25e-300, 1e300, 0.1, float("inf"), float("-inf")),
        "strings": ["", "ascii", "naïve – 日本語 🚀", "quote's\\\n\r", "x" * 300],
        "bytes": [b"", b"\x00\xff\x80abc", bytes(range(256))],
        "bytearray": bytearray(b"\x01\xfe"),
        "nested": {"a": (1, (2, [3, {"b": None}])), "empty": ((), [], {})},
        "bools": (True, False),
        "tuples": ((1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)),
        "long_list": list(range(2500)),
        "big_dict": {str(i): i for i in range(1001)},
        "shared": [shared, shared],
        7: "int key",
    }
    if with_objects:
        value["point"] = Point(1, 2.5)
        value["keyed"] = {Key("w", (0, 4)): Point(3, 4.0), Key("b"): "bias"}
    return value
