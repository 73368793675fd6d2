/* pft_report_exp: one experiment (all runs and synth lines of one tag) summarised over seeds: the comparison
 * table (baselines and FedPFT variants), per-node figures per variant, and the synth family table. Pure data:
 * the Markdown writer and the plotter read it. */
#ifndef PFT_REPORT_EXP_H
#define PFT_REPORT_EXP_H

#include "pft_report_set.h"
#include "pft_stats.h"

#include <stddef.h>

/* One row of the comparison table. */
typedef struct {
    char
        label[192]; /* "Centralized", "Local only (mean of nodes)", "Ensemble", "Average", "KD (T=5)", variant
                     */
    int fedpft;     /* 1: a FedPFT variant; 0: a baseline */
    pft_stats_t acc;   /* accuracy (fraction) over seeds; n = 0: none recorded */
    pft_stats_t bytes; /* bytes communicated over seeds; n = 0: not recorded */
} pft_report_row_t;

/* One node of a variant, over its runs (matched by id). */
typedef struct {
    const char *id;                     /* node id */
    const char *role;                   /* role in the first run that has the node ("?" if not recorded) */
    int hop;                            /* "hop", else the node's index in the first run's nodes array */
    const char *status;                 /* the first status other than "ok" met over the runs, or NULL */
    int n_failed;                       /* runs in which its status was not "ok" */
    pft_stats_t acc;                    /* accuracy_global */
    pft_stats_t local_only;             /* its local-only baseline accuracy (same seed) */
    pft_stats_t knowledge;              /* number of nodes in its provenance */
    pft_stats_t real, synthetic;        /* n_real, n_synthetic */
    pft_stats_t drift_recv, drift_sent; /* own_avg_loglik under the (last) received / sent GMM */
    pft_stats_t bytes_sent;             /* bytes_sent */
    pft_stats_t alpha;                  /* gaussian_head.alpha: its Gaussian head's shrinkage */
} pft_report_node_t;

/* One FedPFT variant of the experiment: the runs of one variant name with the same settings (runs that differ
 * in a setting, e.g. secure_agg or the partition, are different variants, not seeds of one). */
typedef struct {
    const char *name;         /* the variant's name: name_buf */
    char name_buf[192];       /* its runs' variant, with the settings that set it apart from another variant
                                 of that name: "FedPFT diag K=5 (secure_agg=true)" */
    size_t n_runs;            /* runs (normally one per seed) */
    size_t n_failed_runs;     /* of those, runs in which a node did not finish (status not ok or absent) */
    char seeds[128];          /* "0, 1, 2", a repeated seed "0 (×3)" (truncated with "…" if long) */
    const json_t *settings;   /* "settings" of its first run, or NULL */
    const char *cov;          /* "cov" of the first node of its first run that records one, or NULL */
    const char *gaussian;     /* gaussian_head.kind ("lda", "qda") of the first node that has one, or NULL */
    const char *alpha_rule;   /* gaussian_head.rule ("cv", "oas") of that node, or NULL */
    pft_stats_t final_alpha;  /* gaussian_head.alpha of its final nodes (as for accuracy), all runs */
    pft_stats_t wall;         /* wall_seconds of its runs */
    pft_report_node_t *nodes; /* sorted by hop, then first appearance */
    size_t n_nodes;
    size_t row; /* its row in the comparison table */
} pft_report_variant_t;

/* One (cov, K, rank, prep, dtype) group of synth lines, over seeds. */
typedef struct {
    const char *cov, *prep, *dtype; /* prep/dtype "?" if not recorded */
    const char *head;               /* "head" ("logreg" when not recorded: lines before the Gaussian head) */
    const char *gaussian;           /* "gaussian_kind" ("lda", "qda") of its first line, or NULL */
    int k;
    int rank;                    /* -1: none */
    pft_stats_t bytes_per_class; /* bytes_per_class_fp16 */
    pft_stats_t bytes_bundle;    /* bytes_bundle */
    pft_stats_t acc_synth, gap;  /* fractions */
    pft_stats_t shrinkage;       /* "shrinkage" of a Gaussian head (n = 0: none) */
} pft_report_synth_t;

/* An experiment. Strings are borrowed from the set, which must outlive it. */
typedef struct {
    const char *tag;
    /* launches (n_runs = 0: none; the fields below are then empty) */
    size_t n_runs;
    size_t n_seeds;
    char seeds[128];        /* distinct seeds, "0, 1, 2" */
    const char *kind;       /* of the first run ("?" if not recorded) */
    const char *topology;   /* of the first run, or NULL */
    int n_nodes;            /* largest node count over the runs */
    int final_all;          /* 1: FedPFT accuracy is over every node (ring/mesh, or no sink); 0: over sinks */
    pft_report_row_t *rows; /* baselines present, then one per variant */
    size_t n_rows;
    int centralized_row;            /* index of the Centralized row, or -1 */
    int centralized_gaussian_row;   /* index of the Centralized Gaussian (LDA) row, or -1 */
    char cg_alpha[64];              /* its shrinkage per seed ("0.5, 0.5, 0.4"), "" if not recorded */
    pft_report_variant_t *variants; /* in order of first appearance */
    size_t n_variants;
    int kd_row;          /* index of the KD row, or -1 */
    const char *kd_node; /* destination of KD in the first seed that names one, or NULL */
    pft_stats_t kd_best; /* per seed, the best test accuracy over kd_by_temperature */
    char kd_best_t[64];  /* that best T per seed, "10, 10, 5" */
    /* synth lines (n_synth = 0: none) */
    pft_report_synth_t *synth; /* sorted by cov (first appearance), head (logreg first), K, rank */
    size_t n_synth;
    size_t n_lines;
    pft_stats_t acc_raw; /* head on raw features, over all lines */
    int synth_mixed;     /* 1 if prep or dtype differ between groups (the table then shows them) */
    int synth_heads;     /* 1 if some group's head is not logreg (the table then shows the head) */
} pft_report_exp_t;

/* Summarises the runs and lines of `tag` in set. PFT_ENOMEM; PFT_EINVAL if nothing has that tag. */
int pft_report_exp_build(const pft_report_set_t *set, const char *tag, pft_report_exp_t **out);

/* Frees it and sets *self_p to NULL; safe on NULL. */
void pft_report_exp_destroy(pft_report_exp_t **self_p);

#endif
