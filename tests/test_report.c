/* test_report: pft_stats (mean, sample std, formatting), pft_report_set (loading, tags, errors) and
 * pft_report_exp (aggregation over seeds) on the fixtures in tests/fixtures/report (see
 * make_report_fixtures.py). The Markdown and plots of the real binary are checked by tests/e2e_report.sh. */
#include "pft_error.h"
#include "pft_report_exp.h"
#include "pft_report_set.h"
#include "pft_stats.h"
#include "pft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FX PFT_FIXTURES_DIR "/report"

static void test_stats(void)
{
    pft_stats_t s = {0};
    char buf[64];
    pft_stats_format(&s, 100, 2, 1, buf, sizeof buf);
    CHECK(strcmp(buf, "—") == 0);
    CHECK(isnan(pft_stats_mean(&s)) && isnan(pft_stats_std(&s)));
    pft_stats_add(&s, 0.7147);
    pft_stats_add(&s, NAN); /* ignored */
    pft_stats_format(&s, 100, 2, 1, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "71.47 (1)") == 0, "%s", buf);
    CHECK(isnan(pft_stats_std(&s)));
    pft_stats_add(&s, 0.7132);
    pft_stats_add(&s, 0.7162);
    CHECK_NEAR(pft_stats_mean(&s), 0.7147, 1e-12);
    CHECK_NEAR(pft_stats_std(&s), 0.0015, 1e-12);
    pft_stats_format(&s, 100, 2, 1, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "71.47 ± 0.15 (3)") == 0, "%s", buf);
    pft_stats_format(&s, 100, 2, 0, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "71.47 ± 0.15") == 0, "%s", buf);
    pft_stats_format(&s, 100, 2, 1, buf, 8); /* truncated, still terminated */
    CHECK(strlen(buf) == 7);

    pft_stats_t z = {0};
    pft_stats_add(&z, -1e-9);
    pft_stats_add(&z, -1e-9);
    pft_stats_format(&z, 1, 1, 0, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "0.0 ± 0.0") == 0, "%s", buf); /* no "-0.0" */
}

static const pft_report_row_t *row(const pft_report_exp_t *e, size_t i)
{
    return i < e->n_rows ? &e->rows[i] : NULL;
}

static void test_set_and_exp(void)
{
    pft_report_set_t *set = pft_report_set_new();
    CHECK(set && pft_report_set_add_path(set, FX "/good/pair") == 0);
    CHECK(pft_report_set_add_path(set, FX "/good") == 0); /* pair again: its runs count twice, tags once */
    const char *const *tags;
    size_t nt = pft_report_set_tags(set, &tags);
    CHECK(nt == 3 && strcmp(tags[0], "pair") == 0 && strcmp(tags[1], "chain3") == 0 &&
          strcmp(tags[2], "gmm-family") == 0);
    const pft_report_run_t *runs;
    CHECK(pft_report_set_runs(set, &runs) == 6);
    CHECK(strcmp(runs[2].tag, "chain3") == 0 && strcmp(runs[2].variant, "FedPFT diag K=5") == 0 &&
          runs[2].seed == 0); /* defaults of the old format */
    const pft_report_line_t *lines;
    CHECK(pft_report_set_lines(set, &lines) == 5);
    CHECK(lines[3].line == 5 && lines[4].line == 6); /* the blank line 4 is skipped */

    pft_report_exp_t *e = NULL;
    CHECK(pft_report_exp_build(set, "chain3", &e) == 0 && e);
    if (e) {
        CHECK(e->n_runs == 2 && e->n_seeds == 2 && e->n_nodes == 3 && !e->final_all);
        CHECK(e->n_rows == 4 && e->centralized_row == 0 && e->kd_row == 2);
        CHECK(strcmp(row(e, 1)->label, "Local only (mean of nodes)") == 0);
        CHECK_NEAR(pft_stats_mean(&row(e, 1)->acc), 0.51, 1e-12); /* 0.50 and the mean of seed 1's list */
        CHECK(row(e, 2)->acc.n == 0 &&
              row(e, 2)->bytes.n == 0); /* KD: null in one seed, absent in the other */
        CHECK(row(e, 3)->fedpft && strcmp(row(e, 3)->label, "FedPFT diag K=5") == 0);
        CHECK_NEAR(pft_stats_mean(&row(e, 3)->acc), 0.71, 1e-12);
        CHECK_NEAR(pft_stats_mean(&row(e, 3)->bytes), 2000, 1e-9);
        CHECK(e->n_variants == 1 && e->variants[0].n_nodes == 3);
        const pft_report_node_t *b = &e->variants[0].nodes[1];
        CHECK(strcmp(b->id, "b") == 0 && b->hop == 1 && b->n_failed == 1 &&
              strcmp(b->status, "timeout") == 0);
        CHECK(b->acc.n == 1 && b->local_only.n == 2);
        pft_report_exp_destroy(&e);
        CHECK(e == NULL);
    }
    CHECK(pft_report_exp_build(set, "pair", &e) == 0 && e);
    if (e) {
        /* runs of pair were added twice: still one seed; baselines from the first run of seed 7 */
        CHECK(e->n_seeds == 1 && e->n_variants == 2 && e->n_rows == 7);
        CHECK_NEAR(pft_stats_mean(&row(e, 0)->acc), 0.80, 1e-12);
        CHECK(row(e, 0)->acc.n == 1);
        CHECK(strcmp(row(e, 4)->label, "KD (T=5)") == 0 && strcmp(e->kd_best_t, "10") == 0);
        CHECK(strcmp(row(e, 5)->label, "FedPFT diag K=10") == 0 && row(e, 5)->acc.n == 2);
        CHECK(strcmp(row(e, 6)->label, "FedPFT full K=1") == 0);
        pft_report_exp_destroy(&e);
    }
    CHECK(pft_report_exp_build(set, "gmm-family", &e) == 0 && e);
    if (e) {
        CHECK(e->n_runs == 0 && e->n_lines == 5 && e->n_synth == 4 && !e->synth_mixed);
        CHECK(strcmp(e->synth[0].cov, "diag") == 0 && e->synth[0].k == 1 && e->synth[0].acc_synth.n == 2);
        CHECK(strcmp(e->synth[1].cov, "diag") == 0 && e->synth[1].k == 10);
        CHECK(strcmp(e->synth[3].cov, "lowrank") == 0 && e->synth[3].rank == 8);
        pft_report_exp_destroy(&e);
    }
    CHECK(pft_report_exp_build(set, "nothing", &e) == PFT_EINVAL && e == NULL);
    pft_report_exp_destroy(&e); /* safe on NULL */
    pft_report_set_destroy(&set);
    CHECK(set == NULL);
}

/* An exact-statistics variant beside FedPFT: its run (first in directory order) has no baselines, so the
 * seed's come from the FedPFT run; the centralized Gaussian baseline; shrinkage; synth heads. */
static void test_exact(void)
{
    pft_report_set_t *set = pft_report_set_new();
    CHECK(set && pft_report_set_add_path(set, FX "/exact") == 0);
    pft_report_exp_t *e = NULL;
    CHECK(pft_report_exp_build(set, "exact3", &e) == 0 && e);
    if (e) {
        CHECK(e->n_runs == 2 && e->n_seeds == 1 && e->n_variants == 2 && e->n_rows == 5);
        CHECK(e->centralized_row == 0 && e->centralized_gaussian_row == 1);
        CHECK(strcmp(row(e, 1)->label, "Centralized Gaussian (LDA)") == 0);
        CHECK_NEAR(pft_stats_mean(&row(e, 1)->acc), 0.78, 1e-12);
        CHECK_NEAR(pft_stats_mean(&row(e, 1)->bytes), 1024000, 1e-9);
        CHECK_MSG(strcmp(e->cg_alpha, "0.5") == 0, "%s", e->cg_alpha);
        const pft_report_variant_t *x = &e->variants[0];
        CHECK(strcmp(x->name, "Exact LDA (tied, gaussian head)") == 0 && row(e, x->row)->fedpft);
        CHECK(x->gaussian && strcmp(x->gaussian, "lda") == 0 && strcmp(x->alpha_rule, "cv") == 0);
        CHECK(x->cov && strcmp(x->cov, "tied") == 0);
        CHECK(x->final_alpha.n == 1 && fabs(pft_stats_mean(&x->final_alpha) - 0.5) < 1e-12);
        CHECK(x->n_nodes == 3 && x->nodes[0].alpha.n == 1 &&
              fabs(pft_stats_mean(&x->nodes[0].alpha) - 0.9) < 1e-12);
        CHECK(x->nodes[2].synthetic.n == 1 && pft_stats_mean(&x->nodes[2].synthetic) == 0);
        CHECK(x->nodes[1].drift_recv.n == 0 && x->nodes[1].drift_sent.n == 0);
        /* local-only figures of the exact run come from the seed's baselines in the other run */
        CHECK(x->nodes[2].local_only.n == 1 && fabs(pft_stats_mean(&x->nodes[2].local_only) - 0.52) < 1e-12);
        CHECK(e->variants[1].gaussian == NULL && e->variants[1].final_alpha.n == 0);
        pft_report_exp_destroy(&e);
    }
    CHECK(pft_report_exp_build(set, "exact-family", &e) == 0 && e);
    if (e) {
        /* a line without "head" is logreg's; heads sort logreg first within a cov */
        CHECK(e->n_lines == 5 && e->n_synth == 3 && e->synth_heads);
        CHECK(strcmp(e->synth[0].cov, "diag") == 0 && strcmp(e->synth[0].head, "logreg") == 0 &&
              e->synth[0].acc_synth.n == 2 && e->synth[0].shrinkage.n == 0 && !e->synth[0].gaussian);
        CHECK(strcmp(e->synth[1].cov, "diag") == 0 && strcmp(e->synth[1].head, "gaussian") == 0);
        CHECK(strcmp(e->synth[2].cov, "tied") == 0 && strcmp(e->synth[2].gaussian, "lda") == 0 &&
              e->synth[2].shrinkage.n == 2 && fabs(pft_stats_mean(&e->synth[2].shrinkage) - 0.1) < 1e-12);
        pft_report_exp_destroy(&e);
    }
    pft_report_set_destroy(&set);
}

/* Writes text as dir/name/results.json. */
static void write_run(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/%s/results.json", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0);
    if (f)
        fclose(f);
}

/* Runs of one tag and variant name that differ in a setting are different variants, named by what differs,
 * not seeds of one; a repeated seed and a run that did not finish are said. */
static void test_grouping(void)
{
    char dir[] = "/tmp/pft_report_group_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const char *fmt =
        "{\"tag\": \"g\", \"variant\": \"FedPFT diag K=1\", \"seed\": 0, \"settings\": {\"k\": 1, "
        "\"partition\": \"%s\", \"secure_agg\": %s}, \"nodes\": [{\"id\": \"a\", \"status\": \"%s\", "
        "\"accuracy_global\": %s}]}";
    char text[512];
    snprintf(text, sizeof text, fmt, "iid", "false", "ok", "0.5");
    write_run(dir, "r1", text);
    snprintf(text, sizeof text, fmt, "iid", "true", "ok", "0.6");
    write_run(dir, "r2", text);
    snprintf(text, sizeof text, fmt, "iid", "false", "no result.json", "null");
    write_run(dir, "r3", text);
    snprintf(text, sizeof text, fmt, "dirichlet(0.1)", "false", "ok", "0.7");
    write_run(dir, "r4", text);
    pft_report_set_t *set = pft_report_set_new();
    CHECK(set && pft_report_set_add_path(set, dir) == 0);
    pft_report_exp_t *e = NULL;
    CHECK(pft_report_exp_build(set, "g", &e) == 0 && e);
    if (e) {
        CHECK_MSG(e->n_variants == 3, "%zu variants", e->n_variants);
        const pft_report_variant_t *v = e->variants;
        CHECK_MSG(e->n_variants == 3 &&
                      strcmp(v[0].name, "FedPFT diag K=1 (partition=iid, secure_agg=false)") == 0 &&
                      strcmp(v[1].name, "FedPFT diag K=1 (partition=iid, secure_agg=true)") == 0 &&
                      strcmp(v[2].name, "FedPFT diag K=1 (partition=dirichlet(0.1), secure_agg=false)") == 0,
                  "%s | %s | %s", v[0].name, e->n_variants > 1 ? v[1].name : "",
                  e->n_variants > 2 ? v[2].name : "");
        CHECK(v[0].n_runs == 2 && v[0].n_failed_runs == 1 && v[1].n_runs == 1 && v[1].n_failed_runs == 0);
        CHECK_MSG(strcmp(v[0].seeds, "0 (×2)") == 0, "%s", v[0].seeds);
        CHECK(strcmp(row(e, v[1].row)->label, v[1].name) == 0);
        CHECK_NEAR(pft_stats_mean(&row(e, v[1].row)->acc), 0.6, 1e-12);
        pft_report_exp_destroy(&e);
    }
    pft_report_set_destroy(&set);
    for (int i = 1; i <= 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/r%d/results.json", dir, i);
        remove(path);
        snprintf(path, sizeof path, "%s/r%d", dir, i);
        rmdir(path);
    }
    rmdir(dir);
}

static void test_errors(void)
{
    pft_report_set_t *set = pft_report_set_new();
    CHECK(pft_report_set_add_path(set, FX "/bad/broken/results.json") == PFT_EFORMAT);
    CHECK_MSG(strstr(pft_errmsg(), "bad/broken/results.json:3:25: not valid JSON"), "%s", pft_errmsg());
    CHECK(pft_report_set_add_path(set, FX "/bad/notrun") == PFT_EFORMAT);
    CHECK_MSG(strstr(pft_errmsg(), "notrun/results.json: not a pftnet launch results.json"), "%s",
              pft_errmsg());
    CHECK(pft_report_set_add_path(set, FX "/bad/lines.jsonl") == PFT_EFORMAT);
    CHECK_MSG(strstr(pft_errmsg(), "bad/lines.jsonl:2:"), "%s", pft_errmsg());
    CHECK(pft_report_set_add_path(set, FX "/no-such-file") == PFT_EIO);
    CHECK_MSG(strstr(pft_errmsg(), "no-such-file"), "%s", pft_errmsg());
    pft_report_set_destroy(&set);
}

int main(void)
{
    RUN(test_stats);
    RUN(test_set_and_exp);
    RUN(test_exact);
    RUN(test_grouping);
    RUN(test_errors);
    return pft_test_done();
}
