#!/usr/bin/env python3
"""Instruction data from Debian's `fortunes` files: every fortune of the form "Q: ... A: ..."
(riddles, law, science, ...) becomes one JSONL example {"prompt": "Q: question\\nA:",
"completion": " answer"}, whitespace runs folded to one space. What the README's fine-tuning
example trains a LoRA adapter on.

    fortunes_qa.py [FORTUNES_DIR] > qa.jsonl      (default /usr/share/games/fortunes)
"""
import json
import os
import re
import sys


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/games/fortunes"
    seen, n = set(), 0
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if "." in name or not os.path.isfile(path):  # the plain files: not .dat indexes, not .u8 copies
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            entries = f.read().split("\n%\n")
        for e in entries:
            m = re.match(r"\s*Q:\s*(.+?)\n\s*A:\s*(.+)", e, re.S)
            if not m:
                continue
            q, a = (" ".join(part.split()) for part in m.groups())
            if not q or not a or len(q) + len(a) > 400 or (q, a) in seen:
                continue
            seen.add((q, a))
            print(json.dumps({"prompt": f"Q: {q}\nA:", "completion": f" {a}"}))
            n += 1
    print(f"{n} question-answer pairs from {root}", file=sys.stderr)


if __name__ == "__main__":
    main()
