/* pft_e2e_ref: accuracies of an independent reference (scikit-learn, tests/ref_logreg.py) on a run's own data
 * files, for end-to-end checks with bounds derived from a reference instead of "better than chance". */
#ifndef PFT_E2E_REF_H
#define PFT_E2E_REF_H

#include "pft_test.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

/* pft_e2e_ref_logreg's answer when no python3 with numpy and scikit-learn is found (the shell's exit 77). */
#define PFT_E2E_REF_NONE 1

/* For each of the n groups (comma-separated node ids) the accuracy on <out>/eval_{x,y}.npy of scikit-learn's
 * LogisticRegression(C=1) trained on the group's raw rows (l2-scaled), into acc[i]. 0; PFT_E2E_REF_NONE when
 * no python3 with numpy and scikit-learn is found (the only case a caller may skip); -1 when the script ran
 * and failed (a nonzero exit or fewer than n accuracies): a failure of the test, never a skip. */
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
    /* the script's own exit status never is 77: a status above 1 is an uncaught signal or an error of python
     */
    snprintf(cmd + len, sizeof cmd - (size_t)len, "; fi; done; exit 77");
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int got = 0;
    while (got < n && fscanf(p, "%lf", &acc[got]) == 1)
        got++;
    int st = pclose(p);
    if (got == 0 && st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 77)
        return PFT_E2E_REF_NONE;
    return got == n && st == 0 ? 0 : -1;
}

/* pft_e2e_ref_logreg with its outcome reported (pft_test.h): 1 when acc holds the n accuracies; else 0, after
 * SKIP_TEST when no python3 with numpy and scikit-learn is found, after a failed check when the script
 * failed. */
static inline int pft_e2e_ref_logreg_or_report(const char *out, const char *const *groups, int n, double *acc)
{
    int rc = pft_e2e_ref_logreg(out, groups, n, acc);
    if (rc == PFT_E2E_REF_NONE)
        SKIP_TEST("no python3 with numpy and scikit-learn: the reference accuracies could not be computed");
    CHECK_MSG(rc != -1, "the scikit-learn reference (tests/ref_logreg.py) failed on %s (its stderr above)",
              out);
    return rc == 0;
}

/* Checks (pft_test.h's CHECK_MSG; SKIP_TEST only without scikit-learn) the global accuracy acc of node `id`,
 * whose head stands for the rows of every node in `all` (comma-separated): it beats the reference on id's own
 * rows alone by ≥ gain (the knowledge it received helps) and is at most 0.03 above the reference on all those
 * rows (it cannot do much better than a centralized model of the same rows). */
static inline void pft_e2e_ref_check_knowledge(const char *out, const char *id, const char *all, double acc,
                                               double gain)
{
    const char *groups[2] = {id, all};
    double ref[2];
    if (!pft_e2e_ref_logreg_or_report(out, groups, 2, ref))
        return;
    CHECK_MSG(acc >= ref[0] + gain && acc <= ref[1] + 0.03,
              "%s: accuracy %.4f, scikit-learn on its own rows %.4f (+%.2f required), on all rows %.4f", id,
              acc, ref[0], gain, ref[1]);
    fprintf(stderr, "  %s: accuracy %.4f; scikit-learn: own rows %.4f, all rows (%s) %.4f\n", id, acc, ref[0],
            all, ref[1]);
}

#endif
