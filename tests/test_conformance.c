// test_conformance.c: what every objective preset promises, pinned on hand-made batches
// (docs/objectives.md). The closed forms here are written from the papers' formulas, not from
// kernels/objective.h: the advantages of every baseline and scale, the token weight of every
// ratio level and clip style at and away from rho = 1, zero advantages for all-equal groups,
// GSPO's sequence ratio, finite differences of each loss, and the invariances of the
// aggregation under the micro-batch split (update_minibatch_gradient on a tiny model).
#include <math.h>
#include <omp.h>
#include <string.h>

#include "common.h"
#include "kernels/kernels.h"
#include "sim/model/model.h"
#include "sim/rl/objective.h"
#include "sim/rl/update.h"
#include "test_util.h"

static Backend *cpu;

static void assert_near(double a, double b, double tol, const char *what) {
    if (!(fabs(a - b) <= tol)) fail_msg("%s: %.9g != %.9g (tol %g)", what, a, b, tol);
}

// ---- the hand-made batch: P = 2 groups of G = 4

enum { P = 2, G = 4, N = P * G, T = 16, L_MAX = 12 };
static const float REWARDS[N] = {1, 0, 0, 0.5f, 1, 1, 0, 1};
static const int LEN[N] = {3, 10, 7, 5, 4, 8, 2, 6};
static const int START[N] = {1, 0, 3, 2, 0, 5, 1, 4};
static const float GREEDY[P] = {0.5f, 0};

static double sample_std(const double *x, int n, int ddof) {
    double m = 0, ss = 0;
    for (int i = 0; i < n; i++) m += x[i] / n;
    for (int i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    return sqrt(ss / (n - ddof));
}

// A_i of preset o over REWARDS written from the definitions (ddof 1, std_eps 1e-6).
static void closed_advantages(const ObjectiveConfig *o, const float *rewards, double *A) {
    double d[N], r[N];
    for (int i = 0; i < N; i++) r[i] = rewards[i];
    for (int g = 0; g < P; g++) {
        const double *rg = r + g * G;
        double mean = (rg[0] + rg[1] + rg[2] + rg[3]) / 4;
        for (int i = 0; i < G; i++) {
            double b = mean;
            if (o->baseline == BASELINE_LEAVE_ONE_OUT) b = (4 * mean - rg[i]) / 3;
            if (o->baseline == BASELINE_LENGTH_WEIGHTED) {
                double lr = 0, l = 0;
                for (int j = 0; j < G; j++) {
                    lr += LEN[g * G + j] * rg[j];
                    l += LEN[g * G + j];
                }
                b = lr / l;
            }
            if (o->baseline == BASELINE_GREEDY) b = GREEDY[g];
            if (o->baseline == BASELINE_MAX_LOO) {
                // pass@k (Tang et al.): only the group's best response gets r_max - r_second,
                // every other response 0, and all 0 where two responses share the best reward
                int best = 0, n_best = 0;
                for (int j = 1; j < G; j++)
                    if (rg[j] > rg[best]) best = j;
                double second = -1e30;
                for (int j = 0; j < G; j++) {
                    n_best += rg[j] == rg[best];
                    if (j != best && rg[j] > second) second = rg[j];
                }
                b = i == best && n_best == 1 ? second : rg[i];  // r_i - b: the advantage before the scale
            }
            int equal = rg[0] == rg[1] && rg[1] == rg[2] && rg[2] == rg[3];
            d[g * G + i] = equal && o->baseline != BASELINE_GREEDY ? 0 : rg[i] - b;
        }
    }
    double bmean = 0;
    for (int i = 0; i < N; i++) bmean += d[i] / N;
    for (int i = 0; i < N; i++) {
        int g = i / G;
        int equal = r[g * G] == r[g * G + 1] && r[g * G + 1] == r[g * G + 2] && r[g * G + 2] == r[g * G + 3];
        if (equal && o->baseline != BASELINE_GREEDY) {
            A[i] = 0;
            continue;
        }
        switch (o->scale) {
            case SCALE_GROUP_STD: A[i] = d[i] / (sample_std(r + g * G, G, 1) + 1e-6); break;
            case SCALE_BATCH_STD: A[i] = d[i] / (sample_std(r, N, 1) + 1e-6); break;
            case SCALE_BATCH_WHITEN: A[i] = (d[i] - bmean) / (sample_std(d, N, 1) + 1e-6); break;
            default: A[i] = d[i];
        }
    }
}

// c_i of response i (lengths LEN) in a minibatch of all N responses.
static double closed_coef(const ObjectiveConfig *o, int i) {
    double sum_len = 0;
    for (int j = 0; j < N; j++) sum_len += LEN[j];
    switch (o->aggregation) {
        case AGG_SEQ_MEAN_TOKEN_MEAN: return 1.0 / ((double)N * LEN[i]);
        case AGG_SEQ_MEAN_TOKEN_SUM_NORM: return 1.0 / ((double)N * L_MAX);
        case AGG_TOKEN_MEAN: return 1.0 / sum_len;
        case AGG_SEQ_MEAN_TOKEN_SUM: return 1.0 / N;
        default: return 1.0;
    }
}

// The token weight w = -dL/dlog pi of token t of response i in the paper's form, given the
// token log-ratios lr (of response i's policy tokens, n of them) and the mask.
static double closed_weight(const ObjectiveConfig *o, double c, double A, const double *lr,
                            const unsigned char *masked, int n, int t) {
    double lo = 1 - o->eps_low, hi = 1 + o->eps_high, rho = exp(lr[t]);
    if (o->ratio == RATIO_NONE) return c * A;
    if (o->ratio == RATIO_SEQUENCE || o->ratio == RATIO_GEO_MEAN) {
        double s = 0;
        int k = 0;
        for (int u = 0; u < n; u++) {
            if (masked[u]) continue;
            double x = lr[u];
            if (o->ratio == RATIO_GEO_MEAN) {  // sgn(A) min(sgn(A) x, sgn(A) clip(x, -eps_low, eps_high))
                double cx = fmin(fmax(x, -o->eps_low), o->eps_high);
                x = A > 0 ? fmin(x, cx) : A < 0 ? fmax(x, cx) : x;
            }
            s += x;
            k++;
        }
        double R = exp(s / k);
        if (o->ratio == RATIO_GEO_MEAN) {
            int clipped = (A > 0 && lr[t] > o->eps_high) || (A < 0 && lr[t] < -o->eps_low);
            return clipped ? 0 : c * A * R;
        }
        rho = R;  // GSPO: the sequence ratio in every token's place
    }
    switch (o->clip) {
        case CLIP_PPO: {
            // the dual clip caps A < 0's loss -A rho at -A clip_ratio_c: constant above it
            int dual = o->clip_ratio_c > 0 && A < 0 && rho > o->clip_ratio_c;
            int clipped = (A > 0 && rho > hi) || (A < 0 && rho < lo) || dual;
            return clipped ? 0 : c * A * rho;
        }
        case CLIP_CISPO: return c * A * fmin(fmax(rho, lo), hi);
        case CLIP_SAPO: {
            double tau = A > 0 ? o->tau_pos : o->tau_neg, sg = 1 / (1 + exp(-tau * (rho - 1)));
            return c * A * 4 * sg * (1 - sg) * rho;  // d/dlog pi of (4/tau) sigmoid(tau (rho - 1)) A
        }
        default: return c * A * rho;
    }
}

// Runs kn_group_advantages and kn_token_weights of preset o over the batch with the token
// log-ratios lr (N, T: lr[i*T + t] for response token t) and mask (N, T, or NULL); compares
// every advantage and token weight with the closed forms. Returns the worst relative error.
static double check_batch(const ObjectiveConfig *o, const float *rewards, const double *lr,
                          const unsigned char *mask) {
    float adv[N], logp[N * T], old[N * T], w[N * T], loss[N * T], coef[N];
    int lo[N], hi[N];
    double A[N], worst = 0;
    kn_group_advantages(cpu, adv, NULL, NULL, rewards, LEN, GREEDY, P, G, o);
    closed_advantages(o, rewards, A);
    for (int i = 0; i < N; i++) assert_near(adv[i], A[i], 1e-5 * (1 + fabs(A[i])), o->preset);
    unsigned char m[N * T] = {0};
    for (int i = 0; i < N; i++)
        for (int t = 0; t < T; t++) {
            int p = i * T + t, rt = t - START[i];
            old[p] = -1.5f - 0.1f * (float)((i + t) % 5);
            logp[p] = rt >= 0 && rt < LEN[i] ? old[p] + (float)lr[i * T + rt] : 7.0f;  // 7: never read
            if (mask && rt >= 0 && rt < LEN[i]) m[p] = mask[i * T + rt];
        }
    kn_token_weights(cpu, w, loss, NULL, coef, lo, hi, logp, old, NULL, mask ? m : NULL, adv, START,
                     LEN, N, T, N, 45.0, o);  // 45 = sum of LEN
    for (int i = 0; i < N; i++) {
        double lri[T];
        unsigned char mi[T];
        for (int t = 0; t < LEN[i]; t++) {  // the ratios the kernel sees, in float
            int p = i * T + START[i] + t;
            lri[t] = (double)logp[p] - (double)old[p];
            mi[t] = mask ? mask[i * T + t] : 0;
        }
        double c = closed_coef(o, i);
        assert_near(coef[i], c, 1e-7 * c, "c_i");
        for (int t = 0; t < T; t++) {
            int rt = t - START[i];
            double want = rt >= 0 && rt < LEN[i] && !mi[rt] ? closed_weight(o, c, adv[i], lri, mi, LEN[i], rt) : 0;
            double e = fabs(w[i * T + t] - want) / (fabs(c * adv[i]) + 1e-12);
            if (e > worst) worst = e;
        }
    }
    return worst;
}

static ObjectiveConfig preset_knobs(int k) {
    ObjectiveConfig o;
    assert_non_null(objective_preset_info(k, &o));
    o.l_max = L_MAX;
    return o;
}

// pass@k on hand-worked groups: {1, 0, 0, 0.5} gives the best response r_max - r_second =
// 0.5 and the others 0; a tie at the best, {1, 1, 0, 1}, gives every response 0; with the
// group std (ddof 1: mean 0.375, squared deviations 0.390625 + 2 x 0.140625 + 0.015625 =
// 0.6875, so std = sqrt(0.6875 / 3)) the best gets 0.5 / (std + 1e-6).
static void test_passk_hand_worked(void **state) {
    (void)state;
    ObjectiveConfig o;
    assert_int_equal(objective_preset("grpo_passk", L_MAX, &o), 0);
    const float r[N] = {1, 0, 0, 0.5f, 1, 1, 0, 1};
    float adv[N];
    o.scale = SCALE_NONE;
    kn_group_advantages(cpu, adv, NULL, NULL, r, LEN, NULL, P, G, &o);
    const double none[N] = {0.5, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < N; i++) assert_near(adv[i], none[i], 1e-7, "pass@k, scale none");
    o.scale = SCALE_GROUP_STD;
    kn_group_advantages(cpu, adv, NULL, NULL, r, LEN, NULL, P, G, &o);
    const double scaled[N] = {0.5 / (sqrt(0.6875 / 3) + 1e-6), 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < N; i++) assert_near(adv[i], scaled[i], 1e-6, "pass@k, group std");
    // the best response anywhere in the group, and negative rewards: {-1, 2, 0.5, 2.5}
    const float r2[G] = {-1, 2, 0.5f, 2.5f};
    o.scale = SCALE_NONE;
    kn_group_advantages(cpu, adv, NULL, NULL, r2, LEN, NULL, 1, G, &o);
    const double want2[G] = {0, 0, 0, 0.5};
    for (int i = 0; i < G; i++) assert_near(adv[i], want2[i], 1e-7, "pass@k, best last");
}

// `grpolab objective --eval FILE` (the entry point of scripts/conformance.py) on a hand-worked
// batch: pass@k with scale none over rewards {1, 0, 0, 0.5} gives A = [0.5, 0, 0, 0]; at rho = 1
// with seq_mean_token_mean the best response's two tokens get c A = 0.5 / (4 x 2) = 0.0625, and
// a response of 3 tokens with one written by the environment gets c = 1 / (4 x 3) (|o_i| counts
// the environment's token) and weight 0 on that token. Bad input: exit 2 naming file and line.
static void test_eval_entry_point(void **state) {
    (void)state;
    const char *bin = getenv("GRPOLAB_BIN");
    if (!bin) bin = "build/grpolab";
    char path[] = "/tmp/grpolab_evalXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# hand-worked\npreset grpo_passk\nset objective.scale=none\ngroups 1 4\n"
               "rewards 1 0 0 0.5\nresponse 2 -1 -2 -1 -2 0 0\nresponse 3 -1 -1 -1 -1 -1 -1 0 1 0\n"
               "response 1 -0.5 -0.5 0\nresponse 2 -1 -1 -1 -1 0 0\n");
    fclose(f);
    char cmd[512], out[4096];
    snprintf(cmd, sizeof cmd, "%s objective --eval %s", bin, path);
    assert_int_equal(tu_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "\"advantages\": [0.5, 0, 0, 0]"));
    assert_non_null(strstr(out, "[0.0625, 0.0625]"));
    assert_non_null(strstr(out, "\"coef\": [0.125, 0.0833333358, 0.25, 0.125]"));
    assert_non_null(strstr(out, "[0, 0, 0]"));
    // a bad number, an unknown key, too few responses
    static const char *const BAD[][2] = {
        {"preset grpo\ngroups 1 2\nrewards 1 x\n", "line 3: rewards 'x'"},
        {"preset grpo\nbogus 1\n", "line 2: expected preset, set or groups before 'bogus'"},
        {"preset grpo\ngroups 1 2\nrewards 1 0\nresponse 1 0 0 0\n", "responses '1 of 2'"},
        {"preset grpo\nset run.seed=3\n", "only objective.* and world.max_new_tokens"},
    };
    for (int i = 0; i < 4; i++) {
        f = fopen(path, "w");
        fputs(BAD[i][0], f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "%s objective --eval %s 2>&1", bin, path);
        assert_int_equal(tu_run_cmd(cmd, out, sizeof out), 2);
        if (!strstr(out, BAD[i][1]) || !strstr(out, path)) fail_msg("'%s' lacks '%s'", out, BAD[i][1]);
    }
    unlink(path);
}

// Token log-ratios of the batch: seed 0 gives rho = 1, else uniform in [-a, a].
static void ratios(double *lr, uint64_t seed, double a) {
    for (int i = 0; i < N * T; i++) lr[i] = seed ? a * (2 * philox_uniform(seed, i) - 1) : 0;
}

// Every preset's advantages and weights against the closed forms: at rho = 1, where each is
// c_i A_i, and off-policy (|log rho| up to 0.5, so every clip binds somewhere).
static void test_every_preset_closed_form(void **state) {
    double lr[N * T];
    for (int k = 0; k < objective_preset_count(); k++) {
        ObjectiveConfig o = preset_knobs(k);
        ratios(lr, 0, 0);
        double e1 = check_batch(&o, REWARDS, lr, NULL);
        ratios(lr, 17, 0.5);
        double e2 = check_batch(&o, REWARDS, lr, NULL);
        unsigned char mask[N * T];
        for (int j = 0; j < N * T; j++) mask[j] = j % 3 == 1;
        double e3 = check_batch(&o, REWARDS, lr, mask);
        printf("  %-22s worst |w - closed| / |c A|: rho=1 %.1e, off-policy %.1e, env mask %.1e\n",
               o.preset, e1, e2, e3);
        assert_true(e1 < 1e-5 && e2 < 1e-5 && e3 < 1e-5);
        if (o.clip != CLIP_PPO || o.ratio == RATIO_GEO_MEAN || o.ratio == RATIO_NONE) continue;
        // with verl's dual clip at 3 and |log rho| up to 1.5 (rho up to 4.5: above the cap)
        o.clip_ratio_c = 3.0f;
        ratios(lr, 23, 1.5);
        double e4 = check_batch(&o, REWARDS, lr, NULL);
        printf("  %-22s dual clip 3, |log rho| <= 1.5: %.1e\n", o.preset, e4);
        assert_true(e4 < 1e-5);
    }
}

// At rho = 1 every preset's weight is exactly its c_i A_i (the clip, gate and sequence ratio
// all reduce to 1 there: SAPO's 4 sigma (1 - sigma) = 1 at rho = 1).
static void test_rho_one_is_c_times_a(void **state) {
    for (int k = 0; k < objective_preset_count(); k++) {
        ObjectiveConfig o = preset_knobs(k);
        float adv[N], logp[N * T], w[N * T], coef[N];
        kn_group_advantages(cpu, adv, NULL, NULL, REWARDS, LEN, GREEDY, P, G, &o);
        for (int j = 0; j < N * T; j++) logp[j] = -1.0f - 0.01f * (float)j;
        kn_token_weights(cpu, w, NULL, NULL, coef, NULL, NULL, logp, logp, NULL, NULL, adv, START,
                         LEN, N, T, N, 45.0, &o);
        for (int i = 0; i < N; i++)
            for (int t = START[i]; t < START[i] + LEN[i]; t++)
                assert_near(w[i * T + t], coef[i] * adv[i], 1e-6 * fabs(coef[i] * adv[i]) + 1e-12, o.preset);
    }
}

// A group whose rewards are all equal gets A = 0 under every preset but remax, whose
// baseline is the greedy response's reward from outside the group (r - r_greedy).
static void test_all_equal_groups(void **state) {
    const float r[N] = {1, 1, 1, 1, 0, 0, 0, 0};
    for (int k = 0; k < objective_preset_count(); k++) {
        ObjectiveConfig o = preset_knobs(k);
        float adv[N];
        kn_group_advantages(cpu, adv, NULL, NULL, r, LEN, GREEDY, P, G, &o);
        for (int i = 0; i < N; i++) {
            float want = o.baseline == BASELINE_GREEDY ? r[i] - GREEDY[i / G] : 0.0f;
            if (!(adv[i] == want)) fail_msg("%s: A_%d = %g, want %g", o.preset, i, adv[i], want);
        }
    }
}

// GSPO's sequence ratio: w / (c A) = s_i = exp(mean_t log rho_t) over the response's policy
// tokens, for a ratio inside the clip; a response whose s_i leaves [1-3e-4, 1+4e-4] gets 0.
static void test_gspo_sequence_ratio(void **state) {
    ObjectiveConfig o;
    assert_int_equal(objective_preset("gspo", L_MAX, &o), 0);
    float adv[N] = {1, -1, 0.5f, -0.5f, 2, -2, 1, -1}, logp[N * T], old[N * T], w[N * T], coef[N];
    unsigned char mask[N * T] = {0};
    for (int i = 0; i < N; i++)
        for (int t = 0; t < T; t++) {
            int p = i * T + t;
            old[p] = -2.0f;
            // response i's mean log-ratio: (i - 3.5) * 1e-4 (half of them out of the clip)
            float d = (float)(i - 3.5) * 1e-4f + ((t % 2) ? 2e-3f : -2e-3f);
            logp[p] = old[p] + d;
            mask[p] = i == 2 && t == START[i] + 1;  // an environment token, left out of the mean
        }
    kn_token_weights(cpu, w, NULL, NULL, coef, NULL, NULL, logp, old, NULL, mask, adv, START, LEN, N,
                     T, N, 45.0, &o);
    for (int i = 0; i < N; i++) {
        double s = 0;
        int n = 0;
        for (int t = START[i]; t < START[i] + LEN[i]; t++)
            if (!mask[i * T + t]) {
                s += (double)logp[i * T + t] - old[i * T + t];
                n++;
            }
        double si = exp(s / n);
        int clipped = (adv[i] > 0 && si > 1 + 4e-4) || (adv[i] < 0 && si < 1 - 3e-4);
        for (int t = START[i]; t < START[i] + LEN[i]; t++) {
            if (mask[i * T + t]) continue;
            double got = w[i * T + t] / (coef[i] * adv[i]);
            if (clipped) assert_true(w[i * T + t] == 0.0f);
            else assert_near(got, si, 1e-6, "s_i");
        }
        printf("  response %d: s_i = %.6f%s\n", i, si, clipped ? " (clipped)" : "");
    }
}

// Finite differences: w = -dL/dlog pi of every token, L = sum_i c_i sum_t l_it with the
// per-token losses kn_token_weights returns (L of a sequence-level ratio depends on all of a
// response's tokens). For CISPO and GPG, whose weight holds the ratio fixed (a stop-gradient),
// log pi and log pi_old move together, which leaves rho as it is. GSPO's clip is widened to
// 0.2 so that the differences do not cross it.
static double total_loss(const ObjectiveConfig *o, const float *adv, const float *logp,
                         const float *old, const unsigned char *mask, float *w) {
    float loss[N * T], coef[N], wl[N * T];
    kn_token_weights(cpu, w ? w : wl, loss, NULL, coef, NULL, NULL, logp, old, NULL, mask, adv, START,
                     LEN, N, T, N, 45.0, o);
    double L = 0;
    for (int i = 0; i < N; i++)
        for (int t = 0; t < T; t++) L += (double)coef[i] * loss[i * T + t];
    return L;
}

static void test_finite_differences(void **state) {
    float adv[N] = {1.2f, -0.7f, 0.4f, -1.5f, 0.9f, -0.3f, 2.0f, -1.1f};
    unsigned char mask[N * T] = {0};
    mask[2 * T + START[2] + 2] = 1;
    for (int k = 0; k < objective_preset_count(); k++) {
        ObjectiveConfig o = preset_knobs(k);
        if (o.ratio == RATIO_SEQUENCE) o.eps_low = o.eps_high = 0.2f;
        int stopgrad = o.clip == CLIP_CISPO || o.ratio == RATIO_NONE;
        float logp[N * T], old[N * T], w[N * T];
        for (int j = 0; j < N * T; j++) {
            old[j] = -1.0f - 0.05f * (float)(j % 7);
            logp[j] = old[j] + 0.3f * (2 * philox_uniform(5, j) - 1);
        }
        total_loss(&o, adv, logp, old, mask, w);
        double worst = 0;
        int checked = 0;
        for (int i = 0; i < N; i++)
            for (int t = START[i]; t < START[i] + LEN[i]; t++) {
                int p = i * T + t;
                if (mask[p]) continue;
                // away from a clip boundary (the loss has a kink there)
                double lrp = (double)logp[p] - old[p], rho = exp(lrp);
                if (o.ratio == RATIO_TOKEN && o.clip == CLIP_PPO &&
                    (fabs(rho - (1 - o.eps_low)) < 0.02 || fabs(rho - (1 + o.eps_high)) < 0.02))
                    continue;
                if (o.ratio == RATIO_GEO_MEAN && (fabs(lrp + o.eps_low) < 0.02 || fabs(lrp - o.eps_high) < 0.02))
                    continue;
                const float h = 4e-3f;
                float lp0 = logp[p], old0 = old[p];
                logp[p] = lp0 + h;
                if (stopgrad) old[p] = old0 + h;
                double Lp = total_loss(&o, adv, logp, old, mask, NULL);
                logp[p] = lp0 - h;
                if (stopgrad) old[p] = old0 - h;
                double Lm = total_loss(&o, adv, logp, old, mask, NULL);
                logp[p] = lp0;
                old[p] = old0;
                double fd = -(Lp - Lm) / ((double)(lp0 + h) - (double)(lp0 - h));
                double e = fabs(fd - w[p]) / (fabs(adv[i]) / LEN[i] + 1e-9);
                if (e > worst) worst = e;
                checked++;
            }
        printf("  %-22s %3d tokens, worst |fd - w| / (|A| / |o|) %.2e\n", o.preset, checked, worst);
        assert_true(checked > 20);
        assert_true(worst < 2e-3);
    }
}

// ---- aggregation under the micro-batch split (a tiny model, fixed rollout)

enum { NR = 8, PMAX = 10, RMAX = 30 };
typedef struct {
    int prompt[NR][PMAX], resp[NR][RMAX], plen[NR], rlen[NR], off[NR], idx[NR], ntok;
    const int *pp[NR], *rp[NR];
    float adv[NR], old[NR * RMAX];
} FixedRollout;

static void fixed_rollout(FixedRollout *f, int V) {
    memset(f, 0, sizeof *f);
    for (int i = 0; i < NR; i++) {
        f->plen[i] = 3 + (i * 5) % (PMAX - 3);
        f->rlen[i] = 1 + (i * 13 + 5) % RMAX;
        for (int t = 0; t < f->plen[i]; t++) f->prompt[i][t] = 2 + (i * 7 + t * 3) % (V - 2);
        for (int t = 0; t < f->rlen[i]; t++) f->resp[i][t] = 2 + (i * 11 + t * 5) % (V - 2);
        f->pp[i] = f->prompt[i];
        f->rp[i] = f->resp[i];
        f->off[i] = f->ntok;
        f->ntok += f->rlen[i];
        f->idx[i] = (i * 3) % NR;
        f->adv[i] = (float)(i % 3) - 1.0f + 0.2f * (float)i / NR;
    }
}

// The gradient (into g, np floats) and the logged weights (into w) of objective o over the
// fixed rollout with the given micro-batch size (pi_old = pi_theta: every rho is 1), its
// statistics into st and, with unbiased (ws made with the bias diagnostic), the bias cosine
// (returned).
static double gradient_with_micro(Model *m, UpdateWorkspace *ws, FixedRollout *f,
                                  const ObjectiveConfig *o, int micro, float *g, float *w,
                                  const float *unbiased, MinibatchStats *st) {
    Rollout r = {.n = NR, .prompt = f->pp, .prompt_len = f->plen, .resp = f->rp,
                 .resp_len = f->rlen, .advantage = f->adv, .tok_offset = f->off,
                 .logp_old = f->old, .logp_ref = NULL, .env = NULL};
    update_old_logp(ws, m, NULL, &r, f->idx, NR, micro);
    model_zero_grad(m);
    double cosine = update_minibatch_gradient(ws, m, o, &r, f->idx, NR, micro, w, unbiased, st);
    bk_download(cpu, g, model_grads(m), model_num_params(m) * sizeof(float));
    return cosine;
}

static Model *tiny_model(void) {
    ModelConfig mc = model_config_default();
    mc.vocab_size = 40;
    mc.d_model = 16;
    mc.n_layers = 1;
    mc.n_heads = 2;
    mc.n_kv_heads = 1;
    mc.d_ff = 32;
    mc.max_seq_len = 48;
    Model *m = model_create(cpu, &mc);
    model_init_params(m, 9);
    return m;
}

// Dr. GRPO (c = 1/(M L_max)) and token_mean at global scope (DAPO) give the same gradient for
// every micro-batch size (micro = 0 is one pass, micro = 1 is NR accumulation steps); token_mean
// at micro_batch scope (TRL's bnpo) does not, and its weights are A / (K sum of the pass's
// |o|) for the K passes the update makes (sorted by sequence length, longest first).
static void test_micro_batch_invariance(void **state) {
    Model *m = tiny_model();
    FixedRollout f;
    fixed_rollout(&f, 40);
    size_t np = model_num_params(m);
    UpdateWorkspace *ws = update_workspace_create(m, NR, 0);
    float *g0 = xmalloc(np * sizeof(float)), *g = xmalloc(np * sizeof(float));
    float w0[NR * RMAX], w[NR * RMAX];
    const char *names[] = {"dr_grpo", "dapo", "bnpo"};
    const int micros[] = {1, 2, 3, 5};
    for (int k = 0; k < 3; k++) {
        ObjectiveConfig o;
        assert_int_equal(objective_preset(names[k], RMAX, &o), 0);
        MinibatchStats st;
        gradient_with_micro(m, ws, &f, &o, 0, g0, w0, NULL, &st);
        for (int j = 0; j < 4; j++) {
            gradient_with_micro(m, ws, &f, &o, micros[j], g, w, NULL, &st);
            double e = tu_rel_err(g, g0, np);
            printf("  %-8s micro %d vs one pass: gradient rel err %.2e\n", names[k], micros[j], e);
            if (k < 2) assert_true(e < 1e-5);
            else assert_true(e > 1e-3);  // bnpo depends on the split
            if (k < 2) continue;
            // bnpo's weights: the passes of micros[j] rows in the order forward_rows takes them
            int order[NR], K = (NR + micros[j] - 1) / micros[j];
            memcpy(order, f.idx, sizeof order);
            for (int a = 1; a < NR; a++)
                for (int b = a; b > 0; b--) {
                    int x = order[b - 1], y = order[b];
                    if (f.plen[x] + f.rlen[x] >= f.plen[y] + f.rlen[y]) break;
                    order[b - 1] = y;
                    order[b] = x;
                }
            for (int c0 = 0; c0 < NR; c0 += micros[j]) {
                int nc = NR - c0 < micros[j] ? NR - c0 : micros[j];
                double tokens = 0;
                for (int q = 0; q < nc; q++) tokens += f.rlen[order[c0 + q]];
                for (int q = 0; q < nc; q++) {
                    int i = order[c0 + q];
                    double want = f.adv[i] / (K * tokens);
                    for (int t = 0; t < f.rlen[i]; t++)
                        assert_near(w[f.off[i] + t], want, 1e-6 * fabs(want) + 1e-12, "bnpo weight");
                }
            }
        }
    }
    free(g0);
    free(g);
    update_workspace_free(ws);
    model_free(m);
}

// On several CPU threads the passes of a minibatch run at once, each on one thread on a view
// of the model (update.c, pass_threads): every pass's log-probs, and so pi_old and the token
// weights, are those of one thread bit for bit, and the gradient differs from one thread's
// only in the order its passes are summed.
static void test_threads_match_one_thread(void **state) {
    Model *m = tiny_model();
    FixedRollout f;
    fixed_rollout(&f, 40);
    size_t np = model_num_params(m);
    UpdateWorkspace *ws = update_workspace_create(m, NR, 1);
    float *g1 = xmalloc(np * sizeof(float)), *g = xmalloc(np * sizeof(float));
    float w1[NR * RMAX], w[NR * RMAX], old1[NR * RMAX];
    ObjectiveConfig o;
    assert_int_equal(objective_preset("grpo", RMAX, &o), 0);
    int saved = omp_get_max_threads();
    const int micros[] = {1, 3};
    for (int j = 0; j < 2; j++) {
        MinibatchStats s1, s;
        omp_set_num_threads(1);
        double c1 = gradient_with_micro(m, ws, &f, &o, micros[j], g1, w1, f.adv, &s1);
        memcpy(old1, f.old, sizeof old1);
        omp_set_num_threads(3);
        double c = gradient_with_micro(m, ws, &f, &o, micros[j], g, w, f.adv, &s);
        double e = tu_rel_err(g, g1, np);
        printf("  micro %d: 3 threads vs 1, pi_old and weights bit for bit, gradient rel err %.2e, "
               "bias cosine %.9f vs %.9f\n", micros[j], e, c, c1);
        assert_memory_equal(f.old, old1, (size_t)f.ntok * sizeof(float));
        assert_memory_equal(w, w1, (size_t)f.ntok * sizeof(float));
        assert_true(e < 1e-6);
        assert_near(c, c1, 1e-6, "bias cosine");
        assert_true(s.tokens == s1.tokens && s.clipped_low == s1.clipped_low &&
                    s.clipped_high == s1.clipped_high);
        assert_near(s.loss, s1.loss, 1e-9 * fabs(s1.loss) + 1e-12, "loss");
        assert_near(s.entropy_sum, s1.entropy_sum, 1e-9 * s1.entropy_sum, "entropy");
    }
    omp_set_num_threads(saved);
    free(g1);
    free(g);
    update_workspace_free(ws);
    model_free(m);
}

// The block of docs/objectives.md between "<!-- begin: TAG -->" and "<!-- end: TAG -->" must
// be what print writes.
static void check_generated_block(const char *tag, void (*print)(FILE *)) {
    FILE *f = fopen("docs/objectives.md", "r");
    if (!f) fail_msg("cannot open docs/objectives.md (run the tests from the repository root)");
    static char doc[1 << 17];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    doc[n] = '\0';
    fclose(f);
    char begin_tag[128], end_tag[128];
    snprintf(begin_tag, sizeof begin_tag, "<!-- begin: %s -->\n", tag);
    snprintf(end_tag, sizeof end_tag, "<!-- end: %s -->", tag);
    const char *b = strstr(doc, begin_tag), *e = strstr(doc, end_tag);
    if (!b || !e || e < b) fail_msg("docs/objectives.md has no block '%s' .. '%s'", begin_tag, end_tag);
    b += strlen(begin_tag);
    char *want = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&want, &len);
    print(m);
    fclose(m);
    if (strlen(want) != (size_t)(e - b) || memcmp(want, b, len) != 0)
        fail_msg("docs/objectives.md: the block '%s' differs from what `%s` prints (paste its output "
                 "into the block)", tag, tag);
    free(want);
}

// docs/objectives.md's preset tables are `grpolab objective --markdown` (objective_print_md).
static void test_doc_is_generated(void **state) {
    check_generated_block("grpolab objective --markdown", objective_print_md);
    printf("  docs/objectives.md: %d presets as `grpolab objective --markdown` prints them\n",
           objective_preset_count());
}

// Table 2 (objective_print_table2): the doc holds the generated table, and its "divides by
// |o_i|" column follows the definitions: c_i = 1/(M |o_i|) does, a constant 1/(M L_max) and
// the batch's 1/sum_j |o_j| (the same for every response of the minibatch) do not.
static void test_table2(void **state) {
    check_generated_block("grpolab objective --table2", objective_print_table2);
    assert_int_equal(aggregation_divides_by_length(AGG_SEQ_MEAN_TOKEN_MEAN), 1);
    assert_int_equal(aggregation_divides_by_length(AGG_SEQ_MEAN_TOKEN_SUM_NORM), 0);
    assert_int_equal(aggregation_divides_by_length(AGG_TOKEN_MEAN), 0);
    assert_int_equal(aggregation_divides_by_length(AGG_SEQ_MEAN_TOKEN_SUM), 0);
    assert_int_equal(aggregation_divides_by_length(AGG_TOKEN_SUM), 0);
    assert_true(objective_framework_count() >= 4);
    for (int k = 0; k < objective_framework_count(); k++) {
        const char *name;
        Aggregation agg;
        assert_int_equal(objective_framework_default(k, &name, &agg), 0);
        assert_non_null(name);
    }
    assert_int_equal(objective_framework_default(objective_framework_count(), NULL, NULL), -1);
}

static int setup(void **state) {
    char err[256];
    cpu = backend_create(BACKEND_CPU, err, sizeof err);
    return cpu ? 0 : -1;
}

static int teardown(void **state) {
    backend_destroy(cpu);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_preset_closed_form),
        cmocka_unit_test(test_rho_one_is_c_times_a),
        cmocka_unit_test(test_all_equal_groups),
        cmocka_unit_test(test_passk_hand_worked),
        cmocka_unit_test(test_eval_entry_point),
        cmocka_unit_test(test_gspo_sequence_ratio),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_micro_batch_invariance),
        cmocka_unit_test(test_threads_match_one_thread),
        cmocka_unit_test(test_doc_is_generated),
        cmocka_unit_test(test_table2),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
