/* pft_dataset: a labelled feature set (n×d float32 features, n int32 labels in [0, n_classes)). */
#ifndef PFT_DATASET_H
#define PFT_DATASET_H

#include <stdint.h>

#include "pft_prep.h"

typedef struct pft_dataset_t pft_dataset_t;

/* Largest class count accepted (a label above it is taken as corrupt data, not as a class). */
#define PFT_DATASET_MAX_CLASSES 100000

/* A dataset of n zeroed rows of dimension d, labels 0; n ≥ 0, d ≥ 1, n_classes ≥ 1. NULL on failure
 * (bad sizes or out of memory). */
pft_dataset_t *pft_dataset_new(int n, int d, int n_classes);

/* Takes ownership of *x_p (n×d) and *y_p (n), both from pft_alloc, and NULLs the caller's pointers,
 * even on error (the buffers are then freed). Labels are validated: each in [0, n_classes);
 * n_classes ≤ 0 means max label + 1. Errors: PFT_EINVAL (sizes, a negative label, label ≥ n_classes),
 * PFT_EFORMAT (a non-finite feature), PFT_ENOMEM, each with a message naming the row. */
int pft_dataset_wrap(float **x_p, int32_t **y_p, int n, int d, int n_classes, pft_dataset_t **out);

/* pft_dataset_wrap, with x_name and y_name naming features and labels in error messages (a file path, say). */
int pft_dataset_adopt(float **x_p, int32_t **y_p, int n, int d, int n_classes, const char *x_name,
                      const char *y_name, pft_dataset_t **out);

/* Frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_dataset_destroy(pft_dataset_t **self_p);

int pft_dataset_n(const pft_dataset_t *self);
int pft_dataset_d(const pft_dataset_t *self);
int pft_dataset_n_classes(const pft_dataset_t *self);
/* Borrowed row-major n×d features and n labels, valid until the dataset is destroyed. */
const float *pft_dataset_x(const pft_dataset_t *self);
const int32_t *pft_dataset_y(const pft_dataset_t *self);
/* Writable views; a caller that writes labels keeps them in [0, n_classes). */
float *pft_dataset_x_mut(pft_dataset_t *self);
int32_t *pft_dataset_y_mut(pft_dataset_t *self);

/* counts[0..n_classes) = rows per class. */
void pft_dataset_class_counts(const pft_dataset_t *self, int *counts);

/* Copies the rows of class c, in dataset order, into a new contiguous buffer *x_out (count×d, release
 * with pft_free) and sets *n_out. A class with no rows gives *x_out = NULL, *n_out = 0 and returns 0.
 * Errors: PFT_EINVAL (c outside [0, n_classes)), PFT_ENOMEM; *x_out is NULL on error. */
int pft_dataset_gather_class(const pft_dataset_t *self, int c, float **x_out, int *n_out);

/* A new dataset of rows idx[0..m) (repeats allowed, order kept), same d and n_classes.
 * Errors: PFT_EINVAL (m < 0, an index outside [0, n)), PFT_ENOMEM. */
int pft_dataset_subset(const pft_dataset_t *self, const int *idx, int m, pft_dataset_t **out);

/* A new dataset holding the rows of a then b; n_classes is the larger of the two.
 * Errors: PFT_EINVAL (different d, n overflow), PFT_ENOMEM. */
int pft_dataset_concat(const pft_dataset_t *a, const pft_dataset_t *b, pft_dataset_t **out);

/* Applies preprocessing to the features in place (see pft_prep_apply). */
int pft_dataset_apply_prep(pft_dataset_t *self, pft_prep_t prep);

#endif
