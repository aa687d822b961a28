// objective.h: the RL objectives (GRPO, Dr. GRPO, DAPO token-level, RLOO) as independent
// knobs (ObjectiveConfig), and every formula of them in exactly one place. The per-group,
// per-response and per-token formulas are static inline functions marked for host and device
// (OBJ_HD): the CPU and CUDA ops kn_group_advantages and kn_token_weights (kernels.h) both
// call them, so the CUDA backend runs the same arithmetic the CPU tests check. The notation
// and the table of formulas are in docs/kernels.md ("RL objective"); the presets and the
// [objective] config section are sim/objective.h's.
#ifndef GRPOLAB_KERNELS_OBJECTIVE_H
#define GRPOLAB_KERNELS_OBJECTIVE_H

#include <math.h>
#include <stddef.h>

#ifdef __CUDACC__
#define OBJ_HD static inline __host__ __device__
#else
#define OBJ_HD static inline
#endif

typedef enum { BASELINE_GROUP_MEAN = 0, BASELINE_LEAVE_ONE_OUT = 1 } Baseline;
typedef enum { SCALE_GROUP_STD = 0, SCALE_BATCH_STD = 1, SCALE_NONE = 2 } Scale;
typedef enum {
    AGG_SEQ_MEAN_TOKEN_MEAN = 0,      // grpo
    AGG_SEQ_MEAN_TOKEN_SUM_NORM = 1,  // dr_grpo
    AGG_TOKEN_MEAN = 2,               // dapo
    AGG_SEQ_MEAN_TOKEN_SUM = 3,       // rloo
} Aggregation;

// The knobs of one objective, resolved (sim/objective.h makes them from a preset and a config).
typedef struct ObjectiveConfig {  // named: kernels.h declares it as struct ObjectiveConfig
    char preset[16];       // name of the preset the knobs started from (for logs and messages)
    Baseline baseline;
    Scale scale;
    int std_ddof;          // 0 or 1
    float std_eps;         // added to the std
    Aggregation aggregation;
    int l_max;             // seq_mean_token_sum_norm's constant
    float eps_low, eps_high;  // PPO clip range [1-eps_low, 1+eps_high]
    float beta;            // KL coefficient (0: no reference model)
    int dynamic_sampling;  // DAPO: drop groups whose rewards are all equal
} ObjectiveConfig;

// ---- per-response and per-token formulas (host and device)

// Aggregation coefficient c_i of a response of length len_i in a minibatch of M responses
// whose lengths sum to sum_len.
OBJ_HD float aggregation_coef(Aggregation agg, int M, int len_i, double sum_len, int l_max) {
    switch (agg) {
        case AGG_SEQ_MEAN_TOKEN_MEAN: return 1.0f / ((float)M * (float)len_i);
        case AGG_SEQ_MEAN_TOKEN_SUM_NORM: return 1.0f / ((float)M * (float)l_max);
        case AGG_TOKEN_MEAN: return (float)(1.0 / sum_len);
        case AGG_SEQ_MEAN_TOKEN_SUM: default: return 1.0f / (float)M;
    }
}

// 1 if PPO's clip binds for this token (its gradient through the ratio is zero).
OBJ_HD int ppo_clipped(float advantage, float ratio, float eps_low, float eps_high) {
    return (advantage > 0.0f && ratio > 1.0f + eps_high) ||
           (advantage < 0.0f && ratio < 1.0f - eps_low);
}

// KL_k3 = exp(lr) - lr - 1, lr = log pi_ref - log pi_theta, of one token (>= 0; 0 at pi_ref = pi_theta).
OBJ_HD float kl_k3(float logp, float logp_ref) {
    float lr = logp_ref - logp;
    return expf(lr) - lr - 1.0f;
}

// Per-token loss l_{i,t} (before the coefficient c_i).
OBJ_HD float ppo_token_loss(float advantage, float logp, float logp_old, float logp_ref,
                            float eps_low, float eps_high, float beta) {
    float ratio = expf(logp - logp_old);
    float clipped = fminf(fmaxf(ratio, 1.0f - eps_low), 1.0f + eps_high);
    float l = -fminf(ratio * advantage, clipped * advantage);
    if (beta != 0.0f) l += beta * kl_k3(logp, logp_ref);
    return l;
}

// Token weight w_{i,t} = -dL/dlog pi_theta = c_i (A rho [not clipped] - beta (1 - exp(lr))).
OBJ_HD float ppo_token_weight(float coef, float advantage, float logp, float logp_old,
                              float logp_ref, float eps_low, float eps_high, float beta) {
    float ratio = expf(logp - logp_old);
    float w = ppo_clipped(advantage, ratio, eps_low, eps_high) ? 0.0f : advantage * ratio;
    if (beta != 0.0f) w -= beta * (1.0f - expf(logp_ref - logp));
    return coef * w;
}

// ---- per-group formulas (host and device)

// Standard deviation of x (n) with ddof (0 or 1); 0 when n - ddof < 1.
OBJ_HD double reward_std(const float *x, int n, int ddof) {
    if (n - ddof < 1) return 0.0;
    double mean = 0, ss = 0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
    return sqrt(ss / (double)(n - ddof));
}

// Advantages A_i = (r_i - b_i) / s_i of one group: rewards r (G) -> adv (G). batch_std is
// the std of the whole rollout batch's rewards (read only with SCALE_BATCH_STD). A group
// with all-equal rewards gets exactly 0 (no NaN). The group's reward mean and std (with the
// config's ddof) go to *mean_out and *std_out if not NULL.
OBJ_HD void group_advantages(const ObjectiveConfig *oc, const float *r, int G, double batch_std,
                             float *adv, float *mean_out, float *std_out) {
    double sum = 0;
    for (int i = 0; i < G; i++) sum += r[i];
    double mean = sum / G, std = reward_std(r, G, oc->std_ddof);
    int all_equal = 1;
    for (int i = 1; i < G; i++) all_equal &= r[i] == r[0];
    if (mean_out) *mean_out = (float)mean;
    if (std_out) *std_out = (float)std;
    for (int i = 0; i < G; i++) {
        if (all_equal) {  // no signal: exactly zero under every baseline and scale
            adv[i] = 0.0f;
            continue;
        }
        // baseline b_i
        double b = oc->baseline == BASELINE_LEAVE_ONE_OUT ? (sum - r[i]) / (G - 1) : mean;
        // scale s_i
        double s = oc->scale == SCALE_GROUP_STD   ? std + oc->std_eps
                   : oc->scale == SCALE_BATCH_STD ? batch_std + oc->std_eps
                                                  : 1.0;
        adv[i] = (float)((r[i] - b) / s);
    }
}

#endif
