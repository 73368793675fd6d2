/* pft_node_base: the plumbing every file of the peer shares: the status file, the stop flag, the decoder's
 * limits, provenance-only bundles and the test hooks. It calls no other file of node/peer. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_fsio.h"
#include "pft_log.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t s_stop;

/* Fault injection for the crash/restart tests: with PFT_TEST_HOOKS compiled in, PFT_CRASH_AT=<point> in the
 * environment kills the node with SIGKILL at that point. Release builds compile the hook to nothing. */
#ifdef PFT_TEST_HOOKS
void pft_node__crash_point(const char *point)
{
    const char *at = getenv("PFT_CRASH_AT");
    if (at && strcmp(at, point) == 0) {
        pft_warn("test hook: SIGKILL at %s", point);
        raise(SIGKILL);
    }
}

int pft_node__test_hook(const node_t *nd, const char *var)
{
    const char *v = getenv(var);
    return v && nd->me && strcmp(v, nd->me->id) == 0;
}

const char *pft_node__test_arg(const node_t *nd, const char *var)
{
    const char *v = getenv(var);
    size_t n = nd->me ? strlen(nd->me->id) : 0;
    if (!v || !n || strncmp(v, nd->me->id, n) != 0 || (v[n] != '\0' && v[n] != ':'))
        return NULL;
    return v + n;
}

int pft_node__test_listed(const char *var, const char *id)
{
    size_t n = strlen(id);
    for (const char *p = getenv(var); p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, id, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}
#endif

void pft_node__limits(const node_t *nd, pft_bundle_limits_t *lim)
{
    pft_bundle_limits_default(lim);
    lim->max_bytes = (size_t)nd->run->max_bundle_mb << 20;
}

void pft_node_request_stop(void)
{
    s_stop = 1;
}

int pft_node__stopping(void)
{
    return s_stop != 0;
}

const char *pft_node_exit_text(int code)
{
    switch (code) {
#define PFT_X_TEXT(name, value, text)                                                                        \
    case value:                                                                                              \
        return text;
        PFT_NODE_EXIT_TABLE(PFT_X_TEXT)
#undef PFT_X_TEXT
    default:
        return "unknown exit code";
    }
}

void pft_node__set_status(node_t *nd, const char *state, const char *detail)
{
    char buf[sizeof nd->status];
    int n = snprintf(buf, sizeof buf, "%s %s\n", state, detail ? detail : "");
    if (n < 0 || strcmp(buf, nd->status) == 0)
        return; /* written when it changes: a waiting node writes nothing */
    if (n >= (int)sizeof buf)
        n = (int)sizeof buf - 1;
    char *path = pft_fsio_join(nd->args->out_dir, "status");
    /* without fsync: the file only reports (the launcher's progress) */
    if (path && pft_fsio_write_replace(path, buf, (size_t)n) == 0)
        memcpy(nd->status, buf, sizeof buf);
    pft_free(path);
}

pft_bundle_t *pft_node__provenance_only(const node_t *nd, const pft_bundle_t *b)
{
    pft_bundle_t *p = pft_bundle_new(nd->run->run, pft_bundle_producer(b), PFT_DTYPE_F32, pft_bundle_dim(b));
    if (p && pft_bundle_prov_merge(p, b) != 0)
        pft_bundle_destroy(&p);
    return p;
}

pft_bundle_t *pft_node__own_provenance(const node_t *nd)
{
    pft_bundle_t *p = pft_bundle_new(nd->run->run, nd->me->id, PFT_DTYPE_F32, pft_dataset_d(nd->train));
    for (int c = 0; p && c < nd->n_classes; c++)
        if (nd->own_counts[c] > 0 && pft_bundle_prov_add(p, nd->me->id, c, (uint64_t)nd->own_counts[c]) != 0)
            pft_bundle_destroy(&p);
    return p;
}
