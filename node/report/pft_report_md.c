/* pft_report_md: the Markdown of `pftnet report`: title and hand-written notes, per experiment the comparison
 * table, image links, per-node tables per variant, and the synth family table. */
#include "pft_report_md.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define MAX_NOTES_BYTES ((size_t)16 << 20)

/* Copies notes_dir/name into f if it exists, ending it with a line break and, when blank_after, an empty
 * line; a missing file (or no notes_dir) is not an error. */
static int notes(FILE *f, const char *notes_dir, const char *name, int blank_after)
{
    if (!notes_dir)
        return 0;
    char *path = pft_fsio_join(notes_dir, name);
    if (!path)
        return pft_err(PFT_ENOMEM, "out of memory");
    int rc = 0;
    if (pft_fsio_exists(path)) {
        uint8_t *buf = NULL;
        size_t len = 0;
        rc = pft_fsio_read(path, MAX_NOTES_BYTES, &buf, &len);
        if (rc == 0) {
            fwrite(buf, 1, len, f);
            if (len && buf[len - 1] != '\n')
                fputc('\n', f);
            if (blank_after)
                fputc('\n', f);
        } else {
            rc = pft_err_wrap(rc, "notes");
        }
        pft_free(buf);
    }
    pft_free(path);
    return rc;
}

/* Text for a table cell: '|' escaped, line breaks as spaces. */
static void cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else
            fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
}

/* Bytes in SI units: "0 B", "512 B", "359.2 kB", "1.44 MB"; "—" when unknown. */
static void fmt_bytes(const pft_stats_t *s, char *buf, size_t cap)
{
    double v = pft_stats_mean(s);
    if (isnan(v))
        snprintf(buf, cap, "—");
    else if (v < 1e3)
        snprintf(buf, cap, "%.0f B", v);
    else if (v < 1e6)
        snprintf(buf, cap, "%.1f kB", v / 1e3);
    else if (v < 1e9)
        snprintf(buf, cap, "%.2f MB", v / 1e6);
    else
        snprintf(buf, cap, "%.2f GB", v / 1e9);
}

/* An accuracy in percent with its spread; " (n)" when with_n. */
static void fmt_acc(const pft_stats_t *s, int with_n, char *buf, size_t cap)
{
    pft_stats_format(s, 100.0, 2, with_n, buf, (unsigned)cap);
}

/* A count that is normally the same in every run: "400", or "366.7 ± 57.7" when it varies. */
static void fmt_count(const pft_stats_t *s, char *buf, size_t cap)
{
    double sd = pft_stats_std(s);
    if (s->n > 1 && sd > 0)
        pft_stats_format(s, 1.0, 1, 0, buf, (unsigned)cap);
    else if (s->n > 0)
        snprintf(buf, cap, "%.0f", pft_stats_mean(s));
    else
        snprintf(buf, cap, "—");
}

/* A head kind in capitals ("lda" → "LDA"). */
static void upper(FILE *f, const char *s)
{
    for (; *s; s++)
        fputc(*s >= 'a' && *s <= 'z' ? *s - 'a' + 'A' : *s, f);
}

/* Text for a heading: line breaks as spaces. */
static void heading(FILE *f, const char *level, const char *s)
{
    fprintf(f, "%s ", level);
    for (; *s; s++)
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    fprintf(f, "\n\n");
}

int pft_report_md_begin(FILE *f, const char *title, const char *notes_dir)
{
    heading(f, "#", title);
    return notes(f, notes_dir, "intro.md", 1);
}

int pft_report_md_end(FILE *f, const char *notes_dir)
{
    return notes(f, notes_dir, "outro.md", 0);
}

static void image(FILE *f, const char *prefix, const char *name, const char *alt)
{
    if (!name || !name[0])
        return;
    fputs("![", f);
    for (const char *c = alt; *c; c++) {
        if (*c == '[' || *c == ']' || *c == '\\')
            fputc('\\', f);
        fputc(*c == '\n' || *c == '\r' ? ' ' : *c, f);
    }
    prefix = prefix ? prefix : "";
    int bracket = strpbrk(prefix, " ()") != NULL; /* CommonMark: <...> holds spaces and parentheses */
    fprintf(f, "](%s%s%s%s)\n\n", bracket ? "<" : "", prefix, name, bracket ? ">" : "");
}

static void comparison(FILE *f, const pft_report_exp_t *e)
{
    char acc[96], bytes[64];
    fprintf(f, "| method | accuracy (%%) | bytes communicated |\n|:--|--:|--:|\n");
    for (size_t r = 0; r < e->n_rows; r++) {
        const pft_report_row_t *row = &e->rows[r];
        fmt_acc(&row->acc, 1, acc, sizeof acc);
        fmt_bytes(&row->bytes, bytes, sizeof bytes);
        fprintf(f, "| ");
        cell(f, row->label);
        fprintf(f, " | %s | %s |\n", acc, bytes);
    }
    fprintf(
        f,
        "\nAccuracy on the union of all nodes' test splits, mean ± sample std over seeds (number of seeds in "
        "parentheses). FedPFT rows: ");
    if (e->final_all)
        fprintf(f, "mean accuracy over every node (%s: every node ends with everyone's knowledge)",
                strcmp(e->kind, "ring") == 0 || strcmp(e->kind, "mesh") == 0 ? e->kind : "no node is a sink");
    else
        fprintf(f, "mean accuracy of the sink node(s) (%s)", e->kind);
    fprintf(f, "; bytes: sum of bytes_sent over all nodes.\n");
    if (e->centralized_gaussian_row >= 0 && e->rows[e->centralized_gaussian_row].acc.n > 0) {
        fprintf(
            f, "Centralized Gaussian (LDA): the Gaussian (LDA) head on the same raw rows as Centralized, its "
               "shrinkage chosen by 5-fold cross-validation over them");
        if (e->cg_alpha[0])
            fprintf(f, " (α per seed: %s)", e->cg_alpha);
        fprintf(f, "; an exact-statistics run's nodes with everyone's knowledge hold the same statistics.\n");
    }
    if (e->kd_row >= 0 && e->kd_best.n > 0) {
        fmt_acc(&e->kd_best, 1, acc, sizeof acc);
        fprintf(f, "KD: T chosen on a validation split of the destination's training rows");
        if (e->kd_node) {
            fprintf(f, " (node ");
            cell(f, e->kd_node);
            fprintf(f, ")");
        }
        fprintf(f, "; choosing T on the test set instead would give %s (best T per seed: %s).\n", acc,
                e->kd_best_t);
    }
    fprintf(f, "\n");
}

/* Which variants the drift plot leaves out (DP beside non-DP), and why. */
static void drift_note(FILE *f, const pft_report_exp_t *e, const char *drift_img)
{
    int first = 1;
    for (size_t vi = 0; drift_img[0] && vi < e->n_variants; vi++) {
        if (!pft_report_plot_drift_skips(e, &e->variants[vi]))
            continue;
        fprintf(f, "%s%s", first ? "Not in the drift plot: " : ", ", e->variants[vi].name);
        first = 0;
    }
    if (!first)
        fprintf(f,
                " (DP: the noise puts the own log-likelihoods orders of magnitude below the others', which "
                "would flatten every curve; see the per-node tables).\n\n");
}

static void settings_line(FILE *f, const pft_report_exp_t *e, const pft_report_variant_t *v)
{
    char wall[64];
    pft_stats_format(&v->wall, 1.0, 1, 0, wall, sizeof wall);
    fprintf(f, "%zu run%s (seed%s %s), wall time %s s", v->n_runs, v->n_runs == 1 ? "" : "s",
            v->n_runs == 1 ? "" : "s", v->seeds, wall);
    if (v->n_failed_runs)
        fprintf(f,
                "; %zu of them did not finish (a node failed or was stopped; its figures count where it "
                "recorded them)",
                v->n_failed_runs);
    if (json_is_object(v->settings) && json_object_size(v->settings) > 0) {
        fprintf(f, ". Settings: ");
        const char *key;
        const json_t *val;
        int first = 1;
        json_object_foreach((json_t *)v->settings, key, val)
        {
            fprintf(f, "%s%s=", first ? "" : ", ", key);
            first = 0;
            /* a launcher that cannot name the cov (tied) records "?": the nodes' own instead */
            if (strcmp(key, "cov") == 0 && v->cov && json_is_string(val) &&
                strcmp(json_string_value(val), "?") == 0)
                fprintf(f, "%s", v->cov);
            else if (json_is_string(val))
                fprintf(f, "%s", json_string_value(val));
            else if (json_is_integer(val))
                fprintf(f, "%lld", (long long)json_integer_value(val));
            else if (json_is_real(val))
                fprintf(f, "%g", json_real_value(val));
            else if (json_is_null(val))
                fprintf(f, "—");
            else {
                char *t = json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY);
                fprintf(f, "%s", t ? t : "?");
                free(t);
            }
        }
    }
    if (v->gaussian) {
        char a[64];
        pft_stats_format(&v->final_alpha, 1.0, 2, 0, a, sizeof a);
        fprintf(f, ". Head: Gaussian (");
        upper(f, v->gaussian);
        fprintf(f, ") from the node's class statistics, shrinkage α of the final node%s %s (rule: ",
                e->final_all ? "s" : "(s)", a);
        cell(f, v->alpha_rule ? v->alpha_rule : "?");
        fprintf(f, ")");
    }
    fprintf(f, ".\n\n");
}

static void node_table(FILE *f, const pft_report_exp_t *e, const pft_report_variant_t *v)
{
    int ga = v->gaussian != NULL; /* a shrinkage column for Gaussian heads */
    fprintf(
        f,
        "| node | hop | role | accuracy (%%) | local-only (%%) | knowledge | real rows | synthetic rows | "
        "drift: own log-lik under received / sent GMM | %sbytes sent |\n"
        "|:--|--:|:--|--:|--:|--:|--:|--:|--:|%s--:|\n",
        ga ? "shrinkage α | " : "", ga ? "--:|" : "");
    for (size_t i = 0; i < v->n_nodes; i++) {
        const pft_report_node_t *n = &v->nodes[i];
        char acc[96], local[96], know[64], real[64], syn[64], dr[64], ds[64], bytes[64];
        fmt_acc(&n->acc, n->acc.n < (int)v->n_runs, acc, sizeof acc);
        fmt_acc(&n->local_only, n->local_only.n < (int)v->n_runs && n->local_only.n > 0, local, sizeof local);
        fmt_count(&n->knowledge, know, sizeof know);
        fmt_count(&n->real, real, sizeof real);
        fmt_count(&n->synthetic, syn, sizeof syn);
        pft_stats_format(&n->drift_recv, 1.0, 1, 0, dr, sizeof dr);
        pft_stats_format(&n->drift_sent, 1.0, 1, 0, ds, sizeof ds);
        fmt_bytes(&n->bytes_sent, bytes, sizeof bytes);
        fprintf(f, "| ");
        cell(f, n->id);
        fprintf(f, " | %d | ", n->hop);
        cell(f, n->role);
        if (n->n_failed) {
            fprintf(f, " (");
            cell(f, n->status);
            if (v->n_runs > 1)
                fprintf(f, " in %d of %zu runs", n->n_failed, v->n_runs);
            fprintf(f, ")");
        }
        int know_varies = n->knowledge.n > 1 && pft_stats_std(&n->knowledge) > 0;
        fprintf(f, " | %s | %s | %s%s%s", acc, local, know_varies ? "(" : "", know, know_varies ? ")" : "");
        if (n->knowledge.n > 0)
            fprintf(f, "/%d", e->n_nodes);
        fprintf(f, " | %s | %s | %s / %s | ", real, syn, dr, ds);
        if (ga) {
            char al[64];
            pft_stats_format(&n->alpha, 1.0, 2, 0, al, sizeof al);
            fprintf(f, "%s | ", al);
        }
        fprintf(f, "%s |\n", bytes);
    }
    fprintf(f,
            "\nMeans ± sample std over the variant's runs; \"(n)\" marks a figure recorded in fewer runs. "
            "Knowledge: nodes whose data reached this node (provenance) / all nodes. Drift: average "
            "log-likelihood of the node's own rows under the GMM it received and under the GMM it sent "
            "(higher: the GMM describes its data better).%s\n\n",
            ga ? " Shrinkage α: of the node's Gaussian head, Σ_α = (1−α)Σ + α(tr Σ/d)I." : "");
}

static void synth_table(FILE *f, const pft_report_exp_t *e)
{
    char raw[96];
    fmt_acc(&e->acc_raw, 1, raw, sizeof raw);
    fprintf(f,
            "%zu `pftnet synth --json` line%s, grouped by covariance, %sK and rank over seeds. Head on raw "
            "features: %s.%s\n\n",
            e->n_lines, e->n_lines == 1 ? "" : "s", e->synth_heads ? "head, " : "", raw,
            e->synth_heads ? " Head: logreg, the softmax head on GMM samples (FedPFT); gaussian, the Bayes "
                             "classifier of the class statistics (LDA or QDA, shrinkage α as chosen)."
                           : "");
    fprintf(f,
            "| cov |%s%s K | bytes per class (fp16) | bundle bytes | acc_synth (%%) | gap to raw (pp) |\n"
            "|:--|%s%s--:|--:|--:|--:|--:|\n",
            e->synth_heads ? " head |" : "", e->synth_mixed ? " prep / dtype |" : "",
            e->synth_heads ? ":--|" : "", e->synth_mixed ? ":--|" : "");
    for (size_t i = 0; i < e->n_synth; i++) {
        const pft_report_synth_t *s = &e->synth[i];
        char pc[64], bb[64], acc[96], gap[96];
        if (pft_stats_mean(&s->bytes_per_class) > 0)
            fmt_bytes(&s->bytes_per_class, pc, sizeof pc);
        else /* exact statistics: no per-class size recorded */
            snprintf(pc, sizeof pc, "—");
        fmt_bytes(&s->bytes_bundle, bb, sizeof bb);
        fmt_acc(&s->acc_synth, 1, acc, sizeof acc);
        fmt_acc(&s->gap, 1, gap, sizeof gap);
        fprintf(f, "| ");
        cell(f, s->cov);
        if (s->rank >= 0)
            fprintf(f, " (r=%d)", s->rank);
        if (e->synth_heads) {
            fprintf(f, " | ");
            cell(f, s->head);
            if (s->gaussian) {
                fprintf(f, " (");
                upper(f, s->gaussian);
                if (s->shrinkage.n > 0)
                    fprintf(f, ", α %.3g", pft_stats_mean(&s->shrinkage));
                fprintf(f, ")");
            }
        }
        if (e->synth_mixed) {
            fprintf(f, " | ");
            cell(f, s->prep);
            fprintf(f, " / ");
            cell(f, s->dtype);
        }
        fprintf(f, " | %d | %s | %s | %s | %s |\n", s->k, pc, bb, acc, gap);
    }
    fprintf(f, "\n");
}

/* 1 if tag can be used as a file name as it is. */
static int safe_name(const char *tag)
{
    return tag[0] && tag[0] != '.' && !strchr(tag, '/');
}

int pft_report_md_exp(FILE *f, const pft_report_exp_t *e, const char *stem, const pft_report_plots_t *plots,
                      const char *img_prefix, const char *notes_dir)
{
    heading(f, "##", e->tag);
    char name[512];
    snprintf(name, sizeof name, "%s.md", safe_name(e->tag) ? e->tag : stem);
    int rc = notes(f, notes_dir, name, 1);
    if (rc)
        return rc;
    char alt[512];
    if (e->n_runs > 0) {
        fprintf(f, "%s, %d nodes", e->kind, e->n_nodes);
        if (e->topology) { /* relative to the current folder when inside it (launches from scripts use
                              absolute) */
            char cwd[4096];
            const char *topo = e->topology;
            size_t lc = getcwd(cwd, sizeof cwd) ? strlen(cwd) : 0;
            if (lc && strncmp(topo, cwd, lc) == 0 && topo[lc] == '/')
                topo += lc + 1;
            fprintf(f, " (`");
            cell(f, topo);
            fprintf(f, "`)");
        }
        fprintf(f, "; %zu run%s, seed%s %s.\n\n", e->n_runs, e->n_runs == 1 ? "" : "s",
                e->n_seeds == 1 ? "" : "s", e->seeds);
        comparison(f, e);
        if (plots) {
            snprintf(alt, sizeof alt, "%s: accuracy vs bytes communicated", e->tag);
            image(f, img_prefix, plots->acc_bytes, alt);
            snprintf(alt, sizeof alt, "%s: accuracy per %s", e->tag,
                     strcmp(e->kind, "chain") == 0 ? "hop" : "node");
            image(f, img_prefix, plots->per_node, alt);
            snprintf(alt, sizeof alt, "%s: own log-likelihood under received and sent GMMs", e->tag);
            image(f, img_prefix, plots->drift, alt);
            drift_note(f, e, plots->drift);
        }
        for (size_t vi = 0; vi < e->n_variants; vi++) {
            const pft_report_variant_t *v = &e->variants[vi];
            heading(f, "###", v->name);
            settings_line(f, e, v);
            if (e->n_nodes > 2)
                node_table(f, e, v);
        }
    }
    if (e->n_synth > 0) {
        if (e->n_runs > 0)
            fprintf(f, "### GMM family (synth)\n\n");
        synth_table(f, e);
        if (plots) {
            snprintf(alt, sizeof alt, "%s: accuracy vs bundle bytes", e->tag);
            image(f, img_prefix, plots->synth, alt);
        }
    }
    return 0;
}
