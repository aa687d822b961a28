// plot_bias.c: the two biases of GRPO (Liu et al. 2025 Sec. 3.1) read from the run logs.
//
// length-bias, data files:
//   lenbias_<objective>.dat  length_bin_centre  correct: mean_abs_w n c_abs_A
//                            incorrect: mean_abs_w n c_abs_A
//     over the responses with a non-zero advantage of all runs of the objective (n of them);
//     mean_abs_w: mean over those of their mean per-token |w| (/tokens weight; NaN where no
//     run of the bin has /tokens, and over the runs that have it where only some do);
//     c_abs_A: mean of c(|o_i|) |A_i|, the weight at rho = 1 in closed form, c the
//     trainer's aggregation coefficient of the run's objective (token_mean: 1/(M x mean
//     length), an approximation)
//   lengths_<objective>.dat  step  len_correct mean lo hi  len_incorrect mean lo hi  n_runs
// difficulty-bias, data files:
//   difficulty_<objective>.dat  p  mean_abs_adv mean lo hi  sum_abs_w mean lo hi  n_questions
//     per empirical accuracy p = k/G of a question's group (/questions)
//   questions_<objective>.dat   p  mean_abs_adv  sum_abs_w   (every question of every step)
//   closed_<objective>.dat      p  mean_abs_adv(p)  sum_abs_w(p)   closed forms (stats.h); the
//     second only where it does not depend on the lengths (seq_mean_token_mean: G E|A|/M)
//   examples_<objective>.dat    p  mean_abs_adv  label: the seed's example groups (1,1,0,0) and
//     (1,1,1,0) of docs/config.md (objective.std_ddof; G = 4), by the same closed form
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "../sim/io/config.h"
#include "../sim/rl/objective.h"
#include "../sim/io/runlog.h"
#include "analysis.h"
#include "stats.h"

#define BODY_CAP 131072
#define OUT(...) (len += (size_t)snprintf(body + len, BODY_CAP - len, __VA_ARGS__))

static int load_all(Run *const *runs, int n, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        if (runs[i]->resp_step) continue;
        if (run_load_responses(runs[i], err, errlen) != 0) return -1;
    }
    return 0;
}

// The objective a run trained with: its stored config resolved by the trainer's own parsing
// (objective_from_config). -1 where the log has no config that reads with this grpolab.
static int run_objective(const Run *r, ObjectiveConfig *oc) {
    char e[768];
    RunLogReader *rd = runlog_reader_open(r->path, e, sizeof e);
    if (!rd) return -1;
    char *text = runlog_read_attr_str(rd, "config", e, sizeof e);
    runlog_reader_close(rd);
    if (!text) return -1;
    Config *c = config_from_stored(text, r->path, e, sizeof e);
    free(text);
    int rc = c ? objective_from_config(c, config_settings(c)->world.max_new_tokens, oc, e, sizeof e) : -1;
    config_free(c);
    return rc;
}

// The aggregation coefficient c of a response of length L at rho = 1: the trainer's
// aggregation_coef with the run's minibatch size M; token_mean's minibatch length sum is
// taken as M x the run's mean length. NaN where the objective (oc NULL) or M is unknown.
static double coef_of(const Run *r, const ObjectiveConfig *oc, double L, double mean_len) {
    if (!oc || r->minibatch_size <= 0) return NAN;
    int M = r->minibatch_size;
    return aggregation_coef(oc->aggregation, M, (int)L, M * mean_len, oc->l_max);
}

static int write_lenbias(const Figure *fig, Run *const *runs, int n, const int *group, int g,
                         const char *name, int *n_points, char *err, size_t errlen) {
    int budget = group_budget(runs, n, group, g);
    if (budget <= 0) budget = 256;
    int bw = budget / 20 > 0 ? budget / 20 : 1, nb = budget / bw + 2;
    double *sw = xcalloc((size_t)nb * 2, sizeof(double)), *sc = xcalloc((size_t)nb * 2, sizeof(double));
    double *cnt = xcalloc((size_t)nb * 2, sizeof(double)), *cw = xcalloc((size_t)nb * 2, sizeof(double));
    *n_points = 0;
    for (int i = 0; i < n; i++) {
        if (group[i] != g) continue;
        const Run *r = runs[i];
        ObjectiveConfig oc;
        int have_oc = run_objective(r, &oc) == 0;
        double mean_len = 0;
        for (int64_t j = 0; j < r->n_resp; j++) mean_len += r->resp_length[j];
        mean_len /= r->n_resp > 0 ? (double)r->n_resp : 1;
        for (int64_t j = 0; j < r->n_resp; j++) {
            double A = r->resp_advantage[j], L = r->resp_length[j], w = r->resp_mean_abs_w[j];
            // a response whose tokens the log lacks (no /tokens, or rows past its end) has no
            // measured |w|, and in a log that has /tokens it is left out altogether
            if (A == 0 || !(L >= 1 && L <= 65536) || (r->has_tokens && !isfinite(w))) continue;  // NaN too
            int b = (int)((L - 1) / bw);
            if (b >= nb) b = nb - 1;
            int c = r->resp_correct[j] > 0.5 ? 0 : 1;
            if (isfinite(w)) sw[2 * b + c] += w, cw[2 * b + c] += 1;
            sc[2 * b + c] += coef_of(r, have_oc ? &oc : NULL, L, mean_len) * fabs(A);
            cnt[2 * b + c] += 1;
            (*n_points)++;
        }
    }
    char file[128], path[1300];
    snprintf(file, sizeof file, "lenbias_%s.dat", name);
    FILE *fp = figure_data(fig, file, path, sizeof path, err, errlen);
    if (!fp) {
        free(sw), free(sc), free(cnt), free(cw);
        return -1;
    }
    fprintf(fp, "# %s: responses with A != 0 binned by length (bin width %d tokens)\n", name, bw);
    fprintf(fp, "# length correct_mean_abs_w correct_n correct_c_abs_A incorrect_mean_abs_w incorrect_n "
            "incorrect_c_abs_A\n");
    for (int b = 0; b < nb; b++) {
        if (cnt[2 * b] + cnt[2 * b + 1] == 0) continue;
        fprintf(fp, "%.1f", b * bw + (bw + 1) / 2.0);
        for (int c = 0; c < 2; c++) {
            double k = cnt[2 * b + c], kw = cw[2 * b + c];
            fprintf(fp, " %.10g %.0f %.10g", kw ? sw[2 * b + c] / kw : NAN, k, k ? sc[2 * b + c] / k : NAN);
        }
        fprintf(fp, "\n");
    }
    free(sw), free(sc), free(cnt), free(cw);
    if (fclose(fp) != 0) return set_err(err, errlen, "cannot write '%s'", path);
    return 0;
}

static int write_lengths(const Figure *fig, Run *const *runs, int n, const int *group, int g,
                         const char *name, char *err, size_t errlen) {
    char file[128], path[1300];
    snprintf(file, sizeof file, "lengths_%s.dat", name);
    FILE *fp = figure_data(fig, file, path, sizeof path, err, errlen);
    if (!fp) return -1;
    fprintf(fp, "# %s: mean training length of correct / incorrect responses; mean over runs, 95%% CI (t)\n",
            name);
    fprintf(fp, "# step len_correct lo hi len_incorrect lo hi n_runs\n");
    int max_n = 0;
    for (int i = 0; i < n; i++)
        if (group[i] == g && runs[i]->n_steps > max_n) max_n = (int)runs[i]->n_steps;
    double a[256], b[256];
    for (int s = 0; s < max_n; s++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (group[i] == g && s < runs[i]->n_steps) a[m] = runs[i]->len_correct[s], b[m] = runs[i]->len_incorrect[s], m++;
        double ma, ha, mb, hb;
        mean_ci95(a, m, &ma, &ha);
        mean_ci95(b, m, &mb, &hb);
        if (!isfinite(ha)) ha = 0;
        if (!isfinite(hb)) hb = 0;
        fprintf(fp, "%d %.10g %.10g %.10g %.10g %.10g %.10g %d\n", s, ma, ma - ha, ma + ha, mb, mb - hb,
                mb + hb, m);
    }
    if (fclose(fp) != 0) return set_err(err, errlen, "cannot write '%s'", path);
    return 0;
}

int plot_length_bias(Run *const *runs, int n, const PlotOptions *o, char *err, size_t errlen) {
    int group[256];
    const char *names[MAX_OBJECTIVES];
    if (n > 256) return set_err(err, errlen, "at most 256 runs per figure (got %d)", n);
    if (load_all(runs, n, err, errlen) != 0) return -1;
    int ng = group_by_objective(runs, n, group, names, MAX_OBJECTIVES);
    Figure fig;
    if (figure_begin(&fig, o->out, o->formats, 450 * (ng < 2 ? 2 : ng), 800, err, errlen) != 0) return -1;
    int npts[MAX_OBJECTIVES];
    for (int g = 0; g < ng; g++)
        if (write_lenbias(&fig, runs, n, group, g, names[g], &npts[g], err, errlen) != 0 ||
            write_lengths(&fig, runs, n, group, g, names[g], err, errlen) != 0)
            return -1;
    char note[1024], esc[1200];
    runs_progress_note(runs, n, note, sizeof note);
    gp_escape(esc, sizeof esc, note);
    char *body = xmalloc(BODY_CAP);
    size_t len = 0;
    OUT("set datafile missing 'NaN'\nset grid lc rgb '#dddddd'\nset key top right box opaque font ',8'\n"
        "set style fill transparent solid 0.2 noborder\n"
        "set multiplot title \"Length bias: per-token |weight| against response length (top), mean length "
        "over training (bottom)%s%s\" font ',11'\n",
        *esc ? "\\n" : "", esc);
    for (int g = 0; g < ng; g++) {
        char d[1300];
        snprintf(d, sizeof d, "%s/lenbias_%s.dat", fig.data_dir, names[g]);
        OUT("set size %g,0.47\nset origin %g,0.48\n", 1.0 / ng, (double)g / ng);
        // logs without /tokens have no measured |w|: the panel says so and draws what it has
        int runs_g = 0, with_tokens = 0;
        for (int i = 0; i < n; i++)
            if (group[i] == g) runs_g++, with_tokens += runs[i]->has_tokens;
        char tok_note[160] = "";
        if (with_tokens == 0)
            snprintf(tok_note, sizeof tok_note, "\\nno /tokens in %s: closed form only, no measured |w|",
                     runs_g > 1 ? "these logs" : "this log");
        else if (with_tokens < runs_g)
            snprintf(tok_note, sizeof tok_note, "\\nmeasured |w| from %d of %d logs (the others have no /tokens)",
                     with_tokens, runs_g);
        OUT("set title \"%s: |w| per token (%d responses with A != 0)%s\"\nset xlabel 'response length |o| (tokens)'\n"
            "set ylabel 'mean |w| per token'\nset format y '%%.1e'\n",
            objective_title(names[g]), npts[g], tok_note);
        if (npts[g] == 0) {
            OUT("set label 1 'no response with a non-zero advantage' at graph 0.5,0.5 center\n"
                "plot [0:1][0:1] NaN notitle\nunset label 1\n");
            continue;
        }
        OUT("plot ");
        if (with_tokens)
            OUT("\"%s\" u 1:2 w p pt 7 ps 0.8 lc rgb '#1f77b4' title 'correct', "
                "\"%s\" u 1:5 w p pt 5 ps 0.8 lc rgb '#d62728' title 'incorrect', ", d, d);
        OUT("\"%s\" u 1:4 w l dt 2 lc rgb '#1f77b4' title 'c(|o|)|A|, correct', "
            "\"%s\" u 1:7 w l dt 2 lc rgb '#d62728' title 'c(|o|)|A|, incorrect'\n",
            d, d);
    }
    OUT("set format y '%%g'\nset size 1,0.46\nset origin 0,0\nset title 'Mean training length of correct "
        "(solid) and incorrect (dashed) responses'\nset xlabel 'policy iteration step'\n"
        "set ylabel 'tokens'\nset key top left\n");
    int any = 0;
    for (int g = 0; g < ng; g++) {
        char d[1300];
        snprintf(d, sizeof d, "%s/lengths_%s.dat", fig.data_dir, names[g]);
        any |= figure_column_has_data(d, 2) || figure_column_has_data(d, 5);
    }
    OUT(any ? "plot " : "set label 1 'no data in these runs' at graph 0.5,0.5 center\nplot [0:1][0:1] NaN notitle");
    for (int g = 0; any && g < ng; g++) {
        char d[1300];
        snprintf(d, sizeof d, "%s/lengths_%s.dat", fig.data_dir, names[g]);
        const char *col = objective_color(names[g], g);
        const char *t = objective_title(names[g]);
        OUT("%s\"%s\" u 1:3:4 w filledcurves lc rgb '%s' notitle, \"%s\" u 1:2 w l lw 2 lc rgb '%s' title '%s correct', "
            "\"%s\" u 1:6:7 w filledcurves lc rgb '%s' notitle, \"%s\" u 1:5 w l lw 2 dt 2 lc rgb '%s' title '%s incorrect'",
            g ? ", " : "", d, col, d, col, t, d, col, d, col, t);
    }
    OUT("\n");
    int rc = figure_render(&fig, body, err, errlen);
    free(body);
    return rc;
}

// ---------------------------------------------------------------- difficulty bias

static int write_difficulty(const Figure *fig, Run *const *runs, int n, const int *group, int g,
                            const char *name, int *has_sum_curve, char *err, size_t errlen) {
    const Run *r0 = NULL;
    int G = 0;
    for (int i = 0; i < n; i++)
        if (group[i] == g) {
            if (!r0) r0 = runs[i];
            for (int64_t q = 0; q < runs[i]->n_quest; q++) G = G > runs[i]->q_group_size[q] ? G : (int)runs[i]->q_group_size[q];
        }
    if (G <= 0) G = r0->group_size > 0 ? r0->group_size : 8;
    char file[128], path[1300];
    // raw points, and per-k accumulations
    snprintf(file, sizeof file, "questions_%s.dat", name);
    FILE *fp = figure_data(fig, file, path, sizeof path, err, errlen);
    if (!fp) return -1;
    fprintf(fp, "# %s: one row per question and step: p (group accuracy) mean_abs_adv sum_abs_w\n", name);
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        if (group[i] == g) total += runs[i]->n_quest;
    double **A = xcalloc((size_t)G + 1, sizeof(double *)), **W = xcalloc((size_t)G + 1, sizeof(double *));
    int *cnt = xcalloc((size_t)G + 1, sizeof(int));
    for (int k = 0; k <= G; k++) {
        A[k] = xmalloc(((size_t)total + 1) * sizeof(double));
        W[k] = xmalloc(((size_t)total + 1) * sizeof(double));
    }
    for (int i = 0; i < n; i++) {
        if (group[i] != g) continue;
        const Run *r = runs[i];
        for (int64_t q = 0; q < r->n_quest; q++) {
            double p = r->q_reward_mean[q];
            fprintf(fp, "%.6g %.10g %.10g\n", p, r->q_mean_abs_adv[q], r->q_sum_abs_w[q]);
            int k = (int)lround(p * r->q_group_size[q]);
            if (r->q_group_size[q] != G || k < 0 || k > G) continue;  // mixed group sizes: raw points only
            A[k][cnt[k]] = r->q_mean_abs_adv[q];
            W[k][cnt[k]] = r->q_sum_abs_w[q];
            cnt[k]++;
        }
    }
    if (fclose(fp) != 0) return set_err(err, errlen, "cannot write '%s'", path);
    snprintf(file, sizeof file, "difficulty_%s.dat", name);
    fp = figure_data(fig, file, path, sizeof path, err, errlen);
    if (!fp) return -1;
    fprintf(fp, "# %s: per group accuracy p = k/%d: mean over questions with a 95%% CI (t)\n", name, G);
    fprintf(fp, "# p mean_abs_adv lo hi sum_abs_w lo hi n_questions\n");
    for (int k = 0; k <= G; k++) {
        if (!cnt[k]) continue;
        double ma, ha, mw, hw;
        mean_ci95(A[k], cnt[k], &ma, &ha);
        mean_ci95(W[k], cnt[k], &mw, &hw);
        if (!isfinite(ha)) ha = 0;
        if (!isfinite(hw)) hw = 0;
        fprintf(fp, "%.6g %.10g %.10g %.10g %.10g %.10g %.10g %d\n", (double)k / G, ma, ma - ha, ma + ha, mw,
                mw - hw, mw + hw, cnt[k]);
    }
    for (int k = 0; k <= G; k++) free(A[k]), free(W[k]);
    free(A), free(W), free(cnt);
    if (fclose(fp) != 0) return set_err(err, errlen, "cannot write '%s'", path);

    // closed forms
    int scale_std = strcmp(r0->scale, "group_std") == 0, loo = strcmp(r0->baseline, "leave_one_out") == 0;
    int closed = scale_std || strcmp(r0->scale, "none") == 0;  // batch_std has no per-group form
    *has_sum_curve = closed && strcmp(r0->aggregation, "seq_mean_token_mean") == 0 && r0->minibatch_size > 0;
    snprintf(file, sizeof file, "closed_%s.dat", name);
    fp = figure_data(fig, file, path, sizeof path, err, errlen);
    if (!fp) return -1;
    fprintf(fp, "# %s: closed forms for G = %d, scale %s (ddof %d), baseline %s%s\n# p mean_abs_adv sum_abs_w\n",
            name, G, r0->scale, r0->std_ddof, r0->baseline,
            closed ? "" : ": none for batch_std (NaN)");
    for (int i = 0; i <= 200; i++) {
        double p = i / 200.0, a = closed ? closed_mean_abs_adv(p, G, scale_std, r0->std_ddof, loo) : NAN;
        fprintf(fp, "%.4f %.10g %.10g\n", p, a, *has_sum_curve ? G * a / r0->minibatch_size : NAN);
    }
    if (fclose(fp) != 0) return set_err(err, errlen, "cannot write '%s'", path);
    snprintf(file, sizeof file, "examples_%s.dat", name);
    fp = figure_data(fig, file, path, sizeof path, err, errlen);
    if (!fp) return -1;
    fprintf(fp, "# %s: the example groups (1,1,0,0) and (1,1,1,0), G = 4: p mean_abs_adv label\n", name);
    if (closed) {
        fprintf(fp, "0.5 %.10g \"(1,1,0,0)\"\n", closed_mean_abs_adv(0.5, 4, scale_std, r0->std_ddof, loo));
        fprintf(fp, "0.75 %.10g \"(1,1,1,0)\"\n", closed_mean_abs_adv(0.75, 4, scale_std, r0->std_ddof, loo));
    }
    if (fclose(fp) != 0) return set_err(err, errlen, "cannot write '%s'", path);
    return 0;
}

int plot_difficulty_bias(Run *const *runs, int n, const PlotOptions *o, char *err, size_t errlen) {
    int group[256];
    const char *names[MAX_OBJECTIVES];
    if (n > 256) return set_err(err, errlen, "at most 256 runs per figure (got %d)", n);
    if (load_all(runs, n, err, errlen) != 0) return -1;
    int ng = group_by_objective(runs, n, group, names, MAX_OBJECTIVES);
    int64_t nq = 0;
    for (int i = 0; i < n; i++) nq += runs[i]->n_quest;
    if (nq == 0) return set_err(err, errlen, "%s: /questions has no rows: nothing to plot", runs[0]->path);
    Figure fig;
    if (figure_begin(&fig, o->out, o->formats, 1500, 620, err, errlen) != 0) return -1;
    int sum_curve[MAX_OBJECTIVES];
    for (int g = 0; g < ng; g++)
        if (write_difficulty(&fig, runs, n, group, g, names[g], &sum_curve[g], err, errlen) != 0) return -1;
    char note[1024], esc[1200];
    runs_progress_note(runs, n, note, sizeof note);
    gp_escape(esc, sizeof esc, note);
    char *body = xmalloc(BODY_CAP);
    size_t len = 0;
    OUT("set datafile missing 'NaN'\nset grid lc rgb '#dddddd'\nset key top left box opaque font ',8'\n"
        "set xlabel 'empirical accuracy p of the question in its step'\nset xrange [-0.03:1.03]\n"
        "set multiplot layout 1,2 title \"Difficulty bias: a question's weight in the update against its "
        "accuracy (points: questions; circles: mean per p, 95%% CI; lines: closed forms)%s%s\" font ',11'\n",
        *esc ? "\\n" : "", esc);
    for (int panel = 0; panel < 2; panel++) {
        if (panel == 0) OUT("set title 'mean |advantage| of the group'\nset ylabel 'mean |A|'\nplot ");
        else OUT("set title 'sum of the group tokens |w| (first-epoch weights)'\nset ylabel 'sum |w|'\nplot ");
        for (int g = 0; g < ng; g++) {
            const char *col = objective_color(names[g], g), *t = objective_title(names[g]);
            char q[1300], d[1300], c[1300], e[1300];
            snprintf(q, sizeof q, "%s/questions_%s.dat", fig.data_dir, names[g]);
            snprintf(d, sizeof d, "%s/difficulty_%s.dat", fig.data_dir, names[g]);
            snprintf(c, sizeof c, "%s/closed_%s.dat", fig.data_dir, names[g]);
            snprintf(e, sizeof e, "%s/examples_%s.dat", fig.data_dir, names[g]);
            int yc = panel == 0 ? 2 : 5;
            OUT("%s\"%s\" u 1:%d w p pt 7 ps 0.25 lc rgb '%s' notitle, "
                "\"%s\" u 1:%d:%d:%d w yerrorbars pt 6 ps 1.2 lw 1.5 lc rgb '%s' title '%s'",
                g ? ", " : "", q, panel == 0 ? 2 : 3, col, d, yc, yc + 1, yc + 2, col, t);
            if (panel == 0 || sum_curve[g])
                OUT(", \"%s\" u 1:%d w l lw 1.5 dt 2 lc rgb '%s' title '%s closed form'", c, panel == 0 ? 2 : 3,
                    col, t);
            if (panel == 0)
                OUT(", \"%s\" u 1:2 w p pt 9 ps 1.6 lc rgb '%s' notitle, \"%s\" u 1:2:3 w labels offset 0,1.2 "
                    "font ',8' tc rgb '%s' notitle", e, col, e, col);
        }
        OUT("\n");
    }
    int rc = figure_render(&fig, body, err, errlen);
    free(body);
    return rc;
}
