// test_fig6.c: the Fig. 6 analysis (src/analysis/fig6.c) on synthetic run logs of Dr. GRPO
// under three templates and four question sets, two seeds: the start and plateau scores of a
// run, the four checks' figures against their definitions (docs/cli.md, "The Fig. 6
// checks") computed here by hand, each check's failing side, the figure's data files and
// files, and the summary and plot commands.
#include "test_util.h"

#include <math.h>
#include <sys/stat.h>

#include "analysis/analysis.h"
#include "analysis/fig6.h"
#include "sim/io/config.h"
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
    snprintf(tmpdir, sizeof tmpdir, "/tmp/grpolab_test_fig6_%d", (int)getpid());
    mkdir(tmpdir, 0777);
    return 0;
}

static int teardown(void **state) {
    if (!getenv("KEEP_TMP")) tu_remove_dir(tmpdir);
    return 0;
}

#define CLOSE(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))
#define T975_1 12.7062047361747  // t_{0.975} with 1 degree of freedom (two seeds)

// ---------------------------------------------------------------- synthetic logs
// A run of 41 steps (0..40) with one benchmark of 100 questions evaluated at steps 0, 10, 20,
// 30 and 40: score `start` at step 0, `mid` at 10 and 20, plateau - 0.01 at 30 and plateau +
// 0.01 at 40. With FIG6_PLATEAU_FROM 0.75 the plateau window is the steps >= 30, so the run's
// plateau score is `plateau`. Training reward 0.5 at every step.
#define STEPS 41
static void write_run(const char *path, const char *preset, const char *tpl, const char *qset, int64_t seed,
                      double start, double plateau) {
    char err[1024] = "", set[128];
    RunLog *rl = runlog_create(path, 1, err, sizeof err);
    if (!rl) fail_msg("%s", err);
    Config *c = config_new();
    char t[64], q[64];
    snprintf(set, sizeof set, "objective.preset=%s", preset);
    snprintf(t, sizeof t, "world.template=%s", tpl);
    snprintf(q, sizeof q, "train.question_set=%s", qset);
    // the default set, "weights", with the fig5 configs' levels 1-3
    const char *sets[6] = {"train.steps=40", set, t, q, "train.weight_level4=0", "train.weight_level5=0"};
    for (int i = 0; i < (strcmp(qset, "weights") == 0 ? 6 : 4); i++)
        if (config_set(c, sets[i], err, sizeof err) != 0) fail_msg("%s", err);
    char *ini = config_to_ini(c);
    config_free(c);
    assert_int_equal(runlog_set_attr_str(rl, "kind", "train", err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "config", ini, err, sizeof err), 0);
    free(ini);
    assert_int_equal(runlog_set_attr_i64(rl, "seed", seed, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "benchmarks", "a", err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "objective.preset", preset, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "objective.baseline", "group_mean", err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "objective.scale", "none", err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "objective.std_ddof", 1, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_f64(rl, "objective.std_eps", 0, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "objective.aggregation", "seq_mean_token_sum_norm", err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "objective.l_max", 200, err, sizeof err), 0);
    static const ColumnSpec TR[11] = {
        {"step", COL_I32, "s"}, {"reward_mean", COL_F64, "r"}, {"length_mean", COL_F64, "l"},
        {"length_correct", COL_F64, "l"}, {"length_incorrect", COL_F64, "l"}, {"truncation_rate", COL_F64, "t"},
        {"loop_rate", COL_F64, "l"}, {"disagreement_rate", COL_F64, "d"}, {"selfcheck_rate", COL_F64, "s"},
        {"bias_cosine", COL_F64, "b"}, {"mixed_group_frac", COL_F64, "m"}};
    static const ColumnSpec EV[7] = {{"step", COL_I32, "s"}, {"bench", COL_I32, "b"}, {"accuracy", COL_F64, "a"},
                                     {"length_mean", COL_F64, "l"}, {"length_correct", COL_F64, "l"},
                                     {"length_incorrect", COL_F64, "l"}, {"n", COL_I32, "n"}};
    assert_int_equal(runlog_add_table(rl, "train", TR, 11, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_add_table(rl, "eval", EV, 7, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_start_swmr(rl, err, sizeof err), 0);
    for (int32_t st = 0; st < STEPS; st++) {
        double v[10] = {0.5, 60, 40, 80, 0, 0.1, 0.1, 0.5, 0.9, 0.5};
        const void *row[11] = {&st};
        for (int i = 0; i < 10; i++) row[i + 1] = &v[i];
        assert_int_equal(runlog_append(rl, "train", 1, row, err, sizeof err), 0);
        if (st % 10 == 0) {
            double mid = (start + plateau) / 2;
            double acc = st == 0 ? start : st < 30 ? mid : st == 30 ? plateau - 0.01 : plateau + 0.01;
            int32_t b = 0, n = 100;
            double lm = 50, lc = 40, li = 60;
            const void *er[7] = {&st, &b, &acc, &lm, &lc, &li, &n};
            assert_int_equal(runlog_append(rl, "eval", 1, er, err, sizeof err), 0);
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

// The design: start scores per template and plateaus per template, set and seed.
static const char *const TPL[3] = {"r1", "boxed", "none"};
static const char *const SETS[4] = {"level1", "levels1-3", "all", "ood"};
static const double START[3] = {0.10, 0.15, 0.14};
static const double PLATEAU[2][3][4] = {
    // seed 1: level1 levels1-3 all ood
    {{0.25, 0.28, 0.30, 0.26}, {0.29, 0.31, 0.32, 0.33}, {0.27, 0.30, 0.31, 0.28}},
    // seed 2
    {{0.27, 0.29, 0.31, 0.27}, {0.30, 0.32, 0.34, 0.33}, {0.28, 0.30, 0.31, 0.305}},
};

// Writes the 24 runs (template x set x seed) and loads them, in that order.
static int write_design(Run **runs, double plateau_shift_r1_all) {
    int n = 0;
    for (int t = 0; t < 3; t++)
        for (int q = 0; q < 4; q++)
            for (int s = 0; s < 2; s++) {
                char name[96];
                snprintf(name, sizeof name, "fig6_%s_%s_s%d.h5", TPL[t], SETS[q], s + 1);
                double p = PLATEAU[s][t][q] + (t == 0 && q == 2 ? plateau_shift_r1_all : 0);
                write_run(tmp_path(name), "dr_grpo", TPL[t], SETS[q], s + 1, START[t], p);
                runs[n++] = load_ok(tmp_path(name));
            }
    return n;
}

static void free_runs(Run **runs, int n) {
    for (int i = 0; i < n; i++) run_free(runs[i]);
}

// ---------------------------------------------------------------- tests

static void test_run_scores(void **state) {
    write_run(tmp_path("one.h5"), "dr_grpo", "boxed", "ood", 3, 0.12, 0.4);
    Run *r = load_ok(tmp_path("one.h5"));
    assert_string_equal(r->template_name, "boxed");
    assert_string_equal(r->question_set, "ood");
    CLOSE(fig6_start_score(r), 0.12, 1e-12);
    // evaluations at 30 and 40 (>= 0.75 x 40): (0.39 + 0.41) / 2
    CLOSE(fig6_plateau_score(r), 0.4, 1e-12);
    run_free(r);
    // a run of the default set is labelled by its weights
    write_run(tmp_path("weights.h5"), "dr_grpo", "r1", "weights", 3, 0.12, 0.4);
    r = load_ok(tmp_path("weights.h5"));
    assert_string_equal(r->question_set, "weights 1,1,1,0,0");
    run_free(r);
}

static void test_checks_arithmetic(void **state) {
    Run *runs[24];
    int n = write_design(runs, 0);
    assert_true(fig6_design(runs, n));
    Fig6Verdict v;
    assert_int_equal(fig6_verdict(runs, n, &v), FIG6_N_CHECKS);
    assert_int_equal(v.n_cells, 12);
    // a cell: r1 on all, two seeds: plateaus 0.30 and 0.31
    const Fig6Cell *cl = &v.cell[2];
    assert_string_equal(cl->template_name, "r1");
    assert_string_equal(cl->question_set, "all");
    assert_int_equal(cl->runs, 2);
    CLOSE(cl->start.v, 0.10, 1e-12);
    CLOSE(cl->plateau.v, 0.305, 1e-12);
    double h = T975_1 * sqrt(0.00005) / sqrt(2);  // sd of {0.30, 0.31} = 0.01 / sqrt 2
    CLOSE(cl->plateau.lo, 0.305 - h, 1e-9);
    CLOSE(cl->last.v, 0.315, 1e-12);   // the last evaluation: plateau + 0.01
    CLOSE(cl->reward.v, 0.5, 1e-12);

    // 1: boxed - r1 = 0.05, none - r1 = 0.04, both >= 0.02
    const Check *c = &v.check[FIG6_START];
    CLOSE(c->f[0].v, 0.10, 1e-12);
    CLOSE(c->f[1].v, 0.15, 1e-12);
    CLOSE(c->f[2].v, 0.14, 1e-12);
    assert_true(c->pass);
    // 2: spreads on all: seed 1 max(0.30, 0.32, 0.31) - min = 0.02, seed 2 0.34 - 0.31 = 0.03
    c = &v.check[FIG6_COMPARABLE];
    assert_int_equal(v.seeds[FIG6_COMPARABLE], 2);
    CLOSE(c->f[0].v, 0.025, 1e-12);
    h = T975_1 * (0.01 / sqrt(2)) / sqrt(2);
    CLOSE(c->f[0].hi, 0.025 + h, 1e-9);
    CLOSE(c->f[1].v, 0.05, 1e-12);  // start: 0.15 - 0.10
    assert_true(c->pass);           // 0.025 <= 0.03
    // 3: r1, all - level1: 0.05 and 0.04: mean 0.045 >= 0.02, but the CI reaches below 0
    c = &v.check[FIG6_NARROW_LOWER];
    assert_int_equal(v.seeds[FIG6_NARROW_LOWER], 2);
    CLOSE(c->f[0].v, 0.045, 1e-12);
    CLOSE(c->f[0].lo, 0.045 - h, 1e-9);
    assert_true(c->f[0].lo < 0);
    assert_false(c->pass);
    assert_non_null(strstr(c->reason, "CI"));
    // 4: ood - all, boxed: +0.01 and -0.01 (mean 0); none: -0.03 and -0.005 (mean -0.0175)
    c = &v.check[FIG6_OOD_AS_WELL];
    CLOSE(c->f[0].v, 0.0, 1e-12);
    CLOSE(c->f[1].v, -0.0175, 1e-12);
    assert_true(c->pass);  // both >= -0.02
    assert_int_equal(v.passed, 3);
    free_runs(runs, n);

    // r1 on all 0.05 higher in both seeds: check 3 passes (0.095, CI above 0), check 2 fails
    // (spreads 0.35 - 0.31 = 0.04 and 0.36 - 0.31 = 0.05: mean 0.045 > 0.03)
    n = write_design(runs, 0.05);
    fig6_verdict(runs, n, &v);
    c = &v.check[FIG6_NARROW_LOWER];
    CLOSE(c->f[0].v, 0.095, 1e-12);
    assert_true(c->f[0].lo > 0);
    assert_true(c->pass);
    c = &v.check[FIG6_COMPARABLE];
    CLOSE(c->f[0].v, 0.045, 1e-12);
    assert_false(c->pass);
    free_runs(runs, n);
}

static void test_checks_fail_and_one_seed(void **state) {
    // one seed: no CIs; check 3 passes on its point estimate, check 4 fails on none's side,
    // check 1 fails where none starts with r1
    Run *runs[12];
    int n = 0;
    for (int t = 0; t < 3; t++)
        for (int q = 0; q < 4; q++) {
            char name[96];
            snprintf(name, sizeof name, "one_%s_%s.h5", TPL[t], SETS[q]);
            double start = t == 2 ? 0.11 : START[t];  // none 0.01 above r1: less than 0.02
            double p = PLATEAU[0][t][q] - (t == 2 && q == 3 ? 0.02 : 0);  // none's ood 0.26: -0.05
            write_run(tmp_path(name), "dr_grpo", TPL[t], SETS[q], 1, start, p);
            runs[n++] = load_ok(tmp_path(name));
        }
    Fig6Verdict v;
    fig6_verdict(runs, n, &v);
    assert_false(v.check[FIG6_START].pass);
    const Check *c = &v.check[FIG6_NARROW_LOWER];
    CLOSE(c->f[0].v, 0.05, 1e-12);
    assert_true(isnan(c->f[0].lo));
    assert_true(c->pass);
    assert_non_null(strstr(c->reason, "one seed"));
    c = &v.check[FIG6_OOD_AS_WELL];
    CLOSE(c->f[1].v, -0.05, 1e-12);
    assert_false(c->pass);
    // without the full set under a template there is nothing to compare: checks 2-4 fail
    Fig6Verdict w;
    Run *some[4];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(runs[i]->question_set, "all") != 0 && k < 4) some[k++] = runs[i];
    fig6_verdict(some, k, &w);
    for (int ch = FIG6_COMPARABLE; ch < FIG6_N_CHECKS; ch++) assert_false(w.check[ch].pass);
    assert_non_null(strstr(w.check[FIG6_COMPARABLE].reason, "no seed"));
    // fig6_design: one template and set is not a design; nor are two objectives
    assert_false(fig6_design(runs, 1));
    write_run(tmp_path("grpo.h5"), "grpo", "boxed", "all", 1, 0.1, 0.2);
    Run *mixed[2] = {runs[0], load_ok(tmp_path("grpo.h5"))};
    assert_false(fig6_design(mixed, 2));
    // and the figure refuses them, naming both
    char err[2048] = "";
    PlotOptions o = {.out = tmp_path("mixed"), .formats = FMT_PNG, .smooth = 0};
    assert_int_equal(plot_fig6(mixed, 2, &o, err, sizeof err), -1);
    printf("  %s\n", err);
    assert_non_null(strstr(err, "grpo.h5 is a run of grpo"));
    assert_non_null(strstr(err, "one of dr_grpo"));
    run_free(mixed[1]);
    free_runs(runs, n);
}



static void test_figure_and_commands(void **state) {
    Run *runs[24];
    int n = write_design(runs, 0);
    PlotOptions o = {.out = tmp_path("fig6"), .formats = FMT_ALL, .smooth = 0};
    char err[2048] = "";
    int gp = tu_have_gnuplot();
    int rc = plot_fig6(runs, n, &o, err, sizeof err);
    if (gp && rc != 0) fail_msg("%s", err);
    // the cell boxed x ood: step 0 at the start 0.15 over two runs; step 40 at 0.34 and 0.34
    double v[16];
    assert_int_equal(tu_read_row(tmp_path("fig6_data/eval_boxed__ood.dat"), 0, v, 16), 14);  // fig5's columns
    CLOSE(v[0], 0, 0);
    CLOSE(v[1], 0.15, 1e-12);
    CLOSE(v[10], 2, 0);
    tu_read_row(tmp_path("fig6_data/eval_boxed__ood.dat"), 4, v, 16);
    CLOSE(v[0], 40, 0);
    CLOSE(v[1], 0.34, 1e-12);
    tu_read_row(tmp_path("fig6_data/eval_r1__levels1-3.dat"), 3, v, 16);  // step 30: 0.27 and 0.28
    CLOSE(v[1], 0.275, 1e-12);
    if (gp) {
        static const char *const ext[] = {"png", "pdf", "svg", "gp"};
        for (int i = 0; i < 4; i++) {
            char name[32];
            struct stat st;
            snprintf(name, sizeof name, "fig6.%s", ext[i]);
            assert_int_equal(stat(tmp_path(name), &st), 0);
            printf("  %s: %lld bytes\n", name, (long long)st.st_size);
            assert_true(st.st_size > 1000);
        }
    }
    free_runs(runs, n);
    // the commands: summary of the logs prints the Fig. 6 tables and checks; plot fig6 writes
    char args[1024], out[16384];
    snprintf(args, sizeof args, "summary %s/fig6_*_s1.h5 %s/fig6_*_s2.h5", tmpdir, tmpdir);
    char cmd[2048];
    const char *bin = getenv("GRPOLAB_BIN");
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", bin ? bin : "build/grpolab", args);
    assert_int_equal(tu_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "[PASS] 1. the template sets the starting score"));
    assert_non_null(strstr(out, "[FAIL] 3. with the mismatched template (r1)"));
    assert_non_null(strstr(out, "3 of 4 checks pass"));
    if (gp) {
        snprintf(args, sizeof args, "plot fig6 %s/fig6_*.h5 -o %s/cli_fig6 --format png", tmpdir, tmpdir);
        assert_int_equal(tu_run_cli(args, out, sizeof out), 0);
        struct stat st;
        assert_int_equal(stat(tmp_path("cli_fig6.png"), &st), 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_scores),
        cmocka_unit_test(test_checks_arithmetic),
        cmocka_unit_test(test_checks_fail_and_one_seed),
        cmocka_unit_test(test_figure_and_commands),
    };
    return cmocka_run_group_tests_name("fig6", tests, setup, teardown);
}
