/* pftnet: the user's tool: the launcher (launch), results of nodes run apart (collect), topology checks
 * (check), GMM tools (gmm), the one-client synthetic experiment (synth), keys (keygen), reports (report), and
 * what a bundle holds and reveals (inspect, audit). */
#include "pft_cmd.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command_t;

static const command_t s_commands[] = {
    {"launch", pft_cmd_launch,
     "start every node of a topology (local processes, or a Slurm job) and collect the results"},
    {"collect", pft_cmd_collect, "gather the result.json of nodes run apart into one results.json and table"},
    {"check", pft_cmd_check, "validate a topology file and print roles and the order of hand-offs"},
    {"gmm", pft_cmd_gmm, "fit one GMM per class to features and report the log-likelihood"},
    {"synth", pft_cmd_synth, "one-client FedPFT: head on GMM samples vs head on raw features"},
    {"keygen", pft_cmd_keygen, "generate a node keypair (NAME.key secret, NAME.pub public)"},
    {"report", pft_cmd_report, "Markdown tables and gnuplot plots from launch results and synth lines"},
    {"inspect", pft_cmd_inspect, "print what a bundle file holds; verify its signature with --key"},
    {"audit", pft_cmd_audit,
     "what a bundle reveals about its rows: rows per component, means near rows, membership"},
    {NULL, NULL, NULL},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: pftnet COMMAND [options]   (pftnet COMMAND --help for each)\n\n"
               "pftnet: one-shot federated learning by parametric feature transfer (FedPFT).\n\ncommands:\n");
    for (const command_t *c = s_commands; c->name; c++)
        fprintf(f, "  %-8s %s\n", c->name, c->summary);
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("pftnet %s\n", PFT_VERSION);
        return 0;
    }
    for (const command_t *c = s_commands; c->name; c++)
        if (strcmp(argv[1], c->name) == 0)
            return c->run(argc - 1, argv + 1);
    fprintf(stderr, "pftnet: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
