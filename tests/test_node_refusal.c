/* test_node_refusal: every refusal is counted, and its reason kept in result.json's refusals while there is
 * room (node/peer/pft_node_refusal.c): a handshake's reason once per text and among the first
 * PFT_NODE_MAX_HANDSHAKE_REASONS, so that a flood of connections (a port scanner, another run's node still
 * reconnecting to a port the OS reused) leaves room for the reasons of refused bundles. */
#include "pft_test.h"

#include "pft_node_internal.h"

#include <stdio.h>
#include <string.h>

static size_t listed(const node_t *nd, const char *prefix)
{
    size_t i, n = 0;
    json_t *v;
    json_array_foreach(nd->refusal.reasons, i, v) n +=
        strncmp(json_string_value(v), prefix, strlen(prefix)) == 0;
    return n;
}

static void test_flood_leaves_room(void)
{
    static node_t nd; /* what pft_node__refusal reads: its own part of node_t */
    nd.refusal.reasons = json_array();
    CHECK(nd.refusal.reasons);
    if (!nd.refusal.reasons)
        return;
    char reason[160];
    /* one client reconnecting: the same refusal, counted every time, listed once */
    for (int i = 0; i < 50; i++)
        pft_node__refusal(&nd, PFT_NODE_REFUSED_HANDSHAKE,
                          "handshake: inbound connection to tcp://127.0.0.1:5555 failed: the client hung up");
    CHECK(nd.refusal.handshakes_denied == 50 && nd.refusal.rejected == 0);
    CHECK(json_array_size(nd.refusal.reasons) == 1);
    /* many clients: the first PFT_NODE_MAX_HANDSHAKE_REASONS texts listed, every one counted */
    for (int i = 0; i < 3 * PFT_NODE_MAX_HANDSHAKE_REASONS; i++) {
        snprintf(reason, sizeof reason, "handshake: CURVE key %04d is not allowed", i);
        pft_node__refusal(&nd, PFT_NODE_REFUSED_HANDSHAKE, reason);
    }
    CHECK(nd.refusal.handshakes_denied == 50 + 3 * PFT_NODE_MAX_HANDSHAKE_REASONS);
    CHECK(listed(&nd, "handshake:") == PFT_NODE_MAX_HANDSHAKE_REASONS);
    /* refused bundles: listed up to the list's size, repeats too (a retransmitted copy refused again) */
    for (int i = 0; i < PFT_NODE_MAX_REFUSALS; i++) {
        snprintf(reason, sizeof reason, "bundle decode: forgery %d", i / 2);
        pft_node__refusal(&nd, PFT_NODE_REFUSED_BUNDLE, reason);
    }
    CHECK(nd.refusal.rejected == PFT_NODE_MAX_REFUSALS);
    CHECK(json_array_size(nd.refusal.reasons) == PFT_NODE_MAX_REFUSALS);
    CHECK(listed(&nd, "bundle decode:") == PFT_NODE_MAX_REFUSALS - PFT_NODE_MAX_HANDSHAKE_REASONS);
    CHECK(!strcmp(json_string_value(json_array_get(nd.refusal.reasons, PFT_NODE_MAX_HANDSHAKE_REASONS)),
                  "bundle decode: forgery 0") &&
          !strcmp(json_string_value(json_array_get(nd.refusal.reasons, PFT_NODE_MAX_HANDSHAKE_REASONS + 1)),
                  "bundle decode: forgery 0"));
    /* full: still counted */
    pft_node__refusal(&nd, PFT_NODE_REFUSED_TRANSPORT, "malformed inbound message");
    CHECK(nd.refusal.rejected == PFT_NODE_MAX_REFUSALS + 1 &&
          json_array_size(nd.refusal.reasons) == PFT_NODE_MAX_REFUSALS);
    json_decref(nd.refusal.reasons);
}

int main(void)
{
    RUN(test_flood_leaves_room);
    return pft_test_done();
}
