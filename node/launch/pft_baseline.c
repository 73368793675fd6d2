/* pft_baseline: one place that trains a head the way every node does, for baselines and comparisons.
 *
 * The two-client baselines of FedPFT (Beitollahi et al., ICML 2024, Table 2), each built from the nodes'
 * local heads (trained once, on each node's own rows):
 * - Ensemble: per row, the prediction of the local head that is most confident (highest max probability).
 * - Average: one head whose [W | b] is the mean of the local heads' (FedAvg of a single round).
 * - KD: the destination's head distilled from the other heads on the destination's rows (Hinton et al. 2015):
 *   α·CE(label) + (1−α)·T²·CE(mean teacher softmax at T, student softmax at T); T picked on held-out rows. */
#include "pft_baseline.h"

#include "pft_ghead.h"
#include "pft_gstat.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_rng.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const double pft_baseline_kd_temps[PFT_BASELINE_KD_N_TEMPS] = {1.0, 5.0, 10.0};

/* Share of the destination's rows held out to choose T. */
#define KD_VAL_FRACTION 0.2

static int head_for(const float *x, const int32_t *y, int n, int d, int n_classes, double head_c,
                    const float *q, double T, pft_head_t **out)
{
    pft_head_opts_t ho;
    pft_head_opts_default(&ho);
    ho.l2 = 1.0 / (head_c * n);
    if (q)
        return pft_head_fit_distill(x, y, q, n, d, n_classes, T, PFT_BASELINE_KD_ALPHA, &ho, out, NULL);
    return pft_head_fit(x, y, n, d, n_classes, &ho, out, NULL);
}

int pft_baseline_head(const pft_dataset_t *train, int n_classes, double head_c, pft_head_t **out)
{
    if (n_classes < pft_dataset_n_classes(train))
        n_classes = pft_dataset_n_classes(train);
    int rc = head_for(pft_dataset_x(train), pft_dataset_y(train), pft_dataset_n(train), pft_dataset_d(train),
                      n_classes, head_c, NULL, 1.0, out);
    return rc ? pft_err_wrap(rc, "training a head on %d rows", pft_dataset_n(train)) : 0;
}

int pft_baseline_accuracy(const pft_dataset_t *train, const pft_dataset_t *test, int n_classes, double head_c,
                          double *acc, double *seconds)
{
    pft_head_t *h = NULL;
    double t0 = pft_fsio_now();
    int rc = pft_baseline_head(train, n_classes, head_c, &h);
    if (seconds)
        *seconds = pft_fsio_now() - t0;
    if (rc == 0)
        rc = pft_head_accuracy(h, pft_dataset_x(test), pft_dataset_y(test), pft_dataset_n(test), acc);
    pft_head_destroy(&h);
    return rc;
}

/* All heads have heads[0]'s classes and dimension, and that dimension is d (d ≤ 0: not checked). */
static int check_heads(const pft_head_t *const *heads, int n_heads, int d)
{
    if (n_heads < 1)
        return pft_err(PFT_EINVAL, "baseline: no heads");
    int C = pft_head_n_classes(heads[0]), hd = pft_head_dim(heads[0]);
    for (int i = 1; i < n_heads; i++)
        if (pft_head_n_classes(heads[i]) != C || pft_head_dim(heads[i]) != hd)
            return pft_err(PFT_EINVAL, "baseline: head %d is %d×%d, head 0 %d×%d", i,
                           pft_head_n_classes(heads[i]), pft_head_dim(heads[i]), C, hd);
    if (d > 0 && hd != d)
        return pft_err(PFT_EINVAL, "baseline: heads take %d features, the data has %d", hd, d);
    return 0;
}

int pft_baseline_ensemble_accuracy(const pft_head_t *const *heads, int n_heads, const pft_dataset_t *test,
                                   double *acc)
{
    *acc = 0.0;
    int rc = check_heads(heads, n_heads, pft_dataset_d(test));
    if (rc)
        return rc;
    const int n = pft_dataset_n(test), C = pft_head_n_classes(heads[0]);
    const int32_t *y = pft_dataset_y(test);
    if (n == 0)
        return 0;
    float *proba = pft_alloc_array((size_t)n * (size_t)C, sizeof *proba);
    float *best = pft_alloc_array((size_t)n, sizeof *best);
    int32_t *pred = pft_alloc_array((size_t)n, sizeof *pred);
    if (!proba || !best || !pred) {
        rc = pft_err(PFT_ENOMEM, "ensemble: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++)
        best[i] = -1.0f;
    for (int h = 0; h < n_heads && rc == 0; h++) {
        if ((rc = pft_head_predict_proba(heads[h], pft_dataset_x(test), n, proba)))
            break;
        for (int i = 0; i < n; i++) {
            const float *p = proba + (size_t)i * (size_t)C;
            int k = 0;
            for (int c = 1; c < C; c++)
                if (p[c] > p[k])
                    k = c;
            if (p[k] > best[i]) {
                best[i] = p[k];
                pred[i] = k;
            }
        }
    }
    if (rc == 0) {
        int hit = 0;
        for (int i = 0; i < n; i++)
            hit += pred[i] == y[i];
        *acc = (double)hit / n;
    }
done:
    pft_free(proba);
    pft_free(best);
    pft_free(pred);
    return rc;
}

int pft_baseline_average_head(const pft_head_t *const *heads, int n_heads, pft_head_t **out)
{
    *out = NULL;
    int rc = check_heads(heads, n_heads, 0);
    if (rc)
        return rc;
    const size_t P = (size_t)pft_head_n_classes(heads[0]) * ((size_t)pft_head_dim(heads[0]) + 1);
    double *sum = pft_calloc(P, sizeof *sum);
    float *wb = pft_alloc_array(P, sizeof *wb);
    if (!sum || !wb) {
        rc = pft_err(PFT_ENOMEM, "average head: out of memory");
    } else {
        for (int h = 0; h < n_heads; h++) {
            const float *w = pft_head_weights(heads[h]);
            for (size_t j = 0; j < P; j++)
                sum[j] += w[j];
        }
        for (size_t j = 0; j < P; j++)
            wb[j] = (float)(sum[j] / n_heads);
        rc = pft_head_from_weights(pft_head_n_classes(heads[0]), pft_head_dim(heads[0]), wb, out);
    }
    pft_free(sum);
    pft_free(wb);
    return rc;
}

/* q[i·C + k] = mean over teachers of softmax(t_i / T)_k for the n rows of x. */
static int teacher_targets(const pft_head_t *const *teachers, int n_teachers, const float *x, int n, double T,
                           float *logits, double *acc, float *q)
{
    const int C = pft_head_n_classes(teachers[0]);
    memset(acc, 0, (size_t)n * (size_t)C * sizeof *acc);
    for (int t = 0; t < n_teachers; t++) {
        int rc = pft_head_logits(teachers[t], x, n, logits);
        if (rc)
            return rc;
        for (int i = 0; i < n; i++) {
            const float *z = logits + (size_t)i * (size_t)C;
            double *a = acc + (size_t)i * (size_t)C, mx = z[0], sum = 0.0;
            for (int k = 1; k < C; k++)
                mx = fmax(mx, z[k]);
            for (int k = 0; k < C; k++)
                sum += exp((z[k] - mx) / T);
            for (int k = 0; k < C; k++)
                a[k] += exp((z[k] - mx) / T) / sum;
        }
    }
    for (size_t j = 0; j < (size_t)n * (size_t)C; j++)
        q[j] = (float)(acc[j] / n_teachers);
    return 0;
}

/* Rows idx[0..m) of x, y into the contiguous xo, yo. */
static void gather(const float *x, const int32_t *y, int d, const int32_t *idx, int m, float *xo, int32_t *yo)
{
    for (int r = 0; r < m; r++) {
        memcpy(xo + (size_t)r * (size_t)d, x + (size_t)idx[r] * (size_t)d, (size_t)d * sizeof *xo);
        yo[r] = y[idx[r]];
    }
}

/* Accuracy on x, y of a student distilled at T on the given rows. */
static int kd_student_accuracy(const float *x, const int32_t *y, const float *q, int n, int d, int C,
                               double head_c, double T, const float *ex, const int32_t *ey, int en,
                               double *acc)
{
    pft_head_t *s = NULL;
    int rc = head_for(x, y, n, d, C, head_c, q, T, &s);
    if (rc == 0)
        rc = pft_head_accuracy(s, ex, ey, en, acc);
    pft_head_destroy(&s);
    return rc;
}

int pft_baseline_kd(const pft_dataset_t *train, const pft_head_t *const *teachers, int n_teachers,
                    const pft_dataset_t *test, int n_classes, double head_c, uint64_t seed,
                    pft_baseline_kd_t *out)
{
    const int n = pft_dataset_n(train), d = pft_dataset_d(train);
    memset(out, 0, sizeof *out);
    int rc = check_heads(teachers, n_teachers, d);
    if (rc)
        return pft_err_wrap(rc, "KD teachers");
    const int C = pft_head_n_classes(teachers[0]);
    if (n < 1 || C < n_classes || C < pft_dataset_n_classes(train) || pft_dataset_d(test) != d)
        return pft_err(PFT_EINVAL,
                       "KD: %d rows of %d classes, teachers of %d classes, test dimension %d vs %d", n,
                       pft_dataset_n_classes(train), C, pft_dataset_d(test), d);
    const float *x = pft_dataset_x(train);
    const int32_t *y = pft_dataset_y(train);
    const int n_val = (int)floor(KD_VAL_FRACTION * n + 0.5) < n ? (int)floor(KD_VAL_FRACTION * n + 0.5) : 0;
    const int n_fit = n - n_val;
    float *logits = pft_alloc_array((size_t)n * (size_t)C, sizeof *logits);
    double *acc = pft_alloc_array((size_t)n * (size_t)C, sizeof *acc);
    float *q = pft_alloc_array((size_t)n * (size_t)C, sizeof *q);
    float *qf = pft_alloc_array((size_t)n * (size_t)C, sizeof *qf);
    float *xs = pft_alloc_array((size_t)n * (size_t)d, sizeof *xs); /* fit rows, then validation rows */
    int32_t *ys = pft_alloc_array((size_t)n, sizeof *ys), *idx = pft_alloc_array((size_t)n, sizeof *idx);
    pft_rng_t *rng = pft_rng_new(pft_rng_derive(seed, 0x6b64 /* "kd" */, (uint64_t)n));
    if (!logits || !acc || !q || !qf || !xs || !ys || !idx || !rng) {
        rc = pft_err(PFT_ENOMEM, "KD: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++)
        idx[i] = i;
    pft_rng_shuffle(rng, idx, (size_t)n);
    /* validation rows first in idx, fit rows after: gathered as xs = [fit | val] */
    gather(x, y, d, idx + n_val, n_fit, xs, ys);
    gather(x, y, d, idx, n_val, xs + (size_t)n_fit * (size_t)d, ys + n_fit);
    int chosen = 0;
    for (int t = 0; t < PFT_BASELINE_KD_N_TEMPS; t++) {
        const double T = pft_baseline_kd_temps[t];
        if ((rc = teacher_targets(teachers, n_teachers, x, n, T, logits, acc, q)))
            goto done;
        out->val_accuracy[t] = NAN;
        if (n_val > 0) {
            for (int r = 0; r < n_fit; r++) /* q of the fit rows, in xs order */
                memcpy(qf + (size_t)r * (size_t)C, q + (size_t)idx[n_val + r] * (size_t)C,
                       (size_t)C * sizeof *qf);
            rc = kd_student_accuracy(xs, ys, qf, n_fit, d, C, head_c, T, xs + (size_t)n_fit * (size_t)d,
                                     ys + n_fit, n_val, &out->val_accuracy[t]);
            if (rc)
                goto done;
            if (out->val_accuracy[t] > out->val_accuracy[chosen])
                chosen = t;
        }
        rc = kd_student_accuracy(x, y, q, n, d, C, head_c, T, pft_dataset_x(test), pft_dataset_y(test),
                                 pft_dataset_n(test), &out->test_accuracy[t]);
        if (rc)
            goto done;
    }
    out->n_val = n_val;
    out->temperature = pft_baseline_kd_temps[chosen];
    out->accuracy = out->test_accuracy[chosen];
done:
    pft_free(logits);
    pft_free(acc);
    pft_free(q);
    pft_free(qf);
    pft_free(xs);
    pft_free(ys);
    pft_free(idx);
    pft_rng_destroy(&rng);
    return rc ? pft_err_wrap(rc, "KD baseline") : 0;
}

int pft_baseline_destination(const pft_topo_t *topo)
{
    pft_kind_t kind = pft_topo_kind(topo);
    if (kind != PFT_KIND_CHAIN && kind != PFT_KIND_DAG)
        return -1;
    int sink = -1, sinks = 0;
    for (size_t i = 0; i < pft_topo_node_count(topo); i++)
        if (pft_topo_node(topo, i)->n_succs == 0) {
            sink = (int)i;
            sinks++;
        }
    return sinks == 1 ? sink : -1;
}

/* ---- everything the launcher reports ---- */

static int node_rows(const pft_baseline_node_t *nd)
{
    return nd->train ? pft_dataset_n(nd->train) : 0;
}

static json_t *jacc(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* The concatenation of every node's rows (at least one node has rows). */
static int concat_rows(const pft_baseline_node_t *nodes, int n_nodes, pft_dataset_t **out)
{
    pft_dataset_t *acc = NULL;
    int rc = 0;
    for (int i = 0; i < n_nodes && rc == 0; i++) {
        if (node_rows(&nodes[i]) == 0)
            continue;
        pft_dataset_t *next = NULL;
        if (acc) {
            rc = pft_dataset_concat(acc, nodes[i].train, &next);
        } else {
            int n = pft_dataset_n(nodes[i].train);
            int *idx = pft_alloc_array((size_t)n, sizeof *idx);
            rc = idx ? 0 : pft_err(PFT_ENOMEM, "out of memory");
            for (int r = 0; r < n && idx; r++)
                idx[r] = r;
            if (rc == 0)
                rc = pft_dataset_subset(nodes[i].train, idx, n, &next);
            pft_free(idx);
        }
        pft_dataset_destroy(&acc);
        acc = next;
    }
    *out = acc;
    return rc;
}

static int set(json_t *obj, const char *key, json_t *v)
{
    return v && json_object_set_new(obj, key, v) == 0 ? 0 : pft_err(PFT_ENOMEM, "baselines: out of memory");
}

/* The Gaussian (LDA) head of every node's rows, shrinkage chosen by cross-validation over all of them, as a
 * central server holding the raw rows would: centralized_gaussian, centralized_gaussian_alpha. */
static int centralized_gaussian(const pft_dataset_t *all, const pft_dataset_t *eval, int C, json_t *out)
{
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, pft_dataset_d(all));
    int rc = st ? pft_gstat_add_rows(st, pft_dataset_x(all), pft_dataset_y(all), (size_t)pft_dataset_n(all))
                : PFT_ENOMEM;
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    pft_ghead_t *h = NULL;
    pft_ghead_info_t info;
    double acc = 0;
    if (rc == 0)
        rc = pft_ghead_fit(st, pft_dataset_x(all), pft_dataset_y(all), pft_dataset_n(all), C, &o, &h, &info);
    if (rc == 0)
        rc = pft_ghead_accuracy(h, pft_dataset_x(eval), pft_dataset_y(eval), pft_dataset_n(eval), &acc, NULL,
                                NULL);
    if (rc == 0)
        rc = set(out, "centralized_gaussian", json_real(acc));
    if (rc == 0)
        rc = set(out, "centralized_gaussian_alpha", json_real(info.alpha));
    pft_ghead_destroy(&h);
    pft_gstat_destroy(&st);
    return rc;
}

/* Centralized head on every node's rows; centralized_bytes: the raw rows that would have to move. */
static int centralized(const pft_baseline_node_t *nodes, int n_nodes, const pft_dataset_t *eval, int C,
                       double head_c, int dest, json_t *out)
{
    pft_dataset_t *all = NULL;
    pft_head_t *h = NULL;
    double acc = 0;
    int rc = concat_rows(nodes, n_nodes, &all);
    if (rc == 0)
        rc = pft_baseline_head(all, C, head_c, &h);
    if (rc == 0)
        rc = pft_head_accuracy(h, pft_dataset_x(eval), pft_dataset_y(eval), pft_dataset_n(eval), &acc);
    int keep = dest;
    if (keep < 0) /* no single destination: the largest node keeps its rows */
        for (int i = 0; i < n_nodes; i++)
            if (keep < 0 || node_rows(&nodes[i]) > node_rows(&nodes[keep]))
                keep = i;
    json_int_t moved = 0;
    for (int i = 0; i < n_nodes; i++)
        if (i != keep)
            moved += (json_int_t)node_rows(&nodes[i]) * pft_dataset_d(eval) * 4;
    if (rc == 0)
        rc = set(out, "centralized", json_real(acc));
    if (rc == 0)
        rc = set(out, "centralized_n_train", json_integer(pft_dataset_n(all)));
    if (rc == 0)
        rc = set(out, "centralized_bytes", json_integer(moved));
    if (rc == 0)
        rc = centralized_gaussian(all, eval, C, out);
    pft_head_destroy(&h);
    pft_dataset_destroy(&all);
    return rc;
}

/* KD into dest from every other contributing head; KD keys null when there is no destination with rows or no
 * teacher. heads[i] is node i's local head or NULL. */
static int kd_keys(const pft_baseline_node_t *nodes, int n_nodes, pft_head_t *const *heads,
                   const pft_dataset_t *eval, int C, double head_c, int dest, uint64_t seed,
                   json_int_t head_bytes, json_t *out)
{
    const pft_head_t **teachers = pft_calloc((size_t)n_nodes, sizeof *teachers);
    if (!teachers)
        return pft_err(PFT_ENOMEM, "baselines: out of memory");
    int nt = 0, rc = 0;
    for (int i = 0; i < n_nodes; i++)
        if (i != dest && heads[i])
            teachers[nt++] = heads[i];
    pft_baseline_kd_t kd;
    int have = dest >= 0 && heads[dest] && nt > 0;
    if (have)
        rc = pft_baseline_kd(nodes[dest].train, teachers, nt, eval, C, head_c, seed, &kd);
    pft_free(teachers);
    if (rc)
        return rc;
    json_t *by_t = have ? json_object() : json_null(), *val_t = have ? json_object() : json_null();
    for (int t = 0; have && t < PFT_BASELINE_KD_N_TEMPS; t++) {
        char key[32];
        snprintf(key, sizeof key, "%g", pft_baseline_kd_temps[t]);
        json_object_set_new(by_t, key, jacc(kd.test_accuracy[t]));
        json_object_set_new(val_t, key, jacc(kd.val_accuracy[t]));
    }
    rc = set(out, "kd", have ? json_real(kd.accuracy) : json_null());
    if (rc == 0)
        rc = set(out, "kd_node", dest >= 0 ? json_string(nodes[dest].id) : json_null());
    if (rc == 0)
        rc = set(out, "kd_temperature", have ? json_real(kd.temperature) : json_null());
    if (rc == 0)
        rc = set(out, "kd_by_temperature", by_t);
    else
        json_decref(by_t);
    if (rc == 0)
        rc = set(out, "kd_val_by_temperature", val_t);
    else
        json_decref(val_t);
    if (rc == 0)
        rc = set(out, "kd_bytes", have ? json_integer(nt * head_bytes) : json_null());
    if (rc == 0)
        rc = set(out, "kd_alpha", json_real(PFT_BASELINE_KD_ALPHA));
    return rc;
}

int pft_baseline_all(const pft_baseline_node_t *nodes, int n_nodes, const pft_dataset_t *eval, int n_classes,
                     double head_c, int dest, uint64_t seed, json_t *out)
{
    const double t0 = pft_fsio_now();
    const int d = pft_dataset_d(eval);
    int C = n_classes > pft_dataset_n_classes(eval) ? n_classes : pft_dataset_n_classes(eval), with_rows = 0;
    for (int i = 0; i < n_nodes; i++) {
        if (node_rows(&nodes[i]) == 0)
            continue;
        with_rows++;
        if (pft_dataset_d(nodes[i].train) != d)
            return pft_err(PFT_EINVAL, "baselines: node %s has %d features, the test rows %d", nodes[i].id,
                           pft_dataset_d(nodes[i].train), d);
        if (pft_dataset_n_classes(nodes[i].train) > C)
            C = pft_dataset_n_classes(nodes[i].train);
    }
    if (with_rows == 0)
        return pft_err(PFT_EINVAL, "baselines: no node has training rows");
    if (dest >= n_nodes)
        dest = -1;
    const json_int_t head_bytes = (json_int_t)C * ((json_int_t)d + 1) * 4;
    pft_head_t **heads = pft_calloc((size_t)n_nodes, sizeof *heads);
    const pft_head_t **members = pft_calloc((size_t)n_nodes, sizeof *members);
    pft_head_t *avg = NULL;
    json_t *locals = json_array();
    int rc = heads && members && locals ? 0 : pft_err(PFT_ENOMEM, "baselines: out of memory");
    if (rc == 0)
        rc = centralized(nodes, n_nodes, eval, C, head_c, dest, out);
    double sum = 0, acc;
    int nm = 0;
    for (int i = 0; i < n_nodes && rc == 0; i++) {
        acc = NAN;
        if (node_rows(&nodes[i]) > 0) {
            rc = pft_baseline_head(nodes[i].train, C, head_c, &heads[i]);
            if (rc == 0)
                rc = pft_head_accuracy(heads[i], pft_dataset_x(eval), pft_dataset_y(eval),
                                       pft_dataset_n(eval), &acc);
            if (rc)
                rc = pft_err_wrap(rc, "local head of node %s", nodes[i].id);
            else
                members[nm++] = heads[i], sum += acc;
        }
        if (rc == 0 && json_array_append_new(locals, json_pack("{s:s,s:o}", "id", nodes[i].id,
                                                               "accuracy_global", jacc(acc))) != 0)
            rc = pft_err(PFT_ENOMEM, "baselines: out of memory");
    }
    if (rc == 0) {
        rc = set(out, "local_only", locals);
        locals = NULL;
    }
    if (rc == 0)
        rc = set(out, "local_only_mean", json_real(sum / nm));
    if (rc == 0)
        rc = set(out, "head_bytes", json_integer(head_bytes));
    if (rc == 0)
        rc = pft_baseline_ensemble_accuracy(members, nm, eval, &acc);
    if (rc == 0)
        rc = set(out, "ensemble", json_real(acc));
    if (rc == 0)
        rc = set(out, "ensemble_bytes", json_integer((nm - 1) * head_bytes));
    if (rc == 0)
        rc = pft_baseline_average_head(members, nm, &avg);
    if (rc == 0)
        rc = pft_head_accuracy(avg, pft_dataset_x(eval), pft_dataset_y(eval), pft_dataset_n(eval), &acc);
    if (rc == 0)
        rc = set(out, "average", json_real(acc));
    if (rc == 0)
        rc = set(out, "average_bytes", json_integer((nm - 1) * head_bytes));
    if (rc == 0)
        rc = kd_keys(nodes, n_nodes, heads, eval, C, head_c, dest, seed, head_bytes, out);
    if (rc == 0)
        rc = set(out, "seconds", json_real(pft_fsio_now() - t0));
    for (int i = 0; heads && i < n_nodes; i++)
        pft_head_destroy(&heads[i]);
    pft_free(heads);
    pft_free(members);
    pft_head_destroy(&avg);
    json_decref(locals);
    return rc;
}
