/* pft_launch_prepare: step 1 of a launch: the run folder, each node's folder, data, endpoint and key, the
 * resolved topology and the global evaluation set. */
#define _XOPEN_SOURCE 700 /* nftw flags */
#include "pft_launch_int.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_nodefile.h"
#include "pft_npy.h"
#include "pft_topo_rules.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Removes everything under the run folder but the folder itself and its lock (held by this launcher). */
static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    if (ftw->level == 0 || (ftw->level == 1 && strcmp(path + ftw->base, PFT_LAUNCH_LOCK) == 0))
        return 0;
    return remove(path) == 0 ? 0 : -1;
}

/* --resume: the earlier run in DIR (its resolved topology prev) must be of the same nodes, seed and model,
 * else its nodes would resume from another run's state. */
static int check_resume(const pft_topo_t *topo, const char *prev)
{
    pft_topo_t *old = NULL;
    int rc = pft_topo_load(prev, PFT_TOPO_SKIP_DATA_CHECK, &old);
    if (rc) {
        pft_topo_destroy(&old);
        return pft_err_wrap(rc, "--resume: the earlier run's topology");
    }
    const pft_topo_run_t *a = pft_topo_run(topo), *b = pft_topo_run(old);
    const char *what = NULL;
    size_t n = pft_topo_node_count(topo);
    if (n != pft_topo_node_count(old))
        what = "number of nodes";
    for (size_t i = 0; !what && i < n; i++)
        if (strcmp(pft_topo_node(topo, i)->id, pft_topo_node(old, i)->id) != 0)
            what = "node ids";
    if (!what && a->seed != b->seed)
        what = "seed";
    if (!what && (a->k != b->k || a->cov != b->cov || a->samples != b->samples))
        what = "model (k, cov, samples)";
    if (!what && (a->partition || b->partition) &&
        (!a->partition || !b->partition || strcmp(a->partition, b->partition) != 0))
        what = "partition";
    pft_topo_destroy(&old);
    if (what)
        return pft_err(
            PFT_EINVAL,
            "--resume: %s holds a run with another %s; its nodes would resume from the wrong state. "
            "Choose another --out, or --force to delete it",
            prev, what);
    return 0;
}

/* An earlier run in dir would be resumed by its nodes (they reload what they stored); a new launch needs a
 * clean folder. Returns 0 when dir is absent or empty, was removed with --force, or is kept for --resume (of
 * the same topology). */
static int check_out_dir(const pft_launch_t *self, const char *dir)
{
    char *p = pft_fsio_join(dir, "topology.dot");
    int used = p && pft_fsio_exists(p), force = self->o.force, rc = 0;
    if (used && self->o.resume)
        rc = check_resume(self->topo, p);
    pft_free(p);
    if (!used || self->o.resume)
        return rc;
    if (!force)
        return pft_err(PFT_EINVAL,
                       "%s holds an earlier run; choose another --out, add --force to delete it, or "
                       "--resume to start its nodes again from their saved state",
                       dir);
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return pft_err(PFT_EIO, "%s: cannot delete the earlier run: %s", dir, strerror(errno));
    return 0;
}

/* Makes the output folder, takes it for this launcher (nodes an earlier launch left running stopped before a
 * --resume or --force touches it) and switches o.out_dir to its absolute path: every path the launcher writes
 * into the resolved topology must be absolute, as relative ones would be read against the topology file's
 * folder. */
static int make_out_dir(pft_launch_t *self)
{
    int rc;
    if ((rc = pft_fsio_mkdirs(self->o.out_dir)) || (rc = pft_launch__lock_run(self, self->o.out_dir)))
        return rc;
    if ((self->o.resume || self->o.force) && (rc = pft_launch__stop_leftovers(self, self->o.out_dir)))
        return rc;
    if ((rc = check_out_dir(self, self->o.out_dir)))
        return rc;
    if (!realpath(self->o.out_dir, self->out_abs))
        return pft_err(PFT_EIO, "%s: %s", self->o.out_dir, strerror(errno));
    self->o.out_dir = self->out_abs;
    return 0;
}

/* One child per node, each with its folder DIR/<id> (an endpoint file left there by an earlier run removed,
 * before any node starts: a predecessor would connect to a port that is gone); the --absent ones marked. */
static int make_children(pft_launch_t *self)
{
    size_t nn = self->nn;
    self->ch = pft_calloc(nn, sizeof *self->ch);
    if (!self->ch)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; i < nn; i++)
        self->ch[i].listen_fd = -1;
    for (size_t i = 0; i < nn; i++) {
        pft_launch_child_t *c = &self->ch[i];
        c->id = pft_topo_node(self->topo, i)->id;
        c->dir = pft_fsio_join(self->o.out_dir, c->id);
        if (!c->dir)
            return pft_err(PFT_ENOMEM, "out of memory");
        int rc = pft_fsio_mkdirs(c->dir);
        if (rc)
            return rc;
        char *ep = pft_fsio_join(c->dir, "endpoint"); /* an earlier run's (--resume): its port is gone */
        if (!ep || (remove(ep) != 0 && errno != ENOENT))
            rc = ep ? pft_err(PFT_EIO, "%s: cannot remove: %s", ep, strerror(errno))
                    : pft_err(PFT_ENOMEM, "out of memory");
        pft_free(ep);
        if (rc)
            return rc;
    }
    for (const char *p = self->o.absent; p && *p;) {
        size_t len = strcspn(p, ",");
        size_t i = 0;
        while (i < nn && !(strlen(self->ch[i].id) == len && strncmp(self->ch[i].id, p, len) == 0))
            i++;
        if (i == nn)
            return pft_err(PFT_EINVAL, "--absent: no node '%.*s' in %s", (int)len, p, self->o.topo_path);
        self->ch[i].absent = 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* Node c's keypair in dir (the caller's keypair function); the topology names its public half; c->key gets
 * the secret key file. */
static int make_key(pft_topo_t *topo, const char *dir, pft_launch_child_t *c,
                    int (*keypair)(const char *, const char *, const char *))
{
    char name[160];
    snprintf(name, sizeof name, "%s.key", c->id);
    char *sk = pft_fsio_join(dir, name);
    snprintf(name, sizeof name, "%s.pub", c->id);
    char *pk = pft_fsio_join(dir, name);
    int rc = sk && pk ? keypair(c->id, sk, pk) : PFT_ENOMEM;
    if (rc == 0)
        rc = pft_topo_set_node_attr(topo, c->id, "key", pk);
    if (rc == 0) {
        c->key = sk;
        sk = NULL;
    }
    pft_free(sk);
    pft_free(pk);
    return rc;
}

/* Simulation keys: every node without a `key` gets a keypair in DIR/keys (kept across restarts of the same
 * run), and the topology names its public half. */
static int make_keys(pft_launch_t *self)
{
    char *dir = pft_fsio_join(self->o.out_dir, "keys");
    int rc = dir ? pft_fsio_mkdirs(dir) : PFT_ENOMEM;
    if (rc == 0)
        chmod(dir, 0700);
    for (size_t i = 0; i < self->nn && rc == 0; i++) {
        if (pft_topo_node(self->topo, i)->key)
            continue;
        rc = make_key(self->topo, dir, &self->ch[i], self->o.keypair);
        pft_launch__refresh_ids(self); /* stale after set_attr */
    }
    pft_free(dir);
    return rc;
}

/* The split the nodes read: the resolved topology's public facts (every attribute the launcher set but the
 * nodes' files) as DIR/topology.dot, and each node's private facts (its data files, secret key, the
 * evaluation set) as DIR/<id>/node.conf, which only that node reads. */
static int write_resolved(pft_launch_t *self)
{
    self->resolved = pft_fsio_join(self->o.out_dir, "topology.dot");
    if (!self->resolved)
        return pft_err(PFT_ENOMEM, "out of memory");
    int rc = pft_topo_write_public(self->topo, self->resolved);
    for (size_t i = 0; rc == 0 && i < self->nn; i++) {
        pft_launch_child_t *c = &self->ch[i];
        const pft_topo_node_t *n = pft_topo_node(self->topo, i);
        pft_nodefile_t nf = {(char *)n->train, (char *)n->labels, (char *)n->test, (char *)n->test_labels,
                             c->key,           self->eval_x,      self->eval_y};
        pft_free(c->node_file);
        if (!(c->node_file = pft_fsio_join(c->dir, "node.conf")))
            return pft_err(PFT_ENOMEM, "out of memory");
        rc = pft_nodefile_write(c->node_file, &nf);
    }
    return rc;
}

/* The union of every node's test share as DIR/eval_{x,y}.npy (the nodes' accuracy_global); none without. */
static int write_eval(pft_launch_t *self)
{
    int rc = pft_launch__concat_tests(self, &self->eval);
    if (rc || !self->eval)
        return rc;
    self->eval_x = pft_fsio_join(self->o.out_dir, "eval_x.npy");
    self->eval_y = pft_fsio_join(self->o.out_dir, "eval_y.npy");
    if (!self->eval_x || !self->eval_y)
        return pft_err(PFT_ENOMEM, "out of memory");
    const pft_dataset_t *e = self->eval;
    if ((rc = pft_npy_write_f32(self->eval_x, pft_dataset_x(e), pft_dataset_n(e), pft_dataset_d(e))))
        return rc;
    return pft_npy_write_i32(self->eval_y, pft_dataset_y(e), pft_dataset_n(e));
}

/* The topology's rules between attributes (pft_topo_rules.h: the same validator as pftnet check and pftnode),
 * before anything is written; the message prefixed with the topology's path. */
static int check_rules(const pft_launch_t *self)
{
#ifdef PFT_TEST_HOOKS
    if (getenv("PFT_TEST_SKIP_RULES")) { /* lets a test hand a rule-breaking topology to pftnode itself */
        fprintf(stderr, "test hook: PFT_TEST_SKIP_RULES: the topology's rules are not checked\n");
        return 0;
    }
#endif
    const pft_topo_facts_t facts = {.insecure = self->o.insecure};
    int rc = pft_topo_rules_check(self->topo, &facts, NULL, NULL);
    return rc ? pft_err_wrap(rc, "%s", self->o.topo_path) : 0;
}

/* The same rules again with what only the launcher knows: every node's training rows per class (its share of
 * a simulation's dataset, or its own files), so that a class held by too few members is refused here rather
 * than by the opener at opening; then what the run leaves open (pft_topo_rules_warnings: on stderr, even
 * --quiet, as pftnet check says it). */
static int check_rules_data(const pft_launch_t *self)
{
#ifdef PFT_TEST_HOOKS
    if (getenv("PFT_TEST_SKIP_RULES"))
        return 0;
#endif
    size_t nc = 0;
    uint64_t *rows = NULL;
    int rc = pft_launch__class_rows(self, &rows, &nc);
    const pft_topo_facts_t facts = {.insecure = self->o.insecure, .n_classes = nc, .class_rows = rows};
    if (rc == 0 && pft_topo_run(self->topo)->secure_agg && nc &&
        (rc = pft_topo_rules_check(self->topo, &facts, NULL, NULL)) != 0)
        pft_err_wrap(rc, "%s (with each node's rows per class)", self->o.topo_path);
    pft_topo_verdict_t w[4];
    for (size_t i = 0, n = rc ? 0 : pft_topo_rules_warnings(self->topo, &facts, w, 4); i < n; i++)
        fprintf(stderr, "pftnet launch: %s\n", w[i].text);
    pft_free(rows);
    return rc;
}

int pft_launch_prepare(pft_launch_t *self)
{
    int rc = pft_topo_load(self->o.topo_path, PFT_TOPO_SKIP_DATA_CHECK | PFT_TOPO_LAUNCH, &self->topo);
    if (rc == 0)
        rc = pft_topo_rules_apply_sets(self->topo, self->o.set.v, self->o.set.n, self->o.seed);
    if (rc)
        return rc;
    for (size_t i = 0; self->o.insecure && i < pft_topo_node_count(self->topo); i++)
        if (pft_topo_node(self->topo, i)->key) /* keys in the topology mean keys are required */
            return pft_err(PFT_ETOPO,
                           "--insecure refused: %s names keys (node '%s'), so its nodes accept only CURVE "
                           "connections and signed bundles; run without --insecure",
                           self->o.topo_path, pft_topo_node(self->topo, i)->id);
    if ((rc = check_rules(self)))
        return rc;
    self->nn = pft_topo_node_count(self->topo);
    if (self->o.force && self->o.resume)
        return pft_err(PFT_EINVAL,
                       "--force deletes the earlier run that --resume would continue: choose one");
    if (!(self->engine = pft_launch__engine(self->o.engine)))
        return pft_err(PFT_EINVAL, "--engine '%s': no such engine", self->o.engine);
    if ((rc = self->engine->setup(self)))
        return rc;
    if ((rc = make_out_dir(self)) || (rc = make_children(self)))
        return rc;
    if (self->engine->place && (rc = self->engine->place(self))) /* before the data: fails fast */
        return rc;
    if ((rc = pft_launch__load_data(self)) || (rc = check_rules_data(self)))
        return rc;
    pft_launch__refresh_ids(self); /* pointers are stale after set_attr */
    if ((rc = self->engine->endpoints(self)))
        return rc;
    pft_launch__refresh_ids(self);
    if (!self->o.insecure && (rc = make_keys(self)))
        return rc;
    pft_launch__refresh_ids(self);
    if ((rc = write_eval(self)))
        return rc;
    return write_resolved(self);
}
