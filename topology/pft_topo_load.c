/* pft_topo_load: reads a topology file, parses it with libcgraph (errors captured, lexer reset). */
#include "pft_topo.h"

#include "pft_alloc.h"
#include "pft_dotscan.h"
#include "pft_error.h"
#include "pft_topo_internal.h"

#include <cgraph.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_FILE_BYTES (16u << 20) /* topology files are small; anything larger is refused */

/* ---- cgraph error capture (cgraph reports through a global callback) ---- */

static char s_cg_msg[1024];
static size_t s_cg_len;

static int cg_errf(char *msg)
{
    size_t n = strlen(msg);
    if (s_cg_len + n >= sizeof s_cg_msg)
        n = sizeof s_cg_msg - 1 - s_cg_len;
    memcpy(s_cg_msg + s_cg_len, msg, n);
    s_cg_len += n;
    s_cg_msg[s_cg_len] = '\0';
    return 0;
}

/* The captured text without "Error: " and trailing blanks. */
static const char *cg_message(void)
{
    char *m = s_cg_msg;
    while (s_cg_len && (m[s_cg_len - 1] == '\n' || m[s_cg_len - 1] == ' '))
        m[--s_cg_len] = '\0';
    if (strncmp(m, "Error: ", 7) == 0)
        m += 7;
    for (char *p = m; *p; p++)
        if (*p == '\n')
            *p = ' ';
    return *m ? m : "syntax error";
}

/* ---- cgraph's lexer between parses ----
 * libcgraph 2.42 parses with a non-reentrant flex lexer (lib/cgraph/scan.l) whose static state outlives
 * a parse: its start condition, when a file ends inside a quoted string, HTML string or block comment,
 * and the text left in its buffer after a graph's closing brace (cgraph stops there, so that agread can
 * read the next graph of a stream). Both carry over into the next agmemread, which then fails or reads
 * the wrong text (tests/fuzz/crashes/topo/ *-breaks-later-loads). cgraph declares no reset. Defences:
 * 1. pft_dotscan_fault refuses such text with a message naming the line before cgraph sees it, and the
 *    text handed to cgraph ends with a newline, so that a final '//' or '#' comment cannot run into
 *    the next file read into the same buffer;
 * 2. before and after every parse cg_lexer_reset() calls aaglex_destroy(), flex's full reset of the
 *    lexer's globals (start condition INITIAL, buffers freed; the next parse sets up new ones), which
 *    libcgraph 2.42 exports though no header declares it. Before: whatever another cgraph user in the
 *    process left behind cannot spoil this parse (so do not interleave loads with agread of a stream of
 *    several graphs). It is declared weak: a libcgraph without it still links and runs, relying on
 *    defence 1 and the check below;
 * 3. after a failed parse it checks that a tiny graph parses, twice at most (a failed parse flushes the
 *    buffer); if that still fails the error message says later loads may fail. */
extern int aaglex_destroy(void) __attribute__((weak));

static int cg_quiet(char *msg)
{
    return 0;
}

/* Puts cgraph's lexer back to its initial state; with verify, checks that a tiny graph then parses.
 * Returns 0, or -1 if the check failed. Leaves cgraph's error callback as it was. */
static int cg_lexer_reset(int verify)
{
    if (aaglex_destroy)
        aaglex_destroy();
    int ok = !verify;
    for (int attempt = 0; attempt < 2 && !ok; attempt++) {
        agusererrf prev = agseterrf(cg_quiet);
        Agraph_t *g = agmemread("digraph{}\n");
        agseterrf(prev);
        ok = g != NULL;
        if (g)
            agclose(g);
        if (aaglex_destroy)
            aaglex_destroy();
    }
    return ok ? 0 : -1;
}

/* Reads path into *out (NUL-terminated, one spare byte after the NUL), its length in *len. */
static int read_text(const char *path, char **out, size_t *len)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return pft_err(PFT_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    char *buf = NULL;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = pft_err(PFT_EIO, "%s: not a regular file", path);
        goto done;
    }
    if ((uintmax_t)st.st_size > MAX_FILE_BYTES) {
        rc = pft_err(PFT_EFORMAT, "%s: %jd bytes; a topology file may have at most %u", path,
                     (intmax_t)st.st_size, MAX_FILE_BYTES);
        goto done;
    }
    size_t n = (size_t)st.st_size;
    buf = pft_alloc(n + 2); /* room for a newline pft_topo_load may append */
    if (!buf) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto done;
    }
    if (fread(buf, 1, n, f) != n) {
        rc = pft_err(PFT_EIO, "%s: read error", path);
        goto done;
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        int line = 1;
        for (const char *p = buf; *p; p++)
            line += *p == '\n';
        rc = pft_err(PFT_EFORMAT, "%s:%d: a NUL byte: not a text file", path, line);
        goto done;
    }
    *out = buf;
    *len = n;
    buf = NULL;
done:
    pft_free(buf);
    fclose(f);
    return rc;
}

/* Absolute folder of path and the file name without extension. */
static int split_path(const char *path, char **dir, char **stem)
{
    char *abs = realpath(path, NULL); /* libc allocation, released with free() */
    if (!abs)
        return pft_err(PFT_EIO, "%s: %s", path, strerror(errno));
    char *slash = strrchr(abs, '/');
    const char *base = slash + 1;
    size_t lb = strlen(base);
    const char *dot = strrchr(base, '.');
    size_t ls = dot && dot != base ? (size_t)(dot - base) : lb;
    *stem = pft_alloc(ls + 1);
    *dir = pft_alloc((size_t)(slash - abs) + 2);
    if (!*stem || !*dir) {
        free(abs);
        PFT_FREE(*stem);
        PFT_FREE(*dir);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    memcpy(*stem, base, ls);
    (*stem)[ls] = '\0';
    if (slash == abs) {
        strcpy(*dir, "/");
    } else {
        memcpy(*dir, abs, (size_t)(slash - abs));
        (*dir)[slash - abs] = '\0';
    }
    free(abs);
    return 0;
}

/* What the scan alone refuses, before libcgraph parses: a second graph, text that would break cgraph's next
 * parse, more nodes or edges than a topology may have (a parse of 64k nodes took 9-14 s), and a node given
 * one attribute twice with different values (libcgraph would keep the last, silently). */
static int check_scan(pft_topo_t *t)
{
    if (pft_dotscan_graph_count(t->scan) > 1)
        return pft_topo__fail_at(t, pft_dotscan_second_graph_line(t->scan), PFT_EFORMAT,
                                 "a second graph: a topology file holds exactly one digraph");
    int line;
    const char *fault = pft_dotscan_fault(t->scan, &line);
    if (fault) /* cgraph never sees text that would break its next parse (see cg_lexer_reset) */
        return pft_topo__fail_at(t, line, PFT_EFORMAT, "%s", fault);
    const char *what;
    if (pft_dotscan_too_big(t->scan, &what, &line))
        return pft_topo__fail_at(t, line, PFT_ETOPO, "more than %d %s; a topology may have at most %d",
                                 what[0] == 'n' ? PFT_DOTSCAN_MAX_NODES : PFT_DOTSCAN_MAX_EDGES, what,
                                 what[0] == 'n' ? PFT_DOTSCAN_MAX_NODES : PFT_DOTSCAN_MAX_EDGES);
    const pft_dotscan_attr_t *a, *b;
    if (pft_dotscan_node_attr_twice(t->scan, &a, &b))
        return pft_topo__fail_at(t, b->line, PFT_ETOPO,
                                 "node '%s': %s=%s here, but %s=%s at line %d: a node is defined once (give "
                                 "each attribute one value)",
                                 b->node, b->name, b->value, a->name, a->value, a->line);
    return 0;
}

int pft_topo_load(const char *path, unsigned flags, pft_topo_t **out)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    pft_topo_t *t = pft_calloc(1, sizeof *t);
    if (!t)
        return pft_err(PFT_ENOMEM, "out of memory");
    t->flags = flags;
    int rc;
    if (!(t->path = pft_strdup(path))) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = read_text(path, &text, &len)) || (rc = split_path(path, &t->dir, &t->stem)) ||
        (rc = pft_dotscan_new(text, len, &t->scan)))
        goto fail;
    if ((rc = check_scan(t)))
        goto fail;
    if (len == 0 || text[len - 1] != '\n') { /* read_text left room */
        text[len] = '\n';
        text[len + 1] = '\0';
    }
    s_cg_len = 0;
    s_cg_msg[0] = '\0';
    (void)cg_lexer_reset(0);
    agusererrf prev = agseterrf(cg_errf);
    agreseterrors();
    t->g = agmemread(text);
    agseterrf(prev);
    const char *bad = strstr(s_cg_msg, "badly delimited number");
    const char *stuck =
        cg_lexer_reset(!t->g) == 0
            ? ""
            : " (and libcgraph's parser stays confused: later loads in this process may fail)";
    if (!t->g || bad) {
        char msg[sizeof s_cg_msg];
        snprintf(msg, sizeof msg, "%s", bad ? bad : cg_message());
        char *at = strstr(msg, " in line ");
        int line = 0;
        if (at) { /* move "in line N" into the file:line prefix */
            char *end = at + 9;
            line = (int)strtol(end, &end, 10);
            memmove(at, end, strlen(end) + 1);
        }
        if (bad) {
            /* cgraph splits 1e-4 into 1, e, -4 and carries on: refuse instead */
            char *q = strchr(msg, '\''), *q2 = q ? strchr(q + 1, '\'') : NULL;
            rc = pft_topo__fail_at(
                t, line, PFT_EFORMAT,
                "badly delimited number %.*s: a bare DOT number has no exponent; quote the value, e.g. "
                "tol=\"1e-4\"%s",
                q && q2 ? (int)(q2 - q + 1) : 0, q ? q : "", stuck);
        } else if (pft_dotscan_graph_count(t->scan) == 0) {
            rc = pft_topo__fail_at(t, 0, PFT_EFORMAT,
                                   "no graph found (expected: digraph NAME { a -> b; ... })%s", stuck);
        } else {
            rc = pft_topo__fail_at(t, line, PFT_EFORMAT, "not valid DOT: %s%s", msg, stuck);
        }
        goto fail;
    }
    if ((rc = pft_topo__build(t, &t->m)) || (rc = pft_topo__normalize(t)))
        goto fail;
    pft_free(text);
    *out = t;
    return 0;
fail:
    pft_free(text);
    pft_topo_destroy(&t);
    return rc;
}
