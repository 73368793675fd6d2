/* pft_launch_data: each node's data for a launch: a simulation's dataset partitioned into DIR/<id>/data, or
 * the nodes' own files; and the global evaluation set (the union of the test shares). */
#include "pft_launch_int.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_npy.h"
#include "pft_partition.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The whole dataset of a simulation. */
typedef struct {
    pft_dataset_t *train, *test; /* DATASET/{train,test}_{x,y}.npy */
    int32_t *dtr, *dte;          /* DATASET/{train,test}_domain.npy, one per row; NULL: no such file */
} source_t;

static const char *const share_files[4] = {"train_x.npy", "train_y.npy", "test_x.npy", "test_y.npy"};
static const char *const share_attrs[4] = {"train", "labels", "test", "test_labels"};

static int load_optional_i32(const char *dir, const char *name, int32_t **out, int64_t *n)
{
    char *p = pft_fsio_join(dir, name);
    if (!p)
        return PFT_ENOMEM;
    int rc = 0;
    *out = NULL;
    if (pft_fsio_exists(p))
        rc = pft_npy_read_i32(p, out, n);
    pft_free(p);
    return rc;
}

static void source_free(source_t *s)
{
    pft_free(s->dtr);
    pft_free(s->dte);
    pft_dataset_destroy(&s->train);
    pft_dataset_destroy(&s->test);
}

/* Loads the dataset folder dir into *s (zeroed first; the caller frees it with source_free, even on error).
 */
static int source_load(const char *dir, source_t *s)
{
    *s = (source_t){0};
    char *p[4];
    for (int k = 0; k < 4; k++)
        p[k] = pft_fsio_join(dir, share_files[k]);
    int64_t ndtr = 0, ndte = 0;
    int rc = p[0] && p[1] && p[2] && p[3] ? 0 : PFT_ENOMEM;
    if (rc == 0)
        rc = pft_npy_load_dataset(p[0], p[1], 0, &s->train);
    if (rc == 0)
        rc = pft_npy_load_dataset(p[2], p[3], pft_dataset_n_classes(s->train), &s->test);
    if (rc == 0)
        rc = load_optional_i32(dir, "train_domain.npy", &s->dtr, &ndtr);
    if (rc == 0)
        rc = load_optional_i32(dir, "test_domain.npy", &s->dte, &ndte);
    if (rc == 0 &&
        ((s->dtr && ndtr != pft_dataset_n(s->train)) || (s->dte && ndte != pft_dataset_n(s->test))))
        rc = pft_err(PFT_EINVAL, "%s: domain files do not match the number of rows", dir);
    if (rc == 0 && pft_dataset_d(s->train) != pft_dataset_d(s->test))
        rc = pft_err(PFT_EINVAL,
                     "%s has %d columns, but %s has %d: train and test features must have one dimension",
                     p[2], pft_dataset_d(s->test), p[0], pft_dataset_d(s->train));
    for (int k = 0; k < 4; k++)
        pft_free(p[k]);
    return rc;
}

/* Partitions s across the nodes with data (data = false nodes, the aggregators, take no share: the dataset is
 * split across the others). share[i]: node i's index in *part, or -1 for none. */
static int source_split(const pft_topo_t *topo, const source_t *s, int *share, pft_partition_t **part)
{
    const pft_topo_run_t *run = pft_topo_run(topo);
    size_t nn = pft_topo_node_count(topo);
    pft_part_spec_t spec;
    pft_partition_spec(run, &spec);
    pft_part_node_t *pn = pft_calloc(nn, sizeof *pn);
    if (!pn)
        return pft_err(PFT_ENOMEM, "out of memory");
    int n_data = 0;
    for (size_t i = 0; i < nn; i++) {
        const pft_topo_node_t *n = pft_topo_node(topo, i);
        share[i] = n->has_data ? n_data : -1;
        if (!n->has_data)
            continue;
        pn[n_data].classes = n->classes;
        pn[n_data].domain = n->domain;
        pn[n_data].size = n->samples;
        n_data++;
    }
    int rc = pft_partition_split(&spec, pn, n_data, pft_dataset_n_classes(s->train), pft_dataset_y(s->train),
                                 s->dtr, pft_dataset_n(s->train), pft_dataset_y(s->test), s->dte,
                                 pft_dataset_n(s->test), run->seed, part);
    pft_free(pn);
    return rc;
}

/* Writes rows idx[0..n) of ds as dir/xname and dir/yname; *copy (if not NULL) gets them as a new dataset. */
static int write_rows(const pft_dataset_t *ds, const int32_t *idx, int n, const char *dir, const char *xname,
                      const char *yname, pft_dataset_t **copy)
{
    pft_dataset_t *sub = NULL;
    int rc = pft_dataset_subset(ds, (const int *)idx, n, &sub);
    char *xp = pft_fsio_join(dir, xname), *yp = pft_fsio_join(dir, yname);
    if (rc == 0 && (!xp || !yp))
        rc = pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0)
        rc = pft_npy_write_f32(xp, pft_dataset_x(sub), pft_dataset_n(sub), pft_dataset_d(sub));
    if (rc == 0)
        rc = pft_npy_write_i32(yp, pft_dataset_y(sub), pft_dataset_n(sub));
    pft_free(xp);
    pft_free(yp);
    if (rc == 0 && copy)
        *copy = sub;
    else
        pft_dataset_destroy(&sub);
    return rc;
}

/* Writes node c's share (index share in part, -1: none) to c->dir/data, keeps its rows in c->train and
 * c->test, and names the files written in snap[0..4) (NULL: not written), in share_files' order. */
static int write_share(pft_launch_child_t *c, const pft_partition_t *part, int share, const source_t *s,
                       char **snap, int quiet)
{
    if (share < 0) {
        c->train = pft_dataset_new(0, pft_dataset_d(s->train), pft_dataset_n_classes(s->train));
        if (!c->train)
            return pft_err(PFT_ENOMEM, "out of memory");
        if (!quiet)
            fprintf(stderr, "  %-12s no data (data = false)\n", c->id);
        return 0;
    }
    int ntr, nte;
    const int32_t *itr = pft_partition_train(part, share, &ntr), *ite = pft_partition_test(part, share, &nte);
    if (ntr == 0)
        return pft_err(PFT_EINVAL, "partition gives node '%s' no training rows", c->id);
    char *dd = pft_fsio_join(c->dir, "data");
    int rc = dd ? pft_fsio_mkdirs(dd) : PFT_ENOMEM;
    if (rc == 0)
        rc = write_rows(s->train, itr, ntr, dd, share_files[0], share_files[1], &c->train);
    if (rc == 0 && nte > 0)
        rc = write_rows(s->test, ite, nte, dd, share_files[2], share_files[3], &c->test);
    for (int k = 0; rc == 0 && k < 4; k++)
        snap[k] = (k < 2 || nte > 0) ? pft_fsio_join(dd, share_files[k]) : NULL;
    pft_free(dd);
    if (rc == 0 && !quiet)
        fprintf(stderr, "  %-12s %5d train rows, %5d test rows\n", c->id, ntr, nte);
    return rc;
}

/* Points each node's train/labels/test/test_labels at the files in snap (4 per node), once all exist, and
 * writes its share's public row count (`rows`, the cap receivers hold its counts to): each set re-validates
 * the topology, so one set per node, not per file. */
static int point_topology(pft_launch_t *self, char *const *snap)
{
    int rc = 0;
    for (size_t i = 0; i < self->nn && rc == 0; i++) {
        const char *kv[11];
        char rows[32];
        int m = 0;
        for (int k = 0; k < 4; k++)
            if (snap[i * 4 + (size_t)k]) {
                kv[m++] = share_attrs[k];
                kv[m++] = snap[i * 4 + (size_t)k];
            }
        if (snap[i * 4] && self->ch[i].train) {
            snprintf(rows, sizeof rows, "%d", pft_dataset_n(self->ch[i].train));
            kv[m++] = "rows";
            kv[m++] = rows;
        }
        kv[m] = NULL;
        char id[128];
        snprintf(id, sizeof id, "%s",
                 self->ch[i].id); /* ch[i].id points into the topology, stale after a set */
        if (m)
            rc = pft_topo_set_node_attrs(self->topo, id, kv);
    }
    return rc;
}

/* Simulation: partitions the dataset, writes each node's share and points the topology at it. */
static int partition_dataset(pft_launch_t *self, int quiet)
{
    const pft_topo_run_t *run = pft_topo_run(self->topo);
    size_t nn = self->nn;
    source_t src = {0};
    pft_partition_t *part = NULL;
    char **snap = pft_calloc(nn * 4, sizeof *snap);
    int *share = pft_calloc(nn, sizeof *share);
    int rc = snap && share ? source_load(run->dataset, &src) : pft_err(PFT_ENOMEM, "out of memory");
    if (rc)
        goto done;
    if (!quiet)
        fprintf(stderr, "dataset %s: %d train / %d test rows, d=%d, %d classes; partition %s\n", run->dataset,
                pft_dataset_n(src.train), pft_dataset_n(src.test), pft_dataset_d(src.train),
                pft_dataset_n_classes(src.train), run->partition ? run->partition : "iid");
    rc = source_split(self->topo, &src, share, &part);
    for (size_t i = 0; i < nn && rc == 0; i++) /* a big topology: the first and last five shares */
        rc = write_share(&self->ch[i], part, share[i], &src, snap + i * 4,
                         quiet || (nn > 12 && i >= 5 && i + 5 < nn));
    if (rc == 0 && !quiet && nn > 12)
        fprintf(stderr, "  (%zu more nodes: see each DIR/<id>/data/)\n", nn - 10);
    if (rc == 0)
        rc = point_topology(self, snap);
done:
    for (size_t i = 0; snap && i < nn * 4; i++)
        pft_free(snap[i]);
    pft_free(snap);
    pft_free(share);
    pft_partition_destroy(&part);
    source_free(&src);
    return rc;
}

/* The features of node n loaded as ds (its train file, else its test file) have the width of the first ones
 * met (*d, 0: none yet; *who and *file name them): else an error naming both nodes and files. */
static int check_width(const pft_topo_node_t *n, const pft_dataset_t *ds, const char *file, int *d,
                       const char **who, const char **first)
{
    if (!ds)
        return 0;
    if (*d == 0) {
        *d = pft_dataset_d(ds), *who = n->id, *first = file;
        return 0;
    }
    if (pft_dataset_d(ds) == *d)
        return 0;
    return pft_err(
        PFT_EINVAL,
        "node %s: %s has %d columns, but node %s's %s has %d: every node's features (train and test) "
        "must have one dimension",
        n->id, file, pft_dataset_d(ds), *who, *first, *d);
}

/* Not a simulation: loads each node's own files (values checked: finite, integer labels) into train[i] and
 * test[i], all of one width. The caller frees them, also on error. */
static int load_nodes(const pft_topo_t *topo, pft_dataset_t **train, pft_dataset_t **test)
{
    int d = 0;
    const char *who = NULL, *first = NULL;
    for (size_t i = 0; i < pft_topo_node_count(topo); i++) {
        const pft_topo_node_t *n = pft_topo_node(topo, i);
        int rc = n->has_data && n->train ? pft_npy_load_dataset(n->train, n->labels, 0, &train[i])
                                         : 0; /* NULL: no data, or its own files are not in this file */
        if (rc == 0 && n->test)
            rc = pft_npy_load_dataset(n->test, n->test_labels, 0, &test[i]);
        if (rc)
            return pft_err_wrap(rc, "node %s", n->id);
        if ((rc = check_width(n, train[i], n->train, &d, &who, &first)) ||
            (rc = check_width(n, test[i], n->test, &d, &who, &first)))
            return rc;
    }
    return 0;
}

/* Not a simulation: loads each node's own files for the baselines and the global test set. */
static int load_own_data(pft_launch_t *self)
{
    pft_dataset_t **train = pft_calloc(self->nn + 1, sizeof *train),
                  **test = pft_calloc(self->nn + 1, sizeof *test);
    int rc = train && test ? load_nodes(self->topo, train, test) : pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; train && test && i < self->nn; i++) {
        self->ch[i].train = train[i];
        self->ch[i].test = test[i];
    }
    pft_free(train);
    pft_free(test);
    return rc;
}

/* Adds the rows of ds per class into row[0..nc) (labels are checked non-negative at load). */
static void add_counts(const pft_dataset_t *ds, uint64_t *row, size_t nc)
{
    const int32_t *y = pft_dataset_y(ds);
    for (int i = 0; i < pft_dataset_n(ds); i++)
        if ((size_t)y[i] < nc)
            row[y[i]]++;
}

/* Every node's training rows per class from train[i] (NULL: none here) into *rows (new, nn × *nc; *nc the
 * most classes of any). A node with data whose rows are not here (another organisation's) leaves no
 * forecast: *rows NULL, *nc 0. */
static int count_datasets(const pft_topo_t *topo, pft_dataset_t *const *train, uint64_t **rows, size_t *nc)
{
    size_t nn = pft_topo_node_count(topo), m = 0;
    *rows = NULL, *nc = 0;
    for (size_t i = 0; i < nn; i++) {
        if (!train[i] && pft_topo_node(topo, i)->has_data)
            return 0;
        if (train[i] && (size_t)pft_dataset_n_classes(train[i]) > m)
            m = (size_t)pft_dataset_n_classes(train[i]);
    }
    if (m == 0)
        return 0;
    if (!(*rows = pft_calloc(nn * m, sizeof **rows)))
        return pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; i < nn; i++)
        if (train[i])
            add_counts(train[i], *rows + i * m, m);
    *nc = m;
    return 0;
}

int pft_launch__class_rows(const pft_launch_t *self, uint64_t **rows, size_t *nc)
{
    pft_dataset_t **train = pft_calloc(self->nn + 1, sizeof *train);
    if (!train)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; i < self->nn; i++)
        train[i] = self->ch[i].train;
    int rc = count_datasets(self->topo, train, rows, nc);
    pft_free(train);
    return rc;
}

/* A simulation: the dataset split as a launch splits it, each node's training rows per class into *rows. */
static int count_split(const pft_topo_t *topo, const source_t *src, uint64_t **rows, size_t *nc)
{
    size_t nn = pft_topo_node_count(topo), m = (size_t)pft_dataset_n_classes(src->train);
    int *share = pft_calloc(nn + 1, sizeof *share);
    pft_partition_t *part = NULL;
    *rows = pft_calloc(nn * m + 1, sizeof **rows);
    int rc = share && *rows ? source_split(topo, src, share, &part) : pft_err(PFT_ENOMEM, "out of memory");
    const int32_t *y = pft_dataset_y(src->train);
    for (size_t i = 0; rc == 0 && i < nn; i++) {
        int n = 0;
        const int32_t *idx = share[i] < 0 ? NULL : pft_partition_train(part, share[i], &n);
        for (int j = 0; j < n; j++)
            (*rows)[i * m + (size_t)y[idx[j]]]++;
    }
    pft_partition_destroy(&part);
    pft_free(share);
    if (rc) {
        pft_free(*rows);
        *rows = NULL;
    }
    *nc = rc ? 0 : m;
    return rc;
}

int pft_launch_check_data(const pft_topo_t *topo, uint64_t **rows, size_t *nc)
{
    const pft_topo_run_t *run = pft_topo_run(topo);
    uint64_t *r = NULL;
    size_t m = 0;
    int rc;
    if (pft_topo_is_simulation(topo)) {
        source_t src = {0};
        rc = source_load(run->dataset, &src);
        if (rc == 0 && rows)
            rc = count_split(topo, &src, &r, &m);
        source_free(&src);
    } else {
        size_t nn = pft_topo_node_count(topo);
        pft_dataset_t **train = pft_calloc(nn + 1, sizeof *train), **test = pft_calloc(nn + 1, sizeof *test);
        rc = train && test ? load_nodes(topo, train, test) : pft_err(PFT_ENOMEM, "out of memory");
        if (rc == 0 && rows)
            rc = count_datasets(topo, train, &r, &m);
        for (size_t i = 0; train && test && i < nn; i++) {
            pft_dataset_destroy(&train[i]);
            pft_dataset_destroy(&test[i]);
        }
        pft_free(train);
        pft_free(test);
    }
    if (rows)
        *rows = r, *nc = m;
    return rc;
}

int pft_launch__load_data(pft_launch_t *self)
{
    if (pft_topo_is_simulation(self->topo))
        return partition_dataset(self, self->o.quiet || self->o.json);
    return load_own_data(self);
}

/* The union of the nodes' test splits, in node order: one allocation and one copy of each split (a
 * concatenation per node copied the growing union again each time: quadratic in the nodes, 0.17 s of the
 * launcher's 1.35 s of CPU at 64 nodes). */
int pft_launch__concat_tests(const pft_launch_t *self, pft_dataset_t **out)
{
    *out = NULL;
    int64_t n = 0;
    int d = 0, nc = 1;
    for (size_t i = 0; i < self->nn; i++) {
        const pft_dataset_t *t = self->ch[i].test;
        if (!t)
            continue;
        if (d && pft_dataset_d(t) != d)
            return pft_err(PFT_EINVAL, "node %s's test rows have %d columns, the others' %d", self->ch[i].id,
                           pft_dataset_d(t), d);
        d = pft_dataset_d(t);
        n += pft_dataset_n(t);
        if (pft_dataset_n_classes(t) > nc)
            nc = pft_dataset_n_classes(t);
    }
    if (d == 0)
        return 0;
    if (n > INT_MAX)
        return pft_err(PFT_EINVAL, "the nodes' test splits hold %lld rows, more than %d", (long long)n,
                       INT_MAX);
    pft_dataset_t *all = pft_dataset_new((int)n, d, nc);
    if (!all)
        return pft_err(PFT_ENOMEM, "out of memory for %lld test rows", (long long)n);
    float *x = pft_dataset_x_mut(all);
    int32_t *y = pft_dataset_y_mut(all);
    for (size_t i = 0, at = 0; i < self->nn; i++) {
        const pft_dataset_t *t = self->ch[i].test;
        if (!t)
            continue;
        size_t m = (size_t)pft_dataset_n(t);
        memcpy(x + at * (size_t)d, pft_dataset_x(t), m * (size_t)d * sizeof *x);
        memcpy(y + at, pft_dataset_y(t), m * sizeof *y);
        at += m;
    }
    *out = all;
    return 0;
}
