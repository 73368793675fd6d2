/* pft_report_plot: the plots of `pftnet report`, drawn by gnuplot from .dat/.gp files left beside the images
 * (so users can restyle and rerun them: `cd DIR && gnuplot NAME.gp`). */
#ifndef PFT_REPORT_PLOT_H
#define PFT_REPORT_PLOT_H

#include "pft_report_exp.h"

/* The images made for one experiment: file names inside the plot directory, "" for a plot not made. */
typedef struct {
    char acc_bytes[256]; /* accuracy vs bytes (log x): a labelled point per comparison row with bytes > 0 (if
                            ≥ 2) */
    char per_node[256];  /* accuracy per hop (chain) or per node (other kinds, > 2 nodes), centralized line */
    char drift[256];     /* chain: own avg log-likelihood under the received and the sent GMM, per hop */
    char synth[256]; /* synth lines: accuracy vs bundle bytes (log x), one line per cov, raw-feature line */
} pft_report_plots_t;

/* 1 if variant v of e is left out of the drift plot: a DP variant (settings dp_epsilon > 0) beside one
 * without DP, whose noisy GMMs give own log-likelihoods (down to -1e8) that would flatten every other curve.
 */
int pft_report_plot_drift_skips(const pft_report_exp_t *e, const pft_report_variant_t *v);

/* 1 if an executable named gnuplot is on PATH, else 0. */
int pft_report_plot_available(void);

/* Makes the plots e calls for: for each, dir/<base>-<what>.dat and .gp, then gnuplot run in dir makes
 * <base>-<what>.<format> (format "svg" or "png"). dir must exist; base should be a safe file-name stem.
 * Errors: PFT_EINVAL for another format; PFT_EIO naming the file that could not be written, or the script
 * gnuplot failed on (its own messages go to stderr); PFT_EUNSUPPORTED if gnuplot cannot be started. Plots
 * made before an error stay in dir. */
int pft_report_plot_exp(const pft_report_exp_t *e, const char *dir, const char *base, const char *format,
                        pft_report_plots_t *out);

#endif
