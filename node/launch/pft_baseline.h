/* pft_baseline: the reference heads a reader of the paper expects (centralized oracle, local-only, and the
 * two-client baselines of FedPFT's Table 2: Ensemble, Average, KD). */
#ifndef PFT_BASELINE_H
#define PFT_BASELINE_H

#include "pft_dataset.h"
#include "pft_head.h"
#include "pft_topo.h"

#include <jansson.h>
#include <stdint.h>

/* Trains a head on train (l2 = 1/(head_c·n), as scikit-learn's C) and returns its accuracy on test.
 * *seconds (may be NULL) gets the training time. Errors as pft_head_fit / pft_head_accuracy. */
int pft_baseline_accuracy(const pft_dataset_t *train, const pft_dataset_t *test, int n_classes, double head_c,
                          double *acc, double *seconds);

/* Trains the head a node would train on train alone: n_classes outputs (at least train's), l2 = 1/(head_c·n).
 * On success *out is new. Errors as pft_head_fit (PFT_EINVAL for an empty train). */
int pft_baseline_head(const pft_dataset_t *train, int n_classes, double head_c, pft_head_t **out);

/* Ensemble of heads (same classes and dimension): each row of test gets the prediction of the head whose
 * largest class probability is highest (the first such head on ties); *acc is the fraction correct (0 for an
 * empty test). Errors: PFT_EINVAL (no heads, mismatched heads, labels outside the heads' classes),
 * PFT_ENOMEM. */
int pft_baseline_ensemble_accuracy(const pft_head_t *const *heads, int n_heads, const pft_dataset_t *test,
                                   double *acc);

/* The head whose [W | b] is the element-wise mean of the heads' (same classes and dimension). On success *out
 * is new. Errors: PFT_EINVAL (no heads, mismatched heads), PFT_ENOMEM. */
int pft_baseline_average_head(const pft_head_t *const *heads, int n_heads, pft_head_t **out);

/* Temperatures the KD baseline chooses from, and its label weight α. */
#define PFT_BASELINE_KD_N_TEMPS 3
#define PFT_BASELINE_KD_ALPHA 0.5
extern const double pft_baseline_kd_temps[PFT_BASELINE_KD_N_TEMPS]; /* 1, 5, 10 */

/* What the KD baseline found. */
typedef struct {
    double temperature;                            /* chosen on the validation split */
    double accuracy;                               /* test accuracy of the student at that temperature */
    double val_accuracy[PFT_BASELINE_KD_N_TEMPS];  /* per temperature: validation accuracy (NaN: no split) */
    double test_accuracy[PFT_BASELINE_KD_N_TEMPS]; /* per temperature: test accuracy, student on all rows */
    int n_val;                                     /* validation rows (0: too few rows, T = 1 taken) */
} pft_baseline_kd_t;

/* Knowledge distillation of the teachers into a head on train (the destination's own rows): soft targets
 * q_i = mean over teachers of softmax(t_i/T), student by pft_head_fit_distill with α = PFT_BASELINE_KD_ALPHA
 * and l2 = 1/(head_c·rows). T is chosen from pft_baseline_kd_temps by validation accuracy (ties: the smaller
 * T) of a student trained on 80 % of train, the other 20 % (a seeded shuffle) held out; every T's student is
 * then retrained on all rows and scored on test. Errors: PFT_EINVAL (no teachers, empty train, mismatched
 * heads), those of pft_head_fit_distill, PFT_ENOMEM. */
int pft_baseline_kd(const pft_dataset_t *train, const pft_head_t *const *teachers, int n_teachers,
                    const pft_dataset_t *test, int n_classes, double head_c, uint64_t seed,
                    pft_baseline_kd_t *out);

/* The destination of a run: the unique sink (node without successors) of a chain or dag; -1 for other kinds
 * or when there is not exactly one sink. */
int pft_baseline_destination(const pft_topo_t *topo);

/* One node's share for pft_baseline_all. */
typedef struct {
    const char *id;             /* node id */
    const pft_dataset_t *train; /* its training rows, preprocessed; NULL or empty: a node without data */
} pft_baseline_node_t;

/* Every launcher baseline on eval (the union of the test splits, preprocessed like the training rows), into
 * the object out: centralized, centralized_n_train, centralized_bytes, local_only [{id, accuracy_global}],
 * local_only_mean, head_bytes, ensemble, ensemble_bytes, average, average_bytes, kd, kd_node, kd_temperature,
 * kd_by_temperature, kd_val_by_temperature, kd_bytes, kd_alpha, seconds. Bytes are what each baseline would
 * move over the network: raw fp32 rows for centralized (every node's but the destination's, or but the
 * largest node's without one), head_bytes = C·(d+1)·4 per head shared. Each node with rows trains one local
 * head (n_classes outputs, at least every dataset's classes), reused for local-only, ensemble, average and as
 * a KD teacher; nodes without rows get local-only null and take no part. KD distils every other node's head
 * into the destination dest (index into nodes, or -1: KD null) on its rows. Errors: PFT_EINVAL (no node has
 * rows, mismatched dimensions), those of the fits, PFT_ENOMEM; out may then hold some keys. */
int pft_baseline_all(const pft_baseline_node_t *nodes, int n_nodes, const pft_dataset_t *eval, int n_classes,
                     double head_c, int dest, uint64_t seed, json_t *out);

#endif
