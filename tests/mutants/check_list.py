#!/usr/bin/env python3
"""Every mutant of tests/mutants/mutants.txt still applies: its name is new, its keys are all there, and its
`from:` text occurs exactly once in its file (as tests/mutants/run.sh requires). A mutant whose text moved or
went stays in the list as BROKEN and tests nothing; the whole run (label long) is the only other place that
notices. Usage: check_list.py SOURCE_DIR [LIST]"""
import os
import sys


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 2 if len(sys.argv) not in (2, 3) else 0
    src = sys.argv[1]
    path = sys.argv[2] if len(sys.argv) == 3 else os.path.join(src, "tests/mutants/mutants.txt")
    names, bad, n = set(), [], 0
    for block in open(path).read().split("\n\n"):
        kv = {}
        for line in block.splitlines():
            if line and not line.startswith("#") and ": " in line:
                k, v = line.split(": ", 1)
                kv[k] = v
        if not kv:
            continue
        n += 1
        missing = [k for k in ("name", "file", "from", "to", "tests") if k not in kv]
        if missing:
            bad.append(f"{kv.get('name', '?')}: no {', '.join(missing)}")
            continue
        if kv["name"] in names:
            bad.append(f"{kv['name']}: the name is used twice")
        names.add(kv["name"])
        try:
            count = open(os.path.join(src, kv["file"])).read().count(kv["from"])
        except OSError as e:
            bad.append(f"{kv['name']}: {kv['file']}: {e.strerror}")
            continue
        if count != 1:
            bad.append(f"{kv['name']}: '{kv['from']}' occurs {count} times in {kv['file']} (must be once)")
    for b in bad:
        print("BROKEN", b)
    print(f"{n} mutants, {len(bad)} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
