// test_sensitivity.c: `grpolab plot sensitivity` (src/analysis/plot_sensitivity.c) on small
// hand-made logs: train run logs written with the run-log writer in the layout of `grpolab
// train`, two values of corpus.p_recover, GRPO and Dr. GRPO on three seeds each, and base-model
// eval logs written by eval_write_hdf5 (the attributes model_config and profile_redos*). The
// map's numbers against closed forms from their definitions, the figure's files, the table,
// and the errors.
#include "test_util.h"

#include <gsl/gsl_cdf.h>
#include <sys/stat.h>

#include "analysis/analysis.h"
#include "sim/io/config.h"
#include "sim/rl/evaluate.h"
#include "sim/io/runlog.h"

static char dir[256];

static const char *path_of(const char *name) {
    static char p[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/grpolab_test_sensitivity_%d", (int)getpid());
    mkdir(dir, 0777);
    return 0;
}

static int teardown(void **state) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (!getenv("KEEP_TMP") && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    return 0;
}

// ---------------------------------------------------------------- the hand-made logs
// A run at p_recover v (0 or 1), seed k (1..3), GRPO (g = 1) or Dr. GRPO (g = 0), N steps:
//   incorrect training length 80 + b s, b = SLOPE(v, g, k) tokens per step;
//   training reward REWARD(v, g, k) at every step;
//   evaluations at steps 0 and N (two benchmarks and train_pool): incorrect length LEN_I(v, g, k)
//   in both benchmarks; a (10 questions, accuracy 0.5), b (20, 0.25), train_pool (4, 0.5, its
//   length 999 and truncation 1 must be left out); the shares of incorrect responses cut by the
//   budget 1 at step 0 and CUT_A, CUT_B at the last evaluation.
enum { N = 20 };
#define SLOPE(v, g, k) ((g) ? (v) ? 0.01 * (k) : 0.3 + 0.1 * (k) : 0.05 * (k) - 0.1 + 0.05 * (v))  /* value 1: check 2 fails */
#define REWARD(v, g, k) (0.3 + 0.1 * (v) + 0.02 * (k) + 0.01 * !(g))
#define LEN_I(v, g, k) ((g) ? 100.0 + 10 * (k) + 80 * (1 - (v)) : 60.0 + 5 * (k))
static const double CUT_A[2] = {0.2, 0.4}, CUT_B[2] = {0.0, 0.2};  // [g]: of 5 and of 15 incorrect

static void write_run(const char *path, double v, int g, int k) {
    char err[1024] = "", set[128];
    RunLog *rl = runlog_create(path, 1, err, sizeof err);
    if (!rl) fail_msg("%s", err);
    Config *c = config_new();
    const char *preset = g ? "grpo" : "dr_grpo";
    snprintf(set, sizeof set, "corpus.p_recover=%g", v);
    assert_int_equal(config_set(c, set, err, sizeof err), 0);
    snprintf(set, sizeof set, "train.steps=%d", N);
    assert_int_equal(config_set(c, set, err, sizeof err), 0);
    snprintf(set, sizeof set, "objective.preset=%s", preset);
    assert_int_equal(config_set(c, set, err, sizeof err), 0);
    char *ini = config_to_ini(c);
    config_free(c);
    struct { const char *name, *value; } A[] = {
        {"kind", "train"}, {"config", ini}, {"benchmarks", "a,b,train_pool"}, {"objective.preset", preset},
        {"objective.baseline", "group_mean"}, {"objective.scale", g ? "group_std" : "none"},
        {"objective.aggregation", g ? "seq_mean_token_mean" : "seq_mean_token_sum_norm"}};
    for (size_t i = 0; i < sizeof A / sizeof *A; i++)
        assert_int_equal(runlog_set_attr_str(rl, A[i].name, A[i].value, err, sizeof err), 0);
    free(ini);
    assert_int_equal(runlog_set_attr_i64(rl, "seed", k, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "objective.std_ddof", 1, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "objective.l_max", 300, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_f64(rl, "objective.std_eps", 0, err, sizeof err), 0);
    static const char *const train_cols[] = {"reward_mean", "length_mean", "length_correct", "length_incorrect",
                                             "truncation_rate", "loop_rate", "disagreement_rate", "selfcheck_rate",
                                             "bias_cosine", "mixed_group_frac"};
    ColumnSpec tr[11] = {{"step", COL_I32, "step"}};
    for (int i = 0; i < 10; i++) tr[i + 1] = (ColumnSpec){train_cols[i], COL_F64, "x"};
    static const ColumnSpec ev[8] = {{"step", COL_I32, "s"}, {"bench", COL_I32, "b"}, {"accuracy", COL_F64, "a"},
                                     {"length_mean", COL_F64, "l"}, {"length_correct", COL_F64, "l"},
                                     {"length_incorrect", COL_F64, "l"}, {"n", COL_I32, "n"},
                                     {"truncation_incorrect", COL_F64, "t"}};
    assert_int_equal(runlog_add_table(rl, "train", tr, 11, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_add_table(rl, "eval", ev, 8, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_start_swmr(rl, err, sizeof err), 0);
    for (int32_t s = 0; s <= N; s++) {
        if (s % N == 0) {  // evaluations at steps 0 and N (the policy after the last step)
            struct { int32_t b; double acc, li; int32_t n; double cut; } E[3] = {
                {0, 0.5, LEN_I(v, g, k), 10, s ? CUT_A[g] : 1}, {1, 0.25, LEN_I(v, g, k), 20, s ? CUT_B[g] : 1},
                {2, 0.5, 999, 4, 1}};
            double lc = 30;
            for (int e = 0; e < 3; e++) {
                const void *row[8] = {&s, &E[e].b, &E[e].acc, &lc, &lc, &E[e].li, &E[e].n, &E[e].cut};
                assert_int_equal(runlog_append(rl, "eval", 1, row, err, sizeof err), 0);
            }
        }
        if (s == N) break;
        double x[10] = {REWARD(v, g, k), 70, 40, 80 + SLOPE(v, g, k) * s, 0.1, 0.1, 0.3, 0.6, 0.9, 0.5};
        const void *row[11] = {&s};
        for (int i = 0; i < 10; i++) row[i + 1] = &x[i];
        assert_int_equal(runlog_append(rl, "train", 1, row, err, sizeof err), 0);
        assert_int_equal(runlog_flush(rl, err, sizeof err), 0);
    }
    assert_int_equal(runlog_close(rl, err, sizeof err), 0);
}

// A base model's eval log through eval_write_hdf5: greedy, or sampled with a failure profile of
// `redos` redos of which `right` are right. The model_config says corpus.p_recover = v.
// Responses (bench, reward, truncated, length): benchmark 0: right of 10 tokens, wrong of 40
// not cut, wrong of 100 cut; benchmark 1: wrong of 100 cut; train_pool (with_pool): wrong of 7
// not cut (left out). Incorrect: 3, cut 2 (share 2/3), mean length 80, accuracy 1/4.
static void write_eval(const char *path, double v, int budget, int greedy, int redos, int right, int with_pool) {
    char err[1024], set[64];
    Config *c = config_new();
    snprintf(set, sizeof set, "corpus.p_recover=%g", v);
    assert_int_equal(config_set(c, set, err, sizeof err), 0);
    char *ini = config_to_ini(c);
    config_free(c);
    WorldGaps gaps = {0.25, 7};
    EvalConfig ec = {.sampler = {.temperature = greedy ? 0.0f : 1.0f, .top_p = 1, .max_new_tokens = budget},
                     .gaps = greedy ? NULL : &gaps, .model_config = ini};
    EvalResult r = {.n_bench = 2, .has_pool = with_pool};
    r.profile.redos[2][0] = redos - redos / 2, r.profile.redos[3][1] = redos / 2;  // spread over levels, kinds
    r.profile.redos_right[2][0] = right - right / 2, r.profile.redos_right[3][1] = right / 2;
    EvalRecord rec[5] = {{.bench = 0, .reward = 1, .correct = 1, .length = 10},
                         {.bench = 0, .length = 40},
                         {.bench = 0, .length = 100, .truncated = 1},
                         {.bench = 1, .length = 100, .truncated = 1},
                         {.bench = 2, .length = 7}};
    assert_int_equal(eval_write_hdf5(path, "model.h5", &ec, &r, rec, 4 + with_pool, err, sizeof err), 0);
    free(ini);
}

// The sample mean of x (k) and the half-width t(0.975, k-1) s / sqrt(k) of its 95% CI.
static void t_ci(const double *x, int k, double *mean, double *half) {
    double m = 0, ss = 0;
    for (int i = 0; i < k; i++) m += x[i] / k;
    for (int i = 0; i < k; i++) ss += (x[i] - m) * (x[i] - m);
    *mean = m;
    *half = gsl_cdf_tdist_Pinv(0.975, k - 1) * sqrt(ss / (k - 1)) / sqrt(k);
}

// Row `row` of a data file (comments skipped) into v; returns the number of columns.
static int data_row(const char *path, int row, double *v, int cap) {
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    char line[4096];
    int r = -1, n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || ++r < row) continue;
        char *save = NULL;
        for (char *t = strtok_r(line, " \n", &save); t && n < cap; t = strtok_r(NULL, " \n", &save))
            v[n++] = strtod(t, NULL);
        break;
    }
    fclose(f);
    return n;
}

#define NEAR(a, b, tol)                                                                   \
    do {                                                                                  \
        double a_ = (a), b_ = (b);                                                        \
        if (!(fabs(a_ - b_) <= (tol))) fail_msg("%s = %.10g, want %.10g", #a, a_, b_);    \
    } while (0)

// The files of the map: value 0 and 1, three seed pairs each, and the base model's logs.
static int map_files(char **paths) {
    int n = 0;
    for (int vi = 0; vi < 2; vi++)
        for (int k = 1; k <= 3; k++)
            for (int g = 0; g < 2; g++) {
                char name[64];
                snprintf(name, sizeof name, "run_v%d_g%d_s%d.h5", vi, g, k);
                write_run(path_of(name), vi, g, k);
                paths[n++] = strdup(path_of(name));
            }
    write_eval(path_of("base0_greedy.h5"), 0, 300, 1, 0, 0, 1);
    write_eval(path_of("base0_sampled.h5"), 0, 300, 0, 40, 0, 1);
    write_eval(path_of("base1_sampled.h5"), 1, 300, 0, 40, 10, 0);
    paths[n++] = strdup(path_of("base0_greedy.h5"));
    paths[n++] = strdup(path_of("base0_sampled.h5"));
    paths[n++] = strdup(path_of("base1_sampled.h5"));
    return n;
}

// ---------------------------------------------------------------- tests

static void test_map_numbers(void **state) {
    char *paths[16], err[2048];
    int n = map_files(paths);
    PlotOptions o = {.out = path_of("map"), .formats = FMT_ALL};
    int rc = plot_sensitivity("corpus.p_recover", paths, n, &o, err, sizeof err);
    if (rc != 0) fail_msg("%s", err);
    for (int i = 0; i < n; i++) free(paths[i]);
    const char *d = path_of("map_data/sensitivity.dat");
    for (int vi = 0; vi < 2; vi++) {
        double row[40];
        assert_int_equal(data_row(d, vi, row, 40), 30);
        NEAR(row[0], vi, 0);
        NEAR(row[1], vi, 0);
        NEAR(row[2], 3, 0);  // seed pairs
        // eval ratio over the pairs, check 1's: exp of the mean and t interval of the log ratios
        // log(LEN_I(grpo) / LEN_I(dr_grpo))
        double lr[3], mean, half;
        for (int k = 1; k <= 3; k++) lr[k - 1] = log(LEN_I(vi, 1, k) / LEN_I(vi, 0, k));
        t_ci(lr, 3, &mean, &half);
        NEAR(row[3], exp(mean), 1e-5 * exp(mean));
        NEAR(row[4], exp(mean - half), 1e-5 * exp(mean));
        NEAR(row[5], exp(mean + half), 1e-5 * exp(mean));
        // slopes of the seed-mean incorrect length (exactly linear: no CI width), per 100 steps
        for (int g = 1; g >= 0; g--) {
            double b = (SLOPE(vi, g, 1) + SLOPE(vi, g, 2) + SLOPE(vi, g, 3)) / 3 * 100;
            int c = g ? 6 : 9;
            NEAR(row[c], b, 1e-6); NEAR(row[c + 1], b, 1e-6); NEAR(row[c + 2], b, 1e-6);
        }
        // final rewards: mean and t interval over the three runs
        for (int g = 1; g >= 0; g--) {
            double rw[3];
            for (int k = 1; k <= 3; k++) rw[k - 1] = REWARD(vi, g, k);
            t_ci(rw, 3, &mean, &half);
            int c = g ? 12 : 15;
            NEAR(row[c], mean, 1e-5); NEAR(row[c + 1], mean - half, 1e-5); NEAR(row[c + 2], mean + half, 1e-5);
        }
        // final eval: incorrect length (the same in both benchmarks) and the share cut by the
        // budget, pooled: (CUT_A x 5 + CUT_B x 15) / 20; train_pool and step 0 left out
        NEAR(row[18], (LEN_I(vi, 1, 1) + LEN_I(vi, 1, 2) + LEN_I(vi, 1, 3)) / 3, 1e-4);
        NEAR(row[19], (LEN_I(vi, 0, 1) + LEN_I(vi, 0, 2) + LEN_I(vi, 0, 3)) / 3, 1e-4);
        NEAR(row[20], (CUT_A[1] * 5 + CUT_B[1] * 15) / 20, 1e-6);
        NEAR(row[21], (CUT_A[0] * 5 + CUT_B[0] * 15) / 20, 1e-6);
        // the base model: greedy at value 0 only (3 incorrect, 2 cut, mean length 80, accuracy
        // 1/4: the pool's response left out); redos 40 and right 0 / 10
        if (vi == 0) {
            NEAR(row[22], 80, 1e-9); NEAR(row[23], 2.0 / 3, 1e-6); NEAR(row[24], 0.25, 1e-9);
        } else {
            assert_true(isnan(row[22]) && isnan(row[23]) && isnan(row[24]));
        }
        NEAR(row[25], 40, 0); NEAR(row[26], vi ? 10 : 0, 0); NEAR(row[27], vi ? 0.25 : 0, 1e-9);
        NEAR(row[28], 3, 0); NEAR(row[29], 3, 0);
    }
    double extra[40];
    assert_int_equal(data_row(d, 2, extra, 40), 0);  // two values, two rows
    // the table: both values, the ratio with its CI as the data file has it
    FILE *f = fopen(path_of("map.md"), "r");
    assert_non_null(f);
    char text[8192];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    assert_non_null(strstr(text, "## Along corpus.p_recover"));
    double lr[3], mean, half;
    for (int k = 1; k <= 3; k++) lr[k - 1] = log(LEN_I(1, 1, k) / LEN_I(1, 0, k));
    t_ci(lr, 3, &mean, &half);
    char want[128];
    snprintf(want, sizeof want, "| 1 | 3 | %.2f (%.2f..%.2f) |", exp(mean), exp(mean - half), exp(mean + half));
    if (!strstr(text, want)) fail_msg("'%s' not in the table:\n%s", want, text);
    // "shows" at each value from the checks' definitions: check 1, the ratio's geometric mean
    // >= 1.3 with the CI above 1; check 2, GRPO's slope CI above 0 and Dr. GRPO's below 0.1 of
    // GRPO's slope (the slopes here are exact: no CI width)
    for (int vi = 0; vi < 2; vi++) {
        for (int k = 1; k <= 3; k++) lr[k - 1] = log(LEN_I(vi, 1, k) / LEN_I(vi, 0, k));
        t_ci(lr, 3, &mean, &half);
        int c1 = exp(mean) >= 1.3 && exp(mean - half) > 1;
        double bg = (SLOPE(vi, 1, 1) + SLOPE(vi, 1, 2) + SLOPE(vi, 1, 3)) / 3 * 100;
        double bd = (SLOPE(vi, 0, 1) + SLOPE(vi, 0, 2) + SLOPE(vi, 0, 3)) / 3 * 100;
        int c2 = bg > 0 && bd < 0.1 * bg;
        const char *shows = c1 && c2 ? "yes" : c1 ? "no: check 2 fails" : c2 ? "no: check 1 fails"
                                                                          : "no: checks 1 and 2 fail";
        char line[64], *row = NULL;
        snprintf(line, sizeof line, "\n| %d | 3 | ", vi);
        assert_non_null(row = strstr(text, line));
        char *eol = strchr(row + 1, '\n');
        snprintf(want, sizeof want, "| %s |", shows);
        char *at = strstr(row, want);
        if (!at || (eol && at > eol)) fail_msg("value %d: '%s' not in its row:\n%s", vi, want, text);
    }
    assert_non_null(strstr(text, "| 0 | 0.250 | 80.0 | 0.667 | 40 | 0.000 |"));
    assert_non_null(strstr(text, "| 1 | - | - | - | 40 | 0.250 |"));
    // the figure: every format, or gnuplot is missing (then the render fails above)
    static const char *const ext[] = {"png", "pdf", "svg", "gp"};
    for (int i = 0; i < 4; i++) {
        struct stat st;
        char name[32];
        snprintf(name, sizeof name, "map.%s", ext[i]);
        assert_int_equal(stat(path_of(name), &st), 0);
        assert_true(st.st_size > 500);
    }
}

// The eval log's new attributes as eval_write_hdf5 writes them.
static void test_eval_log_attributes(void **state) {
    char err[1024];
    write_eval(path_of("attrs.h5"), 0.2, 150, 0, 9, 4, 0);
    RunLogReader *rd = runlog_reader_open(path_of("attrs.h5"), err, sizeof err);
    assert_non_null(rd);
    char *redos = runlog_read_attr_str(rd, "profile_redos", err, sizeof err);
    char *right = runlog_read_attr_str(rd, "profile_redos_right", err, sizeof err);
    char *mc = runlog_read_attr_str(rd, "model_config", err, sizeof err);
    assert_string_equal(redos, "9");
    assert_string_equal(right, "4");
    assert_non_null(strstr(mc, "p_recover = 0.2"));
    free(redos), free(right), free(mc);
    runlog_reader_close(rd);
    // greedy: no failure profile, so no redo counts
    write_eval(path_of("attrs_g.h5"), 0.2, 150, 1, 0, 0, 0);
    rd = runlog_reader_open(path_of("attrs_g.h5"), err, sizeof err);
    assert_false(runlog_reader_has_attr(rd, "profile_redos"));
    runlog_reader_close(rd);
    // eval_profile_redos sums every level and both kinds
    FailureProfile p = {0};
    p.redos[1][0] = 3, p.redos[5][1] = 4, p.redos[0][1] = 2, p.redos_right[5][1] = 1, p.redos_right[0][0] = 1;
    int n, r;
    eval_profile_redos(&p, &n, &r);
    assert_int_equal(n, 9);
    assert_int_equal(r, 2);
}

static void expect_error(char **paths, int n, const char *axis, const char *needle) {
    char err[2048] = "";
    PlotOptions o = {.out = path_of("bad"), .formats = FMT_PNG};
    assert_int_not_equal(plot_sensitivity(axis, paths, n, &o, err, sizeof err), 0);
    if (!strstr(err, needle)) fail_msg("error '%s' does not say '%s'", err, needle);
}

static void test_errors(void **state) {
    char *one[3] = {strdup(path_of("e_run.h5")), strdup(path_of("e_g1.h5")), strdup(path_of("e_g2.h5"))};
    write_run(one[0], 0, 1, 1);
    expect_error(one, 1, "world.template", "not a numeric config key");
    expect_error(one, 1, "corpus.no_such_key", "not a config key");
    // two greedy logs of the base model at one value
    write_eval(one[1], 0, 300, 1, 0, 0, 0);
    write_eval(one[2], 0, 300, 1, 0, 0, 0);
    expect_error(one, 3, "corpus.p_recover", "two greedy eval logs");
    // only eval logs: no run to map
    expect_error(one + 1, 1, "corpus.p_recover", "no GRPO or Dr. GRPO train run");
    // a sampled eval log without a failure profile
    write_eval(one[2], 0, 300, 0, 0, 0, 0);
    {
        char err[1024];
        RunLog *rl = runlog_create(one[2], 1, err, sizeof err);  // an eval log by hand, no profile
        assert_non_null(rl);
        assert_int_equal(runlog_set_attr_str(rl, "kind", "eval", err, sizeof err), 0);
        assert_int_equal(runlog_set_attr_f64(rl, "temperature", 1, err, sizeof err), 0);
        assert_int_equal(runlog_set_attr_i64(rl, "max_new_tokens", 300, err, sizeof err), 0);
        assert_int_equal(runlog_close(rl, err, sizeof err), 0);
    }
    expect_error(one + 2, 1, "world.max_new_tokens", "without a failure profile");
    // an evaluation stopped before its end (eval_write_partial: complete = 0)
    {
        char err[1024];
        WorldGaps gaps = {0.25, 7};
        EvalConfig ec = {.sampler = {.temperature = 1, .top_p = 1, .max_new_tokens = 300}, .gaps = &gaps};
        EvalRecord rec = {.bench = 0, .length = 5};
        assert_int_equal(eval_write_partial(one[2], "model.h5", &ec, &rec, 1, err, sizeof err), 0);
    }
    expect_error(one + 2, 1, "world.max_new_tokens", "did not finish");
    // not a run log at all
    FILE *f = fopen(one[1], "w");
    fputs("not hdf5", f);
    fclose(f);
    expect_error(one, 2, "corpus.p_recover", "e_g1.h5");
    for (int i = 0; i < 3; i++) free(one[i]);
}

static void test_cli(void **state) {
    char out[8192], args[1024];
    write_run(path_of("c_g.h5"), 0, 1, 1);
    write_run(path_of("c_d.h5"), 0, 0, 1);
    snprintf(args, sizeof args, "plot sensitivity %s", path_of("c_g.h5"));
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "--axis KEY"));
    snprintf(args, sizeof args, "plot fig5 --axis corpus.p_recover %s", path_of("c_g.h5"));
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "only"));
    snprintf(args, sizeof args, "plot sensitivity --axis world.template %s", path_of("c_g.h5"));
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "not a numeric config key"));
    // a directory that is not a sweep's out directory
    mkdir(path_of("notasweep"), 0777);
    snprintf(args, sizeof args, "plot sensitivity --axis corpus.p_recover %s -o %s", path_of("notasweep"), path_of("c"));
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "without a sweep manifest"));
    snprintf(args, sizeof args, "plot sensitivity --axis corpus.p_recover %s %s -o %s --format svg", path_of("c_g.h5"),
             path_of("c_d.h5"), path_of("c"));
    if (tu_run_cli(args, out, sizeof out) != 0) fail_msg("%s", out);
    struct stat st;
    assert_int_equal(stat(path_of("c.svg"), &st), 0);
    assert_int_equal(stat(path_of("c.md"), &st), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_numbers),
        cmocka_unit_test(test_eval_log_attributes),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
