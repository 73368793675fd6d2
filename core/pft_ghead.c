/* pft_ghead: LDA and QDA heads from exact class statistics, shrinkage chosen by exact-downdate CV
 * (pft_ghead.h). */
#include "pft_ghead.h"
#include "pft_ghead_internal.h"

#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_linalg.h"

#define GH_NO_CLASS (-1e30) /* bias of a label without statistics (finite, so exportable as float) */

#define N_ALPHA PFT_GHEAD_N_ALPHA

/* ---- the statistics in the eigenbasis of the pooled scatter -------------------------------------------- */

/* What the LDA fit and its cross-validation share: W = Eᵀ diag(lam) E, class means projected. Components
 * 0..S-1 are st's classes, S..S+X-1 the noisy components (pft_ghead.h); slot[k] is component k's class slot
 * (st's class index, or S.. for a label st lacks), slot_label[slot] its label. */
typedef struct {
    const pft_gstat_t *st;
    int d, S;      /* dimension, classes in st */
    int X;         /* noisy components */
    double N;      /* rows of st */
    double Nx;     /* rows the noisy components stand for */
    double *E;     /* d×d, row i the eigenvector of lam[i] */
    double *lam;   /* d eigenvalues of W, ascending, clamped at 0 */
    double sumlam; /* tr W */
    double *Mt;    /* (S+X)×d projected means */
    double *n;     /* S+X counts */
    double *tau2;  /* S+X noise variances per entry of the mean (0 for st's classes) */
    int *slot;     /* S+X */
    int *slot_label;
    int n_slots;
    /* trid (the evidence): W = Q T Qᵀ, E Q's reflectors, lam T's eigenvalues, Σ_α⁻¹ by tridiagonal solves */
    int trid;
    double *td, *te, *tau; /* trid: T's diagonal, off-diagonal, the reflectors' scales (d each) */
    double *diag;          /* trid, not lent: W's diagonal, for the way back to W (eig_to_eigenbasis) */
    int lent;              /* E is the statistics' own scatter, lent (evidence_run): never freed here */
    int ends; /* trid, the evidence's tallies: lam[0] and lam[1] are only W's smallest and largest eigenvalue
                 (clamped at 0) and sumlam its trace: all the tallies read (ends_plain), without dsterf */
} eig_t;

static void eig_free(eig_t *e)
{
    if (e->lent)
        e->E = NULL;
    PFT_FREE(e->E);
    PFT_FREE(e->lam);
    PFT_FREE(e->Mt);
    PFT_FREE(e->n);
    PFT_FREE(e->tau2);
    PFT_FREE(e->slot);
    PFT_FREE(e->slot_label);
    PFT_FREE(e->td);
    PFT_FREE(e->te);
    PFT_FREE(e->tau);
    PFT_FREE(e->diag);
}

/* The noisy components' counts, noise and class slots (their means are projected with st's). */
static void eig_slots(eig_t *e, const pft_ghead_opts_t *o)
{
    e->n_slots = e->S;
    for (int c = 0; c < e->S; c++) {
        e->slot[c] = c;
        e->slot_label[c] = pft_gstat_label(e->st, c);
        e->tau2[c] = 0;
    }
    e->Nx = 0;
    for (int k = 0; k < e->X; k++) {
        const pft_ghead_extra_t *x = &o->extra[k];
        int s = pft_gstat_find(e->st, x->label);
        for (int j = e->S; s < 0 && j < e->n_slots; j++)
            if (e->slot_label[j] == x->label)
                s = j;
        if (s < 0) {
            s = e->n_slots++;
            e->slot_label[s] = x->label;
        }
        e->slot[e->S + k] = s;
        e->n[e->S + k] = (double)x->n;
        e->tau2[e->S + k] = x->tau2;
        e->Nx += (double)x->n;
    }
}

/* e->E (W on entry) decomposed: W's eigenvectors and eigenvalues, or (e->trid) its tridiagonal reduction
 * and T's eigenvalues (W's, up to rounding); e->lam clamped at 0, e->sumlam. */
static int eig_decompose(eig_t *e)
{
    int d = e->d, rc;
    if (!e->trid && e->lent) { /* the vectors beside the lent scatter, which keeps its upper triangle */
        double *z = pft_alloc_array((size_t)d * d, sizeof(double));
        rc = z ? pft_la_eigh_into(e->E, d, e->lam, z) : pft_err(PFT_ENOMEM, "out of memory");
        if (rc == 0)
            e->E = z, e->lent = 0; /* the caller still holds the scatter (evidence_run) */
        else
            pft_free(z);
    } else if (!e->trid) {
        rc = pft_la_eigh_fast(e->E, d, e->lam);
    } else {
        e->td = pft_alloc_array((size_t)d, sizeof(double));
        e->te = pft_alloc_array((size_t)d, sizeof(double));
        e->tau = pft_alloc_array((size_t)d, sizeof(double));
        if (!e->lent && (e->diag = pft_alloc_array((size_t)d, sizeof(double))) != NULL)
            for (int i = 0; i < d; i++)
                e->diag[i] = e->E[(size_t)i * d + i];
        rc = !e->td || !e->te || !e->tau || (!e->lent && !e->diag)
                 ? pft_err(PFT_ENOMEM, "out of memory")
                 : pft_la_tridiag(e->E, d, e->td, e->te, e->tau);
        if (rc == 0)
            rc = e->ends ? pft_la_tridiag_extremes(e->td, e->te, d, &e->lam[0], &e->lam[1])
                         : pft_la_tridiag_eigvals(e->td, e->te, d, e->lam);
    }
    if (rc != 0)
        return pft_err_wrap(rc, "gaussian head: %s of the pooled scatter",
                            e->trid ? "tridiagonal reduction" : "eigendecomposition");
    e->sumlam = 0;
    if (e->ends) { /* tr W = tr T; the clamp at 0 of the eigenvalues rounding leaves below 0 is not seen */
        for (int i = 0; i < d; i++)
            e->sumlam += e->td[i];
        e->sumlam = e->sumlam > 0 ? e->sumlam : 0;
        e->lam[0] = e->lam[0] > 0 ? e->lam[0] : 0;
        e->lam[1] = e->lam[1] > 0 ? e->lam[1] : 0;
        return 0;
    }
    for (int i = 0; i < d; i++) {
        if (e->lam[i] < 0)
            e->lam[i] = 0; /* rounding of a PSD matrix */
        e->sumlam += e->lam[i];
    }
    return 0;
}

/* The rows (rows×d) in e's basis: out = in Eᵀ, or each row by Qᵀ (tridiagonal). 0 or pft_la_tridiag_qt_rows's
 * errors. */
static int eig_project(const eig_t *e, const double *in, double *out, int rows)
{
    int d = e->d;
    if (!e->trid) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, d, d, 1.0, in, d, e->E, d, 0.0, out, d);
        return 0;
    }
    if (out != in)
        memcpy(out, in, (size_t)rows * d * sizeof(double));
    return pft_la_tridiag_qt_rows(e->E, e->tau, d, out, rows);
}

/* The eigendecomposition (trid: the tridiagonal reduction) of st's pooled scatter; w, if not NULL, is that
 * scatter already (taken from st), and becomes e->E (eig_init owns it from here on, also on error, unless
 * lent: then the caller keeps it). */
static int eig_init(eig_t *e, const pft_gstat_t *st, double *w, const pft_ghead_opts_t *o, int trid, int lent,
                    int ends)
{
    memset(e, 0, sizeof *e);
    e->st = st;
    e->trid = trid;
    e->ends = trid && ends;
    e->lent = w && lent;
    e->d = pft_gstat_dim(st);
    e->S = pft_gstat_n_classes(st);
    e->X = o->kind == PFT_GHEAD_LDA ? o->n_extra : 0;
    e->N = (double)pft_gstat_total(st);
    int d = e->d, S = e->S, K = e->S + e->X;
    e->E = w ? w : pft_alloc_array((size_t)d * d, sizeof(double));
    e->lam = pft_alloc_array((size_t)d, sizeof(double));
    e->Mt = pft_alloc_array((size_t)K * d, sizeof(double));
    e->n = pft_alloc_array((size_t)K, sizeof(double));
    e->tau2 = pft_alloc_array((size_t)K, sizeof(double));
    e->slot = pft_alloc_array((size_t)K, sizeof(int));
    e->slot_label = pft_alloc_array((size_t)K, sizeof(int));
    double *mu = pft_alloc_array((size_t)K * d, sizeof(double));
    if (!e->E || !e->lam || !e->Mt || !e->n || !e->tau2 || !e->slot || !e->slot_label || !mu) {
        pft_free(mu);
        eig_free(e);
        return pft_err(PFT_ENOMEM, "gaussian head: out of memory for d = %d", d);
    }
    if (!w)
        pft_gstat_pooled(st, e->E);
    int rc = eig_decompose(e);
    if (rc != 0) {
        pft_free(mu);
        eig_free(e);
        return rc;
    }
    for (int c = 0; c < S; c++) {
        memcpy(mu + (size_t)c * d, pft_gstat_mean(st, c), (size_t)d * sizeof(double));
        e->n[c] = (double)pft_gstat_count(st, c);
    }
    for (int k = 0; k < e->X; k++)
        memcpy(mu + (size_t)(S + k) * d, o->extra[k].mean, (size_t)d * sizeof(double));
    eig_slots(e, o);
    rc = eig_project(e, mu, e->Mt, K);
    pft_free(mu);
    if (rc != 0)
        eig_free(e);
    return rc;
}

/* OAS shrinkage of the covariance W/N (scikit-learn's oas: mean(S²) and tr(S)/d from the eigenvalues). */
static double oas_alpha(const eig_t *e)
{
    double d = e->d, N = e->N;
    double mu = e->sumlam / (N * d), a = 0;
    for (int i = 0; i < e->d; i++)
        a += (e->lam[i] / N) * (e->lam[i] / N);
    a /= d * d;
    double num = a + mu * mu, den = (N + 1.0) * (a - mu * mu / d);
    if (den <= 0)
        return 1.0;
    double s = num / den;
    return s > 1.0 ? 1.0 : s < 0 ? 0 : s;
}

/* ---- LDA cross-validation with the Woodbury identity ----------------------------------------------------
 */

/* One fold of LDA's cross-validation: every α of the grid scores the fold's rows (projected: Yt, r×d) with
 * the statistics minus those rows. */
typedef struct {
    const eig_t *e;
    int r, m;        /* held-out rows, downdate columns */
    double Np, trWp; /* N' and tr W' */
    double *Yt;      /* r×d projected held-out rows */
    int *truth;      /* r class indices */
    double *U;       /* m×d downdate columns (rows here) */
    double *Mp;      /* S×d projected class means without the fold */
    double *logpi;   /* S */
    int *present;    /* S: class still has rows */
} fold_t;

static void fold_free(fold_t *f)
{
    PFT_FREE(f->Yt);
    PFT_FREE(f->truth);
    PFT_FREE(f->U);
    PFT_FREE(f->Mp);
    PFT_FREE(f->logpi);
    PFT_FREE(f->present);
}

static int fold_build(fold_t *f, const eig_t *e, const folds_t *fs, const double *Yall, int which)
{
    int d = e->d, S = e->S, K = e->S + e->X;
    memset(f, 0, sizeof *f);
    f->e = e;
    for (int k = 0; k < fs->n; k++)
        f->r += fs->fold[k] == which;
    int r = f->r;
    double *sum = pft_calloc((size_t)S * d, sizeof(double));
    double *cnt = pft_calloc((size_t)S, sizeof(double));
    f->Yt = pft_alloc_array((size_t)r * d, sizeof(double));
    f->truth = pft_alloc_array((size_t)r, sizeof(int));
    f->U = pft_alloc_array((size_t)(r + S) * d, sizeof(double));
    f->Mp = pft_calloc((size_t)K * d, sizeof(double));
    f->logpi = pft_alloc_array((size_t)K, sizeof(double));
    f->present = pft_alloc_array((size_t)K, sizeof(int));
    if (!sum || !cnt || !f->Yt || !f->truth || !f->U || !f->Mp || !f->logpi || !f->present) {
        pft_free(sum);
        pft_free(cnt);
        fold_free(f);
        return pft_err(PFT_ENOMEM, "gaussian head: out of memory for a fold");
    }
    int j = 0;
    for (int k = 0; k < fs->n; k++) {
        if (fs->fold[k] != which)
            continue;
        int c = fs->cls[k];
        memcpy(f->Yt + (size_t)j * d, Yall + (size_t)k * d, (size_t)d * sizeof(double));
        f->truth[j++] = c;
        cblas_daxpy(d, 1.0, Yall + (size_t)k * d, 1, sum + (size_t)c * d, 1);
        cnt[c] += 1;
    }
    f->Np = e->N - r;
    /* columns: each removed row about its class's removed mean; per class the between-part column */
    double norm2 = 0;
    int m = 0;
    for (j = 0; j < r; j++) {
        int c = f->truth[j];
        double *u = f->U + (size_t)m++ * d;
        for (int i = 0; i < d; i++)
            u[i] = f->Yt[(size_t)j * d + i] - sum[(size_t)c * d + i] / cnt[c];
    }
    for (int k = S; k < K; k++) { /* noisy components: fixed, none of the own rows */
        f->present[k] = 1;
        f->logpi[k] = log(e->n[k] / (f->Np + e->Nx));
        memcpy(f->Mp + (size_t)k * d, e->Mt + (size_t)k * d, (size_t)d * sizeof(double));
    }
    for (int c = 0; c < S; c++) {
        double nc = e->n[c], rc = cnt[c], np = nc - rc;
        f->present[c] = np > 0;
        f->logpi[c] = np > 0 ? log(np / (f->Np + e->Nx)) : -INFINITY;
        for (int i = 0; i < d; i++)
            f->Mp[(size_t)c * d + i] =
                np > 0 ? (nc * e->Mt[(size_t)c * d + i] - sum[(size_t)c * d + i]) / np : 0.0;
        if (rc > 0 && np > 0) {
            double g = sqrt(np * rc / nc);
            double *u = f->U + (size_t)m++ * d;
            for (int i = 0; i < d; i++)
                u[i] = g * (f->Mp[(size_t)c * d + i] - sum[(size_t)c * d + i] / rc);
        }
    }
    f->m = m;
    for (size_t i = 0; i < (size_t)m * d; i++)
        norm2 += f->U[i] * f->U[i];
    f->trWp = e->sumlam - norm2;
    pft_free(sum);
    pft_free(cnt);
    return 0;
}

/* Component scores s (S+X) of one row into its class slots' scores ss (log-sum-exp; present per slot). */
static void slot_scores(const eig_t *e, const fold_t *f, const double *s, double *ss, int *ps)
{
    for (int j = 0; j < e->n_slots; j++) {
        ss[j] = -INFINITY;
        ps[j] = 0;
    }
    for (int k = 0; k < e->S + e->X; k++) {
        if (!f->present[k])
            continue;
        int j = e->slot[k];
        double a = ss[j], b = s[k], mx = a > b ? a : b;
        ss[j] = ps[j] ? mx + log(exp(a - mx) + exp(b - mx)) : b;
        ps[j] = 1;
    }
}

/* The folds' work buffers (lda_cv_tally sizes them: s holds S+X component scores, then n_slots slot scores;
 * ps n_slots flags; pd, pe, YD, MD only in the tridiagonal basis). */
typedef struct {
    double *D, *UD, *K, *P, *Q, *X, *s, *v, *ZZ;
    int *ps;
    double *pd, *pe; /* T_α = Σ_α in the tridiagonal basis, factored (LDLᵀ) */
    double *YD, *MD; /* the held-out rows and the class means times Σ_α⁻¹ */
} work_t;

static void work_free(work_t *w)
{
    double **p[] = {&w->D, &w->UD, &w->K,  &w->P,  &w->Q,  &w->X, &w->s,
                    &w->v, &w->ZZ, &w->pd, &w->pe, &w->YD, &w->MD};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        PFT_FREE(*p[i]);
    PFT_FREE(w->ps);
}

static int work_alloc(work_t *w, const eig_t *e, const folds_t *fs)
{
    size_t d = (size_t)e->d, S = (size_t)(e->S + e->X), mmax = (size_t)fs->n + S, n = (size_t)fs->n;
    memset(w, 0, sizeof *w);
    w->D = pft_alloc_array(d, sizeof(double));
    w->UD = pft_alloc_array(mmax * d, sizeof(double));
    w->K = pft_alloc_array(mmax * mmax, sizeof(double));
    w->P = pft_alloc_array(mmax * n, sizeof(double));
    w->Q = pft_alloc_array(mmax * S, sizeof(double));
    w->X = pft_alloc_array(S, sizeof(double));
    w->s = pft_alloc_array(S + (size_t)e->n_slots, sizeof(double));
    w->v = pft_alloc_array(mmax, sizeof(double));
    w->ps = pft_alloc_array((size_t)e->n_slots, sizeof(int));
    int ok = w->D && w->UD && w->K && w->P && w->Q && w->X && w->s && w->v && w->ps;
    if (e->X)
        ok = ok && (w->ZZ = pft_alloc_array(mmax * mmax, sizeof(double)));
    if (e->trid) {
        w->pd = pft_alloc_array(d, sizeof(double));
        w->pe = pft_alloc_array(d, sizeof(double));
        w->YD = pft_alloc_array(n * d, sizeof(double));
        w->MD = pft_alloc_array(S * d, sizeof(double));
        ok = ok && w->pd && w->pe && w->YD && w->MD;
    }
    if (ok)
        return 0;
    work_free(w);
    return pft_err(PFT_ENOMEM, "gaussian head: out of memory for cross-validation");
}

/* Tridiagonal basis: Σ_α = β T + t I factored, and U, the held-out rows and the class means times its
 * inverse (w->UD, YD, MD). 0, or 1 if Σ_α is not numerically positive definite there. */
static int trid_solves(const fold_t *f, double alpha, work_t *w)
{
    const eig_t *e = f->e;
    int d = e->d, S = e->S + e->X;
    double beta = (1.0 - alpha) / f->Np, t = f->trWp / (f->Np * d);
    for (int i = 0; i < d; i++) {
        w->pd[i] = beta * e->td[i] + alpha * t;
        w->pe[i] = beta * e->te[i];
    }
    if (pft_la_pt_factor(w->pd, w->pe, d))
        return 1;
    memcpy(w->UD, f->U, (size_t)f->m * d * sizeof(double));
    memcpy(w->YD, f->Yt, (size_t)f->r * d * sizeof(double));
    memcpy(w->MD, f->Mp, (size_t)S * d * sizeof(double));
    pft_la_pt_solve_rows(w->pd, w->pe, d, w->UD, f->m);
    pft_la_pt_solve_rows(w->pd, w->pe, d, w->YD, f->r);
    pft_la_pt_solve_rows(w->pd, w->pe, d, w->MD, S);
    return 0;
}

/* X[c] = (y_j - m_c)ᵀ Σ_α⁻¹ (y_j - m_c) for the fold's row j and every component c. */
static void row_quads(const fold_t *f, const work_t *w, int j, double *X)
{
    const eig_t *e = f->e;
    int d = e->d, S = e->S + e->X;
    const double *yj = f->Yt + (size_t)j * d;
    if (e->trid) {
        const double *yd = w->YD + (size_t)j * d;
        double ay = cblas_ddot(d, yj, 1, yd, 1);
        for (int c = 0; c < S; c++) {
            const double *mc = f->Mp + (size_t)c * d, *md = w->MD + (size_t)c * d;
            X[c] = ay - 2 * cblas_ddot(d, yd, 1, mc, 1) + cblas_ddot(d, mc, 1, md, 1);
        }
        return;
    }
    const double *D = w->D;
    double ay = 0;
    for (int i = 0; i < d; i++)
        ay += yj[i] * yj[i] / D[i];
    for (int c = 0; c < S; c++) {
        const double *mc = f->Mp + (size_t)c * d;
        double cross = 0, bc = 0;
        for (int i = 0; i < d; i++) {
            cross += yj[i] * mc[i] / D[i];
            bc += mc[i] * mc[i] / D[i];
        }
        X[c] = ay - 2 * cross + bc;
    }
}

/* shrunk_diag's verdict from W's extreme eigenvalues alone (e->ends): Σ_α's diagonal (1 − α) λ / N' + α t is
 * monotone in λ, so every entry passes its floor (1e-12 of the largest) iff the smallest does. */
static int ends_plain(const eig_t *e, double Np, double trWp, double alpha)
{
    double t = trWp / (Np * e->d), lo = (1.0 - alpha) * e->lam[0] / Np + alpha * t,
           hi = (1.0 - alpha) * e->lam[1] / Np + alpha * t;
    return hi > 0 && lo > 1e-12 * hi;
}

/* Scores the fold's rows for one α into the tally (t->valid stays 0 when α is not a valid point). 0, or 1 in
 * the tridiagonal basis when only the eigenbasis can score α > 0 exactly (a floored diagonal, Σ_α not
 * numerically positive definite, or a nearly singular downdate). α = 0, no shrinkage at all, that the
 * tridiagonal basis cannot score exactly is not a valid point there: a pooled W that the fold's downdate
 * leaves numerically singular is one no classifier at α = 0 can be trusted on (the eigenbasis scores it
 * through the same nearly singular Woodbury correction); the whole grid again in the eigenbasis for it would
 * cost W's eigenvectors, a second d×d matrix and a full eigendecomposition. */
static int fold_score(const fold_t *f, double alpha, tally_t *t, work_t *w)
{
    const eig_t *e = f->e;
    int d = e->d, S = e->S + e->X, r = f->r, m = f->m;
    if (f->Np <= 0 || f->trWp <= 0)
        return 0;
    int plain = e->ends ? ends_plain(e, f->Np, f->trWp, alpha)
                        : pft_ghead__shrunk_diag(e->lam, d, f->Np, f->trWp, alpha, w->D);
    if (!plain && alpha == 0)
        return 0; /* α = 0 with a singular W: not a valid point */
    if (e->trid && (!plain || trid_solves(f, alpha, w)))
        return alpha > 0;
    double beta = (1.0 - alpha) / f->Np, trinv = 0, trinv2 = 0, *D = w->D, *UD = w->UD, *K = w->K;
    for (int i = 0; !e->ends && i < d; i++) { /* the noisy components' traces: none where e->ends */
        trinv += 1.0 / D[i];
        trinv2 += 1.0 / (D[i] * D[i]);
    }
    for (int a = 0; !e->trid && a < m; a++)
        for (int i = 0; i < d; i++)
            UD[(size_t)a * d + i] = f->U[(size_t)a * d + i] / D[i];
    if (m > 0) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, m, d, -beta, UD, d, f->U, d, 0.0, K, m);
        for (int a = 0; a < m; a++)
            K[(size_t)a * m + a] += 1.0;
        if (pft_la_chol_lower(K, m) != 0)
            return 0; /* the downdated covariance is not positive definite at this α */
        if (e->trid && !pft_ghead__pivots_ok(K, m))
            return alpha > 0;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r, d, 1.0, UD, d, f->Yt, d, 0.0, w->P, r);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, S, d, 1.0, UD, d, f->Mp, d, 0.0, w->Q, S);
        if (e->X > 0) /* the noisy components' term needs tr Σ'⁻¹ and tr Σ'⁻² of the downdated covariance */
            pft_ghead__noise_traces(D, UD, K, w->ZZ, d, m, beta, &trinv, &trinv2);
    }
    double bonus = pft_ghead__noise_bonus(trinv, trinv2), *s = w->s, *v = w->v;
    for (int j = 0; j < r; j++) {
        row_quads(f, w, j, w->X);
        for (int c = 0; c < S; c++) {
            double corr = 0;
            if (m > 0) {
                for (int a = 0; a < m; a++)
                    v[a] = w->P[(size_t)a * r + j] - w->Q[(size_t)a * S + c];
                cblas_dtrsv(CblasRowMajor, CblasLower, CblasNoTrans, CblasNonUnit, m, K, m, v, 1);
                for (int a = 0; a < m; a++)
                    corr += v[a] * v[a];
            }
            s[c] = f->logpi[c] - 0.5 * (w->X[c] + beta * corr - e->tau2[c] * bonus);
        }
        if (e->X == 0) {
            pft_ghead__tally_row(t, s, f->present, S, f->truth[j]);
            continue;
        }
        slot_scores(e, f, s, s + S, w->ps);
        pft_ghead__tally_row(t, s + S, w->ps, e->n_slots, f->truth[j]);
    }
    t->valid = 1;
    return 0;
}

/* The cross-validation rows of x in e's basis (fs->n rows of d into Y; xr: d doubles of scratch). 0 or
 * eig_project's errors. */
static int project_rows(const eig_t *e, const float *x, const folds_t *fs, double *Y, double *xr)
{
    int d = e->d;
    for (int k = 0; k < fs->n; k++) {
        const float *xk = x + (size_t)fs->row[k] * d;
        double *yk = e->trid ? Y + (size_t)k * d : xr;
        for (int i = 0; i < d; i++)
            yk[i] = xk[i];
        if (!e->trid)
            cblas_dgemv(CblasRowMajor, CblasNoTrans, d, d, 1.0, e->E, d, xr, 1, 0.0, Y + (size_t)k * d, 1);
    }
    return e->trid ? eig_project(e, Y, Y, fs->n) : 0;
}

/* The grid's best α by the folds' tallies tl (an α invalid in some fold, valid < 0, is never chosen) into
 * *alpha_out and info's cv fields; PFT_ENUMERIC if none is valid. */
static int choose_alpha(tally_t *tl, const folds_t *fs, double *alpha_out, pft_ghead_info_t *info)
{
    for (int a = 0; a < N_ALPHA; a++)
        if (tl[a].valid < 0)
            tl[a].valid = 0;
    int b = pft_ghead__tally_best(tl, N_ALPHA);
    if (b < 0)
        return pft_err(PFT_ENUMERIC, "gaussian head: no shrinkage of the grid gives a positive definite "
                                     "covariance in every fold");
    *alpha_out = pft_ghead__alpha_grid[b];
    info->rule = "cv";
    info->folds = fs->F;
    info->cv_rows = fs->n;
    info->cv_acc = (double)tl[b].correct / (double)tl[b].total;
    return 0;
}

/* One fold's tallies of every α of the grid added to tl; 0, 1 (fold_score's), or fold_build's errors. */
static int fold_tally(const eig_t *e, const folds_t *fs, const double *Y, int which, tally_t *tl, work_t *w)
{
    fold_t fo;
    int rc = fold_build(&fo, e, fs, Y, which);
    for (int a = 0; rc == 0 && a < N_ALPHA; a++) {
        tally_t one = {0};
        rc = fold_score(&fo, pft_ghead__alpha_grid[a], &one, w);
        if (rc != 0)
            break;
        if (!one.valid) {
            tl[a].valid = -1; /* invalid in some fold: never chosen */
            continue;
        }
        if (tl[a].valid >= 0)
            tl[a].valid = 1;
        tl[a].correct += one.correct;
        tl[a].total += one.total;
        tl[a].loss += one.loss;
    }
    fold_free(&fo);
    return rc;
}

/* The cross-validation tallies tl[N_ALPHA] of every α of the grid over the own rows' folds (*fs_out, which
 * the caller frees on success). 1 (nothing to free): the tridiagonal basis cannot score the grid exactly. */
static int lda_cv_tally(const eig_t *e, const float *x, const int32_t *y, int n, const pft_ghead_opts_t *o,
                        tally_t *tl, folds_t *fs_out)
{
    folds_t fs;
    int rc = pft_ghead__folds_make(&fs, e->st, y, n, o->folds, o->seed);
    if (rc != 0)
        return rc;
    double *Y = pft_alloc_array((size_t)fs.n * e->d, sizeof(double));
    double *xr = pft_alloc_array((size_t)e->d, sizeof(double));
    memset(tl, 0, N_ALPHA * sizeof *tl);
    work_t w;
    if (!Y || !xr)
        rc = pft_err(PFT_ENOMEM, "gaussian head: out of memory for cross-validation");
    if (rc == 0 && (rc = work_alloc(&w, e, &fs)) == 0) {
        rc = project_rows(e, x, &fs, Y, xr);
        for (int f = 0; rc == 0 && f < fs.F; f++) {
            rc = fold_tally(e, &fs, Y, f, tl, &w);
            if (o->on_iter)
                o->on_iter(o->on_iter_ctx);
        }
        work_free(&w);
    }
    pft_free(Y);
    pft_free(xr);
    if (rc == 0)
        *fs_out = fs;
    else
        pft_ghead__folds_free(&fs);
    return rc;
}

/* Chooses α by cross-validation; *alpha_out, info's cv fields, the folds (*fs_out, freed by the caller on
 * success). */
static int lda_cv(const eig_t *e, const float *x, const int32_t *y, int n, const pft_ghead_opts_t *o,
                  double *alpha_out, pft_ghead_info_t *info, folds_t *fs_out)
{
    tally_t tl[N_ALPHA];
    int rc = lda_cv_tally(e, x, y, n, o, tl, fs_out);
    if (rc == 0 && (rc = choose_alpha(tl, fs_out, alpha_out, info)))
        pft_ghead__folds_free(fs_out);
    return rc;
}

/* A TIED st's own scatter lent to an in-place reduction (no copy of it): w taken from st, its diagonal saved.
 */
typedef struct {
    double *w, *diag;
} lent_t;

static int lend(pft_gstat_t *st, lent_t *l)
{
    int d = pft_gstat_dim(st);
    if (!pft_gstat_tied_scatter(st))
        return pft_err(PFT_EINVAL, "gaussian head: the statistics' scatter is lent already");
    if (!(l->diag = pft_alloc_array((size_t)d, sizeof(double))))
        return pft_err(PFT_ENOMEM, "gaussian head: out of memory");
    l->w = pft_gstat_take_tied_scatter(st);
    for (int i = 0; i < d; i++)
        l->diag[i] = l->w[(size_t)i * d + i];
    return 0;
}

/* The lent scatter back in st as it was (pft_la_trid_unreduce: it cannot fail with w and diag set). */
static void give_back(pft_gstat_t *st, lent_t *l)
{
    if (!l->w)
        return;
    pft_la_trid_t t = {.n = pft_gstat_dim(st), .a = l->w, .diag = l->diag};
    double *w = NULL;
    if (pft_la_trid_unreduce(&t, &w) == 0)
        pft_gstat_give_tied_scatter(st, &w);
    l->w = l->diag = NULL;
}

/* The evidence's tallies (pft_ghead_evidence) in the tridiagonal basis (eigen 0) or the eigenbasis; with
 * keep, the tridiagonal reduction moves to the caller when it scored the whole grid. With lend (st itself,
 * TIED), the reduction (or the eigensolver) works in st's own scatter: what moves to keep then holds its
 * diagonal, and otherwise the scatter is back in st, unchanged, on return. */
static int evidence_run(const pft_gstat_t *st, pft_gstat_t *lender, const float *x, const int32_t *y, int n,
                        int n_classes, const pft_ghead_opts_t *opts, int eigen, pft_ghead_evidence_t *ev,
                        pft_la_trid_t *keep)
{
    int rc = pft_ghead__check_args(st, n, n_classes, opts);
    if (rc)
        return rc;
    if (opts->kind != PFT_GHEAD_LDA)
        return pft_err(PFT_EINVAL, "gaussian head: evidence is for LDA (tied statistics)");
    if (n < opts->min_cv_rows || pft_gstat_n_classes(st) < 2)
        return 1;
    eig_t e;
    tally_t tl[N_ALPHA];
    folds_t fs;
    /* the tridiagonal basis (no eigenvectors) unless the noisy components' traces need the eigenvalues'
     * basis, or it cannot score some α exactly (then the eigenbasis scores them all) */
    int trid = !eigen && opts->n_extra == 0;
    do {
        lent_t l = {0};
        if (lender && pft_gstat_kind(lender) == PFT_GSTAT_TIED && (rc = lend(lender, &l)))
            return rc;
        if ((rc = eig_init(&e, st, l.w, opts, trid, 1, 1)) == 0) {
            rc = lda_cv_tally(&e, x, y, n, opts, tl, &fs);
            if (rc == 0 && keep && e.trid) { /* the reduction moves to the caller */
                *keep =
                    (pft_la_trid_t){.n = e.d, .a = e.E, .tau = e.tau, .td = e.td, .te = e.te, .diag = l.diag};
                e.E = e.tau = e.td = e.te = NULL;
                l.w = l.diag = NULL;
            }
            eig_free(&e);
        }
        give_back(lender, &l);
    } while (rc == 1 && trid-- == 1);
    if (rc)
        return rc;
    pft_ghead__folds_free(&fs);
    for (int a = 0; a < N_ALPHA; a++) {
        int ok = tl[a].valid > 0 && tl[a].total > 0;
        ev[a] = (pft_ghead_evidence_t){.alpha = pft_ghead__alpha_grid[a],
                                       .correct = ok ? (uint64_t)tl[a].correct : 0,
                                       .total = ok ? (uint64_t)tl[a].total : 0,
                                       .loss = ok ? tl[a].loss : 0};
    }
    return 0;
}

int pft_ghead_evidence(const pft_gstat_t *st, const float *x, const int32_t *y, int n, int n_classes,
                       const pft_ghead_opts_t *opts, pft_ghead_evidence_t *ev)
{
    return evidence_run(st, NULL, x, y, n, n_classes, opts, 0, ev, NULL);
}

int pft_ghead_evidence_keep(pft_gstat_t *st, const float *x, const int32_t *y, int n, int n_classes,
                            const pft_ghead_opts_t *opts, pft_ghead_evidence_t *ev, pft_la_trid_t *keep)
{
    memset(keep, 0, sizeof *keep);
    return evidence_run(st, st, x, y, n, n_classes, opts, 0, ev, keep);
}

int pft_ghead_evidence_give_back(pft_gstat_t *st, pft_la_trid_t *keep)
{
    double *w = NULL;
    if (pft_gstat_kind(st) != PFT_GSTAT_TIED || pft_gstat_tied_scatter(st))
        return pft_err(PFT_EINVAL, "gaussian head: the statistics lent no scatter");
    int rc = pft_la_trid_unreduce(keep, &w);
    return rc ? rc : pft_gstat_give_tied_scatter(st, &w);
}

int pft_ghead__evidence_basis(pft_gstat_t *st, const float *x, const int32_t *y, int n, int n_classes,
                              const pft_ghead_opts_t *opts, int eigen, pft_ghead_evidence_t *ev)
{
    return evidence_run(st, st, x, y, n, n_classes, opts, eigen, ev, NULL);
}

/* Σ_α = β T + t I in the tridiagonal basis, as trid_solves makes it, factored into pd, pe (d each). 0, or 1
 * when it is not numerically positive definite. */
static int trid_sigma(const eig_t *e, double alpha, double *pd, double *pe)
{
    int d = e->d;
    double beta = (1.0 - alpha) / e->N, t = e->sumlam / (e->N * d);
    for (int i = 0; i < d; i++) {
        pd[i] = beta * e->td[i] + alpha * t;
        pe[i] = beta * e->te[i];
    }
    return pft_la_pt_factor(pd, pe, d) ? 1 : 0;
}

/* The linear head of LDA at shrinkage α: one row per label (a label without statistics gets GH_NO_CLASS),
 * or with noisy components one row per component (h->comp_label). In the eigenbasis Σ_α is the diagonal D;
 * in the tridiagonal basis (e->trid) it is β T + t I, solved (dpttrs) and taken back by Q: the same head up
 * to rounding, without W's eigenvectors. 1 (h untouched) when the tridiagonal basis cannot compute it exactly
 * (a floored diagonal, or β T + t I not numerically positive definite): the eigenbasis can. */
static int lda_build(const eig_t *e, double alpha, int C, pft_ghead_t *h)
{
    int d = e->d, K = e->S + e->X, rows = e->X ? K : C;
    double Nall = e->N + e->Nx, trinv = 0, trinv2 = 0;
    float *wb = pft_calloc((size_t)rows * (d + 1), sizeof(float));
    double *D = pft_alloc_array((size_t)d, sizeof(double));
    double *A = pft_alloc_array((size_t)K * d + 1, sizeof(double));
    double *w = pft_alloc_array((size_t)d, sizeof(double));
    double *mbar = pft_calloc((size_t)d, sizeof(double));
    double *pd = e->trid ? pft_alloc_array((size_t)d, sizeof(double)) : NULL;
    double *pe = e->trid ? pft_alloc_array((size_t)d, sizeof(double)) : NULL;
    int *comp = e->X ? pft_alloc_array((size_t)K, sizeof(int)) : NULL;
    int rc = (!wb || !D || !A || !w || !mbar || (e->trid && (!pd || !pe)) || (e->X && !comp))
                 ? pft_err(PFT_ENOMEM, "gaussian head: out of memory")
                 : 0;
    if (rc == 0 && !pft_ghead__shrunk_diag(e->lam, d, e->N, e->sumlam, alpha, D) && e->trid)
        rc = 1;
    if (rc == 0 && e->trid)
        rc = trid_sigma(e, alpha, pd, pe);
    if (rc == 0) {
        for (int i = 0; i < d; i++) {
            trinv += 1.0 / D[i];
            trinv2 += 1.0 / (D[i] * D[i]);
        }
        for (int c = 0; c < K; c++)
            cblas_daxpy(d, e->n[c] / Nall, e->Mt + (size_t)c * d, 1, mbar, 1);
        for (int c = 0; c < K; c++)
            for (int i = 0; i < d; i++) {
                double v = e->Mt[(size_t)c * d + i] - mbar[i];
                A[(size_t)c * d + i] = e->trid ? v : v / D[i];
            }
        if (e->trid) /* a_c = Σ_α⁻¹ (m_c − m̄) */
            pft_la_pt_solve_rows(pd, pe, d, A, K);
    }
    if (rc == 0) {
        double bonus = pft_ghead__noise_bonus(trinv, trinv2);
        for (int l = 0; l < rows; l++)
            wb[(size_t)l * (d + 1) + d] = (float)GH_NO_CLASS;
        for (int c = 0; rc == 0 && c < K; c++) {
            const double *mc = e->Mt + (size_t)c * d, *a = A + (size_t)c * d;
            double b = log(e->n[c] / Nall) + 0.5 * e->tau2[c] * bonus;
            for (int i = 0; i < d; i++)
                b -= 0.5 * a[i] * (mc[i] + mbar[i]);
            if (e->trid) {
                memcpy(w, a, (size_t)d * sizeof(double));
                rc = pft_la_tridiag_q_rows(e->E, e->tau, d, w, 1);
            } else {
                cblas_dgemv(CblasRowMajor, CblasTrans, d, d, 1.0, e->E, d, a, 1, 0.0, w, 1);
            }
            int row_i = e->X ? c : e->slot_label[e->slot[c]];
            if (e->X)
                comp[c] = e->slot_label[e->slot[c]];
            float *row = wb + (size_t)row_i * (d + 1);
            for (int i = 0; i < d; i++)
                row[i] = (float)w[i];
            row[d] = (float)b;
        }
    }
    if (rc == 0) {
        h->K = rows;
        h->comp_label = comp;
        comp = NULL;
        rc = pft_head_from_weights(rows, d, wb, &h->lin);
        if (rc != 0)
            rc = pft_err_wrap(rc, "gaussian head: LDA weights at α = %g", alpha);
    }
    pft_free(comp);
    pft_free(wb);
    pft_free(D);
    pft_free(A);
    pft_free(w);
    pft_free(mbar);
    pft_free(pd);
    pft_free(pe);
    return rc;
}

/* ---- fit and use ----------------------------------------------------------------------------------------
 */

/* tr B = Σ_c n_c ‖μ_c − μ̄‖² over st's classes (the eigenbasis keeps norms). */
static double between_trace(const eig_t *e)
{
    double N = 0, t = 0;
    for (int c = 0; c < e->S; c++)
        N += e->n[c];
    for (int i = 0; N > 0 && i < e->d; i++) {
        double m = 0;
        for (int c = 0; c < e->S; c++)
            m += e->n[c] * e->Mt[(size_t)c * e->d + i];
        m /= N;
        for (int c = 0; c < e->S; c++) {
            double v = e->Mt[(size_t)c * e->d + i] - m;
            t += e->n[c] * v * v;
        }
    }
    return t;
}

/* No class holds two different rows (tr W = 0): the nearest class mean, under an isotropic covariance of the
 * class means' spread (tr B / (N d)), or of 1 where the means coincide too. */
static void isotropic(eig_t *e, double *alpha, pft_ghead_info_t *inf)
{
    e->sumlam = between_trace(e);
    if (!(e->sumlam > 0))
        e->sumlam = e->N * e->d;
    *alpha = 1.0;
    inf->rule = "isotropic";
}

/* LDA's α: as given, by cross-validation over the own rows (*can_cv; the folds into *fs, which the caller
 * frees when cross-validation ran), or OAS's (*alpha on entry): with too few rows, or where no α of the grid
 * is valid in every fold (each fold's W is 0 or singular where the whole is not: a few rows per class;
 * *can_cv is then cleared). 0 or lda_cv's errors. */
static int choose_alpha_rule(const eig_t *e, const float *x, const int32_t *y, int n,
                             const pft_ghead_opts_t *opts, int *can_cv, double *alpha, pft_ghead_info_t *inf,
                             folds_t *fs)
{
    if (opts->alpha != PFT_GHEAD_AUTO) {
        *alpha = opts->alpha;
        inf->rule = "fixed";
        return 0;
    }
    inf->rule = "oas";
    if (!*can_cv)
        return 0;
    int rc = lda_cv(e, x, y, n, opts, alpha, inf, fs);
    if (rc == PFT_ENUMERIC) { /* the closed-form rule, which needs no held-out rows */
        pft_err_clear();
        *can_cv = 0;
        *alpha = inf->oas_alpha;
        inf->rule = "oas";
        return 0;
    }
    return rc;
}

/* pft_ghead_fit with the statistics' scatter available to be taken (NULL: copy it). */
static int fit(const pft_gstat_t *st, double *w, const float *x, const int32_t *y, int n, int n_classes,
               const pft_ghead_opts_t *opts, int eigen, pft_ghead_t **out, pft_ghead_info_t *info);

int pft_ghead_fit(const pft_gstat_t *st, const float *x, const int32_t *y, int n, int n_classes,
                  const pft_ghead_opts_t *opts, pft_ghead_t **out, pft_ghead_info_t *info)
{
    return fit(st, NULL, x, y, n, n_classes, opts, 0, out, info);
}

int pft_ghead__fit_basis(const pft_gstat_t *st, const float *x, const int32_t *y, int n, int n_classes,
                         const pft_ghead_opts_t *opts, int eigen, pft_ghead_t **out, pft_ghead_info_t *info)
{
    return fit(st, NULL, x, y, n, n_classes, opts, eigen, out, info);
}

int pft_ghead_fit_take(pft_gstat_t **st_p, const float *x, const int32_t *y, int n, int n_classes,
                       const pft_ghead_opts_t *opts, pft_ghead_t **out, pft_ghead_info_t *info)
{
    pft_gstat_t *st = *st_p;
    *out = NULL;
    int rc = pft_ghead__check_args(st, n, n_classes, opts);
    if (rc == 0) {
        double *w = opts->kind == PFT_GHEAD_LDA ? pft_gstat_take_tied_scatter(st) : NULL;
        rc = fit(st, w, x, y, n, n_classes, opts, 0, out, info);
    }
    pft_gstat_destroy(st_p);
    return rc;
}

/* A tridiagonal e (not lent) in W's eigenbasis instead: W given back by the reduction, decomposed again and
 * the means projected again (eig_init). */
static int eig_to_eigenbasis(eig_t *e, const pft_ghead_opts_t *o)
{
    pft_la_trid_t t = {.n = e->d, .a = e->E, .tau = e->tau, .td = e->td, .te = e->te, .diag = e->diag};
    double *w = NULL;
    int rc = pft_la_trid_unreduce(&t, &w);
    if (rc != 0)
        return rc; /* e unaltered: no diagonal kept */
    e->E = e->tau = e->td = e->te = e->diag = NULL;
    const pft_gstat_t *st = e->st;
    eig_free(e);
    return eig_init(e, st, w, o, 0, 0, 0);
}

/* α by its rule, then the head into h (inf: its figures). 1 when e is tridiagonal and cannot score or build
 * exactly (h untouched): the caller goes to the eigenbasis and comes again. */
static int fit_in(eig_t *e, const pft_gstat_t *st, const float *x, const int32_t *y, int n, int n_classes,
                  const pft_ghead_opts_t *opts, pft_ghead_t *h, pft_ghead_info_t *inf)
{
    inf->oas_alpha = oas_alpha(e);
    double alpha = inf->oas_alpha, lambda = opts->kind == PFT_GHEAD_QDA ? 0.5 : 1.0;
    folds_t fs = {0};
    int have_folds = 0;
    int can_cv = n >= opts->min_cv_rows && inf->n_classes >= 2;
    int rc = choose_alpha_rule(e, x, y, n, opts, &can_cv, &alpha, inf, &fs);
    have_folds = rc == 0 && can_cv && opts->alpha == PFT_GHEAD_AUTO;
    if (rc == 0 && opts->kind == PFT_GHEAD_QDA) {
        if (opts->lambda != PFT_GHEAD_AUTO)
            lambda = opts->lambda;
        else if (can_cv) {
            if (!have_folds) {
                rc = pft_ghead__folds_make(&fs, st, y, n, opts->folds, opts->seed);
                have_folds = rc == 0;
                inf->folds = fs.F;
                inf->cv_rows = fs.n;
            }
            if (rc == 0)
                rc = pft_ghead__qda_cv(st, x, &fs, alpha, opts, &lambda, &inf->cv_acc);
        }
    }
    if (rc == 0 && opts->kind == PFT_GHEAD_LDA && !(e->sumlam > 0))
        isotropic(e, &alpha, inf);
    if (rc == 0)
        rc = opts->kind == PFT_GHEAD_LDA ? lda_build(e, alpha, n_classes, h)
                                         : pft_ghead__qda_build(st, alpha, lambda, n_classes, opts, h);
    if (have_folds)
        pft_ghead__folds_free(&fs);
    inf->alpha = alpha;
    inf->lambda = opts->kind == PFT_GHEAD_QDA ? lambda : 1.0;
    return rc;
}

/* LDA works in W's tridiagonal basis (one d×d: W's own storage holds the reflectors; no eigenvectors), or in
 * its eigenbasis where that cannot score or build exactly, and with noisy components (their traces). */
static int fit(const pft_gstat_t *st, double *w, const float *x, const int32_t *y, int n, int n_classes,
               const pft_ghead_opts_t *opts, int eigen, pft_ghead_t **out, pft_ghead_info_t *info)
{
    *out = NULL;
    int rc = pft_ghead__check_args(st, n, n_classes, opts);
    if (rc != 0) {
        pft_free(w);
        return rc;
    }
    pft_ghead_info_t base = {.kind = opts->kind, .lambda = 1.0, .cv_acc = NAN};
    base.n_classes = pft_gstat_n_classes(st);
    base.n_rows = pft_gstat_total(st);
    pft_ghead_t *h = pft_calloc(1, sizeof *h);
    if (!h) {
        pft_free(w);
        return pft_err(PFT_ENOMEM, "gaussian head: out of memory");
    }
    h->kind = opts->kind;
    h->C = n_classes;
    h->d = pft_gstat_dim(st);
    eig_t e;
    rc = eig_init(&e, st, w, opts, !eigen && opts->kind == PFT_GHEAD_LDA && opts->n_extra == 0, 0, 0);
    if (rc != 0) {
        pft_free(h);
        return rc;
    }
    if (opts->on_iter)
        opts->on_iter(opts->on_iter_ctx);
    pft_ghead_info_t inf = base;
    rc = fit_in(&e, st, x, y, n, n_classes, opts, h, &inf);
    if (rc == 1 && e.trid) {
        inf = base;
        rc = eig_to_eigenbasis(&e, opts);
        if (rc == 0)
            rc = fit_in(&e, st, x, y, n, n_classes, opts, h, &inf);
    }
    eig_free(&e);
    if (rc != 0) {
        pft_ghead_destroy(&h);
        return rc == 1 ? pft_err(PFT_ENUMERIC, "gaussian head: no basis computes the head") : rc;
    }
    if (info)
        *info = inf;
    *out = h;
    return 0;
}
