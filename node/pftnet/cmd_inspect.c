/* cmd_inspect: `pftnet inspect BUNDLE [--json] [--key PUB]` prints what a bundle file (a wire message)
 * holds: id, run, producer, flags, dtype, d, classes or statistics parts, counts, provenance, parents, bytes
 * and the signature's state (verified against PUB when given). */
#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_cli.h"
#include "pft_cmd.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_keys.h"
#include "pft_topo_fingerprint.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINES 30 /* text: classes, parts and provenance entries shown before "… N more" */
#define MAX_PAIRS 12 /* text: label:n pairs shown on one line */
#define EXIT_BADSIG 3

typedef struct {
    int label;
    uint64_t n;
} pair_t;

typedef enum { PAIRS_CLASSES, PAIRS_PART, PAIRS_PROV, PAIRS_SUM } pairs_src_t;

typedef struct {
    const char *state; /* "none", "present", "valid", "invalid" */
    size_t len;        /* signature bytes */
    const char *key;   /* --key as given, NULL without */
    char fp[PFT_KEY_FINGERPRINT_LEN + 1];
} sigstate_t;

static int cmp_pair(const void *a, const void *b)
{
    int x = ((const pair_t *)a)->label, y = ((const pair_t *)b)->label;
    return (x > y) - (x < y);
}

/* Part i's (label, n) pairs, clear or masked (a masked part lists every class of its layout, 0 rows too). */
static void part_pairs(const pft_bundle_t *b, int i, pair_t *v, int *n)
{
    for (int j = 0; j < pft_bundle_part_n_classes(b, i); j++) {
        v[*n].label = 0;
        pft_bundle_part_class(b, i, j, &v[*n].label, &v[*n].n);
        (*n)++;
    }
}

/* (label, n) pairs sorted by label: the GMM classes, part i's classes, provenance entry i's counts, or
 * the classes summed over every part; NULL when out of memory (or nothing to list, *n = 0). */
static pair_t *collect(const pft_bundle_t *b, pairs_src_t src, int i, int *n)
{
    size_t cap = 1;
    if (src == PAIRS_SUM && pft_bundle_is_stats(b))
        for (int p = 0; p < pft_bundle_n_parts(b); p++)
            cap += (size_t)pft_bundle_part_n_classes(b, p);
    else
        cap += (size_t)(src == PAIRS_PART   ? pft_bundle_part_n_classes(b, i)
                        : src == PAIRS_PROV ? pft_bundle_prov_n_labels(b, i)
                                            : pft_bundle_n_classes(b));
    pair_t *v = pft_alloc(cap * sizeof *v);
    *n = 0;
    if (!v)
        return NULL;
    if (src == PAIRS_PART) {
        part_pairs(b, i, v, n);
    } else if (src == PAIRS_PROV) {
        for (*n = 0; *n < pft_bundle_prov_n_labels(b, i); (*n)++)
            pft_bundle_prov_entry(b, i, *n, &v[*n].label, &v[*n].n);
    } else if (!pft_bundle_is_stats(b)) {
        for (*n = 0; *n < pft_bundle_n_classes(b); (*n)++)
            v[*n] = (pair_t){pft_bundle_class_label(b, *n), pft_bundle_class_count(b, *n)};
    } else { /* summed over the parts */
        for (int p = 0; p < pft_bundle_n_parts(b); p++)
            part_pairs(b, p, v, n);
        qsort(v, (size_t)*n, sizeof *v, cmp_pair);
        int m = 0;
        for (int j = 0; j < *n; j++) {
            if (m && v[m - 1].label == v[j].label)
                v[m - 1].n += v[j].n;
            else
                v[m++] = v[j];
        }
        *n = m;
    }
    return v;
}

/* "60 rows: 0:9 1:8 …" on stdout (the first MAX_PAIRS pairs). */
static void print_pairs(const pft_bundle_t *b, pairs_src_t src, int i)
{
    int n;
    pair_t *v = collect(b, src, i, &n);
    uint64_t total = 0;
    for (int j = 0; j < n; j++)
        total += v[j].n;
    printf("%llu rows:", (unsigned long long)total);
    for (int j = 0; j < n && j < MAX_PAIRS; j++)
        printf(" %d:%llu", v[j].label, (unsigned long long)v[j].n);
    if (n > MAX_PAIRS)
        printf(" … %d more", n - MAX_PAIRS);
    pft_free(v);
}

static json_t *json_pairs(const pft_bundle_t *b, pairs_src_t src, int i)
{
    int n;
    pair_t *v = collect(b, src, i, &n);
    json_t *a = json_array();
    for (int j = 0; j < n; j++)
        json_array_append_new(a, json_pack("{s:i,s:I}", "label", v[j].label, "n", (json_int_t)v[j].n));
    pft_free(v);
    return a;
}

static void print_family(const pft_bundle_t *b)
{
    if (!pft_bundle_is_stats(b)) {
        int nc = pft_bundle_n_classes(b);
        printf("family     GMM, %d classes\n", nc);
        if (nc)
            printf("  %7s %10s  %-8s %4s %5s\n", "label", "n", "cov", "K", "rank");
        for (int i = 0; i < nc && i < MAX_LINES; i++) {
            const pft_gmm_t *g = pft_bundle_class_gmm(b, i);
            printf("  %7d %10llu  %-8s %4d ", pft_bundle_class_label(b, i),
                   (unsigned long long)pft_bundle_class_count(b, i), pft_cov_name(pft_gmm_cov(g)),
                   pft_gmm_k(g));
            if (pft_gmm_cov(g) == PFT_COV_LOWRANK)
                printf("%5d\n", pft_gmm_rank(g));
            else
                printf("%5s\n", "-");
        }
        if (nc > MAX_LINES)
            printf("  … %d more classes\n", nc - MAX_LINES);
        return;
    }
    int np = pft_bundle_n_parts(b);
    printf("family     statistics, %d part%s\n", np, np == 1 ? "" : "s");
    for (int i = 0; i < np && i < MAX_LINES; i++) {
        int nc = pft_bundle_part_n_contributors(b, i);
        printf("  part %-3d %-5s contributors ", i, pft_gstat_kind_name(pft_bundle_part_kind(b, i)));
        for (int j = 0; j < nc && j < 8; j++)
            printf("%s%s", j ? "," : "", pft_bundle_part_contributor(b, i, j));
        if (nc > 8)
            printf(",… %d more", nc - 8);
        printf("; ");
        print_pairs(b, PAIRS_PART, i);
        const pft_bundle_mask_t *m = pft_bundle_part_mask(b, i);
        if (m)
            printf("\n           masked for opener %s, label \"%s\", bound %llu%s", m->opener, m->label,
                   (unsigned long long)m->bound, m->div ? ", with a DP noise share" : "");
        printf("\n");
    }
    if (np > MAX_LINES)
        printf("  … %d more parts\n", np - MAX_LINES);
}

/* The topology fingerprint the bundle carries, as `pftnet check` prints one, into out; "none" without one. */
static const char *topology_text(const pft_bundle_t *b, char out[PFT_TOPO_FP_TEXT_LEN])
{
    _Static_assert(PFT_BUNDLE_FP_LEN == PFT_TOPO_FP_LEN, "one fingerprint length");
    const uint8_t *fp = pft_bundle_fingerprint(b, NULL, NULL);
    return fp ? pft_topo_fp_text(fp, out) : "none";
}

static void print_text(const char *path, const pft_bundle_t *b, const char *idhex, size_t len, size_t plen,
                       const sigstate_t *s)
{
    char fp[PFT_TOPO_FP_TEXT_LEN];
    printf("file       %s\nid         %s\nrun        %s\nproducer   %s\ntopology   %s\n", path, idhex,
           pft_bundle_run_id(b), pft_bundle_producer(b), topology_text(b, fp));
    printf("flags      %u%s\ndtype      %s\nd          %d\n", pft_bundle_flags(b),
           pft_bundle_flags(b) & PFT_BUNDLE_COMPLETE ? " (complete)" : "",
           pft_bundle_dtype(b) == PFT_DTYPE_F16 ? "fp16" : "fp32", pft_bundle_dim(b));
    print_family(b);
    printf("counts     ");
    print_pairs(b, PAIRS_SUM, 0);
    int nn = pft_bundle_prov_n_nodes(b);
    printf("\nprovenance %d node%s\n", nn, nn == 1 ? "" : "s");
    for (int i = 0; i < nn && i < MAX_LINES; i++) {
        double eps, delta;
        printf("  %-12s ", pft_bundle_prov_node(b, i));
        print_pairs(b, PAIRS_PROV, i);
        if (pft_bundle_prov_dp(b, i, &eps, &delta))
            printf("  DP (ε = %g, δ = %g)", eps, delta);
        printf("\n");
    }
    if (nn > MAX_LINES)
        printf("  … %d more nodes\n", nn - MAX_LINES);
    int npar = pft_bundle_n_parents(b);
    printf("parents    %d\n", npar);
    for (int i = 0; i < npar && i < MAX_LINES; i++) {
        char hex[2 * PFT_BUNDLE_ID_LEN + 1];
        printf("  %s\n", pft_bundle_id_hex(pft_bundle_parent(b, i), hex));
    }
    if (npar > MAX_LINES)
        printf("  … %d more parents\n", npar - MAX_LINES);
    printf("bytes      message %zu, payload %zu, formula %zu\n", len, plen, pft_bundle_formula_bytes(b));
    if (!strcmp(s->state, "none"))
        printf("signature  none%s\n", s->key ? " (nothing to verify with --key)" : "");
    else if (!strcmp(s->state, "present"))
        printf("signature  present (%zu bytes), not verified\n", s->len);
    else
        printf(
            "signature  %s %s (fingerprint %s)\n", !strcmp(s->state, "valid") ? "valid for" : "INVALID for",
            strncmp(s->key, PFT_KEY_PUBLIC_PREFIX, strlen(PFT_KEY_PUBLIC_PREFIX)) ? s->key : "the inline key",
            s->fp);
}

static json_t *build_json(const char *path, const pft_bundle_t *b, const char *idhex, size_t len, size_t plen,
                          const sigstate_t *s)
{
    json_t *o =
        json_pack("{s:s,s:s,s:s,s:s,s:i,s:b,s:s,s:i,s:s}", "file", path, "id", idhex, "run",
                  pft_bundle_run_id(b), "producer", pft_bundle_producer(b), "flags", (int)pft_bundle_flags(b),
                  "complete", (pft_bundle_flags(b) & PFT_BUNDLE_COMPLETE) != 0, "dtype",
                  pft_bundle_dtype(b) == PFT_DTYPE_F16 ? "fp16" : "fp32", "d", pft_bundle_dim(b), "family",
                  pft_bundle_is_stats(b) ? "statistics" : "gmm");
    char fp[PFT_TOPO_FP_TEXT_LEN];
    json_object_set_new(o, "topology_fingerprint",
                        pft_bundle_fingerprint(b, NULL, NULL) ? json_string(topology_text(b, fp))
                                                              : json_null());
    json_t *cl = json_array(), *parts = json_array(), *prov = json_array(), *par = json_array();
    for (int i = 0; i < pft_bundle_n_classes(b); i++) {
        const pft_gmm_t *g = pft_bundle_class_gmm(b, i);
        json_t *c = json_pack("{s:i,s:I,s:s,s:i}", "label", pft_bundle_class_label(b, i), "n",
                              (json_int_t)pft_bundle_class_count(b, i), "cov", pft_cov_name(pft_gmm_cov(g)),
                              "k", pft_gmm_k(g));
        json_object_set_new(c, "rank",
                            pft_gmm_cov(g) == PFT_COV_LOWRANK ? json_integer(pft_gmm_rank(g)) : json_null());
        json_array_append_new(cl, c);
    }
    for (int i = 0; i < pft_bundle_n_parts(b); i++) {
        json_t *con = json_array();
        for (int j = 0; j < pft_bundle_part_n_contributors(b, i); j++)
            json_array_append_new(con, json_string(pft_bundle_part_contributor(b, i, j)));
        const pft_bundle_mask_t *m = pft_bundle_part_mask(b, i);
        json_t *mj = m ? json_pack("{s:s,s:s,s:i,s:I,s:I}", "opener", m->opener, "label", m->label, "frac_bits",
                                   m->frac_bits, "bound", (json_int_t)m->bound, "div", (json_int_t)m->div)
                       : json_null();
        json_array_append_new(parts, json_pack("{s:s,s:o,s:o,s:o}", "kind",
                                               pft_gstat_kind_name(pft_bundle_part_kind(b, i)), "contributors",
                                               con, "classes", json_pairs(b, PAIRS_PART, i), "masked", mj));
    }
    for (int i = 0; i < pft_bundle_prov_n_nodes(b); i++) {
        double eps, delta;
        int dp = pft_bundle_prov_dp(b, i, &eps, &delta);
        json_array_append_new(
            prov, json_pack("{s:s,s:o,s:o}", "node", pft_bundle_prov_node(b, i), "counts",
                            json_pairs(b, PAIRS_PROV, i), "dp",
                            dp ? json_pack("{s:f,s:f}", "eps", eps, "delta", delta) : json_null()));
    }
    for (int i = 0; i < pft_bundle_n_parents(b); i++) {
        char hex[2 * PFT_BUNDLE_ID_LEN + 1];
        json_array_append_new(par, json_string(pft_bundle_id_hex(pft_bundle_parent(b, i), hex)));
    }
    json_object_set_new(o, "classes", cl);
    json_object_set_new(o, "parts", parts);
    json_object_set_new(o, "counts", json_pairs(b, PAIRS_SUM, 0));
    json_object_set_new(o, "provenance", prov);
    json_object_set_new(o, "parents", par);
    json_object_set_new(o, "bytes",
                        json_pack("{s:I,s:I,s:I}", "message", (json_int_t)len, "payload", (json_int_t)plen,
                                  "formula", (json_int_t)pft_bundle_formula_bytes(b)));
    json_object_set_new(o, "signature",
                        json_pack("{s:s,s:I,s:s?,s:s?}", "state", s->state, "bytes", (json_int_t)s->len,
                                  "key", s->key, "fingerprint", s->key ? s->fp : NULL));
    return o;
}

/* Reads and decodes path; 0, or 1 after printing why. */
static int load(const char *path, uint8_t **msg, size_t *len, pft_envelope_t *env, pft_bundle_t **b)
{
    pft_bundle_limits_t lim;
    pft_bundle_limits_default(&lim);
    if (pft_fsio_read(path, lim.max_bytes, msg, len)) {
        fprintf(stderr, "pftnet inspect: %s\n", pft_errmsg());
        return 1;
    }
    if (pft_bundle_decode(*msg, *len, &lim, b) || pft_envelope_parse(*msg, *len, &lim, env)) {
        fprintf(stderr, "pftnet inspect: %s: %s\n", path, pft_errmsg());
        return 1;
    }
    return 0;
}

int pft_cmd_inspect(int argc, char **argv)
{
    int json = 0;
    const char *key = NULL;
    const pft_opt_t opts[] = {
        {"json", PFT_OPT_FLAG, &json, NULL, 1, 0, 0, NULL, "print one JSON object on stdout (every entry)"},
        {"key", PFT_OPT_STRING, &key, NULL, 1, 0, 0, "PUB",
         "verify the signature with this public key (a .pub file or the key line inline)"},
        {NULL, 0, NULL, NULL, 0, 0, 0, NULL, NULL},
    };
    const pft_cli_t cli = {
        .prog = "pftnet inspect",
        .positional = "BUNDLE",
        .min_pos = 1,
        .max_pos = 1,
        .summary =
            "Prints what a bundle file holds (a node's bundle.pftb, complete.pftb or inbox/* file):\n"
            "id, run, producer, flags, dtype, d, per-class GMM families or statistics parts, counts,\n"
            "provenance, parents, bytes and the signature's state. Exit 0; 1 if the file cannot be read\n"
            "or decoded; 2 on bad usage or an unusable --key; 3 with --key if the bundle is unsigned or\n"
            "its signature does not verify with that key.",
        .opts = opts,
    };
    const char *pos[1] = {NULL};
    int n_pos = 0, rc = pft_cli_parse(&cli, argc, argv, pos, &n_pos);
    if (rc)
        return rc == 1 ? 0 : 2;
    pft_pubkey_t pub;
    sigstate_t s = {"none", 0, key, ""};
    if (key && pft_pubkey_resolve(key, &pub)) {
        fprintf(stderr, "pftnet inspect: --key: %s\n", pft_errmsg());
        return 2;
    }
    uint8_t *msg = NULL, id[PFT_BUNDLE_ID_LEN];
    size_t len = 0;
    pft_envelope_t env;
    pft_bundle_t *b = NULL;
    int code = load(pos[0], &msg, &len, &env, &b);
    if (code == 0) {
        char idhex[2 * PFT_BUNDLE_ID_LEN + 1];
        pft_bundle_hash(env.payload, env.payload_len, id);
        pft_bundle_id_hex(id, idhex);
        s.len = env.sig ? env.sig_len : 0;
        if (key) {
            pft_pubkey_fingerprint(&pub, s.fp);
            s.state = !env.sig                                             ? "none"
                      : pft_keys_verify_message(&pub, msg, len, NULL) == 0 ? "valid"
                                                                           : "invalid";
            code = strcmp(s.state, "valid") ? EXIT_BADSIG : 0;
        } else if (env.sig) {
            s.state = "present";
        }
        if (json) {
            json_t *o = build_json(pos[0], b, idhex, len, env.payload_len, &s);
            char *text =
                o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12)) : NULL;
            json_decref(o);
            if (text)
                printf("%s\n", text);
            else
                fprintf(stderr, "pftnet inspect: out of memory\n"), code = 1;
            free(text);
        } else {
            print_text(pos[0], b, idhex, len, env.payload_len, &s);
        }
    }
    pft_bundle_destroy(&b);
    pft_free(msg);
    return code;
}
