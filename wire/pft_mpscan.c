/* pft_mpscan: walks raw msgpack bytes (canonical forms only, every declared length within the bytes left, the
 * object count and nesting capped) so that msgpack-c's unpacker, run next, allocates a bounded object tree.
 *
 * msgpack-c allocates an array's element table from the declared count before reading the elements: a
 * 5-byte array32 header claiming 2^32-1 elements would otherwise ask for ~100 GB. See docs/WIRE.md §3. */
#include "pft_mpscan.h"

#include "pft_error.h"

/* Big-endian unsigned integer of n bytes at p. */
static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* The integer whose type byte is buf[at] (0xcc..0xd3), its value at buf[*pos..): uint8..64 only when the
 * value needs the width, int8..64 only for negative values that need it. Advances *pos past it. */
static int scan_int(const uint8_t *buf, size_t len, size_t *pos, size_t at, const char *what)
{
    uint8_t b = buf[at];
    int is_uint = b <= 0xcf;
    int w = 1 << (b - (is_uint ? 0xcc : 0xd0));
    if (len - *pos < (size_t)w)
        return pft_err(PFT_EFORMAT, "%s: truncated at byte %zu", what, *pos);
    uint64_t u = be(buf + *pos, w);
    if (is_uint) {
        uint64_t lo = w == 1 ? 128 : w == 2 ? 256 : w == 4 ? 65536 : UINT64_C(1) << 32;
        if (u < lo)
            return pft_err(PFT_EFORMAT, "%s: byte %zu: integer %llu not in its shortest form", what, at,
                           (unsigned long long)u);
    } else {
        int64_t v = w == 1 ? (int8_t)u : w == 2 ? (int16_t)u : w == 4 ? (int32_t)u : (int64_t)u;
        int64_t hi = w == 1 ? -33 : w == 2 ? -129 : w == 4 ? -32769 : -((int64_t)1 << 31) - 1;
        if (v > hi)
            return pft_err(PFT_EFORMAT, "%s: byte %zu: integer %lld not in its shortest form", what, at,
                           (long long)v);
    }
    *pos += (size_t)w;
    return 0;
}

/* The header of the object at buf[*pos] (*pos < len), consumed. Scalars are consumed whole and give *n = 0;
 * a str or bin gives *n = bytes of its body (not consumed), an array *n = its elements and *is_array = 1.
 * Lengths are not yet checked against the bytes left. 0 or PFT_EFORMAT. */
static int scan_header(const uint8_t *buf, size_t len, size_t *pos, const char *what, uint64_t *n,
                       int *is_array)
{
    size_t at = *pos, rest = len - *pos - 1;
    uint8_t b = buf[(*pos)++];
    int hdr = 0;
    uint64_t minimum = 0;
    *n = 0;
    *is_array = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
        return 0;
    if (b >= 0x80 && b <= 0x8f)
        return pft_err(PFT_EFORMAT, "%s: byte %zu: msgpack map not allowed", what, at);
    if (b >= 0x90 && b <= 0x9f) {
        *n = b & 0x0f;
        *is_array = 1;
        return 0;
    }
    if (b >= 0xa0 && b <= 0xbf) {
        *n = b & 0x1f;
        return 0;
    }
    if (b >= 0xcc && b <= 0xd3)
        return scan_int(buf, len, pos, at, what);
    switch (b) {
    case 0xc4: /* bin8 */
        hdr = 1;
        break;
    case 0xc5:
        hdr = 2, minimum = 256;
        break;
    case 0xc6:
        hdr = 4, minimum = 65536;
        break;
    case 0xd9: /* str8 */
        hdr = 1, minimum = 32;
        break;
    case 0xda:
        hdr = 2, minimum = 256;
        break;
    case 0xdb:
        hdr = 4, minimum = 65536;
        break;
    case 0xdc: /* array16 */
        hdr = 2, minimum = 16, *is_array = 1;
        break;
    case 0xdd:
        hdr = 4, minimum = 65536, *is_array = 1;
        break;
    case 0xde:
    case 0xdf:
        return pft_err(PFT_EFORMAT, "%s: byte %zu: msgpack map not allowed", what, at);
    case 0xca:
    case 0xcb:
        return pft_err(PFT_EFORMAT, "%s: byte %zu: msgpack float not allowed", what, at);
    default: /* 0xc1, ext, fixext */
        return pft_err(PFT_EFORMAT, "%s: byte %zu: msgpack type 0x%02x not allowed", what, at, b);
    }
    if (rest < (size_t)hdr)
        return pft_err(PFT_EFORMAT, "%s: truncated at byte %zu", what, *pos);
    *n = be(buf + *pos, hdr);
    *pos += (size_t)hdr;
    if (*n < minimum)
        return pft_err(PFT_EFORMAT, "%s: byte %zu: length %llu not in its shortest form", what, at,
                       (unsigned long long)*n);
    return 0;
}

/* Iterative: left[i] = elements still to read at nesting level i. */
int pft_mp_scan(const uint8_t *buf, size_t len, size_t max_objects, const char *what, size_t *used)
{
    size_t pos = 0, objects = 0, left[PFT_MP_MAX_DEPTH];
    int depth = 0;
    left[0] = 1;
    while (depth >= 0) {
        if (left[depth] == 0) {
            depth--;
            continue;
        }
        left[depth]--;
        if (pos >= len)
            return pft_err(PFT_EFORMAT, "%s: truncated at byte %zu", what, pos);
        if (++objects > max_objects)
            return pft_err(PFT_ERANGE, "%s: more than %zu msgpack objects", what, max_objects);
        size_t at = pos;
        uint64_t n = 0; /* array elements or bytes to skip */
        int is_array = 0;
        int rc = scan_header(buf, len, &pos, what, &n, &is_array);
        if (rc)
            return rc;
        if (n > len - pos)
            return pft_err(PFT_EFORMAT, "%s: byte %zu: declared length %llu exceeds the %zu bytes left", what,
                           at, (unsigned long long)n, len - pos);
        if (is_array && n > 0) {
            if (depth + 1 >= PFT_MP_MAX_DEPTH)
                return pft_err(PFT_EFORMAT, "%s: byte %zu: arrays nested deeper than %d", what, at,
                               PFT_MP_MAX_DEPTH);
            left[++depth] = (size_t)n;
        } else if (!is_array)
            pos += (size_t)n;
    }
    *used = pos;
    return 0;
}

int pft_mp_unpack(const uint8_t *buf, size_t len, size_t max_objects, const char *what, msgpack_unpacked *u)
{
    size_t used = 0;
    int rc = pft_mp_scan(buf, len, max_objects, what, &used);
    if (rc)
        return rc;
    if (used != len)
        return pft_err(PFT_EFORMAT, "%s: %zu trailing bytes after the object", what, len - used);
    size_t off = 0;
    msgpack_unpack_return r = msgpack_unpack_next(u, (const char *)buf, len, &off);
    if (r == MSGPACK_UNPACK_NOMEM_ERROR)
        return pft_err(PFT_ENOMEM, "%s: out of memory unpacking", what);
    if (r != MSGPACK_UNPACK_SUCCESS || off != len)
        return pft_err(PFT_EFORMAT, "%s: msgpack unpacker rejected the bytes (%d)", what, (int)r);
    return 0;
}
