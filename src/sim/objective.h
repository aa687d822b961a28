// objective.h: the RL objectives (GRPO, Dr. GRPO, DAPO token-level, RLOO) as independent
// knobs, and every formula of them in exactly one place. The per-group, per-response and
// per-token formulas are static inline functions marked for host and device (OBJ_HD): the
// CPU and CUDA ops kn_group_advantages and kn_token_weights (kernels.h) both call them, so
// the CUDA backend runs the same arithmetic the CPU tests check.
//
// Notation (../shared/DESIGN.md, Liu et al. 2025): a rollout batch of P prompts x G
// responses; response i has reward r_i, length |o_i| (generated tokens, EOS included), group
// q(i); an optimizer minibatch holds M responses.
//
//   advantage        A_i = (r_i - b_i) / s_i
//     baseline b_i   group mean (grpo, dr_grpo, dapo) or leave-one-out mean of the other G-1
//                    (rloo; A_i = G/(G-1) (r_i - mean))
//     scale s_i      group std + eps (grpo, dapo), batch std + eps, or 1 (dr_grpo, rloo);
//                    std with ddof 0 or 1
//   per-token loss   l_{i,t} = -min(rho A_i, clip(rho, 1-eps_low, 1+eps_high) A_i)
//                              + beta * KL_k3,  rho = pi_theta / pi_old
//                    KL_k3 = exp(lr) - lr - 1 with lr = log pi_ref - log pi_theta (Schulman's k3)
//   objective        L = sum_i sum_t c_i l_{i,t}, with the aggregation coefficient c_i:
//     seq_mean_token_mean       1 / (M |o_i|)               grpo  ("length normalisation")
//     seq_mean_token_sum_norm   1 / (M L_max), L_max const  dr_grpo
//     token_mean                1 / sum_{j in minibatch} |o_j|   dapo
//     seq_mean_token_sum        1 / M                       rloo
//   token weight     w_{i,t} = -dL/dlog pi_theta(o_{i,t})
//                            = c_i (A_i rho [not clipped] - beta (1 - exp(lr)))
//                    at rho = 1 and beta = 0 exactly c_i A_i.
#ifndef GRPOLAB_OBJECTIVE_H
#define GRPOLAB_OBJECTIVE_H

#include <math.h>
#include <stddef.h>

#include "config.h"

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

typedef struct ObjectiveConfig {  // named: kernels.h declares it as struct ObjectiveConfig
    char preset[16];       // grpo | dr_grpo | dapo | rloo (the defaults the knobs start from)
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

// The [objective] section: preset, then each knob the config sets explicitly. l_max "0"
// means the sampler's budget max_new_tokens. -1 with a message naming the key on error.
int objective_from_config(const Config *c, int max_new_tokens, ObjectiveConfig *out, char *err,
                          size_t errlen);
// Defaults of a preset; -1 if the name is unknown.
int objective_preset(const char *name, int max_new_tokens, ObjectiveConfig *out);
const char *baseline_name(Baseline b);
const char *scale_name(Scale s);
const char *aggregation_name(Aggregation a);

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

// ---- batch-level (host)

// Advantages of a rollout batch: rewards (P*G), grouped by prompt (group g = responses
// g*G .. g*G+G-1) -> adv (P*G), group_advantages per group. group_std (P) and group_mean (P),
// if not NULL, receive each group's reward statistics (std with the config's ddof).
// The CPU reference of kn_group_advantages (kernels.h), which runs this on either backend.
void compute_advantages(const ObjectiveConfig *oc, const float *rewards, int P, int G,
                        float *adv, float *group_mean, float *group_std);

#endif
