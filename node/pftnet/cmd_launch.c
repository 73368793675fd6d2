/* pftnet launch: the multi-process simulation, local or in a Slurm allocation (node/launch/pft_launch.h):
 * options, then prepare, start, watch, collect. */
#include "pft_cli.h"
#include "pft_cmd.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_keys.h"
#include "pft_launch.h"
#include "pft_node.h"
#include "pft_slots.h"

#include <stdio.h>
#include <string.h>

/* A simulation node's keypair: the one saved in sk by an earlier start of the run, else a new one saved as sk
 * (secret) and pk (public). */
static int keypair(const char *id, const char *sk, const char *pk)
{
    pft_keypair_t *kp = NULL;
    int rc;
    if (pft_fsio_exists(sk))
        rc = pft_keypair_load(sk, &kp);
    else if (!(kp = pft_keypair_generate()))
        rc = pft_err(PFT_ENOMEM, "cannot generate a keypair");
    else
        rc = pft_keypair_save(kp, sk, pk, id, 1);
    pft_keypair_destroy(&kp);
    return rc;
}

/* Parses argv into *a and *prepare_only; returns -1 to go on, else the exit code (0 after --help). */
static int parse_args(int argc, char **argv, pft_launch_opts_t *a, int *prepare_only)
{
    const pft_opt_t opts[] = {
        {"out", PFT_OPT_STRING, &a->out_dir, NULL, 0, -1, 1, "DIR",
         "output folder (one sub-folder per node)"},
        {"pftnode", PFT_OPT_STRING, &a->pftnode, NULL, 0, -1, 0, "PATH",
         "pftnode binary (default: beside pftnet, or $PFTNODE)"},
        {"order", PFT_OPT_STRING, &a->order, "forward", 0, -1, 0, "ORDER",
         "start nodes in file order (forward) or reverse"},
        {"timeout", PFT_OPT_DOUBLE, &a->timeout, "3600", 0, 1e7, 0, "S",
         "stop every node after this many seconds"},
        {"log-level", PFT_OPT_STRING, &a->log_level, "info", 0, -1, 0, "L", "nodes' log level"},
        {"no-baselines", PFT_OPT_FLAG, &a->no_baselines, NULL, 0, -1, 0, NULL,
         "skip the centralized and local-only baselines"},
        {"set", PFT_OPT_LIST, &a->set, NULL, 0, -1, 0, "NAME=VALUE",
         "override a graph attribute of the topology (e.g. --set k=20 --set cov=spher); nodes' own values "
         "still win"},
        {"seed", PFT_OPT_STRING, &a->seed, NULL, 0, -1, 0, "N", "run seed (same as --set seed=N)"},
        {"tag", PFT_OPT_STRING, &a->tag, NULL, 0, -1, 0, "NAME",
         "experiment name recorded in results.json for `pftnet report` (default: the graph name)"},
        {"variant", PFT_OPT_STRING, &a->variant, NULL, 0, -1, 0, "TEXT",
         "method label recorded in results.json (default: \"FedPFT <cov> K=<k>\", with DP when set)"},
        {"keep-going", PFT_OPT_FLAG, &a->keep_going, NULL, 0, -1, 0, NULL,
         "when a node fails, let the others run on to their deadlines (default: stop them all)"},
        {"absent", PFT_OPT_STRING, &a->absent, NULL, 0, -1, 0, "ID[,ID]",
         "do not start these nodes (a dead peer: tests deadlines and fallback edges)"},
        {"compute-slots", PFT_OPT_INT, &a->compute_slots, "0", 0, PFT_SLOTS_MAX, 0, "N",
         "local engine: at most N nodes compute (a refit, a head) at once, the others queue (their status "
         "'queued') and answer their peers meanwhile: bounds the memory of many nodes on few cores (0: no "
         "limit)"},
        {"allow-degraded", PFT_OPT_FLAG, &a->allow_degraded, NULL, 0, -1, 0, NULL,
         "exit 0 although a node went on without a predecessor (on_missing = proceed; by default exit 1 "
         "unless that predecessor was --absent)"},
        {"insecure", PFT_OPT_FLAG, &a->insecure, NULL, 0, -1, 0, NULL,
         "no keys: plain-text connections and unsigned bundles (nodes log a warning); refused (exit 2) "
         "when the topology names keys"},
        {"force", PFT_OPT_FLAG, &a->force, NULL, 0, -1, 0, NULL,
         "DIR holds an earlier run: delete it first (otherwise launch refuses)"},
        {"resume", PFT_OPT_FLAG, &a->resume, NULL, 0, -1, 0, NULL,
         "DIR holds an earlier run of this topology (same nodes, seed, model): start its nodes again, each "
         "resuming from its saved state (a requeued Slurm job); a fresh run if DIR holds none"},
        {"engine", PFT_OPT_STRING, &a->engine, "local", 0, -1, 0, "E",
         "local: the nodes as processes of this machine; slurm: inside a Slurm allocation (salloc/sbatch), "
         "one task per node, all started by one srun step"},
        {"iface", PFT_OPT_STRING, &a->iface, NULL, 0, -1, 0, "NAME",
         "with --engine slurm: the network interface whose IPv4 address the nodes listen on (default: the "
         "address each host's name resolves to)"},
        {"prepare-only", PFT_OPT_FLAG, prepare_only, NULL, 0, -1, 0, NULL,
         "partition and write DIR/topology.dot, then print each node's pftnode command and exit"},
        {"json", PFT_OPT_FLAG, &a->json, NULL, 0, -1, 0, NULL,
         "print results.json on stdout instead of the table"},
        {"quiet", PFT_OPT_FLAG, &a->quiet, NULL, 0, -1, 0, NULL, "no progress lines"},
        {0},
    };
    const pft_cli_t cli = {
        "pftnet launch",
        "TOPO.dot",
        1,
        1,
        "Starts every node of a topology as a local pftnode process. In a simulation (graph attribute\n"
        "dataset) it first partitions the dataset across the nodes as the topology asks and writes each\n"
        "node's share to DIR/<id>/data. It shows which node is waiting, fitting, training or done, then\n"
        "writes DIR/results.json (every node's result.json, plus the centralized and local-only baselines "
        "on\n"
        "the union of all test splits) and prints a table. Exits 1 if any node failed, or went on without "
        "a\npredecessor that was not --absent (degraded; --allow-degraded), naming it; a failed node\n"
        "stops the whole run unless --keep-going. A topology that breaks a rule between attributes is "
        "refused\n"
        "before any node starts, in the words of pftnet check (exit 2; exit 14 for a policy refusal).\n\n"
        "With --engine slurm, run inside an allocation (salloc -n N pftnet launch ... --engine slurm, or an\n"
        "sbatch script), DIR on a filesystem every host shares: a first short srun step checks that each "
        "task\n"
        "sees DIR and reports its host and address, every node without an explicit endpoint gets\n"
        "tcp://ADDR:0 of its task (it binds a free port and reports it in DIR/<id>/endpoint), then one srun\n"
        "step starts all the nodes. (Its tasks run `pftnet "
        "launch\n"
        "--slurm-probe|--slurm-task`, internal to the engine.)",
        opts};
    *a = (pft_launch_opts_t){
        .exit_interrupted = PFT_EXIT_INTERRUPTED, .exit_degraded = PFT_EXIT_DEGRADED, .keypair = keypair};
    *prepare_only = 0;
    const char *pos[1];
    int np = 0, rc = pft_cli_parse(&cli, argc, argv, pos, &np);
    if (rc)
        return rc == 1 ? 0 : 2;
    a->topo_path = pos[0];
    if (strcmp(a->order, "forward") != 0 && strcmp(a->order, "reverse") != 0) {
        fprintf(stderr, "pftnet launch: --order '%s': expected forward or reverse\n", a->order);
        return 2;
    }
    char engines[128];
    if (!pft_launch_engine_known(a->engine, engines, sizeof engines)) {
        fprintf(stderr, "pftnet launch: --engine '%s': expected %s\n", a->engine, engines);
        return 2;
    }
    if (a->iface && strcmp(a->engine, "slurm") != 0) {
        fprintf(stderr,
                "pftnet launch: --iface goes with --engine slurm (local nodes listen on 127.0.0.1)\n");
        return 2;
    }
    return -1;
}

int pft_cmd_launch(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--slurm-probe") == 0 || strcmp(argv[1], "--slurm-task") == 0))
        return pft_launch_slurm_task_main(argc, argv); /* on a task of --engine slurm's srun steps */
    pft_launch_opts_t a;
    int prepare_only, exit_code = parse_args(argc, argv, &a, &prepare_only);
    if (exit_code >= 0)
        return exit_code;
    pft_launch_t *run = pft_launch_new(&a);
    int rc = run ? pft_launch_prepare(run) : pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0 && prepare_only) {
        pft_launch_print_commands(run);
        exit_code = 0;
    } else if (rc == 0 && (rc = pft_launch_start(run)) == 0) {
        pft_launch_watch(run);
        rc = pft_launch_collect(run, &exit_code);
    }
    if (rc) {
        fprintf(stderr, "pftnet launch: %s\n", pft_errmsg());
        exit_code = rc == PFT_EPOLICY ? PFT_EXIT_POLICY : rc == PFT_ETOPO || rc == PFT_EINVAL ? 2 : 1;
    }
    pft_launch_destroy(&run);
    return exit_code;
}
