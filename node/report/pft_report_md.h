/* pft_report_md: the Markdown of `pftnet report`: title and hand-written notes, per experiment the comparison
 * table, image links, per-node tables per variant, and the synth family table. Deterministic: same inputs,
 * same bytes. */
#ifndef PFT_REPORT_MD_H
#define PFT_REPORT_MD_H

#include "pft_report_exp.h"
#include "pft_report_plot.h"

#include <stdio.h>

/* Writes "# title", then notes_dir/intro.md verbatim if notes_dir is given and the file exists.
 * PFT_EIO naming a notes file that exists but cannot be read. */
int pft_report_md_begin(FILE *f, const char *title, const char *notes_dir);

/* Writes the section "## <tag>" of e: notes_dir/<tag>.md right under the heading (when it exists; a tag that
 * is not a safe file name uses the plot file stem `stem` instead), the tables, and links to the images in
 * plots (NULL or empty names: none) as img_prefix + name, img_prefix being the plot folder relative to the
 * Markdown's folder ("plots/"). PFT_EIO as above. */
int pft_report_md_exp(FILE *f, const pft_report_exp_t *e, const char *stem, const pft_report_plots_t *plots,
                      const char *img_prefix, const char *notes_dir);

/* Writes notes_dir/outro.md if it exists. PFT_EIO as above. */
int pft_report_md_end(FILE *f, const char *notes_dir);

#endif
