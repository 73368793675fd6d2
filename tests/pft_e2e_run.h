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
