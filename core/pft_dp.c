/* pft_dp: DP-FedPFT release of one class's Gaussian (Theorem 4.1 and Remark B.3) and a privacy ledger. */
#include "pft_dp.h"

#include <lapacke.h>
#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_linalg.h"

#define MOMENT_BLOCK 256 /* rows per DSYRK block of pft_dp_moments (bounds its scratch memory) */
#define BUDGET_SLACK 1e-9

static const char *const s_mech_names[] = {
    [PFT_DP_THM41] = "thm41",
    [PFT_DP_B3] = "b3",
};
#define N_MECH ((int)(sizeof s_mech_names / sizeof s_mech_names[0]))

static int mech_valid(pft_dp_mech_t mech)
{
    return (int)mech >= 0 && (int)mech < N_MECH;
}

static int cov_valid(pft_cov_t cov)
{
    const pft_cov_family_t *f = pft_cov_family(cov);
    return f && f->dp;
}

const char *pft_dp_mech_name(pft_dp_mech_t mech)
{
    return mech_valid(mech) ? s_mech_names[mech] : NULL;
}

int pft_dp_mech_parse(const char *name, pft_dp_mech_t *out)
{
    for (int i = 0; name && i < N_MECH; i++)
        if (strcmp(name, s_mech_names[i]) == 0) {
            *out = (pft_dp_mech_t)i;
            return 0;
        }
    return pft_err(PFT_EINVAL, "unknown DP mechanism '%s' (valid: thm41, b3)", name ? name : "(null)");
}

/* ------------------------------------------------------------------------------------------------ */
/* Calibration */

double pft_dp_sensitivity(pft_dp_mech_t mech, int n)
{
    if (!mech_valid(mech) || n < 1)
        return NAN;
    return (mech == PFT_DP_THM41 ? 2.0 * sqrt(10.0) : 2.0 * sqrt(2.0)) / (double)n;
}

/* Standard normal CDF Φ(x), accurate in both tails. */
static double norm_cdf(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0));
}

double pft_dp_gauss_delta(double sens, double sigma, double eps)
{
    if (!(sens > 0.0) || !isfinite(sens) || !(sigma >= 0.0) || !(eps >= 0.0))
        return NAN;
    if (sigma == 0.0)
        return 1.0;
    if (isinf(eps) || isinf(sigma))
        return 0.0;
    double a = sens / (2.0 * sigma), b = eps * sigma / sens;
    double t2 = 0.0, p = norm_cdf(-a - b);
    if (p > 0.0)
        t2 = exp(eps + log(p)); /* e^ε Φ(·) without overflowing e^ε first */
    double r = norm_cdf(a - b) - t2;
    return r > 0.0 ? r : 0.0;
}

/* δ resolved from PFT_DP_DELTA_AUTO; NaN when invalid. */
static double resolve_delta(int n, double delta)
{
    if (delta == PFT_DP_DELTA_AUTO)
        delta = n >= 1 ? 1.0 / (double)n : NAN;
    return delta > 0.0 && delta < 1.0 ? delta : NAN;
}

double pft_dp_sigma_exact(double sens, double eps, double delta)
{
    if (!(sens > 0.0) || !isfinite(sens) || !(eps > 0.0) || !(delta > 0.0 && delta < 1.0))
        return NAN;
    if (isinf(eps))
        return 0.0;
    /* δ(σ) decreases in σ: double until it holds, then bisect, keeping hi on the valid side */
    double lo = 0.0, hi = sens;
    for (int i = 0; i < 200 && pft_dp_gauss_delta(sens, hi, eps) > delta; i++) {
        lo = hi;
        hi *= 2.0;
    }
    for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; i++) {
        double mid = 0.5 * (lo + hi);
        if (pft_dp_gauss_delta(sens, mid, eps) <= delta)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

double pft_dp_sigma(pft_dp_mech_t mech, int n, double eps, double delta)
{
    delta = resolve_delta(n, delta);
    if (!mech_valid(mech) || n < 1 || !(eps > 0.0) || isnan(delta))
        return NAN;
    if (isinf(eps))
        return 0.0;
    double lg = log(4.0 / delta);
    double s = 4.0 / ((double)n * eps) * sqrt(mech == PFT_DP_THM41 ? 5.0 * lg : lg);
    double sens = pft_dp_sensitivity(mech, n);
    if (pft_dp_gauss_delta(sens, s, eps) <= delta)
        return s;
    /* The formula is not a valid calibration here (large ε): the smallest σ whose exact δ is ≤ δ */
    return pft_dp_sigma_exact(sens, eps, delta);
}

/* ------------------------------------------------------------------------------------------------ */
/* Clipping */

static double row_sqnorm(const float *row, int d)
{
    double s = 0.0;
    for (int j = 0; j < d; j++)
        s += (double)row[j] * row[j];
    return s;
}

int pft_dp_clip(float *x, int n, int d)
{
    if (n < 0 || d < 1 || (n > 0 && !x))
        return pft_err(PFT_EINVAL, "dp clip: invalid arguments (n = %d, d = %d)", n, d);
    int clipped = 0;
    for (int i = 0; i < n; i++) {
        float *row = x + (size_t)i * (size_t)d;
        double s = row_sqnorm(row, d);
        if (!isfinite(s))
            return pft_err(PFT_EINVAL, "dp clip: row %d has a non-finite value", i);
        if (s <= 1.0)
            continue;
        if (s > 1.0 + PFT_DP_NORM_TOL)
            clipped++;
        double scale = 1.0 / sqrt(s);
        for (int j = 0; j < d; j++)
            row[j] = (float)(row[j] * scale);
        /* Float rounding may leave the norm a few ulps above 1: shrink by 2^-22 (more than the rounding
         * of each element can give back) until it holds; one step is enough in practice. */
        double shrink = 1.0 - ldexp(1.0, -22);
        for (int it = 0; it < 32 && row_sqnorm(row, d) > 1.0; it++) {
            for (int j = 0; j < d; j++)
                row[j] = (float)(row[j] * shrink);
            shrink *= shrink;
        }
    }
    return clipped;
}

/* ------------------------------------------------------------------------------------------------ */
/* Moments, noise, projection */

size_t pft_dp_mom_len(pft_cov_t cov, int d)
{
    if (d < 1)
        return 0;
    return cov_valid(cov) ? pft_cov_stored(cov, (size_t)d) : 0; /* lowrank has no DP release */
}

/* Full d×d block: (1/n) Σ (x_i - c)(x_i - c)ᵀ with c = ctr (NULL: 0), by DSYRK over blocks of rows. */
static int second_moment_full(const float *x, int n, int d, const double *ctr, double *mom)
{
    size_t D = (size_t)d;
    double *buf = pft_alloc_array((size_t)MOMENT_BLOCK * D, sizeof(double));
    if (!buf)
        return pft_err(PFT_ENOMEM, "dp moments: out of memory (%d×%d block)", MOMENT_BLOCK, d);
    memset(mom, 0, D * D * sizeof *mom);
    for (int i0 = 0; i0 < n; i0 += MOMENT_BLOCK) {
        int m = n - i0 < MOMENT_BLOCK ? n - i0 : MOMENT_BLOCK;
        for (int i = 0; i < m; i++)
            for (size_t j = 0; j < D; j++)
                buf[(size_t)i * D + j] = (double)x[(size_t)(i0 + i) * D + j] - (ctr ? ctr[j] : 0.0);
        cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, d, m, 1.0 / (double)n, buf, d, 1.0, mom, d);
    }
    pft_la_sym_from_lower(mom, d);
    pft_free(buf);
    return 0;
}

int pft_dp_moments(const float *x, int n, int d, pft_cov_t cov, pft_dp_mech_t mech, double *mean, double *mom)
{
    if (!x || !mean || !mom || n < 1 || d < 1 || !cov_valid(cov) || !mech_valid(mech))
        return pft_err(PFT_EINVAL, "dp moments: invalid arguments (n = %d, d = %d)", n, d);
    size_t D = (size_t)d;
    memset(mean, 0, D * sizeof *mean);
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < D; j++)
            mean[j] += x[(size_t)i * D + j];
    for (size_t j = 0; j < D; j++)
        mean[j] /= (double)n;
    const double *ctr = mech == PFT_DP_THM41 ? mean : NULL; /* Σ about μ, or M about 0 */
    if (pft_cov_shape(cov) == PFT_COV_SHAPE_MATRIX)
        return second_moment_full(x, n, d, ctr, mom);
    double *v = pft_cov_shape(cov) == PFT_COV_SHAPE_VECTOR ? mom : NULL, tot = 0.0;
    for (size_t j = 0; j < D; j++) {
        double c = ctr ? ctr[j] : 0.0, s = 0.0;
        for (int i = 0; i < n; i++) {
            double t = (double)x[(size_t)i * D + j] - c;
            s += t * t;
        }
        s /= (double)n;
        if (v)
            v[j] = s;
        tot += s;
    }
    if (pft_cov_shape(cov) == PFT_COV_SHAPE_SCALAR)
        mom[0] = tot / (double)d;
    return 0;
}

int pft_dp_add_noise(pft_cov_t cov, int d, double sigma, pft_rng_t *rng, double *mean, double *mom)
{
    if (d < 1 || !cov_valid(cov) || !mean || !mom || !(sigma >= 0.0) || !isfinite(sigma) ||
        (sigma > 0.0 && !rng))
        return pft_err(PFT_EINVAL, "dp noise: invalid arguments (d = %d, sigma = %g)", d, sigma);
    if (sigma == 0.0)
        return 0;
    size_t D = (size_t)d;
    for (size_t j = 0; j < D; j++)
        mean[j] += sigma * pft_rng_normal(rng);
    if (pft_cov_shape(cov) == PFT_COV_SHAPE_MATRIX) {
        for (size_t i = 0; i < D; i++)
            for (size_t j = i; j < D; j++) {
                double z = sigma * pft_rng_normal(rng);
                mom[i * D + j] += z;
                if (j != i)
                    mom[j * D + i] += z;
            }
    } else {
        size_t len = pft_dp_mom_len(cov, d);
        for (size_t j = 0; j < len; j++)
            mom[j] += sigma * pft_rng_normal(rng);
    }
    return 0;
}

/* Full: mom := V max(Λ, 0) Vᵀ (exactly symmetric); eigenvalues in ascending order into w. */
static int psd_full(double *mom, int d, int *n_floored, double *min_eig)
{
    size_t D = (size_t)d;
    double *w = NULL, *work = NULL, *vs = NULL;
    lapack_int *iwork = NULL, liwork = 0, info;
    double wq = 0.0;
    int rc = 0;
    /* mom is symmetric, so its row-major storage is also its column-major storage: no transposing copy.
     * Column-major eigenvector k (column k) is then row k of the row-major array. */
    info = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'L', d, mom, d, &wq, &wq, -1, &liwork, -1);
    if (info != 0) {
        rc = pft_err(PFT_ENUMERIC, "dp projection: dsyevd workspace query failed (info %d)", (int)info);
        goto done;
    }
    lapack_int lwork = (lapack_int)wq;
    w = pft_alloc_array(D, sizeof *w);
    work = pft_alloc_array((size_t)lwork, sizeof *work);
    iwork = pft_alloc_array((size_t)liwork, sizeof *iwork);
    vs = pft_alloc_array(D * D, sizeof *vs);
    if (!w || !work || !iwork || !vs) {
        rc = pft_err(PFT_ENOMEM, "dp projection: out of memory (d = %d)", d);
        goto done;
    }
    info = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'L', d, mom, d, w, work, lwork, iwork, liwork);
    if (info != 0) {
        rc = pft_err(PFT_ENUMERIC, "dp projection: dsyevd failed (info %d)", (int)info);
        goto done;
    }
    /* Rows of vs: sqrt(λ_k) v_k for the positive eigenvalues; Σ = vsᵀ vs. */
    int p = 0, neg = 0;
    for (size_t k = 0; k < D; k++) {
        if (!(w[k] > 0.0)) {
            neg += w[k] < 0.0;
            continue;
        }
        double r = sqrt(w[k]);
        for (size_t i = 0; i < D; i++)
            vs[(size_t)p * D + i] = r * mom[k * D + i];
        p++;
    }
    if (n_floored)
        *n_floored = neg;
    if (min_eig)
        *min_eig = w[0];
    if (p > 0) {
        cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, d, p, 1.0, vs, d, 0.0, mom, d);
        pft_la_sym_from_lower(mom, d);
    } else {
        memset(mom, 0, D * D * sizeof *mom);
    }
done:
    pft_free(w);
    pft_free(work);
    pft_free(iwork);
    pft_free(vs);
    return rc;
}

int pft_dp_project(pft_dp_mech_t mech, pft_cov_t cov, int d, double var_floor, const double *mean,
                   double *mom, int *n_floored, double *min_eig)
{
    if (d < 1 || !cov_valid(cov) || !mech_valid(mech) || !mean || !mom || !(var_floor > 0.0) ||
        !isfinite(var_floor))
        return pft_err(PFT_EINVAL, "dp projection: invalid arguments (d = %d, var_floor = %g)", d, var_floor);
    size_t D = (size_t)d, len = pft_dp_mom_len(cov, d);
    for (size_t j = 0; j < D; j++)
        if (!isfinite(mean[j]))
            return pft_err(PFT_EINVAL, "dp projection: mean[%zu] is not finite", j);
    for (size_t j = 0; j < len; j++)
        if (!isfinite(mom[j]))
            return pft_err(PFT_EINVAL, "dp projection: moment element %zu is not finite", j);
    if (mech == PFT_DP_B3) { /* Σ̃ = M̂ - μ̂μ̂ᵀ (mean[i]·mean[j] is symmetric in IEEE arithmetic) */
        if (pft_cov_shape(cov) == PFT_COV_SHAPE_MATRIX) {
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < D; j++)
                    mom[i * D + j] -= mean[i] * mean[j];
        } else if (pft_cov_shape(cov) == PFT_COV_SHAPE_VECTOR) {
            for (size_t j = 0; j < D; j++)
                mom[j] -= mean[j] * mean[j];
        } else {
            double s = 0.0;
            for (size_t j = 0; j < D; j++)
                s += mean[j] * mean[j];
            mom[0] -= s / (double)d;
        }
    }
    if (pft_cov_shape(cov) == PFT_COV_SHAPE_MATRIX) {
        int rc = psd_full(mom, d, n_floored, min_eig);
        if (rc < 0)
            return rc;
        for (size_t j = 0; j < D; j++)
            mom[j * D + j] += var_floor;
        return 0;
    }
    int neg = 0;
    double mn = INFINITY;
    for (size_t j = 0; j < len; j++) {
        mn = mom[j] < mn ? mom[j] : mn;
        neg += mom[j] < 0.0;
        mom[j] = (mom[j] > 0.0 ? mom[j] : 0.0) + var_floor;
    }
    if (n_floored)
        *n_floored = neg;
    if (min_eig)
        *min_eig = mn;
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* The release */

int pft_dp_fit(const float *x, int n, int d, pft_cov_t cov, double eps, double delta, pft_dp_mech_t mech,
               double var_floor, pft_rng_t *rng, pft_gmm_t **out, pft_dp_info_t *info)
{
    if (out)
        *out = NULL;
    if (!x || !out || n < 1 || d < 1)
        return pft_err(PFT_EINVAL, "dp fit: invalid arguments (n = %d, d = %d)", n, d);
    if (!cov_valid(cov) || !mech_valid(mech))
        return pft_err(PFT_EINVAL, "dp fit: unknown covariance family %d or mechanism %d", (int)cov,
                       (int)mech);
    double dl = resolve_delta(n, delta);
    if (!(eps > 0.0) || isnan(dl))
        return pft_err(PFT_EINVAL,
                       "dp fit: need epsilon > 0 and 0 < delta < 1 (epsilon = %g, delta = %g, n = %d)", eps,
                       delta == PFT_DP_DELTA_AUTO ? 1.0 / n : delta, n);
    if (!(var_floor > 0.0) || !isfinite(var_floor))
        return pft_err(PFT_EINVAL, "dp fit: var_floor = %g (must be finite and > 0)", var_floor);
    if (!isinf(eps) && !rng)
        return pft_err(PFT_EINVAL, "dp fit: a random generator is required for epsilon = %g", eps);
    for (int i = 0; i < n; i++) {
        double s = row_sqnorm(x + (size_t)i * (size_t)d, d);
        if (!isfinite(s))
            return pft_err(PFT_EINVAL, "dp fit: row %d has a non-finite value", i);
        if (s > 1.0 + PFT_DP_NORM_TOL)
            return pft_err(PFT_EINVAL, "dp fit: row %d has norm %.9g > 1 (clip the features first)", i,
                           sqrt(s));
    }
    double sigma = pft_dp_sigma(mech, n, eps, dl);
    double lg = log(4.0 / dl);
    double formula = isinf(eps) ? 0.0 : 4.0 / ((double)n * eps) * sqrt(mech == PFT_DP_THM41 ? 5.0 * lg : lg);
    int n_floored = 0, rc;
    double min_eig = NAN, one = 1.0;
    double *mean = pft_alloc_array((size_t)d, sizeof(double));
    double *mom = pft_alloc_array(pft_dp_mom_len(cov, d), sizeof(double));
    pft_gmm_t *g = NULL;
    if (!mean || !mom) {
        rc = pft_err(PFT_ENOMEM, "dp fit: out of memory (d = %d)", d);
        goto done;
    }
    if ((rc = pft_dp_moments(x, n, d, cov, mech, mean, mom)) < 0 ||
        (rc = pft_dp_add_noise(cov, d, sigma, rng, mean, mom)) < 0 ||
        (rc = pft_dp_project(mech, cov, d, var_floor, mean, mom, &n_floored, &min_eig)) < 0)
        goto done;
    if (!(g = pft_gmm_new(1, d, cov))) {
        rc = pft_err(PFT_ENOMEM, "dp fit: out of memory (model)");
        goto done;
    }
    if ((rc = pft_gmm_set_params(g, &one, mean, mom)) < 0) {
        rc = pft_err_wrap(rc, "dp fit");
        goto done;
    }
    if (info) {
        info->mech = mech;
        info->n = n;
        info->d = d;
        info->eps = eps;
        info->delta = dl;
        info->sens = pft_dp_sensitivity(mech, n);
        info->sigma = sigma;
        info->sigma_raised = sigma > formula;
        info->n_floored = n_floored;
        info->min_eig = min_eig;
    }
    *out = g;
    g = NULL;
done:
    pft_gmm_destroy(&g);
    pft_free(mean);
    pft_free(mom);
    return rc;
}

/* ------------------------------------------------------------------------------------------------ */
/* Budget ledger */

int pft_dp_budget_init(pft_dp_budget_t *b, double eps_total, double delta_total)
{
    if (!b || !(eps_total > 0.0) || !(delta_total >= 0.0 && delta_total <= 1.0))
        return pft_err(PFT_EINVAL, "dp budget: need epsilon > 0 and 0 <= delta <= 1 (got %g, %g)", eps_total,
                       delta_total);
    b->eps_total = eps_total;
    b->delta_total = delta_total;
    b->eps_spent = 0.0;
    b->delta_spent = 0.0;
    b->releases = 0;
    return 0;
}

/* a + b ≤ total, with a relative slack for summation rounding. */
static int fits(double spent, double add, double total)
{
    if (isinf(total))
        return 1;
    return spent + add <= total * (1.0 + BUDGET_SLACK);
}

int pft_dp_budget_charge(pft_dp_budget_t *b, double eps, double delta)
{
    if (!b || !(eps > 0.0) || !(delta >= 0.0 && delta < 1.0))
        return pft_err(PFT_EINVAL, "dp budget: invalid charge (epsilon = %g, delta = %g)", eps, delta);
    if (!fits(b->eps_spent, eps, b->eps_total))
        return pft_err(PFT_EBUDGET, "privacy budget: epsilon %g + %g would exceed %g", b->eps_spent, eps,
                       b->eps_total);
    if (!fits(b->delta_spent, delta, b->delta_total))
        return pft_err(PFT_EBUDGET, "privacy budget: delta %g + %g would exceed %g", b->delta_spent, delta,
                       b->delta_total);
    b->eps_spent += eps;
    b->delta_spent += delta;
    b->releases++;
    return 0;
}

double pft_dp_budget_eps_left(const pft_dp_budget_t *b)
{
    double r = b->eps_total - b->eps_spent;
    return isinf(b->eps_total) ? INFINITY : (r > 0.0 ? r : 0.0);
}

double pft_dp_budget_delta_left(const pft_dp_budget_t *b)
{
    double r = b->delta_total - b->delta_spent;
    return r > 0.0 ? r : 0.0;
}
