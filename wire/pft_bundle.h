/* pft_bundle: one node's outbound knowledge (per-class GMMs or exact statistics parts, counts, provenance)
 * and its msgpack codec. */
#ifndef PFT_BUNDLE_H
#define PFT_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "pft_gmm.h"
#include "pft_gstat.h"

/* Wire format: an envelope msgpack [ "PFTB", 1, payload: bin, signature: bin | nil ] whose payload is
 * itself canonical msgpack (docs/WIRE.md gives the schema). The bundle id is BLAKE2b-256 of the payload
 * bytes, and a signature covers exactly those bytes, so both survive forwarding unchanged. */
#define PFT_BUNDLE_MAGIC "PFTB"
#define PFT_BUNDLE_VERSION 1
#define PFT_BUNDLE_ID_LEN 32                     /* bytes of a bundle id (BLAKE2b-256) */
#define PFT_BUNDLE_MAX_NAME 64                   /* bytes of a run id or node id, at most */
#define PFT_BUNDLE_MAX_SIG 256                   /* bytes of a signature, at most (Ed25519 uses 64) */
#define PFT_BUNDLE_MAX_COUNT (UINT64_C(1) << 48) /* a sample count, at most */

/* Parameter encoding on the wire (values are part of the wire format). Weights always travel as fp64. */
typedef enum {
    PFT_DTYPE_F16 = 0, /* IEEE binary16, the paper's encoding (default) */
    PFT_DTYPE_F32 = 1, /* IEEE binary32 */
} pft_dtype_t;

/* Bundle flags (bits; values are part of the wire format; unknown bits are rejected on decode). */
enum {
    PFT_BUNDLE_COMPLETE = 1u << 0, /* holds every node's knowledge: forwarded unchanged, never refit */
};
#define PFT_BUNDLE_FLAGS_KNOWN 0x1u

/* Decoder maxima, checked before anything is allocated. pft_bundle_limits_default() gives the values
 * in brackets. */
typedef struct {
    size_t max_bytes;       /* whole message [256 MiB] */
    uint32_t max_classes;   /* classes in a bundle [65536] */
    uint32_t max_k;         /* components per class [1024] */
    uint32_t max_d;         /* feature dimension [65536] */
    uint32_t max_nodes;     /* provenance entries [4096] */
    uint32_t max_parents;   /* parent bundle ids [4096] */
    size_t max_objects;     /* msgpack objects in the payload (bounds the unpacker's memory) [2^21] */
    size_t max_model_bytes; /* decoded GMM memory, estimated, summed over classes [4 GiB] */
} pft_bundle_limits_t;

void pft_bundle_limits_default(pft_bundle_limits_t *limits);

typedef struct pft_bundle_t pft_bundle_t;

/* A bundle holds EITHER per-class GMMs (add_class) OR exact Gaussian statistics parts (add_part), never
 * both; with neither it is an empty GMM bundle. */

/* A bundle with no classes. run_id and producer: 1..64 bytes, no control characters; d ≥ 1.
 * NULL on failure (bad argument or out of memory; pft_errmsg() says which). */
pft_bundle_t *pft_bundle_new(const char *run_id, const char *producer, pft_dtype_t dtype, int d);
/* Frees *self_p (and the GMMs it owns) and sets it to NULL; safe on NULL and twice. */
void pft_bundle_destroy(pft_bundle_t **self_p);

/* Adds class `label` (≥ 0, not yet present) standing for n (1..PFT_BUNDLE_MAX_COUNT) real features,
 * modelled by *gmm_p (dimension must be d). Takes ownership: on success *gmm_p is set to NULL; on error
 * (PFT_EINVAL, PFT_ENOMEM; PFT_EINVAL too when the bundle has statistics parts) the bundle is unaltered
 * and the caller keeps the GMM. Classes are kept sorted by label. */
int pft_bundle_add_class(pft_bundle_t *self, int label, uint64_t n, pft_gmm_t **gmm_p);

/* Statistics parts: exact statistics *st_p summing the rows of the n_contrib nodes `contributors` (node
 * ids, strictly ascending bytewise, none already in another part). Parts travel apart so that a receiver
 * where paths rejoin can count each contributor once (it chooses which parts to take). Takes ownership: on
 * success *st_p is set to NULL; on error the bundle is unaltered and the caller keeps the statistics.
 * PFT_EINVAL: the bundle has GMM classes; the statistics' d differs from the bundle's, or their kind from
 * earlier parts' (one kind per bundle), or they have no class or a class count above 2^48; n_contrib < 1;
 * a contributor id invalid (as node ids), out of order, or in another part; more than 4096 contributors
 * over all parts. PFT_ENOMEM. Parts are kept sorted by their first contributor. */
int pft_bundle_add_part(pft_bundle_t *self, const char *const *contributors, int n_contrib,
                        pft_gstat_t **st_p);
/* Form of the shared covariance of TIED parts on the wire: 0 (the default) its dense lower triangle,
 * d(d+1)/2 numbers; q in 1..d-1 a rank-q factor U and a diagonal psi, d·q + d numbers, with
 * C ≈ U Uᵀ + diag(psi) (pft_gstat_lowrank_shared: the q leading eigenpairs, the diagonal kept exactly; lossy
 * unless rank(C) ≤ q). One form for all parts of a bundle; ignored for FULL parts and GMM bundles. Changing
 * it drops a decoded bundle's kept payload. 0, or PFT_EINVAL (q outside 0..d-1). */
int pft_bundle_set_shared_rank(pft_bundle_t *self, int q);
/* The form set, or the one a decoded bundle's parts travelled in (0: dense). */
int pft_bundle_shared_rank(const pft_bundle_t *self);
/* Low-rank form only: part i sends at most q (0..d-1) leading eigenpairs of its shared covariance; the factor
 * keeps the bundle's q columns, those beyond the cap zero, and the diagonal psi still carries the rest of
 * C's diagonal exactly (the release rule of DESIGN.md §8: a part's rank bounded by the rows it stands for);
 * q = 0: no eigenpair and an isotropic psi (every entry tr(C)/d), so that the coordinates on which a handful
 * of rows never vary are not revealed.
 * -1 (the default) removes the cap. Changing it drops a decoded bundle's kept payload. 0, or PFT_EINVAL (no
 * such part, q outside -1..d-1). */
int pft_bundle_set_part_rank_cap(pft_bundle_t *self, int i, int q);
/* Part i's rank cap (-1: none). */
int pft_bundle_part_rank_cap(const pft_bundle_t *self, int i);
/* The number of eigenpairs part i sends: its rank cap where that is below the bundle's rank, else the bundle's
 * rank (0: none, or the bundle is not in low-rank form). */
int pft_bundle_part_sent_rank(const pft_bundle_t *self, int i);
/* Low-rank form only: the release of clear part i's shared covariance, U (d×q, row-major) and psi (d, ≥ +0),
 * as pft_gstat_lowrank_shared would compute it from the part's statistics at rank q, computed by the caller
 * (who holds a cheaper route to the same eigenpairs; copied). The encoder sends it, instead of computing the
 * release itself, when q is the part's rank cap (or, uncapped, the bundle's rank); otherwise it is ignored.
 * The caller answers for U and psi being the release of the part's statistics. 0, or PFT_EINVAL (no such
 * clear part, q outside 1..d-1, a non-finite or negative value), PFT_ENOMEM. */
int pft_bundle_set_part_release(pft_bundle_t *self, int i, const double *U, const double *psi, int q);
/* Low-rank form only (a shared rank q > 0), clear TIED part i whose rank cap is not 0: hands the part's
 * within-class scatter W (d×d) to the caller (*w, freed with pft_free), for a caller that holds the same W
 * elsewhere and sets the part's release (pft_bundle_set_part_release) at the rank the encoder sends. The part
 * keeps its counts and means; until its release is set the bundle is not encoded (PFT_EINVAL), and its W is
 * gone for good. 0, or PFT_EINVAL (no such part, another form or kind, a cap of 0, taken already). */
int pft_bundle_take_part_scatter(pft_bundle_t *self, int i, double **w);
/* Clear part i's statistics handed to the caller (*st, destroyed with pft_gstat_destroy), for a caller that
 * decoded the bundle to take its parts and then destroys it: the part keeps its contributors, but the bundle
 * is not encoded any more (PFT_EINVAL) and pft_bundle_part_stats gives NULL for it. 0, or PFT_EINVAL (no such
 * part, a masked part, taken already). */
int pft_bundle_take_part_stats(pft_bundle_t *self, int i, pft_gstat_t **st);
/* The reverse of pft_bundle_take_part_scatter (or of a part built from statistics whose scatter was taken,
 * pft_gstat_take_all): *w (d×d, both triangles, allocated by pft_alloc) becomes clear TIED part i's scatter
 * again and *w is set to NULL. 0, or PFT_EINVAL (no such part, FULL, it holds a scatter). */
int pft_bundle_give_part_scatter(pft_bundle_t *self, int i, double **w);
/* Borrowed: the factor U (d×q, row-major) with which decoded part i's shared covariance travelled in
 * low-rank form (q into *q), exactly as sent (what an auditor attacks: its columns lie in the span of the
 * producer's rows); NULL and *q = 0 for a dense or FULL part, or a part not decoded. */
const double *pft_bundle_part_factor(const pft_bundle_t *self, int i, int *q);
/* Borrowed: the diagonal psi (d) that travelled beside that factor (decoded part i's shared covariance is
 * U Uᵀ + diag psi, its scatter n·(U Uᵀ + diag psi)); NULL where pft_bundle_part_factor gives NULL. */
const double *pft_bundle_part_factor_psi(const pft_bundle_t *self, int i);
/* 1 if the bundle carries statistics parts (then it has no GMM class). */
int pft_bundle_is_stats(const pft_bundle_t *self);
int pft_bundle_n_parts(const pft_bundle_t *self);
/* Borrowed: part i's statistics (NULL for a masked part), contributors (sorted) and contributor j. */
const pft_gstat_t *pft_bundle_part_stats(const pft_bundle_t *self, int i);
int pft_bundle_part_n_contributors(const pft_bundle_t *self, int i);
const char *pft_bundle_part_contributor(const pft_bundle_t *self, int i, int j);

/* Masked parts (secure aggregation, docs/SECAGG.md §8; docs/WIRE.md §2.2): a part whose statistics travel as
 * words mod 2^64 under pairwise masks (pft_fixed, pft_mask) that only its opener can remove. Counts,
 * contributors and provenance stay public and are checked as for clear parts; the words themselves are
 * uniform and cannot be checked before opening. A bundle may hold clear and masked parts of the same kind
 * (the shared rank applies to its clear tied parts only). */
#define PFT_BUNDLE_MASK_LABEL_MAX 256 /* bytes of a mask label at most */
typedef struct {
    char label[PFT_BUNDLE_MASK_LABEL_MAX + 1]; /* the group's use label: 1..256 bytes, no control bytes */
    char opener[PFT_BUNDLE_MAX_NAME + 1];      /* the node that may remove the masks (not a contributor) */
    int frac_bits;                             /* fractional bits of the words: 32 (PFT_FIXED_FRAC_BITS) */
    uint64_t bound;                            /* decode bound of every entry: 1..2^31 - 1 */
    uint32_t div;                              /* DP noise divisor D (0: no DP share) */
    const uint8_t *shares; /* double masking: the one contributor's encrypted shares of its self-mask seed,
                              opaque here (docs/SECAGG.md §5); NULL: none. Copied by add_masked_part; a
                              decoded or added part owns its copy */
    size_t shares_len;     /* bytes of shares: 0, or 1..PFT_BUNDLE_MASK_SHARES_MAX */
} pft_bundle_mask_t;
#define PFT_BUNDLE_MASK_SHARES_MAX ((size_t)4 << 20) /* bytes of a part's encrypted shares at most */

/* Words of a masked part: TIED n_classes·d class sums then d(d+1)/2 words of the shared matrix (lower
 * triangle row by row); FULL n_classes·(d + d(d+1)/2), every class's sum then its second moment. */
size_t pft_bundle_masked_words(pft_gstat_kind_t kind, int n_classes, int d);
/* Adds a masked part: contributors as for pft_bundle_add_part; n_classes (1..65536) labels strictly
 * ascending (≥ 0) with their public counts (0..2^48: a member sends every class of the layout);
 * *words_p the pft_bundle_masked_words words, taken (set to NULL) on success; mask copied and checked
 * (label and opener valid names, opener not a contributor, frac_bits 32, bound 1..2^31 - 1; shares only on a
 * part of one contributor, at most PFT_BUNDLE_MASK_SHARES_MAX bytes). On error the
 * bundle is unaltered and the caller keeps the words: PFT_EINVAL (as add_part, or a bad layout or mask),
 * PFT_ENOMEM. */
int pft_bundle_add_masked_part(pft_bundle_t *self, const char *const *contributors, int n_contrib,
                               pft_gstat_kind_t kind, int n_classes, const int *labels,
                               const uint64_t *counts, uint64_t **words_p, const pft_bundle_mask_t *mask);
/* 1 if part i is masked (then pft_bundle_part_stats is NULL). */
int pft_bundle_part_is_masked(const pft_bundle_t *self, int i);
/* Borrowed: a masked part's mask and words (their number into *n); NULL for a clear part. */
const pft_bundle_mask_t *pft_bundle_part_mask(const pft_bundle_t *self, int i);
const uint64_t *pft_bundle_part_words(const pft_bundle_t *self, int i, size_t *n);
/* Part i's kind, classes and class k's label and count, for clear and masked parts alike. */
pft_gstat_kind_t pft_bundle_part_kind(const pft_bundle_t *self, int i);
int pft_bundle_part_n_classes(const pft_bundle_t *self, int i);
void pft_bundle_part_class(const pft_bundle_t *self, int i, int k, int *label, uint64_t *count);

/* Provenance: the nodes whose real data the bundle contains, with per-class counts.
 * Records that `node` contributed `count` (≥ 1) features of class `label`; adds to an existing count.
 * PFT_EINVAL on a bad argument or overflow, PFT_ENOMEM. */
int pft_bundle_prov_add(pft_bundle_t *self, const char *node, int label, uint64_t count);
/* Set union of the provenance of `other` into self: a (node, label) already present with the same count
 * is skipped (the same data reached us along two paths, e.g. a diamond), with a different count it is
 * an error (PFT_EINVAL; self is then unaltered). PFT_ENOMEM. */
int pft_bundle_prov_merge(pft_bundle_t *self, const pft_bundle_t *other);
/* The differential-privacy guarantee (ε, δ) under which `node`'s data entered the run (its own DP-FedPFT
 * release); travels with the entry and survives merges (a different guarantee for the same node is a
 * conflict). PFT_EINVAL if node is not in the provenance or (ε, δ) is not 0 < ε ≤ 1e6, 0 ≤ δ ≤ 1. */
int pft_bundle_prov_set_dp(pft_bundle_t *self, const char *node, double eps, double delta);
/* Entry i's guarantee: 1 and (ε, δ) if it has one, else 0 (and 0, 0). */
int pft_bundle_prov_dp(const pft_bundle_t *self, int i, double *eps, double *delta);

/* Validation evidence of a contributor (docs/WIRE.md §2: the optional fourth element of a provenance entry):
 * per grid point (a shrinkage α, ascending), the rows of its own it scored, how many it got right and their
 * summed cross-entropy. It travels with the entry and survives merges, so that every node holding the same
 * statistics can sum the same evidence (different evidence for the same node is a conflict). */
typedef struct {
    double alpha;     /* 0..1, strictly ascending within an entry */
    uint64_t correct; /* ≤ total */
    uint64_t total;   /* ≤ 2^48; 0: the point is unusable for that contributor */
    double loss;      /* finite, ≥ 0 */
} pft_bundle_tally_t;
#define PFT_BUNDLE_MAX_TALLIES 64
/* Sets node's evidence: m tallies (1..PFT_BUNDLE_MAX_TALLIES, copied) scored against statistics of `against`
 * rows (1..2^48). PFT_EINVAL (node not in the provenance, m, against or a tally out of range), PFT_ENOMEM. */
int pft_bundle_prov_set_evidence(pft_bundle_t *self, const char *node, uint64_t against,
                                 const pft_bundle_tally_t *t, int m);
/* Borrowed: entry i's evidence, its length in *m and the rows it was scored against in *against; NULL (and
 * 0, 0) when it has none. */
const pft_bundle_tally_t *pft_bundle_prov_evidence(const pft_bundle_t *self, int i, int *m,
                                                   uint64_t *against);
/* Number of provenance entries (distinct nodes, sorted by id) and their contents. */
int pft_bundle_prov_n_nodes(const pft_bundle_t *self);
const char *pft_bundle_prov_node(const pft_bundle_t *self, int i);
/* Per-class counts of entry i: n_labels, then (label, count) pairs sorted by label. */
int pft_bundle_prov_n_labels(const pft_bundle_t *self, int i);
void pft_bundle_prov_entry(const pft_bundle_t *self, int i, int j, int *label, uint64_t *count);
/* Count contributed by `node` to class `label` (0 when absent). */
uint64_t pft_bundle_prov_count(const pft_bundle_t *self, const char *node, int label);
/* 1 if `node` is in the provenance. */
int pft_bundle_prov_contains(const pft_bundle_t *self, const char *node);

/* Parent bundle ids (the inbound bundles this one was derived from), kept sorted, duplicates ignored.
 * PFT_EINVAL past max 4096, PFT_ENOMEM. */
int pft_bundle_add_parent(pft_bundle_t *self, const uint8_t id[PFT_BUNDLE_ID_LEN]);
int pft_bundle_n_parents(const pft_bundle_t *self);
const uint8_t *pft_bundle_parent(const pft_bundle_t *self, int i);

/* Flags (PFT_BUNDLE_COMPLETE ...); PFT_EINVAL for unknown bits. */
int pft_bundle_set_flags(pft_bundle_t *self, uint32_t flags);
/* Signature over the payload bytes (outside the payload, so it does not change the id); len ≤ 256;
 * sig NULL / len 0 removes it. PFT_EINVAL, PFT_ENOMEM. */
int pft_bundle_set_signature(pft_bundle_t *self, const uint8_t *sig, size_t len);

/* The topology fingerprint (docs/WIRE.md §2.4, topology/pft_topo_fingerprint.h): 32 bytes naming the public
 * topology the producer ran with, and named 8-byte digests of its parts that let a receiver name what
 * differs. A bundle with one travels in the 10-element payload. The wire only carries it; the node compares
 * it. */
#define PFT_BUNDLE_FP_LEN 32          /* bytes of the fingerprint */
#define PFT_BUNDLE_FP_DIGEST_LEN 8    /* bytes of an item's digest */
#define PFT_BUNDLE_FP_NAME_MAX 128    /* bytes of an item name, at most */
#define PFT_BUNDLE_FP_MAX_ITEMS 16384 /* items, at most */
typedef struct {
    char name[PFT_BUNDLE_FP_NAME_MAX + 1]; /* 1..128 bytes, no control bytes */
    uint8_t digest[PFT_BUNDLE_FP_DIGEST_LEN];
} pft_bundle_fp_item_t;
/* Sets (copies) the fingerprint and its n items (names valid, strictly ascending bytewise, n ≤ the maximum);
 * fp NULL removes it. Drops a decoded bundle's kept payload when it changes anything. PFT_EINVAL naming the
 * item, PFT_ENOMEM; on error the bundle is unaltered. */
int pft_bundle_set_fingerprint(pft_bundle_t *self, const uint8_t *fp, const pft_bundle_fp_item_t *items,
                               size_t n);
/* The fingerprint (NULL when the bundle carries none) and its items into *items, their number into *n. */
const uint8_t *pft_bundle_fingerprint(const pft_bundle_t *self, const pft_bundle_fp_item_t **items,
                                      size_t *n);

const char *pft_bundle_run_id(const pft_bundle_t *self);
const char *pft_bundle_producer(const pft_bundle_t *self);
uint32_t pft_bundle_flags(const pft_bundle_t *self);
pft_dtype_t pft_bundle_dtype(const pft_bundle_t *self);
int pft_bundle_dim(const pft_bundle_t *self);
int pft_bundle_n_classes(const pft_bundle_t *self);
int pft_bundle_class_label(const pft_bundle_t *self, int i);
uint64_t pft_bundle_class_count(const pft_bundle_t *self, int i);
const pft_gmm_t *pft_bundle_class_gmm(const pft_bundle_t *self, int i);
/* Index of the class with this label, or -1. */
int pft_bundle_find_class(const pft_bundle_t *self, int label);
/* The signature (NULL and *len = 0 when unsigned). */
const uint8_t *pft_bundle_signature(const pft_bundle_t *self, size_t *len);

/* Canonical payload bytes (what the id hashes and a signature covers), in a new buffer the caller frees
 * with pft_free. Deterministic: equal bundles give equal bytes. A decoded, unmodified bundle gives back
 * exactly the payload it was decoded from. Checks before writing that every class's n equals the sum of
 * its provenance counts and every provenance label has a class (statistics bundles: the rules of
 * pft_bundle_add_part's parts versus the provenance, docs/WIRE.md §2) (PFT_EINVAL), and that every value
 * fits the dtype (PFT_ERANGE: e.g. a mean beyond ±65504 in fp16; positive variances and Cholesky diagonals
 * that would round to 0 are sent as the smallest positive subnormal instead). Statistics travel as
 * covariances M/n (and W/N), rounded to the dtype; their positive semi-definiteness is not checked here
 * (the decoder checks it). */
int pft_bundle_encode_payload(const pft_bundle_t *self, uint8_t **buf, size_t *len);
/* The payload bytes, encoded on the first call and kept in the bundle (with its id) until any change
 * drops them, so that signing, the id and the wire message share one encoding: *payload is borrowed,
 * valid until the bundle's next setter (the signature's excepted) or its destruction. Same errors as
 * encode_payload (then *payload NULL, the bundle unaltered). */
int pft_bundle_payload(pft_bundle_t *self, const uint8_t **payload, size_t *len);
/* The whole wire message: envelope around the payload with the bundle's signature (or nil). Same errors;
 * the caller frees *buf with pft_free. */
int pft_bundle_encode(const pft_bundle_t *self, uint8_t **buf, size_t *len);
/* Bundle id: BLAKE2b-256 of the payload bytes. Same errors as encode_payload. */
int pft_bundle_id(const pft_bundle_t *self, uint8_t id[PFT_BUNDLE_ID_LEN]);

/* Decodes and validates a wire message (limits NULL: defaults). Never trusts the bytes: on the first
 * violation returns PFT_EFORMAT (structure, types, lengths), PFT_ERANGE (a maximum exceeded),
 * PFT_ENUMERIC (a value: non-finite, negative weight, weights not summing to 1, variance or Cholesky
 * diagonal not positive, a statistics covariance with a negative diagonal or not positive semi-definite),
 * PFT_EUNSUPPORTED (other envelope version) or PFT_ENOMEM, with a message naming the place, e.g. "class 3
 * (label 5): component 2: variance[17] = -0 is not positive"; *out is then NULL. On success *out is a new
 * bundle (the caller destroys it). The signature is carried, not verified. */
int pft_bundle_decode(const uint8_t *buf, size_t len, const pft_bundle_limits_t *limits, pft_bundle_t **out);

/* Envelope only, no payload parsing: borrowed pointers into buf. limits NULL: defaults (max_bytes).
 * PFT_EFORMAT / PFT_ERANGE / PFT_EUNSUPPORTED as for decode. */
typedef struct {
    const uint8_t *payload;
    size_t payload_len;
    const uint8_t *sig; /* NULL when the envelope carries nil */
    size_t sig_len;
} pft_envelope_t;
int pft_envelope_parse(const uint8_t *buf, size_t len, const pft_bundle_limits_t *limits,
                       pft_envelope_t *out);
/* Wraps payload bytes (and an optional signature, len ≤ 256) in an envelope; the caller frees *buf with
 * pft_free. PFT_EINVAL, PFT_ENOMEM. */
int pft_envelope_pack(const uint8_t *payload, size_t payload_len, const uint8_t *sig, size_t sig_len,
                      uint8_t **buf, size_t *len);

/* BLAKE2b-256 of bytes (the bundle id of a payload). */
void pft_bundle_hash(const uint8_t *payload, size_t len, uint8_t id[PFT_BUNDLE_ID_LEN]);
/* Id of a wire message: parses the envelope under limits (NULL: the defaults) and hashes the payload;
 * PFT_EFORMAT etc. */
int pft_bundle_message_id(const uint8_t *msg, size_t len, const pft_bundle_limits_t *limits,
                          uint8_t id[PFT_BUNDLE_ID_LEN]);
/* Lower-case hex of an id into out[65]; returns out. */
char *pft_bundle_id_hex(const uint8_t id[PFT_BUNDLE_ID_LEN], char out[2 * PFT_BUNDLE_ID_LEN + 1]);

/* Bytes the paper's formula predicts for the parameters at the bundle's dtype width (2 or 4 bytes per
 * number, pft_gmm_n_wire_params summed over classes; statistics: per part, classes × (1 + d) numbers, plus
 * d(d+1)/2 per class for FULL or d(d+1)/2 once for TIED, d·q + d with shared rank q > 0); for comparing with
 * the encoded size. */
size_t pft_bundle_formula_bytes(const pft_bundle_t *self);

#endif
