/* pft_node_setup: what a peer needs before its first stage: data, keys, listening socket, peers and slots. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_log.h"
#include "pft_npy.h"
#include "pft_topo_rules.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int pft_node__setup_rules(node_t *nd)
{
    const pft_topo_facts_t facts = {.insecure = nd->args->insecure};
    int rc = pft_topo_rules_check(nd->topo, &facts, NULL, &nd->sec.plan); /* the plan the rules checked */
    return rc ? pft_err_wrap(rc, "%s", nd->args->topology) : 0;
}

/* path made absolute against the current folder (the topology's own paths resolve against its folder). */
static char *absolute(const char *path)
{
    if (path[0] == '/')
        return pft_strdup(path);
    char cwd[4096];
    return getcwd(cwd, sizeof cwd) ? pft_fsio_join(cwd, path) : NULL;
}

int pft_node__setup_own_files(node_t *nd)
{
    const pft_node_args_t *a = nd->args;
    const char *names[4] = {"train", "labels", "test", "test_labels"};
    const char *given[4] = {a->train, a->labels, a->test, a->test_labels};
    char *abs[4] = {NULL, NULL, NULL, NULL};
    const char *kv[9];
    int m = 0, rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++) {
        if (!given[i])
            continue;
        if (!(abs[i] = absolute(given[i])))
            rc = pft_err(PFT_ENOMEM, "out of memory");
        kv[m++] = names[i];
        kv[m++] = abs[i];
    }
    kv[m] = NULL;
    if (rc == 0 && m > 0 && (rc = pft_topo_set_node_attrs(nd->topo, a->id, kv)) != 0)
        pft_err_wrap(rc, "node '%s''s own files", a->id);
    for (int i = 0; i < 4; i++)
        pft_free(abs[i]);
    return rc;
}

/* Loads train/test/eval and applies the run's prep; sets n_classes, own_counts and the head rows' width.
 * Returns 0 or an error code (PFT_EINVAL for inconsistent files, PFT_ENOMEM). */
int pft_node__setup_data(node_t *nd)
{
    pft_prep_t prep = (pft_prep_t)nd->run->prep;
    if (nd->me->has_data && !nd->me->train)
        return pft_err(
            PFT_EINVAL,
            "node '%s' has no training data here: give --train and --labels (or train and labels in "
            "--node-file); the topology names no file for it",
            nd->me->id);
    int rc = nd->me->has_data ? pft_npy_load_dataset(nd->me->train, nd->me->labels, 0, &nd->train) : 0;
    if (rc == 0 && nd->me->test)
        rc = pft_npy_load_dataset(nd->me->test, nd->me->test_labels, 0, &nd->test);
    if (rc == 0)
        rc = pft_node__eval_setup(nd); /* checked now, read in blocks when the head is scored */
    if (rc)
        return rc;
    if (!nd->me
             ->has_data) { /* an aggregator: no rows of its own; the test data tells the feature dimension */
        if (!nd->test && !nd->eval.y)
            return pft_err(PFT_EINVAL,
                           "node '%s' has data = false: it needs a test set (test, test_labels) or "
                           "--eval-features to know the feature dimension and to evaluate its head",
                           nd->me->id);
        nd->train = nd->test ? pft_dataset_new(0, pft_dataset_d(nd->test), pft_dataset_n_classes(nd->test))
                             : pft_dataset_new(0, nd->eval.d, nd->eval.classes);
        if (!nd->train)
            return pft_err(PFT_ENOMEM, "out of memory");
    }
    int d = pft_dataset_d(nd->train);
    if (nd->test && pft_dataset_d(nd->test) != d)
        return pft_err(PFT_EINVAL, "%s has %d columns but %s has %d", nd->me->test, pft_dataset_d(nd->test),
                       nd->me->train, d);
    if (nd->eval.y && nd->eval.d != d)
        return pft_err(PFT_EINVAL, "%s has %d columns but %s has %d", nd->args->eval_features, nd->eval.d,
                       nd->me->train, d);
    rc = pft_dataset_apply_prep(nd->train, prep);
    if (rc == 0 && nd->test)
        rc = pft_dataset_apply_prep(nd->test, prep);
    if (rc)
        return rc;
    nd->n_classes = pft_dataset_n_classes(nd->train);
    if (nd->test && pft_dataset_n_classes(nd->test) > nd->n_classes)
        nd->n_classes = pft_dataset_n_classes(nd->test);
    if (nd->eval.y && nd->eval.classes > nd->n_classes)
        nd->n_classes = nd->eval.classes;
    nd->own_counts = pft_calloc((size_t)nd->n_classes, sizeof *nd->own_counts);
    if (!nd->own_counts)
        return pft_err(PFT_ENOMEM, "out of memory");
    int *tmp = pft_calloc((size_t)pft_dataset_n_classes(nd->train), sizeof *tmp);
    if (!tmp)
        return pft_err(PFT_ENOMEM, "out of memory");
    pft_dataset_class_counts(nd->train, tmp);
    for (int c = 0; c < pft_dataset_n_classes(nd->train); c++)
        nd->own_counts[c] = tmp[c];
    pft_free(tmp);
    nd->head.rows.d = d;
    pft_info("data: %d training rows, %d classes, d=%d, prep %s%s%s", pft_dataset_n(nd->train),
             pft_dataset_n_classes(nd->train), d, pft_prep_name(prep), nd->test ? ", own test split" : "",
             nd->args->eval_features ? ", global test set" : "");
    return 0;
}

/* out/endpoint (before any wait: predecessors may need it), inbound slots (one per hand-off to this node) and
 * outbound peers. */
int pft_node__setup_io(node_t *nd)
{
    const pft_handoff_t *h;
    size_t nh = pft_topo_handoffs(nd->topo, &h);
    if (pft_node__endpoint_publish(nd) != 0)
        return PFT_EIO;
    for (size_t i = 0; i < pft_topo_node_count(nd->topo); i++)
        if (pft_topo_node(nd->topo, i)->role == PFT_ROLE_PRODUCER)
            nd->hand.complete_producer = pft_topo_node(nd->topo, i)->id;
    nd->hand.in = pft_calloc(nh + 1, sizeof *nd->hand.in);
    nd->hand.out = pft_calloc((nh + 1) * (nd->me->n_fallbacks + 1), sizeof *nd->hand.out);
    if (!nd->hand.in || !nd->hand.out)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; i < nh; i++) {
        if (h[i].to != nd->my_index)
            continue;
        inbound_t *s = &nd->hand.in[nd->hand.n_in++];
        s->handoff = i;
        s->from = pft_topo_node(nd->topo, h[i].from)->id;
        s->complete = h[i].complete;
        s->producer = h[i].complete && nd->hand.complete_producer ? nd->hand.complete_producer : s->from;
        const pft_topo_edge_t *e = pft_topo_edge_find(nd->topo, h[i].from, h[i].to);
        s->deadline = nd->t_start + (e ? e->deadline : nd->run->deadline);
        if (nd->hand.keys) { /* only predecessors may connect (ZAP) */
            uint8_t curve[PFT_KEY_CURVE_LEN];
            pft_pubkey_curve(&nd->hand.keys[h[i].from], curve);
            int rc = pft_transport_allow_key(nd->hand.tp, curve, s->from);
            if (rc)
                return pft_err_wrap(rc, "allowing %s's key", s->from);
        }
    }
    for (size_t i = 0; i < nh; i++) {
        if (h[i].from != nd->my_index)
            continue;
        const pft_topo_node_t *peer = pft_topo_node(nd->topo, h[i].to);
        uint8_t curve[PFT_KEY_CURVE_LEN];
        if (nd->hand.keys)
            pft_pubkey_curve(&nd->hand.keys[peer->index], curve);
        int rc = pft_node__endpoint_add_peer(nd, peer, nd->hand.keys ? curve : NULL);
        if (rc &&
            rc != PFT_EINVAL) /* EINVAL: already added (a ring or mesh may send on both laps to one node) */
            return pft_err_wrap(rc, "connecting to %s at %s", peer->id, peer->endpoint);
    }
    for (size_t i = 0; i < nd->me->n_fallbacks;
         i++) { /* used only if a primary successor stays unreachable */
        const pft_topo_node_t *peer = pft_topo_node(nd->topo, nd->me->fallbacks[i]);
        uint8_t curve[PFT_KEY_CURVE_LEN];
        if (nd->hand.keys)
            pft_pubkey_curve(&nd->hand.keys[peer->index], curve);
        int rc = pft_node__endpoint_add_peer(nd, peer, nd->hand.keys ? curve : NULL);
        if (rc && rc != PFT_EINVAL)
            return pft_err_wrap(rc, "connecting to fallback %s at %s", peer->id, peer->endpoint);
    }
    for (size_t i = 0; nd->hand.keys && i < nd->me->n_fallback_preds; i++) {
        const pft_topo_node_t *q = pft_topo_node(nd->topo, nd->me->fallback_preds[i]);
        uint8_t curve[PFT_KEY_CURVE_LEN];
        pft_pubkey_curve(&nd->hand.keys[q->index], curve);
        int rc = pft_transport_allow_key(nd->hand.tp, curve, q->id);
        if (rc)
            return pft_err_wrap(rc, "allowing %s's key", q->id);
    }
    return 0;
}

/* A socket handed over with --listen-fd must be a listening TCP socket on the port of the node's endpoint. */
int pft_node__setup_listen_fd(int fd, const char *endpoint)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int listening = 0, port = -1;
    socklen_t ol = sizeof listening;
    const char *colon = endpoint ? strrchr(endpoint, ':') : NULL;
    if (colon)
        port = atoi(colon + 1);
    if (getsockname(fd, (struct sockaddr *)&a, &len) != 0 || a.sin_family != AF_INET)
        return pft_err(PFT_ENET, "--listen-fd %d: not an IPv4 socket (%s)", fd, strerror(errno));
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) != 0 || !listening)
        return pft_err(PFT_ENET, "--listen-fd %d: the socket is not listening", fd);
    if (ntohs(a.sin_port) != port)
        return pft_err(PFT_ENET, "--listen-fd %d: the socket is bound to port %d, the endpoint %s says %d",
                       fd, ntohs(a.sin_port), endpoint ? endpoint : "(none)", port);
    return 0;
}

/* Keys: this node's keypair and every node's public key; CURVE keys for the transport. Without keys in the
 * topology the node runs only with --insecure (plain text, unsigned bundles), and says so; with keys in it
 * --insecure is refused (PFT_ETOPO: exit 3). */
int pft_node__setup_keys(node_t *nd, pft_transport_opts_t *to, uint8_t cpub[PFT_KEY_CURVE_LEN],
                         uint8_t csec[PFT_KEY_CURVE_LEN])
{
    if (nd->args->insecure) {
        for (size_t i = 0; i < pft_topo_node_count(nd->topo); i++) {
            const pft_topo_node_t *n = pft_topo_node(nd->topo, i);
            if (n->key) /* keys in the topology mean keys are required: no plain-text fallback */
                return pft_err(
                    PFT_ETOPO,
                    "--insecure refused: the topology names keys (node '%s': key = \"%s\"), so its "
                    "nodes accept only CURVE connections and signed bundles; run without --insecure",
                    n->id, n->key);
        }
        pft_warn("--insecure: connections are plain text and bundles are neither signed nor verified");
        return 0;
    }
    if (!nd->me->key)
        return pft_err(PFT_EAUTH,
                       "the topology names no key for node '%s'; give every node a key (pftnet keygen) "
                       "or run with --insecure",
                       nd->me->id);
    size_t nn = pft_topo_node_count(nd->topo);
    nd->hand.keys = pft_calloc(nn, sizeof *nd->hand.keys);
    if (!nd->hand.keys)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; i < nn; i++) {
        const pft_topo_node_t *n = pft_topo_node(nd->topo, i);
        int rc = n->key ? pft_pubkey_resolve(n->key, &nd->hand.keys[i]) : pft_err(PFT_EAUTH, "no key");
        if (rc)
            return pft_err_wrap(PFT_EAUTH, "public key of node '%s'", n->id);
    }
    char *secret = NULL;
    if (nd->args->key)
        secret = pft_strdup(nd->args->key);
    else {
        size_t len = strlen(nd->me->key);
        if (len > 4 && strcmp(nd->me->key + len - 4, ".pub") == 0 && (secret = pft_strdup(nd->me->key)))
            strcpy(secret + len - 4, ".key");
    }
    if (!secret)
        return pft_err(PFT_EAUTH, "no secret key: give --key FILE");
    int rc = pft_keypair_load(secret, &nd->hand.kp);
    pft_free(secret);
    if (rc)
        return rc;
    if (!pft_pubkey_equal(pft_keypair_public(nd->hand.kp), &nd->hand.keys[nd->my_index])) {
        char a[PFT_KEY_FINGERPRINT_LEN + 1], b[PFT_KEY_FINGERPRINT_LEN + 1];
        return pft_err(PFT_EAUTH, "the secret key (%s) does not belong to node '%s''s public key (%s)",
                       pft_pubkey_fingerprint(pft_keypair_public(nd->hand.kp), a), nd->me->id,
                       pft_pubkey_fingerprint(&nd->hand.keys[nd->my_index], b));
    }
    if ((rc = pft_keypair_curve(nd->hand.kp, cpub, csec)))
        return rc;
    to->curve_public_key = cpub;
    to->curve_secret_key = csec;
    char fp[PFT_KEY_FINGERPRINT_LEN + 1];
    pft_info("key %s: CURVE-encrypted connections, signed bundles",
             pft_pubkey_fingerprint(pft_keypair_public(nd->hand.kp), fp));
    return 0;
}

int pft_node__setup_lock(node_t *nd)
{
    if (pft_fsio_mkdirs(nd->args->out_dir) != 0)
        return PFT_EIO;
    long holder = 0;
    int rc = pft_dirlock_take(nd->args->out_dir, "lock", &nd->lock, &holder);
    if (rc == PFT_EUNSUPPORTED) {
        char pid[32] = "unknown";
        if (holder > 0)
            snprintf(pid, sizeof pid, "%ld", holder);
        return pft_err(rc, "%s is held by another pftnode (pid %s) using this output folder",
                       nd->args->out_dir, pid);
    }
    if (rc == 0)
        pft_node__endpoint_forget(nd); /* an earlier instance's: its port is gone */
    return rc;
}
