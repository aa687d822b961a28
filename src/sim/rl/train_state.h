// train_state.h: what the trainer's units share: the resolved [train] settings of a run
// (TrainSettings) and every per-step buffer, host and device (TrainState), sized once per run
// by train_state_alloc (train.c) from P, G, M, world.max_new_tokens and the model's
// max_seq_len. The phases that fill it: rollout.h (tasks, responses, scores, advantages),
// update.h (old log-probs, token weights, the parameters), trainlog.h (the run log).
#ifndef GRPOLAB_TRAIN_STATE_H
#define GRPOLAB_TRAIN_STATE_H

#include <stdint.h>

#include "compare.h"
#include "../io/config.h"
#include "objective.h"
#include "../model/sampler.h"
#include "../world/template.h"
#include "../world/tokenizer.h"
#include "update.h"
#include "../world/world.h"

typedef struct {
    const char *init;  // train.init: the base model's checkpoint
    int steps, P, G, M, micro, epochs, eval_every, checkpoint_every, bias_diagnostic;
    Compare compare;  // diagnostics.compare: the objectives and bins (buffers in TrainState.cmp)
    float temperature, top_p;
    double level_weights[WORLD_NUM_LEVELS];
    const WorldQuestionSet *question_set;  // train.question_set; NULL: weights (level_weights)
    Template template_kind;
    RewardRule reward_rule;
    int max_new;
    uint64_t seed;
} TrainSettings;

// The counts of one step's rollout, summed over its N = P*G responses.
typedef struct {
    int n_tok, n_correct, n_trunc, n_loop, n_dis, n_check;
    double len_sum, len_correct, len_incorrect, reward_sum;
    int n_mixed;  // groups whose rewards are not all equal
    int n_kept;   // responses in the update (all of them without dynamic sampling)
} RolloutStats;

typedef struct {
    // the rollout: P tasks x G responses (response i answers task i / G)
    Task *tasks;                         // (P)
    int *prompt_ids, *plen_p;            // (P, max_seq_len) each task's prompt tokens, (P)
    int *prompts, *plen;                 // (N, Tp) the sampler's right-padded prompts, (N)
    const int **prompt_ptr, **resp_ptr;  // (N) each response's prompt and its tokens
    Generation gen;                      // the sampled responses (N, max_new)
    char *resp_text;                     // one response decoded for the verifier
    Verdict *verd;                       // (N)
    // the scores
    float *rewards, *adv;                // (N) r_i, A_i
    float *unbiased;                     // (N) r_i - group mean: the bias diagnostic's advantage
    float *gmean, *gstd;                 // (P) each group's reward mean and std
    float *d_rewards, *d_adv, *d_gmean, *d_gstd;  // device copies for kn_group_advantages
    int *d_lengths;                      // (N) the responses' lengths on the device
    // the greedy baseline's rollout (rollout_greedy): one greedy response per prompt
    int *greedy_prompts;                 // (P, max_seq_len) its right-padded prompts
    Generation gen_greedy;               // (P, max_new)
    float *greedy_reward, *d_greedy;     // (P) its rewards, host and device
    int *kept, *order;                   // (N) responses of the update; an epoch's shuffle of them
    // per token of the step's responses, response i at tok_off[i] .. + gen.length[i] - 1
    int *tok_off;                        // (N)
    unsigned char *tok_env;              // (N * max_new) 1: written by the environment
    float *logp_old, *logp_ref, *weights;  // (N * max_new); logp_ref NULL without beta
    int *tok_step;                       // (N * max_new) the step, a column of /tokens
    RolloutStats rs;
    UpdateWorkspace *ws;                 // the update's buffers
    Compare cmp;                         // diagnostics.compare (n = 0: off)
} TrainState;

// The [train] settings and the objective of config c, checked (train.micro_batch as written:
// 0 is resolved by the backend later). 0, or -1 with a message.
int train_settings(const Config *c, TrainSettings *s, ObjectiveConfig *oc, char *err,
                   size_t errlen);

void train_state_alloc(TrainState *s, const TrainSettings *S, Model *m, int with_ref);
void train_state_free(TrainState *s, Backend *bk);

// What one RL step runs on: the run's settings, objective and optimizer, the tokenizer, the
// rollouts' sampler, the backend, the policy and the frozen reference model (NULL when
// oc->beta is 0; then train_state_alloc without with_ref).
typedef struct {
    const TrainSettings *S;
    const ObjectiveConfig *oc;
    const AdamWConfig *opt;
    const Tokenizer *tk;
    const SamplerConfig *sc;
    Backend *bk;
    Model *m, *ref;
} StepModels;

// The rollout and the update of RL step step, the trainer's (train.c) and the one bench-rl
// times: rollout_collect, rollout_score, the greedy rollout where the baseline or a compared
// objective needs it, rollout_advantages and the compared objectives' advantages, then
// update_epochs (its sums in us) and the compared objectives' extra passes. *t_start:
// wall_time() when the step began; *t_rollout: when the rollout ended (the update began). The
// log rows and the checks are the caller's. 0, or 2 with a message (a task that does not fit).
int train_step_phases(const StepModels *p, TrainState *s, int step, UpdateStats *us,
                      double *t_start, double *t_rollout, char *err, size_t errlen);

#endif
