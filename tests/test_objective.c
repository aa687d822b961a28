// test_objective.c: advantages and token weights against their closed forms (DESIGN.md).
#include <math.h>
#include <string.h>

#include "common.h"
#include "sim/config.h"
#include "sim/objective.h"
#include "test_util.h"

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

static void test_seed_table_ddof0(void **state) {
    // the seed's table: (1,1,0,0) -> +-1; (1,1,1,0) -> 0.58 x3, -1.73
    ObjectiveConfig o = preset("grpo", 0);
    float r[8] = {1, 1, 0, 0, 1, 1, 1, 0}, a[8];
    compute_advantages(&o, r, 2, 4, a, NULL, NULL);
    float want[8] = {1, 1, -1, -1, 1 / sqrtf(3), 1 / sqrtf(3), 1 / sqrtf(3), -sqrtf(3)};
    for (int i = 0; i < 8; i++) assert_near(a[i], want[i], 1e-6);
    printf("  ddof=0: (1,1,0,0) -> %.2f %.2f %.2f %.2f; (1,1,1,0) -> %.2f %.2f %.2f %.2f\n", a[0],
           a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
}

static void test_seed_table_ddof1(void **state) {
    ObjectiveConfig o = preset("grpo", 1);
    float r[8] = {1, 1, 0, 0, 1, 1, 1, 0}, a[8], mean[2], std[2];
    compute_advantages(&o, r, 2, 4, a, mean, std);
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
    compute_advantages(&o, r, 2, 3, a, NULL, NULL);  // no std: r - mean
    float m0 = 1.0f / 3.0f;
    float want_dr[6] = {1 - m0, -m0, -m0, 0, 0, 0};  // second group all equal -> 0
    for (int i = 0; i < 6; i++) assert_near(a[i], want_dr[i], 1e-6);
    o = preset("rloo", 1);
    float r2[8] = {1, 0, 1, 1, 0, 0, 1, 0}, a2[8];
    compute_advantages(&o, r2, 2, 4, a2, NULL, NULL);
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
            compute_advantages(&o, r, 2, 4, a, NULL, NULL);
            for (int i = 0; i < 8; i++) {
                assert_false(isnan(a[i]));
                assert_true(a[i] == 0.0f);
            }
        }
    }
    ObjectiveConfig o = preset("grpo", 1);
    o.scale = SCALE_BATCH_STD;  // batch std of an all-equal batch is 0: still no NaN
    compute_advantages(&o, r, 2, 4, a, NULL, NULL);
    for (int i = 0; i < 8; i++) assert_true(a[i] == 0.0f);
}

static void test_batch_std(void **state) {
    ObjectiveConfig o = preset("grpo", 0);
    o.scale = SCALE_BATCH_STD;
    float r[8] = {1, 0, 0, 0, 1, 1, 1, 0}, a[8];
    compute_advantages(&o, r, 2, 4, a, NULL, NULL);
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
            float w = ppo_token_weight(c, A[i], -1.3f, -1.3f, 0.0f, o.eps_low, o.eps_high, 0.0f);
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
            float w = ppo_token_weight(1.0f, A, logp, logp_old, 0, eps_low, eps_high, 0);
            int clipped = (A > 0 && ratios[ir] > 1 + eps_high) || (A < 0 && ratios[ir] < 1 - eps_low);
            assert_int_equal(ppo_clipped(A, ratios[ir], eps_low, eps_high), clipped);
            if (clipped) assert_true(w == 0.0f);
            else assert_near(w, A * ratios[ir], 1e-5);
            // finite differences of the loss w.r.t. logp, away from the clip boundary
            double h = 1e-3;
            double lp = ppo_token_loss(A, logp + h, logp_old, 0, eps_low, eps_high, 0);
            double lm = ppo_token_loss(A, logp - h, logp_old, 0, eps_low, eps_high, 0);
            assert_near(w, -(lp - lm) / (2 * h), 2e-3 * fabs(A) * ratios[ir] + 1e-6);
        }
    }
    // with the KL term: w = A rho - beta (1 - exp(ref - logp)), again = -dl/dlogp
    float A = 0.3f, beta = 0.1f, logp = -1.0f, old = -1.0f, ref = -1.4f;
    float w = ppo_token_weight(1.0f, A, logp, old, ref, 0.2f, 0.2f, beta);
    double h = 1e-3;
    double lp = ppo_token_loss(A, logp + h, old, ref, 0.2f, 0.2f, beta);
    double lm = ppo_token_loss(A, logp - h, old, ref, 0.2f, 0.2f, beta);
    assert_near(w, -(lp - lm) / (2 * h), 1e-3);
    assert_near(ppo_token_loss(0, -1, -1, -1, 0.2f, 0.2f, beta), 0, 1e-9);  // KL_k3(p,p) = 0
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_table_ddof0),
        cmocka_unit_test(test_seed_table_ddof1),
        cmocka_unit_test(test_dr_grpo_and_rloo),
        cmocka_unit_test(test_all_equal_groups),
        cmocka_unit_test(test_batch_std),
        cmocka_unit_test(test_token_weights_closed_forms),
        cmocka_unit_test(test_clip_and_weight_is_gradient),
        cmocka_unit_test(test_config_knobs),
    };
    return cmocka_run_group_tests_name("objective", tests, NULL, NULL);
}
