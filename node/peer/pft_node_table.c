/* pft_node_table: the peer's ops tables (nng's transports, VLFeat's families): the knowledge methods and the
 * heads, each an entry defined in its own file, chosen once per run from the topology. Adding a head: its
 * file (pft_node_head_<name>.c defining pft_node__head_<name>), its name in pft_topo.h's PFT_TOPO_HEADS, its
 * line below (docs/DESIGN.md, "How to add a head"). */
#include "pft_node_internal.h"

#include <stddef.h>

extern const pft_node_head_t pft_node__head_logreg, pft_node__head_gaussian, pft_node__head_ncm;

static const pft_node_head_t *const s_heads[] = {
    [PFT_TOPO_HEAD_LOGREG] = &pft_node__head_logreg,
    [PFT_TOPO_HEAD_GAUSSIAN] = &pft_node__head_gaussian,
    [PFT_TOPO_HEAD_NCM] = &pft_node__head_ncm,
};

const pft_node_method_t *pft_node__table_method(const pft_topo_node_t *me)
{
    return me->exact ? &pft_node__method_exact : &pft_node__method_sampling;
}

const pft_node_head_t *pft_node__table_head(const pft_topo_node_t *me)
{
    if (me->head < 0 || (size_t)me->head >= sizeof s_heads / sizeof *s_heads)
        return NULL;
    return s_heads[me->head];
}
