/* Tests of pft_kmeans: recovery of separated clusters, determinism, degenerate inputs, argument checks. */
#include "pft_error.h"
#include "pft_kmeans.h"
#include "pft_rng.h"
#include "pft_test.h"

/* n points around k centres 20 apart in d dimensions; truth[i] is the generating centre. */
static float *blobs(int n, int d, int k, uint64_t seed, int *truth)
{
    pft_rng_t *r = pft_rng_new(seed);
    float *x = malloc(sizeof(float) * n * d);
    for (int i = 0; i < n; i++) {
        truth[i] = i % k;
        for (int j = 0; j < d; j++)
            x[i * d + j] = (float)((j == truth[i] % d ? 20.0 * (1 + truth[i] / d) : 0.0) + pft_rng_normal(r));
    }
    pft_rng_destroy(&r);
    return x;
}

static void test_recovers_clusters(void)
{
    const int n = 600, d = 5, k = 6;
    int truth[600], labels[600];
    double centers[6 * 5];
    float *x = blobs(n, d, k, 1, truth);
    pft_rng_t *r = pft_rng_new(2);
    pft_kmeans_info_t info;
    CHECK(pft_kmeans(x, n, d, k, 50, r, centers, labels, &info) == 0);
    /* Same partition up to a relabelling: map[truth] is consistent. */
    int map[6];
    for (int c = 0; c < k; c++)
        map[c] = -1;
    int consistent = 1;
    for (int i = 0; i < n; i++) {
        if (map[truth[i]] < 0)
            map[truth[i]] = labels[i];
        consistent &= map[truth[i]] == labels[i];
    }
    CHECK(consistent);
    for (int a = 0; a < k; a++)
        for (int b = a + 1; b < k; b++)
            CHECK(map[a] != map[b]);
    /* Inertia is the exact sum of squared distances to the assigned centres, ≈ n·d for unit noise. */
    double s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++) {
            double t = x[i * d + j] - centers[labels[i] * d + j];
            s += t * t;
        }
    CHECK_NEAR(info.inertia, s, 1e-9 * s);
    CHECK(s > 0.8 * n * d && s < 1.2 * n * d);
    CHECK(info.iters >= 1 && info.iters <= 50);
    pft_rng_destroy(&r);
    free(x);
}

static void test_deterministic(void)
{
    const int n = 300, d = 4, k = 5;
    int truth[300], la[300], lb[300];
    double ca[20], cb[20];
    float *x = blobs(n, d, k, 3, truth);
    for (int i = 0; i < n * d; i++)
        x[i] += (float)(i % 13) * 0.7f; /* overlapping clusters: the seed matters */
    pft_rng_t *a = pft_rng_new(10), *b = pft_rng_new(10);
    CHECK(pft_kmeans(x, n, d, k, 5, a, ca, la, NULL) == 0);
    CHECK(pft_kmeans(x, n, d, k, 5, b, cb, lb, NULL) == 0);
    CHECK(memcmp(la, lb, sizeof la) == 0);
    CHECK(memcmp(ca, cb, sizeof ca) == 0);
    pft_rng_destroy(&a);
    pft_rng_destroy(&b);
    free(x);
}

static void test_seeding_only(void)
{
    const int n = 50, d = 3, k = 4;
    int truth[50], labels[50];
    double centers[12];
    float *x = blobs(n, d, k, 4, truth);
    pft_rng_t *r = pft_rng_new(5);
    pft_kmeans_info_t info;
    CHECK(pft_kmeans(x, n, d, k, 0, r, centers, labels, &info) == 0);
    CHECK(info.iters == 0);
    /* Every centre is one of the data points, all distinct. */
    for (int c = 0; c < k; c++) {
        int found = 0;
        for (int i = 0; i < n && !found; i++)
            found = centers[c * d] == x[i * d] && centers[c * d + 1] == x[i * d + 1] &&
                    centers[c * d + 2] == x[i * d + 2];
        CHECK(found);
        for (int e = 0; e < c; e++)
            CHECK(memcmp(centers + c * d, centers + e * d, sizeof(double) * d) != 0);
    }
    pft_rng_destroy(&r);
    free(x);
}

static void test_degenerate(void)
{
    float dup[40 * 2];
    int labels[40];
    double centers[40 * 2];
    for (int i = 0; i < 40; i++) {
        dup[i * 2] = 7.0f;
        dup[i * 2 + 1] = -1.0f;
    }
    pft_rng_t *r = pft_rng_new(6);
    pft_kmeans_info_t info;
    /* All duplicates, k = 3: valid labels, no empty cluster, zero inertia. */
    CHECK(pft_kmeans(dup, 40, 2, 3, 10, r, centers, labels, &info) == 0);
    int count[3] = {0};
    for (int i = 0; i < 40; i++) {
        CHECK(labels[i] >= 0 && labels[i] < 3);
        if (labels[i] >= 0 && labels[i] < 3)
            count[labels[i]]++;
    }
    CHECK(count[0] > 0 && count[1] > 0 && count[2] > 0);
    CHECK(info.inertia == 0.0);
    CHECK(centers[0] == 7.0 && centers[5] == -1.0);
    /* k = n: every point its own cluster. */
    float pts[5] = {0, 1, 2, 3, 4};
    CHECK(pft_kmeans(pts, 5, 1, 5, 10, r, centers, labels, &info) == 0);
    CHECK(info.inertia == 0.0);
    for (int a = 0; a < 5; a++)
        for (int b = a + 1; b < 5; b++)
            CHECK(labels[a] != labels[b]);
    /* d = 1, k = 1: the mean. */
    CHECK(pft_kmeans(pts, 5, 1, 1, 10, r, centers, labels, &info) == 0);
    CHECK(centers[0] == 2.0 && info.inertia == 10.0);
    pft_rng_destroy(&r);
}

static void test_bad_args(void)
{
    float x[4] = {0, 1, 2, 3};
    int labels[4];
    double centers[8];
    pft_rng_t *r = pft_rng_new(1);
    CHECK(pft_kmeans(x, 4, 1, 5, 10, r, centers, labels, NULL) == PFT_EINVAL); /* k > n */
    CHECK(pft_kmeans(x, 0, 1, 1, 10, r, centers, labels, NULL) == PFT_EINVAL);
    CHECK(pft_kmeans(x, 4, 1, 0, 10, r, centers, labels, NULL) == PFT_EINVAL);
    CHECK(pft_kmeans(x, 4, 1, 2, -1, r, centers, labels, NULL) == PFT_EINVAL);
    CHECK(pft_kmeans(x, 4, 1, 2, 10, NULL, centers, labels, NULL) == PFT_EINVAL);
    pft_rng_destroy(&r);
}

/* Unit weights are the unweighted run bit for bit; integer weights are the rows repeated (same seeds, same
 * centres to rounding, same labels, weighted inertia). */
static void test_weighted(void)
{
    const int n = 300, d = 4, k = 5;
    int truth[300], la[300], lb[300], total = 0;
    double ca[20], cb[20], w[300];
    float *x = blobs(n, d, k, 3, truth);
    for (int i = 0; i < n * d; i++)
        x[i] += (float)(i % 13) * 0.7f; /* overlapping clusters: the seed matters */
    for (int i = 0; i < n; i++) {
        w[i] = 1.0;
        total += 1 + (i * 5) % 4;
    }
    pft_kmeans_info_t ia, ib;
    pft_rng_t *a = pft_rng_new(10), *b = pft_rng_new(10);
    CHECK(pft_kmeans(x, n, d, k, 5, a, ca, la, &ia) == 0);
    CHECK(pft_kmeans_weighted(x, w, n, d, k, 5, b, cb, lb, &ib) == 0);
    CHECK(memcmp(la, lb, sizeof la) == 0 && memcmp(ca, cb, sizeof ca) == 0);
    CHECK(memcmp(&ia, &ib, sizeof ia) == 0);
    float *y = malloc(sizeof(float) * (size_t)total * d);
    int *ly = malloc(sizeof(int) * (size_t)total), o = 0;
    for (int i = 0; i < n; i++) {
        w[i] = 1 + (i * 5) % 4;
        for (int t = 0; t < (int)w[i]; t++, o++)
            memcpy(y + (size_t)o * d, x + (size_t)i * d, sizeof(float) * d);
    }
    pft_rng_seed(a, 10);
    pft_rng_seed(b, 10);
    CHECK(pft_kmeans_weighted(x, w, n, d, k, 5, a, ca, la, &ia) == 0);
    CHECK(pft_kmeans(y, total, d, k, 5, b, cb, ly, &ib) == 0);
    for (int q = 0; q < k * d; q++)
        CHECK_NEAR(ca[q], cb[q], 1e-12 * fmax(1.0, fabs(cb[q])));
    o = 0;
    int same = 1;
    for (int i = 0; i < n; i++)
        for (int t = 0; t < (int)w[i]; t++, o++)
            same &= la[i] == ly[o];
    CHECK(same);
    CHECK_NEAR(ia.inertia, ib.inertia, 1e-12 * ib.inertia);
    CHECK(ia.iters == ib.iters);
    pft_rng_destroy(&a);
    pft_rng_destroy(&b);
    free(x), free(y), free(ly);
}

int main(void)
{
    RUN(test_recovers_clusters);
    RUN(test_deterministic);
    RUN(test_seeding_only);
    RUN(test_degenerate);
    RUN(test_bad_args);
    RUN(test_weighted);
    return pft_test_done();
}
