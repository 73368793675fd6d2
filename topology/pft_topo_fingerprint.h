/* pft_topo_fingerprint: a hash of the public facts of a loaded topology, so that two organisations (and every
 * hand-off) can tell that they run the same settings. */
#ifndef PFT_TOPO_FINGERPRINT_H
#define PFT_TOPO_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

#include "pft_topo.h"

/* What is hashed (DESIGN.md §12: the public topology): the run-wide settings after defaults (every graph
 * attribute of the table but the paths, i.e. dataset, and port_base, which only derives endpoints), each
 * node's effective public settings (every node attribute of the table but endpoint, its data files and key)
 * and its public key (the 32 bytes, wherever the file gave them: a .pub path and the inline line of the same
 * key hash alike), and the edges with their effective settings. Not hashed: private paths (train, labels,
 * test, test_labels, dataset, a key file's path), endpoints (a port-0 endpoint is only known at run time, and
 * a wrong endpoint fails to connect rather than mixing results), layout attributes, comments, the order of
 * nodes and edges in the file (items are sorted by name).
 *
 * The facts form items, each with a name and a canonical text: one per run-wide attribute (its name, e.g.
 * "k"), one per node ("node:<id>": its settings and its key) and one for the edges ("edges"). Each item's
 * text is hashed (BLAKE2b-256, libsodium crypto_generichash); the fingerprint is BLAKE2b-256 over the items'
 * names and full digests in name order. An item also has an 8-byte digest that travels with the fingerprint
 * (a node item: 4 bytes of its settings' digest, then 4 of its key's), so that a receiver can name what
 * differs. The 8-byte digests only explain a difference: equality is decided on the 32-byte fingerprint. */

#define PFT_TOPO_FP_LEN 32       /* bytes of the fingerprint */
#define PFT_TOPO_FP_DIGEST_LEN 8 /* bytes of an item's carried digest */
#define PFT_TOPO_FP_NAME_MAX 80  /* bytes of an item name, at most ("node:" + a 64-byte id) */
#define PFT_TOPO_FP_TEXT_LEN 80  /* the printed fingerprint: 16 groups of 4 hex digits, NUL included */
#define PFT_TOPO_FP_KEY_LEN 32   /* bytes of a node's public key */

/* One item: its name and carried digest. */
typedef struct {
    char name[PFT_TOPO_FP_NAME_MAX + 1];
    uint8_t digest[PFT_TOPO_FP_DIGEST_LEN];
} pft_topo_fp_item_t;

typedef struct pft_topo_fp_t pft_topo_fp_t;

/* The fingerprint of t. keys: NULL (no node has a key), or pft_topo_node_count(t) pointers, keys[i] the 32
 * bytes of node i's public key or NULL (none given); the caller resolves them (topology/ reads no key files).
 * 0 and *out new, or PFT_ENOMEM (*out NULL). */
int pft_topo_fp_new(const pft_topo_t *t, const uint8_t *const *keys, pft_topo_fp_t **out);
/* Frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_topo_fp_destroy(pft_topo_fp_t **self_p);

/* The 32 bytes. */
const uint8_t *pft_topo_fp_hash(const pft_topo_fp_t *self);
/* The items, sorted by name (strictly ascending, bytewise); returns their number. */
size_t pft_topo_fp_items(const pft_topo_fp_t *self, const pft_topo_fp_item_t **out);

/* The fingerprint as 16 groups of 4 lower-case hex digits separated by spaces, easy to read out by phone,
 * into out; returns out. */
char *pft_topo_fp_text(const uint8_t fp[PFT_TOPO_FP_LEN], char out[PFT_TOPO_FP_TEXT_LEN]);

/* Names what differs between this topology and the one whose items are theirs[0..n) (sorted as above), into
 * buf[cap] (truncated with "…"): run-wide settings with their value here ("k (3 here)"), nodes
 * ("settings of node b", "key of node a", "node c (only here)", "node d (not here)"), "edges" (with this
 * topology's edges when they are few). Returns how many items differ (0: none, buf empty). */
size_t pft_topo_fp_diff(const pft_topo_fp_t *self, const pft_topo_fp_item_t *theirs, size_t n, char *buf,
                        size_t cap);

#endif
