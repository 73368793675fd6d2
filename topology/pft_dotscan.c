/* pft_dotscan: a tolerant DOT pre-scanner recording the lines of nodes, edges and attributes. */
#include "pft_dotscan.h"

#include "pft_alloc.h"
#include "pft_error.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_DEPTH 64 /* subgraph nesting the scanner follows; deeper text is not scanned */

typedef struct {
    const char *tail, *head;
    int line;
} edge_rec_t;

typedef struct {
    const char *id;
    int line;
    int stmt_line; /* line of its first own statement (not an edge end); 0: none */
} node_rec_t;

struct pft_dotscan_t {
    node_rec_t *nodes; /* unique ids, first appearance */
    size_t n_nodes, cap_nodes;
    edge_rec_t *edges; /* every edge written, file order */
    size_t n_edges, cap_edges;
    pft_dotscan_attr_t *attrs;
    size_t n_attrs, cap_attrs;
    char **pool; /* owned strings */
    size_t n_pool, cap_pool;
    const char **occ; /* node occurrences in order, to expand subgraph edge operands */
    size_t n_occ, cap_occ;
    int header_line, second_line;
    size_t n_graphs;
    char fault[200]; /* first lexical fault (pft_dotscan_fault); "" if none */
    int fault_line;
    const char *too_big; /* "nodes" or "edges": the scan stopped at one more than the most allowed */
    int too_big_line;
};

typedef enum {
    T_EOF,
    T_ID,
    T_LBRACE,
    T_RBRACE,
    T_LBRACK,
    T_RBRACK,
    T_SEMI,
    T_COMMA,
    T_EQ,
    T_COLON,
    T_EDGEOP,
    T_ERR,
} tok_kind_t;

typedef struct {
    tok_kind_t kind;
    const char *text; /* T_ID: pooled, unescaped */
    int quoted;       /* T_ID from a quoted or HTML string (never a keyword) */
    int line;
} tok_t;

typedef struct {
    pft_dotscan_t *s;
    const char *p, *end;
    int line;
    tok_t la[2]; /* lookahead */
    int n_la;
    int oom;
    char *buf; /* ID assembly */
    size_t len, cap;
} lexer_t;

/* ---- growable arrays ---- */

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *p = pft_realloc(*arr, n * elem);
    if (!p)
        return PFT_ENOMEM;
    *arr = p;
    *cap = n;
    return 0;
}

static const char *pool_add(lexer_t *lx, const char *text, size_t len)
{
    pft_dotscan_t *s = lx->s;
    if (grow((void **)&s->pool, &s->cap_pool, s->n_pool + 1, sizeof *s->pool)) {
        lx->oom = 1;
        return NULL;
    }
    char *c = pft_alloc(len + 1);
    if (!c) {
        lx->oom = 1;
        return NULL;
    }
    memcpy(c, text, len);
    c[len] = '\0';
    s->pool[s->n_pool++] = c;
    return c;
}

static int buf_put(lexer_t *lx, char c)
{
    if (grow((void **)&lx->buf, &lx->cap, lx->len + 2, 1)) {
        lx->oom = 1;
        return -1;
    }
    lx->buf[lx->len++] = c;
    return 0;
}

/* ---- lexer ---- */

static int is_id_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}

static int is_id_char(unsigned char c)
{
    return is_id_start(c) || (c >= '0' && c <= '9');
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* A UTF-8 byte order mark that cgraph skips as a blank (followed by a letter or digit it is part of a
 * name: flex takes the longest match). */
static int is_bom(const char *p, const char *end)
{
    return end - p >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0 &&
           !(end - p > 3 && is_id_char((unsigned char)p[3]));
}

/* Skips blanks, byte order marks and comments ('//' or '#' to the end of the line, as in cgraph, and
 * block comments); counts newlines. */
static void skip_space(lexer_t *lx)
{
    while (lx->p < lx->end) {
        char c = *lx->p;
        if (c == '\n') {
            lx->line++;
            lx->p++;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            lx->p++;
        } else if (is_bom(lx->p, lx->end)) {
            lx->p += 3;
        } else if (c == '#' || (c == '/' && lx->p + 1 < lx->end && lx->p[1] == '/')) {
            while (lx->p < lx->end && *lx->p != '\n')
                lx->p++;
        } else if (c == '/' && lx->p + 1 < lx->end && lx->p[1] == '*') {
            lx->p += 2;
            while (lx->p < lx->end && !(*lx->p == '*' && lx->p + 1 < lx->end && lx->p[1] == '/')) {
                if (*lx->p == '\n')
                    lx->line++;
                lx->p++;
            }
            lx->p = lx->p < lx->end ? lx->p + 2 : lx->end;
        } else {
            return;
        }
    }
}

/* Appends a quoted string's contents (after the opening quote) to buf; cgraph's rules:
 * \" is a quote, \\ is kept as both backslashes (the second escapes nothing), backslash-newline is
 * dropped, every other byte is kept. */
static int lex_quoted(lexer_t *lx)
{
    while (lx->p < lx->end && *lx->p != '"') {
        if (*lx->p == '\\' && lx->p + 1 < lx->end && lx->p[1] == '\\') {
            if (buf_put(lx, '\\') || buf_put(lx, '\\'))
                return -1;
            lx->p += 2;
            continue;
        }
        if (*lx->p == '\\' && lx->p + 1 < lx->end && (lx->p[1] == '"' || lx->p[1] == '\n')) {
            if (lx->p[1] == '"' && buf_put(lx, '"'))
                return -1;
            if (lx->p[1] == '\n')
                lx->line++;
            lx->p += 2;
            continue;
        }
        if (*lx->p == '\n')
            lx->line++;
        if (buf_put(lx, *lx->p++))
            return -1;
    }
    if (lx->p >= lx->end)
        return -1; /* unterminated */
    lx->p++;
    return 0;
}

static int lex_html(lexer_t *lx)
{
    int depth = 1;
    while (lx->p < lx->end) {
        char c = *lx->p++;
        if (c == '<')
            depth++;
        else if (c == '>' && --depth == 0)
            return 0;
        if (c == '\n')
            lx->line++;
        if (buf_put(lx, c))
            return -1;
    }
    return -1;
}

/* A quoted string at lx->p (at its opening quote) into the buffer, and those joined to it by '+' ("a" + "b"
 * concatenates). 0, or -1 when one is unterminated or the buffer cannot grow. */
static int lex_strings(lexer_t *lx)
{
    lx->p++;
    if (lex_quoted(lx))
        return -1;
    for (;;) {
        const char *save = lx->p;
        int save_line = lx->line;
        skip_space(lx);
        if (lx->p < lx->end && *lx->p == '+') {
            lx->p++;
            skip_space(lx);
            if (lx->p < lx->end && *lx->p == '"') {
                lx->p++;
                if (lex_quoted(lx))
                    return -1;
                continue;
            }
        }
        lx->p = save;
        lx->line = save_line;
        return 0;
    }
}

/* A numeral at lx->p ([-](digits[.digits]|.digits)) into the buffer; -1 if it has no digit or the buffer
 * cannot grow. */
static int lex_numeral(lexer_t *lx)
{
    const char *q = lx->p;
    if (*q == '-')
        q++;
    int digits = 0;
    while (q < lx->end && is_digit(*q))
        q++, digits++;
    if (q < lx->end && *q == '.') {
        q++;
        while (q < lx->end && is_digit(*q))
            q++, digits++;
    }
    if (!digits)
        return -1;
    while (lx->p < q)
        if (buf_put(lx, *lx->p++))
            return -1;
    return 0;
}

static tok_t lex(lexer_t *lx)
{
    tok_t t = {T_ERR, NULL, 0, 0};
    skip_space(lx);
    t.line = lx->line;
    if (lx->p >= lx->end) {
        t.kind = T_EOF;
        return t;
    }
    char c = *lx->p;
    static const char punct[] = "{}[];,=:";
    static const tok_kind_t pkind[] = {T_LBRACE, T_RBRACE, T_LBRACK, T_RBRACK,
                                       T_SEMI,   T_COMMA,  T_EQ,     T_COLON};
    const char *pc = c ? strchr(punct, c) : NULL;
    if (pc) {
        lx->p++;
        t.kind = pkind[pc - punct];
        return t;
    }
    if (c == '-' && lx->p + 1 < lx->end && (lx->p[1] == '>' || lx->p[1] == '-')) {
        lx->p += 2;
        t.kind = T_EDGEOP;
        return t;
    }
    lx->len = 0;
    if (c == '"') {
        if (lex_strings(lx))
            return t;
        t.quoted = 1;
    } else if (c == '<') {
        lx->p++;
        if (lex_html(lx))
            return t;
        t.quoted = 1;
    } else if (is_id_start((unsigned char)c)) {
        while (lx->p < lx->end && is_id_char((unsigned char)*lx->p))
            if (buf_put(lx, *lx->p++))
                return t;
    } else if (c == '-' || c == '.' || is_digit(c)) {
        if (lex_numeral(lx))
            return t;
    } else {
        return t;
    }
    t.text = pool_add(lx, lx->buf ? lx->buf : "", lx->len);
    if (t.text)
        t.kind = T_ID;
    return t;
}

static tok_t *peek_n(lexer_t *lx, int n)
{
    while (lx->n_la <= n)
        lx->la[lx->n_la++] = lex(lx);
    return &lx->la[n];
}

static tok_t *peek(lexer_t *lx)
{
    return peek_n(lx, 0);
}

static tok_t next(lexer_t *lx)
{
    tok_t t = *peek(lx);
    lx->la[0] = lx->la[1];
    lx->n_la--;
    return t;
}

static int is_kw(const tok_t *t, const char *kw)
{
    return t->kind == T_ID && !t->quoted && strcasecmp(t->text, kw) == 0;
}

/* ---- records ---- */

static void note_node(lexer_t *lx, const char *id, int line)
{
    pft_dotscan_t *s = lx->s;
    if (grow((void **)&s->occ, &s->cap_occ, s->n_occ + 1, sizeof *s->occ)) {
        lx->oom = 1;
        return;
    }
    s->occ[s->n_occ++] = id;
    for (size_t i = 0; i < s->n_nodes; i++)
        if (strcmp(s->nodes[i].id, id) == 0)
            return;
    if (s->n_nodes == PFT_DOTSCAN_MAX_NODES) { /* the file is refused: stop here (the search is linear) */
        s->too_big = "nodes";
        s->too_big_line = line;
        return;
    }
    if (grow((void **)&s->nodes, &s->cap_nodes, s->n_nodes + 1, sizeof *s->nodes)) {
        lx->oom = 1;
        return;
    }
    s->nodes[s->n_nodes++] = (node_rec_t){id, line, 0};
}

/* Records that node id (just noted) has a statement of its own at line. */
static void note_node_stmt(lexer_t *lx, const char *id, int line)
{
    pft_dotscan_t *s = lx->s;
    for (size_t i = 0; i < s->n_nodes; i++)
        if (strcmp(s->nodes[i].id, id) == 0 && !s->nodes[i].stmt_line)
            s->nodes[i].stmt_line = line;
}

static void note_edge(lexer_t *lx, const char *tail, const char *head, int line)
{
    pft_dotscan_t *s = lx->s;
    if (s->n_edges == PFT_DOTSCAN_MAX_EDGES) {
        s->too_big = "edges";
        s->too_big_line = line;
        return;
    }
    if (grow((void **)&s->edges, &s->cap_edges, s->n_edges + 1, sizeof *s->edges)) {
        lx->oom = 1;
        return;
    }
    s->edges[s->n_edges++] = (edge_rec_t){tail, head, line};
}

static void note_attr(lexer_t *lx, const pft_dotscan_attr_t *a)
{
    pft_dotscan_t *s = lx->s;
    if (grow((void **)&s->attrs, &s->cap_attrs, s->n_attrs + 1, sizeof *s->attrs)) {
        lx->oom = 1;
        return;
    }
    s->attrs[s->n_attrs++] = *a;
}

/* ---- parser: returns 0 to go on, -1 where the text cannot be followed ---- */

static int parse_stmt_list(lexer_t *lx, int depth);

/* attr_list: ( '[' [ ID ['=' ID] [;,] ]* ']' )+ ; every assignment is recorded from tmpl. */
static int parse_attr_list(lexer_t *lx, const pft_dotscan_attr_t *tmpl)
{
    while (peek(lx)->kind == T_LBRACK) {
        next(lx);
        for (;;) {
            tok_t t = next(lx);
            if (t.kind == T_RBRACK)
                break;
            if (t.kind == T_SEMI || t.kind == T_COMMA)
                continue;
            if (t.kind != T_ID)
                return -1;
            pft_dotscan_attr_t a = *tmpl;
            a.name = t.text;
            a.value = "true";
            a.line = t.line;
            if (peek(lx)->kind == T_EQ) {
                next(lx);
                tok_t v = next(lx);
                if (v.kind != T_ID)
                    return -1;
                a.value = v.text;
            }
            note_attr(lx, &a);
        }
    }
    return 0;
}

/* An edge operand: node_id [':' port [':' compass]] or a subgraph; its nodes are occ[*first..n_occ). */
static int parse_operand(lexer_t *lx, int depth, size_t *first)
{
    *first = lx->s->n_occ;
    tok_t *t = peek(lx);
    if (t->kind == T_LBRACE || is_kw(t, "subgraph")) {
        if (depth >= MAX_DEPTH)
            return -1;
        if (is_kw(t, "subgraph")) {
            next(lx);
            if (peek(lx)->kind == T_ID)
                next(lx);
            if (peek(lx)->kind != T_LBRACE)
                return 0; /* `subgraph name` refers to an existing one; its nodes are unknown here */
        }
        next(lx);
        if (parse_stmt_list(lx, depth + 1))
            return -1;
        return next(lx).kind == T_RBRACE ? 0 : -1;
    }
    if (t->kind != T_ID)
        return -1;
    tok_t id = next(lx);
    note_node(lx, id.text, id.line);
    for (int i = 0; i < 2 && peek(lx)->kind == T_COLON; i++) {
        next(lx);
        if (next(lx).kind != T_ID)
            return -1;
    }
    return 0;
}

static int seen_before(const char **occ, size_t from, size_t i)
{
    for (size_t j = from; j < i; j++)
        if (strcmp(occ[j], occ[i]) == 0)
            return 1;
    return 0;
}

static int parse_stmt(lexer_t *lx, int depth)
{
    tok_t *t = peek(lx);
    tok_t *t2 = peek_n(lx, 1);
    int t0_line = t->line;
    pft_dotscan_attr_t tmpl = {0};
    tmpl.in_subgraph = depth > 0;
    if ((is_kw(t, "graph") || is_kw(t, "node") || is_kw(t, "edge")) && t2->kind == T_LBRACK) {
        tmpl.scope = is_kw(t, "graph") ? PFT_DOT_GRAPH : is_kw(t, "node") ? PFT_DOT_NODE : PFT_DOT_EDGE;
        tmpl.is_default = 1;
        next(lx);
        return parse_attr_list(lx, &tmpl);
    }
    if (t->kind == T_ID && t2->kind == T_EQ) {
        tok_t name = next(lx);
        next(lx);
        tok_t v = next(lx);
        if (v.kind != T_ID)
            return -1;
        tmpl.scope = PFT_DOT_GRAPH;
        tmpl.is_default = 1;
        tmpl.name = name.text;
        tmpl.value = v.text;
        tmpl.line = name.line;
        note_attr(lx, &tmpl);
        return 0;
    }
    size_t a0;
    if (parse_operand(lx, depth, &a0))
        return -1;
    size_t a1 = lx->s->n_occ;
    int single_node = a1 == a0 + 1 && peek(lx)->kind != T_EDGEOP;
    const char *node_id = single_node ? lx->s->occ[a0] : NULL;
    if (node_id)
        note_node_stmt(lx, node_id, t0_line);
    size_t e0 = lx->s->n_edges;
    while (peek(lx)->kind == T_EDGEOP) {
        int line = next(lx).line;
        size_t b0;
        if (parse_operand(lx, depth, &b0))
            return -1;
        size_t b1 = lx->s->n_occ;
        for (size_t i = a0; i < a1; i++) {
            if (seen_before(lx->s->occ, a0, i))
                continue;
            for (size_t j = b0; j < b1; j++)
                if (!seen_before(lx->s->occ, b0, j))
                    note_edge(lx, lx->s->occ[i], lx->s->occ[j], line);
        }
        a0 = b0;
        a1 = b1;
    }
    if (peek(lx)->kind == T_LBRACK) {
        if (lx->s->n_edges > e0) {
            tmpl.scope = PFT_DOT_EDGE;
            tmpl.edge_first = e0;
            tmpl.edge_count = lx->s->n_edges - e0;
        } else {
            tmpl.scope = PFT_DOT_NODE;
            tmpl.node = node_id;
        }
        return parse_attr_list(lx, &tmpl);
    }
    return 0;
}

static int parse_stmt_list(lexer_t *lx, int depth)
{
    for (;;) {
        if (lx->oom || lx->s->too_big)
            return -1;
        tok_t *t = peek(lx);
        if (t->kind == T_RBRACE || t->kind == T_EOF)
            return 0;
        if (t->kind == T_SEMI || t->kind == T_COMMA) {
            next(lx);
            continue;
        }
        if (parse_stmt(lx, depth))
            return -1;
    }
}

static int parse_graphs(lexer_t *lx)
{
    pft_dotscan_t *s = lx->s;
    while (peek(lx)->kind != T_EOF) {
        if (is_kw(peek(lx), "strict"))
            next(lx);
        tok_t kw = next(lx);
        if (!is_kw(&kw, "graph") && !is_kw(&kw, "digraph"))
            return -1;
        s->n_graphs++;
        if (s->n_graphs == 1)
            s->header_line = kw.line;
        else if (s->n_graphs == 2)
            s->second_line = kw.line;
        if (s->n_graphs > 1)
            return 0; /* only the first graph is scanned */
        if (peek(lx)->kind == T_ID)
            next(lx);
        if (next(lx).kind != T_LBRACE)
            return -1;
        if (parse_stmt_list(lx, 0))
            return -1;
        if (next(lx).kind != T_RBRACE)
            return -1;
    }
    return 0;
}

/* ---- lexical check: the start conditions of libcgraph's lexer ---- */

static void set_fault(pft_dotscan_t *s, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_fault(pft_dotscan_t *s, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->fault, sizeof s->fault, fmt, ap);
    va_end(ap);
    s->fault_line = line;
}

/* Walks the whole text as cgraph 2.42's flex lexer (lib/cgraph/scan.l) would, tracking only its start
 * conditions (INITIAL, quoted string, HTML string, block comment) and brace depth, and records the
 * first fault that would leave that lexer's static state dirty for the next parse in the process:
 * - the text ends inside a quoted string, HTML string or block comment: the start condition stays
 *   set and swallows every later file;
 * - anything but blanks (' ', '\t', '\r', '\n', a byte order mark) and comments follows the closing
 *   brace of the first graph: cgraph stops there and leaves the rest in its buffer, where the next
 *   parse reads it first ('\f', '@' and a lone '/' count as text: cgraph's lexer returns them as
 *   tokens).
 * Lexical rules mirrored: '//' and '#' comment to the end of the line (anywhere, as in cgraph); in a
 * quoted string \" \\ and backslash-newline are pairs, so a quote after an odd run of backslashes
 * does not close it; an HTML string nests '<' and '>' and ignores quotes. Unlike cgraph this walk does
 * not stop at a syntax error, so it may refuse text cgraph would refuse anyway, never the reverse. */
static void check_lexical(pft_dotscan_t *s, const char *p, const char *end)
{
    int line = 1, depth = 0, close_line = 0;
    while (p < end) {
        const int open_line = line;
        const char c = *p;
        if (c == '\n') {
            line++;
            p++;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            p++;
        } else if (is_bom(p, end)) {
            p += 3;
        } else if (c == '#' || (c == '/' && p + 1 < end && p[1] == '/')) {
            while (p < end && *p != '\n')
                p++;
        } else if (c == '/' && p + 1 < end && p[1] == '*') {
            for (p += 2; p < end && !(p[0] == '*' && p + 1 < end && p[1] == '/'); p++)
                line += *p == '\n';
            if (p >= end) {
                set_fault(s, open_line, "a '/*' comment opened on this line is never closed with '*/'");
                return;
            }
            p += 2;
        } else if (close_line) {
            set_fault(s, line,
                      "text after the graph's closing '}' (line %d): a topology file holds one digraph "
                      "and nothing after it but blanks and comments",
                      close_line);
            return;
        } else if (c == '"') {
            for (p++; p < end && *p != '"'; p++) {
                if (*p == '\\' && p + 1 < end && (p[1] == '"' || p[1] == '\\' || p[1] == '\n'))
                    p++; /* a pair: escaped quote, two backslashes, backslash-newline */
                line += *p == '\n';
            }
            if (p >= end) {
                set_fault(s, open_line,
                          "a quoted string opened on this line is never closed (no '\"' before the end "
                          "of the file; inside a string write \\\" for a quote)");
                return;
            }
            p++;
        } else if (c == '<') {
            int nest = 1;
            for (p++; p < end && nest > 0; p++) {
                nest += (*p == '<') - (*p == '>');
                line += *p == '\n';
            }
            if (nest > 0) {
                set_fault(s, open_line,
                          "an HTML string '<...>' opened on this line is never closed (its '<' and '>' "
                          "do not balance before the end of the file)");
                return;
            }
        } else {
            if (c == '{')
                depth++;
            else if (c == '}' && depth > 0 && --depth == 0)
                close_line = line;
            p++;
        }
    }
}

/* ---- public ---- */

int pft_dotscan_new(const char *text, size_t len, pft_dotscan_t **out)
{
    *out = NULL;
    pft_dotscan_t *s = pft_calloc(1, sizeof *s);
    if (!s)
        return pft_err(PFT_ENOMEM, "scanning topology text: out of memory");
    lexer_t lx = {.s = s, .p = text, .end = text + len, .line = 1};
    if (lx.p < lx.end && *lx.p == '#')
        while (lx.p < lx.end && *lx.p != '\n')
            lx.p++;
    (void)parse_graphs(&lx); /* where it stops, the records so far stand */
    check_lexical(s, text, text + len);
    pft_free(lx.buf);
    if (lx.oom) {
        pft_dotscan_destroy(&s);
        return pft_err(PFT_ENOMEM, "scanning topology text: out of memory");
    }
    *out = s;
    return 0;
}

void pft_dotscan_destroy(pft_dotscan_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_dotscan_t *s = *self_p;
    for (size_t i = 0; i < s->n_pool; i++)
        pft_free(s->pool[i]);
    pft_free(s->pool);
    pft_free(s->nodes);
    pft_free(s->edges);
    pft_free(s->attrs);
    pft_free(s->occ);
    pft_free(s);
    *self_p = NULL;
}

const char *pft_dotscan_fault(const pft_dotscan_t *self, int *line)
{
    *line = self->fault[0] ? self->fault_line : 0;
    return self->fault[0] ? self->fault : NULL;
}

int pft_dotscan_header_line(const pft_dotscan_t *self)
{
    return self->header_line;
}

size_t pft_dotscan_graph_count(const pft_dotscan_t *self)
{
    return self->n_graphs;
}

int pft_dotscan_second_graph_line(const pft_dotscan_t *self)
{
    return self->second_line;
}

int pft_dotscan_node_line(const pft_dotscan_t *self, const char *id)
{
    for (size_t i = 0; i < self->n_nodes; i++)
        if (strcmp(self->nodes[i].id, id) == 0)
            return self->nodes[i].line;
    return 0;
}

int pft_dotscan_edge_line(const pft_dotscan_t *self, const char *tail, const char *head, size_t nth)
{
    for (size_t i = 0; i < self->n_edges; i++)
        if (strcmp(self->edges[i].tail, tail) == 0 && strcmp(self->edges[i].head, head) == 0 && nth-- == 0)
            return self->edges[i].line;
    return 0;
}

size_t pft_dotscan_attr_count(const pft_dotscan_t *self)
{
    return self->n_attrs;
}

const pft_dotscan_attr_t *pft_dotscan_attr(const pft_dotscan_t *self, size_t i)
{
    return i < self->n_attrs ? &self->attrs[i] : NULL;
}

int pft_dotscan_node_attr_line(const pft_dotscan_t *self, const char *id, const char *name)
{
    int def = 0;
    for (size_t i = 0; i < self->n_attrs; i++) {
        const pft_dotscan_attr_t *a = &self->attrs[i];
        if (a->scope != PFT_DOT_NODE || strcmp(a->name, name) != 0)
            continue;
        if (a->node && strcmp(a->node, id) == 0)
            return a->line;
        if (a->is_default && !def)
            def = a->line;
    }
    return def;
}

int pft_dotscan_edge_attr_line(const pft_dotscan_t *self, const char *tail, const char *head,
                               const char *name)
{
    int def = 0;
    for (size_t i = 0; i < self->n_attrs; i++) {
        const pft_dotscan_attr_t *a = &self->attrs[i];
        if (a->scope != PFT_DOT_EDGE || strcmp(a->name, name) != 0)
            continue;
        for (size_t e = a->edge_first; e < a->edge_first + a->edge_count && e < self->n_edges; e++)
            if (strcmp(self->edges[e].tail, tail) == 0 && strcmp(self->edges[e].head, head) == 0)
                return a->line;
        if (a->is_default && !def)
            def = a->line;
    }
    return def;
}

int pft_dotscan_graph_attr_line(const pft_dotscan_t *self, const char *name)
{
    for (size_t i = 0; i < self->n_attrs; i++) {
        const pft_dotscan_attr_t *a = &self->attrs[i];
        if (a->scope == PFT_DOT_GRAPH && !a->in_subgraph && strcmp(a->name, name) == 0)
            return a->line;
    }
    return 0;
}

int pft_dotscan_too_big(const pft_dotscan_t *self, const char **what, int *line)
{
    *what = self->too_big;
    *line = self->too_big ? self->too_big_line : 0;
    return self->too_big != NULL;
}

int pft_dotscan_node_stmt_line(const pft_dotscan_t *self, const char *id)
{
    for (size_t i = 0; i < self->n_nodes; i++)
        if (strcmp(self->nodes[i].id, id) == 0)
            return self->nodes[i].stmt_line;
    return 0;
}

/* Orders a node's own attribute assignments by node, name, then file order. */
static int cmp_node_attr(const void *pa, const void *pb)
{
    const pft_dotscan_attr_t *a = *(const pft_dotscan_attr_t *const *)pa,
                             *b = *(const pft_dotscan_attr_t *const *)pb;
    int c = strcmp(a->node, b->node);
    if (!c)
        c = strcmp(a->name, b->name);
    return c ? c : (a->line > b->line) - (a->line < b->line);
}

int pft_dotscan_node_attr_twice(const pft_dotscan_t *self, const pft_dotscan_attr_t **first,
                                const pft_dotscan_attr_t **second)
{
    *first = *second = NULL;
    const pft_dotscan_attr_t **own = pft_alloc_array(self->n_attrs ? self->n_attrs : 1, sizeof *own);
    size_t n = 0;
    for (size_t i = 0; own && i < self->n_attrs; i++)
        if (self->attrs[i].scope == PFT_DOT_NODE && self->attrs[i].node && !self->attrs[i].is_default)
            own[n++] = &self->attrs[i];
    if (own)
        qsort(own, n, sizeof *own, cmp_node_attr);
    for (size_t i = 1; own && i < n && !*first; i++)
        if (strcmp(own[i - 1]->node, own[i]->node) == 0 && strcmp(own[i - 1]->name, own[i]->name) == 0 &&
            strcmp(own[i - 1]->value, own[i]->value) != 0) {
            *first = own[i - 1];
            *second = own[i];
        }
    pft_free(own);
    return *first != NULL;
}
