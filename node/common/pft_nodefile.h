/* pft_nodefile: a node's private facts in a small node-local file (its data files, secret key, evaluation
 * set), which only that node reads: the other half of the public topology (docs/USAGE.md, pftnode). */
#ifndef PFT_NODEFILE_H
#define PFT_NODEFILE_H

/* One "name = value" per line; blank lines and lines starting with '#' are ignored. Names: train, labels,
 * test, test_labels, key, eval_features, eval_labels (each at most once). Relative paths resolve against the
 * file's folder. Every field is an owned string, NULL when not given. */
typedef struct {
    char *train;         /* training features .npy */
    char *labels;        /* training labels .npy */
    char *test;          /* test features .npy (with test_labels) */
    char *test_labels;   /* test labels .npy */
    char *key;           /* the node's secret key file */
    char *eval_features; /* the global evaluation set (with eval_labels) */
    char *eval_labels;
} pft_nodefile_t;

/* Reads path into *out (zeroed first). PFT_EIO if it cannot be read, PFT_EINVAL for an unknown name, a line
 * without '=', an empty value or a name given twice (the message names the file and line), PFT_ENOMEM. On
 * error *out is freed. */
int pft_nodefile_read(const char *path, pft_nodefile_t *out);

/* Writes the fields of nf that are not NULL to path, atomically and durably (pft_fsio_write_atomic), as
 * given (give absolute paths: relative ones are read against the file's folder). PFT_EIO, PFT_ENOMEM. */
int pft_nodefile_write(const char *path, const pft_nodefile_t *nf);

/* Frees every field and zeroes *nf; safe twice. */
void pft_nodefile_free(pft_nodefile_t *nf);

#endif
