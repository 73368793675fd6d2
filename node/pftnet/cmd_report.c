/* cmd_report: `pftnet report [options] PATH...` turns launch results and synth lines into Markdown tables and
 * gnuplot plots (one section per experiment tag, seeds aggregated). */
#include "pft_alloc.h"
#include "pft_cli.h"
#include "pft_cmd.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_report_exp.h"
#include "pft_report_md.h"
#include "pft_report_plot.h"
#include "pft_report_set.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PATHS 256

typedef struct {
    const char *out, *plots, *format, *title, *notes;
} report_args_t;

/* A file-name stem for tag: [A-Za-z0-9._-] kept, anything else '_'; "-2", "-3" appended when an earlier tag
 * (stems[0..n)) has the same stem. */
static void make_stem(const char *tag, char stems[][128], size_t n, char *out)
{
    char base[100];
    size_t j = 0;
    for (const char *s = tag; *s && j < sizeof base - 1; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '_' || c == '-';
        base[j] = ok && !(j == 0 && c == '.') ? c : '_';
        j++;
    }
    base[j] = '\0';
    if (!j)
        snprintf(base, sizeof base, "experiment");
    snprintf(out, 128, "%s", base);
    for (int k = 2;; k++) {
        size_t i = 0;
        while (i < n && strcmp(stems[i], out) != 0)
            i++;
        if (i == n)
            return;
        snprintf(out, 128, "%s-%d", base, k);
    }
}

/* The folder part of a file path ("." for a bare name), into a new string. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return pft_strdup(".");
    if (slash == path)
        return pft_strdup("/");
    char *d = pft_alloc((size_t)(slash - path) + 1);
    if (d) {
        memcpy(d, path, (size_t)(slash - path));
        d[slash - path] = '\0';
    }
    return d;
}

/* The path of folder `to` relative to folder `from` (both must exist), with a trailing '/' ("" if the same).
 */
static int relative_dir(const char *from, const char *to, char *out, size_t cap)
{
    char a[PATH_MAX], b[PATH_MAX];
    if (!realpath(from, a))
        return pft_err(PFT_EIO, "%s: %s", from, strerror(errno));
    if (!realpath(to, b))
        return pft_err(PFT_EIO, "%s: %s", to, strerror(errno));
    size_t la = strcmp(a, "/") == 0 ? 0 : strlen(a), lb = strcmp(b, "/") == 0 ? 0 : strlen(b);
    /* common prefix ending at a component boundary; then one "../" per component of `from` after it */
    size_t common = 0;
    for (size_t i = 0; i <= la && i <= lb; i++) {
        int end_a = i == la || a[i] == '/', end_b = i == lb || b[i] == '/';
        if (end_a && end_b)
            common = i;
        if (i == la || i == lb || a[i] != b[i])
            break;
    }
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = common; i < la; i++)
        if (a[i] == '/')
            used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "../");
    const char *rest = b + common + (b[common] == '/' ? 1 : 0);
    if (*rest)
        used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s/", rest);
    if (used >= cap)
        return pft_err(PFT_ERANGE, "path of %s relative to %s is too long", to, from);
    return 0;
}

/* The list of files a report made in its plot folder, kept there so that the next report into the same folder
 * can remove the plots it no longer makes (an experiment left out, a plot no longer called for) and nothing
 * else. One file name per line. */
#define PLOT_MANIFEST ".pftnet-report-files"

/* Appends image (a file name in the plot folder, "" for none) and its .dat and .gp to the manifest text m. */
static void manifest_add(FILE *m, const char *image)
{
    const char *dot = strrchr(image, '.');
    if (!image[0] || !dot)
        return;
    int stem = (int)(dot - image);
    fprintf(m, "%s\n%.*s.dat\n%.*s.gp\n", image, stem, image, stem, image);
}

/* 1 if name is a line of the manifest text. */
static int manifest_has(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; (p = strstr(p, name)); p += n)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return 1;
    return 0;
}

/* Removes the files the previous report listed in dir's manifest that this one (text) did not make, then
 * writes text as the new manifest. Only plain file names are ever removed. */
static int prune_plots(const char *dir, const char *text)
{
    char *path = pft_fsio_join(dir, PLOT_MANIFEST);
    uint8_t *old = NULL;
    size_t len = 0;
    if (!path)
        return pft_err(PFT_ENOMEM, "out of memory");
    if (pft_fsio_exists(path) && pft_fsio_read(path, 1 << 20, &old, &len) == 0) {
        char *save = NULL;
        for (char *name = strtok_r((char *)old, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
            if (name[0] == '.' || strchr(name, '/') || manifest_has(text, name))
                continue;
            char *stale = pft_fsio_join(dir, name);
            if (stale && unlink(stale) != 0 && errno != ENOENT)
                fprintf(stderr, "pftnet report: could not remove the stale plot file %s: %s\n", stale,
                        strerror(errno));
            pft_free(stale);
        }
    }
    pft_free(old);
    int rc = pft_fsio_write_atomic(path, text, strlen(text));
    pft_free(path);
    return rc;
}

/* Writes the whole report into f; plots into a->plots when given (img_prefix: its path from the Markdown),
 * listing the plot files made in manifest. */
static int write_report(FILE *f, const pft_report_set_t *set, const report_args_t *a, const char *img_prefix,
                        FILE *manifest)
{
    const char *const *tags;
    size_t n_tags = pft_report_set_tags(set, &tags);
    char(*stems)[128] = pft_calloc(n_tags ? n_tags : 1, sizeof *stems);
    if (!stems)
        return pft_err(PFT_ENOMEM, "out of memory");
    int rc = pft_report_md_begin(f, a->title, a->notes);
    for (size_t t = 0; t < n_tags && rc == 0; t++) {
        pft_report_exp_t *e = NULL;
        pft_report_plots_t plots;
        make_stem(tags[t], stems, t, stems[t]);
        rc = pft_report_exp_build(set, tags[t], &e);
        if (rc == 0 && a->plots && (rc = pft_report_plot_exp(e, a->plots, stems[t], a->format, &plots)) == 0) {
            manifest_add(manifest, plots.acc_bytes);
            manifest_add(manifest, plots.per_node);
            manifest_add(manifest, plots.drift);
            manifest_add(manifest, plots.synth);
        }
        if (rc == 0)
            rc = pft_report_md_exp(f, e, stems[t], a->plots ? &plots : NULL, img_prefix, a->notes);
        if (rc)
            pft_err_wrap(rc, "experiment '%s'", tags[t]);
        pft_report_exp_destroy(&e);
    }
    if (rc == 0)
        rc = pft_report_md_end(f, a->notes);
    pft_free(stems);
    return rc;
}

/* Creates the folder of file path if it is missing. */
static int make_parent(const char *path)
{
    char *dir = dir_of(path);
    int rc = dir ? pft_fsio_mkdirs(dir) : pft_err(PFT_ENOMEM, "out of memory");
    pft_free(dir);
    return rc;
}

/* Prepares the plot folder and the image-link prefix (plots relative to the folder of --out, or of the
 * current folder when the report goes to stdout). */
static int prepare_plots(const report_args_t *a, char *prefix, size_t cap)
{
    prefix[0] = '\0';
    if (!a->plots)
        return 0;
    if (!pft_report_plot_available())
        return pft_err(PFT_EUNSUPPORTED,
                       "--plots needs gnuplot, which is not on PATH (install gnuplot-nox, or "
                       "leave out --plots)");
    int rc = pft_fsio_mkdirs(a->plots);
    char *from = a->out ? dir_of(a->out) : pft_strdup(".");
    if (!rc && !from)
        rc = pft_err(PFT_ENOMEM, "out of memory");
    if (!rc)
        rc = relative_dir(from, a->plots, prefix, cap);
    pft_free(from);
    return rc;
}

static int run_report(const report_args_t *a, const char *const *paths, int n_paths)
{
    char *text = NULL, *made = NULL;
    size_t len = 0, made_len = 0;
    FILE *mem = NULL, *manifest = NULL;
    char prefix[PATH_MAX];
    pft_report_set_t *set = pft_report_set_new();
    int rc = set ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    for (int i = 0; i < n_paths && rc == 0; i++)
        rc = pft_report_set_add_path(set, paths[i]);
    if (rc == 0 && a->out)
        rc = make_parent(a->out);
    if (rc == 0)
        rc = prepare_plots(a, prefix, sizeof prefix);
    if (rc == 0 && (!(mem = open_memstream(&text, &len)) || !(manifest = open_memstream(&made, &made_len))))
        rc = pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0)
        rc = write_report(mem, set, a, prefix, manifest);
    if (mem && fclose(mem) != 0 && rc == 0)
        rc = pft_err(PFT_ENOMEM, "out of memory");
    if (manifest && fclose(manifest) != 0 && rc == 0)
        rc = pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0 && a->plots)
        rc = prune_plots(a->plots, made);
    if (rc == 0 && a->out)
        rc = pft_fsio_write_atomic(a->out, text, len);
    else if (rc == 0 && (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0))
        rc = pft_err(PFT_EIO, "writing the report to stdout: %s", strerror(errno));
    free(text);
    free(made);
    pft_report_set_destroy(&set);
    return rc;
}

int pft_cmd_report(int argc, char **argv)
{
    report_args_t a;
    const pft_opt_t opts[] = {
        {"out", PFT_OPT_STRING, &a.out, NULL, 1, 0, 0, "FILE.md",
         "write the Markdown here (default: stdout)"},
        {"plots", PFT_OPT_STRING, &a.plots, NULL, 1, 0, 0, "DIR",
         "make plots with gnuplot into DIR (with their .dat/.gp files); the Markdown links them relative to "
         "--out's folder; plot files an earlier report made in DIR and this one does not are removed (listed in "
         "DIR/" PLOT_MANIFEST "), so give each report its own DIR"},
        {"format", PFT_OPT_STRING, &a.format, "svg", 1, 0, 0, "svg|png", "image format of the plots"},
        {"title", PFT_OPT_STRING, &a.title, "pftnet report", 1, 0, 0, "TEXT", "title of the report"},
        {"notes", PFT_OPT_STRING, &a.notes, NULL, 1, 0, 0, "DIR",
         "hand-written Markdown inserted verbatim: DIR/intro.md, DIR/<tag>.md, DIR/outro.md (missing: "
         "skipped)"},
        {NULL, 0, NULL, NULL, 0, 0, 0, NULL, NULL},
    };
    const pft_cli_t cli = {
        .prog = "pftnet report",
        .positional = "PATH...",
        .min_pos = 1,
        .max_pos = MAX_PATHS,
        .summary =
            "Turns experiment results into Markdown tables and plots. Each PATH is a launch folder (holding\n"
            "results.json from `pftnet launch --out`), a results.json file, a .jsonl/.json file of\n"
            "`pftnet synth --json` lines, or a folder searched recursively for results.json and *.jsonl.\n"
            "One section per experiment tag, in order of first appearance; runs with different seeds are\n"
            "aggregated as mean ± sample std (n); FedPFT variants are compared with the baselines.",
        .opts = opts,
    };
    const char *pos[MAX_PATHS];
    int n_pos = 0;
    a.plots = a.out = a.notes = NULL;
    int rc = pft_cli_parse(&cli, argc, argv, pos, &n_pos);
    if (rc == 1)
        return 0;
    if (rc)
        return 2;
    if (strcmp(a.format, "svg") != 0 && strcmp(a.format, "png") != 0) {
        fprintf(stderr, "pftnet report: --format '%s': expected svg or png\n", a.format);
        return 2;
    }
    rc = run_report(&a, pos, n_pos);
    if (rc) {
        fprintf(stderr, "pftnet report: %s\n", pft_errmsg());
        return 1;
    }
    return 0;
}
