/* pft_linalg: the one thin place where core/ reaches BLAS and LAPACKE (row-major helpers). */
#include "pft_linalg.h"

#include <lapacke.h>
#include <string.h>

#include "pft_error.h"

int pft_la_chol_lower(double *a, int d)
{
    /* A row-major lower triangle is a column-major upper triangle: factor A = UᵀU in column-major
     * order without LAPACKE's transposing copy; U read row-major is L. */
    lapack_int info = LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', d, a, d);
    if (info != 0)
        return pft_err(PFT_ENUMERIC, "Cholesky factorisation failed (leading minor %d)", (int)info);
    pft_la_zero_upper(a, d);
    return 0;
}

void pft_la_llt(const double *l, double *out, int d)
{
    /* out := Lᵀ (lower triangle of l only), then out := L · out with TRMM (which reads only the lower
     * triangle of l), then mirror so the result is exactly symmetric. */
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            out[(size_t)i * d + j] = j >= i ? l[(size_t)j * d + i] : 0.0;
    cblas_dtrmm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, d, d, 1.0, l, d, out, d);
    pft_la_sym_from_lower(out, d);
}

void pft_la_sym_from_lower(double *a, int d)
{
    for (int i = 0; i < d; i++)
        for (int j = i + 1; j < d; j++)
            a[(size_t)i * d + j] = a[(size_t)j * d + i];
}

void pft_la_zero_upper(double *a, int d)
{
    for (int i = 0; i < d; i++)
        memset(a + (size_t)i * d + i + 1, 0, (size_t)(d - i - 1) * sizeof *a);
}
