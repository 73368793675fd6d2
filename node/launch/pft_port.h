/* pft_port: TCP ports on 127.0.0.1 for local simulations: probing a port, and picking a free one below the
 * kernel's ephemeral range, each held by a listening socket until its user takes it over. */
#ifndef PFT_PORT_H
#define PFT_PORT_H

/* 0 if a listener could bind 127.0.0.1:port now (SO_REUSEADDR, as libzmq binds: a TIME_WAIT connection does
 * not count), else -1 with errno set; port 0: the kernel's choice. The socket (close-on-exec) is left
 * listening in *fd (-1 if none): two sockets with SO_REUSEADDR may bind one port while neither listens, so
 * only a listener keeps the next probe off it. */
int pft_port_probe(int port, int *fd);

/* A free port on 127.0.0.1, at random below the ephemeral range when it can (a port there cannot be taken by
 * an outgoing connection, whose local port comes from that range), else the kernel's choice; -1 with errno
 * set if none. *fd is left listening on it (see pft_port_probe), so that no other process takes the port
 * until the caller closes or hands over *fd. */
int pft_port_pick(int *fd);

#endif
