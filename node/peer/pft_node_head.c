/* pft_node_head: a head's run, the same for every head of the table (pft_node_table.c): fit on the input the
 * method prepared (nd->head), write its files, score it on the test split and the evaluation set, describe it
 * in result.json. */
#include "pft_node_internal.h"

#include "pft_fsio.h"
#include "pft_log.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef PFT_TEST_HOOKS
/* Test hook: PFT_TEST_BUSY=<id>:<ms>[:deaf][:until=<path>] makes node <id> busy for ms before training its
 * head, yielding to the loop as training does (to test a successor that finishes first), or with :deaf not
 * yielding (a node whose computation leaves no chance to read an ACK: its successor must stay reachable for a
 * retransmission; it goes deaf once every body it sends has left). With :until=<path> (last), busy until the
 * file path exists, ms bounding the wait: a test ends the busy phase on a condition, not after a time.
 */
/* 1 when every send this node started has handed its body to libzmq at least once (a body over eager_bytes
 * waits for the receiver's grant, which only the loop reads). */
static int bodies_gone(const node_t *nd)
{
    pft_transport_stats_t st;
    pft_transport_stats(nd->hand.tp, &st);
    uint64_t started =
        st.acked + st.rejected_by_peer + st.failed + (uint64_t)pft_transport_pending(nd->hand.tp);
    return st.transmissions - st.retries >= started;
}

static void busy_point(node_t *nd)
{
    const char *a = pft_node__test_arg(nd, "PFT_TEST_BUSY");
    if (!a || *a != ':')
        return;
    int deaf = strstr(a + 1, ":deaf") != NULL;
    const char *until = strstr(a + 1, ":until=");
    until = until ? until + strlen(":until=") : NULL;
    pft_warn("test hook: busy for %g ms%s%s%s", atof(a + 1), deaf ? " without serving the transport" : "",
             until ? " or until this file exists: " : "", until ? until : "");
    double end = pft_fsio_now() + atof(a + 1) / 1000;
    /* deaf once what it sends has left: the test is of an ACK it cannot read, not of a body it never sent */
    while (deaf && nd->hand.tp && !bodies_gone(nd) && pft_fsio_now() < end)
        pft_node__loop_yield(nd);
    while (pft_fsio_now() < end) {
        if (until && pft_fsio_exists(until))
            break;
        usleep(50000);
        if (!deaf)
            pft_node__loop_yield(nd);
    }
}
#else
#define busy_point(nd) ((void)0)
#endif

int pft_node__head_train(node_t *nd, json_t *res)
{
    const pft_node_head_t *h = nd->head_ops;
    void *model = NULL;
    pft_node__set_status(nd, "training", NULL);
    busy_point(nd);
    int rc = h->fit(nd, &model);
    if (rc == 0)
        rc = h->write(nd, model);
    if (rc == 0)
        rc = pft_node__eval_score(nd, res, h->predict, model);
    if (rc == 0 && h->eval_more)
        rc = h->eval_more(nd, model, res);
    if (rc == 0)
        h->describe(nd, model, res);
    if (model)
        h->destroy(&model);
    return rc;
}
