/* pft_secplan: the visibility plan of secure aggregation: who masks, who opens, what each node sees. */
#ifndef PFT_SECPLAN_H
#define PFT_SECPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "pft_topo.h"

/* Theory (docs/SECAGG.md §4). Contributors are the nodes with rows of their own (data = true). A *group* G
 * is a set of contributors whose rows travel masked until one node, its *opener* o (not in G), receives all
 * of them: each member u adds to its own statistics (fixed point, wire/pft_fixed.h) the pairwise masks
 * (wire/pft_mask.h) of every pair (u, w), w ∈ (G ∪ {o}) \ {u}, under the group's label. Then, for ANY
 * collection of masked parts a node sees, with integer coefficients c_k (a_h = Σ_{k: h ∈ part k} c_k the
 * coefficient of contributor h):
 *  - the mask (h, o) has coefficient ±a_h; only h and o know it, so a viewer v ≠ o learns a combination free
 *    of masks only if a_h = 0 for every h ≠ v: nothing about any other contributor;
 *  - the mask (h, g), h, g ∈ G, has coefficient ±(a_h − a_g); the opener knows none of them, so it learns
 * only combinations with a_h constant over G: multiples of Σ_G, the sum of the whole group. Masked parts are
 * therefore safe wherever they travel (relays merge them, rejoins take them whole), and the rule below only
 * concerns what is in the clear: every node's *view*, the contributors of the one clear aggregate its head
 * uses (its own rows included), must hold either no other contributor or at least min_contributors of them
 * (|view \ {v}| = 0 or ≥ m), and every clear bundle on the wire at least m contributors. Each node holds ONE
 * clear aggregate (beside its own rows), so differences of clear aggregates cannot isolate fewer than m
 * contributors either.
 *
 * Plans by kind (one group in each):
 * - chain v0 → v1 → …: the opener is the first node with at least m contributors before it; they form G and
 *   send masked; the opener opens Σ_G, adds its own rows and sends in the clear; every later node's view is
 *   the prefix up to itself. Nodes before the opener train on their own rows.
 * - ring: lap 1 stays masked to the producer (the node before start), which opens the sum of all other
 *   contributors; lap 2 carries the total in the clear, and every node's view is every contributor. (An
 *   earlier opening would let a later node subtract the lap-1 sum it saw from the lap-2 total.)
 * - mesh: the same with the root as opener: lap 1 up the in-tree masked, lap 2 the total in the clear.
 * - dag with ONE sink (a star, a diamond, an in-tree of aggregators, any DAG whose nodes all reach one sink):
 *   everything travels masked to the sink, which opens the sum of all other contributors; every other node
 *   trains on its own rows. A DAG with several sinks is refused (a contributor would mask for several
 * openers). Refused with PFT_ETOPO and a message: fallback edges (a fallback successor would receive masks it
 * cannot remove), several sinks, and a plan whose opener or views would hold fewer than m other contributors.
 *
 * DP noise paid once: every view with others holds the noise shares of those others, which the viewer does
 * not know. noise_div is the smallest number of such shares over all views; a contributor adds N(0,
 * σ²/noise_div) so that every view carries at least σ² of noise it cannot remove (docs/SECAGG.md §7). A
 * star's aggregator is not a contributor: noise_div = clients; in a ring every node views the total and knows
 * its own share: contributors − 1.
 *
 * Dropout (a star's client that never delivers): planned in docs/SECAGG.md §5 (survivors reveal their use
 * keys with it, pft_mask_use_key, once the opener declares it missing and only if at least m survivors
 * remain); this module plans the complete run. */

#define PFT_SECPLAN_MIN_CONTRIBUTORS 2 /* default of min_contributors */

/* A group: contributors that mask together, and the node that removes their masks. */
typedef struct {
    size_t opener;    /* node index of the opener (not a member) */
    size_t n_members; /* members, ascending node indices */
    const size_t *members;
    uint64_t rows; /* the members' rows, 0 when a member's rows are unknown */
} pft_secplan_group_t;

/* One node's part in the plan. */
typedef struct {
    int contributor;     /* 1: the node has rows of its own */
    long mask_group;     /* group it masks its own rows in; -1: it adds them in the clear (or has none) */
    size_t n_mask_peers; /* nodes it shares a mask with: the group's other members and the opener */
    const size_t *mask_peers; /* ascending node indices */
    long opens;               /* group it opens, -1: none */
    size_t n_view;            /* contributors of the clear statistics its head uses, itself included */
    const size_t *view;       /* ascending node indices */
    uint64_t view_rows;       /* their rows, 0 when unknown */
} pft_secplan_node_t;

/* What one hand-off carries (same index as pft_topo_handoffs). */
typedef struct {
    int masked;       /* 1: masked (group `group`), 0: in the clear */
    long group;       /* -1 when clear */
    size_t n_contrib; /* contributors whose rows it carries, ascending node indices */
    const size_t *contrib;
    const long *part; /* per contributor, its part at the sender (the part's smallest node index) */
} pft_secplan_msg_t;

typedef struct pft_secplan_t pft_secplan_t;

/* Plans secure aggregation on a loaded topology. min_contributors ≥ 1 (m above; 1 allows a single other
 * contributor in the clear, as without secure aggregation); rows: NULL, or one entry per node (its rows, 0 if
 * unknown), used for the groups' and views' row counts. On success *out is new. PFT_EINVAL (m < 1),
 * PFT_ETOPO (a topology it cannot protect: the message names the topology file, the rule and the nodes),
 * PFT_ENOMEM. */
int pft_secplan_new(const pft_topo_t *topo, int min_contributors, const uint64_t *rows, pft_secplan_t **out);
/* Frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_secplan_destroy(pft_secplan_t **self_p);

int pft_secplan_min_contributors(const pft_secplan_t *self);
size_t pft_secplan_group_count(const pft_secplan_t *self);
/* Group i (i < count), or NULL. */
const pft_secplan_group_t *pft_secplan_group(const pft_secplan_t *self, size_t i);
/* Node i (i < node count), or NULL. */
const pft_secplan_node_t *pft_secplan_node(const pft_secplan_t *self, size_t i);
/* One entry per hand-off of pft_topo_handoffs; returns their number (0 after pft_secplan_keep_node). */
size_t pft_secplan_msgs(const pft_secplan_t *self, const pft_secplan_msg_t **out);
/* Memory: a node needs its own part of the plan, not the whole run's (every hand-off's contributors, every
 * node's mask peers and view: O(n²) numbers, about 40 MB at 1,000 nodes). Keeps node v's mask peers and view,
 * every node's scalars, the group and the divisors; frees the rest: pft_secplan_node of another node then
 * has no mask peers and no view (n_mask_peers = n_view = 0), pft_secplan_msgs gives 0 hand-offs and
 * pft_secplan_withhold refuses (PFT_EINVAL). 0, or PFT_EINVAL (no node v, kept already), PFT_ENOMEM (the
 * plan unaltered). */
int pft_secplan_keep_node(pft_secplan_t *self, size_t v);
/* The divisor of the DP noise shares (above): ≥ min_contributors. */
size_t pft_secplan_noise_div(const pft_secplan_t *self);

/* Dropout (docs/SECAGG.md §5): may the opener of group `group` open without the members it declares missing
 * (missing[0..n_missing), node indices), once the survivors reveal their use keys with them? 0 when: every
 * missing node is a member and hands off directly to the opener (a star; elsewhere a relay's loss takes other
 * members with it), at least min_contributors members survive, and, with dp, at least share_div(tolerance)
 * survive (the noise shares σ²/(D − t) then still sum to ≥ σ²). Else PFT_ETOPO (the plan cannot recover) or
 * PFT_EINVAL (not a member, listed twice, a bad group) with a message; survivors must not reveal then. */
int pft_secplan_dropout_ok(const pft_secplan_t *self, const pft_topo_t *topo, size_t group,
                           const size_t *missing, size_t n_missing, int dp, size_t tolerance);
/* 1 if group `group`'s dropouts can be recovered at all: every member hands off to the opener alone and the
 * opener sends nothing on (a star); 0 otherwise (also for a bad group). */
int pft_secplan_recoverable(const pft_secplan_t *self, const pft_topo_t *topo, size_t group);
/* The divisor of the noise shares with a dropout tolerance t (shares σ²/(D − t)): D − t, or 0 when t ≥ D or
 * D − t < min_contributors (no such tolerance: as many dropouts would leave a view short of the rule). */
size_t pft_secplan_share_div(const pft_secplan_t *self, size_t tolerance);

/* Double masking (docs/SECAGG.md §5) in a recoverable group of n members: each member's self-mask seed is
 * shared t-of-n, and a declaration must leave at least t survivors. A lone opener that lies (keeps a member
 * u's bundle and declares u missing to some survivors) needs every pair key of u — each revealed by its
 * partner declaring u missing, or by u itself declaring the partner missing, at most n − t of them since u's
 * own declaration leaves ≥ t survivors — and t shares of u's seed from answerers declaring u alive: only u
 * and the partners u declared missing, n − t + 1 at most. So it fails when 2t ≥ n + 2 (or t = n);
 * pft_secplan_threshold_ok says so, pft_secplan_default_threshold is the least such t (⌊n/2⌋ + 1, or ⌊n/2⌋ +
 * 2 for odd n; n for n ≤ 3). An opener with c colluding members needs c ≥ 2t − n − 1. */
size_t pft_secplan_default_threshold(size_t n);
int pft_secplan_threshold_ok(size_t n, size_t t);
/* Sets the threshold of the plan's group (the topology rules do, where the group is recoverable); from then
 * on pft_secplan_dropout_ok also needs t survivors. 0 or PFT_EINVAL (not threshold_ok, or no group). */
int pft_secplan_set_threshold(pft_secplan_t *self, size_t t);
/* The threshold set, 0 when none (no double masking: the group is not recoverable). */
size_t pft_secplan_threshold(const pft_secplan_t *self);

/* Sparse pairs (graph attribute secagg_degree = k, applied by pft_secplan_new; docs/SECAGG.md §4.6): each
 * member's mask peers are the k members nearest to it in the group's cyclic order of node indices (k/2 on
 * each side) and the opener. The lemma above needs only a connected pair graph for the opener's half and the
 * pairs with o for the rest; this graph (Harary's H(k, n)) stays connected without any k − 1 members, so an
 * opener colluding with fewer than k members learns only sums of the others, as with every pair — but k
 * colluders around one member (its whole neighbourhood) unmask it, where every pair needs all but one.
 * Masking costs k + 1 keystreams per member instead of n. Refused (PFT_ETOPO) for an odd k and in a star
 * (where dropouts are recovered); k ≥ n − 1 keeps every pair. Returns k, or 0 when every member pairs with
 * every other. */
size_t pft_secplan_degree(const pft_secplan_t *self);

/* The rule per class. Counts are public, so an opened class sum held by one contributor is that contributor's
 * class mean: for every view (without its viewer) and every clear bundle, and every class, the contributors
 * releasing rows of the class must be none or at least min_contributors. class_rows holds n_classes entries
 * per node (node v's rows of class c at v·n_classes + c; 0: none). Sets withhold[v·n_classes + c] = 1 for
 * every (node, class) whose rows must stay out of every statistic the node releases (its own head still uses
 * them): a view or bundle with 1..m-1 holders of a class withholds them all, repeated until nothing changes
 * (a withheld holder can leave another view short). *n_withheld gets their number. With dp != 0 nothing is
 * withheld: every member adds a noise share to every class sum, so a single holder's class sum opens with the
 * aggregate's noise (docs/SECAGG.md §7). 0, or PFT_EINVAL (n_classes 0 or NULL arrays). */
int pft_secplan_withhold(const pft_secplan_t *self, size_t n_classes, const uint64_t *class_rows, int dp,
                         unsigned char *withhold, size_t *n_withheld);

#endif
