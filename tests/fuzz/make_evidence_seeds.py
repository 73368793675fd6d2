#!/usr/bin/python3
"""Seeds of provenance evidence for corpus/bundle (docs/WIRE.md §2 element 6, §2.5), written from the docs
with python3-msgpack: a GMM bundle with a fingerprint whose two contributors' evidence shares one α grid
(11 elements, tallies of 24 bytes) and one whose grids differ (10 elements, tallies of 32 bytes). Run from
tests/fuzz/:
    /usr/bin/python3 make_evidence_seeds.py corpus/bundle
Files are named by the SHA-1 of their bytes, as libFuzzer names its corpus."""
import struct
import sys

from make_masked_seeds import write_seeds


def evidence(against, tallies, with_alpha):
    b = struct.pack("<Q", against)
    for alpha, right, scored, loss in tallies:
        b += (struct.pack("<d", alpha) if with_alpha else b"") + struct.pack("<QQd", right, scored, loss)
    return b


def payload(grids):
    d = 2
    tallies = [[(a, r, 10, 10.0 - r) for a, r in zip(g, (3, 7, 9))] for g in grids]
    shared = grids[0] == grids[1]
    prov = [["a", [[0, 10]], None, evidence(10, tallies[0], not shared)],
            ["b", [[0, 20]], None, evidence(30, tallies[1], not shared)]]
    cls = [0, 30, 1, 1, struct.pack("<d", 1.0), struct.pack("<2f", 0.5, -0.5), struct.pack("<2f", 0.1, 0.2)]
    fp = [bytes(range(32)), [["k", bytes(8)], ["node:a", bytes([1] * 8)]]]
    p = ["run", "b", 0, 1, d, [], prov, [cls], [], fp]
    if shared:
        p.append(b"".join(struct.pack("<d", a) for a in grids[0]))
    return p


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "corpus/bundle"
    seeds = [payload([(0.0, 0.1, 0.5), (0.0, 0.1, 0.5)]), payload([(0.0, 0.2, 0.5), (0.0, 0.1, 0.5)])]
    write_seeds(out, seeds, "evidence")


if __name__ == "__main__":
    main()
