"""ref_logreg: the independent reference for the end-to-end accuracy checks (scikit-learn, not pftnet's code).

Usage: ref_logreg.py OUT GROUP [GROUP ...], GROUP a comma-separated list of node ids. For each group, prints the
accuracy on OUT/eval_{x,y}.npy of scikit-learn's LogisticRegression(C=1) trained on the union of the group's
rows OUT/<id>/data/train_{x,y}.npy, every row scaled to unit norm (prep = l2): the softmax head pftnode trains
(L2 penalty 1/2·‖W‖², intercept unpenalised) on real rows only. One line per group, in order."""
import sys

import numpy as np
from sklearn.linear_model import LogisticRegression


def rows(path):
    x = np.load(path).astype(np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


out = sys.argv[1]
ex, ey = rows(f"{out}/eval_x.npy"), np.load(f"{out}/eval_y.npy")
for group in sys.argv[2:]:
    ids = group.split(",")
    x = np.concatenate([rows(f"{out}/{i}/data/train_x.npy") for i in ids])
    y = np.concatenate([np.load(f"{out}/{i}/data/train_y.npy") for i in ids])
    model = LogisticRegression(C=1.0, max_iter=10000, tol=1e-8).fit(x, y)
    print(f"{(model.predict(ex) == ey).mean():.10f}")
