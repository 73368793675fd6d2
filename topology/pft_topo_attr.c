/* pft_topo_attr: the declarative table of topology attributes, Graphviz layout names, and value parsers. */
#include "pft_topo_attr.h"

#include "pft_alloc.h"
#include "pft_error.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define G PFT_SCOPE_GRAPH
#define N PFT_SCOPE_NODE
#define E PFT_SCOPE_EDGE
#define GO(f) ((long)offsetof(pft_topo_run_t, f))
#define NO(f) ((long)offsetof(pft_topo_node_t, f))
#define EO(f) ((long)offsetof(pft_topo_edge_t, f))
#define NONE (-1L)

#define MAX_TEXT 4096 /* longest attribute value accepted (paths included) */
/* an inline public key starts so (wire/pft_keys.h PFT_KEY_PUBLIC_PREFIX) */
#define KEY_PREFIX "pftnet-ed25519-public "

/* Enum names; the index is the stored value. */
static const char *const s_merge[] = {"exact", "sample", NULL};
static const char *const s_head[] = {
#define PFT_X_HEAD(name, text) text,
    PFT_TOPO_HEADS(PFT_X_HEAD)
#undef PFT_X_HEAD
        NULL};
static const char *const s_dtype[] = {"fp16", "fp32", NULL};
static const char *const s_prep[] = {"none", "l2", "sqrt-l2", NULL};
static const char *const s_missing[] = {"proceed", "fail", NULL};
static const char *const s_dp_mech[] = {"thm41", "b3", NULL};
static const char *const s_release[] = {"lowrank", "full_scatter", NULL};

_Static_assert(PFT_TOPO_FP16 == 0 && PFT_TOPO_FP32 == 1, "s_dtype order");
_Static_assert(PFT_TOPO_MERGE_EXACT == 0 && PFT_TOPO_MERGE_SAMPLE == 1, "s_merge order");
_Static_assert(PFT_TOPO_PREP_NONE == 0 && PFT_TOPO_PREP_L2 == 1 && PFT_TOPO_PREP_SQRT_L2 == 2,
               "s_prep order");
_Static_assert(PFT_TOPO_MISSING_PROCEED == 0 && PFT_TOPO_MISSING_FAIL == 1, "s_missing order");
_Static_assert(PFT_TOPO_RELEASE_LOWRANK == 0 && PFT_TOPO_RELEASE_FULL_SCATTER == 1, "s_release order");
_Static_assert(sizeof(pft_cov_t) == sizeof(int) && sizeof(pft_topo_dtype_t) == sizeof(int) &&
                   sizeof(pft_topo_prep_t) == sizeof(int) && sizeof(pft_topo_missing_t) == sizeof(int),
               "enums are stored as int");

/* clang-format off */
static const pft_topo_attr_t s_table[] = {
    /* run-wide */
    {"run", G, PFT_ATTR_NAME, NULL, 0, 0, NULL,
     "run id carried in every bundle (default: the graph name, else the file name)", GO(run), NONE, NONE},
    {"k", G | N, PFT_ATTR_INT, "10", 1, 1024, NULL,
     "GMM components per class", GO(k), NO(k), NONE},
    {"cov", G | N, PFT_ATTR_ENUM, "diag", 0, 0, pft_cov_names, /* core/pft_cov.c's table */
     "covariance family (lowrank: W Wᵀ + Ψ, rank cov_rank; tied: exact LDA statistics, one shared scatter)",
     GO(cov), NO(cov), NONE},
    {"merge", G | N, PFT_ATTR_ENUM, "exact", 0, 0, s_merge,
     "cov=full with k=1: exact (merge statistics in closed form) or sample (the paper's protocol); tied is "
     "always exact, the mixtures always sample",
     GO(merge), NO(merge), NONE},
    {"head", G | N, PFT_ATTR_ENUM, "auto", 0, 0, s_head,
     "classifier (docs/USAGE.md, Heads): logreg, the softmax head on rows; gaussian, LDA/QDA from class "
     "statistics; and the others listed; auto: gaussian for exact statistics, logreg otherwise",
     GO(head), NO(head), NONE},
    {"cov_rank", G | N, PFT_ATTR_INT, "32", 1, 65535, NULL,
     "cov=lowrank: factors per component (clamped to d-1); bytes per component d*q + 2d + 1 numbers",
     GO(cov_rank), NO(cov_rank), NONE},
    {"seed", G, PFT_ATTR_U64, "0", 0, 0, NULL,
     "run seed (k-means++ initialisation, sampling, partitions)", GO(seed), NONE, NONE},
    {"dtype", G, PFT_ATTR_ENUM, "fp16", 0, 0, s_dtype,
     "encoding of GMM parameters on the wire", GO(dtype), NONE, NONE},
    {"stats_dtype", G, PFT_ATTR_ENUM, "fp32", 0, 0, s_dtype,
     "encoding of exact statistics (means, covariances) on the wire", GO(stats_dtype), NONE, NONE},
    {"stats_release", G, PFT_ATTR_ENUM, "lowrank", 0, 0, s_release,
     "cov=tied: what a part's shared scatter travels as: lowrank, its leading eigenpairs (one per "
     "stats_rows_per_rank rows the part stands for, at most stats_rank) plus its exact diagonal; "
     "full_scatter, the exact dense matrix (research only: a recipient can rebuild rows from it, "
     "SECURITY.md §9); a part holding a DP release of sums goes as its class means only (its scatter is "
     "zero)",
     GO(stats_release), NONE, NONE},
    {"stats_rank", G, PFT_ATTR_INT, "64", 0, 65535, NULL,
     "stats_release=lowrank: eigenpairs per part at most (d·q + d numbers instead of d(d+1)/2; clamped to "
     "d-1); 0: the isotropic variance only", GO(stats_rank), NONE, NONE},
    {"stats_rows_per_rank", G, PFT_ATTR_INT, "15", 1, 1000000, NULL,
     "stats_release=lowrank: a part sends one eigenpair per this many rows it stands for (fewer rows per "
     "eigenpair: more accurate, more revealing; a part of fewer than 20 rows sends no eigenpair; "
     "SECURITY.md §9)", GO(stats_rows_per_rank), NONE, NONE},
    {"secure_agg", G, PFT_ATTR_BOOL, "false", 0, 0, NULL,
     "cov=tied: true: exact statistics travel masked (pairwise masks mod 2^64) until a node allowed to "
     "see their sum opens them; nobody holds fewer than min_contributors others' statistics in the clear "
     "(docs/SECAGG.md); a topology the plan cannot protect is refused",
     GO(secure_agg), NONE, NONE},
    {"min_contributors", G, PFT_ATTR_INT, "2", 1, 65535, NULL,
     "secure_agg: the fewest other contributors an aggregate seen in the clear may hold (1: as without "
     "secure aggregation)", GO(min_contributors), NONE, NONE},
    {"dp_dropouts", G, PFT_ATTR_INT, "0", 0, 65535, NULL,
     "secure_agg with DP: how many of a star's members may never deliver and the opened sum still carry "
     "sigma^2 of noise (each member's share is sigma^2 / (D - dp_dropouts)); without DP any number may drop "
     "while min_contributors survive (docs/SECAGG.md §5)", GO(dp_dropouts), NONE, NONE},
    {"secagg_threshold", G, PFT_ATTR_INT, "0", 0, 65535, NULL,
     "secure_agg in a star (double masking): the t of the t-of-n sharing of each member's self-mask seed, "
     "and the fewest survivors a dropout may leave; 2t at least n + 2 (or t = n) so that a lying opener cannot "
     "unmask a member (0: the least such t; docs/SECAGG.md §5)", GO(secagg_threshold), NONE, NONE},
    {"secagg_degree", G, PFT_ATTR_INT, "0", 0, 65535, NULL,
     "secure_agg outside a star: each member masks with k other members (k/2 on each side in node order, k "
     "even) instead of all of them, so masking costs O(k) per member, not O(members); the opener then needs "
     "k colluding members, not all but one, to unmask one (0: every member; docs/SECAGG.md §4.6)",
     GO(secagg_degree), NONE, NONE},
    {"prep", G, PFT_ATTR_ENUM, "l2", 0, 0, s_prep,
     "feature preprocessing, applied identically on every node before anything else", GO(prep), NONE, NONE},
    {"start", G, PFT_ATTR_NAME, NULL, 0, 0, NULL,
     "ring only: id of the node that begins the first lap", GO(start_id), NONE, NONE},
    {"root", G, PFT_ATTR_NAME, NULL, 0, 0, NULL,
     "mesh only (strongly connected, not a ring): id of the node that gathers everyone's knowledge (lap 1) "
     "and spreads it back (lap 2)", GO(root_id), NONE, NONE},
    {"deadline", G | E, PFT_ATTR_REAL, "600", 0.001, 1e7, NULL,
     "seconds a node waits for its predecessors' bundles (on an edge: for that one)", GO(deadline), NONE,
     EO(deadline)},
    {"send_deadline", G | E, PFT_ATTR_REAL, "300", 0.001, 1e7, NULL,
     "seconds a sender retries one hand-off until it is acknowledged", GO(send_deadline), NONE,
     EO(send_deadline)},
    {"resend_grace", G, PFT_ATTR_REAL, "0", 0, 1e7, NULL,
     "seconds a node stays reachable after its last ACK even when every ACK it gave is confirmed read (0: it "
     "leaves once its predecessors have confirmed, or at its bound; docs/RELIABILITY.md §5)",
     GO(resend_grace), NONE, NONE},
    {"on_missing", G, PFT_ATTR_ENUM, "proceed", 0, 0, s_missing,
     "a predecessor missing at the deadline: proceed with what arrived (recorded) or fail", GO(on_missing),
     NONE, NONE},
    {"max_iter", G, PFT_ATTR_INT, "100", 1, 100000, NULL,
     "EM iterations at most", GO(max_iter), NONE, NONE},
    {"tol", G, PFT_ATTR_REAL, "0.001", 0, 1, NULL,
     "EM stops when the mean log-likelihood changes less (0: always max_iter); quote exponents: \"1e-4\"", GO(tol), NONE, NONE},
    {"reg_covar", G, PFT_ATTR_REAL, "0.000001", 0, 1, NULL,
     "added to every covariance diagonal", GO(reg_covar), NONE, NONE},
    {"n_init", G, PFT_ATTR_INT, "1", 1, 1000, NULL,
     "EM restarts, the best is kept", GO(n_init), NONE, NONE},
    {"head_c", G, PFT_ATTR_REAL, "1", 1e-12, 1e12, NULL,
     "head: inverse L2 regularisation strength (scikit-learn's C)", GO(head_c), NONE, NONE},
    {"em_draws", G, PFT_ATTR_INT, "100", 1, 1000, NULL,
     "EM refit: synthetic rows drawn per row a received GMM stands for, up to mc_budget per class",
     GO(em_draws), NONE, NONE},
    {"head_draws", G, PFT_ATTR_INT, "10", 1, 1000, NULL,
     "head: synthetic rows drawn per row a received GMM stands for, up to mc_budget per class",
     GO(head_draws), NONE, NONE},
    {"mc_budget", G, PFT_ATTR_INT, "1000", 0, 10000000, NULL,
     "most synthetic rows drawn per class for the EM refit and for the head, each weighted by the rows it "
     "stands for (0: no bound; mc_budget = 0, em_draws = head_draws = 1 is the paper's protocol)",
     GO(mc_budget), NONE, NONE},
    {"dp_epsilon", G | N, PFT_ATTR_REAL, "0", 0, 1e6, NULL,
     "DP-FedPFT: epsilon of each class's release (0: no differential privacy; needs k = 1)", GO(dp_epsilon),
     NO(dp_epsilon), NONE},
    {"dp_delta", G | N, PFT_ATTR_REAL, "0.00001", 0, 1, NULL,
     "DP: delta of each release, far below 1 / the node's rows (0 < delta < 1; never derived from the rows)",
     GO(dp_delta), NO(dp_delta), NONE},
    {"dp_mech", G | N, PFT_ATTR_ENUM, "b3", 0, 0, s_dp_mech,
     "DP-FedPFT mechanism: thm41 (noisy mean and covariance, Thm 4.1) or b3 (noisy second moment, Remark B.3)",
     GO(dp_mech), NO(dp_mech), NONE},
    {"dp_budget", G | N, PFT_ATTR_REAL, "0", 0, 1e6, NULL,
     "DP-FedPFT: total epsilon a node may release over all its runs (0: unlimited); refused beyond",
     GO(dp_budget), NO(dp_budget), NONE},
    {"min_rows", G | N, PFT_ATTR_INT, "5", 1, 1000000, NULL,
     "privacy floor: every released GMM component stands for at least this many rows (count x weight; EM "
     "lowers K until it holds) and every released statistic for at least this many rows of a class; a class "
     "with fewer is withheld (reported in result.json); 1: no floor, the paper's protocol",
     GO(min_rows), NO(min_rows), NONE},
    {"mean_noise", G | N, PFT_ATTR_REAL, "0.05", 0, 1e3, NULL,
     "exact statistics: noise scale S on the class sums a node releases of its own rows in the clear: "
     "Gaussian noise of std S x sqrt(10/n) on every coordinate of the sum of a class of n rows (not DP; hides "
     "the exact zeros and upper bounds that give membership of small classes away, SECURITY.md 9); 0: exact "
     "sums, so that merges equal the centralized statistics",
     GO(mean_noise), NO(mean_noise), NONE},
    {"max_bundle_mb", G, PFT_ATTR_INT, "512", 1, 65536, NULL,
     "largest bundle a node accepts, MiB", GO(max_bundle_mb), NONE, NONE},
    {"port_base", G, PFT_ATTR_INT, NULL, 0, 65535, NULL,
     "nodes without endpoint get tcp://127.0.0.1:<port_base + node index>; 0 (as unset): port 0, each node "
     "binds a free port itself and reports it", GO(port_base), NONE, NONE},
    /* simulation */
    {"dataset", G, PFT_ATTR_PATH, NULL, 0, 0, NULL,
     "simulation: folder with train_x/train_y/test_x/test_y.npy (and train_domain/test_domain.npy)",
     GO(dataset), NONE, NONE},
    {"partition", G, PFT_ATTR_PARTITION, "iid", 0, 0, NULL,
     "simulation: iid | dirichlet:<beta> | labels:<classes>|<classes>|... (i-th for node i) | labels | domain",
     GO(partition), NONE, NONE},
    {"samples", G | N, PFT_ATTR_INT, "0", 0, 1000000000, NULL,
     "simulation: training rows drawn for a node from its share (0: all of it)", GO(samples), NO(samples),
     NONE},
    {"rows", N, PFT_ATTR_INT, "0", 0, 1000000000, NULL,
     "public count of the node's training rows (pftnet launch writes each share's; organisations may write "
     "their own): a receiver refuses counts above it (0: not given, no cap)", NONE, NO(rows), NONE},
    {"data", N, PFT_ATTR_BOOL, "true", 0, 0, NULL,
     "false: the node holds no training data (an aggregator, the paper's server): it trains on what it receives "
     "only; a simulation gives it no share", NONE, NO(has_data), NONE},
    {"domain", N, PFT_ATTR_INT, NULL, 0, 65535, NULL,
     "simulation, partition=domain: the node's domain id", NONE, NO(domain), NONE},
    {"classes", N, PFT_ATTR_CLASSES, NULL, 0, 0, NULL,
     "simulation, partition=labels: the node's classes, e.g. 0-3 or 0,2,5", NONE, NO(classes), NONE},
    /* node */
    {"endpoint", N, PFT_ATTR_ENDPOINT, NULL, 0, 0, NULL,
     "ZeroMQ endpoint the node binds and its predecessors connect to; port 0 or *: the node binds a free "
     "port itself and reports it in <out>/endpoint, where its predecessors read it (--peers-dir)",
     NONE, NO(endpoint), NONE},
    {"train", N, PFT_ATTR_PATH, NULL, 0, 0, NULL,
     "training features .npy (n x d; float32, or float16/64, int32/64, uint8: converted to float32)", NONE, NO(train), NONE},
    {"labels", N, PFT_ATTR_PATH, NULL, 0, 0, NULL,
     "training labels .npy (int32, n)", NONE, NO(labels), NONE},
    {"test", N, PFT_ATTR_PATH, NULL, 0, 0, NULL,
     "test features .npy (optional; with test_labels)", NONE, NO(test), NONE},
    {"test_labels", N, PFT_ATTR_PATH, NULL, 0, 0, NULL,
     "test labels .npy (with test)", NONE, NO(test_labels), NONE},
    {"key", N, PFT_ATTR_KEY, NULL, 0, 0, NULL,
     "the node's public key: a .pub file (pftnet keygen) or the inline line \"pftnet-ed25519-public ...\"",
     NONE, NO(key), NONE},
    /* edge */
    {"fallback", E, PFT_ATTR_BOOL, "false", 0, 0, NULL,
     "true: used only when the tail's primary successor stays unreachable past send_deadline", NONE, NONE,
     EO(fallback)},
};

/* Graphviz attributes that only affect drawing; accepted and ignored where Graphviz allows them. */
static const struct {
    const char *name;
    unsigned scopes;
} s_layout[] = {
    {"label", G | N | E}, {"xlabel", N | E}, {"shape", N}, {"color", G | N | E}, {"fillcolor", G | N | E},
    {"fontcolor", G | N | E}, {"fontname", G | N | E}, {"fontsize", G | N | E}, {"style", G | N | E},
    {"pos", N | E}, {"rankdir", G}, {"width", N}, {"height", N}, {"penwidth", G | N | E}, {"splines", G},
    {"layout", G}, {"tooltip", G | N | E}, {"URL", G | N | E}, {"href", G | N | E}, {"target", G | N | E},
    {"id", G | N | E}, {"class", G | N | E}, {"comment", G | N | E}, {"bgcolor", G}, {"margin", G | N},
    {"pad", G}, {"nodesep", G}, {"ranksep", G}, {"rank", G}, {"size", G}, {"ratio", G}, {"dpi", G},
    {"concentrate", G}, {"compound", G}, {"newrank", G}, {"ordering", G | N}, {"center", G},
    {"labelloc", G | N}, {"labeljust", G}, {"pencolor", G}, {"peripheries", G | N}, {"outputorder", G},
    {"forcelabels", G}, {"overlap", G}, {"sep", G}, {"esep", G}, {"landscape", G}, {"rotate", G},
    {"pack", G}, {"packmode", G}, {"charset", G}, {"stylesheet", G}, {"bb", G}, {"lp", G | E},
    {"lwidth", G}, {"lheight", G}, {"xdotversion", G}, {"fixedsize", N}, {"group", N}, {"image", N}, {"imagescale", N},
    {"orientation", G | N}, {"regular", N}, {"sides", N}, {"skew", N}, {"distortion", N},
    {"gradientangle", G | N}, {"nojustify", G | N}, {"xlp", N | E}, {"pin", N}, {"sortv", G | N},
    {"layer", N | E}, {"layers", G}, {"arrowhead", E}, {"arrowtail", E}, {"arrowsize", E}, {"dir", E},
    {"constraint", E}, {"weight", E}, {"minlen", E}, {"len", E}, {"headlabel", E}, {"taillabel", E},
    {"labelfontsize", E}, {"labelfontcolor", E}, {"labelfontname", E}, {"labelangle", E},
    {"labeldistance", E}, {"labelfloat", E}, {"headport", E}, {"tailport", E}, {"head_lp", E},
    {"tail_lp", E}, {"decorate", E}, {"samehead", E}, {"sametail", E}, {"lhead", E}, {"ltail", E},
    {"headclip", E}, {"tailclip", E}, {"headURL", E}, {"tailURL", E}, {"edgeURL", E}, {"labelURL", E},
    {"headtooltip", E}, {"tailtooltip", E}, {"edgetooltip", E}, {"labeltooltip", E},
};
/* clang-format on */

#define COUNT(a) (sizeof(a) / sizeof *(a))

const pft_topo_attr_t *pft_topo_attr_table(size_t *n)
{
    *n = COUNT(s_table);
    return s_table;
}

const pft_topo_attr_t *pft_topo_attr_find(const char *name)
{
    for (size_t i = 0; i < COUNT(s_table); i++)
        if (strcmp(s_table[i].name, name) == 0)
            return &s_table[i];
    return NULL;
}

int pft_topo_attr_is_layout(const char *name, unsigned scope)
{
    if (name[0] == '_') /* xdot drawing operations (_draw_, _ldraw_, …) written by `dot -Txdot` */
        return 1;
    for (size_t i = 0; i < COUNT(s_layout); i++)
        if (strcmp(s_layout[i].name, name) == 0)
            return (s_layout[i].scopes & scope) != 0;
    return 0;
}

size_t pft_topo_attr_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 62 || lb > 62)
        return SIZE_MAX;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t sub = diag + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            size_t best = sub < up + 1 ? sub : up + 1;
            row[j] = best < row[j - 1] + 1 ? best : row[j - 1] + 1;
            diag = up;
        }
    }
    return row[lb];
}

const char *pft_topo_attr_suggest(const char *name)
{
    const char *best = NULL;
    size_t best_d = 3, len = strlen(name);
    for (size_t i = 0; i < COUNT(s_table) + COUNT(s_layout); i++) {
        const char *c = i < COUNT(s_table) ? s_table[i].name : s_layout[i - COUNT(s_table)].name;
        size_t d = pft_topo_attr_edit_distance(name, c);
        if (d < best_d && d < len) {
            best_d = d;
            best = c;
        }
    }
    return best;
}

const char *pft_topo_attr_scope_name(unsigned scopes)
{
    static const char *const names[8] = {"none", "graph",       "node",       "graph, node",
                                         "edge", "graph, edge", "node, edge", "graph, node, edge"};
    return names[scopes & 7u];
}

void pft_topo_attr_values_text(const pft_topo_attr_t *a, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    switch (a->type) {
    case PFT_ATTR_INT:
        snprintf(buf, cap, "%.0f..%.0f", a->min, a->max);
        break;
    case PFT_ATTR_REAL:
        snprintf(buf, cap, "%g..%g", a->min, a->max);
        break;
    case PFT_ATTR_ENUM:
        for (const char *const *c = a->choices; *c && used < cap; c++) {
            int w = snprintf(buf + used, cap - used, "%s%s", c == a->choices ? "" : "|", *c);
            used += w > 0 ? (size_t)w : 0;
        }
        break;
    case PFT_ATTR_BOOL:
        snprintf(buf, cap, "true|false");
        break;
    case PFT_ATTR_U64:
        snprintf(buf, cap, "0..18446744073709551615");
        break;
    case PFT_ATTR_NAME:
        snprintf(buf, cap, "[A-Za-z0-9_.-]{1,64}");
        break;
    case PFT_ATTR_PATH:
        snprintf(buf, cap, "path");
        break;
    case PFT_ATTR_ENDPOINT:
        snprintf(buf, cap, "tcp://HOST:PORT|ipc://PATH|inproc://NAME");
        break;
    case PFT_ATTR_PARTITION:
        snprintf(buf, cap, "iid|dirichlet:B|labels[:C|C|...]|domain");
        break;
    case PFT_ATTR_CLASSES:
        snprintf(buf, cap, "e.g. 0-3 or 0,2,5");
        break;
    case PFT_ATTR_KEY:
        snprintf(buf, cap, "PATH.pub|pftnet-ed25519-public BASE64");
        break;
    case PFT_ATTR_STRING:
        snprintf(buf, cap, "text");
        break;
    }
}

/* ---- value checks ---- */

int pft_topo_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 64 || s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.')
            return 0;
    return 1;
}

int pft_topo_classes_check(const char *text)
{
    return pft_topo_classes_parse(text, 0, NULL);
}

int pft_topo_classes_parse(const char *text, int n_classes, unsigned char *flags)
{
    const char *p = text;
    int any = 0;
    if (flags)
        memset(flags, 0, (size_t)n_classes);
    while (*p) {
        while (*p == ' ')
            p++;
        if (!isdigit((unsigned char)*p))
            return pft_err(PFT_EINVAL, "class set '%s': expected a class number at '%s'", text, p);
        char *end;
        long a = strtol(p, &end, 10), b = a;
        p = end;
        if (*p == '-') {
            p++;
            if (!isdigit((unsigned char)*p))
                return pft_err(PFT_EINVAL, "class set '%s': a range without an end", text);
            b = strtol(p, &end, 10);
            p = end;
        }
        if (a > 65535 || b > 65535)
            return pft_err(PFT_EINVAL, "class set '%s': class numbers go up to 65535", text);
        if (a > b)
            return pft_err(PFT_EINVAL, "class set '%s': range %ld-%ld runs backwards", text, a, b);
        if (flags && b >= n_classes)
            return pft_err(PFT_EINVAL, "class set '%s': %ld-%ld is not within 0-%d", text, a, b,
                           n_classes - 1);
        for (long c = a; flags && c <= b; c++)
            flags[c] = 1;
        any = 1;
        while (*p == ' ')
            p++;
        if (*p == ',')
            p++;
        else if (*p)
            return pft_err(PFT_EINVAL, "class set '%s': unexpected '%c' (use 0-3 or 0,2,5)", text, *p);
    }
    if (!any)
        return pft_err(PFT_EINVAL, "class set '%s' is empty", text);
    return 0;
}

int pft_topo_partition_range(const char *text, int i, char *buf, size_t cap)
{
    if (strncmp(text, "labels:", 7) != 0)
        return PFT_EINVAL;
    const char *p = text + 7;
    for (int k = 0; k < i; k++) {
        p = strchr(p, '|');
        if (!p)
            return PFT_EINVAL;
        p++;
    }
    const char *e = strchr(p, '|');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n >= cap)
        return PFT_EINVAL;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 0;
}

int pft_topo_partition_parse(const char *text, pft_topo_part_t *kind, double *beta, int *n_ranges)
{
    *beta = 0;
    *n_ranges = 0;
    if (strcmp(text, "iid") == 0) {
        *kind = PFT_TOPO_PART_IID;
        return 0;
    }
    if (strcmp(text, "domain") == 0) {
        *kind = PFT_TOPO_PART_DOMAIN;
        return 0;
    }
    if (strncmp(text, "dirichlet:", 10) == 0) {
        char *end = NULL;
        errno = 0;
        double b = strtod(text + 10, &end);
        if (errno || end == text + 10 || *end || !isfinite(b) || !(b > 0))
            return pft_err(PFT_EINVAL, "partition '%s': the Dirichlet beta must be a positive number", text);
        *kind = PFT_TOPO_PART_DIRICHLET;
        *beta = b;
        return 0;
    }
    if (strcmp(text, "labels") == 0) {
        *kind = PFT_TOPO_PART_LABELS;
        return 0;
    }
    if (strncmp(text, "labels:", 7) == 0) {
        char range[256];
        int n = 1;
        for (const char *p = text + 7; *p; p++)
            n += *p == '|';
        for (int i = 0; i < n; i++) {
            if (pft_topo_partition_range(text, i, range, sizeof range))
                return pft_err(PFT_EINVAL, "partition '%s': range %d is too long", text, i + 1);
            int rc = pft_topo_classes_check(range);
            if (rc)
                return pft_err_wrap(rc, "partition '%s', range %d", text, i + 1);
        }
        *kind = PFT_TOPO_PART_LABELS;
        *n_ranges = n;
        return 0;
    }
    return pft_err(
        PFT_EINVAL,
        "partition '%s': expected iid, dirichlet:<beta>, labels:<classes>|<classes>|..., labels or "
        "domain",
        text);
}

int pft_topo_endpoint_open(const char *s)
{
    const char *colon = s && strncmp(s, "tcp://", 6) == 0 ? strrchr(s + 6, ':') : NULL;
    return colon && (strcmp(colon + 1, "*") == 0 || strcmp(colon + 1, "0") == 0);
}

int pft_topo_endpoint_check(const char *s)
{
    if (strncmp(s, "tcp://", 6) == 0) {
        const char *host = s + 6, *colon = strrchr(host, ':');
        if (!colon || colon == host)
            return pft_err(PFT_EINVAL, "endpoint '%s': expected tcp://HOST:PORT", s);
        if (colon - host == 1 && host[0] == '*')
            return pft_err(PFT_EINVAL,
                           "endpoint '%s': '*' is for binding only; peers connect to it, so name a host", s);
        char *end;
        errno = 0;
        long port = strcmp(colon + 1, "*") == 0 ? 0 : strtol(colon + 1, &end, 10);
        if (strcmp(colon + 1, "*") != 0 && (errno || end == colon + 1 || *end || port < 0 || port > 65535))
            return pft_err(PFT_EINVAL,
                           "endpoint '%s': the port must be 1..65535, or 0 or * for one the node binds and "
                           "reports itself",
                           s);
        for (const char *p = host; p < colon; p++)
            if (isspace((unsigned char)*p) || *p == '/')
                return pft_err(PFT_EINVAL, "endpoint '%s': bad host name", s);
        return 0;
    }
    if (strncmp(s, "ipc://", 6) == 0) {
        size_t n = strlen(s + 6);
        if (n == 0 || n > 107) /* sun_path holds 108 bytes */
            return pft_err(PFT_EINVAL, "endpoint '%s': an ipc path needs 1..107 characters", s);
        return 0;
    }
    if (strncmp(s, "inproc://", 9) == 0) {
        if (!s[9])
            return pft_err(PFT_EINVAL, "endpoint '%s': an inproc name is empty", s);
        return 0;
    }
    return pft_err(PFT_EINVAL, "endpoint '%s': expected tcp://HOST:PORT, ipc://PATH or inproc://NAME", s);
}

/* Joins base and rel ("/a/b" + "../c/./d" -> "/a/c/d"), folding "." and ".." lexically. */
static char *path_resolve(const char *base, const char *rel)
{
    size_t lb = rel[0] == '/' || !base ? 0 : strlen(base), lr = strlen(rel);
    char *out = pft_alloc(lb + lr + 3);
    if (!out)
        return NULL;
    size_t n = 0;
    /* split the joined text into components and fold */
    char *tmp = pft_alloc(lb + lr + 2);
    if (!tmp) {
        pft_free(out);
        return NULL;
    }
    snprintf(tmp, lb + lr + 2, "%s%s%s", lb ? base : "", lb ? "/" : "", rel);
    int absolute = tmp[0] == '/';
    size_t depth = 0; /* components kept that ".." may remove */
    char *save = NULL;
    for (char *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0 && depth > 0) {
            while (n > 0 && out[n - 1] != '/')
                n--;
            if (n > 0)
                n--; /* the separator */
            depth--;
            continue;
        }
        if (strcmp(c, "..") == 0 && absolute)
            continue; /* "/.." is "/" */
        if (n > 0 || absolute)
            out[n++] = '/';
        size_t lc = strlen(c);
        memcpy(out + n, c, lc);
        n += lc;
        if (strcmp(c, "..") != 0)
            depth++;
    }
    if (n == 0)
        out[n++] = absolute ? '/' : '.';
    out[n] = '\0';
    pft_free(tmp);
    return out;
}

/* Shape of an inline public key (wire/pft_keys.h has the format; the node checks the key itself):
 * prefix, 44 base64 characters ending in '=', then nothing or one space and 1..128 printable characters. */
static int key_text_ok(const char *s)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = s + strlen(KEY_PREFIX);
    for (int i = 0; i < 43; i++)
        if (!p[i] || !strchr(b64, p[i]))
            return 0;
    if (p[43] != '=')
        return 0;
    p += 44;
    if (!*p)
        return 1;
    if (*p != ' ' || !p[1] || p[1] == ' ' || strlen(p + 1) > 128)
        return 0;
    for (p++; *p; p++)
        if (*p < 0x20 || *p > 0x7e)
            return 0;
    return 1;
}

static int bool_parse(const char *s, int *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(s, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

static int store_text(void *dst, const char *text)
{
    char *c = pft_strdup(text);
    if (!c)
        return pft_err(PFT_ENOMEM, "out of memory");
    char **slot = dst;
    pft_free(*slot);
    *slot = c;
    return 0;
}

/* An INT, U64 or REAL attribute's value into dst (int, uint64_t, double), within the table's bounds. */
static int parse_number(const pft_topo_attr_t *a, const char *text, void *dst)
{
    char *end = NULL;
    switch (a->type) {
    case PFT_ATTR_INT: {
        errno = 0;
        long v = strtol(text, &end, 10);
        if (errno == ERANGE || end == text || *end || isspace((unsigned char)text[0]))
            return pft_err(PFT_EINVAL, "%s=%s: expected an integer in %.0f..%.0f", a->name, text, a->min,
                           a->max);
        if ((double)v < a->min || (double)v > a->max)
            return pft_err(PFT_ERANGE, "%s=%s: out of range %.0f..%.0f", a->name, text, a->min, a->max);
        *(int *)dst = (int)v;
        return 0;
    }
    case PFT_ATTR_U64: {
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (!isdigit((unsigned char)text[0]) || errno == ERANGE || *end)
            return pft_err(PFT_EINVAL, "%s=%s: expected an unsigned integer below 2^64", a->name, text);
        *(uint64_t *)dst = (uint64_t)v;
        return 0;
    }
    case PFT_ATTR_REAL: {
        errno = 0;
        double v = strtod(text, &end);
        if (errno == ERANGE || end == text || *end || !isfinite(v) || isspace((unsigned char)text[0]))
            return pft_err(PFT_EINVAL, "%s=%s: expected a number in %g..%g", a->name, text, a->min, a->max);
        if (v < a->min || v > a->max)
            return pft_err(PFT_ERANGE, "%s=%s: out of range %g..%g", a->name, text, a->min, a->max);
        *(double *)dst = v;
        return 0;
    }
    default:
        return pft_err(PFT_EINVAL, "%s: not a number attribute", a->name);
    }
}

/* A PATH attribute: text resolved against base_dir (absolute as given), stored in the char * at dst. */
static int store_path(const pft_topo_attr_t *a, const char *text, const char *base_dir, void *dst)
{
    if (!text[0])
        return pft_err(PFT_EINVAL, "%s: empty path", a->name);
    char *p = path_resolve(base_dir, text);
    if (!p)
        return pft_err(PFT_ENOMEM, "out of memory");
    if (strlen(p) >= PATH_MAX) {
        pft_free(p);
        return pft_err(PFT_EINVAL, "%s=%.32s...: path longer than %d", a->name, text, PATH_MAX);
    }
    char **slot = dst;
    pft_free(*slot);
    *slot = p;
    return 0;
}

int pft_topo_attr_parse(const pft_topo_attr_t *a, const char *text, const char *base_dir, void *dst)
{
    char vals[128];
    if (strlen(text) > MAX_TEXT)
        return pft_err(PFT_EINVAL, "%s=%.32s...: longer than %d characters", a->name, text, MAX_TEXT);
    switch (a->type) {
    case PFT_ATTR_STRING:
        return store_text(dst, text);
    case PFT_ATTR_NAME:
        if (!pft_topo_name_ok(text))
            return pft_err(PFT_EINVAL,
                           "%s=%s: expected 1..64 letters, digits, '_', '-' or '.' (not first '-' or '.')",
                           a->name, text);
        return store_text(dst, text);
    case PFT_ATTR_INT:
    case PFT_ATTR_U64:
    case PFT_ATTR_REAL:
        return parse_number(a, text, dst);
    case PFT_ATTR_ENUM:
        for (int i = 0; a->choices[i]; i++)
            if (strcmp(a->choices[i], text) == 0) {
                *(int *)dst = i;
                return 0;
            }
        pft_topo_attr_values_text(a, vals, sizeof vals);
        return pft_err(PFT_EINVAL, "%s=%s: expected one of %s", a->name, text, vals);
    case PFT_ATTR_BOOL:
        if (bool_parse(text, dst))
            return pft_err(PFT_EINVAL, "%s=%s: expected true or false", a->name, text);
        return 0;
    case PFT_ATTR_PATH:
        return store_path(a, text, base_dir, dst);
    case PFT_ATTR_ENDPOINT: {
        int rc = pft_topo_endpoint_check(text);
        return rc ? rc : store_text(dst, text);
    }
    case PFT_ATTR_PARTITION: {
        pft_topo_part_t kind;
        double beta;
        int n;
        int rc = pft_topo_partition_parse(text, &kind, &beta, &n);
        return rc ? rc : store_text(dst, text);
    }
    case PFT_ATTR_CLASSES: {
        int rc = pft_topo_classes_check(text);
        return rc ? pft_err_wrap(rc, "%s", a->name) : store_text(dst, text);
    }
    case PFT_ATTR_KEY:
        if (strncmp(text, KEY_PREFIX, strlen(KEY_PREFIX)) == 0) {
            if (!key_text_ok(text))
                return pft_err(
                    PFT_EINVAL,
                    "%s: an inline key is \"%s\" + 44 base64 characters (+ optional \" comment\"), as "
                    "in the .pub file",
                    a->name, KEY_PREFIX);
            return store_text(dst, text);
        }
        return store_path(a, text, base_dir, dst);
    }
    return pft_err(PFT_EINVAL, "%s: unknown attribute type", a->name);
}

void pft_topo_attr_free_value(const pft_topo_attr_t *a, void *dst)
{
    switch (a->type) {
    case PFT_ATTR_STRING:
    case PFT_ATTR_NAME:
    case PFT_ATTR_PATH:
    case PFT_ATTR_ENDPOINT:
    case PFT_ATTR_PARTITION:
    case PFT_ATTR_CLASSES:
    case PFT_ATTR_KEY: {
        char **slot = dst;
        PFT_FREE(*slot);
        break;
    }
    default:
        break;
    }
}

const char *pft_topo_head_name(int head)
{
    return head >= 0 && (size_t)head < sizeof s_head / sizeof *s_head - 1 ? s_head[head] : NULL;
}
