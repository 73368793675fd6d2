/* Tests of pft_npy: round trips, every dtype, every malformed header, byte-level fuzzing of the parser. */
#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_half.h"
#include "pft_npy.h"
#include "pft_npy_rows.h"
#include "pft_rng.h"
#include "pft_test.h"

#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>

static char s_dir[256];

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int which;
    char *p = buf[which++ % 4];
    snprintf(p, 512, "%s/%s", s_dir, name);
    return p;
}

static int write_bytes(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t k = fwrite(b, 1, n, f);
    fclose(f);
    return k == n ? 0 : -1;
}

/* Builds a .npy image: magic, version (major), header length, dict text (padded to 64 with a newline),
 * then payload. Returns the length; buf must hold it. */
static size_t make_npy(uint8_t *buf, int major, const char *dict, const void *payload, size_t plen)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t total_hdr = (pre + dl + 1 + 63) / 64 * 64;
    size_t hlen = total_hdr - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    buf[8] = (uint8_t)hlen;
    buf[9] = (uint8_t)(hlen >> 8);
    if (major != 1) {
        buf[10] = (uint8_t)(hlen >> 16);
        buf[11] = (uint8_t)(hlen >> 24);
    }
    memcpy(buf + pre, dict, dl);
    memset(buf + pre + dl, ' ', hlen - dl - 1);
    buf[total_hdr - 1] = '\n';
    if (plen)
        memcpy(buf + total_hdr, payload, plen);
    return total_hdr + plen;
}

/* Writes a file made by make_npy and returns its path. */
static const char *npy_file(const char *name, int major, const char *dict, const void *payload, size_t plen)
{
    static uint8_t buf[1 << 16];
    const char *p = tmp_path(name);
    size_t n = make_npy(buf, major, dict, payload, plen);
    if (write_bytes(p, buf, n) != 0)
        fprintf(stderr, "cannot write %s\n", p);
    return p;
}

/* rc is an error and the message names the file (and contains want, if not NULL). */
static void check_fails(int rc, const char *path, const char *want, int line)
{
    if (getenv("PFT_TEST_VERBOSE"))
        fprintf(stderr, "    [%d] %s\n", line, pft_errmsg());
    CHECK_MSG(rc < 0, "line %d: expected failure for %s", line, path);
    CHECK_MSG(strstr(pft_errmsg(), path) != NULL, "line %d: message does not name the file: %s", line,
              pft_errmsg());
    if (want)
        CHECK_MSG(strstr(pft_errmsg(), want) != NULL, "line %d: message lacks '%s': %s", line, want,
                  pft_errmsg());
}
#define CHECK_FAILS(rc, path, want) check_fails((rc), (path), (want), __LINE__)

static void test_roundtrip_f32(void)
{
    const int r = 5, c = 7;
    float x[35];
    for (int i = 0; i < r * c; i++)
        x[i] = (float)(i - 17) * 0.37f;
    x[3] = -0.0f;
    x[4] = 1e-42f; /* subnormal */
    x[5] = 3.0e38f;
    const char *p = tmp_path("rt.npy");
    CHECK(pft_npy_write_f32(p, x, r, c) == 0);
    float *y = NULL;
    int64_t rows = 0, cols = 0;
    CHECK(pft_npy_read_f32(p, &y, &rows, &cols) == 0);
    CHECK(rows == r && cols == c);
    CHECK(y && memcmp(x, y, sizeof x) == 0);
    pft_free(y);

    /* Header is byte-identical to numpy.save's. */
    FILE *f = fopen(p, "rb");
    char hdr[128];
    CHECK(f && fread(hdr, 1, sizeof hdr, f) == sizeof hdr);
    if (f)
        fclose(f);
    const char *want = "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 7), }";
    CHECK(memcmp(hdr, "\x93NUMPY\x01\x00\x76\x00", 10) == 0);
    CHECK(memcmp(hdr + 10, want, strlen(want)) == 0);
    CHECK(hdr[127] == '\n' && hdr[126] == ' ');

    /* Overwrite atomically with a different shape; no temporary file is left behind. */
    CHECK(pft_npy_write_f32(p, x, 7, 5) == 0);
    pft_npy_t h;
    CHECK(pft_npy_read_header(p, &h) == 0);
    CHECK(h.shape[0] == 7 && h.shape[1] == 5 && h.dtype == PFT_NPY_F4 && h.version == 1);
    DIR *dir = opendir(s_dir);
    struct dirent *e;
    int tmp_left = 0;
    while (dir && (e = readdir(dir)))
        tmp_left += strstr(e->d_name, ".tmp.") != NULL;
    if (dir)
        closedir(dir);
    CHECK(tmp_left == 0);

    /* Vector and empty matrix. */
    CHECK(pft_npy_write_f32_vec(tmp_path("v.npy"), x, 9) == 0);
    int64_t n = 0;
    CHECK(pft_npy_read_f32_vec(tmp_path("v.npy"), &y, &n) == 0);
    CHECK(n == 9 && memcmp(x, y, 9 * sizeof(float)) == 0);
    pft_free(y);
    CHECK(pft_npy_write_f32(tmp_path("empty.npy"), NULL, 0, 4) == 0);
    CHECK(pft_npy_read_f32(tmp_path("empty.npy"), &y, &rows, &cols) == 0);
    CHECK(rows == 0 && cols == 4);
    pft_free(y);
}

static void test_roundtrip_i32(void)
{
    int32_t v[6] = {0, 1, -5, INT32_MAX, INT32_MIN, 6};
    const char *p = tmp_path("y.npy");
    CHECK(pft_npy_write_i32(p, v, 6) == 0);
    int32_t *w = NULL;
    int64_t n = 0;
    CHECK(pft_npy_read_i32(p, &w, &n) == 0);
    CHECK(n == 6 && w && memcmp(v, w, sizeof v) == 0);
    pft_free(w);
}

static void test_write_errors(void)
{
    float x[2] = {1, 2};
    const char *p = "/nonexistent-dir-pft/x.npy";
    CHECK_FAILS(pft_npy_write_f32(p, x, 1, 2), p, NULL);
    CHECK_FAILS(pft_npy_write_f32(tmp_path("neg.npy"), x, -1, 2), "neg.npy", NULL);
}

static void test_dtypes(void)
{
    /* float16: 1, -2, 0.5, 65504, 2^-24 (smallest subnormal), -0 */
    uint16_t h[6] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x8000};
    const char *p =
        npy_file("f2.npy", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }", h, sizeof h);
    float *x = NULL;
    int64_t r, c;
    CHECK(pft_npy_read_f32(p, &x, &r, &c) == 0);
    CHECK(r == 2 && c == 3);
    if (x) {
        CHECK(x[0] == 1.0f && x[1] == -2.0f && x[2] == 0.5f && x[3] == 65504.0f);
        CHECK(x[4] == ldexpf(1.0f, -24) && x[5] == 0.0f && signbit(x[5]));
    }
    pft_free(x);

    double dv[4] = {1.5, -1e-3, 1e30, -2.25};
    p = npy_file("f8.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", dv, sizeof dv);
    CHECK(pft_npy_read_f32(p, &x, &r, &c) == 0);
    if (x)
        CHECK(x[0] == 1.5f && x[1] == (float)-1e-3 && x[2] == (float)1e30 && x[3] == -2.25f);
    pft_free(x);

    int64_t lv[3] = {3, 0, 6};
    p = npy_file("i8.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", lv, sizeof lv);
    int32_t *y = NULL;
    int64_t n;
    CHECK(pft_npy_read_i32(p, &y, &n) == 0);
    CHECK(n == 3 && y && y[0] == 3 && y[1] == 0 && y[2] == 6);
    pft_free(y);
    CHECK(pft_npy_read_f32_vec(p, &x, &n) == 0); /* integers as features */
    CHECK(n == 3 && x && x[2] == 6.0f);
    pft_free(x);

    uint8_t u[4] = {0, 255, 7, 1};
    p = npy_file("u1.npy", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 1), }", u, sizeof u);
    CHECK(pft_npy_read_i32(p, &y, &n) == 0); /* (n, 1) labels accepted */
    CHECK(n == 4 && y && y[1] == 255);
    pft_free(y);

    /* Format 2.0 and 3.0 headers, double quotes, Python 2 'L' suffix, no trailing comma. */
    int32_t iv[2] = {-1, 2};
    p = npy_file("v2.npy", 2, "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2L,)}", iv,
                 sizeof iv);
    CHECK(pft_npy_read_i32(p, &y, &n) == 0);
    CHECK(n == 2 && y && y[0] == -1);
    pft_free(y);
    p = npy_file("v3.npy", 3, "{'shape': (2,), 'fortran_order': False, 'descr': '<i4'}", iv, sizeof iv);
    CHECK(pft_npy_read_i32(p, &y, &n) == 0);
    pft_free(y);
}

static void test_value_errors(void)
{
    float f[6] = {0, 1, 2, 3, NAN, 5};
    const char *p =
        npy_file("nan.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, sizeof f);
    float *x = (float *)1;
    int64_t r, c, n;
    CHECK_FAILS(pft_npy_read_f32(p, &x, &r, &c), p, "row 1 column 1");
    CHECK(x == NULL);
    f[4] = 1;
    f[0] = -INFINITY;
    p = npy_file("inf.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, sizeof f);
    CHECK_FAILS(pft_npy_read_f32(p, &x, &r, &c), p, "row 0 column 0: value is infinite");
    double big[2] = {1.0, 1e300};
    p = npy_file("big.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", big, sizeof big);
    CHECK_FAILS(pft_npy_read_f32_vec(p, &x, &n), p, "row 1");
    uint16_t hinf[2] = {0x3c00, 0x7c00};
    p = npy_file("hinf.npy", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 2), }", hinf,
                 sizeof hinf);
    CHECK_FAILS(pft_npy_read_f32(p, &x, &r, &c), p, "infinite");

    int64_t lv[3] = {1, (int64_t)INT32_MAX + 1, 2};
    p = npy_file("i8big.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", lv, sizeof lv);
    int32_t *y = (int32_t *)1;
    int rc = pft_npy_read_i32(p, &y, &n);
    CHECK_FAILS(rc, p, "row 1");
    CHECK(rc == PFT_ERANGE && y == NULL);
    float fl[2] = {0, 1};
    p = npy_file("flab.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", fl, sizeof fl);
    CHECK_FAILS(pft_npy_read_i32(p, &y, &n), p, "integer dtype");
    /* Shape mismatches for the typed readers. */
    CHECK_FAILS(pft_npy_read_f32(p, &x, &r, &c), p, "2-D");
    p = npy_file("lab2d.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2), }", fl,
                 sizeof fl);
    CHECK_FAILS(pft_npy_read_i32(p, &y, &n), p, "(n,)");
    CHECK_FAILS(pft_npy_read_f32_vec(p, &x, &n), p, "1-D");
}

/* One malformed case: dict text, major version, payload size, expected message fragment. */
typedef struct {
    const char *dict;
    int major;
    size_t payload;
    const char *want;
} bad_t;

static void test_malformed_headers(void)
{
    static const uint8_t zeros[64];
    const bad_t cases[] = {
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 24, "big-endian"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 1, 24, "fortran_order"},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", 1, 48, "unsupported dtype '<c8'"},
        {"{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }", 1, 6, "unsupported dtype"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", 1, 12, "structured"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 20,
         "truncated: header says 2×3 float32 (24 bytes) but 20 follow"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 28, "4 trailing bytes"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 1), }", 1, 24, "3-D"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 1, 4, "0-d"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", 1, 24, "shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }", 1, 24, "dimension"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648, 1), }", 1, 24, "limit"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2147483647, 2147483647), }", 1, 24, "limit"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 1), }", 1, 24, "limit"},
        {"{'descr': '<f4', 'fortran_order': False, }", 1, 24, "missing key 'shape'"},
        {"{'descr': '<f4', 'shape': (2, 3), }", 1, 24, "missing key 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1, }", 1, 24, "unexpected key"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 24, "duplicate"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", 1, 24, "True or False"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }", 1, 24, "expected"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x", 1, 24, "after the dictionary"},
        {"['descr', '<f4']", 1, 24, "expected '{'"},
        {"{'descr: '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 24, "header"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", 1, 24, "header"},
        {"", 1, 0, "header"},
    };
    char name[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(name, sizeof name, "bad%zu.npy", i);
        const char *p = npy_file(name, cases[i].major, cases[i].dict, zeros, cases[i].payload);
        float *x = (float *)1;
        int64_t r, c;
        pft_err_clear();
        CHECK_FAILS(pft_npy_read_f32(p, &x, &r, &c), p, cases[i].want);
        CHECK(x == NULL);
        pft_npy_t h;
        CHECK_FAILS(pft_npy_read_header(p, &h), p, cases[i].want);
    }
}

static void test_malformed_prefix(void)
{
    uint8_t buf[256];
    float v[2] = {1, 2};
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", v, sizeof v);
    const char *p = tmp_path("prefix.npy");
    float *x;
    int64_t m;

    uint8_t b2[256];
    memcpy(b2, buf, n);
    b2[1] = 'X';
    write_bytes(p, b2, n);
    CHECK_FAILS(pft_npy_read_f32_vec(p, &x, &m), p, "magic");
    memcpy(b2, buf, n);
    b2[6] = 4;
    write_bytes(p, b2, n);
    CHECK_FAILS(pft_npy_read_f32_vec(p, &x, &m), p, "version 4.0");
    memcpy(b2, buf, n);
    b2[7] = 1;
    write_bytes(p, b2, n);
    CHECK_FAILS(pft_npy_read_f32_vec(p, &x, &m), p, "version 1.1");
    memcpy(b2, buf, n);
    b2[8] = 0xff;
    b2[9] = 0xff; /* header length 65535 > file */
    write_bytes(p, b2, n);
    CHECK_FAILS(pft_npy_read_f32_vec(p, &x, &m), p, "header length");
    memcpy(b2, buf, n);
    b2[20] = 0x01; /* control byte inside the dictionary */
    write_bytes(p, b2, n);
    CHECK_FAILS(pft_npy_read_f32_vec(p, &x, &m), p, "unexpected byte");
    /* every truncation of a valid file fails cleanly */
    for (size_t k = 0; k < n; k++) {
        write_bytes(p, buf, k);
        CHECK_FAILS(pft_npy_read_f32_vec(p, &x, &m), p, NULL);
    }
    write_bytes(p, buf, n);
    CHECK(pft_npy_read_f32_vec(p, &x, &m) == 0 && m == 2);
    pft_free(x);

    const char *missing = tmp_path("does-not-exist.npy");
    CHECK_FAILS(pft_npy_read_f32_vec(missing, &x, &m), missing, "cannot open");
    CHECK_FAILS(pft_npy_read_f32_vec(s_dir, &x, &m), s_dir, "regular file");

    /* v2 header claiming more than the limit */
    memcpy(b2, "\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12);
    write_bytes(p, b2, 64);
    CHECK_FAILS(pft_npy_read_f32_vec(p, &x, &m), p, "limit");
}

static void test_alloc_failures(void)
{
    float v[12] = {0};
    const char *p = tmp_path("af.npy");
    CHECK(pft_npy_write_f32(p, v, 3, 4) == 0);
    int ok_at = -1;
    for (long k = 0; k < 20 && ok_at < 0; k++) {
        pft_alloc_fail_after(k);
        float *x = (float *)1;
        int64_t r, c;
        int rc = pft_npy_read_f32(p, &x, &r, &c);
        pft_alloc_fail_after(-1);
        if (rc == 0) {
            ok_at = (int)k;
            pft_free(x);
        } else {
            CHECK(rc == PFT_ENOMEM && x == NULL);
            CHECK(strstr(pft_errmsg(), p) != NULL);
        }
    }
    CHECK(ok_at > 0);
    pft_alloc_fail_after(0);
    CHECK(pft_npy_write_f32(p, v, 3, 4) == PFT_ENOMEM);
    pft_alloc_fail_after(-1);
}

/* Parses a memory image; when it parses, the decoders must stay inside it. */
static void parse_and_decode(const uint8_t *buf, size_t len, int *accepted)
{
    pft_npy_t a;
    if (pft_npy_parse(buf, len, "<fuzz>", &a) != 0) {
        CHECK(strstr(pft_errmsg(), "<fuzz>") != NULL);
        return;
    }
    (*accepted)++;
    CHECK(a.header_len + a.data_len == len);
    CHECK(a.count * (int64_t)pft_npy_itemsize(a.dtype) == (int64_t)a.data_len);
    float *f = pft_alloc_array((size_t)a.count + 1, sizeof(float));
    int32_t *i = pft_alloc_array((size_t)a.count + 1, sizeof(int32_t));
    if (f && i) {
        (void)pft_npy_decode_f32(&a, "<fuzz>", f);
        (void)pft_npy_decode_i32(&a, "<fuzz>", i);
    }
    pft_free(f);
    pft_free(i);
}

static void test_fuzz_parser(void)
{
    uint8_t seeds[3][512];
    size_t seed_len[3];
    float fv[12];
    for (int i = 0; i < 12; i++)
        fv[i] = (float)i;
    uint16_t hv[6] = {0x3c00, 0, 0x4000, 0x4200, 0x4400, 0x4500};
    int64_t lv[4] = {0, 1, 2, 3};
    seed_len[0] =
        make_npy(seeds[0], 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", fv, sizeof fv);
    seed_len[1] =
        make_npy(seeds[1], 2, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }", hv, sizeof hv);
    seed_len[2] =
        make_npy(seeds[2], 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }", lv, sizeof lv);
    int accepted = 0;
    for (int s = 0; s < 3; s++)
        parse_and_decode(seeds[s], seed_len[s], &accepted);
    CHECK(accepted == 3);

    pft_rng_t *rng = pft_rng_new(2024);
    uint8_t buf[600];
    const char *alphabet = "{}()[],:' \"0123456789LTrueFalsdcipthnmo<>|f248";
    for (int iter = 0; iter < 10000; iter++) {
        int s = (int)pft_rng_below(rng, 3);
        size_t len = seed_len[s];
        memcpy(buf, seeds[s], len);
        int edits = 1 + (int)pft_rng_below(rng, 4);
        for (int e = 0; e < edits; e++) {
            size_t pos = pft_rng_below(rng, len);
            switch (pft_rng_below(rng, 5)) {
            case 0: /* random byte */
                buf[pos] = (uint8_t)pft_rng_u64(rng);
                break;
            case 1: /* flip a bit */
                buf[pos] ^= (uint8_t)(1u << pft_rng_below(rng, 8));
                break;
            case 2: /* header-syntax character */
                buf[pos] = (uint8_t)alphabet[pft_rng_below(rng, strlen(alphabet))];
                break;
            case 3: /* truncate */
                len = pos;
                break;
            default: /* append a few bytes */
                if (len + 8 < sizeof buf)
                    for (int k = 0; k < 8; k++)
                        buf[len++] = (uint8_t)pft_rng_u64(rng);
                break;
            }
            if (len == 0)
                break;
        }
        /* Exact-size heap copy, so ASan catches any read past the end. */
        uint8_t *exact = pft_alloc(len ? len : 1);
        memcpy(exact, buf, len);
        parse_and_decode(exact, len, &accepted);
        pft_free(exact);
    }
    pft_rng_destroy(&rng);
    fprintf(stderr, "  fuzz: %d of 10003 images accepted\n", accepted);
    CHECK(accepted > 3); /* some mutations (e.g. of data bytes) remain valid */
}

/* pft_npy_rows: any range of rows equals the same rows of a whole read, for f4 and f8; bad ranges, 1-D files,
 * empty matrices, a file truncated after opening and a NaN (named by row and column) are errors. */
static void test_rows_reader(void)
{
    enum { R = 37, C = 5 };
    float x[R * C];
    for (int i = 0; i < R * C; i++)
        x[i] = (float)i * 0.25f - 3.0f;
    const char *p = tmp_path("rows.npy");
    CHECK(pft_npy_write_f32(p, x, R, C) == 0);
    pft_npy_rows_t *r = NULL;
    CHECK(pft_npy_rows_open(p, &r) == 0);
    if (!r)
        return;
    CHECK(pft_npy_rows_n(r) == R && pft_npy_rows_cols(r) == C);
    float buf[R * C];
    for (int row0 = 0; row0 < R; row0 += 7) {
        int n = row0 + 11 <= R ? 11 : R - row0;
        CHECK(pft_npy_rows_read(r, row0, n, buf) == 0);
        CHECK(memcmp(buf, x + row0 * C, (size_t)n * C * sizeof(float)) == 0);
    }
    CHECK(pft_npy_rows_read(r, 0, R, buf) == 0 && memcmp(buf, x, sizeof x) == 0);
    CHECK_FAILS(pft_npy_rows_read(r, R - 2, 3, buf), "rows.npy", "outside");
    CHECK_FAILS(pft_npy_rows_read(r, -1, 1, buf), "rows.npy", "outside");
    CHECK(truncate(p, 128 + 10 * C * 4) == 0); /* shrinks under the open reader */
    CHECK_FAILS(pft_npy_rows_read(r, 20, 5, buf), "rows.npy", "truncated");
    CHECK(pft_npy_rows_read(r, 0, 10, buf) == 0 && memcmp(buf, x, 10 * C * sizeof(float)) == 0);
    pft_npy_rows_destroy(&r);
    CHECK(r == NULL);

    double xd[6] = {1, 2, 3, NAN, 5, 6}; /* f8, 3×2, NaN at row 1 column 1 */
    const char *pd = npy_file("rows8.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }",
                              xd, sizeof xd);
    CHECK(pft_npy_rows_open(pd, &r) == 0);
    if (r) {
        CHECK(pft_npy_rows_read(r, 0, 1, buf) == 0 && buf[0] == 1.0f && buf[1] == 2.0f);
        CHECK(pft_npy_rows_read(r, 2, 1, buf) == 0 && buf[0] == 5.0f && buf[1] == 6.0f);
        CHECK_FAILS(pft_npy_rows_read(r, 1, 1, buf), "rows8.npy", "row 1 column 1");
        pft_npy_rows_destroy(&r);
    }
    float v[3] = {1, 2, 3};
    CHECK(pft_npy_write_f32_vec(tmp_path("rows1d.npy"), v, 3) == 0);
    CHECK_FAILS(pft_npy_rows_open(tmp_path("rows1d.npy"), &r), "rows1d.npy", "2-D");
    CHECK(r == NULL);
    CHECK(pft_npy_write_f32(tmp_path("rows0.npy"), NULL, 0, 4) == 0);
    CHECK_FAILS(pft_npy_rows_open(tmp_path("rows0.npy"), &r), "rows0.npy", "empty");
    CHECK_FAILS(pft_npy_rows_open(tmp_path("missing.npy"), &r), "missing.npy", NULL);
}

int main(void)
{
    snprintf(s_dir, sizeof s_dir, "/tmp/pft_test_npy_XXXXXX");
    if (!mkdtemp(s_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_roundtrip_f32);
    RUN(test_roundtrip_i32);
    RUN(test_write_errors);
    RUN(test_dtypes);
    RUN(test_value_errors);
    RUN(test_malformed_headers);
    RUN(test_malformed_prefix);
    RUN(test_alloc_failures);
    RUN(test_fuzz_parser);
    RUN(test_rows_reader);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_dir);
    return pft_test_done();
}
