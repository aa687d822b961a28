// test_fig7.c: the analysis of Fig. 7 and Table 2's figure (issue 50): the arithmetic of the
// Fig. 7 checks against values worked out by hand on synthetic runs, and the files of plot fig7
// and plot masked-mean (the masked mean's numbers against the definitions of c_i).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "analysis/fig7.h"
#include "analysis/stats.h"
#include "test_util.h"

static char dir[64];

static const char *tmp_path(const char *name) {
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static int have_gnuplot(void) {
    return system("command -v \"${GNUPLOT:-gnuplot}\" >/dev/null 2>&1") == 0;
}

static void assert_written(const char *path, long bytes) {
    struct stat st;
    if (stat(path, &st) != 0) fail_msg("%s was not written", path);
    if (st.st_size <= bytes) fail_msg("%s: %lld bytes, want more than %ld", path, (long long)st.st_size, bytes);
}

// ---------------------------------------------------------------- the checks' arithmetic

// diff_ci95 on a = {1, 2, 3}, b = {4, 6}: 5 - 2 = 3; pooled variance (2 + 2) / 3 = 4/3, standard
// error sqrt(4/3 (1/3 + 1/2)) = sqrt(10/9), t_{0.975, 3} = 3.182446305.
static void test_diff_ci(void **state) {
    double a[] = {1, 2, 3, NAN}, b[] = {4, 6}, d, h;
    assert_int_equal(diff_ci95(a, 4, b, 2, &d, &h), 5);
    assert_true(fabs(d - 3) < 1e-12);
    assert_true(fabs(h - 3.182446305 * sqrt(10.0 / 9.0)) < 1e-6);
    double one[] = {1};
    diff_ci95(one, 1, one, 1, &d, &h);
    assert_true(isnan(h));
}

// A synthetic run: n steps with reward r0 + dr t/(n-1) and length l0 + dl t/(n-1); evaluations at
// steps 0, 5, 10, ... with scores s0 .. s1 linearly.
typedef struct {
    Run r;
    double step[40], reward[40], len[40], es[9], esc[9], lc[9], li[9];
} FakeRun;

static void fake(FakeRun *f, const char *obj, int seed, double r0, double dr, double l0, double dl, double s0,
                 double s1) {
    memset(f, 0, sizeof *f);
    Run *r = &f->r;
    snprintf(r->objective, sizeof r->objective, "%s", obj);
    r->path = "fake.h5";
    r->seed = seed;
    r->n_steps = 40;
    r->steps_planned = 40;
    r->max_new_tokens = 300;
    r->step = f->step, r->reward = f->reward, r->len_mean = f->len;
    r->len_correct = r->len_incorrect = f->len;
    for (int t = 0; t < 40; t++) {
        f->step[t] = t;
        f->reward[t] = r0 + dr * t / 39.0;
        f->len[t] = l0 + dl * t / 39.0;
    }
    r->n_evals = 9;
    r->eval_step = f->es, r->eval_score = f->esc, r->eval_len_correct = f->lc, r->eval_len_incorrect = f->li;
    for (int e = 0; e < 9; e++) {
        f->es[e] = 5 * e;
        f->esc[e] = s0 + (s1 - s0) * e / 8.0;
        f->lc[e] = f->li[e] = l0;
    }
}

static FakeRun fr[12];
static Run *fruns[12];
static int fbase[12];

// Three seeds per base: Dr. GRPO's last scores 0.2 / 0.5 / 0.55 (+ 0.01 per seed); GRPO's reward
// and length rise, Dr. GRPO's length is flat at the same reward.
static int fake_fig7(double grpo_dl) {
    int n = 0;
    for (int s = 0; s < 3; s++) {
        double e = 0.01 * s;
        fake(&fr[n], "dr_grpo", s, 0, 0.2, 50, 0, 0.1, 0.2 + e), fbase[n++] = FIG7_GENERAL;
        fake(&fr[n], "dr_grpo", s, 0.2, 0.4, 50, 0, 0.3, 0.5 + e), fbase[n++] = FIG7_MATH;
        fake(&fr[n], "grpo", s, 0.2, 0.4, 50, grpo_dl, 0.3, 0.5 + e), fbase[n++] = FIG7_MATH;
        fake(&fr[n], "dr_grpo", s, 0.2, 0.4, 50, 0, 0.3, 0.55 + e), fbase[n++] = FIG7_MATHQA;
    }
    for (int i = 0; i < n; i++) fruns[i] = &fr[i].r;
    return n;
}

static void test_fig7_checks(void **state) {
    int n = fake_fig7(40);
    Fig7Verdict v;
    assert_int_equal(fig7_verdict(fruns, n, fbase, &v), FIG7_N_CHECKS);
    // a ceiling: the mean of the last two scores, s1 - (s1 - s0)/16 (the evaluations are linear)
    assert_true(fabs(fig7_ceiling(fruns[0]) - (0.2 - 0.1 / 16)) < 1e-12);
    // the general base: (0.2 + e) - (0.1 + e)/16 over e = 0, 0.01, 0.02: 0.21 - 0.11/16
    assert_true(fabs(v.ceiling[FIG7_GENERAL].v - (0.21 - 0.11 / 16)) < 1e-12);
    // math - general: the difference of the two means
    double want = (0.5 - 0.2 / 16) - (0.2 - 0.1 / 16);
    assert_true(fabs(v.check[FIG7_CEILING_MATH].f[2].v - want) < 1e-12);
    // each side's ceilings are c + e 15/16: pooled s_p = 0.01 x 15/16, t_{0.975, 4} = 2.776445
    assert_true(fabs((v.check[FIG7_CEILING_MATH].f[2].hi - want) - 2.776445 * 0.01 * 15 / 16 * sqrt(2.0 / 3.0)) < 1e-6);
    assert_true(v.check[FIG7_CEILING_MATH].pass);
    assert_true(v.check[FIG7_CEILING_QA].pass);
    // GRPO's rise over the tenths (steps 0-3 and 36-39): reward 0.4 x 36/39, length 40 x 36/39 (the
    // seeds' curves are the same: a CI of width 0 around it)
    assert_true(fabs(v.check[FIG7_DOUBLE_INCREASE].f[0].v - 0.4 * 36 / 39) < 1e-9);
    assert_true(fabs(v.check[FIG7_DOUBLE_INCREASE].f[1].v - 40.0 * 36 / 39) < 1e-9);
    assert_true(v.check[FIG7_DOUBLE_INCREASE].pass);
    assert_true(v.check[FIG7_DR_LENGTH_FLAT].pass);
    assert_int_equal(v.passed, 4);
    // GRPO's length flat: no double increase
    n = fake_fig7(0);
    fig7_verdict(fruns, n, fbase, &v);
    assert_false(v.check[FIG7_DOUBLE_INCREASE].pass);
    // Dr. GRPO's length rising by 36% of its first tenth: not flat
    n = fake_fig7(40);
    for (int i = 0; i < n; i++)
        if (fbase[i] == FIG7_MATH && strcmp(fruns[i]->objective, "dr_grpo") == 0)
            for (int t = 0; t < 40; t++) fr[i].len[t] = 50 + 20.0 * t / 39;  // + 18.5 over the tenths
    fig7_verdict(fruns, n, fbase, &v);
    assert_true(v.check[FIG7_DR_LENGTH_FLAT].f[0].v > FIG7_LENGTH_FLAT);
    assert_false(v.check[FIG7_DR_LENGTH_FLAT].pass);
    // the general base as good as the math one: ceiling_math fails
    n = fake_fig7(40);
    for (int i = 0; i < n; i++)
        if (fbase[i] == FIG7_GENERAL)
            for (int e = 0; e < 9; e++) fr[i].esc[e] = fr[i + 1].esc[e];
    fig7_verdict(fruns, n, fbase, &v);
    assert_false(v.check[FIG7_CEILING_MATH].pass);
}

// ---------------------------------------------------------------- figures

static void test_figures(void **state) {
    int n = fake_fig7(40);
    char base[300], err[1024];
    snprintf(base, sizeof base, "%s/fig7", dir);
    PlotOptions o = {.out = base, .formats = have_gnuplot() ? FMT_ALL : 0, .smooth = 0};
    if (!o.formats) {
        printf("  gnuplot not found: only the data files are checked\n");
        return;
    }
    assert_int_equal(plot_fig7(fruns, n, fbase, &o, err, sizeof err), 0);
    assert_written(tmp_path("fig7.png"), 5000);
    assert_written(tmp_path("fig7.pdf"), 1000);
    assert_written(tmp_path("fig7.svg"), 1000);
    assert_written(tmp_path("fig7_data/eval_general.dat"), 10);
    assert_written(tmp_path("fig7_data/train_grpo.dat"), 10);

    // masked mean: M c_i of GRPO's per-response mean is M / (M |o|) = 1/|o|; a token-mean over
    // the batch M / ((M - 1) L_other + |o|); Dr. GRPO's M / (M L_max) = 1/L_max
    assert_true(fabs(masked_mean_weight(AGG_SEQ_MEAN_TOKEN_MEAN, 50) - 1.0 / 50) < 1e-7);
    assert_true(fabs(masked_mean_weight(AGG_TOKEN_MEAN, 50) - 64.0 / (63 * 100 + 50)) < 1e-7);
    assert_true(fabs(masked_mean_weight(AGG_SEQ_MEAN_TOKEN_SUM_NORM, 50) - 1.0 / 300) < 1e-7);
    Aggregation aggs[8];
    char labels[8][160];
    int nc = masked_mean_curves(aggs, labels, 8);
    assert_true(nc >= 2);
    assert_int_equal(aggs[0], AGG_SEQ_MEAN_TOKEN_MEAN);
    snprintf(base, sizeof base, "%s/mm", dir);
    assert_int_equal(plot_masked_mean(&o, err, sizeof err), 0);
    assert_written(tmp_path("mm.png"), 5000);
    assert_written(tmp_path("mm.svg"), 1000);
    size_t len;
    char *data = tu_read_file(tmp_path("mm_data/masked_mean.dat"), &len);
    assert_non_null(data);
    // the row of length 100: 1/100 for GRPO's per-response mean, total 1
    char *row = strstr(data, "\n100 ");
    assert_non_null(row);
    double l, w, tot;
    assert_int_equal(sscanf(row + 1, "%lf %lf %lf", &l, &w, &tot), 3);
    assert_true(fabs(w - 0.01) < 1e-8 && fabs(tot - 1) < 1e-6);
    free(data);
}

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/grpolab-fig7-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    tu_remove_dir(dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_ci),
        cmocka_unit_test(test_fig7_checks), cmocka_unit_test(test_figures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
