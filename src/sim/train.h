// train.h: `grpolab train`, RL on the task world with the objectives of objective.h.
//
// One step (../shared/DESIGN.md "Data flow of one RL step"):
//   draw P training tasks (pool index step*P + p), sample G responses each (sequence id
//   (step*P + p)*G + g), verify -> rewards, advantages (kn_group_advantages), optional
//   dynamic sampling (groups whose rewards are all equal are dropped from the update), then
//   ppo_epochs epochs over minibatches of M responses in a Philox shuffle keyed by
//   (run.seed, step, epoch): forward, per-token weight w = ppo_token_weight(c_i, A_i, ...)
//   (kn_token_weights, on the backend where the forward's log-probs lie), dlogp = -w on the
//   response tokens, backward, one AdamW step per minibatch. The weights and the loss, KL and
//   clip terms come back to the host only for the log and the step's statistics.
//
// pi_old: the old log-probs are recomputed with forward passes over each minibatch of the
// first epoch (same composition, same micro-batches and padding, before any update) rather
// than taken from the sampler. They then equal the first update's log-probs bit for bit on
// the CPU, so rho = 1 exactly in the first minibatch, and they stay right at temperature /
// top-p != 1 (the sampler's log-probs are those of the tempered, truncated distribution).
// The logged token weight (/tokens/weight) is the w of the token's first-epoch update.
//
// Every random draw is keyed by (run.seed, step, ...), so a run resumed from its checkpoint
// writes the same log and ends with the same parameters as the uninterrupted run.
#ifndef GRPOLAB_TRAIN_H
#define GRPOLAB_TRAIN_H

#include "config.h"
#include "model.h"
#include "objective.h"

typedef struct {
    int steps_done;           // steps completed (the final step count)
    double first_reward_mean; // /train/reward_mean of the first step this call ran
    double last_reward_mean;  // ... of the last
    double seconds_per_step;  // mean wall time of the steps this call ran
    long long tokens;         // generated tokens in the steps this call ran
} TrainStats;

// Runs cfg's [train] section (with [objective], [optim], [world], [eval], run.seed) and
// writes the HDF5 run log to out_path and checkpoints to "<out_path>.ckpt.h5". resume:
// continue from that checkpoint (parameters, AdamW state, step) and truncate the log to the
// steps before it. Returns an exit code (0 ok, 1 runtime failure, 2 bad input).
int train_run(const Config *cfg, const char *backend_override, const char *out_path, int resume,
              TrainStats *stats);

// Compares now with the config stored in the train run log at run_path (root attribute
// "config"), ignoring run.threads, run.backend and run.out, and with allow_more_steps also
// a larger train.steps (a resumed run may go on for longer); then, where the log has an
// init_fingerprint, the weights in now's train.init with it. 0: the same; 1: they differ,
// msg names the run and lists the keys with both values; -1: the log or its config cannot
// be read (msg says why).
int train_compare_run_config(const char *run_path, const Config *now, int allow_more_steps,
                             char *msg, size_t msglen);
// The fingerprint of a checkpoint's weights stored as the run log's init_fingerprint: FNV-1a
// (64 bit) of the parameters as float32 bytes, 16 hex digits. 0, or -1 with a message.
int train_init_fingerprint(const char *path, char hex[17], char *err, size_t errlen);

// ---------------------------------------------------------------- the update (exposed for tests)
// A scored rollout batch of n responses. Response i is prompt[i] (prompt_len[i] tokens)
// followed by its response tokens resp[i] (resp_len[i] tokens); its per-token values live at
// tok_offset[i] .. tok_offset[i] + resp_len[i] - 1 of logp_old / logp_ref.
typedef struct {
    int n;
    const int *const *prompt;
    const int *prompt_len;
    const int *const *resp;
    const int *resp_len;
    const float *advantage;  // A_i
    const int *tok_offset;
    float *logp_old;         // pi_old per token (filled by train_old_logp)
    float *logp_ref;         // pi_ref per token (beta > 0 only; else NULL)
    const unsigned char *env;  // per token: 1 = written by the environment (no gradient,
                               // weight 0, left out of the statistics); NULL: none
} Rollout;

typedef struct {
    double loss;        // L of the minibatch: sum_i sum_t c_i l_{i,t}
    double kl_sum;      // sum of k3 over its tokens (beta > 0)
    double entropy_sum; // sum of the policy's entropy over its tokens
    long long tokens, clipped_low, clipped_high;
} MinibatchStats;

// Micro-batches (train.micro_batch): with 0 < micro < n the minibatch idx[0..n) is run as
// forward/backward passes of micro responses each, sorted by sequence length (longest
// first), so that a pass pads less; gradients accumulate over the passes and every
// normalizer is the whole minibatch's, so the update is the one-pass update up to float
// rounding. micro = 0 (or >= n): one pass over idx in its order. `grpolab train` resolves
// the setting's 0 by backend: TRAIN_CPU_MICRO_BATCH on the CPU (on the 2-core EPYC the fig5
// update ran 1.6x faster on one thread, 1.4x on two: docs/benchmarks.md), one pass on CUDA
// (launch-bound: more passes would be slower).
#define TRAIN_CPU_MICRO_BATCH 8

// Fills r->logp_old (and r->logp_ref with ref, if not NULL) for the n responses idx[0..n)
// with forward passes of m (and ref) over exactly that minibatch, in the passes
// train_minibatch_gradient makes of it with the same micro (so that the first update's
// ratios are exactly 1).
void train_old_logp(Model *m, Model *ref, const Rollout *r, const int *idx, int n, int micro);

// Forward passes over the minibatch idx[0..n) of r, the token weights w of objective oc
// (kn_token_weights; aggregation over this minibatch, M = n; 0 on the environment's tokens,
// which still count in |o|) written to weights (per-token layout of r; may be NULL), and
// backward passes with dlogp = -w, accumulated into m's gradients. The statistics in st are
// summed on the host in the passes' row order. If unbiased_adv is not NULL, the gradients of
// the unbiased policy gradient over the same minibatch (token weight unbiased_adv[i] on every
// token of response i, sum over tokens, no normalisation; the passes before the last are run
// forward again) are then computed as well: its cosine with the objective's gradient is
// returned and the objective's gradient is left in m. Returns NaN otherwise.
double train_minibatch_gradient(Model *m, const ObjectiveConfig *oc, const Rollout *r,
                                const int *idx, int n, int micro, float *weights,
                                const float *unbiased_adv, MinibatchStats *st);

#endif
