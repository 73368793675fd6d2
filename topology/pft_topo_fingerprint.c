/* pft_topo_fingerprint: the public facts of a topology as named items, their digests and one fingerprint. */
#include "pft_topo_fingerprint.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_topo_attr.h"

#include <sodium.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DOMAIN "pftnet topology fingerprint 1\n"
#define SHOWN_EDGES 6 /* a diff lists this topology's edges when it has at most this many */

/* One item while it is built: its name, the full digests of its text (node: settings, then key) and, for a
 * run-wide setting, its value as text (what a diff shows). */
typedef struct {
    pft_topo_fp_item_t it;
    uint8_t full[PFT_TOPO_FP_LEN], key[PFT_TOPO_FP_LEN];
    char value[48];
} item_t;

struct pft_topo_fp_t {
    uint8_t hash[PFT_TOPO_FP_LEN];
    pft_topo_fp_item_t *items; /* sorted by name */
    char (*values)[48];        /* values[i]: run-wide setting i's value here, "" for other items */
    size_t n;
    char edges[160]; /* "a->b, b->c" when few, else "" */
};

/* A growing text. */
typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} text_t;

static void put(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text_t *t, const char *fmt, ...)
{
    for (int pass = 0; pass < 2 && !t->oom; pass++) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            t->oom = 1;
            return;
        }
        if (t->s && t->len + (size_t)w < t->cap) {
            t->len += (size_t)w;
            return;
        }
        size_t cap = (t->cap + (size_t)w + 1) * 2;
        char *s = pft_realloc(t->s, cap);
        if (!s) {
            t->oom = 1;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

static void hash_text(const text_t *t, uint8_t out[PFT_TOPO_FP_LEN])
{
    crypto_generichash(out, PFT_TOPO_FP_LEN, (const unsigned char *)(t->s ? t->s : ""), t->len, NULL, 0);
}

/* 1 if attribute a is hashed: a public fact the parties must agree on. Not a path, endpoint or key, not
 * port_base, and not how long a party waits (deadline, send_deadline, resend_grace): timing is each party's
 * own policy, changes nothing that is computed, and a node restarted with a shorter deadline must still be the
 * same run. */
static int attr_public(const pft_topo_attr_t *a)
{
    static const char *const local[] = {"port_base", "deadline", "send_deadline", "resend_grace"};
    if (a->type == PFT_ATTR_PATH || a->type == PFT_ATTR_ENDPOINT || a->type == PFT_ATTR_KEY)
        return 0;
    for (size_t i = 0; i < sizeof local / sizeof *local; i++)
        if (strcmp(a->name, local[i]) == 0)
            return 0;
    return 1;
}

/* The value of attribute a stored at p, canonically: numbers in full precision, enums by name. */
static void put_value(text_t *t, const pft_topo_attr_t *a, const void *p)
{
    switch (a->type) {
    case PFT_ATTR_INT:
        put(t, "%d", *(const int *)p);
        break;
    case PFT_ATTR_BOOL:
        put(t, "%s", *(const int *)p ? "true" : "false");
        break;
    case PFT_ATTR_ENUM: {
        int v = *(const int *)p, i = 0;
        const char *name = NULL;
        for (const char *const *c = a->choices; *c; c++, i++)
            name = i == v ? *c : name;
        put(t, "%s", name ? name : "?");
        break;
    }
    case PFT_ATTR_U64:
        put(t, "%" PRIu64, *(const uint64_t *)p);
        break;
    case PFT_ATTR_REAL:
        put(t, "%.17g", *(const double *)p);
        break;
    default: { /* text types */
        const char *s = *(const char *const *)p;
        put(t, "%s", s ? s : "");
        break;
    }
    }
}

/* One item per public run-wide attribute, appended at items[*n]. */
static int run_items(const pft_topo_t *tp, item_t *items, size_t *n)
{
    size_t na;
    const pft_topo_attr_t *tab = pft_topo_attr_table(&na);
    const pft_topo_run_t *run = pft_topo_run(tp);
    for (size_t i = 0; i < na; i++) {
        const pft_topo_attr_t *a = &tab[i];
        if (a->g_off < 0 || !attr_public(a))
            continue;
        text_t t = {0};
        put_value(&t, a, (const char *)run + a->g_off);
        if (t.oom) {
            pft_free(t.s);
            return PFT_ENOMEM;
        }
        item_t *it = &items[(*n)++];
        snprintf(it->it.name, sizeof it->it.name, "%s", a->name);
        hash_text(&t, it->full);
        memcpy(it->it.digest, it->full, PFT_TOPO_FP_DIGEST_LEN);
        snprintf(it->value, sizeof it->value, "%s", t.s ? t.s : "");
        pft_free(t.s);
    }
    return 0;
}

/* One item per node: its public settings (name=value;…) and its key. */
static int node_item(const pft_topo_node_t *nd, const uint8_t *key, item_t *it)
{
    size_t na;
    const pft_topo_attr_t *tab = pft_topo_attr_table(&na);
    text_t t = {0};
    for (size_t i = 0; i < na; i++) {
        const pft_topo_attr_t *a = &tab[i];
        if (a->n_off < 0 || !attr_public(a))
            continue;
        put(&t, "%s=", a->name);
        put_value(&t, a, (const char *)nd + a->n_off);
        put(&t, ";");
    }
    if (t.oom) {
        pft_free(t.s);
        return PFT_ENOMEM;
    }
    snprintf(it->it.name, sizeof it->it.name, "node:%s", nd->id);
    hash_text(&t, it->full);
    pft_free(t.s);
    if (key)
        crypto_generichash(it->key, PFT_TOPO_FP_LEN, key, PFT_TOPO_FP_KEY_LEN, NULL, 0);
    else
        crypto_generichash(it->key, PFT_TOPO_FP_LEN, (const unsigned char *)"no key", 6, NULL, 0);
    memcpy(it->it.digest, it->full, PFT_TOPO_FP_DIGEST_LEN / 2);
    memcpy(it->it.digest + PFT_TOPO_FP_DIGEST_LEN / 2, it->key, PFT_TOPO_FP_DIGEST_LEN / 2);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The edges item: one line per edge, "tail->head fallback", sorted (its deadlines are timing: attr_public). */
static int edges_item(const pft_topo_t *tp, item_t *it, char *shown, size_t shown_cap)
{
    size_t ne = pft_topo_edge_count(tp);
    char **lines = pft_calloc(ne ? ne : 1, sizeof *lines);
    int rc = lines ? 0 : PFT_ENOMEM;
    for (size_t i = 0; i < ne && !rc; i++) {
        const pft_topo_edge_t *e = pft_topo_edge(tp, i);
        text_t t = {0};
        put(&t, "%s->%s %d\n", pft_topo_node(tp, e->tail)->id, pft_topo_node(tp, e->head)->id, e->fallback);
        lines[i] = t.s;
        rc = t.oom ? PFT_ENOMEM : 0;
    }
    if (!rc) {
        qsort(lines, ne, sizeof *lines, cmp_str);
        crypto_generichash_state st;
        crypto_generichash_init(&st, NULL, 0, PFT_TOPO_FP_LEN);
        for (size_t i = 0; i < ne; i++)
            crypto_generichash_update(&st, (const unsigned char *)lines[i], strlen(lines[i]));
        crypto_generichash_final(&st, it->full, PFT_TOPO_FP_LEN);
        snprintf(it->it.name, sizeof it->it.name, "edges");
        memcpy(it->it.digest, it->full, PFT_TOPO_FP_DIGEST_LEN);
        size_t used = 0;
        shown[0] = '\0';
        for (size_t i = 0; ne <= SHOWN_EDGES && i < ne && used < shown_cap; i++) {
            int w = snprintf(shown + used, shown_cap - used, "%s%.*s", i ? ", " : "",
                             (int)strcspn(lines[i], " "), lines[i]);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    for (size_t i = 0; lines && i < ne; i++)
        pft_free(lines[i]);
    pft_free(lines);
    return rc;
}

static int cmp_item(const void *a, const void *b)
{
    return strcmp(((const item_t *)a)->it.name, ((const item_t *)b)->it.name);
}

/* The fingerprint: BLAKE2b-256 of the domain, then each item's name, NUL and full digest(s) in name order. */
static void finish(pft_topo_fp_t *fp, item_t *items, size_t n)
{
    qsort(items, n, sizeof *items, cmp_item);
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, PFT_TOPO_FP_LEN);
    crypto_generichash_update(&st, (const unsigned char *)DOMAIN, strlen(DOMAIN));
    for (size_t i = 0; i < n; i++) {
        const item_t *it = &items[i];
        crypto_generichash_update(&st, (const unsigned char *)it->it.name, strlen(it->it.name) + 1);
        crypto_generichash_update(&st, it->full, PFT_TOPO_FP_LEN);
        if (strncmp(it->it.name, "node:", 5) == 0)
            crypto_generichash_update(&st, it->key, PFT_TOPO_FP_LEN);
        fp->items[i] = it->it;
        memcpy(fp->values[i], it->value, sizeof fp->values[i]);
    }
    crypto_generichash_final(&st, fp->hash, PFT_TOPO_FP_LEN);
    fp->n = n;
}

int pft_topo_fp_new(const pft_topo_t *t, const uint8_t *const *keys, pft_topo_fp_t **out)
{
    *out = NULL;
    if (sodium_init() < 0)
        return pft_err(PFT_ENOMEM, "topology fingerprint: libsodium cannot be initialised");
    size_t na, nn = pft_topo_node_count(t);
    pft_topo_attr_table(&na);
    size_t cap = na + nn + 1, n = 0;
    item_t *items = pft_calloc(cap, sizeof *items);
    pft_topo_fp_t *fp = pft_calloc(1, sizeof *fp);
    if (fp) {
        fp->items = pft_calloc(cap, sizeof *fp->items);
        fp->values = pft_calloc(cap, sizeof *fp->values);
    }
    int rc = items && fp && fp->items && fp->values ? 0 : PFT_ENOMEM;
    if (!rc)
        rc = run_items(t, items, &n);
    for (size_t i = 0; i < nn && !rc; i++)
        rc = node_item(pft_topo_node(t, i), keys ? keys[i] : NULL, &items[n++]);
    if (!rc)
        rc = edges_item(t, &items[n++], fp->edges, sizeof fp->edges);
    if (!rc)
        finish(fp, items, n);
    pft_free(items);
    if (rc) {
        pft_topo_fp_destroy(&fp);
        return pft_err(PFT_ENOMEM, "topology fingerprint: out of memory");
    }
    *out = fp;
    return 0;
}

void pft_topo_fp_destroy(pft_topo_fp_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_free((*self_p)->items);
    pft_free((*self_p)->values);
    pft_free(*self_p);
    *self_p = NULL;
}

const uint8_t *pft_topo_fp_hash(const pft_topo_fp_t *self)
{
    return self->hash;
}

size_t pft_topo_fp_items(const pft_topo_fp_t *self, const pft_topo_fp_item_t **out)
{
    *out = self->items;
    return self->n;
}

char *pft_topo_fp_text(const uint8_t fp[PFT_TOPO_FP_LEN], char out[PFT_TOPO_FP_TEXT_LEN])
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < PFT_TOPO_FP_LEN; i++) {
        if (i && i % 2 == 0)
            out[o++] = ' ';
        out[o++] = hex[fp[i] >> 4];
        out[o++] = hex[fp[i] & 15];
    }
    out[o] = '\0';
    return out;
}

/* Appends one difference to buf (", " between them); once it no longer fits, "…" ends it. */
static void note(char *buf, size_t cap, size_t *used, int *full, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void note(char *buf, size_t cap, size_t *used, int *full, const char *fmt, ...)
{
    char one[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(one, sizeof one, fmt, ap);
    va_end(ap);
    const char *sep = *used ? ", " : "";
    size_t need = strlen(sep) + strlen(one);
    if (*full)
        return;
    if (*used + need + 4 >= cap) { /* room for " …" */
        if (*used + 5 < cap) {
            memcpy(buf + *used, ", \xe2\x80\xa6", 6);
            *used += 5;
        }
        *full = 1;
        return;
    }
    snprintf(buf + *used, cap - *used, "%s%s", sep, one);
    *used += need;
}

/* The difference of one item present on both sides. */
static void diff_one(const pft_topo_fp_t *self, size_t i, const pft_topo_fp_item_t *th, char *buf, size_t cap,
                     size_t *used, int *full)
{
    const pft_topo_fp_item_t *me = &self->items[i];
    if (strncmp(me->name, "node:", 5) == 0) {
        size_t h = PFT_TOPO_FP_DIGEST_LEN / 2;
        if (memcmp(me->digest, th->digest, h) != 0)
            note(buf, cap, used, full, "settings of node %s", me->name + 5);
        if (memcmp(me->digest + h, th->digest + h, h) != 0)
            note(buf, cap, used, full, "key of node %s", me->name + 5);
    } else if (strcmp(me->name, "edges") == 0) {
        if (self->edges[0])
            note(buf, cap, used, full, "edges (here: %s)", self->edges);
        else
            note(buf, cap, used, full, "edges");
    } else {
        note(buf, cap, used, full, "%s (%s here)", me->name, self->values[i][0] ? self->values[i] : "unset");
    }
}

size_t pft_topo_fp_diff(const pft_topo_fp_t *self, const pft_topo_fp_item_t *theirs, size_t n, char *buf,
                        size_t cap)
{
    size_t i = 0, j = 0, count = 0, used = 0;
    int full = 0;
    if (cap)
        buf[0] = '\0';
    while (i < self->n || j < n) {
        int c = i == self->n ? 1 : j == n ? -1 : strcmp(self->items[i].name, theirs[j].name);
        const char *name = c <= 0 ? self->items[i].name : theirs[j].name;
        int node = strncmp(name, "node:", 5) == 0;
        if (c == 0 && memcmp(self->items[i].digest, theirs[j].digest, PFT_TOPO_FP_DIGEST_LEN) != 0) {
            count++;
            if (cap)
                diff_one(self, i, &theirs[j], buf, cap, &used, &full);
        } else if (c != 0) {
            count++;
            if (cap)
                note(buf, cap, &used, &full, "%s %s (%s)", node ? "node" : "setting", name + (node ? 5 : 0),
                     c < 0 ? "only here" : "not here");
        }
        i += c <= 0;
        j += c >= 0;
    }
    return count;
}
