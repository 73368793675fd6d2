/* End-to-end: exact statistics (cov = tied, head = gaussian) over real pftnode processes on loopback, on the
 * bundled PACS example data. Along a chain, a diamond (paths rejoin), a ring and a mesh, every node that
 * received everyone's knowledge counts each row once and has exactly the centralized Gaussian head: the head
 * rebuilt here from all nodes' raw rows, at the shrinkage the node chose, gives the node's accuracy to one
 * row (these runs use stats_release = full_scatter, the exact dense release). In the diamond, b and c send
 * their own statistics apart from a's, so that d can take a's once. The default release (stats_release =
 * lowrank) is checked against the sender's rows: class means and the shared scatter's diagonal exact, its
 * off-diagonal part the q = rows / 15 leading eigenpairs of the scatter (LAPACK's dsyev here); a relay's (one
 * low-rank part received) those of its merged scatter less the received diagonal, its evidence held out. */
#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_e2e_ref.h"
#include "pft_e2e_run.h"
#include "pft_ghead.h"
#include "pft_gstat.h"
#include "pft_npy.h"
#include "pft_prep.h"
#include "pft_test.h"

#include <jansson.h>
#include <lapacke.h>
#include <math.h>
#include <sys/wait.h>

#define EXAMPLE_DATA PFT_SOURCE_DIR "/examples/data/pacs-small"
#define ROWS 60 /* training rows per node */

static char s_tmp[256];

static void write_topo(const char *name, const char *body, char *path, size_t len)
{
    snprintf(path, len, "%s/%s.dot", s_tmp, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f,
            "digraph %s {\n  dataset = \"%s\"; partition = iid; samples = %d; cov = tied; prep = l2;\n"
            /* min_rows = 1: every own class travels, so the merge is exactly the centralized statistics (the
             * floor withholds own classes below it: tests/e2e_floor.sh) */
            /* mean_noise = 0: exact class sums, so that merges equal the centralized statistics */
            "  deadline = 120; send_deadline = 60; min_rows = 1;%s%s\n%s}\n",
            name, EXAMPLE_DATA, ROWS, strstr(body, "stats_release") ? "" : " stats_release = full_scatter;",
            strstr(body, "mean_noise") ? "" : " mean_noise = 0;", body);
    fclose(f);
}

static json_t *launch(const char *name, const char *body, char *out, size_t len)
{
    char topo[512], cmd[4096];
    write_topo(name, body, topo, sizeof topo);
    snprintf(out, len, "%s/%s", s_tmp, name);
    snprintf(cmd, sizeof cmd,
             "PFTNODE=%s/node/pftnode %s/node/pftnet launch %s --out %s --quiet --no-baselines > %s.stdout "
             "2> %s.stderr",
             PFT_BINARY_DIR, PFT_BINARY_DIR, topo, out, out, out);
    int st = system(cmd);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    CHECK_MSG(code == 0, "%s: launch exit %d (see %s.stderr, %s/*/node.log)", name, code, out, out);
    char path[600];
    snprintf(path, sizeof path, "%s/results.json", out);
    json_error_t err;
    return json_load_file(path, 0, &err);
}

/* Rows of a .npy pair, l2-normalised as the nodes do. */
static int load_rows(const char *dir, const char *stem, float **x, int32_t **y, int64_t *n, int64_t *d)
{
    char px[600], py[600];
    snprintf(px, sizeof px, "%s/%s_x.npy", dir, stem);
    snprintf(py, sizeof py, "%s/%s_y.npy", dir, stem);
    int64_t ny;
    if (pft_npy_read_f32(px, x, n, d) != 0 || pft_npy_read_i32(py, y, &ny) != 0 || ny != *n)
        return -1;
    return pft_prep_apply(PFT_PREP_L2, *x, (int)*n, (int)*d);
}

/* The centralized Gaussian head of every node's raw rows at shrinkage alpha, scored on the run's eval set. */
static double central_accuracy(const char *out, json_t *nodes, double alpha, int *n_eval)
{
    pft_gstat_t *st = NULL;
    size_t i;
    json_t *n;
    int C = 0;
    json_array_foreach(nodes, i, n)
    {
        char dir[600];
        snprintf(dir, sizeof dir, "%s/%s/data", out, json_string_value(json_object_get(n, "id")));
        float *x = NULL;
        int32_t *y = NULL;
        int64_t rows = 0, d = 0;
        CHECK(load_rows(dir, "train", &x, &y, &rows, &d) == 0);
        if (!st)
            st = pft_gstat_new(PFT_GSTAT_TIED, (int)d);
        CHECK(st && pft_gstat_add_rows(st, x, y, (size_t)rows) == 0);
        for (int64_t r = 0; r < rows; r++)
            C = y[r] + 1 > C ? y[r] + 1 : C;
        pft_free(x);
        pft_free(y);
    }
    float *ex = NULL;
    int32_t *ey = NULL;
    int64_t ne = 0, d = 0;
    CHECK(load_rows(out, "eval", &ex, &ey, &ne, &d) == 0);
    for (int64_t r = 0; r < ne; r++)
        C = ey[r] + 1 > C ? ey[r] + 1 : C;
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.alpha = alpha;
    pft_ghead_t *h = NULL;
    double acc = -1;
    if (st && pft_ghead_fit(st, NULL, NULL, 0, C, &o, &h, NULL) == 0)
        CHECK(pft_ghead_accuracy(h, ex, ey, (int)ne, &acc, NULL, NULL) == 0);
    *n_eval = (int)ne;
    pft_ghead_destroy(&h);
    pft_gstat_destroy(&st);
    pft_free(ex);
    pft_free(ey);
    return acc;
}

/* Every node listed in `complete` holds every node's rows once and the centralized head's accuracy. */
static void check_complete(const char *name, json_t *r, const char *out, const char *const *complete,
                           int n_nodes)
{
    CHECK(r != NULL);
    if (!r)
        return;
    json_t *nodes = json_object_get(r, "nodes");
    CHECK((int)json_array_size(nodes) == n_nodes);
    for (int k = 0; complete[k]; k++) {
        json_t *n = pft_e2e_find_id(nodes, complete[k]);
        CHECK(n != NULL);
        if (!n)
            continue;
        CHECK_MSG(strcmp(json_string_value(json_object_get(n, "status")), "ok") == 0, "%s %s: %s", name,
                  complete[k], json_string_value(json_object_get(n, "status")));
        CHECK_MSG(pft_e2e_prov_nodes(n) == n_nodes && pft_e2e_prov_total(n) == ROWS * n_nodes,
                  "%s %s: provenance %d nodes, %ld rows", name, complete[k], pft_e2e_prov_nodes(n),
                  pft_e2e_prov_total(n));
        json_t *g = json_object_get(n, "gaussian_head");
        CHECK_MSG(g && pft_e2e_jint(g, "rows") == ROWS * n_nodes, "%s %s: head on %ld rows", name,
                  complete[k], g ? pft_e2e_jint(g, "rows") : -1);
        if (!g)
            continue;
        int ne = 0;
        double central = central_accuracy(out, nodes, json_real_value(json_object_get(g, "alpha")), &ne);
        double acc = json_real_value(json_object_get(n, "accuracy_global"));
        CHECK_MSG(fabs(acc - central) <= 1.0 / ne + 1e-9, "%s %s: accuracy %.4f, centralized %.4f (%d rows)",
                  name, complete[k], acc, central, ne);
        fprintf(stderr, "  %s %s: accuracy %.4f = centralized %.4f (α = %g)\n", name, complete[k], acc,
                central, json_real_value(json_object_get(g, "alpha")));
    }
}

static void test_chain(void)
{
    char out[512];
    json_t *r = launch("chain4", "  a -> b -> c -> d;\n", out, sizeof out);
    check_complete("chain4", r, out, (const char *const[]){"d", NULL}, 4);
    json_decref(r);
}

/* b's bundle holds two parts, {a} and {b}: a reaches d along two paths. */
static void check_parts(const char *out)
{
    char path[600];
    snprintf(path, sizeof path, "%s/b/bundle.pftb", out);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f)
        return;
    static uint8_t buf[1 << 24];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    pft_bundle_t *b = NULL;
    CHECK(pft_bundle_decode(buf, len, NULL, &b) == 0);
    CHECK(b && pft_bundle_is_stats(b) && pft_bundle_n_parts(b) == 2);
    for (int i = 0; b && i < pft_bundle_n_parts(b); i++)
        CHECK(pft_bundle_part_n_contributors(b, i) == 1);
    pft_bundle_destroy(&b);
}

/* head = logreg on exact statistics: the softmax head trains on own rows and draws from the class Gaussians
 * standing for everyone else's rows. */
static void test_logreg_head(void)
{
    char out[512];
    json_t *r = launch("chain3lr", "  head = logreg;\n  a -> b -> c;\n", out, sizeof out);
    json_t *n = r ? pft_e2e_find_id(json_object_get(r, "nodes"), "c") : NULL;
    CHECK(n != NULL);
    if (n) {
        CHECK(strcmp(json_string_value(json_object_get(n, "status")), "ok") == 0);
        CHECK(json_object_get(n, "gaussian_head") == NULL);
        CHECK_MSG(pft_e2e_jint(n, "n_real") == ROWS && pft_e2e_jint(n, "n_synthetic") == 2 * ROWS,
                  "c: %ld real, %ld synthetic rows", pft_e2e_jint(n, "n_real"),
                  pft_e2e_jint(n, "n_synthetic"));
        double acc = json_real_value(json_object_get(n, "accuracy_global"));
        pft_e2e_ref_check_knowledge(out, "c", "a,b,c", acc, 0.05);
    }
    json_decref(r);
}

/* Reads and decodes out/node/bundle.pftb; NULL on failure (checked). */
static pft_bundle_t *read_bundle(const char *out, const char *node)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s/bundle.pftb", out, node);
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "no %s", path);
    if (!f)
        return NULL;
    static uint8_t buf[1 << 24];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    pft_bundle_t *b = NULL;
    CHECK(pft_bundle_decode(buf, len, NULL, &b) == 0);
    return b;
}

/* The default release of a's rows (chain a -> b): rank rows / 15 + diagonal (stats_rows_per_rank's default,
 * 15). The oracle is a's own rows of the classes the part releases: their exact statistics, and the q leading
 * eigenpairs of their shared covariance W / N by LAPACK's dsyev. With min_rows = 1 every class travels (60
 * rows, q = 4) and the release is the one the node's evidence reduced (its tridiagonal reduction reused);
 * with min_rows = 8 the floor withholds a's smaller classes, so the part is not what the evidence scored
 * against (all own rows) and its release must not come from that reduction. */
static void check_release(const char *name, int min_rows)
{
    char out[512], body[160];
    snprintf(body, sizeof body, "  stats_release = lowrank; min_rows = %d;\n  a -> b;\n", min_rows);
    json_t *r = launch(name, body, out, sizeof out);
    json_decref(r);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/a/data", out);
    float *x = NULL;
    int32_t *y = NULL;
    int64_t n = 0, d = 0, m = 0;
    CHECK(load_rows(dir, "train", &x, &y, &n, &d) == 0 && n == ROWS);
    pft_bundle_t *b = read_bundle(out, "a");
    const pft_gstat_t *st = b && pft_bundle_n_parts(b) == 1 ? pft_bundle_part_stats(b, 0) : NULL;
    for (int64_t i = 0; st && i < n; i++) /* the released classes' rows, in place */
        if (pft_gstat_find(st, y[i]) >= 0) {
            memmove(x + m * d, x + i * d, (size_t)d * sizeof *x);
            y[m++] = y[i];
        }
    pft_gstat_t *own = pft_gstat_new(PFT_GSTAT_TIED, (int)d);
    CHECK(own && m > 0 && pft_gstat_add_rows(own, x, y, (size_t)m) == 0);
    int q = -1, want = (int)(m / 15);
    const double *u = st ? pft_bundle_part_factor(b, 0, &q) : NULL;
    CHECK_MSG(st && pft_bundle_shared_rank(b) == want && u && q == want && (min_rows == 1) == (m == n),
              "%s: a's bundle: shared rank %d, factor of %d columns (expected %d = %d rows / 15)", name,
              b ? pft_bundle_shared_rank(b) : -1, q, want, (int)m);
    if (!own || !u || q != want || d < 8)
        goto done;
    size_t D = (size_t)d;
    double emax = 0, dmax = 0, offmax = 0, scale = 0;
    for (int c = 0; c < pft_gstat_n_classes(own); c++) /* means: exact (fp32 on the wire) */
        for (size_t j = 0; j < D; j++)
            emax = fmax(emax, fabs(pft_gstat_mean(st, c)[j] - pft_gstat_mean(own, c)[j]));
    const double *w = pft_gstat_tied_scatter(own), *wd = pft_gstat_tied_scatter(st);
    double *ev = pft_alloc_array(D * D, sizeof *ev), *lam = pft_alloc_array(D, sizeof *lam);
    CHECK(ev && lam);
    for (size_t i = 0; ev && i < D * D; i++)
        ev[i] = w[i] / (double)m;
    int info = ev && lam
                   ? (int)LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)d, ev, (lapack_int)d, lam)
                   : -1;
    CHECK_MSG(info == 0, "dsyev: info %d", info);
    for (size_t i = 0; info == 0 && i < D; i++) {
        dmax = fmax(dmax, fabs(wd[i * D + i] - w[i * D + i]) / (double)m); /* the diagonal: exact */
        scale = fmax(scale, w[i * D + i] / (double)m);
        for (size_t k = 0; k < D; k++) { /* off the diagonal: the q leading eigenpairs (columns d-q..d-1) */
            if (k == i)
                continue;
            double lead = 0, fac = 0;
            for (size_t t = D - (size_t)q; t < D; t++)
                lead += lam[t] * ev[i * D + t] * ev[k * D + t];
            for (int t = 0; t < q; t++)
                fac += u[i * (size_t)q + (size_t)t] * u[k * (size_t)q + (size_t)t];
            offmax = fmax(offmax, fabs(wd[i * D + k] / (double)m - lead) + fabs(fac - lead));
        }
    }
    CHECK_MSG(
        emax < 1e-6 && dmax < 1e-6 * scale && offmax < 1e-5 * scale,
        "%s: release: means off by %.3g, diagonal by %.3g, off-diagonal by %.3g (largest variance %.3g)",
        name, emax, dmax, offmax, scale);
    fprintf(stderr,
            "  %s: release of a's %d of %d rows: rank %d + diagonal; means %.2g, diagonal %.2g, off-diagonal "
            "%.2g from the oracle\n",
            name, (int)m, (int)n, q, emax, dmax, offmax);
    pft_free(ev);
    pft_free(lam);
done:
    pft_bundle_destroy(&b);
    pft_gstat_destroy(&own);
    pft_free(x);
    pft_free(y);
}

/* max over i ≠ k of |A_ik − Σ_{t ≥ d−q} lam_t ev_it ev_kt| (ev: dsyev's eigenvectors in columns, ascending).
 */
static double off_lead(const double *A, size_t D, const double *ev, const double *lam, int q, double s)
{
    double worst = 0;
    for (size_t i = 0; i < D; i++)
        for (size_t k = 0; k < D; k++) {
            if (k == i)
                continue;
            double lead = 0;
            for (size_t t = D - (size_t)q; t < D; t++)
                lead += lam[t] * ev[i * D + t] * ev[k * D + t];
            worst = fmax(worst, fabs(A[i * D + k] * s - lead));
        }
    return worst;
}

/* Lines of OUT/NODE/node.log holding a (and b, when given). */
static int log_lines(const char *out, const char *node, const char *a, const char *b)
{
    char log[600], line[1024];
    snprintf(log, sizeof log, "%s/%s/node.log", out, node);
    FILE *f = fopen(log, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, a) && (!b || strstr(line, b));
    if (f)
        fclose(f);
    return n;
}

/* A relay's hop (DESIGN.md §8): in the chain a -> b -> c, b received one low-rank part, so it scores its own
 * rows held out against that part (its evidence says it scored against a's 60 rows; its log says so) and
 * releases the q = 120 / 15 leading eigenpairs of its merged W less the received diagonal 60·diag ψ_a. The
 * oracle: a's bundle as decoded plus b's own rows (pft_gstat_merge), LAPACK's dsyev of (W − 60·diag ψ_a) / N;
 * b's sent factor must match its leading part, and must not be the leading part of W / N itself (the rule
 * this replaces, which spends eigenpairs on the received diagonal). */
static void check_relay_release(void)
{
    char out[512], dir[600];
    json_t *r = launch("relayhop", "  stats_release = lowrank;\n  a -> b -> c;\n", out, sizeof out);
    json_decref(r);
    snprintf(dir, sizeof dir, "%s/b/data", out);
    float *x = NULL;
    int32_t *y = NULL;
    int64_t n = 0, d = 0;
    CHECK(load_rows(dir, "train", &x, &y, &n, &d) == 0 && n == ROWS);
    pft_bundle_t *ba = read_bundle(out, "a"), *bb = read_bundle(out, "b");
    const pft_gstat_t *sa = ba && pft_bundle_n_parts(ba) == 1 ? pft_bundle_part_stats(ba, 0) : NULL,
                      *sb = bb && pft_bundle_n_parts(bb) == 1 ? pft_bundle_part_stats(bb, 0) : NULL;
    const double *psi = ba ? pft_bundle_part_factor_psi(ba, 0) : NULL;
    int qb = -1;
    const double *ub = sb ? pft_bundle_part_factor(bb, 0, &qb) : NULL;
    pft_gstat_t *m = sa ? pft_gstat_dup(sa) : NULL, *own = pft_gstat_new(PFT_GSTAT_TIED, (int)d);
    CHECK_MSG(sa && sb && psi && ub && qb == 2 * ROWS / 15 && m && own,
              "relay hop: bundles of a and b (rank %d)", qb);
    if (!(sa && sb && psi && ub && qb == 2 * ROWS / 15 && m && own))
        goto done;
    CHECK(pft_gstat_add_rows(own, x, y, (size_t)n) == 0 && pft_gstat_merge(m, own) == 0);
    uint64_t against = 0;
    int nt = 0;
    for (int i = 0; i < pft_bundle_prov_n_nodes(bb); i++)
        if (!strcmp(pft_bundle_prov_node(bb, i), "b"))
            CHECK(pft_bundle_prov_evidence(bb, i, &nt, &against) != NULL);
    CHECK_MSG(nt > 0 && against == ROWS, "b's evidence: %d tallies against %llu rows (a's: %d)", nt,
              (unsigned long long)against, ROWS);
    size_t D = (size_t)d;
    double N = (double)pft_gstat_total(m), na = (double)pft_gstat_total(sa);
    const double *w = pft_gstat_tied_scatter(m), *wd = pft_gstat_tied_scatter(sb);
    double *L = pft_alloc_array(D * D, sizeof *L), *A = pft_alloc_array(D * D, sizeof *A),
           *lam = pft_alloc_array(D, sizeof *lam), *lam2 = pft_alloc_array(D, sizeof *lam2),
           *uu = pft_alloc_array(D * D, sizeof *uu);
    CHECK(L && A && lam && lam2 && uu);
    double dmax = 0, scale = 0;
    for (size_t i = 0; L && A && uu && i < D; i++)
        for (size_t k = 0; k < D; k++) {
            L[i * D + k] = (w[i * D + k] - (i == k ? na * psi[i] : 0)) / N;
            A[i * D + k] = w[i * D + k] / N;
            double f = 0;
            for (int t = 0; t < qb; t++)
                f += ub[i * (size_t)qb + (size_t)t] * ub[k * (size_t)qb + (size_t)t];
            uu[i * D + k] = f;
        }
    for (size_t i = 0; i < D; i++) { /* the diagonal: exact (fp32 on the wire) */
        dmax = fmax(dmax, fabs(wd[i * D + i] - w[i * D + i]) / N);
        scale = fmax(scale, w[i * D + i] / N);
    }
    int i1 = (int)LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)d, L, (lapack_int)d, lam),
        i2 = (int)LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)d, A, (lapack_int)d, lam2);
    CHECK(i1 == 0 && i2 == 0);
    double off = off_lead(uu, D, L, lam, qb, 1.0), off_sent = off_lead(wd, D, L, lam, qb, 1.0 / N),
           off_old = off_lead(uu, D, A, lam2, qb, 1.0);
    CHECK_MSG(
        dmax < 1e-6 * scale && off < 1e-5 * scale && off_sent < 1e-5 * scale && off_old > 1e-3 * scale,
        "relay hop: diagonal off by %.3g, factor %.3g and decoded W %.3g from the leading part of W less the "
        "received diagonal, %.3g from W's own (largest variance %.3g)",
        dmax, off, off_sent, off_old, scale);
    fprintf(
        stderr,
        "  relay hop: b's rank %d from W less 60·diag psi_a: factor %.2g, decoded %.2g off (W's own leading "
        "part: %.2g); evidence against %llu rows\n",
        qb, off, off_sent, off_old, (unsigned long long)against);
    pft_free(L), pft_free(A), pft_free(lam), pft_free(lam2), pft_free(uu);
    int said = log_lines(out, "b", "evidence: own rows held out against the received release (60 rows", NULL),
        terms = log_lines(out, "b", "release: rank 8 from the ", " terms of the merge");
    CHECK_MSG(
        said == 1 && terms == 1,
        "b's log says once that its rows were held out (%d) and its release came from the merge's terms (%d)",
        said, terms);
done:
    pft_bundle_destroy(&ba);
    pft_bundle_destroy(&bb);
    pft_gstat_destroy(&m);
    pft_gstat_destroy(&own);
    pft_free(x);
    pft_free(y);
}

/* The relay's hop under the default mean_noise (0.05): a's and b's own class sums go out noised, b's scatter
 * stays its rows' about their own means; b's release still comes from the merge's terms (whose probe of W
 * refuses terms the merge did not add, e.g. the own rows' exact means where the merge took the noised ones).
 */
static void check_relay_noised(void)
{
    char out[512];
    json_t *r = launch("relaynoise", "  stats_release = lowrank; mean_noise = 0.05;\n  a -> b -> c;\n", out,
                       sizeof out);
    json_decref(r);
    int noised = log_lines(out, "b", "release: own class sums", "mean_noise"),
        terms = log_lines(out, "b", "release: rank 8 from the ", " terms of the merge");
    CHECK_MSG(noised == 1 && terms == 1, "b's log: own sums noised %d, release from the merge's terms %d",
              noised, terms);
}

static void test_release_rule(void)
{
    check_release("release", 1);
    check_release("releasefloor", 8);
    check_relay_release();
    check_relay_noised();
}

/* Secure aggregation under stats_release = full_scatter (research): a and b mask their exact dense second
 * moments, as they would send them in the clear, so c, which opens a + b, holds exactly the centralized
 * statistics (a masked release that kept the low-rank rule would not: 0.6814 against 0.6714 here). */
static void test_secagg_full_scatter(void)
{
    char out[512];
    json_t *r = launch("secfull", "  secure_agg = true;\n  a -> b -> c;\n", out, sizeof out);
    check_complete("secfull", r, out, (const char *const[]){"c", NULL}, 3);
    json_decref(r);
}

static void test_diamond(void)
{
    char out[512];
    json_t *r = launch("diamond", "  a -> b; a -> c; b -> d; c -> d;\n", out, sizeof out);
    check_complete("diamond", r, out, (const char *const[]){"d", NULL}, 4);
    check_parts(out);
    json_decref(r);
}

static void test_ring(void)
{
    char out[512];
    json_t *r = launch("ring5", "  start = a;\n  a -> b -> c -> d -> e -> a;\n", out, sizeof out);
    check_complete("ring5", r, out, (const char *const[]){"a", "b", "c", "d", "e", NULL}, 5);
    /* one α for one set of statistics: every node sums the same evidence, that of the contributors that
     * scored against at least half of the 5 × 60 rows (c 180, d 240, e 300 along lap 1: 3 of them) */
    json_t *nodes = r ? json_object_get(r, "nodes") : NULL, *n;
    size_t i;
    double alpha0 = -1, acc0 = -1;
    json_array_foreach(nodes, i, n)
    {
        json_t *g = json_object_get(n, "gaussian_head");
        double alpha = json_real_value(json_object_get(g, "alpha")),
               acc = json_real_value(json_object_get(n, "accuracy_global"));
        const char *rule = json_string_value(json_object_get(g, "rule"));
        CHECK_MSG(rule && !strcmp(rule, "evidence") &&
                      json_integer_value(json_object_get(g, "evidence_contributors")) == 3,
                  "ring5 %s: rule %s", json_string_value(json_object_get(n, "id")), rule ? rule : "-");
        if (i == 0) {
            alpha0 = alpha;
            acc0 = acc;
        }
        CHECK_MSG(alpha == alpha0 && acc == acc0, "ring5 %s: α %g accuracy %.4f, a: α %g accuracy %.4f",
                  json_string_value(json_object_get(n, "id")), alpha, acc, alpha0, acc0);
    }
    json_decref(r);
}

static void test_mesh(void)
{
    char out[512];
    json_t *r = launch("mesh6",
                       "  root = a;\n  a -> b -> c -> d -> e -> f -> a;\n  a -> d; c -> a; e -> b; f -> c;\n",
                       out, sizeof out);
    check_complete("mesh6", r, out, (const char *const[]){"a", "b", "c", "d", "e", "f", NULL}, 6);
    json_decref(r);
}

int main(void)
{
    if (access(EXAMPLE_DATA "/train_x.npy", R_OK) != 0) {
        printf("skipped: %s not found\n", EXAMPLE_DATA);
        return PFT_TEST_SKIP;
    }
    if (pft_e2e_scratch(s_tmp, sizeof s_tmp, "pft_e2e_exact") != 0)
        return 1;
    RUN(test_chain);
    RUN(test_release_rule);
    RUN(test_logreg_head);
    RUN(test_secagg_full_scatter);
    RUN(test_diamond);
    RUN(test_ring);
    RUN(test_mesh);
    return pft_e2e_finish(s_tmp, pft_test_done());
}
