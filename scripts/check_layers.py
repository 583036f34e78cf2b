#!/usr/bin/env python3
"""megacpp's layers, and a check that every #include "..." points to the same layer or one below
(not to a layer beside it, of the same height), that no two components (a header and its .cpp) include each other, however indirectly, and
that each layer's folder has a README.md.

    python3 scripts/check_layers.py [--root DIR] [--graph]   exit 1 naming every upward include
    python3 scripts/check_layers.py --self-test              the check passes here and fails on a
                                                             planted upward include (a ctest)

The layers, from the ground up (a file belongs to the first layer with a pattern it matches):
docs/architecture.md#layers shows the listing --graph prints. tests/, examples/ and bench/ sit
on top and may include anything.
"""
import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile

LAYERS = [
    ("base", ["megacpp/*"]),
    ("serialization", ["io/serialization/*"]),
    ("io", ["io/*"]),
    ("parallel", ["parallel/*"]),
    ("models", ["models/*"]),
    ("checkpoint", ["checkpoint/*"]),
    ("settings", ["settings/*"]),
    ("runtime", ["runtime/*"]),
    ("training", ["training/*"]),
    ("inference", ["inference/*"]),
    ("rl", ["rl/*"]),
    ("launch", ["launch/*"]),
]
# Layers side by side at one height: neither may include the other (the training loop and
# forward-only inference both stand on runtime/; rl/ stands on both).
BESIDE = [("training", "inference")]
ON_TOP = ["tests/*", "examples/*", "bench/*"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE = (".h", ".hpp", ".cpp", ".cc")


def heights():
    """Each layer's height by rank: one above the layer before it, or that layer's own height when it
    stands beside it."""
    result = []
    for rank, (name, _) in enumerate(LAYERS):
        beside = rank > 0 and (LAYERS[rank - 1][0], name) in BESIDE
        result.append(result[-1] if beside else (result[-1] + 1 if result else 0))
    return result


HEIGHT = heights()


def layer_of(path):
    for rank, (name, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatch(path, p) for p in patterns):
            return rank
    return None


def sources(root):
    for folder, _, files in os.walk(root):
        relative = os.path.relpath(folder, root)
        if relative.split(os.sep)[0] in (".git", ".cache", "node_modules") or relative.startswith("build"):
            continue
        for name in files:
            if name.endswith(SOURCE):
                yield os.path.normpath(os.path.join(relative, name)).replace(os.sep, "/")


def component_cycles(includes):
    """Groups of components ("dir/name" of name.h and name.cpp) that include each other, however
    indirectly (strongly connected components of more than one), each as a message."""
    graph = {}
    for path, targets in includes.items():
        here = os.path.splitext(path)[0]
        graph.setdefault(here, set()).update(os.path.splitext(t)[0] for t in targets if os.path.splitext(t)[0] != here)
    index, low, on_stack, stack, groups = {}, {}, set(), [], []

    def connect(node):  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(tuple(sorted(group)))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [f"components include each other: {', '.join(g)}" for g in sorted(groups)]


def check(root):
    """(upward includes and component cycles as messages, {(from layer, to layer): count}, files
    with no layer)."""
    upward, edges, unplaced, includes = [], {}, [], {}
    for path in sorted(sources(root)):
        if any(fnmatch.fnmatch(path, p) for p in ON_TOP):
            continue
        here = layer_of(path)
        if here is None:
            unplaced.append(path)
            continue
        with open(os.path.join(root, path), errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                there = layer_of(m.group(1))
                if there is None:
                    continue  # a header beside the file, or a generated one
                includes.setdefault(path, []).append(m.group(1))
                edges[(here, there)] = edges.get((here, there), 0) + 1
                if HEIGHT[there] > HEIGHT[here] or (HEIGHT[there] == HEIGHT[here] and there != here):
                    where = "beside" if HEIGHT[there] == HEIGHT[here] else "above"
                    upward.append(f"{path}:{number}: includes \"{m.group(1)}\": layer {LAYERS[here][0]} "
                                  f"must not include layer {LAYERS[there][0]}, which is {where} it")
    return upward + component_cycles(includes), edges, unplaced


def missing_readmes(root):
    """Each layer's top-level folder says in a README.md what it holds and what it may include."""
    folders = sorted({pattern.split("/")[0] for _, patterns in LAYERS for pattern in patterns})
    return [f"{folder}/: no README.md (what the folder holds, what it may include)" for folder in folders
            if not os.path.isfile(os.path.join(root, folder, "README.md"))]


def graph(edges):
    lines = []
    for rank, (name, _) in enumerate(LAYERS):
        below = sorted({there for (here, there) in edges if here == rank and there != rank}, reverse=True)
        lines.append(f"{name:<14} -> " + (", ".join(LAYERS[t][0] for t in below) if below else "(nothing of megacpp's)"))
    return "\n".join(lines)


def self_test(root):
    upward, _, unplaced = check(root)
    if upward or unplaced:
        sys.exit("check_layers --self-test: this tree already fails:\n" + "\n".join(upward + unplaced))
    with tempfile.TemporaryDirectory() as scratch:
        for folder in ("parallel", "training"):
            shutil.copytree(os.path.join(root, folder), os.path.join(scratch, folder))
        planted = os.path.join(scratch, "parallel", "group.cpp")
        with open(planted, "a") as f:
            f.write('#include "training/trainer.h"\n')
        result = subprocess.run([sys.executable, __file__, "--root", scratch], capture_output=True, text=True)
        if result.returncode != 1 or "parallel/group.cpp:" not in result.stderr or \
                "layer parallel must not include layer training" not in result.stderr:
            sys.exit(f"check_layers --self-test: a planted upward include was not reported:\n{result.stdout}{result.stderr}")
        # An include between layers side by side: inference -> training.
        shutil.copy(os.path.join(root, "parallel", "group.cpp"), planted)
        shutil.copytree(os.path.join(root, "inference"), os.path.join(scratch, "inference"))
        with open(os.path.join(scratch, "inference", "answering.cpp"), "a") as f:
            f.write('#include "training/trainer.h"\n')
        result = subprocess.run([sys.executable, __file__, "--root", scratch], capture_output=True, text=True)
        if result.returncode != 1 or "layer inference must not include layer training, which is beside it" not in result.stderr:
            sys.exit(f"check_layers --self-test: a planted include beside was not reported:\n{result.stdout}{result.stderr}")
        shutil.rmtree(os.path.join(scratch, "inference"))
        # A cycle within one layer: argument_rules -> arguments -> argument_rules (what
        # settings/training_arguments.h removed).
        shutil.copy(os.path.join(root, "parallel", "group.cpp"), planted)
        shutil.copytree(os.path.join(root, "settings"), os.path.join(scratch, "settings"))
        with open(os.path.join(scratch, "settings", "argument_rules.cpp"), "a") as f:
            f.write('#include "settings/arguments.h"\n')
        result = subprocess.run([sys.executable, __file__, "--root", scratch], capture_output=True, text=True)
        if result.returncode != 1 or "components include each other: settings/argument_rules, settings/arguments" \
                not in result.stderr or "must not include" in result.stderr:
            sys.exit(f"check_layers --self-test: a planted cycle was not reported:\n{result.stdout}{result.stderr}")
    print("check_layers --self-test: the tree passes; a planted parallel -> training include, a planted "
          "inference -> training include (side by side) and a planted cycle (argument_rules <-> arguments) fail")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    p.add_argument("--graph", action="store_true", help="print which layers each layer includes")
    p.add_argument("--self-test", action="store_true")
    a = p.parse_args()
    if a.self_test:
        return self_test(a.root)
    upward, edges, unplaced = check(a.root)
    upward += missing_readmes(a.root)
    if a.graph:
        print(graph(edges))
    for path in unplaced:
        print(f"{path}: in no layer: add it to scripts/check_layers.py's LAYERS", file=sys.stderr)
    for message in upward:
        print(message, file=sys.stderr)
    if upward or unplaced:
        sys.exit(1)


if __name__ == "__main__":
    main()
