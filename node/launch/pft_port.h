/* pft_port: a fixed TCP port on 127.0.0.1 for local simulations, probed and held by a listening socket until
 * its node takes it over (--listen-fd). Ports left open are bound by the nodes themselves. */
#ifndef PFT_PORT_H
#define PFT_PORT_H

/* 0 if a listener could bind 127.0.0.1:port now (SO_REUSEADDR, as libzmq binds: a TIME_WAIT connection does
 * not count), else -1 with errno set; port 0: the kernel's choice. The socket (close-on-exec) is left
 * listening in *fd (-1 if none): two sockets with SO_REUSEADDR may bind one port while neither listens, so
 * only a listener keeps the next probe off it. */
int pft_port_probe(int port, int *fd);

#endif
