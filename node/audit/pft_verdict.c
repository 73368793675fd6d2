/* pft_verdict: names and order of the audit's verdicts. */
#include "pft_verdict.h"

#include "pft_error.h"

#include <strings.h>

const char *pft_verdict_name(pft_verdict_t v)
{
    switch (v) {
    case PFT_VERDICT_PASS:
        return "PASS";
    case PFT_VERDICT_WARN:
        return "WARN";
    case PFT_VERDICT_FAIL:
        return "FAIL";
    }
    return "?";
}

int pft_verdict_parse(const char *name, pft_verdict_t *out)
{
    static const pft_verdict_t all[] = {PFT_VERDICT_PASS, PFT_VERDICT_WARN, PFT_VERDICT_FAIL};
    for (int i = 0; name && i < 3; i++)
        if (strcasecmp(name, pft_verdict_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    return pft_err(PFT_EINVAL, "unknown verdict '%s' (pass, warn, fail)", name ? name : "(null)");
}

pft_verdict_t pft_verdict_worst(pft_verdict_t a, pft_verdict_t b)
{
    return a > b ? a : b;
}
