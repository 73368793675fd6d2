/* pft_linalg: the one thin place where core/ reaches BLAS and LAPACKE (row-major helpers). */
#ifndef PFT_LINALG_H
#define PFT_LINALG_H

#include <cblas.h>
#include <stddef.h>

/* In place lower Cholesky factor of the symmetric positive definite d×d row-major matrix a
 * (only the lower triangle is read). On success the upper triangle is set to zero and 0 is
 * returned; PFT_ENUMERIC when a is not positive definite (a is then clobbered). */
int pft_la_chol_lower(double *a, int d);

/* out (d×d, row-major) = L Lᵀ for a lower triangular L (upper part of l ignored). */
void pft_la_llt(const double *l, double *out, int d);

/* Copies the lower triangle of the d×d row-major matrix a onto its upper triangle. */
void pft_la_sym_from_lower(double *a, int d);

/* Zeroes the strictly upper triangle of the d×d row-major matrix a. */
void pft_la_zero_upper(double *a, int d);

#endif
