// fig6.c: Fig. 6 of Liu et al. 2025: the cells (template x question set), the checks of the
// four observations, their summary and the figure (contract in fig6.h).
//
// Figure data files (plot_write_eval, one per cell): eval_<template>__<set>.dat with the
// columns of plot_fig5.c's eval files (step, score mean lo hi, ...).
#include "fig6.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "analysis.h"
#include "stats.h"

enum { MAX_RUNS = 256 };

double fig6_start_score(const Run *r) {
    for (int e = 0; e < r->n_evals; e++)
        if (r->eval_step[e] == 0) return r->eval_score[e];
    return NAN;
}

double fig6_plateau_score(const Run *r) {
    if (r->n_evals == 0 || !(r->eval_step[r->n_evals - 1] > 0)) return NAN;
    double from = FIG6_PLATEAU_FROM * r->eval_step[r->n_evals - 1], sum = 0;
    int k = 0;
    for (int e = 0; e < r->n_evals; e++)
        if (r->eval_step[e] >= from && isfinite(r->eval_score[e])) sum += r->eval_score[e], k++;
    return k ? sum / k : NAN;
}

int fig6_design(Run *const *runs, int n) {
    int more = 0;
    for (int i = 1; i < n; i++) {
        if (strcmp(runs[i]->objective, runs[0]->objective) != 0) return 0;
        more |= strcmp(runs[i]->template_name, runs[0]->template_name) != 0 ||
                strcmp(runs[i]->question_set, runs[0]->question_set) != 0;
    }
    return more;
}

// ---- cells

static int same_cell(const Run *r, const char *t, const char *q) {
    return strcmp(r->template_name, t) == 0 && strcmp(r->question_set, q) == 0;
}

static Estimate mean_of(const double *x, int k) {
    double m, h;
    mean_ci95(x, k, &m, &h);
    return (Estimate){m, m - h, m + h};
}

static void make_cells(Run *const *runs, int n, Fig6Verdict *v) {
    for (int i = 0; i < n; i++) {
        int c = 0;
        while (c < v->n_cells && !same_cell(runs[i], v->cell[c].template_name, v->cell[c].question_set)) c++;
        if (c == v->n_cells) {
            if (c == FIG6_MAX_CELLS) continue;
            v->cell[v->n_cells++] = (Fig6Cell){.template_name = runs[i]->template_name,
                                               .question_set = runs[i]->question_set};
        }
    }
    double s[MAX_RUNS], p[MAX_RUNS], l[MAX_RUNS], w[MAX_RUNS];
    for (int c = 0; c < v->n_cells; c++) {
        Fig6Cell *cl = &v->cell[c];
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (!same_cell(runs[i], cl->template_name, cl->question_set)) continue;
            RunFigures f;
            run_figures(runs[i], &f);
            s[k] = fig6_start_score(runs[i]), p[k] = fig6_plateau_score(runs[i]);
            l[k] = f.v[RF_SCORE], w[k] = f.v[RF_REWARD];
            k++;
        }
        cl->runs = k;
        cl->start = mean_of(s, k), cl->plateau = mean_of(p, k), cl->last = mean_of(l, k), cl->reward = mean_of(w, k);
    }
}

// ---- the checks

GL_PRINTF(2, 3) static void say(Check *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
}

// The first run of template t, question set q and seed s; NULL if none.
static const Run *find(Run *const *runs, int n, const char *t, const char *q, int64_t s) {
    for (int i = 0; i < n; i++)
        if (same_cell(runs[i], t, q) && runs[i]->seed == s) return runs[i];
    return NULL;
}

// Plateau of (ta, qa) minus plateau of (tb, qb), paired by seed over the seeds both have:
// the mean with its 95% CI (NaN CI with one seed); *k the seeds.
static Estimate paired_plateau(Run *const *runs, int n, const char *ta, const char *qa, const char *tb,
                               const char *qb, int *k) {
    double d[MAX_RUNS];
    *k = 0;
    for (int i = 0; i < n; i++) {
        if (!same_cell(runs[i], ta, qa) || find(runs, n, ta, qa, runs[i]->seed) != runs[i]) continue;
        const Run *b = find(runs, n, tb, qb, runs[i]->seed);
        if (b) d[(*k)++] = fig6_plateau_score(runs[i]) - fig6_plateau_score(b);
    }
    return mean_of(d, *k);
}

// The mean start score of template t over its runs (all sets; they start from one model).
static Estimate template_start(Run *const *runs, int n, const char *t) {
    double s[MAX_RUNS];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(runs[i]->template_name, t) == 0) s[k++] = fig6_start_score(runs[i]);
    return mean_of(s, k);
}

static const char *const TEMPLATES[3] = {FIG6_MISMATCHED, FIG6_MATCHED_A, FIG6_MATCHED_B};

// 1: the template sets the starting score: each matched template starts above r1.
static void check_start(Run *const *runs, int n, Fig6Verdict *v, Check *c) {
    c->name = "template_start";
    c->threshold = FIG6_START_GAP;
    for (int t = 0; t < 3; t++) c->f[t] = template_start(runs, n, TEMPLATES[t]);
    double r1 = c->f[0].v, a = c->f[1].v, b = c->f[2].v;
    c->pass = a - r1 >= FIG6_START_GAP && b - r1 >= FIG6_START_GAP;
    v->seeds[FIG6_START] = 0;
    if (!isfinite(r1) || !isfinite(a) || !isfinite(b)) say(c, "a template has no run with an evaluation at step 0");
    else if (c->pass) say(c, "%s and %s start %+.3f and %+.3f above %s", FIG6_MATCHED_A, FIG6_MATCHED_B, a - r1, b - r1, FIG6_MISMATCHED);
    else say(c, "%s and %s start %+.3f and %+.3f from %s, not both >= %+g", FIG6_MATCHED_A, FIG6_MATCHED_B, a - r1,
             b - r1, FIG6_MISMATCHED, FIG6_START_GAP);
}

// 2: on the full set RL brings the templates to comparable plateaus.
static void check_comparable(Run *const *runs, int n, Fig6Verdict *v, Check *c) {
    double spread[MAX_RUNS];
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!same_cell(runs[i], TEMPLATES[0], FIG6_FULL) || find(runs, n, TEMPLATES[0], FIG6_FULL, runs[i]->seed) != runs[i])
            continue;
        double lo = INFINITY, hi = -INFINITY;
        int all = 1;
        for (int t = 0; t < 3 && all; t++) {
            const Run *r = find(runs, n, TEMPLATES[t], FIG6_FULL, runs[i]->seed);
            double p = r ? fig6_plateau_score(r) : NAN;
            all = isfinite(p);
            lo = fmin(lo, p), hi = fmax(hi, p);
        }
        if (all) spread[k++] = hi - lo;
    }
    c->name = "comparable_plateau";
    c->threshold = FIG6_FINAL_SPREAD;
    c->f[0] = mean_of(spread, k);
    double s0 = INFINITY, s1 = -INFINITY;
    for (int t = 0; t < 3; t++) {
        double s = template_start(runs, n, TEMPLATES[t]).v;
        s0 = fmin(s0, s), s1 = fmax(s1, s);
    }
    c->f[1] = (Estimate){s1 - s0, NAN, NAN};
    v->seeds[FIG6_COMPARABLE] = k;
    c->pass = k > 0 && c->f[0].v <= FIG6_FINAL_SPREAD;
    if (k == 0) say(c, "no seed has runs of all three templates on the set '%s' with evaluations", FIG6_FULL);
    else if (c->pass) say(c, "the plateaus lie within %.3f of each other (at the start %.3f)", c->f[0].v, c->f[1].v);
    else say(c, "the plateaus spread over %.3f, more than %g (at the start %.3f)", c->f[0].v, FIG6_FINAL_SPREAD, c->f[1].v);
}

// 3: under the mismatched template narrow coverage plateaus lower.
static void check_narrow(Run *const *runs, int n, Fig6Verdict *v, Check *c) {
    int k;
    c->name = "narrow_lower";
    c->threshold = FIG6_COVERAGE_GAP;
    c->f[0] = paired_plateau(runs, n, FIG6_MISMATCHED, FIG6_FULL, FIG6_MISMATCHED, FIG6_NARROW, &k);
    v->seeds[FIG6_NARROW_LOWER] = k;
    double d = c->f[0].v;
    int ci = isfinite(c->f[0].lo);
    c->pass = k > 0 && d >= FIG6_COVERAGE_GAP && (!ci || c->f[0].lo > 0);
    if (k == 0) say(c, "no seed has runs of %s on both '%s' and '%s'", FIG6_MISMATCHED, FIG6_FULL, FIG6_NARROW);
    else if (!(d >= FIG6_COVERAGE_GAP)) say(c, "'%s' plateaus %+.3f from '%s', less than %+g", FIG6_FULL, d, FIG6_NARROW, FIG6_COVERAGE_GAP);
    else if (!c->pass) say(c, "'%s' plateaus %+.3f above '%s', but the CI reaches down to %+.3f", FIG6_FULL, d, FIG6_NARROW, c->f[0].lo);
    else say(c, "'%s' plateaus %+.3f above '%s'%s", FIG6_FULL, d, FIG6_NARROW, ci ? ", the CI above 0" : " (one seed: no CI)");
}

// 4: under the matched templates the simpler OOD set does as well as the full set.
static void check_ood(Run *const *runs, int n, Fig6Verdict *v, Check *c) {
    int ka, kb;
    c->name = "ood_as_well";
    c->threshold = FIG6_OOD_MARGIN;
    c->f[0] = paired_plateau(runs, n, FIG6_MATCHED_A, FIG6_OOD, FIG6_MATCHED_A, FIG6_FULL, &ka);
    c->f[1] = paired_plateau(runs, n, FIG6_MATCHED_B, FIG6_OOD, FIG6_MATCHED_B, FIG6_FULL, &kb);
    v->seeds[FIG6_OOD_AS_WELL] = ka < kb ? ka : kb;
    double a = c->f[0].v, b = c->f[1].v;
    c->pass = ka > 0 && kb > 0 && a >= -FIG6_OOD_MARGIN && b >= -FIG6_OOD_MARGIN;
    if (ka == 0 || kb == 0) say(c, "no seed has runs of %s on both '%s' and '%s'", ka ? FIG6_MATCHED_B : FIG6_MATCHED_A, FIG6_OOD, FIG6_FULL);
    else if (c->pass) say(c, "'%s' plateaus %+.3f (%s) and %+.3f (%s) from '%s'", FIG6_OOD, a, FIG6_MATCHED_A, b, FIG6_MATCHED_B, FIG6_FULL);
    else say(c, "'%s' plateaus %+.3f (%s) and %+.3f (%s) from '%s': not both >= %+g", FIG6_OOD, a, FIG6_MATCHED_A, b,
             FIG6_MATCHED_B, FIG6_FULL, -FIG6_OOD_MARGIN);
}

int fig6_verdict(Run *const *runs, int n, Fig6Verdict *v) {
    memset(v, 0, sizeof *v);
    if (n > MAX_RUNS) n = MAX_RUNS;
    make_cells(runs, n, v);
    for (int c = 0; c < FIG6_N_CHECKS; c++)
        for (int k = 0; k < 4; k++) v->check[c].f[k] = (Estimate){NAN, NAN, NAN};
    check_start(runs, n, v, &v->check[FIG6_START]);
    check_comparable(runs, n, v, &v->check[FIG6_COMPARABLE]);
    check_narrow(runs, n, v, &v->check[FIG6_NARROW_LOWER]);
    check_ood(runs, n, v, &v->check[FIG6_OOD_AS_WELL]);
    v->checks = FIG6_N_CHECKS;
    for (int c = 0; c < FIG6_N_CHECKS; c++) v->passed += v->check[c].pass;
    return v->checks;
}

// ---- the summary

static const char *base_name(const char *p) {
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

// "0.123 (CI 0.100..0.146)", or "0.123" without a CI.
static const char *est(char *buf, size_t len, Estimate e, const char *fmt) {
    char v[32], lo[32], hi[32];
    snprintf(v, sizeof v, fmt, e.v);
    if (!isfinite(e.lo) || e.hi - e.lo == 0) return snprintf(buf, len, "%s", v), buf;
    snprintf(lo, sizeof lo, fmt, e.lo);
    snprintf(hi, sizeof hi, fmt, e.hi);
    if (snprintf(buf, len, "%s (CI %s..%s)", v, lo, hi) >= (int)len) snprintf(buf, len, "%s", v);
    return buf;
}

static void row(FILE *f, int md, const char *const *cells, const int *width, int nc) {
    for (int c = 0; c < nc; c++) {
        if (md) fprintf(f, "%s %s", c ? " |" : "|", cells[c]);
        else fprintf(f, "%s%-*s", c ? " " : "", width[c], cells[c]);
    }
    fprintf(f, md ? " |\n" : "\n");
}

static void header(FILE *f, int md, const char *const *cells, const int *width, int nc) {
    row(f, md, cells, width, nc);
    if (!md) return;
    fprintf(f, "|");
    for (int c = 0; c < nc; c++) fprintf(f, "---|");
    fprintf(f, "\n");
}

void fig6_summary_print(FILE *f, Run *const *runs, int n, int md) {
    if (n > MAX_RUNS) n = MAX_RUNS;
    Fig6Verdict *v = xcalloc(1, sizeof *v);
    fig6_verdict(runs, n, v);
    const char *h = md ? "### " : "";
    fprintf(f, "%sFig. 6 of Liu et al. 2025 (Sec. 3.3): %s by template and question set. start = greedy "
            "benchmark score at step 0; plateau = mean of the evaluations from %g of the last evaluation's step "
            "on; last = the last evaluation; reward = training reward over the last tenth of the steps\n\n",
            h, objective_title(runs[0]->objective), FIG6_PLATEAU_FROM);
    static const char *const RH[] = {"run", "template", "question set", "seed", "steps", "start", "plateau", "last", "reward"};
    static const int RW[] = {34, 8, 18, 6, 6, 7, 7, 7, 7};
    header(f, md, RH, RW, 9);
    for (int i = 0; i < n; i++) {
        const Run *r = runs[i];
        RunFigures fg;
        run_figures(r, &fg);
        char seed[32], steps[32], s[4][32];
        snprintf(seed, sizeof seed, "%lld", (long long)r->seed);
        snprintf(steps, sizeof steps, "%lld%s", (long long)r->n_steps, run_complete(r) || r->steps_planned <= 0 ? "" : "*");
        snprintf(s[0], 32, "%.3f", fig6_start_score(r));
        snprintf(s[1], 32, "%.3f", fig6_plateau_score(r));
        snprintf(s[2], 32, "%.3f", fg.v[RF_SCORE]);
        snprintf(s[3], 32, "%.3f", fg.v[RF_REWARD]);
        const char *cells[] = {base_name(r->path), r->template_name, r->question_set, seed, steps, s[0], s[1], s[2], s[3]};
        row(f, md, cells, RW, 9);
    }
    for (int i = 0; i < n; i++)
        if (!run_complete(runs[i]) && runs[i]->steps_planned > 0) {
            fprintf(f, "\n* fewer steps than planned (in progress or stopped early)\n");
            break;
        }

    fprintf(f, "\n%sPer template and question set across seeds (mean, 95%% CI)\n\n", h);
    static const char *const CH[] = {"template", "question set", "runs", "start", "plateau", "last", "reward"};
    static const int CW[] = {8, 18, 4, 24, 24, 24, 24};
    header(f, md, CH, CW, 7);
    for (int c = 0; c < v->n_cells; c++) {
        const Fig6Cell *cl = &v->cell[c];
        char k[16], s[4][64];
        snprintf(k, sizeof k, "%d", cl->runs);
        const char *cells[] = {cl->template_name, cl->question_set, k, est(s[0], 64, cl->start, "%.3f"),
                               est(s[1], 64, cl->plateau, "%.3f"), est(s[2], 64, cl->last, "%.3f"),
                               est(s[3], 64, cl->reward, "%.3f")};
        row(f, md, cells, CW, 7);
    }

    fprintf(f, "\n%sThe observations of Fig. 6 (mismatched template %s, matched %s and %s; docs/results.md)\n\n", h,
            FIG6_MISMATCHED, FIG6_MATCHED_A, FIG6_MATCHED_B);
    const char *item = md ? "- " : "";
#define PF(c) ((c)->pass ? "PASS" : "FAIL")
    char b0[96], b1[96];
    const Check *c = &v->check[FIG6_START];
    fprintf(f, "%s[%s] 1. the template sets the starting score: start %s %.3f, %s %.3f, %s %.3f; wanted %s and %s "
            "each >= %s + %g\n", item, PF(c), FIG6_MISMATCHED, c->f[0].v, FIG6_MATCHED_A, c->f[1].v, FIG6_MATCHED_B,
            c->f[2].v, FIG6_MATCHED_A, FIG6_MATCHED_B, FIG6_MISMATCHED, c->threshold);
    c = &v->check[FIG6_COMPARABLE];
    fprintf(f, "%s[%s] 2. RL brings the templates to a comparable score on the set '%s': plateau spread (max - min over "
            "%s, %s, %s) %s over %d seed%s, at the start %.3f; wanted <= %g\n", item, PF(c), FIG6_FULL, TEMPLATES[0],
            TEMPLATES[1], TEMPLATES[2], est(b0, sizeof b0, c->f[0], "%.3f"), v->seeds[FIG6_COMPARABLE],
            v->seeds[FIG6_COMPARABLE] == 1 ? "" : "s", c->f[1].v, c->threshold);
    c = &v->check[FIG6_NARROW_LOWER];
    fprintf(f, "%s[%s] 3. with the mismatched template (%s) narrow coverage plateaus lower: '%s' minus '%s' %s over %d "
            "seed%s; wanted >= %+g%s\n", item, PF(c), FIG6_MISMATCHED, FIG6_FULL, FIG6_NARROW,
            est(b0, sizeof b0, c->f[0], "%+.3f"), v->seeds[FIG6_NARROW_LOWER], v->seeds[FIG6_NARROW_LOWER] == 1 ? "" : "s",
            c->threshold, ", with the CI above 0 where there are seeds");
    c = &v->check[FIG6_OOD_AS_WELL];
    fprintf(f, "%s[%s] 4. with the matched templates the simpler OOD set does as well: '%s' minus '%s' %s %s, %s %s "
            "over %d seed%s; wanted each >= %+g\n", item, PF(c), FIG6_OOD, FIG6_FULL, FIG6_MATCHED_A,
            est(b0, sizeof b0, c->f[0], "%+.3f"), FIG6_MATCHED_B, est(b1, sizeof b1, c->f[1], "%+.3f"),
            v->seeds[FIG6_OOD_AS_WELL], v->seeds[FIG6_OOD_AS_WELL] == 1 ? "" : "s", -c->threshold);
#undef PF
    for (int k = 0; k < FIG6_N_CHECKS; k++) fprintf(f, "  %s%s: %s\n", md ? "- " : "", v->check[k].name, v->check[k].reason);
    fprintf(f, "%s%d of %d checks pass\n", md ? "\n" : "", v->passed, v->checks);
    free(v);
}

// ---- the figure

// Panels: the templates in the paper's order, then any other; curves: the question sets
// from narrow to full coverage, then the OOD set, then any other.
static int rank_of(const char *s, const char *const *order, int n_order) {
    for (int k = 0; k < n_order; k++)
        if (strcmp(s, order[k]) == 0) return k;
    return n_order;
}

static const char *set_color(int rank, int index) {
    static const char *const C[] = {"#1f77b4", "#ff7f0e", "#8b0000", "#2ca02c"};
    static const char *const MORE[] = {"#9467bd", "#17becf", "#e377c2", "#808080"};
    return rank < 4 ? C[rank] : MORE[index % 4];
}

// A file-name-safe form of a label ("weights 1,1,1,0,0" -> "weights_1-1-1-0-0").
static void safe_name(char *dst, size_t len, const char *src) {
    size_t k = 0;
    for (; *src && k + 1 < len; src++, k++) {
        char ch = *src;
        dst[k] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-'
                     ? ch
                     : ch == ',' ? '-' : '_';
    }
    dst[k] = 0;
}

int plot_fig6(Run *const *runs, int n, const PlotOptions *o, char *err, size_t errlen) {
    static const char *const T_ORDER[] = {FIG6_MISMATCHED, FIG6_MATCHED_A, FIG6_MATCHED_B};
    static const char *const Q_ORDER[] = {FIG6_NARROW, "levels1-3", FIG6_FULL, FIG6_OOD};
    if (n > MAX_RUNS) return set_err(err, errlen, "at most %d runs per figure (got %d)", MAX_RUNS, n);
    for (int i = 1; i < n; i++)
        if (strcmp(runs[i]->objective, runs[0]->objective) != 0)
            return set_err(err, errlen, "%s is a run of %s, %s one of %s: Fig. 6 compares templates and question "
                           "sets under one objective (give the runs of one)", runs[i]->path, runs[i]->objective,
                           runs[0]->path, runs[0]->objective);
    Fig6Verdict *v = xcalloc(1, sizeof *v);
    fig6_verdict(runs, n, v);
    if (v->n_cells == FIG6_MAX_CELLS) {
        free(v);
        return set_err(err, errlen, "the runs form more than %d cells (template x question set)", FIG6_MAX_CELLS - 1);
    }
    // the templates (panels) in order
    const char *tpl[FIG6_MAX_CELLS];
    int nt = 0;
    for (int c = 0; c < v->n_cells; c++) {
        int seen = 0;
        for (int t = 0; t < nt; t++) seen |= strcmp(tpl[t], v->cell[c].template_name) == 0;
        if (!seen) tpl[nt++] = v->cell[c].template_name;
    }
    for (int a = 1; a < nt; a++)  // insertion sort by the paper's order, stable otherwise
        for (int b = a; b > 0 && rank_of(tpl[b], T_ORDER, 3) < rank_of(tpl[b - 1], T_ORDER, 3); b--) {
            const char *x = tpl[b];
            tpl[b] = tpl[b - 1], tpl[b - 1] = x;
        }
    Figure fig;
    int group[MAX_RUNS], rc = 0;
    char names[FIG6_MAX_CELLS][160];
    if (figure_begin(&fig, o->out, o->formats, 560 * (nt > 0 ? nt : 1), 470, err, errlen) != 0) rc = -1;
    for (int i = 0; i < n && rc == 0; i++) {
        group[i] = 0;
        while (!same_cell(runs[i], v->cell[group[i]].template_name, v->cell[group[i]].question_set)) group[i]++;
    }
    double lo = INFINITY, hi = -INFINITY;
    for (int c = 0; c < v->n_cells && rc == 0; c++) {
        char a[48], b[96];
        safe_name(a, sizeof a, v->cell[c].template_name);
        safe_name(b, sizeof b, v->cell[c].question_set);
        snprintf(names[c], sizeof names[c], "%s__%s", a, b);
        rc = plot_write_eval(&fig, runs, n, group, c, names[c], o->smooth, err, errlen);
        char d[1300];
        snprintf(d, sizeof d, "%s/eval_%s.dat", fig.data_dir, names[c]);
        for (int col = 2; col <= 4 && rc == 0; col++) figure_column_range(d, col, &lo, &hi);
    }
    if (rc != 0) {
        free(v);
        return -1;
    }
    char note[1024], enote[2100], title[2400];
    runs_progress_note(runs, n, note, sizeof note);
    gp_escape(enote, sizeof enote, note);
    snprintf(title, sizeof title, "Fig. 6: %s from one base model, average benchmark score (greedy); mean over seeds with "
             "95%% CI band%s%s%s", objective_title(runs[0]->objective), o->smooth > 0 ? ", EMA-smoothed" : "",
             *enote ? "\\n" : "", enote);
    size_t cap = 65536, len = 0;
    char *body = xmalloc(cap);
#define OUT(...) (len += (size_t)snprintf(body + len, cap - len, __VA_ARGS__))
    OUT("set datafile missing 'NaN'\nset key bottom right box opaque samplen 2 font ',8'\n"
        "set grid lc rgb '#dddddd'\nset xlabel 'policy iteration step'\nset ylabel 'average benchmark score'\n"
        "set style fill transparent solid 0.2 noborder\n"
        "set multiplot layout 1,%d title \"%s\" font ',11'\n", nt > 0 ? nt : 1, title);
    // one y range for all panels, so that the starting scores compare across them
    if (isfinite(lo) && isfinite(hi)) {
        double pad = fmax(0.01, 0.05 * (hi - lo));
        OUT("set yrange [%.6g:%.6g]\n", fmax(0, lo - pad), hi + pad);
    }
    for (int t = 0; t < nt; t++) {
        int r = rank_of(tpl[t], T_ORDER, 3);
        char et[64];
        gp_escape(et, sizeof et, tpl[t]);
        OUT("set title 'template %s%s'\n", et, r == 0 ? " (mismatched)" : r < 3 ? " (matched)" : "");
        // the cells of this panel, curves in the sets' order
        int cells[FIG6_MAX_CELLS], nc = 0;
        for (int c = 0; c < v->n_cells; c++)
            if (strcmp(v->cell[c].template_name, tpl[t]) == 0) cells[nc++] = c;
        for (int a = 1; a < nc; a++)
            for (int b = a; b > 0 && rank_of(v->cell[cells[b]].question_set, Q_ORDER, 4) <
                                         rank_of(v->cell[cells[b - 1]].question_set, Q_ORDER, 4); b--) {
                int x = cells[b];
                cells[b] = cells[b - 1], cells[b - 1] = x;
            }
        OUT("plot ");
        for (int j = 0; j < nc; j++) {
            const Fig6Cell *cl = &v->cell[cells[j]];
            const char *col = set_color(rank_of(cl->question_set, Q_ORDER, 4), j);
            char d[1300], lab[200], eq[128];
            snprintf(d, sizeof d, "%s/eval_%s.dat", fig.data_dir, names[cells[j]]);
            gp_escape(eq, sizeof eq, cl->question_set);
            snprintf(lab, sizeof lab, "%s (%d run%s)", eq, cl->runs, cl->runs == 1 ? "" : "s");
            OUT("%s\"%s\" u 1:3:4 w filledcurves lc rgb '%s' notitle, \"%s\" u 1:2 w lp pt 7 ps 0.5 lw 2 lc rgb '%s' "
                "title '%s'", j ? ", " : "", d, col, d, col, lab);
            if (len + 4096 > cap) body = realloc(body, cap *= 2);
            if (!body) die("out of memory");
        }
        OUT("\n");
    }
#undef OUT
    free(v);
    int rc2 = figure_render(&fig, body, err, errlen);
    free(body);
    return rc2;
}
