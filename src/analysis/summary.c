// summary.c: `grpolab summary`: per run and per objective across seeds, the figures of the
// paper's Fig. 5 at the end of training, the slope of the training length over the last half
// with its 95% CI, and, when GRPO and Dr. GRPO runs are both given, the checks of the finding
// (computed by finding_verdict, verdict.h; listed in docs/cli.md).
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
#include "verdict.h"

#define PASS(c) ((c)->pass ? "PASS" : "FAIL")

static const struct {
    const char *head, *fmt;
} MET[N_RUN_FIGURES] = {
    {"reward", "%.3f"},        {"train len C", "%.1f"}, {"train len I", "%.1f"}, {"eval len C", "%.1f"},
    {"eval len I", "%.1f"},    {"score", "%.3f"},       {"slope len", "%+.1f"},  {"slope len I", "%+.1f"},
    {"bias cos", "%.3f"},      {"trunc 0", "%.3f"},     {"trunc 1", "%.3f"},     {"loop 0", "%.3f"},
    {"loop 1", "%.3f"},        {"disagr 0", "%.3f"},    {"disagr 1", "%.3f"},    {"etrunc I 0", "%.3f"},
    {"etrunc I 1", "%.3f"},
};

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

// The name of run r's group (group_title), its '|' (1/|o| only) escaped in markdown so that it
// stays in its table cell; in buf.
static const char *group_cell(const Run *r, int md, char *buf, size_t len) {
    size_t k = 0;
    for (const char *c = group_title(r); *c && k + 3 < len; c++) {
        if (md && *c == '|') buf[k++] = '\\';
        buf[k++] = *c;
    }
    buf[k] = 0;
    return buf;
}

// The group name (group_cell) of the runs of group g.
static const char *group_name(Run *const *runs, int n, const int *group, int g, int md, char *buf, size_t len) {
    for (int i = 0; i < n; i++)
        if (group[i] == g) return group_cell(runs[i], md, buf, len);
    return "";
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
    else fprintf(f, "%-26s %-10s", "run", "objective");
    for (int m = 0; m < N_FAIL; m++) cell(f, md, FMET[m].head, m == F_LEN ? 30 : 28);
    end_header(f, md, 2 + N_FAIL);
    for (int i = 0; i < n; i++) {
        char err[1024];
        ok[i] = run_failing_states(runs[i], &fs[2 * i], err, sizeof err) == 0;
        char gn[64];
        if (md) fprintf(f, "| %s | %s |", basename_of(runs[i]->path), group_cell(runs[i], md, gn, sizeof gn));
        else fprintf(f, "%-26.26s %-10s", basename_of(runs[i]->path), group_cell(runs[i], md, gn, sizeof gn));
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
        char gn[64];
        if (md) fprintf(f, "| %s | %s |", label, group_name(runs, n, group, g, md, gn, sizeof gn));
        else fprintf(f, "%-26s %-10s", label, group_name(runs, n, group, g, md, gn, sizeof gn));
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

// The checks of the finding (verdict.h), one line each, for v->title[0] against v->title[1].
static void verdict_print(FILE *f, const FindingVerdict *v, int md) {
    const char *item = md ? "- " : "", *G = v->title[0], *D = v->title[1];
    if (strcmp(G, "GRPO") == 0 && strcmp(D, "Dr. GRPO") == 0)
        fprintf(f, "\n%sThe finding of Liu et al. 2025 (GRPO vs Dr. GRPO; docs/results.md)\n\n", md ? "### " : "");
    else
        fprintf(f, "\n%sThe finding's checks for %s in GRPO's place against %s in Dr. GRPO's (docs/cli.md)\n\n",
                md ? "### " : "", G, D);
    const Check *c = &v->check[CHECK_EVAL_RATIO];
    char ci[64];
    if (isfinite(c->f[0].lo)) snprintf(ci, sizeof ci, "95%% CI %.2f..%.2f", c->f[0].lo, c->f[0].hi);
    else snprintf(ci, sizeof ci, "no CI from %s", v->pairs ? "one seed pair" : "unpaired runs");
    fprintf(f, "%s[%s] eval length of incorrect responses, %s / %s: %.2f (%s%s, %d seed pair%s%s); "
            "wanted >= %g with the CI above 1\n", item, PASS(c), G, D, c->f[0].v, v->pairs ? "geometric mean, " : "", ci,
            v->pairs, v->pairs == 1 ? "" : "s", v->unpaired ? "; unpaired runs left out" : "", c->threshold);
    if (isfinite(c->f[1].lo))
        fprintf(f, "%sinformation: the arithmetic mean of the pair ratios %.2f (t CI %.2f..%.2f)\n", md ? "  - " : "  ",
                c->f[1].v, c->f[1].lo, c->f[1].hi);
    if (v->sampled_pairs > 0) {
        const Estimate *e = &v->sampled_ratio;
        char k[48] = "";
        if (v->sampled_k > 0) snprintf(k, sizeof k, "%d samples per question, ", v->sampled_k);
        if (isfinite(e->lo)) snprintf(ci, sizeof ci, "95%% CI %.2f..%.2f", e->lo, e->hi);
        else snprintf(ci, sizeof ci, "no CI");
        fprintf(f, "%sinformation: the same ratio of the final policies sampled at temperature 1 (grpolab eval-run; "
                "%s%d seed pair%s): %.2f (%s)\n", md ? "  - " : "  ", k, v->sampled_pairs,
                v->sampled_pairs == 1 ? "" : "s", e->v, ci);
    } else {
        fprintf(f, "%sinformation: no sampled eval of the final policies (grpolab eval-run RUN.h5 writes one)\n",
                md ? "  - " : "  ");
    }
    c = &v->check[CHECK_LENGTH_SLOPE];
    fprintf(f, "%s[%s] training length of incorrect responses over the last half, tokens per 100 steps: "
            "%s %+.1f (CI %+.1f..%+.1f), %s %+.1f (CI %+.1f..%+.1f); wanted %s's CI above 0, "
            "%s's below %g of %s's slope\n", item, PASS(c), G, c->f[0].v, c->f[0].lo, c->f[0].hi, D, c->f[1].v,
            c->f[1].lo, c->f[1].hi, G, D, c->threshold, G);
    if (v->saturated)
        fprintf(f, "%snote: %s's incorrect training responses average %.1f tokens over the last tenth "
                "against a budget of %d (truncation rate %.3f): with so little room left to grow, a flat "
                "slope is saturation rather than the bias gone (a larger world.max_new_tokens, a smaller "
                "lr or fewer steps keep them growing)\n", md ? "  - " : "  ", G, v->grpo_len_i, v->budget, v->grpo_trunc);
    c = &v->check[CHECK_FAILING_STATES];
    fprintf(f, "%s[%s] change from the first to the last tenth of training: truncation rate %s %+.3f vs "
            "%s %+.3f, loop share %s %+.3f vs %s %+.3f; wanted both to rise under %s, and "
            "by more than under %s\n", item, PASS(c), G, c->f[0].v, D, c->f[1].v, G, c->f[2].v, D, c->f[3].v, G, D);
    c = &v->check[CHECK_DISAGREEMENT];
    fprintf(f, "%s[%s] share of responses with a visible self-check disagreement, first -> last tenth: "
            "%s %.3f -> %.3f, %s %.3f -> %.3f; wanted no collapse (last >= 1/%.0f of first, > 0)\n",
            item, PASS(c), G, c->f[0].v, c->f[1].v, D, c->f[2].v, c->f[3].v, 1 / c->threshold);
    c = &v->check[CHECK_REWARD];
    if (isfinite(c->f[0].lo))
        snprintf(ci, sizeof ci, "%.0f%% CI %+.3f..%+.3f", 100 * VERDICT_REWARD_LEVEL, c->f[0].lo, c->f[0].hi);
    else snprintf(ci, sizeof ci, "no CI");
    fprintf(f, "%s[%s] final training reward, %s minus %s over %d seed pair%s: %+.3f (%s; %s %.3f, %s %.3f); "
            "wanted the CI within +-%g (equivalence: two one-sided tests at 5%%)\n", item, PASS(c), D, G,
            v->reward_pairs, v->reward_pairs == 1 ? "" : "s", c->f[0].v, ci, D, c->f[1].v, G, c->f[2].v, c->threshold);
    c = &v->check[CHECK_REWARD_RISES];
    char side[2][96];
    for (int k = 0; k < 2; k++) {
        const Estimate *e = &c->f[k];
        if (!isfinite(e->lo)) snprintf(side[k], sizeof side[k], "%+.3f (no CI)", e->v);
        else if (v->runs[k] > 1) snprintf(side[k], sizeof side[k], "%+.3f (CI %+.3f..%+.3f over %d runs)", e->v, e->lo, e->hi, v->runs[k]);
        else snprintf(side[k], sizeof side[k], "%+.3f (CI %+.3f..%+.3f over the steps of 1 run)", e->v, e->lo, e->hi);
    }
    fprintf(f, "%s[%s] training reward, last minus first tenth of the steps: %s %s, %s %s; wanted >= %+g "
            "with the CI above 0 under both\n", item, PASS(c), G, side[0], D, side[1], c->threshold);
    c = &v->check[CHECK_EVAL_TRUNC];
    char share[256];
    if (isfinite(c->f[0].v))
        snprintf(share, sizeof share, "%.3f (pooled over %d run%s; from %s)", c->f[0].v, v->trunc_runs,
                 v->trunc_runs == 1 ? "" : "s", v->trunc_source ? v->trunc_source : "?");
    else snprintf(share, sizeof share, "not available (%s)", c->reason);
    fprintf(f, "%s[%s] share of %s's incorrect responses of the final greedy eval cut by the budget: %s; wanted "
            "below %g\n", item, PASS(c), G, share, c->threshold);
    if (isfinite(c->f[1].lo)) snprintf(ci, sizeof ci, " (CI %.1f..%.1f)", c->f[1].lo, c->f[1].hi);
    else ci[0] = 0;
    char budget[64] = "the budget not known";
    if (c->f[2].v > 0) snprintf(budget, sizeof budget, "%.2f of a budget of %.0f", c->f[1].v / c->f[2].v, c->f[2].v);
    fprintf(f, "%sinformation: their mean length %.1f tokens%s, %s\n", md ? "  - " : "  ", c->f[1].v, ci, budget);
}

// Each run's share of incorrect responses cut by the budget at its final greedy eval (check 7).
static void trunc_per_run(FILE *f, Run *const *runs, int n, int md) {
    fprintf(f, "\n%sIncorrect responses of the final greedy eval cut by the budget, per run (check 7; first eval -> "
            "last)\n\n", md ? "### " : "");
    for (int i = 0; i < n; i++) {
        double b0, c0, b1, c1;
        const char *src;
        double s0 = run_eval_trunc_incorrect(runs[i], 0, &b0, &c0, NULL);
        double s1 = run_eval_trunc_incorrect(runs[i], -1, &b1, &c1, &src);
        char first[64] = "-", last[96] = "not available";
        if (isfinite(s0)) snprintf(first, sizeof first, "%.3f (%.0f of %.0f)", s0, c0, b0);
        if (isfinite(s1)) snprintf(last, sizeof last, "%.3f (%.0f of %.0f; %s)", s1, c1, b1, src);
        else if (src) snprintf(last, sizeof last, "no incorrect response (%s)", src);
        fprintf(f, "%s%s (%s): %s -> %s\n", md ? "- " : "  ", basename_of(runs[i]->path), group_title(runs[i]), first, last);
    }
}

// The key number of each check, one row per comparison (several comparisons only).
static void verdict_table(FILE *f, const FindingVerdict *v, int nv, int md) {
    static const char *const head[N_CHECKS] = {"1 eval ratio", "2 slope I", "3 trunc rise", "4 disagr 1",
                                               "5 reward diff", "6 reward rise", "7 cut share"};
    fprintf(f, "\n%sThe checks per comparison (key number and PASS/FAIL; definitions in docs/cli.md)\n\n",
            md ? "### " : "");
    if (md) fprintf(f, "| group | against |");
    else fprintf(f, "%-12s %-12s", "group", "against");
    for (int c = 0; c < N_CHECKS; c++) cell(f, md, head[c], 15);
    cell(f, md, "passed", 6);
    end_header(f, md, N_CHECKS + 3);
    for (int k = 0; k < nv; k++) {
        if (md) {  // a name's '|' (1/|o| only) escaped, so that it stays in its cell
            fprintf(f, "|");
            for (int t = 0; t < 2; t++) {
                fprintf(f, " ");
                for (const char *c = v[k].title[t]; *c; c++) fprintf(f, *c == '|' ? "\\|" : "%c", *c);
                fprintf(f, " |");
            }
        } else {
            fprintf(f, "%-12.12s %-12.12s", v[k].title[0], v[k].title[1]);
        }
        for (int c = 0; c < N_CHECKS; c++) {
            const Check *ch = &v[k].check[c];
            double key = c == CHECK_DISAGREEMENT ? ch->f[1].v : ch->f[0].v;
            char buf[48];
            snprintf(buf, sizeof buf, c == CHECK_EVAL_RATIO ? "%.2f %s" : c == CHECK_LENGTH_SLOPE ? "%+.1f %s"
                     : c == CHECK_FAILING_STATES || c == CHECK_REWARD || c == CHECK_REWARD_RISES ? "%+.3f %s" : "%.3f %s",
                     key, PASS(ch));
            cell(f, md, buf, 15);
        }
        char p[16];
        snprintf(p, sizeof p, "%d/%d", v[k].passed, v[k].checks);
        cell(f, md, p, 6);
        fprintf(f, "\n");
    }
}

int summary_print(FILE *f, Run *const *runs, int n, int md) {
    char err[512];
    return summary_print_against(f, runs, n, md, NULL, NULL, err, sizeof err);
}

int summary_print_against(FILE *f, Run *const *runs, int n, int md, const char *against, const char *only,
                          char *err, size_t errlen) {
    const char *test[MAX_OBJECTIVES], *ref[MAX_OBJECTIVES];
    int nv = verdict_plan(runs, n < 256 ? n : 256, against, only, test, ref, MAX_OBJECTIVES, err, errlen);
    if (nv < 0) return -1;
    int group[256];
    const char *names[MAX_OBJECTIVES];
    if (n > 256) n = 256;
    int ng = group_by_objective(runs, n, group, names, MAX_OBJECTIVES);
    RunFigures *st = xcalloc((size_t)n, sizeof *st);
    for (int i = 0; i < n; i++) run_figures(runs[i], &st[i]);
    char buf[128];

    // ---- per run
    fprintf(f, "%sPer run (final = mean over the last tenth of the steps; eval = last evaluation; "
            "slope over the last half, tokens per 100 steps, 95%% CI; 0/1 = first/last tenth)\n\n",
            md ? "### " : "");
    if (md) fprintf(f, "| run | objective | seed | steps |");
    else fprintf(f, "%-26s %-10s %6s %5s", "run", "objective", "seed", "steps");
    for (int m = 0; m < N_RUN_FIGURES; m++) cell(f, md, MET[m].head, m == RF_SLOPE || m == RF_SLOPE_I ? 16 : 11);
    end_header(f, md, 4 + N_RUN_FIGURES);
    for (int i = 0; i < n; i++) {
        char steps[32];
        snprintf(steps, sizeof steps, "%lld%s", (long long)runs[i]->n_steps, run_complete(runs[i]) || runs[i]->steps_planned <= 0 ? "" : "*");
        char gn[64];
        if (md) fprintf(f, "| %s | %s | %lld | %s |", basename_of(runs[i]->path), group_cell(runs[i], md, gn, sizeof gn),
                        (long long)runs[i]->seed, steps);
        else fprintf(f, "%-26.26s %-10s %6lld %5s", basename_of(runs[i]->path), group_cell(runs[i], md, gn, sizeof gn),
                     (long long)runs[i]->seed, steps);
        for (int m = 0; m < N_RUN_FIGURES; m++) {
            char v[64];
            snprintf(v, sizeof v, MET[m].fmt, st[i].v[m]);
            if (m == RF_SLOPE || m == RF_SLOPE_I) {
                double h = st[i].slope_half[m == RF_SLOPE_I];
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
    for (int m = 0; m < N_RUN_FIGURES; m++) cell(f, md, MET[m].head, 16);
    end_header(f, md, 2 + N_RUN_FIGURES);
    int gcount[MAX_OBJECTIVES] = {0};
    for (int g = 0; g < ng; g++) {
        double vals[256], slope[2][2];
        for (int i = 0; i < n; i++) gcount[g] += group[i] == g;
        char gn[64];
        if (md) fprintf(f, "| %s | %d |", group_name(runs, n, group, g, md, gn, sizeof gn), gcount[g]);
        else fprintf(f, "%-10s %4d", group_name(runs, n, group, g, md, gn, sizeof gn), gcount[g]);
        for (int c = 0; c < 2; c++) group_length_slope(runs, n, group, g, c, &slope[c][0], &slope[c][1]);
        for (int m = 0; m < N_RUN_FIGURES; m++) {
            int k = 0;
            for (int i = 0; i < n; i++)
                if (group[i] == g) vals[k++] = st[i].v[m];
            double mean, half;
            mean_ci95(vals, k, &mean, &half);
            char v[64];
            if (m == RF_SLOPE || m == RF_SLOPE_I) mean = slope[m == RF_SLOPE_I][0], half = slope[m == RF_SLOPE_I][1];
            snprintf(v, sizeof v, MET[m].fmt, mean);
            if (isfinite(half)) snprintf(buf, sizeof buf, "%s ±%.*f", v, strstr(MET[m].fmt, "3") ? 3 : 1, half);
            else snprintf(buf, sizeof buf, "%s", v);
            cell(f, md, buf, 16);
        }
        fprintf(f, "\n");
    }

    failing_states_print(f, runs, n, group, names, ng, md);

    free(st);
    FindingVerdict *v = xcalloc((size_t)nv + 1, sizeof *v);  // verdict_plan's labels point into runs
    int shown = 0;
    for (int k = 0; k < nv; k++)
        if (verdict_compare(runs, n, test[k], ref[k], &v[shown])) verdict_print(f, &v[shown++], md);
    if (shown) trunc_per_run(f, runs, n, md);
    if (shown > 1) verdict_table(f, v, shown, md);
    free(v);
    summary_print_compare(f, runs, n, md);
    return 0;
}
