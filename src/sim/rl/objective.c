// objective.c: the table of presets, what each one is (formulas, sources, the settings of other
// frameworks) and the [objective] config section (objective.h).
#include "objective.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../../common.h"

static const char *const BASELINE_NAMES[] = {"group_mean", "leave_one_out", "length_weighted",
                                             "greedy", "max_loo"};
static const char *const SCALE_NAMES[] = {"group_std", "batch_std", "none", "batch_whiten"};
static const char *const AGG_NAMES[] = {"seq_mean_token_mean", "seq_mean_token_sum_norm",
                                        "token_mean", "seq_mean_token_sum", "token_sum"};
static const char *const RATIO_NAMES[] = {"token", "sequence", "geo_mean", "none"};
static const char *const CLIP_NAMES[] = {"ppo", "cispo", "sapo", "none"};
static const char *const SCOPE_NAMES[] = {"global", "micro_batch"};
#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))

const char *baseline_name(Baseline b) { return BASELINE_NAMES[b]; }
const char *scale_name(Scale s) { return SCALE_NAMES[s]; }
const char *aggregation_name(Aggregation a) { return AGG_NAMES[a]; }
const char *ratio_name(RatioLevel r) { return RATIO_NAMES[r]; }
const char *clip_name(ClipStyle c) { return CLIP_NAMES[c]; }
const char *scope_name(TokenMeanScope s) { return SCOPE_NAMES[s]; }

static int find_name(const char *const *names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

// The presets: every knob's default, one row each (docs/objectives.md, generated from this
// table by `grpolab objective --markdown`). std_ddof 1 is what the paper's code (oat), TRL and
// verl use; l_max 0 is the sampler's budget; tau_pos/tau_neg are SAPO's defaults and read
// only by clip sapo.
#define P(name, base, scale, agg, eps_lo, eps_hi, ratio, clip, scope)                            \
    {name, base, scale, 1, 1e-6f, agg, 0, eps_lo, eps_hi, 0.0f, 0, ratio, clip, 1.0f, 1.05f, scope, 0.0f}
static const ObjectiveConfig PRESETS[] = {
    // name, baseline, scale, aggregation, eps_low, eps_high, ratio, clip, token-mean scope
    P("grpo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_SEQ_MEAN_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL),
    P("dr_grpo", BASELINE_GROUP_MEAN, SCALE_NONE, AGG_SEQ_MEAN_TOKEN_SUM_NORM, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL),
    P("dapo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_TOKEN_MEAN, 0.2f, 0.28f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL),
    P("rloo", BASELINE_LEAVE_ONE_OUT, SCALE_NONE, AGG_SEQ_MEAN_TOKEN_SUM, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL),
    P("bnpo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_MICRO_BATCH),
    P("lite_ppo", BASELINE_GROUP_MEAN, SCALE_BATCH_STD, AGG_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL),
    P("gspo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_SEQ_MEAN_TOKEN_MEAN, 3e-4f, 4e-4f, RATIO_SEQUENCE, CLIP_PPO, SCOPE_GLOBAL),
    P("gmpo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_SEQ_MEAN_TOKEN_MEAN, 0.4f, 0.4f, RATIO_GEO_MEAN, CLIP_PPO, SCOPE_GLOBAL),
    P("cispo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_TOKEN_MEAN, 1.0f, 4.0f, RATIO_TOKEN, CLIP_CISPO, SCOPE_GLOBAL),
    P("sapo", BASELINE_GROUP_MEAN, SCALE_GROUP_STD, AGG_SEQ_MEAN_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_SAPO, SCOPE_GLOBAL),
    P("reinforce_pp_baseline", BASELINE_GROUP_MEAN, SCALE_BATCH_WHITEN, AGG_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL),
    P("remax", BASELINE_GREEDY, SCALE_NONE, AGG_SEQ_MEAN_TOKEN_SUM, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL),
    P("opo", BASELINE_LENGTH_WEIGHTED, SCALE_NONE, AGG_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL),
    P("gpg", BASELINE_GROUP_MEAN, SCALE_NONE, AGG_TOKEN_MEAN, 0.2f, 0.2f, RATIO_NONE, CLIP_NONE, SCOPE_GLOBAL),
    P("grpo_passk", BASELINE_MAX_LOO, SCALE_GROUP_STD, AGG_SEQ_MEAN_TOKEN_MEAN, 0.2f, 0.2f, RATIO_TOKEN, CLIP_PPO, SCOPE_GLOBAL),
};
#undef P
#define N_PRESETS COUNT(PRESETS)

// What each preset is, in the order of PRESETS: the paper, the advantage and the token weight
// in its notation (rho = pi_theta/pi_old of a token, s_i GSPO's sequence ratio, c_i the
// aggregation coefficient, [.] 1 where the clip does not bind), and the settings of other
// frameworks that give the same objective ("none" where none does, with the reason).
// verl's vanilla policy loss applies its dual clip (clip_ratio_c 3.0 by default).
#define VERL_DUAL "; dual clip: --set objective.clip_ratio_c=3 (verl's default), or actor.clip_ratio_c=1e9 in verl"
// TRL divides by std + 1e-4 (grpo_trainer.py), grpolab by std + std_eps.
#define TRL_EPS "; std + 1e-4: --set objective.std_eps=1e-4"
#define ORLHF_EPS "; std + 1e-9: --set objective.std_eps=1e-9"
static const ObjectiveInfo INFO[] = {
    {"grpo", "GRPO: Shao et al. 2024, DeepSeekMath (arXiv 2402.03300)",
     "A_i = (r_i - mean(r)) / (std(r) + eps)",
     "w = A_i rho [not clipped] / (M |o_i|)",
     "loss_type=\"grpo\", scale_rewards=\"group\"" TRL_EPS,
     "adv_estimator=grpo, loss_agg_mode=seq-mean-token-mean" VERL_DUAL,
     "--algo.advantage.estimator group_norm --actor.loss_agg_mode seq-mean-token-mean "
     "--algo.kl.init_coef 0" ORLHF_EPS,
     "critic_type=grpo, beta=0 (per-response token mean; std eps 1e-8)"},
    {"dr_grpo", "Dr. GRPO: Liu et al. 2025, Understanding R1-Zero-Like Training (arXiv 2503.20783)",
     "A_i = r_i - mean(r)",
     "w = A_i rho [not clipped] / (M L_max)",
     "loss_type=\"dr_grpo\", scale_rewards=\"none\" (L_max = max_completion_length)",
     "adv_estimator=grpo, norm_adv_by_std_in_grpo=False, loss_agg_mode=seq-mean-token-sum-norm, "
     "loss_scale_factor=L_max" VERL_DUAL " (before verl 0.9 this mode lacked the 1/M)",
     "none: --algo.advantage.estimator dr_grpo gives A_i = r_i - mean(r), but the loss divides by "
     "the optimizer step's token count, not M L_max (same direction, a per-step scale)",
     "critic_type=drgrpo, beta=0 (token sum / generate_max_length = L_max)"},
    {"dapo", "DAPO: Yu et al. 2025 (arXiv 2503.14476), token-level loss and clip-higher",
     "A_i = (r_i - mean(r)) / (std(r) + eps)",
     "w = A_i rho [not clipped, 1-0.2 <= rho <= 1+0.28] / sum_j |o_j|",
     "loss_type=\"dapo\", epsilon=0.2, epsilon_high=0.28" TRL_EPS,
     "adv_estimator=grpo, loss_agg_mode=token-mean, clip_ratio_low=0.2, clip_ratio_high=0.28" VERL_DUAL,
     "--algo.advantage.estimator group_norm --actor.eps_clip_low_high 0.2 0.28 "
     "--algo.kl.init_coef 0 (token-mean over the optimizer step)" ORLHF_EPS,
     "none: one symmetric cliprange and no token-mean over the batch"},
    {"rloo", "RLOO: Ahmadian et al. 2024, Back to Basics (arXiv 2402.14740)",
     "A_i = r_i - mean_{j != i} r_j",
     "w = A_i rho [not clipped] / M",
     "RLOOTrainer, beta=0.0: the same gradient on-policy (A_i, normalize_advantages False by "
     "default, the mean over responses of the log-prob sum); off-policy it clips the sequence ratio "
     "exp(sum_t log rho_t), grpolab each token's, and it has no environment-token mask; its default "
     "beta=0.05 adds a KL term",
     "adv_estimator=rloo, loss_agg_mode=seq-mean-token-sum" VERL_DUAL,
     "none: --algo.advantage.estimator rloo gives A_i, but the loss is a token-mean over the "
     "optimizer step, not a per-response token sum",
     "none: no leave-one-out baseline "
     "(critic_type=drgrpo is RLOO's gradient times (G-1)/(G L_max))"},
    {"bnpo", "TRL's bnpo loss: a token-mean over the local (micro-)batch, averaged over the accumulation steps",
     "A_i = (r_i - mean(r)) / (std(r) + eps)",
     "w = A_i rho [not clipped] / (K sum_{j in micro-batch} |o_j|), K micro-batches",
     "loss_type=\"bnpo\" (per_device_train_batch_size = train.micro_batch)" TRL_EPS,
     "none: verl's token-mean divides by the global batch's tokens",
     "none: the token-mean divides by the whole optimizer step's tokens "
     "(iter_grad_accum_global_norm), not each micro-batch's",
     "none: no token-mean over a batch"},
    {"lite_ppo", "Lite PPO: Liu et al. 2025, Tricks or Traps? Part I (arXiv 2508.08221)",
     "A_i = (r_i - mean(r)) / (std_batch(r) + eps)",
     "w = A_i rho [not clipped] / sum_j |o_j|",
     "loss_type=\"dapo\", scale_rewards=\"batch\"" TRL_EPS,
     "none: verl's grpo estimator has no batch-level std",
     "none: no batch std of group-centred rewards "
     "(reinforce_baseline also subtracts the batch mean, over tokens)",
     "none: no batch std (whiten_adv only with critic_type=ppo)"},
    {"gspo", "GSPO: Zheng et al. 2025, Group Sequence Policy Optimization (arXiv 2507.18071)",
     "A_i = (r_i - mean(r)) / (std(r) + eps)",
     "w = A_i s_i [s_i not clipped] / (M |o_i|), s_i = exp(mean_t log rho_t), clip 1-3e-4 .. 1+4e-4",
     "importance_sampling_level=\"sequence\", loss_type=\"grpo\", epsilon=3e-4, epsilon_high=4e-4" TRL_EPS,
     "policy_loss.loss_mode=gspo, loss_agg_mode=seq-mean-token-mean, clip_ratio_low=3e-4, clip_ratio_high=4e-4",
     "--actor.policy_loss_type gspo --algo.advantage.estimator group_norm "
     "--actor.eps_clip_low_high 3e-4 4e-4 --algo.kl.init_coef 0 "
     "(gspo forces the per-response mean)" ORLHF_EPS,
     "none: token ratio only"},
    {"gmpo", "GMPO: Zhao et al. 2025, Geometric-Mean Policy Optimization (arXiv 2507.20673)",
     "A_i = (r_i - mean(r)) / (std(r) + eps)",
     "w = A_i R_i [log rho_t not clipped] / (M |o_i|), R_i = exp(mean_t clip(log rho_t, -0.4, 0.4))",
     "trl.experimental.gmpo GMPOConfig(epsilon=0.4)" TRL_EPS,
     "policy_loss.loss_mode=geo_mean, clip_ratio_low=0.4, clip_ratio_high=0.4, one micro-batch per GPU "
     "(ppo_micro_batch_size_per_gpu = the mini-batch per GPU: compute_policy_loss_geo_mean takes the "
     "micro-batch's mean and skips agg_loss, so K micro-batches give K times the gradient)",
     "none: policy_loss_type is ppo or gspo; no per-token log-space clip",
     "none: token ratio with the PPO clip only"},
    {"cispo", "CISPO: MiniMax-M1 (arXiv 2506.13585); eps_max 5 from ScaleRL (arXiv 2510.13786)",
     "A_i = (r_i - mean(r)) / (std(r) + eps)",
     "w = A_i min(rho, 5) / sum_j |o_j| (a stop-gradient weight: clipped tokens keep it)",
     "loss_type=\"cispo\", epsilon_high=5.0, scale_rewards=\"group\"" TRL_EPS,
     "policy_loss.loss_mode=cispo, clip_ratio_low=1.0, clip_ratio_high=4.0, loss_agg_mode=token-mean",
     "none: policy_loss_type is ppo or gspo",
     "none: PPO clip only"},
    {"sapo", "SAPO: Gao et al. 2025, Soft Adaptive Policy Optimization (arXiv 2511.20347)",
     "A_i = (r_i - mean(r)) / (std(r) + eps)",
     "w = A_i 4 g (1 - g) rho / (M |o_i|), g = sigmoid(tau (rho - 1)), tau = 1 (A > 0) or 1.05",
     "loss_type=\"sapo\", sapo_temperature_pos=1.0, sapo_temperature_neg=1.05" TRL_EPS,
     "policy_loss.loss_mode=sapo, tau_pos=1.0, tau_neg=1.05",
     "none: policy_loss_type is ppo or gspo",
     "none: PPO clip only"},
    {"reinforce_pp_baseline", "REINFORCE++-baseline: Hu et al. 2025 (arXiv 2501.03262)",
     "A_i = (d_i - mean_batch(d)) / (std_batch(d) + eps), d_i = r_i - mean(r)",
     "w = A_i rho [not clipped] / sum_j |o_j|",
     "none: TRL has no batch whitening after the group mean",
     "adv_estimator=reinforce_plus_plus_baseline, loss_agg_mode=token-mean" VERL_DUAL " (whitens over tokens)",
     "--algo.advantage.estimator reinforce_baseline --algo.kl.init_coef 0 (whitens over tokens; "
     "token-mean over the optimizer step)",
     "none: whiten_adv applies only to critic_type=ppo's GAE advantages"},
    {"remax", "ReMax: Li et al. 2024 (arXiv 2310.10505)",
     "A_i = r_i - r(greedy response to the prompt)",
     "w = A_i rho [not clipped] / M",
     "none: TRL makes no greedy rollout",
     "adv_estimator=remax, loss_agg_mode=seq-mean-token-sum" VERL_DUAL,
     "none: no greedy-rollout baseline",
     "none: no greedy-rollout baseline"},
    {"opo", "OPO: Hao et al. 2025, On-Policy RL with Optimal Reward Baseline (arXiv 2505.23585)",
     "A_i = r_i - sum_j |o_j| r_j / sum_j |o_j|",
     "w = A_i rho [not clipped] / sum_j |o_j| (on-policy: rho = 1 with one minibatch per step)",
     "none: TRL has no length-weighted baseline",
     "adv_estimator=opo, loss_agg_mode=token-mean, ppo_mini_batch_size=train_batch_size" VERL_DUAL,
     "none: no length-weighted baseline",
     "none: no length-weighted baseline"},
    {"gpg", "GPG: Chu et al. 2025, Group Policy Gradient (arXiv 2504.02546)",
     "A_i = r_i - mean(r) (GPG's batch factor alpha not applied)",
     "w = A_i / sum_j |o_j| (no ratio, no clip: -A log pi)",
     "none: TRL's losses all use the ratio",
     "adv_estimator=gpg, policy_loss.loss_mode=gpg, loss_agg_mode=token-mean (with alpha)",
     "none: PolicyLoss always takes the clipped ratio (policy_loss_type ppo or gspo)",
     "none: reinforce_update=True, critic_type=drgrpo gives -A log pi "
     "but weights A_i / (M L_max), not A_i / sum_j |o_j|"},
    {"grpo_passk", "pass@k advantage: Tang et al. 2025 (arXiv 2503.19595), max@k with a leave-one-out baseline",
     "A_i = (r_i - max_{j != i} r_j) / (std(r) + eps) for the group's strict best response, 0 for "
     "the others (all 0 on a tie at the best)",
     "w = A_i rho [not clipped] / (M |o_i|)",
     "none: no pass@k advantage",
     "adv_estimator=grpo_passk, loss_agg_mode=seq-mean-token-mean" VERL_DUAL,
     "none: no pass@k advantage",
     "none: no pass@k advantage"},
};

const char OBJECTIVE_MAP_READ_AT[] = "TRL 1.16.0, verl 0.9.1, OpenRLHF 0.11.2 (PyPI releases, checked by "
                                     "`make conformance`); oat at commit c1a074c";

int objective_preset_count(void) { return N_PRESETS; }

const ObjectiveInfo *objective_preset_info(int i, ObjectiveConfig *knobs) {
    if (i < 0 || i >= N_PRESETS) return NULL;
    if (knobs) *knobs = PRESETS[i];
    return &INFO[i];
}

int objective_preset(const char *name, int max_new_tokens, ObjectiveConfig *o) {
    for (int i = 0; i < N_PRESETS; i++) {
        if (strcmp(PRESETS[i].preset, name) != 0) continue;
        *o = PRESETS[i];
        if (o->l_max == 0) o->l_max = max_new_tokens;
        return 0;
    }
    return -1;
}

int objective_check(const ObjectiveConfig *o, char *err, size_t errlen) {
    if (o->l_max < 1)
        return set_err(err, errlen, "objective.l_max = %d: must be >= 1 (0 = the sampler's budget)", o->l_max);
    if (o->ratio == RATIO_NONE && o->clip != CLIP_NONE)
        return set_err(err, errlen, "objective.ratio = none with objective.clip = %s: without a ratio "
                       "there is nothing to clip (set objective.clip = none)", clip_name(o->clip));
    if (o->ratio == RATIO_GEO_MEAN && (o->clip == CLIP_CISPO || o->clip == CLIP_SAPO))
        return set_err(err, errlen, "objective.ratio = geo_mean with objective.clip = %s: the geometric "
                       "mean has its own log-space clip (clip = ppo) or none", clip_name(o->clip));
    if (o->clip_ratio_c != 0 && !(o->clip_ratio_c > 1))
        return set_err(err, errlen, "objective.clip_ratio_c = %g: the dual clip's bound must be > 1 "
                       "(0 = off)", o->clip_ratio_c);
    if (o->clip_ratio_c != 0 && (o->clip != CLIP_PPO || o->ratio == RATIO_GEO_MEAN))
        return set_err(err, errlen, "objective.clip_ratio_c = %g with objective.ratio = %s, clip = %s: the "
                       "dual clip bounds PPO's clip (ratio token or sequence, clip ppo); set it to 0",
                       o->clip_ratio_c, ratio_name(o->ratio), clip_name(o->clip));
    if (o->clip == CLIP_SAPO && !(o->tau_pos > 0 && o->tau_neg > 0))
        return set_err(err, errlen, "objective.tau_pos = %g, tau_neg = %g: SAPO's temperatures must be > 0",
                       o->tau_pos, o->tau_neg);
    return 0;
}

// The knobs of the [objective] section, in the order a run log's root attributes list them
// (after objective.preset): the key's field in Settings and its flag in SettingsSet, and the
// knob's field in ObjectiveConfig. 'e' an enum (names in the enum's order; the key's value
// "preset" keeps the preset's), 'i' an int, 'f' a float (the key's double rounded to it), 'b' a bool.
typedef struct {
    const char *key;
    char kind;
    size_t value, set, field;
    const char *const *names;
    int n_names;
} Knob;
#define KNOB(key, kind, field, names, n_names)                                                  \
    {"objective." #key, kind, offsetof(Settings, objective.key), offsetof(SettingsSet, objective.key), \
     offsetof(ObjectiveConfig, field), names, n_names}
#define ENUM(key, field, names) KNOB(key, 'e', field, names, COUNT(names))
static const Knob KNOBS[] = {
    ENUM(baseline, baseline, BASELINE_NAMES),
    ENUM(scale, scale, SCALE_NAMES),
    KNOB(std_ddof, 'i', std_ddof, NULL, 0),
    KNOB(std_eps, 'f', std_eps, NULL, 0),
    ENUM(aggregation, aggregation, AGG_NAMES),
    KNOB(l_max, 'i', l_max, NULL, 0),
    KNOB(eps_low, 'f', eps_low, NULL, 0),
    KNOB(eps_high, 'f', eps_high, NULL, 0),
    KNOB(beta, 'f', beta, NULL, 0),
    KNOB(dynamic_sampling, 'b', dynamic_sampling, NULL, 0),
    ENUM(ratio, ratio, RATIO_NAMES),
    ENUM(clip, clip, CLIP_NAMES),
    KNOB(tau_pos, 'f', tau_pos, NULL, 0),
    KNOB(tau_neg, 'f', tau_neg, NULL, 0),
    KNOB(clip_ratio_c, 'f', clip_ratio_c, NULL, 0),
    ENUM(token_mean_scope, scope, SCOPE_NAMES),
};
#undef ENUM
#undef KNOB
// The enum knobs are written through an int (every enum of kernels/objective.h is int-sized).
_Static_assert(sizeof(Baseline) == sizeof(int) && sizeof(Scale) == sizeof(int) &&
                   sizeof(Aggregation) == sizeof(int) && sizeof(RatioLevel) == sizeof(int) &&
                   sizeof(ClipStyle) == sizeof(int) && sizeof(TokenMeanScope) == sizeof(int),
               "enum knobs are stored as int");

// Knob k's value in the config (0 for an enum; l_max 0 read as the sampler's budget), as the
// knob's field would hold it.
static double knob_config_value(const Knob *k, const Settings *S, int max_new_tokens) {
    const char *v = (const char *)S + k->value;
    switch (k->kind) {
        case 'i': {
            int x = *(const int *)v;
            return k->field == offsetof(ObjectiveConfig, l_max) && x == 0 ? max_new_tokens : x;
        }
        case 'f': return (float)*(const double *)v;
        case 'b': return *(const bool *)v;
        default: return 0;
    }
}

// Knob k's value in o (its enum's index for an enum).
static double knob_value(const Knob *k, const ObjectiveConfig *o) {
    const char *v = (const char *)o + k->field;
    return k->kind == 'f' ? *(const float *)v : *(const int *)v;
}

static void knob_store(const Knob *k, ObjectiveConfig *o, double x) {
    char *v = (char *)o + k->field;
    if (k->kind == 'f') *(float *)v = (float)x;
    else *(int *)v = (int)x;
}

int objective_knob_count(void) { return 1 + COUNT(KNOBS); }

const char *objective_knob(int i, const ObjectiveConfig *o, char *kind, const char **text,
                           double *num) {
    *text = NULL;
    *num = 0;
    *kind = 's';
    if (i == 0) {
        *text = o->preset;
        return "objective.preset";
    }
    const Knob *k = &KNOBS[i - 1];
    if (k->kind == 'e') *text = k->names[(int)knob_value(k, o)];
    else *kind = k->kind, *num = knob_value(k, o);
    return k->key;
}

int objective_from_config(const Config *c, int max_new_tokens, ObjectiveConfig *o, char *err,
                          size_t errlen) {
    const Settings *S = config_settings(c);
    const SettingsSet *set = config_settings_set(c);
    if (objective_preset(S->objective.preset, max_new_tokens, o) != 0)  // the schema admits only presets
        return set_err(err, errlen, "objective.preset = '%s': no such preset", S->objective.preset);
    for (int i = 0; i < COUNT(KNOBS); i++) {
        const Knob *k = &KNOBS[i];
        if (k->kind == 'e') {  // the config's name unless it is "preset" (the schema admits only names)
            const char *name = *(const char *const *)((const char *)S + k->value);
            if (strcmp(name, "preset") != 0) knob_store(k, o, find_name(k->names, k->n_names, name));
        } else if (*(const bool *)((const char *)set + k->set)) {  // only where the config sets it
            knob_store(k, o, knob_config_value(k, S, max_new_tokens));
        }
    }
    return objective_check(o, err, errlen);
}

int objective_unset_knobs(const Config *c, int max_new_tokens, const ObjectiveConfig *o,
                                 int (*each)(void *ctx, const char *key, char kind, double used),
                                 void *ctx) {
    const Settings *S = config_settings(c);
    const SettingsSet *set = config_settings_set(c);
    for (int i = 0; i < COUNT(KNOBS); i++) {
        const Knob *k = &KNOBS[i];
        if (k->kind == 'e' || *(const bool *)((const char *)set + k->set)) continue;
        double used = knob_value(k, o);
        if (knob_config_value(k, S, max_new_tokens) != used && each(ctx, k->key, k->kind, used) != 0)
            return -1;
    }
    return 0;
}
