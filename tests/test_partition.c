/* Tests of pft_partition: iid, Dirichlet, label ranges, domains, size caps, determinism, bad specs. */
#include "pft_error.h"
#include "pft_partition.h"
#include "pft_test.h"
#include "pft_topo_attr.h"

#define NTR 700
#define NTE 210

static int32_t ytr[NTR], dtr[NTR], yte[NTE], dte[NTE];

static void make_labels(void)
{
    for (int i = 0; i < NTR; i++) {
        ytr[i] = i % 7;
        dtr[i] = (i / 7) % 4;
    }
    /* the test split's labels and domains differ row by row from the first NTE training ones, so a split that
     * filtered the test rows with the training arrays picks other rows */
    for (int i = 0; i < NTE; i++) {
        yte[i] = (i / (NTE / 7)) % 7;
        dte[i] = i % 4;
    }
}

/* The spec of partition text, through topology's parser (the one grammar; launch takes the topology's). */
static int parse(const char *text, pft_part_spec_t *spec)
{
    spec->text = text;
    return pft_topo_partition_parse(text, &spec->kind, &spec->beta, &spec->n_ranges);
}

/* Every row appears at most once across nodes; returns the number of distinct rows used. */
static int check_disjoint(const pft_partition_t *p, int n_nodes, int test, int n)
{
    static int seen[NTR];
    memset(seen, 0, sizeof seen);
    int used = 0;
    for (int i = 0; i < n_nodes; i++) {
        int c;
        const int32_t *idx = test ? pft_partition_test(p, i, &c) : pft_partition_train(p, i, &c);
        for (int j = 0; j < c; j++) {
            CHECK(idx[j] >= 0 && idx[j] < n);
            CHECK(seen[idx[j]] == 0);
            seen[idx[j]]++;
            used++;
            if (j)
                CHECK(idx[j] > idx[j - 1]);
        }
    }
    return used;
}

static void test_iid_equal_and_capped(void)
{
    pft_part_spec_t spec;
    CHECK(parse("iid", &spec) == 0);
    pft_part_node_t nodes[5] = {{NULL, -1, 0}, {NULL, -1, 0}, {NULL, -1, 0}, {NULL, -1, 0}, {NULL, -1, 0}};
    pft_partition_t *p = NULL;
    CHECK(pft_partition_split(&spec, nodes, 5, 7, ytr, NULL, NTR, yte, NULL, NTE, 1, &p) == 0);
    CHECK(check_disjoint(p, 5, 0, NTR) == NTR);
    CHECK(check_disjoint(p, 5, 1, NTE) == NTE);
    for (int i = 0; i < 5; i++) {
        int c;
        pft_partition_train(p, i, &c);
        CHECK(c == NTR / 5);
    }
    pft_partition_destroy(&p);
    for (int i = 0; i < 5; i++)
        nodes[i].size = 30;
    CHECK(pft_partition_split(&spec, nodes, 5, 7, ytr, NULL, NTR, yte, NULL, NTE, 1, &p) == 0);
    CHECK(check_disjoint(p, 5, 0, NTR) == 150);
    CHECK(check_disjoint(p, 5, 1, NTE) == NTE); /* test shares are never capped */
    pft_partition_destroy(&p);
    CHECK(p == NULL);
}

/* samples: a node's cap is a seeded random subset of its share, not its first or lowest rows. 5 iid nodes
 * hold 140 rows each (20 per class, spread over the whole index range, since the labels cycle row by row);
 * capped at 30, each node keeps rows of its own uncapped share only, from all over it: its smallest index in
 * the lowest quarter of the rows and its largest in the highest (a node's 30 lowest rows end near row 150),
 * and rows of at least 5 of the 7 classes (its first 30 in class order hold 2). For a random 30 of 140 an end
 * bound fails with probability 5e-5 and the class bound with 1e-7; the seed is fixed, so a pass is
 * reproducible. The same seed gives the same subsets, another seed other ones. */
static void test_iid_cap_random_subset(void)
{
    pft_part_spec_t spec;
    CHECK(parse("iid", &spec) == 0);
    pft_part_node_t full[5], capped[5];
    for (int i = 0; i < 5; i++) {
        full[i] = (pft_part_node_t){NULL, -1, 0};
        capped[i] = (pft_part_node_t){NULL, -1, 30};
    }
    pft_partition_t *pf = NULL, *pc = NULL, *pc2 = NULL, *po = NULL;
    CHECK(pft_partition_split(&spec, full, 5, 7, ytr, NULL, NTR, yte, NULL, NTE, 3, &pf) == 0);
    CHECK(pft_partition_split(&spec, capped, 5, 7, ytr, NULL, NTR, yte, NULL, NTE, 3, &pc) == 0);
    CHECK(pft_partition_split(&spec, capped, 5, 7, ytr, NULL, NTR, yte, NULL, NTE, 3, &pc2) == 0);
    CHECK(pft_partition_split(&spec, capped, 5, 7, ytr, NULL, NTR, yte, NULL, NTE, 4, &po) == 0);
    if (!pf || !pc || !pc2 || !po)
        goto done;
    int other = 0;
    for (int i = 0; i < 5; i++) {
        int nf, nc, n2, no, classes = 0, per[7] = {0};
        const int32_t *f = pft_partition_train(pf, i, &nf), *c = pft_partition_train(pc, i, &nc);
        const int32_t *c2 = pft_partition_train(pc2, i, &n2), *o = pft_partition_train(po, i, &no);
        CHECK(nf == NTR / 5 && nc == 30 && n2 == 30 && no == 30);
        for (int j = 0, k = 0; j < nc; j++) { /* both ascending: c is a subset of f */
            while (k < nf && f[k] < c[j])
                k++;
            CHECK_MSG(k < nf && f[k] == c[j], "node %d: capped row %d is not in its share", i, c[j]);
            per[ytr[c[j]]]++;
        }
        for (int k = 0; k < 7; k++)
            classes += per[k] > 0;
        CHECK_MSG(c[0] < NTR / 4 && c[nc - 1] >= 3 * NTR / 4 && classes >= 5,
                  "node %d: capped rows %d..%d of %d classes: not a random subset of its share", i, c[0],
                  c[nc - 1], classes);
        CHECK(memcmp(c, c2, sizeof *c * 30) == 0);
        other |= memcmp(c, o, sizeof *c * 30) != 0;
    }
    CHECK_MSG(other, "seeds 3 and 4 capped every node to the same rows");
done:
    pft_partition_destroy(&pf);
    pft_partition_destroy(&pc);
    pft_partition_destroy(&pc2);
    pft_partition_destroy(&po);
}

/* iid shares when the classes do not divide evenly (100 rows per class over 3 nodes): every node holds 33 or
 * 34 rows of each class and 233 or 234 rows in all, so no node collects every class's remainder. */
static void test_iid_remainders_spread(void)
{
    pft_part_spec_t spec;
    CHECK(parse("iid", &spec) == 0);
    pft_part_node_t nodes[3] = {{NULL, -1, 0}, {NULL, -1, 0}, {NULL, -1, 0}};
    pft_partition_t *p = NULL;
    CHECK(pft_partition_split(&spec, nodes, 3, 7, ytr, NULL, NTR, yte, NULL, NTE, 4, &p) == 0);
    if (!p)
        return;
    CHECK(check_disjoint(p, 3, 0, NTR) == NTR);
    for (int i = 0; i < 3; i++) {
        int n, per[7] = {0};
        const int32_t *idx = pft_partition_train(p, i, &n);
        for (int j = 0; j < n; j++)
            per[ytr[idx[j]]]++;
        CHECK_MSG(n == NTR / 3 || n == NTR / 3 + 1, "node %d holds %d training rows (700 over 3 nodes)", i,
                  n);
        for (int c = 0; c < 7; c++)
            CHECK_MSG(per[c] == 33 || per[c] == 34, "node %d holds %d rows of class %d (100 over 3)", i,
                      per[c], c);
    }
    pft_partition_destroy(&p);
}

static void test_deterministic(void)
{
    pft_part_spec_t spec;
    CHECK(parse("dirichlet:0.5", &spec) == 0);
    pft_part_node_t nodes[4] = {{NULL, -1, 0}, {NULL, -1, 0}, {NULL, -1, 0}, {NULL, -1, 0}};
    pft_partition_t *a = NULL, *b = NULL, *c = NULL;
    CHECK(pft_partition_split(&spec, nodes, 4, 7, ytr, NULL, NTR, yte, NULL, NTE, 9, &a) == 0);
    CHECK(pft_partition_split(&spec, nodes, 4, 7, ytr, NULL, NTR, yte, NULL, NTE, 9, &b) == 0);
    CHECK(pft_partition_split(&spec, nodes, 4, 7, ytr, NULL, NTR, yte, NULL, NTE, 10, &c) == 0);
    int differ = 0;
    for (int i = 0; i < 4; i++) {
        int na, nb, nc;
        const int32_t *ia = pft_partition_train(a, i, &na), *ib = pft_partition_train(b, i, &nb);
        pft_partition_train(c, i, &nc);
        CHECK(na == nb && memcmp(ia, ib, (size_t)na * 4) == 0);
        differ |= na != nc;
    }
    CHECK(differ);
    CHECK(check_disjoint(a, 4, 0, NTR) == NTR);
    pft_partition_destroy(&a);
    pft_partition_destroy(&b);
    pft_partition_destroy(&c);
}

static void test_dirichlet_skew(void)
{
    /* Small beta: most classes concentrate on one node. */
    pft_part_spec_t spec;
    CHECK(parse("dirichlet:0.05", &spec) == 0);
    CHECK_NEAR(spec.beta, 0.05, 1e-12);
    pft_part_node_t nodes[5] = {{NULL, -1, 0}, {NULL, -1, 0}, {NULL, -1, 0}, {NULL, -1, 0}, {NULL, -1, 0}};
    pft_partition_t *p = NULL;
    CHECK(pft_partition_split(&spec, nodes, 5, 7, ytr, NULL, NTR, yte, NULL, NTE, 3, &p) == 0);
    int dominated = 0;
    for (int c = 0; c < 7; c++) {
        int best = 0;
        for (int i = 0; i < 5; i++) {
            int n, k = 0;
            const int32_t *idx = pft_partition_train(p, i, &n);
            for (int j = 0; j < n; j++)
                k += ytr[idx[j]] == c;
            if (k > best)
                best = k;
        }
        dominated += best > 0.8 * (NTR / 7);
    }
    CHECK(dominated >= 5);
    pft_partition_destroy(&p);
}

/* Dirichlet(0.1) over 10 nodes leaves some node nearly empty on most draws; the proportions are drawn again
 * until every node holds at least PFT_PART_MIN_ROWS rows, still skewed and still a partition. */
static void test_dirichlet_min_rows(void)
{
    pft_part_spec_t spec;
    CHECK(parse("dirichlet:0.1", &spec) == 0);
    static pft_part_node_t nodes[400];
    for (int i = 0; i < 400; i++)
        nodes[i] = (pft_part_node_t){NULL, -1, 0};
    for (uint64_t seed = 0; seed < 5; seed++) {
        pft_partition_t *p = NULL;
        CHECK(pft_partition_split(&spec, nodes, 10, 7, ytr, NULL, NTR, yte, NULL, NTE, seed, &p) == 0);
        if (!p)
            continue;
        int least = NTR, most = 0;
        for (int i = 0; i < 10; i++) {
            int n;
            pft_partition_train(p, i, &n);
            least = n < least ? n : least;
            most = n > most ? n : most;
        }
        CHECK_MSG(least >= PFT_PART_MIN_ROWS, "seed %d: a node holds %d rows", (int)seed, least);
        CHECK_MSG(most > 2 * (NTR / 10), "seed %d: largest share %d", (int)seed, most); /* still skewed */
        CHECK(check_disjoint(p, 10, 0, NTR) == NTR);
        pft_partition_destroy(&p);
    }
    /* impossible: 700 rows over 400 nodes, each needing a row, at beta 0.1: a clear error, no partition */
    pft_partition_t *p = NULL;
    CHECK(pft_partition_split(&spec, nodes, 400, 7, ytr, NULL, NTR, yte, NULL, NTE, 1, &p) == PFT_EINVAL);
    CHECK(p == NULL);
    CHECK(strstr(pft_errmsg(), "raise beta") != NULL);
}

static void test_labels_and_domain(void)
{
    pft_part_spec_t spec;
    CHECK(parse("labels:0-3|4-6", &spec) == 0);
    CHECK(spec.n_ranges == 2);
    pft_part_node_t nodes[2] = {{NULL, -1, 0}, {NULL, -1, 0}};
    pft_partition_t *p = NULL;
    CHECK(pft_partition_split(&spec, nodes, 2, 7, ytr, NULL, NTR, yte, NULL, NTE, 0, &p) == 0);
    int n;
    const int32_t *idx = pft_partition_train(p, 0, &n);
    CHECK(n == 400);
    for (int j = 0; j < n; j++)
        CHECK(ytr[idx[j]] <= 3);
    idx = pft_partition_test(p, 1, &n);
    int want = 0; /* node 1's test rows: every test row labelled 4-6, counted from yte */
    for (int r = 0; r < NTE; r++)
        want += yte[r] >= 4;
    CHECK_MSG(n == want, "test split of node 1: %d rows, %d test rows are labelled 4-6", n, want);
    for (int j = 0; j < n; j++)
        CHECK_MSG(yte[idx[j]] >= 4, "test row %d has label %d", idx[j], yte[idx[j]]);
    pft_partition_destroy(&p);

    CHECK(parse("domain", &spec) == 0);
    pft_part_node_t dn[2] = {{NULL, 2, 0}, {NULL, 3, 0}};
    CHECK(pft_partition_split(&spec, dn, 2, 7, ytr, dtr, NTR, yte, dte, NTE, 0, &p) == 0);
    idx = pft_partition_train(p, 1, &n);
    CHECK(n == NTR / 4);
    for (int j = 0; j < n; j++)
        CHECK(dtr[idx[j]] == 3);
    idx = pft_partition_test(p, 1, &n);
    want = 0;
    for (int r = 0; r < NTE; r++)
        want += dte[r] == 3;
    CHECK_MSG(n == want, "test split of domain 3: %d rows, %d test rows are in domain 3", n, want);
    for (int j = 0; j < n; j++)
        CHECK_MSG(dte[idx[j]] == 3, "test row %d is in domain %d", idx[j], dte[idx[j]]);
    pft_partition_destroy(&p);
    /* domain without domain columns */
    CHECK(pft_partition_split(&spec, dn, 2, 7, ytr, NULL, NTR, yte, NULL, NTE, 0, &p) == PFT_EINVAL);
    CHECK(p == NULL);
}

static void test_bad_specs(void)
{
    pft_part_spec_t spec;
    CHECK(parse("dirichlet:", &spec) == PFT_EINVAL);
    CHECK(parse("dirichlet:-1", &spec) == PFT_EINVAL);
    CHECK(parse("dirichlet:abc", &spec) == PFT_EINVAL);
    CHECK(parse("random", &spec) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "random") != NULL);
    uint8_t flags[7];
    CHECK(pft_partition_parse_classes("0-3", 7, flags) == 0 && flags[3] && !flags[4]);
    CHECK(pft_partition_parse_classes("1,5-6", 7, flags) == 0 && flags[1] && !flags[2] && flags[6]);
    CHECK(pft_partition_parse_classes("0-7", 7, flags) == PFT_EINVAL);
    CHECK(pft_partition_parse_classes("3-1", 7, flags) == PFT_EINVAL);
    CHECK(pft_partition_parse_classes("x", 7, flags) == PFT_EINVAL);
    CHECK(pft_partition_parse_classes("", 7, flags) == PFT_EINVAL);
    /* three ranges for two nodes */
    CHECK(parse("labels:0|1|2", &spec) == 0);
    pft_part_node_t nodes[2] = {{NULL, -1, 0}, {NULL, -1, 0}};
    pft_partition_t *p = NULL;
    CHECK(pft_partition_split(&spec, nodes, 2, 7, ytr, NULL, NTR, yte, NULL, NTE, 0, &p) == PFT_EINVAL);
    int32_t bad[3] = {0, 9, 1};
    CHECK(parse("iid", &spec) == 0);
    CHECK(pft_partition_split(&spec, nodes, 2, 7, bad, NULL, 3, yte, NULL, 0, 0, &p) == PFT_EINVAL);
}

int main(void)
{
    make_labels();
    RUN(test_iid_equal_and_capped);
    RUN(test_iid_remainders_spread);
    RUN(test_iid_cap_random_subset);
    RUN(test_deterministic);
    RUN(test_dirichlet_skew);
    RUN(test_dirichlet_min_rows);
    RUN(test_labels_and_domain);
    RUN(test_bad_specs);
    return pft_test_done();
}
