/* pft_node_endpoint: where a peer listens and where its successors do: its bound endpoint written to
 * out/endpoint, and the endpoints of successors whose port the topology leaves open (tcp://HOST:0 or :*),
 * read from <peers_dir>/<id>/endpoint and followed when a successor restarts on another port. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_log.h"
#include "pft_topo_attr.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define LOOK_EVERY_S 0.2 /* successors' endpoint files are read at most this often */

int pft_node__endpoint_publish(node_t *nd)
{
    const char *ep = pft_transport_endpoint(nd->hand.tp);
    char *path = pft_fsio_join(nd->args->out_dir, "endpoint");
    char line[300];
    int n = snprintf(line, sizeof line, "%s\n", ep);
    int rc = path ? pft_fsio_write_atomic(path, line, (size_t)n) : pft_err(PFT_ENOMEM, "out of memory");
    if (rc)
        pft_err_wrap(rc, "writing %s", path ? path : "out/endpoint");
    pft_free(path);
    return rc;
}

void pft_node__endpoint_forget(const node_t *nd)
{
    char *path = pft_fsio_join(nd->args->out_dir, "endpoint");
    if (path && remove(path) != 0 && errno != ENOENT)
        pft_warn("removing %s: %s", path, strerror(errno));
    pft_free(path);
}

/* Successor id's endpoint file, read into buf (its first line; "" if absent, unreadable or not an endpoint
 * a peer can connect to). */
static void read_endpoint(const node_t *nd, const char *id, char *buf, size_t cap)
{
    char name[300];
    snprintf(name, sizeof name, "%s/endpoint", id);
    char *path = nd->args->peers_dir ? pft_fsio_join(nd->args->peers_dir, name) : NULL;
    uint8_t *text = NULL;
    size_t len = 0;
    buf[0] = '\0';
    if (path && pft_fsio_exists(path) && pft_fsio_read(path, 1024, &text, &len) == 0) {
        snprintf(buf, cap, "%.*s", (int)strcspn((char *)text, "\r\n"), (char *)text);
        if (pft_topo_endpoint_check(buf) != 0 || pft_topo_endpoint_open(buf))
            buf[0] = '\0';
    }
    pft_free(text);
    pft_free(path);
}

/* Points the transport at each open successor's endpoint as its file now says (a restarted successor
 * rewrites it). */
static void follow(node_t *nd)
{
    for (size_t i = 0; i < nd->hand.n_open; i++) {
        open_peer_t *p = &nd->hand.open[i];
        char ep[sizeof p->ep];
        read_endpoint(nd, p->id, ep, sizeof ep);
        if (!ep[0] || strcmp(ep, p->ep) == 0)
            continue;
        int rc = pft_transport_set_peer_endpoint(nd->hand.tp, p->id, ep);
        if (rc) {
            pft_warn("%s reports endpoint %s: %s", p->id, ep, pft_errmsg());
            continue;
        }
        pft_info("%s %s %s (from %s/%s/endpoint)", p->id, p->ep[0] ? "moved to" : "listens on", ep,
                 nd->args->peers_dir, p->id);
        snprintf(p->ep, sizeof p->ep, "%s", ep);
    }
}

int pft_node__endpoint_add_peer(node_t *nd, const pft_topo_node_t *peer, const uint8_t *curve)
{
    if (!pft_topo_endpoint_open(peer->endpoint))
        return pft_transport_add_peer(nd->hand.tp, peer->id, peer->endpoint, curve);
    for (size_t i = 0; i < nd->hand.n_open; i++)
        if (strcmp(nd->hand.open[i].id, peer->id) == 0)
            return PFT_EINVAL; /* added already, as pft_transport_add_peer says */
    if (!nd->args->peers_dir)
        return pft_err(PFT_ETOPO,
                       "%s's endpoint %s leaves the port open: it is read from <peers-dir>/%s/endpoint, "
                       "and there is no --peers-dir",
                       peer->id, peer->endpoint, peer->id);
    open_peer_t *grown = pft_realloc(nd->hand.open, (nd->hand.n_open + 1) * sizeof *grown);
    if (!grown)
        return pft_err(PFT_ENOMEM, "out of memory");
    nd->hand.open = grown;
    int rc = pft_transport_add_peer(nd->hand.tp, peer->id, NULL, curve);
    if (rc)
        return rc;
    open_peer_t *p = &nd->hand.open[nd->hand.n_open++];
    p->id = peer->id;
    p->ep[0] = '\0';
    follow(nd);
    if (!p->ep[0])
        pft_info("%s binds a port of its own: waiting for %s/%s/endpoint", peer->id, nd->args->peers_dir,
                 peer->id);
    return 0;
}

void pft_node__endpoint_tick(node_t *nd)
{
    double now = pft_fsio_now();
    if (!nd->hand.n_open || now - nd->hand.open_looked < LOOK_EVERY_S)
        return;
    nd->hand.open_looked = now;
    follow(nd);
}
