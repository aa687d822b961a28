// test_objective.c: advantages and token weights against their closed forms (docs/kernels.md):
// the formulas of kernels/objective.h, then the CPU ops that run them over a batch
// (kn_group_advantages, kn_token_weights; the CUDA ones are checked against these in
// tests/test_cuda_parity.c); the presets and the [objective] section of sim/rl/objective.h.
#include <math.h>
#include <string.h>

#include "common.h"
#include "kernels/kernels.h"
#include "sim/io/config.h"
#include "sim/rl/objective.h"
#include "test_util.h"

static Backend *cpu;  // the CPU backend of every test (setup_cpu)

static ObjectiveConfig preset(const char *name, int ddof) {
    ObjectiveConfig o;
    assert_int_equal(objective_preset(name, 100, &o), 0);
    o.std_ddof = ddof;
    o.std_eps = 0.0f;
    return o;
}

static void assert_near(double a, double b, double tol) {
    if (fabs(a - b) > tol) fail_msg("%.9g != %.9g (tol %g)", a, b, tol);
}

static void test_example_groups_ddof0(void **state) {
    // ddof 0: (1,1,0,0) -> +-1; (1,1,1,0) -> 0.58 x3, -1.73
    ObjectiveConfig o = preset("grpo", 0);
    float r[8] = {1, 1, 0, 0, 1, 1, 1, 0}, a[8];
    kn_group_advantages(cpu, a, NULL, NULL, r, NULL, NULL, 2, 4, &o);
    float want[8] = {1, 1, -1, -1, 1 / sqrtf(3), 1 / sqrtf(3), 1 / sqrtf(3), -sqrtf(3)};
    for (int i = 0; i < 8; i++) assert_near(a[i], want[i], 1e-6);
    printf("  ddof=0: (1,1,0,0) -> %.2f %.2f %.2f %.2f; (1,1,1,0) -> %.2f %.2f %.2f %.2f\n", a[0],
           a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
}

static void test_example_groups_ddof1(void **state) {
    ObjectiveConfig o = preset("grpo", 1);
    float r[8] = {1, 1, 0, 0, 1, 1, 1, 0}, a[8], mean[2], std[2];
    kn_group_advantages(cpu, a, mean, std, r, NULL, NULL, 2, 4, &o);
    // std of (1,1,0,0) with ddof 1 = sqrt(1/3); of (1,1,1,0) = 1/2
    float s1 = sqrtf(1.0f / 3.0f);
    float want[8] = {0.5f / s1, 0.5f / s1, -0.5f / s1, -0.5f / s1, 0.5f, 0.5f, 0.5f, -1.5f};
    for (int i = 0; i < 8; i++) assert_near(a[i], want[i], 1e-6);
    assert_near(mean[0], 0.5, 1e-7);
    assert_near(mean[1], 0.75, 1e-7);
    assert_near(std[0], s1, 1e-7);
    assert_near(std[1], 0.5, 1e-7);
    printf("  ddof=1: (1,1,0,0) -> %.3f x2, %.3f x2; (1,1,1,0) -> %.2f x3, %.2f\n", a[0], a[2], a[4], a[7]);
}

static void test_dr_grpo_and_rloo(void **state) {
    float r[6] = {1, 0, 0, 1, 1, 1}, a[6];
    ObjectiveConfig o = preset("dr_grpo", 1);
    kn_group_advantages(cpu, a, NULL, NULL, r, NULL, NULL, 2, 3, &o);  // no std: r - mean
    float m0 = 1.0f / 3.0f;
    float want_dr[6] = {1 - m0, -m0, -m0, 0, 0, 0};  // second group all equal -> 0
    for (int i = 0; i < 6; i++) assert_near(a[i], want_dr[i], 1e-6);
    o = preset("rloo", 1);
    float r2[8] = {1, 0, 1, 1, 0, 0, 1, 0}, a2[8];
    kn_group_advantages(cpu, a2, NULL, NULL, r2, NULL, NULL, 2, 4, &o);
    for (int g = 0; g < 2; g++) {
        double mean = 0;
        for (int i = 0; i < 4; i++) mean += r2[g * 4 + i] / 4.0;
        for (int i = 0; i < 4; i++) {
            double loo = 0;  // explicit leave-one-out mean
            for (int j = 0; j < 4; j++)
                if (j != i) loo += r2[g * 4 + j] / 3.0;
            assert_near(a2[g * 4 + i], r2[g * 4 + i] - loo, 1e-6);
            assert_near(a2[g * 4 + i], 4.0 / 3.0 * (r2[g * 4 + i] - mean), 1e-6);  // G/(G-1)(r - mean)
        }
    }
}

static void test_all_equal_groups(void **state) {
    const char *names[4] = {"grpo", "dr_grpo", "dapo", "rloo"};
    float r[8] = {1, 1, 1, 1, 0, 0, 0, 0}, a[8];
    for (int k = 0; k < 4; k++) {
        for (int ddof = 0; ddof <= 1; ddof++) {
            ObjectiveConfig o = preset(names[k], ddof);
            kn_group_advantages(cpu, a, NULL, NULL, r, NULL, NULL, 2, 4, &o);
            for (int i = 0; i < 8; i++) {
                assert_false(isnan(a[i]));
                assert_true(a[i] == 0.0f);
            }
        }
    }
    ObjectiveConfig o = preset("grpo", 1);
    o.scale = SCALE_BATCH_STD;  // batch std of an all-equal batch is 0: still no NaN
    kn_group_advantages(cpu, a, NULL, NULL, r, NULL, NULL, 2, 4, &o);
    for (int i = 0; i < 8; i++) assert_true(a[i] == 0.0f);
}

static void test_batch_std(void **state) {
    ObjectiveConfig o = preset("grpo", 0);
    o.scale = SCALE_BATCH_STD;
    float r[8] = {1, 0, 0, 0, 1, 1, 1, 0}, a[8];
    kn_group_advantages(cpu, a, NULL, NULL, r, NULL, NULL, 2, 4, &o);
    double bs = reward_std(r, 8, 0);  // mean 0.5 -> std 0.5
    assert_near(bs, 0.5, 1e-9);
    assert_near(a[0], (1 - 0.25) / 0.5, 1e-6);
    assert_near(a[7], (0 - 0.75) / 0.5, 1e-6);
}

// Token weights at rho = 1 equal each preset's closed form c_i * A_i.
static void test_token_weights_closed_forms(void **state) {
    const int M = 4, L_MAX = 100;
    int len[4] = {3, 10, 7, 50};
    double sum_len = 3 + 10 + 7 + 50;
    float A[4] = {0.9f, -0.4f, 1.3f, -2.0f};
    const char *names[4] = {"grpo", "dr_grpo", "dapo", "rloo"};
    for (int k = 0; k < 4; k++) {
        ObjectiveConfig o = preset(names[k], 1);
        for (int i = 0; i < M; i++) {
            double closed;
            switch (k) {
                case 0: closed = A[i] / (M * (double)len[i]); break;  // GRPO A/(M|o|)
                case 1: closed = A[i] / (M * (double)L_MAX); break;  // Dr. GRPO A/(M L_max)
                case 2: closed = A[i] / sum_len; break;  // DAPO A/sum|o|
                default: closed = A[i] / M; break;  // RLOO A/M
            }
            float c = aggregation_coef(o.aggregation, M, len[i], sum_len, L_MAX);
            float w = ppo_token_weight(c, A[i], -1.3f, -1.3f, 0.0f, o.eps_low, o.eps_high, 0.0f, 0.0f);
            assert_near(w, closed, 1e-7 * fabs(closed) + 1e-9);
        }
    }
    printf("  grpo weight magnitude of a 3-token vs a 50-token response: %.4f vs %.4f "
           "(dr_grpo: equal)\n", 1.0 / (M * 3), 1.0 / (M * 50));
}

// The weight is zero where the clip binds, A rho elsewhere; it matches -dL/dlogp by
// finite differences of ppo_token_loss.
static void test_clip_and_weight_is_gradient(void **state) {
    float eps_low = 0.2f, eps_high = 0.28f;
    float ratios[6] = {0.5f, 0.79f, 0.95f, 1.1f, 1.27f, 1.6f};
    float advs[2] = {1.5f, -0.7f};
    for (int ia = 0; ia < 2; ia++) {
        for (int ir = 0; ir < 6; ir++) {
            float A = advs[ia], logp_old = -2.0f, logp = logp_old + logf(ratios[ir]);
            float w = ppo_token_weight(1.0f, A, logp, logp_old, 0, eps_low, eps_high, 0, 0);
            int clipped = (A > 0 && ratios[ir] > 1 + eps_high) || (A < 0 && ratios[ir] < 1 - eps_low);
            assert_int_equal(ppo_clipped(A, ratios[ir], eps_low, eps_high, 0), clipped);
            if (clipped) assert_true(w == 0.0f);
            else assert_near(w, A * ratios[ir], 1e-5);
            // finite differences of the loss w.r.t. logp, away from the clip boundary
            double h = 1e-3;
            double lp = ppo_token_loss(A, logp + h, logp_old, 0, eps_low, eps_high, 0, 0);
            double lm = ppo_token_loss(A, logp - h, logp_old, 0, eps_low, eps_high, 0, 0);
            assert_near(w, -(lp - lm) / (2 * h), 2e-3 * fabs(A) * ratios[ir] + 1e-6);
        }
    }
    // with the KL term: w = A rho - beta (1 - exp(ref - logp)), again = -dl/dlogp
    float A = 0.3f, beta = 0.1f, logp = -1.0f, old = -1.0f, ref = -1.4f;
    float w = ppo_token_weight(1.0f, A, logp, old, ref, 0.2f, 0.2f, 0, beta);
    double h = 1e-3;
    double lp = ppo_token_loss(A, logp + h, old, ref, 0.2f, 0.2f, 0, beta);
    double lm = ppo_token_loss(A, logp - h, old, ref, 0.2f, 0.2f, 0, beta);
    assert_near(w, -(lp - lm) / (2 * h), 1e-3);
    assert_near(ppo_token_loss(0, -1, -1, -1, 0.2f, 0.2f, 0, beta), 0, 1e-9);  // KL_k3(p,p) = 0
}

// The dual clip (Ye et al. 2019, arXiv 1912.09729): for A < 0 the loss -min(rho A, clip(rho)
// A) = -A rho grows without bound in rho above 1 + eps_high; the dual clip caps it at -c A, so
// a token with A < 0 and rho > c has loss -c A and no gradient; every other token is as
// without it (A > 0 at any rho; A < 0 below c). Checked by the definition's loss and finite
// differences of ppo_token_loss, and the knob's range and pairing by objective_check.
static void test_dual_clip(void **state) {
    const float c = 3.0f, eps = 0.2f;
    const float ratios[] = {0.5f, 0.9f, 1.5f, 2.9f, 3.1f, 10.0f};
    const float advs[] = {-0.8f, 1.2f};
    for (int ia = 0; ia < 2; ia++)
        for (int ir = 0; ir < 6; ir++) {
            float A = advs[ia], rho = ratios[ir], old = -2.0f, logp = old + logf(rho);
            double clip = fmin(fmax(rho, 1 - eps), 1 + eps);
            double want_loss = -fmin(rho * A, clip * A);
            if (A < 0 && -c * A < want_loss) want_loss = -c * A;  // the cap
            int held = A < 0 && rho > c;
            int ppo = (A > 0 && rho > 1 + eps) || (A < 0 && rho < 1 - eps);
            double want_w = held || ppo ? 0 : A * rho;
            assert_near(ppo_token_loss(A, logp, old, 0, eps, eps, c, 0), want_loss, 1e-5 * (1 + fabs(want_loss)));
            float w = ppo_token_weight(1.0f, A, logp, old, 0, eps, eps, c, 0);
            assert_near(w, want_w, 1e-5 * (1 + fabs(want_w)));
            assert_int_equal(ppo_clipped(A, rho, eps, eps, c), held || ppo);
            double h = 1e-3;
            double lp = ppo_token_loss(A, logp + h, old, 0, eps, eps, c, 0);
            double lm = ppo_token_loss(A, logp - h, old, 0, eps, eps, c, 0);
            assert_near(w, -(lp - lm) / (2 * h), 2e-3 * fabs(A) * rho + 1e-6);
            // off (c = 0): the plain PPO clip
            assert_int_equal(ppo_clipped(A, rho, eps, eps, 0), ppo);
        }
    // the knob: 0 or > 1, and only with clip ppo on a token or sequence ratio
    char err[512];
    static const char *const BAD[][2] = {{"grpo", "objective.clip_ratio_c=1"},
                                         {"gmpo", "objective.clip_ratio_c=3"},
                                         {"cispo", "objective.clip_ratio_c=3"},
                                         {"gpg", "objective.clip_ratio_c=3"}};
    for (int i = 0; i < 4; i++) {
        Config *cf = config_new();
        char a[64];
        snprintf(a, sizeof a, "objective.preset=%s", BAD[i][0]);
        assert_int_equal(config_set(cf, a, err, sizeof err), 0);
        assert_int_equal(config_set(cf, BAD[i][1], err, sizeof err), 0);
        ObjectiveConfig o;
        assert_int_equal(objective_from_config(cf, 160, &o, err, sizeof err), -1);
        assert_non_null(strstr(err, "objective.clip_ratio_c"));
        config_free(cf);
    }
}

static void test_config_knobs(void **state) {
    char err[512];
    Config *c = config_new();
    ObjectiveConfig o;
    assert_int_equal(objective_from_config(c, 160, &o, err, sizeof err), 0);
    assert_string_equal(o.preset, "grpo");
    assert_int_equal(o.aggregation, AGG_SEQ_MEAN_TOKEN_MEAN);
    // "GRPO without length normalisation" and "GRPO without std" are one setting each
    assert_int_equal(config_set(c, "objective.aggregation=seq_mean_token_sum_norm", err, sizeof err), 0);
    assert_int_equal(config_set(c, "objective.scale=none", err, sizeof err), 0);
    assert_int_equal(objective_from_config(c, 160, &o, err, sizeof err), 0);
    assert_int_equal(o.baseline, BASELINE_GROUP_MEAN);
    assert_int_equal(o.scale, SCALE_NONE);
    assert_int_equal(o.l_max, 160);
    config_free(c);
    c = config_new();
    assert_int_equal(config_set(c, "objective.preset=dapo", err, sizeof err), 0);
    assert_int_equal(objective_from_config(c, 160, &o, err, sizeof err), 0);
    assert_near(o.eps_high, 0.28, 1e-7);
    assert_int_equal(config_set(c, "objective.eps_high=0.3", err, sizeof err), 0);
    assert_int_equal(objective_from_config(c, 160, &o, err, sizeof err), 0);
    assert_near(o.eps_high, 0.3, 1e-7);
    assert_int_equal(config_set(c, "objective.l_max=64", err, sizeof err), 0);
    assert_int_equal(objective_from_config(c, 160, &o, err, sizeof err), 0);
    assert_int_equal(o.l_max, 64);
    // bad values are the config's errors
    assert_int_equal(config_set(c, "objective.preset=ppo", err, sizeof err), -1);
    assert_non_null(strstr(err, "grpo|dr_grpo|dapo|rloo"));
    assert_int_equal(config_set(c, "objective.eps_low=1.5", err, sizeof err), -1);
    assert_non_null(strstr(err, "out of range"));
    config_free(c);
}

// Every knob of preset p as resolved from a config that sets nothing but the preset
// (docs/objectives.md's table written out again; l_max 0 in a preset is the sampler's budget,
// 160 here).
typedef struct {
    const char *name;
    Baseline baseline;
    Scale scale;
    Aggregation agg;
    float eps_low, eps_high;
    RatioLevel ratio;
    ClipStyle clip;
    TokenMeanScope scope;
} WantPreset;
static const WantPreset WANT[] = {
    {"grpo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_SEQ_MEAN_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL},
    {"dr_grpo", BASELINE_GROUP_MEAN, SCALE_NONE, AGG_SEQ_MEAN_TOKEN_SUM_NORM, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL},
    {"dapo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_TOKEN_MEAN, 0.2f, 0.28f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL},
    {"rloo", BASELINE_LEAVE_ONE_OUT, SCALE_NONE, AGG_SEQ_MEAN_TOKEN_SUM, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL},
    {"bnpo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_MICRO_BATCH},
    {"lite_ppo", BASELINE_GROUP_MEAN, SCALE_BATCH_STD, AGG_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL},
    {"gspo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_SEQ_MEAN_TOKEN_MEAN, 3e-4f, 4e-4f, RATIO_SEQUENCE, CLIP_PPO, SCOPE_GLOBAL},
    {"gmpo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_SEQ_MEAN_TOKEN_MEAN, 0.4f, 0.4f, RATIO_GEO_MEAN, CLIP_PPO, SCOPE_GLOBAL},
    {"cispo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_TOKEN_MEAN, 1.0f, 4.0f, RATIO_TOKEN, CLIP_CISPO, SCOPE_GLOBAL},
    {"sapo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_SEQ_MEAN_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_SAPO, SCOPE_GLOBAL},
    {"reinforce_pp_baseline", BASELINE_GROUP_MEAN, SCALE_BATCH_WHITEN, AGG_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL},
    {"remax", BASELINE_GREEDY, SCALE_NONE, AGG_SEQ_MEAN_TOKEN_SUM, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL},
    {"opo", BASELINE_LENGTH_WEIGHTED, SCALE_NONE, AGG_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL},
    {"gpg", BASELINE_GROUP_MEAN, SCALE_NONE, AGG_TOKEN_MEAN, 0.2f, 0.2f, RATIO_NONE, CLIP_NONE, SCOPE_GLOBAL},
    {"grpo_passk", BASELINE_MAX_LOO, SCALE_GROUP_STD, AGG_SEQ_MEAN_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL},
};
enum { N_PRESETS = sizeof WANT / sizeof WANT[0] };

static ObjectiveConfig want_preset(int p) {
    // every preset: ddof 1, std eps 1e-6, l_max the budget, no KL, no dynamic sampling, SAPO's
    // temperatures 1 / 1.05
    const WantPreset *q = &WANT[p];
    ObjectiveConfig w = {.baseline = q->baseline, .scale = q->scale, .std_ddof = 1, .std_eps = 1e-6f,
                         .aggregation = q->agg, .l_max = 160, .eps_low = q->eps_low,
                         .eps_high = q->eps_high, .ratio = q->ratio, .clip = q->clip,
                         .tau_pos = 1.0f, .tau_neg = 1.05f, .scope = q->scope};
    snprintf(w.preset, sizeof w.preset, "%s", q->name);
    return w;
}

static void assert_objective_equal(const ObjectiveConfig *a, const ObjectiveConfig *b) {
    assert_string_equal(a->preset, b->preset);
    assert_int_equal(a->baseline, b->baseline);
    assert_int_equal(a->scale, b->scale);
    assert_int_equal(a->std_ddof, b->std_ddof);
    assert_true(a->std_eps == b->std_eps);
    assert_int_equal(a->aggregation, b->aggregation);
    assert_int_equal(a->l_max, b->l_max);
    assert_true(a->eps_low == b->eps_low);
    assert_true(a->eps_high == b->eps_high);
    assert_true(a->beta == b->beta);
    assert_int_equal(a->dynamic_sampling, b->dynamic_sampling);
    assert_int_equal(a->ratio, b->ratio);
    assert_int_equal(a->clip, b->clip);
    assert_true(a->tau_pos == b->tau_pos);
    assert_true(a->tau_neg == b->tau_neg);
    assert_int_equal(a->scope, b->scope);
    assert_true(a->clip_ratio_c == b->clip_ratio_c);
}

// A config of preset NAME plus the assignments set[0..n), resolved (budget 160).
static ObjectiveConfig resolve(const char *name, const char *const *set, int n) {
    char err[512], a[320];
    Config *c = config_new();
    snprintf(a, sizeof a, "objective.preset=%s", name);
    assert_int_equal(config_set(c, a, err, sizeof err), 0);
    for (int i = 0; i < n; i++)
        if (config_set(c, set[i], err, sizeof err) != 0) fail_msg("%s", err);
    ObjectiveConfig o;
    if (objective_from_config(c, 160, &o, err, sizeof err) != 0) fail_msg("%s", err);
    config_free(c);
    return o;
}

// With no key set, each preset resolves to its own defaults, the same as objective_preset;
// every name the schema admits for objective.preset is a preset.
static void test_presets_resolved(void **state) {
    for (int p = 0; p < N_PRESETS; p++) {
        ObjectiveConfig o = resolve(WANT[p].name, NULL, 0), direct, want = want_preset(p);
        assert_objective_equal(&o, &want);
        assert_int_equal(objective_preset(WANT[p].name, 160, &direct), 0);
        assert_objective_equal(&direct, &want);
    }
    for (int i = 0; i < CONFIG_SCHEMA_LEN; i++) {
        const CfgKey *k = &CONFIG_SCHEMA[i];
        if (strcmp(k->section, "objective") != 0 || strcmp(k->key, "preset") != 0) continue;
        int n = 0;
        for (const char *p = k->choices; *p; n++) {
            char name[32];
            size_t len = strcspn(p, "|");
            snprintf(name, sizeof name, "%.*s", (int)len, p);
            ObjectiveConfig o;
            if (objective_preset(name, 160, &o) != 0) fail_msg("schema preset '%s' has no row", name);
            p += len + (p[len] == '|');
        }
        assert_int_equal(n, N_PRESETS);
    }
    ObjectiveConfig o;
    assert_int_equal(objective_preset("ppo", 160, &o), -1);
}

// A key overrides its preset's value when the config sets it, even to the number the schema
// shows as its default (dapo's eps_high = 0.2), and only then: every other knob keeps the
// preset's value. An enum key set to "preset" and l_max set to 0 (the budget) keep it too.
static void test_set_key_overrides_only_when_set(void **state) {
    static const char *const SET[] = {
        "objective.baseline=leave_one_out", "objective.scale=batch_std", "objective.std_ddof=0",
        "objective.std_eps=0.001", "objective.aggregation=token_mean", "objective.l_max=64",
        "objective.eps_low=0.1", "objective.eps_high=0.2", "objective.beta=0.04",
        "objective.dynamic_sampling=true", "objective.ratio=sequence", "objective.clip=none",
        "objective.tau_pos=2", "objective.tau_neg=3", "objective.token_mean_scope=micro_batch",
        "objective.clip_ratio_c=3"};
    enum { N_SET = sizeof SET / sizeof SET[0] };
    for (int p = 0; p < N_PRESETS; p++) {
        for (int j = 0; j < N_SET; j++) {
            if (j == 15 && (WANT[p].clip != CLIP_PPO || WANT[p].ratio == RATIO_GEO_MEAN))
                continue;  // the dual clip bounds PPO's clip only (test_dual_clip)
            ObjectiveConfig o = resolve(WANT[p].name, &SET[j], 1), want = want_preset(p);
            switch (j) {
                case 0: want.baseline = BASELINE_LEAVE_ONE_OUT; break;
                case 1: want.scale = SCALE_BATCH_STD; break;
                case 2: want.std_ddof = 0; break;
                case 3: want.std_eps = 0.001f; break;
                case 4: want.aggregation = AGG_TOKEN_MEAN; break;
                case 5: want.l_max = 64; break;
                case 6: want.eps_low = 0.1f; break;
                case 7: want.eps_high = 0.2f; break;
                case 8: want.beta = 0.04f; break;
                case 9: want.dynamic_sampling = 1; break;
                case 10: want.ratio = RATIO_SEQUENCE; break;
                case 11: want.clip = CLIP_NONE; break;
                case 12: want.tau_pos = 2.0f; break;
                case 13: want.tau_neg = 3.0f; break;
                case 14: want.scope = SCOPE_MICRO_BATCH; break;
                default: want.clip_ratio_c = 3.0f; break;
            }
            assert_objective_equal(&o, &want);
        }
        static const char *const KEEP[] = {"objective.baseline=preset", "objective.scale=preset",
                                           "objective.aggregation=preset", "objective.l_max=0",
                                           "objective.ratio=preset", "objective.clip=preset",
                                           "objective.token_mean_scope=preset"};
        ObjectiveConfig o = resolve(WANT[p].name, KEEP, 7), want = want_preset(p);
        assert_objective_equal(&o, &want);
    }
    ObjectiveConfig all = resolve("dapo", SET, N_SET - 1);  // clip none: no dual clip
    assert_true(all.eps_high == 0.2f && all.beta == 0.04f && all.baseline == BASELINE_LEAVE_ONE_OUT);
    printf("  dapo: eps_high %.2f unset, %.2f when set to 0.2\n", want_preset(2).eps_high, all.eps_high);
}

// ---- the CPU ops (on the CPU backend device pointers are host memory: plain arrays here)

static int setup_cpu(void **state) {
    char err[256];
    cpu = backend_create(BACKEND_CPU, err, sizeof err);
    return cpu ? 0 : -1;
}
static int teardown_cpu(void **state) {
    backend_destroy(cpu);
    return 0;
}

static void poison(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = NAN;
}

// kn_group_advantages: the example groups at ddof 0, Dr. GRPO's r - mean, RLOO's
// G/(G-1) (r - mean), all-equal groups 0; group mean and std.
static void test_op_group_advantages(void **state) {
    float r[12] = {1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1}, a[12], mean[3], std[3];
    ObjectiveConfig o = preset("grpo", 0);
    poison(a, 12);
    poison(mean, 3);
    poison(std, 3);
    kn_group_advantages(cpu, a, mean, std, r, NULL, NULL, 3, 4, &o);
    float want[12] = {1, 1, -1, -1, 1 / sqrtf(3), 1 / sqrtf(3), 1 / sqrtf(3), -sqrtf(3), 0, 0, 0, 0};
    for (int i = 0; i < 12; i++) assert_near(a[i], want[i], 1e-6);
    float want_mean[3] = {0.5f, 0.75f, 1.0f}, want_std[3] = {0.5f, sqrtf(3.0f) / 4, 0.0f};
    for (int g = 0; g < 3; g++) {
        assert_near(mean[g], want_mean[g], 0);
        assert_near(std[g], want_std[g], 1e-7);
    }
    printf("  op, grpo ddof 0: (1,1,0,0) -> %+.2f %+.2f %+.2f %+.2f\n", a[0], a[1], a[2], a[3]);
    const char *names[2] = {"dr_grpo", "rloo"};
    for (int k = 0; k < 2; k++) {
        o = preset(names[k], 1);
        poison(a, 12);
        kn_group_advantages(cpu, a, NULL, NULL, r, NULL, NULL, 3, 4, &o);
        for (int g = 0; g < 3; g++) {
            double m = (r[g * 4] + r[g * 4 + 1] + r[g * 4 + 2] + r[g * 4 + 3]) / 4.0;
            for (int i = 0; i < 4; i++) {
                double d = r[g * 4 + i] - m;
                assert_near(a[g * 4 + i], k == 0 ? d : 4.0 / 3.0 * d, 1e-6);  // G/(G-1) (r - mean)
            }
        }
    }
}

// kn_token_weights against the closed forms, in the trainer's (n, T) layout.
enum { TW_N = 4, TW_T = 12 };
static const int TW_START[TW_N] = {2, 1, 5, 0}, TW_LEN[TW_N] = {3, 10, 7, 6};
static const float TW_ADV[TW_N] = {0.9f, -0.4f, 1.3f, -2.0f};

static int in_response(int k, int t) { return t >= TW_START[k] && t < TW_START[k] + TW_LEN[k]; }

static void token_weights(const ObjectiveConfig *o, const float *logp, const float *old,
                          const float *ref, float *w, float *loss, float *kl, float *coef, int *lo,
                          int *hi) {
    poison(w, TW_N * TW_T);
    poison(loss, TW_N * TW_T);
    poison(kl, TW_N * TW_T);
    poison(coef, TW_N);
    double sum_len = 0;
    for (int k = 0; k < TW_N; k++) sum_len += TW_LEN[k];
    kn_token_weights(cpu, w, loss, kl, coef, lo, hi, logp, old, ref, NULL, TW_ADV, TW_START, TW_LEN,
                     TW_N, TW_T, TW_N, sum_len, o);
    for (int k = 0; k < TW_N; k++)  // outside the responses: exactly 0
        for (int t = 0; t < TW_T; t++)
            if (!in_response(k, t))
                assert_true(w[k * TW_T + t] == 0.0f && loss[k * TW_T + t] == 0.0f && kl[k * TW_T + t] == 0.0f);
}

// At rho = 1: w = c_i A_i with GRPO c = 1/(M|o_i|), Dr. GRPO 1/(M L_max), DAPO 1/sum|o_j|,
// RLOO 1/M; l = -A_i, so L = -sum_i c_i |o_i| A_i; no clipping, KL 0 without pi_ref.
static void test_op_token_weights_rho1(void **state) {
    const int M = TW_N, L_MAX = 100;
    double sum_len = 3 + 10 + 7 + 6;
    float logp[TW_N * TW_T], w[TW_N * TW_T], loss[TW_N * TW_T], kl[TW_N * TW_T], coef[TW_N];
    int lo[TW_N], hi[TW_N];
    tu_fill_uniform(logp, TW_N * TW_T, 31, -4, -0.1f);
    const char *names[4] = {"grpo", "dr_grpo", "dapo", "rloo"};
    for (int p = 0; p < 4; p++) {
        ObjectiveConfig o = preset(names[p], 1);
        token_weights(&o, logp, logp, NULL, w, loss, kl, coef, lo, hi);
        double L = 0;
        for (int k = 0; k < TW_N; k++) {
            double c = p == 0 ? 1.0 / (M * TW_LEN[k]) : p == 1 ? 1.0 / (M * L_MAX) : p == 2 ? 1.0 / sum_len : 1.0 / M;
            assert_near(coef[k], c, 1e-7 * c);
            for (int t = TW_START[k]; t < TW_START[k] + TW_LEN[k]; t++) {
                assert_near(w[k * TW_T + t], c * TW_ADV[k], 1e-7 * fabs(c * TW_ADV[k]));
                assert_near(loss[k * TW_T + t], -TW_ADV[k], 0);
                assert_true(kl[k * TW_T + t] == 0.0f);
                L += coef[k] * loss[k * TW_T + t];
            }
            assert_int_equal(lo[k] + hi[k], 0);
        }
        double L_closed = 0;
        for (int k = 0; k < TW_N; k++) L_closed -= (double)coef[k] * TW_LEN[k] * TW_ADV[k];
        assert_near(L, L_closed, 1e-7);
        printf("  op %-8s rho = 1: w = c A on every token, L = %.5f\n", names[p], L);
    }
}

// Away from rho = 1: the clip zeroes the weight and is counted (A > 0, rho > 1 + eps_high:
// high; A < 0, rho < 1 - eps_low: low); elsewhere w = c A rho. With pi_ref and beta:
// KL_k3 = exp(lr) - lr - 1 and w = c (A rho - beta (1 - exp(lr))), lr = log pi_ref - log pi.
static void test_op_token_weights_clip_kl(void **state) {
    float logp[TW_N * TW_T], old[TW_N * TW_T], ref[TW_N * TW_T], w[TW_N * TW_T];
    float loss[TW_N * TW_T], kl[TW_N * TW_T], coef[TW_N];
    int lo[TW_N], hi[TW_N];
    const float rho[3] = {0.5f, 1.1f, 1.6f};  // clipped below, inside, clipped above
    tu_fill_uniform(logp, TW_N * TW_T, 32, -4, -0.1f);
    tu_fill_uniform(ref, TW_N * TW_T, 33, -4, -0.1f);
    for (int j = 0; j < TW_N * TW_T; j++) old[j] = logp[j] - logf(rho[j % 3]);
    ObjectiveConfig o = preset("rloo", 1);  // c = 1/M
    o.beta = 0.05f;
    token_weights(&o, logp, old, ref, w, loss, kl, coef, lo, hi);
    double max_err = 0;
    for (int k = 0; k < TW_N; k++) {
        int want_lo = 0, want_hi = 0;
        for (int t = TW_START[k]; t < TW_START[k] + TW_LEN[k]; t++) {
            int j = k * TW_T + t;
            double A = TW_ADV[k], r = exp((double)logp[j] - old[j]), lr = (double)ref[j] - logp[j];
            int clipped = (A > 0 && r > 1 + o.eps_high) || (A < 0 && r < 1 - o.eps_low);
            want_lo += clipped && A < 0;
            want_hi += clipped && A > 0;
            double w_closed = (clipped ? 0 : A * r) - o.beta * (1 - exp(lr));
            double k3 = exp(lr) - lr - 1;
            double e = fabs(w[j] - w_closed / TW_N) + fabs(kl[j] - k3);
            if (e > max_err) max_err = e;
        }
        assert_int_equal(lo[k], want_lo);
        assert_int_equal(hi[k], want_hi);
    }
    printf("  op clip counts low %d %d %d %d, high %d %d %d %d; worst |w - closed| + |kl - k3| "
           "%.1e\n", lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3], max_err);
    assert_true(max_err < 1e-5);
}

// The [objective] enum keys of the settings table admit "preset" and exactly the names of the
// enums' values, in the enums' order (the table and objective.c each list them: they must not
// drift apart), and objective.preset admits exactly the presets, in the table's order.
static void expect_choices(const char *key, const char *want) {
    const CfgKey *k = config_schema_key(key);
    assert_non_null(k);
    assert_string_equal(k->choices, want);
}

static void test_schema_enum_choices_are_the_enums(void **state) {
    (void)state;
    char want[1024];
    size_t n;
#define CHOICES(key, count, name_of)                                                        \
    n = (size_t)snprintf(want, sizeof want, "preset");                                      \
    for (int i = 0; i < (count); i++) n += (size_t)snprintf(want + n, sizeof want - n, "|%s", name_of); \
    expect_choices(key, want);
    CHOICES("objective.baseline", BASELINE_MAX_LOO + 1, baseline_name((Baseline)i))
    CHOICES("objective.scale", SCALE_BATCH_WHITEN + 1, scale_name((Scale)i))
    CHOICES("objective.aggregation", AGG_TOKEN_SUM + 1, aggregation_name((Aggregation)i))
    CHOICES("objective.ratio", RATIO_NONE + 1, ratio_name((RatioLevel)i))
    CHOICES("objective.clip", CLIP_NONE + 1, clip_name((ClipStyle)i))
    CHOICES("objective.token_mean_scope", SCOPE_MICRO_BATCH + 1, scope_name((TokenMeanScope)i))
#undef CHOICES
    n = 0;
    for (int i = 0; i < objective_preset_count(); i++)
        n += (size_t)snprintf(want + n, sizeof want - n, "%s%s", i ? "|" : "", objective_preset_info(i, NULL)->name);
    expect_choices("objective.preset", want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_groups_ddof0),
        cmocka_unit_test(test_example_groups_ddof1),
        cmocka_unit_test(test_dr_grpo_and_rloo),
        cmocka_unit_test(test_all_equal_groups),
        cmocka_unit_test(test_batch_std),
        cmocka_unit_test(test_token_weights_closed_forms),
        cmocka_unit_test(test_clip_and_weight_is_gradient),
        cmocka_unit_test(test_dual_clip),
        cmocka_unit_test(test_config_knobs),
        cmocka_unit_test(test_presets_resolved),
        cmocka_unit_test(test_schema_enum_choices_are_the_enums),
        cmocka_unit_test(test_set_key_overrides_only_when_set),
        cmocka_unit_test(test_op_group_advantages),
        cmocka_unit_test(test_op_token_weights_rho1),
        cmocka_unit_test(test_op_token_weights_clip_kl),
    };
    return cmocka_run_group_tests_name("objective", tests, setup_cpu, teardown_cpu);
}
