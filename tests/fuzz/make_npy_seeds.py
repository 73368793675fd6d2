#!/usr/bin/python3
"""make_npy_seeds: writes the seed .npy files of the npy fuzzer with numpy itself (the reference writer):
every dtype pftnet reads, 1-D and 2-D, empty arrays, format versions 1.0, 2.0 and 3.0, and a few files
numpy writes but pftnet must refuse (big-endian, Fortran order, 3-D, unsupported dtype).
Usage: /usr/bin/python3 tests/fuzz/make_npy_seeds.py OUTDIR"""
import io
import os
import sys

import numpy as np


def save(outdir, name, arr, version=None):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=version, allow_pickle=False)
    with open(os.path.join(outdir, name + ".npy"), "wb") as f:
        f.write(buf.getvalue())


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    feats = rng.normal(size=(5, 4))
    for dt in ["<f2", "<f4", "<f8"]:
        save(out, "feat_%s_2d" % dt[1:], feats.astype(dt))
        save(out, "vec_%s_1d" % dt[1:], feats[:, 0].astype(dt))
    labels = np.array([0, 3, 1, 6, 2, 5, 4], dtype=np.int64)
    for dt in ["<i4", "<i8", "|u1"]:
        save(out, "labels_%s_1d" % dt[1:], labels.astype(dt))
        save(out, "labels_%s_col" % dt[1:], labels.astype(dt).reshape(-1, 1))
        save(out, "ints_%s_2d" % dt[1:], np.arange(12).reshape(3, 4).astype(dt))
    save(out, "labels_i8_big_values", np.array([2**31 - 1, -2**31, 2**31], dtype="<i8"))
    save(out, "empty_f4_2d", np.zeros((0, 3), dtype="<f4"))
    save(out, "empty_i4_1d", np.zeros((0,), dtype="<i4"))
    save(out, "special_f4", np.array([[0.0, -0.0, 1e-45, 3.4e38]], dtype="<f4"))
    save(out, "special_f8_overflow", np.array([1e300, 1.0], dtype="<f8"))
    save(out, "nan_f4", np.array([[1.0, np.nan]], dtype="<f4"))
    save(out, "inf_f2", np.array([np.inf], dtype="<f2"))
    save(out, "v2_f4_2d", feats.astype("<f4"), version=(2, 0))
    save(out, "v3_i4_1d", labels.astype("<i4"), version=(3, 0))
    # numpy writes these, pftnet refuses them
    save(out, "bad_big_endian_f4", feats.astype(">f4"))
    save(out, "bad_fortran_f4", np.asfortranarray(feats.astype("<f4")))
    save(out, "bad_3d_f4", np.zeros((2, 2, 2), dtype="<f4"))
    save(out, "bad_u2", np.arange(4, dtype="<u2"))
    save(out, "bad_scalar_f4", np.array(1.5, dtype="<f4"))


if __name__ == "__main__":
    main()
