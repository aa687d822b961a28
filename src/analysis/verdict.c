// verdict.c: the figures of a run and the checks of the finding (contract in verdict.h).
#include "verdict.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "../common.h"
#include "analysis.h"
#include "stats.h"

enum { MAX_RUNS = 256 };

static double last_half_slope(const Run *r, const double *y, double *half) {
    int n = (int)r->n_steps, lo = n / 2;
    double s;
    slope_ci95(r->step + lo, y + lo, n - lo, &s, half);
    *half *= 100;
    return s * 100;
}

void run_figures(const Run *r, RunFigures *f) {
    int n = (int)r->n_steps, k = tenth_of(n);
    f->v[RF_REWARD] = mean_range(r->reward, n - k, n);
    f->v[RF_TLEN_C] = mean_range(r->len_correct, n - k, n);
    f->v[RF_TLEN_I] = mean_range(r->len_incorrect, n - k, n);
    int e = r->n_evals - 1;
    f->v[RF_ELEN_C] = e >= 0 ? r->eval_len_correct[e] : NAN;
    f->v[RF_ELEN_I] = e >= 0 ? r->eval_len_incorrect[e] : NAN;
    f->v[RF_SCORE] = e >= 0 ? r->eval_score[e] : NAN;
    f->v[RF_SLOPE] = last_half_slope(r, r->len_mean, &f->slope_half[0]);
    f->v[RF_SLOPE_I] = last_half_slope(r, r->len_incorrect, &f->slope_half[1]);
    f->v[RF_BIAS] = mean_range(r->bias_cosine, 0, n);
    f->v[RF_TRUNC0] = mean_range(r->truncation, 0, k);
    f->v[RF_TRUNC1] = mean_range(r->truncation, n - k, n);
    f->v[RF_LOOP0] = mean_range(r->loop, 0, k);
    f->v[RF_LOOP1] = mean_range(r->loop, n - k, n);
    f->v[RF_DIS0] = mean_range(r->disagreement, 0, k);
    f->v[RF_DIS1] = mean_range(r->disagreement, n - k, n);
    double bad, cut;
    f->v[RF_ETRUNC0] = run_eval_trunc_incorrect(r, 0, &bad, &cut, NULL);
    f->v[RF_ETRUNC1] = run_eval_trunc_incorrect(r, -1, &bad, &cut, NULL);
}

void group_length_slope(Run *const *runs, int n, const int *group, int g, int incorrect, double *slope,
                        double *half) {
    int max_n = 0;
    if (n > MAX_RUNS) n = MAX_RUNS;
    for (int i = 0; i < n; i++)
        if (group[i] == g && (max_n == 0 || runs[i]->n_steps < max_n)) max_n = (int)runs[i]->n_steps;
    double *x = xmalloc(((size_t)max_n + 1) * sizeof(double)), *y = xmalloc(((size_t)max_n + 1) * sizeof(double));
    double v[MAX_RUNS];
    for (int s = 0; s < max_n; s++) {  // steps all runs of the group have
        int m = 0;
        for (int i = 0; i < n; i++)
            if (group[i] == g) v[m++] = incorrect ? runs[i]->len_incorrect[s] : runs[i]->len_mean[s];
        double h;
        x[s] = s;
        mean_ci95(v, m, &y[s], &h);
    }
    int lo = max_n / 2;
    slope_ci95(x + lo, y + lo, max_n - lo, slope, half);
    *slope *= 100;
    *half *= 100;
    free(x);
    free(y);
}

// ---- the checks

static Estimate estimate(double v) { return (Estimate){v, NAN, NAN}; }

// A mean and its 95% CI from mean_ci95's half-width.
static Estimate estimate_ci(double mean, double half) { return (Estimate){mean, mean - half, mean + half}; }

GL_PRINTF(2, 3) static void say(Check *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
}

// What the checks read: the runs' figures and the two objectives' groups.
typedef struct {
    Run *const *runs;
    int n, gg, gd;  // gg, gd: the groups in GRPO's and in Dr. GRPO's place
    const int *group;
    const RunFigures *fig;
    const char *ng, *nd;  // their names (FindingVerdict.title)
} Inputs;

// The run of group gd with the seed of run i, or -1.
static int pair_of(const Inputs *in, int i) {
    int j = -1;
    for (int t = 0; t < in->n; t++)
        if (in->group[t] == in->gd && in->runs[t]->seed == in->runs[i]->seed) j = t;
    return j;
}

// Mean over the runs of group g of figure m, and its 95% CI.
static Estimate group_mean(const Inputs *in, int g, int m) {
    double vals[MAX_RUNS], mean, half;
    int k = 0;
    for (int i = 0; i < in->n; i++)
        if (in->group[i] == g) vals[k++] = in->fig[i].v[m];
    mean_ci95(vals, k, &mean, &half);
    return estimate_ci(mean, half);
}

static double gmean(const Inputs *in, int g, int m) { return group_mean(in, g, m).v; }

// 1: GRPO's incorrect eval responses are longer than Dr. GRPO's, paired by seed; the ratio's
// statistic is taken on the log scale (log_mean_ci95).
static void check_eval_ratio(const Inputs *in, FindingVerdict *v, Check *c) {
    double ratios[MAX_RUNS];
    int k = 0;
    for (int i = 0; i < in->n; i++) {
        if (in->group[i] != in->gg) continue;
        int j = pair_of(in, i);
        if (j < 0) {
            v->unpaired = 1;
            continue;
        }
        ratios[k++] = in->fig[i].v[RF_ELEN_I] / in->fig[j].v[RF_ELEN_I];
    }
    v->pairs = k;
    double rm, lo = NAN, hi = NAN, am, ah;
    if (k == 0) rm = gmean(in, in->gg, RF_ELEN_I) / gmean(in, in->gd, RF_ELEN_I);
    else log_mean_ci95(ratios, k, &rm, &lo, &hi);
    mean_ci95(ratios, k, &am, &ah);
    c->name = "eval_ratio";
    c->threshold = VERDICT_RATIO_MIN;
    c->f[0] = (Estimate){rm, lo, hi};
    c->f[1] = k ? estimate_ci(am, ah) : estimate(NAN);
    c->pass = rm >= VERDICT_RATIO_MIN && isfinite(lo) && lo > 1;
    if (!isfinite(rm)) say(c, "no ratio: a run has no incorrect eval response");
    else if (rm < VERDICT_RATIO_MIN) say(c, "ratio %.2f is below %g", rm, VERDICT_RATIO_MIN);
    else if (!isfinite(lo)) say(c, "no CI from %s", k ? "one seed pair" : "unpaired runs");
    else if (!c->pass) say(c, "the CI reaches down to %.2f, not above 1", lo);
    else say(c, "ratio %.2f >= %g with the CI above 1 over %d seed pairs", rm, VERDICT_RATIO_MIN, k);
}

// 2: GRPO's incorrect training responses still grow over the last half; Dr. GRPO's grow at
// most VERDICT_FLAT_SHARE as fast (an equivalence margin: a 100-step regression resolves a
// drift of a few tokens, which is not growth like GRPO's).
static void check_length_slope(const Inputs *in, FindingVerdict *v, Check *c) {
    double gs, gh, ds, dh;
    group_length_slope(in->runs, in->n, in->group, in->gg, 1, &gs, &gh);
    group_length_slope(in->runs, in->n, in->group, in->gd, 1, &ds, &dh);
    c->name = "length_slope";
    c->threshold = VERDICT_FLAT_SHARE;
    c->f[0] = estimate_ci(gs, gh);
    c->f[1] = estimate_ci(ds, dh);
    int grpo_grows = isfinite(gh) && c->f[0].lo > 0;
    int dr_flat = isfinite(dh) && c->f[1].hi < VERDICT_FLAT_SHARE * gs;
    c->pass = grpo_grows && dr_flat;
    if (!grpo_grows) say(c, "%s's slope %+.1f has %s", in->ng, gs, isfinite(gh) ? "a CI that is not above 0" : "no CI");
    else if (!dr_flat)
        say(c, isfinite(dh) ? "%s's slope %+.1f has a CI reaching %g of %s's or more" : "%s's slope %+.1f has no CI",
            in->nd, ds, VERDICT_FLAT_SHARE, in->ng);
    else say(c, "%s's incorrect responses grow (%+.1f), %s's at most %g as fast (%+.1f)", in->ng, gs, in->nd,
             VERDICT_FLAT_SHARE, ds);
    // GRPO's side failed: at the budget its failures cannot grow any more
    v->budget = group_budget(in->runs, in->n, in->group, in->gg);
    v->grpo_len_i = gmean(in, in->gg, RF_TLEN_I);
    v->grpo_trunc = gmean(in, in->gg, RF_TRUNC1);
    v->saturated = !grpo_grows && v->budget > 0 && v->grpo_len_i >= VERDICT_SATURATION * v->budget;
}

// 3: truncation and loops rise under GRPO, and by more than under Dr. GRPO (a share that
// falls under both, under GRPO by less, has not risen).
static void check_failing_states(const Inputs *in, Check *c) {
    int gg = in->gg, gd = in->gd;
    double tg = gmean(in, gg, RF_TRUNC1) - gmean(in, gg, RF_TRUNC0), td = gmean(in, gd, RF_TRUNC1) - gmean(in, gd, RF_TRUNC0);
    double lg = gmean(in, gg, RF_LOOP1) - gmean(in, gg, RF_LOOP0), ld = gmean(in, gd, RF_LOOP1) - gmean(in, gd, RF_LOOP0);
    c->name = "failing_states";
    c->threshold = 0;
    c->f[0] = estimate(tg), c->f[1] = estimate(td), c->f[2] = estimate(lg), c->f[3] = estimate(ld);
    c->pass = tg > 0 && lg > 0 && tg > td && lg > ld;
    if (!(isfinite(tg) && isfinite(td) && isfinite(lg) && isfinite(ld))) say(c, "a truncation rate or loop share is NaN");
    else if (!(tg > 0)) say(c, "%s's truncation rate does not rise (%+.3f)", in->ng, tg);
    else if (!(lg > 0)) say(c, "%s's loop share does not rise (%+.3f)", in->ng, lg);
    else if (!(tg > td)) say(c, "truncation rises under %s as much (%+.3f vs %+.3f)", in->nd, td, tg);
    else if (!(lg > ld)) say(c, "loops rise under %s as much (%+.3f vs %+.3f)", in->nd, ld, lg);
    else say(c, "truncation and loops rise under %s, by more than under %s", in->ng, in->nd);
}

// 4: the visible self-check disagreements do not collapse under either objective.
static void check_disagreement(const Inputs *in, Check *c) {
    c->name = "disagreement";
    c->threshold = VERDICT_DISAGREE_KEEP;
    c->pass = 1;
    say(c, "both keep their disagreements");
    for (int s = 1; s >= 0; s--) {  // Dr. GRPO's side first, so that GRPO's failure is the one said
        int g = s ? in->gd : in->gg;
        double d0 = gmean(in, g, RF_DIS0), d1 = gmean(in, g, RF_DIS1);
        c->f[2 * s] = estimate(d0), c->f[2 * s + 1] = estimate(d1);
        if (d1 >= VERDICT_DISAGREE_KEEP * d0 && d1 > 0) continue;
        c->pass = 0;
        if (!isfinite(d0) || !isfinite(d1)) say(c, "%s's disagreement share is NaN", s ? in->nd : in->ng);
        else say(c, "%s's disagreements collapse (%.3f -> %.3f)", s ? in->nd : in->ng, d0, d1);
    }
}

int tost_within(const double *x, int n, double level, double margin, double *mean, double *lo, double *hi) {
    double half;
    int k = mean_ci(x, n, level, mean, &half);
    *lo = k >= 2 ? *mean - half : NAN;
    *hi = k >= 2 ? *mean + half : NAN;
    return k >= 2 && isfinite(half) && *lo > -margin && *hi < margin;
}

// 5: Dr. GRPO earns the reward GRPO earns: the final rewards of the seed pairs are equivalent
// within the margin (two one-sided tests: the CI at VERDICT_REWARD_LEVEL of the mean pair
// difference inside +- the margin).
static void check_reward(const Inputs *in, FindingVerdict *v, Check *c) {
    double diff[MAX_RUNS], mean, lo, hi;
    int k = 0;
    for (int i = 0; i < in->n; i++) {
        if (in->group[i] != in->gg) continue;
        int j = pair_of(in, i);
        double d = j < 0 ? NAN : in->fig[j].v[RF_REWARD] - in->fig[i].v[RF_REWARD];
        if (isfinite(d)) diff[k++] = d;
    }
    v->reward_pairs = k;
    c->name = "reward";
    c->threshold = VERDICT_REWARD_MARGIN;
    c->pass = tost_within(diff, k, VERDICT_REWARD_LEVEL, VERDICT_REWARD_MARGIN, &mean, &lo, &hi);
    c->f[0] = (Estimate){mean, lo, hi};
    c->f[1] = estimate(gmean(in, in->gd, RF_REWARD)), c->f[2] = estimate(gmean(in, in->gg, RF_REWARD));
    if (k == 0) say(c, "no seed pair with both final rewards");
    else if (k == 1) say(c, "no CI from one seed pair (difference %+.3f)", mean);
    else if (c->pass)
        say(c, "difference %+.3f, %.0f%% CI %+.3f..%+.3f within +-%g over %d seed pairs", mean,
            100 * VERDICT_REWARD_LEVEL, lo, hi, VERDICT_REWARD_MARGIN, k);
    else say(c, "difference %+.3f, %.0f%% CI %+.3f..%+.3f not within +-%g", mean, 100 * VERDICT_REWARD_LEVEL, lo, hi,
             VERDICT_REWARD_MARGIN);
}

// The training reward of run r, last tenth minus first tenth, and the half-width of the 95%
// CI of that difference from the steps of the two tenths: two-sample t with pooled variance,
// t_{0.975, a+b-2} s_p sqrt(1/a + 1/b) over the a and b finite steps (NaN if a + b < 3).
static double reward_rise(const Run *r, double *half) {
    int n = (int)r->n_steps, k = tenth_of(n), cnt[2] = {0, 0};
    double mean[2] = {mean_range(r->reward, 0, k), mean_range(r->reward, n - k, n)}, ss = 0;
    for (int t = 0; t < 2; t++)
        for (int i = t ? n - k : 0; i < (t ? n : k); i++)
            if (isfinite(r->reward[i])) ss += (r->reward[i] - mean[t]) * (r->reward[i] - mean[t]), cnt[t]++;
    int df = cnt[0] + cnt[1] - 2;
    *half = cnt[0] && cnt[1] && df > 0
                ? gsl_cdf_tdist_Pinv(0.975, df) * sqrt(ss / df * (1.0 / cnt[0] + 1.0 / cnt[1]))
                : NAN;
    return mean[1] - mean[0];
}

// 6: the training reward rises under both objectives, over seeds (or the steps of one run).
static void check_reward_rises(const Inputs *in, FindingVerdict *v, Check *c) {
    c->name = "reward_rises";
    c->threshold = VERDICT_REWARD_RISE;
    c->pass = 1;
    say(c, "the reward rises under both");
    for (int s = 1; s >= 0; s--) {  // Dr. GRPO's side first, so that GRPO's failure is the one said
        int g = s ? in->gd : in->gg, k = 0;
        double rise[MAX_RUNS], steps_half[MAX_RUNS], half, mean;
        for (int i = 0; i < in->n; i++)
            if (in->group[i] == g) rise[k] = reward_rise(in->runs[i], &steps_half[k]), k++;
        if (k > 1) mean_ci95(rise, k, &mean, &half);
        else mean = rise[0], half = steps_half[0];  // one run: the CI from its steps
        v->runs[s] = k;
        Estimate *e = &c->f[s];
        *e = estimate_ci(mean, half);
        if (mean >= VERDICT_REWARD_RISE && e->lo > 0) continue;
        c->pass = 0;
        const char *who = s ? in->nd : in->ng;
        if (!isfinite(mean)) say(c, "%s's reward is NaN", who);
        else if (mean < VERDICT_REWARD_RISE) say(c, "%s's reward rises by %+.3f, less than %+g", who, mean, VERDICT_REWARD_RISE);
        else if (!isfinite(half)) say(c, "%s's rise %+.3f has no CI", who, mean);
        else say(c, "%s's rise %+.3f has a CI reaching down to %+.3f", who, mean, e->lo);
    }
}

// 7: GRPO's incorrect greedy eval responses are not capped: most of them end before the budget.
// Where most are cut, their length says how long the budget is rather than how far the bias
// lengthens them.
static void check_eval_trunc(const Inputs *in, FindingVerdict *v, Check *c) {
    double bad = 0, cut = 0;
    int runs = 0, known = 0, from_eval = 0, from_file = 0;
    for (int i = 0; i < in->n; i++) {
        if (in->group[i] != in->gg) continue;
        double b, k;
        const char *src;
        runs++;
        run_eval_trunc_incorrect(in->runs[i], -1, &b, &k, &src);
        if (!src) continue;
        known++, bad += b, cut += k;
        from_eval |= strcmp(src, "/eval") == 0, from_file |= strcmp(src, "eval-run") == 0;
    }
    v->trunc_runs = runs;
    v->trunc_source = from_eval && from_file ? "/eval and eval-run" : from_eval ? "/eval" : from_file ? "eval-run" : NULL;
    c->name = "eval_trunc";
    c->threshold = VERDICT_TRUNC_SHARE;
    c->f[0] = estimate(known == runs && bad > 0 ? cut / bad : NAN);
    c->f[1] = group_mean(in, in->gg, RF_ELEN_I);
    c->f[2] = estimate(group_budget(in->runs, in->n, in->group, in->gg));
    c->f[3] = estimate(known);
    c->pass = known == runs && bad > 0 && cut / bad < VERDICT_TRUNC_SHARE;
    if (known < runs)
        say(c, "not available for %d of %s's %d runs: their logs have no /eval/truncation_incorrect (an older "
            "grpolab) and no greedy eval-run file", runs - known, in->ng, runs);
    else if (!(bad > 0)) say(c, "%s has no incorrect eval response", in->ng);
    else if (!c->pass) say(c, "%.0f of %.0f incorrect responses (%.2f) cut by the budget, not below %g", cut, bad, cut / bad, VERDICT_TRUNC_SHARE);
    else say(c, "%.0f of %.0f incorrect responses (%.2f) cut by the budget", cut, bad, cut / bad);
}

// Information: the ratio of the sampled eval lengths of incorrect responses over the pairs.
static void sampled_ratio(const Inputs *in, FindingVerdict *v) {
    double ratios[MAX_RUNS], mean;
    int k = 0;
    v->sampled_k = 0;
    for (int i = 0; i < in->n; i++) {
        if (in->group[i] != in->gg) continue;
        int j = pair_of(in, i);
        if (j < 0) continue;
        const struct FinalEval *a = &in->runs[i]->final_eval[FINAL_SAMPLED], *b = &in->runs[j]->final_eval[FINAL_SAMPLED];
        if (a->n == 0 || b->n == 0) continue;
        for (int s = 0; s < 2; s++) {
            int ks = s ? b->samples : a->samples;
            v->sampled_k = v->sampled_k == 0 || v->sampled_k == ks ? ks : -1;
        }
        ratios[k++] = a->len_incorrect / b->len_incorrect;
    }
    v->sampled_pairs = k;
    double lo, hi;
    log_mean_ci95(ratios, k, &mean, &lo, &hi);  // as check 1's
    v->sampled_ratio = (Estimate){mean, lo, hi};
}

int verdict_compare(Run *const *runs, int n, const char *test, const char *ref, FindingVerdict *v) {
    memset(v, 0, sizeof *v);
    if (n > MAX_RUNS) n = MAX_RUNS;
    int group[MAX_RUNS];
    const char *names[MAX_OBJECTIVES];
    int ng = group_by_objective(runs, n, group, names, MAX_OBJECTIVES);
    Inputs in = {runs, n, -1, -1, group, NULL, NULL, NULL};
    for (int g = 0; g < ng; g++) {
        if (strcmp(names[g], test) == 0) in.gg = g;
        if (strcmp(names[g], ref) == 0) in.gd = g;
    }
    if (in.gg < 0 || in.gd < 0 || in.gg == in.gd) return 0;
    for (int i = 0; i < n; i++)
        for (int s = 0; s < 2; s++)
            if (group[i] == (s ? in.gd : in.gg)) snprintf(v->title[s], sizeof v->title[s], "%s", group_title(runs[i]));
    in.ng = v->title[0], in.nd = v->title[1];
    RunFigures *fig = xcalloc((size_t)n, sizeof *fig);
    for (int i = 0; i < n; i++) run_figures(runs[i], &fig[i]);
    in.fig = fig;
    for (int c = 0; c < N_CHECKS; c++)
        for (int k = 0; k < 4; k++) v->check[c].f[k] = estimate(NAN);
    check_eval_ratio(&in, v, &v->check[CHECK_EVAL_RATIO]);
    check_length_slope(&in, v, &v->check[CHECK_LENGTH_SLOPE]);
    check_failing_states(&in, &v->check[CHECK_FAILING_STATES]);
    check_disagreement(&in, &v->check[CHECK_DISAGREEMENT]);
    check_reward(&in, v, &v->check[CHECK_REWARD]);
    check_reward_rises(&in, v, &v->check[CHECK_REWARD_RISES]);
    check_eval_trunc(&in, v, &v->check[CHECK_EVAL_TRUNC]);
    sampled_ratio(&in, v);
    free(fig);
    v->checks = N_CHECKS;
    for (int c = 0; c < N_CHECKS; c++) v->passed += v->check[c].pass;
    return v->checks;
}

int finding_verdict(Run *const *runs, int n, FindingVerdict *v) { return verdict_compare(runs, n, "grpo", "dr_grpo", v); }

int verdict_find_group(Run *const *runs, int n, const int *group, const char *const *names, int ng, const char *name,
                      size_t len) {
    for (int g = 0; g < ng; g++) {
        if (strlen(names[g]) == len && strncmp(names[g], name, len) == 0) return g;
        for (int i = 0; i < n; i++) {
            const char *t = group_title(runs[i]);
            if (group[i] == g && strlen(t) == len && strncmp(t, name, len) == 0) return g;
        }
    }
    return -1;
}

int verdict_plan(Run *const *runs, int n, const char *against, const char *only, const char **test,
                 const char **ref, int max, char *err, size_t errlen) {
    if (n > MAX_RUNS) n = MAX_RUNS;
    int group[MAX_RUNS];
    const char *names[MAX_OBJECTIVES];
    int ng = group_by_objective(runs, n, group, names, MAX_OBJECTIVES), r = -1, k = 0;
    if (against) {
        r = verdict_find_group(runs, n, group, names, ng, against, strlen(against));
        if (r < 0) return set_err(err, errlen, "--against '%s': no group of that label or name among the runs", against);
    } else {
        int gg = verdict_find_group(runs, n, group, names, ng, "grpo", 4), gd = verdict_find_group(runs, n, group, names, ng, "dr_grpo", 7);
        if (gg >= 0 && gd >= 0 && strcmp(names[gg], "grpo") == 0 && strcmp(names[gd], "dr_grpo") == 0) {
            if (max < 1) return 0;
            test[0] = names[gg], ref[0] = names[gd];
            return 1;
        }
        for (int i = 0; i < n && r < 0; i++)
            if (strcmp(group_title(runs[i]), "Dr. GRPO") == 0 && strcmp(runs[i]->objective, runs[i]->preset) != 0) r = group[i];
        if (r < 0) return 0;
    }
    int want[MAX_OBJECTIVES] = {0};
    for (int g = 0; g < ng; g++) want[g] = !only && g != r;
    for (const char *p = only; p && *p;) {
        size_t len = strcspn(p, ",");
        int g = verdict_find_group(runs, n, group, names, ng, p, len);
        if (g < 0) return set_err(err, errlen, "--groups '%s': no group '%.*s' among the runs", only, (int)len, p);
        if (g == r) return set_err(err, errlen, "--groups '%s': '%.*s' is the group compared against", only, (int)len, p);
        want[g] = 1;
        p += len + (p[len] == ',');
    }
    for (int g = 0; g < ng && k < max; g++)
        if (want[g]) test[k] = names[g], ref[k] = names[r], k++;
    return k;
}
