/* pft_verdict: the verdict an attack of `pftnet audit` gives a bundle (PASS, WARN, FAIL) and their order. */
#ifndef PFT_VERDICT_H
#define PFT_VERDICT_H

/* Ordered: a worse verdict compares greater. */
typedef enum {
    PFT_VERDICT_PASS = 0, /* the attack learns nothing it should not (or does not apply) */
    PFT_VERDICT_WARN = 1, /* the attack does better than chance: a membership signal */
    PFT_VERDICT_FAIL = 2, /* a row can be recovered or membership decided (nearly) exactly */
} pft_verdict_t;

/* "PASS", "WARN", "FAIL"; "?" for another value. */
const char *pft_verdict_name(pft_verdict_t v);
/* Parses "pass", "warn", "fail" (any case) into *out: 0, or PFT_EINVAL with a message. */
int pft_verdict_parse(const char *name, pft_verdict_t *out);
/* The worse of a and b. */
pft_verdict_t pft_verdict_worst(pft_verdict_t a, pft_verdict_t b);

#endif
