/* pft_e2e_run: helpers shared by the tests that run real pftnet/pftnode processes: a scratch folder kept when
 * a check fails, and readers of results.json / result.json. */
#ifndef PFT_E2E_RUN_H
#define PFT_E2E_RUN_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Makes /tmp/<name>_XXXXXX into dir (cap ≥ 64); 0 on success. */
static inline int pft_e2e_scratch(char *dir, size_t cap, const char *name)
{
    snprintf(dir, cap, "/tmp/%s_XXXXXX", name);
    return mkdtemp(dir) ? 0 : -1;
}

/* Ends a test program: removes dir when no check failed (rc 0, or 77 when a test skipped) and PFT_E2E_KEEP is
 * not set, else keeps it and says where; returns rc. */
static inline int pft_e2e_finish(const char *dir, int rc)
{
    if ((rc == 0 || rc == 77) && !getenv("PFT_E2E_KEEP")) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    } else {
        fprintf(stderr, "outputs kept in %s\n", dir);
    }
    return rc;
}

/* The entry of an array of objects whose "id" is id, or NULL. */
static inline json_t *pft_e2e_find_id(json_t *array, const char *id)
{
    size_t i;
    json_t *n;
    json_array_foreach(array, i, n)
    {
        const char *s = json_string_value(json_object_get(n, "id"));
        if (s && strcmp(s, id) == 0)
            return n;
    }
    return NULL;
}

/* An integer field (0 when absent). */
static inline long pft_e2e_jint(json_t *o, const char *k)
{
    return (long)json_integer_value(json_object_get(o, k));
}

/* Reasons a node keeps in result.json's refusals (PFT_NODE_MAX_REFUSALS; all are counted). */
#define PFT_E2E_MAX_REFUSALS 100

/* How a stray refusal begins (pft_e2e_is_stray). */
#define PFT_E2E_STRAY "handshake: inbound connection"

/* 1 if refusal is a node's refusal of an inbound connection at its handshake (wire/pft_transport_zap.c: a
 * plain-text client of a CURVE node or the reverse, a wrong server key, a client that hung up mid-handshake):
 * what a connection from another process makes, such as another test's node still reconnecting to a port the
 * OS has since given this test's node. Counted in handshakes_denied, never in rejected; logged as "refused
 * (handshake)". A ZAP denial ("handshake: CURVE key ... is not allowed") is not one: it needs the node's
 * server key, which each test makes afresh. */
static inline int pft_e2e_is_stray(const char *refusal)
{
    return refusal && strncmp(refusal, PFT_E2E_STRAY, strlen(PFT_E2E_STRAY)) == 0;
}

/* The stray refusals (pft_e2e_is_stray) in a node result's refusals. */
static inline size_t pft_e2e_strays(json_t *refusals)
{
    size_t i, n = 0;
    json_t *v;
    json_array_foreach(refusals, i, v) n += pft_e2e_is_stray(json_string_value(v));
    return n;
}

/* The first of a node result's refusals that is not a stray one (pft_e2e_is_stray), or NULL. */
static inline const char *pft_e2e_first_refusal(json_t *refusals)
{
    size_t i;
    json_t *v;
    json_array_foreach(refusals, i, v)
    {
        const char *r = json_string_value(v);
        if (!pft_e2e_is_stray(r))
            return r ? r : "(not a string)";
    }
    return NULL;
}

/* Number of nodes in a node result's provenance. */
static inline int pft_e2e_prov_nodes(json_t *n)
{
    return (int)json_array_size(json_object_get(n, "provenance"));
}

/* Sum of all class counts over a node result's provenance entries. */
static inline long pft_e2e_prov_total(json_t *n)
{
    long total = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(n, "provenance"), i, e)
    {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(e, "counts"), k, v) total += (long)json_integer_value(v);
    }
    return total;
}

/* The count of class c that node id contributed, from a node result's provenance (0 when absent). */
static inline long pft_e2e_prov_count(json_t *n, const char *id, int c)
{
    size_t i;
    json_t *e;
    char key[16];
    snprintf(key, sizeof key, "%d", c);
    json_array_foreach(json_object_get(n, "provenance"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "node")), id) == 0)
            return (long)json_integer_value(json_object_get(json_object_get(e, "counts"), key));
    }
    return 0;
}

#endif
