/* pft_node: one peer of decentralized FedPFT: receive GMM bundles, sample, refit, forward, train and evaluate
 * a head. */
#ifndef PFT_NODE_H
#define PFT_NODE_H

/* Exit codes of pftnode (documented in the README); one per failure kind. */
#define PFT_NODE_EXIT_TABLE(X)                                                                               \
    X(PFT_EXIT_OK, 0, "the node completed its part of the run")                                              \
    X(PFT_EXIT_USAGE, 2, "bad command line")                                                                 \
    X(PFT_EXIT_TOPOLOGY, 3, "invalid topology, no such node, unusable keys, or keys with --insecure")        \
    X(PFT_EXIT_DATA, 4, "the node's data files are missing or malformed")                                    \
    X(PFT_EXIT_NETWORK, 5, "the inbound endpoint cannot be bound or a socket failed")                        \
    X(PFT_EXIT_MISSING, 6, "a predecessor's bundle did not arrive by the deadline (on_missing=fail)")        \
    X(PFT_EXIT_SEND, 7, "a successor never acknowledged (or rejected) the node's bundle")                    \
    X(PFT_EXIT_NUMERIC, 8, "EM or head training failed numerically")                                         \
    X(PFT_EXIT_IO, 9, "the output folder cannot be written (e.g. an inbound bundle cannot be stored)")       \
    X(PFT_EXIT_INTERRUPTED, 10, "stopped by SIGINT/SIGTERM")                                                 \
    X(PFT_EXIT_BUDGET, 11, "releasing would exceed the node's privacy budget (dp_budget)")                   \
    X(PFT_EXIT_INTERNAL, 12,                                                                                 \
      "out of memory, or another error the node could not recover from (see the log)")                       \
    X(PFT_EXIT_LOCKED, 13,                                                                                   \
      "another pftnode runs with this --out folder (its lock is held); nothing written")                     \
    X(PFT_EXIT_POLICY, 14,                                                                                   \
      "refused by a policy of the topology (e.g. a class held by fewer than min_contributors members)")      \
    X(PFT_EXIT_UNREVEALED, 15,                                                                               \
      "secure aggregation: a survivor refused or never answered the declaration of missing members, or the " \
      "signatures of it (consistency round)")                                                                \
    X(PFT_EXIT_DEGRADED, 16,                                                                                 \
      "degraded: the node completed without a predecessor's bundle that missed its deadline "                \
      "(on_missing=proceed; result.json missing)")                                                           \
    X(PFT_EXIT_UNOPENED, 17,                                                                                 \
      "secure aggregation: a group's sum did not open or holds what its members' rows cannot (not used)")

typedef enum {
#define PFT_X_EXIT(name, value, text) name = value,
    PFT_NODE_EXIT_TABLE(PFT_X_EXIT)
#undef PFT_X_EXIT
} pft_node_exit_t;

/* The exit a run ends with after an error of the run (pft_err_t); an error not listed: PFT_EXIT_INTERNAL. */
#define PFT_NODE_EXIT_FOR_ERROR(X)                                                                           \
    X(PFT_ETOPO, PFT_EXIT_TOPOLOGY)                                                                          \
    X(PFT_EAUTH, PFT_EXIT_TOPOLOGY)                                                                          \
    X(PFT_EFORMAT, PFT_EXIT_DATA)                                                                            \
    X(PFT_ENET, PFT_EXIT_NETWORK)                                                                            \
    X(PFT_ETIMEOUT, PFT_EXIT_MISSING)                                                                        \
    X(PFT_ENUMERIC, PFT_EXIT_NUMERIC)                                                                        \
    X(PFT_EINVAL, PFT_EXIT_NUMERIC) /* EM or a head refusing values it cannot fit (e.g. |x| > 1e15) */       \
    X(PFT_ERANGE, PFT_EXIT_NUMERIC)                                                                          \
    X(PFT_EIO, PFT_EXIT_IO)                                                                                  \
    X(PFT_EINTR, PFT_EXIT_INTERRUPTED)                                                                       \
    X(PFT_EBUDGET, PFT_EXIT_BUDGET)                                                                          \
    X(PFT_EPOLICY, PFT_EXIT_POLICY)

/* What one run of a node needs besides the topology file. */
typedef struct {
    const char *topology;      /* topology file (a resolved copy in a simulation) */
    const char *id;            /* this node's id in it */
    const char *out_dir;       /* output and state folder (created) */
    const char *eval_features; /* optional: features of the union of all test splits (accuracy_global) */
    const char *eval_labels;   /* their labels */
    int linger_ms;             /* after finishing, keep answering duplicate deliveries this long */
    const char *key;           /* this node's secret key file; NULL: the .key beside its `key` .pub */
    int insecure;              /* 1: plain text, no signatures; refused (exit 3) if the topology names keys */
    int listen_fd;             /* a listening TCP socket bound to this node's endpoint, handed over by
                                  pftnet launch (which held the port until now); -1: bind the endpoint */
    const char *peers_dir;     /* the folder that holds every node's output folder as <peers_dir>/<id> (pftnet
                                  launch's run folder, shared under Slurm): a successor's stored bundle there is
                                  the receipt of a hand-off whose ACK was lost; NULL: no receipts */
    const char *train;  /* this node's own data files (its command line or node file), which win over */
    const char *labels; /* its entry in the topology; NULL: the entry's (a local simulation's) */
    const char *test;
    const char *test_labels;
    const char *slots_dir; /* compute only while holding one of the slot files in this folder (pft_slots.h:
                              pftnet launch --compute-slots); NULL: compute at once */
} pft_node_args_t;

/* Runs the node to completion; logs through pft_log; returns a pft_node_exit_t. */
int pft_node_run(const pft_node_args_t *args);

/* Text of an exit code. */
const char *pft_node_exit_text(int code);

/* Asks a running pft_node_run to stop (async-signal-safe); it returns PFT_EXIT_INTERRUPTED. */
void pft_node_request_stop(void);

#endif
