/* pft_audit: every attack of `pftnet audit` on one decoded bundle, with a verdict each and overall
 * (docs/SECURITY.md §9): subspace membership and vertex (LP) reconstruction per part (a GMM bundle is one
 * part: the exact moments of its mixtures), nearest-row re-identification of every released mean, and the
 * likelihood membership AUC against held-out rows, and the zero-support test (pft_zerosupport.h). The result
 * is one JSON object (the `--json` output). */
#ifndef PFT_AUDIT_H
#define PFT_AUDIT_H

#include "pft_bundle.h"
#include "pft_verdict.h"

#include <jansson.h>
#include <stdint.h>

/* Labelled rows (borrowed), n×d row-major, already preprocessed as the run's prep. n = 0: none. */
typedef struct {
    const float *x;
    const int32_t *y;
    int n, d;
} pft_audit_rows_t;

typedef struct {
    int n_lp;      /* vertex attack: linear programs per part (≥ 1) */
    uint64_t seed; /* their random objectives */
    double ridge;  /* likelihood of statistics: ridge × tr(C)/d added to the class covariance C's diagonal */
    double mean_noise; /* zero-support / bound test: the noise std on each contributor's class sums
                          (mean_noise) */
} pft_audit_opts_t;

#define PFT_AUDIT_RIDGE_DEFAULT 1e-3

/* The default of the topology attribute mean_noise (topology/pft_topo_attr.c), which the audit assumes. */
#define PFT_AUDIT_MEAN_NOISE_DEFAULT 0.05

/* Defaults: PFT_VERTEX_LP_DEFAULT programs, seed 1, ridge PFT_AUDIT_RIDGE_DEFAULT, mean_noise
 * PFT_AUDIT_MEAN_NOISE_DEFAULT. */
void pft_audit_opts_default(pft_audit_opts_t *o);

/* Attacks b with the producer's own rows (members) and held-out rows (non-members; n = 0: the membership
 * accuracy and AUC are not measured). *out: a new JSON object {"kind", "d", "classes": [...], "summary":
 * {...}, "attacks": {"subspace", "vertex", "nearest", "likelihood", "zero_support"}, "verdict",
 * "exact_leak"}; *verdict: the worst attack's. 0, or PFT_EINVAL (dimensions differ from the bundle's),
 * PFT_ENOMEM, PFT_ENUMERIC (message set). */
int pft_audit_run(const pft_bundle_t *b, const pft_audit_rows_t *own, const pft_audit_rows_t *held,
                  const pft_audit_opts_t *o, json_t **out, pft_verdict_t *verdict);

#endif
