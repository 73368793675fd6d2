/* pft_audit_internal: shared by pft_audit.c and pft_audit_span.c only.
 * Files, from the bottom up (a file calls only files above it in this list, never one below):
 *   pft_audit_span.c  the rows of a label set; the subspace and vertex attacks on one part
 *   pft_audit.c       every attack on one bundle, the verdicts */
#ifndef PFT_AUDIT_INTERNAL_H
#define PFT_AUDIT_INTERNAL_H

#include "pft_audit.h"
#include "pft_gstat.h"

/* pft_audit_span.c */
/* Rows of a (label set): a new buffer of the rows whose label st has (st NULL: all), count in *m; NULL with
 * *m = 0 when none (or out of memory: *oom = 1). label c ≥ 0: only that label. */
float *pft_audit__gather(const pft_audit_rows_t *r, const pft_gstat_t *st, int c, int *m, int *oom);

/* The subspace and vertex attacks on one part st (its contributors named in name) → a JSON entry appended to
 * sub_parts and vx_parts, verdicts worsened into *vs and *vv; with a low-rank factor (d×q, the part's
 * shared covariance as it travelled; NULL: none), both attacks again on span(the class means) (the
 * baseline: what the means alone reveal) and on S = span(its columns, the class means), which holds what
 * the factor reveals of the rows' span. 0 or an error. */
int pft_audit__span(const pft_gstat_t *st, const double *factor, int q, const char *name,
                    const pft_audit_rows_t *own, const pft_audit_rows_t *held, const pft_audit_opts_t *o,
                    json_t *sub_parts, json_t *vx_parts, pft_verdict_t *vs, pft_verdict_t *vv);

#endif
