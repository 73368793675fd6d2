/* pft_launch_reconcile: after a run, every hand-off a node sent is matched with its receiver's record
 * (RELIABILITY.md §5): the bundle id in the sender's result.json `sent` against the receiver's `received`. A
 * hand-off that reached no one, or that a sender calls acknowledged while its receiver does not hold it,
 * fails the run by name; one that a sender gave up on but its receiver stored and used is reported as
 * delivered. */
#include "pft_launch_int.h"

#include <stdio.h>
#include <string.h>

/* The node named id in nodes (results), or NULL. */
static json_t *node_named(json_t *nodes, const char *id)
{
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n)
    {
        const char *x = json_string_value(json_object_get(n, "id"));
        if (x && strcmp(x, id) == 0)
            return n;
    }
    return NULL;
}

/* 1 if receiver r lists bundle id in received, 0 if not, -1 if r has no record (no result.json). */
static int holds(json_t *r, const char *id)
{
    json_t *recv = r ? json_object_get(r, "received") : NULL;
    if (!json_is_array(recv))
        return -1;
    size_t i;
    json_t *e;
    json_array_foreach(recv, i, e)
    {
        const char *b = json_string_value(json_object_get(e, "bundle_id"));
        if (b && strcmp(b, id) == 0)
            return 1;
    }
    return 0;
}

/* The verdict of one sent entry s of node from: "ok", "lost", "unverified" (no receiver record),
 * "contradiction" (acknowledged but not held) or "used" (the sender gave up, the receiver used it). */
static const char *verdict(json_t *nodes, const char *from, json_t *s)
{
    const char *to = json_string_value(json_object_get(s, "to")),
               *id = json_string_value(json_object_get(s, "bundle_id")),
               *state = json_string_value(json_object_get(s, "state"));
    if (!to || !id || !state)
        return "unverified";
    int ok = strcmp(state, "acked") == 0 || strcmp(state, "delivered") == 0;
    int h = holds(node_named(nodes, to), id);
    (void)from;
    if (h < 0)
        return ok ? "unverified" : "lost";
    if (h)
        return ok ? "ok" : "used";
    return ok ? "contradiction" : "lost";
}

/* Why sent entry s has verdict v, for the line shown. */
static const char *explain(json_t *nodes, json_t *s, const char *v)
{
    if (strcmp(v, "lost") == 0)
        return holds(node_named(nodes, json_string_value(json_object_get(s, "to"))), "") < 0
                   ? ": not delivered; the run ended before its receiver stored it"
                   : ": its receiver does not hold it";
    if (strcmp(v, "contradiction") == 0)
        return ": the sender says it was acknowledged, its receiver does not hold it";
    if (strcmp(v, "used") == 0)
        return ": the sender gave up, its receiver stored and used it";
    return ": the receiver left no result.json";
}

int pft_launch_reconcile(json_t *nodes, json_t **report, int show)
{
    json_t *rep = json_array();
    int bad = 0;
    size_t ni;
    json_t *n;
    json_array_foreach(nodes, ni, n)
    {
        const char *from = json_string_value(json_object_get(n, "id"));
        size_t si;
        json_t *s;
        json_array_foreach(json_object_get(n, "sent"), si, s)
        {
            if (json_object_get(s, "fallback_for") || json_is_true(json_object_get(s, "fell_back")))
                continue; /* fallbacks: collect_fallbacks reports them */
            const char *v = verdict(nodes, from, s);
            int fails = strcmp(v, "lost") == 0 || strcmp(v, "contradiction") == 0;
            bad += fails;
            json_array_append_new(rep, json_pack("{s:s?,s:O,s:O,s:O,s:s}", "from", from, "to",
                                                 json_object_get(s, "to"), "bundle_id",
                                                 json_object_get(s, "bundle_id"), "sender_state",
                                                 json_object_get(s, "state"), "verdict", v));
            if (show && strcmp(v, "ok") != 0)
                fprintf(stderr, "hand-off %s -> %s (bundle %.12s): %s%s\n", from ? from : "?",
                        json_string_value(json_object_get(s, "to")),
                        json_string_value(json_object_get(s, "bundle_id")), v, explain(nodes, s, v));
        }
    }
    *report = rep;
    return bad;
}
