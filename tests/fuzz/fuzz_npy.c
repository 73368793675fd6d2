/* fuzz_npy: libFuzzer harness for .npy parsing and decoding, in memory and from a file (the two paths must
 * agree); also built without libFuzzer as the ctest corpus replay (replay_main.c). */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_npy.h"

/* Invariants checked on every input (a violation aborts, so libFuzzer saves the input):
 * - pft_npy_parse fails with a negative code and a message, or describes exactly the input: version 1..3,
 *   1-D or 2-D, count = rows × cols, header + data = the whole buffer, data inside it;
 * - the same bytes as a file: pft_npy_read_header succeeds exactly when parse does, with the same fields;
 * - decode_f32 succeeds only with finite values; read_f32 (2-D) / read_f32_vec (1-D) give the same code
 *   and the same values bit for bit;
 * - decode_i32 refuses float dtypes; read_i32 ((n,) or (n, 1)) agrees with it; where both integer and
 *   float decodes succeed, (float) of the int equals the float. */

#define FAIL(...)                                                                                            \
    do {                                                                                                     \
        fprintf(stderr, "fuzz_npy: invariant violated: " __VA_ARGS__);                                       \
        fprintf(stderr, "\n");                                                                               \
        unlink(s_path); /* no temporary file left behind */                                                  \
        abort();                                                                                             \
    } while (0)

static char s_path[64]; /* per-process temporary file (RAM-backed when /dev/shm exists) */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(s_path, sizeof s_path, "%s/pft-fuzz-npy-%ld.npy", dir, (long)getpid());
    return 0;
}

static void write_file(const uint8_t *data, size_t size)
{
    if (!s_path[0])
        LLVMFuzzerInitialize(NULL, NULL);
    int fd = open(s_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(s_path);
        abort(); /* the harness's own failure, not an input's */
    }
    size_t off = 0;
    while (off < size) {
        ssize_t k = write(fd, data + off, size - off);
        if (k <= 0) {
            perror(s_path);
            abort();
        }
        off += (size_t)k;
    }
    close(fd);
}

static void check_error(int rc, const char *what)
{
    if (rc >= 0 || pft_errmsg()[0] == '\0')
        FAIL("%s failed with rc %d and message \"%s\"", what, rc, pft_errmsg());
}

/* Compares the in-memory decode with the file reader for the same bytes. */
static void check_file_path(const pft_npy_t *a, int frc, const float *f, int irc, const int32_t *iv)
{
    size_t n = (size_t)a->count;
    if (a->ndim == 2 || a->ndim == 1) {
        float *x = NULL;
        int64_t rows = -1, cols = -1, len = -1;
        int rc = a->ndim == 2 ? pft_npy_read_f32(s_path, &x, &rows, &cols)
                              : pft_npy_read_f32_vec(s_path, &x, &len);
        if (rc != frc)
            FAIL("read_f32%s returns %d, decode_f32 %d (%s)", a->ndim == 2 ? "" : "_vec", rc, frc,
                 pft_errmsg());
        if (rc == 0) {
            if (!x || (a->ndim == 2 && (rows != a->shape[0] || cols != a->shape[1])) ||
                (a->ndim == 1 && len != a->shape[0]))
                FAIL("read_f32 shape differs");
            if (n && memcmp(x, f, n * sizeof(float)) != 0)
                FAIL("read_f32 values differ from decode_f32");
        } else if (x) {
            FAIL("read_f32 failed but returned a buffer");
        }
        pft_free(x);
    }
    if (a->ndim == 1 || a->shape[1] == 1) {
        int32_t *y = NULL;
        int64_t len = -1;
        int rc = pft_npy_read_i32(s_path, &y, &len);
        if (rc != irc)
            FAIL("read_i32 returns %d, decode_i32 %d (%s)", rc, irc, pft_errmsg());
        if (rc == 0) {
            if (!y || len != a->shape[0])
                FAIL("read_i32 length differs");
            if (n && memcmp(y, iv, n * sizeof(int32_t)) != 0)
                FAIL("read_i32 values differ from decode_i32");
        } else if (y) {
            FAIL("read_i32 failed but returned a buffer");
        }
        pft_free(y);
    }
}

static void check_parsed(const uint8_t *data, size_t size, const pft_npy_t *a)
{
    if (a->version < 1 || a->version > 3 || (a->ndim != 1 && a->ndim != 2) || a->shape[0] < 0 ||
        a->shape[1] < 0 || (a->ndim == 1 && a->shape[1] != 1))
        FAIL("parsed description out of range (version %d, ndim %d)", a->version, a->ndim);
    if (a->count != a->shape[0] * a->shape[1] || a->count > PFT_NPY_MAX_ELEMS)
        FAIL("count %lld is not the shape product", (long long)a->count);
    size_t isz = pft_npy_itemsize(a->dtype);
    if (isz == 0 || a->data_len != (size_t)a->count * isz || a->header_len + a->data_len != size ||
        a->data != data + a->header_len)
        FAIL("header %zu + data %zu bytes do not describe the %zu-byte input", a->header_len, a->data_len,
             size);
    if (strcmp(pft_npy_descr(a->dtype), "?") == 0 || strcmp(pft_npy_dtype_name(a->dtype), "?") == 0)
        FAIL("parsed dtype has no name");

    size_t n = (size_t)a->count;
    float *f = pft_alloc_array(n, sizeof *f);
    int32_t *iv = pft_alloc_array(n, sizeof *iv);
    if (!f || !iv)
        abort();
    int frc = pft_npy_decode_f32(a, "<fuzz>", f);
    if (frc)
        check_error(frc, "decode_f32");
    else
        for (size_t i = 0; i < n; i++)
            if (!isfinite(f[i]))
                FAIL("decode_f32 returned a non-finite value at %zu", i);
    int irc = pft_npy_decode_i32(a, "<fuzz>", iv);
    int is_float = a->dtype == PFT_NPY_F2 || a->dtype == PFT_NPY_F4 || a->dtype == PFT_NPY_F8;
    if (is_float && irc != PFT_EFORMAT)
        FAIL("decode_i32 of a float array returns %d", irc);
    if (irc)
        check_error(irc, "decode_i32");
    else if (a->dtype != PFT_NPY_I8 && a->dtype != PFT_NPY_I4 && a->dtype != PFT_NPY_U1)
        FAIL("decode_i32 accepted dtype %s", pft_npy_descr(a->dtype));
    if (frc == 0 && irc == 0)
        for (size_t i = 0; i < n; i++)
            if ((float)iv[i] != f[i])
                FAIL("element %zu: int %d but float %.9g", i, iv[i], (double)f[i]);

    pft_npy_t h;
    memset(&h, 0, sizeof h);
    int hrc = pft_npy_read_header(s_path, &h);
    if (hrc != 0)
        FAIL("parse accepts the bytes, read_header refuses the file: %s", pft_errmsg());
    if (h.version != a->version || h.dtype != a->dtype || h.ndim != a->ndim || h.shape[0] != a->shape[0] ||
        h.shape[1] != a->shape[1] || h.count != a->count || h.header_len != a->header_len ||
        h.data_len != a->data_len || h.data != NULL)
        FAIL("read_header describes the file differently from parse");
    check_file_path(a, frc, f, irc, iv);
    pft_free(f);
    pft_free(iv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    write_file(data, size);
    pft_npy_t a;
    memset(&a, 0, sizeof a);
    int rc = pft_npy_parse(data, size, "<fuzz>", &a);
    if (rc == 0) {
        check_parsed(data, size, &a);
    } else {
        check_error(rc, "parse");
        pft_npy_t h;
        int hrc = pft_npy_read_header(s_path, &h);
        if (hrc != rc)
            FAIL("parse refuses the bytes with %d, read_header returns %d for the file", rc, hrc);
        float *x = NULL;
        int32_t *y = NULL;
        int64_t r, c;
        if (pft_npy_read_f32(s_path, &x, &r, &c) == 0 || x || pft_npy_read_i32(s_path, &y, &r) == 0 || y)
            FAIL("parse refuses the bytes, a file reader accepts them");
    }
    unlink(s_path);
    return 0;
}
