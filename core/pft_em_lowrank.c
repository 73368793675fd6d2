/* pft_em_lowrank: EM steps of the lowrank family, a mixture of factor analysers (PCA start, Woodbury E-step,
 * factor-analysis M-steps accelerated by SQUAREM).
 *
 * Precision and speed (the general plan is at the top of pft_gmm_em.c):
 * - lowrank (mixture of factor analysers), never forming Σ (d×d):
 *   start: per component, PCA of its k-means cluster by randomized subspace iteration (q + 10 directions,
 *   3 power steps, seeded from the run's generator): W = V_q (Λ_q - σ²)^{1/2} with σ² the mean discarded
 *   eigenvalue (probabilistic PCA), Ψ = diag(S) - diag(W Wᵀ), so diag Σ = diag S.
 *   E-step (double): the Woodbury form of pft_gmm_score.c over blocks of rows, one DGEMM per block
 *   against [A_1 | … | A_K]; its two quadratic forms subtract (cancellation), so it stays in double.
 *   M-step (ECM, Meng & Rubin 1993): μ_k = weighted mean (exact), then factor-analysis EM steps for
 *   (W_k, Ψ_k) given the weighted covariance S_k (Ghahramani & Hinton 1996, with μ fixed), each of which
 *   raises the component's weighted log-likelihood: with P = Ψ⁻¹W, M = I + WᵀP, C = S P and G = M + PᵀC,
 *     W' = C G⁻¹ M,   Ψ' = diag(S) - rowsum(W' ∘ C M⁻¹),
 *   O(d·q²) besides the product C = S P. S is never formed for K > 1: C = Ỹᵀ(Ỹ P) over the weighted
 *   centred rows Ỹ (S = ỸᵀỸ), two SGEMMs, O(n_k·d·q); K = 1 forms S once (SSYRK) when that is cheaper
 *   for the expected number of steps, then C = S P is one SGEMM. Float is enough there: C only moves the
 *   parameters, and the log-likelihood below comes out within ~1e-7 of its size (measured on PACS: 2e-5
 *   nats of ~3800). Up to LR_INNER steps per M-step (one step per E-step took 73 EM iterations for K = 5
 *   on PACS, ten took 8, at a third of the time), accelerated by SQUAREM (lr_fa_iterate).
 *   Ψ is floored at LR_PSI_FLOOR·S_jj (no Heywood collapse), then reg_covar is added. A re-seeded
 *   component (W = 0 is a fixed point of the step) gets a fresh PCA start.
 *   K = 1: the responsibilities never change, so EM is factor-analysis steps on fixed rows, to
 *   convergence; the mean log-likelihood of the parameters entering each step comes from the same
 *   products, -½[d log 2π + log det Σ + Σ_j S_jj/ψ_j - tr(M⁻¹ PᵀC)], and drives the convergence test.
 *   Products with small q×q matrices use explicit inverses and DGEMM: OpenBLAS's triangular solves on
 *   d×q right-hand sides took a quarter of the K = 1 fit. */
#include "pft_gmm_internal.h"

#include <math.h>
#include <string.h>

#include "pft_error.h"
#include "pft_linalg.h"
#include "pft_rng.h"

#define LR_POWER 3        /* subspace iterations of the PCA start */
#define LR_PSI_FLOOR 1e-3 /* ψ_j ≥ this fraction of the component's variance S_jj (before reg_covar) */
#define LR_INNER 10       /* K > 1: factor-analysis steps per M-step at most (ECM with several CM cycles) */

static int lowrank_estep(em_t *em, double *mean_ll)
{
    size_t n = em->n, d = em->d, K = em->k;
    pft_gmm_t *m = em->m;
    int rc = pft_gmm__lr_tab_fill(&em->tab, m->means, m->factors, m->covars, NULL);
    if (rc < 0)
        return pft_err_wrap(rc, "gmm fit: ");
    for (size_t c = 0; c < K; c++)
        em->logw[c] = m->weights[c] > 0.0 ? log(m->weights[c]) : -INFINITY;
    double total = 0.0;
    for (size_t i0 = 0; i0 < n; i0 += LR_BLOCK) {
        size_t mb = n - i0 < LR_BLOCK ? n - i0 : LR_BLOCK;
        pft_gmm__lr_logn(&em->tab, em->xd + i0 * d, mb, em->resp + i0 * K, em->lv);
        pft_gmm__logsumexp_rows(em->resp + i0 * K, em->logw, mb, K, em->ll + i0, em->resp + i0 * K);
        for (size_t i = 0; i < mb; i++)
            total += em_row_w(em, i0 + i) * em->ll[i0 + i];
    }
    if (!isfinite(total))
        return pft_err(PFT_ENUMERIC, "gmm fit: non-finite log-likelihood in the E-step");
    *mean_ll = total / em->wsum;
    return 0;
}

/* Weighted centred rows of component c, √(r_i/N_k) (x_i - μ_k), into em->yf (float), diag S into em->sdiag.
 * Rows with r‖x-μ‖² ≤ 1e-3·reg·N_k/n are dropped (as in full_mstep, pft_em_full.c) unless K = 1. With K = 1
 * (and a dimension where it pays) S = ỸᵀỸ is formed too (em->smat). Sets em->rows. */
static void lr_gather(em_t *em, size_t c)
{
    size_t n = em->n, d = em->d, K = em->k, rows = 0;
    double nk = em->nk[c], drop = K == 1 ? -1.0 : 1e-3 * em->reg * nk / (double)n;
    const double *mu = em->m->means + c * d;
    double *e = em->sb; /* d doubles of scratch */
    memset(em->sdiag, 0, d * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        double r = em->resp[i * K + c], s = 0.0;
        if (r == 0.0 && K > 1)
            continue;
        for (size_t j = 0; j < d; j++) {
            e[j] = em->xd[i * d + j] - mu[j];
            s += e[j] * e[j];
        }
        if (r * s <= drop)
            continue;
        double sr = sqrt(r / nk);
        float *w = em->yf + rows * d;
        for (size_t j = 0; j < d; j++) {
            double v = e[j] * sr;
            w[j] = (float)v;
            em->sdiag[j] += v * v;
        }
        rows++;
    }
    em->rows = rows;
    em->smat_valid = 0;
    if (em->smat && rows > 0) {
        cblas_ssyrk(CblasRowMajor, CblasLower, CblasTrans, (int)d, (int)rows, 1.0f, em->yf, (int)d, 0.0f,
                    em->smat, (int)d);
        for (size_t a = 0; a < d; a++)
            for (size_t b = a + 1; b < d; b++)
                em->smat[a * d + b] = em->smat[b * d + a];
        em->smat_valid = 1;
    }
}

/* out (d×cols, double) = S · in (d×cols, double) for the rows of the last lr_gather, in float: through S
 * when it was formed, else as Ỹᵀ (Ỹ in). */
static void lr_smul(em_t *em, const double *in, double *out, size_t cols)
{
    size_t d = em->d, rows = em->rows;
    for (size_t i = 0; i < d * cols; i++)
        em->pf[i] = (float)in[i];
    if (em->smat_valid) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d, (int)cols, (int)d, 1.0f, em->smat,
                    (int)d, em->pf, (int)cols, 0.0f, em->cf, (int)cols);
    } else if (rows > 0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)cols, (int)d, 1.0f, em->yf,
                    (int)d, em->pf, (int)cols, 0.0f, em->tf, (int)cols);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d, (int)cols, (int)rows, 1.0f, em->yf,
                    (int)d, em->tf, (int)cols, 0.0f, em->cf, (int)cols);
    } else {
        memset(em->cf, 0, d * cols * sizeof(float));
    }
    for (size_t i = 0; i < d * cols; i++)
        out[i] = em->cf[i];
}

/* Ψ_j = max(S_jj - e_j, LR_PSI_FLOOR·S_jj) + reg for component c (e: the variance the factors explain). */
static void lr_set_psi(em_t *em, size_t c, const double *explained)
{
    double *psi = em->m->covars + c * em->d;
    for (size_t j = 0; j < em->d; j++) {
        double s = em->sdiag[j], v = s - explained[j];
        psi[j] = (v > LR_PSI_FLOOR * s ? v : LR_PSI_FLOOR * s) + em->reg;
    }
}

/* PCA start of component c from the rows of the last lr_gather (randomized subspace iteration; see the
 * top of this file). */
static int lr_pca_start(em_t *em, size_t c)
{
    size_t d = em->d, q = em->q, r = em->r;
    double *W = em->m->factors + c * d * q, *ex = em->sb; /* ex: d explained variances */
    double *rr = em->sq + 5 * q * q, *ev = rr + r * r, *ut = ev + r;
    int rc;
    if (q == 0) {
        memset(ex, 0, d * sizeof *ex);
        lr_set_psi(em, c, ex);
        return 0;
    }
    for (size_t i = 0; i < d * r; i++)
        em->om[i] = pft_rng_normal(em->rng);
    for (int it = 0; it < LR_POWER; it++) {
        lr_smul(em, em->om, em->cw, r); /* Ω := orth(S Ω) */
        memcpy(em->om, em->cw, d * r * sizeof(double));
        if ((rc = pft_la_orthonormalize(em->om, (int)d, (int)r)) < 0)
            return rc;
    }
    /* Rayleigh-Ritz: the top q eigenpairs of Ωᵀ S Ω */
    lr_smul(em, em->om, em->cw, r);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)r, (int)r, (int)d, 1.0, em->om, (int)r, em->cw,
                (int)r, 0.0, rr, (int)r);
    if ((rc = pft_la_eigh(rr, (int)r, ev)) < 0)
        return rc;
    double tr = 0.0, top = 0.0;
    for (size_t j = 0; j < d; j++)
        tr += em->sdiag[j];
    for (size_t l = 0; l < q; l++)
        top += ev[r - 1 - l] > 0.0 ? ev[r - 1 - l] : 0.0;
    double sigma2 = d > q ? (tr - top) / (double)(d - q) : 0.0;
    sigma2 = sigma2 > 0.0 ? sigma2 : 0.0;
    /* A direction without support still gets a small loading, so that EM can grow it (W = 0 is fixed). */
    double small = 1e-4 * (tr / (double)d + em->reg);
    for (size_t l = 0; l < q; l++) {
        double lam = ev[r - 1 - l] - sigma2, sc = sqrt(lam > small ? lam : small);
        for (size_t m2 = 0; m2 < r; m2++)
            ut[m2 * q + l] = rr[(r - 1 - l) * r + m2] * sc;
    }
    /* W = Ω U_q (Λ_q - σ²)^{1/2} */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d, (int)q, (int)r, 1.0, em->om, (int)r, ut,
                (int)q, 0.0, W, (int)q);
    for (size_t j = 0; j < d; j++) {
        double e = 0.0;
        for (size_t l = 0; l < q; l++)
            e += W[j * q + l] * W[j * q + l];
        ex[j] = e;
    }
    lr_set_psi(em, c, ex);
    return 0;
}

/* One factor-analysis EM step for component c from the rows of the last lr_gather; *ll (if not NULL)
 * receives the mean log-likelihood of those weighted rows under the Gaussian of the parameters entering
 * the step. PFT_ENUMERIC if a q×q factorisation fails (parameters kept). */
static int lr_fa_step(em_t *em, size_t c, double *ll)
{
    size_t d = em->d, q = em->q;
    double *W = em->m->factors + c * d * q, *psi = em->m->covars + c * d;
    double *M = em->sq, *Lm = M + q * q, *G = Lm + q * q, *Gi = G + q * q, *Mi = Gi + q * q;
    if (q == 0) {
        double s = 0.0, quad = 0.0;
        for (size_t j = 0; j < d; j++) {
            s += log(psi[j]);
            quad += em->sdiag[j] / psi[j];
        }
        if (ll)
            *ll = -0.5 * ((double)d * LOG_2PI + s + quad);
        memset(em->sb, 0, d * sizeof(double));
        lr_set_psi(em, c, em->sb);
        return 0;
    }
    for (size_t j = 0; j < d; j++)
        for (size_t l = 0; l < q; l++)
            em->pw[j * q + l] = W[j * q + l] / psi[j];
    /* M = I + WᵀΨ⁻¹W; C = S P; G = M + PᵀC */
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)q, (int)q, (int)d, 1.0, W, (int)q, em->pw,
                (int)q, 0.0, M, (int)q);
    for (size_t l = 0; l < q; l++)
        M[l * q + l] += 1.0;
    lr_smul(em, em->pw, em->cw, q);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)q, (int)q, (int)d, 1.0, em->pw, (int)q, em->cw,
                (int)q, 0.0, G, (int)q);
    for (size_t a = 0; a < q; a++)
        for (size_t b = 0; b <= a; b++) {
            double g = 0.5 * (G[a * q + b] + G[b * q + a]), mm = 0.5 * (M[a * q + b] + M[b * q + a]);
            G[a * q + b] = G[b * q + a] = g + mm;
            M[a * q + b] = M[b * q + a] = mm;
        }
    memcpy(Lm, M, q * q * sizeof(double));
    if (pft_la_chol_lower(Lm, (int)q) < 0 || pft_la_chol_lower(G, (int)q) < 0 ||
        pft_la_spd_inverse(G, Gi, (int)q) < 0 || pft_la_spd_inverse(Lm, Mi, (int)q) < 0) {
        pft_err_clear();
        return PFT_ENUMERIC;
    }
    /* C M⁻¹ (= S βᵀ with β = M⁻¹ Wᵀ Ψ⁻¹), and the log-likelihood of the entering parameters */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d, (int)q, (int)q, 1.0, em->cw, (int)q, Mi,
                (int)q, 0.0, em->sb, (int)q);
    if (ll) {
        double logdet = 0.0, quad = 0.0, tr = 0.0;
        for (size_t l = 0; l < q; l++)
            logdet += 2.0 * log(Lm[l * q + l]);
        for (size_t j = 0; j < d; j++) {
            logdet += log(psi[j]);
            quad += em->sdiag[j] / psi[j];
        }
        for (size_t i = 0; i < d * q; i++)
            tr += em->pw[i] * em->sb[i];
        *ll = -0.5 * ((double)d * LOG_2PI + logdet + quad - tr);
    }
    /* W' = C (G⁻¹ M) */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)q, (int)q, (int)q, 1.0, Gi, (int)q, M, (int)q,
                0.0, Lm, (int)q);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d, (int)q, (int)q, 1.0, em->cw, (int)q, Lm,
                (int)q, 0.0, em->xw, (int)q);
    /* Ψ' = diag S - rowsum(W' ∘ C M⁻¹) */
    double *ex = em->pw; /* P is no longer needed */
    for (size_t j = 0; j < d; j++) {
        double e = 0.0;
        for (size_t l = 0; l < q; l++)
            e += em->xw[j * q + l] * em->sb[j * q + l];
        ex[j] = e;
    }
    memcpy(W, em->xw, d * q * sizeof(double));
    lr_set_psi(em, c, ex);
    return 0;
}

/* Factor-analysis steps for component c on the rows (and S) of the last lr_gather, accelerated by SQUAREM
 * (Varadhan & Roland 2008, scheme S3): from θ0, two steps give θ1, θ2; r = θ1 - θ0, v = θ2 - θ1 - r,
 * α = -‖r‖/‖v‖ (at most -1), θ' = θ0 - 2αr + α²v with Ψ' projected onto its floor, then one more step
 * from θ'. The log-likelihood of θ' comes with that step; if it is below that of θ1 (or not finite) the
 * cycle falls back to θ2, plain EM. θ = (W_c, Ψ_c); a cycle costs three steps. Runs at most max_steps
 * steps (*steps says how many) and stops (*converged = 1) when the mean log-likelihood of the weighted
 * rows at a cycle's θ0 changes less than tol, or decreases: the products with S run in float and resolve
 * it to about 1e-7 of its size (measured: 2e-5 nats on PACS, 5e-6 on 20000 rows of d = 30), so a tol below
 * that ends at the float optimum. PFT_ENUMERIC if the first step fails (parameters unchanged); a later
 * failure keeps the last good parameters. */
static int lr_fa_iterate(em_t *em, size_t c, int max_steps, double tol, int *steps, int *converged)
{
    size_t d = em->d, nw = d * em->q, nt = nw + d;
    double *W = em->m->factors + c * nw, *psi = em->m->covars + c * d;
    double *t0 = em->th, *t1 = t0 + nt, *t2 = t1 + nt;
    double prev = -INFINITY, ll0, ll1, llp;
    *steps = 0;
    *converged = 0;
#define LR_SAVE(t) (memcpy((t), W, nw * sizeof(double)), memcpy((t) + nw, psi, d * sizeof(double)))
#define LR_LOAD(t) (memcpy(W, (t), nw * sizeof(double)), memcpy(psi, (t) + nw, d * sizeof(double)))
    while (*steps < max_steps) {
        LR_SAVE(t0);
        if (lr_fa_step(em, c, &ll0) < 0)
            return *steps ? 0 : PFT_ENUMERIC; /* keep the last good parameters */
        (*steps)++;
        /* In exact arithmetic ll0 never decreases from cycle to cycle; a decrease is the rounding of the
         * float products with S, so the optimum is reached as closely as they resolve it. */
        if ((tol > 0.0 && fabs(ll0 - prev) < tol) || ll0 < prev) {
            *converged = 1;
            break;
        }
        prev = ll0;
        if (*steps + 2 > max_steps)
            continue; /* no room for a cycle: plain steps */
        LR_SAVE(t1);
        if (lr_fa_step(em, c, &ll1) < 0)
            break;
        (*steps)++;
        LR_SAVE(t2);
        double rr = 0.0, vv = 0.0;
        for (size_t i = 0; i < nt; i++) {
            double r = t1[i] - t0[i], v = t2[i] - 2.0 * t1[i] + t0[i];
            rr += r * r;
            vv += v * v;
        }
        double alpha = vv > 0.0 ? -sqrt(rr / vv) : -1.0;
        if (!(alpha < -1.0))
            alpha = -1.0; /* θ' = θ2 */
        for (size_t i = 0; i < nt; i++) {
            double r = t1[i] - t0[i], v = t2[i] - 2.0 * t1[i] + t0[i];
            double x = t0[i] - 2.0 * alpha * r + alpha * alpha * v;
            if (i < nw) {
                W[i] = x;
            } else {
                size_t j = i - nw;
                double lo = LR_PSI_FLOOR * em->sdiag[j] + em->reg;
                psi[j] = x > lo ? x : lo;
            }
        }
        int bad = lr_fa_step(em, c, &llp) < 0;
        (*steps)++;
        if (bad || !isfinite(llp) || llp < ll1) {
            LR_LOAD(t2); /* the extrapolation lost: continue from plain EM */
            if (bad)
                break;
        }
    }
#undef LR_SAVE
#undef LR_LOAD
    return 0;
}

static int lowrank_mstep(em_t *em)
{
    size_t n = em->n, d = em->d, K = em->k;
    pft_gmm_t *m = em->m;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)d, (int)n, 1.0, em->resp, (int)K,
                em->xd, (int)d, 0.0, m->means, (int)d);
    for (size_t c = 0; c < K; c++) {
        double nk = em->nk[c];
        if (!(nk > 0.0))
            continue; /* re-seeded by the caller */
        for (size_t j = 0; j < d; j++)
            m->means[c * d + j] /= nk;
        lr_gather(em, c);
        if (em->fresh[c]) {
            int rc = lr_pca_start(em, c);
            if (rc == PFT_ENOMEM)
                return pft_err_wrap(rc, "gmm fit: ");
            if (rc < 0) {
                pft_err_clear();
                em->nk[c] = 0.0;
                continue;
            }
            em->fresh[c] = 0;
        } else {
            int steps, conv;
            if (lr_fa_iterate(em, c, LR_INNER, em->tol, &steps, &conv) < 0)
                em->nk[c] = 0.0; /* re-seeded by the caller */
        }
    }
    return 0;
}

static void lowrank_reseed(em_t *em, size_t c, size_t row)
{
    size_t d = em->d;
    pft_gmm_t *m = em->m;
    memset(m->factors + c * d * em->q, 0, d * em->q * sizeof(double));
    for (size_t j = 0; j < d; j++) {
        m->means[c * d + j] = em->xd[row * d + j];
        m->covars[c * d + j] = em->gvar[j] + em->reg;
    }
    em->fresh[c] = 1;
}

/* K = 1: the responsibilities never change, so EM is factor-analysis steps on the rows (and S) the first
 * M-step gathered, to convergence. The model already holds the PCA start and the mean. */
static int lowrank_solo(em_t *em, const pft_gmm_opts_t *opts, int *iters, int *converged)
{
    lr_fa_iterate(em, 0, opts->max_iter, opts->tol, iters, converged);
    return 0;
}

const em_family_t pft_em__lowrank = {
    .estep = lowrank_estep, .mstep = lowrank_mstep, .reseed = lowrank_reseed, .solo = lowrank_solo};
