/* pft_vertex: rows recovered as vertices of {x in a released subspace, x >= 0, sum x = d}, by GLPK. */
#include "pft_vertex.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_rng.h"

#include <glpk.h>
#include <math.h>
#include <string.h>

/* Working state of one attack. */
typedef struct {
    int d, dim, n;
    const double *basis; /* dim × d */
    double *rows;        /* n × d own rows, unit norm */
    double *found;       /* vertices × d distinct vertices, unit norm */
    uint8_t *hit;        /* n: row recovered (1), exactly (2) */
    double *best;        /* n: the smallest error of a vertex matched to the row */
    double *g, *x;       /* objective in x (d), the vertex (d) */
    int32_t *perm;       /* d: the order in which coordinates are maximised */
} vx_t;

/* The program: rows 1..d: (Bᵀz)_j ≥ 0; row d+1: 1ᵀBᵀz = d; columns z_1..z_dim free. NULL on failure. */
static glp_prob *lp_build(const vx_t *v)
{
    int d = v->d, m = v->dim;
    size_t ne = (size_t)(d + 1) * m;
    int *ia = pft_alloc_array(ne + 1, sizeof *ia), *ja = pft_alloc_array(ne + 1, sizeof *ja);
    double *ar = pft_alloc_array(ne + 1, sizeof *ar);
    glp_prob *lp = ia && ja && ar ? glp_create_prob() : NULL;
    if (lp) {
        glp_set_obj_dir(lp, GLP_MAX);
        glp_add_rows(lp, d + 1);
        glp_add_cols(lp, m);
        for (int j = 1; j <= d; j++)
            glp_set_row_bnds(lp, j, GLP_LO, 0.0, 0.0);
        glp_set_row_bnds(lp, d + 1, GLP_FX, (double)d, (double)d);
        for (int k = 1; k <= m; k++)
            glp_set_col_bnds(lp, k, GLP_FR, 0.0, 0.0);
        size_t e = 1;
        for (int k = 0; k < m; k++) {
            double sum = 0;
            for (int j = 0; j < d; j++, e++) {
                ia[e] = j + 1;
                ja[e] = k + 1;
                ar[e] = v->basis[(size_t)k * d + j];
                sum += ar[e];
            }
            ia[e] = d + 1;
            ja[e] = k + 1;
            ar[e++] = sum;
        }
        glp_load_matrix(lp, (int)ne, ia, ja, ar);
    }
    pft_free(ia);
    pft_free(ja);
    pft_free(ar);
    return lp;
}

/* Solves with objective g (in x); the vertex, unit norm, into v->x. Returns its zeros, or -1 (no optimum). */
static int lp_solve(glp_prob *lp, vx_t *v)
{
    int d = v->d, m = v->dim;
    for (int k = 0; k < m; k++) {
        double s = 0;
        for (int j = 0; j < d; j++)
            s += v->basis[(size_t)k * d + j] * v->g[j];
        glp_set_obj_coef(lp, k + 1, s);
    }
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.tm_lim = PFT_VERTEX_TIME_MS;
    int rc = glp_simplex(lp, &parm);
    if (rc != 0 || glp_get_status(lp) != GLP_OPT) {
        /* stalled on a degenerate vertex (rows are highly degenerate) or a singular basis: start over from
         * the standard basis with the dual simplex */
        glp_std_basis(lp);
        parm.meth = GLP_DUALP;
        rc = glp_simplex(lp, &parm);
    }
    if (rc != 0 || glp_get_status(lp) != GLP_OPT) {
        glp_std_basis(lp); /* the next program starts afresh */
        return -1;
    }
    memset(v->x, 0, (size_t)d * sizeof *v->x);
    for (int k = 0; k < m; k++) {
        double z = glp_get_col_prim(lp, k + 1);
        for (int j = 0; j < d; j++)
            v->x[j] += z * v->basis[(size_t)k * d + j];
    }
    double top = 0, nn = 0;
    for (int j = 0; j < d; j++) {
        top = fmax(top, fabs(v->x[j]));
        nn += v->x[j] * v->x[j];
    }
    int zeros = 0;
    for (int j = 0; j < d; j++) {
        zeros += fabs(v->x[j]) <= PFT_VERTEX_ZERO * top;
        v->x[j] /= sqrt(nn);
    }
    return zeros;
}

static double dot(const double *a, const double *b, int d)
{
    double s = 0;
    for (int j = 0; j < d; j++)
        s += a[j] * b[j];
    return s;
}

/* Records v->x (zeros of them) unless already found; updates r. */
static void record(vx_t *v, int zeros, pft_vertex_result_t *r)
{
    int d = v->d;
    for (int i = 0; i < r->vertices; i++)
        if (1 - dot(v->found + (size_t)i * d, v->x, d) <= PFT_VERTEX_SAME)
            return;
    memcpy(v->found + (size_t)r->vertices++ * d, v->x, (size_t)d * sizeof *v->x);
    double best = -2;
    int who = -1;
    for (int i = 0; i < v->n; i++) {
        double cs = dot(v->rows + (size_t)i * d, v->x, d);
        if (cs > best)
            best = cs, who = i;
    }
    double err = sqrt(fmax(0, 2 * (1 - best)));
    int is_row = who >= 0 && 1 - best <= PFT_VERTEX_MATCH, rowlike = zeros >= r->rowlike_zeros;
    r->rowlike += rowlike;
    r->rowlike_rows += rowlike && is_row;
    if (is_row) {
        r->rows_recovered += !v->hit[who];
        r->rows_exact += err <= PFT_VERTEX_EXACT && !(v->hit[who] & 2);
        v->hit[who] |= 1 | (err <= PFT_VERTEX_EXACT ? 2 : 0);
        v->best[who] = fmin(v->best[who], err);
        if (r->zeros_row_min < 0 || zeros < r->zeros_row_min)
            r->zeros_row_min = zeros;
        r->zeros_row_max = zeros > r->zeros_row_max ? zeros : r->zeros_row_max;
    } else {
        r->min_err_other = fmin(r->min_err_other, err);
        r->zeros_other_max = zeros > r->zeros_other_max ? zeros : r->zeros_other_max;
    }
}

/* Own rows, unit norm, into v->rows; 0, or 1 when a row has a negative entry. */
static int load_rows(vx_t *v, const float *rows)
{
    for (int i = 0; i < v->n; i++) {
        double *o = v->rows + (size_t)i * v->d, nn = 0;
        v->best[i] = INFINITY;
        for (int j = 0; j < v->d; j++) {
            o[j] = rows[(size_t)i * v->d + j];
            if (o[j] < 0)
                return 1;
            nn += o[j] * o[j];
        }
        for (int j = 0; nn > 0 && j < v->d; j++)
            o[j] /= sqrt(nn);
    }
    return 0;
}

/* 1 when every one of the n rows is farther than √(2·PFT_VERTEX_MATCH) (relative) from the span of s, so that
 * no vertex (a unit vector in the span) can match one; 0 otherwise; PFT_ENOMEM. */
static int none_in_span(const pft_subspace_t *s, const float *rows, int n)
{
    double *res = pft_alloc_array((size_t)n + 1, sizeof *res);
    if (!res || pft_subspace_residuals(s, rows, n, res)) {
        pft_free(res);
        return pft_err(PFT_ENOMEM, "vertex attack: out of memory for the residuals");
    }
    int far = 1;
    for (int i = 0; i < n && far; i++)
        far = res[i] > sqrt(2 * PFT_VERTEX_MATCH);
    pft_free(res);
    return far;
}

/* Objective t into v->g: maximise coordinate perm[t mod d] (v->perm, a random order of the coordinates);
 * from the second round on, plus a Gaussian perturbation of 1 % per coordinate so that it finds new
 * vertices. */
static void objective(vx_t *v, pft_rng_t *rng, int t)
{
    int round = t / v->d, j0 = v->perm[t % v->d];
    for (int j = 0; j < v->d; j++)
        v->g[j] = (j == j0) + (round ? 0.01 * pft_rng_normal(rng) : 0);
}

/* The n_lp programs; r filled. 0, or PFT_ENOMEM. */
static int run(vx_t *v, int n_lp, uint64_t seed, pft_vertex_result_t *r)
{
    glp_prob *lp = lp_build(v);
    pft_rng_t *rng = pft_rng_new(seed);
    for (int j = 0; j < v->d; j++)
        v->perm[j] = j;
    if (rng)
        pft_rng_shuffle(rng, v->perm, (size_t)v->d);
    if (!lp || !rng) {
        if (lp)
            glp_delete_prob(lp);
        pft_rng_destroy(&rng);
        return pft_err(PFT_ENOMEM, "vertex attack: out of memory for the program");
    }
    for (int t = 0; t < n_lp; t++) {
        objective(v, rng, t);
        int zeros = lp_solve(lp, v);
        if (zeros < 0) {
            r->lps_failed++;
            continue;
        }
        r->lps++;
        record(v, zeros, r);
    }
    glp_delete_prob(lp);
    pft_rng_destroy(&rng);
    if (r->lps == 0) {
        r->applicable = 0;
        r->reason =
            "no program reached an optimum (the polytope is empty: no non-negative point in the span)";
    }
    return 0;
}

int pft_vertex_attack(const pft_subspace_t *s, const float *rows, int n, int n_lp, uint64_t seed,
                      pft_vertex_result_t *r)
{
    memset(r, 0, sizeof *r);
    r->zeros_row_min = r->zeros_row_max = r->zeros_other_max = -1;
    r->min_err_other = INFINITY;
    if (n_lp < 1 || n < 0 || (n && !rows))
        return pft_err(PFT_EINVAL, "vertex attack: %d programs, %d rows", n_lp, n);
    if (!pft_subspace_proper(s)) {
        r->reason = "no proper subspace (the released scatter has no rank gap)";
        return 0;
    }
    vx_t v = {.d = pft_subspace_dim_ambient(s), .dim = pft_subspace_dim(s), .n = n};
    v.basis = pft_subspace_basis(s);
    size_t d = (size_t)v.d;
    v.rows = pft_alloc_array((size_t)n * d + 1, sizeof *v.rows);
    v.found = pft_alloc_array((size_t)n_lp * d, sizeof *v.found);
    v.hit = pft_calloc((size_t)n + 1, 1);
    v.best = pft_alloc_array((size_t)n + 1, sizeof *v.best);
    v.g = pft_alloc_array(d, sizeof *v.g);
    v.x = pft_alloc_array(d, sizeof *v.x);
    v.perm = pft_alloc_array(d, sizeof *v.perm);
    int rc = 0;
    r->rowlike_zeros = (int)ceil(PFT_VERTEX_ROWLIKE * (v.dim - 1));
    if (!v.rows || !v.found || !v.hit || !v.g || !v.x || !v.perm || !v.best)
        rc = pft_err(PFT_ENOMEM, "vertex attack: out of memory (%d programs, d = %d)", n_lp, v.d);
    else if (load_rows(&v, rows))
        r->reason = "the own rows take negative values: rows are no vertices of the non-negative polytope";
    else if ((rc = none_in_span(s, rows, n)) != 0) {
        r->reason = "no own row lies within the match distance of the span: no vertex can be a row";
        rc = rc < 0 ? rc : 0;
    } else {
        r->applicable = 1;
        glp_term_out(GLP_OFF);
        rc = run(&v, n_lp, seed, r);
    }
    for (int i = 0; rc == 0 && i < n; i++)
        r->max_err = v.hit[i] ? fmax(r->max_err, v.best[i]) : r->max_err;
    pft_free(v.rows);
    pft_free(v.found);
    pft_free(v.hit);
    pft_free(v.best);
    pft_free(v.g);
    pft_free(v.x);
    pft_free(v.perm);
    return rc;
}

pft_verdict_t pft_vertex_verdict(const pft_vertex_result_t *r)
{
    return r->applicable && r->rows_recovered > 0 ? PFT_VERDICT_FAIL : PFT_VERDICT_PASS;
}
