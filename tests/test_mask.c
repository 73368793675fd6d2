/* Tests of pft_mask: exact cancellation of pairwise masks, their uniformity and independence, removal by an
 * opener, dropout recovery from revealed use keys, refusals. */
#include <sodium.h>
#include <stdint.h>

#include "pft_error.h"
#include "pft_keys.h"
#include "pft_mask.h"
#include "pft_test.h"

#define MAXN 50
#define RUN_ID "run-secagg"

static pft_keypair_t *s_kp[MAXN];
static pft_pubkey_t s_pk[MAXN];
static uint64_t s_state = 12345;

static uint64_t next64(void)
{
    uint64_t z = (s_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void setup(void)
{
    for (int i = 0; i < MAXN; i++) {
        uint8_t seed[PFT_KEY_SEED_LEN] = {0};
        seed[0] = (uint8_t)(i + 1);
        seed[31] = 0x5a;
        s_kp[i] = pft_keypair_from_seed(seed);
        CHECK(s_kp[i] != NULL);
        s_pk[i] = *pft_keypair_public(s_kp[i]);
    }
}

/* the keys of nodes [0, k) but `skip` */
static size_t others(int k, int skip, pft_pubkey_t *out)
{
    size_t n = 0;
    for (int j = 0; j < k; j++)
        if (j != skip)
            out[n++] = s_pk[j];
    return n;
}

static const uint8_t LABEL[] = "handoff:1:sums";
#define LABEL_LEN (sizeof LABEL - 1)

/* Chi-square of the top 4 bits of n words over 16 bins (15 degrees of freedom: 99.9999 % quantile ≈ 49.5). */
static double chi2_top4(const uint64_t *w, size_t n)
{
    double bins[16] = {0}, chi = 0, e = (double)n / 16;
    for (size_t i = 0; i < n; i++)
        bins[w[i] >> 60]++;
    for (int b = 0; b < 16; b++)
        chi += (bins[b] - e) * (bins[b] - e) / e;
    return chi;
}

static void test_cancellation(void)
{
    enum { N = 777 };
    static uint64_t clear[MAXN][N], masked[MAXN][N];
    pft_pubkey_t peers[MAXN];
    int sizes[] = {2, 3, 5, 17, 50};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int k = sizes[s];
        uint64_t sum_clear[N] = {0}, sum_masked[N] = {0};
        for (int i = 0; i < k; i++) {
            for (int j = 0; j < N; j++)
                masked[i][j] = clear[i][j] = next64();
            size_t np = others(k, i, peers);
            CHECK(pft_mask_add(s_kp[i], RUN_ID, peers, np, LABEL, LABEL_LEN, masked[i], N) == 0);
            int same = 0;
            for (int j = 0; j < N; j++) {
                sum_clear[j] += clear[i][j];
                sum_masked[j] += masked[i][j];
                same += masked[i][j] == clear[i][j];
            }
            CHECK_MSG(same == 0, "k %d node %d: %d words unmasked", k, i, same);
        }
        CHECK_MSG(memcmp(sum_clear, sum_masked, sizeof sum_clear) == 0, "k = %d: masks do not cancel", k);
        /* one node fewer in the sum: nothing cancels */
        int equal = 0;
        for (int j = 0; j < N; j++)
            equal += sum_masked[j] - masked[k - 1][j] == sum_clear[j] - clear[k - 1][j];
        CHECK(equal == 0);
    }
}

/* A masked zero vector is the mask itself: it looks uniform, and so does the difference of two labels'
 * masks (independent), while the same inputs give the same mask (deterministic). */
static void test_uniform_independent(void)
{
    enum { N = 32000 };
    static uint64_t a[N], b[N], a2[N], d[N], r[N];
    pft_pubkey_t peers[4];
    size_t np = others(5, 0, peers);
    static const uint8_t other[] = "handoff:2:sums";
    CHECK(pft_mask_add(s_kp[0], RUN_ID, peers, np, LABEL, LABEL_LEN, a, N) == 0);
    CHECK(pft_mask_add(s_kp[0], RUN_ID, peers, np, LABEL, LABEL_LEN, a2, N) == 0);
    CHECK(pft_mask_add(s_kp[0], RUN_ID, peers, np, other, sizeof other - 1, b, N) == 0);
    CHECK(pft_mask_add(s_kp[0], "run-secagh", peers, np, LABEL, LABEL_LEN, r, N) == 0); /* same length */
    CHECK(memcmp(a, a2, sizeof a) == 0);
    int zero = 0, same_ab = 0, same_ar = 0;
    for (int j = 0; j < N; j++) {
        zero += a[j] == 0;
        same_ab += a[j] == b[j];
        same_ar += a[j] == r[j];
        d[j] = a[j] - b[j];
    }
    CHECK(zero == 0 && same_ab == 0 && same_ar == 0);
    double ca = chi2_top4(a, N), cd = chi2_top4(d, N);
    CHECK_MSG(ca < 49.5, "chi2 of the mask's top bits %.1f", ca);
    CHECK_MSG(cd < 49.5, "chi2 of the difference of two labels' masks %.1f", cd);
    /* and the bits: every bit position set in about half the words (|z| < 6 sigma) */
    for (int bit = 0; bit < 64; bit++) {
        int ones = 0;
        for (int j = 0; j < N; j++)
            ones += (int)((a[j] >> bit) & 1u);
        CHECK_MSG(fabs(ones - N / 2.0) < 6 * sqrt(N / 4.0), "bit %d set in %d of %d", bit, ones, N);
    }
    /* a prefix of the stream does not depend on the length asked for */
    uint64_t short_a[10] = {0};
    CHECK(pft_mask_add(s_kp[0], RUN_ID, peers, np, LABEL, LABEL_LEN, short_a, 10) == 0);
    CHECK(memcmp(short_a, a, sizeof short_a) == 0);
}

/* A node masking with a key that is not its partner's (here node 9's instead of node 1's) does not cancel. */
static void test_wrong_key(void)
{
    enum { N = 100 };
    uint64_t v0[N] = {0}, v1[N] = {0};
    CHECK(pft_mask_add(s_kp[0], RUN_ID, &s_pk[9], 1, LABEL, LABEL_LEN, v0, N) == 0);
    CHECK(pft_mask_add(s_kp[1], RUN_ID, &s_pk[0], 1, LABEL, LABEL_LEN, v1, N) == 0);
    int cancelled = 0;
    for (int j = 0; j < N; j++)
        cancelled += v0[j] + v1[j] == 0;
    CHECK(cancelled == 0);
    /* with the right key it does, and the signs are opposite */
    uint64_t w0[N] = {0};
    CHECK(pft_mask_add(s_kp[0], RUN_ID, &s_pk[1], 1, LABEL, LABEL_LEN, w0, N) == 0);
    for (int j = 0; j < N; j++)
        CHECK(w0[j] + v1[j] == 0);
    CHECK(pft_mask_sign(&s_pk[0], &s_pk[1]) == -pft_mask_sign(&s_pk[1], &s_pk[0]));
}

/* Chain a → b → c with min_contributors 2: a and b mask with their pair secret shared with c, b adds a's
 * masked vector to its own masked one (and sees a only masked), c removes both masks and holds a + b exactly.
 */
static void test_chain_opener(void)
{
    enum { N = 500 };
    uint64_t a[N], b[N], ma[N], mb[N], want[N];
    for (int j = 0; j < N; j++) {
        ma[j] = a[j] = next64() >> 20;
        mb[j] = b[j] = next64() >> 20;
        want[j] = a[j] + b[j];
    }
    const int A = 0, B = 1, C = 2;
    CHECK(pft_mask_add(s_kp[A], RUN_ID, &s_pk[C], 1, LABEL, LABEL_LEN, ma, N) == 0);
    CHECK(pft_mask_add(s_kp[B], RUN_ID, &s_pk[C], 1, LABEL, LABEL_LEN, mb, N) == 0);
    int seen = 0;
    for (int j = 0; j < N; j++) {
        seen += ma[j] == a[j];
        mb[j] += ma[j]; /* b's outbound aggregate: a + b, both masked */
    }
    CHECK(seen == 0);
    /* b cannot remove a's mask: its own pair with a is a different secret */
    uint64_t try_b[N];
    memcpy(try_b, mb, sizeof try_b);
    CHECK(pft_mask_remove(s_kp[B], RUN_ID, &s_pk[A], 1, LABEL, LABEL_LEN, try_b, N) == 0);
    int leaked = 0;
    for (int j = 0; j < N; j++)
        leaked += try_b[j] - b[j] == a[j];
    CHECK(leaked == 0);
    pft_pubkey_t ab[2] = {s_pk[A], s_pk[B]};
    CHECK(pft_mask_remove(s_kp[C], RUN_ID, ab, 2, LABEL, LABEL_LEN, mb, N) == 0);
    CHECK(memcmp(mb, want, sizeof want) == 0);
}

/* Star of 6 clients, client 4 never delivers: each survivor reveals its use key with 4, the aggregator
 * cancels those terms and holds the survivors' sum exactly. */
static void test_dropout(void)
{
    enum { K = 6, N = 300, DROP = 4 };
    static uint64_t clear[K][N];
    uint64_t acc[N] = {0}, want[N] = {0};
    pft_pubkey_t peers[K];
    for (int i = 0; i < K; i++) {
        uint64_t w[N];
        for (int j = 0; j < N; j++)
            w[j] = clear[i][j] = next64();
        size_t np = others(K, i, peers);
        CHECK(pft_mask_add(s_kp[i], RUN_ID, peers, np, LABEL, LABEL_LEN, w, N) == 0);
        if (i == DROP)
            continue;
        for (int j = 0; j < N; j++) {
            acc[j] += w[j];
            want[j] += clear[i][j];
        }
    }
    CHECK(memcmp(acc, want, sizeof acc) != 0);
    for (int i = 0; i < K; i++) {
        if (i == DROP)
            continue;
        uint8_t key[PFT_MASK_KEY_LEN];
        CHECK(pft_mask_use_key(s_kp[i], RUN_ID, &s_pk[DROP], LABEL, LABEL_LEN, key) == 0);
        CHECK(pft_mask_cancel_revealed(key, &s_pk[i], &s_pk[DROP], acc, N) == 0);
        sodium_memzero(key, sizeof key);
    }
    CHECK(memcmp(acc, want, sizeof acc) == 0);
    /* the revealed key is the dropped node's key with the survivor too (either side computes it) */
    uint8_t k1[PFT_MASK_KEY_LEN], k2[PFT_MASK_KEY_LEN];
    CHECK(pft_mask_use_key(s_kp[0], RUN_ID, &s_pk[DROP], LABEL, LABEL_LEN, k1) == 0);
    CHECK(pft_mask_use_key(s_kp[DROP], RUN_ID, &s_pk[0], LABEL, LABEL_LEN, k2) == 0);
    CHECK(memcmp(k1, k2, sizeof k1) == 0);
    CHECK(pft_mask_cancel_revealed(k1, &s_pk[0], &s_pk[0], acc, N) == PFT_EINVAL);
}

/* double masking's keys: the share key is the same from both ends of a pair and differs from the use key
 * (which a survivor may reveal) and per label; the coins are the same for one node, run and label (a restart)
 * and differ per node, run and label; a self-mask added and removed leaves the words unchanged, and masks
 * them */
static void test_double_masking_keys(void)
{
    uint8_t a[32], b[32], u[32], c1[32], c2[32];
    const uint8_t *l = (const uint8_t *)"s:tied", *l2 = (const uint8_t *)"s:other";
    CHECK(pft_mask_share_key(s_kp[0], RUN_ID, &s_pk[1], l, 6, a) == 0);
    CHECK(pft_mask_share_key(s_kp[1], RUN_ID, &s_pk[0], l, 6, b) == 0 && memcmp(a, b, 32) == 0);
    CHECK(pft_mask_use_key(s_kp[0], RUN_ID, &s_pk[1], l, 6, u) == 0 && memcmp(a, u, 32) != 0);
    CHECK(pft_mask_share_key(s_kp[0], RUN_ID, &s_pk[1], l2, 7, b) == 0 && memcmp(a, b, 32) != 0);
    CHECK(pft_mask_self_coins(s_kp[0], RUN_ID, l, 6, c1) == 0 &&
          pft_mask_self_coins(s_kp[0], RUN_ID, l, 6, c2) == 0);
    CHECK(memcmp(c1, c2, 32) == 0);
    CHECK(pft_mask_self_coins(s_kp[1], RUN_ID, l, 6, c2) == 0 && memcmp(c1, c2, 32) != 0);
    CHECK(pft_mask_self_coins(s_kp[0], "other-run", l, 6, c2) == 0 && memcmp(c1, c2, 32) != 0);
    CHECK(pft_mask_self_coins(s_kp[0], RUN_ID, l2, 7, c2) == 0 && memcmp(c1, c2, 32) != 0);
    CHECK(pft_mask_self_coins(s_kp[0], "", l, 6, c2) == PFT_EINVAL);
    uint64_t w[64], w0[64];
    for (int i = 0; i < 64; i++)
        w[i] = w0[i] = next64();
    pft_mask_add_self(c1, +1, w, 64);
    int same = 0;
    for (int i = 0; i < 64; i++)
        same += w[i] == w0[i];
    CHECK(same == 0);
    pft_mask_add_self(c1, -1, w, 64);
    CHECK(memcmp(w, w0, sizeof w) == 0);
}

static void test_refusals(void)
{
    uint64_t w[4] = {1, 2, 3, 4}, keep[4] = {1, 2, 3, 4};
    pft_pubkey_t peers[3] = {s_pk[1], s_pk[2], s_pk[1]};
    CHECK(pft_mask_add(s_kp[0], RUN_ID, peers, 3, LABEL, LABEL_LEN, w, 4) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "twice") != NULL);
    peers[2] = s_pk[0];
    CHECK(pft_mask_add(s_kp[0], RUN_ID, peers, 3, LABEL, LABEL_LEN, w, 4) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "itself") != NULL);
    CHECK(pft_mask_add(s_kp[0], "", peers, 2, LABEL, LABEL_LEN, w, 4) == PFT_EINVAL);
    CHECK(pft_mask_add(s_kp[0], NULL, peers, 2, LABEL, LABEL_LEN, w, 4) == PFT_EINVAL);
    CHECK(pft_mask_add(s_kp[0], RUN_ID, peers, 2, LABEL, 0, w, 4) == PFT_EINVAL);
    char long_run[80];
    memset(long_run, 'r', sizeof long_run - 1);
    long_run[sizeof long_run - 1] = 0;
    CHECK(pft_mask_add(s_kp[0], long_run, peers, 2, LABEL, LABEL_LEN, w, 4) == PFT_EINVAL);
    /* a small-order point (the identity, y = 1) as a peer key: no shared secret; words untouched */
    pft_pubkey_t bad = {{1}};
    pft_pubkey_t mix[2] = {s_pk[1], bad};
    int rc = pft_mask_add(s_kp[0], RUN_ID, mix, 2, LABEL, LABEL_LEN, w, 4);
    CHECK(rc == PFT_EINVAL);
    CHECK(memcmp(w, keep, sizeof w) == 0);
    /* no peers: nothing to add */
    CHECK(pft_mask_add(s_kp[0], RUN_ID, peers, 0, LABEL, LABEL_LEN, w, 4) == 0);
    CHECK(memcmp(w, keep, sizeof w) == 0);
}

int main(void)
{
    setup();
    RUN(test_cancellation);
    RUN(test_uniform_independent);
    RUN(test_wrong_key);
    RUN(test_chain_opener);
    RUN(test_dropout);
    RUN(test_refusals);
    RUN(test_double_masking_keys);
    for (int i = 0; i < MAXN; i++)
        pft_keypair_destroy(&s_kp[i]);
    return pft_test_done();
}
