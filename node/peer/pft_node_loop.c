/* pft_node_loop: the peer's one event loop (an actor, DESIGN.md §3.1): every wait of a run — for a stage's
 * bundles, for the sends to end, the linger after success — is a condition of pft_node__loop_until, and a
 * long computation (EM, the head's fit) yields to the same loop through pft_node__loop_yield. One turn serves
 * the transport once (inbound bundles, acknowledgements, retransmissions) and then the node's chores, here
 * and nowhere else: acknowledgements recorded on disk, sends whose successor's receipt appeared ended as
 * delivered, successors' reported endpoints followed, failed sends handed to fallback successors, refusal
 * summaries and out/refusals.json. */
#include "pft_node_internal.h"

#include "pft_error.h"

#include <string.h>

/* What every turn does after serving the transport. */
static void chores(node_t *nd)
{
    pft_node__outbox_save_acks(nd);
    pft_node__endpoint_tick(nd);
    pft_node__outbox_tick(nd);
    pft_node__refusal_tick(nd, 0);
    if (nd->chore)
        nd->chore(nd);
}

/* How much longer a turn may wait for the transport in a topology of n nodes: 1 up to 64 nodes, then one more
 * for each further 64, at most 25 (a 200 ms wait becomes 5 s). A turn that finds nothing to do still costs
 * its wake-up: about 0.3 ms of CPU on this project's VM (a dozen system calls: zmq_poll checks each socket),
 * so a thousand nodes of a simulation that each wake every 0.2 s keep two cores busy (1.5 ms of CPU per node
 * and second, measured on a 1000-node ring), starving the one node that computes. A message still ends the
 * wait at once, and so does a retransmission's timer; only deadlines and followed endpoint files are noticed
 * up to a few seconds later. A node queued for a compute slot polls the slots' locks, which no message
 * announces: that wait is scaled at most 5 times (pft_node__slot_scale). */
int pft_node__turn_scale(size_t n)
{
    size_t s = n <= 64 ? 1 : (n + 63) / 64;
    return s > 25 ? 25 : (int)s;
}

int pft_node__slot_scale(size_t n)
{
    int s = pft_node__turn_scale(n);
    return s > 5 ? 5 : s;
}

int pft_node__loop_until(node_t *nd, pft_node__cond_fn cond, void *ctx, int timeout_ms)
{
    return pft_node__loop_every(nd, cond, ctx, timeout_ms * (nd->turn_scale > 1 ? nd->turn_scale : 1));
}

int pft_node__loop_every(node_t *nd, pft_node__cond_fn cond, void *ctx, int timeout_ms)
{
    for (;;) {
        if (nd->fatal)
            return pft_err(nd->fatal, "%s", nd->fatal_msg);
        int c = cond(nd, ctx);
        if (c != 0)
            return c < 0 ? c : 0;
        if (pft_node__stopping())
            return pft_err(PFT_EINTR, "interrupted (%.*s)", (int)strcspn(nd->status, "\n"), nd->status);
        int rc = pft_transport_poll(nd->hand.tp, timeout_ms);
        chores(nd);
        if (rc == PFT_EINTR && pft_node__stopping())
            return pft_err(PFT_EINTR, "interrupted (%.*s)", (int)strcspn(nd->status, "\n"), nd->status);
        if (rc && rc != PFT_EINTR)
            return pft_err_wrap(rc, "transport");
    }
}

void pft_node__loop_yield(void *ctx)
{
    node_t *nd = ctx;
    if (!nd->hand.tp)
        return;
    (void)pft_transport_poll(nd->hand.tp, 0); /* a failure here shows again in the next wait */
    chores(nd);
}
