// objective.h: the RL objectives (GRPO, Dr. GRPO, DAPO token-level, RLOO) as independent
// knobs (ObjectiveConfig), and every formula of them in exactly one place. The per-group,
// per-response and per-token formulas are static inline functions marked for host and device
// (OBJ_HD): the CPU and CUDA ops kn_group_advantages and kn_token_weights (kernels.h) both
// call them, so the CUDA backend runs the same arithmetic the CPU tests check. The notation
// and the table of formulas are in docs/kernels.md ("RL objective"); the presets and the
// [objective] config section are sim/rl/objective.h's.
#ifndef GRPOLAB_KERNELS_OBJECTIVE_H
#define GRPOLAB_KERNELS_OBJECTIVE_H

#include <math.h>
#include <stddef.h>

#ifdef __CUDACC__
#define OBJ_HD static inline __host__ __device__
#else
#define OBJ_HD static inline
#endif

typedef enum {
    BASELINE_GROUP_MEAN = 0,       // b = mean_j r_j
    BASELINE_LEAVE_ONE_OUT = 1,    // b_i = mean_{j != i} r_j (RLOO)
    BASELINE_LENGTH_WEIGHTED = 2,  // b = sum_j |o_j| r_j / sum_j |o_j| (OPO)
    BASELINE_GREEDY = 3,           // b = reward of the prompt's greedy response (ReMax)
    BASELINE_MAX_LOO = 4,          // b_i = min(r_i, max_{j != i} r_j): only a group's strict best
                                   // response gets r_max - r_second, every other 0 (pass@k)
} Baseline;
typedef enum {
    SCALE_GROUP_STD = 0,    // s = std of the group's rewards
    SCALE_BATCH_STD = 1,    // s = std of the batch's rewards (Lite PPO)
    SCALE_NONE = 2,         // s = 1
    SCALE_BATCH_WHITEN = 3, // (r - b - mean_batch(r - b)) / std_batch(r - b) (REINFORCE++-baseline)
} Scale;
typedef enum {
    AGG_SEQ_MEAN_TOKEN_MEAN = 0,      // grpo
    AGG_SEQ_MEAN_TOKEN_SUM_NORM = 1,  // dr_grpo
    AGG_TOKEN_MEAN = 2,               // dapo
    AGG_SEQ_MEAN_TOKEN_SUM = 3,       // rloo
    AGG_TOKEN_SUM = 4,                // c = 1: the plain sum over every token
} Aggregation;
// Where the ratio rho of a token's weight comes from.
typedef enum {
    RATIO_TOKEN = 0,     // rho_t = pi/pi_old of the token (PPO, GRPO)
    RATIO_SEQUENCE = 1,  // s_i = exp(mean_t log rho_t), one per response (GSPO)
    RATIO_GEO_MEAN = 2,  // R_i = exp(mean_t clip(log rho_t)): geometric mean, clip in log space (GMPO)
    RATIO_NONE = 3,      // no ratio: w = c A (plain policy gradient, GPG)
} RatioLevel;
// How the ratio enters the weight (ratio token or sequence; geo_mean has its log-space clip
// (ppo) or none; ratio none takes none).
typedef enum {
    CLIP_PPO = 0,    // -min(rho A, clip(rho) A): no gradient where the clip binds
    CLIP_CISPO = 1,  // -sg(clip(rho)) A log pi: clipped tokens keep a gradient (CISPO)
    CLIP_SAPO = 2,   // -(4/tau) sigmoid(tau (rho - 1)) A, tau_pos for A > 0, tau_neg else (SAPO)
    CLIP_NONE = 3,   // -rho A: unclipped importance weight
} ClipStyle;
// The token count a token_mean divides by (the caller passes it to kn_token_weights as sum_len).
typedef enum {
    SCOPE_GLOBAL = 0,      // every token of the optimizer step's minibatch (all ranks')
    SCOPE_MICRO_BATCH = 1, // the forward pass's tokens times the number of passes (TRL's bnpo)
} TokenMeanScope;

// The knobs of one objective, resolved (sim/rl/objective.h makes them from a preset and a config).
typedef struct ObjectiveConfig {  // named: kernels.h declares it as struct ObjectiveConfig
    char preset[24];       // name of the preset the knobs started from (for logs and messages)
    Baseline baseline;
    Scale scale;
    int std_ddof;          // 0 or 1
    float std_eps;         // added to the std
    Aggregation aggregation;
    int l_max;             // seq_mean_token_sum_norm's constant
    float eps_low, eps_high;  // clip range [1-eps_low, 1+eps_high] (geo_mean: [-eps_low, eps_high] of log rho)
    float beta;            // KL coefficient (0: no reference model)
    int dynamic_sampling;  // DAPO: drop groups whose rewards are all equal
    RatioLevel ratio;
    ClipStyle clip;
    float tau_pos, tau_neg;  // SAPO's gate temperatures
    TokenMeanScope scope;    // token_mean's normaliser
    float clip_ratio_c;      // dual clip (verl's clip_ratio_c; Ye et al. 2019, arXiv 1912.09729):
                             // > 1 holds a token with A < 0 and rho > clip_ratio_c at it; 0: off
} ObjectiveConfig;

// ---- per-response and per-token formulas (host and device)

// Aggregation coefficient c_i of a response of length len_i in a minibatch of M responses
// whose lengths sum to sum_len.
OBJ_HD float aggregation_coef(Aggregation agg, int M, int len_i, double sum_len, int l_max) {
    switch (agg) {
        case AGG_SEQ_MEAN_TOKEN_MEAN: return 1.0f / ((float)M * (float)len_i);
        case AGG_SEQ_MEAN_TOKEN_SUM_NORM: return 1.0f / ((float)M * (float)l_max);
        case AGG_TOKEN_MEAN: return (float)(1.0 / sum_len);
        case AGG_TOKEN_SUM: return 1.0f;
        case AGG_SEQ_MEAN_TOKEN_SUM: default: return 1.0f / (float)M;
    }
}

// 1 if the dual clip (dual_c > 1; 0: off) holds this token at dual_c: A < 0 and rho > dual_c.
OBJ_HD int dual_clipped(float advantage, float ratio, float dual_c) {
    return dual_c > 0.0f && advantage < 0.0f && ratio > dual_c;
}

// 1 if PPO's clip binds for this token (its gradient through the ratio is zero), the dual
// clip's bound included.
OBJ_HD int ppo_clipped(float advantage, float ratio, float eps_low, float eps_high, float dual_c) {
    return (advantage > 0.0f && ratio > 1.0f + eps_high) ||
           (advantage < 0.0f && ratio < 1.0f - eps_low) || dual_clipped(advantage, ratio, dual_c);
}

// PPO's policy loss of a token (before c_i) at ratio rho: -min(rho A, clip(rho) A), and with
// the dual clip for A < 0 at most -dual_c A.
OBJ_HD float ppo_policy_loss(float advantage, float ratio, float eps_low, float eps_high, float dual_c) {
    float clipped = fminf(fmaxf(ratio, 1.0f - eps_low), 1.0f + eps_high);
    float l = -fminf(ratio * advantage, clipped * advantage);
    return dual_c > 0.0f && advantage < 0.0f ? fminf(l, -dual_c * advantage) : l;
}

// KL_k3 = exp(lr) - lr - 1, lr = log pi_ref - log pi_theta, of one token (>= 0; 0 at pi_ref = pi_theta).
OBJ_HD float kl_k3(float logp, float logp_ref) {
    float lr = logp_ref - logp;
    return expf(lr) - lr - 1.0f;
}

// Per-token loss l_{i,t} (before the coefficient c_i).
OBJ_HD float ppo_token_loss(float advantage, float logp, float logp_old, float logp_ref,
                            float eps_low, float eps_high, float dual_c, float beta) {
    float l = ppo_policy_loss(advantage, expf(logp - logp_old), eps_low, eps_high, dual_c);
    if (beta != 0.0f) l += beta * kl_k3(logp, logp_ref);
    return l;
}

// Token weight w_{i,t} = -dL/dlog pi_theta = c_i (A rho [not clipped] - beta (1 - exp(lr)))
// (ppo_clipped: the dual clip's bound included).
OBJ_HD float ppo_token_weight(float coef, float advantage, float logp, float logp_old,
                              float logp_ref, float eps_low, float eps_high, float dual_c,
                              float beta) {
    float ratio = expf(logp - logp_old);
    float w = ppo_clipped(advantage, ratio, eps_low, eps_high, dual_c) ? 0.0f : advantage * ratio;
    if (beta != 0.0f) w -= beta * (1.0f - expf(logp_ref - logp));
    return coef * w;
}

// ---- the other ratio levels and clip styles (host and device)
//
// A token's weight is w = c_i (g - beta (1 - exp(lr))), g = -dl/dlog pi of the policy term l
// (kl_k3 as above). With ratio token, rho is the token's pi/pi_old; with ratio sequence, rho
// is the response's s_i = exp(mean_t log rho_t) and its derivative by the token's log pi is
// taken as s_i (GSPO's gradient s_i A (1/|o_i|) sum_t grad log pi, the 1/|o_i| being the
// aggregation's; verl's compute_policy_loss_gspo). The same clip styles apply to either.

// 1 if the sequence reduction (sequence_log_ratio_term) is needed before the weights.
OBJ_HD int ratio_is_sequence_level(const ObjectiveConfig *oc) {
    return oc->ratio == RATIO_SEQUENCE || oc->ratio == RATIO_GEO_MEAN;
}

// GMPO's clip of a token's log-ratio lr in log space: bound where it lowers the objective's
// value (A > 0: lr > eps_high; A < 0: lr < -eps_low) and so stops the token's gradient.
OBJ_HD int geo_clipped(float advantage, float lr, float eps_low, float eps_high) {
    return (advantage > 0.0f && lr > eps_high) || (advantage < 0.0f && lr < -eps_low);
}

// A policy token's term of its response's sequence log-ratio, whose mean over the response's
// policy tokens is log s_i (sequence: lr) or log R_i (geo_mean: lr held at its bound where
// geo_clipped, with clip ppo).
OBJ_HD float sequence_log_ratio_term(const ObjectiveConfig *oc, float advantage, float logp,
                                     float logp_old) {
    float lr = logp - logp_old;
    if (oc->ratio == RATIO_GEO_MEAN && oc->clip == CLIP_PPO &&
        geo_clipped(advantage, lr, oc->eps_low, oc->eps_high))
        return advantage > 0.0f ? oc->eps_high : -oc->eps_low;
    return lr;
}

// -1 / +1 if the token's ratio is held at the lower / upper bound of its clip (its gradient
// through the ratio changes: none for ppo and geo_mean, a constant weight for cispo), else 0.
// seq_lr: the response's mean sequence_log_ratio_term (read with ratio sequence).
OBJ_HD int token_clip_side(const ObjectiveConfig *oc, float advantage, float logp, float logp_old,
                           float seq_lr) {
    float lr = logp - logp_old;
    float rho = expf(oc->ratio == RATIO_SEQUENCE ? seq_lr : lr);
    switch (oc->ratio == RATIO_NONE ? CLIP_NONE : oc->clip) {
        case CLIP_PPO:
            if (oc->ratio == RATIO_GEO_MEAN)
                return geo_clipped(advantage, lr, oc->eps_low, oc->eps_high) ? (advantage < 0.0f ? -1 : 1) : 0;
            if (dual_clipped(advantage, rho, oc->clip_ratio_c)) return 1;  // held at dual_c, above
            return ppo_clipped(advantage, rho, oc->eps_low, oc->eps_high, 0.0f) ? (advantage < 0.0f ? -1 : 1) : 0;
        case CLIP_CISPO:
            return rho < 1.0f - oc->eps_low ? -1 : rho > 1.0f + oc->eps_high ? 1 : 0;
        default: return 0;
    }
}

// SAPO's gate sigmoid(tau (rho - 1)) with tau by the advantage's sign.
OBJ_HD float sapo_sigmoid(const ObjectiveConfig *oc, float advantage, float rho, float *tau) {
    *tau = advantage > 0.0f ? oc->tau_pos : oc->tau_neg;
    return 1.0f / (1.0f + expf(-*tau * (rho - 1.0f)));
}

// The policy term of a token: its loss l (before c_i) into *loss, and g = -dl/dlog pi returned.
// seq_lr: the response's mean sequence_log_ratio_term (ratio sequence or geo_mean).
OBJ_HD float policy_term(const ObjectiveConfig *oc, float advantage, float logp, float logp_old,
                         float seq_lr, float *loss) {
    float A = advantage, lr = logp - logp_old;
    if (oc->ratio == RATIO_NONE) {  // -A log pi
        *loss = -A * logp;
        return A;
    }
    if (oc->ratio == RATIO_GEO_MEAN) {  // -A R_i on every token; R_i's gradient by the token's log pi
        float R = expf(seq_lr);
        *loss = -A * R;
        return token_clip_side(oc, A, logp, logp_old, seq_lr) ? 0.0f : A * R;
    }
    float rho = expf(oc->ratio == RATIO_SEQUENCE ? seq_lr : lr);
    float lo = 1.0f - oc->eps_low, hi = 1.0f + oc->eps_high;
    float clipped = fminf(fmaxf(rho, lo), hi);
    switch (oc->clip) {
        case CLIP_PPO:
            *loss = ppo_policy_loss(A, rho, oc->eps_low, oc->eps_high, oc->clip_ratio_c);
            return ppo_clipped(A, rho, oc->eps_low, oc->eps_high, oc->clip_ratio_c) ? 0.0f : A * rho;
        case CLIP_CISPO:
            *loss = -clipped * A * logp;
            return clipped * A;
        case CLIP_SAPO: {
            float tau, sg = sapo_sigmoid(oc, A, rho, &tau);
            *loss = -(4.0f / tau) * sg * A;
            return 4.0f * sg * (1.0f - sg) * rho * A;
        }
        case CLIP_NONE: default:
            *loss = -rho * A;
            return rho * A;
    }
}

// Token weight w = -dL/dlog pi and loss l (before c_i) of any objective: the PPO formulas above
// for ratio token with clip ppo, policy_term's otherwise, the KL term added to both.
OBJ_HD float objective_token_weight(const ObjectiveConfig *oc, float coef, float advantage,
                                    float logp, float logp_old, float logp_ref, float seq_lr,
                                    float *loss) {
    if (oc->ratio == RATIO_TOKEN && oc->clip == CLIP_PPO) {
        *loss = ppo_token_loss(advantage, logp, logp_old, logp_ref, oc->eps_low, oc->eps_high,
                               oc->clip_ratio_c, oc->beta);
        return ppo_token_weight(coef, advantage, logp, logp_old, logp_ref, oc->eps_low, oc->eps_high,
                                oc->clip_ratio_c, oc->beta);
    }
    float l, w = policy_term(oc, advantage, logp, logp_old, seq_lr, &l);
    if (oc->beta != 0.0f) {
        l += oc->beta * kl_k3(logp, logp_ref);
        w -= oc->beta * (1.0f - expf(logp_ref - logp));
    }
    *loss = l;
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

// The baseline b_i of response i of a group (r, lengths len, G; sum and mean of r; greedy: the
// reward of the prompt's greedy response).
OBJ_HD double group_baseline(const ObjectiveConfig *oc, const float *r, const int *len, int G,
                             double sum, double mean, float greedy, int i) {
    switch (oc->baseline) {
        case BASELINE_LEAVE_ONE_OUT: return (sum - r[i]) / (G - 1);
        case BASELINE_LENGTH_WEIGHTED: {
            double lr = 0, l = 0;
            for (int j = 0; j < G; j++) {
                lr += (double)len[j] * r[j];
                l += len[j];
            }
            return l > 0 ? lr / l : mean;
        }
        case BASELINE_GREEDY: return greedy;
        case BASELINE_MAX_LOO: {  // min(r_i, max_{j != i} r_j): r_i - b_i = max(0, r_i - max_{j != i} r_j)
            double b = -INFINITY;
            for (int j = 0; j < G; j++)
                if (j != i && r[j] > b) b = r[j];
            return r[i] < b ? r[i] : b;
        }
        case BASELINE_GROUP_MEAN: default: return mean;
    }
}

// 1 if the group's advantages are exactly 0 because its rewards are all equal (every baseline
// but greedy, which compares with a response outside the group).
OBJ_HD int group_no_signal(const ObjectiveConfig *oc, const float *r, int G) {
    if (oc->baseline == BASELINE_GREEDY) return 0;
    int all_equal = 1;
    for (int i = 1; i < G; i++) all_equal &= r[i] == r[0];
    return all_equal;
}

// r_i - b_i of response i of group g of the batch r, len (P*G; len may be NULL), greedy (P)
// or NULL: 0 in a group without signal (group_no_signal).
OBJ_HD double centered_reward(const ObjectiveConfig *oc, const float *r, const int *len,
                              const float *greedy, int G, int g, int i) {
    const float *rg = r + (size_t)g * G;
    if (group_no_signal(oc, rg, G)) return 0.0;
    double sum = 0;
    for (int j = 0; j < G; j++) sum += rg[j];
    return rg[i] - group_baseline(oc, rg, len ? len + (size_t)g * G : NULL, G, sum, sum / G,
                                  greedy ? greedy[g] : 0.0f, i);
}

// The batch statistics batch_whiten reads: mean and std (ddof as configured) of r_i - b_i
// (centered_reward) over the P groups of G, the all-equal groups' zeros included.
OBJ_HD void batch_centered_stats(const ObjectiveConfig *oc, const float *r, const int *len,
                                 const float *greedy, int P, int G, double *mean_out,
                                 double *std_out) {
    int n = P * G;
    double mean = 0, ss = 0;
    for (int k = 0; k < n; k++) mean += centered_reward(oc, r, len, greedy, G, k / G, k % G);
    mean /= n;
    for (int k = 0; k < n; k++) {
        double d = centered_reward(oc, r, len, greedy, G, k / G, k % G) - mean;
        ss += d * d;
    }
    *mean_out = mean;
    *std_out = n - oc->std_ddof >= 1 ? sqrt(ss / (double)(n - oc->std_ddof)) : 0.0;
}

// Advantages A_i = (r_i - b_i) / s_i of one group: rewards r (G) -> adv (G). len (G): the
// responses' lengths (read only by the length_weighted baseline), greedy: the greedy
// response's reward (read only by the greedy baseline). batch_std: the std of the whole
// rollout batch's rewards (read only with SCALE_BATCH_STD); batch_mean and batch_std of
// r - b over the batch (batch_centered_stats) with SCALE_BATCH_WHITEN. A group with
// all-equal rewards gets exactly 0 (no NaN) unless the baseline is greedy. The group's reward
// mean and std (with the config's ddof) go to *mean_out and *std_out if not NULL.
OBJ_HD void group_advantages(const ObjectiveConfig *oc, const float *r, const int *len, int G,
                             float greedy, double batch_mean, double batch_std, float *adv,
                             float *mean_out, float *std_out) {
    double sum = 0;
    for (int i = 0; i < G; i++) sum += r[i];
    double mean = sum / G, std = reward_std(r, G, oc->std_ddof);
    int no_signal = group_no_signal(oc, r, G);
    if (mean_out) *mean_out = (float)mean;
    if (std_out) *std_out = (float)std;
    for (int i = 0; i < G; i++) {
        if (no_signal) {  // no signal: exactly zero under every baseline and scale
            adv[i] = 0.0f;
            continue;
        }
        // baseline b_i
        double b = group_baseline(oc, r, len, G, sum, mean, greedy, i);
        if (oc->scale == SCALE_BATCH_WHITEN) {
            adv[i] = (float)((r[i] - b - batch_mean) / (batch_std + oc->std_eps));
            continue;
        }
        // scale s_i
        double s = oc->scale == SCALE_GROUP_STD   ? std + oc->std_eps
                   : oc->scale == SCALE_BATCH_STD ? batch_std + oc->std_eps
                                                  : 1.0;
        adv[i] = (float)((r[i] - b) / s);
    }
}

#endif
