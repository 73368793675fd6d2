/* pftnode: runs one peer of a pftnet topology (see pft_node.h for what it does, docs/USAGE.md for exit
 * codes). */
#include "pft_cli.h"
#include "pft_error.h"
#include "pft_log.h"
#include "pft_node.h"
#include "pft_nodefile.h"

#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_signal(int sig)
{
    (void)sig;
    pft_node_request_stop();
}

/* `pftnode --exit-codes [--markdown]`: the exit-code table as text or as the Markdown table in docs/USAGE.md
 * (tests/e2e_docs.sh checks that the two agree). */
static void print_exit_codes(int markdown)
{
    if (markdown)
        printf("| code | meaning |\n|---|---|\n");
#define PFT_X_PRINT(name, value, text) printf(markdown ? "| %d | %s |\n" : "%2d  %s\n", value, text);
    PFT_NODE_EXIT_TABLE(PFT_X_PRINT)
#undef PFT_X_PRINT
}

/* pftnode --help's summary, with the exit codes. */
static const char *help_summary(void)
{
    static char summary[2048];
    int n = snprintf(
        summary, sizeof summary,
        "Runs one peer of decentralized FedPFT: waits for its predecessors' GMM bundles, samples from\n"
        "them, refits per-class GMMs by EM on the union with its own features, forwards the new bundle\n"
        "to its successors, trains and evaluates its softmax head, and writes result.json, head.npy\n"
        "and the bundle it sent to its output folder.\n\nexit codes:");
#define PFT_X_HELP(name, value, text)                                                                        \
    n += snprintf(summary + n, sizeof summary - (size_t)n, "\n  %2d  %s", value, text);
    PFT_NODE_EXIT_TABLE(PFT_X_HELP)
#undef PFT_X_HELP
    return summary;
}

/* --node-file: what the command line left unset, from the node's own file. */
static int read_node_file(const char *path, pft_nodefile_t *nf, pft_node_args_t *a)
{
    if (pft_nodefile_read(path, nf) != 0) {
        fprintf(stderr, "pftnode: --node-file: %s\n", pft_errmsg());
        return -1;
    }
    if (!a->train && !a->labels)
        a->train = nf->train, a->labels = nf->labels;
    if (!a->test && !a->test_labels)
        a->test = nf->test, a->test_labels = nf->test_labels;
    if (!a->eval_features && !a->eval_labels)
        a->eval_features = nf->eval_features, a->eval_labels = nf->eval_labels;
    if (!a->key)
        a->key = nf->key;
    return 0;
}

/* The checks of the options, then the node's run (a's out and peers_dir filled in); returns the exit code. */
static int run(pft_node_args_t *a, const char *node_file, pft_nodefile_t *nf, int exit_codes, int markdown,
               const char *level)
{
    if (exit_codes) {
        print_exit_codes(markdown);
        return PFT_EXIT_OK;
    }
    if (markdown) {
        fprintf(stderr, "pftnode: --markdown goes with --exit-codes (see --help)\n");
        return PFT_EXIT_USAGE;
    }
    if (!a->topology || !a->id) {
        fprintf(stderr, "pftnode: --%s is required (see --help)\n", a->topology ? "id" : "topology");
        return PFT_EXIT_USAGE;
    }
    pft_log_level_t lv;
    if (pft_log_parse_level(level, &lv) != 0) {
        fprintf(stderr, "pftnode: --log-level '%s': expected debug, info, warn or error\n", level);
        return PFT_EXIT_USAGE;
    }
    char def_out[512], def_file[600];
    if (!a->out_dir) {
        snprintf(def_out, sizeof def_out, "out/%s", a->id);
        a->out_dir = def_out;
    }
    snprintf(def_file, sizeof def_file, "%s/node.conf", a->out_dir);
    if (!node_file && access(def_file, F_OK) == 0) /* a node's private facts may live in its own folder */
        node_file = def_file;
    if (node_file && read_node_file(node_file, nf, a) != 0)
        return PFT_EXIT_USAGE;
    if ((a->eval_features == NULL) != (a->eval_labels == NULL)) {
        fprintf(stderr, "pftnode: --eval-features and --eval-labels go together\n");
        return PFT_EXIT_USAGE;
    }
    if ((a->train == NULL) != (a->labels == NULL) || (a->test == NULL) != (a->test_labels == NULL)) {
        fprintf(stderr, "pftnode: --%s go together (on the command line or in --node-file)\n",
                (a->train == NULL) != (a->labels == NULL) ? "train and --labels" : "test and --test-labels");
        return PFT_EXIT_USAGE;
    }
    pft_log_init(a->id, lv);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    char def_peers[512];
    if (!a->peers_dir) { /* the parent of --out */
        snprintf(def_peers, sizeof def_peers, "%s", a->out_dir);
        size_t n = strlen(def_peers);
        while (n > 1 && def_peers[n - 1] == '/')
            def_peers[--n] = '\0';
        char *slash = strrchr(def_peers, '/');
        if (!slash)
            snprintf(def_peers, sizeof def_peers, ".");
        else
            slash[slash == def_peers] = '\0';
        a->peers_dir = def_peers;
    }
    return pft_node_run(a);
}

int main(int argc, char **argv)
{
#ifdef M_MMAP_THRESHOLD
    /* A node's big buffers (d×d statistics, decoded bundles, datasets) are allocated and freed phase by
     * phase. glibc raises its mmap threshold after freeing a large mapped block, so the next ones come from
     * the heap and stay resident; a fixed threshold gives them back (64-node exact chain: peak RSS 70 → 57
     * MB). */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
    const char *topology, *id, *out, *level, *eval_x, *eval_y, *key, *peers, *node_file;
    const char *train, *labels, *test, *test_labels, *slots;
    int linger, insecure, listen_fd, exit_codes = 0, markdown = 0;
    /* --topology and --id are checked after parsing (--exit-codes needs neither) */
    const pft_opt_t opts[] = {
        {"topology", PFT_OPT_STRING, &topology, NULL, 0, -1, 0, "T.dot", "topology file (required)"},
        {"id", PFT_OPT_STRING, &id, NULL, 0, -1, 0, "NAME", "this node's id in the topology (required)"},
        {"out", PFT_OPT_STRING, &out, NULL, 0, -1, 0, "DIR", "output and state folder (default out/<id>)"},
        {"train", PFT_OPT_STRING, &train, NULL, 0, -1, 0, "X.npy",
         "this node's training features (wins over its entry in the topology, which only this node reads)"},
        {"labels", PFT_OPT_STRING, &labels, NULL, 0, -1, 0, "Y.npy", "labels for --train"},
        {"test", PFT_OPT_STRING, &test, NULL, 0, -1, 0, "X.npy", "this node's test features (optional)"},
        {"test-labels", PFT_OPT_STRING, &test_labels, NULL, 0, -1, 0, "Y.npy", "labels for --test"},
        {"node-file", PFT_OPT_STRING, &node_file, NULL, 0, -1, 0, "FILE",
         "this node's private facts, one \"name = value\" a line: train, labels, test, test_labels, key, "
         "eval_features, eval_labels (paths relative to FILE's folder; options given on the command line "
         "win)"},
        {"eval-features", PFT_OPT_STRING, &eval_x, NULL, 0, -1, 0, "X.npy",
         "features of the union of all nodes' test splits (accuracy_global)"},
        {"eval-labels", PFT_OPT_STRING, &eval_y, NULL, 0, -1, 0, "Y.npy", "labels for --eval-features"},
        {"linger-ms", PFT_OPT_INT, &linger, "0", 0, 600000, 0, "MS",
         "after finishing, stay reachable at least this long (a finished node always stays while a "
         "predecessor has not confirmed reading its ACK, at most the longest send_deadline of its inbound "
         "edges)"},
        {"key", PFT_OPT_STRING, &key, NULL, 0, -1, 0, "FILE",
         "this node's secret key (default: the .key beside the .pub its `key` attribute names)"},
        {"insecure", PFT_OPT_FLAG, &insecure, NULL, 0, -1, 0, NULL,
         "plain-text connections, unsigned bundles, for a topology that names no keys (one that names keys "
         "is refused: exit 3); logs a warning"},
        {"log-level", PFT_OPT_STRING, &level, "info", 0, -1, 0, "L", "debug, info, warn or error"},
        {"listen-fd", PFT_OPT_INT, &listen_fd, "-1", -1, 1 << 20, 0, "FD",
         "take over this inherited listening TCP socket, bound to the node's endpoint, instead of binding "
         "(pftnet launch hands each node its port this way, so no other process can take it meanwhile)"},
        {"peers-dir", PFT_OPT_STRING, &peers, NULL, 0, -1, 0, "DIR",
         "the folder holding every node's output folder as DIR/<id> (default: the parent of --out, as pftnet "
         "launch lays them out): a hand-off whose ACK was lost is known delivered when the successor's inbox "
         "there holds the bundle"},
        {"compute-slots", PFT_OPT_STRING, &slots, NULL, 0, -1, 0, "DIR",
         "compute (a stage's refit, the head) only while holding one of the machine's compute slots, the "
         "lock "
         "files DIR/slot.0 … (pftnet launch --compute-slots N makes them); waiting, the node answers its "
         "peers"},
        {"exit-codes", PFT_OPT_FLAG, &exit_codes, NULL, 0, -1, 0, NULL, "print the exit codes and exit"},
        {"markdown", PFT_OPT_FLAG, &markdown, NULL, 0, -1, 0, NULL,
         "with --exit-codes: as a Markdown table (the one in docs/USAGE.md)"},
        {0},
    };
    const char *summary = help_summary();
    const pft_cli_t cli = {"pftnode", NULL, 0, 0, summary, opts};
    topology = id = eval_x = eval_y = out = key = peers = node_file = slots = NULL;
    train = labels = test = test_labels = NULL;
    int rc = pft_cli_parse(&cli, argc, argv, NULL, NULL);
    if (rc)
        return rc == 1 ? 0 : PFT_EXIT_USAGE;
    pft_node_args_t a = {topology,  id,    out,   eval_x, eval_y, linger,      key,  insecure,
                         listen_fd, peers, train, labels, test,   test_labels, slots};
    pft_nodefile_t nf = {0};
    rc = run(&a, node_file, &nf, exit_codes, markdown, level);
    pft_nodefile_free(&nf);
    return rc;
}
