/* pft_topo_rules: every rule between attributes (secure aggregation, DP groups, the release, the plan) in one
 * validator, which pftnet check, pftnet launch and pftnode all call, so that they give one verdict in the
 * same words. */
#ifndef PFT_TOPO_RULES_H
#define PFT_TOPO_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "pft_secplan.h"
#include "pft_topo.h"

/* What a caller knows beyond the topology. A rule that needs a fact nobody gave is decided where the fact is
 * known (docs/USAGE.md, "One verdict"): the topology states who holds which class only under partition =
 * labels; the launcher knows every node's rows per class after partitioning; a node knows only its own. */
typedef struct {
    int insecure;               /* 1: the run has no keys (--insecure) */
    size_t n_classes;           /* classes per row of class_rows; 0 with class_rows NULL */
    const uint64_t *class_rows; /* node_count × n_classes: node v's training rows of class c at v·n_classes +
                                   c; NULL: unknown */
} pft_topo_facts_t;

/* The first rule a topology breaks. */
typedef struct {
    int code;         /* 0 (none broken), PFT_ETOPO (a rule: the run cannot work) or PFT_EPOLICY (a policy
                         refusal: the run would work but would show what the topology's policy protects) */
    const char *rule; /* the rule's name ("secagg-prep", …); NULL when none is broken */
    char node[72];    /* the node it names first; "" when none */
    char text[768];   /* "rule NAME: what is wrong; what to change" — no file or line, so that the same
                         topology read from another file (the launcher's resolved copy) gives the same words */
} pft_topo_verdict_t;

/* Checks every rule between attributes of the loaded topology t (its graph attributes as overridden by
 * --set), with facts (NULL: none beyond the topology). Returns 0 when none is broken, else verdict->code with
 * the verdict's text as the error message (pft_errmsg); PFT_ENOMEM. verdict may be NULL. plan (may be NULL):
 * with secure_agg = true and no rule broken, *plan gets the secure-aggregation plan the rules checked (new;
 * the caller destroys it), else NULL. The rules, in the order they are checked:
 *   family-tied-sample  cov = tied is exact statistics: no merge = sample
 *   family-mixed      a run carries exact statistics on every node or samples mixtures on every node
 *   dp-delta          a node with DP gives 0 < dp_delta < 1 (never derived from its rows)
 *   secagg-cov        secure_agg masks exact tied statistics: cov = tied on every node
 *   secagg-insecure   secure_agg needs keys: the run cannot be --insecure
 *   secagg-prep       secure_agg needs rows of norm 1 (prep = l2 or sqrt-l2)
 *   secagg-plan       the plan must protect the topology (pft_secplan_new's refusals)
 *   secagg-groups     one group (what pftnode handles)
 *   secagg-dp-nonmember  a node asking for DP whose rows go on in the clear while no member masks with DP
 *   secagg-dp-equal   every member of a group with DP asks for the same (dp_epsilon, dp_delta)
 *   secagg-dp-opener  DP under secure_agg needs an opener without rows of its own (data = false)
 *   secagg-dp-dropouts  dp_dropouts must leave at least min_contributors noise shares
 *   secagg-dropouts-star  dp_dropouts > 0 only where dropouts are recovered (a star)
 *   secagg-threshold  where dropouts are recovered, secagg_threshold t (0: the default) has 2t >= n + 2 or
 *                     t = n for the group's n members (a lone lying opener cannot unmask a member)
 *   secagg-threshold-dp  dp_dropouts ≤ n − t (a declaration leaves ≥ t survivors)
 *   dp-k              DP on mixtures releases one Gaussian per class (k = 1)
 *   secagg-class-holders (policy)  every class is held by no member of a group or by at least
 *                     min_contributors of them (known from partition = labels, or from facts->class_rows) */
int pft_topo_rules_check(const pft_topo_t *t, const pft_topo_facts_t *facts, pft_topo_verdict_t *verdict,
                         pft_secplan_t **plan);

/* What a valid topology leaves open, nothing refused: up to max warnings into w[0..) (code 0; rule, node and
 * text "warning NAME: what is exposed or lost; what to change"). facts may be NULL. Returns their number:
 *   exact-lap-differencing  a ring or mesh of exact statistics without secure_agg, some rows without DP: a
 *                     node that holds its lap-1 aggregate and the lap-2 total subtracts them, and holds the
 *                     exact sums of the nodes after it (one node alone before the producer)
 *   floor-withholds   (facts->class_rows) the privacy floor would keep a tenth or more of the training rows
 *                     on their nodes: too few rows per class and node for min_rows (not under secure_agg) */
size_t pft_topo_rules_warnings(const pft_topo_t *t, const pft_topo_facts_t *facts, pft_topo_verdict_t *w,
                               size_t max);

/* Applies command-line overrides as graph attributes, validated together like the file's own (the topology
 * the rules are then checked on): set[0..n) each "NAME=VALUE" (--set), and seed (--seed; NULL: none).
 * PFT_EINVAL for an assignment without NAME=, else pft_topo_set_graph_attrs's errors (their message names
 * the topology's file). On success every pointer obtained from t before is stale. */
int pft_topo_rules_apply_sets(pft_topo_t *t, const char *const *set, int n, const char *seed);

#endif
