/* pft_launch_child: what the launcher keeps of one node (pft_launch_child_t): its id, refreshed from the
 * topology, and the fixed port it holds until the node takes it. Below the launch and its engines, which all
 * use it. */
#include "pft_launch_int.h"

#include <unistd.h>

void pft_launch__refresh_ids(pft_launch_t *self)
{
    for (size_t i = 0; i < self->nn; i++)
        self->ch[i].id = pft_topo_node(self->topo, i)->id;
}

void pft_launch__close_port(pft_launch_child_t *c)
{
    if (c->listen_fd >= 0)
        close(c->listen_fd);
    c->listen_fd = -1;
}
