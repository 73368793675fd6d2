/* pft_vertex: vertex (linear programming) reconstruction of rows from a released subspace (the vertex attack
 * of docs/SECURITY.md §9).
 *
 * Features of a ReLU backbone are non-negative (the PACS MobileNetV2 features: 31 % exact zeros). When a
 * release confines its rows to a proper subspace S (pft_subspace), each row x ≥ 0 lies in the polytope
 * P = {x ∈ S : x ≥ 0, 1ᵀx = d} (rescaled), and a row with many zeros is a vertex of P: the solution of a
 * linear program for some objective. The attack solves n_lp programs max gᵀx over P (x = Bᵀz, B the basis of
 * S, z free): program t maximises one coordinate, the coordinates taken in a random order (from the second
 * round over the d coordinates on, with a 1 % Gaussian perturbation). Maximising x_j finds the point of P
 * with the largest share in coordinate j, often a row; random Gaussian objectives (tried on chain5's node a:
 * 0 rows in 400 programs, against 7 this way) find generic vertices only. The programs are warm-started one
 * from the next (GLPK's primal simplex; one that stalls, rows being highly degenerate vertices, restarts from
 * the standard basis with the dual simplex, and is counted as failed when that fails too). The attack keeps
 * the distinct vertices, rescales each to unit l2 norm (the rows are l2-normalised: the scale is public) and
 * compares them with the auditor's own rows: a vertex whose cosine with a row is ≥ 1 − PFT_VERTEX_MATCH is
 * that row, recovered (its l2 error ≤ √(2·PFT_VERTEX_MATCH) ≈ 1.4e-3 against a typical spacing between rows
 * of 0.6-0.8), and exactly when its error is ≤ PFT_VERTEX_EXACT. What an attacker without the rows sees: a
 * generic vertex of P has dim − 1 zeros (its active constraints); a row has many more, so vertices with at
 * least PFT_VERTEX_ROWLIKE × (dim − 1) zeros are counted as "look like rows", with how many of them are rows.
 */
#ifndef PFT_VERTEX_H
#define PFT_VERTEX_H

#include "pft_subspace.h"

#include <stdint.h>

#define PFT_VERTEX_MATCH 1e-6  /* 1 − cosine at or below which a vertex is a row */
#define PFT_VERTEX_EXACT 1e-5  /* l2 error (unit vectors) at or below which a recovered row is exact */
#define PFT_VERTEX_SAME 1e-9   /* 1 − cosine at or below which two vertices are the same */
#define PFT_VERTEX_ZERO 1e-6   /* |x_j| ≤ this × max |x| counts as an exact zero */
#define PFT_VERTEX_ROWLIKE 1.5 /* zeros ≥ this × (dim − 1): the vertex looks like a row */
#define PFT_VERTEX_LP_DEFAULT 400
#define PFT_VERTEX_TIME_MS 10000 /* time limit of one simplex run (ms); a program gets two */

/* What the attack found. */
typedef struct {
    int applicable;      /* 0: see reason */
    const char *reason;  /* static text when not applicable, else NULL */
    int lps, lps_failed; /* programs solved to optimality / not */
    int vertices;        /* distinct vertices found */
    int rows_recovered;  /* distinct own rows within √(2·PFT_VERTEX_MATCH) of a vertex */
    int rows_exact;
    /* of which within PFT_VERTEX_EXACT (the row to rounding) */ /* distinct own rows equal to a vertex */
    double max_err;       /* over the recovered rows, the error of the best vertex for each; 0 when none */
    double min_err_other; /* smallest l2 error between a vertex that is no row and its nearest row */
    int rowlike, rowlike_rows;        /* vertices with ≥ rowlike_zeros zeros; how many of them are rows */
    int rowlike_zeros;                /* the data-free threshold, ceil(PFT_VERTEX_ROWLIKE × (dim − 1)) */
    int zeros_row_min, zeros_row_max; /* zeros of the vertices that are rows (-1 when none) */
    int zeros_other_max;              /* most zeros of a vertex that is no row (-1 when none) */
} pft_vertex_result_t;

/* Runs n_lp programs (seeded by seed) over the polytope of s and matches the vertices against the n own rows
 * (n×d float; used only to score what was found). Not applicable (r->applicable = 0, PASS) when s is no
 * proper subspace, an own row has a negative entry, no own row lies within √(2·PFT_VERTEX_MATCH) of S (no
 * vertex could match one: a DP release's PSD projection leaves a subspace of noise that holds no row), or P
 * is empty. 0, or PFT_EINVAL (n_lp < 1), PFT_ENOMEM. */
int pft_vertex_attack(const pft_subspace_t *s, const float *rows, int n, int n_lp, uint64_t seed,
                      pft_vertex_result_t *r);

/* FAIL when a row was recovered, else PASS. */
pft_verdict_t pft_vertex_verdict(const pft_vertex_result_t *r);

#endif
