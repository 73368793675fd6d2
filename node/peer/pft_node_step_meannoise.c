/* pft_node_step_meannoise: the release step `mean_noise` (SECURITY.md §9, "Small classes"): with mean_noise
 * = σ > 0 (default 0.05), every class sum of this node's own rows released in the clear carries Gaussian
 * noise of std σ·sqrt(10 / n) per coordinate for a class of n rows (core/pft_meannoise.h), so that no
 * released mean of non-negative rows is exactly 0 where its rows are, nor an exact bound on them; the noise
 * of a class is the same in every release of this process (seeded by the node's key, never by the public run
 * seed, so a recipient cannot subtract it, and a restart draws it again the same: nothing to average). The
 * node's own head keeps the exact rows. Neither a DP release (already noised) nor a masked one (it opens as a
 * group's sum) goes through it. */
#include "pft_node_internal.h"

#include "pft_error.h"
#include "pft_log.h"
#include "pft_meannoise.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* The step's seed, once per process: with a key, from this node's Ed25519 signature of the run id
 * (deterministic, so a restarted node draws the same noise and two runs of one node cannot be averaged, and
 * secret: nobody without the node's key can compute it); without one (--insecure), from the OS. A test build
 * may fix it: PFT_MEAN_NOISE_SEED. */
static int seed(node_t *nd)
{
    if (nd->pipe.noise_seeded)
        return 0;
    if (nd->hand.kp) {
        static const char ctx[] = "pftnet mean_noise seed v1 run ";
        size_t lc = sizeof ctx - 1, lr = strlen(nd->run->run);
        uint8_t msg[512], sig[PFT_KEY_SIG_LEN], h[8];
        if (lc + lr > sizeof msg)
            return pft_err(PFT_EINVAL, "run id too long to seed the mean noise");
        memcpy(msg, ctx, lc);
        memcpy(msg + lc, nd->run->run, lr);
        if (pft_keypair_sign(nd->hand.kp, msg, lc + lr, sig) != 0)
            return pft_err(PFT_EIO, "cannot seed the mean noise from this node's key");
        crypto_generichash(h, sizeof h, sig, sizeof sig, NULL, 0);
        sodium_memzero(sig, sizeof sig);
        memcpy(&nd->pipe.noise_seed, h, sizeof h);
    } else if (getrandom(&nd->pipe.noise_seed, sizeof nd->pipe.noise_seed, 0) !=
               (ssize_t)sizeof nd->pipe.noise_seed) {
        return pft_err(PFT_EIO, "getrandom failed: cannot seed the mean noise");
    }
#ifdef PFT_TEST_HOOKS
    if (getenv("PFT_MEAN_NOISE_SEED")) {
        nd->pipe.noise_seed = strtoull(getenv("PFT_MEAN_NOISE_SEED"), NULL, 10);
        pft_warn("test hook: mean noise seeded from PFT_MEAN_NOISE_SEED");
    }
#endif
    nd->pipe.noise_seeded = 1;
    return 0;
}

/* r->st := the own part with noised class sums (the released rows' exact statistics first, when no step
 * made the part yet). */
static int meannoise_own(node_t *nd, pft_node__release_t *r)
{
    const pft_dataset_t *rows = r->rows ? r->rows : nd->train;
    int rc = seed(nd);
    if (rc == 0 && !r->st) {
        r->st = pft_gstat_new(pft_node__parts_kind(nd), pft_dataset_d(rows));
        rc = r->st ? pft_gstat_add_rows(r->st, pft_dataset_x(rows), pft_dataset_y(rows),
                                        (size_t)pft_dataset_n(rows))
                   : pft_err(PFT_ENOMEM, "out of memory");
    }
    if (rc == 0)
        rc = pft_meannoise_apply_take(&r->st, nd->me->mean_noise, nd->pipe.noise_seed);
    if (rc == 0) {
        r->exact_rows = 1; /* what goes on differs from the rows: the head reads them again, exactly */
        pft_info("release: own class sums (%d classes) with noise of std %g x sqrt(%d / rows) per coordinate "
                 "(mean_noise)",
                 pft_gstat_n_classes(r->st), nd->me->mean_noise, PFT_MEANNOISE_REF_ROWS);
    }
    return rc;
}

/* An exact node (class sums: never a bundle of GMMs) releasing its own rows in the clear, without DP noise
 * (the step noise, before it in the table, declared nd->pipe.noisy), with mean_noise > 0. */
static int meannoise_applies(const node_t *nd)
{
    return nd->me->exact && nd->me->mean_noise > 0 && !nd->pipe.noisy && !pft_node__secagg_masks_own(nd);
}

const pft_node_step_t pft_node__step_meannoise = {
    .name = "mean_noise",
    .applies = meannoise_applies,
    .own = meannoise_own,
};
