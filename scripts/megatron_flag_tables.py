#!/usr/bin/env python3
"""Rewrites docs/cli.md's two tables of Megatron flags from settings/megatron_flags.cpp (the
flags megacpp accepts as what it does, and those it refuses), so the reference cannot drift
from the code. Run from anywhere: python3 scripts/megatron_flag_tables.py"""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
source = (root / "settings/megatron_flags.cpp").read_text()


def c_strings(text):
    """The C string literals of one initializer, adjacent ones joined; nullptr as None."""
    values = []
    for token in re.finditer(r'nullptr|"((?:[^"\\]|\\.)*)"(\s*"((?:[^"\\]|\\.)*)")*', text):
        if token.group(0) == "nullptr":
            values.append(None)
        else:
            values.append("".join(re.findall(r'"((?:[^"\\]|\\.)*)"', token.group(0))).replace('\\"', '"'))
    return values


def entries(array):
    body = source.split(f"const {array}[] = {{", 1)[1].split("\n};", 1)[0]
    return [c_strings(m) for m in re.findall(r"\{((?:[^{}]|\n)*?)\},", body)]


compatible = ["| flag | accepted | why |", "| --- | --- | --- |"]
for name, accepted, why, _note in entries("CompatibleFlag kCompatible"):
    shown = "switch" if accepted is None else "any value" if accepted == "*" else " \\| ".join(f"`{v}`" for v in accepted.split("|"))
    compatible.append(f"| `--{name}` | {shown} | {why} |")
refused = ["| flag | reason |", "| --- | --- |"]
for name, why in entries("RefusedFlag kRefused"):
    refused.append(f"| `--{name}` | {why} |")

doc_path = root / "docs/cli.md"
doc = doc_path.read_text()
for header, table in (("| flag | accepted | why |", compatible), ("| flag | reason |", refused)):
    start = doc.index(header)
    end = doc.index("\n\n", start)
    doc = doc[:start] + "\n".join(table) + doc[end:]
doc_path.write_text(doc)
print(f"docs/cli.md: {len(compatible) - 2} accepted and {len(refused) - 2} refused Megatron flags")
