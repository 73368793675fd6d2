#!/usr/bin/python3
"""Seeds of secure aggregation's control messages for corpus/bundle (docs/WIRE.md §2.3), written from the docs
with python3-msgpack: a declaration (MISSING), a reveal and a done notice, unsigned. Run from tests/fuzz/:
    /usr/bin/python3 make_secmsg_seeds.py corpus/bundle
Files are named by the SHA-1 of their bytes, as libFuzzer names its corpus."""
import hashlib
import os
import sys

import msgpack


def envelope(payload):
    return msgpack.packb(["PFTB", 1, msgpack.packb(payload, use_bin_type=True), None], use_bin_type=True)


SEEDS = [
    ["secagg", 1, "run", "s:tied", "s", ["c3"], ["c1", "c2", "c4"]],
    ["secagg", 2, "run", "s:tied", "c1", ["c3", "c5"], [bytes(range(32)), bytes(range(32, 64))]],
    ["secagg", 3, "run", "s:tied", "s", [], []],
]

if __name__ == "__main__":
    out = sys.argv[1]
    for seed in SEEDS:
        b = envelope(seed)
        with open(os.path.join(out, hashlib.sha1(b).hexdigest()), "wb") as f:
            f.write(b)
