/* pft_npy: .npy parsing that trusts no byte, chunked conversion to float32/int32, atomic writing.
 *
 * Format (numpy/lib/format.py): "\x93NUMPY", major, minor (0), header length (uint16 LE for 1.0,
 * uint32 LE for 2.0/3.0), then a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}
 * padded with spaces and a newline, then the elements in C order. All multi-byte values here are read
 * and written byte by byte as little-endian, so the code is correct on any host. */
#include "pft_npy.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_half.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC_LEN 6
#define CHUNK_BYTES (1u << 20) /* staging buffer for file reads/writes; a multiple of every itemsize */

static const uint8_t s_magic[MAGIC_LEN] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

static const struct {
    const char *descr;
    const char *name;
    size_t itemsize;
} s_dtypes[] = {
    [PFT_NPY_F2] = {"<f2", "float16", 2}, [PFT_NPY_F4] = {"<f4", "float32", 4},
    [PFT_NPY_F8] = {"<f8", "float64", 8}, [PFT_NPY_I4] = {"<i4", "int32", 4},
    [PFT_NPY_I8] = {"<i8", "int64", 8},   [PFT_NPY_U1] = {"|u1", "uint8", 1},
};
#define N_DTYPES ((int)(sizeof s_dtypes / sizeof s_dtypes[0]))

const char *pft_npy_descr(pft_npy_dtype_t dtype)
{
    return (int)dtype >= 0 && (int)dtype < N_DTYPES ? s_dtypes[dtype].descr : "?";
}

const char *pft_npy_dtype_name(pft_npy_dtype_t dtype)
{
    return (int)dtype >= 0 && (int)dtype < N_DTYPES ? s_dtypes[dtype].name : "?";
}

size_t pft_npy_itemsize(pft_npy_dtype_t dtype)
{
    return (int)dtype >= 0 && (int)dtype < N_DTYPES ? s_dtypes[dtype].itemsize : 0;
}

/* ---- little-endian loads and stores ---- */

static uint16_t ld16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t ld64(const uint8_t *p)
{
    return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

static void st32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* "7993×1280" or "(7993,)" into buf, for messages. */
static const char *shape_str(const pft_npy_t *a, char *buf, size_t size)
{
    if (a->ndim == 1)
        snprintf(buf, size, "(%" PRId64 ",)", a->shape[0]);
    else
        snprintf(buf, size, "%" PRId64 "×%" PRId64, a->shape[0], a->shape[1]);
    return buf;
}

/* ---- header dictionary parser ---- */

typedef struct {
    const char *s; /* dictionary text (not NUL-terminated) */
    size_t len;
    size_t pos;
    const char *name; /* for messages */
} lexer_t;

static void skip_ws(lexer_t *lx)
{
    while (lx->pos < lx->len && (lx->s[lx->pos] == ' ' || lx->s[lx->pos] == '\t' || lx->s[lx->pos] == '\n' ||
                                 lx->s[lx->pos] == '\r'))
        lx->pos++;
}

static int peek(const lexer_t *lx)
{
    return lx->pos < lx->len ? (unsigned char)lx->s[lx->pos] : -1;
}

static int expect(lexer_t *lx, char c, const char *what)
{
    skip_ws(lx);
    if (peek(lx) != (unsigned char)c)
        return pft_err(PFT_EFORMAT, "%s: header: expected '%c' %s at offset %zu", lx->name, c, what, lx->pos);
    lx->pos++;
    return 0;
}

/* A quoted Python string without escapes, copied into out (NUL-terminated). */
static int lex_string(lexer_t *lx, char *out, size_t size)
{
    skip_ws(lx);
    int q = peek(lx);
    if (q != '\'' && q != '"')
        return pft_err(PFT_EFORMAT, "%s: header: expected a quoted string at offset %zu", lx->name, lx->pos);
    size_t start = ++lx->pos;
    while (lx->pos < lx->len && lx->s[lx->pos] != q) {
        char c = lx->s[lx->pos];
        if (c == '\\' || c == '\n' || (unsigned char)c < 0x20 || (unsigned char)c > 0x7e)
            return pft_err(PFT_EFORMAT, "%s: header: unexpected character 0x%02x in string at offset %zu",
                           lx->name, (unsigned char)c, lx->pos);
        lx->pos++;
    }
    if (lx->pos >= lx->len)
        return pft_err(PFT_EFORMAT, "%s: header: unterminated string at offset %zu", lx->name, start - 1);
    size_t n = lx->pos - start;
    lx->pos++; /* closing quote */
    if (n >= size)
        return pft_err(PFT_EFORMAT, "%s: header: string of %zu characters at offset %zu is too long",
                       lx->name, n, start - 1);
    memcpy(out, lx->s + start, n);
    out[n] = '\0';
    return 0;
}

static int lex_bool(lexer_t *lx, int *out)
{
    skip_ws(lx);
    if (lx->len - lx->pos >= 4 && memcmp(lx->s + lx->pos, "True", 4) == 0) {
        lx->pos += 4;
        *out = 1;
        return 0;
    }
    if (lx->len - lx->pos >= 5 && memcmp(lx->s + lx->pos, "False", 5) == 0) {
        lx->pos += 5;
        *out = 0;
        return 0;
    }
    return pft_err(PFT_EFORMAT, "%s: header: fortran_order must be True or False (offset %zu)", lx->name,
                   lx->pos);
}

/* A non-negative decimal integer (Python 2 'L' suffix accepted), at most PFT_NPY_MAX_DIM. */
static int lex_dim(lexer_t *lx, int64_t *out)
{
    skip_ws(lx);
    size_t start = lx->pos;
    int64_t v = 0;
    while (lx->pos < lx->len && lx->s[lx->pos] >= '0' && lx->s[lx->pos] <= '9') {
        v = v * 10 + (lx->s[lx->pos] - '0');
        if (v > PFT_NPY_MAX_DIM)
            return pft_err(PFT_EFORMAT, "%s: header: dimension at offset %zu exceeds the limit %d", lx->name,
                           start, PFT_NPY_MAX_DIM);
        lx->pos++;
    }
    if (lx->pos == start)
        return pft_err(PFT_EFORMAT, "%s: header: expected a non-negative integer dimension at offset %zu",
                       lx->name, start);
    if (peek(lx) == 'L')
        lx->pos++;
    *out = v;
    return 0;
}

/* A Python tuple of dimensions: (), (n,), (n, m), ... ; *ndim may exceed 2 (caller rejects). */
static int lex_shape(lexer_t *lx, int64_t shape[2], int *ndim)
{
    int rc = expect(lx, '(', "to open the shape tuple");
    if (rc)
        return rc;
    *ndim = 0;
    int comma = 0; /* the last dimension was followed by a comma */
    for (;;) {
        skip_ws(lx);
        if (peek(lx) == ')') {
            if (*ndim == 1 && !comma) /* "(5)" is an int, not a tuple */
                break;
            lx->pos++;
            return 0;
        }
        if (*ndim > 0 && !comma)
            break;
        int64_t v = 0;
        if ((rc = lex_dim(lx, &v)))
            return rc;
        if (*ndim < 2)
            shape[*ndim] = v;
        if (++*ndim > 32)
            return pft_err(PFT_EFORMAT, "%s: header: shape has more than 32 dimensions", lx->name);
        skip_ws(lx);
        comma = peek(lx) == ',';
        if (comma)
            lx->pos++;
    }
    return pft_err(PFT_EFORMAT, "%s: header: malformed shape tuple at offset %zu", lx->name, lx->pos);
}

static int parse_descr(const char *descr, const char *name, pft_npy_dtype_t *out)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (strcmp(descr, s_dtypes[i].descr) == 0) {
            *out = (pft_npy_dtype_t)i;
            return 0;
        }
    if (descr[0] == '>')
        return pft_err(PFT_EUNSUPPORTED,
                       "%s: big-endian dtype '%s' is not supported; save with arr.astype('<%s')", name, descr,
                       descr + 1);
    return pft_err(PFT_EUNSUPPORTED, "%s: unsupported dtype '%s' (supported: <f2 <f4 <f8 <i4 <i8 |u1)", name,
                   descr);
}

/* Parses the dictionary text into *out (dtype, ndim, shape). */
static int parse_dict(const char *text, size_t len, const char *name, pft_npy_t *out)
{
    lexer_t lx = {.s = text, .len = len, .pos = 0, .name = name};
    int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0, rc;
    char key[32], descr[32];
    if ((rc = expect(&lx, '{', "at the start of the header")))
        return rc;
    for (;;) {
        skip_ws(&lx);
        if (peek(&lx) == '}') {
            lx.pos++;
            break;
        }
        if ((rc = lex_string(&lx, key, sizeof key)))
            return rc;
        if ((rc = expect(&lx, ':', "after a key")))
            return rc;
        if (strcmp(key, "descr") == 0) {
            if (have_descr++)
                return pft_err(PFT_EFORMAT, "%s: header: duplicate key 'descr'", name);
            skip_ws(&lx);
            if (peek(&lx) != '\'' && peek(&lx) != '"')
                return pft_err(PFT_EUNSUPPORTED,
                               "%s: header: descr is not a simple dtype string "
                               "(structured arrays are not supported)",
                               name);
            if ((rc = lex_string(&lx, descr, sizeof descr)))
                return rc;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (have_fortran++)
                return pft_err(PFT_EFORMAT, "%s: header: duplicate key 'fortran_order'", name);
            if ((rc = lex_bool(&lx, &fortran)))
                return rc;
        } else if (strcmp(key, "shape") == 0) {
            if (have_shape++)
                return pft_err(PFT_EFORMAT, "%s: header: duplicate key 'shape'", name);
            if ((rc = lex_shape(&lx, out->shape, &out->ndim)))
                return rc;
        } else {
            return pft_err(PFT_EFORMAT, "%s: header: unexpected key '%s'", name, key);
        }
        skip_ws(&lx);
        if (peek(&lx) == ',') {
            lx.pos++;
            continue;
        }
        if ((rc = expect(&lx, '}', "or ',' after a value")))
            return rc;
        break;
    }
    skip_ws(&lx);
    if (lx.pos != lx.len)
        return pft_err(PFT_EFORMAT, "%s: header: unexpected text after the dictionary at offset %zu", name,
                       lx.pos);
    if (!have_descr || !have_fortran || !have_shape)
        return pft_err(PFT_EFORMAT, "%s: header: missing key '%s'", name,
                       !have_descr     ? "descr"
                       : !have_fortran ? "fortran_order"
                                       : "shape");
    if ((rc = parse_descr(descr, name, &out->dtype)))
        return rc;
    if (fortran)
        return pft_err(PFT_EUNSUPPORTED,
                       "%s: fortran_order is True (column-major data); save a C-ordered array "
                       "(numpy.ascontiguousarray) instead",
                       name);
    if (out->ndim == 0)
        return pft_err(PFT_EUNSUPPORTED, "%s: 0-d (scalar) arrays are not supported", name);
    if (out->ndim > 2)
        return pft_err(PFT_EUNSUPPORTED, "%s: %d-D arrays are not supported (only 1-D and 2-D)", name,
                       out->ndim);
    if (out->ndim == 1)
        out->shape[1] = 1;
    return 0;
}

/* Validates magic, version and the header length field in the first bytes; sets *dict_off, *dict_len. */
static int parse_prefix(const uint8_t *buf, size_t avail, uint64_t total, const char *name, int *version,
                        size_t *dict_off, size_t *dict_len)
{
    if (avail == 0)
        return pft_err(PFT_EFORMAT, "%s: empty file, not a .npy file", name);
    if (memcmp(buf, s_magic, avail < MAGIC_LEN ? avail : MAGIC_LEN) != 0)
        return pft_err(PFT_EFORMAT, "%s: not a .npy file (bad magic)", name);
    if (avail < MAGIC_LEN)
        return pft_err(PFT_EFORMAT, "%s: truncated: %zu bytes, no complete magic", name, avail);
    if (avail < 8)
        return pft_err(PFT_EFORMAT, "%s: truncated: %zu bytes, no version", name, avail);
    if (buf[6] < 1 || buf[6] > 3 || buf[7] != 0)
        return pft_err(PFT_EUNSUPPORTED,
                       "%s: unsupported .npy format version %u.%u (supported: 1.0, 2.0, 3.0)", name, buf[6],
                       buf[7]);
    *version = buf[6];
    size_t off = *version == 1 ? 10 : 12;
    if (avail < off)
        return pft_err(PFT_EFORMAT, "%s: truncated: %zu bytes, no header length", name, avail);
    uint64_t hlen = *version == 1 ? ld16(buf + 8) : ld32(buf + 8);
    if (hlen > PFT_NPY_MAX_HEADER)
        return pft_err(PFT_EFORMAT, "%s: header length %" PRIu64 " exceeds the limit %u", name, hlen,
                       PFT_NPY_MAX_HEADER);
    if (off + hlen > total)
        return pft_err(PFT_EFORMAT,
                       "%s: truncated: header length %" PRIu64 " but only %" PRIu64 " bytes follow", name,
                       hlen, total - off);
    *dict_off = off;
    *dict_len = (size_t)hlen;
    return 0;
}

/* Parses the dictionary at buf[dict_off..+dict_len) and checks the element count against total. */
static int parse_rest(const uint8_t *buf, size_t dict_off, size_t dict_len, uint64_t total, const char *name,
                      int version, pft_npy_t *out)
{
    memset(out, 0, sizeof *out);
    out->version = version;
    for (size_t i = 0; i < dict_len; i++)
        if (buf[dict_off + i] > 0x7e || (buf[dict_off + i] < 0x20 && buf[dict_off + i] != '\n' &&
                                         buf[dict_off + i] != '\r' && buf[dict_off + i] != '\t'))
            return pft_err(PFT_EFORMAT, "%s: header: unexpected byte 0x%02x at offset %zu", name,
                           buf[dict_off + i], i);
    int rc = parse_dict((const char *)buf + dict_off, dict_len, name, out);
    if (rc)
        return rc;
    size_t isz = pft_npy_itemsize(out->dtype);
    int64_t r = out->shape[0], c = out->shape[1];
    if (c != 0 && r > PFT_NPY_MAX_ELEMS / c)
        return pft_err(PFT_EFORMAT,
                       "%s: shape %" PRId64 "×%" PRId64 " exceeds the limit of %" PRId64 " elements", name, r,
                       c, (int64_t)PFT_NPY_MAX_ELEMS);
    out->count = r * c;
    uint64_t need = (uint64_t)out->count * isz; /* < 2^39: no overflow */
    uint64_t have = total - (dict_off + dict_len);
    char sh[64];
    if (have < need)
        return pft_err(PFT_EFORMAT,
                       "%s: truncated: header says %s %s (%" PRIu64 " bytes) but %" PRIu64 " follow", name,
                       shape_str(out, sh, sizeof sh), pft_npy_dtype_name(out->dtype), need, have);
    if (have > need)
        return pft_err(PFT_EFORMAT, "%s: %" PRIu64 " trailing bytes after the %s %s data (%" PRIu64 " bytes)",
                       name, have - need, shape_str(out, sh, sizeof sh), pft_npy_dtype_name(out->dtype),
                       need);
    out->header_len = dict_off + dict_len;
    out->data_len = (size_t)need;
    return 0;
}

int pft_npy_parse(const uint8_t *buf, size_t len, const char *name, pft_npy_t *out)
{
    int version = 0;
    size_t off = 0, hlen = 0;
    if (!buf && len)
        return pft_err(PFT_EINVAL, "%s: NULL buffer", name);
    int rc = parse_prefix(buf, len, len, name, &version, &off, &hlen);
    if (!rc)
        rc = parse_rest(buf, off, hlen, len, name, version, out);
    if (!rc)
        out->data = buf + out->header_len;
    return rc;
}

/* ---- element conversion (shared by the memory and the file paths) ---- */

/* Error for element index idx of an array with cols columns. */
static int bad_value(const char *name, int64_t idx, int64_t cols, int ndim, const char *what)
{
    if (ndim == 1)
        return pft_err(PFT_EFORMAT, "%s: row %" PRId64 ": %s", name, idx, what);
    return pft_err(PFT_EFORMAT, "%s: row %" PRId64 " column %" PRId64 ": %s", name, idx / cols, idx % cols,
                   what);
}

/* Converts n elements from src (starting at global element index first) to float32. */
static int convert_f32(pft_npy_dtype_t dt, const uint8_t *src, size_t n, float *dst, int64_t first,
                       int64_t cols, int ndim, const char *name)
{
    switch (dt) {
    case PFT_NPY_F2:
        for (size_t i = 0; i < n; i++)
            dst[i] = pft_half_to_float(ld16(src + 2 * i));
        break;
    case PFT_NPY_F4:
        for (size_t i = 0; i < n; i++) {
            uint32_t u = ld32(src + 4 * i);
            memcpy(&dst[i], &u, 4);
        }
        break;
    case PFT_NPY_F8:
        for (size_t i = 0; i < n; i++) {
            uint64_t u = ld64(src + 8 * i);
            double v;
            memcpy(&v, &u, 8);
            if (isfinite(v) && fabs(v) > FLT_MAX)
                return bad_value(name, first + (int64_t)i, cols, ndim, "value is outside the float32 range");
            dst[i] = isfinite(v) ? (float)v : (float)NAN;
        }
        break;
    case PFT_NPY_I4:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)(int32_t)ld32(src + 4 * i);
        return 0;
    case PFT_NPY_I8:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)(int64_t)ld64(src + 8 * i);
        return 0;
    case PFT_NPY_U1:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)src[i];
        return 0;
    default:
        return pft_err(PFT_EINVAL, "%s: bad dtype %d", name, (int)dt);
    }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(dst[i]))
            return bad_value(name, first + (int64_t)i, cols, ndim,
                             isnan(dst[i]) ? "value is NaN" : "value is infinite");
    return 0;
}

static int convert_i32(pft_npy_dtype_t dt, const uint8_t *src, size_t n, int32_t *dst, int64_t first,
                       const char *name)
{
    switch (dt) {
    case PFT_NPY_I4:
        for (size_t i = 0; i < n; i++)
            dst[i] = (int32_t)ld32(src + 4 * i);
        return 0;
    case PFT_NPY_I8:
        for (size_t i = 0; i < n; i++) {
            int64_t v = (int64_t)ld64(src + 8 * i);
            if (v < INT32_MIN || v > INT32_MAX)
                return pft_err(PFT_ERANGE,
                               "%s: row %" PRId64 ": value %" PRId64 " is outside the int32 range", name,
                               first + (int64_t)i, v);
            dst[i] = (int32_t)v;
        }
        return 0;
    case PFT_NPY_U1:
        for (size_t i = 0; i < n; i++)
            dst[i] = src[i];
        return 0;
    default:
        return pft_err(PFT_EFORMAT, "%s: expected an integer dtype (<i4, <i8, |u1), not %s", name,
                       pft_npy_dtype_name(dt));
    }
}

int pft_npy_decode_f32(const pft_npy_t *npy, const char *name, float *out)
{
    if (!npy->data && npy->count)
        return pft_err(PFT_EINVAL, "%s: no data to decode", name);
    return convert_f32(npy->dtype, npy->data, (size_t)npy->count, out, 0, npy->shape[1], npy->ndim, name);
}

int pft_npy_decode_i32(const pft_npy_t *npy, const char *name, int32_t *out)
{
    if (!npy->data && npy->count)
        return pft_err(PFT_EINVAL, "%s: no data to decode", name);
    return convert_i32(npy->dtype, npy->data, (size_t)npy->count, out, 0, name);
}

/* ---- file reading ---- */

/* Reads exactly n bytes or fails (PFT_EIO; a short read means the file shrank: PFT_EFORMAT). */
static int read_full(int fd, void *buf, size_t n, const char *path)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return pft_err(PFT_EIO, "%s: read failed: %s", path, strerror(errno));
        if (k == 0)
            return pft_err(PFT_EFORMAT, "%s: truncated while reading (file changed?)", path);
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Opens path and validates its header against its size; on success *fd_out is positioned at the data. */
static int open_and_parse(const char *path, pft_npy_t *out, int *fd_out)
{
    uint8_t *hdr = NULL;
    int rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pft_err(PFT_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = pft_err(PFT_EIO, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = pft_err(PFT_EIO, "%s: not a regular file", path);
        goto fail;
    }
    uint64_t total = (uint64_t)st.st_size;
    uint8_t pre[12];
    size_t npre = total < sizeof pre ? (size_t)total : sizeof pre;
    if ((rc = read_full(fd, pre, npre, path)))
        goto fail;
    if (lseek(fd, 0, SEEK_SET) != 0) {
        rc = pft_err(PFT_EIO, "%s: cannot seek: %s", path, strerror(errno));
        goto fail;
    }
    int version = 0;
    size_t off = 0, hlen = 0;
    if ((rc = parse_prefix(pre, npre, total, path, &version, &off, &hlen)))
        goto fail;
    hdr = pft_alloc(off + hlen);
    if (!hdr) {
        rc = pft_err(PFT_ENOMEM, "%s: out of memory for a %zu-byte header", path, hlen);
        goto fail;
    }
    if ((rc = read_full(fd, hdr, off + hlen, path))) /* the whole header again, from offset 0 */
        goto fail;
    if ((rc = parse_rest(hdr, off, hlen, total, path, version, out)))
        goto fail;
    pft_free(hdr);
    *fd_out = fd;
    return 0;
fail:
    pft_free(hdr);
    close(fd);
    return rc;
}

int pft_npy_read_header(const char *path, pft_npy_t *out)
{
    int fd;
    int rc = open_and_parse(path, out, &fd);
    if (!rc)
        close(fd);
    return rc;
}

/* Streams the data of an opened file through convert_f32 / convert_i32 into dst. */
static int read_convert(int fd, const pft_npy_t *a, const char *path, void *dst, int to_i32)
{
    size_t isz = pft_npy_itemsize(a->dtype);
    uint8_t *chunk = pft_alloc(CHUNK_BYTES);
    if (!chunk)
        return pft_err(PFT_ENOMEM, "%s: out of memory", path);
    int rc = 0;
    int64_t done = 0;
    while (done < a->count) {
        size_t n = (size_t)(a->count - done);
        if (n > CHUNK_BYTES / isz)
            n = CHUNK_BYTES / isz;
        if ((rc = read_full(fd, chunk, n * isz, path)))
            break;
        if (to_i32)
            rc = convert_i32(a->dtype, chunk, n, (int32_t *)dst + done, done, path);
        else
            rc = convert_f32(a->dtype, chunk, n, (float *)dst + done, done, a->shape[1], a->ndim, path);
        if (rc)
            break;
        done += (int64_t)n;
    }
    pft_free(chunk);
    return rc;
}

/* Common body of the readers: want_ndim 2 (features), 1 (vector) or -1 (labels: (n,) or (n, 1)). */
static int read_array(const char *path, int want_ndim, int to_i32, void **dst, pft_npy_t *a)
{
    int fd, rc;
    *dst = NULL;
    if ((rc = open_and_parse(path, a, &fd)))
        return rc;
    char sh[64];
    if (want_ndim == 2 && a->ndim != 2)
        rc = pft_err(PFT_EFORMAT, "%s: expected a 2-D array (rows × features), got shape %s", path,
                     shape_str(a, sh, sizeof sh));
    else if (want_ndim == 1 && a->ndim != 1)
        rc =
            pft_err(PFT_EFORMAT, "%s: expected a 1-D array, got shape %s", path, shape_str(a, sh, sizeof sh));
    else if (want_ndim == -1 && a->ndim == 2 && a->shape[1] != 1)
        rc = pft_err(PFT_EFORMAT, "%s: expected labels of shape (n,) or (n, 1), got %s", path,
                     shape_str(a, sh, sizeof sh));
    else if (to_i32 && (a->dtype == PFT_NPY_F2 || a->dtype == PFT_NPY_F4 || a->dtype == PFT_NPY_F8))
        rc = pft_err(PFT_EFORMAT, "%s: labels must have an integer dtype (<i4, <i8, |u1), not %s", path,
                     pft_npy_dtype_name(a->dtype));
    if (rc)
        goto done;
    *dst = pft_alloc_array((size_t)a->count, to_i32 ? sizeof(int32_t) : sizeof(float));
    if (!*dst) {
        rc = pft_err(PFT_ENOMEM, "%s: out of memory for %" PRId64 " elements", path, a->count);
        goto done;
    }
    if ((rc = read_convert(fd, a, path, *dst, to_i32)))
        PFT_FREE(*dst);
done:
    close(fd);
    return rc;
}

int pft_npy_read_f32(const char *path, float **x, int64_t *rows, int64_t *cols)
{
    pft_npy_t a;
    void *p;
    int rc = read_array(path, 2, 0, &p, &a);
    *x = p;
    if (!rc) {
        *rows = a.shape[0];
        *cols = a.shape[1];
    }
    return rc;
}

int pft_npy_read_f32_vec(const char *path, float **x, int64_t *n)
{
    pft_npy_t a;
    void *p;
    int rc = read_array(path, 1, 0, &p, &a);
    *x = p;
    if (!rc)
        *n = a.shape[0];
    return rc;
}

int pft_npy_read_i32(const char *path, int32_t **y, int64_t *n)
{
    pft_npy_t a;
    void *p;
    int rc = read_array(path, -1, 1, &p, &a);
    *y = p;
    if (!rc)
        *n = a.shape[0];
    return rc;
}

/* ---- atomic writing ---- */

static int write_full(int fd, const uint8_t *p, size_t n, const char *path)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return pft_err(PFT_EIO, "%s: write failed: %s", path, strerror(errno));
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* fsync of the directory holding path, so the rename itself is durable; best effort. */
static void sync_parent_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* The .npy version 1.0 header of a C-order array (descr, 1-D of rows or 2-D rows×cols) into hdr (256 bytes);
 * returns its length, a multiple of 64 as numpy writes it. */
static size_t make_header(uint8_t *hdr, const char *descr, int ndim, int64_t rows, int64_t cols)
{
    char dict[160];
    int dl =
        ndim == 2
            ? snprintf(dict, sizeof dict,
                       "{'descr': '%s', 'fortran_order': False, 'shape': (%" PRId64 ", %" PRId64 "), }",
                       descr, rows, cols)
            : snprintf(dict, sizeof dict,
                       "{'descr': '%s', 'fortran_order': False, 'shape': (%" PRId64 ",), }", descr, rows);
    size_t total_hdr = (10 + (size_t)dl + 1 + 63) / 64 * 64; /* numpy pads to 64 bytes, ends with '\n' */
    memcpy(hdr, s_magic, MAGIC_LEN);
    hdr[6] = 1;
    hdr[7] = 0;
    size_t hlen = total_hdr - 10;
    hdr[8] = (uint8_t)hlen;
    hdr[9] = (uint8_t)(hlen >> 8);
    memcpy(hdr + 10, dict, (size_t)dl);
    memset(hdr + 10 + dl, ' ', total_hdr - 10 - (size_t)dl - 1);
    hdr[total_hdr - 1] = '\n';
    return total_hdr;
}

/* Writes header + elements (4-byte items, stored little-endian from host words) to path atomically. */
static int write_array(const char *path, const char *descr, int ndim, int64_t rows, int64_t cols,
                       const void *data)
{
    static atomic_uint s_counter;
    if (rows < 0 || cols < 0 || (ndim == 2 && cols > 0 && rows > PFT_NPY_MAX_ELEMS / cols) ||
        (ndim == 1 && rows > PFT_NPY_MAX_ELEMS))
        return pft_err(PFT_EINVAL, "%s: invalid shape %" PRId64 "×%" PRId64 " for writing", path, rows, cols);
    if (!data && rows * (ndim == 2 ? cols : 1) > 0)
        return pft_err(PFT_EINVAL, "%s: NULL data", path);

    uint8_t hdr[256];
    size_t total_hdr = make_header(hdr, descr, ndim, rows, cols);

    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&s_counter, 1)) >=
        (int)sizeof tmp)
        return pft_err(PFT_EINVAL, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return pft_err(PFT_EIO, "%s: cannot create temporary file %s: %s", path, tmp, strerror(errno));

    int rc = 0;
    uint8_t *chunk = pft_alloc(CHUNK_BYTES);
    if (!chunk) {
        rc = pft_err(PFT_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if ((rc = write_full(fd, hdr, total_hdr, path)))
        goto fail;
    size_t count = (size_t)rows * (size_t)(ndim == 2 ? cols : 1);
    const uint8_t *bytes = data;
    for (size_t done = 0; done < count;) {
        size_t n = count - done;
        if (n > CHUNK_BYTES / 4)
            n = CHUNK_BYTES / 4;
        for (size_t i = 0; i < n; i++) {
            uint32_t u; /* the host's float/int32 word, stored little-endian */
            memcpy(&u, bytes + 4 * (done + i), 4);
            st32(chunk + 4 * i, u);
        }
        if ((rc = write_full(fd, chunk, 4 * n, path)))
            goto fail;
        done += n;
    }
    if (fsync(fd) != 0) {
        rc = pft_err(PFT_EIO, "%s: fsync failed: %s", path, strerror(errno));
        goto fail;
    }
    pft_free(chunk);
    chunk = NULL;
    if (close(fd) != 0) {
        fd = -1;
        rc = pft_err(PFT_EIO, "%s: close failed: %s", path, strerror(errno));
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        rc = pft_err(PFT_EIO, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
        goto fail;
    }
    sync_parent_dir(path);
    return 0;
fail:
    pft_free(chunk);
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return rc;
}

int pft_npy_write_f32(const char *path, const float *x, int64_t rows, int64_t cols)
{
    _Static_assert(sizeof(float) == 4, "float must be binary32");
    return write_array(path, "<f4", 2, rows, cols, x);
}

int pft_npy_write_f32_vec(const char *path, const float *x, int64_t n)
{
    return write_array(path, "<f4", 1, n, 1, x);
}

int pft_npy_write_i32(const char *path, const int32_t *y, int64_t n)
{
    return write_array(path, "<i4", 1, n, 1, y);
}

int pft_npy_load_dataset(const char *x_path, const char *y_path, int n_classes, pft_dataset_t **out)
{
    float *x = NULL;
    int32_t *y = NULL;
    int64_t rows, cols, ny;
    *out = NULL;
    int rc = pft_npy_read_f32(x_path, &x, &rows, &cols);
    if (rc)
        return rc;
    if ((rc = pft_npy_read_i32(y_path, &y, &ny)))
        goto fail;
    if (rows != ny) {
        rc = pft_err(PFT_EFORMAT, "%s has %" PRId64 " rows but %s has %" PRId64 " labels", x_path, rows,
                     y_path, ny);
        goto fail;
    }
    if (rows == 0 || cols == 0) {
        rc = pft_err(PFT_EFORMAT, "%s: empty feature matrix (%" PRId64 "×%" PRId64 ")", x_path, rows, cols);
        goto fail;
    }
    if (rows > INT_MAX || cols > INT_MAX || (uint64_t)rows * (uint64_t)cols > (uint64_t)INT64_MAX / 4) {
        rc = pft_err(PFT_EFORMAT, "%s: %" PRId64 "×%" PRId64 " is too large", x_path, rows, cols);
        goto fail;
    }
    return pft_dataset_adopt(&x, &y, (int)rows, (int)cols, n_classes, x_path, y_path, out);
fail:
    pft_free(x);
    pft_free(y);
    return rc;
}

/* ---- for pft_npy_rows (pft_npy_internal.h) ---- */

int pft_npy__open(const char *path, pft_npy_t *out, int *fd_out)
{
    return open_and_parse(path, out, fd_out);
}

int pft_npy__convert_f32(const pft_npy_t *a, const uint8_t *src, size_t n, float *dst, int64_t first,
                         const char *name)
{
    return convert_f32(a->dtype, src, n, dst, first, a->shape[1], a->ndim, name);
}
