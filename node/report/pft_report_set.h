/* pft_report_set: the inputs of `pftnet report`: launch results (results.json) and synth lines (*.jsonl),
 * loaded from files and directories in a deterministic order, each labelled with its experiment tag. */
#ifndef PFT_REPORT_SET_H
#define PFT_REPORT_SET_H

#include <jansson.h>
#include <stddef.h>

typedef struct pft_report_set pft_report_set_t;

/* One launch (`pftnet launch --out DIR` writes DIR/results.json). Strings and root live as long as the set.
 */
typedef struct {
    const char *path;    /* the results.json file it was read from */
    const char *tag;     /* "tag", else the topology file's basename without extension */
    const char *variant; /* "variant", else "FedPFT <cov> K=<k>" from the first node */
    long long seed;      /* "seed" (integer or decimal string), else 0 */
    const json_t *root;  /* the whole document: kind, n_nodes, nodes, baselines, settings, ... */
} pft_report_run_t;

/* One line of `pftnet synth --json`. */
typedef struct {
    const char *path;  /* the file it was read from */
    int line;          /* 1-based line number in that file */
    const char *tag;   /* "tag", else "gmm-family" */
    long long seed;    /* "seed", else 0 */
    const json_t *obj; /* the line: acc_raw, acc_synth, gap, bytes_*, cov, k, prep, dtype, optional rank */
} pft_report_line_t;

/* An empty set; NULL when out of memory. */
pft_report_set_t *pft_report_set_new(void);
/* Frees the set and everything it handed out; sets *self_p to NULL; safe on NULL. */
void pft_report_set_destroy(pft_report_set_t **self_p);

/* Adds the inputs at path: a results.json file, a .jsonl/.json file of synth lines (a .json file holding one
 * results object is read as a run), or a directory searched recursively (entries sorted bytewise, names
 * starting with '.' skipped) for files named results.json and files ending in .jsonl. Errors name the file:
 * PFT_EIO when it cannot be read, PFT_EFORMAT when it is not valid JSON or lacks what a run/line must have,
 * PFT_EINVAL when a directory holds no input, PFT_ENOMEM. On error the set keeps what earlier calls added and
 * maybe part of this path's inputs. */
int pft_report_set_add_path(pft_report_set_t *self, const char *path);

/* The runs, in the order they were added; returns their count. */
size_t pft_report_set_runs(const pft_report_set_t *self, const pft_report_run_t **runs);
/* The synth lines, in the order they were added; returns their count. */
size_t pft_report_set_lines(const pft_report_set_t *self, const pft_report_line_t **lines);
/* The distinct tags of runs and lines, in order of first appearance; returns their count. */
size_t pft_report_set_tags(const pft_report_set_t *self, const char *const **tags);

#endif
