/* pft_node_noise: the DP noise a head's exact statistics carry (result.json dp_noise): each DP contributor's
 * σ follows from its (ε, δ) (pft_gstat_dp_sigma_sums for TIED, pft_gstat_dp_sigma for FULL), accumulated over
 * the parts that were merged (the parts themselves are judged noisy in pft_node_parts.c). */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gstat_dp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* result.json "dp_noise" (kept in nd->dp.info under "noise"): the noise accumulated over hops in the head's
 * statistics (nd->head.stats, the merge of ps). Each DP contributor's σ follows from its (ε, δ) since Δ₂ is
 * fixed (pft_gstat_dp_sigma); the merged sums Σ_k s̃_k carry Σ_k σ_k² per entry, as does the merged second
 * moment (TIED: every contributor; FULL: per class, the contributors holding it); a merged class mean carries
 * the standard deviation sqrt(Σ σ_k²) / n_c per entry. Nothing when no contributor released with DP. */
void pft_node__noise_json(node_t *nd, const parts_t *ps)
{
    double *v = pft_calloc((size_t)nd->n_classes, sizeof *v);
    json_t *per = json_array(), *nonpriv = json_array();
    int any = 0;
    for (int i = 0; v && per && nonpriv && i < ps->n; i++)
        for (int w = 0; w < ps->p[i].n_who; w++) {
            const char *id = pft_topo_node(nd->topo, ps->p[i].who[w])->id;
            double eps, delta;
            int has_dp, exact_here;
            double s = pft_node__parts_sigma(nd, &ps->p[i], id, &eps, &delta, &has_dp, &exact_here);
            if (!has_dp) {
                json_array_append_new(nonpriv, json_string(id));
                continue;
            }
            any = 1;
            json_array_append_new(per, json_pack("{s:s,s:f,s:f,s:f,s:b}", "node", id, "epsilon", eps, "delta",
                                                 delta, "sigma", s, "exact_here", exact_here));
            if (exact_here)
                continue;
            pft_node__parts_class_var(nd, &ps->p[i], id, s * s, v);
        }
    if (any && nd->dp.info && nd->head.stats) {
        json_t *sums = json_object(), *mstd = json_object(), *s2 = json_object();
        for (int i = 0; i < pft_gstat_n_classes(nd->head.stats); i++) { /* FULL: the noise is in the head's */
            int c = pft_gstat_label(nd->head.stats, i);
            char key[16];
            snprintf(key, sizeof key, "%d", c);
            double var = c < nd->n_classes ? v[c] : 0.0;
            json_object_set_new(sums, key, json_real(var));
            json_object_set_new(mstd, key, json_real(sqrt(var) / (double)pft_gstat_count(nd->head.stats, i)));
            json_object_set_new(s2, key, json_real(var));
        }
        for (int k = 0; k < nd->head.n_extra; k++) { /* TIED: in the noisy components, apart */
            const pft_ghead_extra_t *x = &nd->head.extra[k];
            char key[16];
            snprintf(key, sizeof key, "%d", x->label);
            json_object_set_new(sums, key, json_real(x->tau2 * (double)x->n * (double)x->n));
            json_object_set_new(mstd, key, json_real(sqrt(x->tau2)));
        }
        int tied = pft_node__parts_kind(nd) == PFT_GSTAT_TIED;
        json_t *o = json_pack(
            "{s:s,s:s,s:f,s:o,s:o,s:o,s:o}", "kind", pft_gstat_kind_name(pft_node__parts_kind(nd)), "form",
            tied ? "sums" : "sums_and_second_moments", "sensitivity",
            tied ? PFT_GSTAT_DP_SENS_SUMS : PFT_GSTAT_DP_SENS, "per_contributor", json_incref(per),
            "non_private", json_incref(nonpriv), "sum_variance_sums", sums, "mean_std_per_entry", mstd);
        if (o && tied) { /* no second moment travels: the noisy parts are means only */
            json_decref(s2);
        } else if (o) {
            json_object_set_new(o, "sum_variance_second_moment", s2);
        } else {
            json_decref(s2);
        }
        if (o)
            json_object_set_new(nd->dp.info, "noise", o);
    }
    json_decref(per);
    json_decref(nonpriv);
    pft_free(v);
}
