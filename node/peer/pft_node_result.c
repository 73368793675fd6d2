/* pft_node_result: result.json, the run's outcome as one object (docs/USAGE.md lists its fields): the node's
 * configuration and counters, provenance and privacy, hand-offs, refusals, the floor and DP records; the
 * head's scores and description are already in it (pft_node_head.c). */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *provenance_json(const pft_bundle_t *b)
{
    json_t *arr = json_array();
    for (int i = 0; b && i < pft_bundle_prov_n_nodes(b); i++) {
        json_t *counts = json_object();
        for (int j = 0; j < pft_bundle_prov_n_labels(b, i); j++) {
            int label;
            uint64_t count;
            char key[16];
            pft_bundle_prov_entry(b, i, j, &label, &count);
            snprintf(key, sizeof key, "%d", label);
            json_object_set_new(counts, key, json_integer((json_int_t)count));
        }
        json_t *e = json_pack("{s:s,s:o}", "node", pft_bundle_prov_node(b, i), "counts", counts);
        double eps, delta;
        if (pft_bundle_prov_dp(b, i, &eps, &delta))
            json_object_set_new(e, "dp", json_pack("{s:f,s:f}", "epsilon", eps, "delta", delta));
        json_array_append_new(arr, e);
    }
    return arr;
}

/* What the node's output guarantees each contributor: its data entered under (ε, δ)-DP (post-processing keeps
 * it), or without DP. "all_dp" is true when every contributor's data is protected. */
static json_t *privacy_json(const pft_bundle_t *b)
{
    json_t *per = json_object();
    int all = b && pft_bundle_prov_n_nodes(b) > 0;
    double worst_eps = 0, worst_delta = 0;
    for (int i = 0; b && i < pft_bundle_prov_n_nodes(b); i++) {
        double eps, delta;
        if (pft_bundle_prov_dp(b, i, &eps, &delta)) {
            json_object_set_new(per, pft_bundle_prov_node(b, i),
                                json_pack("{s:f,s:f}", "epsilon", eps, "delta", delta));
            worst_eps = eps > worst_eps ? eps : worst_eps;
            worst_delta = delta > worst_delta ? delta : worst_delta;
        } else {
            json_object_set_new(per, pft_bundle_prov_node(b, i), json_null());
            all = 0;
        }
    }
    json_t *o = json_pack("{s:b,s:o}", "all_dp", all, "per_node", per);
    if (all)
        json_object_set_new(o, "worst", json_pack("{s:f,s:f}", "epsilon", worst_eps, "delta", worst_delta));
    return o;
}

/* This process's peak resident memory (VmHWM), kB; 0 if unknown. */
static long peak_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* The transport's counters result.json reports under "transport" (protocol 2's flow control, what went on the
 * wire): pft_transport_stats_t's fields of the same names. */
#define PFT_NODE_TRANSPORT_COUNTERS(X)                                                                       \
    X(bytes_sent)                                                                                            \
    X(transmissions)                                                                                         \
    X(retries)                                                                                               \
    X(offers)                                                                                                \
    X(offer_bytes)                                                                                           \
    X(grants_received)                                                                                       \
    X(busy_received)                                                                                         \
    X(eager_sends)                                                                                           \
    X(probes)                                                                                                \
    X(cancels_sent)                                                                                          \
    X(acked)                                                                                                 \
    X(rejected_by_peer)                                                                                      \
    X(failed)                                                                                                \
    X(bytes_received)                                                                                        \
    X(received)                                                                                              \
    X(accepted)                                                                                              \
    X(duplicates)                                                                                            \
    X(rejected)                                                                                              \
    X(malformed)                                                                                             \
    X(offers_received)                                                                                       \
    X(grants)                                                                                                \
    X(busy_replies)                                                                                          \
    X(grants_expired)                                                                                        \
    X(grants_cancelled)                                                                                      \
    X(grants_lost)                                                                                           \
    X(oversize)                                                                                              \
    X(disconnects)                                                                                           \
    X(max_in_flight)                                                                                         \
    X(ack_probes)

static json_t *transport_json(const pft_transport_stats_t *ts)
{
    json_t *o = json_object();
#define PFT_X_SET(field) json_object_set_new(o, #field, json_integer((json_int_t)ts->field));
    PFT_NODE_TRANSPORT_COUNTERS(PFT_X_SET)
#undef PFT_X_SET
    return o;
}

/* Fills res with the run's outcome and writes it to out/result.json (atomically). Returns 0 or an error code.
 */
int pft_node__result_write(node_t *nd, json_t *res, int exit_code)
{
    pft_transport_stats_t ts = {0};
    if (nd->hand.tp)
        pft_transport_stats(nd->hand.tp, &ts);
    json_t *recv = json_array(), *missing = json_array();
    pft_node__inbox_json(nd, recv, missing);
    json_object_set_new(res, "id", json_string(nd->me->id));
    json_object_set_new(res, "role", json_string(pft_role_name(nd->me->role)));
    json_object_set_new(res, "kind", json_string(pft_kind_name(pft_topo_kind(nd->topo))));
    json_object_set_new(res, "run", json_string(nd->run->run));
    json_object_set_new(res, "exit_code", json_integer(exit_code));
    json_object_set_new(res, "status",
                        json_string(exit_code == 0                   ? "ok"
                                    : exit_code == PFT_EXIT_DEGRADED ? "degraded"
                                                                     : pft_node_exit_text(exit_code)));
    json_object_set_new(res, "k", json_integer(nd->me->k));
    json_object_set_new(res, "cov", json_string(pft_cov_name(nd->me->cov)));
    if (nd->me->cov == PFT_COV_LOWRANK)
        json_object_set_new(res, "cov_rank", json_integer(nd->me->cov_rank));
    json_object_set_new(res, "n_classes", json_integer(nd->n_classes));
    json_object_set_new(res, "n_real", json_integer(nd->tally.n_real));
    json_object_set_new(res, "n_synthetic", json_integer(nd->tally.n_synthetic));
    uint64_t sent_before = 0, received_before = 0; /* this run's hand-offs done by an earlier instance */
    for (size_t i = 0; i < nd->hand.n_out; i++)
        sent_before += nd->hand.out[i].acked_before ? nd->hand.out[i].bytes : 0;
    for (size_t i = 0; i < nd->hand.n_in; i++)
        received_before += nd->hand.in[i].stored_before ? nd->hand.in[i].len : 0;
    json_object_set_new(res, "bytes_sent", json_integer((json_int_t)(ts.bytes_sent + sent_before)));
    json_object_set_new(res, "bytes_received",
                        json_integer((json_int_t)(ts.bytes_received + received_before)));
    json_object_set_new(res, "retries", json_integer((json_int_t)ts.retries));
    json_object_set_new(res, "duplicates_dropped", json_integer((json_int_t)ts.duplicates));
    json_object_set_new(res, "transport", transport_json(&ts));
    if (nd->hand.tp) /* the endpoint it bound: its port, when the topology left it open */
        json_object_set_new(res, "endpoint", json_string(pft_transport_endpoint(nd->hand.tp)));
    pft_node__refusal_json(nd, res);
    json_object_set_new(res, "secure", json_boolean(nd->hand.keys != NULL));
    json_object_set_new(res, "em_iters_mean",
                        json_real(nd->tally.em_fits ? (double)nd->tally.em_iters / nd->tally.em_fits : 0));
    json_object_set_new(res, "em_seconds", json_real(nd->tally.em_seconds));
    json_object_set_new(res, "em_rows_max", json_integer(nd->tally.em_rows_max));
    json_object_set_new(res, "head_seconds", json_real(nd->tally.head_seconds));
    json_object_set_new(res, "wall_seconds", json_real(pft_fsio_now() - nd->t_start));
    json_object_set_new(res, "peak_rss_kb", json_integer(peak_rss_kb()));
    json_object_set_new(res, "provenance", provenance_json(nd->know.prov));
    json_object_set_new(res, "privacy", privacy_json(nd->know.prov));
    json_object_set_new(res, "sent", pft_node__outbox_json(nd));
    json_object_set_new(res, "received", recv);
    json_object_set_new(res, "missing", missing);
    json_object_set_new(res, "drift", json_incref(nd->know.drift));
    json_object_set_new(res, "min_rows", json_integer(nd->me->min_rows));
    pft_node__floor_json(&nd->know.floor, res);
    pft_node__release_json(nd, res);
    pft_node__secagg_json(nd, res);
    char *text = json_dumps(res, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
    char *path = pft_fsio_join(nd->args->out_dir, "result.json");
    int rc = text && path ? pft_fsio_write_atomic(path, text, strlen(text)) : PFT_ENOMEM;
    free(text);
    pft_free(path);
    return rc;
}
