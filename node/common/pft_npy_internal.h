/* pft_npy_internal: what pft_npy.c shares with pft_npy_rows.c. Not for other modules. */
#ifndef PFT_NPY_INTERNAL_H
#define PFT_NPY_INTERNAL_H

#include "pft_npy.h"

/* Opens path and validates its header against the file's size; on success *fd_out is open (the caller
 * closes it). Errors as pft_npy_read_header. */
int pft_npy__open(const char *path, pft_npy_t *out, int *fd_out);

/* Converts n elements of a's dtype at src to float32 into dst; element `first` of the array is src[0] (for
 * messages naming the row and column of a non-finite value). Errors as pft_npy_decode_f32. */
int pft_npy__convert_f32(const pft_npy_t *a, const uint8_t *src, size_t n, float *dst, int64_t first,
                         const char *name);

#endif
