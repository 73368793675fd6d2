/* pft_head_kernel: the two products of the head objective on a block of rows, as SIMD kernels.
 *
 * With C ≈ 10 classes the products Z = X Wᵀ and G += Rᵀ X are skinny: OpenBLAS spends as long packing X as
 * multiplying (sgemm_oncopy/itcopy were a third of a fit's profile). These kernels read the rows where they
 * are, keep up to 6 (logits) or 8 (gradient) classes of accumulators in registers, and are compiled for
 * AVX-512, AVX2+FMA and baseline x86-64, picked at load time (as core/pft_linalg.c's kernels): bit-identical
 * results on one machine, not across instruction sets. Sums are float, in a fixed order (deterministic). */
#include "pft_head_internal.h"

#include <stddef.h>

#define VL 16 /* floats per vector */
#define RB 4  /* rows per logits tile */
#define KL 6  /* classes per logits tile at most (RB·KL accumulators) */
#define KG 8  /* classes per gradient tile at most (2·KG accumulators) */

typedef float vf __attribute__((vector_size(4 * VL), aligned(4))); /* unaligned loads and stores */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HEAD_SIMD                                                                                            \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"),                             \
                   optimize("fp-contract=fast")))
#else
#define HEAD_SIMD
#endif
#define INLINE static inline __attribute__((always_inline))

INLINE float hsum(const vf *v)
{
    float s = 0.0f;
    for (int l = 0; l < VL; l++)
        s += (*v)[l];
    return s;
}

/* z[i·C + k] for rows [i0, i0 + nr) and classes [k0, k0 + nk), nr ≤ RB and nk ≤ KL compile-time constants
 * after inlining. */
INLINE void logits_tile(const float *restrict x, int i0, int nr, int d, const float *restrict w, int ldw,
                        int k0, int nk, int C, int pf, float *restrict z)
{
    const int dv = d / VL * VL;
    vf acc[RB][KL];
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < nk; k++)
            acc[r][k] = (vf){0};
    for (int j = 0; j < dv; j += VL) {
        vf xv[RB];
        for (int r = 0; r < nr; r++) {
            xv[r] = *(const vf *)(x + (size_t)(i0 + r) * (size_t)d + j);
            if (pf) /* the next tile's rows, one line per line read: they arrive from memory meanwhile */
                __builtin_prefetch(x + (size_t)(i0 + r + RB) * (size_t)d + j, 0, 3);
        }
        for (int k = 0; k < nk; k++) {
            vf wv = *(const vf *)(w + (size_t)(k0 + k) * (size_t)ldw + j);
            for (int r = 0; r < nr; r++)
                acc[r][k] += xv[r] * wv;
        }
    }
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < nk; k++) {
            const float *xr = x + (size_t)(i0 + r) * (size_t)d, *wk = w + (size_t)(k0 + k) * (size_t)ldw;
            float s = hsum(&acc[r][k]);
            for (int j = dv; j < d; j++)
                s += xr[j] * wk[j];
            z[(size_t)(i0 + r) * (size_t)C + (size_t)(k0 + k)] = s;
        }
}

/* The tile for a run-time class count nk ≤ KL, dispatched to constant-size copies. */
INLINE void logits_rows(const float *restrict x, int i0, int nr, int d, const float *restrict w, int ldw,
                        int k0, int nk, int C, int pf, float *restrict z)
{
    switch (nk) {
#define CASE(K)                                                                                              \
    case K:                                                                                                  \
        logits_tile(x, i0, nr, d, w, ldw, k0, K, C, pf, z);                                                  \
        break;
        CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6)
#undef CASE
    }
}

/* Splits C classes into the fewest chunks of at most kmax, of near-equal size: chunk c is [*k0, *k0 + *nk).
 */
static int chunk_count(int C, int kmax)
{
    return (C + kmax - 1) / kmax;
}

static void chunk(int C, int chunks, int c, int *k0, int *nk)
{
    *k0 = (int)((long)C * c / chunks);
    *nk = (int)((long)C * (c + 1) / chunks) - *k0;
}

HEAD_SIMD
void pft_head_k_logits(const float *restrict x, int B, int d, const float *restrict w, int ldw, int C,
                       float *restrict z)
{
    const int chunks = chunk_count(C, KL);
    for (int c = 0; c < chunks; c++) {
        int k0, nk;
        chunk(C, chunks, c, &k0, &nk);
        int i = 0;
        for (; i + RB <= B; i += RB)
            logits_rows(x, i, RB, d, w, ldw, k0, nk, C, c == 0 && i + 2 * RB <= B, z);
        for (; i < B; i++)
            logits_rows(x, i, 1, d, w, ldw, k0, nk, C, 0, z);
    }
}

/* g[k·ldg + j] += Σ_i r[i·C + k] x_ij for columns [j0, j0 + nv·VL) and classes [k0, k0 + nk), nk ≤ KG and
 * nv ≤ 2 compile-time constants after inlining: the accumulators stay in registers over all B rows. */
INLINE void grad_tile(const float *restrict x, int B, int d, const float *restrict r, int C, int k0, int nk,
                      int j0, int nv, float *restrict g, int ldg)
{
    vf acc[KG][2];
    for (int k = 0; k < nk; k++)
        for (int v = 0; v < nv; v++)
            acc[k][v] = *(const vf *)(g + (size_t)(k0 + k) * (size_t)ldg + j0 + v * VL);
    for (int i = 0; i < B; i++) {
        const float *xi = x + (size_t)i * (size_t)d + j0, *ri = r + (size_t)i * (size_t)C + k0;
        vf xv[2];
        for (int v = 0; v < nv; v++)
            xv[v] = *(const vf *)(xi + v * VL);
        for (int k = 0; k < nk; k++) {
            vf rv = (vf){0} + ri[k];
            for (int v = 0; v < nv; v++)
                acc[k][v] += rv * xv[v];
        }
    }
    for (int k = 0; k < nk; k++)
        for (int v = 0; v < nv; v++)
            *(vf *)(g + (size_t)(k0 + k) * (size_t)ldg + j0 + v * VL) = acc[k][v];
}

INLINE void grad_cols(const float *restrict x, int B, int d, const float *restrict r, int C, int k0, int nk,
                      int j0, int nv, float *restrict g, int ldg)
{
    switch (nk) {
#define CASE(K)                                                                                              \
    case K:                                                                                                  \
        if (nv == 2)                                                                                         \
            grad_tile(x, B, d, r, C, k0, K, j0, 2, g, ldg);                                                  \
        else                                                                                                 \
            grad_tile(x, B, d, r, C, k0, K, j0, 1, g, ldg);                                                  \
        break;
        CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8)
#undef CASE
    }
}

HEAD_SIMD
void pft_head_k_grad(const float *restrict x, int B, int d, const float *restrict r, int C, float *restrict g,
                     int ldg)
{
    const int chunks = chunk_count(C, KG), dv = d / VL * VL;
    for (int c = 0; c < chunks; c++) {
        int k0, nk;
        chunk(C, chunks, c, &k0, &nk);
        int j = 0;
        for (; j + 2 * VL <= dv; j += 2 * VL)
            grad_cols(x, B, d, r, C, k0, nk, j, 2, g, ldg);
        for (; j < dv; j += VL)
            grad_cols(x, B, d, r, C, k0, nk, j, 1, g, ldg);
    }
    for (int j = dv; j < d; j++) /* columns past the last full vector */
        for (int k = 0; k < C; k++) {
            float s = g[(size_t)k * (size_t)ldg + j];
            for (int i = 0; i < B; i++)
                s += r[(size_t)i * (size_t)C + k] * x[(size_t)i * (size_t)d + j];
            g[(size_t)k * (size_t)ldg + j] = s;
        }
}
