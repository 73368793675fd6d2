/* pft_node_refusal: every refusal in one place: logged with its reason (rate-limited per kind), counted in
 * rejected / handshakes_denied, kept in refusals, and persisted in out/refusals.json so that the counters
 * survive a restart (docs/SECURITY.md §Refusals). */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_log.h"

#include <stdlib.h>
#include <string.h>

#define LINES_PER_SECOND 5 /* log lines per kind and second; the rest are summarised */
#define MAX_FILE_BYTES (1 << 20)

static const char *const s_kind_names[] = {"bundle", "transport", "handshake", "stored bundle"};

static char *refusals_path(const node_t *nd)
{
    return pft_fsio_join(nd->args->out_dir, "refusals.json");
}

/* Logs "... M more <kind> refusal(s)" for a window that ended with refusals not logged. */
static void flush_window(node_t *nd, int kind, double now)
{
    if (now - nd->refusal.log[kind].window < 1.0)
        return;
    if (nd->refusal.log[kind].suppressed)
        pft_warn("... %d more %s refusal(s) in the last second (all counted in result.json)",
                 nd->refusal.log[kind].suppressed, s_kind_names[kind]);
    nd->refusal.log[kind].window = now;
    nd->refusal.log[kind].logged = 0;
    nd->refusal.log[kind].suppressed = 0;
}

/* 1 when reason is in the kept reasons already. */
static int kept(const node_t *nd, const char *reason)
{
    size_t i;
    json_t *v;
    json_array_foreach(nd->refusal.reasons, i, v) if (strcmp(json_string_value(v), reason) == 0) return 1;
    return 0;
}

/* Keeps a refusal's reason while the list has room; a handshake's only once per text and among the first
 * PFT_NODE_MAX_HANDSHAKE_REASONS: a flood of connections, or one client reconnecting, does not crowd out
 * the reasons of refused bundles (every refusal is counted all the same). */
static void keep_reason(node_t *nd, int handshake, const char *reason)
{
    if (json_array_size(nd->refusal.reasons) >= PFT_NODE_MAX_REFUSALS ||
        (handshake && (nd->refusal.handshake_reasons >= PFT_NODE_MAX_HANDSHAKE_REASONS || kept(nd, reason))))
        return;
    json_array_append_new(nd->refusal.reasons, json_string(reason));
    nd->refusal.handshake_reasons += handshake;
}

void pft_node__refusal(node_t *nd, pft_node__refusal_kind_t kind, const char *reason)
{
    if (kind == PFT_NODE_REFUSED_HANDSHAKE)
        nd->refusal.handshakes_denied++;
    else
        nd->refusal.rejected++;
    keep_reason(nd, kind == PFT_NODE_REFUSED_HANDSHAKE, reason);
    nd->refusal.dirty = 1;
    flush_window(nd, kind, pft_fsio_now());
    if (nd->refusal.log[kind].logged >= LINES_PER_SECOND) {
        nd->refusal.log[kind].suppressed++;
        return;
    }
    nd->refusal.log[kind].logged++;
    if (kind == PFT_NODE_REFUSED_STORED)
        pft_error("refused a stored bundle: %s", reason);
    else
        pft_warn("refused (%s): %s", s_kind_names[kind], reason);
}

void pft_node__refusal_on_transport(void *ctx, pft_transport_refusal_t kind, const char *reason)
{
    pft_node__refusal(
        ctx, kind == PFT_REFUSAL_HANDSHAKE ? PFT_NODE_REFUSED_HANDSHAKE : PFT_NODE_REFUSED_TRANSPORT, reason);
}

/* Writes out/refusals.json atomically; best effort (a failure is logged once and retried at the next tick).
 */
static void save(node_t *nd)
{
    json_t *o = json_pack("{s:i,s:i,s:O}", "rejected", nd->refusal.rejected, "handshakes_denied",
                          nd->refusal.handshakes_denied, "refusals", nd->refusal.reasons);
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    char *path = refusals_path(nd);
    int rc = text && path ? pft_fsio_write_atomic(path, text, strlen(text)) : PFT_ENOMEM;
    if (rc)
        pft_warn("writing %s: %s", path ? path : "refusals.json", pft_errmsg());
    else
        nd->refusal.dirty = 0;
    nd->refusal.saved = pft_fsio_now();
    free(text);
    pft_free(path);
    json_decref(o);
}

void pft_node__refusal_tick(node_t *nd, int force)
{
    double now = pft_fsio_now();
    for (int k = 0; k < (int)(sizeof s_kind_names / sizeof *s_kind_names); k++)
        flush_window(nd, k, now);
    if (nd->refusal.dirty && (force || now - nd->refusal.saved >= 1.0))
        save(nd);
}

int pft_node__refusal_load(node_t *nd)
{
    char *path = refusals_path(nd);
    if (!path)
        return pft_err(PFT_ENOMEM, "out of memory");
    if (!pft_fsio_exists(path)) {
        pft_free(path);
        return 0;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = pft_fsio_read(path, MAX_FILE_BYTES, &buf, &len);
    json_error_t err;
    json_t *o = rc ? NULL : json_loadb((const char *)buf, len, 0, &err);
    json_t *r = json_object_get(o, "rejected"), *h = json_object_get(o, "handshakes_denied"),
           *list = json_object_get(o, "refusals");
    if (rc == 0 &&
        (!json_is_integer(r) || !json_is_integer(h) || !json_is_array(list) || json_integer_value(r) < 0 ||
         json_integer_value(h) < 0 || json_integer_value(r) > INT32_MAX || json_integer_value(h) > INT32_MAX))
        rc = pft_err(PFT_EFORMAT, "%s: not a refusals record of pftnode", path);
    if (rc == 0) {
        nd->refusal.rejected = (int)json_integer_value(r);
        nd->refusal.handshakes_denied = (int)json_integer_value(h);
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v) if (json_is_string(v)) /* a handshake's reason: "handshake: ..." */
            keep_reason(nd, strncmp(json_string_value(v), "handshake:", 10) == 0, json_string_value(v));
        if (nd->refusal.rejected || nd->refusal.handshakes_denied)
            pft_info("refusals of an earlier run: %d rejected, %d handshakes denied", nd->refusal.rejected,
                     nd->refusal.handshakes_denied);
    }
    json_decref(o);
    pft_free(buf);
    pft_free(path);
    return rc;
}

void pft_node__refusal_json(const node_t *nd, json_t *res)
{
    json_object_set_new(res, "rejected", json_integer(nd->refusal.rejected));
    json_object_set_new(res, "refusals", json_incref(nd->refusal.reasons));
    json_object_set_new(res, "handshakes_denied", json_integer(nd->refusal.handshakes_denied));
}
