/* pft_port: probing and picking TCP ports on 127.0.0.1, each held by a listening socket. */
#include "pft_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int pft_port_probe(int port, int *fd)
{
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*fd < 0)
        return -1;
    int one = 1;
    setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    return bind(*fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(*fd, SOMAXCONN) == 0 ? 0 : -1;
}

/* The lowest port of the kernel's ephemeral range, 32768 if unknown. */
static int ephemeral_low(void)
{
    int lo = 32768, hi;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

int pft_port_pick(int *fd)
{
    static unsigned seed;
    if (!seed)
        seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    int lo = 10000, hi = ephemeral_low();
    for (int attempt = 0; hi - lo >= 1000 && attempt < 200; attempt++) {
        int port = lo + (int)(rand_r(&seed) % (unsigned)(hi - lo));
        if (pft_port_probe(port, fd) == 0)
            return port;
        if (*fd >= 0)
            close(*fd), *fd = -1;
    }
    if (pft_port_probe(0, fd) != 0) {
        if (*fd >= 0)
            close(*fd), *fd = -1;
        return -1;
    }
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    return getsockname(*fd, (struct sockaddr *)&a, &len) == 0 ? ntohs(a.sin_port) : -1;
}
