/* pft_nodefile: a node's private facts (data files, secret key, evaluation set) in a node-local file. */
#include "pft_nodefile.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NODEFILE_MAX (64 * 1024)

static const struct {
    const char *name;
    size_t off;
} s_fields[] = {
    {"train", offsetof(pft_nodefile_t, train)},
    {"labels", offsetof(pft_nodefile_t, labels)},
    {"test", offsetof(pft_nodefile_t, test)},
    {"test_labels", offsetof(pft_nodefile_t, test_labels)},
    {"key", offsetof(pft_nodefile_t, key)},
    {"eval_features", offsetof(pft_nodefile_t, eval_features)},
    {"eval_labels", offsetof(pft_nodefile_t, eval_labels)},
};
#define N_FIELDS (sizeof s_fields / sizeof *s_fields)

static char **field(pft_nodefile_t *nf, size_t i)
{
    return (char **)((char *)nf + s_fields[i].off);
}

void pft_nodefile_free(pft_nodefile_t *nf)
{
    for (size_t i = 0; nf && i < N_FIELDS; i++)
        PFT_FREE(*field(nf, i));
}

/* s without leading and trailing blanks (in place). */
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* value as a path: absolute as given, else relative to dir (the file's folder). */
static char *resolve(const char *dir, const char *value)
{
    return value[0] == '/' || !dir ? pft_strdup(value) : pft_fsio_join(dir, value);
}

/* One line "name = value" of path (line number ln) into nf. */
static int read_line(const char *path, int ln, char *line, const char *dir, pft_nodefile_t *nf)
{
    char *s = trim(line);
    if (!s[0] || s[0] == '#')
        return 0;
    char *eq = strchr(s, '=');
    if (!eq)
        return pft_err(PFT_EINVAL, "%s:%d: expected name = value", path, ln);
    *eq = '\0';
    char *name = trim(s), *value = trim(eq + 1);
    size_t i = 0;
    while (i < N_FIELDS && strcmp(s_fields[i].name, name) != 0)
        i++;
    if (i == N_FIELDS)
        return pft_err(PFT_EINVAL,
                       "%s:%d: unknown name '%s' (a node file names train, labels, test, test_labels, key, "
                       "eval_features, eval_labels)",
                       path, ln, name);
    if (!value[0])
        return pft_err(PFT_EINVAL, "%s:%d: '%s' has no value", path, ln, name);
    if (*field(nf, i))
        return pft_err(PFT_EINVAL, "%s:%d: '%s' is given twice", path, ln, name);
    if (!(*field(nf, i) = resolve(dir, value)))
        return pft_err(PFT_ENOMEM, "out of memory");
    return 0;
}

int pft_nodefile_read(const char *path, pft_nodefile_t *out)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = pft_fsio_read(path, NODEFILE_MAX, &buf, &len);
    if (rc)
        return pft_err_wrap(rc, "node file %s", path);
    char *dir = pft_strdup(path);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash)
        slash[slash == dir] = '\0';
    else if (dir)
        PFT_FREE(dir);        /* relative to the current folder */
    char *text = (char *)buf; /* NUL-terminated by pft_fsio_read */
    if (memchr(buf, '\0', len))
        rc = pft_err(PFT_EINVAL, "%s: not a text file", path);
    for (int ln = 1; rc == 0 && text; ln++) {
        char *nl = strchr(text, '\n');
        if (nl)
            *nl = '\0';
        rc = read_line(path, ln, text, dir, out);
        text = nl ? nl + 1 : NULL;
    }
    pft_free(dir);
    pft_free(buf);
    if (rc)
        pft_nodefile_free(out);
    return rc;
}

int pft_nodefile_write(const char *path, const pft_nodefile_t *nf)
{
    size_t cap = 128, n = 0;
    for (size_t i = 0; i < N_FIELDS; i++) {
        const char *v = *field((pft_nodefile_t *)nf, i);
        cap += v ? strlen(s_fields[i].name) + strlen(v) + 8 : 0;
    }
    char *text = pft_alloc(cap);
    if (!text)
        return pft_err(PFT_ENOMEM, "out of memory");
    n += (size_t)snprintf(text, cap, "# this node's private facts: read by this node only, never shared\n");
    for (size_t i = 0; i < N_FIELDS; i++) {
        const char *v = *field((pft_nodefile_t *)nf, i);
        if (v)
            n += (size_t)snprintf(text + n, cap - n, "%s = %s\n", s_fields[i].name, v);
    }
    int rc = pft_fsio_write_atomic(path, text, n);
    pft_free(text);
    return rc;
}
