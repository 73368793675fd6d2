/* pft_cli: command-line options as a declarative table (name, type, default, bounds, help); --help is generated. */
#ifndef PFT_CLI_H
#define PFT_CLI_H

#include <stdint.h>

typedef enum {
    PFT_OPT_FLAG,   /* int *: set to 1 when present, takes no value */
    PFT_OPT_INT,    /* int * */
    PFT_OPT_U64,    /* uint64_t * */
    PFT_OPT_DOUBLE, /* double * */
    PFT_OPT_STRING, /* const char ** (points into argv or at the default) */
    PFT_OPT_LIST,   /* pft_opt_list_t *: repeatable; each occurrence appends its value */
} pft_opt_type_t;

/* Target of a PFT_OPT_LIST option: the values in command-line order (pointers into argv). */
#define PFT_OPT_LIST_MAX 64
typedef struct {
    const char *v[PFT_OPT_LIST_MAX];
    int n;
} pft_opt_list_t;

/* One option: `--name VALUE` or `--name=VALUE`. The table ends with an entry whose name is NULL. */
typedef struct {
    const char *name;      /* long name without the dashes */
    pft_opt_type_t type;   /* how the value is parsed */
    void *target;          /* where the value goes (type above) */
    const char *def;       /* default as text, applied before parsing; NULL: none */
    double min, max;       /* inclusive bounds for numbers; min > max: unbounded */
    int required;          /* 1: must be given (or have a default) */
    const char *metavar;   /* placeholder in --help, e.g. "PATH" */
    const char *help;      /* one line of help */
} pft_opt_t;

/* A command's description for parsing and --help. */
typedef struct {
    const char *prog;        /* e.g. "pftnet gmm" */
    const char *positional;  /* usage words for positionals, e.g. "TOPO.dot", or NULL for none */
    int min_pos, max_pos;    /* number of positionals allowed */
    const char *summary;     /* one paragraph shown under the usage line */
    const pft_opt_t *opts;   /* the table */
} pft_cli_t;

/* Applies defaults, parses argv[1..argc) (argv[0] is the command name), checks bounds and required
 * options. Positionals are stored in pos[0..*n_pos) (pointers into argv; pos must hold max_pos).
 * Returns 0 to go on, 1 when --help was printed (exit 0), or 2 after printing an error and a hint to
 * stderr (exit 2). */
int pft_cli_parse(const pft_cli_t *cli, int argc, char **argv, const char **pos, int *n_pos);

/* Prints the generated help to stdout. */
void pft_cli_help(const pft_cli_t *cli);

#endif
