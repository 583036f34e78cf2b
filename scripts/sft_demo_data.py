#!/usr/bin/env python3
"""scripts/sft_demo.sh's data, from the real records of dpkg's status file (every Debian system
has one: one paragraph per installed package). Each package becomes a record of four fields in an
order of its own (Package, Version, Architecture, and the first 60 characters of its
Description) and questions about it:

    "What is the version of this package?" / "... architecture ..." / "... name ..."

with the field's value as the exact answer. Writes to OUT_DIR:
    pretrain.jsonl  {"text": record, then the package's `dpkg -l` line}, the training packages
                    (the base model's text: it sees each field written twice, as a reader of
                    package listings does)
    train.jsonl     Alpaca {"instruction", "input": record, "output": answer}, the three questions
                    about each training package
    held_out.jsonl  one question about each held-out package (one in HELD_OUT_EVERY by name
                    hash), which of the three fixed by the package's name

    python3 scripts/sft_demo_data.py /var/lib/dpkg/status OUT_DIR [HELD_OUT_EVERY]
"""
import hashlib
import json
import os
import sys

QUESTIONS = [("Version", "What is the version of this package?"),
             ("Architecture", "Which architecture is this package built for?"),
             ("Package", "What is the name of this package?")]


def packages(path):
    """(Package, Version, Architecture, Description's first line) of each installed package."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for paragraph in f.read().split("\n\n"):
            fields = {}
            for line in paragraph.splitlines():
                if line and not line[0].isspace() and ": " in line:
                    key, value = line.split(": ", 1)
                    fields[key] = value.strip()
            if all(k in fields for k in ("Package", "Version", "Architecture", "Description")) and \
                    fields.get("Status", "").endswith(" installed"):
                yield fields["Package"], fields["Version"], fields["Architecture"], fields["Description"][:60]


def digest(name):
    return int(hashlib.sha256(name.encode()).hexdigest(), 16)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    status, out = sys.argv[1], sys.argv[2]
    every = int(sys.argv[3]) if len(sys.argv) == 4 else 7
    os.makedirs(out, exist_ok=True)
    files = {name: open(os.path.join(out, name + ".jsonl"), "w", encoding="utf-8")
             for name in ("pretrain", "train", "held_out")}
    counts = {"train": 0, "held_out": 0}
    for package, version, arch, description in sorted(set(packages(status))):
        h = digest(package)
        fields = [("Package", package), ("Version", version), ("Architecture", arch), ("Description", description)]
        order = sorted(range(4), key=lambda i: digest(package + str(i)))  # the record's own field order
        record = "\n".join(f"{fields[i][0]}: {fields[i][1]}" for i in order)
        split = "held_out" if h % every == 0 else "train"
        counts[split] += 1
        if split == "train":
            listing = f"ii  {package}  {version}  {arch}  {description}"  # as `dpkg -l` lists it
            files["pretrain"].write(json.dumps({"text": record + "\n" + listing}) + "\n")
        asked = QUESTIONS if split == "train" else [QUESTIONS[h % len(QUESTIONS)]]
        for key, question in asked:
            files[split].write(json.dumps({"instruction": question, "input": record, "output": dict(fields)[key]}) + "\n")
    for f in files.values():
        f.close()
    print(f"sft_demo_data: {counts['train']} training and {counts['held_out']} held-out packages from {status} -> {out}")


if __name__ == "__main__":
    main()
