/* pft_gstat: exact Gaussian statistics of labelled rows (per class count, mean and scatter), merged exactly.
 *
 * For a class with n rows x_1..x_n the statistics are n, the mean μ = (1/n) Σ x_i and the scatter
 * M = Σ (x_i - μ)(x_i - μ)ᵀ. Two disjoint parts A and B of a class combine without loss
 * (Chan, Golub & LeVeque 1979, the pairwise update):
 *     n = n_A + n_B,   δ = μ_B - μ_A,   μ = μ_A + (n_B / n) δ,   M = M_A + M_B + (n_A n_B / n) δδᵀ,
 * so statistics merged along any path equal the centralized statistics of the union, up to double rounding.
 * Everything is accumulated in double; a batch of rows is centred at its own mean before its scatter is
 * formed (the two-pass algorithm), never as Σ xxᵀ - n μμᵀ.
 *
 * Two kinds (DESIGN.md §8):
 *  - PFT_GSTAT_FULL: per class n, μ and M_c (QDA statistics; the exact `cov = full, k = 1` family);
 *  - PFT_GSTAT_TIED: per class n and μ, and one within-class scatter W = Σ_c M_c shared by all classes
 *    (LDA statistics; `cov = tied`). Merging adds the parts' W and, per class, the between-part term.
 * FULL statistics merge into TIED ones (their scatters are pooled); the reverse is refused.
 * Scatter matrices are d×d row-major doubles with both triangles filled. */
#ifndef PFT_GSTAT_H
#define PFT_GSTAT_H

#include <stddef.h>
#include <stdint.h>

/* Kinds; the values are part of the wire format. */
typedef enum {
    PFT_GSTAT_FULL = 0, /* per-class scatter */
    PFT_GSTAT_TIED = 1, /* one within-class scatter shared by all classes */
} pft_gstat_kind_t;

/* "full" / "tied"; NULL for an unknown value. */
const char *pft_gstat_kind_name(pft_gstat_kind_t kind);

typedef struct pft_gstat_t pft_gstat_t;

/* Empty statistics of dimension d (1..65536). NULL on failure (pft_errmsg() says why). */
pft_gstat_t *pft_gstat_new(pft_gstat_kind_t kind, int d);
/* Frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_gstat_destroy(pft_gstat_t **self_p);
/* Deep copy; NULL on failure. */
pft_gstat_t *pft_gstat_dup(const pft_gstat_t *self);

pft_gstat_kind_t pft_gstat_kind(const pft_gstat_t *self);
int pft_gstat_dim(const pft_gstat_t *self);
/* Classes present (each with n ≥ 1), sorted by label. */
int pft_gstat_n_classes(const pft_gstat_t *self);
int pft_gstat_label(const pft_gstat_t *self, int i);
/* Index of the class with this label, or -1. */
int pft_gstat_find(const pft_gstat_t *self, int label);
uint64_t pft_gstat_count(const pft_gstat_t *self, int i);
/* Rows over all classes. */
uint64_t pft_gstat_total(const pft_gstat_t *self);
/* Borrowed: class i's mean (d doubles). */
const double *pft_gstat_mean(const pft_gstat_t *self, int i);
/* Borrowed: class i's scatter M_i (d×d) for FULL; NULL for TIED. */
const double *pft_gstat_scatter(const pft_gstat_t *self, int i);
/* Borrowed: the within-class scatter W (d×d) of TIED statistics; NULL for FULL (pft_gstat_pooled gives it).
 */
const double *pft_gstat_tied_scatter(const pft_gstat_t *self);

/* Adds n rows x (n×d float32, row-major) with labels y (≥ 0). Exact: per class the batch is centred at its
 * own mean and merged by the pairwise update. 0, or PFT_EINVAL (a negative label, a non-finite value;
 * self unaltered), PFT_ENOMEM. */
int pft_gstat_add_rows(pft_gstat_t *self, const float *x, const int32_t *y, size_t n);

/* Merges one class part: n ≥ 1 rows of `label` with the given mean (d) and scatter (d×d, symmetric;
 * for TIED it is added to W; NULL means a zero scatter, e.g. a single row). 0, or PFT_EINVAL (bad
 * arguments, non-finite values, a count overflowing 2^62), PFT_ENOMEM; self unaltered on error. */
int pft_gstat_add_class(pft_gstat_t *self, int label, uint64_t n, const double *mean, const double *scatter);

/* TIED only: adds a d×d symmetric matrix to W (a decoded part's within-class scatter, after its classes
 * were added with a NULL scatter). PFT_EINVAL for FULL or non-finite values. */
int pft_gstat_add_tied_scatter(pft_gstat_t *self, const double *w);
/* pft_gstat_add_tied_scatter for statistics to which no scatter was added yet (made by pft_gstat_new, classes
 * added with NULL scatters, W still zero): *w_p (d×d, allocated by pft_alloc) becomes W itself, the numbers
 * pft_gstat_add_tied_scatter would leave bit for bit (0 + w: a −0 entry becomes +0), without a second d×d;
 * *w_p is set to NULL. PFT_EINVAL (self and *w_p unaltered) for FULL statistics or a non-finite entry. */
int pft_gstat_set_tied_scatter(pft_gstat_t *self, double **w_p);

/* TIED only: hands the within-class scatter W (d×d, both triangles) to the caller, who frees it with
 * pft_free; the statistics keep their counts and means but no scatter any more, and may then only be read
 * (counts, means, labels) or destroyed. NULL for FULL statistics. For a consumer that needs W's memory
 * (pft_ghead_fit_take). */
double *pft_gstat_take_tied_scatter(pft_gstat_t *self);
/* TIED only, the reverse of pft_gstat_take_tied_scatter: *w_p (d×d, both triangles, allocated by pft_alloc)
 * becomes the statistics' scatter again and *w_p is set to NULL. PFT_EINVAL (nothing taken) for FULL
 * statistics or statistics that hold a scatter. */
int pft_gstat_give_tied_scatter(pft_gstat_t *self, double **w_p);

/* 1 when a and b hold the same numbers bit for bit (kind, d, labels, counts, means, scatters), else 0. */
int pft_gstat_equal(const pft_gstat_t *a, const pft_gstat_t *b);
/* 1 when a and b hold the same classes bit for bit (kind, d, labels, counts, means), scatters aside. */
int pft_gstat_same_classes(const pft_gstat_t *a, const pft_gstat_t *b);

/* Merges all of `other` into self (disjoint rows assumed: the caller deduplicates by provenance).
 * FULL into FULL, TIED into TIED, FULL into TIED (pooled). 0, or PFT_EINVAL (TIED into FULL, another d),
 * PFT_ENOMEM; self unaltered on error. */
int pft_gstat_merge(pft_gstat_t *self, const pft_gstat_t *other);
/* pft_gstat_merge(*self_p, *other_p), then *other_p destroyed (set to NULL). With *self_p NULL (*other_p
 * TIED, holding its scatter), *self_p becomes *other_p's numbers as a merge into new empty TIED statistics
 * would give them bit for bit (W's lower triangle mirrored, 0 + w), without a d×d copy (pft_gstat_take_all).
 * 0, or pft_gstat_merge's or pft_gstat_take_all's errors (both then unaltered). */
int pft_gstat_merge_take(pft_gstat_t **self_p, pft_gstat_t **other_p);
/* *out: new TIED statistics equal, bit for bit, to merging self into new empty statistics (pft_gstat_merge),
 * made by taking self's scatter W instead of copying it: self keeps its counts and means but no scatter (as
 * after pft_gstat_take_tied_scatter). 0, or PFT_EINVAL (FULL, or no scatter), PFT_ENOMEM; *out NULL and self
 * unaltered on error. */
int pft_gstat_take_all(pft_gstat_t *self, pft_gstat_t **out);
/* *out: new TIED statistics with self's classes (labels, counts, means; self TIED, its scatter held or not)
 * and *w_p (d×d, allocated by pft_alloc, e.g. self's W taken by pft_gstat_take_tied_scatter) as their W,
 * moved
 * (*w_p set to NULL): with self's own W, the numbers pft_gstat_take_all gives bit for bit. 0, or PFT_EINVAL
 * (FULL, *w_p NULL), PFT_ENOMEM; *out NULL and *w_p kept on error. */
int pft_gstat_classes_with(const pft_gstat_t *self, double **w_p, pft_gstat_t **out);

/* The pooled within-class scatter W = Σ_c M_c (FULL) or the tied W, into w (d×d). */
void pft_gstat_pooled(const pft_gstat_t *self, double *w);

/* Statistics of a class modelled by a Gaussian mixture standing for n rows: mean Σ w_k μ_k and scatter
 * n·(Σ w_k (Σ_k + μ_k μ_kᵀ) - μμᵀ), the mixture's exact first and second moments. means K×d, covs K×d×d
 * (full matrices). Merged like add_class. */
int pft_gstat_add_mixture(pft_gstat_t *self, int label, uint64_t n, int k, const double *weights,
                          const double *means, const double *covs);

/* Adds the exact moments of a fitted mixture g (any family) standing for n rows of label:
 * pft_gstat_add_mixture with each component's covariance formed (full: L Lᵀ; diag, spher: diagonal; lowrank:
 * W Wᵀ + Ψ). Errors as pft_gstat_add_mixture, PFT_EINVAL for another d. */
struct pft_gmm_t;
int pft_gstat_add_gmm(pft_gstat_t *st, const struct pft_gmm_t *g, int label, uint64_t n);

/* Checks that the d×d symmetric matrix s is positive semi-definite up to the rounding of numbers stored with
 * relative precision eps (2^-24 for fp32, 2^-11 for fp16): a Cholesky factorisation of s + 2·eps·tr(s)·I must
 * succeed (a PSD matrix whose entries were rounded with relative error ≤ eps has eigenvalues ≥ -eps·tr(s)).
 * 0, or PFT_ENUMERIC with the smallest pivot in the message, PFT_ENOMEM. */
int pft_gstat_check_psd(const double *s, int d, double eps);

#endif
