#!/usr/bin/python3
"""make_topo_seeds: seed topologies for the topology fuzzer: the shipped configs/*.dot, tests/fixtures/*.dot,
and every DOT text written as a C string in tests/test_topo.c (adjacent literals joined, the SIM macro
expanded), valid and invalid alike. Usage: /usr/bin/python3 tests/fuzz/make_topo_seeds.py OUTDIR"""
import glob
import os
import re
import shutil
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MACROS = {"SIM": 'dataset="."; '}
TOKEN = re.compile(r'"((?:[^"\\\n]|\\.)*)"|\b(SIM)\b|(\s+)|(.)', re.S)


def unescape(s):
    out, i = [], 0
    table = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "0": "\0", "r": "\r"}
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            out.append(table.get(s[i + 1], s[i + 1]))
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def strings(text):
    """Runs of adjacent string literals (and SIM) in C source."""
    run, runs = [], []
    for m in TOKEN.finditer(text):
        if m.group(1) is not None:
            run.append(unescape(m.group(1)))
        elif m.group(2):
            run.append(MACROS[m.group(2)])
        elif m.group(3):
            continue
        else:
            if run:
                runs.append("".join(run))
            run = []
    return runs


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for p in sorted(glob.glob(os.path.join(ROOT, "configs", "*.dot")) +
                    glob.glob(os.path.join(ROOT, "tests", "fixtures", "*.dot"))):
        shutil.copy(p, os.path.join(out, os.path.basename(p)))
    src = open(os.path.join(ROOT, "tests", "test_topo.c"), encoding="utf-8").read()
    # drop comments so that commented-out quotes do not confuse the tokenizer
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    src = re.sub(r"//[^\n]*", " ", src)
    n = 0
    for s in strings(src):
        if "graph" in s and "{" in s:
            with open(os.path.join(out, "test_topo_%03d.dot" % n), "w", encoding="utf-8") as f:
                f.write(s)
            n += 1
    print("%d texts from test_topo.c" % n)


if __name__ == "__main__":
    main()
