// test_compare.c: the counterfactual diagnostics of diagnostics.compare (sim/rl/compare.h) off
// rho = 1, against closed forms worked by hand from each method's definition. A tiny random
// model gives log pi_theta of four responses; pi_old is then set so that every token has a
// chosen ratio rho = pi_theta / pi_old. For each compared preset the trainer's token weights
// (update_minibatch_gradient) must be c_i A_i f_t, f_t the factor of the advantage that the
// method's definition gives at that rho (tables below), and compare_point's row of the
// preset must hold the shares of clipped tokens, the mean of f (gate_mean), the mean
// |log rho|, the sums of |w| per correct/incorrect and length bin, and each bin's clip share
// and gate that follow from them.
// At rho = 1 every f is 1 and nothing is clipped (the on-policy point, where the presets
// collapse onto three gradients).
#include <math.h>
#include <string.h>

#include "common.h"
#include "kernels/kernels.h"
#include "sim/rl/compare.h"
#include "sim/io/config.h"
#include "sim/model/model.h"
#include "test_util.h"
#include "tiny_policy.h"

enum { M = 4, PL = 3, L_MAX = 8, NTOK = 15, NOBJ = 7, BINS = 2 };
static const int LEN[M] = {4, 4, 2, 5};           // policy tokens of each response
static const float ADV[M] = {1, -1, 0.5f, -2};    // A_i
static const float REWARD[M] = {1, 0, 1, 0};      // responses 0 and 2 correct
// rho of every token, response after response
static const double RHO[NTOK] = {1.1, 1.5, 0.7, 1.25, 0.7, 1.1, 0.9, 1.3, 1, 1,
                                 0.5, 6.0, 1.25, 0.95, 1.05};
static const char *const NAMES[NOBJ] = {"grpo", "dr_grpo", "dapo", "gspo", "gmpo", "cispo", "sapo"};

// f_t = w / (c_i A_i) of every token, worked by hand from each method's definition:
//  - grpo, dr_grpo (PPO clip, Schulman et al. 2017 eq. 7, eps 0.2): l = -min(rho A, clip(rho,
//    0.8, 1.2) A), so d/dlog pi gives A rho where the min takes the unclipped term, 0 where the
//    clip binds: A > 0 and rho > 1.2 (1.5, 1.25 of response 0) or A < 0 and rho < 0.8 (0.7 of
//    response 1, 0.5 of response 3). A < 0 with rho = 6 is not clipped (no dual clip).
//  - dapo (clip-higher, Yu et al. 2025 eq. 10: eps_low 0.2, eps_high 0.28): as PPO but 1.25
//    < 1.28 passes.
//  - gspo (Zheng et al. 2025 eq. 5-7): s_i = (prod_t rho_t)^(1/|o_i|) clipped to [1 - 3e-4,
//    1 + 4e-4] in PPO's min; s_0 = (1.1 1.5 0.7 1.25)^(1/4) = 1.0961576 > 1 + 4e-4 with A > 0
//    and s_1 = (0.7 1.1 0.9 1.3)^(1/4) = 0.9742472 < 1 - 3e-4 with A < 0: clipped, f = 0;
//    s_2 = 1; s_3 = (0.5 6 1.25 0.95 1.05)^(1/5) = 1.3019336 with A < 0 is not clipped, so
//    every token of response 3 carries 1.3019336, the 0.5 and the 6 alike.
//  - gmpo (Zhao et al. 2025 eq. 4): R_i = exp(mean_t sgn(A) min(sgn(A) log rho_t,
//    sgn(A) clip(log rho_t, -0.4, 0.4))); a token whose log rho is held at the bound has no
//    gradient. Response 0 (A > 0): log 1.5 = 0.405 > 0.4 is held, R_0 = exp((log 1.1 + 0.4 +
//    log 0.7 + log 1.25) / 4) = 1.0946610, f = R_0 but 0 for the 1.5; response 1 (A < 0):
//    nothing below -0.4, R_1 = 0.9742472; response 3 (A < 0): log 0.5 = -0.693 is held at
//    -0.4, R_3 = exp((-0.4 + log 6 + log 1.25 + log 0.95 + log 1.05) / 5) = 1.3805472, f = 0
//    for the 0.5.
//  - cispo (MiniMax-M1 2025 eq. 4, with ScaleRL's eps_max 5): l = -sg(min(rho, 5)) A log pi,
//    so f = min(rho, 5) on every token: the 6 gives 5 (and is counted clipped, high), the
//    others their rho.
//  - sapo (Gao et al. 2025 eq. 6): l = -(4/tau) sigmoid(tau (rho - 1)) A, tau = 1 for A > 0,
//    1.05 for A < 0; d/dlog pi = 4 sigma (1 - sigma) rho A, e.g. rho = 6, tau = 1.05:
//    sigma = sigmoid(5.25) = 0.9947850, 4 sigma (1 - sigma) 6 = 0.1246290. No token is clipped.
static const double GATE[NOBJ][NTOK] = {
    {1.1, 0, 0.7, 0, 0, 1.1, 0.9, 1.3, 1, 1, 0, 6.0, 1.25, 0.95, 1.05},
    {1.1, 0, 0.7, 0, 0, 1.1, 0.9, 1.3, 1, 1, 0, 6.0, 1.25, 0.95, 1.05},
    {1.1, 0, 0.7, 1.25, 0, 1.1, 0.9, 1.3, 1, 1, 0, 6.0, 1.25, 0.95, 1.05},
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1.3019336, 1.3019336, 1.3019336, 1.3019336, 1.3019336},
    {1.0946610, 0, 1.0946610, 1.0946610, 0.9742472, 0.9742472, 0.9742472, 0.9742472, 1, 1, 0,
     1.3805472, 1.3805472, 1.3805472, 1.3805472},
    {1.1, 1.5, 0.7, 1.25, 0.7, 1.1, 0.9, 1.3, 1, 1, 0.5, 5.0, 1.25, 0.95, 1.05},
    {1.0972546, 1.4100223, 0.6844833, 1.2306704, 0.6829188, 1.0969737, 0.8975239, 1.2682778, 1,
     1, 0.4670699, 0.1246290, 1.2287117, 0.9493457, 1.0492768},
};
// tokens held at the lower / upper bound (the count of /train/clip_frac_*): ppo where the
// clip binds, by the sign of A; gspo every token of a clipped response; gmpo the held log
// ratios; cispo rho > 5
static const int CLIP_LO[NOBJ] = {2, 2, 2, 4, 1, 0, 0};
static const int CLIP_HI[NOBJ] = {2, 2, 1, 4, 1, 1, 0};
// of those, the tokens of response 3 (length 5, the second length bin): its 0.5 for ppo and
// gmpo, its 6 for cispo
static const int CLIP_BIN1[NOBJ] = {1, 1, 1, 0, 1, 1, 0};
// c_i by the presets' aggregation: seq_mean_token_mean 1 / (M |o_i|), seq_mean_token_sum_norm
// 1 / (M L_max), token_mean 1 / sum_j |o_j| = 1/15
static double coef(int j, int i) {
    if (j == 1) return 1.0 / (M * L_MAX);
    if (j == 2 || j == 5) return 1.0 / NTOK;
    return 1.0 / ((double)M * LEN[i]);
}

static void assert_close(const char *what, double got, double want, double tol) {
    if (!(fabs(got - want) <= tol * (fabs(want) + 1e-12)))
        fail_msg("%s: %.9g, closed form %.9g (tol %g)", what, got, want, tol);
}

typedef struct {
    Backend *bk;
    Model *m;
    UpdateWorkspace *ws;
    int prompt[M][PL], resp[M][8], plen[M], off[M], idx[M];
    const int *pp[M], *rp[M];
    float logp_old[NTOK], w[NTOK];
    Rollout r;
} Fixture;

static void fixture_make(Fixture *f) {
    char err[256];
    memset(f, 0, sizeof *f);
    f->bk = backend_create(BACKEND_CPU, err, sizeof err);
    assert_non_null(f->bk);
    ModelConfig mc = tiny_policy_config();
    f->m = model_create(f->bk, &mc);
    model_init_params(f->m, 17);
    for (int i = 0, off = 0; i < M; i++) {
        for (int t = 0; t < PL; t++) f->prompt[i][t] = 5 + (7 * i + 3 * t) % 40;
        for (int t = 0; t < LEN[i]; t++) f->resp[i][t] = 5 + (11 * i + 5 * t + 1) % 40;
        f->plen[i] = PL;
        f->pp[i] = f->prompt[i];
        f->rp[i] = f->resp[i];
        f->off[i] = off;
        f->idx[i] = i;
        off += LEN[i];
    }
    f->r = (Rollout){.n = M, .prompt = f->pp, .prompt_len = f->plen, .resp = f->rp, .resp_len = LEN,
                     .advantage = ADV, .tok_offset = f->off, .logp_old = f->logp_old};
    f->ws = update_workspace_create(f->m, M, 0);
    update_old_logp(f->ws, f->m, NULL, &f->r, f->idx, M, 0);  // pi_old = pi_theta: rho = 1
}

static void fixture_free(Fixture *f) {
    update_workspace_free(f->ws);
    model_free(f->m);
    backend_destroy(f->bk);
}

// The seven presets of NAMES compared, with two length bins over L_MAX, no extra pass; the
// step's rows reset; every objective's advantages set to ADV.
static void compare_make(Compare *c, Fixture *f) {
    char err[256];
    Config *cfg = config_new();
    const char *sets[] = {"diagnostics.compare=grpo,dr_grpo,dapo,gspo,gmpo,cispo,sapo",
                          "diagnostics.length_bins=2", "diagnostics.compare_extra_epochs=0"};
    for (int k = 0; k < 3; k++)
        if (config_set(cfg, sets[k], err, sizeof err) != 0) fail_msg("%s", err);
    if (compare_from_config(cfg, L_MAX, c, err, sizeof err) != 0) fail_msg("%s", err);
    config_free(cfg);
    assert_int_equal(c->n, NOBJ);
    compare_alloc(c, M, NTOK, model_num_params(f->m), f->bk);
    float *d_rewards = bk_alloc(f->bk, sizeof REWARD);
    bk_upload(f->bk, d_rewards, REWARD, sizeof REWARD);
    compare_advantages(c, f->bk, 0, d_rewards, NULL, NULL, 2, 2);
    bk_free(f->bk, d_rewards);
    for (int j = 0; j < NOBJ; j++) memcpy(c->adv[j], ADV, sizeof ADV);
    c->rewards = REWARD;
}

// The row of objective j at point p against the closed forms with gate table g (NTOK per
// objective), clip counts lo/hi (bin1 of them in the second length bin) and mean |log rho|
// alr.
static void check_row(const Compare *c, int p, int j, const double *g, int lo, int hi, int bin1,
                      double alr) {
    const CompareRow *row = &c->rows[p * c->n + j];
    const CompareBinRow *bins = c->bin_rows + ((size_t)p * c->n + j) * c->bins;
    double gate = 0, sw[M] = {0}, gate_bin[2] = {0, 0};
    for (int i = 0, k = 0; i < M; i++)
        for (int t = 0; t < LEN[i]; t++, k++) {
            gate += g[k] / NTOK;
            gate_bin[i == 3] += g[k] / (i == 3 ? 5 : 10);  // bin 0: 10 tokens, bin 1: 5
            sw[i] += coef(j, i) * fabs(ADV[i]) * g[k];
        }
    char what[64];
    snprintf(what, sizeof what, "%s gate_mean", NAMES[j]);
    assert_close(what, row->gate_mean, gate, 1e-5);
    assert_close("clip_frac_low", row->clip_frac_low, (double)lo / NTOK, 1e-12);
    assert_close("clip_frac_high", row->clip_frac_high, (double)hi / NTOK, 1e-12);
    assert_close("abs_log_ratio", row->abs_log_ratio, alr, 1e-5);
    snprintf(what, sizeof what, "%s sum |w| correct", NAMES[j]);
    assert_close(what, row->sum_abs_weight_correct, sw[0] + sw[2], 1e-5);
    snprintf(what, sizeof what, "%s sum |w| incorrect", NAMES[j]);
    assert_close(what, row->sum_abs_weight_incorrect, sw[1] + sw[3], 1e-5);
    if (sw[0] + sw[2] > 0)
        assert_close("weighted length, correct", row->weighted_length_correct,
                     (LEN[0] * sw[0] + LEN[2] * sw[2]) / (sw[0] + sw[2]), 1e-5);
    // bins of 4 tokens: (len - 1) * 2 / 8 puts lengths 2 and 4 in bin 0, 5 in bin 1
    assert_int_equal(bins[0].n_correct, 2);
    assert_int_equal(bins[0].n_incorrect, 1);
    assert_int_equal(bins[1].n_correct, 0);
    assert_int_equal(bins[1].n_incorrect, 1);
    assert_close("bin 0 incorrect", bins[0].sum_abs_weight_incorrect, sw[1], 1e-5);
    assert_close("bin 1 incorrect", bins[1].sum_abs_weight_incorrect, sw[3], 1e-5);
    assert_close("bin 0 clip_frac", bins[0].clip_frac, (lo + hi - bin1) / 10.0, 1e-12);
    assert_close("bin 1 clip_frac", bins[1].clip_frac, bin1 / 5.0, 1e-12);
    snprintf(what, sizeof what, "%s bin 0 gate_mean", NAMES[j]);
    assert_close(what, bins[0].gate_mean, gate_bin[0], 1e-5);
    snprintf(what, sizeof what, "%s bin 1 gate_mean", NAMES[j]);
    assert_close(what, bins[1].gate_mean, gate_bin[1], 1e-5);
    assert_true(isfinite(row->bias_cosine) || sw[0] + sw[1] + sw[2] + sw[3] == 0);
}

// Off rho = 1: the trainer's weights of each preset are c_i A_i f_t, and the point's rows
// follow.
static void test_off_policy_closed_forms(void **state) {
    Fixture f;
    fixture_make(&f);
    double alr = 0;
    for (int k = 0; k < NTOK; k++) {
        f.logp_old[k] -= (float)log(RHO[k]);
        alr += fabs(log(RHO[k])) / NTOK;
    }
    Compare c;
    compare_make(&c, &f);
    for (int j = 0; j < NOBJ; j++) {  // the per-token weights
        MinibatchStats st;
        model_zero_grad(f.m);
        update_minibatch_gradient(f.ws, f.m, &c.oc[j], &f.r, f.idx, M, 0, f.w, NULL, &st);
        double worst = 0;
        for (int i = 0, k = 0; i < M; i++)
            for (int t = 0; t < LEN[i]; t++, k++) {
                double want = coef(j, i) * ADV[i] * GATE[j][k];
                double e = fabs(f.w[k] - want) / (coef(j, i) * fabs(ADV[i]));
                if (GATE[j][k] == 0) assert_true(f.w[k] == 0.0f);  // a clip stops it exactly
                worst = e > worst ? e : worst;
            }
        printf("  %-8s worst |w - c A f| / (c |A|) %.1e; clipped %lld low, %lld high of %lld\n",
               NAMES[j], worst, st.clipped_low, st.clipped_high, st.tokens);
        assert_true(worst < 1e-5);
        assert_int_equal(st.clipped_low, CLIP_LO[j]);
        assert_int_equal(st.clipped_high, CLIP_HI[j]);
        assert_int_equal(st.tokens, NTOK);
    }
    compare_point(&c, COMPARE_POINT_LAST, f.ws, f.m, &f.r, f.idx, M, 0, ADV);
    for (int j = 0; j < NOBJ; j++) check_row(&c, COMPARE_POINT_LAST, j, GATE[j], CLIP_LO[j], CLIP_HI[j], CLIP_BIN1[j],
                                             alr);
    // the point computed is the only one with values: rho = 1's row stays NaN
    assert_true(isnan(c.rows[0].bias_cosine) && isnan(c.rows[0].gate_mean));
    // off rho = 1 the presets that are one gradient at rho = 1 come apart
    const CompareRow *row = c.rows + COMPARE_POINT_LAST * c.n;
    printf("  gate at the point: grpo %.4f gspo %.4f gmpo %.4f sapo %.4f dapo %.4f cispo %.4f\n",
           row[0].gate_mean, row[3].gate_mean, row[4].gate_mean, row[6].gate_mean, row[2].gate_mean,
           row[5].gate_mean);
    assert_true(fabs(row[0].bias_cosine - row[3].bias_cosine) > 1e-3);
    assert_true(fabs(row[2].bias_cosine - row[5].bias_cosine) > 1e-3);
    compare_free(&c, f.bk);
    fixture_free(&f);
}

// At rho = 1 (pi_old = pi_theta, as the first minibatch before the update): every f is 1,
// nothing is clipped, |log rho| is 0, and the point keeps its minibatch for the extra passes.
static void test_rho1_closed_forms(void **state) {
    Fixture f;
    fixture_make(&f);
    Compare c;
    compare_make(&c, &f);
    double ones[NTOK];
    for (int k = 0; k < NTOK; k++) ones[k] = 1.0;
    int order[M] = {2, 0, 3, 1};
    compare_point(&c, COMPARE_POINT_RHO1, f.ws, f.m, &f.r, order, M, 0, ADV);
    for (int j = 0; j < NOBJ; j++) check_row(&c, COMPARE_POINT_RHO1, j, ones, 0, 0, 0, 0.0);
    assert_int_equal(c.first_n, M);
    assert_memory_equal(c.first_idx, order, sizeof order);
    // gspo, gmpo and sapo give grpo's gradient, cispo dapo's
    const CompareRow *row = c.rows;
    for (int j = 3; j < NOBJ; j++) {
        int twin = j == 5 ? 2 : 0;
        assert_close(NAMES[j], row[j].bias_cosine, row[twin].bias_cosine, 1e-6);
        assert_close(NAMES[j], row[j].grad_norm, row[twin].grad_norm, 1e-6);
    }
    compare_free(&c, f.bk);
    fixture_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rho1_closed_forms),
        cmocka_unit_test(test_off_policy_closed_forms),
    };
    return cmocka_run_group_tests_name("compare", tests, NULL, NULL);
}
