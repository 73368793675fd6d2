/* pft_bundle: the bundle object (per-class GMMs or statistics parts, counts, provenance, parents, flags,
 * signature); its codec is
 * in pft_bundle_encode.c and pft_bundle_decode.c, the struct in pft_bundle_internal.h. See docs/WIRE.md. */
#include "pft_bundle.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle_internal.h"
#include "pft_error.h"

/* ---------- helpers shared with the codec ---------- */

int pft_bundle__name_ok(const char *s, size_t len)
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

size_t pft_bundle__dtype_size(pft_dtype_t dt)
{
    return dt == PFT_DTYPE_F32 ? 4 : 2;
}

size_t pft_bundle__cov_len(pft_cov_t cov, size_t d)
{
    size_t n = pft_cov_wire(cov, d);
    return n ? n : 1;
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
    if (!run_id || !pft_bundle__name_ok(run_id, strlen(run_id))) {
        pft_err(PFT_EINVAL, "bundle: run id must be 1..%d bytes without control characters",
                PFT_BUNDLE_MAX_NAME);
        return NULL;
    }
    if (!producer || !pft_bundle__name_ok(producer, strlen(producer))) {
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

static void part_free(pft_bundle__part_t *p)
{
    pft_gstat_destroy(&p->st);
    PFT_FREE(p->factor);
    PFT_FREE(p->factor_psi);
    PFT_FREE(p->rel_u);
    PFT_FREE(p->rel_psi);
    PFT_FREE(p->labels);
    PFT_FREE(p->counts);
    PFT_FREE(p->words);
    PFT_FREE(p->shares);
    p->mask.shares = NULL;
    for (int j = 0; j < p->n_contrib; j++)
        pft_free(p->contrib[j]);
    PFT_FREE(p->contrib);
    p->n_contrib = 0;
}

void pft_bundle_destroy(pft_bundle_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_bundle_t *self = *self_p;
    for (int i = 0; i < self->n_classes; i++)
        pft_gmm_destroy(&self->classes[i].gmm);
    pft_free(self->classes);
    for (int i = 0; i < self->n_parts; i++)
        part_free(&self->parts[i]);
    pft_free(self->parts);
    for (int i = 0; i < self->n_prov; i++) {
        pft_free(self->prov[i].node);
        pft_free(self->prov[i].pairs);
        pft_free(self->prov[i].ev);
    }
    pft_free(self->prov);
    pft_free(self->parents);
    pft_free(self->payload);
    pft_free(self->fp_items);
    pft_free(self);
    *self_p = NULL;
}

/* ---------- classes ---------- */

int pft_bundle_add_class(pft_bundle_t *self, int label, uint64_t n, pft_gmm_t **gmm_p)
{
    if (!self || !gmm_p || !*gmm_p)
        return pft_err(PFT_EINVAL, "bundle: add_class: NULL argument");
    if (self->n_parts > 0)
        return pft_err(PFT_EINVAL,
                       "bundle: class %d: the bundle carries statistics parts (classes or parts, "
                       "never both)",
                       label);
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
    int rc =
        grow((void **)&self->classes, &self->cap_classes, self->n_classes + 1, sizeof(pft_bundle__class_t));
    if (rc)
        return rc;
    memmove(&self->classes[pos + 1], &self->classes[pos],
            (size_t)(self->n_classes - pos) * sizeof(pft_bundle__class_t));
    self->classes[pos] = (pft_bundle__class_t){.label = label, .n = n, .gmm = *gmm_p};
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

/* ---------- statistics parts ---------- */

int pft_bundle__part_find(const pft_bundle__part_t *p, const char *node)
{
    int lo = 0, hi = p->n_contrib - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(p->contrib[mid], node);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

void pft_bundle__part_name(const pft_bundle__part_t *p, int i, char *out, size_t n)
{
    size_t o = (size_t)snprintf(out, n, "part %d (contributors ", i);
    for (int j = 0; j < p->n_contrib && o < n; j++) {
        if (o + strlen(p->contrib[j]) + 8 > 100 && j > 0) {
            o += (size_t)snprintf(out + o, n - o, ",... %d in all", p->n_contrib);
            break;
        }
        o += (size_t)snprintf(out + o, n - o, "%s%s", j ? "," : "", p->contrib[j]);
    }
    if (o < n)
        snprintf(out + o, n - o, ")");
}

int pft_bundle__part_args_ok(const pft_bundle_t *self, const char *const *contrib, int nc,
                             pft_gstat_kind_t kind)
{
    if (self->n_classes > 0)
        return pft_err(PFT_EINVAL,
                       "bundle: add_part: the bundle carries GMM classes (classes or parts, never "
                       "both)");
    if (self->n_parts > 0 && kind != pft_bundle__part_kind(&self->parts[0]))
        return pft_err(
            PFT_EINVAL, "bundle: add_part: %s statistics in a bundle of %s parts (one kind per bundle)",
            pft_gstat_kind_name(kind), pft_gstat_kind_name(pft_bundle__part_kind(&self->parts[0])));
    int total = nc;
    for (int i = 0; i < self->n_parts; i++)
        total += self->parts[i].n_contrib;
    if (nc < 1 || !contrib || total > 4096)
        return pft_err(PFT_EINVAL, "bundle: add_part: %d contributors (1.., at most 4096 over all parts)",
                       nc);
    for (int j = 0; j < nc; j++) {
        if (!contrib[j] || !pft_bundle__name_ok(contrib[j], strlen(contrib[j])))
            return pft_err(PFT_EINVAL,
                           "bundle: add_part: contributor %d: node ids are 1..%d bytes without control "
                           "characters",
                           j, PFT_BUNDLE_MAX_NAME);
        if (j > 0 && strcmp(contrib[j - 1], contrib[j]) >= 0)
            return pft_err(PFT_EINVAL, "bundle: add_part: contributor '%s' not after '%s' (sorted, unique)",
                           contrib[j], contrib[j - 1]);
        for (int i = 0; i < self->n_parts; i++)
            if (pft_bundle__part_find(&self->parts[i], contrib[j]) >= 0) {
                char name[160];
                pft_bundle__part_name(&self->parts[i], i, name, sizeof name);
                return pft_err(PFT_EINVAL, "bundle: add_part: contributor '%s' is already in %s", contrib[j],
                               name);
            }
    }
    return 0;
}

/* Checks the arguments of add_part (everything but memory); 0 or PFT_EINVAL. */
static int part_args_ok(const pft_bundle_t *self, const char *const *contrib, int nc, const pft_gstat_t *st)
{
    if (pft_gstat_dim(st) != self->d)
        return pft_err(PFT_EINVAL, "bundle: add_part: statistics of dimension %d, bundle dimension %d",
                       pft_gstat_dim(st), self->d);
    int ncl = pft_gstat_n_classes(st);
    if (ncl < 1 || ncl > 65536)
        return pft_err(PFT_EINVAL, "bundle: add_part: %d classes, expected 1..65536", ncl);
    for (int c = 0; c < ncl; c++)
        if (pft_gstat_count(st, c) > PFT_BUNDLE_MAX_COUNT)
            return pft_err(PFT_EINVAL, "bundle: add_part: class %d (label %d): count %llu exceeds 2^48", c,
                           pft_gstat_label(st, c), (unsigned long long)pft_gstat_count(st, c));
    return pft_bundle__part_args_ok(self, contrib, nc, pft_gstat_kind(st));
}

int pft_bundle__part_insert(pft_bundle_t *self, const char *const *contributors, int n_contrib,
                            pft_bundle__part_t *proto)
{
    int rc = grow((void **)&self->parts, &self->cap_parts, self->n_parts + 1, sizeof(pft_bundle__part_t));
    if (rc)
        return rc;
    pft_bundle__part_t p = *proto;
    p.n_contrib = 0;
    p.contrib = pft_calloc((size_t)n_contrib, sizeof(char *));
    if (!p.contrib)
        return pft_err(PFT_ENOMEM, "bundle: out of memory");
    for (; p.n_contrib < n_contrib; p.n_contrib++) {
        p.contrib[p.n_contrib] = pft_strdup(contributors[p.n_contrib]);
        if (!p.contrib[p.n_contrib]) {
            for (int j = 0; j < p.n_contrib; j++)
                pft_free(p.contrib[j]);
            pft_free(p.contrib);
            return pft_err(PFT_ENOMEM, "bundle: out of memory");
        }
    }
    int pos = self->n_parts;
    while (pos > 0 && strcmp(self->parts[pos - 1].contrib[0], p.contrib[0]) > 0)
        pos--;
    memmove(&self->parts[pos + 1], &self->parts[pos], (size_t)(self->n_parts - pos) * sizeof p);
    self->parts[pos] = p;
    self->n_parts++;
    drop_cache(self);
    return 0;
}

int pft_bundle_add_part(pft_bundle_t *self, const char *const *contributors, int n_contrib,
                        pft_gstat_t **st_p)
{
    if (!self || !st_p || !*st_p)
        return pft_err(PFT_EINVAL, "bundle: add_part: NULL argument");
    int rc = part_args_ok(self, contributors, n_contrib, *st_p);
    if (rc)
        return rc;
    pft_bundle__part_t p = {.rank_cap = -1, .st = *st_p, .kind = pft_gstat_kind(*st_p)};
    if ((rc = pft_bundle__part_insert(self, contributors, n_contrib, &p)))
        return rc;
    *st_p = NULL;
    return 0;
}

int pft_bundle_set_shared_rank(pft_bundle_t *self, int q)
{
    if (!self || q < 0 || q > self->d - 1)
        return pft_err(PFT_EINVAL, "bundle: shared covariance rank %d outside 0..%d (d - 1)", q,
                       self ? self->d - 1 : 0);
    if (q != self->shared_rank) {
        self->shared_rank = q;
        drop_cache(self);
    }
    return 0;
}

int pft_bundle_shared_rank(const pft_bundle_t *self)
{
    return self->shared_rank;
}

int pft_bundle_set_part_rank_cap(pft_bundle_t *self, int i, int q)
{
    if (!self || i < 0 || i >= self->n_parts || q < -1 || q > self->d - 1)
        return pft_err(PFT_EINVAL, "bundle: rank cap %d of part %d outside -1..%d (d - 1), or no such part",
                       q, i, self ? self->d - 1 : 0);
    if (q != self->parts[i].rank_cap) {
        self->parts[i].rank_cap = q;
        drop_cache(self);
    }
    return 0;
}

int pft_bundle_part_rank_cap(const pft_bundle_t *self, int i)
{
    return self->parts[i].rank_cap;
}

int pft_bundle_part_sent_rank(const pft_bundle_t *self, int i)
{
    int cap = self->parts[i].rank_cap, q = self->shared_rank;
    return cap >= 0 && cap < q ? cap : q;
}

int pft_bundle_set_part_release(pft_bundle_t *self, int i, const double *U, const double *psi, int q)
{
    if (!self || i < 0 || i >= self->n_parts || !self->parts[i].st || q < 1 || q > self->d - 1 || !U || !psi)
        return pft_err(PFT_EINVAL,
                       "bundle: release of part %d at rank %d: no such clear part, or q outside "
                       "1..%d",
                       i, q, self ? self->d - 1 : 0);
    size_t d = (size_t)self->d;
    for (size_t r = 0; r < d; r++)
        if (!isfinite(psi[r]) || psi[r] < 0 || signbit(psi[r]))
            return pft_err(PFT_EINVAL, "bundle: release of part %d: psi[%zu] = %g", i, r, psi[r]);
    for (size_t k = 0; k < d * (size_t)q; k++)
        if (!isfinite(U[k]))
            return pft_err(PFT_EINVAL, "bundle: release of part %d: a factor entry is not finite", i);
    double *u = pft_alloc_array(d * (size_t)q, sizeof *u), *ps = pft_alloc_array(d, sizeof *ps);
    if (!u || !ps) {
        pft_free(u);
        pft_free(ps);
        return pft_err(PFT_ENOMEM, "bundle: out of memory for a release of rank %d", q);
    }
    memcpy(u, U, d * (size_t)q * sizeof *u);
    memcpy(ps, psi, d * sizeof *ps);
    pft_bundle__part_t *p = &self->parts[i];
    pft_free(p->rel_u);
    pft_free(p->rel_psi);
    p->rel_u = u;
    p->rel_psi = ps;
    p->rel_q = q;
    drop_cache(self);
    return 0;
}

int pft_bundle_take_part_scatter(pft_bundle_t *self, int i, double **w)
{
    *w = NULL;
    if (!self || i < 0 || i >= self->n_parts || !self->parts[i].st || self->shared_rank < 1 ||
        self->parts[i].rank_cap == 0 || pft_gstat_kind(self->parts[i].st) != PFT_GSTAT_TIED ||
        !pft_gstat_tied_scatter(self->parts[i].st))
        return pft_err(PFT_EINVAL,
                       "bundle: part %d's scatter cannot be taken (no such clear tied part with a scatter, "
                       "or not sent in low-rank form with at least one eigenpair)",
                       i);
    *w = pft_gstat_take_tied_scatter(self->parts[i].st);
    drop_cache(self);
    return 0;
}

int pft_bundle_give_part_scatter(pft_bundle_t *self, int i, double **w)
{
    if (!self || i < 0 || i >= self->n_parts || !self->parts[i].st)
        return pft_err(PFT_EINVAL, "bundle: no clear part %d to give a scatter to", i);
    int rc = pft_gstat_give_tied_scatter(self->parts[i].st, w);
    if (rc == 0)
        drop_cache(self);
    return rc;
}

int pft_bundle_take_part_stats(pft_bundle_t *self, int i, pft_gstat_t **st)
{
    *st = NULL;
    if (!self || i < 0 || i >= self->n_parts || !self->parts[i].st)
        return pft_err(PFT_EINVAL,
                       "bundle: part %d's statistics cannot be taken (no such clear part, or taken)", i);
    *st = self->parts[i].st;
    self->parts[i].st = NULL;
    self->parts[i].taken = 1;
    drop_cache(self);
    return 0;
}

const double *pft_bundle_part_factor(const pft_bundle_t *self, int i, int *q)
{
    *q = self->parts[i].factor ? self->parts[i].factor_q : 0;
    return self->parts[i].factor;
}

const double *pft_bundle_part_factor_psi(const pft_bundle_t *self, int i)
{
    return self->parts[i].factor_psi;
}

int pft_bundle_is_stats(const pft_bundle_t *self)
{
    return self->n_parts > 0;
}

int pft_bundle_n_parts(const pft_bundle_t *self)
{
    return self->n_parts;
}

const pft_gstat_t *pft_bundle_part_stats(const pft_bundle_t *self, int i)
{
    return self->parts[i].st;
}

int pft_bundle_part_n_contributors(const pft_bundle_t *self, int i)
{
    return self->parts[i].n_contrib;
}

const char *pft_bundle_part_contributor(const pft_bundle_t *self, int i, int j)
{
    return self->parts[i].contrib[j];
}

/* ---------- clear or masked ---------- */

pft_gstat_kind_t pft_bundle__part_kind(const pft_bundle__part_t *p)
{
    return p->st ? pft_gstat_kind(p->st) : p->kind;
}

int pft_bundle__part_n_classes(const pft_bundle__part_t *p)
{
    return p->st ? pft_gstat_n_classes(p->st) : p->n_classes;
}

int pft_bundle__part_label(const pft_bundle__part_t *p, int k)
{
    return p->st ? pft_gstat_label(p->st, k) : p->labels[k];
}

uint64_t pft_bundle__part_count(const pft_bundle__part_t *p, int k)
{
    return p->st ? pft_gstat_count(p->st, k) : p->counts[k];
}

int pft_bundle__part_find_label(const pft_bundle__part_t *p, int label)
{
    if (p->st)
        return pft_gstat_find(p->st, label);
    int lo = 0, hi = p->n_classes - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (p->labels[mid] == label)
            return mid;
        if (p->labels[mid] < label)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* ---------- provenance ---------- */

int pft_bundle__prov_find(const pft_bundle_t *self, const char *node)
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

pft_bundle__pair_t *pft_bundle__pair_find(const pft_bundle__prov_t *e, int label, int *ins)
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
static pft_bundle__prov_t *prov_entry(pft_bundle_t *self, const char *node)
{
    int i = pft_bundle__prov_find(self, node);
    if (i >= 0)
        return &self->prov[i];
    if (self->n_prov >= 4096) {
        pft_err(PFT_EINVAL, "bundle: provenance holds more than 4096 nodes");
        return NULL;
    }
    int pos = -i - 1;
    if (grow((void **)&self->prov, &self->cap_prov, self->n_prov + 1, sizeof(pft_bundle__prov_t)))
        return NULL;
    char *copy = pft_strdup(node);
    if (!copy) {
        pft_err(PFT_ENOMEM, "bundle: out of memory");
        return NULL;
    }
    memmove(&self->prov[pos + 1], &self->prov[pos],
            (size_t)(self->n_prov - pos) * sizeof(pft_bundle__prov_t));
    self->prov[pos] = (pft_bundle__prov_t){.node = copy};
    self->n_prov++;
    return &self->prov[pos];
}

/* Removes entry i if it has no pairs (after a failed insertion). */
static void prov_prune(pft_bundle_t *self, const char *node)
{
    int i = pft_bundle__prov_find(self, node);
    if (i < 0 || self->prov[i].n > 0)
        return;
    pft_free(self->prov[i].node);
    pft_free(self->prov[i].pairs);
    pft_free(self->prov[i].ev);
    memmove(&self->prov[i], &self->prov[i + 1], (size_t)(self->n_prov - i - 1) * sizeof(pft_bundle__prov_t));
    self->n_prov--;
}

static int pair_insert(pft_bundle__prov_t *e, int label, uint64_t count)
{
    int ins = 0;
    pft_bundle__pair_t *p = pft_bundle__pair_find(e, label, &ins);
    if (p) {
        if (count > PFT_BUNDLE_MAX_COUNT - p->count)
            return pft_err(PFT_EINVAL, "bundle: provenance count of node '%s' class %d exceeds 2^48", e->node,
                           label);
        p->count += count;
        return 0;
    }
    int rc = grow((void **)&e->pairs, &e->cap, e->n + 1, sizeof(pft_bundle__pair_t));
    if (rc)
        return rc;
    memmove(&e->pairs[ins + 1], &e->pairs[ins], (size_t)(e->n - ins) * sizeof(pft_bundle__pair_t));
    e->pairs[ins] = (pft_bundle__pair_t){.label = label, .count = count};
    e->n++;
    return 0;
}

int pft_bundle_prov_add(pft_bundle_t *self, const char *node, int label, uint64_t count)
{
    if (!self || !node || !pft_bundle__name_ok(node, strlen(node)))
        return pft_err(PFT_EINVAL,
                       "bundle: provenance node id must be 1..%d bytes without control characters",
                       PFT_BUNDLE_MAX_NAME);
    if (label < 0)
        return pft_err(PFT_EINVAL, "bundle: provenance label %d is negative", label);
    if (count < 1 || count > PFT_BUNDLE_MAX_COUNT)
        return pft_err(PFT_EINVAL, "bundle: provenance count %llu outside 1..2^48",
                       (unsigned long long)count);
    pft_bundle__prov_t *e = prov_entry(self, node);
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
        const pft_bundle__prov_t *oe = &other->prov[i];
        int j = pft_bundle__prov_find(self, oe->node);
        if (j < 0)
            continue;
        for (int k = 0; k < oe->n; k++) {
            const pft_bundle__pair_t *p = pft_bundle__pair_find(&self->prov[j], oe->pairs[k].label, NULL);
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
        const pft_bundle__prov_t *oe = &other->prov[i];
        int j = pft_bundle__prov_find(self, oe->node);
        if (j >= 0 && oe->dp_eps > 0 && self->prov[j].dp_eps > 0 &&
            (self->prov[j].dp_eps != oe->dp_eps || self->prov[j].dp_delta != oe->dp_delta))
            return pft_err(PFT_EINVAL,
                           "bundle: provenance conflict: node '%s' has DP (%g, %g) here and (%g, %g) in "
                           "bundle from '%s'",
                           oe->node, self->prov[j].dp_eps, self->prov[j].dp_delta, oe->dp_eps, oe->dp_delta,
                           other->producer);
    }
    for (int i = 0; i < other->n_prov; i++) {
        const pft_bundle__prov_t *oe = &other->prov[i];
        int j = pft_bundle__prov_find(self, oe->node);
        if (j >= 0 && oe->ev && self->prov[j].ev &&
            (oe->n_ev != self->prov[j].n_ev || oe->ev_against != self->prov[j].ev_against ||
             memcmp(oe->ev, self->prov[j].ev, (size_t)oe->n_ev * sizeof *oe->ev)))
            return pft_err(
                PFT_EINVAL,
                "bundle: provenance conflict: node '%s' has other validation evidence in bundle from "
                "'%s'",
                oe->node, other->producer);
    }
    for (int i = 0; i < other->n_prov; i++) {
        const pft_bundle__prov_t *oe = &other->prov[i];
        pft_bundle__prov_t *e = prov_entry(self, oe->node);
        if (!e)
            return pft_err_wrap(PFT_ENOMEM, "bundle: prov_merge");
        if (oe->ev && !e->ev) {
            e->ev = pft_alloc_array((size_t)oe->n_ev, sizeof *e->ev);
            if (!e->ev) {
                prov_prune(self, oe->node);
                return pft_err(PFT_ENOMEM, "bundle: prov_merge: out of memory");
            }
            memcpy(e->ev, oe->ev, (size_t)oe->n_ev * sizeof *e->ev);
            e->n_ev = oe->n_ev;
            e->ev_against = oe->ev_against;
        }
        if (oe->dp_eps > 0) {
            e->dp_eps = oe->dp_eps;
            e->dp_delta = oe->dp_delta;
        }
        for (int k = 0; k < oe->n; k++) {
            if (pft_bundle__pair_find(e, oe->pairs[k].label, NULL))
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
    int i = self ? pft_bundle__prov_find(self, node) : -1;
    if (i < 0)
        return pft_err(PFT_EINVAL, "bundle: prov_set_dp: node '%s' is not in the provenance",
                       node ? node : "");
    if (!(eps > 0 && eps <= 1e6) || !(delta >= 0 && delta <= 1))
        return pft_err(
            PFT_EINVAL,
            "bundle: prov_set_dp: (%g, %g) is not a DP guarantee (0 < eps <= 1e6, 0 <= delta <= 1)", eps,
            delta);
    self->prov[i].dp_eps = eps;
    self->prov[i].dp_delta = delta;
    drop_cache(self);
    return 0;
}

int pft_bundle__tallies_ok(const pft_bundle_tally_t *t, int m, char *why, size_t cap)
{
    if (m < 1 || m > PFT_BUNDLE_MAX_TALLIES) {
        snprintf(why, cap, "%d tallies, expected 1..%d", m, PFT_BUNDLE_MAX_TALLIES);
        return 0;
    }
    for (int k = 0; k < m; k++) {
        const pft_bundle_tally_t *x = &t[k];
        if (!(x->alpha >= 0 && x->alpha <= 1) || (k > 0 && !(x->alpha > t[k - 1].alpha)) ||
            x->total > PFT_BUNDLE_MAX_COUNT || x->correct > x->total || !isfinite(x->loss) || x->loss < 0) {
            snprintf(why, cap,
                     "tally %d (alpha %g, %llu of %llu right, loss %g): alpha in 0..1 ascending, right <= "
                     "scored <= 2^48, loss finite and >= 0",
                     k, x->alpha, (unsigned long long)x->correct, (unsigned long long)x->total, x->loss);
            return 0;
        }
    }
    return 1;
}

/* The first entry with evidence when at least two have it and all repeat its α (same count, same values bit
 * for bit), or -1: then each carries its own α (docs/WIRE.md §2.5; the grid's bin would cost one entry 2
 * bytes). */
int pft_bundle__shared_grid(const pft_bundle_t *self)
{
    int first = -1, n = 0;
    for (int i = 0; i < self->n_prov; i++) {
        const pft_bundle__prov_t *e = &self->prov[i];
        if (!e->ev)
            continue;
        if (n++ == 0) {
            first = i;
            continue;
        }
        const pft_bundle__prov_t *f = &self->prov[first];
        if (e->n_ev != f->n_ev)
            return -1;
        for (int k = 0; k < e->n_ev; k++)
            if (memcmp(&e->ev[k].alpha, &f->ev[k].alpha, sizeof e->ev[k].alpha) != 0)
                return -1;
    }
    return n >= 2 ? first : -1;
}

int pft_bundle_prov_set_evidence(pft_bundle_t *self, const char *node, uint64_t against,
                                 const pft_bundle_tally_t *t, int m)
{
    int i = self ? pft_bundle__prov_find(self, node) : -1;
    char why[256];
    if (i < 0)
        return pft_err(PFT_EINVAL, "bundle: prov_set_evidence: node '%s' is not in the provenance",
                       node ? node : "");
    if (!t || !pft_bundle__tallies_ok(t, m, why, sizeof why))
        return pft_err(PFT_EINVAL, "bundle: prov_set_evidence: %s", t ? why : "no tallies");
    if (against < 1 || against > PFT_BUNDLE_MAX_COUNT)
        return pft_err(PFT_EINVAL, "bundle: prov_set_evidence: scored against %llu rows (1..2^48)",
                       (unsigned long long)against);
    pft_bundle_tally_t *c = pft_alloc_array((size_t)m, sizeof *c);
    if (!c)
        return pft_err(PFT_ENOMEM, "bundle: prov_set_evidence: out of memory");
    memcpy(c, t, (size_t)m * sizeof *c);
    pft_free(self->prov[i].ev);
    self->prov[i].ev = c;
    self->prov[i].n_ev = m;
    self->prov[i].ev_against = against;
    drop_cache(self);
    return 0;
}

const pft_bundle_tally_t *pft_bundle_prov_evidence(const pft_bundle_t *self, int i, int *m, uint64_t *against)
{
    *m = self->prov[i].n_ev;
    *against = self->prov[i].ev_against;
    return self->prov[i].ev;
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
    int i = pft_bundle__prov_find(self, node);
    if (i < 0)
        return 0;
    const pft_bundle__pair_t *p = pft_bundle__pair_find(&self->prov[i], label, NULL);
    return p ? p->count : 0;
}

int pft_bundle_prov_contains(const pft_bundle_t *self, const char *node)
{
    return pft_bundle__prov_find(self, node) >= 0;
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
    size_t n = 0, d = (size_t)self->d, tri = d * (d + 1) / 2;
    for (int i = 0; i < self->n_classes; i++)
        n += pft_gmm_n_wire_params(self->classes[i].gmm);
    size_t masked = 0;
    for (int i = 0; i < self->n_parts; i++) {
        const pft_gstat_t *st = self->parts[i].st;
        if (!st) { /* masked: its words */
            masked += self->parts[i].n_words * 8;
            continue;
        }
        size_t ncl = (size_t)pft_gstat_n_classes(st);
        size_t shared = self->shared_rank > 0 ? d * (size_t)self->shared_rank + d : tri;
        n += ncl * (1 + d) + (pft_gstat_kind(st) == PFT_GSTAT_FULL ? ncl * tri : shared);
    }
    return n * pft_bundle__dtype_size(self->dtype) + masked;
}
