/* pft_e2e: helpers for the end-to-end tests that play a peer themselves (held ports, send completion). */
#ifndef PFT_E2E_H
#define PFT_E2E_H

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_dataset.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_keys.h"
#include "pft_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
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

/* Polls t until send h ends or max_ms pass; returns its state. */
static inline int pft_e2e_settle(pft_transport_t *t, int h, int max_ms)
{
    for (int waited = 0; waited < max_ms; waited += 50) {
        int st = pft_transport_send_state(t, h, NULL, NULL);
        if (st != PFT_SEND_PENDING)
            return st;
        pft_transport_poll(t, 50);
    }
    return pft_transport_send_state(t, h, NULL, NULL);
}

/* A bundle of run `run` from producer "p": per class a diag K=1 GMM of its first `rows` rows, standing for
 * `rows` rows; signed with kp unless kp is NULL. Wire bytes in *buf (pft_free). */
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
    if (rc == 0 && kp)
        rc = pft_keys_sign_bundle(kp, b);
    if (rc == 0)
        rc = pft_bundle_encode(b, buf, len);
    pft_bundle_destroy(&b);
    return rc;
}

#endif
