// plot_fig5.c: the paper's Fig. 5 (Liu et al. 2025): five panels against the policy iteration
// step, one curve per objective (mean over its seeds with a 95% CI band), and a sixth: the
// share of the incorrect eval responses cut by the budget (check 7's figure).
//
// Data files (columns; NaN where no run has a value):
//   train_<objective>.dat  step  reward mean lo hi  length mean lo hi  n_runs
//   eval_<objective>.dat   step  score mean lo hi  len_correct mean lo hi  len_incorrect mean lo hi
//                          n_runs  trunc_incorrect mean lo hi (run_eval_trunc_incorrect; NaN
//                          in logs that do not have it)
// The step is the number of policy updates before the rollout (train) or evaluation (eval).
// With --smooth a, every run's training curves (one point per step) are EMA-smoothed before
// the mean is taken; the evaluations (a few points, each over 810 questions) are not.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "analysis.h"
#include "stats.h"

// Writes "mean lo hi" of the values v[0..k) (lo = hi = mean when the CI is undefined).
static void put_band(FILE *fp, const double *v, int k) {
    double m, h;
    mean_ci95(v, k, &m, &h);
    if (!isfinite(h)) h = 0;
    fprintf(fp, " %.10g %.10g %.10g", m, isfinite(m) ? m - h : NAN, isfinite(m) ? m + h : NAN);
}

// The curve of run i, column x (n values), smoothed if asked; malloc'd.
static double *curve(const double *x, int n, double smooth) {
    double *c = xmalloc(((size_t)n + 1) * sizeof(double));
    if (smooth > 0) ema(x, n, smooth, c);
    else memcpy(c, x, (size_t)n * sizeof(double));
    return c;
}

int plot_write_train(const Figure *fig, Run *const *runs, int n, const int *group, int g,
                       const char *name, double smooth, char *err, size_t errlen) {
    char file[128], path[1300];
    snprintf(file, sizeof file, "train_%s.dat", name);
    FILE *fp = figure_data(fig, file, path, sizeof path, err, errlen);
    if (!fp) return -1;
    int k = 0, max_step = -1;
    double *rew[64], *len[64];
    int nst[64];
    for (int i = 0; i < n; i++) {
        if (group[i] != g || k == 64) continue;
        rew[k] = curve(runs[i]->reward, (int)runs[i]->n_steps, smooth);
        len[k] = curve(runs[i]->len_mean, (int)runs[i]->n_steps, smooth);
        nst[k] = (int)runs[i]->n_steps;
        for (int s = 0; s < nst[k]; s++) max_step = (int)fmax(max_step, runs[i]->step[s]);
        k++;
    }
    fprintf(fp, "# %s: mean over runs with a 95%% CI (t); EMA %g (0: none)\n", name, smooth);
    fprintf(fp, "# step reward reward_lo reward_hi length length_lo length_hi n_runs\n");
    double a[64], b[64];
    for (int s = 0; s <= max_step; s++) {  // /train row s is step s (rows are steps 0..n-1)
        int m = 0;
        for (int j = 0; j < k; j++)
            if (s < nst[j]) a[m] = rew[j][s], b[m] = len[j][s], m++;
        fprintf(fp, "%d", s);
        put_band(fp, a, m);
        put_band(fp, b, m);
        fprintf(fp, " %d\n", m);
    }
    for (int j = 0; j < k; j++) free(rew[j]), free(len[j]);
    if (fclose(fp) != 0) return set_err(err, errlen, "cannot write '%s'", path);
    return 0;
}

int plot_write_eval(const Figure *fig, Run *const *runs, int n, const int *group, int g,
                    const char *name, double smooth, char *err, size_t errlen) {
    char file[128], path[1300];
    snprintf(file, sizeof file, "eval_%s.dat", name);
    FILE *fp = figure_data(fig, file, path, sizeof path, err, errlen);
    if (!fp) return -1;
    fprintf(fp, "# %s: greedy evaluations pooled over the benchmarks; mean over runs with a 95%% CI (t); "
            "EMA %g (0: none)\n", name, smooth);
    fprintf(fp, "# step score score_lo score_hi len_correct lo hi len_incorrect lo hi n_runs trunc_incorrect lo hi\n");
    // the evaluation steps of all runs of the group, in increasing order
    double steps[4096];
    int ns = 0;
    double *sc[64], *lc[64], *li[64], *tr[64];
    Run *rr[64];
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (group[i] != g || k == 64) continue;
        Run *r = runs[i];
        rr[k] = r;
        sc[k] = curve(r->eval_score, r->n_evals, smooth);
        lc[k] = curve(r->eval_len_correct, r->n_evals, smooth);
        li[k] = curve(r->eval_len_incorrect, r->n_evals, smooth);
        double *share = xmalloc(((size_t)r->n_evals + 1) * sizeof(double)), bad, cut;
        for (int e = 0; e < r->n_evals; e++) share[e] = run_eval_trunc_incorrect(r, e, &bad, &cut, NULL);
        tr[k] = curve(share, r->n_evals, smooth);
        free(share);
        k++;
        for (int e = 0; e < r->n_evals; e++) {
            int j = 0;
            while (j < ns && steps[j] < r->eval_step[e]) j++;
            if (j < ns && steps[j] == r->eval_step[e]) continue;
            if (ns == 4096) break;
            memmove(steps + j + 1, steps + j, (size_t)(ns - j) * sizeof(double));
            steps[j] = r->eval_step[e], ns++;
        }
    }
    double a[64], b[64], c[64], d[64];
    for (int s = 0; s < ns; s++) {
        int m = 0;
        for (int j = 0; j < k; j++)
            for (int e = 0; e < rr[j]->n_evals; e++)
                if (rr[j]->eval_step[e] == steps[s]) {
                    a[m] = sc[j][e], b[m] = lc[j][e], c[m] = li[j][e], d[m] = tr[j][e], m++;
                    break;
                }
        fprintf(fp, "%.0f", steps[s]);
        put_band(fp, a, m);
        put_band(fp, b, m);
        put_band(fp, c, m);
        fprintf(fp, " %d", m);
        put_band(fp, d, m);
        fprintf(fp, "\n");
    }
    for (int j = 0; j < k; j++) free(sc[j]), free(lc[j]), free(li[j]), free(tr[j]);
    if (fclose(fp) != 0) return set_err(err, errlen, "cannot write '%s'", path);
    return 0;
}

int plot_fig5(Run *const *runs, int n, const PlotOptions *o, char *err, size_t errlen) {
    int group[256];
    const char *names[MAX_OBJECTIVES];
    if (n > 256) return set_err(err, errlen, "at most 256 runs per figure (got %d)", n);
    int ng = group_by_objective(runs, n, group, names, MAX_OBJECTIVES);
    Figure fig;
    if (figure_begin(&fig, o->out, o->formats, 2400, 470, err, errlen) != 0) return -1;
    int nruns[MAX_OBJECTIVES] = {0};
    const Run *first[MAX_OBJECTIVES];  // a run of each group: its name and colour
    for (int i = 0; i < n; i++)
        if (nruns[group[i]]++ == 0) first[group[i]] = runs[i];
    for (int g = 0; g < ng; g++)
        if (plot_write_train(&fig, runs, n, group, g, names[g], o->smooth, err, errlen) != 0 ||
            plot_write_eval(&fig, runs, n, group, g, names[g], 0, err, errlen) != 0)
            return -1;

    char note[1024], enote[2100], esc[2400], smooth[96] = "";
    runs_progress_note(runs, n, note, sizeof note);
    gp_escape(enote, sizeof enote, note);
    if (o->smooth > 0)
        snprintf(smooth, sizeof smooth, "; training curves EMA-smoothed (alpha %g)", o->smooth);
    snprintf(esc, sizeof esc, "Fig. 5: mean over seeds with 95%% CI band%s%s%s", smooth, *enote ? "\\n" : "",
             enote);

    // body: six panels in a row
    size_t cap = 65536, len = 0;
    char *body = xmalloc(cap);
#define OUT(...) (len += (size_t)snprintf(body + len, cap - len, __VA_ARGS__))
    OUT("set datafile missing 'NaN'\nset key top left box opaque samplen 2 font ',8'\n"
        "set grid lc rgb '#dddddd'\nset xlabel 'policy iteration step'\n"
        "set style fill transparent solid 0.2 noborder\n"
        "set multiplot layout 1,6 title \"%s\" font ',11'\n", esc);
    static const struct {
        const char *title, *ylabel, *file;
        int col, unit_range;  // unit_range: the values lie in [0, 1]
    } P[] = {{"Training reward", "reward", "train", 2, 1},
             {"Training output length", "tokens", "train", 5, 0},
             {"Eval length, correct responses", "tokens", "eval", 5, 0},
             {"Eval length, incorrect responses", "tokens", "eval", 8, 0},
             {"Average benchmark score", "accuracy", "eval", 2, 1},
             {"Incorrect eval responses cut", "share cut by the budget", "eval", 12, 1}};
    for (int p = 0; p < 6; p++) {
        OUT("set title '%s'\nset ylabel '%s'\n", P[p].title, P[p].ylabel);
        int any = 0;
        double lo = INFINITY, hi = -INFINITY;  // over the curves and their bands
        for (int g = 0; g < ng; g++) {
            char d[1300];
            snprintf(d, sizeof d, "%s/%s_%s.dat", fig.data_dir, P[p].file, names[g]);
            any |= figure_column_range(d, P[p].col, &lo, &hi) > 0;
            for (int c = P[p].col + 1; c <= P[p].col + 2; c++) figure_column_range(d, c, &lo, &hi);
        }
        // a flat panel (say a score of 0 throughout a short run) gets a range of its own, where
        // gnuplot would warn of an empty y range; reward and accuracy keep to [0, 1]
        if (any && hi - lo == 0.0) {
            if (P[p].unit_range && lo >= 0.0 && lo <= 1.0)
                OUT("set yrange [0:1]\n");
            else
                OUT("set yrange [%.17g:%.17g]\n", lo - 1.0, lo + 1.0);
        } else {
            OUT("set autoscale y\n");
        }
        if (!any) {  // e.g. no correct response in any evaluation yet
            OUT("set label 1 'no data in these runs' at graph 0.5,0.5 center\nset key off\nplot [0:1][0:1] NaN notitle\nset key on\n"
                "unset label 1\n");
            continue;
        }
        OUT("plot ");
        for (int g = 0; g < ng; g++) {
            const char *col = group_color(first[g], g);
            char d[1300], lab[96];
            snprintf(d, sizeof d, "%s/%s_%s.dat", fig.data_dir, P[p].file, names[g]);
            snprintf(lab, sizeof lab, "%s (%d run%s)", group_title(first[g]), nruns[g],
                     nruns[g] == 1 ? "" : "s");
            OUT("%s\"%s\" u 1:%d:%d w filledcurves lc rgb '%s' notitle, "
                "\"%s\" u 1:%d w l%s lw 2 lc rgb '%s' title '%s'",
                g ? ", " : "", d, P[p].col + 1, P[p].col + 2, col, d, P[p].col,
                strcmp(P[p].file, "eval") == 0 ? "p pt 7 ps 0.5" : "", col, lab);
            if (len + 4096 > cap) body = realloc(body, cap *= 2);
            if (!body) die("out of memory");
        }
        OUT("\n");
    }
#undef OUT
    int rc = figure_render(&fig, body, err, errlen);
    free(body);
    return rc;
}
