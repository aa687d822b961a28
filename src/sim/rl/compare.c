// compare.c: counterfactual diagnostics of diagnostics.compare (compare.h).
#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../common.h"

int compare_from_config(const Config *c, int max_new, Compare *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const char *list = config_settings(c)->diagnostics.compare;
    out->bins = config_settings(c)->diagnostics.length_bins;
    out->extra_epochs = config_settings(c)->diagnostics.compare_extra_epochs;
    out->points = COMPARE_POINT_EXTRA + out->extra_epochs;
    out->max_new = max_new;
    snprintf(out->names, sizeof out->names, "%s", list);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        char name[32];
        if (len == 0 || len >= sizeof name)
            return set_err(err, errlen, "diagnostics.compare = '%s': expected preset names separated "
                           "by commas (grpolab objective --list)", list);
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        if (out->n == COMPARE_MAX)
            return set_err(err, errlen, "diagnostics.compare = '%s': at most %d objectives", list, COMPARE_MAX);
        if (objective_preset(name, max_new, &out->oc[out->n]) != 0)
            return set_err(err, errlen, "diagnostics.compare = '%s': no preset '%s' (grpolab objective "
                           "--list)", list, name);
        out->needs_greedy |= out->oc[out->n].baseline == BASELINE_GREEDY;
        out->n++;
        p += len + (p[len] == ',');
    }
    return 0;
}

void compare_alloc(Compare *c, int N, size_t tok_cap, size_t n_params, Backend *bk) {
    if (c->n == 0) return;
    c->g_unb = xmalloc(n_params * sizeof(float));
    c->g_obj = xmalloc(n_params * sizeof(float));
    for (int j = 0; j < c->n; j++) c->adv[j] = xmalloc((size_t)N * sizeof(float));
    c->d_adv = bk_alloc(bk, (size_t)N * sizeof(float));
    c->weights = xmalloc(tok_cap * sizeof(float));
    c->first_idx = xmalloc((size_t)N * sizeof(int));
    c->resp_clipped = xmalloc((size_t)N * sizeof(int));
    c->resp_gate_sum = xmalloc((size_t)N * sizeof(double));
    c->bin_acc = xmalloc((size_t)4 * c->bins * sizeof(double));
    c->saved = c->extra_epochs > 1 ? bk_alloc(bk, 3 * n_params * sizeof(float)) : NULL;
    c->rows = xmalloc((size_t)c->points * c->n * sizeof(CompareRow));
    c->bin_rows = xmalloc((size_t)c->points * c->n * c->bins * sizeof(CompareBinRow));
}

void compare_free(Compare *c, Backend *bk) {
    if (c->n == 0) return;
    for (int j = 0; j < c->n; j++) free(c->adv[j]);
    bk_free(bk, c->d_adv);
    if (c->saved) bk_free(bk, c->saved);
    free(c->weights);
    free(c->first_idx);
    free(c->resp_clipped);
    free(c->resp_gate_sum);
    free(c->bin_acc);
    free(c->rows);
    free(c->bin_rows);
    free(c->g_unb);
    free(c->g_obj);
}

void compare_advantages(Compare *c, Backend *bk, int step, const float *d_rewards,
                        const int *d_lengths, const float *d_greedy, int P, int G) {
    c->step = step;
    c->first_n = 0;
    for (int p = 0; p < c->points; p++)  // rows of a point not reached: NaN, no weights
        for (int j = 0; j < c->n; j++) {
            c->rows[p * c->n + j] = (CompareRow){
                .step = step, .point = p, .objective = j, .bias_cosine = NAN, .grad_norm = NAN,
                .weighted_length_correct = NAN, .weighted_length_incorrect = NAN,
                .clip_frac_low = NAN, .clip_frac_high = NAN, .gate_mean = NAN, .abs_log_ratio = NAN};
            for (int b = 0; b < c->bins; b++)
                c->bin_rows[((size_t)p * c->n + j) * c->bins + b] =
                    (CompareBinRow){.step = step, .point = p, .objective = j, .bin = b,
                                    .length_lo = b * c->max_new / c->bins + 1,
                                    .length_hi = (b + 1) * c->max_new / c->bins,
                                    .clip_frac = NAN, .gate_mean = NAN};
        }
    for (int j = 0; j < c->n; j++) {
        kn_group_advantages(bk, c->d_adv, NULL, NULL, d_rewards, d_lengths, d_greedy, P, G, &c->oc[j]);
        bk_download(bk, c->adv[j], c->d_adv, (size_t)P * G * sizeof(float));
    }
}

static double ratio_or_nan(double a, double b) { return b > 0 ? a / b : NAN; }

// The gradient in m (after a zero) of oc over the minibatch with advantages adv, downloaded to
// g (np floats), its statistics into *st; the token weights into c->weights.
static void gradient_of(Compare *c, UpdateWorkspace *ws, Model *m, const ObjectiveConfig *oc,
                        const Rollout *r, const float *adv, const int *idx, int n, int micro,
                        float *g, MinibatchStats *st) {
    Rollout rj = *r;
    rj.advantage = adv;
    rj.resp_clipped = c->resp_clipped;
    rj.resp_gate_sum = c->resp_gate_sum;
    model_zero_grad(m);
    update_minibatch_gradient(ws, m, oc, &rj, idx, n, micro, c->weights, NULL, st);
    bk_download(model_backend(m), g, model_grads(m), model_num_params(m) * sizeof(float));
}

// The sums of |w| (c->weights) over the responses idx[0..n) into row and its bins, split by
// correct (reward > 0) and incorrect, the |w|-weighted mean lengths, and per bin the share
// of clipped tokens and the gate (c->resp_clipped, c->resp_gate_sum; adv: the objective's
// advantages).
static void weight_sums(const Compare *c, const Rollout *r, const float *adv, const int *idx, int n,
                        CompareRow *row, CompareBinRow *bins) {
    double wl[2] = {0, 0};  // sum over responses of length * sum |w|: incorrect, correct
    double *tokens = c->bin_acc, *clipped = tokens + c->bins, *gated = clipped + c->bins;
    double *gate = gated + c->bins;
    memset(c->bin_acc, 0, (size_t)4 * c->bins * sizeof(double));
    for (int k = 0; k < n; k++) {
        int i = idx[k], len = r->resp_len[i], correct = c->rewards[i] > 0, policy = 0;
        double sw = 0;
        for (int t = 0; t < len; t++) {
            sw += fabs(c->weights[r->tok_offset[i] + t]);
            policy += !r->env || !r->env[r->tok_offset[i] + t];
        }
        int b = (len - 1) * c->bins / c->max_new;
        b = b < 0 ? 0 : b >= c->bins ? c->bins - 1 : b;
        if (correct) {
            bins[b].n_correct++;
            bins[b].sum_abs_weight_correct += sw;
            row->sum_abs_weight_correct += sw;
        } else {
            bins[b].n_incorrect++;
            bins[b].sum_abs_weight_incorrect += sw;
            row->sum_abs_weight_incorrect += sw;
        }
        wl[correct] += (double)len * sw;
        tokens[b] += policy;
        clipped[b] += c->resp_clipped[i];
        if (adv[i] != 0.0f) {
            gated[b] += policy;
            gate[b] += c->resp_gate_sum[i];
        }
    }
    for (int b = 0; b < c->bins; b++) {
        bins[b].clip_frac = ratio_or_nan(clipped[b], tokens[b]);
        bins[b].gate_mean = ratio_or_nan(gate[b], gated[b]);
    }
    row->weighted_length_correct = ratio_or_nan(wl[1], row->sum_abs_weight_correct);
    row->weighted_length_incorrect = ratio_or_nan(wl[0], row->sum_abs_weight_incorrect);
}

void compare_point(Compare *c, int point, UpdateWorkspace *ws, Model *m, const Rollout *r,
                   const int *idx, int n, int micro, const float *unbiased_adv) {
    if (point < 0 || point >= c->points) die("compare: point %d of %d", point, c->points);
    if (point == COMPARE_POINT_RHO1) {
        memcpy(c->first_idx, idx, (size_t)n * sizeof(int));
        c->first_n = n;
    }
    size_t np = model_num_params(m);
    MinibatchStats st;
    // the unbiased policy gradient once: weight unbiased_adv[i] on every policy token, summed
    // (update.h's bias diagnostic), as the objective with no ratio, no clip and token_sum; off
    // rho = 1 it is that estimator at the point's parameters, not importance-weighted
    ObjectiveConfig unb = c->oc[0];
    unb.ratio = RATIO_NONE;
    unb.clip = CLIP_NONE;
    unb.aggregation = AGG_TOKEN_SUM;
    unb.beta = 0.0f;
    gradient_of(c, ws, m, &unb, r, unbiased_adv, idx, n, micro, c->g_unb, &st);
    double nu = 0;
    for (size_t q = 0; q < np; q++) nu += (double)c->g_unb[q] * c->g_unb[q];
    for (int j = 0; j < c->n; j++) {
        CompareRow *row = &c->rows[point * c->n + j];
        gradient_of(c, ws, m, &c->oc[j], r, c->adv[j], idx, n, micro, c->g_obj, &st);
        double dot = 0, no = 0;
        for (size_t q = 0; q < np; q++) {
            dot += (double)c->g_obj[q] * c->g_unb[q];
            no += (double)c->g_obj[q] * c->g_obj[q];
        }
        // the cosine as update.c's bias_cosine; the gradient of L, so -w's sign on both sides
        row->bias_cosine = no > 0 && nu > 0 ? dot / sqrt(no * nu) : NAN;
        row->grad_norm = sqrt(no);
        row->clip_frac_low = ratio_or_nan((double)st.clipped_low, (double)st.tokens);
        row->clip_frac_high = ratio_or_nan((double)st.clipped_high, (double)st.tokens);
        row->gate_mean = ratio_or_nan(st.gate_sum, (double)st.gate_tokens);
        row->abs_log_ratio = ratio_or_nan(st.abs_log_ratio_sum, (double)st.tokens);
        weight_sums(c, r, c->adv[j], idx, n, row, c->bin_rows + ((size_t)point * c->n + j) * c->bins);
    }
    model_zero_grad(m);
}

// The parameters, AdamW moments and step count of m into c, and back (the extra passes).
static void save_params(Compare *c, Model *m) {
    size_t bytes = model_num_params(m) * sizeof(float), np = model_num_params(m);
    Backend *bk = model_backend(m);
    if (!c->saved) die("compare: no buffer for the parameters (diagnostics.compare_extra_epochs <= 1)");
    bk_copy(bk, c->saved, model_params(m), bytes);
    bk_copy(bk, c->saved + np, model_adam_m(m), bytes);
    bk_copy(bk, c->saved + 2 * np, model_adam_v(m), bytes);
    c->saved_adam_step = model_adam_step(m);
}

static void restore_params(const Compare *c, Model *m) {
    size_t bytes = model_num_params(m) * sizeof(float), np = model_num_params(m);
    Backend *bk = model_backend(m);
    bk_copy(bk, model_params(m), c->saved, bytes);
    bk_copy(bk, model_adam_m(m), c->saved + np, bytes);
    bk_copy(bk, model_adam_v(m), c->saved + 2 * np, bytes);
    model_set_adam_step(m, c->saved_adam_step);
}

// MinibatchProbe's run: update_epochs' points are compare's first two.
static void probe_run(void *ctx, int point, UpdateWorkspace *ws, Model *m, const Rollout *r,
                      const int *idx, int n, int micro, const float *unbiased) {
    compare_point(ctx, point == UPDATE_PROBE_FIRST ? COMPARE_POINT_RHO1 : COMPARE_POINT_LAST, ws, m,
                  r, idx, n, micro, unbiased);
}

MinibatchProbe compare_probe(Compare *c) { return (MinibatchProbe){.run = probe_run, .ctx = c}; }

void compare_extra_passes(Compare *c, UpdateWorkspace *ws, Model *m, Model *ref,
                          const ObjectiveConfig *oc, const AdamWConfig *opt, const EpochPlan *plan,
                          const Rollout *r, const int *kept, int n_kept, int *order,
                          const float *unbiased) {
    if (c->n == 0 || c->extra_epochs == 0 || n_kept <= 0) return;
    // the first minibatch's responses at the parameters after the update, then after each
    // further epoch of the trained objective, run on m and undone after the last, so that the
    // run goes on as without them
    if (c->extra_epochs > 1) save_params(c, m);
    UpdateStats scratch = {0};
    for (int k = 1; k <= c->extra_epochs; k++) {
        compare_point(c, COMPARE_POINT_EXTRA + k - 1, ws, m, r, c->first_idx, c->first_n,
                      plan->micro, unbiased);
        if (k < c->extra_epochs)
            update_extra_epoch(ws, m, ref, oc, opt, plan, r, kept, n_kept, order,
                               plan->epochs + k - 1, &scratch);
    }
    if (c->extra_epochs > 1) restore_params(c, m);
}

int compare_write(const Compare *c, RunLog *rl, char *err, size_t errlen) {
    if (c->n == 0) return 0;
    int rows = c->points * c->n;
    if (runlog_append_rows(rl, &LOG_COMPARE, rows, c->rows, err, errlen) != 0) return -1;
    return runlog_append_rows(rl, &LOG_COMPARE_BINS, rows * c->bins, c->bin_rows, err, errlen);
}
