/* pft_port: probing a TCP port on 127.0.0.1, held by a listening socket. */
#include "pft_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

int pft_port_probe(int port, int *fd)
{
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*fd < 0)
        return -1;
    int one = 1;
    setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    return bind(*fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(*fd, SOMAXCONN) == 0 ? 0 : -1;
}
