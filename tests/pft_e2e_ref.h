/* pft_e2e_ref: accuracies of an independent reference (scikit-learn, tests/ref_logreg.py) on a run's own data
 * files, for end-to-end checks with bounds derived from a reference instead of "better than chance". */
#ifndef PFT_E2E_REF_H
#define PFT_E2E_REF_H

#include "pft_test.h"

#include <stdio.h>
#include <string.h>

/* For each of the n groups (comma-separated node ids) the accuracy on <out>/eval_{x,y}.npy of scikit-learn's
 * LogisticRegression(C=1) trained on the group's raw rows (l2-scaled), into acc[i]. 0, or -1 when no python3
 * with numpy and scikit-learn is found (the caller skips with SKIP_TEST) or the script failed. */
static inline int pft_e2e_ref_logreg(const char *out, const char *const *groups, int n, double *acc)
{
    char cmd[4096];
    int len =
        snprintf(cmd, sizeof cmd,
                 "for p in python3 /usr/bin/python3; do if $p -c 'import numpy, sklearn' 2>/dev/null; then "
                 "exec $p %s/tests/ref_logreg.py %s",
                 PFT_SOURCE_DIR, out);
    for (int i = 0; i < n && len < (int)sizeof cmd; i++)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", groups[i]);
    if (len >= (int)sizeof cmd - 40)
        return -1;
    snprintf(cmd + len, sizeof cmd - (size_t)len, "; fi; done; exit 77");
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int got = 0;
    while (got < n && fscanf(p, "%lf", &acc[got]) == 1)
        got++;
    int st = pclose(p);
    return got == n && st == 0 ? 0 : -1;
}

/* Checks (pft_test.h's CHECK_MSG, SKIP_TEST) the global accuracy acc of node `id`, whose head stands for the
 * rows of every node in `all` (comma-separated): it beats the reference on id's own rows alone by ≥ gain (the
 * knowledge it received helps) and is at most 0.03 above the reference on all those rows (it cannot do much
 * better than a centralized model of the same rows). */
static inline void pft_e2e_ref_check_knowledge(const char *out, const char *id, const char *all, double acc,
                                               double gain)
{
    const char *groups[2] = {id, all};
    double ref[2];
    if (pft_e2e_ref_logreg(out, groups, 2, ref) != 0) {
        SKIP_TEST("no python3 with numpy and scikit-learn: the reference accuracies could not be computed");
        return;
    }
    CHECK_MSG(acc >= ref[0] + gain && acc <= ref[1] + 0.03,
              "%s: accuracy %.4f, scikit-learn on its own rows %.4f (+%.2f required), on all rows %.4f", id,
              acc, ref[0], gain, ref[1]);
    fprintf(stderr, "  %s: accuracy %.4f; scikit-learn: own rows %.4f, all rows (%s) %.4f\n", id, acc, ref[0],
            all, ref[1]);
}

#endif
