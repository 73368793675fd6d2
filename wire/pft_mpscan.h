/* pft_mpscan: a bounds-checked scanner of raw msgpack bytes, run before msgpack-c's unpacker touches them. */
#ifndef PFT_MPSCAN_H
#define PFT_MPSCAN_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

/* Arrays nest at most this deep (the top-level object counts as one level). */
#define PFT_MP_MAX_DEPTH 8

/* Walks exactly one msgpack object at buf[0..len) without building anything. Accepts only the canonical
 * (shortest) forms of nil, bool, int, str, bin and array, the forms msgpack-c's packer writes; rejects maps,
 * floats, ext. Every declared length must fit in the bytes that remain (each element takes at least one
 * byte), arrays nest at most PFT_MP_MAX_DEPTH deep and at most max_objects objects may appear.
 * On success 0 and *used = bytes of the object; else PFT_EFORMAT (PFT_ERANGE past max_objects) with a
 * message prefixed by what and naming the byte. */
int pft_mp_scan(const uint8_t *buf, size_t len, size_t max_objects, const char *what, size_t *used);

/* Scans buf with pft_mp_scan, then unpacks it as exactly one object (no trailing bytes) into *u, which the
 * caller has initialised and destroys in every case (str and bin objects point into buf). 0, PFT_EFORMAT,
 * PFT_ERANGE or PFT_ENOMEM, the message prefixed by what. */
int pft_mp_unpack(const uint8_t *buf, size_t len, size_t max_objects, const char *what, msgpack_unpacked *u);

#endif
