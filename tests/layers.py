#!/usr/bin/env python3
"""layers: reads the symbols of the object files a build made (nm) and reports, for every product folder,
- the files that call each other: a circle, i.e. a strongly connected component of two files or more in the
  graph of calls between the folder's files (so longer cycles too, a -> b -> c -> a);
- where a header <stem>_internal.h of the folder lists files "from the bottom up" (node/peer/pft_node_internal.h
  does): every call from a listed file to one listed below it, and every file <stem>*.c the list leaves out;
- circles between the folders themselves.
It checks what the code does (the symbols each object defines and uses), not what its comments say.
Exit 1 if it reports anything.

usage: python3 tests/layers.py BUILD_DIR SOURCE_DIR"""
import fnmatch
import glob
import os
import re
import subprocess
import sys

FOLDERS = ["core", "wire", "topology", "node/common", "node/peer", "node/launch", "node/audit", "node/report",
           "node/pftnet"]
MARKER = "Files, from the bottom up"


def objects(build, source):
    """{source path relative to source: object path} for every object of the product folders."""
    found = {}
    for o in glob.glob(os.path.join(build, "**", "CMakeFiles", "*.dir", "**", "*.c.o"), recursive=True):
        rel = os.path.relpath(o, build).split(os.sep)
        i = rel.index("CMakeFiles")
        src = os.path.join(*rel[:i], *rel[i + 2:])[:-2]  # <dir>/CMakeFiles/<t>.dir/<sub>.c.o -> <dir>/<sub>.c
        folder = os.path.dirname(src)
        if folder in FOLDERS and os.path.exists(os.path.join(source, src)):
            found[src] = o  # a source gone since the build left its object behind: skipped
    return found


def symbols(obj):
    """(defined, undefined) global symbols of obj."""
    defs, uses = set(), set()
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDRBCV":
            defs.add(p[2])
        elif len(p) == 2 and p[0] == "U":
            uses.add(p[1])
    return defs, uses


def declared_orders(source, folder):
    """[(header, file patterns bottom first)] of every header of folder that lists its files after MARKER."""
    found = []
    for h in sorted(glob.glob(os.path.join(source, folder, "*.h"))):
        lines = open(h, encoding="utf-8").read().split("\n")
        start = next((i for i, l in enumerate(lines) if MARKER in l), None)
        if start is None:
            continue
        order = []
        for line in lines[start + 1:]:
            m = re.match(r"\s*\*\s{2,}(\S+\.c)\s", line + " ")
            if m:
                order.append(m.group(1)[:-2])
            elif order and (re.match(r"\s*\*\s?\S", line) or "*/" in line):
                break  # the list has ended (continuation lines are indented further)
        found.append((os.path.relpath(h, source), order))  # stem: the header's name less "_internal.h"
    return found


def sccs(nodes, edges):
    """Strongly connected components (Tarjan) of the graph, each a sorted list; only those of 2 nodes or more."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    succ = {v: sorted(g for f, g in edges if f == v) for v in nodes}

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def rank(order, f):
    for i, pat in enumerate(order):
        if fnmatch.fnmatch(f, pat):
            return i
    return None


def check_folder(source, folder, files, defs, uses):
    """Prints the circles and upward calls between the files of folder; returns how many."""
    owner = {}
    for f in files:
        for s in defs[f]:
            owner[s] = f
    edges = {(f, owner[s]) for f in files for s in uses[f] if s in owner and owner[s] != f}
    bad = 0
    for comp in sccs(files, edges):
        names = [os.path.basename(f) for f in comp]
        print("%s: circle between %s" % (folder, ", ".join(names)))
        for f, g in sorted(edges):
            if f in comp and g in comp:
                syms = sorted(s for s in uses[f] if owner.get(s) == g)
                print("    %s -> %s: %s" % (os.path.basename(f), os.path.basename(g), " ".join(syms[:6])))
        bad += 1
    orders = declared_orders(source, folder)
    for header, order in orders:
        if not order:
            print("%s: %s says \"%s\" but lists no file" % (folder, header, MARKER))
            bad += 1
        stem = os.path.basename(header)[: -len("_internal.h")] if header.endswith("_internal.h") else None
        for f in sorted(files):
            b = os.path.basename(f)[:-2]
            if stem and (b == stem or b.startswith(stem + "_")) and rank(order, b) is None:
                print("%s: %s.c is not in the list of %s" % (folder, b, header))
                bad += 1
        for f, g in sorted(edges):
            bf, bg = (os.path.basename(x)[:-2] for x in (f, g))
            rf, rg = rank(order, bf), rank(order, bg)
            if rf is not None and rg is not None and rg > rf:
                print("%s: upward call: %s (layer %d of %s) calls %s (layer %d)" % (folder, bf, rf, header, bg, rg))
                bad += 1
    print("%-12s %3d files, %3d calls between files, %2d files in %d layer lists, %d against the rules" %
          (folder, len(files), len(edges), sum(len(o) for _, o in orders), len(orders), bad))
    return bad, edges, owner


def main():
    build, source = sys.argv[1], sys.argv[2]
    objs = objects(build, source)
    if not objs:
        print("no objects of %s under %s" % (", ".join(FOLDERS), build))
        return 1
    defs, uses = {}, {}
    for src, o in objs.items():
        defs[src], uses[src] = symbols(o)
    bad, owner = 0, {}
    for folder in FOLDERS:
        files = [f for f in objs if os.path.dirname(f) == folder]
        if not files:
            print("%s: no objects" % folder)
            bad += 1
            continue
        n, _, own = check_folder(source, folder, files, defs, uses)
        bad += n
        owner.update(own)
    fedges = {(os.path.dirname(f), os.path.dirname(owner[s])) for f in objs for s in uses[f] if s in owner}
    fedges = {(a, b) for a, b in fedges if a != b}
    for comp in sccs(FOLDERS, fedges):
        print("circle between folders %s" % ", ".join(comp))
        bad += 1
    print("%d files in %d folders, %d against the rules" % (len(objs), len(FOLDERS), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
