#!/usr/bin/env python3
"""walk: how far a peer function reaches, followed as data through node/peer/*.c.

    python3 bench/walk.py [SRC_DIR] [ENTRY_FILE:FUNCTION]   (default: node/peer, pft_node_exact.c:refit)

From the entry, every function of node/peer it calls or hands on (a function named as a value, e.g. a loop
condition or a table entry), and through an ops table (x->name(...)) every function some table sets as
.name = f, transitively. Prints, for the functions reached:
  rooms  - how many (distinct functions of node/peer),
  climbs - their call sites and hand-ons of another function reached (each one comes back up),
  returns - their return statements (the ways back up from a room),
  waits  - which of them wait: call pft_node__loop_until, or pft_transport_poll with a timeout other than 0
           (pft_node__loop_yield's poll(0), the yield of a long computation, is not a wait).
A lexical reading (comments and strings removed, functions found at brace depth 0), not a compiler's:
good for comparing two versions of the same code, not for exact call graphs of arbitrary C."""
import os
import re
import sys

src = sys.argv[1] if len(sys.argv) > 1 else "node/peer"
entry = sys.argv[2] if len(sys.argv) > 2 else "pft_node_exact.c:refit"
WAITS = (r"\bpft_node__loop_until\s*\(", r"\bpft_transport_poll\s*\([^,]*,(?!\s*0\s*\))")


def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\])*'", "''", text)


funcs = {}  # (file, name) -> body
members = {}  # ops member name -> set of (file, name) assigned to it
for f in sorted(os.listdir(src)):
    if not f.endswith(".c"):
        continue
    text = strip(open(os.path.join(src, f)).read())
    depth, i, start = 0, 0, None
    for m in re.finditer(r"[{}]", text):
        if m.group() == "{":
            if depth == 0:
                head = text[max(0, m.start() - 400):m.start()]
                h = re.search(r"(\w+)\s*\(([^()]|\([^()]*\))*\)\s*$", head)
                start = (h.group(1), m.end()) if h and "=" not in head[head.rfind(";") + 1:] else None
            depth += 1
        else:
            depth -= 1
            if depth == 0 and start:
                funcs[(f, start[0])] = text[start[1]:m.start()]
                start = None
    for m in re.finditer(r"\.(\w+)\s*=\s*&?(\w+)\s*[,}]", text):
        members.setdefault(m.group(1), set()).add((f, m.group(2)))

names = {}
for f, n in funcs:
    names.setdefault(n, []).append(f)


def resolve(f, n):
    if (f, n) in funcs:
        return (f, n)
    if n.startswith("pft_node") and n in names:
        return (names[n][0], n)
    return None


ef, en = entry.split(":")
seen, todo, climbs, returns, waits = set(), [(ef, en)], 0, 0, []
while todo:
    fn = todo.pop()
    if fn in seen or fn not in funcs:
        continue
    seen.add(fn)
    body = funcs[fn]
    returns += len(re.findall(r"\breturn\b", body))
    if any(re.search(w, body) for w in WAITS):
        waits.append("%s:%s" % fn)
    for m in re.finditer(r"(->|\.)?\b(\w+)\b(\s*\()?", body):
        arrow, n, call = m.group(1), m.group(2), m.group(3)
        if arrow and call:  # through an ops table: every function set as .n
            for g in sorted(members.get(n, ())):
                g = resolve(*g)
                if g:
                    climbs += 1
                    todo.append(g)
            continue
        if arrow:
            continue
        g = resolve(fn[0], n)
        if g and g != fn:
            climbs += 1
            todo.append(g)
print("%s: rooms %d, climbs %d, returns %d, waits %d%s" % (entry, len(seen), climbs, returns, len(waits),
                                                          (" (" + ", ".join(sorted(waits)) + ")") if waits else ""))
