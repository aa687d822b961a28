// plot_sensitivity.c: `grpolab plot sensitivity --axis KEY`: the map of where GRPO's length
// bias shows (docs/cli.md, "Figures and summary"). Train run logs and base-model eval logs are
// grouped by the value of a numeric config key; per value the finding's statistics come from
// finding_verdict (verdict.h) on that value's runs, so that the map and the summary's checks
// are one computation:
//   eval ratio    check 1's: GRPO / Dr. GRPO eval length of incorrect responses over the seed
//                 pairs, geometric mean and 95% CI
//   slopes        check 2's: the slope of each objective's seed-mean incorrect training length
//                 over the last half, tokens per 100 steps, regression CI
//   final reward  run_figures' last-tenth reward, mean and 95% CI over each objective's runs
//   cut share     the share of the final evaluation's incorrect responses that the budget cut
//                 (/eval/truncation_incorrect of the log), mean over each objective's runs
//   shows         whether checks 1 and 2 both pass at the value: the criterion of "the bias
//                 shows there" (docs/results.md, "Where it shows")
// and of the base model, from `grpolab eval --out` logs: greedy (temperature 0): its incorrect
// responses' mean length and the share of them cut by the budget; sampled with
// --failure-profile: the redos after a rejected step and the share of them that are right.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "../sim/io/config.h"
#include "../sim/io/runlog.h"
#include "analysis.h"
#include "stats.h"
#include "verdict.h"

enum { MAX_VALUES = 32, MAX_FILES = 1024 };

// A base model's eval log (`grpolab eval --out`), what the map reads of it.
typedef struct {
    char *path;
    double value;        // the axis value
    int greedy;          // temperature 0
    double n_incorrect;  // benchmark responses with reward 0 (train_pool left out)
    double cut, len_incorrect, accuracy;  // share of them cut by the budget; their mean length;
                                          // accuracy pooled over the benchmarks' responses
    int has_redos;       // the log holds a failure profile's redo counts
    double redos, redos_right;
} BaseEval;

typedef struct {
    double value;
    int runs_at, n_runs;     // the value's train runs: runs[runs_at .. runs_at + n_runs)
    const BaseEval *greedy, *sampled;
    FindingVerdict verdict;
    double reward[2][3];     // GRPO, Dr. GRPO: mean, lo, hi of the final training reward
    double len_i[2], cut[2]; // GRPO, Dr. GRPO: final eval length of incorrect responses and the
                             // share of them cut by the budget, means over the runs
    int n_obj[2];            // GRPO's and Dr. GRPO's runs
} AxisPoint;

// The numeric value of key in INI text (a stored config); -1 and a message if the text does not
// read back or the key is missing.
static int config_value(const char *text, const char *what, const char *key, double *v, char *err,
                        size_t errlen) {
    char e[1024];
    Config *c = config_from_stored(text, what, e, sizeof e);
    if (!c) return set_err(err, errlen, "%s", e);
    *v = config_number(c, key);
    config_free(c);
    return 0;
}

static char *attr(RunLogReader *rd, const char *path, const char *name, char *err, size_t errlen) {
    char e[512];
    char *s = runlog_read_attr_str(rd, name, e, sizeof e);
    if (!s) set_err(err, errlen, "%s: %s", path, e);
    return s;
}

static int attr_num(RunLogReader *rd, const char *path, const char *name, double *v, char *err, size_t errlen) {
    char *s = attr(rd, path, name, err, errlen), *end;
    if (!s) return -1;
    *v = strtod(s, &end);
    int bad = end == s || *end;
    if (bad) set_err(err, errlen, "%s: root attribute %s is '%s', expected a number", path, name, s);
    free(s);
    return bad ? -1 : 0;
}

// The index of train_pool in a log's comma-separated benchmark names (-1: none).
static int train_pool_index(const char *names) {
    int idx = 0;
    for (const char *p = names; p && *p; idx++) {
        size_t len = strcspn(p, ",");
        if (len == 10 && strncmp(p, "train_pool", 10) == 0) return idx;
        p += len + (p[len] == ',');
    }
    return -1;
}

// A train log's axis value: the key in its stored config.
static int run_axis_value(const char *path, const char *key, double *v, char *err, size_t errlen) {
    char e[1024];
    RunLogReader *rd = runlog_reader_open(path, e, sizeof e);
    if (!rd) return set_err(err, errlen, "%s", e);
    char *text = attr(rd, path, "config", err, errlen);
    runlog_reader_close(rd);
    if (!text) return -1;
    int rc = config_value(text, path, key, v, err, errlen);
    free(text);
    return rc;
}

// A base model's eval log: its axis value (world.max_new_tokens: its budget; any other key: the
// evaluated model's stored config, the attribute model_config) and its profile.
static int read_base_eval(RunLogReader *rd, const char *path, const char *key, BaseEval *b, char *err,
                          size_t errlen) {
    double temp, budget;
    memset(b, 0, sizeof *b);
    if (attr_num(rd, path, "temperature", &temp, err, errlen) != 0 ||
        attr_num(rd, path, "max_new_tokens", &budget, err, errlen) != 0)
        return -1;
    b->greedy = temp == 0;
    double complete = 1;  // a log of a grpolab before eval --resume has no such attribute
    if (runlog_reader_has_attr(rd, "complete") && attr_num(rd, path, "complete", &complete, err, errlen) != 0) return -1;
    if (complete == 0)
        return set_err(err, errlen, "%s: an evaluation that did not finish (complete = 0): go on with grpolab eval "
                       "--resume, or evaluate again", path);
    if (strcmp(key, "world.max_new_tokens") == 0) {
        b->value = budget;
    } else {
        if (!runlog_reader_has_attr(rd, "model_config"))
            return set_err(err, errlen, "%s: an eval log without the attribute model_config (the evaluated "
                           "model's config, written by grpolab eval since the sensitivity map): its %s is not "
                           "known; evaluate the model again with grpolab eval --out", path, key);
        char *text = attr(rd, path, "model_config", err, errlen);
        if (!text) return -1;
        char what[1100];
        snprintf(what, sizeof what, "%s (model_config)", path);
        int rc = config_value(text, what, key, &b->value, err, errlen);
        free(text);
        if (rc != 0) return -1;
    }
    b->has_redos = runlog_reader_has_attr(rd, "profile_redos");
    if (b->has_redos && (attr_num(rd, path, "profile_redos", &b->redos, err, errlen) != 0 ||
                         attr_num(rd, path, "profile_redos_right", &b->redos_right, err, errlen) != 0))
        return -1;
    if (!b->greedy && !b->has_redos)
        return set_err(err, errlen, "%s: a sampled eval log (temperature %g) without a failure profile: the map "
                       "reads greedy logs and logs of grpolab eval --failure-profile", path, temp);
    char *names = attr(rd, path, "benchmarks", err, errlen);
    if (!names) return -1;
    int pool = train_pool_index(names);
    free(names);
    static const char *const cols[] = {"responses/bench", "responses/reward", "responses/truncated",
                                       "responses/length"};
    double *c[4] = {NULL};
    int64_t n = -1, k;
    int rc = 0;
    for (int j = 0; j < 4 && rc == 0; j++) {
        char e[1024];
        if (!(c[j] = runlog_read_column(rd, cols[j], &k, e, sizeof e))) rc = set_err(err, errlen, "%s", e);
        else if (n >= 0 && k != n) rc = set_err(err, errlen, "%s: /%s has %lld rows, /%s %lld", path, cols[j], (long long)k, cols[0], (long long)n);
        n = k;
    }
    if (rc == 0) {
        double all = 0, right = 0, bad = 0, cut = 0, len = 0;
        for (int64_t i = 0; i < n; i++) {
            if ((int)c[0][i] == pool) continue;
            all++;
            if (c[1][i] > 0.5) {
                right++;
                continue;
            }
            bad++, len += c[3][i], cut += c[2][i] > 0.5;
        }
        b->n_incorrect = bad;
        b->cut = bad > 0 ? cut / bad : NAN;
        b->len_incorrect = bad > 0 ? len / bad : NAN;
        b->accuracy = all > 0 ? right / all : NAN;
    }
    for (int j = 0; j < 4; j++) free(c[j]);
    return rc;
}

// The share of the incorrect responses of run r's last evaluation that the budget cut, pooled
// over the benchmarks (train_pool left out), from /eval/truncation_incorrect (the share per
// benchmark row); NaN where the log has no such column.
static double final_cut_share(const Run *r) {
    char e[1024];
    RunLogReader *rd = runlog_reader_open(r->path, e, sizeof e);
    if (!rd) return NAN;
    double share = NAN;
    char *names = runlog_read_attr_str(rd, "benchmarks", e, sizeof e);
    int pool = train_pool_index(names);
    free(names);
    static const char *const cols[] = {"eval/step", "eval/bench", "eval/accuracy", "eval/n", "eval/truncation_incorrect"};
    double *c[5] = {NULL};
    int64_t n = -1, k;
    int ok = runlog_reader_has(rd, cols[4]);
    for (int j = 0; ok && j < 5; j++) {
        ok = (c[j] = runlog_read_column(rd, cols[j], &k, e, sizeof e)) != NULL;
        if (ok && (n < 0 || k < n)) n = k;  // a log being written may be a column ahead
    }
    if (ok && n > 0) {
        double last = c[0][n - 1], bad = 0, cut = 0;
        for (int64_t i = 0; i < n; i++) {
            if (c[0][i] != last || (int)c[1][i] == pool) continue;
            double q = c[3][i] - round(c[2][i] * c[3][i]);  // incorrect responses of the row
            if (q > 0) bad += q, cut += c[4][i] * q;
        }
        share = bad > 0 ? cut / bad : NAN;
    }
    for (int j = 0; j < 5; j++) free(c[j]);
    runlog_reader_close(rd);
    return share;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The statistics of one axis value from its runs (finding_verdict and run_figures).
static void point_stats(AxisPoint *p, Run *const *runs) {
    Run *const *rr = runs + p->runs_at;
    finding_verdict(rr, p->n_runs, &p->verdict);
    static const char *const obj[2] = {"grpo", "dr_grpo"};
    for (int o = 0; o < 2; o++) {
        double reward[256], len[256], cut[256], mean, half;
        int k = 0;
        for (int i = 0; i < p->n_runs && k < 256; i++) {
            if (strcmp(rr[i]->objective, obj[o]) != 0) continue;
            RunFigures f;
            run_figures(rr[i], &f);
            reward[k] = f.v[RF_REWARD], len[k] = f.v[RF_ELEN_I], cut[k] = final_cut_share(rr[i]), k++;
        }
        p->n_obj[o] = k;
        mean_ci95(reward, k, &mean, &half);
        p->reward[o][0] = mean, p->reward[o][1] = mean - half, p->reward[o][2] = mean + half;
        mean_ci95(len, k, &p->len_i[o], &half);
        mean_ci95(cut, k, &p->cut[o], &half);
    }
}

static void put(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, " %.6g", v);
    else fprintf(f, " NaN");
}

static int write_data(const Figure *fig, const AxisPoint *pt, int np, char *err, size_t errlen) {
    char path[1300];
    FILE *f = figure_data(fig, "sensitivity.dat", path, sizeof path, err, errlen);
    if (!f) return -1;
    fprintf(f, "# x value pairs ratio ratio_lo ratio_hi grpo_slope grpo_slope_lo grpo_slope_hi dr_slope "
            "dr_slope_lo dr_slope_hi grpo_reward grpo_reward_lo grpo_reward_hi dr_reward dr_reward_lo "
            "dr_reward_hi grpo_eval_len_i dr_eval_len_i grpo_cut dr_cut base_len_i base_cut base_accuracy "
            "base_redos base_redos_right base_redo_right grpo_runs dr_runs\n");
    for (int i = 0; i < np; i++) {
        const AxisPoint *p = &pt[i];
        const Check *ratio = &p->verdict.check[CHECK_EVAL_RATIO], *slope = &p->verdict.check[CHECK_LENGTH_SLOPE];
        int v = p->verdict.checks > 0;  // GRPO and Dr. GRPO runs both there
        fprintf(f, "%d %.17g %d", i, p->value, p->verdict.pairs);
        const Estimate *e[3] = {&ratio->f[0], &slope->f[0], &slope->f[1]};
        for (int j = 0; j < 3; j++) put(f, v ? e[j]->v : NAN), put(f, v ? e[j]->lo : NAN), put(f, v ? e[j]->hi : NAN);
        for (int o = 0; o < 2; o++)
            for (int j = 0; j < 3; j++) put(f, p->reward[o][j]);
        put(f, p->len_i[0]), put(f, p->len_i[1]), put(f, p->cut[0]), put(f, p->cut[1]);
        const BaseEval *g = p->greedy, *s = p->sampled;
        put(f, g ? g->len_incorrect : NAN), put(f, g ? g->cut : NAN), put(f, g ? g->accuracy : NAN);
        put(f, s ? s->redos : NAN), put(f, s ? s->redos_right : NAN);
        put(f, s && s->redos > 0 ? s->redos_right / s->redos : NAN);
        fprintf(f, " %d %d\n", p->n_obj[0], p->n_obj[1]);
    }
    if (fclose(f) != 0) return set_err(err, errlen, "cannot write '%s'", path);
    return 0;
}

// A number of the table: "-" where it is NaN.
static const char *num(char *buf, size_t len, const char *fmt, double v) {
    if (isfinite(v)) snprintf(buf, len, fmt, v);
    else snprintf(buf, len, "-");
    return buf;
}

// "v (lo..hi)" of an estimate, "v" without a CI, "-" without a value.
static const char *with_ci(char *buf, size_t len, const char *fmt, double v, double lo, double hi) {
    char a[32], b[32], c[32];
    if (!isfinite(v)) snprintf(buf, len, "-");
    else if (!isfinite(lo)) snprintf(buf, len, "%s", num(a, sizeof a, fmt, v));
    else snprintf(buf, len, "%s (%s..%s)", num(a, sizeof a, fmt, v), num(b, sizeof b, fmt, lo), num(c, sizeof c, fmt, hi));
    return buf;
}

static int write_table(const char *base, const char *key, const AxisPoint *pt, int np, char *err, size_t errlen) {
    char path[1100];
    snprintf(path, sizeof path, "%s.md", base);
    FILE *f = fopen(path, "w");
    if (!f) return set_err(err, errlen, "cannot write '%s'", path);
    fprintf(f, "## Along %s\n\n"
            "Per value: the eval length of incorrect responses, GRPO / Dr. GRPO, over the seed pairs "
            "(geometric mean, 95%% CI: check 1 of grpolab summary); the slopes of the incorrect training "
            "length over the last half, tokens per 100 steps (regression CI: check 2); the final training "
            "reward (last tenth, mean and 95%% CI over the runs); the share of the final evaluation's "
            "incorrect responses cut by the budget (mean over the runs); whether the bias shows there: "
            "checks 1 and 2 both pass (else the checks that fail).\n\n", key);
    fprintf(f, "| %s | pairs | eval ratio | GRPO slope | Dr. GRPO slope | GRPO reward | Dr. GRPO reward | "
            "cut, GRPO | cut, Dr. GRPO | shows (checks 1, 2) |\n|---|---|---|---|---|---|---|---|---|---|\n", key);
    char b[8][128];
    for (int i = 0; i < np; i++) {
        const AxisPoint *p = &pt[i];
        const Check *ratio = &p->verdict.check[CHECK_EVAL_RATIO], *slope = &p->verdict.check[CHECK_LENGTH_SLOPE];
        int v = p->verdict.checks > 0;
        const char *shows = !v                        ? "-"
                            : ratio->pass && slope->pass ? "yes"
                            : ratio->pass               ? "no: check 2 fails"
                            : slope->pass               ? "no: check 1 fails"
                                                        : "no: checks 1 and 2 fail";
        fprintf(f, "| %g | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", p->value, p->verdict.pairs,
                v ? with_ci(b[0], 128, "%.2f", ratio->f[0].v, ratio->f[0].lo, ratio->f[0].hi) : "-",
                v ? with_ci(b[1], 128, "%+.1f", slope->f[0].v, slope->f[0].lo, slope->f[0].hi) : "-",
                v ? with_ci(b[2], 128, "%+.1f", slope->f[1].v, slope->f[1].lo, slope->f[1].hi) : "-",
                with_ci(b[3], 128, "%.3f", p->reward[0][0], p->reward[0][1], p->reward[0][2]),
                with_ci(b[4], 128, "%.3f", p->reward[1][0], p->reward[1][1], p->reward[1][2]),
                num(b[5], 128, "%.3f", p->cut[0]), num(b[6], 128, "%.3f", p->cut[1]), shows);
    }
    fprintf(f, "\nThe base model at each value (`grpolab eval --out`): greedy, with the budget of the value, "
            "its benchmark accuracy, the mean length of its incorrect responses and the share of them cut "
            "by the budget; at temperature 1 with `--failure-profile`, the redos after a rejected step and "
            "the share of them that are right.\n\n"
            "| %s | accuracy | incorrect length | cut | redos | redo right |\n|---|---|---|---|---|---|\n", key);
    for (int i = 0; i < np; i++) {
        const AxisPoint *p = &pt[i];
        const BaseEval *g = p->greedy, *s = p->sampled;
        fprintf(f, "| %g | %s | %s | %s | %s | %s |\n", p->value, num(b[0], 128, "%.3f", g ? g->accuracy : NAN),
                num(b[1], 128, "%.1f", g ? g->len_incorrect : NAN), num(b[2], 128, "%.3f", g ? g->cut : NAN),
                num(b[3], 128, "%.0f", s ? s->redos : NAN),
                num(b[4], 128, "%.3f", s && s->redos > 0 ? s->redos_right / s->redos : NAN));
    }
    if (fclose(f) != 0) return set_err(err, errlen, "cannot write '%s'", path);
    return 0;
}

static int render(const Figure *fig, const char *key, const AxisPoint *pt, int np, char *err, size_t errlen) {
    char d[1300], ekey[256];
    snprintf(d, sizeof d, "%s/sensitivity.dat", fig->data_dir);
    gp_escape(ekey, sizeof ekey, key);
    size_t cap = 16384, len = 0;
    char *body = xmalloc(cap);
#define OUT(...) (len += (size_t)snprintf(body + len, cap - len, __VA_ARGS__))
    // the values as categories, evenly spaced; with the base model's measured redo-right chance
    int redo = 0;
    for (int i = 0; i < np; i++) redo |= pt[i].sampled && pt[i].sampled->redos > 0;
    OUT("set datafile missing 'NaN'\nset key top left box opaque samplen 2 font ',8'\n"
        "set grid lc rgb '#dddddd'\nset style fill transparent solid 0.2 noborder\n"
        "set xrange [-0.5:%.1f]\nset xtics (", np - 0.5);
    for (int i = 0; i < np; i++) {
        const BaseEval *s = pt[i].sampled;
        if (redo && s && s->redos > 0) OUT("%s\"%g\\n(%.2f)\" %d", i ? ", " : "", pt[i].value, s->redos_right / s->redos, i);
        else OUT("%s\"%g\" %d", i ? ", " : "", pt[i].value, i);
    }
    OUT(")\nset xlabel \"%s\"\n", ekey);
    OUT("set multiplot layout 1,3 title \"Where the length bias shows: GRPO against Dr. GRPO along %s "
        "(95%% CI bands)%s\" font ',11'\n", ekey,
        redo ? "\\nin brackets under each value: the base model's chance that a redo after a rejected step is right" : "");
    // 1: the eval ratio, with 1 and check 1's threshold
    OUT("set title 'Eval length of incorrect responses, GRPO / Dr. GRPO'\nset ylabel 'ratio'\n");
    if (figure_column_has_data(d, 4))
        OUT("plot \"%s\" u 1:5:6 w filledcurves lc rgb '#404040' notitle, \"%s\" u 1:4 w lp pt 7 lw 2 lc rgb '#404040' "
            "title 'ratio over the seed pairs', 1 w l dt 2 lc rgb '#000000' title 'no bias (1)', %g w l dt 3 lc rgb "
            "'#8b0000' title 'check 1 (%g)'\n", d, d, VERDICT_RATIO_MIN, VERDICT_RATIO_MIN);
    else
        OUT("set label 1 'no GRPO and Dr. GRPO runs of a seed at any value' at graph 0.5,0.5 center\n"
            "plot [][0:1] NaN notitle\nunset label 1\n");
    // 2: the slopes
    OUT("set title 'Slope of the incorrect training length, last half'\nset ylabel 'tokens per 100 steps'\n");
    if (figure_column_has_data(d, 7) || figure_column_has_data(d, 10))
        OUT("plot \"%s\" u 1:8:9 w filledcurves lc rgb '%s' notitle, \"%s\" u 1:7 w lp pt 7 lw 2 lc rgb '%s' title 'GRPO', "
            "\"%s\" u 1:11:12 w filledcurves lc rgb '%s' notitle, \"%s\" u 1:10 w lp pt 7 lw 2 lc rgb '%s' title 'Dr. GRPO', "
            "0 w l dt 2 lc rgb '#000000' notitle\n", d, objective_color("grpo", 0), d, objective_color("grpo", 0), d,
            objective_color("dr_grpo", 1), d, objective_color("dr_grpo", 1));
    else
        OUT("set label 1 'no slope' at graph 0.5,0.5 center\nplot [][0:1] NaN notitle\nunset label 1\n");
    // 3: the share of incorrect eval responses cut by the budget
    OUT("set title 'Incorrect eval responses cut by the budget'\nset ylabel 'share'\nset yrange [0:1]\n");
    static const struct {
        int col;
        const char *style, *title;
    } C[] = {{21, "lp pt 7 lw 2", "GRPO, final"}, {22, "lp pt 7 lw 2", "Dr. GRPO, final"}, {24, "lp pt 6 dt 2", "base model"}};
    int drawn = 0;
    for (int c = 0; c < 3; c++) {  // only the curves the logs have (an older log has no truncation column)
        if (!figure_column_has_data(d, C[c].col)) continue;
        OUT("%s\"%s\" u 1:%d w %s lc rgb '%s' title '%s'", drawn++ ? ", " : "plot ", d, C[c].col, C[c].style,
            c == 2 ? "#000000" : objective_color(c ? "dr_grpo" : "grpo", c), C[c].title);
    }
    if (drawn) OUT("\n");
    else OUT("set label 1 'not in these logs' at graph 0.5,0.5 center\nplot [][0:1] NaN notitle\nunset label 1\n");
#undef OUT
    int rc = figure_render(fig, body, err, errlen);
    free(body);
    return rc;
}

int sensitivity_axis_check(const char *key, char *err, size_t errlen) {
    const CfgKey *k = config_schema_key(key);
    if (!k || (k->type != CFG_INT && k->type != CFG_FLOAT))
        return set_err(err, errlen, "--axis '%s': %s", key, k ? "not a numeric config key (int or float)"
                                                              : "not a config key (grpolab config --keys lists them)");
    return 0;
}

int plot_sensitivity(const char *key, char *const *paths, int n, const PlotOptions *o, char *err, size_t errlen) {
    if (sensitivity_axis_check(key, err, errlen) != 0) return -1;
    if (n > MAX_FILES) return set_err(err, errlen, "at most %d files per map (got %d)", MAX_FILES, n);
    Run **runs = xcalloc((size_t)n + 1, sizeof *runs);
    double *run_value = xcalloc((size_t)n + 1, sizeof *run_value);
    BaseEval *evals = xcalloc((size_t)n + 1, sizeof *evals);
    AxisPoint pt[MAX_VALUES];
    int nr = 0, ne = 0, np = 0, rc = 0, skipped = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char e[1024], *kind = NULL;
        RunLogReader *rd = runlog_reader_open(paths[i], e, sizeof e);
        if (!rd) {
            rc = set_err(err, errlen, "%s", e);
            break;
        }
        if (!(kind = attr(rd, paths[i], "kind", err, errlen))) rc = -1;
        else if (strcmp(kind, "eval") == 0) {
            if (read_base_eval(rd, paths[i], key, &evals[ne], err, errlen) == 0) evals[ne++].path = paths[i];
            else rc = -1;
        }
        runlog_reader_close(rd);
        if (rc == 0 && strcmp(kind, "eval") != 0) {  // a train log (run_load says what else it is)
            Run *r = run_load(paths[i], err, errlen);
            if (!r || run_axis_value(paths[i], key, &run_value[nr], err, errlen) != 0) {
                run_free(r);
                rc = -1;
            } else if (strcmp(r->objective, "grpo") != 0 && strcmp(r->objective, "dr_grpo") != 0) {
                fprintf(stderr, "grpolab: note: %s: objective %s left out (the map compares GRPO with Dr. GRPO)\n",
                        paths[i], r->objective);
                run_free(r);
                skipped++;
            } else {
                runs[nr++] = r;
            }
        }
        free(kind);
    }
    // the axis values, sorted, each with its runs side by side and its base model's logs
    double values[MAX_FILES];
    int nv = 0;
    for (int i = 0; i < nr; i++) values[nv++] = run_value[i];
    for (int i = 0; i < ne; i++) values[nv++] = evals[i].value;
    qsort(values, (size_t)nv, sizeof *values, cmp_double);
    for (int i = 0; rc == 0 && i < nv; i++) {
        if (np && values[i] == pt[np - 1].value) continue;
        if (np == MAX_VALUES) rc = set_err(err, errlen, "more than %d values of %s", MAX_VALUES, key);
        else pt[np++] = (AxisPoint){.value = values[i], .reward = {{NAN, NAN, NAN}, {NAN, NAN, NAN}},
                                    .len_i = {NAN, NAN}, .cut = {NAN, NAN}};
    }
    if (rc == 0 && nr == 0)
        rc = set_err(err, errlen, "no GRPO or Dr. GRPO train run among the %d file%s given%s", n, n == 1 ? "" : "s",
                     skipped ? " (the runs of other objectives are left out)" : "");
    Run **sorted = xcalloc((size_t)nr + 1, sizeof *sorted);
    for (int p = 0, m = 0; rc == 0 && p < np; p++) {
        pt[p].runs_at = m;
        for (int i = 0; i < nr; i++)
            if (run_value[i] == pt[p].value) sorted[m++] = runs[i];
        pt[p].n_runs = m - pt[p].runs_at;
        for (int i = 0; i < ne && rc == 0; i++) {
            if (evals[i].value != pt[p].value) continue;
            const BaseEval **slot = evals[i].greedy ? &pt[p].greedy : &pt[p].sampled;
            if (*slot)
                rc = set_err(err, errlen, "%s and %s: two %s eval logs of the base model at %s = %g: give one",
                             (*slot)->path, evals[i].path, evals[i].greedy ? "greedy" : "sampled", key, pt[p].value);
            *slot = &evals[i];
        }
        if (rc == 0 && pt[p].n_runs > 0) point_stats(&pt[p], sorted);
    }
    Figure fig;
    if (rc == 0) rc = figure_begin(&fig, o->out, o->formats, 1800, 520, err, errlen);
    if (rc == 0) rc = write_data(&fig, pt, np, err, errlen);
    if (rc == 0) rc = write_table(o->out, key, pt, np, err, errlen);
    if (rc == 0) rc = render(&fig, key, pt, np, err, errlen);
    for (int i = 0; i < nr; i++) run_free(runs[i]);
    free(runs);
    free(sorted);
    free(run_value);
    free(evals);
    return rc;
}
