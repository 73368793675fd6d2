/* pft_npy: NumPy .npy (format 1.0/2.0/3.0) parsing, validated reading into float32/int32, atomic writing. */
#ifndef PFT_NPY_H
#define PFT_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "pft_dataset.h"

/* Element types we read; all little-endian ('|u1' has no byte order). */
typedef enum {
    PFT_NPY_F2 = 0, /* '<f2' IEEE binary16 */
    PFT_NPY_F4,     /* '<f4' */
    PFT_NPY_F8,     /* '<f8' */
    PFT_NPY_I4,     /* '<i4' */
    PFT_NPY_I8,     /* '<i8' */
    PFT_NPY_U1,     /* '|u1' */
} pft_npy_dtype_t;

/* Limits checked before anything is allocated. */
#define PFT_NPY_MAX_HEADER (1u << 20)        /* header dictionary bytes */
#define PFT_NPY_MAX_DIM INT32_MAX            /* each dimension */
#define PFT_NPY_MAX_ELEMS (INT64_C(1) << 36) /* product of the dimensions */

/* A parsed, validated array description. data borrows from the buffer given to pft_npy_parse
 * (NULL when the header was parsed from a file prefix). */
typedef struct {
    int version;           /* major format version: 1, 2 or 3 */
    pft_npy_dtype_t dtype; /* element type */
    int ndim;              /* 1 or 2 */
    int64_t shape[2];      /* shape[0] rows (or length); shape[1] columns, 1 when ndim == 1 */
    int64_t count;         /* shape[0] * shape[1] */
    size_t header_len;     /* bytes before the data (magic, version, length field, dictionary) */
    size_t data_len;       /* count * itemsize */
    const uint8_t *data;   /* first element, or NULL */
} pft_npy_t;

/* '<f4' etc. and "float32" etc.; "?" for an unknown value. */
const char *pft_npy_descr(pft_npy_dtype_t dtype);
const char *pft_npy_dtype_name(pft_npy_dtype_t dtype);
/* Bytes per element (1, 2, 4 or 8). */
size_t pft_npy_itemsize(pft_npy_dtype_t dtype);

/* Parses and validates a whole .npy image buf[0..len): magic, version, header length, dictionary
 * (exactly the keys descr, fortran_order, shape), dtype, C order, 1-D or 2-D, dimension limits, and
 * that exactly shape-product × itemsize bytes follow the header. name labels every error message
 * (a file name, or e.g. "<buffer>"). Returns 0 and fills *out, or PFT_EFORMAT / PFT_EUNSUPPORTED with
 * a message "name: ...". Never reads outside buf; allocates nothing. */
int pft_npy_parse(const uint8_t *buf, size_t len, const char *name, pft_npy_t *out);

/* Converts a parsed array to float32 into out[0..count): any supported dtype; float64 values beyond
 * float32's range are errors. NaN/Inf → PFT_EFORMAT "name: row R column C: value is NaN". */
int pft_npy_decode_f32(const pft_npy_t *npy, const char *name, float *out);
/* Converts a parsed integer array (i4, i8, u1) to int32 into out[0..count); int64 values outside the
 * int32 range → PFT_ERANGE naming the index; float dtypes → PFT_EFORMAT. */
int pft_npy_decode_i32(const pft_npy_t *npy, const char *name, int32_t *out);

/* Reads only the header of a file and validates it against the file size (as pft_npy_parse does).
 * data is NULL in *out. Errors name the file: PFT_EIO (open/read), PFT_EFORMAT, PFT_EUNSUPPORTED. */
int pft_npy_read_header(const char *path, pft_npy_t *out);

/* Reads a 2-D array (rows × cols) of any supported dtype as float32. 1-D arrays are rejected
 * (a feature file must say how many features a row has); use pft_npy_read_f32_vec for vectors.
 * On success *x is a new buffer (release with pft_free); on error *x is NULL and the message names
 * the file (and the first non-finite value's row and column). */
int pft_npy_read_f32(const char *path, float **x, int64_t *rows, int64_t *cols);
/* Reads a 1-D array of any supported dtype as float32; *x as above. */
int pft_npy_read_f32_vec(const char *path, float **x, int64_t *n);
/* Reads integer labels (i4, i8, u1) of shape (n,) or (n, 1) as int32; values outside int32 are
 * rejected naming the index. *y as above. */
int pft_npy_read_i32(const char *path, int32_t **y, int64_t *n);

/* Writes a '<f4' array of shape (rows, cols) / '<f4' (n,) / '<i4' (n,), format 1.0, readable by
 * numpy.load. Atomic: written to a temporary file in the same directory, fsync'ed, then renamed over
 * path, so readers see the old file or the complete new one. Values are written as given (no NaN
 * check). Errors: PFT_EINVAL (negative sizes), PFT_EIO naming the file and the system error. */
int pft_npy_write_f32(const char *path, const float *x, int64_t rows, int64_t cols);
int pft_npy_write_f32_vec(const char *path, const float *x, int64_t n);
int pft_npy_write_i32(const char *path, const int32_t *y, int64_t n);

/* Loads a dataset: features (2-D .npy, any supported dtype → float32) and labels (integer .npy). Errors name
 * the file: unreadable or malformed files (above), a row-count mismatch naming both files, zero rows,
 * negative labels, labels ≥ n_classes (n_classes ≤ 0: max label + 1), non-finite features. */
int pft_npy_load_dataset(const char *x_path, const char *y_path, int n_classes, pft_dataset_t **out);

#endif
