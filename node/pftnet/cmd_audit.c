/* cmd_audit: `pftnet audit BUNDLE --features X.npy --labels Y.npy [--holdout-features H.npy --holdout-labels
 * HY.npy] [--prep P] [--lp N] [--seed S] [--fail-on fail|warn|never] [--json]`: attacks a bundle with the
 * rows it was fitted on and reports each attack's verdict (the attacks: node/audit/pft_audit.h; how to read
 * them: docs/SECURITY.md §9).
 *
 * The CLI: options, files, printing (text or JSON). Exit 0 when the overall verdict is below --fail-on; 3
 * when it reaches it (default: FAIL); 1 if a file cannot be read or does not match the bundle, or an attack
 * fails to run; 2 on bad usage. */
#include "pft_alloc.h"
#include "pft_audit.h"
#include "pft_bundle.h"
#include "pft_cli.h"
#include "pft_cmd.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_npy.h"
#include "pft_prep.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define AUDIT_EXIT_VERDICT 3 /* the verdict reached --fail-on */

/* Rows of one file pair, preprocessed. */
typedef struct {
    float *x;
    int32_t *y;
    int n, d;
} rows_t;

static void rows_free(rows_t *r)
{
    PFT_FREE(r->x);
    PFT_FREE(r->y);
}

/* Reads features and labels, applies prep; 0 or 1 after printing why. */
static int rows_load(const char *xp, const char *yp, pft_prep_t prep, rows_t *r)
{
    int64_t n = 0, d = 0, ny = 0;
    if (pft_npy_read_f32(xp, &r->x, &n, &d) || pft_npy_read_i32(yp, &r->y, &ny)) {
        fprintf(stderr, "pftnet audit: %s\n", pft_errmsg());
        return 1;
    }
    if (n != ny || n > INT32_MAX / 2 || d > 1 << 20) {
        fprintf(stderr, "pftnet audit: %s has %lld rows, %s %lld labels\n", xp, (long long)n, yp,
                (long long)ny);
        return 1;
    }
    r->n = (int)n;
    r->d = (int)d;
    if (pft_prep_apply(prep, r->x, r->n, r->d)) {
        fprintf(stderr, "pftnet audit: %s\n", pft_errmsg());
        return 1;
    }
    return 0;
}

static double jnum(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "-";
}

/* The per-class table (one row per class and part). */
static void print_classes(const json_t *classes)
{
    printf("%5s %-8s %7s %4s %9s %7s %9s %7s %11s %11s %11s\n", "class", "part", "n", "K", "min_rows",
           "one_row", "nn_typ", "min_rat", "ll_own", "ll_held", "ll_diff");
    size_t i, k;
    json_t *e, *c;
    json_array_foreach(classes, i, e)
    {
        json_t *comps = json_object_get(e, "components");
        double mr = INFINITY, mrat = INFINITY;
        int one = 0;
        json_array_foreach(comps, k, c)
        {
            mr = fmin(mr, jnum(c, "rows"));
            one += jnum(c, "rows") < 1.5;
            if (!isnan(jnum(c, "ratio")))
                mrat = fmin(mrat, jnum(c, "ratio"));
        }
        printf("%5d %-8.8s %7.0f %4d %9.2f %7d %9.4f %7.3f", (int)jnum(e, "label"), jstr(e, "part"),
               jnum(e, "n"), (int)json_array_size(comps), mr, one, jnum(e, "nn_typical"), mrat);
        const char *keys[3] = {"ll_own", "ll_holdout", "ll_diff"};
        for (int j = 0; j < 3; j++)
            isnan(jnum(e, keys[j])) ? printf(" %11s", "-") : printf(" %11.2f", jnum(e, keys[j]));
        printf("\n");
    }
}

/* What a subspace entry was built from, for its line. */
static const char *basis_text(const char *basis)
{
    return !strcmp(basis, "factor")  ? " (released factor and class means)"
           : !strcmp(basis, "means") ? " (class means alone, the baseline)"
                                     : "";
}

/* The subspace attack, one line per part. */
static void print_subspace(const json_t *a)
{
    size_t i;
    json_t *p;
    printf("subspace membership: %s\n", jstr(a, "verdict"));
    json_array_foreach(json_object_get(a, "parts"), i, p)
    {
        int factor = strcmp(jstr(p, "basis"), "spectrum") && strcmp(jstr(p, "basis"), "-");
        printf("  part %s%s: ", jstr(p, "part"), basis_text(jstr(p, "basis")));
        if (!json_is_true(json_object_get(p, "proper")) && factor) {
            printf("they span the whole space; %s\n", jstr(p, "verdict"));
            continue;
        }
        if (!json_is_true(json_object_get(p, "proper"))) {
            printf(
                "no subspace (largest eigenvalue gap %.3g < %.0e: the released scatter has full rank); %s\n",
                jnum(p, "gap"), jnum(a, "gap_min"), jstr(p, "verdict"));
            continue;
        }
        if (factor)
            printf("span of dimension %d of %d", (int)jnum(p, "dim"), (int)jnum(p, "d"));
        else
            printf("span of dimension %d of %d (rank %d above a gap of %.3g, tail %.2e)", (int)jnum(p, "dim"),
                   (int)jnum(p, "d"), (int)jnum(p, "rank"), jnum(p, "gap"), jnum(p, "tail"));
        printf("; member residuals %.3g..%.3g (%d rows)", jnum(p, "member_residual_min"),
               jnum(p, "member_residual_max"), (int)jnum(p, "member_rows"));
        if (jnum(p, "holdout_rows") > 0)
            printf(", held-out %.3g..%.3g (%d rows); best threshold accuracy %.3f",
                   jnum(p, "holdout_residual_min"), jnum(p, "holdout_residual_max"),
                   (int)jnum(p, "holdout_rows"), jnum(p, "accuracy"));
        printf("; %s%s\n", jstr(p, "verdict"),
               json_is_true(json_object_get(p, "contained")) ? " (every member row lies in the span)" : "");
    }
}

/* The vertex attack, one line per part. */
static void print_vertex(const json_t *a)
{
    size_t i;
    json_t *p;
    printf("vertex (LP) reconstruction: %s\n", jstr(a, "verdict"));
    json_array_foreach(json_object_get(a, "parts"), i, p)
    {
        printf("  part %s%s: ", jstr(p, "part"), basis_text(jstr(p, "basis")));
        if (!json_is_true(json_object_get(p, "applicable"))) {
            printf("not applicable: %s; %s\n", jstr(p, "reason"), jstr(p, "verdict"));
            continue;
        }
        printf(
            "%d programs (%d failed), %d distinct vertices, %d rows RECOVERED, %d of them exactly (max error "
            "%.2g); ",
            (int)jnum(p, "programs"), (int)jnum(p, "programs_failed"), (int)jnum(p, "vertices"),
            (int)jnum(p, "rows_recovered"), (int)jnum(p, "rows_exact"), jnum(p, "max_error"));
        printf("%d vertices look like rows (>= %d zeros), %d of them are; zeros: ", (int)jnum(p, "rowlike"),
               (int)jnum(p, "rowlike_zeros"), (int)jnum(p, "rowlike_rows"));
        jnum(p, "zeros_row_min") >= 0
            ? printf("rows %d..%d", (int)jnum(p, "zeros_row_min"), (int)jnum(p, "zeros_row_max"))
            : printf("no row");
        jnum(p, "zeros_other_max") >= 0 ? printf(", others <= %d", (int)jnum(p, "zeros_other_max"))
                                        : printf(", no other vertex");
        printf("; %s\n", jstr(p, "verdict"));
    }
}

/* The zero-support test: its worst class and all classes pooled. */
static void print_zero_support(const json_t *z)
{
    const json_t *w = json_object_get(z, "worst"), *all = json_object_get(z, "overall");
    printf("zero support: %s: ", jstr(z, "verdict"));
    if (!json_is_true(json_object_get(z, "applicable"))) {
        printf("not measured: %s\n", jstr(z, "reason"));
        return;
    }
    printf("worst class %d (%.0f rows, %d coordinates exactly 0): %d of %d own rows pass, %d of %d held-out; "
           "balanced accuracy %.3f (all classes %.3f)",
           (int)jnum(w, "label"), jnum(w, "rows"), (int)jnum(w, "zeros"), (int)jnum(w, "own_pass"),
           (int)jnum(w, "own_rows"), (int)jnum(w, "holdout_pass"), (int)jnum(w, "holdout_rows"),
           jnum(w, "accuracy"), jnum(all, "accuracy"));
    if (json_is_true(json_object_get(w, "exact_reading"))) /* the sums taken as exact decided best */
        printf("; bound of the sums read as exact");
    else if (jnum(z, "mean_noise") > 0) /* the bound test allowed for the producer's mean_noise */
        printf("; bound at margin %d x %g", (int)jnum(w, "margin"), jnum(z, "mean_noise"));
    printf("\n");
}

static void print_text(const char *path, const json_t *o)
{
    const json_t *s = json_object_get(o, "summary"), *a = json_object_get(o, "attacks");
    const json_t *n = json_object_get(a, "nearest"), *l = json_object_get(a, "likelihood");
    printf("bundle %s: producer %s, %s, d %d\n", path, jstr(o, "producer"),
           strcmp(jstr(o, "kind"), "stats") ? "GMMs" : "exact statistics", (int)jnum(o, "d"));
    print_classes(json_object_get(o, "classes"));
    size_t i;
    json_t *mp;
    json_array_foreach(json_object_get(o, "masked_parts"), i, mp)
        printf("part %s: %s (opener %s)\n", jstr(mp, "part"), jstr(mp, "verdict"), jstr(mp, "opener"));
    if ((int)jnum(s, "components") == 0)
        printf("components: none in the clear\n");
    else
        printf("components %d: %d stand for fewer than 1.5 rows; smallest stands for %.2f rows\n",
               (int)jnum(s, "components"), (int)jnum(s, "one_row"), jnum(s, "min_rows"));
    print_subspace(json_object_get(a, "subspace"));
    print_vertex(json_object_get(a, "vertex"));
    if (json_is_false(json_object_get(n, "applicable")))
        printf("nearest row: not measured: %s\n", jstr(n, "reason"));
    else
        printf("nearest row: %s: %d means, %d are rows (ratio < %.1f), %d near one (< %.1f); smallest ratio "
               "%.3f\n",
               jstr(n, "verdict"), (int)jnum(n, "means"), (int)jnum(n, "means_are_rows"),
               jnum(n, "fail_below"), (int)jnum(n, "means_near_rows"), jnum(n, "warn_below"),
               jnum(n, "min_ratio"));
    printf("likelihood membership: %s: ", jstr(l, "verdict"));
    if (json_is_true(json_object_get(l, "applicable")))
        printf("AUC %.3f (%d own vs %d held-out rows; mean log-likelihood %.2f vs %.2f)\n", jnum(l, "auc"),
               (int)jnum(l, "own_rows"), (int)jnum(l, "holdout_rows"), jnum(s, "ll_own"),
               jnum(s, "ll_holdout"));
    else
        printf("not measured: %s\n", jstr(l, "reason"));
    print_zero_support(json_object_get(a, "zero_support"));
    if (json_is_true(json_object_get(o, "exact_leak")))
        printf("*** FAIL: a row can be recovered from this bundle or its membership decided exactly ***\n");
    if ((int)jnum(s, "components") == 0 && json_array_size(json_object_get(o, "masked_parts")) > 0)
        printf("verdict: %s (nothing in the clear was measured: every part is masked, and opens only at its "
               "opener)\n",
               jstr(o, "verdict"));
    else
        printf("verdict: %s\n", jstr(o, "verdict"));
}

#define FAIL_ON_EXACT (-1) /* --fail-on exact: only an exact leak (exact_leak in the JSON) */

/* --fail-on: the verdict from which the exit status is AUDIT_EXIT_VERDICT (never: PFT_VERDICT_FAIL + 1;
 * exact: FAIL_ON_EXACT). 0, or 2 after printing why. */
static int parse_fail_on(const char *s, int *level)
{
    pft_verdict_t v;
    if (strcasecmp(s, "never") == 0 || strcasecmp(s, "exact") == 0) {
        *level = strcasecmp(s, "never") == 0 ? PFT_VERDICT_FAIL + 1 : FAIL_ON_EXACT;
        return 0;
    }
    if (pft_verdict_parse(s, &v) || v == PFT_VERDICT_PASS) {
        fprintf(stderr, "pftnet audit: --fail-on: '%s' is not warn, fail, exact or never\n", s);
        return 2;
    }
    *level = (int)v;
    return 0;
}

/* Prints o as JSON or text, and writes it as JSON to json_out when given; 0, or 1 (out of memory, json_out not
 * written). */
static int report(const char *path, json_t *o, const char *prep, int json, const char *json_out)
{
    json_object_set_new(o, "bundle", json_string(path));
    json_object_set_new(o, "prep", json_string(prep));
    char *text = json || json_out ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(8))
                                  : NULL;
    if ((json || json_out) && !text) {
        fprintf(stderr, "pftnet audit: out of memory\n");
        return 1;
    }
    int code = 0;
    if (json_out) {
        size_t len = strlen(text);
        text[len] = '\n'; /* json_dumps's NUL: the file ends with a newline, as stdout's copy does */
        if (pft_fsio_write_atomic(json_out, text, len + 1)) {
            fprintf(stderr, "pftnet audit: --json-out: %s\n", pft_errmsg());
            code = 1;
        }
        text[len] = '\0';
    }
    if (code == 0 && json)
        printf("%s\n", text);
    else if (code == 0)
        print_text(path, o);
    free(text);
    return code;
}

/* What the command was given: files, prep, attack options, output and exit policy. */
typedef struct {
    const char *bundle, *fx, *fy, *hx, *hy, *prep_name;
    pft_prep_t prep;
    pft_audit_opts_t ao;
    int json, level;
    const char *json_out;
} audit_args_t;

/* Reads the bundle and the rows, runs the attacks, prints; the exit status. */
static int audit_files(const audit_args_t *g)
{
    pft_bundle_limits_t lim;
    pft_bundle_limits_default(&lim);
    uint8_t *msg = NULL;
    size_t len = 0;
    pft_bundle_t *b = NULL;
    rows_t own = {0}, held = {0};
    json_t *o = NULL;
    pft_verdict_t v = PFT_VERDICT_PASS;
    int code = 1;
    if (pft_fsio_read(g->bundle, lim.max_bytes, &msg, &len) || pft_bundle_decode(msg, len, &lim, &b)) {
        fprintf(stderr, "pftnet audit: %s: %s\n", g->bundle, pft_errmsg());
        goto done;
    }
    if (rows_load(g->fx, g->fy, g->prep, &own) || (g->hx && rows_load(g->hx, g->hy, g->prep, &held)))
        goto done;
    if (own.d != pft_bundle_dim(b) || (g->hx && held.d != own.d)) {
        fprintf(stderr, "pftnet audit: the bundle has d = %d; %s has %d columns%s\n", pft_bundle_dim(b),
                g->fx, own.d, g->hx && held.d != own.d ? " and the held-out rows another number" : "");
        goto done;
    }
    pft_audit_rows_t ro = {own.x, own.y, own.n, own.d}, rh = {held.x, held.y, held.n, own.d};
    if (pft_audit_run(b, &ro, &rh, &g->ao, &o, &v)) {
        fprintf(stderr, "pftnet audit: %s\n", pft_errmsg());
        goto done;
    }
    code = report(g->bundle, o, g->prep_name, g->json, g->json_out);
    if (code == 0 &&
        (g->level == FAIL_ON_EXACT ? json_is_true(json_object_get(o, "exact_leak")) : (int)v >= g->level))
        code = AUDIT_EXIT_VERDICT;
done:
    json_decref(o);
    rows_free(&own);
    rows_free(&held);
    pft_bundle_destroy(&b);
    pft_free(msg);
    return code;
}

int pft_cmd_audit(int argc, char **argv)
{
    const char *fx = NULL, *fy = NULL, *hx = NULL, *hy = NULL, *prep_name = NULL, *fail_on = NULL,
               *json_out = NULL;
    int json = 0, level = PFT_VERDICT_FAIL;
    pft_audit_opts_t ao;
    pft_audit_opts_default(&ao);
    const pft_opt_t opts[] = {
        {"features", PFT_OPT_STRING, &fx, NULL, 0, -1, 1, "X.npy",
         "the rows the bundle was fitted on (own rows)"},
        {"labels", PFT_OPT_STRING, &fy, NULL, 0, -1, 1, "Y.npy", "their labels"},
        {"holdout-features", PFT_OPT_STRING, &hx, NULL, 0, -1, 0, "X.npy",
         "rows of the same distribution the bundle did not see (e.g. another node's): the non-members"},
        {"holdout-labels", PFT_OPT_STRING, &hy, NULL, 0, -1, 0, "Y.npy", "their labels"},
        {"prep", PFT_OPT_STRING, &prep_name, "l2", 0, -1, 0, "P",
         "the run's feature preprocessing, applied to both: none, l2, sqrt-l2"},
        {"lp", PFT_OPT_INT, &ao.n_lp, "400", 1, 1000000, 0, "N",
         "linear programs of the vertex attack per part (coordinates maximised in a random order)"},
        {"seed", PFT_OPT_U64, &ao.seed, "1", 0, -1, 0, "S", "seed of that order"},
        {"ridge", PFT_OPT_DOUBLE, &ao.ridge, "0.001", 0, 1e6, 0, "R",
         "likelihood of statistics: R x tr(C)/d added to the diagonal of each class covariance C"},
        {"mean-noise", PFT_OPT_DOUBLE, &ao.mean_noise, "0.05", 0, 1e3, 0, "S",
         "statistics: the noise std the producer added to each own class sum (its mean_noise, default 0.05; "
         "0: exact), which the bound test allows for; it also reads the sums as exact"},
        {"fail-on", PFT_OPT_STRING, &fail_on, "fail", 0, -1, 0, "V",
         "exit 3 when the overall verdict reaches V (warn, fail), on an exact leak only (exact), or never"},
        {"json", PFT_OPT_FLAG, &json, NULL, 0, -1, 0, NULL, "print one JSON object on stdout"},
        {"json-out", PFT_OPT_STRING, &json_out, NULL, 0, -1, 0, "FILE",
         "also write that JSON object to FILE (replaced atomically), whatever stdout shows"},
        {0},
    };
    const pft_cli_t cli = {
        .prog = "pftnet audit",
        .positional = "BUNDLE",
        .min_pos = 1,
        .max_pos = 1,
        .summary =
            "Attacks a bundle with the rows it was fitted on and gives each attack a verdict (PASS, WARN,\n"
            "FAIL; docs/SECURITY.md section 9 has the thresholds):\n"
            "  subspace membership  per part: a row's residual against span(released scatter cut at its\n"
            "                       largest eigenvalue gap, class means); the best threshold's balanced\n"
            "                       accuracy own vs held-out rows (FAIL >= 0.9, WARN > 0.6); without\n"
            "                       held-out rows FAIL when every own row lies in the span; for a\n"
            "                       low-rank release again against span(the factor as sent, means);\n"
            "  vertex (LP)          --lp linear programs over {x in that span, x >= 0, sum x = d}: FAIL when "
            "a\n"
            "                       vertex is an own row (cosine >= 1 - 1e-6); each program maximises one\n"
            "                       coordinate;\n"
            "  nearest row          each released mean's distance to its nearest own row over the typical\n"
            "                       spacing of own rows (FAIL < 0.1: the mean is a row, WARN < 0.3);\n"
            "  likelihood           AUC of own vs held-out rows' log-likelihood under the released class\n"
            "                       models (FAIL >= 0.9, WARN >= 0.6);\n"
            "  zero support         per class: a row passes when it is 0 wherever a released mean of its "
            "class\n"
            "                       is 0 (non-negative features); balanced accuracy own vs held-out rows of\n"
            "                       the worst class (FAIL >= 0.9, WARN > 0.6).\n"
            "The overall verdict is the worst; an exact leak is a FAIL of the first three (a row recovered,\n"
            "membership decided by the span). Exit 0 when the verdict is below --fail-on, 3 when it reaches "
            "it;\n"
            "1 if a file cannot be read or written or does not match the bundle; 2 on bad usage.",
        .opts = opts,
    };
    const char *pos[1] = {NULL};
    int n_pos = 0, rc = pft_cli_parse(&cli, argc, argv, pos, &n_pos);
    if (rc)
        return rc == 1 ? 0 : 2;
    pft_prep_t prep;
    if (pft_prep_parse(prep_name, &prep)) {
        fprintf(stderr, "pftnet audit: --prep: %s\n", pft_errmsg());
        return 2;
    }
    if (parse_fail_on(fail_on, &level))
        return 2;
    if (!hx != !hy) {
        fprintf(stderr, "pftnet audit: --holdout-features and --holdout-labels go together\n");
        return 2;
    }
    audit_args_t g = {pos[0], fx, fy, hx, hy, prep_name, prep, ao, json, level, json_out};
    return audit_files(&g);
}
