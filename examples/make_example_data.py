#!/usr/bin/python3
"""make_example_data: writes examples/data/pacs-small, a small stratified float16 subset of the shared
PACS MobileNetV2 features, so that a fresh clone can run pftnet without the full data set.

Usage (from anywhere; needs numpy, e.g. Debian's python3-numpy):
    /usr/bin/python3 examples/make_example_data.py [--src DIR] [--out DIR] [--train-per-class 300]
                                                   [--test-per-class 100] [--seed 0]

For every class it draws, without replacement and with numpy.random.RandomState(seed), the requested
number of rows from the original train split and from the original test split, keeps them in their
original order, converts the features to float16 ('<f2') and labels/domains to int32, and writes
PROVENANCE.md with the facts of the source and the sha256 of every file written. The same source and
seed give byte-identical files.
"""
import argparse
import hashlib
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_SRC = os.path.join(REPO, "..", "shared", "data", "pacs-mobilenetv2")
DEFAULT_OUT = os.path.join(HERE, "data", "pacs-small")
CLASSES = ["dog", "elephant", "giraffe", "guitar", "horse", "house", "person"]
DOMAINS = ["art_painting", "cartoon", "photo", "sketch"]
MAX_TOTAL_BYTES = 8 * 1024 * 1024


def load(src, split):
    x = np.load(os.path.join(src, split + "_x.npy"), allow_pickle=False)
    y = np.load(os.path.join(src, split + "_y.npy"), allow_pickle=False)
    dom = np.load(os.path.join(src, split + "_domain.npy"), allow_pickle=False)
    with open(os.path.join(src, split + "_files.txt"), encoding="utf-8") as f:
        files = [line.rstrip("\n") for line in f]
    if not (x.ndim == 2 and len(x) == len(y) == len(dom) == len(files)):
        sys.exit("%s: inconsistent %s split: x %s, y %s, domain %s, files %d"
                 % (src, split, x.shape, y.shape, dom.shape, len(files)))
    if not np.all(np.isfinite(x)):
        sys.exit("%s: non-finite features in %s_x.npy" % (src, split))
    return x, y, dom, files


def stratified(y, per_class, rng):
    """Indices of per_class rows of every class, drawn without replacement, in original order."""
    picked = []
    for c in range(int(y.max()) + 1):
        rows = np.flatnonzero(y == c)
        if len(rows) < per_class:
            sys.exit("class %d has only %d rows, %d requested" % (c, len(rows), per_class))
        picked.append(rng.choice(rows, size=per_class, replace=False))
    return np.sort(np.concatenate(picked))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def counts(v, n):
    return " ".join(str(int(k)) for k in np.bincount(v, minlength=n))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=DEFAULT_SRC, help="source feature directory (default: %(default)s)")
    ap.add_argument("--out", default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    ap.add_argument("--train-per-class", type=int, default=300)
    ap.add_argument("--test-per-class", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-sanity", action="store_true",
                    help="skip the scikit-learn sanity figure in PROVENANCE.md (it takes ~15 s)")
    args = ap.parse_args()

    rng = np.random.RandomState(args.seed)
    os.makedirs(args.out, exist_ok=True)
    written = []
    summary = {}
    max_err = 0.0
    for split, per_class in (("train", args.train_per_class), ("test", args.test_per_class)):
        x, y, dom, files = load(args.src, split)
        idx = stratified(y, per_class, rng)
        x16 = np.ascontiguousarray(x[idx].astype("<f2"))
        max_err = max(max_err, float(np.max(np.abs(x16.astype(np.float32) - x[idx]))))
        arrays = {
            split + "_x.npy": x16,
            split + "_y.npy": np.ascontiguousarray(y[idx].astype("<i4")),
            split + "_domain.npy": np.ascontiguousarray(dom[idx].astype("<i4")),
        }
        for name, arr in arrays.items():
            path = os.path.join(args.out, name)
            np.save(path, arr, allow_pickle=False)
            written.append(name)
        with open(os.path.join(args.out, split + "_files.txt"), "w", encoding="utf-8") as f:
            f.writelines(files[i] + "\n" for i in idx)
        written.append(split + "_files.txt")
        summary[split] = (len(idx), x.shape[1], counts(y[idx], len(CLASSES)), counts(dom[idx], len(DOMAINS)),
                          len(y))

    total = sum(os.path.getsize(os.path.join(args.out, n)) for n in written)
    if total > MAX_TOTAL_BYTES:
        sys.exit("output is %d bytes, over the %d-byte budget" % (total, MAX_TOTAL_BYTES))
    sanity = None if args.no_sanity else sanity_figure(args.out)
    write_provenance(args, written, summary, total, max_err, sanity)
    print("wrote %d files, %d bytes in all, to %s" % (len(written) + 1, total, args.out))


def sanity_figure(out):
    """Test accuracy of scikit-learn's LogisticRegression on the subset, or None without scikit-learn."""
    try:
        import sklearn
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        return None
    ld = lambda n: np.load(os.path.join(out, n), allow_pickle=False)
    m = LogisticRegression(solver="lbfgs", C=1.0, max_iter=5000)
    m.fit(ld("train_x.npy").astype(np.float32), ld("train_y.npy"))
    acc = float(np.mean(m.predict(ld("test_x.npy").astype(np.float32)) == ld("test_y.npy")))
    return "scikit-learn %s LogisticRegression(lbfgs, C=1, max_iter=5000), raw features: %.1f %% test accuracy" % (
        sklearn.__version__, 100 * acc)


def write_provenance(args, written, summary, total, max_err, sanity):
    tr, te = summary["train"], summary["test"]
    lines = [
        "# pacs-small — a stratified float16 subset of the PACS MobileNetV2 features",
        "",
        "Example data for a fresh clone (the full features live outside the repository). Real features of real",
        "images, nothing synthesized: a subset of `../shared/data/pacs-mobilenetv2` (read its `PROVENANCE.md`;",
        "the relevant facts are copied below), made by `examples/make_example_data.py`.",
        "",
        "## Files",
        "",
        "| file | dtype | shape | meaning |",
        "| --- | --- | --- | --- |",
        "| train_x.npy | float16 (`<f2`), C-order | (%d, %d) | features |" % (tr[0], tr[1]),
        "| train_y.npy | int32 | (%d,) | class id 0..6 |" % tr[0],
        "| train_domain.npy | int32 | (%d,) | domain id 0..3 |" % tr[0],
        "| test_x.npy | float16 (`<f2`), C-order | (%d, %d) | features |" % (te[0], te[1]),
        "| test_y.npy | int32 | (%d,) | class id 0..6 |" % te[0],
        "| test_domain.npy | int32 | (%d,) | domain id 0..3 |" % te[0],
        "| train_files.txt / test_files.txt | text | one line per row | source image `domain/class/file` |",
        "",
        "NumPy format 1.0 (`np.save`, `allow_pickle=False`); %d bytes in all." % total,
        "",
        "Classes: " + ", ".join("%d %s" % (i, c) for i, c in enumerate(CLASSES)) + ".",
        "Domains: " + ", ".join("%d %s" % (i, d) for i, d in enumerate(DOMAINS)) + ".",
        "",
        "Counts per class — train: %s; test: %s." % (tr[2], te[2]),
        "Counts per domain — train: %s; test: %s." % (tr[3], te[3]),
        "",
        "## How it was made",
        "",
        "`/usr/bin/python3 examples/make_example_data.py --train-per-class %d --test-per-class %d --seed %d`"
        % (args.train_per_class, args.test_per_class, args.seed),
        "",
        "- From the original train split (%d rows) %d rows per class, and from the original test split (%d rows)"
        % (tr[4], args.train_per_class, te[4]),
        "  %d rows per class, drawn without replacement with `numpy.random.RandomState(%d)` (train first, then test,"
        % (args.test_per_class, args.seed),
        "  classes in order), kept in their original order. Train and test rows come from the original, disjoint",
        "  splits, so no image is in both. Domains are not stratified; their mix follows the source in expectation.",
        "- Features converted from float32 to float16 (round to nearest even): largest absolute change %.2e" % max_err,
        "  (features lie in [0, 6]). Labels and domains copied as int32.",
        "",
        "## Source (copied from the original PROVENANCE.md)",
        "",
        "- Images: PACS (Li et al., \"Deeper, Broader and Artier Domain Generalization\", ICCV 2017), 227x227,",
        "  from the public GitHub repository `MachineLearning2020/Homework3-PACS`, commit",
        "  `d586a6cf3db84896fb6cc465c7bf51bdaf6d65d8`, folder `PACS/<domain>/<class>/`.",
        "- Model: `mobilenet_v2_1.0_224_quant.tflite` (Google's ImageNet MobileNetV2, quantization-aware, uint8) from",
        "  `google-coral/test_data` (Apache-2.0), commit `104342d2d3480b3e66203073dac24f4e2dbb4c41`, sha256",
        "  `7aad0c74c5e3c06e5eb3c827e13304fdd68a83da6087d92ee169c24ff9fd4776`, dequantized and run in float32 with",
        "  per-tensor fake quantization.",
        "- Feature: the 1280-d output of the global 7x7 average pool over the last `Conv_1` layer (after ReLU6, so",
        "  values are ≥ 0 and ≤ 6), i.e. what MobileNetV2's linear ImageNet classifier reads.",
        "- Original split: 20% test, stratified by (domain, class), `numpy.random.RandomState(0)`.",
        "",
        "## Sanity figure",
        "",
        "- " + (sanity or "not computed (scikit-learn unavailable or --no-sanity)") + ".",
        "  The full data set gives 84.7 % (original PROVENANCE.md); chance is 14 %.",
        "",
        "## sha256",
        "",
        "```",
    ]
    lines += ["%s  %s" % (sha256(os.path.join(args.out, n)), n) for n in written]
    lines += ["```", ""]
    with open(os.path.join(args.out, "PROVENANCE.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
