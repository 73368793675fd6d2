/* pft_membership: AUC and best-threshold accuracy of a membership score (higher = member). */
#include "pft_membership.h"

#include "pft_alloc.h"
#include "pft_error.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    double s;
    int member;
} scored_t;

static int cmp_scored(const void *a, const void *b)
{
    double x = ((const scored_t *)a)->s, y = ((const scored_t *)b)->s;
    return (x > y) - (x < y);
}

/* Both lists in one array sorted ascending by score, into *out: 0 or an error (message set). */
static int sorted(const double *member, int nm, const double *other, int no, scored_t **out)
{
    *out = NULL;
    if (nm < 1 || no < 1)
        return pft_err(PFT_EINVAL, "membership: %d members and %d others (need ≥ 1 each)", nm, no);
    scored_t *a = pft_alloc_array((size_t)nm + (size_t)no, sizeof *a);
    if (!a)
        return pft_err(PFT_ENOMEM, "membership: out of memory for %d scores", nm + no);
    for (int i = 0; i < nm + no; i++) {
        a[i].member = i < nm;
        a[i].s = i < nm ? member[i] : other[i - nm];
        if (isnan(a[i].s)) {
            pft_free(a);
            return pft_err(PFT_EINVAL, "membership: score %d is NaN", i);
        }
    }
    qsort(a, (size_t)nm + (size_t)no, sizeof *a, cmp_scored);
    *out = a;
    return 0;
}

int pft_membership_auc(const double *member, int nm, const double *other, int no, double *auc)
{
    scored_t *a;
    int rc = sorted(member, nm, other, no, &a);
    if (rc)
        return rc;
    int n = nm + no;
    double rank_sum = 0; /* of the members, ranks 1..n, ties at their average rank */
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && a[j].s == a[i].s)
            j++;
        double avg = 0.5 * ((double)(i + 1) + (double)j);
        for (int k = i; k < j; k++)
            rank_sum += a[k].member ? avg : 0;
        i = j;
    }
    *auc = (rank_sum - 0.5 * (double)nm * (nm + 1.0)) / ((double)nm * (double)no);
    pft_free(a);
    return 0;
}

int pft_membership_best_accuracy(const double *member, int nm, const double *other, int no, double *acc,
                                 double *cut)
{
    scored_t *a;
    int rc = sorted(member, nm, other, no, &a);
    if (rc)
        return rc;
    int n = nm + no, below_m = 0, below_o = 0; /* rows at or below the cut (predicted non-member) */
    *acc = 0.5;                                /* everything predicted member: TPR 1, TNR 0 */
    *cut = -INFINITY;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && a[j].s == a[i].s)
            j++;
        for (int k = i; k < j; k++)
            a[k].member ? below_m++ : below_o++;
        double b = 0.5 * ((double)(nm - below_m) / nm + (double)below_o / no);
        if (b > *acc) {
            *acc = b;
            *cut = j < n ? 0.5 * (a[i].s + a[j].s) : INFINITY;
        }
        i = j;
    }
    pft_free(a);
    return 0;
}

pft_verdict_t pft_membership_accuracy_verdict(double acc)
{
    return acc >= PFT_MEMBERSHIP_ACC_FAIL  ? PFT_VERDICT_FAIL
           : acc > PFT_MEMBERSHIP_ACC_WARN ? PFT_VERDICT_WARN
                                           : PFT_VERDICT_PASS;
}

pft_verdict_t pft_membership_auc_verdict(double auc)
{
    return auc >= PFT_MEMBERSHIP_AUC_FAIL   ? PFT_VERDICT_FAIL
           : auc >= PFT_MEMBERSHIP_AUC_WARN ? PFT_VERDICT_WARN
                                            : PFT_VERDICT_PASS;
}
