/* pft_npy_rows: a 2-D .npy feature file read by ranges of rows, so that a large matrix (the evaluation set
 * every node of a simulation scores) is never held whole: each process reads through the page cache the
 * processes share and keeps only the block it works on. */
#ifndef PFT_NPY_ROWS_H
#define PFT_NPY_ROWS_H

#include <stdint.h>

typedef struct pft_npy_rows_t pft_npy_rows_t;

/* Opens a 2-D feature file of any supported dtype and validates its header against its size.
 * Errors name the file: PFT_EIO, PFT_EFORMAT (malformed, not 2-D, empty, too large), PFT_EUNSUPPORTED,
 * PFT_ENOMEM. *out is NULL on error. */
int pft_npy_rows_open(const char *path, pft_npy_rows_t **out);
void pft_npy_rows_destroy(pft_npy_rows_t **self_p);

int pft_npy_rows_n(const pft_npy_rows_t *self);
int pft_npy_rows_cols(const pft_npy_rows_t *self);

/* Reads rows [row0, row0 + n) as float32 into out (n×cols). Errors: PFT_EINVAL (range), PFT_EIO,
 * PFT_EFORMAT (the file shrank; a non-finite value, naming its row and column), PFT_ENOMEM. */
int pft_npy_rows_read(pft_npy_rows_t *self, int row0, int n, float *out);

#endif
