/* pft_node_step: what a node sends, as one pipeline: the ordered table of release steps (floor → noise →
 * mean_noise → rule → mask), each in its own file with applies() and its work on this node's own part (own)
 * or on the outbound bundle (bundle) of the exact method, or on one class's model of the sampling method
 * (model). Which steps apply is decided once at setup, like the method and the head, and each step that
 * applies declares then what it makes every release (nd->pipe's answers: noisy, drawn anew, per row), which
 * the rest of the peer asks; a refit then runs the steps in order and tests no privacy setting itself. The
 * head's exact input stays on its own path (pft_node__step_exact). */
#include "pft_node_internal.h"

#include "pft_error.h"
#include "pft_log.h"

#include <stdio.h>
#include <string.h>

extern const pft_node_step_t pft_node__step_floor, pft_node__step_noise, pft_node__step_meannoise,
    pft_node__step_rule, pft_node__step_mask;

/* Every step, in the order a release runs them. */
static const pft_node_step_t *const s_steps[] = {
    &pft_node__step_floor, &pft_node__step_noise, &pft_node__step_meannoise,
    &pft_node__step_rule,  &pft_node__step_mask,
};
_Static_assert(sizeof s_steps / sizeof *s_steps <= PFT_NODE_MAX_STEPS, "room for every step");

int pft_node__step_setup(node_t *nd)
{
    char names[128] = "";
    nd->pipe.n_steps = 0;
    nd->pipe.noisy = nd->pipe.redraws = nd->pipe.per_row = 0;
    for (size_t i = 0; i < sizeof s_steps / sizeof *s_steps; i++) {
        if (!s_steps[i]->applies(nd)) /* a step may ask what the steps before it declared */
            continue;
        nd->pipe.steps[nd->pipe.n_steps++] = s_steps[i];
        if (s_steps[i]->declare)
            s_steps[i]->declare(nd);
        size_t o = strlen(names);
        snprintf(names + o, sizeof names - o, "%s%s", o ? " → " : "", s_steps[i]->name);
    }
    pft_info("release: %s", names[0] ? names : nd->me->exact ? "exact" : "EM");
    return 0;
}

/* The own part r->st (made by a step, or now from the released rows, exactly) taken into r->ps. */
static int take(node_t *nd, pft_node__release_t *r)
{
    const pft_dataset_t *rows = r->rows ? r->rows : nd->train;
    int rc = 0, folded = 0, floor_rows = 0;
    if (!r->st && !nd->pipe.noisy &&
        (rc = pft_node__parts_take_own_rows(nd, r->ps, rows, r->rows != NULL, &folded)) == 0 && folded)
        return 0;            /* the released rows, exactly, straight into their group's statistics */
    if (rc == 0 && !r->st) { /* what goes on: the released rows, exactly */
        r->st = pft_gstat_new(pft_node__parts_kind(nd), pft_dataset_d(rows));
        rc = r->st ? pft_gstat_add_rows(r->st, pft_dataset_x(rows), pft_dataset_y(rows),
                                        (size_t)pft_dataset_n(rows))
                   : pft_err(PFT_ENOMEM, "out of memory");
        r->exact_rows = r->rows != NULL; /* the floor withheld classes: the head reads every row again */
        floor_rows = r->exact_rows;
    }
    if (rc == 0)
        rc = pft_node__parts_take(r->ps, &r->st, NULL, &nd->my_index, 1, NULL, nd->me->id);
    if (rc == 0 && r->exact_rows) {
        r->ps->p[r->ps->n - 1].exact_rows = 1;
        r->ps->p[r->ps->n - 1].floor_rows = floor_rows;
    }
    return rc == 1 ? 0 : rc;
}

int pft_node__step_own(node_t *nd, parts_t *ps, const uint64_t *merged)
{
    if (pft_dataset_n(nd->train) == 0)
        return 0;
    pft_node__floor_reset(&nd->know.floor);
    pft_node__release_t r = {.ps = ps, .merged = merged};
    int rc = 0;
    for (int i = 0; rc == 0 && i < nd->pipe.n_steps; i++)
        if (nd->pipe.steps[i]->own)
            rc = nd->pipe.steps[i]->own(nd, &r);
    if (rc == 0 && !r.taken)
        rc = take(nd, &r);
    pft_gstat_destroy(&r.st);
    pft_dataset_destroy(&r.rows);
    return rc;
}

int pft_node__step_bundle(node_t *nd, pft_bundle_t *b)
{
    pft_node__release_t r = {.b = b};
    int rc = 0;
    for (int i = 0; rc == 0 && i < nd->pipe.n_steps; i++)
        if (nd->pipe.steps[i]->bundle)
            rc = nd->pipe.steps[i]->bundle(nd, &r);
    return rc;
}

int pft_node__step_model(node_t *nd, pft_node__model_t *m)
{
    int rc = 0;
    for (int i = 0; rc == 0 && !m->withheld && !m->g && i < nd->pipe.n_steps; i++)
        if (nd->pipe.steps[i]->model)
            rc = nd->pipe.steps[i]->model(nd, m);
    if (rc)
        pft_gmm_destroy(&m->g);
    return rc;
}

int pft_node__step_exact(node_t *nd, parts_t *ps)
{
    int n = pft_dataset_n(nd->train);
    if (n == 0)
        return 0;
    pft_gstat_t *st = pft_gstat_new(pft_node__parts_kind(nd), pft_dataset_d(nd->train));
    int rc = st ? pft_gstat_add_rows(st, pft_dataset_x(nd->train), pft_dataset_y(nd->train), (size_t)n)
                : pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0)
        rc = pft_node__parts_take(ps, &st, NULL, &nd->my_index, 1, NULL, nd->me->id);
    pft_gstat_destroy(&st);
    return rc == 1 ? 0 : rc;
}
