/* pft_bundle_internal: INTERNAL to wire/pft_bundle*.c (the bundle struct and the helpers its files share);
 * no other module includes it, everything else goes through pft_bundle.h.
 * Files, from the bottom up (a file calls only files above it in this list, never one below):
 *   pft_bundle.c          the object: classes, parts (clear or masked alike), provenance, parents, flags
 *   pft_bundle_fp.c       the topology fingerprint a bundle carries
 *   pft_bundle_masked.c   masked statistics parts: layout, the mask's checks, adding one
 *   pft_bundle_check.c    counts and provenance consistent (before encoding, after decoding)
 *   pft_bundle_encode.c   a bundle to canonical msgpack (payload, envelope), its id
 *   pft_bundle_decode*.c  wire bytes to a bundle (their order: pft_bundle_decode_internal.h)
 * tests/e2e_layers.sh checks this order on the object files' symbols. */
#ifndef PFT_BUNDLE_INTERNAL_H
#define PFT_BUNDLE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pft_bundle.h"
#include "pft_gmm.h"
#include "pft_gstat.h"

/* Fixed array lengths of the payload schema (docs/WIRE.md §2). */
#define PFT_BUNDLE__N_PAYLOAD_FIELDS 8       /* GMM classes (or an empty bundle) */
#define PFT_BUNDLE__N_PAYLOAD_FIELDS_STATS 9 /* the 8, classes empty, then the statistics parts */
#define PFT_BUNDLE__N_PAYLOAD_FIELDS_FP 10   /* the 8, the parts (empty for GMMs), the topology fingerprint */
#define PFT_BUNDLE__N_PAYLOAD_FIELDS_GRID 11 /* the 10, then the α grid every evidence shares */
#define PFT_BUNDLE__N_PART_FIELDS 4          /* kind, contributors, classes, shared */
#define PFT_BUNDLE__N_MASKED_PART_FIELDS 5   /* the 4, then the mask */
#define PFT_BUNDLE__N_MASK_FIELDS 5          /* label, opener, f, bound, div (then shares, optional) */
#define PFT_BUNDLE__N_STAT_FIELDS_FULL 4     /* label, n, mean, covariance */
#define PFT_BUNDLE__N_STAT_FIELDS_TIED 3     /* label, n, mean */
#define PFT_BUNDLE__N_CLASS_FIELDS 7         /* full, diag, spher */
#define PFT_BUNDLE__N_CLASS_FIELDS_LOWRANK 9 /* lowrank: the 7, then rank q and the factor loadings W */

/* One (label, count) of a provenance entry. */
typedef struct {
    int label;
    uint64_t count;
} pft_bundle__pair_t;

/* One node of the provenance. */
typedef struct {
    char *node;
    pft_bundle__pair_t *pairs; /* sorted by label */
    int n, cap;
    double dp_eps, dp_delta; /* DP guarantee of this node's data (dp_eps > 0), else 0, 0 */
    pft_bundle_tally_t *ev;  /* validation evidence (pft_bundle_prov_set_evidence), n_ev tallies; or NULL */
    int n_ev;
    uint64_t ev_against; /* rows of the statistics the evidence was scored against */
} pft_bundle__prov_t;

/* One class: its label, the real features it stands for, its model. */
typedef struct {
    int label;
    uint64_t n;
    pft_gmm_t *gmm;
} pft_bundle__class_t;

/* One statistics part: exact statistics summing the rows of its contributors. */
typedef struct {
    pft_gstat_t *st;
    char **contrib; /* node ids, strictly ascending (bytewise) */
    int n_contrib;
    int rank_cap; /* low-rank form: eigenpairs sent at most (the rest of the q columns zero); -1: no cap */
    double
        *factor; /* decoded low-rank form: the factor U (d×factor_q, row-major) as it travelled; else NULL */
    int factor_q;
    double *factor_psi;      /* decoded low-rank form: its diagonal psi (d) as it travelled; else NULL */
    double *rel_u, *rel_psi; /* outbound: the release of the shared covariance, computed by the caller (U
                                d×rel_q, psi d; pft_bundle_set_part_release); else NULL */
    int rel_q;
    int taken; /* its statistics handed to the caller (pft_bundle_take_part_stats): st NULL, not masked */
    /* masked part (st NULL): kind, layout, public counts, the words, the mask */
    int masked;
    pft_gstat_kind_t kind;
    int n_classes;
    int *labels;      /* strictly ascending */
    uint64_t *counts; /* public, 0..2^48 */
    uint64_t *words;  /* pft_bundle_masked_words(kind, n_classes, d) */
    size_t n_words;
    pft_bundle_mask_t mask;
    uint8_t *shares; /* owned: what mask.shares points to (NULL: none) */
} pft_bundle__part_t;

struct pft_bundle_t {
    char run_id[PFT_BUNDLE_MAX_NAME + 1];
    char producer[PFT_BUNDLE_MAX_NAME + 1];
    uint32_t flags;
    pft_dtype_t dtype;
    int d;
    pft_bundle__class_t *classes; /* sorted by label */
    int n_classes, cap_classes;
    pft_bundle__part_t *parts; /* statistics parts (never with classes), sorted by first contributor */
    int n_parts, cap_parts;
    int shared_rank;          /* tied parts' shared covariance: 0 dense, q > 0 rank-q factor plus diagonal */
    pft_bundle__prov_t *prov; /* sorted by node id */
    int n_prov, cap_prov;
    uint8_t (*parents)[PFT_BUNDLE_ID_LEN]; /* sorted */
    int n_parents, cap_parents;
    uint8_t sig[PFT_BUNDLE_MAX_SIG];
    size_t sig_len;
    uint8_t *payload; /* the bytes this bundle was decoded from; dropped on any change */
    size_t payload_len;
    uint8_t id[PFT_BUNDLE_ID_LEN]; /* valid while payload is set */
    int has_fp;                    /* 1: fp and fp_items are the topology fingerprint it carries */
    uint8_t fp[PFT_BUNDLE_FP_LEN];
    pft_bundle_fp_item_t *fp_items;
    size_t n_fp_items;
};

/* 1 if s[0..len) is a valid run or node id: 1..PFT_BUNDLE_MAX_NAME bytes, no control bytes. */
int pft_bundle__name_ok(const char *s, size_t len);
/* 1 if s[0..len) is a valid fingerprint item name: 1..PFT_BUNDLE_FP_NAME_MAX bytes, no control bytes. */
int pft_bundle__fp_name_ok(const char *s, size_t len);
/* 1 if s[0..len) is a valid mask label: 1..PFT_BUNDLE_MASK_LABEL_MAX bytes, no control bytes. */
int pft_bundle__label_ok(const char *s, size_t len);
/* Bytes per number of dtype on the wire (2 or 4). */
size_t pft_bundle__dtype_size(pft_dtype_t dt);
/* Covariance numbers per component on the wire (lowrank: Ψ; its loadings W travel in a field of their own).
 */
size_t pft_bundle__cov_len(pft_cov_t cov, size_t d);
/* add_part's checks common to clear and masked parts (no GMM class, one kind, contributors valid, sorted,
 * in no other part, ≤ 4096 in all): 0 or PFT_EINVAL. */
int pft_bundle__part_args_ok(const pft_bundle_t *self, const char *const *contrib, int nc,
                             pft_gstat_kind_t kind);
/* Inserts a copy of *proto (payload taken: st or the masked fields) with copies of the contributors, keeping
 * parts sorted; 0, or PFT_ENOMEM with the bundle unaltered and *proto's payload still the caller's. */
int pft_bundle__part_insert(pft_bundle_t *self, const char *const *contributors, int n_contrib,
                            pft_bundle__part_t *proto);
/* Part p's kind, classes, class k's label and count, and the index of a label (-1): clear or masked. */
pft_gstat_kind_t pft_bundle__part_kind(const pft_bundle__part_t *p);
int pft_bundle__part_n_classes(const pft_bundle__part_t *p);
int pft_bundle__part_label(const pft_bundle__part_t *p, int k);
uint64_t pft_bundle__part_count(const pft_bundle__part_t *p, int k);
int pft_bundle__part_find_label(const pft_bundle__part_t *p, int label);
/* 0 if mask is valid for a part with these contributors (sorted), else PFT_EINVAL naming the field (the
 * decoder reports it as PFT_EFORMAT). */
int pft_bundle__mask_ok(const pft_bundle_mask_t *mask, const pft_bundle__part_t *p);
/* 1 if the m tallies t are valid evidence (pft_bundle_tally_t's ranges), else 0 with the reason in why. */
int pft_bundle__tallies_ok(const pft_bundle_tally_t *t, int m, char *why, size_t cap);
/* The first provenance entry with evidence when at least two have it and every other repeats its α (same
 * count, same values bit for bit): the payload's shared α grid (docs/WIRE.md §2.5, element 10); else -1. */
int pft_bundle__shared_grid(const pft_bundle_t *self);
/* Index of node in part p's contributors, or -1. */
int pft_bundle__part_find(const pft_bundle__part_t *p, const char *node);
/* "part i (contributors a,b,...)" into out (contributors elided past ~100 bytes), for messages. */
void pft_bundle__part_name(const pft_bundle__part_t *p, int i, char *out, size_t n);
/* Index of node in the provenance, or -(insertion point) - 1. */
int pft_bundle__prov_find(const pft_bundle_t *self, const char *node);
/* Provenance entry e's pair of label, or NULL with its insertion point in *ins (ins may be NULL). */
pft_bundle__pair_t *pft_bundle__pair_find(const pft_bundle__prov_t *e, int label, int *ins);
/* pft_bundle_check.c */
/* Provenance consistency, checked before encoding and after decoding: 0, or rc_code with a message prefixed
 * by who (PFT_ENOMEM possible for a statistics bundle). GMM bundle: every class's n is the sum of its
 * provenance counts, every provenance label has a class. Statistics bundle: every part contributor is a
 * provenance node, every provenance node contributes to exactly one part, each of its labels has a class in
 * that part, and every part class's n is the sum of its contributors' counts for the label. */
int pft_bundle__check_counts(const pft_bundle_t *self, int rc_code, const char *who);

#endif
