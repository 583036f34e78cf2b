#!/usr/bin/env python3
"""scripts/sft_demo.sh's breakdown of an exact-answer score by question: reads the held-out
conversations and megacpp-answer's output with every answer shown (--show N, N at least their
number) and prints, for each question, how many of its answers equal the reference.

    python3 scripts/sft_demo_by_question.py held_out.jsonl answers.txt
"""
import collections
import json
import re
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    questions = [json.loads(line)["instruction"] for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
    right = set()
    shown = re.compile(r':(\d+): "(.*)" \(reference "(.*)"\)$')
    for line in open(sys.argv[2], encoding="utf-8", errors="replace"):
        m = shown.search(line.rstrip("\n"))
        if m and m.group(2) == m.group(3):
            right.add(int(m.group(1)))
    total, correct = collections.Counter(questions), collections.Counter()
    for number, question in enumerate(questions, 1):
        correct[question] += number in right
    for question in sorted(total):
        print(f"  {question:50s} {correct[question]:4d} of {total[question]:4d} right")


if __name__ == "__main__":
    main()
