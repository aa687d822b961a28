// summary.c: `grpolab summary`: per run and per objective across seeds, the figures of the
// paper's Fig. 5 at the end of training, the slope of the training length over the last half
// with its 95% CI, and, when GRPO and Dr. GRPO runs are both given, the checks of the finding
// (docs/results.md).
//
// Definitions (docs/cli.md):
//   final train figures   mean over the last tenth of the steps (at least one step)
//   first train figures   mean over the first tenth
//   final eval figures    the last evaluation (pooled over the benchmarks)
//   slope                 least squares of the training length (all / incorrect responses)
//                         against the step over the steps >= n/2, tokens per 100 steps
//   across seeds          mean and 95% CI (t) over the runs of an objective; the slope across
//                         seeds is that of the seed-mean curve (its CI from the regression)
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "analysis.h"
#include "stats.h"

int tenth_of(int n_steps) { return n_steps / 10 > 0 ? n_steps / 10 : 1; }

enum {
    M_REWARD, M_TLEN_C, M_TLEN_I, M_ELEN_C, M_ELEN_I, M_SCORE, M_SLOPE, M_SLOPE_I, M_BIAS, M_TRUNC0,
    M_TRUNC1, M_LOOP0, M_LOOP1, M_DIS0, M_DIS1, N_METRICS
};
static const struct {
    const char *head, *fmt;
} MET[N_METRICS] = {
    {"reward", "%.3f"},        {"train len C", "%.1f"}, {"train len I", "%.1f"}, {"eval len C", "%.1f"},
    {"eval len I", "%.1f"},    {"score", "%.3f"},       {"slope len", "%+.1f"},  {"slope len I", "%+.1f"},
    {"bias cos", "%.3f"},      {"trunc 0", "%.3f"},     {"trunc 1", "%.3f"},     {"loop 0", "%.3f"},
    {"loop 1", "%.3f"},        {"disagr 0", "%.3f"},    {"disagr 1", "%.3f"},
};

typedef struct {
    double v[N_METRICS];
    double slope_half[2];  // CI half-widths of M_SLOPE, M_SLOPE_I
} RunStats;

static double last_half_slope(const Run *r, const double *y, double *half) {
    int n = (int)r->n_steps, lo = n / 2;
    double s;
    slope_ci95(r->step + lo, y + lo, n - lo, &s, half);
    *half *= 100;
    return s * 100;
}

static void run_stats(const Run *r, RunStats *s) {
    int n = (int)r->n_steps, k = tenth_of(n);
    s->v[M_REWARD] = mean_range(r->reward, n - k, n);
    s->v[M_TLEN_C] = mean_range(r->len_correct, n - k, n);
    s->v[M_TLEN_I] = mean_range(r->len_incorrect, n - k, n);
    int e = r->n_evals - 1;
    s->v[M_ELEN_C] = e >= 0 ? r->eval_len_correct[e] : NAN;
    s->v[M_ELEN_I] = e >= 0 ? r->eval_len_incorrect[e] : NAN;
    s->v[M_SCORE] = e >= 0 ? r->eval_score[e] : NAN;
    s->v[M_SLOPE] = last_half_slope(r, r->len_mean, &s->slope_half[0]);
    s->v[M_SLOPE_I] = last_half_slope(r, r->len_incorrect, &s->slope_half[1]);
    s->v[M_BIAS] = mean_range(r->bias_cosine, 0, n);
    s->v[M_TRUNC0] = mean_range(r->truncation, 0, k);
    s->v[M_TRUNC1] = mean_range(r->truncation, n - k, n);
    s->v[M_LOOP0] = mean_range(r->loop, 0, k);
    s->v[M_LOOP1] = mean_range(r->loop, n - k, n);
    s->v[M_DIS0] = mean_range(r->disagreement, 0, k);
    s->v[M_DIS1] = mean_range(r->disagreement, n - k, n);
}

// The seed-mean curve of column y over the runs of group g, its slope over the last half.
static void group_curve_slope(Run *const *runs, int n, const int *group, int g, int incorrect,
                              double *slope, double *half, int *steps) {
    int max_n = 0;
    for (int i = 0; i < n; i++)
        if (group[i] == g && (max_n == 0 || runs[i]->n_steps < max_n)) max_n = (int)runs[i]->n_steps;
    double *x = xmalloc(((size_t)max_n + 1) * sizeof(double)), *y = xmalloc(((size_t)max_n + 1) * sizeof(double));
    double v[256];
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
    *steps = max_n;
    free(x);
    free(y);
}

static void cell(FILE *f, int md, const char *text, int width) {
    if (md) fprintf(f, " %s |", text);
    else fprintf(f, " %*s", width, text);
}

// Ends a table's header row; in markdown also writes the rule under its n columns.
static void end_header(FILE *f, int md, int n) {
    fprintf(f, "\n");
    if (!md) return;
    fprintf(f, "|");
    for (int c = 0; c < n; c++) fprintf(f, "---|");
    fprintf(f, "\n");
}

static const char *basename_of(const char *p) {
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

// ---- what followed a visible disagreement (/responses): whether going on paid in reward
enum { F_SHARE, F_CORRECT, F_GAVE, F_LOOP, F_LEN, N_FAIL };
static const struct {
    const char *head, *fmt;
} FMET[N_FAIL] = {{"disagr", "%.3f"}, {"correct", "%.3f"}, {"gave up", "%.3f"},
                  {"looped", "%.3f"}, {"fail len", "%.1f"}};

static double fail_metric(const FailingStates *s, int m) {
    switch (m) {
    case F_SHARE: return s->share;
    case F_CORRECT: return s->correct;
    case F_GAVE: return s->gave_up;
    case F_LOOP: return s->looped;
    default: return s->fail_len;
    }
}

static void fail_cell(FILE *f, int md, int m, double first, double last, double h0, double h1) {
    char a[48], b[48], buf[128];
    snprintf(a, sizeof a, FMET[m].fmt, first);
    snprintf(b, sizeof b, FMET[m].fmt, last);
    if (isfinite(h0) && isfinite(h1)) {
        int d = m == F_LEN ? 1 : 3;
        snprintf(buf, sizeof buf, "%s ±%.*f -> %s ±%.*f", a, d, h0, b, d, h1);
    } else {
        snprintf(buf, sizeof buf, "%s -> %s", a, b);
    }
    cell(f, md, buf, m == F_LEN ? 30 : 28);
}

static void failing_states_print(FILE *f, Run *const *runs, int n, const int *group,
                                 const char *const *names, int ng, int md) {
    FailingStates *fs = xcalloc((size_t)n * 2, sizeof *fs);
    int *ok = xcalloc((size_t)n, sizeof *ok);
    fprintf(f, "\n%sAfter a visible self-check disagreement (/responses; first -> last tenth of the "
            "steps): share of responses with one; among them the shares whose answer was right, that "
            "gave up and that looped; mean length of those whose answer was wrong. Going on pays in "
            "reward where `correct` rises, unless world.reward_rule is strict (then almost none of "
            "them earns reward).\n\n", md ? "### " : "");
    if (md) fprintf(f, "| run | objective |");
    else fprintf(f, "%-26s %-9s", "run", "objective");
    for (int m = 0; m < N_FAIL; m++) cell(f, md, FMET[m].head, m == F_LEN ? 30 : 28);
    end_header(f, md, 2 + N_FAIL);
    for (int i = 0; i < n; i++) {
        char err[1024];
        ok[i] = run_failing_states(runs[i], &fs[2 * i], err, sizeof err) == 0;
        if (md) fprintf(f, "| %s | %s |", basename_of(runs[i]->path), objective_title(runs[i]->objective));
        else fprintf(f, "%-26.26s %-9s", basename_of(runs[i]->path), objective_title(runs[i]->objective));
        if (!ok[i]) {
            fprintf(f, " not available: %s%s\n", err, md ? " |" : "");
            continue;
        }
        for (int m = 0; m < N_FAIL; m++)
            fail_cell(f, md, m, fail_metric(&fs[2 * i], m), fail_metric(&fs[2 * i + 1], m), NAN, NAN);
        fprintf(f, "\n");
    }
    for (int g = 0; g < ng; g++) {
        int cnt = 0;
        for (int i = 0; i < n; i++) cnt += group[i] == g && ok[i];
        if (cnt < 2) continue;  // across seeds only where there are several
        char label[64];
        snprintf(label, sizeof label, "mean of %d runs (95%% CI)", cnt);
        if (md) fprintf(f, "| %s | %s |", label, objective_title(names[g]));
        else fprintf(f, "%-26s %-9s", label, objective_title(names[g]));
        for (int m = 0; m < N_FAIL; m++) {
            double v0[256], v1[256], m0, m1, h0, h1;
            int k = 0;
            for (int i = 0; i < n && k < 256; i++)
                if (group[i] == g && ok[i]) v0[k] = fail_metric(&fs[2 * i], m), v1[k++] = fail_metric(&fs[2 * i + 1], m);
            mean_ci95(v0, k, &m0, &h0);
            mean_ci95(v1, k, &m1, &h1);
            fail_cell(f, md, m, m0, m1, h0, h1);
        }
        fprintf(f, "\n");
    }
    free(fs);
    free(ok);
}

int summary_print(FILE *f, Run *const *runs, int n, int md) {
    int group[256];
    const char *names[MAX_OBJECTIVES];
    if (n > 256) n = 256;
    int ng = group_by_objective(runs, n, group, names, MAX_OBJECTIVES);
    RunStats *st = xcalloc((size_t)n, sizeof *st);
    for (int i = 0; i < n; i++) run_stats(runs[i], &st[i]);
    char buf[128];

    // ---- per run
    fprintf(f, "%sPer run (final = mean over the last tenth of the steps; eval = last evaluation; "
            "slope over the last half, tokens per 100 steps, 95%% CI; 0/1 = first/last tenth)\n\n",
            md ? "### " : "");
    if (md) fprintf(f, "| run | objective | seed | steps |");
    else fprintf(f, "%-26s %-9s %6s %5s", "run", "objective", "seed", "steps");
    for (int m = 0; m < N_METRICS; m++) cell(f, md, MET[m].head, m == M_SLOPE || m == M_SLOPE_I ? 16 : 11);
    end_header(f, md, 4 + N_METRICS);
    for (int i = 0; i < n; i++) {
        char steps[32];
        snprintf(steps, sizeof steps, "%lld%s", (long long)runs[i]->n_steps, run_complete(runs[i]) || runs[i]->steps_planned <= 0 ? "" : "*");
        if (md) fprintf(f, "| %s | %s | %lld | %s |", basename_of(runs[i]->path), objective_title(runs[i]->objective),
                        (long long)runs[i]->seed, steps);
        else fprintf(f, "%-26.26s %-9s %6lld %5s", basename_of(runs[i]->path), objective_title(runs[i]->objective),
                     (long long)runs[i]->seed, steps);
        for (int m = 0; m < N_METRICS; m++) {
            char v[64];
            snprintf(v, sizeof v, MET[m].fmt, st[i].v[m]);
            if (m == M_SLOPE || m == M_SLOPE_I) {
                double h = st[i].slope_half[m == M_SLOPE_I];
                snprintf(buf, sizeof buf, "%s ±%.1f", v, h);
                cell(f, md, buf, 16);
            } else {
                cell(f, md, v, 11);
            }
        }
        fprintf(f, "\n");
    }
    for (int i = 0; i < n; i++)
        if (!run_complete(runs[i]) && runs[i]->steps_planned > 0) {
            fprintf(f, "\n* fewer steps than planned (in progress or stopped early)\n");
            break;
        }

    // ---- per objective across seeds
    fprintf(f, "\n%sPer objective across runs (mean ± 95%% CI half-width; slope: of the seed-mean curve "
            "over its last half, regression CI)\n\n", md ? "### " : "");
    if (md) fprintf(f, "| objective | runs |");
    else fprintf(f, "%-10s %4s", "objective", "runs");
    for (int m = 0; m < N_METRICS; m++) cell(f, md, MET[m].head, 16);
    end_header(f, md, 2 + N_METRICS);
    double gmean[MAX_OBJECTIVES][N_METRICS], gslope[MAX_OBJECTIVES][2][2];
    int gcount[MAX_OBJECTIVES] = {0};
    for (int g = 0; g < ng; g++) {
        double vals[256];
        for (int i = 0; i < n; i++) gcount[g] += group[i] == g;
        if (md) fprintf(f, "| %s | %d |", objective_title(names[g]), gcount[g]);
        else fprintf(f, "%-10s %4d", objective_title(names[g]), gcount[g]);
        for (int c = 0; c < 2; c++) {
            int steps;
            group_curve_slope(runs, n, group, g, c, &gslope[g][c][0], &gslope[g][c][1], &steps);
        }
        for (int m = 0; m < N_METRICS; m++) {
            int k = 0;
            for (int i = 0; i < n; i++)
                if (group[i] == g) vals[k++] = st[i].v[m];
            double mean, half;
            mean_ci95(vals, k, &mean, &half);
            gmean[g][m] = mean;
            char v[64];
            if (m == M_SLOPE || m == M_SLOPE_I) mean = gslope[g][m == M_SLOPE_I][0], half = gslope[g][m == M_SLOPE_I][1];
            snprintf(v, sizeof v, MET[m].fmt, mean);
            if (isfinite(half)) snprintf(buf, sizeof buf, "%s ±%.*f", v, strstr(MET[m].fmt, "3") ? 3 : 1, half);
            else snprintf(buf, sizeof buf, "%s", v);
            cell(f, md, buf, 16);
        }
        fprintf(f, "\n");
    }

    failing_states_print(f, runs, n, group, names, ng, md);

    // ---- the finding (docs/results.md), when GRPO and Dr. GRPO are both present
    int gg = -1, gd = -1;
    for (int g = 0; g < ng; g++) {
        if (strcmp(names[g], "grpo") == 0) gg = g;
        if (strcmp(names[g], "dr_grpo") == 0) gd = g;
    }
    if (gg >= 0 && gd >= 0) {
        fprintf(f, "\n%sThe finding of Liu et al. 2025 (GRPO vs Dr. GRPO; docs/results.md)\n\n", md ? "### " : "");
        // 1: eval length of incorrect responses, GRPO / Dr. GRPO, paired by seed
        double ratios[256];
        int k = 0, unpaired = 0;
        for (int i = 0; i < n; i++) {
            if (group[i] != gg) continue;
            int j = -1;
            for (int t = 0; t < n; t++)
                if (group[t] == gd && runs[t]->seed == runs[i]->seed) j = t;
            if (j < 0) {
                unpaired = 1;
                continue;
            }
            ratios[k++] = st[i].v[M_ELEN_I] / st[j].v[M_ELEN_I];
        }
        double rm, rh;
        if (k == 0) rm = gmean[gg][M_ELEN_I] / gmean[gd][M_ELEN_I], rh = NAN;
        else mean_ci95(ratios, k, &rm, &rh);
        int pass1 = rm >= 1.3 && isfinite(rh) && rm - rh > 1;
        char ci[64];
        if (isfinite(rh)) snprintf(ci, sizeof ci, "95%% CI %.2f..%.2f", rm - rh, rm + rh);
        else snprintf(ci, sizeof ci, "no CI from %s", k ? "one seed pair" : "unpaired runs");
        fprintf(f, "%s[%s] eval length of incorrect responses, GRPO / Dr. GRPO: %.2f (%s, "
                "%d seed pair%s%s); wanted >= 1.3 with the CI above 1\n",
                md ? "- " : "", pass1 ? "PASS" : "FAIL", rm, ci, k, k == 1 ? "" : "s",
                unpaired ? "; unpaired runs left out" : "");
        // 2: slopes of the incorrect training length over the last half
        double gs = gslope[gg][1][0], gh = gslope[gg][1][1], ds = gslope[gd][1][0], dh = gslope[gd][1][1];
        int pass2 = isfinite(gh) && gs - gh > 0 && isfinite(dh) && ds - dh <= 0;
        fprintf(f, "%s[%s] training length of incorrect responses over the last half, tokens per 100 steps: "
                "GRPO %+.1f (CI %+.1f..%+.1f), Dr. GRPO %+.1f (CI %+.1f..%+.1f); wanted GRPO's CI above 0, "
                "Dr. GRPO's containing 0 or below\n",
                md ? "- " : "", pass2 ? "PASS" : "FAIL", gs, gs - gh, gs + gh, ds, ds - dh, ds + dh);
        // GRPO's side failed: say so when its failures are near the budget, where they cannot
        // grow any more (seen at 64 prompts per step on the H200: docs/results.md)
        int budget = group_budget(runs, n, group, gg);
        if (!(isfinite(gh) && gs - gh > 0) && budget > 0 && gmean[gg][M_TLEN_I] >= 0.8 * budget)
            fprintf(f, "%snote: GRPO's incorrect training responses average %.1f tokens over the last tenth "
                    "against a budget of %d (truncation rate %.3f): with so little room left to grow, a flat "
                    "slope is saturation rather than the bias gone (a larger world.max_new_tokens, a smaller "
                    "lr or fewer steps keep them growing)\n",
                    md ? "  - " : "  ", gmean[gg][M_TLEN_I], budget, gmean[gg][M_TRUNC1]);
        // 3: failing states: truncation and loops rise under GRPO, and more than under Dr. GRPO
        // (a share that falls under both, under GRPO by less, has not risen); disagreements persist
        double tg = gmean[gg][M_TRUNC1] - gmean[gg][M_TRUNC0], td = gmean[gd][M_TRUNC1] - gmean[gd][M_TRUNC0];
        double lg = gmean[gg][M_LOOP1] - gmean[gg][M_LOOP0], ld = gmean[gd][M_LOOP1] - gmean[gd][M_LOOP0];
        int pass3a = tg > 0 && lg > 0 && tg > td && lg > ld;
        fprintf(f, "%s[%s] change from the first to the last tenth of training: truncation rate GRPO %+.3f vs "
                "Dr. GRPO %+.3f, loop share GRPO %+.3f vs Dr. GRPO %+.3f; wanted both to rise under GRPO, and "
                "by more than under Dr. GRPO\n",
                md ? "- " : "", pass3a ? "PASS" : "FAIL", tg, td, lg, ld);
        int pass3b = gmean[gg][M_DIS1] >= 0.25 * gmean[gg][M_DIS0] && gmean[gd][M_DIS1] >= 0.25 * gmean[gd][M_DIS0] &&
                     gmean[gg][M_DIS1] > 0 && gmean[gd][M_DIS1] > 0;
        fprintf(f, "%s[%s] share of responses with a visible self-check disagreement, first -> last tenth: "
                "GRPO %.3f -> %.3f, Dr. GRPO %.3f -> %.3f; wanted no collapse (last >= 1/4 of first, > 0)\n",
                md ? "- " : "", pass3b ? "PASS" : "FAIL", gmean[gg][M_DIS0], gmean[gg][M_DIS1], gmean[gd][M_DIS0],
                gmean[gd][M_DIS1]);
        // 4: reward
        int pass4 = gmean[gd][M_REWARD] >= gmean[gg][M_REWARD] - 0.03;
        fprintf(f, "%s[%s] final training reward: Dr. GRPO %.3f vs GRPO %.3f; wanted Dr. GRPO >= GRPO - 0.03\n",
                md ? "- " : "", pass4 ? "PASS" : "FAIL", gmean[gd][M_REWARD], gmean[gg][M_REWARD]);
    }
    summary_print_compare(f, runs, n, md);
    free(st);
    return 0;
}
