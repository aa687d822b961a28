// test_analysis.c: the analysis commands (src/analysis/) on small synthetic run logs written
// with the run-log writer in the layout of `grpolab train` (docs/hdf5-schema.md): the numbers
// handed to gnuplot against values computed by hand, the closed forms against the objective's
// own advantages, gnuplot's PNG, the summary's slopes and checks, and every error case.
#include "test_util.h"

#include <hdf5.h>
#include <sys/stat.h>
#include <time.h>

#include "analysis/analysis.h"
#include "analysis/stats.h"
#include "sim/io/config.h"
#include "sim/rl/evaluate.h"
#include "sim/rl/objective.h"
#include "sim/io/runlog.h"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char p[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
    return p[k];
}

static int setup(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/grpolab_test_analysis_%d", (int)getpid());
    mkdir(tmpdir, 0777);
    return 0;
}

static void rm_tree(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

static int teardown(void **state) {
    if (!getenv("KEEP_TMP")) rm_tree(tmpdir);
    return 0;
}

// ---------------------------------------------------------------- synthetic run logs
// Step s of a run (seed index k = seed - 1):
//   reward 0.2 + 0.002 s + 0.05 k; length_mean 60 + s; length_correct 40 + 0.1 s;
//   length_incorrect 80 + 0.2 s (exactly linear: slope 20 tokens per 100 steps);
//   truncation 0.05 + 0.001 s (grpo) or 0.05 (others); loop 0.1 + 0.001 s (grpo) or 0.1;
//   disagreement 0.08; selfcheck 0.5; bias_cosine 0.9; mixed 0.5.
// Evaluations at steps 0, 5, 10, ...: benchmark a (acc 0.5, n 10, correct length 20,
// incorrect 60 f), b (acc 0.25, n 20, correct 40, incorrect 100 f), train_pool (acc 1, n 5,
// correct 999: must be left out); f = 1.5 for grpo, 1 otherwise. Pooled: correct length 30,
// incorrect length 90 f, score 0.375.
// Per step two questions of G = 4: rewards (1,1,0,0) and (1,1,1,0); response i of a group
// has length 10 (i + 1), advantage by GRPO's ddof-0 formula, and every token the weight
// A / (M |o|) with M = 4 (GRPO's coefficient at rho = 1). Responses i = 2, 3 of each group
// have a disagreement; response 2 gave up before step 10, response 3 looped from step 10 on.
typedef struct {
    const char *preset;
    int64_t seed;
    int n_steps, steps_planned;
    int n_evals_skip;  // 1: no /eval rows
    double loop_trend; // nonzero: loop share 0.1 + loop_trend s, whatever the preset
    double len_i_flat; // nonzero: length_incorrect this constant (no growth), whatever the preset
} Synth;

enum { NTR = 11, NEV = 8, NQ = 5, NR = 8, NT = 2 };

static void write_log(const char *path, const Synth *s, const char *kind, int drop_column) {
    char err[1024] = "";
    RunLog *rl = runlog_create(path, 1, err, sizeof err);
    if (!rl) fail_msg("%s", err);
    Config *c = config_new();
    char set[128];
    snprintf(set, sizeof set, "train.steps=%d", s->steps_planned);
    assert_int_equal(config_set(c, set, err, sizeof err), 0);
    assert_int_equal(config_set(c, "train.group_size=4", err, sizeof err), 0);
    assert_int_equal(config_set(c, "train.minibatch_size=4", err, sizeof err), 0);
    assert_int_equal(config_set(c, "world.max_new_tokens=160", err, sizeof err), 0);
    snprintf(set, sizeof set, "objective.preset=%s", s->preset);
    assert_int_equal(config_set(c, set, err, sizeof err), 0);
    char *ini = config_to_ini(c);
    config_free(c);
    int grpo = strcmp(s->preset, "grpo") == 0;
    assert_int_equal(runlog_set_attr_str(rl, "kind", kind, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "config", ini, err, sizeof err), 0);
    free(ini);
    assert_int_equal(runlog_set_attr_i64(rl, "seed", s->seed, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "benchmarks", "a,b,train_pool", err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "objective.preset", s->preset, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "objective.baseline", "group_mean", err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "objective.scale", grpo ? "group_std" : "none", err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "objective.std_ddof", 0, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_f64(rl, "objective.std_eps", 0, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "objective.aggregation",
                                         grpo ? "seq_mean_token_mean" : "seq_mean_token_sum_norm", err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "objective.l_max", 160, err, sizeof err), 0);
    static const ColumnSpec TR[NTR] = {
        {"step", COL_I32, "step"}, {"reward_mean", COL_F64, "r"}, {"length_mean", COL_F64, "l"},
        {"length_correct", COL_F64, "l"}, {"length_incorrect", COL_F64, "l"}, {"truncation_rate", COL_F64, "t"},
        {"loop_rate", COL_F64, "l"}, {"disagreement_rate", COL_F64, "d"}, {"selfcheck_rate", COL_F64, "s"},
        {"bias_cosine", COL_F64, "b"}, {"mixed_group_frac", COL_F64, "m"}};
    static const ColumnSpec EV[NEV] = {{"step", COL_I32, "s"}, {"bench", COL_I32, "b"},
                                       {"accuracy", COL_F64, "a"}, {"length_mean", COL_F64, "l"},
                                       {"length_correct", COL_F64, "l"}, {"length_incorrect", COL_F64, "l"},
                                       {"n", COL_I32, "n"}, {"truncation_incorrect", COL_F64, "t"}};
    static const ColumnSpec Q[NQ] = {{"step", COL_I32, "s"}, {"group_size", COL_I32, "g"},
                                     {"reward_mean", COL_F64, "r"}, {"mean_abs_advantage", COL_F64, "a"},
                                     {"sum_abs_weight", COL_F64, "w"}};
    static const ColumnSpec R[NR] = {{"step", COL_I32, "s"}, {"length", COL_I32, "l"}, {"correct", COL_I32, "c"},
                                     {"advantage", COL_F32, "a"}, {"token_offset", COL_I64, "o"},
                                     {"disagreement", COL_I32, "d"}, {"gave_up", COL_I32, "g"},
                                     {"looped", COL_I32, "l"}};
    static const ColumnSpec T[NT] = {{"step", COL_I32, "s"}, {"weight", COL_F32, "w"}};
    // drop_column 1: /train without loop_rate (any column the reader needs)
    ColumnSpec tr[NTR];
    int ntr = 0;
    for (int i = 0; i < NTR; i++)
        if (!(drop_column == 1 && strcmp(TR[i].name, "loop_rate") == 0)) tr[ntr++] = TR[i];
    assert_int_equal(runlog_add_table(rl, "train", tr, ntr, 0, 0, err, sizeof err), 0);
    // drop_column 4: /eval without truncation_incorrect (a log of an older grpolab)
    int nev = drop_column == 4 ? NEV - 1 : NEV;
    assert_int_equal(runlog_add_table(rl, "eval", EV, nev, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_add_table(rl, "questions", Q, NQ, 0, 0, err, sizeof err), 0);
    int nr = drop_column == 2 ? NR - 3 : NR;  // 2: /responses without the behaviour flags
    assert_int_equal(runlog_add_table(rl, "responses", R, nr, 0, 1, err, sizeof err), 0);
    int tokens = drop_column != 3;  // 3: no /tokens table (a log stripped of it to travel)
    if (tokens) assert_int_equal(runlog_add_table(rl, "tokens", T, NT, 0, 1, err, sizeof err), 0);
    assert_int_equal(runlog_start_swmr(rl, err, sizeof err), 0);
    double f = grpo ? 1.5 : 1.0;
    double loop_slope = grpo ? 0.001 : 0.0;  // loops rise only under GRPO, unless the test says
    if (s->loop_trend != 0) loop_slope = s->loop_trend;
    int64_t tok = 0;
    for (int st = 0; st < s->n_steps; st++) {
        int32_t step = st;
        double k = (double)(s->seed - 1);
        double v[NTR - 1] = {0.2 + 0.002 * st + 0.05 * k, 60.0 + st, 40 + 0.1 * st,
                             s->len_i_flat != 0 ? s->len_i_flat : 80 + 0.2 * st,
                             grpo ? 0.05 + 0.001 * st : 0.05,
                             0.1 + loop_slope * st, 0.08, 0.5,
                             0.9, 0.5};
        const void *row[NTR];
        row[0] = &step;
        int j = 1;
        for (int i = 1; i < NTR; i++)
            if (!(drop_column == 1 && strcmp(TR[i].name, "loop_rate") == 0)) row[j++] = &v[i - 1];
        assert_int_equal(runlog_append(rl, "train", 1, row, err, sizeof err), 0);
        if (st % 5 == 0 && !s->n_evals_skip) {
            // incorrect responses cut by the budget: GRPO 2 of 5 and 3 of 15, Dr. GRPO 1 of 5
            // and 0 of 15 (train_pool's not counted)
            struct { int32_t b; double acc, lm, lc, li; int32_t n; double cut; } E[3] = {
                {0, 0.5, 0, 20, 60 * f, 10, grpo ? 0.4 : 0.2}, {1, 0.25, 0, 40, 100 * f, 20, grpo ? 0.2 : 0},
                {2, 1.0, 0, 999, NAN, 5, NAN}};
            for (int e = 0; e < 3; e++) {
                const void *er[NEV] = {&step, &E[e].b, &E[e].acc, &E[e].lm, &E[e].lc, &E[e].li, &E[e].n, &E[e].cut};
                assert_int_equal(runlog_append(rl, "eval", 1, er, err, sizeof err), 0);
            }
        }
        static const float rewards[2][4] = {{1, 1, 0, 0}, {1, 1, 1, 0}};
        for (int g = 0; g < 2; g++) {
            double mean = 0, var = 0, maa = 0, saw = 0;
            for (int i = 0; i < 4; i++) mean += rewards[g][i] / 4;
            for (int i = 0; i < 4; i++) var += (rewards[g][i] - mean) * (rewards[g][i] - mean) / 4;
            for (int i = 0; i < 4; i++) {
                float A = (float)((rewards[g][i] - mean) / sqrt(var));
                int32_t len = 10 * (i + 1), cor = rewards[g][i] > 0.5f;
                int32_t dis = i >= 2, gave = i == 2 && st < 10, loop = i == 3 && st >= 10;
                const void *rr[NR] = {&step, &len, &cor, &A, &tok, &dis, &gave, &loop};
                assert_int_equal(runlog_append(rl, "responses", 1, rr, err, sizeof err), 0);
                for (int t = 0; t < len; t++) {
                    float w = A / (4.0f * (float)len);
                    const void *tr2[NT] = {&step, &w};
                    if (tokens) assert_int_equal(runlog_append(rl, "tokens", 1, tr2, err, sizeof err), 0);
                    saw += fabsf(w);
                }
                tok += len;
                maa += fabs(A) / 4;
            }
            int32_t G = 4;
            const void *qr[NQ] = {&step, &G, &mean, &maa, &saw};
            assert_int_equal(runlog_append(rl, "questions", 1, qr, err, sizeof err), 0);
        }
        assert_int_equal(runlog_flush(rl, err, sizeof err), 0);
    }
    assert_int_equal(runlog_close(rl, err, sizeof err), 0);
}

static Run *load_ok(const char *path) {
    char err[2048] = "";
    Run *r = run_load(path, err, sizeof err);
    if (!r) fail_msg("%s", err);
    return r;
}


static int count_rows(const char *path) {
    FILE *fp = fopen(path, "r");
    if (!fp) fail_msg("cannot open %s", path);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, fp)) n += line[0] != '#';
    fclose(fp);
    return n;
}

// The whole of a small text file, malloc'd (fails the test if it cannot be read).
static char *read_text(const char *path) {
    FILE *fp = fopen(path, "r");
    if (!fp) fail_msg("cannot open %s", path);
    size_t cap = 1 << 16, n = 0;
    char *t = malloc(cap);
    size_t k;
    while (t && (k = fread(t + n, 1, cap - 1 - n, fp)) > 0)
        if ((n += k) + 1 == cap) t = realloc(t, cap *= 2);
    fclose(fp);
    assert_non_null(t);
    t[n] = 0;
    return t;
}


#define CLOSE(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

// the file tmp_path(name) exists and has more than `bytes` bytes
static void assert_written(const char *name, long bytes) {
    struct stat st;
    assert_int_equal(stat(tmp_path(name), &st), 0);
    if (st.st_size <= bytes) fail_msg("%s: %lld bytes, want more than %ld", name, (long long)st.st_size, bytes);
}

// ---------------------------------------------------------------- tests

static void test_load_and_eval_pooling(void **state) {
    Synth s = {"grpo", 1, 12, 12, 0, 0, 0};
    const char *p = tmp_path("pool.h5");
    write_log(p, &s, "train", 0);
    Run *r = load_ok(p);
    assert_int_equal(r->n_steps, 12);
    assert_int_equal(r->steps_planned, 12);
    assert_true(run_complete(r));
    assert_string_equal(r->objective, "grpo");
    assert_int_equal(r->group_size, 4);
    assert_int_equal(r->minibatch_size, 4);
    assert_int_equal(r->max_new_tokens, 160);
    assert_int_equal(r->n_evals, 3);  // steps 0, 5, 10
    CLOSE(r->eval_step[2], 10, 0);
    CLOSE(r->eval_score[0], 0.375, 1e-12);           // (0.5 + 0.25) / 2, train_pool left out
    CLOSE(r->eval_len_correct[0], 30, 1e-12);        // (5 * 20 + 5 * 40) / 10
    CLOSE(r->eval_len_incorrect[0], 1.5 * 90, 1e-9);  // (5 * 90 + 15 * 150) / 20
    assert_int_equal(run_load_responses(r, NULL, 0), 0);
    assert_int_equal(r->n_resp, 12 * 8);
    assert_int_equal(r->n_quest, 12 * 2);
    // response 3 of group 0 of step 0: (1,1,0,0) -> A = -1, length 40: mean |w| = 1 / (4 * 40)
    CLOSE(r->resp_mean_abs_w[3], 1.0 / 160, 1e-7);
    run_free(r);
}

static void test_stats_by_hand(void **state) {
    double x[] = {0.2, 0.4}, m, h;
    assert_int_equal(mean_ci95(x, 2, &m, &h), 2);
    CLOSE(m, 0.3, 1e-12);
    CLOSE(h, 12.7062047361747 * 0.1414213562373095 / 1.4142135623730951, 1e-9);  // t(0.975, 1) s / sqrt(2)
    double one[] = {5}, nanv[] = {NAN, 1, NAN, 3};
    mean_ci95(one, 1, &m, &h);
    assert_true(m == 5 && isnan(h));
    assert_int_equal(mean_ci95(nanv, 4, &m, &h), 2);
    CLOSE(m, 2, 1e-12);
    // log_mean_ci95 of e^0, e^1, e^2 (and a NaN, a 0 and a negative value, left out): the logs
    // 0, 1, 2 have mean 1 and sd 1, so exp(1) and exp(1 +- t(0.975, 2) / sqrt(3))
    double r[] = {1, NAN, M_E, 0, -2, M_E * M_E}, lo, hi;
    assert_int_equal(log_mean_ci95(r, 6, &m, &lo, &hi), 3);
    CLOSE(m, M_E, 1e-12);
    CLOSE(lo / exp(1 - 4.302652729911275 / sqrt(3.0)), 1, 1e-9);
    CLOSE(hi / exp(1 + 4.302652729911275 / sqrt(3.0)), 1, 1e-9);
    assert_int_equal(log_mean_ci95(one, 1, &m, &lo, &hi), 1);
    assert_true(fabs(m - 5) < 1e-12 && isnan(lo) && isnan(hi));
    // an exact line: slope 0.2, CI width 0; a noisy one against a hand computation
    double xs[10], ys[10];
    for (int i = 0; i < 10; i++) xs[i] = i, ys[i] = 80 + 0.2 * i;
    assert_int_equal(slope_ci95(xs, ys, 10, &m, &h), 10);
    CLOSE(m, 0.2, 1e-12);
    CLOSE(h, 0, 1e-9);
    double y2[] = {1, 3, 2, 5};  // x 0..3: slope = Sxy/Sxx = 5.5/5 = 1.1
    slope_ci95(xs, y2, 4, &m, &h);
    CLOSE(m, 1.1, 1e-12);
    // fit 1.1 + 1.1 x: residuals -0.1, 0.8, -1.3, 0.6, SSE 2.7, s^2 = 2.7 / 2, se = sqrt(s^2 / Sxx)
    CLOSE(h, 4.302652729911275 * sqrt(1.35 / 5), 1e-9);
    double e[] = {1, NAN, 3}, out[3];
    ema(e, 3, 0.5, out);
    assert_true(out[0] == 1 && isnan(out[1]) && out[2] == 2);
    assert_int_equal(tenth_of(5), 1);
    assert_int_equal(tenth_of(250), 25);
}

// The closed forms against the objective's own advantages of explicit groups.
static void test_closed_forms(void **state) {
    assert_true(fabs(closed_mean_abs_adv(0.5, 4, 1, 0, 0) - 1.0) < 1e-12);         // (1,1,0,0): +-1
    assert_true(fabs(closed_mean_abs_adv(0.75, 4, 1, 0, 0) - 0.8660254) < 1e-6);   // 0.58 x3, 1.73
    assert_true(fabs(closed_mean_abs_adv(0.5, 4, 0, 0, 0) - 0.5) < 1e-12);         // 2p(1-p)
    static const char *const presets[] = {"grpo", "dr_grpo", "rloo"};
    for (int pr = 0; pr < 3; pr++)
        for (int ddof = 0; ddof < 2; ddof++)
            for (int G = 2; G <= 8; G += 2)
                for (int k = 0; k <= G; k++) {
                    ObjectiveConfig oc;
                    assert_int_equal(objective_preset(presets[pr], 160, &oc), 0);
                    oc.std_ddof = ddof;
                    oc.std_eps = 0;
                    float rw[8], adv[8];
                    for (int i = 0; i < G; i++) rw[i] = i < k ? 1.0f : 0.0f;
                    group_advantages(&oc, rw, NULL, G, 0.0f, 0.0, 0.0, adv, NULL, NULL);
                    double maa = 0;
                    for (int i = 0; i < G; i++) maa += fabs(adv[i]) / G;
                    double cf = closed_mean_abs_adv((double)k / G, G, oc.scale == SCALE_GROUP_STD, ddof,
                                                    oc.baseline == BASELINE_LEAVE_ONE_OUT);
                    if (fabs(maa - cf) > 1e-5 * (1 + cf))
                        fail_msg("%s ddof %d G %d k %d: objective %.7f closed form %.7f", presets[pr], ddof, G, k,
                                 maa, cf);
                }
}

static void test_fig5_data_and_png(void **state) {
    const char *g1 = tmp_path("g1.h5"), *g2 = tmp_path("g2.h5"), *d1 = tmp_path("d1.h5");
    Synth a = {"grpo", 1, 12, 12, 0, 0, 0}, b = {"grpo", 2, 10, 12, 0, 0, 0}, c = {"dr_grpo", 1, 12, 12, 0, 0, 0};
    write_log(g1, &a, "train", 0);
    write_log(g2, &b, "train", 0);  // stopped at step 10 of 12
    write_log(d1, &c, "train", 0);
    Run *runs[3] = {load_ok(g1), load_ok(g2), load_ok(d1)};
    PlotOptions o = {.out = tmp_path("fig5"), .formats = FMT_PNG, .smooth = 0};
    char err[2048] = "";
    int gp = tu_have_gnuplot();
    int rc = plot_fig5(runs, 3, &o, err, sizeof err);
    if (gp && rc != 0) fail_msg("%s", err);
    double v[16];
    // step 3: rewards 0.206 and 0.256 -> mean 0.231, half t(0.975,1) * 0.0353553 / sqrt 2
    assert_int_equal(tu_read_row(tmp_path("fig5_data/train_grpo.dat"), 3, v, 16), 8);
    CLOSE(v[0], 3, 0);
    CLOSE(v[1], 0.231, 1e-9);
    double h = 12.7062047361747 * 0.025;
    CLOSE(v[2], 0.231 - h, 1e-7);
    CLOSE(v[3], 0.231 + h, 1e-7);
    CLOSE(v[4], 63, 1e-9);
    CLOSE(v[7], 2, 0);
    // steps 10 and 11 only from the run that has them
    assert_int_equal(count_rows(tmp_path("fig5_data/train_grpo.dat")), 12);
    tu_read_row(tmp_path("fig5_data/train_grpo.dat"), 11, v, 16);
    CLOSE(v[1], 0.222, 1e-9);
    CLOSE(v[2], 0.222, 1e-9);  // one run: no band
    CLOSE(v[7], 1, 0);
    // eval: pooled over benchmarks a and b; grpo's incorrect length 135, Dr. GRPO's 90
    // and the share of incorrect responses cut by the budget: 5 of 20 under GRPO, 1 of 20
    // under Dr. GRPO (write_log)
    assert_int_equal(tu_read_row(tmp_path("fig5_data/eval_grpo.dat"), 2, v, 16), 14);
    CLOSE(v[0], 10, 0);
    CLOSE(v[1], 0.375, 1e-9);
    CLOSE(v[4], 30, 1e-9);
    CLOSE(v[7], 135, 1e-9);
    CLOSE(v[10], 1, 0);  // step 10: only seed 1 evaluated it
    CLOSE(v[11], 0.25, 1e-12);
    tu_read_row(tmp_path("fig5_data/eval_dr_grpo.dat"), 0, v, 16);
    CLOSE(v[7], 90, 1e-9);
    CLOSE(v[11], 0.05, 1e-12);
    if (gp) {
        struct stat st;
        assert_int_equal(stat(tmp_path("fig5.png"), &st), 0);
        printf("  fig5.png: %lld bytes\n", (long long)st.st_size);
        assert_true(st.st_size > 10000);
        assert_int_equal(stat(tmp_path("fig5.gp"), &st), 0);
        // the flat panels (score 0.375 and correct length 30 at every evaluation) get a y range
        // of their own, so gnuplot does not warn of an empty one; the others autoscale
        char *gp_text = read_text(tmp_path("fig5.gp"));
        assert_non_null(strstr(gp_text, "set title 'Average benchmark score'\nset ylabel 'accuracy'\nset yrange [0:1]\n"));
        assert_non_null(strstr(gp_text, "set ylabel 'tokens'\nset yrange [29:31]\n"));
        assert_non_null(strstr(gp_text, "set title 'Eval length, incorrect responses'\nset ylabel 'tokens'\nset autoscale y\n"));
        assert_non_null(strstr(gp_text, "set title 'Incorrect eval responses cut'\nset ylabel 'share cut by the budget'\n"));
        assert_non_null(strstr(gp_text, "u 1:12 w lp pt 7 ps 0.5 lw 2 lc rgb '#808080' title 'GRPO (2 runs)'"));
        free(gp_text);
        char cmd[1200], out[4096];
        snprintf(cmd, sizeof cmd, "cd %s && gnuplot fig5.gp 2>&1", tmp_path(""));
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = 0;
        assert_int_equal(pclose(p), 0);
        if (strstr(out, "empty")) fail_msg("gnuplot warns: %s", out);
    }
    // smoothing: EMA 0.5 of 0.2 + 0.002 s at step 1 of seed 1 = 0.201
    o.smooth = 0.5;
    o.out = tmp_path("fig5s");
    rc = plot_fig5(runs, 1, &o, err, sizeof err);
    if (gp && rc != 0) fail_msg("%s", err);
    tu_read_row(tmp_path("fig5s_data/train_grpo.dat"), 1, v, 16);
    CLOSE(v[1], 0.201, 1e-9);
    for (int i = 0; i < 3; i++) run_free(runs[i]);
}

static void test_bias_figures_data(void **state) {
    const char *g1 = tmp_path("bg.h5"), *d1 = tmp_path("bd.h5");
    Synth a = {"grpo", 1, 6, 6, 0, 0, 0}, c = {"dr_grpo", 1, 6, 6, 0, 0, 0};
    write_log(g1, &a, "train", 0);
    write_log(d1, &c, "train", 0);
    Run *runs[2] = {load_ok(g1), load_ok(d1)};
    int gp = tu_have_gnuplot();
    char err[2048] = "";
    PlotOptions o = {.out = tmp_path("lb"), .formats = FMT_PNG | FMT_SVG};
    int rc = plot_length_bias(runs, 2, &o, err, sizeof err);
    if (gp && rc != 0) fail_msg("%s", err);
    // bins of 8 tokens: length 10 -> bin 1 (centre 12.5), 20 -> 2, 30 -> 3, 40 -> 4
    // length 10: response 0 of both groups, correct; (1,1,0,0) A = 1, (1,1,1,0) A = 0.57735
    double v[16];
    assert_int_equal(tu_read_row(tmp_path("lb_data/lenbias_grpo.dat"), 0, v, 16), 7);
    CLOSE(v[0], 12.5, 0);
    CLOSE(v[1], (1.0 + 0.5773503) / 2 / 40, 1e-7);  // mean of |A| / (4 * 10)
    CLOSE(v[2], 12, 0);                              // 2 per step, 6 steps
    CLOSE(v[3], v[1], 1e-7);                         // the closed form c(|o|)|A| = GRPO's weight
    assert_true(isnan(v[4]));                        // no incorrect response of length 10
    // length 40: incorrect, A = -1 and -1.7320508
    tu_read_row(tmp_path("lb_data/lenbias_grpo.dat"), 3, v, 16);
    CLOSE(v[4], (1.0 + 1.7320508) / 2 / 160, 1e-7);
    CLOSE(v[6], v[4], 1e-7);  // the closed form
    // dr_grpo's closed form has the run's own coefficient 1/(M L_max), L_max = the budget 160
    assert_int_equal(tu_read_row(tmp_path("lb_data/lenbias_dr_grpo.dat"), 0, v, 16), 7);
    CLOSE(v[3], (1.0 + 0.5773503) / 2 / (4 * 160), 1e-9);
    tu_read_row(tmp_path("lb_data/lengths_grpo.dat"), 2, v, 16);
    CLOSE(v[1], 40.2, 1e-9);
    CLOSE(v[4], 80.4, 1e-9);
    if (gp) {
        assert_written("lb.png", 10000);
        assert_written("lb.svg", 1000);
    }
    o.out = tmp_path("db");
    rc = plot_difficulty_bias(runs, 2, &o, err, sizeof err);
    if (gp && rc != 0) fail_msg("%s", err);
    assert_int_equal(count_rows(tmp_path("db_data/difficulty_grpo.dat")), 2);
    tu_read_row(tmp_path("db_data/difficulty_grpo.dat"), 0, v, 16);  // p = 0.5
    CLOSE(v[0], 0.5, 0);
    CLOSE(v[1], 1.0, 1e-6);
    CLOSE(v[7], 6, 0);
    // sum |w| of (1,1,0,0): sum_i |A_i| / M = 4 / 4
    CLOSE(v[4], 1.0, 1e-5);
    tu_read_row(tmp_path("db_data/difficulty_grpo.dat"), 1, v, 16);  // p = 0.75
    CLOSE(v[1], 0.8660254, 1e-6);
    // closed forms: grpo (group std, ddof 0) at p = 0.5 is 1 and its sum |w| curve G E|A| / M
    tu_read_row(tmp_path("db_data/closed_grpo.dat"), 100, v, 16);
    CLOSE(v[0], 0.5, 1e-12);
    CLOSE(v[1], 1.0, 1e-9);
    CLOSE(v[2], 1.0, 1e-9);
    tu_read_row(tmp_path("db_data/closed_dr_grpo.dat"), 100, v, 16);  // no std: 2p(1-p); no sum curve
    CLOSE(v[1], 0.5, 1e-9);
    assert_true(isnan(v[2]));
    tu_read_row(tmp_path("db_data/examples_grpo.dat"), 1, v, 2);
    CLOSE(v[0], 0.75, 0);
    CLOSE(v[1], 0.8660254, 1e-6);
    if (gp) {
        struct stat st;
        assert_int_equal(stat(tmp_path("db.png"), &st), 0);
        assert_true(st.st_size > 10000);
    }
    for (int i = 0; i < 2; i++) run_free(runs[i]);
}

// Logs without /tokens (scripts/gpu-fig5.sh strips it): the difficulty-bias figure reads
// /questions only and comes out the same; the length-bias figure keeps the closed form
// c(|o|)|A| and the lengths, has no measured |w|, and its panel says so. Mixed with a log
// that has /tokens, the measured |w| comes from that log alone.
static void test_bias_figures_without_tokens(void **state) {
    const char *gt = tmp_path("ntg.h5"), *gn = tmp_path("ntg_notok.h5"), *dn = tmp_path("ntd_notok.h5");
    Synth a = {"grpo", 1, 6, 6, 0, 0, 0}, c = {"dr_grpo", 1, 6, 6, 0, 0, 0};
    write_log(gt, &a, "train", 0);
    write_log(gn, &a, "train", 3);
    write_log(dn, &c, "train", 3);
    Run *with = load_ok(gt), *runs[2] = {load_ok(gn), load_ok(dn)};
    char err[2048] = "";
    assert_int_equal(run_load_responses(runs[0], err, sizeof err), 0);
    assert_int_equal(runs[0]->has_tokens, 0);
    assert_int_equal(runs[0]->n_resp, 6 * 8);
    assert_true(isnan(runs[0]->resp_mean_abs_w[0]));
    int gp = tu_have_gnuplot();
    PlotOptions o = {.out = tmp_path("ntdb"), .formats = FMT_PNG};
    int rc = plot_difficulty_bias(runs, 2, &o, err, sizeof err);
    if (gp && rc != 0) fail_msg("%s", err);
    o.out = tmp_path("ntdb_ref");
    rc = plot_difficulty_bias(&with, 1, &o, err, sizeof err);
    if (gp && rc != 0) fail_msg("%s", err);
    char *x = read_text(tmp_path("ntdb_data/difficulty_grpo.dat")), *y = read_text(tmp_path("ntdb_ref_data/difficulty_grpo.dat"));
    assert_string_equal(x, y);
    free(x), free(y);
    o.out = tmp_path("ntlb");
    rc = plot_length_bias(runs, 2, &o, err, sizeof err);
    if (gp && rc != 0) fail_msg("%s", err);
    double v[16];
    // length 10, correct: no measured |w|, but the 12 responses and their closed form
    assert_int_equal(tu_read_row(tmp_path("ntlb_data/lenbias_grpo.dat"), 0, v, 16), 7);
    assert_true(isnan(v[1]));
    CLOSE(v[2], 12, 0);
    CLOSE(v[3], (1.0 + 0.5773503) / 2 / 40, 1e-7);
    tu_read_row(tmp_path("ntlb_data/lengths_grpo.dat"), 2, v, 16);
    CLOSE(v[4], 80.4, 1e-9);
    char *gp_text = read_text(tmp_path("ntlb.gp"));
    assert_non_null(strstr(gp_text, "GRPO: |w| per token (48 responses with A != 0)\\nno /tokens in this log: closed form only"));
    assert_null(strstr(gp_text, "title 'correct'"));  // no measured points drawn
    assert_non_null(strstr(gp_text, "title 'c(|o|)|A|, correct'"));
    free(gp_text);
    if (gp) {
        assert_written("ntlb.png", 10000);
        assert_written("ntdb.png", 10000);
    }
    // one log with /tokens and one without, of one objective
    Run *mixed[2] = {with, runs[0]};
    o.out = tmp_path("ntmix");
    rc = plot_length_bias(mixed, 2, &o, err, sizeof err);
    if (gp && rc != 0) fail_msg("%s", err);
    tu_read_row(tmp_path("ntmix_data/lenbias_grpo.dat"), 0, v, 16);
    CLOSE(v[1], (1.0 + 0.5773503) / 2 / 40, 1e-7);  // measured, from the log that has /tokens
    CLOSE(v[2], 24, 0);
    CLOSE(v[3], v[1], 1e-7);
    gp_text = read_text(tmp_path("ntmix.gp"));
    assert_non_null(strstr(gp_text, "measured |w| from 1 of 2 logs (the others have no /tokens)"));
    assert_non_null(strstr(gp_text, "title 'correct'"));
    free(gp_text);
    run_free(with);
    for (int i = 0; i < 2; i++) run_free(runs[i]);
}

// What summary_print writes for these runs (md: markdown); malloc'd.
static char *summary_text(Run **runs, int n, int md) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    summary_print(f, runs, n, md);
    fclose(f);
    return buf;
}

static void test_summary(void **state) {
    const char *p[4] = {tmp_path("sg1.h5"), tmp_path("sg2.h5"), tmp_path("sd1.h5"), tmp_path("sd2.h5")};
    Synth s[4] = {{"grpo", 1, 20, 20, 0, 0, 0}, {"grpo", 2, 20, 20, 0, 0, 0}, {"dr_grpo", 1, 20, 20, 0, 0, 0}, {"dr_grpo", 2, 20, 20, 0, 0, 0}};
    Run *runs[4];
    for (int i = 0; i < 4; i++) write_log(p[i], &s[i], "train", 0), runs[i] = load_ok(p[i]);
    char *buf = summary_text(runs, 4, 0);
    // the incorrect length is exactly 80 + 0.2 s: slope +20.0 per 100 steps, CI 0
    assert_non_null(strstr(buf, "+20.0 ±0.0"));
    // eval incorrect 135 vs 90: ratio 1.50 in every seed pair
    assert_non_null(strstr(buf, "GRPO / Dr. GRPO: 1.50 (geometric mean, 95% CI 1.50..1.50, 2 seed pairs)"));
    assert_non_null(strstr(buf, "[PASS] eval length of incorrect"));
    // one seed pair has no confidence interval, and the check cannot pass without one
    Run *pair[2] = {runs[0], runs[2]};
    char *buf1 = summary_text(pair, 2, 0);
    assert_non_null(strstr(buf1, "GRPO / Dr. GRPO: 1.50 (geometric mean, no CI from one seed pair, 1 seed pair)"));
    assert_non_null(strstr(buf1, "[FAIL] eval length of incorrect"));
    // the reward rise of one run: steps 0, 1 (0.200, 0.202) against 18, 19 (0.236, 0.238), a CI
    // of t(0.975, 2) sqrt(2e-6) from the steps
    assert_non_null(strstr(buf1, "[FAIL] training reward, last minus first tenth of the steps: GRPO +0.036 (CI "
                                 "+0.030..+0.042 over the steps of 1 run)"));
    free(buf1);
    // both slopes are +20: Dr. GRPO has not levelled off
    assert_non_null(strstr(buf, "[FAIL] training length of incorrect"));
    assert_null(strstr(buf, "note:"));  // GRPO's side held: no word about the budget
    // GRPO's failures flat at 150 tokens, budget 160: the slope check fails on GRPO's side and
    // a note says they are at the budget; flat at 100 (under 0.8 x 160) there is no note
    for (int flat = 0; flat < 2; flat++) {
        const char *q[2] = {tmp_path("sgs.h5"), tmp_path("sds.h5")};
        Synth ss[2] = {{"grpo", 1, 20, 20, 0, 0, flat ? 100 : 150}, {"dr_grpo", 1, 20, 20, 0, 0, 90}};
        Run *rs[2];
        for (int i = 0; i < 2; i++) write_log(q[i], &ss[i], "train", 0), rs[i] = load_ok(q[i]);
        char *bs = summary_text(rs, 2, 0);
        assert_non_null(strstr(bs, "[FAIL] training length of incorrect responses over the last half, tokens per 100 "
                                   "steps: GRPO +0.0 (CI +0.0..+0.0), Dr. GRPO +0.0"));
        const char *note = strstr(bs, "note: GRPO's incorrect training responses average 150.0 tokens over the last "
                                      "tenth against a budget of 160 (truncation rate 0.069)");
        if (flat) assert_null(strstr(bs, "note:"));
        else assert_non_null(note);
        free(bs);
        for (int i = 0; i < 2; i++) run_free(rs[i]);
    }
    // truncation and loops rise only under GRPO: (0.001 * (18.5 - 0.5)) = +0.018
    assert_non_null(strstr(buf, "truncation rate GRPO +0.018 vs Dr. GRPO +0.000"));
    assert_non_null(strstr(buf, "[PASS] change from the first"));
    // loops that fall under both objectives, under GRPO by less, are not a rise
    {
        const char *q[2] = {tmp_path("sgf.h5"), tmp_path("sdf.h5")};
        Synth sf[2] = {{"grpo", 1, 20, 20, 0, -0.001, 0}, {"dr_grpo", 1, 20, 20, 0, -0.002, 0}};
        Run *rf[2];
        for (int i = 0; i < 2; i++) write_log(q[i], &sf[i], "train", 0), rf[i] = load_ok(q[i]);
        char *bf = summary_text(rf, 2, 0);
        assert_non_null(strstr(bf, "loop share GRPO -0.018 vs Dr. GRPO -0.036"));
        assert_non_null(strstr(bf, "[FAIL] change from the first"));
        free(bf);
        for (int i = 0; i < 2; i++) run_free(rf[i]);
    }
    assert_non_null(strstr(buf, "[PASS] share of responses with a visible"));
    // final reward: last tenth (steps 18, 19) mean 0.237 + 0.025 (seeds 1, 2) = 0.262 for both:
    // pair differences 0, a CI of width 0 inside +-0.03
    assert_non_null(strstr(buf, "[PASS] final training reward, Dr. GRPO minus GRPO over 2 seed pairs: +0.000 (90% CI "
                                "+0.000..+0.000; Dr. GRPO 0.262, GRPO 0.262)"));
    // the reward rises by 0.036 in every run, less than 0.05
    assert_non_null(strstr(buf, "[FAIL] training reward, last minus first tenth of the steps: GRPO +0.036 (CI "
                                "+0.036..+0.036 over 2 runs), Dr. GRPO +0.036 (CI +0.036..+0.036 over 2 runs)"));
    // GRPO's incorrect eval responses: 5 of 20 cut in each run, 10 of 40 pooled; 135 tokens of
    // a budget of 160 (information)
    assert_non_null(strstr(buf, "[PASS] share of GRPO's incorrect responses of the final greedy eval cut by the "
                                "budget: 0.250 (pooled over 2 runs; from /eval); wanted below 0.5"));
    assert_non_null(strstr(buf, "their mean length 135.0 tokens (CI 135.0..135.0), 0.84 of a budget of 160"));
    assert_non_null(strstr(buf, "sg1.h5 (GRPO): 0.250 (5 of 20) -> 0.250 (5 of 20; /eval)"));
    assert_non_null(strstr(buf, "sd1.h5 (Dr. GRPO): 0.050 (1 of 20) -> 0.050 (1 of 20; /eval)"));
    assert_non_null(strstr(buf, "no sampled eval of the final policies"));
    // after a disagreement (responses 2, 3 of both groups; first tenth steps 0-1, last 18-19):
    // share 4/8; correct 1/4 (response 2 of (1,1,1,0)); gave up 2/4 -> 0; looped 0 -> 2/4;
    // failing length (30 + 40 + 40) / 3
    FailingStates fs[2];
    char err[1024];
    assert_int_equal(run_failing_states(runs[0], fs, err, sizeof err), 0);
    CLOSE(fs[0].share, 0.5, 1e-12);
    CLOSE(fs[1].correct, 0.25, 1e-12);
    CLOSE(fs[0].gave_up, 0.5, 1e-12);
    CLOSE(fs[1].gave_up, 0.0, 1e-12);
    CLOSE(fs[0].looped, 0.0, 1e-12);
    CLOSE(fs[1].looped, 0.5, 1e-12);
    CLOSE(fs[1].fail_len, 110.0 / 3, 1e-9);
    assert_non_null(strstr(buf, "0.500 -> 0.000"));
    assert_non_null(strstr(buf, "36.7 -> 36.7"));
    assert_non_null(strstr(buf, "0.250 ±0.000 -> 0.250 ±0.000"));  // the mean of 2 equal runs
    free(buf);
    // a log without the flags: a note in the table, the rest of the summary stays
    const char *pn = tmp_path("snoflags.h5");
    Synth sn = {"grpo", 3, 20, 20, 0, 0, 0};
    write_log(pn, &sn, "train", 2);
    Run *rn = load_ok(pn);
    assert_int_equal(run_failing_states(rn, fs, err, sizeof err), -1);
    printf("  %s\n", err);
    assert_non_null(strstr(err, "disagreement"));
    assert_non_null(strstr(err, "snoflags.h5"));
    buf = summary_text(&rn, 1, 0);
    assert_non_null(strstr(buf, "not available"));
    assert_non_null(strstr(buf, "Per objective across runs"));
    free(buf);
    run_free(rn);
    buf = summary_text(runs, 4, 1);
    assert_non_null(strstr(buf, "| run | objective | seed | steps |"));
    free(buf);
    for (int i = 0; i < 4; i++) run_free(runs[i]);
}

static void expect_load_error(const char *path, const char *needle) {
    char err[2048] = "";
    Run *r = run_load(path, err, sizeof err);
    if (r) fail_msg("%s loaded, expected an error with '%s'", path, needle);
    printf("  %s\n", err);
    if (!strstr(err, needle)) fail_msg("error '%s' lacks '%s'", err, needle);
    if (!strstr(err, path) && !strstr(err, strrchr(path, '/') + 1)) fail_msg("error '%s' does not name the file", err);
}

// The file `grpolab eval-run` writes beside run log `run` (FINAL_GREEDY or FINAL_SAMPLED),
// through eval_write_hdf5: every benchmark 10 questions x samples, 5 x samples of them
// incorrect of length len_i, cut x samples of those cut by the budget.
static void write_final_eval(const char *run, int which, int samples, int64_t step, double len_i, int cut) {
    char path[1024], err[1024];
    final_eval_path(run, which, path, sizeof path);
    EvalConfig ec = {.samples = samples, .source_run = run, .source_step = step};
    ec.sampler.temperature = which == FINAL_GREEDY ? 0.0f : 1.0f;
    EvalResult r = {.n_bench = world_num_benchmarks()};
    for (int b = 0; b < r.n_bench; b++) {
        EvalStats *st = &r.bench[b];
        st->n = 10 * samples, st->n_correct = 5 * samples, st->n_truncated = st->n_truncated_incorrect = cut * samples;
        st->len_incorrect_sum = len_i * 5 * samples;
    }
    if (eval_write_hdf5(path, "model.h5", &ec, &r, NULL, 0, err, sizeof err) != 0) fail_msg("%s", err);
}

// Logs of an older grpolab have no /eval/truncation_incorrect: check 7 is not available and
// fails, unless `grpolab eval-run --greedy` evaluated the run's final policy again (then its
// file gives the last evaluation's share); the sampled eval-run files give the sampled ratio.
static void test_final_evals(void **state) {
    const char *p[2] = {tmp_path("og1.h5"), tmp_path("od1.h5")};
    Synth s[2] = {{"grpo", 1, 20, 20, 0, 0, 0}, {"dr_grpo", 1, 20, 20, 0, 0, 0}};
    Run *runs[2];
    for (int i = 0; i < 2; i++) write_log(p[i], &s[i], "train", 4), runs[i] = load_ok(p[i]);
    assert_null(runs[0]->eval_trunc_incorrect);
    char *buf = summary_text(runs, 2, 0);
    assert_non_null(strstr(buf, "[FAIL] share of GRPO's incorrect responses of the final greedy eval cut by the budget: "
                                "not available (not available for 1 of GRPO's 1 runs"));
    assert_non_null(strstr(buf, "og1.h5 (GRPO): - -> not available"));
    free(buf);
    for (int i = 0; i < 2; i++) run_free(runs[i]);
    // eval-run's greedy file of the last evaluation's step (15: evaluations every 5 steps of 20)
    // 2 of 5 incorrect cut per benchmark: 10 of 25; sampled at 4 per question, GRPO's incorrect
    // responses 120 tokens long against Dr. GRPO's 80
    write_final_eval(p[0], FINAL_GREEDY, 1, 15, 150, 2);
    for (int i = 0; i < 2; i++) write_final_eval(p[i], FINAL_SAMPLED, 4, 15, i ? 80 : 120, 1);
    for (int i = 0; i < 2; i++) runs[i] = load_ok(p[i]);
    const struct FinalEval *g = &runs[0]->final_eval[FINAL_GREEDY], *sm = &runs[0]->final_eval[FINAL_SAMPLED];
    assert_int_equal(g->n, 50);
    assert_int_equal(g->samples, 1);
    assert_int_equal(sm->n, 200);
    assert_int_equal(sm->samples, 4);
    CLOSE(sm->n_incorrect, 100, 0);
    CLOSE(sm->trunc_incorrect, 20, 0);
    CLOSE(sm->len_incorrect, 120, 1e-12);
    CLOSE(sm->score, 0.5, 1e-12);
    double bad, cut;
    const char *src;
    CLOSE(run_eval_trunc_incorrect(runs[0], -1, &bad, &cut, &src), 0.4, 1e-12);
    assert_string_equal(src, "eval-run");
    assert_true(isnan(run_eval_trunc_incorrect(runs[0], 0, &bad, &cut, &src)));  // the first: not known
    buf = summary_text(runs, 2, 0);
    assert_non_null(strstr(buf, "[PASS] share of GRPO's incorrect responses of the final greedy eval cut by the budget: "
                                "0.400 (pooled over 1 run; from eval-run)"));
    assert_non_null(strstr(buf, "information: the same ratio of the final policies sampled at temperature 1 (grpolab "
                                "eval-run; 4 samples per question, 1 seed pair): 1.50 (no CI)"));
    free(buf);
    run_free(runs[0]);
    // a greedy file of another step (an older checkpoint) does not stand for the last evaluation
    write_final_eval(p[0], FINAL_GREEDY, 1, 10, 150, 2);
    runs[0] = load_ok(p[0]);
    assert_true(isnan(run_eval_trunc_incorrect(runs[0], -1, &bad, &cut, &src)));
    assert_null(src);
    run_free(runs[0]);
    // a file that is not an eval log is left out with a note, the run still loads
    char side[1024];
    final_eval_path(p[0], FINAL_GREEDY, side, sizeof side);
    write_log(side, &s[0], "train", 0);
    runs[0] = load_ok(p[0]);
    assert_int_equal(runs[0]->final_eval[FINAL_GREEDY].n, 0);
    assert_int_equal(runs[0]->final_eval[FINAL_SAMPLED].n, 200);
    for (int i = 0; i < 2; i++) run_free(runs[i]);
}

static void test_bad_files(void **state) {
    expect_load_error(tmp_path("nope.h5"), "nope.h5");
    const char *txt = tmp_path("text.h5");
    FILE *f = fopen(txt, "w");
    fputs("not hdf5\n", f);
    fclose(f);
    expect_load_error(txt, "HDF5");
    // an HDF5 file that is not a grpolab log
    const char *other = tmp_path("other.h5");
    hid_t h = H5Fcreate(other, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(h >= 0);
    H5Fclose(h);
    expect_load_error(other, "format");
    // an eval log instead of a train log
    Synth s = {"grpo", 1, 4, 4, 0, 0, 0};
    const char *ev = tmp_path("evalkind.h5");
    write_log(ev, &s, "eval", 0);
    expect_load_error(ev, "kind 'eval'");
    // a missing column
    const char *mc = tmp_path("missing_col.h5");
    write_log(mc, &s, "train", 1);
    expect_load_error(mc, "loop_rate");
    // an empty run
    Synth e = {"grpo", 1, 0, 4, 0, 0, 0};
    const char *em = tmp_path("empty.h5");
    write_log(em, &e, "train", 0);
    expect_load_error(em, "empty run");
    // a truncated file: the first half of a valid log
    const char *full = tmp_path("full.h5"), *cut = tmp_path("cut.h5");
    Synth big = {"grpo", 1, 30, 30, 0, 0, 0};
    write_log(full, &big, "train", 0);
    FILE *in = fopen(full, "rb"), *out = fopen(cut, "wb");
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    assert_int_equal(fread(buf, 1, (size_t)n, in), (size_t)n);
    fwrite(buf, 1, (size_t)n / 2, out);
    fclose(in);
    fclose(out);
    free(buf);
    char err[2048] = "";
    Run *r = run_load(cut, err, sizeof err);
    if (r) {  // the superblock and /train survived: then the per-token tables must fail cleanly
        int rc = run_load_responses(r, err, sizeof err);
        printf("  truncated: run_load ok, responses: %s\n", rc ? err : "ok");
        run_free(r);
    } else {
        printf("  %s\n", err);
        assert_non_null(strstr(err, "cut.h5"));
    }
    // no runs without evaluations crash the figures
    Synth ne = {"grpo", 1, 6, 6, 1, 0, 0};
    const char *ner = tmp_path("noeval.h5");
    write_log(ner, &ne, "train", 0);
    Run *rn = load_ok(ner);
    assert_int_equal(rn->n_evals, 0);
    PlotOptions o = {.out = tmp_path("noeval_fig"), .formats = FMT_PNG};
    int gp = tu_have_gnuplot();
    int rc = plot_fig5(&rn, 1, &o, err, sizeof err);
    if (gp && rc != 0) fail_msg("%s", err);
    run_free(rn);
}

// A run still being written: the reader sees the flushed steps and says it is in progress.
static void test_run_in_progress(void **state) {
    const char *path = tmp_path("live.h5");
    int p2c[2], c2p[2];
    assert_int_equal(pipe(p2c), 0);
    assert_int_equal(pipe(c2p), 0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {  // the reader, forked before the writer opened anything
        char go;
        int64_t res[2] = {-1, -1};
        if (read(p2c[0], &go, 1) == 1) {
            char err[2048];
            Run *r = run_load(path, err, sizeof err);
            if (r) {
                res[0] = r->n_steps, res[1] = r->steps_planned;
                char note[512];
                runs_progress_note(&r, 1, note, sizeof note);
                if (!strstr(note, "live.h5 at step 3 of 10")) res[0] = -2;
                run_free(r);
            } else {
                fprintf(stderr, "reader: %s\n", err);
            }
        }
        ssize_t w = write(c2p[1], res, sizeof res);
        _exit(w == sizeof res ? 0 : 1);
    }
    // the writer: 3 of 10 steps, kept open in SWMR mode while the reader reads
    char err[1024];
    RunLog *rl = runlog_create(path, 1, err, sizeof err);
    assert_non_null(rl);
    Config *c = config_new();
    assert_int_equal(config_set(c, "train.steps=10", err, sizeof err), 0);
    char *ini = config_to_ini(c);
    config_free(c);
    static const char *const attrs[][2] = {{"kind", "train"}, {"objective.preset", "grpo"},
                                           {"objective.scale", "group_std"}, {"objective.baseline", "group_mean"},
                                           {"objective.aggregation", "seq_mean_token_mean"}};
    for (int i = 0; i < 5; i++) assert_int_equal(runlog_set_attr_str(rl, attrs[i][0], attrs[i][1], err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "config", ini, err, sizeof err), 0);
    free(ini);
    assert_int_equal(runlog_set_attr_i64(rl, "seed", 7, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "objective.std_ddof", 1, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "objective.l_max", 160, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_f64(rl, "objective.std_eps", 1e-6, err, sizeof err), 0);
    static const char *const names[] = {"step", "reward_mean", "length_mean", "length_correct", "length_incorrect",
                                        "truncation_rate", "loop_rate", "disagreement_rate", "selfcheck_rate",
                                        "bias_cosine", "mixed_group_frac"};
    ColumnSpec tr[11];
    for (int i = 0; i < 11; i++) tr[i] = (ColumnSpec){names[i], i ? COL_F64 : COL_I32, "x"};
    static const ColumnSpec ev[6] = {{"step", COL_I32, "s"}, {"bench", COL_I32, "b"}, {"accuracy", COL_F64, "a"},
                                     {"length_correct", COL_F64, "l"}, {"length_incorrect", COL_F64, "l"},
                                     {"n", COL_I32, "n"}};
    assert_int_equal(runlog_add_table(rl, "train", tr, 11, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_add_table(rl, "eval", ev, 6, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_start_swmr(rl, err, sizeof err), 0);
    for (int32_t s = 0; s < 3; s++) {
        double v = 0.5;
        const void *row[11] = {&s, &v, &v, &v, &v, &v, &v, &v, &v, &v, &v};
        assert_int_equal(runlog_append(rl, "train", 1, row, err, sizeof err), 0);
        assert_int_equal(runlog_flush(rl, err, sizeof err), 0);
    }
    assert_int_equal(write(p2c[1], "g", 1), 1);
    int64_t res[2];
    assert_int_equal(read(c2p[0], res, sizeof res), (ssize_t)sizeof res);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    runlog_close(rl, err, sizeof err);
    printf("  reader of a live run: %lld steps of %lld planned\n", (long long)res[0], (long long)res[1]);
    assert_int_equal(res[0], 3);
    assert_int_equal(res[1], 10);
}

// Sets row `row` of dataset ds of the log at path to v, storing the column as float64 (so a
// NaN survives in an integer column): a corrupted log.
static void poke(const char *path, const char *ds, hsize_t row, double v) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, ds, H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t fs = H5Dget_space(d);
    hsize_t n = 0;
    H5Sget_simple_extent_dims(fs, &n, NULL);
    assert_true(row < n);
    double *x = malloc(n * sizeof *x);
    assert_true(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) >= 0);
    x[row] = v;
    H5Dclose(d);
    assert_true(H5Ldelete(f, ds, H5P_DEFAULT) >= 0);
    H5Sclose(fs);
    fs = H5Screate_simple(1, &n, NULL);
    d = H5Dcreate2(f, ds, H5T_IEEE_F64LE, fs, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(d >= 0 && H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) >= 0);
    free(x);
    H5Sclose(fs);
    H5Dclose(d);
    H5Fclose(f);
}

// Values outside the schema's ranges (a NaN /eval step that made summary spin, a huge /train
// step that made plot fig5 write hundreds of MB, a huge group size that made plot
// difficulty-bias allocate gigabytes, a NaN length that reached an int conversion) are refused
// at load with the file, the dataset and the row: exit 1 within seconds, no output written.
static void test_corrupt_values(void **state) {
    struct {
        const char *cmd, *ds;
        hsize_t row;
        double v;
        const char *needle;
    } cases[] = {
        {"summary", "eval/step", 3, NAN, "/eval/step row 3 is nan"},
        {"plot fig5", "train/step", 5, 2e9, "/train/step row 5 is 2e+09"},
        {"plot fig5", "train/step", 2, 7, "/train/step row 2 is 7, expected 2"},
        {"plot difficulty-bias", "questions/group_size", 1, 1e9, "/questions/group_size row 1 is 1e+09"},
        {"plot length-bias", "responses/length", 4, NAN, "/responses/length row 4 is nan"},
        {"plot length-bias", "responses/step", 0, -1, "/responses/step row 0 is -1"},
    };
    Synth s = {"grpo", 1, 12, 12, 0, 0, 0};
    char out[8192], args[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = tmp_path("corrupt.h5");
        write_log(p, &s, "train", 0);
        poke(p, cases[i].ds, cases[i].row, cases[i].v);
        snprintf(args, sizeof args, "%s %s -o %s/corrupt_fig", cases[i].cmd, p, tmpdir);
        if (strcmp(cases[i].cmd, "summary") == 0) snprintf(args, sizeof args, "summary %s", p);
        time_t t0 = time(NULL);
        int rc = tu_run_cli(args, out, sizeof out);
        printf("  %s with /%s[%d] = %g -> exit %d: %s", cases[i].cmd, cases[i].ds, (int)cases[i].row,
               cases[i].v, rc, out);
        assert_int_equal(rc, 1);
        if (!strstr(out, cases[i].needle)) fail_msg("message lacks '%s'", cases[i].needle);
        assert_true(time(NULL) - t0 < 30);
    }
}

static void test_cli(void **state) {
    char out[8192], args[1024];
    Synth s = {"grpo", 1, 4, 8, 0, 0, 0};
    const char *p = tmp_path("cli.h5");
    write_log(p, &s, "train", 0);
    assert_int_equal(tu_run_cli("plot", out, sizeof out), 2);
    assert_non_null(strstr(out, "which figure"));
    snprintf(args, sizeof args, "plot fig9 %s", p);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown figure 'fig9'"));
    assert_int_equal(tu_run_cli("plot fig5", out, sizeof out), 2);
    snprintf(args, sizeof args, "plot fig5 %s --smooth 2", p);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "--smooth '2'"));
    snprintf(args, sizeof args, "plot fig5 %s --format png,gif", p);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "'gif'"));
    snprintf(args, sizeof args, "plot fig5 %s -o %s/nodir/fig", p, tmpdir);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "does not exist"));
    snprintf(args, sizeof args, "plot fig5 %s %s/missing.h5 -o %s/x", p, tmpdir, tmpdir);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "missing.h5"));
    // --check: 4 of 8 steps is not complete
    snprintf(args, sizeof args, "summary --check %s", p);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 1);
    Synth full = {"grpo", 1, 8, 8, 0, 0, 0};
    write_log(p, &full, "train", 0);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 0);
    assert_int_equal(tu_run_cli("summary", out, sizeof out), 2);
    if (tu_have_gnuplot()) {
        snprintf(args, sizeof args, "plot difficulty-bias %s -o %s/cli_db --format pdf", p, tmpdir);
        if (tu_run_cli(args, out, sizeof out) != 0) fail_msg("%s", out);
        struct stat st;
        assert_int_equal(stat(tmp_path("cli_db.pdf"), &st), 0);
        assert_true(st.st_size > 1000);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_and_eval_pooling),
        cmocka_unit_test(test_stats_by_hand),
        cmocka_unit_test(test_closed_forms),
        cmocka_unit_test(test_fig5_data_and_png),
        cmocka_unit_test(test_bias_figures_data),
        cmocka_unit_test(test_bias_figures_without_tokens),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_final_evals),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_run_in_progress),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_corrupt_values),
    };
    return cmocka_run_group_tests_name("analysis", tests, setup, teardown);
}
