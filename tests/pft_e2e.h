/* pft_e2e: helpers for the end-to-end tests that play a peer themselves (held ports, send completion). */
#ifndef PFT_E2E_H
#define PFT_E2E_H

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_dataset.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_keys.h"
#include "pft_topo.h"
#include "pft_topo_fingerprint.h"
#include "pft_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <string.h>
#include <unistd.h>

#define EXAMPLE_DATA PFT_SOURCE_DIR "/examples/data/pacs-small"

/* A TCP port on 127.0.0.1 that the kernel chose and that stays taken: *fd is a socket bound to it and
 * listening, held by the caller (close it when done), to hand to the process under test (pftnode --listen-fd,
 * or a transport's opts.listen_fd), so that no other process can take the port in between. -1 on failure. */
static inline int pft_e2e_hold_port(int *fd)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    if (*fd < 0 || bind(*fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(*fd, 64) != 0 ||
        getsockname(*fd, (struct sockaddr *)&a, &alen) != 0) {
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        return -1;
    }
    return ntohs(a.sin_port);
}

/* The endpoint a node reports in the file at path (its first line), waited for up to 120 s: 0, or -1. */
static inline int pft_e2e_wait_endpoint(const char *path, char *ep, size_t cap)
{
    for (int i = 0; i < 12000; i++) {
        FILE *f = fopen(path, "r");
        if (f) {
            int ok = fgets(ep, (int)cap, f) != NULL;
            fclose(f);
            ep[strcspn(ep, "\r\n")] = '\0';
            if (ok && ep[0])
                return 0;
        }
        usleep(10000);
    }
    return -1;
}

/* The bound of a wait for a node's process or a hand-off: only against a hang, never a verdict on speed (a
 * node under a CPU hog may take minutes where it takes seconds on a quiet machine; tests/README.md). */
#define PFT_E2E_HANG_MS (20 * 60 * 1000)

/* Polls t until send h ends or max_ms of wall time pass; returns its state. */
static inline int pft_e2e_settle(pft_transport_t *t, int h, int max_ms)
{
    int64_t end = pft_transport_now_ms() + max_ms;
    while (pft_transport_now_ms() < end) {
        int st = pft_transport_send_state(t, h, NULL, NULL);
        if (st != PFT_SEND_PENDING)
            return st;
        pft_transport_poll(t, 50);
    }
    return pft_transport_send_state(t, h, NULL, NULL);
}

/* Waits for child pid to exit, serving t (if any) meanwhile, at most PFT_E2E_HANG_MS, then kills it; its wait
 * status. */
static inline int pft_e2e_wait_child(pid_t pid, pft_transport_t *t)
{
    int status = 0;
    int64_t end = pft_transport_now_ms() + PFT_E2E_HANG_MS;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (pft_transport_now_ms() >= end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        if (t)
            pft_transport_poll(t, 100);
        else
            usleep(100000);
    }
    return status;
}

/* The topology fingerprint the bundles a test makes carry, as pftnode's carry theirs (NULL: none). */
static pft_topo_fp_t *pft_e2e_fp;

/* Sets pft_e2e_fp from the topology t, every node's key resolved as pftnode resolves them; 0 or an error. */
static inline int pft_e2e_use_topo(const pft_topo_t *t)
{
    size_t n = pft_topo_node_count(t);
    pft_pubkey_t *keys = pft_calloc(n, sizeof *keys);
    const uint8_t **ptr = pft_calloc(n, sizeof *ptr);
    int rc = keys && ptr ? 0 : PFT_ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *key = pft_topo_node(t, i)->key;
        rc = key ? pft_pubkey_resolve(key, &keys[i]) : 0;
        ptr[i] = key ? keys[i].bytes : NULL;
    }
    pft_topo_fp_destroy(&pft_e2e_fp);
    if (rc == 0)
        rc = pft_topo_fp_new(t, ptr, &pft_e2e_fp);
    pft_free(keys);
    pft_free(ptr);
    return rc;
}

/* The same from the topology file at path. */
static inline int pft_e2e_use_topology(const char *path)
{
    pft_topo_t *t = NULL;
    int rc = pft_topo_load(path, PFT_TOPO_SKIP_DATA_CHECK, &t);
    if (rc == 0)
        rc = pft_e2e_use_topo(t);
    pft_topo_destroy(&t);
    return rc;
}

/* Stamps b with pft_e2e_fp (before signing); 0 without one. */
static inline int pft_e2e_stamp(pft_bundle_t *b)
{
    if (!pft_e2e_fp)
        return 0;
    const pft_topo_fp_item_t *mine;
    size_t n = pft_topo_fp_items(pft_e2e_fp, &mine);
    pft_bundle_fp_item_t *items = pft_calloc(n ? n : 1, sizeof *items);
    if (!items)
        return PFT_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        snprintf(items[i].name, sizeof items[i].name, "%s", mine[i].name);
        memcpy(items[i].digest, mine[i].digest, PFT_BUNDLE_FP_DIGEST_LEN);
    }
    int rc = pft_bundle_set_fingerprint(b, pft_topo_fp_hash(pft_e2e_fp), items, n);
    pft_free(items);
    return rc;
}

/* A bundle of run `run` from producer "p": per class a diag K=1 GMM of its first `rows` rows, standing for
 * `rows` rows; stamped with pft_e2e_fp if set; signed with kp unless kp is NULL. Wire bytes in *buf
 * (pft_free). */
static inline int pft_e2e_make_bundle(const char *run, const pft_dataset_t *ds, int rows,
                                      const pft_keypair_t *kp, uint8_t **buf, size_t *len)
{
    pft_bundle_t *b = pft_bundle_new(run, "p", PFT_DTYPE_F16, pft_dataset_d(ds));
    pft_gmm_opts_t go;
    pft_gmm_opts_default(&go);
    go.k = 1;
    int rc = b ? 0 : PFT_ENOMEM;
    for (int c = 0; c < pft_dataset_n_classes(ds) && rc == 0; c++) {
        float *x = NULL;
        int n = 0;
        pft_gmm_t *g = NULL;
        rc = pft_dataset_gather_class(ds, c, &x, &n);
        if (rc == 0)
            rc = pft_gmm_fit(x, n > rows ? rows : n, pft_dataset_d(ds), &go, &g, NULL);
        if (rc == 0)
            rc = pft_bundle_add_class(b, c, (uint64_t)rows, &g);
        if (rc == 0)
            rc = pft_bundle_prov_add(b, "p", c, (uint64_t)rows);
        pft_gmm_destroy(&g);
        pft_free(x);
    }
    if (rc == 0)
        rc = pft_e2e_stamp(b);
    if (rc == 0 && kp)
        rc = pft_keys_sign_bundle(kp, b);
    if (rc == 0)
        rc = pft_bundle_encode(b, buf, len);
    pft_bundle_destroy(&b);
    return rc;
}

#endif
