/* cmd_collect: `pftnet collect TOPO.dot NODE_DIR... --out DIR` gathers the result.json of nodes run apart
 * into one results.json and table, as a launch does (node/launch/pft_gather.h). */
#include "pft_cli.h"
#include "pft_cmd.h"
#include "pft_error.h"
#include "pft_gather.h"

#include <stdio.h>

#define MAX_PATHS 1024 /* node folders on one command line */

int pft_cmd_collect(int argc, char **argv)
{
    pft_gather_opts_t a = {0};
    const pft_opt_t opts[] = {
        {"out", PFT_OPT_STRING, &a.out_dir, NULL, 0, -1, 1, "DIR",
         "where results.json and table.txt go (made if missing)"},
        {"tag", PFT_OPT_STRING, &a.tag, NULL, 0, -1, 0, "NAME",
         "experiment name recorded in results.json for `pftnet report` (default: the graph name)"},
        {"variant", PFT_OPT_STRING, &a.variant, NULL, 0, -1, 0, "TEXT",
         "method label recorded in results.json (default: \"FedPFT <cov> K=<k>\", with DP when set)"},
        {"force", PFT_OPT_FLAG, &a.force, NULL, 0, -1, 0, NULL,
         "DIR holds a results.json that collect did not write (a launch's): replace it (otherwise refused)"},
        {"allow-degraded", PFT_OPT_FLAG, &a.allow_degraded, NULL, 0, -1, 0, NULL,
         "a node that went on without a predecessor (status degraded) is not a fault (exit 0)"},
        {"json", PFT_OPT_FLAG, &a.json, NULL, 0, -1, 0, NULL,
         "print results.json on stdout instead of the table"},
        {"quiet", PFT_OPT_FLAG, &a.quiet, NULL, 0, -1, 0, NULL,
         "no progress lines (what is missing, failed or not reconciled is still said)"},
        {0},
    };
    const pft_cli_t cli = {
        "pftnet collect",
        "TOPO.dot NODE_DIR...",
        2,
        MAX_PATHS,
        "Gathers the results of nodes run apart (by hand, on other hosts, by other organisations) into\n"
        "DIR/results.json and DIR/table.txt as `pftnet launch` gathers its own, for `pftnet report DIR`.\n"
        "TOPO.dot is the topology the nodes ran (a launch's DIR/topology.dot after --prepare-only, or the\n"
        "shared file); each NODE_DIR is a node's --out folder, a folder holding its result.json, or the "
        "file\n"
        "(a result.json holds no data: parties can exchange them). Every hand-off is reconciled from both "
        "ends,\n"
        "the sender's `sent` against the receiver's `received` (verdicts as in results.json `handoffs`). A "
        "node\n"
        "not given is listed with status \"no result.json\" and its hand-offs \"unverified\". Refused (exit "
        "2,\n"
        "nothing written), naming the file: a result.json of another run (run id), of a node the topology "
        "does\n"
        "not have or gives another role, family or edges, or a node given twice. No baselines: they need "
        "every\n"
        "node's raw data. wall_seconds is the longest of the nodes' own.\n\n"
        "Exit status: 0 every node's result, each ok, every hand-off reconciled; 1 a node did not end ok "
        "(degraded\nincluded, unless --allow-degraded), or a "
        "hand-off was lost or contradicted; 2 bad command line or input, or DIR cannot be made (nothing\n"
        "written); 3 no fault seen, but some nodes' results are missing.",
        opts};
    const char *pos[MAX_PATHS];
    int np = 0, rc = pft_cli_parse(&cli, argc, argv, pos, &np);
    if (rc)
        return rc == 1 ? 0 : PFT_GATHER_EXIT_BADARG;
    a.topo_path = pos[0];
    a.paths = pos + 1;
    a.n_paths = (size_t)np - 1;
    int exit_code = PFT_GATHER_EXIT_BADARG;
    rc = pft_gather_run(&a, &exit_code);
    if (rc) {
        fprintf(stderr, "pftnet collect: %s\n", pft_errmsg());
        return PFT_GATHER_EXIT_BADARG;
    }
    return exit_code;
}
