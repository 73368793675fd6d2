/* pft_topo_validate: checks of simulation attributes, endpoints, node data files and keys. */
#include "pft_topo.h"

#include "pft_alloc.h"
#include "pft_dotscan.h"
#include "pft_error.h"
#include "pft_topo_attr.h"
#include "pft_topo_internal.h"

#include <cgraph.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Simulation attributes: only with dataset, consistent with the partition. */
int pft_topo__check_simulation(const pft_topo_t *t, pft_topo__model_t *m)
{
    pft_topo_run_t *run = &m->run;
    static const char *const graph_only_sim[] = {"partition", "samples"};
    static const char *const node_only_sim[] = {"samples", "domain", "classes"};
    if (!run->dataset) {
        for (size_t i = 0; i < 2; i++)
            if (pft_topo__get_value(t->g, t->g, AGRAPH, graph_only_sim[i]))
                return pft_topo__fail_at(
                    t, pft_dotscan_graph_attr_line(t->scan, graph_only_sim[i]), PFT_ETOPO,
                    "graph attribute '%s' only applies to simulations (set graph attribute dataset)",
                    graph_only_sim[i]);
        for (size_t v = 0; v < m->n; v++)
            for (size_t i = 0; i < 3; i++)
                if (pft_topo__get_value(t->g, m->agn[v], AGNODE, node_only_sim[i]))
                    return pft_topo__fail_at(
                        t, pft_dotscan_node_attr_line(t->scan, pft_topo__node_id(m, v), node_only_sim[i]),
                        PFT_ETOPO,
                        "node '%s': '%s' only applies to simulations (set graph attribute dataset)",
                        pft_topo__node_id(m, v), node_only_sim[i]);
        return 0;
    }
    int part_line = pft_dotscan_graph_attr_line(t->scan, "partition");
    size_t n_data = 0;
    for (size_t v = 0; v < m->n; v++)
        n_data += m->nodes[v].has_data != 0;
    if (n_data == 0)
        return pft_topo__fail_at(t, part_line, PFT_ETOPO,
                                 "every node has data = false: there is nothing to partition");
    if (run->part_kind == PFT_TOPO_PART_LABELS && run->part_ranges && (size_t)run->part_ranges != n_data)
        return pft_topo__fail_at(t, part_line, PFT_ETOPO,
                                 "partition=%s lists %d class ranges but the graph has %zu nodes with data "
                                 "(node i, in file order, takes the i-th)",
                                 run->partition, run->part_ranges, n_data);
    for (size_t v = 0; v < m->n; v++) {
        pft_topo_node_t *nd = &m->nodes[v];
        if (nd->domain >= 0 && run->part_kind != PFT_TOPO_PART_DOMAIN) /* lines looked up on failure only */
            return pft_topo__fail_at(t, pft_dotscan_node_attr_line(t->scan, nd->id, "domain"), PFT_ETOPO,
                                     "node '%s': 'domain' needs graph attribute partition=domain", nd->id);
        if (nd->classes && run->part_kind != PFT_TOPO_PART_LABELS)
            return pft_topo__fail_at(t, pft_dotscan_node_attr_line(t->scan, nd->id, "classes"), PFT_ETOPO,
                                     "node '%s': 'classes' needs graph attribute partition=labels", nd->id);
        if (run->part_kind == PFT_TOPO_PART_DOMAIN && nd->domain < 0)
            return pft_topo__fail_at(t, nd->line, PFT_ETOPO, "node '%s' has no 'domain' (partition=domain)",
                                     nd->id);
        if (run->part_kind == PFT_TOPO_PART_LABELS && !nd->classes) {
            char range[256];
            if (!run->part_ranges)
                return pft_topo__fail_at(t, nd->line, PFT_ETOPO,
                                         "node '%s' has no 'classes' (partition=labels without ranges)",
                                         nd->id);
            if (pft_topo_partition_range(run->partition, (int)v, range, sizeof range) ||
                !(nd->classes = pft_strdup(range)))
                return pft_err(PFT_ENOMEM, "out of memory");
        }
    }
    if (t->flags & PFT_TOPO_SKIP_DATA_CHECK)
        return 0;
    static const char *const files[] = {"train_x.npy", "train_y.npy",      "test_x.npy",
                                        "test_y.npy",  "train_domain.npy", "test_domain.npy"};
    size_t nf = run->part_kind == PFT_TOPO_PART_DOMAIN ? 6 : 4;
    for (size_t i = 0; i < nf; i++) {
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/%s", run->dataset, files[i]);
        if (access(p, R_OK) != 0)
            return pft_topo__fail_at(t, pft_dotscan_graph_attr_line(t->scan, "dataset"), PFT_ETOPO,
                                     "dataset %s: cannot read %s (%s)%s", run->dataset, files[i],
                                     strerror(errno), i >= 4 ? "; partition=domain needs it" : "");
    }
    return 0;
}

int pft_topo__check_endpoints(const pft_topo_t *t, pft_topo__model_t *m)
{
    pft_topo_run_t *run = &m->run;
    m->auto_ep = pft_calloc(m->n, 1);
    if (!m->auto_ep)
        return pft_err(PFT_ENOMEM, "out of memory");
    if (run->port_base && (size_t)run->port_base + m->n - 1 > 65535)
        return pft_topo__fail_at(t, pft_dotscan_graph_attr_line(t->scan, "port_base"), PFT_ETOPO,
                                 "port_base=%d: %zu nodes need ports up to %zu, beyond 65535", run->port_base,
                                 m->n, (size_t)run->port_base + m->n - 1);
    int required = pft_topo__need_public(t, m);
    for (size_t v = 0; v < m->n; v++) {
        pft_topo_node_t *nd = &m->nodes[v];
        if (!nd->endpoint && run->port_base) {
            char ep[64];
            snprintf(ep, sizeof ep, "tcp://127.0.0.1:%zu", (size_t)run->port_base + v);
            if (!(nd->endpoint = pft_strdup(ep)))
                return pft_err(PFT_ENOMEM, "out of memory");
            m->auto_ep[v] = 1;
        }
        if (!nd->endpoint && required)
            return pft_topo__fail_at(
                t, nd->line, PFT_ETOPO,
                "node '%s' has no endpoint: set endpoint=\"tcp://HOST:PORT\" on it, or graph attribute "
                "port_base",
                nd->id);
    }
    for (size_t v = 0; v < m->n; v++)
        for (size_t w = 0; w < v; w++) {
            const char *a = m->nodes[v].endpoint, *b = m->nodes[w].endpoint;
            if (!a || !b || strcmp(a, b) != 0 || pft_topo_endpoint_open(a))
                continue; /* an open port is the node's own choice: two nodes never get the same */
            int line = m->auto_ep[v]
                           ? m->nodes[v].line
                           : pft_dotscan_node_attr_line(t->scan, pft_topo__node_id(m, v), "endpoint");
            char at[32] = "";
            int wline = m->auto_ep[w]
                            ? m->nodes[w].line
                            : pft_dotscan_node_attr_line(t->scan, pft_topo__node_id(m, w), "endpoint");
            if (wline)
                snprintf(at, sizeof at, " (line %d)", wline);
            return pft_topo__fail_at(
                t, line, PFT_ETOPO, "node '%s': endpoint %s is already used by node '%s'%s%s",
                pft_topo__node_id(m, v), a, pft_topo__node_id(m, w), at,
                m->auto_ep[v] || m->auto_ep[w] ? "; port_base gives node i the port port_base + i" : "");
        }
    return 0;
}

/* 1 if the public facts every node needs of the others must be in the file (an endpoint on every node, every
 * node's key or none): a resolved copy, or a file the organisations share; not a launcher's, which assigns
 * endpoints and makes keys itself, nor a simulation's before the launcher resolved it. */
int pft_topo__need_public(const pft_topo_t *t, const pft_topo__model_t *m)
{
    if (t->flags & PFT_TOPO_REQUIRE_RESOLVED)
        return 1;
    return !m->run.dataset && !(t->flags & PFT_TOPO_LAUNCH);
}

/* Node data files, which are private: a node's files are named by its own command line (or its entry, for a
 * local simulation), so only a launcher that runs every node of a file without dataset requires them; named
 * files must come in pairs, and are checked to exist unless PFT_TOPO_SKIP_DATA_CHECK. */
int pft_topo__check_data(const pft_topo_t *t, pft_topo__model_t *m)
{
    int required = !m->run.dataset && (t->flags & PFT_TOPO_LAUNCH);
    /* pairs are checked once complete: not while a launcher fills a simulation in, one attribute at a time */
    int paired = required || !m->run.dataset || (t->flags & PFT_TOPO_REQUIRE_RESOLVED);
    for (size_t v = 0; v < m->n; v++) {
        const pft_topo_node_t *nd = &m->nodes[v];
        if (!nd->has_data && (nd->train || nd->labels))
            return pft_topo__fail_at(t, nd->line, PFT_ETOPO,
                                     "node '%s' has data = false but names a '%s' file", nd->id,
                                     nd->train ? "train" : "labels");
        if (nd->has_data && (required || (paired && (nd->train || nd->labels))) &&
            (!nd->train || !nd->labels))
            return pft_topo__fail_at(
                t, nd->line, PFT_ETOPO, "node '%s' has no %s%s", nd->id,
                !nd->train ? "'train' (features .npy)" : "'labels' (labels .npy)",
                required ? ": pftnet launch runs every node of a topology without graph attribute dataset, "
                           "so each one must name its data here"
                         : "");
        if (paired && !nd->test != !nd->test_labels) {
            int line = pft_dotscan_node_attr_line(t->scan, nd->id, nd->test ? "test" : "test_labels");
            return pft_topo__fail_at(t, line ? line : nd->line, PFT_ETOPO,
                                     "node '%s': 'test' and 'test_labels' go together", nd->id);
        }
        if (t->flags & PFT_TOPO_SKIP_DATA_CHECK)
            continue;
        const char *names[4] = {"train", "labels", "test", "test_labels"};
        const char *paths[4] = {nd->train, nd->labels, nd->test, nd->test_labels};
        for (int i = 0; i < 4; i++) {
            struct stat st;
            if (!paths[i])
                continue;
            if (stat(paths[i], &st) != 0 || access(paths[i], R_OK) != 0)
                return pft_topo__fail_at(t, pft_dotscan_node_attr_line(t->scan, nd->id, names[i]), PFT_ETOPO,
                                         "node '%s': %s file %s: %s", nd->id, names[i], paths[i],
                                         strerror(errno));
            if (!S_ISREG(st.st_mode))
                return pft_topo__fail_at(t, pft_dotscan_node_attr_line(t->scan, nd->id, names[i]), PFT_ETOPO,
                                         "node '%s': %s file %s is not a regular file", nd->id, names[i],
                                         paths[i]);
        }
    }
    return 0;
}

/* Node keys: every node or none (a secure run needs the keys of every neighbour and of the ring's
 * producer; a launcher generates the missing ones, so this holds for the files pft_topo__need_public names),
 * no key shared by two nodes, key files present (unless PFT_TOPO_SKIP_DATA_CHECK). The key itself is the
 * node's to check (pft_pubkey_resolve); the topology knows no cryptography. */
int pft_topo__check_keys(const pft_topo_t *t, pft_topo__model_t *m)
{
    size_t with = 0, first = SIZE_MAX, missing = SIZE_MAX;
    for (size_t v = 0; v < m->n; v++) {
        if (m->nodes[v].key) {
            with++;
            first = first == SIZE_MAX ? v : first;
        } else if (missing == SIZE_MAX) {
            missing = v;
        }
    }
    int required = pft_topo__need_public(t, m);
    if (required && with > 0 && with < m->n)
        return pft_topo__fail_at(
            t, m->nodes[missing].line, PFT_ETOPO,
            "node '%s' has no 'key' while node '%s' has one: give every node its public key (or none: "
            "a simulation's launcher then generates them)",
            m->nodes[missing].id, m->nodes[first].id);
    for (size_t v = 0; v < m->n && with; v++) {
        const pft_topo_node_t *nd = &m->nodes[v];
        if (!nd->key)
            continue;
        int line = 0; /* the key's line, looked up on failure only (a lookup scans every attribute) */
        for (size_t w = 0; w < v; w++)
            if (m->nodes[w].key && strcmp(m->nodes[w].key, nd->key) == 0) {
                line = pft_dotscan_node_attr_line(t->scan, nd->id, "key");
                return pft_topo__fail_at(
                    t, line ? line : nd->line, PFT_ETOPO,
                    "node '%s' has the same key as node '%s': every node needs its own keypair", nd->id,
                    m->nodes[w].id);
            }
        if ((t->flags & PFT_TOPO_SKIP_DATA_CHECK) || strncmp(nd->key, "pftnet-ed25519-public ", 22) == 0)
            continue;
        struct stat st;
        int bad = stat(nd->key, &st) != 0 || access(nd->key, R_OK) != 0, err = errno;
        if (bad || !S_ISREG(st.st_mode))
            line = pft_dotscan_node_attr_line(t->scan, nd->id, "key");
        errno = err;
        if (bad)
            return pft_topo__fail_at(t, line ? line : nd->line, PFT_ETOPO, "node '%s': key file %s: %s",
                                     nd->id, nd->key, strerror(errno));
        if (!S_ISREG(st.st_mode))
            return pft_topo__fail_at(t, line ? line : nd->line, PFT_ETOPO,
                                     "node '%s': key file %s is not a regular file", nd->id, nd->key);
    }
    return 0;
}
