#!/usr/bin/env python3
"""long_functions: lists the C functions longer than --max lines (default 80, docs/STYLE.md: "no function over
80 lines outside declarative tables"), counted from the first line of the signature to the closing brace, less the
lines of initialiser tables inside them (a line ending in "= {" to its "};"). Reads clang-formatted code,
where a function's braces stand alone in column 0. Exit 1 if it lists any.

usage: python3 tests/long_functions.py [--max 80] [--exclude DIR]... DIR|FILE...
e.g.   python3 tests/long_functions.py core wire topology node --exclude node/peer"""
import argparse
import os
import re
import sys


def table_lines(body):
    """Lines of body inside initialiser tables (opening line to its closing "};", both counted)."""
    n, depth_indent = 0, None
    for line in body:
        if depth_indent is None and line.rstrip().endswith("= {"):
            depth_indent = len(line) - len(line.lstrip())
        if depth_indent is not None:
            n += 1
            if line.strip() == "};" and len(line) - len(line.lstrip()) == depth_indent:
                depth_indent = None
    return n


def functions(path):
    """(name, first line, lines, lines outside tables) of every function of path."""
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i] == "{":
            j = i  # back to the first line of the signature
            while j > 0 and lines[j - 1].strip() and not lines[j - 1].startswith(("}", "#", "/*", " *", "//")) \
                    and not lines[j - 1].rstrip().endswith((";", "*/")):
                j -= 1
            k = i + 1
            while k < len(lines) and lines[k] != "}":
                k += 1
            m = re.search(r"(\w+)\s*\(", " ".join(lines[j:i]))
            total = k - j + 1
            yield (m.group(1) if m else "?"), j + 1, total, total - table_lines(lines[i:k])
            i = k
        i += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max", type=int, default=80)
    ap.add_argument("--exclude", action="append", default=[])
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    excluded = [os.path.normpath(e) for e in a.exclude]
    files = []
    for root in a.paths:
        if os.path.isfile(root):
            files.append(root)
        for d, _, fs in os.walk(root):
            files += [os.path.join(d, f) for f in sorted(fs) if f.endswith(".c")]
    found = 0
    for p in files:
        if any(os.path.normpath(p).startswith(e + os.sep) for e in excluded):
            continue
        for name, line, total, own in functions(p):
            if own > a.max:
                print("%4d lines (%d outside tables)  %s:%d  %s" % (total, own, p, line, name))
                found += 1
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
