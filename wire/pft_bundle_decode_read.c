/* pft_bundle_decode_read: what both decoders read with: little-endian numbers, the typed accessors of the
 * msgpack object tree (each failure a message naming the field), a statistics class entry's head
 * (pft_bundle_decode_internal.h). */
#include <math.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pft_bundle.h"
#include "pft_bundle_decode_internal.h"
#include "pft_bundle_internal.h"
#include "pft_error.h"
#include "pft_half.h"

/* ---------- numbers, little endian ---------- */

uint32_t pft_bundle__get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Number i of an array of dtype numbers at src. */
double pft_bundle__get_value(const uint8_t *src, size_t i, pft_dtype_t dt)
{
    if (dt == PFT_DTYPE_F16)
        return pft_half_to_float((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
    uint32_t u = pft_bundle__get_le32(src + 4 * i);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Number i of an array of binary64 at src (weights). */
double pft_bundle__get_f64(const uint8_t *src, size_t i)
{
    uint64_t u = (uint64_t)pft_bundle__get_le32(src + 8 * i) | (uint64_t)pft_bundle__get_le32(src + 8 * i + 4)
                                                                   << 32;
    double v;
    memcpy(&v, &u, 8);
    return v;
}

/* The binary64 at p (a DP guarantee's ε or δ). */
double pft_bundle__le_get_f64(const uint8_t *p)
{
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u |= (uint64_t)p[i] << (8 * i);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

/* ---------- typed access to the object tree ---------- */

const char *pft_bundle__type_name(msgpack_object_type t)
{
    switch (t) {
    case MSGPACK_OBJECT_NIL:
        return "nil";
    case MSGPACK_OBJECT_BOOLEAN:
        return "bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return "integer";
    case MSGPACK_OBJECT_STR:
        return "str";
    case MSGPACK_OBJECT_BIN:
        return "bin";
    case MSGPACK_OBJECT_ARRAY:
        return "array";
    default:
        return "other";
    }
}

int pft_bundle__bad(const ctx_t *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int pft_bundle__bad(const ctx_t *c, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pft_err(code, "bundle decode: %s%s%s", c->where, c->where[0] ? ": " : "", msg);
}

int pft_bundle__want_array(const ctx_t *c, const msgpack_object *o, const char *field, uint32_t lo,
                           uint32_t hi, int range_code)
{
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return pft_bundle__bad(c, PFT_EFORMAT, "%s: expected array, got %s", field,
                               pft_bundle__type_name(o->type));
    if (o->via.array.size < lo || o->via.array.size > hi)
        return pft_bundle__bad(c, range_code, "%s: %u elements, expected %u..%u", field, o->via.array.size,
                               lo, hi);
    return 0;
}

int pft_bundle__want_uint(const ctx_t *c, const msgpack_object *o, const char *field, uint64_t lo,
                          uint64_t hi, int range_code, uint64_t *out)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return pft_bundle__bad(c, PFT_EFORMAT, "%s: expected non-negative integer, got %s%s", field,
                               pft_bundle__type_name(o->type),
                               o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? " (negative)" : "");
    if (o->via.u64 < lo || o->via.u64 > hi)
        return pft_bundle__bad(c, range_code, "%s = %llu outside %llu..%llu", field,
                               (unsigned long long)o->via.u64, (unsigned long long)lo,
                               (unsigned long long)hi);
    *out = o->via.u64;
    return 0;
}

int pft_bundle__want_name(const ctx_t *c, const msgpack_object *o, const char *field,
                          char out[PFT_BUNDLE_MAX_NAME + 1])
{
    if (o->type != MSGPACK_OBJECT_STR)
        return pft_bundle__bad(c, PFT_EFORMAT, "%s: expected str, got %s", field,
                               pft_bundle__type_name(o->type));
    if (!pft_bundle__name_ok(o->via.str.ptr, o->via.str.size))
        return pft_bundle__bad(c, PFT_EFORMAT,
                               "%s: must be 1..%d bytes without control characters (%u bytes)", field,
                               PFT_BUNDLE_MAX_NAME, o->via.str.size);
    memcpy(out, o->via.str.ptr, o->via.str.size);
    out[o->via.str.size] = '\0';
    return 0;
}

int pft_bundle__want_bin(const ctx_t *c, const msgpack_object *o, const char *field, uint64_t size)
{
    if (o->type != MSGPACK_OBJECT_BIN)
        return pft_bundle__bad(c, PFT_EFORMAT, "%s: expected bin, got %s", field,
                               pft_bundle__type_name(o->type));
    if (o->via.bin.size != size)
        return pft_bundle__bad(c, PFT_EFORMAT, "%s: %u bytes, expected %llu", field, o->via.bin.size,
                               (unsigned long long)size);
    return 0;
}

/* ---------- a statistics class entry ---------- */

int pft_bundle__class_head(const ctx_t *c, const msgpack_object *e, uint32_t i, uint32_t nf, uint64_t n_min,
                           uint64_t *prev, uint64_t *label, uint64_t *n)
{
    char field[64];
    snprintf(field, sizeof field, "class %u", i);
    int rc = pft_bundle__want_array(c, e, field, nf, nf, PFT_EFORMAT);
    if (rc)
        return rc;
    const msgpack_object *f = e->via.array.ptr;
    snprintf(field, sizeof field, "class %u: label", i);
    if ((rc = pft_bundle__want_uint(c, &f[0], field, 0, INT32_MAX, PFT_EFORMAT, label)))
        return rc;
    if (i > 0 && *label <= *prev)
        return pft_bundle__bad(c, PFT_EFORMAT, "class %u: label %d not after %d (sorted, unique)", i,
                               (int)*label, (int)*prev);
    *prev = *label;
    snprintf(field, sizeof field, "class %u (label %d): n", i, (int)*label);
    return pft_bundle__want_uint(c, &f[1], field, n_min, PFT_BUNDLE_MAX_COUNT, PFT_EFORMAT, n);
}
