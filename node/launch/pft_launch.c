/* pft_launch: a launch's life cycle (new, destroy), its engines by name, the helpers its steps share, and
 * --prepare-only. */
#include "pft_launch_int.h"

#include "pft_alloc.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The pftnode binary: the one given, else $PFTNODE, else the pftnode beside this program, else "pftnode". */
static void pftnode_path(const char *given, char *buf, size_t len)
{
    if (given) {
        snprintf(buf, len, "%s", given);
        return;
    }
    const char *env = getenv("PFTNODE");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        snprintf(buf, len, "%s/pftnode", dirname(self));
        if (access(buf, X_OK) == 0)
            return;
    }
    snprintf(buf, len, "pftnode");
}

pft_launch_t *pft_launch_new(const pft_launch_opts_t *opts)
{
    pft_launch_t *self = pft_calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->o = *opts;
    pftnode_path(opts->pftnode, self->node_bin, sizeof self->node_bin);
    return self;
}

void pft_launch_destroy(pft_launch_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_launch_t *self = *self_p;
    if (self->signals_caught) {
        sigaction(SIGINT, &self->old_int, NULL);
        sigaction(SIGTERM, &self->old_term, NULL);
    }
    for (size_t i = 0; self->ch && i < self->nn; i++) {
        pft_launch__close_port(&self->ch[i]);
        pft_free(self->ch[i].dir);
        pft_free(self->ch[i].key);
        pft_free(self->ch[i].node_file);
        pft_dataset_destroy(&self->ch[i].train);
        pft_dataset_destroy(&self->ch[i].test);
    }
    pft_free(self->ch);
    if (self->engine && self->engine->destroy)
        self->engine->destroy(self);
    pft_free(self->resolved);
    pft_free(self->eval_x);
    pft_free(self->eval_y);
    pft_dataset_destroy(&self->eval);
    pft_topo_destroy(&self->topo);
    pft_dirlock_destroy(&self->run_lock);
    pft_free(self);
    *self_p = NULL;
}

/* The engines, by name (pft_launch_engine.h); the first is the default. */
static const pft_launch_engine_t *const s_engines[] = {&pft_launch__local, &pft_launch__slurm, NULL};

const pft_launch_engine_t *pft_launch__engine(const char *name)
{
    for (size_t i = 0; s_engines[i]; i++)
        if (!name || strcmp(name, s_engines[i]->name) == 0)
            return s_engines[i];
    return NULL;
}

int pft_launch_engine_known(const char *name, char *names, size_t cap)
{
    size_t len = 0;
    for (size_t i = 0; names && s_engines[i] && len < cap; i++)
        len += (size_t)snprintf(names + len, cap - len, "%s%s",
                                i == 0             ? ""
                                : s_engines[i + 1] ? ", "
                                                   : " or ",
                                s_engines[i]->name);
    return name && pft_launch__engine(name) != NULL;
}

void pft_launch_print_commands(pft_launch_t *self)
{
    for (size_t i = 0; i < self->nn; i++) /* the nodes are started later, by hand: they bind themselves */
        pft_launch__close_port(&self->ch[i]);
    for (size_t i = 0; i < self->nn; i++) {
        const pft_launch_child_t *c = &self->ch[i];
        if (c->host[0]) /* --engine slurm: where its endpoint is */
            printf("# node %s, on host %s (Slurm task %d)\n", c->id, c->host, c->task);
        printf("%s --topology %s --id %s --out %s --node-file %s", self->node_bin, self->resolved, c->id,
               c->dir, c->node_file);
        if (self->o.insecure)
            printf(" --insecure");
        printf("\n");
    }
}
