/* pft_bundle_decode_internal: INTERNAL to wire/pft_bundle_decode*.c (the decoding context and the typed
 * accessors both decoders use); everything else goes through pft_bundle.h.
 * Files, from the bottom up (a file calls only files above it in this list, never one below):
 *   pft_bundle_decode_read.c    little-endian numbers, typed accessors, a statistics class entry's head
 *   pft_bundle_decode_masked.c  a masked statistics part
 *   pft_bundle_decode_stats.c   the statistics parts (a masked one through the file above)
 *   pft_bundle_decode.c         the envelope, the message id, GMM classes, provenance, the payload
 * tests/e2e_layers.sh checks this order on the object files' symbols. */
#ifndef PFT_BUNDLE_DECODE_INTERNAL_H
#define PFT_BUNDLE_DECODE_INTERNAL_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "pft_bundle.h"

/* A decoding context: the place being read, prepended to every message. */
typedef struct {
    char where[256];
} ctx_t;

/* pft_bundle_decode_read.c */
/* Little-endian numbers: a uint32; value i of an array in dtype; float64 i of an array; one float64. */
uint32_t pft_bundle__get_le32(const uint8_t *p);
double pft_bundle__get_value(const uint8_t *src, size_t i, pft_dtype_t dt);
double pft_bundle__get_f64(const uint8_t *src, size_t i);
double pft_bundle__le_get_f64(const uint8_t *p);
/* The name of a msgpack type, for messages. */
const char *pft_bundle__type_name(msgpack_object_type t);
/* Sets the error "bundle decode: <where>: <message>" and returns code. */
int pft_bundle__bad(const ctx_t *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Typed access to the object tree: 0, or PFT_EFORMAT / PFT_ERANGE with a message naming field. */
int pft_bundle__want_array(const ctx_t *c, const msgpack_object *o, const char *field, uint32_t lo,
                           uint32_t hi, int range_code);
int pft_bundle__want_uint(const ctx_t *c, const msgpack_object *o, const char *field, uint64_t lo,
                          uint64_t hi, int range_code, uint64_t *out);
int pft_bundle__want_name(const ctx_t *c, const msgpack_object *o, const char *field,
                          char out[PFT_BUNDLE_MAX_NAME + 1]);
int pft_bundle__want_bin(const ctx_t *c, const msgpack_object *o, const char *field, uint64_t size);

/* A statistics class entry's head (e, entry i of a part's classes): an array of nf elements whose label
 * (0..2^31-1) comes after *prev (updated) and whose count is n_min..2^48; label and count into *label, *n.
 * Clear parts (n_min 1) and masked parts (n_min 0) share it; each then checks its own bins. */
int pft_bundle__class_head(const ctx_t *c, const msgpack_object *e, uint32_t i, uint32_t nf, uint64_t n_min,
                           uint64_t *prev, uint64_t *label, uint64_t *n);

/* pft_bundle_decode_stats.c: the statistics parts (payload element 8, docs/WIRE.md §2.1) into b. */
struct pft_bundle_t;
int pft_bundle__decode_parts(const ctx_t *c, pft_bundle_t *b, const pft_bundle_limits_t *lim,
                             const msgpack_object *o);

/* pft_bundle_decode_masked.c: masked part pi (f: its 5 fields; kind checked, contributors decoded into
 * b->parts[pi]) into b->parts[pi]; model_total as for clear parts. */
int pft_bundle__decode_masked(ctx_t *c, pft_bundle_t *b, const pft_bundle_limits_t *lim, int pi,
                              const msgpack_object *f, uint64_t *model_total);

#endif
