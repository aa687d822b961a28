// plot_compare.c: `grpolab plot objectives` and the summary's lines for the counterfactual
// diagnostics of diagnostics.compare (/compare of a train log, docs/hdf5-schema.md): every
// compared objective's statistics on the same rollouts and parameters, against the step, at
// each point of the step (/compare/point: rho = 1, the last minibatch, the extra passes).
//
// Data files (columns; NaN where no run has a value): compare_<objective>_p<point>.dat
//   step  bias_cosine grad_norm clip_frac gate_mean sum_abs_weight_correct
//         sum_abs_weight_incorrect weighted_length_correct weighted_length_incorrect
//         abs_log_ratio  n_runs
// each statistic the mean over the given runs that compared that objective at that step and
// point; clip_frac is clip_frac_low + clip_frac_high.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "../sim/io/logschema.h"
#include "../sim/io/runlog.h"
#include "analysis.h"

#define N_STATS 9
#define MAX_POINTS 8  // points drawn: rho = 1, the last minibatch and up to 6 extra passes
// the statistics as columns of /compare (clip_frac: the sum of the low and high columns)
static const char *const STAT_COLS[N_STATS] = {"bias_cosine", "grad_norm", "clip_frac", "gate_mean",
                                               "sum_abs_weight_correct", "sum_abs_weight_incorrect",
                                               "weighted_length_correct", "weighted_length_incorrect",
                                               "abs_log_ratio"};
static const char *const STAT_TITLES[N_STATS] = {
    "Cosine with the unbiased gradient", "Gradient norm", "Share of tokens clipped (low + high)",
    "Gate: mean w / (c A)", "Sum |w|, correct responses", "Sum |w|, incorrect responses",
    "|w|-weighted length, correct", "|w|-weighted length, incorrect",
    "Mean |log rho| (the same for every objective)"};
enum { STAT_CLIP = 2, STAT_LOG_RATIO = 8 };

// /compare of one run: its rows (step, point, objective index, the statistics) and the
// objective names. A log written before /compare had a point has every row at rho = 1 and
// NaN for the statistics it lacks.
typedef struct {
    int64_t n;
    double *step, *point, *objective, *stat[N_STATS];
    char names[16][32];
    int n_names;
} CompareTable;

static void table_free(CompareTable *t) {
    free(t->step);
    free(t->point);
    free(t->objective);
    for (int s = 0; s < N_STATS; s++) free(t->stat[s]);
}

// Column ds of rd, or (if the log has none: written before it existed) n NaNs.
static double *column_or_nan(RunLogReader *rd, const char *ds, int64_t n, int64_t *m, char *err,
                             size_t errlen) {
    if (runlog_reader_has(rd, ds)) return runlog_read_column(rd, ds, m, err, errlen);
    double *x = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) x[i] = NAN;
    *m = n;
    return x;
}

// 1 and the table if the run has /compare, 0 if not, -1 with a message on a read error.
static int table_load(const char *path, CompareTable *t, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    RunLogReader *rd = runlog_reader_open(path, err, errlen);
    if (!rd) return -1;
    if (!runlog_reader_has(rd, "compare/step") || !runlog_reader_has_attr(rd, "diagnostics.compare")) {
        runlog_reader_close(rd);
        return 0;
    }
    char *list = runlog_read_attr_str(rd, "diagnostics.compare", err, errlen);
    int ok = list != NULL;
    for (const char *p = list; ok && *p && t->n_names < 16;) {
        size_t len = strcspn(p, ",");
        snprintf(t->names[t->n_names++], sizeof t->names[0], "%.*s", (int)len, p);
        p += len + (p[len] == ',');
    }
    free(list);
    int64_t m;
    if (ok) ok = (t->step = runlog_read_column(rd, "compare/step", &t->n, err, errlen)) != NULL;
    if (ok) ok = (t->objective = runlog_read_column(rd, "compare/objective", &m, err, errlen)) != NULL;
    if (ok) ok = (t->point = column_or_nan(rd, "compare/point", t->n, &m, err, errlen)) != NULL;
    if (ok && !runlog_reader_has(rd, "compare/point"))
        for (int64_t r = 0; r < t->n; r++) t->point[r] = COMPARE_POINT_RHO1;
    for (int s = 0; ok && s < N_STATS; s++) {
        char ds[64];
        snprintf(ds, sizeof ds, "compare/%s", s == STAT_CLIP ? "clip_frac_low" : STAT_COLS[s]);
        ok = (t->stat[s] = column_or_nan(rd, ds, t->n, &m, err, errlen)) != NULL;
        if (ok && m < t->n) t->n = m;  // a run still being written: the shortest column
        if (ok && s == STAT_CLIP) {
            double *high = column_or_nan(rd, "compare/clip_frac_high", t->n, &m, err, errlen);
            ok = high != NULL;
            if (ok && m < t->n) t->n = m;
            for (int64_t r = 0; ok && r < t->n; r++) t->stat[s][r] += high[r];
            free(high);
        }
    }
    runlog_reader_close(rd);
    if (!ok) {
        table_free(t);
        return -1;
    }
    return 1;
}

// The objectives compared by any of the runs, in order of first appearance.
static int all_names(const CompareTable *t, int n, char names[][32], int max) {
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < t[i].n_names; j++) {
            int seen = 0;
            for (int q = 0; q < k; q++) seen |= strcmp(names[q], t[i].names[j]) == 0;
            if (!seen && k < max) snprintf(names[k++], 32, "%s", t[i].names[j]);
        }
    return k;
}

// Mean of statistic s of objective name at (step, point) over the runs (NaN if none); *count
// the runs.
static double mean_at(const CompareTable *t, int n, const char *name, int step, int point, int s,
                      int *count) {
    double sum = 0;
    int c = 0;
    for (int i = 0; i < n; i++)
        for (int64_t r = 0; r < t[i].n; r++) {
            int j = (int)t[i].objective[r];
            if ((int)t[i].step[r] != step || (int)t[i].point[r] != point || j < 0 ||
                j >= t[i].n_names || strcmp(t[i].names[j], name) != 0)
                continue;
            if (isfinite(t[i].stat[s][r])) sum += t[i].stat[s][r], c++;
        }
    *count = c;
    return c ? sum / c : NAN;
}

static int load_tables(Run *const *runs, int n, CompareTable *t, int *n_with, char *err, size_t errlen) {
    *n_with = 0;
    for (int i = 0; i < n; i++) {
        int rc = table_load(runs[i]->path, &t[*n_with], err, errlen);
        if (rc < 0) return -1;
        *n_with += rc;
    }
    return 0;
}

// The points with a value in any run (up to MAX_POINTS), into has[]; returns how many.
static int points_present(const CompareTable *t, int n, int has[MAX_POINTS]) {
    int k = 0;
    memset(has, 0, MAX_POINTS * sizeof(int));
    for (int i = 0; i < n; i++)
        for (int64_t r = 0; r < t[i].n; r++) {
            int p = (int)t[i].point[r];
            if (p >= 0 && p < MAX_POINTS && isfinite(t[i].stat[0][r]) && !has[p]) has[p] = 1, k++;
        }
    return k;
}

// Writes one objective's data files: per point p present, its statistics per step
// (compare_<name>_p<p>.dat), and the profile over the points (compare_points_<name>.dat:
// point, x (the point shifted by `dodge` so that objectives that coincide stay visible), each
// statistic's mean over the steps with a value, steps). 0, or -1 with a message.
static int write_data(const Figure *fig, const CompareTable *t, int nt, const char *name,
                      const int *has, int max_step, double dodge, char *err, size_t errlen) {
    char file[96], path[1300], label[32];
    snprintf(file, sizeof file, "compare_points_%s.dat", name);
    FILE *prof = figure_data(fig, file, path, sizeof path, err, errlen);
    if (!prof) return -1;
    fprintf(prof, "# %s: each statistic's mean over the steps at each point\n# point x", name);
    for (int s = 0; s < N_STATS; s++) fprintf(prof, " %s", STAT_COLS[s]);
    fprintf(prof, " n_steps\n");
    int rc = 0;
    for (int p = 0; rc == 0 && p < MAX_POINTS; p++) {
        if (!has[p]) continue;
        snprintf(file, sizeof file, "compare_%s_p%d.dat", name, p);
        char ppath[1300];
        FILE *fp = figure_data(fig, file, ppath, sizeof ppath, err, errlen);
        if (!fp) {
            rc = -1;
            break;
        }
        compare_point_label(p, label, sizeof label);
        fprintf(fp, "# %s at point %d (%s): mean over the runs that compared it\n# step", name, p, label);
        for (int s = 0; s < N_STATS; s++) fprintf(fp, " %s", STAT_COLS[s]);
        fprintf(fp, " n_runs\n");
        double sum[N_STATS] = {0};
        int cnt[N_STATS] = {0}, steps = 0;
        for (int step = 0; step <= max_step; step++) {
            int c = 0, cmax = 0;
            fprintf(fp, "%d", step);
            for (int s = 0; s < N_STATS; s++) {
                double v = mean_at(t, nt, name, step, p, s, &c);
                fprintf(fp, " %.10g", v);
                if (isfinite(v)) sum[s] += v, cnt[s]++;
                cmax = c > cmax ? c : cmax;
            }
            fprintf(fp, " %d\n", cmax);
            steps += cmax > 0;
        }
        if (fclose(fp) != 0) rc = set_err(err, errlen, "cannot write '%s'", ppath);
        fprintf(prof, "%d %.4f", p, p + dodge);
        for (int s = 0; s < N_STATS; s++) fprintf(prof, " %.10g", cnt[s] ? sum[s] / cnt[s] : NAN);
        fprintf(prof, " %d\n", steps);
    }
    if (fclose(prof) != 0 && rc == 0) rc = set_err(err, errlen, "cannot write '%s'", path);
    return rc;
}

// 1 if column col of any objective's data file (per step of point p, or the profile with p
// < 0) has a finite value.
static int any_data(const Figure *fig, char names[][32], int nn, int p, int col) {
    int any = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < nn; k++) {
        char d[1700];
        if (p < 0) snprintf(d, sizeof d, "%s/compare_points_%s.dat", fig->data_dir, names[k]);
        else snprintf(d, sizeof d, "%s/compare_%s_p%d.dat", fig->data_dir, names[k], p);
        any |= figure_column_range(d, col, &lo, &hi) > 0;
    }
    return any;
}

// A panel without data (e.g. no correct response in these steps) that says so.
#define NO_DATA_PANEL "set label 1 'no data in these runs' at graph 0.5,0.5 center\nunset key\n" \
                      "plot [0:1][0:1] NaN notitle\nunset label 1\n"

// The panels over the points: each statistic's mean over the steps against the point.
static const int PROFILE_STATS[6] = {0, 1, 2, 3, 6, 7};

int plot_objectives(Run *const *runs, int n, const PlotOptions *o, char *err, size_t errlen) {
    if (n > 64) return set_err(err, errlen, "at most 64 runs per figure (got %d)", n);
    CompareTable t[64];
    int nt;
    if (load_tables(runs, n, t, &nt, err, errlen) != 0) return -1;
    if (nt == 0)
        return set_err(err, errlen, "none of the runs has a /compare table (train with "
                       "diagnostics.compare = grpo,dr_grpo,...)");
    char names[16][32];
    int nn = all_names(t, nt, names, 16), max_step = -1, rc = 0, has[MAX_POINTS], far = 0;
    points_present(t, nt, has);
    for (int p = 0; p < MAX_POINTS; p++) far = has[p] ? p : far;  // the farthest point
    for (int i = 0; i < nt; i++)
        for (int64_t r = 0; r < t[i].n; r++) max_step = (int)fmax(max_step, t[i].step[r]);
    Figure fig;
    if (figure_begin(&fig, o->out, o->formats, 1800, 1200, err, errlen) != 0) rc = -1;
    for (int k = 0; rc == 0 && k < nn; k++)
        rc = write_data(&fig, t, nt, names[k], has, max_step, 0.06 * (k - (nn - 1) / 2.0), err, errlen);
    if (rc == 0) {
        size_t cap = 1 << 17, len = 0;
        char *body = xmalloc(cap), far_label[32], tics[1024] = "";
        compare_point_label(far, far_label, sizeof far_label);
        // the points' tics: name and the mean |log rho| there (how far off-policy it is)
        for (int p = 0, tl = 0; p < MAX_POINTS; p++) {
            if (!has[p]) continue;
            char label[32], d[1700];
            compare_point_label(p, label, sizeof label);
            snprintf(d, sizeof d, "%s/compare_%s_p%d.dat", fig.data_dir, names[0], p);
            double alr = NAN;
            FILE *fp = fopen(d, "r");
            if (fp) {  // the mean of its abs_log_ratio column
                char line[4096];
                double sum = 0;
                int c = 0;
                while (fgets(line, sizeof line, fp)) {
                    if (line[0] == '#') continue;
                    char *q = line;
                    double v = NAN;
                    for (int col = 0; col <= STAT_LOG_RATIO + 1 && *q; col++) v = strtod(q, &q);
                    if (isfinite(v)) sum += v, c++;
                }
                fclose(fp);
                alr = c ? sum / c : NAN;
            }
            tl += snprintf(tics + tl, sizeof tics - (size_t)tl, "%s\"%s\\n|log rho| %.4f\" %d",
                           tl ? ", " : "", label, alr, p);
        }
#define OUT(...) (len += (size_t)snprintf(body + len, cap - len, __VA_ARGS__))
        OUT("set datafile missing 'NaN'\nset key top right box opaque samplen 2 font ',8'\n"
            "set grid lc rgb '#dddddd'\n"
            "set multiplot layout 3,3 title \"Objectives on the same rollouts (%d run%s): top row per step, "
            "below the mean over the steps at each point (rho=1, then off-policy)\" font ',11'\n",
            nt, nt == 1 ? "" : "s");
        // top row: per step, the cosine at rho = 1 and at the farthest point, the clipped
        // share at the farthest point
        const int top_stat[3] = {0, 0, STAT_CLIP}, top_point[3] = {0, far, far};
        OUT("set xlabel 'policy iteration step'\n");
        for (int q = 0; q < 3; q++) {
            int s = top_stat[q], p = top_point[q];
            char label[32];
            compare_point_label(p, label, sizeof label);
            OUT("set title '%s at %s, per step'\n%s\nset autoscale\n", s == 0 ? "Cosine with the unbiased gradient"
                : "Share of tokens clipped", label, q == 0 ? "set key" : "unset key");
            if (!any_data(&fig, names, nn, p, s + 2)) {
                OUT(NO_DATA_PANEL);
                continue;
            }
            OUT("plot ");
            for (int k = 0; k < nn; k++) {
                char name[64];
                gp_escape(name, sizeof name, names[k]);
                OUT("%s\"%s/compare_%s_p%d.dat\" u 1:%d w lp pt %d ps 0.5 lw 2 dt %d lc rgb '%s' title \"%s\"",
                    k ? ", " : "", fig.data_dir, names[k], p, s + 2, 5 + k % 4, 1 + k / 4 % 4,
                    objective_color(names[k], k), name);
            }
            OUT("\n");
        }
        // below: each statistic against the point
        OUT("set xlabel 'point (mean over the steps)'\nset xtics (%s) font ',7'\nset xrange [-0.5:%g]\n"
            "unset key\n", tics, far + 0.5);
        for (int q = 0; q < 6; q++) {
            int s = PROFILE_STATS[q];
            OUT("set title '%s'\nset autoscale y\n", STAT_TITLES[s]);
            if (!any_data(&fig, names, nn, -1, s + 3)) {
                OUT(NO_DATA_PANEL "set xrange [-0.5:%g]\n", far + 0.5);
                continue;
            }
            OUT("plot ");
            for (int k = 0; k < nn; k++)
                OUT("%s\"%s/compare_points_%s.dat\" u 2:%d w lp pt %d ps 1 lw 2 dt %d lc rgb '%s' notitle",
                    k ? ", " : "", fig.data_dir, names[k], s + 3, 5 + k % 4, 1 + k / 4 % 4,
                    objective_color(names[k], k));
            OUT("\n");
        }
#undef OUT
        rc = figure_render(&fig, body, err, errlen);
        free(body);
    }
    for (int i = 0; i < nt; i++) table_free(&t[i]);
    return rc;
}

void summary_print_compare(FILE *f, Run *const *runs, int n, int md) {
    char err[512];
    // the statistics of the table: their STAT_COLS index and header
    const int col[7] = {0, 1, 2, 3, 8, 6, 7};
    const int ncol = 7;
    for (int i = 0; i < n && i < 64; i++) {
        CompareTable t;
        if (table_load(runs[i]->path, &t, err, sizeof err) != 1) continue;
        int has[MAX_POINTS];
        points_present(&t, 1, has);
        fprintf(f, "\n%sObjectives compared on the rollouts of %s (diagnostics.compare; means over the "
                "steps with a value; point: rho=1 = first minibatch before the update, then off-policy)\n\n",
                md ? "### " : "", runs[i]->path);
        if (md)
            fprintf(f, "| objective | point | bias cosine | grad norm | clipped | gate | mean \\|log rho\\| | "
                    "\\|w\\|-weighted length, correct | incorrect |\n|---|---|---|---|---|---|---|---|---|\n");
        else
            fprintf(f, "%-14s %-15s %9s %10s %8s %8s %9s %12s %14s\n", "objective", "point", "bias_cos",
                    "grad_norm", "clipped", "gate", "|log_rho|", "wlen_correct", "wlen_incorrect");
        for (int j = 0; j < t.n_names; j++)
            for (int p = 0; p < MAX_POINTS; p++) {
                if (!has[p]) continue;
                double v[8] = {0}, c[8] = {0};
                for (int64_t r = 0; r < t.n; r++)
                    for (int q = 0; q < ncol; q++)
                        if ((int)t.objective[r] == j && (int)t.point[r] == p && isfinite(t.stat[col[q]][r]))
                            v[q] += t.stat[col[q]][r], c[q]++;
                for (int q = 0; q < ncol; q++) v[q] = c[q] ? v[q] / c[q] : NAN;
                char label[32];
                compare_point_label(p, label, sizeof label);
                if (md)
                    fprintf(f, "| %s | %s | %.4f | %.4g | %.4f | %.4f | %.4f | %.1f | %.1f |\n", t.names[j],
                            label, v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
                else
                    fprintf(f, "%-14s %-15s %9.4f %10.4g %8.4f %8.4f %9.4f %12.1f %14.1f\n", t.names[j],
                            label, v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
            }
        table_free(&t);
    }
}
