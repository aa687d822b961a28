// draws.c: the finding's checks over draws of runs (contract in draws.h).
#include "draws.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "analysis.h"

enum { MAX_RUNS = 256 };

// The next k-combination of 0..n-1 in lexicographic order (idx ascending); 0 after the last.
static int next_combination(int *idx, int k, int n) {
    int i = k - 1;
    while (i >= 0 && idx[i] == n - k + i) i--;
    if (i < 0) return 0;
    idx[i]++;
    for (int j = i + 1; j < k; j++) idx[j] = idx[j - 1] + 1;
    return 1;
}

static double choose(int n, int k) {
    double c = 1;
    for (int i = 0; i < k; i++) c = c * (n - i) / (i + 1);
    return c;
}

static void tally(DrawTally *t, const FindingVerdict *v) {
    t->draws++;
    int first6 = 1;
    for (int c = 0; c < N_CHECKS; c++) {
        t->pass[c] += v->check[c].pass;
        if (c < CHECK_EVAL_TRUNC) first6 &= v->check[c].pass;
    }
    t->pass_1to6 += first6;
    t->pass_all += v->passed == N_CHECKS;
    const Check *r = &v->check[CHECK_EVAL_RATIO], *s = &v->check[CHECK_LENGTH_SLOPE];
    t->pass_ratio_mean += r->f[1].v >= VERDICT_RATIO_MIN && isfinite(r->f[1].lo) && r->f[1].lo > 1;
    t->pass_slope_zero += isfinite(s->f[0].lo) && s->f[0].lo > 0 && isfinite(s->f[1].lo) && s->f[1].lo <= 0;
}

// The group of runs whose label or display name is name (-1 if none); group[] filled.
static int group_named(Run *const *runs, int n, int *group, const char *name) {
    const char *names[MAX_OBJECTIVES];
    int ng = group_by_objective(runs, n, group, names, MAX_OBJECTIVES);
    return verdict_find_group(runs, n, group, names, ng, name, strlen(name));
}

long draws_subsets(Run *const *runs, int n, const char *test, const char *ref, int k, DrawTally *t, char *err,
                   size_t errlen) {
    memset(t, 0, sizeof *t);
    if (n > MAX_RUNS) n = MAX_RUNS;
    int group[MAX_RUNS], pa[MAX_RUNS], pb[MAX_RUNS], m = 0;
    int gt = group_named(runs, n, group, test), gr = group_named(runs, n, group, ref);
    if (gt < 0 || gr < 0) return set_err(err, errlen, "draws: no group '%s' among the runs", gt < 0 ? test : ref);
    for (int i = 0; i < n; i++) {
        if (group[i] != gt) continue;
        for (int j = 0; j < n; j++)
            if (group[j] == gr && runs[j]->seed == runs[i]->seed) {
                pa[m] = i, pb[m] = j, m++;
                break;
            }
    }
    if (k < 2 || m < k)
        return set_err(err, errlen, "draws of %d seed pairs: %s against %s has %d seed pair%s (at least 2 per draw)", k,
                       test, ref, m, m == 1 ? "" : "s");
    if (choose(m, k) > DRAWS_MAX)
        return set_err(err, errlen, "draws of %d of %d seed pairs: %.0f draws, more than %d", k, m, choose(m, k), DRAWS_MAX);
    t->k = k, t->units = m;
    int idx[MAX_RUNS];
    for (int i = 0; i < k; i++) idx[i] = i;
    Run *draw[2 * MAX_RUNS];
    do {
        for (int i = 0; i < k; i++) draw[i] = runs[pa[idx[i]]], draw[k + i] = runs[pb[idx[i]]];
        FindingVerdict v;
        if (verdict_compare(draw, 2 * k, runs[pa[0]]->objective, runs[pb[0]]->objective, &v) == 0) continue;
        if (t->draws == 0) memcpy(t->title, v.title, sizeof t->title);
        tally(t, &v);
    } while (next_combination(idx, k, m));
    return t->draws;
}

long draws_placebo(Run *const *runs, int n, const char *name, int k, DrawTally *t, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    if (n > MAX_RUNS) n = MAX_RUNS;
    int group[MAX_RUNS], mine[MAX_RUNS], m = 0;
    int g = group_named(runs, n, group, name);
    if (g < 0) return set_err(err, errlen, "--placebo '%s': no group of that label or name among the runs", name);
    for (int i = 0; i < n; i++)
        if (group[i] == g) mine[m++] = i;
    if (k < 2 || m < 2 * k)
        return set_err(err, errlen, "--placebo '%s': %d run%s, a placebo draw of %d pairs needs %d", name, m,
                       m == 1 ? "" : "s", k, 2 * k);
    double total = choose(m, k) * choose(m - k, k);
    if (total > DRAWS_MAX)
        return set_err(err, errlen, "--placebo '%s': %.0f draws of %d pairs from %d runs, more than %d", name, total, k,
                       m, DRAWS_MAX);
    t->placebo = 1, t->k = k, t->units = m;
    snprintf(t->title[0], sizeof t->title[0], "%s", group_title(runs[mine[0]]));
    snprintf(t->title[1], sizeof t->title[1], "%s", t->title[0]);
    // shallow copies: the same tables, relabelled into two groups whose i-th runs share a seed
    Run *copy = xcalloc(2 * (size_t)k, sizeof *copy);
    Run *draw[2 * MAX_RUNS];
    int a[MAX_RUNS], b[MAX_RUNS], rest[MAX_RUNS];
    for (int i = 0; i < k; i++) a[i] = i;
    do {
        int r = 0;
        for (int i = 0, j = 0; i < m; i++) {
            if (j < k && a[j] == i) j++;
            else rest[r++] = i;
        }
        for (int i = 0; i < k; i++) b[i] = i;
        do {
            for (int i = 0; i < k; i++)
                for (int s = 0; s < 2; s++) {
                    Run *c = &copy[s * k + i];
                    *c = *runs[mine[s ? rest[b[i]] : a[i]]];
                    snprintf(c->objective, sizeof c->objective, "placebo_%c", s ? 'b' : 'a');
                    c->seed = i;
                    draw[s * k + i] = c;
                }
            FindingVerdict v;
            if (verdict_compare(draw, 2 * k, "placebo_a", "placebo_b", &v)) tally(t, &v);
        } while (next_combination(b, k, m - k));
    } while (next_combination(a, k, m));
    free(copy);
    return t->draws;
}

void draws_print(FILE *f, const DrawTally *t, int md) {
    static const char *const NAME[N_CHECKS] = {"1 eval ratio", "2 slope", "3 failing states", "4 disagreements",
                                               "5 final reward", "6 reward rises", "7 failures not capped"};
    if (t->placebo)
        fprintf(f, "\n%sPlacebo: %s against %s (%d runs; every ordered pair of disjoint sets of %d runs, paired in "
                "order): %ld draws\n\n", md ? "### " : "", t->title[0], t->title[1], t->units, t->k, t->draws);
    else
        fprintf(f, "\n%sDraws of %d of the %d seed pairs of %s against %s: %ld draws\n\n", md ? "### " : "", t->k,
                t->units, t->title[0], t->title[1], t->draws);
    const char *word = t->placebo ? "fail" : "pass";
    if (md) fprintf(f, "| check | draws that %s | share |\n|---|---|---|\n", word);
    else fprintf(f, "%-58s %10s %6s\n", "check", word, "share");
    const char *label[N_CHECKS + 4];
    long count[N_CHECKS + 4];
    int rows = 0;
    for (int c = 0; c < N_CHECKS; c++) label[rows] = NAME[c], count[rows++] = t->pass[c];
    label[rows] = "checks 1-6", count[rows++] = t->pass_1to6;
    label[rows] = "all seven", count[rows++] = t->pass_all;
    label[rows] = "1, arithmetic mean of the pair ratios, t CI (before)", count[rows++] = t->pass_ratio_mean;
    label[rows] = "2, Dr. GRPO's slope CI containing 0 or below (before)", count[rows++] = t->pass_slope_zero;
    for (int r = 0; r < rows; r++) {
        long c = t->placebo ? t->draws - count[r] : count[r];
        double share = t->draws ? (double)c / (double)t->draws : NAN;
        if (md) fprintf(f, "| %s | %ld | %.3f |\n", label[r], c, share);
        else fprintf(f, "%-58s %10ld %6.3f\n", label[r], c, share);
    }
    if (!t->placebo) return;
    fprintf(f, "\n");
    for (int c = CHECK_EVAL_RATIO; c <= CHECK_LENGTH_SLOPE; c++) {
        double share = t->draws ? (double)(t->draws - t->pass[c]) / (double)t->draws : NAN;
        fprintf(f, "%s[%s] calibration of check %s: fails in %.3f of the placebo draws; wanted at least %g\n",
                md ? "- " : "", share >= DRAWS_PLACEBO_FAIL ? "PASS" : "FAIL", NAME[c], share, DRAWS_PLACEBO_FAIL);
    }
}
