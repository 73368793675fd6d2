#!/usr/bin/python3
"""Seeds of masked statistics parts for corpus/bundle (docs/WIRE.md §2.2), written from the docs with
python3-msgpack: a tied masked part alone, beside a clear dense part, and a full one. Run from tests/fuzz/:
    /usr/bin/python3 make_masked_seeds.py corpus/bundle
Files are named by the SHA-1 of their bytes, as libFuzzer names its corpus."""
import hashlib
import os
import struct
import sys

import msgpack


def words(n, k):
    return b"".join(struct.pack("<Q", (0x0102030405060708 * (i + k + 1)) & (2**64 - 1)) for i in range(n))


def f32(vals):
    return b"".join(struct.pack("<f", v) for v in vals)


def envelope(payload):
    return msgpack.packb(["PFTB", 1, msgpack.packb(payload, use_bin_type=True), None], use_bin_type=True)


def masked(kind, who, classes, d, opener="z", bound=12, div=0):
    tri = d * (d + 1) // 2
    cl = []
    for i, (label, n) in enumerate(classes):
        e = [label, n, words(d, i)]
        if kind == 0:
            e.append(words(tri, 10 + i))
        cl.append(e)
    shared = None if kind == 0 else words(tri, 20)
    return [kind, who, cl, shared, [opener + ":tied", opener, 32, bound, div]]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "corpus/bundle"
    d = 2
    prov_ab = [["a", [[0, 2], [2, 1]]], ["b", [[0, 1], [2, 1]]]]
    seeds = [
        ["run", "b", 0, 1, d, [], prov_ab, [], [masked(1, ["a", "b"], [(0, 3), (1, 0), (2, 2)], d)]],
        ["run", "c", 0, 1, d, [], prov_ab + [["c", [[1, 4]]]], [],
         [masked(1, ["a", "b"], [(0, 3), (1, 0), (2, 2)], d, div=5),
          [1, ["c"], [[1, 4, f32([0.25, 0.5])]], f32([0.1, 0.0, 0.2])]]],
        ["run", "a", 0, 0, d, [], [["a", [[7, 4]]]], [], [masked(0, ["a"], [(1, 0), (7, 4)], d, bound=8)]],
    ]
    write_seeds(out, seeds, "masked")


def write_seeds(out, payloads, what):
    """Each payload in an envelope, into out, named by the SHA-1 of its bytes (make_evidence_seeds.py too)."""
    for p in payloads:
        b = envelope(p)
        with open(os.path.join(out, hashlib.sha1(b).hexdigest()), "wb") as f:
            f.write(b)
    print(f"{len(payloads)} {what} seeds into {out}")


if __name__ == "__main__":
    main()
