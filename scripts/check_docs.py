#!/usr/bin/env python3
"""Checks that the docs are true to the tree (run by ctest as Docs.*):

    python3 scripts/check_docs.py flags BUILD_DIR   every flag the programs' --help prints is in
                                                     docs/cli.md
    python3 scripts/check_docs.py files             every repository path a doc names (in `code`
                                                     or a link) exists
    python3 scripts/check_docs.py benchmark         docs/performance.md's generated tables are what
                                                     bench/report.py makes of bench/results.json
                                                     (and of bench/scaling.json, once measured)
    python3 scripts/check_docs.py layers            docs/architecture.md's layer table names every
                                                     layer of scripts/check_layers.py with its
                                                     folders, its graph is what --graph prints, and
                                                     launch/README.md names every program

Exit 1 naming each miss, with the doc and line where it is named.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DOCS = ["README.md"] + [os.path.join("docs", f) for f in sorted(os.listdir(os.path.join(ROOT, "docs"))) if f.endswith(".md")]
DOCS += sorted(os.path.join(f, "README.md") for f in os.listdir(ROOT) if f != "docs" and os.path.isfile(os.path.join(ROOT, f, "README.md")))
PROGRAMS = ["megacpp-train", "megacpp-run", "megacpp-preprocess", "megacpp-convert", "megacpp-caption", "megacpp-answer", "megacpp-infer", "megacpp-grpo"]
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*[a-z0-9])")
CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


# What a doc names as a path of this repository starts with one of its folders: those git
# tracks (not build trees or generated data), or outside a git checkout those on disk.
def repository_folders():
    try:
        listed = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True)
    except OSError:  # no git at all
        listed = None
    if listed and listed.returncode == 0 and listed.stdout:
        return sorted({path.split("/")[0] for path in listed.stdout.splitlines() if "/" in path})
    return sorted(f for f in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, f)) and not f.startswith((".", "build"))
                  and f not in ("data", "node_modules"))


FOLDERS = repository_folders()
TOP = re.compile(r"^(" + "|".join(map(re.escape, FOLDERS)) + r")/")


def check_flags(build):
    documented = set(FLAG.findall(open(os.path.join(ROOT, "docs", "cli.md")).read()))
    missing = []
    for program in PROGRAMS:
        result = subprocess.run([os.path.join(build, program), "--help"], capture_output=True, text=True)
        flags = set(FLAG.findall(result.stdout + result.stderr))
        if not flags:
            missing.append(f"{program} --help printed no flags (exit {result.returncode})")
        missing += [f"{program}: --{flag} is not in docs/cli.md" for flag in sorted(flags - documented)]
    return missing


def exists(path):
    if os.path.exists(os.path.join(ROOT, path)):
        return True
    stem = path.rstrip("/")  # a component: name.h and name.cpp, named without the extension
    return any(os.path.exists(os.path.join(ROOT, stem + ext)) for ext in (".h", ".cpp", ".py", ".sh"))


def check_files():
    missing = []
    for doc in DOCS:
        for number, line in enumerate(open(os.path.join(ROOT, doc)), 1):
            # Every word of a `code` span that starts with a folder of the repository: a path, or
            # one inside a command (`bash scripts/x.sh --flag`).
            named = [word.strip("(),;'\"") for span in CODE.findall(line) for word in span.split()]
            named = [word for word in named if TOP.match(word) and len(word.split("/", 1)[1]) > 1]  # not a rate: docs/s
            named += [os.path.normpath(os.path.join(os.path.dirname(doc), m)) for m in LINK.findall(line)
                      if "://" not in m and not m.startswith("mailto:")]
            for path in named:
                path = path.split(":")[0]  # file.cpp:12
                if re.search(r"[{}*<>$]", path) or not path or "node_modules" in path:
                    continue  # a pattern or a placeholder, not a path; or what npm ci installs
                if not exists(path):
                    missing.append(f"{doc}:{number}: names {path}, which does not exist")
    return missing


def check_benchmark():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import report  # noqa: E402
    import json
    with open(os.path.join(ROOT, "docs", "performance.md")) as f:
        doc = f.read()
    missing = []
    for name, command in (("results.json", "bash scripts/bench.sh"), ("scaling.json", "bash scripts/bench.sh --scaling")):
        path = os.path.join(ROOT, "bench", name)
        if name == "scaling.json" and not os.path.exists(path):
            continue  # the grid not measured yet: no block for it either
        with open(path) as f:
            expected = report.render(json.load(f))
        if expected not in doc:
            missing.append(f"docs/performance.md: its tables are not what `python3 bench/report.py bench/{name}` makes "
                           f"(rerun it with --docs docs/performance.md, or {command})")
    return missing


def check_layers():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import check_layers as layers
    doc = os.path.join("docs", "architecture.md")
    with open(os.path.join(ROOT, doc)) as f:
        text = f.read()
    missing = []
    rows = {m.group(1): m.group(2) for m in re.finditer(r"(?m)^\| ([a-z, ()]+?) \| (`[^|]+`|the rest of `io/`) \| [^|]+ \|$", text)}
    for name, patterns in layers.LAYERS:
        row = next((folders for names, folders in rows.items() if name in re.split(r"[, ()]+", names)), None)
        if row is None:
            missing.append(f"{doc}: the layer table has no row for layer {name} (scripts/check_layers.py)")
            continue
        for pattern in patterns:
            folder = pattern[:-1] if pattern.endswith("*") else pattern
            if f"`{folder}`" not in row and not (name == "io" and "`io/`" in row):
                missing.append(f"{doc}: layer {name}'s row does not name `{folder}`")
    _, edges, _ = layers.check(ROOT)
    graph = layers.graph(edges)
    if "```\n" + graph + "\n```" not in text:
        missing.append(f"{doc}: the layer graph is not what `python3 scripts/check_layers.py --graph` prints:\n{graph}")
    readme = os.path.join("launch", "README.md")
    with open(os.path.join(ROOT, readme)) as f:
        launch = f.read()
    missing += [f"{readme}: does not name {p}" for p in PROGRAMS if f"`{p}`" not in launch]
    return missing


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "benchmark":
        missing = check_benchmark()
    elif len(sys.argv) == 3 and sys.argv[1] == "flags":
        missing = check_flags(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == "files":
        missing = check_files()
    elif len(sys.argv) == 2 and sys.argv[1] == "layers":
        missing = check_layers()
    else:
        sys.exit(__doc__)
    for line in missing:
        print(line, file=sys.stderr)
    if missing:
        sys.exit(1)
    print(f"check_docs {sys.argv[1]}: ok")


if __name__ == "__main__":
    main()
