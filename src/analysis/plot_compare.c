// plot_compare.c: `grpolab plot objectives` and the summary's lines for the counterfactual
// diagnostics of diagnostics.compare (/compare of a train log, docs/hdf5-schema.md): every
// compared objective's statistics on the same rollouts and parameters, against the step.
//
// Data files (columns; NaN where no run has a value): compare_<objective>.dat
//   step  bias_cosine grad_norm sum_abs_weight_correct sum_abs_weight_incorrect
//         weighted_length_correct weighted_length_incorrect  n_runs
// each statistic the mean over the given runs that compared that objective at that step.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "../sim/runlog.h"
#include "analysis.h"

#define N_STATS 6
static const char *const STAT_COLS[N_STATS] = {"bias_cosine", "grad_norm", "sum_abs_weight_correct",
                                               "sum_abs_weight_incorrect", "weighted_length_correct",
                                               "weighted_length_incorrect"};
static const char *const STAT_TITLES[N_STATS] = {
    "Cosine with the unbiased gradient", "Gradient norm", "Sum |w|, correct responses",
    "Sum |w|, incorrect responses", "|w|-weighted length, correct", "|w|-weighted length, incorrect"};

// /compare of one run: its rows (step, objective index, the statistics) and the objective names.
typedef struct {
    int64_t n;
    double *step, *objective, *stat[N_STATS];
    char names[16][32];
    int n_names;
} CompareTable;

static void table_free(CompareTable *t) {
    free(t->step);
    free(t->objective);
    for (int s = 0; s < N_STATS; s++) free(t->stat[s]);
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
    for (int s = 0; ok && s < N_STATS; s++) {
        char ds[64];
        snprintf(ds, sizeof ds, "compare/%s", STAT_COLS[s]);
        ok = (t->stat[s] = runlog_read_column(rd, ds, &m, err, errlen)) != NULL;
        if (ok && m < t->n) t->n = m;  // a run still being written: the shortest column
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

// Mean of statistic s of objective name at step over the runs (NaN if none); *count the runs.
static double mean_at(const CompareTable *t, int n, const char *name, int step, int s, int *count) {
    double sum = 0;
    int c = 0;
    for (int i = 0; i < n; i++)
        for (int64_t r = 0; r < t[i].n; r++) {
            int j = (int)t[i].objective[r];
            if ((int)t[i].step[r] != step || j < 0 || j >= t[i].n_names || strcmp(t[i].names[j], name) != 0)
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

int plot_objectives(Run *const *runs, int n, const PlotOptions *o, char *err, size_t errlen) {
    if (n > 64) return set_err(err, errlen, "at most 64 runs per figure (got %d)", n);
    CompareTable t[64];
    int nt;
    if (load_tables(runs, n, t, &nt, err, errlen) != 0) return -1;
    if (nt == 0)
        return set_err(err, errlen, "none of the runs has a /compare table (train with "
                       "diagnostics.compare = grpo,dr_grpo,...)");
    char names[16][32];
    int nn = all_names(t, nt, names, 16), max_step = -1, rc = 0;
    for (int i = 0; i < nt; i++)
        for (int64_t r = 0; r < t[i].n; r++) max_step = (int)fmax(max_step, t[i].step[r]);
    Figure fig;
    if (figure_begin(&fig, o->out, o->formats, 1500, 900, err, errlen) != 0) rc = -1;
    for (int k = 0; rc == 0 && k < nn; k++) {
        char file[96], path[1300];
        snprintf(file, sizeof file, "compare_%s.dat", names[k]);
        FILE *fp = figure_data(&fig, file, path, sizeof path, err, errlen);
        if (!fp) {
            rc = -1;
            break;
        }
        fprintf(fp, "# %s: mean over the runs that compared it\n# step", names[k]);
        for (int s = 0; s < N_STATS; s++) fprintf(fp, " %s", STAT_COLS[s]);
        fprintf(fp, " n_runs\n");
        for (int step = 0; step <= max_step; step++) {
            int c = 0, cmax = 0;
            fprintf(fp, "%d", step);
            for (int s = 0; s < N_STATS; s++) {
                fprintf(fp, " %.10g", mean_at(t, nt, names[k], step, s, &c));
                cmax = c > cmax ? c : cmax;
            }
            fprintf(fp, " %d\n", cmax);
        }
        if (fclose(fp) != 0) rc = set_err(err, errlen, "cannot write '%s'", path);
    }
    if (rc == 0) {
        size_t cap = 65536, len = 0;
        char *body = xmalloc(cap);
#define OUT(...) (len += (size_t)snprintf(body + len, cap - len, __VA_ARGS__))
        OUT("set datafile missing 'NaN'\nset key top right box opaque samplen 2 font ',8'\n"
            "set grid lc rgb '#dddddd'\nset xlabel 'policy iteration step'\n"
            "set multiplot layout 2,3 title \"Objectives on the same rollouts (%d run%s)\" font ',11'\n",
            nt, nt == 1 ? "" : "s");
        for (int s = 0; s < N_STATS; s++) {
            OUT("set title '%s'\n", STAT_TITLES[s]);
            int any = 0;
            double lo = INFINITY, hi = -INFINITY;
            for (int k = 0; k < nn; k++) {
                char d[1700];
                snprintf(d, sizeof d, "%s/compare_%s.dat", fig.data_dir, names[k]);
                any |= figure_column_range(d, s + 2, &lo, &hi) > 0;
            }
            if (!any) {  // e.g. no correct response in these steps: a panel that says so
                OUT("set label 1 'no data in these runs' at graph 0.5,0.5 center\nset key off\n"
                    "plot [0:1][0:1] NaN notitle\nset key on\nunset label 1\n");
                continue;
            }
            if (hi - lo == 0.0) OUT("set yrange [%.17g:%.17g]\n", lo - 1.0, lo + 1.0);
            else OUT("set autoscale y\n");
            OUT("plot ");
            for (int k = 0; k < nn; k++) {
                char title[64];
                gp_escape(title, sizeof title, names[k]);
                OUT("%s\"%s/compare_%s.dat\" u 1:%d w lp pt %d ps 0.5 lw 2 dt %d lc rgb '%s' title \"%s\"",
                    k ? ", " : "", fig.data_dir, names[k], s + 2, 5 + k % 4, 1 + k / 4 % 4,
                    objective_color(names[k], k), title);
            }
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
    for (int i = 0; i < n && i < 64; i++) {
        CompareTable t;
        if (table_load(runs[i]->path, &t, err, sizeof err) != 1) continue;
        fprintf(f, "\n%sObjectives compared on the rollouts of %s (diagnostics.compare; means over the "
                "steps with a value)\n\n", md ? "### " : "", runs[i]->path);
        if (md) fprintf(f, "| objective | bias cosine | grad norm | |w|-weighted length, correct | incorrect |\n|---|---|---|---|---|\n");
        else fprintf(f, "%-22s %11s %11s %16s %16s\n", "objective", "bias_cos", "grad_norm", "wlen_correct", "wlen_incorrect");
        for (int j = 0; j < t.n_names; j++) {
            double v[4] = {0}, c[4] = {0};
            const int col[4] = {0, 1, 4, 5};
            for (int64_t r = 0; r < t.n; r++)
                for (int q = 0; q < 4; q++)
                    if ((int)t.objective[r] == j && isfinite(t.stat[col[q]][r])) v[q] += t.stat[col[q]][r], c[q]++;
            for (int q = 0; q < 4; q++) v[q] = c[q] ? v[q] / c[q] : NAN;
            if (md) fprintf(f, "| %s | %.4f | %.4g | %.1f | %.1f |\n", t.names[j], v[0], v[1], v[2], v[3]);
            else fprintf(f, "%-22s %11.4f %11.4g %16.1f %16.1f\n", t.names[j], v[0], v[1], v[2], v[3]);
        }
        table_free(&t);
    }
}
