/* Tests of the secure-aggregation foundations together: contributions in fixed point (pft_fixed), masked with
 * pairwise masks (pft_mask) as the plan says (pft_secplan), carried along the topology's hand-offs part by
 * part, opened by the plan's opener; every node's clear view equals the sum of its view's contributions bit
 * for bit, nothing masked decodes elsewhere, and DP noise shares of σ²/noise_div give every view at least σ².
 */
#include <sodium.h>
#include <stdint.h>

#include "pft_fixed.h"
#include "pft_keys.h"
#include "pft_mask.h"
#include "pft_secplan.h"
#include "pft_test_topo.h"

#define NW 8192 /* words per contribution */
#define MAXV 64 /* nodes at most (sets are bitmasks) */
#define RUN_ID "flow"
static const uint8_t LABEL[] = "g0:s";

typedef struct {
    uint64_t set;
    uint64_t *w;
} part_t;

typedef struct {
    size_t n;
    const pft_topo_t *t;
    const pft_secplan_t *p;
    pft_keypair_t *kp[MAXV];
    pft_pubkey_t pk[MAXV];
    uint64_t *own[MAXV];     /* clear words of each contributor (with its noise share) */
    uint64_t *masked[MAXV];  /* own words plus masks (group members) */
    part_t held[MAXV][MAXV]; /* masked parts received, distinct sets */
    size_t n_held[MAXV];
    uint64_t clear_set[MAXV]; /* clear aggregate received or opened (0: none) */
    uint64_t *clear[MAXV];
    double limit;        /* per contribution */
    double sigma;        /* DP: σ of a view; 0: no noise */
    double *noise[MAXV]; /* the shares, for the check */
    uint64_t missing;    /* star dropout: members that never deliver */
    size_t share_div;    /* the shares are σ²/share_div */
} flow_t;

static uint64_t s_rng = 99;
static uint64_t next64(void)
{
    uint64_t z = (s_rng += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}
static double unit(void)
{
    return ((double)(next64() >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void)
{
    return sqrt(-2.0 * log(unit())) * cos(6.283185307179586 * unit());
}

static uint64_t bit(size_t v)
{
    return (uint64_t)1 << v;
}

/* Each contributor's values: rows 10 + v, values in ±rows·0.9 plus a noise share N(0, σ²/D). */
static void contribute(flow_t *f)
{
    double share = f->sigma / sqrt((double)f->share_div);
    double *v = malloc(NW * sizeof *v);
    for (size_t u = 0; u < f->n; u++) {
        if (!pft_topo_node(f->t, u)->has_data)
            continue;
        f->own[u] = malloc(NW * sizeof(uint64_t));
        f->noise[u] = malloc(NW * sizeof(double));
        double rows = 10.0 + (double)u;
        for (int j = 0; j < NW; j++) {
            f->noise[u][j] = share * gauss();
            v[j] = rows * 0.9 * (2 * unit() - 1) + f->noise[u][j];
        }
        CHECK(pft_fixed_encode(v, NW, f->limit, f->own[u]) == 0);
        f->masked[u] = malloc(NW * sizeof(uint64_t));
        memcpy(f->masked[u], f->own[u], NW * sizeof(uint64_t));
        const pft_secplan_node_t *nd = pft_secplan_node(f->p, u);
        pft_pubkey_t peers[MAXV];
        for (size_t k = 0; k < nd->n_mask_peers; k++)
            peers[k] = f->pk[nd->mask_peers[k]];
        if (nd->mask_group == 0)
            CHECK(pft_mask_add(f->kp[u], RUN_ID, peers, nd->n_mask_peers, LABEL, sizeof LABEL - 1,
                               f->masked[u], NW) == 0);
    }
    free(v);
}

/* Dropout: without the survivors' reveals the sum does not open; each survivor reveals its use key with each
 * missing member and the opener cancels those terms. */
static void reveal(flow_t *f, uint64_t alive, uint64_t *sum)
{
    double *out = malloc(NW * sizeof *out);
    CHECK(pft_fixed_decode(sum, NW, 1e6, out) == PFT_ERANGE);
    free(out);
    for (size_t s = 0; s < f->n; s++)
        for (size_t x = 0; (alive & bit(s)) && x < f->n; x++) {
            if (!(f->missing & bit(x)))
                continue;
            uint8_t key[PFT_MASK_KEY_LEN];
            CHECK(pft_mask_use_key(f->kp[s], RUN_ID, &f->pk[x], LABEL, sizeof LABEL - 1, key) == 0);
            CHECK(pft_mask_cancel_revealed(key, &f->pk[s], &f->pk[x], sum, NW) == 0);
            sodium_memzero(key, sizeof key);
        }
}

/* The opener removes every member's masks from the sum of its (disjoint) parts: the clear sum of the group.
 */
static void open_group(flow_t *f, size_t o)
{
    const pft_secplan_group_t *g = pft_secplan_group(f->p, 0);
    uint64_t want = 0, got = 0, *sum = calloc(NW, sizeof *sum);
    for (size_t k = 0; k < g->n_members; k++)
        want |= bit(g->members[k]) & ~f->missing;
    for (size_t i = 0; i < f->n_held[o]; i++) {
        CHECK_MSG((got & f->held[o][i].set) == 0, "opener holds overlapping parts");
        got |= f->held[o][i].set;
        pft_fixed_add(sum, f->held[o][i].w, NW);
    }
    CHECK_MSG(got == want, "opener %s holds %llx of the group %llx", pft_topo_node(f->t, o)->id,
              (unsigned long long)got, (unsigned long long)want);
    pft_pubkey_t peers[MAXV];
    size_t np = 0;
    for (size_t k = 0; k < g->n_members; k++)
        if (want & bit(g->members[k]))
            peers[np++] = f->pk[g->members[k]];
    CHECK(pft_mask_remove(f->kp[o], RUN_ID, peers, np, LABEL, sizeof LABEL - 1, sum, NW) == 0);
    if (f->missing)
        reveal(f, want, sum);
    if (pft_topo_node(f->t, o)->has_data)
        pft_fixed_add(sum, f->own[o], NW);
    f->clear[o] = sum;
    f->clear_set[o] = want | (pft_topo_node(f->t, o)->has_data ? bit(o) : 0);
}

/* The clear aggregate node u holds now (opening it if u is the opener): its received one plus its own rows.
 */
static void ensure_clear(flow_t *f, size_t u)
{
    if (u == pft_secplan_group(f->p, 0)->opener) {
        if (!f->clear[u])
            open_group(f, u);
        return;
    }
    if (f->clear[u] && pft_topo_node(f->t, u)->has_data && !(f->clear_set[u] & bit(u))) {
        pft_fixed_add(f->clear[u], f->own[u], NW);
        f->clear_set[u] |= bit(u);
    }
}

/* Sender u's outbound part of the contributors `set`: its held parts inside it and its own masked words. */
static uint64_t *build_part(flow_t *f, size_t u, uint64_t set)
{
    uint64_t *w = calloc(NW, sizeof *w), got = 0;
    for (size_t i = 0; i < f->n_held[u]; i++) {
        uint64_t s = f->held[u][i].set;
        CHECK_MSG((s & set) == 0 || (s & ~set) == 0, "a held part straddles an outbound part");
        if ((s & ~set) == 0 && (s & got) == 0) {
            pft_fixed_add(w, f->held[u][i].w, NW);
            got |= s;
        }
    }
    if (set & bit(u)) {
        pft_fixed_add(w, f->masked[u], NW);
        got |= bit(u);
    }
    CHECK_MSG(got == set, "node %s cannot build part %llx (has %llx)", pft_topo_node(f->t, u)->id,
              (unsigned long long)set, (unsigned long long)got);
    return w;
}

static void deliver_part(flow_t *f, size_t to, uint64_t set, uint64_t *w)
{
    for (size_t i = 0; i < f->n_held[to]; i++)
        if (f->held[to][i].set == set) { /* the same part along two paths: the same words */
            CHECK(memcmp(f->held[to][i].w, w, NW * sizeof *w) == 0);
            free(w);
            return;
        }
    f->held[to][f->n_held[to]++] = (part_t){set, w};
}

static void handoff(flow_t *f, const pft_handoff_t *h, const pft_secplan_msg_t *msg)
{
    size_t u = h->from;
    if (f->missing & bit(u))
        return; /* never delivers */
    if (!msg->masked) {
        if (!msg->n_contrib)
            return;
        ensure_clear(f, u);
        uint64_t set = 0;
        for (size_t k = 0; k < msg->n_contrib; k++)
            set |= bit(msg->contrib[k]);
        CHECK_MSG(set == f->clear_set[u], "clear hand-off %s -> %s", pft_topo_node(f->t, u)->id,
                  pft_topo_node(f->t, h->to)->id);
        if (!f->clear[h->to]) {
            f->clear[h->to] = malloc(NW * sizeof(uint64_t));
            memcpy(f->clear[h->to], f->clear[u], NW * sizeof(uint64_t));
            f->clear_set[h->to] = set;
        }
        return;
    }
    for (size_t k = 0; k < msg->n_contrib; k++) {
        if (k > 0 && msg->part[k] == msg->part[k - 1])
            continue;
        uint64_t set = 0;
        for (size_t j = 0; j < msg->n_contrib; j++)
            set |= msg->part[j] == msg->part[k] ? bit(msg->contrib[j]) : 0;
        deliver_part(f, h->to, set, build_part(f, u, set));
    }
}

/* Every view: the clear words equal the sum of its contributors' words exactly; masked parts held by a
 * non-opener do not decode; with DP, the view's noise has variance ≥ σ² (≈ shares·σ²/D). */
static void check_views(flow_t *f, const char *name)
{
    size_t o = pft_secplan_group(f->p, 0)->opener;
    for (size_t v = 0; v < f->n; v++) {
        const pft_secplan_node_t *nd = pft_secplan_node(f->p, v);
        for (size_t i = 0; v != o && i < f->n_held[v]; i++) {
            double *out = malloc(NW * sizeof *out);
            CHECK_MSG(pft_fixed_decode(f->held[v][i].w, NW, 1e6, out) == PFT_ERANGE,
                      "%s: %s decodes a masked part", name, pft_topo_node(f->t, v)->id);
            free(out);
        }
        if (nd->n_view <= (size_t)nd->contributor)
            continue;
        ensure_clear(f, v);
        uint64_t set = 0, *want = calloc(NW, sizeof *want);
        for (size_t k = 0; k < nd->n_view; k++) {
            if (f->missing & bit(nd->view[k]))
                continue;
            set |= bit(nd->view[k]);
            pft_fixed_add(want, f->own[nd->view[k]], NW);
        }
        CHECK_MSG(f->clear[v] && set == f->clear_set[v], "%s: view of %s", name, pft_topo_node(f->t, v)->id);
        if (f->clear[v])
            CHECK_MSG(memcmp(want, f->clear[v], NW * sizeof *want) == 0, "%s: %s's sum is not exact", name,
                      pft_topo_node(f->t, v)->id);
        if (f->sigma > 0) { /* the noise v does not know: every share in its view but its own */
            double ss = 0, shares = 0;
            for (int j = 0; j < NW; j++) {
                double z = 0;
                for (size_t k = 0; k < nd->n_view; k++)
                    z +=
                        nd->view[k] != v && !(f->missing & bit(nd->view[k])) ? f->noise[nd->view[k]][j] : 0.0;
                ss += z * z;
            }
            for (size_t k = 0; k < nd->n_view; k++)
                shares += nd->view[k] != v && !(f->missing & bit(nd->view[k]));
            double var = ss / NW, expect = shares * f->sigma * f->sigma / (double)f->share_div;
            CHECK_MSG(shares >= (double)f->share_div && fabs(var / expect - 1) < 0.08 &&
                          var >= 0.92 * f->sigma * f->sigma,
                      "%s: %s's unknown noise variance %.3f, expected %.3f (σ² = %.3f)", name,
                      pft_topo_node(f->t, v)->id, var, expect, f->sigma * f->sigma);
        }
        free(want);
    }
}

static void flow_free(flow_t *f)
{
    for (size_t v = 0; v < f->n; v++) {
        pft_keypair_destroy(&f->kp[v]);
        free(f->own[v]);
        free(f->masked[v]);
        free(f->clear[v]);
        free(f->noise[v]);
        for (size_t i = 0; i < f->n_held[v]; i++)
            free(f->held[v][i].w);
    }
}

/* Plans text at m = 2, runs every hand-off in order (but the missing clients': a star's dropout, the noise
 * shares at tolerance t_drop), checks every view. */
static void run_flow_(const char *name, const char *text, double sigma, const char *missing, size_t t_drop)
{
    pft_topo_t *t = NULL;
    pft_secplan_t *p = NULL;
    CHECK_MSG(load(text, SKIP, &t) == 0, "%s: %s", name, pft_errmsg());
    if (t)
        CHECK_MSG(pft_secplan_new(t, 2, NULL, &p) == 0, "%s: %s", name, pft_errmsg());
    if (!p || pft_topo_node_count(t) > MAXV) {
        pft_topo_destroy(&t);
        return;
    }
    flow_t *f = calloc(1, sizeof *f);
    f->n = pft_topo_node_count(t);
    f->t = t;
    f->p = p;
    f->limit = 200.0;
    f->sigma = sigma;
    f->share_div = pft_secplan_share_div(p, t_drop);
    CHECK(f->share_div > 0);
    size_t miss[MAXV], n_miss = 0;
    for (size_t v = 0; missing && v < f->n; v++)
        if (strstr(missing, pft_topo_node(t, v)->id)) {
            f->missing |= bit(v);
            miss[n_miss++] = v;
        }
    CHECK(pft_secplan_dropout_ok(p, t, 0, miss, n_miss, sigma > 0, t_drop) == 0);
    for (size_t v = 0; v < f->n; v++) {
        uint8_t seed[PFT_KEY_SEED_LEN] = {(uint8_t)v, 7, 7};
        f->kp[v] = pft_keypair_from_seed(seed);
        f->pk[v] = *pft_keypair_public(f->kp[v]);
    }
    contribute(f);
    const pft_handoff_t *h;
    const pft_secplan_msg_t *msg;
    size_t nh = pft_topo_handoffs(t, &h);
    CHECK(pft_secplan_msgs(p, &msg) == nh);
    for (size_t i = 0; i < nh; i++)
        handoff(f, &h[i], &msg[i]);
    check_views(f, name);
    flow_free(f);
    free(f);
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
}

static void run_flow(const char *name, const char *text, double sigma)
{
    run_flow_(name, text, sigma, NULL, 0);
}

static char s_text[8192];

static const char *star_text(int k)
{
    int w = snprintf(s_text, sizeof s_text, "digraph s { " SIM "\n server [data = false]\n");
    for (int i = 0; i < k; i++)
        w += snprintf(s_text + w, sizeof s_text - (size_t)w, " c%02d -> server\n", i + 1);
    snprintf(s_text + w, sizeof s_text - (size_t)w, "}\n");
    return s_text;
}

static const char *line_text(int k, int ring)
{
    int w = snprintf(s_text, sizeof s_text, "digraph c { " SIM "%s\n n0", ring ? " start = n0" : "");
    for (int i = 1; i < k; i++)
        w += snprintf(s_text + w, sizeof s_text - (size_t)w, " -> n%d", i);
    snprintf(s_text + w, sizeof s_text - (size_t)w, "%s\n}\n", ring ? " -> n0" : "");
    return s_text;
}

#define DIAMOND "digraph d { " SIM "\n a -> b\n a -> c\n b -> d\n c -> d\n}"
#define MESH4 "digraph m { " SIM " root = a\n a -> b\n a -> c\n b -> a\n b -> d\n c -> b\n c -> d\n d -> a\n}"
#define INTREE                                                                                               \
    "digraph i { " SIM                                                                                       \
    "\n node [data = false] r1 r2 root\n node [data = true]\n {x1 x2 x3} -> r1\n {y1 y2} -> r2\n"            \
    " {r1 r2} -> root\n}"

static void test_exact(void)
{
    run_flow("star5", star_text(5), 0);
    run_flow("star50", star_text(50), 0);
    run_flow("chain3", line_text(3, 0), 0);
    run_flow("chain5", line_text(5, 0), 0);
    run_flow("ring5", line_text(5, 1), 0);
    run_flow("ring8", line_text(8, 1), 0);
    run_flow("diamond", DIAMOND, 0);
    run_flow("mesh4", MESH4, 0);
    run_flow("in-tree", INTREE, 0);
    /* sparse pairs (secagg_degree): the masks of the plan's fewer peers still cancel in the opened sum */
    run_flow("ring12, degree 4",
             "digraph r { " SIM
             " start = n0 secagg_degree = 4\n n0 -> n1 -> n2 -> n3 -> n4 -> n5 -> n6 -> n7 -> "
             "n8 -> n9 -> n10 -> n11 -> n0\n}",
             0);
    run_flow("in-tree, degree 2",
             "digraph i { " SIM " secagg_degree = 2\n node [data = false] r1 r2 root\n node [data = true]\n"
             " {x1 x2 x3} -> r1\n {y1 y2} -> r2\n {r1 r2} -> root\n}",
             0);
    run_flow("ring12 dp, degree 2",
             "digraph r { " SIM
             " start = n0 secagg_degree = 2\n n0 -> n1 -> n2 -> n3 -> n4 -> n5 -> n6 -> n7 -> "
             "n8 -> n9 -> n10 -> n11 -> n0\n}",
             3.0);
}

/* DP shares σ²/noise_div: every view's unknown noise has variance ≥ σ² (checked per view above). */
static void test_noise_shares(void)
{
    run_flow("star20 dp", star_text(20), 3.0);
    run_flow("chain5 dp", line_text(5, 0), 3.0);
    run_flow("ring5 dp", line_text(5, 1), 3.0);
    run_flow("diamond dp", DIAMOND, 3.0);
}

/* A star's clients that never deliver: the survivors' reveals let the aggregator open their sum exactly; with
 * DP and a tolerance of 2, shares σ²/(D − 2) keep σ² in the view after 2 dropouts. */
static void test_dropout(void)
{
    run_flow_("star5, c03 missing", star_text(5), 0, "c03", 0);
    run_flow_("star20, c07 and c12 missing", star_text(20), 0, "c07 c12", 0);
    run_flow_("star20 dp, 2 missing, tolerance 2", star_text(20), 3.0, "c07 c12", 2);
}

int main(void)
{
    if (pft_test_topo_setup() || sodium_init() < 0)
        return 1;
    RUN(test_exact);
    RUN(test_noise_shares);
    RUN(test_dropout);
    pft_test_topo_cleanup();
    return pft_test_done();
}
