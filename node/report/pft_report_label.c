/* pft_report_label: places the text labels of scatter points beside them so that labels do not overlap each
 * other or other points. */
#include "pft_report_label.h"

#include <math.h>

typedef struct {
    double x0, y0, x1, y1;
} box_t;

static double overlap(const box_t *a, const box_t *b)
{
    double w = fmin(a->x1, b->x1) - fmax(a->x0, b->x0), h = fmin(a->y1, b->y1) - fmax(a->y0, b->y0);
    return w > 0 && h > 0 ? w * h : 0.0;
}

static box_t label_box(const pft_report_label_t *l, double char_w, double char_h)
{
    double w = l->len * char_w;
    box_t b = {l->right_aligned ? l->lx - w : l->lx, l->ly - char_h / 2, l->right_aligned ? l->lx : l->lx + w,
               l->ly + char_h / 2};
    return b;
}

static box_t point_box(const pft_report_label_t *l, double char_w, double char_h)
{
    box_t b = {l->x - char_w / 2, l->y - char_h / 3, l->x + char_w / 2, l->y + char_h / 3};
    return b;
}

/* What a spot costs: area shared with placed labels and with points, plus area outside the plot (weighted).
 */
static double cost(const pft_report_label_t *l, size_t n, size_t self, double char_w, double char_h)
{
    box_t b = label_box(&l[self], char_w, char_h);
    double c = 0;
    for (size_t i = 0; i < n; i++) {
        box_t p = point_box(&l[i], char_w, char_h);
        c += overlap(&b, &p);
        if (i < self) {
            box_t o = label_box(&l[i], char_w, char_h);
            c += overlap(&b, &o);
        }
    }
    box_t inside = {0, 0, 1, 1};
    double area = (b.x1 - b.x0) * (b.y1 - b.y0);
    return c + 2.0 * (area - overlap(&b, &inside));
}

void pft_report_label_place(pft_report_label_t *l, size_t n, double char_w, double char_h)
{
    /* right up, right down, left up, left down, then the same one line further away */
    static const struct {
        int left;
        double dy; /* in character heights */
    } spots[] = {{0, 0.6}, {0, -0.6}, {1, 0.6}, {1, -0.6}, {0, 1.7}, {0, -1.7}, {1, 1.7}, {1, -1.7}};
    const double gap = char_w * 1.2;
    for (size_t i = 0; i < n; i++) {
        double best = INFINITY;
        int best_spot = 0;
        for (int s = 0; s < (int)(sizeof spots / sizeof *spots); s++) {
            l[i].right_aligned = spots[s].left;
            l[i].lx = spots[s].left ? l[i].x - gap : l[i].x + gap;
            l[i].ly = l[i].y + spots[s].dy * char_h;
            double c = cost(l, n, i, char_w, char_h);
            if (c < best - 1e-12) {
                best = c;
                best_spot = s;
            }
            if (c <= 0)
                break;
        }
        l[i].right_aligned = spots[best_spot].left;
        l[i].lx = spots[best_spot].left ? l[i].x - gap : l[i].x + gap;
        l[i].ly = l[i].y + spots[best_spot].dy * char_h;
    }
}
