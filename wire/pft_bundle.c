/* pft_bundle: per-class GMMs + counts + provenance, encoded as canonical msgpack and decoded without trust.
 *
 * Encoding: msgpack-c's packer writes into our own growable buffer (pft_alloc). Decoding: a scanner first
 * walks the raw bytes (every header canonical, every declared length within the bytes that remain, the
 * object count capped), and only then msgpack-c's unpacker builds the object tree, whose memory is thereby
 * bounded by max_objects; the tree is then checked field by field against the schema and the limits, and
 * values are checked before any GMM is built. See docs/WIRE.md. */
#include "pft_bundle.h"

#include <math.h>
#include <msgpack.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_half.h"

#define N_PAYLOAD_FIELDS 8
#define N_CLASS_FIELDS 7         /* full, diag, spher */
#define N_CLASS_FIELDS_LOWRANK 9 /* lowrank: the 7, then rank q and the factor loadings W */
#define WEIGHT_TOL 1e-6

typedef struct {
    int label;
    uint64_t count;
} prov_pair_t;

typedef struct {
    char *node;
    prov_pair_t *pairs; /* sorted by label */
    int n, cap;
    double dp_eps, dp_delta; /* DP guarantee of this node's data (dp_eps > 0), else 0, 0 */
} prov_entry_t;

typedef struct {
    int label;
    uint64_t n;
    pft_gmm_t *gmm;
} class_t;

struct pft_bundle_t {
    char run_id[PFT_BUNDLE_MAX_NAME + 1];
    char producer[PFT_BUNDLE_MAX_NAME + 1];
    uint32_t flags;
    pft_dtype_t dtype;
    int d;
    class_t *classes; /* sorted by label */
    int n_classes, cap_classes;
    prov_entry_t *prov; /* sorted by node id */
    int n_prov, cap_prov;
    uint8_t (*parents)[PFT_BUNDLE_ID_LEN]; /* sorted */
    int n_parents, cap_parents;
    uint8_t sig[PFT_BUNDLE_MAX_SIG];
    size_t sig_len;
    uint8_t *payload; /* the bytes this bundle was decoded from; dropped on any change */
    size_t payload_len;
    uint8_t id[PFT_BUNDLE_ID_LEN]; /* valid while payload is set */
};

void pft_bundle_limits_default(pft_bundle_limits_t *limits)
{
    limits->max_bytes = (size_t)256 << 20;
    limits->max_classes = 65536;
    limits->max_k = 1024;
    limits->max_d = 65536;
    limits->max_nodes = 4096;
    limits->max_parents = 4096;
    limits->max_objects = (size_t)1 << 21;
    limits->max_model_bytes = (size_t)4 << 30;
}

/* ---------- small helpers ---------- */

static int name_ok(const char *s, size_t len)
{
    if (len < 1 || len > PFT_BUNDLE_MAX_NAME)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
    }
    return 1;
}

static size_t dtype_size(pft_dtype_t dt)
{
    return dt == PFT_DTYPE_F32 ? 4 : 2;
}

/* Covariance numbers per component on the wire (lowrank: Ψ; its loadings W travel in a field of their own).
 */
static size_t cov_len(pft_cov_t cov, size_t d)
{
    switch (cov) {
    case PFT_COV_FULL:
        return d * (d + 1) / 2;
    case PFT_COV_DIAG:
    case PFT_COV_LOWRANK:
        return d;
    default:
        return 1;
    }
}

static void drop_cache(pft_bundle_t *self)
{
    PFT_FREE(self->payload);
    self->payload_len = 0;
}

/* Grows *arr (elements of size sz) so that it holds at least need; 0 or PFT_ENOMEM. */
static int grow(void **arr, int *cap, int need, size_t sz)
{
    if (need <= *cap)
        return 0;
    int nc = *cap ? *cap : 4;
    while (nc < need)
        nc *= 2;
    void *p = pft_realloc(*arr, (size_t)nc * sz);
    if (!p)
        return pft_err(PFT_ENOMEM, "bundle: out of memory");
    *arr = p;
    *cap = nc;
    return 0;
}

/* ---------- object life ---------- */

pft_bundle_t *pft_bundle_new(const char *run_id, const char *producer, pft_dtype_t dtype, int d)
{
    if (!run_id || !name_ok(run_id, strlen(run_id))) {
        pft_err(PFT_EINVAL, "bundle: run id must be 1..%d bytes without control characters",
                PFT_BUNDLE_MAX_NAME);
        return NULL;
    }
    if (!producer || !name_ok(producer, strlen(producer))) {
        pft_err(PFT_EINVAL, "bundle: producer id must be 1..%d bytes without control characters",
                PFT_BUNDLE_MAX_NAME);
        return NULL;
    }
    if (dtype != PFT_DTYPE_F16 && dtype != PFT_DTYPE_F32) {
        pft_err(PFT_EINVAL, "bundle: unknown dtype %d", (int)dtype);
        return NULL;
    }
    if (d < 1 || d > 65536) {
        pft_err(PFT_EINVAL, "bundle: dimension %d outside 1..65536", d);
        return NULL;
    }
    pft_bundle_t *self = pft_calloc(1, sizeof *self);
    if (!self) {
        pft_err(PFT_ENOMEM, "bundle: out of memory");
        return NULL;
    }
    memcpy(self->run_id, run_id, strlen(run_id) + 1);
    memcpy(self->producer, producer, strlen(producer) + 1);
    self->dtype = dtype;
    self->d = d;
    return self;
}

void pft_bundle_destroy(pft_bundle_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_bundle_t *self = *self_p;
    for (int i = 0; i < self->n_classes; i++)
        pft_gmm_destroy(&self->classes[i].gmm);
    pft_free(self->classes);
    for (int i = 0; i < self->n_prov; i++) {
        pft_free(self->prov[i].node);
        pft_free(self->prov[i].pairs);
    }
    pft_free(self->prov);
    pft_free(self->parents);
    pft_free(self->payload);
    pft_free(self);
    *self_p = NULL;
}

/* ---------- classes ---------- */

int pft_bundle_add_class(pft_bundle_t *self, int label, uint64_t n, pft_gmm_t **gmm_p)
{
    if (!self || !gmm_p || !*gmm_p)
        return pft_err(PFT_EINVAL, "bundle: add_class: NULL argument");
    if (label < 0)
        return pft_err(PFT_EINVAL, "bundle: class label %d is negative", label);
    if (n < 1 || n > PFT_BUNDLE_MAX_COUNT)
        return pft_err(PFT_EINVAL, "bundle: class %d: count %llu outside 1..2^48", label,
                       (unsigned long long)n);
    const pft_gmm_t *g = *gmm_p;
    if (pft_gmm_dim(g) != self->d)
        return pft_err(PFT_EINVAL, "bundle: class %d: GMM dimension %d, bundle dimension %d", label,
                       pft_gmm_dim(g), self->d);
    if (pft_gmm_k(g) < 1 || pft_gmm_k(g) > 1024)
        return pft_err(PFT_EINVAL, "bundle: class %d: K = %d outside 1..1024", label, pft_gmm_k(g));
    if (self->n_classes >= 65536)
        return pft_err(PFT_EINVAL, "bundle: more than 65536 classes");
    int pos = self->n_classes;
    while (pos > 0 && self->classes[pos - 1].label > label)
        pos--;
    if (pos > 0 && self->classes[pos - 1].label == label)
        return pft_err(PFT_EINVAL, "bundle: class %d added twice", label);
    int rc = grow((void **)&self->classes, &self->cap_classes, self->n_classes + 1, sizeof(class_t));
    if (rc)
        return rc;
    memmove(&self->classes[pos + 1], &self->classes[pos], (size_t)(self->n_classes - pos) * sizeof(class_t));
    self->classes[pos] = (class_t){.label = label, .n = n, .gmm = *gmm_p};
    self->n_classes++;
    *gmm_p = NULL;
    drop_cache(self);
    return 0;
}

int pft_bundle_n_classes(const pft_bundle_t *self)
{
    return self->n_classes;
}

int pft_bundle_class_label(const pft_bundle_t *self, int i)
{
    return self->classes[i].label;
}

uint64_t pft_bundle_class_count(const pft_bundle_t *self, int i)
{
    return self->classes[i].n;
}

const pft_gmm_t *pft_bundle_class_gmm(const pft_bundle_t *self, int i)
{
    return self->classes[i].gmm;
}

int pft_bundle_find_class(const pft_bundle_t *self, int label)
{
    int lo = 0, hi = self->n_classes - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (self->classes[mid].label == label)
            return mid;
        if (self->classes[mid].label < label)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static void le_put_f64(uint8_t *p, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(u >> (8 * i));
}

static double le_get_f64(const uint8_t *p)
{
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u |= (uint64_t)p[i] << (8 * i);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

/* ---------- provenance ---------- */

/* Index of node, or -(insertion point) - 1. */
static int prov_find(const pft_bundle_t *self, const char *node)
{
    int lo = 0, hi = self->n_prov - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(self->prov[mid].node, node);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -lo - 1;
}

static prov_pair_t *pair_find(const prov_entry_t *e, int label, int *ins)
{
    int lo = 0, hi = e->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (e->pairs[mid].label == label)
            return &e->pairs[mid];
        if (e->pairs[mid].label < label)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    if (ins)
        *ins = lo;
    return NULL;
}

/* Entry for node, created empty if absent; NULL on ENOMEM / too many nodes (message set). */
static prov_entry_t *prov_entry(pft_bundle_t *self, const char *node)
{
    int i = prov_find(self, node);
    if (i >= 0)
        return &self->prov[i];
    if (self->n_prov >= 4096) {
        pft_err(PFT_EINVAL, "bundle: provenance holds more than 4096 nodes");
        return NULL;
    }
    int pos = -i - 1;
    if (grow((void **)&self->prov, &self->cap_prov, self->n_prov + 1, sizeof(prov_entry_t)))
        return NULL;
    char *copy = pft_strdup(node);
    if (!copy) {
        pft_err(PFT_ENOMEM, "bundle: out of memory");
        return NULL;
    }
    memmove(&self->prov[pos + 1], &self->prov[pos], (size_t)(self->n_prov - pos) * sizeof(prov_entry_t));
    self->prov[pos] = (prov_entry_t){.node = copy};
    self->n_prov++;
    return &self->prov[pos];
}

/* Removes entry i if it has no pairs (after a failed insertion). */
static void prov_prune(pft_bundle_t *self, const char *node)
{
    int i = prov_find(self, node);
    if (i < 0 || self->prov[i].n > 0)
        return;
    pft_free(self->prov[i].node);
    pft_free(self->prov[i].pairs);
    memmove(&self->prov[i], &self->prov[i + 1], (size_t)(self->n_prov - i - 1) * sizeof(prov_entry_t));
    self->n_prov--;
}

static int pair_insert(prov_entry_t *e, int label, uint64_t count)
{
    int ins = 0;
    prov_pair_t *p = pair_find(e, label, &ins);
    if (p) {
        if (count > PFT_BUNDLE_MAX_COUNT - p->count)
            return pft_err(PFT_EINVAL, "bundle: provenance count of node '%s' class %d exceeds 2^48", e->node,
                           label);
        p->count += count;
        return 0;
    }
    int rc = grow((void **)&e->pairs, &e->cap, e->n + 1, sizeof(prov_pair_t));
    if (rc)
        return rc;
    memmove(&e->pairs[ins + 1], &e->pairs[ins], (size_t)(e->n - ins) * sizeof(prov_pair_t));
    e->pairs[ins] = (prov_pair_t){.label = label, .count = count};
    e->n++;
    return 0;
}

int pft_bundle_prov_add(pft_bundle_t *self, const char *node, int label, uint64_t count)
{
    if (!self || !node || !name_ok(node, strlen(node)))
        return pft_err(PFT_EINVAL,
                       "bundle: provenance node id must be 1..%d bytes without control characters",
                       PFT_BUNDLE_MAX_NAME);
    if (label < 0)
        return pft_err(PFT_EINVAL, "bundle: provenance label %d is negative", label);
    if (count < 1 || count > PFT_BUNDLE_MAX_COUNT)
        return pft_err(PFT_EINVAL, "bundle: provenance count %llu outside 1..2^48",
                       (unsigned long long)count);
    prov_entry_t *e = prov_entry(self, node);
    if (!e)
        return pft_err_wrap(PFT_ENOMEM, "bundle");
    int rc = pair_insert(e, label, count);
    prov_prune(self, node);
    if (rc == 0)
        drop_cache(self);
    return rc;
}

int pft_bundle_prov_merge(pft_bundle_t *self, const pft_bundle_t *other)
{
    if (!self || !other)
        return pft_err(PFT_EINVAL, "bundle: prov_merge: NULL argument");
    /* Check for conflicts first, so that self stays unaltered on PFT_EINVAL. */
    for (int i = 0; i < other->n_prov; i++) {
        const prov_entry_t *oe = &other->prov[i];
        int j = prov_find(self, oe->node);
        if (j < 0)
            continue;
        for (int k = 0; k < oe->n; k++) {
            const prov_pair_t *p = pair_find(&self->prov[j], oe->pairs[k].label, NULL);
            if (p && p->count != oe->pairs[k].count)
                return pft_err(
                    PFT_EINVAL,
                    "bundle: provenance conflict: node '%s' class %d has count %llu here and %llu in "
                    "bundle from '%s'",
                    oe->node, oe->pairs[k].label, (unsigned long long)p->count,
                    (unsigned long long)oe->pairs[k].count, other->producer);
        }
    }
    for (int i = 0; i < other->n_prov; i++) {
        const prov_entry_t *oe = &other->prov[i];
        int j = prov_find(self, oe->node);
        if (j >= 0 && oe->dp_eps > 0 && self->prov[j].dp_eps > 0 &&
            (self->prov[j].dp_eps != oe->dp_eps || self->prov[j].dp_delta != oe->dp_delta))
            return pft_err(PFT_EINVAL, "bundle: provenance conflict: node '%s' has DP (%g, %g) here and (%g, %g) in "
                                       "bundle from '%s'",
                           oe->node, self->prov[j].dp_eps, self->prov[j].dp_delta, oe->dp_eps, oe->dp_delta,
                           other->producer);
    }
    for (int i = 0; i < other->n_prov; i++) {
        const prov_entry_t *oe = &other->prov[i];
        prov_entry_t *e = prov_entry(self, oe->node);
        if (!e)
            return pft_err_wrap(PFT_ENOMEM, "bundle: prov_merge");
        if (oe->dp_eps > 0) {
            e->dp_eps = oe->dp_eps;
            e->dp_delta = oe->dp_delta;
        }
        for (int k = 0; k < oe->n; k++) {
            if (pair_find(e, oe->pairs[k].label, NULL))
                continue;
            int rc = pair_insert(e, oe->pairs[k].label, oe->pairs[k].count);
            if (rc) {
                prov_prune(self, oe->node);
                return rc;
            }
        }
        drop_cache(self);
    }
    return 0;
}

int pft_bundle_prov_set_dp(pft_bundle_t *self, const char *node, double eps, double delta)
{
    int i = self ? prov_find(self, node) : -1;
    if (i < 0)
        return pft_err(PFT_EINVAL, "bundle: prov_set_dp: node '%s' is not in the provenance", node ? node : "");
    if (!(eps > 0 && eps <= 1e6) || !(delta >= 0 && delta <= 1))
        return pft_err(PFT_EINVAL, "bundle: prov_set_dp: (%g, %g) is not a DP guarantee (0 < eps <= 1e6, 0 <= delta <= 1)",
                       eps, delta);
    self->prov[i].dp_eps = eps;
    self->prov[i].dp_delta = delta;
    drop_cache(self);
    return 0;
}

int pft_bundle_prov_dp(const pft_bundle_t *self, int i, double *eps, double *delta)
{
    *eps = self->prov[i].dp_eps;
    *delta = self->prov[i].dp_delta;
    return self->prov[i].dp_eps > 0;
}

int pft_bundle_prov_n_nodes(const pft_bundle_t *self)
{
    return self->n_prov;
}

const char *pft_bundle_prov_node(const pft_bundle_t *self, int i)
{
    return self->prov[i].node;
}

int pft_bundle_prov_n_labels(const pft_bundle_t *self, int i)
{
    return self->prov[i].n;
}

void pft_bundle_prov_entry(const pft_bundle_t *self, int i, int j, int *label, uint64_t *count)
{
    *label = self->prov[i].pairs[j].label;
    *count = self->prov[i].pairs[j].count;
}

uint64_t pft_bundle_prov_count(const pft_bundle_t *self, const char *node, int label)
{
    int i = prov_find(self, node);
    if (i < 0)
        return 0;
    const prov_pair_t *p = pair_find(&self->prov[i], label, NULL);
    return p ? p->count : 0;
}

int pft_bundle_prov_contains(const pft_bundle_t *self, const char *node)
{
    return prov_find(self, node) >= 0;
}

/* ---------- parents, flags, signature, getters ---------- */

int pft_bundle_add_parent(pft_bundle_t *self, const uint8_t id[PFT_BUNDLE_ID_LEN])
{
    int pos = self->n_parents;
    while (pos > 0 && memcmp(self->parents[pos - 1], id, PFT_BUNDLE_ID_LEN) > 0)
        pos--;
    if (pos > 0 && memcmp(self->parents[pos - 1], id, PFT_BUNDLE_ID_LEN) == 0)
        return 0;
    if (self->n_parents >= 4096)
        return pft_err(PFT_EINVAL, "bundle: more than 4096 parents");
    int rc = grow((void **)&self->parents, &self->cap_parents, self->n_parents + 1, PFT_BUNDLE_ID_LEN);
    if (rc)
        return rc;
    memmove(self->parents[pos + 1], self->parents[pos], (size_t)(self->n_parents - pos) * PFT_BUNDLE_ID_LEN);
    memcpy(self->parents[pos], id, PFT_BUNDLE_ID_LEN);
    self->n_parents++;
    drop_cache(self);
    return 0;
}

int pft_bundle_n_parents(const pft_bundle_t *self)
{
    return self->n_parents;
}

const uint8_t *pft_bundle_parent(const pft_bundle_t *self, int i)
{
    return self->parents[i];
}

int pft_bundle_set_flags(pft_bundle_t *self, uint32_t flags)
{
    if (flags & ~PFT_BUNDLE_FLAGS_KNOWN)
        return pft_err(PFT_EINVAL, "bundle: unknown flag bits 0x%x",
                       (unsigned)(flags & ~PFT_BUNDLE_FLAGS_KNOWN));
    if (flags != self->flags)
        drop_cache(self);
    self->flags = flags;
    return 0;
}

int pft_bundle_set_signature(pft_bundle_t *self, const uint8_t *sig, size_t len)
{
    if (len > PFT_BUNDLE_MAX_SIG || (len && !sig))
        return pft_err(PFT_EINVAL, "bundle: signature of %zu bytes (at most %d)", len, PFT_BUNDLE_MAX_SIG);
    if (len)
        memcpy(self->sig, sig, len);
    self->sig_len = len;
    return 0;
}

const char *pft_bundle_run_id(const pft_bundle_t *self)
{
    return self->run_id;
}

const char *pft_bundle_producer(const pft_bundle_t *self)
{
    return self->producer;
}

uint32_t pft_bundle_flags(const pft_bundle_t *self)
{
    return self->flags;
}

pft_dtype_t pft_bundle_dtype(const pft_bundle_t *self)
{
    return self->dtype;
}

int pft_bundle_dim(const pft_bundle_t *self)
{
    return self->d;
}

const uint8_t *pft_bundle_signature(const pft_bundle_t *self, size_t *len)
{
    *len = self->sig_len;
    return self->sig_len ? self->sig : NULL;
}

size_t pft_bundle_formula_bytes(const pft_bundle_t *self)
{
    size_t n = 0;
    for (int i = 0; i < self->n_classes; i++)
        n += pft_gmm_n_wire_params(self->classes[i].gmm);
    return n * dtype_size(self->dtype);
}

/* ---------- encoding ---------- */

typedef struct {
    uint8_t *buf;
    size_t len, cap;
} wbuf_t;

static int wbuf_reserve(wbuf_t *w, size_t extra)
{
    if (extra <= w->cap - w->len)
        return 0;
    size_t nc = w->cap ? w->cap : 256;
    while (nc - w->len < extra) {
        if (nc > SIZE_MAX / 2)
            return -1;
        nc *= 2;
    }
    uint8_t *p = pft_realloc(w->buf, nc);
    if (!p)
        return -1;
    w->buf = p;
    w->cap = nc;
    return 0;
}

/* msgpack_packer_write callback. */
static int wbuf_write(void *data, const char *p, size_t n)
{
    wbuf_t *w = data;
    if (wbuf_reserve(w, n))
        return -1;
    memcpy(w->buf + w->len, p, n);
    w->len += n;
    return 0;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Writes v at dst[i] in dtype (little endian). positive: a positive value that would round to zero is
 * sent as the smallest positive subnormal. Returns 0, or -1 if the value is not finite or overflows. */
static int put_value(uint8_t *dst, size_t i, double v, pft_dtype_t dt, int positive)
{
    if (!isfinite(v))
        return -1;
    if (dt == PFT_DTYPE_F16) {
        uint16_t h = pft_half_from_float((float)v);
        if ((h & 0x7c00u) == 0x7c00u)
            return -1;
        if (positive && v > 0 && (h & 0x7fffu) == 0)
            h = 1;
        dst[2 * i] = (uint8_t)h;
        dst[2 * i + 1] = (uint8_t)(h >> 8);
    } else {
        float f = (float)v;
        if (!isfinite(f))
            return -1;
        uint32_t u;
        memcpy(&u, &f, 4);
        if (positive && v > 0 && (u & 0x7fffffffu) == 0)
            u = 1;
        put_le32(dst + 4 * i, u);
    }
    return 0;
}

static double get_value(const uint8_t *src, size_t i, pft_dtype_t dt)
{
    if (dt == PFT_DTYPE_F16)
        return pft_half_to_float((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
    uint32_t u = get_le32(src + 4 * i);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double get_f64(const uint8_t *src, size_t i)
{
    uint64_t u = (uint64_t)get_le32(src + 8 * i) | (uint64_t)get_le32(src + 8 * i + 4) << 32;
    double v;
    memcpy(&v, &u, 8);
    return v;
}

static void put_f64(uint8_t *dst, size_t i, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    put_le32(dst + 8 * i, (uint32_t)u);
    put_le32(dst + 8 * i + 4, (uint32_t)(u >> 32));
}

static int range_err(const pft_bundle_t *self, int ci, int comp, const char *what, double v)
{
    return pft_err(PFT_ERANGE, "bundle encode: class %d (label %d): component %d: %s = %g does not fit %s",
                   ci, self->classes[ci].label, comp, what, v,
                   self->dtype == PFT_DTYPE_F16 ? "fp16" : "fp32");
}

/* Writes one class: [label, n, cov, k, weights, means, covs] (lowrank: [..., Ψ, q, W]). */
static int encode_class(const pft_bundle_t *self, int ci, msgpack_packer *pk, wbuf_t *w)
{
    const class_t *c = &self->classes[ci];
    const pft_gmm_t *g = c->gmm;
    pft_dtype_t dt = self->dtype;
    size_t k = (size_t)pft_gmm_k(g), d = (size_t)self->d, es = dtype_size(dt);
    pft_cov_t cov = pft_gmm_cov(g);
    size_t m = cov_len(cov, d);
    int fail = msgpack_pack_array(pk, cov == PFT_COV_LOWRANK ? N_CLASS_FIELDS_LOWRANK : N_CLASS_FIELDS) ||
               msgpack_pack_int64(pk, c->label) || msgpack_pack_uint64(pk, c->n) ||
               msgpack_pack_uint64(pk, (uint64_t)cov) || msgpack_pack_uint64(pk, k);
    /* weights: fp64 */
    const double *wt = pft_gmm_weights(g);
    fail = fail || msgpack_pack_bin(pk, 8 * k) || wbuf_reserve(w, 8 * k);
    if (fail)
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    for (size_t j = 0; j < k; j++)
        put_f64(w->buf + w->len, j, wt[j]);
    w->len += 8 * k;
    /* means */
    const double *mu = pft_gmm_means(g);
    if (msgpack_pack_bin(pk, k * d * es) || wbuf_reserve(w, k * d * es))
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    for (size_t j = 0; j < k * d; j++) {
        if (put_value(w->buf + w->len, j, mu[j], dt, 0)) {
            char what[48];
            snprintf(what, sizeof what, "mean[%zu]", j % d);
            return range_err(self, ci, (int)(j / d), what, mu[j]);
        }
    }
    w->len += k * d * es;
    /* covariances */
    if (msgpack_pack_bin(pk, k * m * es) || wbuf_reserve(w, k * m * es))
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    uint8_t *dst = w->buf + w->len;
    if (cov == PFT_COV_FULL) {
        const double *L = pft_gmm_chol(g);
        size_t o = 0;
        for (size_t j = 0; j < k; j++) {
            for (size_t r = 0; r < d; r++) {
                for (size_t q = 0; q <= r; q++, o++) {
                    double v = L[(j * d + r) * d + q];
                    if (put_value(dst, o, v, dt, q == r)) {
                        char what[64];
                        snprintf(what, sizeof what, "cholesky[%zu][%zu]", r, q);
                        return range_err(self, ci, (int)j, what, v);
                    }
                }
            }
        }
    } else {
        const double *var = pft_gmm_covars(g);
        for (size_t j = 0; j < k * m; j++) {
            if (put_value(dst, j, var[j], dt, 1)) {
                char what[48];
                snprintf(what, sizeof what, "variance[%zu]", j % m);
                return range_err(self, ci, (int)(j / m), what, var[j]);
            }
        }
    }
    w->len += k * m * es;
    if (cov != PFT_COV_LOWRANK)
        return 0;
    /* lowrank: q, then W (K×d×q, row-major: component, dimension, factor) */
    size_t q = (size_t)pft_gmm_rank(g);
    const double *W = pft_gmm_factors(g);
    if (msgpack_pack_uint64(pk, q) || msgpack_pack_bin(pk, k * d * q * es) || wbuf_reserve(w, k * d * q * es))
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    dst = w->buf + w->len;
    for (size_t j = 0; j < k * d * q; j++) {
        if (put_value(dst, j, W[j], dt, 0)) {
            char what[64];
            snprintf(what, sizeof what, "factor[%zu][%zu]", j % (d * q) / q, j % q);
            return range_err(self, ci, (int)(j / (d * q)), what, W[j]);
        }
    }
    w->len += k * d * q * es;
    return 0;
}

/* Provenance consistency, checked before encoding (and after decoding). */
static int check_counts(const pft_bundle_t *self, int rc_code, const char *who)
{
    for (int i = 0; i < self->n_classes; i++) {
        uint64_t sum = 0;
        for (int p = 0; p < self->n_prov; p++) {
            const prov_pair_t *pp = pair_find(&self->prov[p], self->classes[i].label, NULL);
            if (pp)
                sum += pp->count; /* ≤ 4096 · 2^48: no overflow */
        }
        if (sum != self->classes[i].n)
            return pft_err(rc_code, "%s: class %d (label %d): n = %llu but provenance counts sum to %llu",
                           who, i, self->classes[i].label, (unsigned long long)self->classes[i].n,
                           (unsigned long long)sum);
    }
    for (int p = 0; p < self->n_prov; p++)
        for (int j = 0; j < self->prov[p].n; j++)
            if (pft_bundle_find_class(self, self->prov[p].pairs[j].label) < 0)
                return pft_err(rc_code, "%s: provenance node '%s': label %d has no class", who,
                               self->prov[p].node, self->prov[p].pairs[j].label);
    return 0;
}

int pft_bundle_encode_payload(const pft_bundle_t *self, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (self->payload) {
        uint8_t *copy = pft_alloc(self->payload_len);
        if (!copy)
            return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
        memcpy(copy, self->payload, self->payload_len);
        *buf = copy;
        *len = self->payload_len;
        return 0;
    }
    int rc = check_counts(self, PFT_EINVAL, "bundle encode");
    if (rc)
        return rc;
    wbuf_t w = {0};
    if (wbuf_reserve(&w, pft_bundle_formula_bytes(self) + 1024 + (size_t)self->n_prov * 96 +
                             (size_t)self->n_parents * 34 + (size_t)self->n_classes * 128))
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wbuf_write);
    int fail = msgpack_pack_array(&pk, N_PAYLOAD_FIELDS) ||
               msgpack_pack_str_with_body(&pk, self->run_id, strlen(self->run_id)) ||
               msgpack_pack_str_with_body(&pk, self->producer, strlen(self->producer)) ||
               msgpack_pack_uint64(&pk, self->flags) || msgpack_pack_uint64(&pk, (uint64_t)self->dtype) ||
               msgpack_pack_uint64(&pk, (uint64_t)self->d) ||
               msgpack_pack_array(&pk, (size_t)self->n_parents);
    for (int i = 0; !fail && i < self->n_parents; i++)
        fail = msgpack_pack_bin_with_body(&pk, self->parents[i], PFT_BUNDLE_ID_LEN);
    fail = fail || msgpack_pack_array(&pk, (size_t)self->n_prov);
    for (int i = 0; !fail && i < self->n_prov; i++) {
        const prov_entry_t *e = &self->prov[i];
        fail = msgpack_pack_array(&pk, e->dp_eps > 0 ? 3 : 2) ||
               msgpack_pack_str_with_body(&pk, e->node, strlen(e->node)) || msgpack_pack_array(&pk, (size_t)e->n);
        for (int j = 0; !fail && j < e->n; j++)
            fail = msgpack_pack_array(&pk, 2) || msgpack_pack_int64(&pk, e->pairs[j].label) ||
                   msgpack_pack_uint64(&pk, e->pairs[j].count);
        if (!fail && e->dp_eps > 0) { /* DP guarantee: 16 bytes, eps and delta as little-endian binary64 */
            uint8_t g[16];
            le_put_f64(g, e->dp_eps);
            le_put_f64(g + 8, e->dp_delta);
            fail = msgpack_pack_bin_with_body(&pk, g, sizeof g);
        }
    }
    fail = fail || msgpack_pack_array(&pk, (size_t)self->n_classes);
    if (fail) {
        pft_free(w.buf);
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    }
    for (int i = 0; i < self->n_classes; i++) {
        rc = encode_class(self, i, &pk, &w);
        if (rc) {
            pft_free(w.buf);
            return rc;
        }
    }
    *buf = w.buf;
    *len = w.len;
    return 0;
}

int pft_envelope_pack(const uint8_t *payload, size_t payload_len, const uint8_t *sig, size_t sig_len,
                      uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (sig_len > PFT_BUNDLE_MAX_SIG || (sig_len && !sig) || (payload_len && !payload))
        return pft_err(PFT_EINVAL, "envelope: bad arguments (signature %zu bytes, at most %d)", sig_len,
                       PFT_BUNDLE_MAX_SIG);
    wbuf_t w = {0};
    if (wbuf_reserve(&w, payload_len + sig_len + 32))
        return pft_err(PFT_ENOMEM, "envelope: out of memory");
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wbuf_write);
    int fail = msgpack_pack_array(&pk, 4) || msgpack_pack_str_with_body(&pk, PFT_BUNDLE_MAGIC, 4) ||
               msgpack_pack_uint64(&pk, PFT_BUNDLE_VERSION) ||
               msgpack_pack_bin_with_body(&pk, payload, payload_len) ||
               (sig_len ? msgpack_pack_bin_with_body(&pk, sig, sig_len) : msgpack_pack_nil(&pk));
    if (fail) {
        pft_free(w.buf);
        return pft_err(PFT_ENOMEM, "envelope: out of memory");
    }
    *buf = w.buf;
    *len = w.len;
    return 0;
}

int pft_bundle_encode(const pft_bundle_t *self, uint8_t **buf, size_t *len)
{
    uint8_t *payload = NULL;
    size_t plen = 0;
    int rc = pft_bundle_encode_payload(self, &payload, &plen);
    if (rc)
        return rc;
    rc = pft_envelope_pack(payload, plen, self->sig_len ? self->sig : NULL, self->sig_len, buf, len);
    pft_free(payload);
    return rc;
}

void pft_bundle_hash(const uint8_t *payload, size_t len, uint8_t id[PFT_BUNDLE_ID_LEN])
{
    crypto_generichash(id, PFT_BUNDLE_ID_LEN, payload, len, NULL, 0);
}

int pft_bundle_id(const pft_bundle_t *self, uint8_t id[PFT_BUNDLE_ID_LEN])
{
    if (self->payload) {
        memcpy(id, self->id, PFT_BUNDLE_ID_LEN);
        return 0;
    }
    uint8_t *payload = NULL;
    size_t plen = 0;
    int rc = pft_bundle_encode_payload(self, &payload, &plen);
    if (rc)
        return rc;
    pft_bundle_hash(payload, plen, id);
    pft_free(payload);
    return 0;
}

char *pft_bundle_id_hex(const uint8_t id[PFT_BUNDLE_ID_LEN], char out[2 * PFT_BUNDLE_ID_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < PFT_BUNDLE_ID_LEN; i++) {
        out[2 * i] = hex[id[i] >> 4];
        out[2 * i + 1] = hex[id[i] & 15];
    }
    out[2 * PFT_BUNDLE_ID_LEN] = '\0';
    return out;
}

/* ---------- decoding: the byte scanner ---------- */

static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* Walks exactly one msgpack object at buf[0..len) without building anything. Accepts only the canonical
 * (shortest) forms of nil, bool, int, str, bin and array, the forms msgpack-c's packer writes; rejects maps,
 * floats, ext. Every declared length must fit in the bytes that remain (each element takes at least one
 * byte), arrays nest at most MP_MAX_DEPTH deep and at most max_objects objects may appear.
 * *used = bytes of the object. Iterative: left[i] = elements still to read at nesting level i. */
#define MP_MAX_DEPTH 8
static int mp_scan(const uint8_t *buf, size_t len, size_t max_objects, const char *what, size_t *used)
{
    size_t pos = 0, objects = 0, left[MP_MAX_DEPTH];
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
        size_t at = pos, rest = len - pos - 1;
        uint8_t b = buf[pos++];
        uint64_t n = 0; /* array elements or bytes to skip */
        int is_array = 0, hdr = 0;
        uint64_t minimum = 0;
        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
            continue;
        if (b >= 0x80 && b <= 0x8f)
            return pft_err(PFT_EFORMAT, "%s: byte %zu: msgpack map not allowed", what, at);
        if (b >= 0x90 && b <= 0x9f) {
            n = b & 0x0f;
            is_array = 1;
        } else if (b >= 0xa0 && b <= 0xbf) {
            n = b & 0x1f;
        } else {
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
                hdr = 2, minimum = 16, is_array = 1;
                break;
            case 0xdd:
                hdr = 4, minimum = 65536, is_array = 1;
                break;
            case 0xcc: /* uint8..64: value must need the width */
            case 0xcd:
            case 0xce:
            case 0xcf: {
                int w = 1 << (b - 0xcc);
                if (rest < (size_t)w)
                    return pft_err(PFT_EFORMAT, "%s: truncated at byte %zu", what, pos);
                uint64_t v = be(buf + pos, w);
                uint64_t lo = w == 1 ? 128 : w == 2 ? 256 : w == 4 ? 65536 : UINT64_C(1) << 32;
                if (v < lo)
                    return pft_err(PFT_EFORMAT, "%s: byte %zu: integer %llu not in its shortest form", what,
                                   at, (unsigned long long)v);
                pos += (size_t)w;
                continue;
            }
            case 0xd0: /* int8..64: only negative values that need the width */
            case 0xd1:
            case 0xd2:
            case 0xd3: {
                int w = 1 << (b - 0xd0);
                if (rest < (size_t)w)
                    return pft_err(PFT_EFORMAT, "%s: truncated at byte %zu", what, pos);
                uint64_t u = be(buf + pos, w);
                int64_t v = w == 1 ? (int8_t)u : w == 2 ? (int16_t)u : w == 4 ? (int32_t)u : (int64_t)u;
                int64_t hi = w == 1 ? -33 : w == 2 ? -129 : w == 4 ? -32769 : -((int64_t)1 << 31) - 1;
                if (v > hi)
                    return pft_err(PFT_EFORMAT, "%s: byte %zu: integer %lld not in its shortest form", what,
                                   at, (long long)v);
                pos += (size_t)w;
                continue;
            }
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
                return pft_err(PFT_EFORMAT, "%s: truncated at byte %zu", what, pos);
            n = be(buf + pos, hdr);
            pos += (size_t)hdr;
            if (n < minimum)
                return pft_err(PFT_EFORMAT, "%s: byte %zu: length %llu not in its shortest form", what, at,
                               (unsigned long long)n);
        }
        if (n > len - pos)
            return pft_err(PFT_EFORMAT, "%s: byte %zu: declared length %llu exceeds the %zu bytes left", what,
                           at, (unsigned long long)n, len - pos);
        if (is_array && n > 0) {
            if (depth + 1 >= MP_MAX_DEPTH)
                return pft_err(PFT_EFORMAT, "%s: byte %zu: arrays nested deeper than %d", what, at,
                               MP_MAX_DEPTH);
            left[++depth] = (size_t)n;
        } else if (!is_array)
            pos += (size_t)n;
    }
    *used = pos;
    return 0;
}

/* Scans and unpacks buf as exactly one object into *u (caller destroys u). */
static int mp_unpack(const uint8_t *buf, size_t len, size_t max_objects, const char *what,
                     msgpack_unpacked *u)
{
    size_t used = 0;
    int rc = mp_scan(buf, len, max_objects, what, &used);
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

/* ---------- decoding: typed access to the object tree ---------- */

static const char *type_name(msgpack_object_type t)
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

/* A decoding context: the place being read, prepended to every message. */
typedef struct {
    char where[160];
} ctx_t;

static int bad(const ctx_t *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(const ctx_t *c, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pft_err(code, "bundle decode: %s%s%s", c->where, c->where[0] ? ": " : "", msg);
}

static int want_array(const ctx_t *c, const msgpack_object *o, const char *field, uint32_t lo, uint32_t hi,
                      int range_code)
{
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return bad(c, PFT_EFORMAT, "%s: expected array, got %s", field, type_name(o->type));
    if (o->via.array.size < lo || o->via.array.size > hi)
        return bad(c, range_code, "%s: %u elements, expected %u..%u", field, o->via.array.size, lo, hi);
    return 0;
}

static int want_uint(const ctx_t *c, const msgpack_object *o, const char *field, uint64_t lo, uint64_t hi,
                     int range_code, uint64_t *out)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return bad(c, PFT_EFORMAT, "%s: expected non-negative integer, got %s%s", field, type_name(o->type),
                   o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? " (negative)" : "");
    if (o->via.u64 < lo || o->via.u64 > hi)
        return bad(c, range_code, "%s = %llu outside %llu..%llu", field, (unsigned long long)o->via.u64,
                   (unsigned long long)lo, (unsigned long long)hi);
    *out = o->via.u64;
    return 0;
}

static int want_name(const ctx_t *c, const msgpack_object *o, const char *field,
                     char out[PFT_BUNDLE_MAX_NAME + 1])
{
    if (o->type != MSGPACK_OBJECT_STR)
        return bad(c, PFT_EFORMAT, "%s: expected str, got %s", field, type_name(o->type));
    if (!name_ok(o->via.str.ptr, o->via.str.size))
        return bad(c, PFT_EFORMAT, "%s: must be 1..%d bytes without control characters (%u bytes)", field,
                   PFT_BUNDLE_MAX_NAME, o->via.str.size);
    memcpy(out, o->via.str.ptr, o->via.str.size);
    out[o->via.str.size] = '\0';
    return 0;
}

static int want_bin(const ctx_t *c, const msgpack_object *o, const char *field, uint64_t size)
{
    if (o->type != MSGPACK_OBJECT_BIN)
        return bad(c, PFT_EFORMAT, "%s: expected bin, got %s", field, type_name(o->type));
    if (o->via.bin.size != size)
        return bad(c, PFT_EFORMAT, "%s: %u bytes, expected %llu", field, o->via.bin.size,
                   (unsigned long long)size);
    return 0;
}

/* ---------- decoding: the schema ---------- */

int pft_envelope_parse(const uint8_t *buf, size_t len, const pft_bundle_limits_t *limits, pft_envelope_t *out)
{
    pft_bundle_limits_t def;
    if (!limits) {
        pft_bundle_limits_default(&def);
        limits = &def;
    }
    memset(out, 0, sizeof *out);
    if (!buf && len)
        return pft_err(PFT_EINVAL, "envelope: NULL buffer");
    if (len > limits->max_bytes)
        return pft_err(PFT_ERANGE, "bundle decode: message of %zu bytes exceeds the limit of %zu", len,
                       limits->max_bytes);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    ctx_t c = {"envelope"};
    int rc = mp_unpack(buf, len, 16, "bundle decode: envelope", &u);
    if (rc)
        goto done;
    const msgpack_object *o = &u.data;
    if ((rc = want_array(&c, o, "top level", 4, 4, PFT_EFORMAT)))
        goto done;
    const msgpack_object *f = o->via.array.ptr;
    if (f[0].type != MSGPACK_OBJECT_STR || f[0].via.str.size != 4 ||
        memcmp(f[0].via.str.ptr, PFT_BUNDLE_MAGIC, 4)) {
        rc = bad(&c, PFT_EFORMAT, "magic is not \"%s\"", PFT_BUNDLE_MAGIC);
        goto done;
    }
    uint64_t version = 0;
    if ((rc = want_uint(&c, &f[1], "version", 0, UINT64_MAX, PFT_EFORMAT, &version)))
        goto done;
    if (version != PFT_BUNDLE_VERSION) {
        rc = bad(&c, PFT_EUNSUPPORTED, "version %llu not supported (this build reads %d)",
                 (unsigned long long)version, PFT_BUNDLE_VERSION);
        goto done;
    }
    if (f[2].type != MSGPACK_OBJECT_BIN) {
        rc = bad(&c, PFT_EFORMAT, "payload: expected bin, got %s", type_name(f[2].type));
        goto done;
    }
    if (f[3].type == MSGPACK_OBJECT_BIN) {
        if (f[3].via.bin.size < 1 || f[3].via.bin.size > PFT_BUNDLE_MAX_SIG) {
            rc = bad(&c, PFT_EFORMAT, "signature of %u bytes (1..%d)", f[3].via.bin.size, PFT_BUNDLE_MAX_SIG);
            goto done;
        }
        out->sig = (const uint8_t *)f[3].via.bin.ptr;
        out->sig_len = f[3].via.bin.size;
    } else if (f[3].type != MSGPACK_OBJECT_NIL) {
        rc = bad(&c, PFT_EFORMAT, "signature: expected bin or nil, got %s", type_name(f[3].type));
        goto done;
    }
    out->payload = (const uint8_t *)f[2].via.bin.ptr;
    out->payload_len = f[2].via.bin.size;
done:
    msgpack_unpacked_destroy(&u);
    if (rc)
        memset(out, 0, sizeof *out);
    return rc;
}

int pft_bundle_message_id(const uint8_t *msg, size_t len, uint8_t id[PFT_BUNDLE_ID_LEN])
{
    pft_envelope_t env;
    int rc = pft_envelope_parse(msg, len, NULL, &env);
    if (rc)
        return rc;
    pft_bundle_hash(env.payload, env.payload_len, id);
    return 0;
}

/* Estimated bytes a decoded GMM keeps (steady) and needs on top while it is being built (transient:
 * our temporaries and those of pft_gmm_set_params). q: lowrank rank (0 otherwise). */
static void model_bytes(pft_cov_t cov, uint64_t k, uint64_t d, uint64_t q, uint64_t *steady,
                        uint64_t *transient)
{
    uint64_t cl = cov == PFT_COV_FULL ? d * d : cov == PFT_COV_SPHER ? 1 : d;
    uint64_t ncov = cov == PFT_COV_FULL ? 2 : 1; /* covariances, and Cholesky factors for full */
    *steady = 8 * k * (d + 1) + 8 * ncov * k * cl + 8 * k * d * q;
    *transient = 8 * k * (d + 2) + 8 * (1 + ncov) * k * cl + 8 * k * d * q;
}

/* Checks and builds class ci from its object. */
static int decode_class(pft_bundle_t *b, const pft_bundle_limits_t *lim, int ci, const msgpack_object *o,
                        uint64_t *model_total)
{
    ctx_t c;
    snprintf(c.where, sizeof c.where, "class %d", ci);
    int rc = want_array(&c, o, "entry", N_CLASS_FIELDS, N_CLASS_FIELDS_LOWRANK, PFT_EFORMAT);
    if (rc)
        return rc;
    const msgpack_object *f = o->via.array.ptr;
    uint64_t label, n, cov, k, rank = 0;
    if ((rc = want_uint(&c, &f[0], "label", 0, INT32_MAX, PFT_EFORMAT, &label)))
        return rc;
    snprintf(c.where, sizeof c.where, "class %d (label %d)", ci, (int)label);
    if (ci > 0 && (int)label <= b->classes[ci - 1].label)
        return bad(&c, PFT_EFORMAT, "label not greater than the previous label %d (classes sorted, unique)",
                   b->classes[ci - 1].label);
    if ((rc = want_uint(&c, &f[1], "n", 1, PFT_BUNDLE_MAX_COUNT, PFT_EFORMAT, &n)) ||
        (rc = want_uint(&c, &f[2], "covariance type", 0, 3, PFT_EFORMAT, &cov)))
        return rc;
    uint32_t nf = cov == PFT_COV_LOWRANK ? N_CLASS_FIELDS_LOWRANK : N_CLASS_FIELDS;
    if (o->via.array.size != nf)
        return bad(&c, PFT_EFORMAT, "entry: %u elements, expected %u for covariance type %d",
                   o->via.array.size, nf, (int)cov);
    if ((rc = want_uint(&c, &f[3], "K", 1, lim->max_k, PFT_ERANGE, &k)))
        return rc;
    uint64_t d = (uint64_t)b->d, es = dtype_size(b->dtype), m = cov_len((pft_cov_t)cov, d);
    if ((rc = want_bin(&c, &f[4], "weights", 8 * k)) || (rc = want_bin(&c, &f[5], "means", k * d * es)) ||
        (rc = want_bin(&c, &f[6], "covariances", k * m * es)))
        return rc;
    if (cov == PFT_COV_LOWRANK && ((rc = want_uint(&c, &f[7], "rank", 0, d - 1, PFT_EFORMAT, &rank)) ||
                                   (rc = want_bin(&c, &f[8], "factors", k * d * rank * es))))
        return rc;
    uint64_t steady, transient;
    model_bytes((pft_cov_t)cov, k, d, rank, &steady, &transient);
    if (steady + transient > lim->max_model_bytes - *model_total)
        return bad(&c, PFT_ERANGE, "decoded models would exceed the limit of %zu bytes",
                   lim->max_model_bytes);
    *model_total += steady;

    /* Values, first violation reported. */
    const uint8_t *wb = (const uint8_t *)f[4].via.bin.ptr, *mub = (const uint8_t *)f[5].via.bin.ptr,
                  *cb = (const uint8_t *)f[6].via.bin.ptr;
    double *w = NULL, *mu = NULL, *cv = NULL, *fa = NULL;
    pft_gmm_t *g = NULL;
    size_t cvn = cov == PFT_COV_FULL ? (size_t)(k * d * d) : (size_t)(k * m), nfa = (size_t)(k * d * rank);
    w = pft_alloc_array((size_t)k, sizeof *w);
    mu = pft_alloc_array((size_t)(k * d), sizeof *mu);
    cv = pft_alloc_array(cvn, sizeof *cv);
    fa = pft_alloc_array(nfa + 1, sizeof *fa);
    if (!w || !mu || !cv || !fa) {
        rc = bad(&c, PFT_ENOMEM, "out of memory");
        goto done;
    }
    double sum = 0;
    for (size_t j = 0; j < k; j++) {
        w[j] = get_f64(wb, j);
        if (!isfinite(w[j]) || !(w[j] >= 0)) {
            rc = bad(&c, PFT_ENUMERIC, "weight[%zu] = %g is %s", j, w[j],
                     isfinite(w[j]) ? "negative" : "not finite");
            goto done;
        }
        sum += w[j];
    }
    if (!(fabs(sum - 1.0) <= WEIGHT_TOL)) {
        rc = bad(&c, PFT_ENUMERIC, "weights sum to %.17g, not 1 (tolerance %g)", sum, WEIGHT_TOL);
        goto done;
    }
    for (size_t j = 0; j < k; j++)
        w[j] /= sum;
    for (size_t j = 0; j < k * d; j++) {
        mu[j] = get_value(mub, j, b->dtype);
        if (!isfinite(mu[j])) {
            rc = bad(&c, PFT_ENUMERIC, "component %zu: mean[%zu] = %g is not finite", j / d, j % d, mu[j]);
            goto done;
        }
    }
    if (cov == PFT_COV_FULL) {
        memset(cv, 0, cvn * sizeof *cv);
        size_t o2 = 0;
        for (size_t j = 0; j < k; j++)
            for (size_t r = 0; r < d; r++)
                for (size_t q = 0; q <= r; q++, o2++) {
                    double v = get_value(cb, o2, b->dtype);
                    if (!isfinite(v)) {
                        rc = bad(&c, PFT_ENUMERIC, "component %zu: cholesky[%zu][%zu] = %g is not finite", j,
                                 r, q, v);
                        goto done;
                    }
                    if (q == r && !(v > 0)) {
                        rc = bad(&c, PFT_ENUMERIC, "component %zu: cholesky[%zu][%zu] = %g is not positive",
                                 j, r, q, v);
                        goto done;
                    }
                    cv[(j * d + r) * d + q] = v;
                }
    } else {
        for (size_t j = 0; j < k * m; j++) {
            cv[j] = get_value(cb, j, b->dtype);
            if (!isfinite(cv[j]) || !(cv[j] > 0)) {
                rc = bad(&c, PFT_ENUMERIC, "component %zu: variance[%zu] = %g is not %s", j / m, j % m, cv[j],
                         isfinite(cv[j]) ? "positive" : "finite");
                goto done;
            }
        }
    }
    if (cov == PFT_COV_LOWRANK) {
        const uint8_t *fb = (const uint8_t *)f[8].via.bin.ptr;
        for (size_t j = 0; j < nfa; j++) {
            fa[j] = get_value(fb, j, b->dtype);
            if (!isfinite(fa[j])) {
                rc = bad(&c, PFT_ENUMERIC, "component %zu: factor[%zu][%zu] = %g is not finite",
                         j / (d * rank), j % (d * rank) / rank, j % rank, fa[j]);
                goto done;
            }
        }
    }
    g = cov == PFT_COV_LOWRANK ? pft_gmm_new_lowrank((int)k, (int)d, (int)rank)
                               : pft_gmm_new((int)k, (int)d, (pft_cov_t)cov);
    if (!g) {
        rc = bad(&c, PFT_ENOMEM, "out of memory");
        goto done;
    }
    rc = cov == PFT_COV_FULL      ? pft_gmm_set_params_chol(g, w, mu, cv)
         : cov == PFT_COV_LOWRANK ? pft_gmm_set_params_lowrank(g, w, mu, fa, cv)
                                  : pft_gmm_set_params(g, w, mu, cv);
    if (rc) {
        rc = pft_err_wrap(rc, "bundle decode: %s", c.where);
        goto done;
    }
    b->classes[ci] = (class_t){.label = (int)label, .n = n, .gmm = g};
    b->n_classes = ci + 1;
    g = NULL;
done:
    pft_gmm_destroy(&g);
    pft_free(w);
    pft_free(mu);
    pft_free(cv);
    pft_free(fa);
    return rc;
}

static int decode_prov(pft_bundle_t *b, const pft_bundle_limits_t *lim, const msgpack_object *o)
{
    ctx_t c = {"provenance"};
    int rc = want_array(&c, o, "list", 0, lim->max_nodes, PFT_ERANGE);
    if (rc)
        return rc;
    uint32_t n = o->via.array.size;
    if (n) {
        b->prov = pft_calloc(n, sizeof *b->prov);
        if (!b->prov)
            return bad(&c, PFT_ENOMEM, "out of memory");
        b->cap_prov = (int)n;
    }
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *e = &o->via.array.ptr[i];
        snprintf(c.where, sizeof c.where, "provenance entry %u", i);
        if ((rc = want_array(&c, e, "entry", 2, 3, PFT_EFORMAT)))
            return rc;
        char node[PFT_BUNDLE_MAX_NAME + 1];
        if ((rc = want_name(&c, &e->via.array.ptr[0], "node id", node)))
            return rc;
        snprintf(c.where, sizeof c.where, "provenance entry %u ('%s')", i, node);
        if (i > 0 && strcmp(node, b->prov[i - 1].node) <= 0)
            return bad(&c, PFT_EFORMAT, "node id not after '%s' (entries sorted, unique)",
                       b->prov[i - 1].node);
        const msgpack_object *pairs = &e->via.array.ptr[1];
        if ((rc = want_array(&c, pairs, "counts", 1, lim->max_classes, PFT_ERANGE)))
            return rc;
        prov_entry_t *pe = &b->prov[i];
        pe->node = pft_strdup(node);
        pe->pairs = pft_alloc_array(pairs->via.array.size, sizeof *pe->pairs);
        b->n_prov = (int)i + 1;
        if (!pe->node || !pe->pairs)
            return bad(&c, PFT_ENOMEM, "out of memory");
        pe->cap = (int)pairs->via.array.size;
        for (uint32_t j = 0; j < pairs->via.array.size; j++) {
            const msgpack_object *p = &pairs->via.array.ptr[j];
            char field[48];
            snprintf(field, sizeof field, "count pair %u", j);
            if ((rc = want_array(&c, p, field, 2, 2, PFT_EFORMAT)))
                return rc;
            uint64_t label, count;
            snprintf(field, sizeof field, "count pair %u: label", j);
            if ((rc = want_uint(&c, &p->via.array.ptr[0], field, 0, INT32_MAX, PFT_EFORMAT, &label)))
                return rc;
            if (j > 0 && (int)label <= pe->pairs[j - 1].label)
                return bad(&c, PFT_EFORMAT, "count pair %u: label %d not after %d (sorted, unique)", j,
                           (int)label, pe->pairs[j - 1].label);
            snprintf(field, sizeof field, "count pair %u: count", j);
            if ((rc = want_uint(&c, &p->via.array.ptr[1], field, 1, PFT_BUNDLE_MAX_COUNT, PFT_EFORMAT,
                                &count)))
                return rc;
            pe->pairs[j] = (prov_pair_t){.label = (int)label, .count = count};
            pe->n = (int)j + 1;
        }
        if (e->via.array.size == 3) { /* DP guarantee of this node's data */
            const msgpack_object *g = &e->via.array.ptr[2];
            if ((rc = want_bin(&c, g, "dp guarantee", 16)))
                return rc;
            double eps = le_get_f64((const uint8_t *)g->via.bin.ptr), delta = le_get_f64((const uint8_t *)g->via.bin.ptr + 8);
            if (!(eps > 0 && eps <= 1e6) || !(delta >= 0 && delta <= 1))
                return bad(&c, PFT_EFORMAT, "dp guarantee (%g, %g) outside 0 < epsilon <= 1e6, 0 <= delta <= 1", eps,
                           delta);
            pe->dp_eps = eps;
            pe->dp_delta = delta;
        }
    }
    return 0;
}

static int decode_payload(pft_bundle_t **bp, const uint8_t *payload, size_t plen,
                          const pft_bundle_limits_t *lim)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    ctx_t c = {"payload"};
    pft_bundle_t *b = NULL;
    int rc = mp_unpack(payload, plen, lim->max_objects, "bundle decode: payload", &u);
    if (rc)
        goto done;
    if ((rc = want_array(&c, &u.data, "top level", N_PAYLOAD_FIELDS, N_PAYLOAD_FIELDS, PFT_EFORMAT)))
        goto done;
    const msgpack_object *f = u.data.via.array.ptr;
    char run_id[PFT_BUNDLE_MAX_NAME + 1], producer[PFT_BUNDLE_MAX_NAME + 1];
    uint64_t flags, dtype, d;
    if ((rc = want_name(&c, &f[0], "run id", run_id)) || (rc = want_name(&c, &f[1], "producer", producer)) ||
        (rc = want_uint(&c, &f[2], "flags", 0, UINT32_MAX, PFT_EFORMAT, &flags)))
        goto done;
    if (flags & ~(uint64_t)PFT_BUNDLE_FLAGS_KNOWN) {
        rc = bad(&c, PFT_EFORMAT, "flags 0x%llx have unknown bits", (unsigned long long)flags);
        goto done;
    }
    if ((rc = want_uint(&c, &f[3], "dtype", 0, 1, PFT_EFORMAT, &dtype)) ||
        (rc = want_uint(&c, &f[4], "d", 1, lim->max_d, PFT_ERANGE, &d)))
        goto done;
    b = pft_bundle_new(run_id, producer, (pft_dtype_t)dtype, (int)d);
    if (!b) {
        rc = bad(&c, PFT_ENOMEM, "out of memory");
        goto done;
    }
    b->flags = (uint32_t)flags;
    /* parents */
    if ((rc = want_array(&c, &f[5], "parents", 0, lim->max_parents, PFT_ERANGE)))
        goto done;
    uint32_t np = f[5].via.array.size;
    if (np) {
        b->parents = pft_alloc_array(np, PFT_BUNDLE_ID_LEN);
        if (!b->parents) {
            rc = bad(&c, PFT_ENOMEM, "out of memory");
            goto done;
        }
        b->cap_parents = (int)np;
    }
    for (uint32_t i = 0; i < np; i++) {
        const msgpack_object *p = &f[5].via.array.ptr[i];
        char field[32];
        snprintf(field, sizeof field, "parent %u", i);
        if ((rc = want_bin(&c, p, field, PFT_BUNDLE_ID_LEN)))
            goto done;
        if (i > 0 && memcmp(p->via.bin.ptr, b->parents[i - 1], PFT_BUNDLE_ID_LEN) <= 0) {
            rc = bad(&c, PFT_EFORMAT, "parent %u not after parent %u (sorted, unique)", i, i - 1);
            goto done;
        }
        memcpy(b->parents[i], p->via.bin.ptr, PFT_BUNDLE_ID_LEN);
        b->n_parents = (int)i + 1;
    }
    if ((rc = decode_prov(b, lim, &f[6])))
        goto done;
    /* classes */
    if ((rc = want_array(&c, &f[7], "classes", 0, lim->max_classes, PFT_ERANGE)))
        goto done;
    uint32_t nc = f[7].via.array.size;
    if (nc) {
        b->classes = pft_calloc(nc, sizeof *b->classes);
        if (!b->classes) {
            rc = bad(&c, PFT_ENOMEM, "out of memory");
            goto done;
        }
        b->cap_classes = (int)nc;
    }
    uint64_t model_total = 0;
    for (uint32_t i = 0; i < nc; i++)
        if ((rc = decode_class(b, lim, (int)i, &f[7].via.array.ptr[i], &model_total)))
            goto done;
    if ((rc = check_counts(b, PFT_EFORMAT, "bundle decode")))
        goto done;
    *bp = b;
    b = NULL;
done:
    pft_bundle_destroy(&b);
    msgpack_unpacked_destroy(&u);
    return rc;
}

int pft_bundle_decode(const uint8_t *buf, size_t len, const pft_bundle_limits_t *limits, pft_bundle_t **out)
{
    pft_bundle_limits_t def;
    if (!limits) {
        pft_bundle_limits_default(&def);
        limits = &def;
    }
    *out = NULL;
    pft_envelope_t env;
    int rc = pft_envelope_parse(buf, len, limits, &env);
    if (rc)
        return rc;
    pft_bundle_t *b = NULL;
    rc = decode_payload(&b, env.payload, env.payload_len, limits);
    if (rc)
        return rc;
    b->payload = pft_alloc(env.payload_len);
    if (!b->payload) {
        pft_bundle_destroy(&b);
        return pft_err(PFT_ENOMEM, "bundle decode: out of memory");
    }
    memcpy(b->payload, env.payload, env.payload_len);
    b->payload_len = env.payload_len;
    pft_bundle_hash(env.payload, env.payload_len, b->id);
    if (env.sig_len)
        memcpy(b->sig, env.sig, env.sig_len);
    b->sig_len = env.sig_len;
    *out = b;
    return 0;
}
