/* pft_node_internal: the peer's state and the functions its files share. Internal to node/peer: never include
 * it from elsewhere (the public interface is pft_node.h).
 *
 * The peer is one actor (DESIGN.md §3.1): one loop (pft_node_loop.c) owns the transport, the timers and the
 * chores; the stage machine (pft_node.c) runs the topology's stages through it. What varies is chosen once
 * at setup through two ops tables (pft_node_table.c): the knowledge method (sampling, exact) and the head
 * (logreg, gaussian, ncm), one file per entry. Files, from the bottom up (a file calls only files above it in
 * this list, never one below, so no two files call each other):
 *   pft_node_base.c       status file, stop flag, limits, provenance-only bundles, test hooks
 *   pft_node_fp.c         the topology fingerprint: computed at setup, stamped on bundles, checked on receipt
 *   pft_node_endpoint.c   out/endpoint written; open successors' endpoints read from theirs
 *   pft_node_refusal.c    every refusal: logged (rate-limited), counted, persisted in out/refusals.json
 *   pft_node_floor.c      the privacy floor's record (min_rows): withheld classes, smallest released counts
 *   pft_node_rows.c       weighted rows; the Monte Carlo budget per received class
 *   pft_node_release.c    DP-FedPFT: releases, the ledger, its setup
 *   pft_node_eval.c       the evaluation set: checked at setup, scored in blocks
 *   pft_node_plausible.c  what a received bundle may claim (contributors, counts, norms), before the ACK
 *   pft_node_inbox.c      matching, accepting, storing and loading inbound bundles; when a stage may start
 *   pft_node_outbox.c     sending, acknowledgements on disk, fallback successors, when the sends have ended
 *   pft_node_loop.c       the one loop: serve the transport, chores, until a condition holds; yield
 *   pft_node_parts.c      exact statistics as parts (who contributed), merged per group of the plan
 *   pft_node_dmask.c      secure aggregation: double masking (self-masks, their seeds shared t-of-n) where
 *                         dropouts are recovered
 *   pft_node_consist.c    secure aggregation: the consistency round (every survivor signs the survivor set
 *                         it was declared; it reveals only with t signatures over that same set)
 *   pft_node_dropout.c    secure aggregation: a star's members that never deliver, recovered (its chore runs
 *                         through nd->chore, its messages come through the top file's dispatch, its waits
 *                         are conditions the stage machine turns the loop on)
 *   pft_node_step_rule.c  release step `rule`: the release rule's rank, on the bundle and a masked part
 *   pft_node_secagg.c     secure aggregation: the plan, own rows masked, a group's masked sum opened
 *   pft_node_noise.c      the DP noise accumulated in a head's statistics (result.json dp_noise)
 *   pft_node_evidence.c   the shrinkage's evidence: own rows' tallies sent, every contributor's summed
 *   pft_node_step_floor.c release step `floor`: own classes below min_rows withheld
 *   pft_node_step_noise.c release step `noise`: own statistics as a DP release
 *   pft_node_step_meannoise.c release step `mean_noise`: noise of a fixed scale on own class sums
 *   pft_node_step_mask.c  release step `mask`: own statistics masked for the group's opener
 *   pft_node_step.c       what a node sends as one pipeline: the release steps chosen at setup, run in order
 *   pft_node_sampling.c   method `sampling`: draws from received GMMs ∪ own rows, EM per class
 *   pft_node_exact.c      method `exact`: own statistics ∪ received parts, merged without loss
 *   pft_node_head.c       a head's run: fit, write, evaluate, describe
 *   pft_node_head_*.c     the heads: logreg, gaussian (LDA/QDA), ncm
 *   pft_node_table.c      the method and head tables
 *   pft_node_setup.c      data, keys, the handed-over listening socket, inbound slots and outbound peers
 *   pft_node_result.c     result.json
 *   pft_node.c            the stage machine and pft_node_run, exit codes
 * Functions shared between files are named pft_node__<file>_<verb>; the rest are static. Each file writes
 * only its own part of node_t (hand, know, head, tally, dp, refusal, eval); the rest is read-only after
 * setup. */
#ifndef PFT_NODE_INTERNAL_H
#define PFT_NODE_INTERNAL_H

#include "pft_node.h"

#include "pft_bundle.h"
#include "pft_gmm.h"
#include "pft_ghead.h"
#include "pft_gstat.h"
#include "pft_rng.h"
#include "pft_secplan.h"
#include "pft_secmsg.h"
#include "pft_dataset.h"
#include "pft_dirlock.h"
#include "pft_slots.h"
#include "pft_dp.h"
#include "pft_keys.h"
#include "pft_topo.h"
#include "pft_topo_fingerprint.h"
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
                    used (pft_node_exact.c), so a node receiving many keeps one decoded at a time */
    int stored_before; /* 1: loaded from out/inbox/, received by an earlier run of this node */
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
    int delivered;    /* 1: the successor's receipt was found (PFT_NODE_SEND_DELIVERED); where in reason */
    double receipt_looked; /* when (pft_fsio_now()) the receipt was last looked for */
    double receipt_seen;   /* when the receipt of a pending send was found (0: not yet) */
    char reason[512];
} outbound_t;

/* A send's node-level state beyond pft_send_state_t: no ACK was read, but the successor's receipt (the bundle
 * stored in its inbox, RELIABILITY.md §5) says it stored the bundle: delivered, as good as acknowledged. */
#define PFT_NODE_SEND_DELIVERED 5

/* Weighted rows for EM or the head, grown as classes are added (pft_node_rows.c). */
typedef struct {
    float *x;
    int32_t *y;
    double *w;     /* each row's weight: the rows of knowledge it stands for (1 for a real row) */
    double weight; /* their sum */
    int n, cap, d;
} rows_t;

/* One class withheld by the privacy floor in a refit. */
typedef struct {
    int cls;
    uint64_t rows; /* the rows it would have stood for */
} floor_withheld_t;

/* The privacy floor's record of the last refit (pft_node_floor.c). */
typedef struct {
    int started; /* a refit started it: result.json reports it */
    int n_classes;
    double *min_released;       /* per class: the smallest count a released model or part stands for; < 0:
                                   not released */
    floor_withheld_t *withheld; /* in the order they were withheld, at most n_classes */
    int n_withheld;
} floor_t;

/* A successor whose topology endpoint leaves the port open: its endpoint is read from its output folder. */
typedef struct {
    const char *id; /* borrowed from the topology */
    char ep[256];   /* the endpoint the transport connects to ("": none known yet) */
} open_peer_t;

typedef struct node node_t;

/* A knowledge method (pft_node_table.c): how a node turns its rows and the received bundles into its
 * outbound bundle and its head's input. Chosen once from the topology (exact or not). */
typedef struct {
    const char *name;
    /* A REFIT stage: a new bundle from own rows and the stage's received bundles into *out (the caller's); in
     * a final stage also the head's input (nd->head). On error *out is untouched and the message says why. */
    int (*refit)(node_t *nd, const pft_stage_t *st, int complete, pft_bundle_t **out);
    /* A final FORWARD stage: the head's input from an adopted complete bundle (s->bundle NULL: own rows). */
    int (*adopt)(node_t *nd, const inbound_t *s);
    /* Optional (NULL): a final REFIT stage, once its bundle is handed to the outbox: the rest of the head's
     * input, what nothing sent depends on (off the hop's critical path). */
    int (*after_send)(node_t *nd);
} pft_node_method_t;

/* A head's predictions for n rows (pft_node__eval_score's predictor). */
typedef int (*pft_node__predictor_t)(const void *model, const float *x, int n, int32_t *pred);

/* A head (pft_node_table.c): what it trains on, how it is fitted, used, written and described. Chosen once
 * from the topology's `head`; run by pft_node__head_train. */
typedef struct {
    const char *name;
    int wants_stats; /* 1: its input is class statistics (nd->head.stats); 0: weighted rows (nd->head.rows) */
    /* Fits the model (*model, freed by destroy) on nd->head's input, which it may consume. */
    int (*fit)(node_t *nd, void **model);
    pft_node__predictor_t predict;
    /* Writes the model's files into out/ (head.npy, ...). */
    int (*write)(const node_t *nd, const void *model);
    /* Adds the model's fields to result.json. */
    void (*describe)(const node_t *nd, const void *model, json_t *res);
    void (*destroy)(void **model);
    /* Optional (NULL): scores what the model was compared with (the gaussian head's own-statistics head
     * beside noisy components) and adds it to result.json. */
    int (*eval_more)(node_t *nd, const void *model, json_t *res);
} pft_node_head_t;

/* What a release step works on (pft_node_step.c): this node's own rows on their way into its outbound bundle,
 * then the bundle. */
typedef struct pft_node_release pft_node__release_t;

/* One class's model on its way into a bundle of the sampling method (pft_node__step_model). */
typedef struct pft_node_model pft_node__model_t;

/* A release step (pft_node_step_*.c): one stage of what a node sends, chosen once at setup by applies(). */
typedef struct {
    const char *name;
    int (*applies)(const node_t *nd); /* 1: this node's releases go through the step (asked once, at setup) */
    /* Sets what the step makes every release of this node (nd->pipe's answers, which the other files ask),
     * once at setup where the step applies; NULL: nothing. */
    void (*declare)(node_t *nd);
    /* Works on the own part in r (r->ps, r->merged, r->rows, r->st); NULL: nothing to do there. */
    int (*own)(node_t *nd, pft_node__release_t *r);
    /* Works on the outbound bundle r->b, its parts merged; NULL: nothing to do there. */
    int (*bundle)(node_t *nd, pft_node__release_t *r);
    /* Works on one class's model of the sampling method (m): may withhold it or make it; NULL: nothing. */
    int (*model)(node_t *nd, pft_node__model_t *m);
} pft_node_step_t;

#define PFT_NODE_MAX_STEPS 8

/* One peer's whole state for a run. The top fields are set up once and then only read; each sub-struct is
 * written by the files named beside it. */
struct node {
    const pft_node_args_t *args;
    pft_topo_t *topo;
    const pft_topo_run_t *run;
    const pft_topo_node_t *me;
    size_t my_index;
    const pft_node_method_t *method; /* chosen once (pft_node_table.c) */
    const pft_node_head_t *head_ops; /* chosen once (pft_node_table.c) */
    pft_topo_fp_t *fp;               /* the topology's fingerprint, set before the transport opens */
    pft_dataset_t *train, *test;
    int n_classes;
    int *own_counts; /* real training rows per class (n_classes) */
    double t_start;
    int turn_scale;      /* the loop's waits are this many times longer (pft_node_loop.c): 1 up to 64 nodes */
    pft_slots_t *slots;  /* --compute-slots: the machine's compute slots (NULL: none) */
    pft_dirlock_t *lock; /* out/ itself, flock'ed for the whole run; NULL until taken (pft_node_setup.c) */
    char status[512];    /* the status line last written to out/status (pft_node_base.c) */
    void (*chore)(struct node *nd); /* one more chore of every loop turn, set by a file above the loop (the
                                       dropout recovery's answers), or NULL */
    int fatal; /* a pft error code that ends the run at the next loop turn (the inbox could not store
                  a bundle), 0 if none; its message is in fatal_msg (pft_node_inbox.c) */
    char fatal_msg[512];
    struct { /* hand-offs: pft_node_setup.c, pft_node_inbox.c, pft_node_outbox.c */
        pft_transport_t *tp;
        inbound_t *in;
        size_t n_in;
        outbound_t *out;
        size_t n_out;
        char *inbox_dir;
        const char
            *complete_producer; /* producer of the complete bundle (ring: the producer; mesh: the
                                 * root, whose role is also PFT_ROLE_PRODUCER); NULL for a chain or dag */
        pft_keypair_t *kp;      /* this node's keypair (unless --insecure) */
        pft_pubkey_t *keys;     /* every node's public key, by node index */
        open_peer_t *open;      /* successors whose port is open (pft_node_endpoint.c) */
        size_t n_open;
        double open_looked; /* when their endpoint files were last read */
    } hand;
    struct {                /* knowledge: the methods */
        pft_bundle_t *prov; /* provenance the node ended with */
        json_t *drift;      /* per received bundle: mean log-lik of own features under it */
        floor_t floor;      /* the privacy floor of the last refit */
    } know;
    struct {                      /* the head's input: the methods fill it, the heads consume it */
        rows_t rows;              /* what a rows head trains on */
        pft_gstat_t *stats;       /* what a statistics head is built from */
        pft_ghead_extra_t *extra; /* noisy components beside stats (DP sums received; pft_ghead.h) */
        double *extra_means;      /* their means, n_extra × d (extra[k].mean points here) */
        int n_extra;
        int has_own; /* stats include this node's own rows (they may choose the shrinkage) */
        pft_ghead_evidence_t own_ev[PFT_GHEAD_N_ALPHA]; /* own rows' tallies (pft_node_evidence.c) */
        int has_own_ev;
        uint64_t own_against;     /* rows of the statistics own_ev was scored against */
        pft_ghead_evidence_t *ev; /* every contributor's tallies, n_ev × PFT_GHEAD_N_ALPHA */
        double *ev_against;       /* per contributor: rows of the statistics it scored against */
        int n_ev;
        double ev_alpha;  /* the α the evidence chose (-1: none); for result.json */
        int ev_used;      /* contributors whose evidence chose it */
        uint64_t ev_rows; /* own rows of all contributors that scored it */
    } head;
    struct { /* counters for result.json: the methods and heads */
        int n_real, n_synthetic;
        double em_seconds, head_seconds;
        int em_rows_max; /* most rows one EM fit saw (own + draws: bounded by the Monte Carlo budget) */
        long em_iters;
        int em_fits;
    } tally;
    struct {                    /* DP: pft_node_release.c (and the noise record, pft_node_noise.c) */
        pft_rng_t *rng;         /* noise generator, seeded from the OS (never from the run seed) */
        pft_dp_budget_t budget; /* ledger, persisted in out/dp_ledger.json */
        json_t *info;           /* what the releases were, for result.json */
        double delta_max;       /* largest delta over this bundle's classes */
        int clipped;            /* rows clipped to norm 1 */
    } dp;
    struct {                   /* pft_node_refusal.c */
        int rejected;          /* inbound messages refused (survives restarts) */
        int handshakes_denied; /* inbound connections refused (ZAP, plain text vs CURVE; survives restarts) */
        json_t *reasons;       /* their reasons, the first PFT_NODE_MAX_REFUSALS */
        int handshake_reasons; /* of them, handshakes' (at most PFT_NODE_MAX_HANDSHAKE_REASONS) */
        struct {
            double window;  /* start of the current one-second logging window */
            int logged;     /* lines logged in it */
            int suppressed; /* refusals not logged in it */
        } log[4];           /* per pft_node__refusal_kind_t */
        int dirty;          /* counters changed since out/refusals.json was written */
        double saved;       /* when it was last written */
    } refusal;
    struct {                          /* secure aggregation (pft_node_secagg.c; set up once, then read) */
        pft_secplan_t *plan;          /* NULL: secure_agg = off */
        const pft_secplan_node_t *me; /* this node's place in it */
        char label[PFT_BUNDLE_MAX_NAME + 16]; /* the group's use label: "<opener id>:tied" */
        const char *opener;                   /* id of the group's opener (NULL: no group) */
        size_t *members;                      /* the group's members, node indices */
        size_t n_members;
        json_t *info;    /* what this node masked, opened and saw, for result.json */
        uint32_t div;    /* DP noise divisor D of the plan (0: no DP) */
        double sigma;    /* DP: σ every opened aggregate carries at least (0: no DP) */
        double share_sd; /* DP: each member's noise share, σ/√D */
        int recover;     /* 1: every member hands off directly to the opener (a star): members
                            that never deliver are recovered (docs/SECAGG.md §5) */
        int unopened; /* opener: the group's sum did not open or failed the plausibility checks (exit 16) */
    } sec;
    struct { /* dropout recovery (pft_node_dropout.c): the opener's declaration and reveals, a member's answer
              */
        size_t *missing; /* opener: members declared missing (node indices), n_missing of them */
        size_t n_missing;
        int unrevealed;      /* opener: a survivor refused or never answered the declaration (exit 15) */
        unsigned char *have; /* opener: per node index, its reveal is in */
        uint8_t (*keys)[32]; /* opener: per node index × missing member, the revealed use keys */
        size_t n_keys;       /* opener: entries of keys */
        int *notice;         /* opener: per node index, the handle of its declaration or done notice
                                (-1: none) */
        int done_sent;       /* opener: the done notices went out */
        pft_secmsg_t *asked; /* member: a declaration accepted, answered in the next chore */
        double asked_at;     /* member: when it was accepted */
        int reveal;          /* member: the handle of its reveal (-1: none) */
        double revealed_at;  /* member: when it was (last) sent */
        int told;            /* member: the opener's done notice arrived */
        json_t *revealed;    /* member: the ids it revealed its use keys with (result.json) */
        int phase;    /* opener: where its opening stands (pft_node__drop_phase_t), a stage condition */
        double until; /* opener: the reveals are due by then (pft_fsio_now() time) */
    } drop;
    struct {             /* double masking (pft_node_dmask.c), where dropouts are recovered */
        size_t t;        /* shares of a self-mask seed the opener needs (0: no double masking) */
        size_t my_pos;   /* member: this node's position in the group (its share point is my_pos + 1) */
        uint8_t *blob;   /* member: its shares sealed for each member, one slot per position (own: zero) */
        size_t blob_len; /* member: bytes of blob */
        uint8_t **blobs; /* opener: per member position, the blob its masked part carried (NULL: none) */
        uint8_t (*shares)[48]; /* opener: per (member u, survivor s) positions, s's share of u's seed */
        unsigned char *have;   /* opener: per (u, s), that share is in */
        long victim; /* tests (PFT_TEST_LIAR_*): 1 + the index of the member whose bundle a lying opener
                        keeps aside and declares missing (0: none; always 0 without PFT_TEST_HOOKS) */
        uint64_t *victim_words; /* tests: the victim's masked words, kept aside (n_words) */
        double victim_bound;    /* tests: its decode bound */
    } dm;
    struct {                 /* the consistency round (pft_node_consist.c), where double masking runs */
        uint8_t (*sig)[64];  /* opener: per node index, the survivor's signature of its declaration */
        unsigned char *have; /* opener: per node index, that signature is in and checked */
        size_t n_forwarded;  /* opener: signatures forwarded to the survivors (0: not yet) */
        int sign;            /* member: the handle of its signature's send (-1: none) */
        double signed_at;    /* member: when it was (last) sent */
        int agreed;          /* member: t signatures over its declaration's survivors checked: it reveals */
        char refused[1024];  /* member: why it refused the opener's signatures ("": it did not) */
    } cons;
    struct { /* the release pipeline (pft_node_step.c; set up once, then read) */
        const pft_node_step_t *steps[PFT_NODE_MAX_STEPS]; /* the steps that apply, in order */
        int n_steps;
        /* What every release of this node is, declared by the steps at setup (the other files ask these,
         * never a privacy setting): */
        int noisy;   /* it carries DP noise (step noise): own parts carry this node's guarantee, no exact
                        tally of own rows goes beside them, each release is charged to the ledger */
        int redraws; /* its noise is drawn anew at each release (step noise): a restart resends the bytes
                        it stored rather than draw again, and no hand-off leaves unrecorded */
        int per_row; /* its sensitivity is per row (step noise): the union it is computed on is unweighted,
                        one draw per row it stands for */
        uint64_t noise_seed; /* step mean_noise: its seed (from the node key's signature of the run id) */
        int noise_seeded;    /* 1 once noise_seed is drawn */
    } pipe;
    struct { /* the evaluation set (pft_node_eval.c): its labels; its features are read in blocks */
        int32_t *y;
        int n, d, classes;
    } eval;
};

#define PFT_NODE_MAX_REFUSALS 100 /* reasons kept in result.json's refusals (all are counted) */
/* of them, at most this many distinct reasons of refused handshakes (each text once): a flood of connections
 * (a port scanner, another run's node still reconnecting to a port the OS reused) leaves room for the reasons
 * of refused bundles */
#define PFT_NODE_MAX_HANDSHAKE_REASONS 20

/* ---- pft_node_base.c: the run's shared plumbing ---- */
/* A bundle holding only b's provenance (with its DP guarantees): all that the node reports of a bundle once
 * its models are used (the models of a d = 1280 bundle weigh megabytes to tens of megabytes). NULL if out of
 * memory. */
pft_bundle_t *pft_node__provenance_only(const node_t *nd, const pft_bundle_t *b);
/* The provenance of this node's own rows only (what a head trained on own data alone used); NULL if out of
 * memory. */
pft_bundle_t *pft_node__own_provenance(const node_t *nd);
/* The decoder's limits of this run: max_bytes is max_bundle_mb MiB, the transport's max_msg_size too. */
void pft_node__limits(const node_t *nd, pft_bundle_limits_t *lim);
int pft_node__stopping(void); /* 1 once a stop was requested */
void pft_node__set_status(node_t *nd, const char *state, const char *detail); /* out/status, best effort */
#ifdef PFT_TEST_HOOKS
void pft_node__crash_point(const char *point);              /* SIGKILL here if PFT_CRASH_AT=<point> */
int pft_node__test_hook(const node_t *nd, const char *var); /* 1 if the env var var names this node's id */
int pft_node__test_listed(const char *var, const char *id);  /* 1 if env var var (a,b,...) lists id */
/* What env var var says to this node: NULL unless it is "<id>" or "<id>:<args>"; else "" or ":<args>". */
const char *pft_node__test_arg(const node_t *nd, const char *var);
#else
#define pft_node__crash_point(point) ((void)0)
#define pft_node__test_hook(nd, var) 0
#define pft_node__test_listed(var, id) 0
#endif

/* ---- pft_node_refusal.c: every refusal in one place ---- */
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
/* The counters and reasons into result.json. */
void pft_node__refusal_json(const node_t *nd, json_t *res);

/* ---- pft_node_floor.c: the privacy floor's record ---- */
/* Room for n_classes classes; 0 or PFT_ENOMEM. */
int pft_node__floor_init(floor_t *f, int n_classes);
void pft_node__floor_free(floor_t *f);
/* Starts a refit's record afresh. */
void pft_node__floor_reset(floor_t *f);
/* Records class c as withheld (rows: what it would have stood for, below min_rows), with a log line. */
void pft_node__floor_withhold(floor_t *f, int min_rows, int c, uint64_t rows, const char *what);
/* 1 if the current refit withheld class c. */
int pft_node__floor_is_withheld(const floor_t *f, int c);
/* Once the bundle is built: the smallest count each released class stands for (per class the smallest count ×
 * weight over its components, or for statistics the smallest class count over the parts). */
void pft_node__floor_released(floor_t *f, const pft_bundle_t *b);
/* result.json's min_released_rows and withheld_classes (nothing before a refit). */
void pft_node__floor_json(const floor_t *f, json_t *res);

/* ---- pft_node_rows.c: weighted rows and the Monte Carlo budget ---- */
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
 * of it: f per row, at most mc_budget for the class (0: no bound; a release whose sensitivity is per row,
 * nd->pipe.per_row: one per row, no bound), split by m[r], at least one per bundle with rows. Each draw of
 * bundle r then weighs m[r] / draws[r]. 0, or PFT_ENOMEM when the count is out of reach. */
int pft_node__mc_draws(const node_t *nd, int f, const uint64_t *m, size_t nr, int *draws);

/* ---- pft_node_release.c: DP-FedPFT ---- */
/* Checks k = 1, loads the ledger, seeds the noise; sets nd->dp.info (nothing else without DP). */
int pft_node__release_setup(node_t *nd);
/* One class's noisy K = 1 Gaussian of x (n rows) into *out. */
int pft_node__release_fit(node_t *nd, int c, const float *x, int n, pft_gmm_t **out);
/* The (ε, δ)-DP release of the exact statistics of the rows of set (the node's own, less what the floor
 * withholds) of kind (pft_gstat_dp) into *out; records σ, Δ₂ and the clipped rows in nd->dp. */
int pft_node__release_stats(node_t *nd, const pft_dataset_t *set, pft_gstat_kind_t kind, pft_gstat_t **out);
/* Charges one bundle's release of this node's own rows to the ledger and persists it (nothing for a node
 * without rows: it releases nothing of its own); PFT_EBUDGET past the budget. */
int pft_node__release_charge(node_t *nd);
/* A masked member's DP release, its noise share of std share_sd (σ = sigma opened, D = div; clipped rows
 * clipped; docs/SECAGG.md §7), recorded: the ledger's δ and result.json's dp.release. */
void pft_node__release_share(node_t *nd, double share_sd, double sigma, uint32_t div, int clipped);
/* 1 and this node's (ε, δ) in *eps, *delta (δ the largest a release of it used; 0 before one) when its own
 * releases carry a DP guarantee; 0 otherwise. */
int pft_node__release_guarantee(const node_t *nd, double *eps, double *delta);
/* The DP record into result.json ("dp"), with the ledger. */
void pft_node__release_json(node_t *nd, json_t *res);

/* ---- pft_node_eval.c ---- */
/* Checks the evaluation set at setup (shape, labels, every value finite) and keeps its labels; no-op
 * without --eval-features. */
int pft_node__eval_setup(node_t *nd);
/* Scores a head on the test split and the eval set: accuracy_local / _global and their per-class arrays in
 * res (null where the set is missing). */
int pft_node__eval_score(node_t *nd, json_t *res, pft_node__predictor_t predict, const void *model);

/* ---- pft_node_plausible.c ---- */
/* 1 if bundle b (decoded, authenticated) claims only what its contributors can hold; else 0 with the reason
 * (for the refusal): a contributor outside the topology or this node itself (unless b is complete), a part's
 * class count above its contributors' `samples`, a mean longer than 1 or a scatter
 * whose trace exceeds its rows under row-normalising prep (parts of DP contributors excepted). */
int pft_node__plausible(const node_t *nd, const pft_bundle_t *b, char *reason, size_t rlen);
/* 0 if the opened sum st of a masked group (members[0..n), DP noise variance var per entry, 0: none) holds
 * only what the members' rows can (counts, means, the shared scatter's trace: the rules of a clear part);
 * else 1 with the reason. */
int pft_node__plausible_opened(const node_t *nd, const pft_gstat_t *st, const size_t *members, size_t n,
                               double var, char *reason, size_t rlen);

/* ---- pft_node_inbox.c ---- */
/* The transport's callback for one inbound message (ctx is the node_t). */
int pft_node__inbox_on_message(void *ctx, const uint8_t *buf, size_t len, char *reason, size_t rlen);
/* Loads the bundles stored in out/inbox/ by an earlier run of this node. */
void pft_node__inbox_load(node_t *nd);
/* The loop's condition for a stage (ctx: the pft_stage_t): 1 once each inbound hand-off arrived or passed its
 * deadline (those that did not are recorded as gone on without), 0 while waiting, or an error
 * (on_missing = fail). */
int pft_node__inbox_ready(node_t *nd, void *stage);
/* The stage's received bundles into list (room for st->n_recv), largest knowledge first; returns how many. */
size_t pft_node__inbox_stage_bundles(node_t *nd, const pft_stage_t *st, inbound_t **list);
/* A FORWARD stage's complete bundle, or NULL if it did not arrive. */
inbound_t *pft_node__inbox_complete(node_t *nd, const pft_stage_t *st);
/* After a stage: its received bundles are kept for their provenance only (the slot stays filled, so a
 * retransmission is still recognised by its id), and their bytes are freed (the stored file in out/inbox/
 * stays; s->len is kept for the results). */
void pft_node__inbox_release(node_t *nd, const pft_stage_t *st);
/* result.json's received and missing. */
void pft_node__inbox_json(const node_t *nd, json_t *recv, json_t *missing);
/* Seconds a finished node stays reachable at most for predecessors that have not confirmed reading their ACK:
 * the longest send_deadline of its inbound edges (0: none). */
double pft_node__inbox_hold_s(const node_t *nd);
/* Bundles stored and ACKed whose ACK the sender has not confirmed reading yet. */
int pft_node__inbox_unconfirmed(const node_t *nd);

/* ---- pft_node_outbox.c ---- */
/* Sends a stage's message to its successors (not again where acknowledged before a restart). */
int pft_node__outbox_send(node_t *nd, const pft_stage_t *st, const uint8_t *bytes, size_t len);
/* The bundle an earlier run of this node stored (out/bundle.pftb) and recorded as sent or acknowledged on one
 * of stage st's hand-offs (out/sent/, out/acked/): its bytes into *buf (pft_free) and 1; 0 if none. A node
 * whose releases draw noise anew (nd->pipe.redraws) restarted before its hand-off was acknowledged sends
 * these bytes again instead of a fresh draw (its successor may hold the first one already, and two draws
 * would each spend the budget). */
int pft_node__outbox_earlier(const node_t *nd, const pft_stage_t *st, uint8_t **buf, size_t *len);
/* Records newly acknowledged hand-offs in out/acked/. */
void pft_node__outbox_save_acks(node_t *nd);
/* The transport's acknowledgement callback (ctx is the node_t): records the hand-off in out/acked/ at once.
 */
void pft_node__outbox_on_ack(void *ctx, int handle);
/* The loop's chores for sends: pending sends whose successor's receipt appeared end as delivered (looked for
 * at most once a second each), failed sends are handed to the fallback successors. */
void pft_node__outbox_tick(node_t *nd);
/* The loop's condition (ctx unused): 1 once every send ended (acked, delivered, rejected or failed,
 * fallbacks queued where the topology says). */
int pft_node__outbox_done(node_t *nd, void *ctx);
/* Logs how each send ended; returns how many hand-offs reached no one (one still pending when the node was
 * interrupted does not count: a restart sends it again). */
int pft_node__outbox_report(node_t *nd, int interrupted);
/* result.json's sent. */
json_t *pft_node__outbox_json(const node_t *nd);

/* ---- pft_node_loop.c: the one loop ---- */
/* A condition of the loop: 1 when met, 0 to keep turning, or a negative error code (message set). */
typedef int (*pft_node__cond_fn)(node_t *nd, void *ctx);
/* Turns the loop until cond holds: each turn checks the condition, then serves the transport (waiting up to
 * timeout_ms) and the chores. 0 once it holds; the condition's error; PFT_EINTR once a stop was requested;
 * the fatal error of the inbox; or the transport's error. */
int pft_node__loop_until(node_t *nd, pft_node__cond_fn cond, void *ctx, int timeout_ms);
/* pft_node__loop_until with turns of timeout_ms as given (not scaled by the topology's size). */
int pft_node__loop_every(node_t *nd, pft_node__cond_fn cond, void *ctx, int timeout_ms);
/* The factor of the loop's waits for a topology of n nodes (1 up to 64, at most 25): nd->turn_scale. */
int pft_node__turn_scale(size_t n);
/* The factor of a compute slot's polling wait: the turn's, at most 5. */
int pft_node__slot_scale(size_t n);
/* One turn that does not wait (ctx is the node_t): the callback through which a long computation (EM, the
 * head's fit) yields to the loop, so that ACKs are read and retransmissions go out meanwhile. */
void pft_node__loop_yield(void *ctx);

/* ---- pft_node_parts.c: exact statistics as parts (the exact method's working set) ---- */
/* A part taken for this node's statistics. */
typedef struct {
    pft_gstat_t *st; /* owned: what is sent on (this node's own part: its DP release with the step noise) */
    const pft_gstat_t
        *view;      /* borrowed instead of st: a received bundle's part (the bundle outlives the refit) */
    int exact_rows; /* 1: this node's own part as sent differs from its rows (floor, DP): the head adds the
                       rows themselves, exactly, from the dataset */
    int floor_rows; /* 1 with exact_rows: st is this node's rows less the classes the floor withheld, exactly
                       (no other step changed them) */
    int floor_rest; /* 1: this node's own rows less the classes the floor withheld, merged (pft_node__parts_
                       take_own_rows): the head adds the withheld classes' rows, exactly, from the dataset */
    size_t *who;    /* contributor node indices */
    int n_who;
    const pft_bundle_t *b; /* where its provenance is read (NULL: this node's own rows) */
    int merged;            /* its statistics were merged into acc[group] (st and view are then NULL) */
    long group;            /* merged: the accumulator it went into */
    int masked; /* secure aggregation: its words were added to mw[group] (st and view NULL); once opened,
                   merged is set and its statistics are in acc[group] */
} part_t;

typedef struct {
    part_t *p;
    int n, cap;
    unsigned char *covered; /* by node index */
    size_t n_nodes;
    long *grp;         /* this node's part groups, by node index (pft_topo_part_groups) */
    pft_gstat_t **acc; /* by group id: the merged statistics of the received parts of that group, or NULL */
    unsigned char
        *noisy;   /* by group id: acc holds a DP release of sums (TIED): means only, its scatter void */
    double *nvar; /* by group id × class: the noise variance per entry of acc's class sums */
    /* secure aggregation (pft_node_secagg.c): masked parts summed word-wise per group, never decoded here */
    uint64_t **mw;    /* by group id: the sum mod 2^64 of the group's masked parts (n_words each), or NULL */
    size_t n_words;   /* words of a masked part (pft_bundle_masked_words, TIED, n_classes classes) */
    double *mbound;   /* by group id: the sum of the masked parts' decode bounds */
    uint64_t *mcount; /* by group id × class: the masked parts' public counts */
} parts_t;
/* An empty set of parts for nd: groups computed; 0 or an error. */
int pft_node__parts_init(const node_t *nd, parts_t *ps);
void pft_node__parts_free(parts_t *ps);
/* The kind of statistics this node keeps (TIED for cov = tied, else FULL). */
pft_gstat_kind_t pft_node__parts_kind(const node_t *nd);
/* The statistics a part stands for. */
const pft_gstat_t *pft_node__parts_stats(const part_t *p);
/* Takes *st (owned; on success) or view (borrowed; st NULL) as a part of contributors who[0..n); refuses a
 * part that overlaps what is already counted without being contained in it; skips one that is wholly counted
 * (returns 1). */
int pft_node__parts_take(parts_t *ps, pft_gstat_t **st, const pft_gstat_t *view, const size_t *who, int n_who,
                         const pft_bundle_t *b, const char *from);
/* The parts of a received bundle b (provenance read from prov): its statistics parts, or one FULL part of a
 * mixture bundle's moments. */
int pft_node__parts_take_bundle(node_t *nd, parts_t *ps, const pft_bundle_t *b, pft_bundle_t *mine,
                                const pft_bundle_t *prov);
/* Merges every received part not merged yet into its group's accumulator (any_group: a complete bundle's
 * parts, which need no group of this node's plan). */
int pft_node__parts_fold(const node_t *nd, parts_t *ps, int any_group);
/* Memory: this node's own part merged into its group's accumulator at once and its statistics freed (one d×d
 * scatter less while the head's statistics and the evidence are made), where that gives the same sums as
 * merging it into the outbound part later: the own part is the only one not merged yet, plain (no DP or mean
 * noise, no withheld rows, no secure aggregation), and its group's accumulator the only one. Else nothing.
 * 0, or pft_gstat_merge's errors. */
int pft_node__parts_fold_own(const node_t *nd, parts_t *ps);
/* Memory: this node's released own rows (exactly: no step changed them; rows: all of them, or those the floor
 * left, floor_rest), added straight into its group's accumulator as a part of its own (*taken = 1), where the
 * group's accumulator is the only one and every other part is merged into it: no d×d scatter of the own rows
 * alone is ever made. The sums are those of merging the own part made of the rows up to rounding (each
 * class's scatter goes into the accumulator's instead of into a zero matrix first). With floor_rest the
 * head's statistics add the withheld classes' rows (pft_node__parts_total). *taken = 0 and nothing done where
 * it does not apply. 0, or pft_gstat_add_rows's errors. */
int pft_node__parts_take_own_rows(const node_t *nd, parts_t *ps, const pft_dataset_t *rows, int floor_rest,
                                  int *taken);
/* Merge of every taken part into *out (own rows exactly where a release differs from them). */
int pft_node__parts_total(const node_t *nd, const parts_t *ps, pft_gstat_t **out);
/* pft_node__parts_total, the same numbers bit for bit, made without a d×d copy where the total is one group's
 * TIED accumulator alone: *out takes its scatter W, and the accumulator keeps its counts and means, so the
 * outbound part made of it (pft_node__parts_add_groups) holds no W; its release is then the evidence's
 * (same_parts in pft_node_exact.c). */
int pft_node__parts_total_take(const node_t *nd, parts_t *ps, pft_gstat_t **out);
/* Adds to t this node's rows of the classes the floor withheld (the rows a floor_rows or floor_rest part
 * leaves out). 0, or pft_gstat_add_rows's errors. */
int pft_node__parts_add_withheld(const node_t *nd, pft_gstat_t *t);
/* 1 when the head's statistics are exactly the one clear part the outbound bundle will carry
 * (pft_node__parts_add_groups) plus this node's rows the floor withheld: own rows sent less withheld classes
 * (a floor_rows or floor_rest part), every part in one group, none masked or noisy, no secure aggregation,
 * TIED statistics. Then those statistics can be made after the part's release, from its W (late_statistics
 * in pft_node_exact.c): one d×d matrix at a time instead of the part's and the head's. Else 0. */
int pft_node__parts_rows_apart(const node_t *nd, const parts_t *ps);
/* One outbound part per group of the plan into b, with the contributors' provenance; with steal, the
 * accumulators (or the node's own part) become the outbound parts instead of copies. */
int pft_node__parts_add_groups(node_t *nd, parts_t *ps, pft_bundle_t *b, int steal);
/* The noisy components of the head (means known up to DP noise: the noisy groups' classes) into
 * nd->head.extra (replacing what was there); a noisy group that counts this node's own rows (a ring's
 * complete bundle) has them taken out exactly, and *own_inside (may be NULL) is set. 0 or PFT_ENOMEM. */
int pft_node__parts_noisy(node_t *nd, const parts_t *ps, int *own_inside);
/* 1 when part p holds a TIED DP release of another node (its statistics are means only); adds each such
 * contributor's σ² to var[class] for the classes it holds (var may be NULL). */
int pft_node__parts_noise(const node_t *nd, const part_t *p, double *var);
/* The σ of contributor id's release in part p (0: none; from its (ε, δ) at the node's release form), whether
 * it has a guarantee and whether its rows entered exactly here (own rows); *eps, *delta set with one. */
double pft_node__parts_sigma(const node_t *nd, const part_t *p, const char *id, double *eps, double *delta,
                             int *has_dp, int *exact_here);
/* Adds var to v[class] for every class contributor id holds in part p (provenance labels, or own counts). */
void pft_node__parts_class_var(const node_t *nd, const part_t *p, const char *id, double var, double *v);
/* Takes a masked part (secure aggregation) of contributors who[0..n): its words (n_words) added mod 2^64 to
 * the accumulator of its group, its public counts (n_classes, by label) and decode bound added too; refused
 * like pft_node__parts_take when it overlaps what is counted (1: wholly counted, skipped). */
int pft_node__parts_take_masked(const node_t *nd, parts_t *ps, const size_t *who, int n_who,
                                const pft_bundle_t *b, const uint64_t *words, const uint64_t *counts,
                                double bound, const char *from);
/* ---- pft_node_dmask.c: double masking where dropouts are recovered (docs/SECAGG.md §5) ---- */
/* nd->dm.t from the plan's threshold when the group is recoverable (else 0: everything below does nothing);
 * the opener's tables. */
int pft_node__dmask_setup(node_t *nd);
void pft_node__dmask_free(node_t *nd);
/* A member: adds its self-mask PRG(b_u) to words[0..n_words) and seals the t-of-n shares of b_u for every
 * member into nd->dm.blob (carried by its masked part). b_u comes from the node's key, run and label: a
 * restart rebuilds the same words and blob. */
int pft_node__dmask_member_add(node_t *nd, uint64_t *words, size_t n_words);
/* The opener: keeps the sealed shares the masked part of member v's bundle (in) carries; an error when they
 * are missing or of the wrong size (v's self-mask could not be removed). */
int pft_node__dmask_take_blob(node_t *nd, size_t v, const inbound_t *in);
/* The opener: sets d's extra to the shares sealed for survivor s by the other survivors surv[0..ns); returns
 * the memory to free with pft_node__dmask_extra_free after encoding (NULL without double masking, or out of
 * memory: then d has no extra). */
void *pft_node__dmask_declaration_extra(node_t *nd, size_t s, const size_t *surv, size_t ns, pft_secmsg_t *d);
void pft_node__dmask_extra_free(void **mem_p);
/* The opener: survivor s's reveal m must hold one share per survivor (surviving[v] for node v), each at s's
 * point; they are kept. PFT_EREJECT otherwise (pft_errmsg says why). */
int pft_node__dmask_take_reveal(node_t *nd, size_t s, const pft_secmsg_t *m, const unsigned char *surviving);
/* The opener: removes the self-mask of every member present[0..n_present) from sum, each seed rebuilt from
 * the shares revealed (at least t). An error names the member whose seed does not rebuild. */
int pft_node__dmask_remove(node_t *nd, const size_t *present, size_t n_present, uint64_t *sum,
                           size_t n_words);
/* A survivor: the declaration m must carry, for every other survivor, a share that opens with the pair's key
 * at this node's point. 0, or PFT_EREJECT with the reason. */
int pft_node__dmask_check_declaration(node_t *nd, const pft_secmsg_t *m, char *reason, size_t rlen);
/* A survivor: sets r's extra to its shares of every survivor's seed (its own included) for the checked
 * declaration m; returns the memory to free (wiped) with pft_node__dmask_extra_free, NULL on error. */
void *pft_node__dmask_reveal_extra(node_t *nd, const pft_secmsg_t *m, pft_secmsg_t *r);

/* ---- pft_node_consist.c: the consistency round of double masking (docs/SECAGG.md §5.1) ---- */
/* The opener's tables (nothing without double masking); a member's state. 0 or PFT_ENOMEM. */
int pft_node__consist_setup(node_t *nd);
void pft_node__consist_free(node_t *nd);
/* A member: r (its header set) becomes the SIGN of declaration d: d's ids and survivors and this node's
 * signature of their statement. Returns the memory to free with pft_node__dmask_extra_free after encoding,
 * NULL on error (message set). */
void *pft_node__consist_sign(node_t *nd, const pft_secmsg_t *d, pft_secmsg_t *r);
/* The opener: survivor v's SIGN m must restate the declaration sent to v (missing[0..n_missing) and
 * survivors[0..ns), ids sorted) and carry v's valid signature of it; kept. 0 or PFT_EREJECT with the reason.
 */
int pft_node__consist_take(node_t *nd, size_t v, const pft_secmsg_t *m, const char *const *survivors,
                           size_t ns, char *reason, size_t rlen);
/* The opener: 0 while survivor v's declaration is on its way or taken; PFT_EREJECT (reported: it refused it,
 * or never took it) once the transport says so. */
int pft_node__survivor_took(node_t *nd, size_t v);
/* The opener's condition while it collects the signatures (ctx: the time they are due): 1 when every
 * survivor in surv[0..ns) whose reveal is not in signed; an error when one refused or never took its
 * declaration, or past that time. */
int pft_node__consist_signed(node_t *nd, const size_t *surv, size_t ns, double until);
/* The opener: r (its header set) becomes the SIGNATURES of every signature collected. Memory as
 * pft_node__consist_sign's. */
void *pft_node__consist_forward(node_t *nd, pft_secmsg_t *r);
/* A member: the opener's SIGNATURES s for its accepted declaration d (NULL: none yet) must hold at least t
 * valid signatures of d's survivor set from distinct survivors of d, this node's among them; then it may
 * reveal (nd->cons.agreed). Else PFT_EREJECT, the reason naming the opener and the signers whose signature is
 * of another set (also logged and kept for result.json). */
int pft_node__consist_check(node_t *nd, const pft_secmsg_t *d, const pft_secmsg_t *s, char *reason,
                            size_t rlen);
/* result.json's secure_agg.consistency. */
void pft_node__consist_json(const node_t *nd, json_t *sec);

/* ---- pft_node_dropout.c: a star's members that never deliver (docs/SECAGG.md §5) ---- */
/* The opener's way to its opening, one stage condition (pft_node__dropout_ready) of the stage machine. */
typedef enum {
    DROP_IDLE = 0,  /* nothing looked at yet */
    DROP_DECLARED,  /* the missing members declared; the declarations go in the loop's next turn */
    DROP_SIGNING,   /* double masking: waiting for every survivor's signature of its declaration */
    DROP_REVEALING, /* waiting for every survivor's reveal */
    DROP_OPENABLE,  /* nobody missing, or every reveal in: the refit may open the group's sum */
} pft_node__drop_phase_t;
/* After the plan: nd->sec.recover; the opener connects to every member, a member admits the opener's key. */
int pft_node__dropout_setup(node_t *nd);
void pft_node__dropout_free(node_t *nd);
/* An inbound secagg message (pft_secmsg): checked, signature verified, recorded; same contract as the
 * transport's on_message (0 accepted, or a negative code with reason). */
int pft_node__dropout_on_message(node_t *nd, const uint8_t *buf, size_t len, char *reason, size_t rlen);
/* A chore of every loop turn: a member answers an accepted declaration with its reveal. */
void pft_node__dropout_tick(node_t *nd);
/* The stage machine's condition before a stage's work (ctx: the pft_stage_t), once its hand-offs are in or
 * gone on without: the opener of a recoverable group whose members hand off in a REFIT stage declares the
 * members whose bundle did not come to the survivors (once; an error unless the plan allows the dropout) and
 * holds until every survivor's reveal is in (an error when one refuses, or past send_deadline). 1 at once for
 * every other node and stage, and when nobody is missing. */
int pft_node__dropout_ready(node_t *nd, void *stage);
/* The opening (pft_node_secagg.c), computing only: cancels the survivors' masks with the missing members
 * missing[0..n) in sum[0..n_words) from the reveals pft_node__dropout_ready gathered. An error (nothing
 * opened) without recovery, or when they are not the members declared. */
int pft_node__dropout_cancel(node_t *nd, const size_t *missing, size_t n, uint64_t *sum, size_t n_words);
/* End of the run: the opener tells every member that delivered it is done; a member that did not fail is to
 * wait for that notice (or answer a declaration). 1 when the stage machine then waits on
 * pft_node__dropout_ended until *until (the opener: a little, for the acknowledgements; a member: its
 * deadline), 0 when there is nothing to wait for. */
int pft_node__dropout_finish(node_t *nd, int failed, double *until);
/* The loop's condition of the end (ctx: the until of pft_node__dropout_finish): the opener's notices ended,
 * or a member told, or past that time. */
int pft_node__dropout_ended(node_t *nd, void *until);
void pft_node__dropout_json(const node_t *nd, json_t *sec);

/* ---- pft_node_step_rule.c ---- */
/* The second moment R = N(U Uᵀ + diag ψ) + Σ_c s_c s_cᵀ/n_c of st (TIED) at the release rule's rank q
 * (pft_topo_release_rank), isotropic at q = 0, or the exact W + Σ_c s_c s_cᵀ/n_c under stats_release =
 * full_scatter: exactly what the node sends in the clear, into r (d×d; the lower triangle is what is masked).
 * 0 or an error. */
int pft_node__rule_matrix(const node_t *nd, const pft_gstat_t *st, double *r);

/* ---- pft_node_secagg.c: secure aggregation (docs/SECAGG.md) ---- */
/* With secure_agg = on: takes the plan the topology rules checked at start (nd->sec.plan), finds this node's
 * group and place in it and, with DP, its noise share; nothing otherwise. 0 or an error. */
int pft_node__secagg_setup(node_t *nd);
void pft_node__secagg_free(node_t *nd);
/* 1 if this node masks its own rows (it is a member of a group). */
int pft_node__secagg_masks_own(const node_t *nd);
/* The exit status a failed run owes to secure aggregation (an opener whose survivors never revealed, or
 * whose group's sum did not open: PFT_EXIT_UNREVEALED, PFT_EXIT_UNOPENED); 0: none. */
int pft_node__secagg_exit(const node_t *nd);
/* This node's own statistics st (exact, its released rows) as a masked part in ps: the class sums of every
 * class of the run and its release-rule second moment R = N(U Uᵀ + diag ψ) + Σ_c s_c s_cᵀ/n_c
 * (docs/SECAGG.md §6), in fixed point, masked with its group's pairs. 0 or an error. */
int pft_node__secagg_take_own(node_t *nd, parts_t *ps, const pft_gstat_t *st);
/* If this node opens a group: checks that the masked parts taken are exactly the group's members, each
 * class held by none or at least min_contributors of them, removes the masks, decodes and puts the opened
 * statistics in the group's accumulator (the parts then count as merged). 0 or an error. */
int pft_node__secagg_open(node_t *nd, parts_t *ps);
/* Checks that the statistics the head uses (the parts not masked) are the plan's view of this node: never
 * more contributors in the clear than the plan allows. 0 or PFT_EINVAL. */
int pft_node__secagg_check_view(node_t *nd, const parts_t *ps);
/* result.json's secure_agg (nothing without it). */
void pft_node__secagg_json(const node_t *nd, json_t *res);
/* ---- pft_node_noise.c ---- */
/* result.json's dp_noise (kept in nd->dp.info under "noise") for the head's statistics merged from ps. */
void pft_node__noise_json(node_t *nd, const parts_t *ps);

/* ---- pft_node_evidence.c ---- */
/* This node's tallies against total (its head's statistics, own rows included) into nd->head.own_ev when its
 * head chooses the shrinkage from evidence (LDA, no DP) and its rows allow cross-validation. 0 or an error.
 */
int pft_node__evidence_own(node_t *nd, const pft_gstat_t *total);
/* The same, computed in total's own scatter W (no copy: pft_ghead_evidence_keep); with keep->a set on return,
 * the tridiagonal reduction the tallies were computed in, which a release of the same W takes, and W is lent
 * to it: total holds no scatter until pft_ghead_evidence_give_back(total, keep). keep zeroed here. */
struct pft_la_trid_t;
int pft_node__evidence_own_keep(node_t *nd, pft_gstat_t *total, struct pft_la_trid_t *keep);
/* A relay's hop (DESIGN.md §8): its own rows' evidence against the one release it received (held out: the
 * rows are not in it; pft_ghead_evidence_heldout), which stood for `against` rows. Errors as above. */
int pft_node__evidence_own_heldout(node_t *nd, const pft_ghead_lowrank_t *received, uint64_t against);
/* Puts this node's own tallies (if any) in b's provenance entry of id (which must exist). */
int pft_node__evidence_set(const node_t *nd, pft_bundle_t *b, const char *id);
/* nd->head.ev := the evidence of every provenance entry of b, and this node's own if b lacks it. */
int pft_node__evidence_gather(node_t *nd, const pft_bundle_t *b);
/* The α of the gathered evidence for statistics of N rows: the summed tallies of the contributors that scored
 * against at least N / 2 rows (*used of them, their scored rows in *rows); -1 when there is none. */
double pft_node__evidence_alpha(const node_t *nd, uint64_t N, uint64_t *rows, int *used);

/* ---- pft_node_step.c: the release pipeline ---- */
struct pft_node_release {
    parts_t *ps;            /* own: where the own part goes */
    const uint64_t *merged; /* own: per class, the rows of received parts sent merged with own rows */
    pft_dataset_t *rows;    /* own, owned: the own rows released when a step narrowed them; NULL: all */
    pft_gstat_t *st;        /* own, owned: the own part as it goes on, once a step made it (NULL: the rows) */
    int exact_rows;         /* own: 1 when st differs from the rows (the head adds them exactly) */
    int taken;              /* own: 1 once a step took the own part into ps itself */
    pft_bundle_t *b;        /* bundle: the outbound bundle, its parts merged */
};
/* One class's model on its way into a sampling bundle: the union it is fitted on, then what a step made. */
struct pft_node_model {
    int c;           /* the class */
    const float *x;  /* the union's rows (n × d), as the method gathered them */
    int n;           /* rows of the union */
    int represented; /* rows of knowledge the union stands for (its weight) */
    pft_gmm_t *g;    /* owned: the model, once a step made it (NULL: the method fits it by EM) */
    int withheld;    /* 1: a step withheld the class (nothing of it goes on) */
};
/* The steps that apply to this node, once, into nd->pipe, and their answers declared (logged). 0. */
int pft_node__step_setup(node_t *nd);
/* One class's model of a sampling refit through the steps, in order, until one withholds or makes it. 0 or
 * an error (m->g freed). */
int pft_node__step_model(node_t *nd, pft_node__model_t *m);
/* A refit's own part into ps through the steps (merged: per class, the rows of received parts that will be
 * sent merged with own rows); nothing for a node without rows. 0 or an error. */
int pft_node__step_own(node_t *nd, parts_t *ps, const uint64_t *merged);
/* The steps' work on the outbound bundle b, once its parts are in. 0 or an error. */
int pft_node__step_bundle(node_t *nd, pft_bundle_t *b);
/* The head's own input, outside the pipeline: every own row, exactly, as a part of ps (nothing without rows).
 */
int pft_node__step_exact(node_t *nd, parts_t *ps);

/* ---- pft_node_sampling.c, pft_node_exact.c: the methods ---- */
extern const pft_node_method_t pft_node__method_sampling, pft_node__method_exact;
/* A sampling node's statistics head input: own rows exactly, plus each received mixture's moments for the
 * rows it adds (take, as the refit counted them), plus a complete bundle's moments minus own rows. */
int pft_node__sampling_head_stats(node_t *nd, inbound_t **recv, const uint64_t *take, size_t nr,
                                  const pft_bundle_t *complete);

/* ---- pft_node_head.c and the heads ---- */
/* Trains the head on nd->head's input, writes its files, evaluates it, fills res. */
int pft_node__head_train(node_t *nd, json_t *res);
/* The Gaussian head's fit (QDA for exact statistics with cov = full unless lda is set, else LDA) with the
 * given shrinkage (PFT_GHEAD_AUTO: chosen), and its entry points, shared with heads built on it
 * (pft_node_head_gaussian.c). */
int pft_node__gaussian_fit(node_t *nd, int lda, double alpha, void **model);
int pft_node__gaussian_predict(const void *model, const float *x, int n, int32_t *pred);
int pft_node__gaussian_write(const node_t *nd, const void *model);
void pft_node__gaussian_describe(const node_t *nd, const void *model, json_t *res);
void pft_node__gaussian_destroy(void **model);

/* ---- pft_node_table.c ---- */
/* The method and the head of this node's configuration; NULL for a head the table lacks. */
const pft_node_method_t *pft_node__table_method(const pft_topo_node_t *me);
const pft_node_head_t *pft_node__table_head(const pft_topo_node_t *me);

/* ---- pft_node_setup.c: each returns 0 or a pft error code (with its message set) ---- */
/* Creates the output folder and takes its lock (an flock on the folder itself, held until the process ends,
 * even by a crash; the pid in out/lock) before anything else is written there: PFT_EIO if the folder cannot
 * be made, PFT_EUNSUPPORTED if another process holds the lock (a second instance with the same --out). */
int pft_node__setup_lock(node_t *nd);
/* The node's own files from its command line (or node file), made absolute, set as its entry's in the loaded
 * topology (before nd->me is taken: pointers into the topology are stale after). 0, or the topology's error
 * (PFT_ETOPO, PFT_ENOMEM). */
int pft_node__setup_own_files(node_t *nd);
/* Loads and preps train/test/eval; sets n_classes and own_counts. A node with data but no train file is
 * PFT_EINVAL (exit 4). */
int pft_node__setup_data(node_t *nd);
/* The topology's rules between attributes, as pftnet check and pftnet launch check them (pft_topo_rules.h),
 * for this node's view: the topology and --insecure. Returns 0, PFT_ETOPO, PFT_EPOLICY or PFT_ENOMEM, the
 * message prefixed with the topology's path. */
int pft_node__setup_rules(node_t *nd);
/* Checks that a --listen-fd socket listens on the endpoint's port. */
int pft_node__setup_listen_fd(int fd, const char *endpoint);
/* This node's keypair and every public key; CURVE keys into to (nothing with --insecure). */
int pft_node__setup_keys(node_t *nd, pft_transport_opts_t *to, uint8_t cpub[PFT_KEY_CURVE_LEN],
                         uint8_t csec[PFT_KEY_CURVE_LEN]);
/* Inbound slots, outbound peers (fallbacks too), the keys allowed to connect. */
int pft_node__setup_io(node_t *nd);

/* ---- pft_node_fp.c: the topology fingerprint (every hand-off carries it) ---- */
/* nd->fp from the topology and nd->hand.keys (none with --insecure), logged; 0 or PFT_ENOMEM. */
int pft_node__fp_setup(node_t *nd);
/* Stamps b with nd->fp (before signing); 0, PFT_ENOMEM. */
int pft_node__fp_stamp(const node_t *nd, pft_bundle_t *b);
/* 1 if b carries this node's fingerprint; else 0 and reason says what differs ("topology differs from the one
 * of 'a' (…): k (10 here)") or that it carries none. */
int pft_node__fp_check(const node_t *nd, const pft_bundle_t *b, char *reason, size_t rlen);

/* ---- pft_node_endpoint.c: this node's endpoint reported, open successors' endpoints followed ---- */
/* Writes the bound endpoint (pft_transport_endpoint) to out/endpoint, durably, replacing any earlier one. 0
 * or an error code (message set). */
int pft_node__endpoint_publish(node_t *nd);
/* Removes out/endpoint left by an earlier instance (best effort): nobody reads a stale one meanwhile. */
void pft_node__endpoint_forget(const node_t *nd);
/* Adds successor peer to the transport: at its topology endpoint, or, when that leaves the port open, at the
 * one <peers_dir>/<id>/endpoint reports (none yet: unreachable until it appears). As pft_transport_add_peer
 * (PFT_EINVAL: added already). */
int pft_node__endpoint_add_peer(node_t *nd, const pft_topo_node_t *peer, const uint8_t *curve);
/* Follows open successors' endpoint files (at most every 0.2 s): a new or changed one is connected to. */
void pft_node__endpoint_tick(node_t *nd);

/* ---- pft_node_result.c ---- */
/* Fills res with the run's outcome and writes out/result.json. */
int pft_node__result_write(node_t *nd, json_t *res, int exit_code);

#endif
