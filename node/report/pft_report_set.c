/* pft_report_set: the inputs of `pftnet report`: launch results (results.json) and synth lines (*.jsonl),
 * loaded from files and directories in a deterministic order, each labelled with its experiment tag. */
#include "pft_report_set.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_FILE_BYTES ((size_t)256 << 20) /* a results.json of a 100-node run is a few MB */
#define MAX_DEPTH 32                       /* directory nesting searched; also stops symlink loops */
#define SYNTH_TAG_DEFAULT "gmm-family"

struct pft_report_set {
    pft_report_run_t *runs;
    size_t n_runs, cap_runs;
    pft_report_line_t *lines;
    size_t n_lines, cap_lines;
    const char **tags;
    size_t n_tags, cap_tags;
    char **strs; /* every string handed out, freed with the set */
    size_t n_strs, cap_strs;
    json_t **docs; /* every parsed document, released with the set */
    size_t n_docs, cap_docs;
};

/* Grows *v (elements of size sz) to hold at least n + 1. */
static int grow(void **v, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    void *p = nc <= SIZE_MAX / sz ? pft_realloc(*v, nc * sz) : NULL;
    if (!p)
        return pft_err(PFT_ENOMEM, "out of memory");
    *v = p;
    *cap = nc;
    return 0;
}

/* Takes ownership of s (NULL: out of memory) and returns it, or NULL after freeing it on failure. */
static char *keep(pft_report_set_t *self, char *s)
{
    if (!s || grow((void **)&self->strs, &self->cap_strs, self->n_strs, sizeof *self->strs)) {
        pft_free(s);
        return NULL;
    }
    self->strs[self->n_strs++] = s;
    return s;
}

static int keep_doc(pft_report_set_t *self, json_t *doc)
{
    if (grow((void **)&self->docs, &self->cap_docs, self->n_docs, sizeof *self->docs)) {
        json_decref(doc);
        return PFT_ENOMEM;
    }
    self->docs[self->n_docs++] = doc;
    return 0;
}

static int note_tag(pft_report_set_t *self, const char *tag)
{
    for (size_t i = 0; i < self->n_tags; i++)
        if (strcmp(self->tags[i], tag) == 0)
            return 0;
    if (grow((void **)&self->tags, &self->cap_tags, self->n_tags, sizeof *self->tags))
        return PFT_ENOMEM;
    self->tags[self->n_tags++] = tag;
    return 0;
}

pft_report_set_t *pft_report_set_new(void)
{
    return pft_calloc(1, sizeof(pft_report_set_t));
}

void pft_report_set_destroy(pft_report_set_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_report_set_t *self = *self_p;
    for (size_t i = 0; i < self->n_strs; i++)
        pft_free(self->strs[i]);
    for (size_t i = 0; i < self->n_docs; i++)
        json_decref(self->docs[i]);
    pft_free(self->strs);
    pft_free(self->docs);
    pft_free(self->runs);
    pft_free(self->lines);
    pft_free(self->tags);
    pft_free(self);
    *self_p = NULL;
}

size_t pft_report_set_runs(const pft_report_set_t *self, const pft_report_run_t **runs)
{
    *runs = self->runs;
    return self->n_runs;
}

size_t pft_report_set_lines(const pft_report_set_t *self, const pft_report_line_t **lines)
{
    *lines = self->lines;
    return self->n_lines;
}

size_t pft_report_set_tags(const pft_report_set_t *self, const char *const **tags)
{
    *tags = self->tags;
    return self->n_tags;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* "seed": an integer or a decimal string (as `pftnet check --json` writes 64-bit seeds); absent: 0. */
static int read_seed(const json_t *o, const char *where, long long *seed)
{
    const json_t *v = json_object_get(o, "seed");
    *seed = 0;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_integer(v)) {
        *seed = (long long)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        char *end;
        errno = 0;
        unsigned long long u = strtoull(json_string_value(v), &end, 10);
        if (!errno && end != json_string_value(v) && !*end) {
            *seed = (long long)u;
            return 0;
        }
    }
    return pft_err(PFT_EFORMAT, "%s: \"seed\" is not an integer", where);
}

/* An optional string member: absent/null → *out = NULL; another type is an error. */
static int read_opt_string(const json_t *o, const char *key, const char *where, const char **out)
{
    const json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return pft_err(PFT_EFORMAT, "%s: \"%s\" is not a string", where, key);
    *out = json_string_value(v);
    return 0;
}

/* The tag of a run without one: the topology file's basename without extension ("chain5" for
 * configs/chain5.dot). */
static char *default_tag(const json_t *root)
{
    const char *topo = json_string_value(json_object_get(root, "topology"));
    const char *b = topo ? base_name(topo) : "";
    const char *dot = strrchr(b, '.');
    size_t n = dot && dot != b ? (size_t)(dot - b) : strlen(b);
    if (n == 0) {
        b = "run";
        n = 3;
    }
    char *s = pft_alloc(n + 1);
    if (s) {
        memcpy(s, b, n);
        s[n] = '\0';
    }
    return s;
}

/* The variant of a run without one: "FedPFT <cov> K=<k>" from the first node that says. */
static char *default_variant(const json_t *nodes)
{
    size_t i;
    const json_t *n;
    json_array_foreach(nodes, i, n)
    {
        const char *cov = json_string_value(json_object_get(n, "cov"));
        const json_t *k = json_object_get(n, "k");
        if (cov && json_is_integer(k)) {
            char buf[96];
            snprintf(buf, sizeof buf, "FedPFT %s K=%lld", cov, (long long)json_integer_value(k));
            return pft_strdup(buf);
        }
    }
    return pft_strdup("FedPFT");
}

static int add_run(pft_report_set_t *self, const char *path, json_t *root)
{
    const json_t *nodes = json_object_get(root, "nodes");
    if (!json_is_array(nodes))
        return pft_err(PFT_EFORMAT, "%s: not a pftnet launch results.json (no \"nodes\" array)", path);
    size_t i;
    const json_t *n;
    json_array_foreach(nodes, i, n)
    {
        if (!json_is_object(n))
            return pft_err(PFT_EFORMAT, "%s: nodes[%zu] is not an object", path, i);
        const char *id;
        int rc = read_opt_string(n, "id", path, &id);
        if (rc)
            return rc;
        if (!id)
            return pft_err(PFT_EFORMAT, "%s: nodes[%zu] has no \"id\"", path, i);
    }
    const json_t *b = json_object_get(root, "baselines");
    if (b && !json_is_object(b) && !json_is_null(b))
        return pft_err(PFT_EFORMAT, "%s: \"baselines\" is not an object", path);
    pft_report_run_t r = {0};
    const char *tag, *variant;
    int rc = read_seed(root, path, &r.seed);
    if (!rc)
        rc = read_opt_string(root, "tag", path, &tag);
    if (!rc)
        rc = read_opt_string(root, "variant", path, &variant);
    if (rc)
        return rc;
    r.path = keep(self, pft_strdup(path));
    r.tag = keep(self, tag ? pft_strdup(tag) : default_tag(root));
    r.variant = keep(self, variant ? pft_strdup(variant) : default_variant(nodes));
    r.root = root;
    if (!r.path || !r.tag || !r.variant ||
        grow((void **)&self->runs, &self->cap_runs, self->n_runs, sizeof r))
        return pft_err(PFT_ENOMEM, "out of memory");
    self->runs[self->n_runs++] = r;
    return note_tag(self, r.tag);
}

static int add_line(pft_report_set_t *self, const char *path, int line, const char *path_kept, json_t *obj)
{
    char where[4200];
    snprintf(where, sizeof where, "%s:%d", path, line);
    if (!json_is_object(obj))
        return pft_err(PFT_EFORMAT, "%s: not a JSON object", where);
    if (!json_is_number(json_object_get(obj, "acc_synth")) || !json_is_string(json_object_get(obj, "cov")) ||
        !json_is_integer(json_object_get(obj, "k")))
        return pft_err(PFT_EFORMAT, "%s: not a `pftnet synth --json` line (needs acc_synth, cov, k)", where);
    pft_report_line_t l = {.path = path_kept, .line = line, .obj = obj};
    const char *tag;
    int rc = read_seed(obj, where, &l.seed);
    if (!rc)
        rc = read_opt_string(obj, "tag", where, &tag);
    if (rc)
        return rc;
    l.tag = tag ? tag : SYNTH_TAG_DEFAULT;
    if (grow((void **)&self->lines, &self->cap_lines, self->n_lines, sizeof l))
        return PFT_ENOMEM;
    self->lines[self->n_lines++] = l;
    return note_tag(self, l.tag);
}

static int parse_error(const char *path, const json_error_t *e, int line_offset)
{
    return pft_err(PFT_EFORMAT, "%s:%d:%d: not valid JSON: %s", path, e->line + line_offset, e->column,
                   e->text);
}

/* One JSON object per line; blank lines are skipped. */
static int load_lines(pft_report_set_t *self, const char *path, const char *buf, size_t len)
{
    const char *kept = keep(self, pft_strdup(path));
    if (!kept)
        return PFT_ENOMEM;
    int line = 0, any = 0;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - buf) : len;
        line++;
        size_t s = at;
        while (s < end && (buf[s] == ' ' || buf[s] == '\t' || buf[s] == '\r'))
            s++;
        if (s < end) {
            json_error_t e;
            json_t *o = json_loadb(buf + s, end - s, 0, &e);
            if (!o)
                return parse_error(path, &e, line - 1);
            int rc = keep_doc(self, o);
            if (!rc)
                rc = add_line(self, path, line, kept, o);
            if (rc)
                return rc;
            any = 1;
        }
        at = end + 1;
    }
    if (!any)
        return pft_err(PFT_EFORMAT, "%s: empty (expected `pftnet synth --json` lines)", path);
    return 0;
}

/* 1 if the first non-blank line of buf is a JSON document by itself. */
static int first_line_parses(const char *buf, size_t len)
{
    size_t s = 0;
    while (s < len && (buf[s] == ' ' || buf[s] == '\t' || buf[s] == '\r' || buf[s] == '\n'))
        s++;
    const char *nl = memchr(buf + s, '\n', len - s);
    size_t end = nl ? (size_t)(nl - buf) : len;
    json_error_t e;
    json_t *o = s < end ? json_loadb(buf + s, end - s, 0, &e) : NULL;
    int ok = o != NULL;
    json_decref(o);
    return ok;
}

static int load_file(pft_report_set_t *self, const char *path)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = pft_fsio_read(path, MAX_FILE_BYTES, &buf, &len);
    if (rc)
        return rc == PFT_ERANGE ? pft_err(rc, "%s: larger than %zu MB", path, MAX_FILE_BYTES >> 20) : rc;
    if (!ends_with(path, ".jsonl")) {
        json_error_t e;
        json_t *doc = json_loadb((const char *)buf, len, 0, &e);
        if (doc) {
            int is_object = json_is_object(doc), is_line = json_object_get(doc, "acc_synth") != NULL;
            rc = keep_doc(self, doc);
            if (!rc && !is_object)
                rc =
                    pft_err(PFT_EFORMAT,
                            "%s: neither a pftnet launch results.json nor synth lines (not an object)", path);
            else if (!rc && !is_line)
                rc = add_run(self, path, doc);
            else if (!rc)
                rc = load_lines(self, path, (const char *)buf, len);
            pft_free(buf);
            return rc;
        }
        /* not one document: a file of synth lines named .json (its first line is a document), or a broken
         * file */
        if (strcmp(base_name(path), "results.json") == 0 || !first_line_parses((const char *)buf, len)) {
            pft_free(buf);
            return parse_error(path, &e, 0);
        }
    }
    rc = load_lines(self, path, (const char *)buf, len);
    pft_free(buf);
    return rc;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_input_name(const char *name)
{
    return strcmp(name, "results.json") == 0 || ends_with(name, ".jsonl");
}

/* Adds the inputs under dir, entries in bytewise order; *found counts the files added. */
static int load_dir(pft_report_set_t *self, const char *dir, int depth, int *found)
{
    if (depth > MAX_DEPTH)
        return pft_err(PFT_EINVAL, "%s: directories nested deeper than %d (a symlink loop?)", dir, MAX_DEPTH);
    DIR *d = opendir(dir);
    if (!d)
        return pft_err(PFT_EIO, "%s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *s = pft_strdup(e->d_name);
        if (!s || grow((void **)&names, &cap, n, sizeof *names)) {
            pft_free(s);
            rc = pft_err(PFT_ENOMEM, "out of memory");
            break;
        }
        names[n++] = s;
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *p = pft_fsio_join(dir, names[i]);
        struct stat st;
        if (!p)
            rc = pft_err(PFT_ENOMEM, "out of memory");
        else if (stat(p, &st) != 0)
            rc = pft_err(PFT_EIO, "%s: %s", p, strerror(errno));
        else if (S_ISDIR(st.st_mode))
            rc = load_dir(self, p, depth + 1, found);
        else if (S_ISREG(st.st_mode) && is_input_name(names[i])) {
            rc = load_file(self, p);
            (*found)++;
        }
        pft_free(p);
    }
    for (size_t i = 0; i < n; i++)
        pft_free(names[i]);
    pft_free(names);
    return rc;
}

int pft_report_set_add_path(pft_report_set_t *self, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return pft_err(PFT_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return load_file(self, path);
    int found = 0;
    int rc = load_dir(self, path, 0, &found);
    if (rc == 0 && found == 0)
        return pft_err(PFT_EINVAL, "%s: no results.json or *.jsonl file in this directory or below", path);
    return rc;
}
