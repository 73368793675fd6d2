/* pft_report_plot: the plots of `pftnet report`, drawn by gnuplot from .dat/.gp files left beside the images.
 *
 * Each plot is one data file (gnuplot "index" blocks separated by two blank lines, "?" for a missing value)
 * and one script that reads it by a relative name, so the pair can be edited and rerun in place. Accuracies
 * are plotted in percent; error bars are the sample standard deviation over seeds. */
#include "pft_report_plot.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_report_label.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_BLOCKS 64 /* index blocks per data file (variants or covs) */

/* One plot being written: its two files and the plot clauses collected for the final `plot` command. */
typedef struct {
    const char *dir;
    char stem[200]; /* <base>-<what> */
    char dat[210], gp[210], img[210];
    FILE *fd;      /* the .dat being written */
    int blocks;    /* index blocks written so far */
    char *clauses; /* ", "-joined plot clauses */
    size_t n_clauses, cap_clauses;
    int failed; /* an allocation failed */
} plot_t;

int pft_report_plot_available(void)
{
    const char *path = getenv("PATH");
    if (!path)
        return 0;
    char buf[4096];
    for (const char *p = path; *p;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        snprintf(buf, sizeof buf, "%.*s/gnuplot", (int)n, n ? p : ".");
        if (access(buf, X_OK) == 0)
            return 1;
        p += n + (colon ? 1 : 0);
    }
    return 0;
}

/* gnuplot single-quoted string: no escapes inside, a quote is doubled. */
static void gp_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('\'', f);
}

/* A data-file string column: double-quoted; a double quote inside becomes a single one. */
static void dat_label(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++)
        fputc(*s == '"' ? '\'' : *s == '\n' || *s == '\r' ? ' ' : *s, f);
    fputc('"', f);
}

static void dat_num(FILE *f, double v)
{
    if (isnan(v))
        fprintf(f, " ?");
    else
        fprintf(f, " %.10g", v);
}

static int plot_open(plot_t *p, const char *dir, const char *base, const char *what, const char *format)
{
    memset(p, 0, sizeof *p);
    p->dir = dir;
    snprintf(p->stem, sizeof p->stem, "%s-%s", base, what);
    snprintf(p->dat, sizeof p->dat, "%s.dat", p->stem);
    snprintf(p->gp, sizeof p->gp, "%s.gp", p->stem);
    snprintf(p->img, sizeof p->img, "%s.%s", p->stem, format);
    char *path = pft_fsio_join(dir, p->dat);
    if (!path)
        return pft_err(PFT_ENOMEM, "out of memory");
    p->fd = fopen(path, "w");
    int rc = p->fd ? 0 : pft_err(PFT_EIO, "%s: %s", path, strerror(errno));
    if (!rc)
        fprintf(p->fd, "# written by pftnet report; read by %s\n", p->gp);
    pft_free(path);
    return rc;
}

/* Starts an index block; returns its index. */
static int block_begin(plot_t *p, const char *comment)
{
    if (p->blocks)
        fprintf(p->fd, "\n\n");
    fprintf(p->fd, "# block %d: ", p->blocks);
    for (const char *c = comment; *c; c++)
        fputc(*c == '\n' || *c == '\r' ? ' ' : *c, p->fd);
    fputc('\n', p->fd);
    return p->blocks++;
}

/* Appends one clause of the plot command (printf-style). */
__attribute__((format(printf, 2, 3))) static void clause(plot_t *p, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf) {
        p->failed = 1;
        return;
    }
    size_t need = p->n_clauses + (size_t)n + 16; /* separator (9) and NUL */
    if (need > p->cap_clauses) {
        size_t nc = need * 2;
        char *c = pft_realloc(p->clauses, nc);
        if (!c) {
            p->failed = 1;
            return;
        }
        p->clauses = c;
        p->cap_clauses = nc;
    }
    if (p->n_clauses)
        p->n_clauses += (size_t)sprintf(p->clauses + p->n_clauses, ", \\\n     ");
    memcpy(p->clauses + p->n_clauses, buf, (size_t)n + 1);
    p->n_clauses += (size_t)n;
}

/* Writes a gnuplot-quoted copy of s into buf (for clauses). */
static const char *q(char *buf, size_t cap, const char *s)
{
    size_t used = 0;
    if (cap < 3)
        return "''";
    buf[used++] = '\'';
    for (; *s && used + 3 < cap; s++) {
        if (*s == '\'')
            buf[used++] = '\'';
        buf[used++] = *s == '\n' || *s == '\r' ? ' ' : *s;
    }
    buf[used++] = '\'';
    buf[used] = '\0';
    return buf;
}

static void gp_header(FILE *f, const plot_t *p, const char *format, const char *title)
{
    fprintf(f, "# written by pftnet report; to restyle, edit and rerun in this folder: gnuplot %s\n", p->gp);
    if (strcmp(format, "png") == 0)
        fprintf(f, "set terminal pngcairo size 1000,600 noenhanced font 'Sans,11'\n");
    else
        fprintf(f,
                "set terminal svg size 860,520 dynamic noenhanced font 'Sans,12' background rgb 'white'\n");
    fprintf(f, "set output ");
    gp_quote(f, p->img);
    fprintf(f, "\nset title ");
    gp_quote(f, title);
    fprintf(f, "\nset datafile missing '?'\nset grid ytics\nset key below\nset border 3\n"
               "set tics nomirror\n");
    /* tab10 colours: distinguishable, none too light on white */
    static const char *const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                          "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
    for (int i = 0; i < 8; i++)
        fprintf(f, "set linetype %d lc rgb '%s'\n", i + 1, colours[i]);
}

/* Closes the data file, writes the script with `extra` settings and the collected clauses, runs gnuplot. */
static int plot_finish(plot_t *p, const char *format, const char *title, const char *extra)
{
    int rc = 0;
    char *path = NULL;
    FILE *f = NULL;
    if (fclose(p->fd) != 0)
        rc = pft_err(PFT_EIO, "%s/%s: %s", p->dir, p->dat, strerror(errno));
    p->fd = NULL;
    if (!rc && (p->failed || !p->clauses))
        rc = pft_err(PFT_ENOMEM, "out of memory");
    if (!rc && !(path = pft_fsio_join(p->dir, p->gp)))
        rc = pft_err(PFT_ENOMEM, "out of memory");
    if (!rc && !(f = fopen(path, "w")))
        rc = pft_err(PFT_EIO, "%s: %s", path, strerror(errno));
    if (!rc) {
        gp_header(f, p, format, title);
        fprintf(f, "%s", extra);
        fprintf(f, "plot %s\n", p->clauses);
        if (fclose(f) != 0)
            rc = pft_err(PFT_EIO, "%s: %s", path, strerror(errno));
    }
    if (!rc) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            if (chdir(p->dir) == 0)
                execlp("gnuplot", "gnuplot", p->gp, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        if (pid < 0)
            rc = pft_err(PFT_EIO, "cannot start gnuplot: %s", strerror(errno));
        else if (waitpid(pid, &st, 0) < 0)
            rc = pft_err(PFT_EIO, "waiting for gnuplot: %s", strerror(errno));
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
            rc = pft_err(PFT_EUNSUPPORTED, "gnuplot could not be started (is gnuplot-nox installed?)");
        else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = pft_err(PFT_EIO, "gnuplot failed on %s (exit status %d; its messages are above)", path,
                         WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    pft_free(path);
    pft_free(p->clauses);
    p->clauses = NULL;
    return rc;
}

/* Releases a plot that will not be finished (safe after a failed plot_open). */
static void plot_abort(plot_t *p)
{
    if (p->fd)
        fclose(p->fd);
    pft_free(p->clauses);
    p->fd = NULL;
    p->clauses = NULL;
}

static double pct(const pft_stats_t *s)
{
    return pft_stats_mean(s) * 100.0;
}

static double pct_std(const pft_stats_t *s)
{
    return s->n > 1 ? pft_stats_std(s) * 100.0 : 0.0;
}

/* Widens [*lo, *hi] to hold the mean ± std of s in percent (s may be empty). */
static void y_extend(double *lo, double *hi, const pft_stats_t *s)
{
    if (s->n == 0)
        return;
    *lo = fmin(*lo, pct(s) - pct_std(s));
    *hi = fmax(*hi, pct(s) + pct_std(s));
}

/* "set yrange" with a margin of 2 points around [lo, hi] (autoscaling a flat range makes gnuplot warn). */
static int y_range(char *buf, size_t cap, double lo, double hi)
{
    if (!(lo <= hi))
        return snprintf(buf, cap, "%s", "");
    return snprintf(buf, cap, "set yrange [%.4g:%.4g]\n", floor(lo - 2), ceil(hi + 2));
}

/* x position of node i of variant 0 on the per-node axes: its hop for a chain, its rank otherwise. */
static double node_x(const pft_report_exp_t *e, const pft_report_node_t *n, size_t i)
{
    return strcmp(e->kind, "chain") == 0 ? (double)n->hop : (double)i;
}

/* x of node id in variant 0's order (variants of one tag share the topology); NAN if it is not there. */
static double x_of(const pft_report_exp_t *e, const char *id)
{
    const pft_report_variant_t *v0 = &e->variants[0];
    for (size_t i = 0; i < v0->n_nodes; i++)
        if (strcmp(v0->nodes[i].id, id) == 0)
            return node_x(e, &v0->nodes[i], i);
    return NAN;
}

/* The per-node plot's block of each node's own head (variant 0's nodes) and its clause when any node has one;
 * returns 1 if one has. */
static int local_only_block(plot_t *p, const pft_report_exp_t *e)
{
    const pft_report_variant_t *v0 = &e->variants[0];
    int b = block_begin(p, "local only (each node's own head)");
    fprintf(p->fd, "# x node accuracy_mean accuracy_std n\n");
    int any_local = 0;
    for (size_t i = 0; i < v0->n_nodes; i++) {
        const pft_report_node_t *n = &v0->nodes[i];
        dat_num(p->fd, node_x(e, n, i));
        fputc(' ', p->fd);
        dat_label(p->fd, n->id);
        dat_num(p->fd, pct(&n->local_only));
        dat_num(p->fd, pct_std(&n->local_only));
        fprintf(p->fd, " %d\n", n->local_only.n);
        any_local |= n->local_only.n > 0;
    }
    if (any_local)
        clause(p, "'%s' index %d using 1:3:4 with yerrorbars pt 6 ps 1.3 lc rgb '#888888' title 'local only'",
               p->dat, b);
    return any_local;
}

static int plot_per_node(const pft_report_exp_t *e, const char *dir, const char *base, const char *format,
                         char *img, size_t cap)
{
    int chain = strcmp(e->kind, "chain") == 0;
    plot_t p;
    int rc = plot_open(&p, dir, base, "accuracy", format);
    if (rc)
        return rc;
    char t1[256], t2[256];
    size_t nv = e->n_variants < MAX_BLOCKS ? e->n_variants : MAX_BLOCKS;
    for (size_t vi = 0; vi < nv; vi++) {
        const pft_report_variant_t *v = &e->variants[vi];
        double off = nv > 1 ? ((double)vi - (double)(nv - 1) / 2.0) * 0.06 : 0.0;
        int b = block_begin(&p, v->name);
        fprintf(p.fd, "# x node accuracy_mean accuracy_std n\n");
        for (size_t i = 0; i < v->n_nodes; i++) {
            const pft_report_node_t *n = &v->nodes[i];
            dat_num(p.fd, x_of(e, n->id) + off);
            fputc(' ', p.fd);
            dat_label(p.fd, n->id);
            dat_num(p.fd, pct(&n->acc));
            dat_num(p.fd, pct_std(&n->acc));
            fprintf(p.fd, " %d\n", n->acc.n);
        }
        /* a chain's hops are a sequence (lines); other kinds' nodes are not (points) */
        clause(&p, "'%s' index %d using 1:3:4%s with %s pt 7 title %s", p.dat, b, vi == 0 ? ":xtic(2)" : "",
               chain ? "yerrorlines lw 2" : "yerrorbars ps 1.3", q(t1, sizeof t1, v->name));
    }
    const pft_report_variant_t *v0 = &e->variants[0];
    int any_local = local_only_block(&p, e);
    double ylo = INFINITY, yhi = -INFINITY;
    for (size_t vi = 0; vi < nv; vi++)
        for (size_t i = 0; i < e->variants[vi].n_nodes; i++)
            y_extend(&ylo, &yhi, &e->variants[vi].nodes[i].acc);
    for (size_t i = 0; any_local && i < v0->n_nodes; i++)
        y_extend(&ylo, &yhi, &v0->nodes[i].local_only);
    if (e->centralized_row >= 0)
        y_extend(&ylo, &yhi, &e->rows[e->centralized_row].acc);
    /* the centralized Gaussian head is what an exact-statistics variant's complete nodes should reach */
    int any_gaussian = 0;
    for (size_t vi = 0; vi < nv; vi++)
        any_gaussian |= e->variants[vi].gaussian != NULL;
    const pft_stats_t *cg =
        any_gaussian && e->centralized_gaussian_row >= 0 ? &e->rows[e->centralized_gaussian_row].acc : NULL;
    if (cg && cg->n > 0)
        y_extend(&ylo, &yhi, cg);
    char extra[1024];
    int used = y_range(extra, sizeof extra, ylo, yhi);
    used += snprintf(
        extra + used, sizeof extra - (size_t)used,
        "set xlabel %s\nset ylabel 'accuracy on the union of test splits (%%)'\nset offsets 0.3, 0.3, 0, 0\n",
        chain ? "'hop (node)'" : "'node (in processing order)'");
    if (e->centralized_row >= 0 && e->rows[e->centralized_row].acc.n > 0) {
        snprintf(extra + used, sizeof extra - (size_t)used, "centralized = %.6g\n",
                 pct(&e->rows[e->centralized_row].acc));
        clause(&p, "centralized with lines dt 2 lw 2 lc rgb '#333333' title 'centralized'");
    }
    if (cg && cg->n > 0) {
        used = (int)strlen(extra);
        snprintf(extra + used, sizeof extra - (size_t)used, "centralized_gaussian = %.6g\n", pct(cg));
        clause(
            &p,
            "centralized_gaussian with lines dt 3 lw 2 lc rgb '#777777' title 'centralized Gaussian (LDA)'");
    }
    snprintf(t2, sizeof t2, "%s: accuracy %s", e->tag, chain ? "per hop" : "per node");
    rc = plot_finish(&p, format, t2, extra);
    if (!rc)
        snprintf(img, cap, "%s", p.img);
    return rc;
}

static int is_dp(const pft_report_variant_t *v)
{
    const json_t *eps = json_object_get(v->settings, "dp_epsilon");
    return json_is_number(eps) && json_number_value(eps) > 0;
}

int pft_report_plot_drift_skips(const pft_report_exp_t *e, const pft_report_variant_t *v)
{
    for (size_t i = 0; is_dp(v) && i < e->n_variants; i++)
        if (!is_dp(&e->variants[i]))
            return 1;
    return 0;
}

static int plot_drift(const pft_report_exp_t *e, const char *dir, const char *base, const char *format,
                      char *img, size_t cap)
{
    plot_t p;
    int rc = plot_open(&p, dir, base, "drift", format);
    if (rc)
        return rc;
    char t1[256], t2[256];
    int xtics = 0;
    size_t nv = e->n_variants < MAX_BLOCKS ? e->n_variants : MAX_BLOCKS;
    for (size_t vi = 0; vi < nv; vi++) {
        const pft_report_variant_t *v = &e->variants[vi];
        if (pft_report_plot_drift_skips(e, v))
            continue;
        int b = block_begin(&p, v->name);
        fprintf(p.fd, "# hop node received_mean received_std sent_mean sent_std\n");
        for (size_t i = 0; i < v->n_nodes; i++) {
            const pft_report_node_t *n = &v->nodes[i];
            dat_num(p.fd, x_of(e, n->id));
            fputc(' ', p.fd);
            dat_label(p.fd, n->id);
            dat_num(p.fd, pft_stats_mean(&n->drift_recv));
            dat_num(p.fd, n->drift_recv.n > 1 ? pft_stats_std(&n->drift_recv) : 0.0);
            dat_num(p.fd, pft_stats_mean(&n->drift_sent));
            dat_num(p.fd, n->drift_sent.n > 1 ? pft_stats_std(&n->drift_sent) : 0.0);
            fprintf(p.fd, "\n");
        }
        /* a series without any value (e.g. label shift: no class of the own rows in the received GMM) is left
         * out: gnuplot would warn about an empty data set */
        int any_recv = 0, any_sent = 0;
        for (size_t i = 0; i < v->n_nodes; i++) {
            any_recv |= v->nodes[i].drift_recv.n > 0;
            any_sent |= v->nodes[i].drift_sent.n > 0;
        }
        /* the node names label the x axis from the first series drawn (variants without drift, such as exact
         * statistics, draw none) */
        snprintf(t2, sizeof t2, "%s%sunder the received GMM", nv > 1 ? v->name : "", nv > 1 ? ": " : "");
        if (any_recv)
            clause(&p, "'%s' index %d using 1:3:4%s with yerrorlines lw 2 pt 7 title %s", p.dat, b,
                   xtics++ == 0 ? ":xtic(2)" : "", q(t1, sizeof t1, t2));
        snprintf(t2, sizeof t2, "%s%sunder the GMM it sent", nv > 1 ? v->name : "", nv > 1 ? ": " : "");
        if (any_sent)
            clause(&p, "'%s' index %d using 1:5:6%s with yerrorlines lw 2 pt 5 dt 3 title %s", p.dat, b,
                   xtics++ == 0 ? ":xtic(2)" : "", q(t1, sizeof t1, t2));
    }
    snprintf(t2, sizeof t2, "%s: how well the GMMs describe each node's own data", e->tag);
    rc = plot_finish(&p, format, t2,
                     "set xlabel 'hop (node)'\nset ylabel 'own rows: average log-likelihood'\n"
                     "set offsets 0.3, 0.3, 0, 0\n");
    if (!rc)
        snprintf(img, cap, "%s", p.img);
    return rc;
}

/* ---- labelled scatter plots on a log-x axis (accuracy vs bytes) ------------------------------------------
 */

/* One point: its block (series) in the data file, position, error bar and label. */
typedef struct {
    int series;
    double x, y, dy; /* bytes, accuracy %, std % */
    char label[192];
} spot_t;

/* Axes of a scatter: log x in [xa, xb] with room for labels, linear y in [ya, yb]. */
typedef struct {
    double xa, xb, ya, yb;
} axes_t;

/* Character size as fractions of the plot area (both terminals: about 7 × 14 px of a ~780 × 380 px area). */
#define CHAR_W 0.0095
#define CHAR_H 0.04

static axes_t scatter_axes(const spot_t *s, size_t n, double y_also)
{
    axes_t a = {INFINITY, 0, INFINITY, -INFINITY};
    for (size_t i = 0; i < n; i++) {
        a.xa = fmin(a.xa, s[i].x);
        a.xb = fmax(a.xb, s[i].x);
        a.ya = fmin(a.ya, s[i].y - s[i].dy);
        a.yb = fmax(a.yb, s[i].y + s[i].dy);
    }
    if (!isnan(y_also)) {
        a.ya = fmin(a.ya, y_also);
        a.yb = fmax(a.yb, y_also);
    }
    a.xa /= 2.5;
    a.xb *= 6.0;
    a.ya = floor(a.ya - 2);
    a.yb = ceil(a.yb + 2);
    return a;
}

/* gnuplot settings of the axes: ranges, log x with tics at 1, 2, 5 × 10^k (10^k only over more than four
 * decades) so that a narrow range still gets labelled tics, byte units. */
static void axes_settings(const axes_t *a, char *buf, size_t cap)
{
    int d0 = (int)floor(log10(a->xa)), d1 = (int)ceil(log10(a->xb));
    int used = snprintf(buf, cap,
                        "set logscale x 10\nset xrange [%.6g:%.6g]\nset yrange [%.6g:%.6g]\n"
                        "set format x '%%.0s %%cB'\nset mxtics 10\nset xtics (",
                        a->xa, a->xb, a->ya, a->yb);
    static const double mant[] = {1, 2, 5};
    int first = 1, wide = d1 - d0 > 4;
    for (int d = d0; d <= d1; d++)
        for (int m = 0; m < (wide ? 1 : 3); m++) {
            double v = mant[m] * pow(10.0, d);
            if (v < a->xa || v > a->xb || used < 0 || (size_t)used >= cap)
                continue;
            used += snprintf(buf + used, cap - (size_t)used, "%s%.6g", first ? "" : ", ", v);
            first = 0;
        }
    if (used >= 0 && (size_t)used < cap)
        snprintf(buf + used, cap - (size_t)used, ")\n");
}

/* Characters (not bytes) of a UTF-8 string. */
static int utf8_len(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* Writes the spots of each series as one block (bytes acc std "label"), block i holding series i (n_series at
 * most MAX_BLOCKS), then the labels placed so that they avoid each other: one block of those written right of
 * their point, one of those written left of it (x y "label"; a block only when not empty: gnuplot 5.4 crashes
 * on a one-row block whose only row is filtered out). label_block[0] and [1] get the index of those two
 * blocks, or -1. Returns 0 or PFT_ENOMEM. */
static int write_spots(plot_t *p, const axes_t *a, const spot_t *s, size_t n, const char *const *series,
                       int n_series, int label_block[2])
{
    pft_report_label_t *l = pft_calloc(n ? n : 1, sizeof *l);
    if (!l)
        return pft_err(PFT_ENOMEM, "out of memory");
    double lxa = log10(a->xa), lxw = log10(a->xb) - lxa, yh = a->yb - a->ya;
    for (size_t i = 0; i < n; i++) {
        l[i].x = (log10(s[i].x) - lxa) / lxw;
        l[i].y = (s[i].y - a->ya) / yh;
        l[i].len = utf8_len(s[i].label);
    }
    pft_report_label_place(l, n, CHAR_W, CHAR_H);
    for (int k = 0; k < n_series; k++) {
        block_begin(p, series[k]);
        fprintf(p->fd, "# bytes accuracy_mean accuracy_std label\n");
        for (size_t i = 0; i < n; i++) {
            if (s[i].series != k)
                continue;
            fprintf(p->fd, "%.10g %.6g %.6g ", s[i].x, s[i].y, s[i].dy);
            dat_label(p->fd, s[i].label);
            fputc('\n', p->fd);
        }
    }
    for (int right = 0; right <= 1; right++) {
        int b = -1;
        for (size_t i = 0; i < n; i++) {
            if (l[i].right_aligned != right)
                continue;
            if (b < 0) {
                b = block_begin(p, right ? "labels left of their point (right-aligned)"
                                         : "labels right of their point");
                fprintf(p->fd, "# x y label\n");
            }
            fprintf(p->fd, "%.6g %.6g ", pow(10.0, lxa + l[i].lx * lxw), a->ya + l[i].ly * yh);
            dat_label(p->fd, s[i].label);
            fputc('\n', p->fd);
        }
        label_block[right] = b;
    }
    pft_free(l);
    return 0;
}

/* The clauses drawing the label blocks of write_spots (font: extra clause text such as " font ',10'"). */
static void label_clauses(plot_t *p, const int label_block[2], const char *font)
{
    for (int right = 0; right <= 1; right++)
        if (label_block[right] >= 0)
            clause(p, "'%s' index %d using 1:2:3 with labels %s%s notitle", p->dat, label_block[right],
                   right ? "right" : "left", font);
}

static int plot_acc_bytes(const pft_report_exp_t *e, const char *dir, const char *base, const char *format,
                          char *img, size_t cap)
{
    spot_t *s = pft_calloc(e->n_rows ? e->n_rows : 1, sizeof *s);
    if (!s)
        return pft_err(PFT_ENOMEM, "out of memory");
    size_t n = 0;
    int has[2] = {0, 0};
    for (size_t r = 0; r < e->n_rows; r++) {
        const pft_report_row_t *row = &e->rows[r];
        double b = pft_stats_mean(&row->bytes);
        if (row->acc.n == 0 || !(b > 0))
            continue;
        s[n] = (spot_t){.series = row->fedpft, .x = b, .y = pct(&row->acc), .dy = pct_std(&row->acc)};
        snprintf(s[n++].label, sizeof s->label, "%s", row->label);
        has[row->fedpft] = 1;
    }
    if (n < 2) {
        pft_free(s);
        return 0; /* a log axis needs positive byte counts; one point compares nothing */
    }
    const char *series[2] = {NULL, NULL};
    int n_series = 0;
    if (has[0])
        series[n_series++] = "baselines";
    if (has[1])
        series[n_series++] = "FedPFT variants";
    for (size_t i = 0; i < n && n_series == 1; i++)
        s[i].series = 0;
    axes_t a = scatter_axes(s, n, NAN);
    plot_t p;
    int lb[2];
    int rc = plot_open(&p, dir, base, "acc-bytes", format);
    if (!rc)
        rc = write_spots(&p, &a, s, n, series, n_series, lb);
    int any_gaussian = 0; /* exact statistics among the variants: the legend says so */
    for (size_t vi = 0; vi < e->n_variants; vi++)
        any_gaussian |= e->variants[vi].gaussian != NULL;
    for (int b = 0; !rc && b < n_series; b++) {
        int fedpft = strcmp(series[b], "FedPFT variants") == 0;
        clause(&p, "'%s' index %d using 1:2:3 with yerrorbars pt %d ps 1.4 lc rgb '%s' title '%s'", p.dat, b,
               fedpft ? 7 : 5, fedpft ? "#1f77b4" : "#d62728",
               fedpft ? (any_gaussian ? "FedPFT and exact statistics" : "FedPFT") : "baselines");
    }
    if (!rc)
        label_clauses(&p, lb, "");
    pft_free(s);
    if (rc) {
        plot_abort(&p);
        return rc;
    }
    char extra[1024], axes[512], title[256];
    axes_settings(&a, axes, sizeof axes);
    snprintf(extra, sizeof extra,
             "%sset xlabel 'bytes communicated (log scale)'\nset ylabel 'accuracy (%%)'\n", axes);
    snprintf(title, sizeof title, "%s: accuracy vs communication", e->tag);
    rc = plot_finish(&p, format, title, extra);
    if (!rc)
        snprintf(img, cap, "%s", p.img);
    return rc;
}

/* A synth series' name: "diag" for FedPFT's logreg head, "diag + gaussian head (LDA)" otherwise. */
static void synth_series_name(const pft_report_synth_t *g, char *name, size_t cap)
{
    if (strcmp(g->head, "logreg") == 0) {
        snprintf(name, cap, "%s", g->cov);
        return;
    }
    char kind[16] = "";
    for (size_t c = 0; g->gaussian && g->gaussian[c] && c + 1 < sizeof kind; c++)
        kind[c] = (char)(g->gaussian[c] >= 'a' && g->gaussian[c] <= 'z' ? g->gaussian[c] - 'a' + 'A'
                                                                        : g->gaussian[c]);
    snprintf(name, cap, "%s + %s head%s%s%s", g->cov, g->head, kind[0] ? " (" : "", kind, kind[0] ? ")" : "");
}

/* The synth plot of the n spots s in n_covs series named covs (and the raw-feature head's line); its image's
 * name into img. */
static int draw_synth(const pft_report_exp_t *e, const spot_t *s, size_t n, const char **covs, int n_covs,
                      const char *dir, const char *base, const char *format, char *img, size_t cap)
{
    int rc;
    axes_t a = scatter_axes(s, n, e->acc_raw.n > 0 ? pct(&e->acc_raw) : NAN);
    plot_t p;
    char t1[256];
    int lb[2];
    rc = plot_open(&p, dir, base, "synth", format);
    if (!rc)
        rc = write_spots(&p, &a, s, n, covs, n_covs, lb);
    for (int b = 0; !rc && b < n_covs; b++)
        clause(&p, "'%s' index %d using 1:2:3 with yerrorlines lw 2 pt 7 title %s", p.dat, b,
               q(t1, sizeof t1, covs[b]));
    if (!rc)
        label_clauses(&p, lb, " font ',10'");
    if (rc)
        plot_abort(&p);
    if (!rc) {
        char extra[1024], axes[512], title[256];
        axes_settings(&a, axes, sizeof axes);
        int used = snprintf(
            extra, sizeof extra,
            "%sset xlabel 'bundle bytes (all classes, log scale)'\nset ylabel 'accuracy (%%)'\n", axes);
        if (e->acc_raw.n > 0) {
            snprintf(extra + used, sizeof extra - (size_t)used, "raw = %.6g\n", pct(&e->acc_raw));
            clause(&p, "raw with lines dt 2 lw 2 lc rgb '#333333' title 'head on raw features'");
        }
        snprintf(title, sizeof title, "%s: accuracy of a head on %s vs bundle size", e->tag,
                 e->synth_heads ? "what was sent" : "GMM samples");
        rc = plot_finish(&p, format, title, extra);
        if (!rc)
            snprintf(img, cap, "%s", p.img);
    }
    return rc;
}

static int plot_synth(const pft_report_exp_t *e, const char *dir, const char *base, const char *format,
                      char *img, size_t cap)
{
    spot_t *s = pft_calloc(e->n_synth ? e->n_synth : 1, sizeof *s);
    const char **covs = pft_calloc(e->n_synth ? e->n_synth : 1, sizeof *covs);
    const pft_report_synth_t **first = pft_calloc(e->n_synth ? e->n_synth : 1, sizeof *first);
    char(*names)[96] = pft_calloc(e->n_synth ? e->n_synth : 1, sizeof *names);
    if (!s || !covs || !first || !names) {
        pft_free(s);
        pft_free(covs);
        pft_free(first);
        pft_free(names);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    size_t n = 0;
    int n_covs = 0;
    /* groups are sorted by cov, then head: one series per run of equal (cov, head), named "diag" for FedPFT's
     * logreg head, "diag + gaussian head (LDA)" otherwise */
    for (size_t i = 0; i < e->n_synth; i++) {
        const pft_report_synth_t *g = &e->synth[i];
        double bytes = pft_stats_mean(&g->bytes_bundle);
        if (!(bytes > 0) || g->acc_synth.n == 0)
            continue;
        if (n_covs == 0 || strcmp(first[n_covs - 1]->cov, g->cov) != 0 ||
            strcmp(first[n_covs - 1]->head, g->head) != 0) {
            if (n_covs == MAX_BLOCKS)
                break;
            first[n_covs] = g;
            synth_series_name(g, names[n_covs], sizeof *names);
            covs[n_covs] = names[n_covs];
            n_covs++;
        }
        s[n] =
            (spot_t){.series = n_covs - 1, .x = bytes, .y = pct(&g->acc_synth), .dy = pct_std(&g->acc_synth)};
        if (g->rank >= 0)
            snprintf(s[n++].label, sizeof s->label, "K=%d r=%d", g->k, g->rank);
        else
            snprintf(s[n++].label, sizeof s->label, "K=%d", g->k);
    }
    int rc = n > 0 ? draw_synth(e, s, n, covs, n_covs, dir, base, format, img, cap) : 0;
    pft_free(s);
    pft_free(covs);
    pft_free(first);
    pft_free(names);
    return rc;
}

int pft_report_plot_exp(const pft_report_exp_t *e, const char *dir, const char *base, const char *format,
                        pft_report_plots_t *out)
{
    memset(out, 0, sizeof *out);
    if (strcmp(format, "svg") != 0 && strcmp(format, "png") != 0)
        return pft_err(PFT_EINVAL, "plot format '%s': use svg or png", format);
    int rc = 0;
    if (e->n_runs > 0 && e->n_variants > 0) {
        int chain = strcmp(e->kind, "chain") == 0;
        if (e->n_rows >= 2)
            rc = plot_acc_bytes(e, dir, base, format, out->acc_bytes, sizeof out->acc_bytes);
        if (!rc && (chain || e->n_nodes > 2))
            rc = plot_per_node(e, dir, base, format, out->per_node, sizeof out->per_node);
        int any_drift = 0;
        for (size_t v = 0; v < e->n_variants; v++)
            for (size_t i = 0; i < e->variants[v].n_nodes && !pft_report_plot_drift_skips(e, &e->variants[v]);
                 i++)
                any_drift |= e->variants[v].nodes[i].drift_recv.n + e->variants[v].nodes[i].drift_sent.n > 0;
        if (!rc && chain && any_drift)
            rc = plot_drift(e, dir, base, format, out->drift, sizeof out->drift);
    }
    if (!rc && e->n_synth > 0)
        rc = plot_synth(e, dir, base, format, out->synth, sizeof out->synth);
    return rc;
}
