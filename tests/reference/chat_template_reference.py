#!/usr/bin/env python3
"""Reference renderings for tests/io/test_jinja.cpp: Jinja templates rendered by jinja2 (Debian's
python3-jinja2) set up as transformers' apply_chat_template sets it up: a sandboxed environment
with trim_blocks and lstrip_blocks, the loop controls (break, continue), {% generation %} blocks
rendered as their body, a tojson filter that is json.dumps(ensure_ascii=False), and the globals
raise_exception and strftime_now.

Usage: chat_template_reference.py IN.json OUT.json
  IN.json:  a JSON array of {"template": TEXT, "variables": OBJECT}
  OUT.json: a JSON array with, per case, {"text": RENDERED} or {"error": MESSAGE}
"""
import datetime
import json
import sys

from jinja2 import nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    """{% generation %}...{% endgeneration %}: the body as it is."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def raise_exception(message):
    raise TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.datetime.now().strftime(format)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    with open(argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    results = []
    for case in cases:
        try:
            results.append({"text": env.from_string(case["template"]).render(**case["variables"])})
        except Exception as e:  # noqa: BLE001 - every failure is a result to compare
            results.append({"error": f"{type(e).__name__}: {e}"})
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
