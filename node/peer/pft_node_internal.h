/* pft_node_internal: the peer's state and the functions its files share. Internal to node/peer: never include
 * it from elsewhere (the public interface is pft_node.h).
 *
 * One run of a node is split by noun, as CZMQ/Zyre split an actor:
 *   pft_node.c          the stage machine and pft_node_run (the loop), exit codes, status, stop, test hooks
 *   pft_node_setup.c    data, keys, the handed-over listening socket, inbound slots and outbound peers
 *   pft_node_inbox.c    matching, accepting, storing and loading inbound bundles; waiting for a stage's
 *   pft_node_refit.c    sampling, EM per class, drift, the head's rows
 *   pft_node_rows.c     weighted rows; the Monte Carlo budget per received class
 *   pft_node_release.c  DP-FedPFT: releases, the ledger, its setup
 *   pft_node_outbox.c   sending, acknowledgements on disk, fallback successors, waiting for the sends
 *   pft_node_result.c   the head's training, result.json
 *   pft_node_eval.c     the evaluation set: checked at setup, scored in blocks
 *   pft_node_refusal.c  every refusal: logged (rate-limited), counted, persisted in out/refusals.json
 * Functions shared between these files are named pft_node__<file>_<verb>; the rest are static. */
#ifndef PFT_NODE_INTERNAL_H
#define PFT_NODE_INTERNAL_H

#include "pft_node.h"

#include "pft_bundle.h"
#include "pft_gmm.h"
#include "pft_gstat.h"
#include "pft_rng.h"
#include "pft_dataset.h"
#include "pft_dp.h"
#include "pft_keys.h"
#include "pft_topo.h"
#include "pft_transport.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* One inbound hand-off addressed to this node. */
typedef struct {
    size_t handoff;       /* index in the run's hand-off list */
    const char *from;     /* sender id */
    const char *producer; /* expected producer id of the bundle */
    int complete;         /* 1: the complete bundle (ring or mesh lap 2) */
    double deadline;      /* absolute pft_fsio_now() time */
    pft_bundle_t *bundle; /* decoded and validated; NULL until it arrives */
    uint8_t *bytes;       /* the message as received (forwarded unchanged for FORWARD) */
    size_t len;
    uint8_t id[PFT_BUNDLE_ID_LEN];
    int missing;      /* 1: its deadline passed without it */
    int via_fallback; /* 1: filled by a fallback predecessor's bundle instead of `from`'s */
    int gone_on; /* 1: the node went on without it (recorded in out/missing/): a late bundle is refused */
    int light;   /* 1: bundle holds the provenance only; the statistics are decoded again from bytes when
                    used (pft_node__stats_*), so a node receiving many keeps one decoded at a time */
} inbound_t;

/* One send this node made. */
typedef struct {
    const char *to;
    int handle;
    int lap;
    size_t bytes;
    char id_hex[2 * PFT_BUNDLE_ID_LEN + 1];
    uint8_t *msg;           /* the message, kept for a fallback send */
    const char *instead_of; /* fallback send: the primary successor that stayed unreachable; else NULL */
    int fell_back;          /* 1: this send failed and its bundle went to the fallback successor(s) */
    size_t seq;             /* hand-off number (0 for a fallback send) */
    int acked_before; /* 1: acknowledged in an earlier run of this node (recorded on disk): not resent */
    int ack_saved;    /* 1: its acknowledgement is recorded on disk */
    int sent_before;  /* 1: sent in an earlier run of this node (out/sent/), not acknowledged then */
    double grace_end; /* sent_before: when (pft_fsio_now()) it ends as unconfirmed if never transmitted */
    int unconfirmed;  /* 1: ended so (PFT_NODE_SEND_UNCONFIRMED); why in reason */
    char reason[256];
} outbound_t;

/* A send's node-level state beyond pft_send_state_t: sent before a restart, not acknowledged then, and its
 * successor not reachable within resend_grace after it (it most likely stored the bundle and finished). */
#define PFT_NODE_SEND_UNCONFIRMED 4

/* Weighted rows for EM or the head, grown as classes are added (pft_node_rows.c). */
typedef struct {
    float *x;
    int32_t *y;
    double *w;     /* each row's weight: the rows of knowledge it stands for (1 for a real row) */
    double weight; /* their sum */
    int n, cap, d;
} rows_t;

/* One peer's whole state for a run. */
typedef struct {
    const pft_node_args_t *args;
    pft_topo_t *topo;
    const pft_topo_run_t *run;
    const pft_topo_node_t *me;
    size_t my_index;
    const char *complete_producer; /* producer of the complete bundle (ring: the producer; mesh: the root,
                                    * whose role is also PFT_ROLE_PRODUCER); NULL for a chain or dag */
    pft_dataset_t *train, *test;
    int32_t *eval_y; /* the evaluation set's labels (its features are read in blocks: pft_node_eval.c) */
    int eval_n, eval_d, eval_classes;
    int n_classes;
    int *own_counts; /* real training rows per class (n_classes) */
    pft_transport_t *tp;
    inbound_t *in;
    size_t n_in;
    outbound_t *out;
    size_t n_out;
    double t_start;
    char *inbox_dir;
    char status[512]; /* the status line last written to out/status */
    /* results */
    rows_t head_rows;        /* what a logreg head trains on */
    pft_gstat_t *head_stats; /* what a Gaussian head is built from (head = gaussian) */
    int head_has_own;        /* head_stats include this node's own rows (they may choose the shrinkage) */
    int n_real, n_synthetic;
    double em_seconds, head_seconds;
    int em_rows_max; /* most rows one EM fit saw (own + draws: bounded by the Monte Carlo budget) */
    long em_iters;
    int em_fits;
    pft_bundle_t *knowledge; /* provenance the node ended with */
    json_t *drift;           /* per received bundle: mean log-lik of own features under it */
    int rejected;            /* inbound messages refused (pft_node_refusal.c; survives restarts) */
    int handshakes_denied;   /* inbound connections refused (ZAP, plain text vs CURVE; survives restarts) */
    json_t *refusals;        /* their reasons, the first PFT_NODE_MAX_REFUSALS */
    struct {
        double window;     /* start of the current one-second logging window */
        int logged;        /* lines logged in it */
        int suppressed;    /* refusals not logged in it */
    } refusal_log[4];      /* per pft_node__refusal_kind_t */
    int refusals_dirty;    /* counters changed since out/refusals.json was written */
    double refusals_saved; /* when it was last written */
    int fatal;             /* a pft error code that ends the run at the next loop turn (the inbox could not
                              store a bundle), 0 if none; its message is in fatal_msg */
    char fatal_msg[512];
    /* security (unless --insecure) */
    pft_keypair_t *kp;  /* this node's keypair */
    pft_pubkey_t *keys; /* every node's public key, by node index */
    /* DP-FedPFT (dp_epsilon > 0) */
    pft_rng_t *dp_rng;      /* noise generator, seeded from the OS (never from the run seed) */
    pft_dp_budget_t budget; /* ledger, persisted in out/dp_ledger.json */
    json_t *dp;             /* what the releases were, for result.json */
    double dp_delta_max;    /* largest delta over this bundle's classes */
    int dp_clipped;         /* rows clipped to norm 1 */
    /* privacy floor (min_rows) */
    json_t *floor; /* the last refit's {"min_released_rows": {class: rows}, "withheld_classes": [...]}; NULL
                    * before a refit */
} node_t;

#define PFT_NODE_MAX_REFUSALS 100 /* reasons kept in result.json's refusals (all are counted) */

/* pft_node.c: the run's shared plumbing. */
/* A bundle holding only b's provenance (with its DP guarantees): all that the node reports of a bundle once
 * its models are used (the models of a d = 1280 bundle weigh megabytes to tens of megabytes). NULL if out of
 * memory. */
pft_bundle_t *pft_node__provenance_only(const node_t *nd, const pft_bundle_t *b);
/* The decoder's limits of this run: max_bytes is max_bundle_mb MiB, the transport's max_msg_size too. */
void pft_node__limits(const node_t *nd, pft_bundle_limits_t *lim);
/* The bundle id of a wire message under those limits; 0 or an error code (message set). */
int pft_node__message_id(const node_t *nd, const uint8_t *msg, size_t len, uint8_t id[PFT_BUNDLE_ID_LEN]);
int pft_node__stopping(void); /* 1 once a stop was requested */
void pft_node__set_status(node_t *nd, const char *state, const char *detail); /* out/status, best effort */
#ifdef PFT_TEST_HOOKS
void pft_node__crash_point(const char *point);              /* SIGKILL here if PFT_CRASH_AT=<point> */
int pft_node__test_hook(const node_t *nd, const char *var); /* 1 if the env var var names this node's id */
#else
#define pft_node__crash_point(point) ((void)0)
#define pft_node__test_hook(nd, var) 0
#endif

/* pft_node_refusal.c: every refusal in one place. */
typedef enum {
    PFT_NODE_REFUSED_BUNDLE = 0,    /* an inbound bundle failed validation (decode, signature, match) */
    PFT_NODE_REFUSED_TRANSPORT = 1, /* the transport dropped or NACKed a message itself */
    PFT_NODE_REFUSED_HANDSHAKE = 2, /* an inbound connection was refused */
    PFT_NODE_REFUSED_STORED = 3, /* a bundle stored in out/inbox/ does not match its id or fails validation */
} pft_node__refusal_kind_t;
/* Counts a refusal (handshakes in handshakes_denied, the rest in rejected), keeps its reason, logs it
 * (at most a few lines per kind and second; the rest summarised by pft_node__refusal_tick). */
void pft_node__refusal(node_t *nd, pft_node__refusal_kind_t kind, const char *reason);
/* The transport's refusal callback (ctx is the node_t). */
void pft_node__refusal_on_transport(void *ctx, pft_transport_refusal_t kind, const char *reason);
/* Logs the summaries of windows that ended and writes out/refusals.json if it changed (at most once a second;
 * force: now). */
void pft_node__refusal_tick(node_t *nd, int force);
/* Reloads the counters of an earlier run of this node from out/refusals.json (none: zero). 0 or an error
 * code (the file exists but is unreadable or malformed). */
int pft_node__refusal_load(node_t *nd);

/* pft_node_setup.c: each returns 0 or a pft error code (with its message set). */
/* Loads and preps train/test/eval; sets n_classes and own_counts. */
int pft_node__setup_data(node_t *nd);
/* Checks that a --listen-fd socket listens on the endpoint's port. */
int pft_node__setup_listen_fd(int fd, const char *endpoint);
/* This node's keypair and every public key; CURVE keys into to (nothing with --insecure). */
int pft_node__setup_keys(node_t *nd, pft_transport_opts_t *to, uint8_t cpub[PFT_KEY_CURVE_LEN],
                         uint8_t csec[PFT_KEY_CURVE_LEN]);
/* Inbound slots, outbound peers (fallbacks too), the keys allowed to connect. */
int pft_node__setup_io(node_t *nd);

/* pft_node_inbox.c */
/* The transport's callback for one inbound message (ctx is the node_t). */
int pft_node__inbox_on_message(void *ctx, const uint8_t *buf, size_t len, char *reason, size_t rlen);
/* Loads the bundles stored in out/inbox/ by an earlier run of this node. */
void pft_node__inbox_load(node_t *nd);
/* Waits until each of the stage's inbound hand-offs arrived or passed its deadline. */
int pft_node__inbox_wait(node_t *nd, const pft_stage_t *st);
/* The stage's received bundles into list (room for st->n_recv), largest knowledge first; returns how many. */
size_t pft_node__inbox_stage_bundles(node_t *nd, const pft_stage_t *st, inbound_t **list);
/* A FORWARD stage's complete bundle, or NULL if it did not arrive. */
inbound_t *pft_node__inbox_complete(node_t *nd, const pft_stage_t *st);

/* pft_node_refit.c */
/* A REFIT stage's bundle (*out, the caller's); in a final stage also the head's rows. */
int pft_node__refit(node_t *nd, const pft_stage_t *st, int complete, pft_bundle_t **out);
/* The head's rows for an adopted complete bundle (s->bundle may be NULL: own rows only). */
int pft_node__refit_adopt(node_t *nd, const inbound_t *s);

/* pft_node_rows.c: weighted rows and the Monte Carlo budget. */
void pft_node__rows_free(rows_t *r);
/* Room for extra more rows (0 or PFT_ENOMEM). */
int pft_node__rows_reserve(rows_t *r, int extra);
/* Appends n rows of label, each of the given weight (0 or PFT_ENOMEM with a message). */
int pft_node__rows_append(rows_t *r, const float *x, int n, int label, double weight);
/* Appends n draws of g (rng) as rows of label, each of the given weight. */
int pft_node__rows_sample(rows_t *r, const pft_gmm_t *g, pft_rng_t *rng, int n, int label, double weight);
/* 1 if every row weighs exactly 1 (the paper's protocol): the unweighted fits apply. */
int pft_node__rows_all_unit(const rows_t *r);
/* How many synthetic rows stand for one class received from nr bundles, bundle r standing for m[r] rows
 * of it: f per row, at most mc_budget for the class (0: no bound; a DP node: one per row, no bound), split
 * by m[r], at least one per bundle with rows. Each draw of bundle r then weighs m[r] / draws[r].
 * 0, or PFT_ENOMEM when the count is out of reach. */
int pft_node__mc_draws(const node_t *nd, int f, const uint64_t *m, size_t nr, int *draws);

/* pft_node_stats.c: exact statistics. */
/* A REFIT stage of an exact node: own statistics ∪ the received parts, each contributor once; one outbound
 * part per group of the plan (pft_topo_part_groups); in a final stage also nd->head_stats. */
int pft_node__stats_refit(node_t *nd, const pft_stage_t *st, int complete, pft_bundle_t **out);
/* nd->head_stats from an adopted complete statistics bundle (s->bundle may be NULL: own rows only). */
int pft_node__stats_adopt(node_t *nd, const inbound_t *s);
/* A sampling node's Gaussian head statistics: own rows exactly, plus each received mixture's moments for the
 * rows it adds (take, as the refit counted them), plus a complete bundle's moments minus own rows. */
int pft_node__stats_for_mixtures(node_t *nd, inbound_t **recv, const uint64_t *take, size_t nr,
                                 const pft_bundle_t *complete);
/* The Gaussian head from nd->head_stats (shrinkage by cross-validation over own rows), evaluated; head.npy
 * (LDA) or head_qda_*.npy (QDA); fills res. */
int pft_node__stats_train_head(node_t *nd, json_t *res);

/* pft_node_release.c: DP-FedPFT. */
/* Checks k = 1, loads the ledger, seeds the noise; sets nd->dp (nothing else without DP). */
int pft_node__release_setup(node_t *nd);
/* One class's noisy K = 1 Gaussian of x (n rows) into *out. */
int pft_node__release_fit(node_t *nd, int c, const float *x, int n, pft_gmm_t **out);
/* The (ε, δ)-DP release of this node's own rows' exact statistics of kind (pft_gstat_dp) into *out; records
 * σ, Δ₂ and the clipped rows in nd->dp "release" and δ in nd->dp_delta_max. */
int pft_node__release_stats(node_t *nd, pft_gstat_kind_t kind, pft_gstat_t **out);
/* Charges one bundle's release to the ledger and persists it; PFT_EBUDGET past the budget. */
int pft_node__release_charge(node_t *nd);

/* pft_node_outbox.c */
/* Sends a stage's message to its successors (not again where acknowledged before a restart). */
int pft_node__outbox_send(node_t *nd, const pft_stage_t *st, const uint8_t *bytes, size_t len);
/* Records newly acknowledged hand-offs in out/acked/. */
void pft_node__outbox_save_acks(node_t *nd);
/* The transport's acknowledgement callback (ctx is the node_t): records the hand-off in out/acked/ at once.
 */
void pft_node__outbox_on_ack(void *ctx, int handle);
/* "pending", "acked", "rejected", "failed" (pft_send_state_name) or "unconfirmed". */
const char *pft_node__outbox_state_name(int state);
/* A send's pft_send_state_t or PFT_NODE_SEND_UNCONFIRMED; acknowledged before a restart counts as
 * acknowledged. */
int pft_node__outbox_state(const node_t *nd, const outbound_t *o, int *rc, const char **reason);
/* Waits for every send to end, falling back where the topology says; returns how many reached no one. */
int pft_node__outbox_finish(node_t *nd, int *interrupted);

/* pft_node_result.c */
/* Serves the transport (acks, retransmissions) between the steps of a long computation; ctx is the node_t. */
void pft_node__result_serve(void *ctx);
/* A head's accuracy and per-class accuracy (n_classes entries, NaN for a class without rows) on set. */
typedef int (*pft_node__predictor_t)(const void *model, const float *x, int n, int32_t *pred);
/* Checks the evaluation set at setup (shape, labels, every value finite) and keeps its labels; no-op
 * without --eval-features. */
int pft_node__eval_setup(node_t *nd);
/* Scores a head on the test split and the eval set: accuracy_local / _global and their per-class arrays in
 * res (null where the set is missing). */
int pft_node__result_evaluate(node_t *nd, json_t *res, pft_node__predictor_t predict, const void *model);
/* Trains the head on nd->head_rows, evaluates it, writes out/head.npy; fills res. */
int pft_node__result_train_head(node_t *nd, json_t *res);
/* Privacy floor bookkeeping of a refit: starts it afresh (before the refit) ... */
int pft_node__result_floor_reset(node_t *nd);
/* ... records class c (rows: the rows it would have stood for) as withheld, with a log line ... */
void pft_node__result_withhold(node_t *nd, int c, uint64_t rows, const char *what);
/* ... and, once the bundle is built, the smallest count each released class stands for: per class the
 * smallest count × weight over its components, or for statistics the smallest class count over the parts. */
void pft_node__result_released(node_t *nd, const pft_bundle_t *b);
/* 1 if the current refit withheld class c. */
int pft_node__result_is_withheld(const node_t *nd, int c);
/* Fills res with the run's outcome and writes out/result.json. */
int pft_node__result_write(node_t *nd, json_t *res, int exit_code);

#endif
