/* pft_head_internal: internal to core/pft_head*.c; not part of the API. The objective (data, weights,
 * preconditioner, scratch), the optimiser that minimises it and the SIMD kernels both use. */
#ifndef PFT_HEAD_INTERNAL_H
#define PFT_HEAD_INTERNAL_H

#include "pft_head.h"

#include <stddef.h>
#include <stdint.h>

/* The objective of pft_head_fit* (pft_head_objective.c has the theory). The caller sets the fields down to
 * T, then pft_head__objective_open allocates the rest. */
typedef struct {
    const float *x;   /* n×d */
    const int32_t *y; /* n */
    const float *q;   /* n×C soft targets, or NULL: no soft-target term */
    const double *w;  /* n row weights > 0, or NULL: all 1 */
    double wsum;      /* N = Σ w_i (n without weights) */
    int n, d, C;
    double l2;
    double alpha; /* weight of the label term (1 without distillation) */
    double T;     /* temperature of the soft-target term */
    /* set by pft_head__objective_open / pft_head__precondition: */
    int block;      /* rows per block of the fused pass */
    size_t P;       /* parameters: C·(d+1) */
    int precond;    /* PFT_HEAD_PRECOND_* in effect */
    double *mu, *s; /* column means / scales (0 and 1 without standardisation; s = 1 when whitening) */
    float *pinv; /* whitening only: d×d lower triangular L⁻¹, L Lᵀ = Σ + εI (W = V·pinv); else NULL */
    float *vt;   /* whitening only: d×C scratch (Vᵀ, then the preconditioned gradient transposed) */
    double *w_raw; /* C×(d+1) raw [W | b] for the current θ */
    float *wf;     /* C×(d+1) float copy of w_raw for the kernels */
    float *z;      /* block×C logits */
    float *r;      /* block×C residuals R = ∂(row loss)/∂z */
    double *e;     /* 2C scratch: logits, then exponentials; [C, 2C): exponentials at temperature T */
    float *gblk;   /* C×d block gradient */
    double *g_raw; /* C×(d+1) raw gradient */
    int evals;     /* evaluations so far */
} pft_head_obj_t;

/* Allocates o's buffers for the sizes already set in o (n, d, C); mu = 0, s = 1, no preconditioner.
 * PFT_ENOMEM on failure (pft_head__objective_close releases what was allocated). */
int pft_head__objective_open(pft_head_obj_t *o);

/* Frees o's buffers; safe on a partly opened o. */
void pft_head__objective_close(pft_head_obj_t *o);

/* Sets up the preconditioner kind (PFT_HEAD_PRECOND_*) from the data: means, scales, whitening. Whitening
 * falls back to the diagonal one when it is not possible (a covariance that cannot be factorised, d above
 * 4096, no memory for d² doubles): it never fails, it only changes how fast the fit converges. */
void pft_head__precondition(pft_head_obj_t *o, int kind);

/* θ (preconditioned [V | c], C×(d+1)) → raw [W | b] into raw. */
void pft_head__theta_to_raw(pft_head_obj_t *o, const double *theta, double *raw);

/* f and the preconditioned gradient g (C×(d+1)) at θ; *gmax = max |raw gradient|. PFT_ENUMERIC when f
 * or the gradient is not finite. */
int pft_head__evaluate(pft_head_obj_t *o, const double *theta, double *f, double *g, double *gmax);

/* Minimises o (open and preconditioned) by L-BFGS from θ = 0; raw weights [W | b] into wb (C×(d+1)) and
 * info (not NULL) filled. PFT_ENOMEM, PFT_ENUMERIC. */
int pft_head__lbfgs(pft_head_obj_t *o, const pft_head_opts_t *opts, float *wb, pft_head_info_t *info);

/* z[i·C + k] = Σ_j x_ij w_kj (float sums) for the B rows of x (B×d, row stride d) and the C rows of w (row
 * stride ldw ≥ d). */
void pft_head_k_logits(const float *x, int B, int d, const float *w, int ldw, int C, float *z);

/* g[k·ldg + j] += Σ_i r[i·C + k] x_ij (float sums) for the B rows of x (B×d) and r (B×C); g is C×ldg. */
void pft_head_k_grad(const float *x, int B, int d, const float *r, int C, float *g, int ldg);

#endif
