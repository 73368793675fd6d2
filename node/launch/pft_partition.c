/* pft_partition: deterministic dataset splits for the local multi-process simulation. */
#include "pft_partition.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_rng.h"
#include "pft_topo_attr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct pft_partition_t {
    int n_nodes;
    int32_t **train; /* per node, ascending */
    int32_t **test;
    int *n_train;
    int *n_test;
};

void pft_partition_spec(const pft_topo_run_t *run, pft_part_spec_t *spec)
{
    spec->kind = run->part_kind;
    spec->beta = run->part_beta;
    spec->n_ranges = run->part_ranges;
    spec->text = run->partition;
}

int pft_partition_parse_classes(const char *text, int n_classes, uint8_t *flags)
{
    return pft_topo_classes_parse(text, n_classes, flags); /* one parser for topology files and partitions */
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

void pft_partition_destroy(pft_partition_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_partition_t *self = *self_p;
    for (int i = 0; i < self->n_nodes; i++) {
        if (self->train)
            pft_free(self->train[i]);
        if (self->test)
            pft_free(self->test[i]);
    }
    pft_free(self->train);
    pft_free(self->test);
    pft_free(self->n_train);
    pft_free(self->n_test);
    pft_free(self);
    *self_p = NULL;
}

/* Appends row r to node i's list (lists are preallocated to n rows). */
static void put(int32_t **lists, int *counts, int i, int32_t r)
{
    lists[i][counts[i]++] = r;
}

/* Eligibility of a row for node i under the labels/domain filters (NULL filters accept all). */
static int eligible(const pft_part_spec_t *spec, uint8_t *const *cls, const pft_part_node_t *nodes, int i,
                    int y, int dom)
{
    if (spec->kind == PFT_TOPO_PART_LABELS && !cls[i][y])
        return 0;
    if (spec->kind == PFT_TOPO_PART_DOMAIN && nodes[i].domain != dom)
        return 0;
    return 1;
}

/* Splits one set of rows (train or test) into lists. props: Dirichlet proportions n_classes × n_nodes. */
static int split_rows(const pft_part_spec_t *spec, uint8_t *const *cls, const pft_part_node_t *nodes,
                      int n_nodes, int n_classes, const double *props, const int32_t *y, const int32_t *dom,
                      int n, pft_rng_t *rng, int32_t **lists, int *counts)
{
    int rc = PFT_ENOMEM;
    int32_t *rows = pft_alloc_array((size_t)n + 1, sizeof *rows);
    int *elig = pft_alloc_array((size_t)n_nodes + 1, sizeof *elig);
    if (!rows || !elig)
        goto done;
    for (int c = 0; c < n_classes; c++) {
        int m = 0;
        for (int r = 0; r < n; r++)
            if (y[r] == c)
                rows[m++] = r;
        pft_rng_shuffle(rng, rows, (size_t)m);
        if (spec->kind == PFT_TOPO_PART_IID) {
            /* stratified equal shares, rotating the start so remainders spread over nodes */
            for (int j = 0; j < m; j++)
                put(lists, counts, (j + c) % n_nodes, rows[j]);
        } else if (spec->kind == PFT_TOPO_PART_DIRICHLET) {
            double cum = 0;
            int j = 0;
            for (int i = 0; i < n_nodes; i++) {
                cum += props[(size_t)c * n_nodes + i];
                int end = i == n_nodes - 1 ? m : (int)lround(cum * m);
                for (; j < end && j < m; j++)
                    put(lists, counts, i, rows[j]);
            }
        } else {
            /* labels/domain: rows of the class, grouped by domain, round robin over eligible nodes */
            int next = 0;
            for (int j = 0; j < m; j++) {
                int r = rows[j], ne = 0;
                for (int i = 0; i < n_nodes; i++)
                    if (eligible(spec, cls, nodes, i, c, dom ? dom[r] : -1))
                        elig[ne++] = i;
                if (ne)
                    put(lists, counts, elig[(next++) % ne], r);
            }
        }
    }
    rc = 0;
done:
    pft_free(rows);
    pft_free(elig);
    return rc;
}

/* Labels and rows checked before anything is allocated. */
static int check_inputs(const pft_part_spec_t *spec, int n_nodes, int n_classes, const int32_t *ytr,
                        const int32_t *dtr, int ntr, const int32_t *yte, const int32_t *dte, int nte)
{
    if (n_nodes < 1 || n_classes < 1 || ntr < 0 || nte < 0)
        return pft_err(PFT_EINVAL, "partition: %d nodes, %d classes", n_nodes, n_classes);
    if (spec->kind == PFT_TOPO_PART_DOMAIN && (!dtr || (nte > 0 && !dte)))
        return pft_err(PFT_EINVAL,
                       "partition 'domain' needs train_domain.npy and test_domain.npy in the dataset");
    for (int r = 0; r < ntr; r++)
        if (ytr[r] < 0 || ytr[r] >= n_classes)
            return pft_err(PFT_EINVAL, "partition: training label %d at row %d is not in 0..%d", ytr[r], r,
                           n_classes - 1);
    for (int r = 0; r < nte; r++)
        if (yte[r] < 0 || yte[r] >= n_classes)
            return pft_err(PFT_EINVAL, "partition: test label %d at row %d is not in 0..%d", yte[r], r,
                           n_classes - 1);
    return 0;
}

/* An empty partition whose per-node lists can hold every row (ntr train, nte test); NULL when out of memory.
 */
static pft_partition_t *partition_new(int n_nodes, int ntr, int nte)
{
    pft_partition_t *self = pft_calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->n_nodes = n_nodes;
    self->train = pft_calloc((size_t)n_nodes, sizeof *self->train);
    self->test = pft_calloc((size_t)n_nodes, sizeof *self->test);
    self->n_train = pft_calloc((size_t)n_nodes, sizeof *self->n_train);
    self->n_test = pft_calloc((size_t)n_nodes, sizeof *self->n_test);
    if (!self->train || !self->test || !self->n_train || !self->n_test)
        goto fail;
    for (int i = 0; i < n_nodes; i++) {
        self->train[i] = pft_alloc_array((size_t)ntr + 1, sizeof(int32_t));
        self->test[i] = pft_alloc_array((size_t)nte + 1, sizeof(int32_t));
        if (!self->train[i] || !self->test[i])
            goto fail;
    }
    return self;
fail:
    pft_partition_destroy(&self);
    return NULL;
}

/* Labels: each node's class flags (n_classes bytes) into cls[i], from its own `classes` or else the spec's
 * i-th range. Other kinds: nothing. */
static int class_filters(const pft_part_spec_t *spec, const pft_part_node_t *nodes, int n_nodes,
                         int n_classes, uint8_t **cls)
{
    if (spec->kind != PFT_TOPO_PART_LABELS)
        return 0;
    for (int i = 0; i < n_nodes; i++) {
        char buf[1024];
        const char *set = nodes[i].classes;
        if (!set) {
            if (spec->n_ranges != n_nodes)
                return pft_err(
                    PFT_EINVAL,
                    "partition labels: %d ranges given for %d nodes (or set 'classes' on each node)",
                    spec->n_ranges, n_nodes);
            if (pft_topo_partition_range(spec->text, i, buf, sizeof buf) != 0)
                return pft_err(PFT_EINVAL, "partition labels: range %d is malformed", i);
            set = buf;
        }
        cls[i] = pft_alloc((size_t)n_classes);
        if (!cls[i])
            return PFT_ENOMEM;
        int rc = pft_partition_parse_classes(set, n_classes, cls[i]);
        if (rc)
            return rc;
    }
    return 0;
}

/* Domain: every node must name its domain. */
static int check_domains(const pft_part_spec_t *spec, const pft_part_node_t *nodes, int n_nodes)
{
    if (spec->kind == PFT_TOPO_PART_DOMAIN)
        for (int i = 0; i < n_nodes; i++)
            if (nodes[i].domain < 0)
                return pft_err(PFT_EINVAL, "partition domain: node %d has no 'domain' attribute", i);
    return 0;
}

/* Dirichlet: each class's node proportions props[c·n_nodes + i] ~ Dirichlet(beta), normalised gamma draws. */
static void draw_proportions(const pft_part_spec_t *spec, int n_nodes, int n_classes, pft_rng_t *rng,
                             double *props)
{
    for (int c = 0; c < n_classes; c++) {
        double s = 0;
        for (int i = 0; i < n_nodes; i++)
            s += props[(size_t)c * n_nodes + i] = pft_rng_gamma(rng, spec->beta);
        for (int i = 0; i < n_nodes; i++)
            props[(size_t)c * n_nodes + i] = s > 0 ? props[(size_t)c * n_nodes + i] / s : 1.0 / n_nodes;
    }
}

/* The training rows every node must hold under Dirichlet: PFT_PART_MIN_ROWS, or ntr / (2·n_nodes) when that
 * is smaller, and at least 1 when there are as many rows as nodes. */
static int dirichlet_min_rows(int ntr, int n_nodes)
{
    int min_rows = ntr / (2 * n_nodes) < PFT_PART_MIN_ROWS ? ntr / (2 * n_nodes) : PFT_PART_MIN_ROWS;
    if (min_rows < 1)
        min_rows = ntr >= n_nodes ? 1 : 0;
    return min_rows;
}

/* What split_rows needs besides the rows. */
typedef struct {
    const pft_part_spec_t *spec;
    uint8_t *const *cls;          /* labels: per-node class flags */
    const pft_part_node_t *nodes; /* the nodes' requests */
    int n_nodes, n_classes;
    double *props;  /* Dirichlet: n_classes × n_nodes proportions; NULL otherwise */
    pft_rng_t *rng; /* the partition's one random stream */
} split_ctx_t;

/* Splits the training rows into self->train. Dirichlet: with a small beta some node can draw (almost)
 * nothing; as in NIID-Bench (Li et al. 2022) the proportions are drawn again until every node holds at least
 * dirichlet_min_rows training rows, at most PFT_PART_MAX_DRAWS times. */
static int split_train(pft_partition_t *self, const split_ctx_t *x, const int32_t *ytr, const int32_t *dtr,
                       int ntr)
{
    int dirichlet = x->spec->kind == PFT_TOPO_PART_DIRICHLET, min_rows = dirichlet_min_rows(ntr, x->n_nodes);
    for (int attempt = 0;;) {
        if (dirichlet)
            draw_proportions(x->spec, x->n_nodes, x->n_classes, x->rng, x->props);
        for (int i = 0; i < x->n_nodes; i++)
            self->n_train[i] = 0;
        int rc = split_rows(x->spec, x->cls, x->nodes, x->n_nodes, x->n_classes, x->props, ytr, dtr, ntr,
                            x->rng, self->train, self->n_train);
        if (rc || !dirichlet)
            return rc;
        int least = ntr;
        for (int i = 0; i < x->n_nodes; i++)
            least = self->n_train[i] < least ? self->n_train[i] : least;
        if (least >= min_rows)
            return 0;
        if (++attempt >= PFT_PART_MAX_DRAWS)
            return pft_err(
                PFT_EINVAL,
                "partition dirichlet:%g: after %d draws some node still holds fewer than %d training "
                "rows; raise beta or use fewer nodes",
                x->spec->beta, PFT_PART_MAX_DRAWS, min_rows);
    }
}

/* Caps each node's training rows at its size (a seeded random subset) and sorts every list. */
static void cap_and_sort(pft_partition_t *self, const pft_part_node_t *nodes, pft_rng_t *rng)
{
    for (int i = 0; i < self->n_nodes; i++) {
        if (nodes[i].size > 0 && nodes[i].size < self->n_train[i]) {
            pft_rng_shuffle(rng, self->train[i], (size_t)self->n_train[i]);
            self->n_train[i] = nodes[i].size;
        }
        qsort(self->train[i], (size_t)self->n_train[i], sizeof(int32_t), cmp_i32);
        qsort(self->test[i], (size_t)self->n_test[i], sizeof(int32_t), cmp_i32);
    }
}

int pft_partition_split(const pft_part_spec_t *spec, const pft_part_node_t *nodes, int n_nodes, int n_classes,
                        const int32_t *ytr, const int32_t *dtr, int ntr, const int32_t *yte,
                        const int32_t *dte, int nte, uint64_t seed, pft_partition_t **out)
{
    int rc = check_inputs(spec, n_nodes, n_classes, ytr, dtr, ntr, yte, dte, nte);
    if (rc)
        return rc;
    rc = PFT_ENOMEM;
    pft_rng_t *rng = pft_rng_new(pft_rng_derive(seed, 0x7061727469ULL, 0));
    pft_partition_t *self = NULL;
    uint8_t **cls = pft_calloc((size_t)n_nodes, sizeof *cls);
    split_ctx_t x = {spec, cls, nodes, n_nodes, n_classes, NULL, rng};
    if (!rng || !cls || !(self = partition_new(n_nodes, ntr, nte)))
        goto fail;
    if ((rc = class_filters(spec, nodes, n_nodes, n_classes, cls)) ||
        (rc = check_domains(spec, nodes, n_nodes)))
        goto fail;
    if (spec->kind == PFT_TOPO_PART_DIRICHLET &&
        !(x.props = pft_alloc_array((size_t)n_classes * n_nodes, sizeof *x.props))) {
        rc = PFT_ENOMEM;
        goto fail;
    }
    if ((rc = split_train(self, &x, ytr, dtr, ntr)) ||
        (rc = split_rows(spec, cls, nodes, n_nodes, n_classes, x.props, yte, dte, nte, rng, self->test,
                         self->n_test)))
        goto fail;
    cap_and_sort(self, nodes, rng);
    *out = self;
    self = NULL;
fail:
    if (rc == PFT_ENOMEM)
        pft_err(rc, "partition: out of memory");
    if (cls)
        for (int i = 0; i < n_nodes; i++)
            pft_free(cls[i]);
    pft_free(cls);
    pft_free(x.props);
    pft_rng_destroy(&rng);
    pft_partition_destroy(&self);
    return rc;
}

const int32_t *pft_partition_train(const pft_partition_t *self, int node, int *count)
{
    *count = self->n_train[node];
    return self->train[node];
}

const int32_t *pft_partition_test(const pft_partition_t *self, int node, int *count)
{
    *count = self->n_test[node];
    return self->test[node];
}
