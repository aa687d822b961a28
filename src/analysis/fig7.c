// fig7.c: the paper's Fig. 7, its checks and its loading (fig7.h).
#include "fig7.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common.h"
#include "../sim/sweep/sweep.h"
#include "stats.h"

const char *const FIG7_BASE_DIRS[FIG7_N_BASES] = {"general", "math", "mathqa"};
const char *const FIG7_BASE_TITLES[FIG7_N_BASES] = {"general base (Llama-3.2-3B)",
                                                    "+ math text (FineMath)",
                                                    "+ question-answer text (NuminaQA)"};

#define FIG7_MAX_RUNS 256

double fig7_ceiling(const Run *r) {
    int k = r->n_evals < FIG7_CEILING_EVALS ? r->n_evals : FIG7_CEILING_EVALS;
    return k ? mean_range(r->eval_score, r->n_evals - k, r->n_evals) : NAN;
}

double fig7_rise(const Run *r, const double *y, double *half) {
    int n = (int)r->n_steps, k = tenth_of(n);
    double d;
    diff_ci95(y, k, y + n - k, k, &d, half);
    return d;
}

static Estimate est(double v, double half) {
    return (Estimate){v, isfinite(half) ? v - half : NAN, isfinite(half) ? v + half : NAN};
}

GL_PRINTF(2, 3) static void say(Check *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
}

// The values x(run) of the runs of base b and objective obj into out; returns their number.
static int collect(Run *const *runs, int n, const int *base, int b, const char *obj,
                   double (*x)(const Run *), double *out) {
    int k = 0;
    for (int i = 0; i < n && k < FIG7_MAX_RUNS; i++)
        if (base[i] == b && strcmp(runs[i]->objective, obj) == 0) out[k++] = x(runs[i]);
    return k;
}

static double first_score(const Run *r) { return r->n_evals ? r->eval_score[0] : NAN; }
static double final_reward(const Run *r) {
    int n = (int)r->n_steps;
    return mean_range(r->reward, n - tenth_of(n), n);
}

// A difference of ceilings (hi minus lo base) as an estimate.
static Estimate ceiling_diff(Run *const *runs, int n, const int *base, int lo, int hi) {
    double a[FIG7_MAX_RUNS] = {0}, b[FIG7_MAX_RUNS] = {0}, d, h;
    int na = collect(runs, n, base, lo, "dr_grpo", fig7_ceiling, a);
    int nb = collect(runs, n, base, hi, "dr_grpo", fig7_ceiling, b);
    diff_ci95(a, na, b, nb, &d, &h);
    if (na < 2 && nb < 2) h = NAN;  // one run a side: the pooled variance is of nothing
    return est(d, h);
}

// A rise of curve `which` (0 reward, 1 length) of the runs of base b and objective obj: the
// mean over the runs with its CI, or one run's with the CI from its steps.
static Estimate rise(Run *const *runs, int n, const int *base, int b, const char *obj, int which) {
    double r[FIG7_MAX_RUNS], h1 = NAN, m, h;
    int k = 0;
    for (int i = 0; i < n && k < FIG7_MAX_RUNS; i++)
        if (base[i] == b && strcmp(runs[i]->objective, obj) == 0)
            r[k++] = fig7_rise(runs[i], which ? runs[i]->len_mean : runs[i]->reward, &h1);
    if (k == 0) return est(NAN, NAN);
    if (k == 1) return est(r[0], h1);
    mean_ci95(r, k, &m, &h);
    return est(m, h);
}

// Mean over the first tenth of the steps of a run's length (the dr_length_flat reference).
static double first_length(const Run *r) { return mean_range(r->len_mean, 0, tenth_of((int)r->n_steps)); }

int fig7_verdict(Run *const *runs, int n, const int *base, Fig7Verdict *v) {
    memset(v, 0, sizeof *v);
    double x[FIG7_MAX_RUNS], y[FIG7_MAX_RUNS], m, h;
    for (int b = 0; b < FIG7_N_BASES; b++) {
        int k = collect(runs, n, base, b, "dr_grpo", fig7_ceiling, x);
        collect(runs, n, base, b, "dr_grpo", first_score, y);
        v->runs[b][0] = k;
        double dummy[FIG7_MAX_RUNS];
        v->runs[b][1] = collect(runs, n, base, b, "grpo", first_score, dummy);
        mean_ci95(x, k, &m, &h);
        v->ceiling[b] = est(m, h);
        for (int i = 0; i < k; i++) y[i] = x[i] - y[i];
        mean_ci95(y, k, &m, &h);
        v->gain[b] = est(m, h);
    }
    Check *c;
    if (v->runs[FIG7_GENERAL][0] && v->runs[FIG7_MATH][0]) {
        c = &v->check[FIG7_CEILING_MATH];
        c->name = "ceiling_math";
        c->threshold = FIG7_CEILING_GAP;
        c->f[0] = v->ceiling[FIG7_GENERAL], c->f[1] = v->ceiling[FIG7_MATH];
        Estimate d = c->f[2] = ceiling_diff(runs, n, base, FIG7_GENERAL, FIG7_MATH);
        int ci = isfinite(d.lo);
        c->pass = ci ? d.lo > FIG7_CEILING_GAP : d.v > FIG7_CEILING_GAP;
        say(c, "math - general ceiling %+.3f%s%s", d.v, ci ? "" : " (no CI: one run a side)",
            c->pass ? "" : ci ? ": its CI reaches the threshold" : ": not above the threshold");
        v->checks++, v->passed += c->pass;
    }
    if (v->runs[FIG7_MATH][0] && v->runs[FIG7_MATHQA][0]) {
        c = &v->check[FIG7_CEILING_QA];
        c->name = "ceiling_qa";
        c->threshold = -FIG7_QA_TOLERANCE;
        c->f[0] = v->ceiling[FIG7_MATHQA];
        Estimate d = c->f[1] = ceiling_diff(runs, n, base, FIG7_MATH, FIG7_MATHQA);
        int ci = isfinite(d.hi);
        c->pass = (ci ? d.hi : d.v) >= -FIG7_QA_TOLERANCE;
        say(c, "math+QA - math ceiling %+.3f%s%s", d.v, ci ? "" : " (no CI: one run a side)",
            c->pass ? ": not lower" : ": lower");
        v->checks++, v->passed += c->pass;
    }
    if (v->runs[FIG7_MATH][1]) {
        c = &v->check[FIG7_DOUBLE_INCREASE];
        c->name = "double_increase";
        c->threshold = 0;
        c->f[0] = rise(runs, n, base, FIG7_MATH, "grpo", 0);
        c->f[1] = rise(runs, n, base, FIG7_MATH, "grpo", 1);
        c->pass = c->f[0].lo > 0 && c->f[1].lo > 0;
        say(c, "GRPO: reward %+.3f, length %+.1f tokens (last tenth - first)%s", c->f[0].v, c->f[1].v,
            c->pass ? "" : ": not both with a CI above 0");
        v->checks++, v->passed += c->pass;
    }
    if (v->runs[FIG7_MATH][0] && v->runs[FIG7_MATH][1]) {
        c = &v->check[FIG7_DR_LENGTH_FLAT];
        c->name = "dr_length_flat";
        c->threshold = FIG7_LENGTH_FLAT;
        Estimate len = rise(runs, n, base, FIG7_MATH, "dr_grpo", 1);
        int k = collect(runs, n, base, FIG7_MATH, "dr_grpo", first_length, x);
        mean_ci95(x, k, &m, &h);
        c->f[0] = est(len.v / m, NAN);  // the rise as a share of the first tenth's length
        int kd = collect(runs, n, base, FIG7_MATH, "dr_grpo", final_reward, x);
        int kg = collect(runs, n, base, FIG7_MATH, "grpo", final_reward, y);
        double d;
        diff_ci95(x, kd, y, kg, &d, &h);
        c->f[1] = est(d, h);  // GRPO's final reward minus Dr. GRPO's
        int flat = c->f[0].v <= FIG7_LENGTH_FLAT, equal = fabs(d) <= FIG7_REWARD_EQUAL;
        c->pass = flat && equal;
        say(c, "Dr. GRPO's length %+.1f%% of its first tenth%s; GRPO - Dr. GRPO final reward %+.3f%s",
            100 * c->f[0].v, flat ? "" : " (rises)", d, equal ? "" : " (not equal)");
        v->checks++, v->passed += c->pass;
    }
    return v->checks;
}

static void put_est(FILE *f, Estimate e, int prec) {
    if (isfinite(e.lo)) fprintf(f, "%.*f [%.*f, %.*f]", prec, e.v, prec, e.lo, prec, e.hi);
    else fprintf(f, "%.*f", prec, e.v);
}

void fig7_print(FILE *f, const Fig7Verdict *v, int md) {
    fprintf(f, md ? "\n| base | Dr. GRPO runs | ceiling (mean of the last %d evals) | gain over the first eval |\n|---|---|---|---|\n"
                  : "\nFig. 7: Dr. GRPO's ceiling per base (mean score of the last %d evaluations, 95%% CI)\n",
            FIG7_CEILING_EVALS);
    for (int b = 0; b < FIG7_N_BASES; b++) {
        if (!v->runs[b][0]) continue;
        fprintf(f, md ? "| %s | %d | " : "  %-36s %d runs  ceiling ", FIG7_BASE_TITLES[b], v->runs[b][0]);
        put_est(f, v->ceiling[b], 3);
        fprintf(f, md ? " | " : "  gain ");
        put_est(f, v->gain[b], 3);
        fprintf(f, md ? " |\n" : "\n");
    }
    fprintf(f, md ? "\nFig. 7 checks: %d of %d passed\n\n| check | result | why |\n|---|---|---|\n"
                  : "Fig. 7 checks: %d of %d passed\n", v->passed, v->checks);
    for (int k = 0; k < FIG7_N_CHECKS; k++) {
        const Check *c = &v->check[k];
        if (!c->name) continue;
        fprintf(f, md ? "| %s | %s | %s |\n" : "  [%s] %-16s %s\n", md ? c->name : c->pass ? "PASS" : "FAIL",
                md ? (c->pass ? "PASS" : "FAIL") : c->name, c->reason);
    }
}

Run **fig7_load(const char *dir, int *n, int **base, char *err, size_t errlen) {
    Run **runs = xcalloc(FIG7_MAX_RUNS, sizeof(Run *));
    *base = xcalloc(FIG7_MAX_RUNS, sizeof(int));
    *n = 0;
    for (int b = 0; b < FIG7_N_BASES; b++) {
        char sub[1200];
        snprintf(sub, sizeof sub, "%s/%s", dir, FIG7_BASE_DIRS[b]);
        struct stat st;
        if (stat(sub, &st) != 0) continue;  // a base without runs (yet)
        char **paths = NULL;
        int k = sweep_expand_dir(sub, &paths, NULL, NULL, 0, err, errlen);
        if (k < 0) goto fail;
        if (k == 0) {
            set_err(err, errlen, "%s: not a sweep output directory (no sweep.runs)", sub);
            goto fail;
        }
        for (int i = 0; i < k; i++) {
            if (*n < FIG7_MAX_RUNS && !(runs[*n] = run_load(paths[i], err, errlen))) {
                for (int j = i; j < k; j++) free(paths[j]);
                free(paths);
                goto fail;
            }
            if (*n < FIG7_MAX_RUNS) (*base)[(*n)++] = b;
            free(paths[i]);
        }
        free(paths);
    }
    if (*n == 0) {
        set_err(err, errlen, "%s: no runs in %s/{general,math,mathqa} (make reproduce-fig7 writes them)", dir, dir);
        goto fail;
    }
    return runs;
fail:
    fig7_free(runs, *n, *base);
    *base = NULL;
    return NULL;
}

void fig7_free(Run **runs, int n, int *base) {
    for (int i = 0; i < n; i++) run_free(runs[i]);
    free(runs);
    free(base);
}

// "set Yrange [...]" for an axis whose curves are flat (gnuplot would warn of an empty range):
// [0:1] for a unit quantity (score, reward) inside it, else the value +- 1; "set autoscale" else.
static int range_cmd(char *out, size_t cap, const char *axis, const char *const *files, int nf, int col,
                     int unit) {
    double lo = INFINITY, hi = -INFINITY;
    int any = 0;
    for (int i = 0; i < nf; i++)
        for (int c = col; c <= col + 2; c++) any |= figure_column_range(files[i], c, &lo, &hi) > 0;
    if (any && hi - lo == 0.0) {
        if (unit && lo >= 0.0 && lo <= 1.0) return snprintf(out, cap, "set %srange [0:1]\n", axis);
        return snprintf(out, cap, "set %srange [%.17g:%.17g]\n", axis, lo - 1.0, lo + 1.0);
    }
    return snprintf(out, cap, "set autoscale %s\n", axis);
}

int plot_fig7(Run *const *runs, int n, const int *base, const PlotOptions *o, char *err, size_t errlen) {
    Figure fig;
    if (figure_begin(&fig, o->out, o->formats, 1500, 520, err, errlen) != 0) return -1;
    int *group = xmalloc(((size_t)n + 1) * sizeof(int));
    int have[FIG7_N_BASES] = {0}, have_obj[2] = {0};
    // left: Dr. GRPO's evaluations per base (groups 0..2)
    for (int b = 0; b < FIG7_N_BASES; b++) {
        for (int i = 0; i < n; i++) {
            group[i] = base[i] == b && strcmp(runs[i]->objective, "dr_grpo") == 0 ? b : -1;
            have[b] |= group[i] == b;
        }
        if (have[b] && plot_write_eval(&fig, runs, n, group, b, FIG7_BASE_DIRS[b], 0, err, errlen) != 0) goto fail;
    }
    // right: the math base's training curves per objective
    static const char *const objs[2] = {"grpo", "dr_grpo"};
    for (int j = 0; j < 2; j++) {
        for (int i = 0; i < n; i++) {
            group[i] = base[i] == FIG7_MATH && strcmp(runs[i]->objective, objs[j]) == 0 ? j : -1;
            have_obj[j] |= group[i] == j;
        }
        if (have_obj[j] && plot_write_train(&fig, runs, n, group, j, objs[j], o->smooth, err, errlen) != 0) goto fail;
    }
    free(group);
    group = NULL;

    static const char *const base_colors[FIG7_N_BASES] = {"#1f77b4", "#d62728", "#2ca02c"};
    char note[1024], enote[2100], sm[96] = "";
    runs_progress_note(runs, n, note, sizeof note);
    gp_escape(enote, sizeof enote, note);
    if (o->smooth > 0) snprintf(sm, sizeof sm, "; training curves EMA-smoothed (alpha %g)", o->smooth);
    size_t cap = 16384, len = 0;
    char *body = xmalloc(cap);
#define OUT(...) (len += (size_t)snprintf(body + len, cap - len, __VA_ARGS__))
    OUT("set datafile missing 'NaN'\nset key top left box opaque samplen 2 font ',8'\n"
        "set grid lc rgb '#dddddd'\nset xlabel 'policy iteration step'\n"
        "set style fill transparent solid 0.2 noborder\n"
        "set multiplot layout 1,2 title \"Fig. 7: mean over seeds with 95%% CI band%s%s%s\" font ',11'\n",
        sm, *enote ? "\\n" : "", enote);
    OUT("set title 'Dr. GRPO (R1 template) from three base models'\nset ylabel 'average benchmark score'\n");
    char files[FIG7_N_BASES][1300];
    const char *fp[FIG7_N_BASES];
    int nf = 0;
    for (int b = 0; b < FIG7_N_BASES; b++)
        if (have[b]) snprintf(files[nf], sizeof files[nf], "%s/eval_%s.dat", fig.data_dir, FIG7_BASE_DIRS[b]), fp[nf] = files[nf], nf++;
    len += (size_t)range_cmd(body + len, cap - len, "y", fp, nf, 2, 1);
    int any = 0;
    for (int b = 0; b < FIG7_N_BASES; b++) {
        if (!have[b]) continue;
        char d[1300], t[128];
        snprintf(d, sizeof d, "%s/eval_%s.dat", fig.data_dir, FIG7_BASE_DIRS[b]);
        gp_escape(t, sizeof t, FIG7_BASE_TITLES[b]);
        OUT("%s\"%s\" u 1:3:4 w filledcurves lc rgb '%s' notitle, \"%s\" u 1:2 w lp pt 7 ps 0.6 lw 2 lc rgb '%s' title \"%s\"",
            any ? ", " : "plot ", d, base_colors[b], d, base_colors[b], t);
        any = 1;
    }
    OUT(any ? "\n" : "set label 1 'no Dr. GRPO runs' at graph 0.5,0.5 center\nplot [0:1][0:1] NaN notitle\nunset label 1\n");
    OUT("set title 'From the math base: GRPO vs Dr. GRPO'\nset ylabel 'training reward'\n"
        "set y2label 'response length (tokens, dashed)'\nset ytics nomirror\nset y2tics\n");
    nf = 0;
    for (int j = 0; j < 2; j++)
        if (have_obj[j]) snprintf(files[nf], sizeof files[nf], "%s/train_%s.dat", fig.data_dir, objs[j]), fp[nf] = files[nf], nf++;
    len += (size_t)range_cmd(body + len, cap - len, "y", fp, nf, 2, 1);
    len += (size_t)range_cmd(body + len, cap - len, "y2", fp, nf, 5, 0);
    any = 0;
    for (int j = 0; j < 2; j++) {
        if (!have_obj[j]) continue;
        char d[1300];
        snprintf(d, sizeof d, "%s/train_%s.dat", fig.data_dir, objs[j]);
        const char *col = objective_color(objs[j], j), *t = objective_title(objs[j]);
        OUT("%s\"%s\" u 1:3:4 w filledcurves lc rgb '%s' notitle, \"%s\" u 1:2 w l lw 2 lc rgb '%s' title '%s reward', "
            "\"%s\" u 1:6:7 axes x1y2 w filledcurves lc rgb '%s' notitle, \"%s\" u 1:5 axes x1y2 w l lw 2 dt 2 lc rgb '%s' title '%s length'",
            any ? ", " : "plot ", d, col, d, col, t, d, col, d, col, t);
        any = 1;
    }
    OUT(any ? "\n" : "set label 1 'no runs from the math base' at graph 0.5,0.5 center\nplot [0:1][0:1] NaN notitle\nunset label 1\n");
#undef OUT
    int rc = figure_render(&fig, body, err, errlen);
    free(body);
    return rc;
fail:
    free(group);
    return -1;
}
