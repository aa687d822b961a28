// test_verdict.c: the checks of the finding (src/analysis/verdict.h) on run sets built in
// memory: one that passes every check with its figures computed by hand, one for each check
// that fails exactly that check, and the edge cases (one seed pair, unpaired runs, NaN
// figures, a set without both objectives, logs that do not know the eval truncation); the
// equivalence test of check 5 against its closed form; the comparisons of the 2x2 of GRPO's
// two terms (verdict_plan, group_title).
#include "test_util.h"

#include "analysis/analysis.h"
#include "analysis/draws.h"
#include "analysis/verdict.h"

// A hand-made run of N steps (tenths of K steps): each per-step column is its first value over
// the first tenth, its last value over the last tenth and linear in between, so the tenths'
// means are those values; the training length of incorrect responses is the exact line
// len_i + slope_i s (its last-half slope slope_i per step, CI width 0); one evaluation after
// the last step.
enum { N = 20, K = 2 };
typedef struct {
    const char *preset;
    int64_t seed;
    double reward[2], trunc[2], loop[2], dis[2];
    double len_i, slope_i;  // tokens, tokens per step
    double eval_len_i;      // NaN: no incorrect eval response; -1: no evaluation at all
    int budget;             // world.max_new_tokens
    double eval_cut;        // of the EVAL_BAD incorrect eval responses, how many the budget cut
                            // (-1: the log does not say, as one of an older grpolab)
} Spec;
enum { EVAL_BAD = 100 };

static double *column(double first, double last) {
    double *x = malloc(N * sizeof *x);
    assert_non_null(x);
    for (int s = 0; s < N; s++)
        x[s] = s < K ? first : s >= N - K ? last : first + (last - first) * (s - K + 1) / (N - 2 * K + 1);
    return x;
}

static Run *make_run(const Spec *p) {
    Run *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->path = strdup(p->preset);
    snprintf(r->objective, sizeof r->objective, "%s", p->preset);
    snprintf(r->preset, sizeof r->preset, "%s", p->preset);
    r->seed = p->seed;
    r->steps_planned = N;
    r->max_new_tokens = p->budget;
    r->n_steps = N;
    r->step = column(0, 0);
    for (int s = 0; s < N; s++) r->step[s] = s;
    r->reward = column(p->reward[0], p->reward[1]);
    r->len_incorrect = column(0, 0);
    for (int s = 0; s < N; s++) r->len_incorrect[s] = p->len_i + p->slope_i * s;
    r->len_correct = column(30, 30);
    r->len_mean = column(50, 50);
    r->truncation = column(p->trunc[0], p->trunc[1]);
    r->loop = column(p->loop[0], p->loop[1]);
    r->disagreement = column(p->dis[0], p->dis[1]);
    r->selfcheck = column(0.5, 0.5);
    r->bias_cosine = column(0.9, 0.9);
    r->mixed_groups = column(0.5, 0.5);
    r->n_evals = p->eval_len_i == -1 ? 0 : 1;
    r->eval_step = malloc(sizeof(double));
    r->eval_score = malloc(sizeof(double));
    r->eval_len_correct = malloc(sizeof(double));
    r->eval_len_incorrect = malloc(sizeof(double));
    r->eval_step[0] = N, r->eval_score[0] = 0.3, r->eval_len_correct[0] = 30, r->eval_len_incorrect[0] = p->eval_len_i;
    r->eval_n_incorrect = malloc(sizeof(double));
    r->eval_n_incorrect[0] = isnan(p->eval_len_i) ? 0 : EVAL_BAD;
    if (p->eval_cut >= 0) {
        r->eval_trunc_incorrect = malloc(sizeof(double));
        r->eval_trunc_incorrect[0] = isnan(p->eval_len_i) ? 0 : p->eval_cut;
    }
    return r;
}

// The set that passes every check: three seeds of each objective. GRPO's incorrect eval
// responses are 150, 140, 160 tokens against Dr. GRPO's 100 (ratios 1.5, 1.4, 1.6); its
// incorrect training responses grow by 20 tokens per 100 steps while Dr. GRPO's shrink by 10;
// truncation rises by 0.08 and loops by 0.10 under GRPO, by 0.01 each under Dr. GRPO;
// disagreements 0.40 -> 0.35 and 0.40 -> 0.30; rewards 0.30 -> 0.49, 0.50, 0.51 under both
// (rises 0.19, 0.20, 0.21; pair differences 0); a budget of 300 tokens; of GRPO's 100
// incorrect eval responses per run 20, 30, 40 cut by it (pooled 90 of 300), of Dr. GRPO's 5.
enum { SEEDS = 3, RUNS = 2 * SEEDS };
static void passing_set(Spec s[RUNS]) {
    for (int i = 0; i < SEEDS; i++) {
        s[i] = (Spec){"grpo", 1 + i, {0.30, 0.49 + 0.01 * i}, {0.02, 0.10}, {0.05, 0.15}, {0.40, 0.35},
                      80, 0.2, 150 + (i == 1 ? -10 : i == 2 ? 10 : 0), 300, 20 + 10 * i};
        s[SEEDS + i] = (Spec){"dr_grpo", 1 + i, {0.30, 0.49 + 0.01 * i}, {0.02, 0.03}, {0.05, 0.06}, {0.40, 0.30},
                              80, -0.1, 100, 300, 5};
    }
}

static int verdict_of(const Spec *s, int n, FindingVerdict *v) {
    Run *runs[RUNS + 2];
    for (int i = 0; i < n; i++) runs[i] = make_run(&s[i]);
    int rc = finding_verdict(runs, n, v);
    for (int i = 0; i < n; i++) run_free(runs[i]);
    return rc;
}

static void print_verdict(const char *what, const FindingVerdict *v) {
    printf("  %s: %d of %d pass\n", what, v->passed, v->checks);
    for (int c = 0; c < v->checks; c++)
        printf("    [%s] %-15s %s\n", v->check[c].pass ? "PASS" : "FAIL", v->check[c].name, v->check[c].reason);
}

#define CLOSE(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))
static const double T2 = 4.302652729911275;  // t(0.975, 2): the CI of three seeds

static void test_all_pass(void **state) {
    Spec s[RUNS];
    passing_set(s);
    FindingVerdict v;
    assert_int_equal(verdict_of(s, RUNS, &v), N_CHECKS);
    print_verdict("passing set", &v);
    assert_int_equal(v.passed, N_CHECKS);
    for (int c = 0; c < N_CHECKS; c++) assert_true(v.check[c].pass);
    assert_int_equal(v.pairs, 3);
    assert_int_equal(v.unpaired, 0);
    const Check *c = &v.check[CHECK_EVAL_RATIO];
    // ratios 1.4, 1.5, 1.6: on the log scale the mean m of log 1.4, log 1.5, log 1.6 and their
    // sd; the ratio exp(m) (the cube root of 1.4 x 1.5 x 1.6), its CI exp(m -+ t s / sqrt 3)
    double l[3] = {log(1.4), log(1.5), log(1.6)}, m = (l[0] + l[1] + l[2]) / 3, ss = 0;
    for (int i = 0; i < 3; i++) ss += (l[i] - m) * (l[i] - m);
    double lhalf = T2 * sqrt(ss / 2) / sqrt(3.0);
    CLOSE(c->f[0].v, cbrt(1.4 * 1.5 * 1.6), 1e-12);
    CLOSE(c->f[0].lo, exp(m - lhalf), 1e-9);
    CLOSE(c->f[0].hi, exp(m + lhalf), 1e-9);
    double half = T2 * 0.1 / sqrt(3.0);  // information: the arithmetic mean 1.5, sd 0.1
    CLOSE(c->f[1].v, 1.5, 1e-12);
    CLOSE(c->f[1].lo, 1.5 - half, 1e-9);
    CLOSE(c->threshold, 1.3, 0);
    c = &v.check[CHECK_LENGTH_SLOPE];
    CLOSE(c->f[0].v, 20, 1e-9);
    CLOSE(c->f[0].lo, 20, 1e-6);  // an exact line: CI width 0
    CLOSE(c->f[1].v, -10, 1e-9);
    CLOSE(c->threshold, 0.1, 0);
    c = &v.check[CHECK_FAILING_STATES];
    CLOSE(c->f[0].v, 0.08, 1e-12);
    CLOSE(c->f[1].v, 0.01, 1e-12);
    CLOSE(c->f[2].v, 0.10, 1e-12);
    CLOSE(c->f[3].v, 0.01, 1e-12);
    c = &v.check[CHECK_DISAGREEMENT];
    CLOSE(c->f[0].v, 0.40, 1e-12);
    CLOSE(c->f[1].v, 0.35, 1e-12);
    CLOSE(c->f[2].v, 0.40, 1e-12);
    CLOSE(c->f[3].v, 0.30, 1e-12);
    CLOSE(c->threshold, 0.25, 0);
    c = &v.check[CHECK_REWARD];  // equal rewards in every pair: a CI of width 0 at 0
    CLOSE(c->f[0].v, 0, 1e-12);
    CLOSE(c->f[0].lo, 0, 1e-12);
    CLOSE(c->f[0].hi, 0, 1e-12);
    CLOSE(c->f[1].v, 0.50, 1e-12);
    CLOSE(c->f[2].v, 0.50, 1e-12);
    CLOSE(c->threshold, 0.03, 0);
    assert_int_equal(v.reward_pairs, 3);
    for (int k = 0; k < 2; k++) {  // the rises of both objectives: 0.19, 0.20, 0.21
        c = &v.check[CHECK_REWARD_RISES];
        CLOSE(c->f[k].v, 0.20, 1e-12);
        CLOSE(c->f[k].lo, 0.20 - T2 * 0.01 / sqrt(3.0), 1e-9);
        assert_int_equal(v.runs[k], 3);
    }
    CLOSE(v.check[CHECK_REWARD_RISES].threshold, 0.05, 0);
    c = &v.check[CHECK_EVAL_TRUNC];
    CLOSE(c->f[0].v, 0.3, 1e-12);  // (20 + 30 + 40) / 300
    CLOSE(c->f[1].v, 150, 1e-12);   // their mean length, information
    CLOSE(c->f[1].hi, 150 + T2 * 10 / sqrt(3.0), 1e-9);
    CLOSE(c->f[2].v, 300, 0);
    CLOSE(c->f[3].v, 3, 0);
    CLOSE(c->threshold, 0.5, 0);
    assert_string_equal(v.trunc_source, "/eval");
    assert_string_equal(v.title[0], "GRPO");
    assert_string_equal(v.title[1], "Dr. GRPO");
    assert_int_equal(v.saturated, 0);
    assert_int_equal(v.budget, 300);
}

// Each case changes the passing set so that exactly one check fails.
typedef struct {
    const char *what;
    int check;                  // the check that must fail
    void (*change)(Spec *s);    // s: the passing set (GRPO's runs first)
    const char *reason;         // a part of the failed check's reason
} FailCase;

static void ratio_low(Spec *s) {  // ratios 1.1, 1.2, 1.3
    for (int i = 0; i < SEEDS; i++) s[i].eval_len_i = 110 + 10 * i;
}
static void ratio_wide(Spec *s) {  // ratios 1.0, 1.5, 2.0: mean 1.5, CI down to 0.26
    for (int i = 0; i < SEEDS; i++) s[i].eval_len_i = 100 + 50 * i;
}
static void grpo_flat(Spec *s) {
    for (int i = 0; i < SEEDS; i++) s[i].slope_i = 0;
}
static void dr_grows(Spec *s) {
    for (int i = 0; i < SEEDS; i++) s[SEEDS + i].slope_i = 0.1;
}
static void trunc_flat(Spec *s) {
    for (int i = 0; i < SEEDS; i++) s[i].trunc[0] = s[i].trunc[1] = 0.05;
}
static void loops_both(Spec *s) {  // loops rise under Dr. GRPO by as much as under GRPO
    for (int i = 0; i < SEEDS; i++) s[SEEDS + i].loop[1] = 0.15;
}
static void grpo_collapse(Spec *s) {  // 0.40 -> 0.09, under a quarter
    for (int i = 0; i < SEEDS; i++) s[i].dis[1] = 0.09;
}
static void dr_none(Spec *s) {  // no disagreement at all
    for (int i = 0; i < SEEDS; i++) s[SEEDS + i].dis[0] = s[SEEDS + i].dis[1] = 0;
}
static void dr_reward_low(Spec *s) {  // Dr. GRPO 0.46 against GRPO's 0.49-0.51: -0.03..-0.05
    for (int i = 0; i < SEEDS; i++) s[SEEDS + i].reward[1] = 0.46;
}
static void dr_reward_high(Spec *s) {  // Dr. GRPO 0.56 against 0.49-0.51: equivalence fails too
    for (int i = 0; i < SEEDS; i++) s[SEEDS + i].reward[1] = 0.56;
}
static void reward_pairs_noisy(Spec *s) {  // differences +0.04, -0.04, 0: mean 0, CI +-0.067
    s[SEEDS].reward[1] += 0.04, s[SEEDS + 1].reward[1] -= 0.04;
}
// (the final rewards kept: check 5 still passes)
static void grpo_rise_small(Spec *s) {  // rises 0.01, 0.02, 0.03
    for (int i = 0; i < SEEDS; i++) s[i].reward[0] = 0.48;
}
static void grpo_rise_wide(Spec *s) {  // rises 0.0, 0.1, 0.2: mean 0.1, CI down to -0.15
    for (int i = 0; i < SEEDS; i++) s[i].reward[0] = s[i].reward[1] - 0.1 * i;
}
static void dr_reward_flat(Spec *s) {  // Dr. GRPO at 0.50 from the start
    for (int i = 0; i < SEEDS; i++) s[SEEDS + i].reward[0] = 0.50, s[SEEDS + i].reward[1] = 0.50;
}
static void grpo_capped(Spec *s) {  // 60, 70, 80 of 100 cut: 210 of 300
    for (int i = 0; i < SEEDS; i++) s[i].eval_cut += 40;
}
static void grpo_half_capped(Spec *s) {  // 40, 50, 60 of 100: 150 of 300 is not below one half
    for (int i = 0; i < SEEDS; i++) s[i].eval_cut += 20;
}
static void trunc_unknown(Spec *s) {  // one GRPO run from a log that does not log it
    s[1].eval_cut = -1;
}

static const FailCase FAILS[] = {
    {"eval ratio under 1.3", CHECK_EVAL_RATIO, ratio_low, "below 1.3"},
    {"eval ratio with a CI reaching 1", CHECK_EVAL_RATIO, ratio_wide, "not above 1"},
    {"GRPO's incorrect length flat", CHECK_LENGTH_SLOPE, grpo_flat, "GRPO's slope +0.0"},
    {"Dr. GRPO's incorrect length growing", CHECK_LENGTH_SLOPE, dr_grows, "Dr. GRPO's slope +10.0"},
    {"GRPO's truncation flat", CHECK_FAILING_STATES, trunc_flat, "truncation rate does not rise"},
    {"loops rising under both", CHECK_FAILING_STATES, loops_both, "loops rise under Dr. GRPO"},
    {"GRPO's disagreements collapse", CHECK_DISAGREEMENT, grpo_collapse, "GRPO's disagreements collapse"},
    {"Dr. GRPO without disagreements", CHECK_DISAGREEMENT, dr_none, "Dr. GRPO's disagreements collapse"},
    {"Dr. GRPO's reward lower", CHECK_REWARD, dr_reward_low, "difference -0.040, 90% CI -0.057..-0.023 not within +-0.03"},
    {"Dr. GRPO's reward higher", CHECK_REWARD, dr_reward_high, "difference +0.060"},
    {"pair differences too spread", CHECK_REWARD, reward_pairs_noisy, "not within +-0.03"},
    {"GRPO's reward rising too little", CHECK_REWARD_RISES, grpo_rise_small, "GRPO's reward rises by +0.020"},
    {"GRPO's reward rise with a CI reaching 0", CHECK_REWARD_RISES, grpo_rise_wide, "CI reaching down to -0.148"},
    {"Dr. GRPO's reward flat", CHECK_REWARD_RISES, dr_reward_flat, "Dr. GRPO's reward rises by +0.000"},
    {"GRPO's incorrect eval responses cut", CHECK_EVAL_TRUNC, grpo_capped, "210 of 300 incorrect responses (0.70) cut"},
    {"half of them cut", CHECK_EVAL_TRUNC, grpo_half_capped, "(0.50) cut by the budget, not below 0.5"},
    {"the truncation not logged", CHECK_EVAL_TRUNC, trunc_unknown, "not available for 1 of GRPO's 3 runs"},
};

static void test_each_check_fails(void **state) {
    int failed[N_CHECKS] = {0};
    for (size_t k = 0; k < sizeof FAILS / sizeof *FAILS; k++) {
        Spec s[RUNS];
        passing_set(s);
        FAILS[k].change(s);
        FindingVerdict v;
        assert_int_equal(verdict_of(s, RUNS, &v), N_CHECKS);
        print_verdict(FAILS[k].what, &v);
        for (int c = 0; c < N_CHECKS; c++) assert_int_equal(v.check[c].pass, c != FAILS[k].check);
        assert_int_equal(v.passed, N_CHECKS - 1);
        if (!strstr(v.check[FAILS[k].check].reason, FAILS[k].reason))
            fail_msg("%s: reason '%s' lacks '%s'", FAILS[k].what, v.check[FAILS[k].check].reason, FAILS[k].reason);
        failed[FAILS[k].check] = 1;
    }
    for (int c = 0; c < N_CHECKS; c++) assert_true(failed[c]);  // every check has a failing case
}

// GRPO's incorrect training responses flat at 250 tokens of a budget of 300 (>= 0.8 of it):
// the slope check fails on GRPO's side and the verdict says they are saturated; at 200 or
// with the check passed, it does not.
static void test_saturation(void **state) {
    for (int k = 0; k < 3; k++) {
        Spec s[RUNS];
        passing_set(s);
        for (int i = 0; i < SEEDS; i++) {
            s[i].len_i = k == 1 ? 200 : 250;
            s[i].slope_i = k == 2 ? 0.2 : 0;
            s[i].trunc[1] = 0.3;
        }
        if (k == 2)
            for (int i = 0; i < SEEDS; i++) s[i].len_i = 250 - 0.2 * N;  // growing, ending near 250
        FindingVerdict v;
        verdict_of(s, RUNS, &v);
        assert_int_equal(v.check[CHECK_LENGTH_SLOPE].pass, k == 2);
        assert_int_equal(v.saturated, k == 0);
        if (k == 0) {
            CLOSE(v.grpo_len_i, 250, 1e-9);
            CLOSE(v.grpo_trunc, 0.3, 1e-12);
            assert_int_equal(v.budget, 300);
        }
    }
}

// Check 2's margin: Dr. GRPO's incorrect length drifting up by 1.9 tokens per 100 steps (an
// exact line: CI width 0) is under a tenth of GRPO's +20 and passes; by 2.1 it does not.
static void test_slope_margin(void **state) {
    for (int k = 0; k < 2; k++) {
        Spec s[RUNS];
        passing_set(s);
        for (int i = 0; i < SEEDS; i++) s[SEEDS + i].slope_i = k ? 0.021 : 0.019;
        FindingVerdict v;
        verdict_of(s, RUNS, &v);
        const Check *c = &v.check[CHECK_LENGTH_SLOPE];
        CLOSE(c->f[1].v, k ? 2.1 : 1.9, 1e-9);
        assert_int_equal(c->pass, k == 0);
        if (k) assert_non_null(strstr(c->reason, "reaching 0.1 of GRPO's"));
    }
}

static void test_edge_cases(void **state) {
    Spec s[RUNS];
    passing_set(s);
    FindingVerdict v;
    // one seed pair: no CI for the ratio nor the reward difference, which cannot pass without
    // one; the slopes' CIs come from the regression and the other checks compare means, so
    // they still pass
    Spec pair[2] = {s[0], s[SEEDS]};
    assert_int_equal(verdict_of(pair, 2, &v), N_CHECKS);
    print_verdict("one seed pair", &v);
    assert_int_equal(v.pairs, 1);
    const Check *c = &v.check[CHECK_EVAL_RATIO];
    CLOSE(c->f[0].v, 1.5, 1e-12);
    assert_true(isnan(c->f[0].lo) && isnan(c->f[0].hi));
    assert_false(c->pass);
    assert_non_null(strstr(c->reason, "no CI from one seed pair"));
    for (int k = CHECK_LENGTH_SLOPE; k < N_CHECKS; k++) assert_true(v.check[k].pass == (k != CHECK_REWARD));
    assert_non_null(strstr(v.check[CHECK_REWARD].reason, "no CI from one seed pair"));  // equivalence needs a CI
    // unpaired runs (seeds 1 and 2): the ratio of the objectives' means, no CI
    pair[1].seed = 2;
    verdict_of(pair, 2, &v);
    assert_int_equal(v.pairs, 0);
    assert_int_equal(v.unpaired, 1);
    CLOSE(v.check[CHECK_EVAL_RATIO].f[0].v, 1.5, 1e-12);
    assert_non_null(strstr(v.check[CHECK_EVAL_RATIO].reason, "unpaired runs"));
    assert_false(v.check[CHECK_EVAL_RATIO].pass);
    // NaN figures never pass: no incorrect eval response, no evaluation at all, no reward,
    // no disagreement share
    for (int k = 0; k < 2; k++) {
        passing_set(s);
        s[1].eval_len_i = k ? -1 : NAN;  // NaN in one pair: left out of the mean
        verdict_of(s, RUNS, &v);
        // their geometric mean; on the log scale the two logs' sd is |log 1.6 - log 1.5| / sqrt 2,
        // so the CI's lower end is exp(m - t(0.975, 1) |log 1.6 - log 1.5| / 2) = 1.028: it passes
        double m = (log(1.5) + log(1.6)) / 2, lo = exp(m - 12.7062047361747 * (log(1.6) - log(1.5)) / 2);
        CLOSE(v.check[CHECK_EVAL_RATIO].f[0].v, sqrt(1.5 * 1.6), 1e-12);
        CLOSE(v.check[CHECK_EVAL_RATIO].f[0].lo, lo, 1e-9);
        assert_true(lo > 1 && v.check[CHECK_EVAL_RATIO].pass == 1);
        CLOSE(v.check[CHECK_EVAL_RATIO].f[1].lo, 1.55 - 12.7062047361747 * 0.05, 1e-9);  // the arithmetic t CI's: 0.915
        for (int i = 0; i < SEEDS; i++) s[i].eval_len_i = k ? -1 : NAN;
        verdict_of(s, RUNS, &v);
        assert_true(isnan(v.check[CHECK_EVAL_RATIO].f[0].v));
        assert_false(v.check[CHECK_EVAL_RATIO].pass);
        assert_non_null(strstr(v.check[CHECK_EVAL_RATIO].reason, "no ratio"));
        assert_false(v.check[CHECK_EVAL_TRUNC].pass);
        assert_non_null(strstr(v.check[CHECK_EVAL_TRUNC].reason, k ? "not available" : "no incorrect eval response"));
    }
    passing_set(s);
    for (int i = 0; i < RUNS; i++) s[i].reward[0] = s[i].reward[1] = NAN, s[i].dis[0] = s[i].dis[1] = NAN;
    for (int i = 0; i < RUNS; i++) s[i].trunc[0] = s[i].trunc[1] = NAN;
    verdict_of(s, RUNS, &v);
    print_verdict("NaN rewards, disagreements and truncation", &v);
    assert_false(v.check[CHECK_REWARD].pass);
    assert_false(v.check[CHECK_DISAGREEMENT].pass);
    assert_false(v.check[CHECK_FAILING_STATES].pass);
    assert_true(isnan(v.check[CHECK_REWARD].f[0].v));
    assert_non_null(strstr(v.check[CHECK_REWARD].reason, "no seed pair with both final rewards"));
    assert_non_null(strstr(v.check[CHECK_DISAGREEMENT].reason, "NaN"));
    assert_non_null(strstr(v.check[CHECK_FAILING_STATES].reason, "NaN"));
    assert_false(v.check[CHECK_REWARD_RISES].pass);
    assert_non_null(strstr(v.check[CHECK_REWARD_RISES].reason, "NaN"));
    // without Dr. GRPO (or without GRPO) there is nothing to check; other objectives are left out
    passing_set(s);
    assert_int_equal(verdict_of(s, SEEDS, &v), 0);
    assert_int_equal(v.passed, 0);
    for (int i = 0; i < SEEDS; i++) s[i].preset = "dapo";
    assert_int_equal(verdict_of(s, RUNS, &v), 0);
    passing_set(s);
    Spec more[RUNS + 2];
    memcpy(more, s, sizeof s);
    more[RUNS] = s[0], more[RUNS].preset = "rloo", more[RUNS].eval_len_i = 1000;
    more[RUNS + 1] = more[RUNS], more[RUNS + 1].preset = "dapo";
    assert_int_equal(verdict_of(more, RUNS + 2, &v), N_CHECKS);
    assert_int_equal(v.passed, N_CHECKS);
    CLOSE(v.check[CHECK_EVAL_RATIO].f[0].v, cbrt(1.4 * 1.5 * 1.6), 1e-12);
}

// With one run per objective the reward rise's CI comes from the steps of its two tenths:
// GRPO's first tenth 0.2, 0.4 and last 0.5, 0.7 give a rise of 0.3 with a pooled variance of
// 0.02, so the CI is 0.3 +- t(0.975, 2) sqrt(0.02 (1/2 + 1/2)), reaching below 0; Dr. GRPO's
// constant tenths give a CI of width 0. A tenth of one step has no CI.
static void test_reward_rise_one_run(void **state) {
    Spec s[RUNS];
    passing_set(s);
    Run *runs[2] = {make_run(&s[0]), make_run(&s[SEEDS])};
    runs[0]->reward[0] = 0.2, runs[0]->reward[1] = 0.4, runs[0]->reward[N - 2] = 0.5, runs[0]->reward[N - 1] = 0.7;
    FindingVerdict v;
    assert_int_equal(finding_verdict(runs, 2, &v), N_CHECKS);
    print_verdict("one run each, GRPO's reward noisy", &v);
    const Check *c = &v.check[CHECK_REWARD_RISES];
    double half = T2 * sqrt(0.02);
    CLOSE(c->f[0].v, 0.3, 1e-12);
    CLOSE(c->f[0].lo, 0.3 - half, 1e-9);
    CLOSE(c->f[0].hi, 0.3 + half, 1e-9);
    CLOSE(c->f[1].v, 0.19, 1e-12);
    CLOSE(c->f[1].lo, 0.19, 1e-12);
    assert_int_equal(v.runs[0], 1);
    assert_false(c->pass);
    runs[0]->reward[1] = 0.2, runs[0]->reward[N - 2] = 0.7;  // both tenths constant: CI width 0
    finding_verdict(runs, 2, &v);
    CLOSE(v.check[CHECK_REWARD_RISES].f[0].lo, 0.5, 1e-12);
    assert_true(v.check[CHECK_REWARD_RISES].pass);
    for (int i = 0; i < 2; i++) runs[i]->n_steps = 5;  // tenths of one step
    finding_verdict(runs, 2, &v);
    assert_true(isnan(v.check[CHECK_REWARD_RISES].f[0].lo));
    assert_false(v.check[CHECK_REWARD_RISES].pass);
    assert_non_null(strstr(v.check[CHECK_REWARD_RISES].reason, "no CI"));
    for (int i = 0; i < 2; i++) run_free(runs[i]);
}

// Check 5's equivalence test against its closed form: the differences 0.01, 0.02, 0.00 have
// mean 0.01 and s = 0.01, so the 90% CI is 0.01 +- t(0.95, 2) 0.01 / sqrt(3) with t(0.95, 2)
// = 2.919986, i.e. -0.006859 .. 0.026859: inside +-0.03, not inside +-0.025. NaN values are
// left out; fewer than two values give no CI.
static void test_tost_closed_form(void **state) {
    const double t95_2 = 2.919986, half = t95_2 * 0.01 / sqrt(3.0);
    double x[4] = {0.01, 0.02, 0.00, NAN}, mean, lo, hi;
    assert_int_equal(tost_within(x, 4, 0.90, 0.03, &mean, &lo, &hi), 1);
    CLOSE(mean, 0.01, 1e-15);
    CLOSE(lo, 0.01 - half, 1e-8);
    CLOSE(hi, 0.01 + half, 1e-8);
    CLOSE(hi, 0.026859, 1e-6);
    assert_int_equal(tost_within(x, 3, 0.90, 0.025, &mean, &lo, &hi), 0);
    double neg[3] = {-0.01, -0.02, -0.00};  // the mirror image: the lower test decides
    assert_int_equal(tost_within(neg, 3, 0.90, 0.03, &mean, &lo, &hi), 1);
    CLOSE(lo, -0.01 - half, 1e-8);
    assert_int_equal(tost_within(neg, 3, 0.90, 0.025, &mean, &lo, &hi), 0);
    assert_int_equal(tost_within(x, 1, 0.90, 0.03, &mean, &lo, &hi), 0);  // one value: no CI
    CLOSE(mean, 0.01, 0);
    assert_true(isnan(lo) && isnan(hi));
}

// The 2x2 of GRPO's two terms as a sweep groups it (labels preset_scale-VALUE): each corner is
// named by its knobs, and the default comparisons are every corner against Dr. GRPO's. Here
// "1/|o| only" behaves as GRPO (every check passes) and "std only" as Dr. GRPO (its ratio is 1,
// its failures do not grow, its truncation and loops rise as Dr. GRPO's: checks 1-3 fail).
static Run *corner_run(const Spec *sp, const char *scale) {
    Run *r = make_run(sp);
    const int per_len = strcmp(sp->preset, "grpo") == 0;
    snprintf(r->objective, sizeof r->objective, "%s_scale-%s", sp->preset, scale);
    snprintf(r->scale, sizeof r->scale, "%s", scale);
    snprintf(r->aggregation, sizeof r->aggregation, "%s", per_len ? "seq_mean_token_mean" : "seq_mean_token_sum_norm");
    snprintf(r->baseline, sizeof r->baseline, "group_mean");
    return r;
}

static void test_2x2(void **state) {
    Spec s[RUNS];
    passing_set(s);
    enum { CORNERS = 4, ALL = CORNERS * SEEDS };
    static const char *const scale[CORNERS] = {"group_std", "none", "group_std", "none"};
    static const char *const title[CORNERS] = {"GRPO", "1/|o| only", "std only", "Dr. GRPO"};
    Run *runs[ALL];
    for (int i = 0; i < SEEDS; i++)  // in a sweep's order: seed, then preset, then scale
        for (int c = 0; c < CORNERS; c++) {
            Spec sp = s[(c < 2 ? 0 : SEEDS) + i];
            runs[CORNERS * i + c] = corner_run(&sp, scale[c]);
        }
    for (int c = 0; c < CORNERS; c++) assert_string_equal(group_title(runs[c]), title[c]);
    const char *test[8], *ref[8];
    char err[256];
    assert_int_equal(verdict_plan(runs, ALL, NULL, NULL, test, ref, 8, err, sizeof err), 3);
    for (int k = 0; k < 3; k++) {
        assert_string_equal(test[k], runs[k]->objective);
        assert_string_equal(ref[k], "dr_grpo_scale-none");
        FindingVerdict v;
        assert_int_equal(verdict_compare(runs, ALL, test[k], ref[k], &v), N_CHECKS);
        print_verdict(title[k], &v);
        assert_string_equal(v.title[0], title[k]);
        assert_string_equal(v.title[1], "Dr. GRPO");
        assert_int_equal(v.pairs, 3);
        assert_int_equal(v.passed, k < 2 ? N_CHECKS : N_CHECKS - 3);
        for (int c = 0; c < N_CHECKS; c++) assert_int_equal(v.check[c].pass, k < 2 || c > CHECK_FAILING_STATES);
        if (k == 2) CLOSE(v.check[CHECK_EVAL_RATIO].f[0].v, 1.0, 1e-12);
        if (k == 2) assert_non_null(strstr(v.check[CHECK_LENGTH_SLOPE].reason, "std only's slope -10.0"));
    }
    // any group against any other, by label or name
    assert_int_equal(verdict_plan(runs, ALL, "std only", "GRPO,1/|o| only", test, ref, 8, err, sizeof err), 2);
    assert_string_equal(test[0], "grpo_scale-group_std");
    assert_string_equal(test[1], "grpo_scale-none");
    assert_string_equal(ref[0], "dr_grpo_scale-group_std");
    assert_int_equal(verdict_plan(runs, ALL, "grpo_scale-none", NULL, test, ref, 8, err, sizeof err), 3);
    assert_int_equal(verdict_plan(runs, ALL, "DAPO", NULL, test, ref, 8, err, sizeof err), -1);
    assert_non_null(strstr(err, "--against 'DAPO'"));
    assert_int_equal(verdict_plan(runs, ALL, "GRPO", "GRPO", test, ref, 8, err, sizeof err), -1);
    assert_non_null(strstr(err, "is the group compared against"));
    assert_int_equal(verdict_plan(runs, ALL, "GRPO", "std,", test, ref, 8, err, sizeof err), -1);
    assert_non_null(strstr(err, "no group 'std'"));
    // the summary: each comparison's checks and the table of their key numbers
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(summary_print_against(f, runs, ALL, 0, NULL, NULL, err, sizeof err), 0);
    fclose(f);
    assert_non_null(strstr(text, "for 1/|o| only in GRPO's place against Dr. GRPO in Dr. GRPO's"));
    assert_non_null(strstr(text, "The checks per comparison"));
    const char *table = strstr(text, "The checks per comparison");
    for (int k = 0; k < 3; k++) assert_non_null(strstr(table, title[k]));
    assert_non_null(strstr(table, "1.00 FAIL"));  // std only's ratio
    assert_non_null(strstr(table, "7/7"));
    assert_non_null(strstr(table, "4/7"));
    free(text);
    f = open_memstream(&text, &len);  // in markdown the '|' of a name stays in its cell
    assert_int_equal(summary_print_against(f, runs, ALL, 1, NULL, NULL, err, sizeof err), 0);
    fclose(f);
    assert_non_null(strstr(text, "| 1/\\|o\\| only | Dr. GRPO | 1.50 PASS |"));
    free(text);
    // a group whose label adds another grid key keeps its label as its name
    snprintf(runs[0]->objective, sizeof runs[0]->objective, "grpo_lr-1e-5");
    assert_string_equal(group_title(runs[0]), "grpo_lr-1e-5");
    for (int i = 0; i < ALL; i++) run_free(runs[i]);
}

// Draws of 3 of 4 seed pairs: the passing set and a fourth pair like the first but with GRPO's
// incorrect eval responses 80 tokens long (ratio 0.8). The 3 draws that hold it have a
// geometric mean below 1.3 (at most (1.5 x 1.6 x 0.8)^(1/3) = 1.24) and fail check 1; the one
// without it passes everything, so check 1 passes in 1 of 4 draws and the others in 4.
static void test_draws_subsets(void **state) {
    Spec s[RUNS + 2];
    passing_set(s);
    s[RUNS] = s[0], s[RUNS].seed = 4, s[RUNS].eval_len_i = 80;
    s[RUNS + 1] = s[SEEDS], s[RUNS + 1].seed = 4;
    Run *runs[RUNS + 2];
    for (int i = 0; i < RUNS + 2; i++) runs[i] = make_run(&s[i]);
    DrawTally t;
    char err[256];
    assert_int_equal(draws_subsets(runs, RUNS + 2, "grpo", "dr_grpo", 3, &t, err, sizeof err), 4);
    assert_int_equal(t.units, 4);
    assert_int_equal(t.pass[CHECK_EVAL_RATIO], 1);
    for (int c = CHECK_LENGTH_SLOPE; c < N_CHECKS; c++) assert_int_equal(t.pass[c], 4);
    assert_int_equal(t.pass_1to6, 1);
    assert_int_equal(t.pass_all, 1);
    draws_print(stdout, &t, 0);
    // five pairs are needed for draws of 5; a draw of one pair is refused
    assert_int_equal(draws_subsets(runs, RUNS + 2, "grpo", "dr_grpo", 5, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "has 4 seed pairs"));
    assert_int_equal(draws_subsets(runs, RUNS + 2, "grpo", "rloo", 3, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "no group 'rloo'"));
    for (int i = 0; i < RUNS + 2; i++) run_free(runs[i]);
}

// Placebo draws from six GRPO runs (incorrect eval lengths 140..165, the same growth): 20
// ordered pairs of disjoint triples; the ratio stays near 1 and both sides grow alike, so
// checks 1 and 2 fail in every draw. Four runs are too few for triples.
static void test_draws_placebo(void **state) {
    Spec s[6];
    Run *runs[6];
    passing_set(s);
    for (int i = 0; i < 6; i++) {
        s[i] = s[0], s[i].seed = 10 + i, s[i].eval_len_i = 140 + 5 * i;
        runs[i] = make_run(&s[i]);
    }
    DrawTally t;
    char err[256];
    assert_int_equal(draws_placebo(runs, 6, "GRPO", 3, &t, err, sizeof err), 20);
    assert_int_equal(t.placebo, 1);
    assert_int_equal(t.pass[CHECK_EVAL_RATIO], 0);
    assert_int_equal(t.pass[CHECK_LENGTH_SLOPE], 0);
    draws_print(stdout, &t, 0);
    assert_int_equal(draws_placebo(runs, 6, "grpo", 2, &t, err, sizeof err), 90);  // C(6,2) C(4,2)
    assert_int_equal(draws_placebo(runs, 4, "grpo", 3, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "4 runs, a placebo draw of 3 pairs needs 6"));
    assert_int_equal(draws_placebo(runs, 6, "dapo", 3, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "--placebo 'dapo'"));
    for (int i = 0; i < 6; i++) run_free(runs[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_pass),
        cmocka_unit_test(test_each_check_fails),
        cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_slope_margin),
        cmocka_unit_test(test_draws_subsets),
        cmocka_unit_test(test_draws_placebo),
        cmocka_unit_test(test_edge_cases),
        cmocka_unit_test(test_reward_rise_one_run),
        cmocka_unit_test(test_tost_closed_form),
        cmocka_unit_test(test_2x2),
    };
    return cmocka_run_group_tests_name("verdict", tests, NULL, NULL);
}
