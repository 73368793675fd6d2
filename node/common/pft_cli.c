/* pft_cli: table-driven option parsing with bounds checks and generated --help; prints, so it lives in node/.
 */
#include "pft_cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bounded(const pft_opt_t *o)
{
    return o->min <= o->max;
}

static int set_value(const pft_cli_t *cli, const pft_opt_t *o, const char *val)
{
    char *end = NULL;
    errno = 0;
    switch (o->type) {
    case PFT_OPT_FLAG:
        *(int *)o->target = 1;
        return 0;
    case PFT_OPT_STRING:
        *(const char **)o->target = val;
        return 0;
    case PFT_OPT_LIST: {
        pft_opt_list_t *l = o->target;
        if (l->n >= PFT_OPT_LIST_MAX) {
            fprintf(stderr, "%s: --%s given more than %d times\n", cli->prog, o->name, PFT_OPT_LIST_MAX);
            return 2;
        }
        l->v[l->n++] = val;
        return 0;
    }
    case PFT_OPT_INT: {
        long v = strtol(val, &end, 10);
        if (errno || !end || *end || end == val || v < -2147483647L || v > 2147483647L)
            goto not_number;
        if (bounded(o) && (v < o->min || v > o->max))
            goto out_of_range;
        *(int *)o->target = (int)v;
        return 0;
    }
    case PFT_OPT_U64: {
        if (val[0] == '-')
            goto not_number;
        unsigned long long v = strtoull(val, &end, 10);
        if (errno || !end || *end || end == val)
            goto not_number;
        if (bounded(o) && ((double)v < o->min || (double)v > o->max))
            goto out_of_range;
        *(uint64_t *)o->target = (uint64_t)v;
        return 0;
    }
    case PFT_OPT_DOUBLE: {
        double v = strtod(val, &end);
        if (errno || !end || *end || end == val || !isfinite(v))
            goto not_number;
        if (bounded(o) && (v < o->min || v > o->max))
            goto out_of_range;
        *(double *)o->target = v;
        return 0;
    }
    }
not_number:
    fprintf(stderr, "%s: --%s: '%s' is not a valid %s\n", cli->prog, o->name, val,
            o->type == PFT_OPT_DOUBLE ? "number" : "integer");
    return 2;
out_of_range:
    fprintf(stderr, "%s: --%s: %s is out of range [%g, %g]\n", cli->prog, o->name, val, o->min, o->max);
    return 2;
}

static const pft_opt_t *find(const pft_cli_t *cli, const char *name, size_t len)
{
    for (const pft_opt_t *o = cli->opts; o && o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

void pft_cli_help(const pft_cli_t *cli)
{
    printf("usage: %s%s%s [options]\n\n%s\n\noptions:\n", cli->prog, cli->positional ? " " : "",
           cli->positional ? cli->positional : "", cli->summary);
    for (const pft_opt_t *o = cli->opts; o && o->name; o++) {
        char left[96];
        if (o->type == PFT_OPT_FLAG)
            snprintf(left, sizeof left, "--%s", o->name);
        else
            snprintf(left, sizeof left, "--%s %s", o->name, o->metavar ? o->metavar : "VALUE");
        printf("  %-30s %s", left, o->help);
        if (o->required && !o->def)
            printf(" (required)");
        else if (o->def && o->type != PFT_OPT_FLAG)
            printf(" (default %s)", o->def);
        if (o->type == PFT_OPT_LIST)
            printf(" (repeatable)");
        if (bounded(o) && o->type != PFT_OPT_FLAG && o->type != PFT_OPT_STRING && o->type != PFT_OPT_LIST)
            printf(" [%g..%g]", o->min, o->max);
        printf("\n");
    }
    printf("  %-30s %s\n", "--help", "show this help and exit");
}

/* Every option at its default (flags 0, lists empty); the number of options, or -1 if a default is bad. */
static int set_defaults(const pft_cli_t *cli)
{
    int n_opts = 0;
    for (const pft_opt_t *o = cli->opts; o && o->name; o++, n_opts++)
        if (o->def && o->type != PFT_OPT_FLAG && set_value(cli, o, o->def) != 0)
            return -1;
    for (const pft_opt_t *o = cli->opts; o && o->name; o++) {
        if (o->type == PFT_OPT_FLAG)
            *(int *)o->target = 0;
        else if (o->type == PFT_OPT_LIST)
            ((pft_opt_list_t *)o->target)->n = 0;
    }
    return n_opts;
}

/* The option argv[*i] ("--name" or "--name=value"; a separate value advances *i), its value set and marked in
 * seen. 0, or 2 (unknown, a value missing or given to a flag: said on stderr) or set_value's error. */
static int parse_long(const pft_cli_t *cli, int argc, char **argv, int *i, unsigned char *seen)
{
    const char *a = argv[*i];
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const pft_opt_t *o = find(cli, name, len);
    if (!o) {
        fprintf(stderr, "%s: unknown option '%.*s' (see --help)\n", cli->prog, (int)len + 2, a);
        return 2;
    }
    const char *val = NULL;
    if (o->type == PFT_OPT_FLAG) {
        if (eq) {
            fprintf(stderr, "%s: --%s takes no value\n", cli->prog, o->name);
            return 2;
        }
    } else if (eq) {
        val = eq + 1;
    } else if (*i + 1 < argc) {
        val = argv[++*i];
    } else {
        fprintf(stderr, "%s: --%s needs a value (%s)\n", cli->prog, o->name,
                o->metavar ? o->metavar : "VALUE");
        return 2;
    }
    int rc = set_value(cli, o, val);
    if (rc)
        return rc;
    if (o - cli->opts < 256)
        seen[o - cli->opts] = 1;
    return 0;
}

int pft_cli_parse(const pft_cli_t *cli, int argc, char **argv, const char **pos, int *n_pos)
{
    int np = 0;
    unsigned char seen[256] = {0};
    int n_opts = set_defaults(cli);
    if (n_opts < 0)
        return 2; /* a bad default is a programming error, reported like bad input */

    int only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (!only_pos && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            pft_cli_help(cli);
            return 1;
        }
        if (!only_pos && a[0] == '-' && a[1] == '-') {
            int rc = parse_long(cli, argc, argv, &i, seen);
            if (rc)
                return rc;
            continue;
        }
        if (a[0] == '-' && a[1] != '\0' && !only_pos) {
            fprintf(stderr, "%s: unknown option '%s' (options are --long; see --help)\n", cli->prog, a);
            return 2;
        }
        if (np >= cli->max_pos) {
            fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", cli->prog, a);
            return 2;
        }
        pos[np++] = a;
    }
    for (int j = 0; j < n_opts && j < 256; j++) {
        const pft_opt_t *o = &cli->opts[j];
        if (o->required && !o->def && !seen[j]) {
            fprintf(stderr, "%s: --%s is required (see --help)\n", cli->prog, o->name);
            return 2;
        }
    }
    if (np < cli->min_pos) {
        fprintf(stderr, "%s: missing %s (see --help)\n", cli->prog,
                cli->positional ? cli->positional : "argument");
        return 2;
    }
    if (n_pos)
        *n_pos = np;
    return 0;
}
