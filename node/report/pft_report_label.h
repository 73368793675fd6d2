/* pft_report_label: places the text labels of scatter points beside them so that labels do not overlap each
 * other or other points (greedy: each label takes the first free spot of eight around its point). */
#ifndef PFT_REPORT_LABEL_H
#define PFT_REPORT_LABEL_H

#include <stddef.h>

/* One labelled point. Coordinates are fractions of the plot area: (0, 0) bottom left, (1, 1) top right. */
typedef struct {
    double x, y;       /* the point */
    int len;           /* the label's length in characters */
    double lx, ly;     /* out: where the label is anchored (its vertical middle) */
    int right_aligned; /* out: 1 if the text ends at lx (label left of the point), 0 if it starts there */
} pft_report_label_t;

/* Places the labels of l[0..n) in order, each where it overlaps the labels placed before it, the points and
 * the plot border least (the first spot without overlap, right of the point preferred). char_w and char_h:
 * the size of one character as fractions of the plot area's width and height. */
void pft_report_label_place(pft_report_label_t *l, size_t n, double char_w, double char_h);

#endif
