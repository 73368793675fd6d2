/* pft_audit_span: the subspace membership and vertex (LP) attacks on one part of a bundle; the rows of a
 * label set. */
#include "pft_alloc.h"
#include "pft_audit_internal.h"
#include "pft_error.h"
#include "pft_membership.h"
#include "pft_subspace.h"
#include "pft_vertex.h"

#include <math.h>
#include <string.h>

float *pft_audit__gather(const pft_audit_rows_t *r, const pft_gstat_t *st, int c, int *m, int *oom)
{
    *m = 0;
    int d = r->d;
    for (int i = 0; i < r->n; i++)
        *m += c >= 0 ? r->y[i] == c : !st || pft_gstat_find(st, r->y[i]) >= 0;
    float *x = *m ? pft_alloc_array((size_t)*m * (size_t)d, sizeof *x) : NULL;
    if (!x) {
        *oom |= *m > 0;
        *m = 0;
        return NULL;
    }
    for (int i = 0, j = 0; i < r->n; i++)
        if (c >= 0 ? r->y[i] == c : !st || pft_gstat_find(st, r->y[i]) >= 0)
            memcpy(x + (size_t)j++ * d, r->x + (size_t)i * d, (size_t)d * sizeof *x);
    return x;
}

static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* min and max of v[n] into lo, hi (NaN when n = 0). */
static void range(const double *v, int n, double *lo, double *hi)
{
    *lo = n ? INFINITY : NAN;
    *hi = n ? -INFINITY : NAN;
    for (int i = 0; i < n; i++) {
        *lo = fmin(*lo, v[i]);
        *hi = fmax(*hi, v[i]);
    }
}

/* Residuals of members (xm, nm) and held-out rows (xh, nh) against s, the best threshold's accuracy: into e;
 * the verdict into *v. 0 or an error. */
static int membership(const pft_subspace_t *s, const float *xm, int nm, const float *xh, int nh, json_t *e,
                      pft_verdict_t *v)
{
    double *rm = pft_alloc_array((size_t)nm + 1, sizeof *rm),
           *rh = pft_alloc_array((size_t)nh + 1, sizeof *rh);
    int rc = !rm || !rh ? pft_err(PFT_ENOMEM, "subspace attack: out of memory") : 0;
    if (rc == 0)
        rc = pft_subspace_residuals(s, xm, nm, rm);
    if (rc == 0)
        rc = pft_subspace_residuals(s, xh, nh, rh);
    double mlo, mhi, hlo, hhi, acc = NAN, cut = NAN;
    range(rm, rc ? 0 : nm, &mlo, &mhi);
    range(rh, rc ? 0 : nh, &hlo, &hhi);
    int proper = pft_subspace_proper(s), contained = proper && nm > 0 && mhi < PFT_SUBSPACE_EXACT;
    for (int i = 0; rc == 0 && i < nm; i++) /* higher = member: the negated residual */
        rm[i] = -rm[i];
    for (int i = 0; rc == 0 && i < nh; i++)
        rh[i] = -rh[i];
    if (rc == 0 && proper && nm > 0 && nh > 0) {
        rc = pft_membership_best_accuracy(rm, nm, rh, nh, &acc, &cut);
        cut = -cut;
    }
    *v = !proper            ? PFT_VERDICT_PASS
         : nh > 0 && nm > 0 ? pft_membership_accuracy_verdict(acc)
         : contained        ? PFT_VERDICT_FAIL
                            : PFT_VERDICT_PASS;
    json_object_set_new(e, "member_rows", json_integer(nm));
    json_object_set_new(e, "member_residual_min", num(mlo));
    json_object_set_new(e, "member_residual_max", num(mhi));
    json_object_set_new(e, "holdout_rows", json_integer(nh));
    json_object_set_new(e, "holdout_residual_min", num(hlo));
    json_object_set_new(e, "holdout_residual_max", num(hhi));
    json_object_set_new(e, "accuracy", num(acc));
    json_object_set_new(e, "threshold", num(cut));
    json_object_set_new(e, "contained", json_boolean(contained));
    json_object_set_new(e, "verdict", json_string(pft_verdict_name(*v)));
    pft_free(rm);
    pft_free(rh);
    return rc;
}

/* The vertex attack on s with the members as the oracle: one JSON entry (name) into parts. */
static int vertex(const pft_subspace_t *s, const char *name, const float *xm, int nm,
                  const pft_audit_opts_t *o, json_t *parts, pft_verdict_t *vv)
{
    pft_vertex_result_t r;
    int rc = pft_vertex_attack(s, xm, nm, o->n_lp, o->seed, &r);
    if (rc)
        return rc;
    pft_verdict_t v = pft_vertex_verdict(&r);
    *vv = pft_verdict_worst(*vv, v);
    json_t *e = json_pack("{s:s,s:b,s:s,s:s*}", "part", name, "applicable", r.applicable, "verdict",
                          pft_verdict_name(v), "reason", r.reason);
    if (r.applicable) {
        json_object_set_new(e, "programs", json_integer(r.lps));
        json_object_set_new(e, "programs_failed", json_integer(r.lps_failed));
        json_object_set_new(e, "vertices", json_integer(r.vertices));
        json_object_set_new(e, "rows_recovered", json_integer(r.rows_recovered));
        json_object_set_new(e, "rows_exact", json_integer(r.rows_exact));
        json_object_set_new(e, "max_error", num(r.max_err));
        json_object_set_new(e, "min_error_other", num(r.min_err_other));
        json_object_set_new(e, "rowlike_zeros", json_integer(r.rowlike_zeros));
        json_object_set_new(e, "rowlike", json_integer(r.rowlike));
        json_object_set_new(e, "rowlike_rows", json_integer(r.rowlike_rows));
        json_object_set_new(e, "zeros_row_min", json_integer(r.zeros_row_min));
        json_object_set_new(e, "zeros_row_max", json_integer(r.zeros_row_max));
        json_object_set_new(e, "zeros_other_max", json_integer(r.zeros_other_max));
    }
    json_array_append_new(parts, e);
    return 0;
}

/* The subspace of st: its pooled scatter and class means. NULL on failure (message set). */
static pft_subspace_t *part_subspace(const pft_gstat_t *st)
{
    int d = pft_gstat_dim(st), nc = pft_gstat_n_classes(st);
    double *w = pft_alloc_array((size_t)d * d, sizeof *w), *mu = pft_alloc_array((size_t)nc * d, sizeof *mu);
    pft_subspace_t *s = NULL;
    if (!w || !mu) {
        pft_err(PFT_ENOMEM, "subspace attack: out of memory at d = %d", d);
    } else {
        pft_gstat_pooled(st, w);
        for (int i = 0; i < nc; i++)
            memcpy(mu + (size_t)i * d, pft_gstat_mean(st, i), (size_t)d * sizeof *mu);
        s = pft_subspace_new(w, d, mu, nc);
    }
    pft_free(w);
    pft_free(mu);
    return s;
}

/* S = span(the q columns of factor (d×q), st's class means): what a low-rank release reveals of the span of
 * its rows (q = 0: the means alone, what any release of class means reveals). NULL on failure (message
 * set). */
static pft_subspace_t *factor_subspace(const pft_gstat_t *st, const double *factor, int q)
{
    int d = pft_gstat_dim(st), nc = pft_gstat_n_classes(st);
    double *v = pft_alloc_array((size_t)(q + nc) * d, sizeof *v);
    if (!v)
        return pft_err(PFT_ENOMEM, "subspace attack: out of memory at d = %d", d), NULL;
    for (int j = 0; j < q; j++)
        for (int r = 0; r < d; r++)
            v[(size_t)j * d + r] = factor[(size_t)r * q + j];
    for (int i = 0; i < nc; i++)
        memcpy(v + (size_t)(q + i) * d, pft_gstat_mean(st, i), (size_t)d * sizeof *v);
    pft_subspace_t *s = pft_subspace_new(NULL, d, v, q + nc);
    pft_free(v);
    return s;
}

/* Both attacks on s (basis names it) into sub_parts and vx_parts. */
static int attack(const pft_subspace_t *s, const char *basis, const char *name, const float *xm, int nm,
                  const float *xh, int nh, const pft_audit_opts_t *o, json_t *sub_parts, json_t *vx_parts,
                  pft_verdict_t *vs, pft_verdict_t *vv)
{
    pft_verdict_t v;
    json_t *e = json_pack("{s:s,s:s,s:i,s:i,s:i,s:b,s:o,s:o}", "part", name, "basis", basis, "d",
                          pft_subspace_dim_ambient(s), "rank", pft_subspace_rank(s), "dim",
                          pft_subspace_dim(s), "proper", pft_subspace_proper(s), "gap",
                          num(pft_subspace_gap(s)), "tail", num(pft_subspace_tail(s)));
    int rc = membership(s, xm, nm, xh, nh, e, &v);
    json_array_append_new(sub_parts, e);
    *vs = pft_verdict_worst(*vs, v);
    if (rc == 0)
        rc = vertex(s, name, xm, nm, o, vx_parts, vv);
    if (rc == 0)
        json_object_set_new(json_array_get(vx_parts, json_array_size(vx_parts) - 1), "basis",
                            json_string(basis));
    return rc;
}

int pft_audit__span(const pft_gstat_t *st, const double *factor, int q, const char *name,
                    const pft_audit_rows_t *own, const pft_audit_rows_t *held, const pft_audit_opts_t *o,
                    json_t *sub_parts, json_t *vx_parts, pft_verdict_t *vs, pft_verdict_t *vv)
{
    int nm = 0, nh = 0, oom = 0, rc = 0;
    float *xm = pft_audit__gather(own, st, -1, &nm, &oom), *xh = pft_audit__gather(held, st, -1, &nh, &oom);
    pft_subspace_t *s = oom ? NULL : part_subspace(st);
    if (!s) {
        rc = oom ? pft_err(PFT_ENOMEM, "audit: out of memory for the rows") : PFT_ENUMERIC;
        goto done;
    }
    rc = attack(s, "spectrum", name, xm, nm, xh, nh, o, sub_parts, vx_parts, vs, vv);
    pft_subspace_destroy(&s);
    for (int k = 0; rc == 0 && factor && q > 0 && k < 2; k++) { /* the means alone: the baseline */
        s = factor_subspace(st, factor, k ? q : 0);
        rc = s ? attack(s, k ? "factor" : "means", name, xm, nm, xh, nh, o, sub_parts, vx_parts, vs, vv)
               : PFT_ENUMERIC;
        pft_subspace_destroy(&s);
    }
done:
    pft_subspace_destroy(&s);
    pft_free(xm);
    pft_free(xh);
    return rc;
}
