/* pft_e2e: helpers shared by the end-to-end tests that play a peer themselves (ports, send completion). */
#ifndef PFT_E2E_H
#define PFT_E2E_H

#include "pft_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define EXAMPLE_DATA PFT_SOURCE_DIR "/examples/data/pacs-small"

/* A TCP port on 127.0.0.1 that was free a moment ago. */
static inline int pft_e2e_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
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

#endif
