/* pft_membership: how well a score separates members (rows a bundle was fitted on) from non-members
 * (held-out rows of the same distribution): the rank-based AUC and the best threshold's balanced accuracy.
 *
 * Both take a score per row where a HIGHER score says "member" (negate a residual to use it). The AUC is
 * the Mann-Whitney statistic P(s_member > s_other) + ½ P(tie), exact (average ranks for ties). The best
 * threshold classifier predicts "member" when s > t for the t that maximises the balanced accuracy
 * ½ (TPR + TNR) over all cut points (chance is 0.5 whatever the sizes of the two sets); t is chosen on the
 * same rows it is scored on, as an attacker holding a labelled sample would, so it is an optimistic (upper)
 * estimate. */
#ifndef PFT_MEMBERSHIP_H
#define PFT_MEMBERSHIP_H

#include "pft_verdict.h"

/* Thresholds of the verdicts (docs/SECURITY.md §9). */
#define PFT_MEMBERSHIP_ACC_FAIL 0.9 /* best-threshold balanced accuracy ≥ this: membership decided */
#define PFT_MEMBERSHIP_ACC_WARN 0.6 /* > this: a membership signal */
#define PFT_MEMBERSHIP_AUC_FAIL 0.9 /* likelihood AUC ≥ this: FAIL */
#define PFT_MEMBERSHIP_AUC_WARN 0.6 /* ≥ this: WARN */

/* AUC of the scores (higher = member) of nm members and no others, into *auc. 0, or PFT_EINVAL (nm or no
 * < 1, a NaN score), PFT_ENOMEM. */
int pft_membership_auc(const double *member, int nm, const double *other, int no, double *auc);

/* The best threshold's balanced accuracy into *acc and the threshold into *cut (predict member when
 * score > *cut; ±INFINITY when predicting all one way is best). 0, or as pft_membership_auc. */
int pft_membership_best_accuracy(const double *member, int nm, const double *other, int no, double *acc,
                                 double *cut);

/* FAIL when acc ≥ PFT_MEMBERSHIP_ACC_FAIL, WARN when acc > PFT_MEMBERSHIP_ACC_WARN, else PASS. */
pft_verdict_t pft_membership_accuracy_verdict(double acc);
/* FAIL when auc ≥ PFT_MEMBERSHIP_AUC_FAIL, WARN when auc ≥ PFT_MEMBERSHIP_AUC_WARN, else PASS. */
pft_verdict_t pft_membership_auc_verdict(double auc);

#endif
