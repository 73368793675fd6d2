/* secagg_cost: the cost of double masking against single masking in one run (docs/SECAGG.md §9.2), with the
 * library calls pftnode makes: per member, its pair masks (single) and in addition its self-mask, the split
 * of its seed and the sealing of n - 1 shares (double); at the opener, the removal of its n pair masks
 * (single) and in addition the rebuilding of n seeds from all n shares each (Lagrange at 0 from t, the n - t
 * others checked) and the removal of n self-masks (double). CPU seconds (CLOCK_PROCESS_CPUTIME_ID),
 * alternated single, double, single, double, the best of --repeat of each. Then the consistency round
 * (docs/SECAGG.md §5.1): a member's statement, signature and check of the n forwarded signatures; the
 * opener's check of n signatures and its n SIGNATURES messages (encoded and signed), with their bytes.
 *
 * usage: secagg_cost N WORDS [REPEAT]   (WORDS: 828800 is a tied part at d = 1280, C = 7) */
#define _POSIX_C_SOURCE 200809L
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pft_alloc.h"
#include "pft_keys.h"
#include "pft_mask.h"
#include "pft_secmsg.h"
#include "pft_secplan.h"
#include "pft_shamir.h"

#define RUN_ID "bench-run"
#define LABEL "s:tied"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static pft_keypair_t **s_kp;
static pft_pubkey_t *s_pk; /* 0..n-1 members, n the opener */
static size_t s_n, s_t, s_w;

/* Member 0's work: pair masks with the n - 1 others and the opener; with dbl the self-mask and sealed shares.
 */
static double member(uint64_t *w, int dbl)
{
    double t0 = cpu_now();
    pft_mask_add(s_kp[0], RUN_ID, s_pk + 1, s_n, (const uint8_t *)LABEL, strlen(LABEL), w, s_w);
    if (dbl) {
        uint8_t coins[32], seed[32], key[32], nonce[24] = {0}, ct[64];
        uint8_t(*sh)[PFT_SHAMIR_SHARE_LEN] = pft_alloc_array(s_n, sizeof *sh);
        pft_shamir_secret_t sec;
        pft_mask_self_coins(s_kp[0], RUN_ID, (const uint8_t *)LABEL, strlen(LABEL), coins);
        pft_shamir_split(coins, s_t, s_n, &sec, sh);
        pft_shamir_seed(&sec, seed);
        pft_mask_add_self(seed, +1, w, s_w);
        for (size_t v = 1; v < s_n; v++) {
            pft_mask_share_key(s_kp[0], RUN_ID, &s_pk[v], (const uint8_t *)LABEL, strlen(LABEL), key);
            crypto_secretbox_easy(ct, sh[v], PFT_SHAMIR_SHARE_LEN, nonce, key);
        }
        pft_free(sh);
    }
    return cpu_now() - t0;
}

/* The opener's work: its n pair masks; with dbl, n seeds rebuilt from n shares each and n self-masks removed
 * (times of the two parts into lag and self). */
static double opener(uint64_t *w, int dbl, uint8_t (*shares)[PFT_SHAMIR_SHARE_LEN], double *lag, double *self)
{
    double t0 = cpu_now();
    pft_mask_remove(s_kp[s_n], RUN_ID, s_pk, s_n, (const uint8_t *)LABEL, strlen(LABEL), w, s_w);
    *lag = *self = 0;
    for (size_t u = 0; dbl && u < s_n; u++) {
        pft_shamir_secret_t sec;
        uint8_t seed[32];
        double a = cpu_now();
        if (pft_shamir_combine((const uint8_t(*)[PFT_SHAMIR_SHARE_LEN])shares, s_n, s_t, &sec) != 0)
            fprintf(stderr, "combine failed\n");
        double b = cpu_now();
        pft_shamir_seed(&sec, seed);
        pft_mask_add_self(seed, -1, w, s_w);
        *lag += b - a, *self += cpu_now() - b;
    }
    return cpu_now() - t0;
}

/* The consistency round with every member surviving: *mem the member's CPU seconds (statement, its
 * signature, the n forwarded ones checked), the opener's returned (n checked, n SIGNATURES encoded and
 * signed); *bytes the bytes of one SIGN and of one SIGNATURES. */
static double consistency(double *mem, size_t bytes[2])
{
    char(*names)[16] = pft_alloc_array(s_n, sizeof *names);
    const char **ids = pft_alloc_array(s_n, sizeof *ids);
    uint8_t(*sig)[PFT_SECMSG_SIG_LEN] = pft_alloc_array(s_n, sizeof *sig), st[PFT_SECMSG_STATEMENT_LEN],
    fp[32] = {7};
    const uint8_t **bins = pft_alloc_array(s_n, sizeof *bins);
    size_t *lens = pft_alloc_array(s_n, sizeof *lens), bad = 0;
    for (size_t i = 0; i < s_n; i++) { /* ids ascending: fixed width */
        snprintf(names[i], sizeof names[i], "c%05zu", i);
        ids[i] = names[i], bins[i] = sig[i], lens[i] = PFT_SECMSG_SIG_LEN;
    }
    pft_secmsg_statement(RUN_ID, LABEL, fp, ids, s_n, st);
    for (size_t i = 0; i < s_n; i++)
        pft_keypair_sign(s_kp[i], st, sizeof st, sig[i]);
    double t0 = cpu_now(); /* member 0: its statement and signature, then the n forwarded ones checked */
    pft_secmsg_statement(RUN_ID, LABEL, fp, ids, s_n, st);
    pft_keypair_sign(s_kp[0], st, sizeof st, sig[0]);
    for (size_t i = 0; i < s_n; i++)
        bad += pft_pubkey_verify(&s_pk[i], st, sizeof st, sig[i], PFT_SECMSG_SIG_LEN) != 0;
    double t1 = cpu_now(); /* the opener: n signatures checked, n SIGNATURES messages */
    pft_secmsg_statement(RUN_ID, LABEL, fp, ids, s_n, st);
    for (size_t i = 0; i < s_n; i++)
        bad += pft_pubkey_verify(&s_pk[i], st, sizeof st, sig[i], PFT_SECMSG_SIG_LEN) != 0;
    pft_secmsg_t f = {.kind = PFT_SECMSG_SIGNATURES,
                      .has_extra = 1,
                      .n_extra = s_n,
                      .extra_ids = ids,
                      .extra = bins,
                      .extra_len = lens,
                      .has_fp = 1};
    snprintf(f.run, sizeof f.run, RUN_ID), snprintf(f.label, sizeof f.label, LABEL);
    snprintf(f.sender, sizeof f.sender, "s");
    for (size_t i = 0; i < s_n; i++) {
        uint8_t *buf = NULL;
        bad += pft_secmsg_encode(&f, s_kp[s_n], &buf, &bytes[1]) != 0;
        pft_free(buf);
    }
    double t2 = cpu_now();
    pft_secmsg_t g = {.kind = PFT_SECMSG_SIGN,
                      .n_survivors = s_n,
                      .survivors = ids,
                      .has_extra = 1,
                      .n_extra = 1,
                      .extra_ids = ids,
                      .extra = bins,
                      .extra_len = lens,
                      .has_fp = 1};
    snprintf(g.run, sizeof g.run, RUN_ID), snprintf(g.label, sizeof g.label, LABEL);
    snprintf(g.sender, sizeof g.sender, "%s", ids[0]);
    uint8_t *buf = NULL;
    bad += pft_secmsg_encode(&g, s_kp[0], &buf, &bytes[0]) != 0;
    pft_free(buf);
    if (bad)
        fprintf(stderr, "consistency: %zu check(s) failed\n", bad);
    pft_free(names), pft_free(ids), pft_free(sig), pft_free(bins), pft_free(lens);
    *mem = t1 - t0;
    return t2 - t1;
}

int main(int argc, char **argv)
{
    if (argc < 3 || sodium_init() < 0)
        return fprintf(stderr, "usage: secagg_cost N WORDS [REPEAT]\n"), 2;
    s_n = (size_t)atol(argv[1]), s_w = (size_t)atol(argv[2]);
    int rep = argc > 3 ? atoi(argv[3]) : 2;
    s_t = pft_secplan_default_threshold(s_n);
    s_kp = pft_alloc_array(s_n + 1, sizeof *s_kp);
    s_pk = pft_alloc_array(s_n + 1, sizeof *s_pk);
    for (size_t i = 0; i <= s_n; i++) {
        uint8_t seed[32] = {(uint8_t)i, (uint8_t)(i >> 8), 0x5a};
        s_kp[i] = pft_keypair_from_seed(seed);
        s_pk[i] = *pft_keypair_public(s_kp[i]);
    }
    uint64_t *w = pft_calloc(s_w, sizeof *w);
    uint8_t coins[32] = {1}, (*sh)[PFT_SHAMIR_SHARE_LEN] = pft_alloc_array(s_n, sizeof *sh);
    pft_shamir_secret_t sec;
    pft_shamir_split(coins, s_t, s_n, &sec, sh); /* the shares one seed opens from (all n, as pftnode) */
    double best[2] = {1e30, 1e30}, obest[2] = {1e30, 1e30}, lag = 0, self = 0;
    for (int r = 0; r < rep; r++)
        for (int dbl = 0; dbl < 2; dbl++) { /* alternated: single, double, single, double */
            double m = member(w, dbl), l, s, o = opener(w, dbl, sh, &l, &s);
            best[dbl] = m < best[dbl] ? m : best[dbl];
            if (o < obest[dbl])
                obest[dbl] = o, lag = dbl ? l : lag, self = dbl ? s : self;
        }
    double ks1 = 8.0 * (double)s_w * (double)s_n, ks2 = 8.0 * (double)s_w * (double)(s_n + 1);
    printf("n = %zu members, t = %zu, %zu words per part (%.2f MB)\n", s_n, s_t, s_w, 8e-6 * (double)s_w);
    printf("member keystream: single %.1f MB, double %.1f MB (ratio %.4f)\n", 1e-6 * ks1, 1e-6 * ks2,
           ks2 / ks1);
    printf("member CPU s:     single %.3f, double %.3f (ratio %.4f)\n", best[0], best[1], best[1] / best[0]);
    printf("opener CPU s:     single %.3f, double %.3f (ratio %.4f): Lagrange and checks %.3f, self-masks "
           "%.3f\n",
           obest[0], obest[1], obest[1] / obest[0], lag, self);
    double cm = 1e30, co = 1e30;
    size_t bytes[2] = {0, 0};
    for (int r = 0; r < rep; r++) {
        double m, o = consistency(&m, bytes);
        cm = m < cm ? m : cm, co = o < co ? o : co;
    }
    printf("consistency round CPU s: member %.4f (1 signature, %zu checked), opener %.4f (%zu checked, %zu "
           "SIGNATURES); bytes: SIGN %zu, SIGNATURES %zu (each of %zu)\n",
           cm, s_n, co, s_n, s_n, bytes[0], bytes[1], s_n);
    pft_free(w);
    pft_free(sh);
    for (size_t i = 0; i <= s_n; i++)
        pft_keypair_destroy(&s_kp[i]);
    pft_free(s_kp);
    pft_free(s_pk);
    return 0;
}
