// update.h: the policy update of one RL step: old log-probs, the minibatch gradient of an
// objective (in micro-batches), PPO epochs with AdamW, and the bias-cosine diagnostic.
//
// pi_old: the old log-probs are recomputed with forward passes over each minibatch of the
// first epoch (same composition, same micro-batches and padding, before any update) rather
// than taken from the sampler. They then equal the first update's log-probs bit for bit on
// the CPU, so rho = 1 exactly in the first minibatch, and they stay right at temperature /
// top-p != 1 (the sampler's log-probs are those of the tempered, truncated distribution).
// update_epochs takes the first minibatch's from its own update forward instead, which runs
// on the same parameters in the same passes (the same values; one forward less per step).
// The token weights w = ppo_token_weight(c_i, A_i, ...) are computed by kn_token_weights on
// the backend where the forward's log-probs lie; the backward takes dlogp = -w. The weights
// and the loss, KL and clip terms come back to the host only for the log and the statistics.
#ifndef GRPOLAB_UPDATE_H
#define GRPOLAB_UPDATE_H

#include <stdint.h>

#include "../model/model.h"
#include "objective.h"

// A scored rollout batch of n responses. Response i is prompt[i] (prompt_len[i] tokens)
// followed by its response tokens resp[i] (resp_len[i] tokens); its per-token values live at
// tok_offset[i] .. tok_offset[i] + resp_len[i] - 1 of logp_old / logp_ref / env.
typedef struct {
    int n;
    const int *const *prompt;
    const int *prompt_len;
    const int *const *resp;
    const int *resp_len;
    const float *advantage;  // A_i
    const int *tok_offset;
    float *logp_old;         // pi_old per token (filled by update_old_logp)
    float *logp_ref;         // pi_ref per token (beta > 0 only; else NULL)
    const unsigned char *env;  // per token: 1 = written by the environment (no gradient,
                               // weight 0, left out of the statistics); NULL: none
    // optional per-response outputs of update_minibatch_gradient (NULL: not wanted; compare.h
    // reads them): the response's policy tokens held at a clip bound, and the sum of
    // w / (c_i A_i) over its policy tokens (0 where A_i = 0)
    int *resp_clipped;
    double *resp_gate_sum;
} Rollout;

typedef struct {
    double loss;        // L of the minibatch: sum_i sum_t c_i l_{i,t}
    double kl_sum;      // sum of k3 over its tokens (beta > 0)
    double entropy_sum; // sum of the policy's entropy over its tokens
    long long tokens, clipped_low, clipped_high;
    // for diagnostics.compare (compare.h): the sum of w / (c_i A_i) over the policy tokens of
    // responses with A_i != 0 (gate_tokens of them), and of |log pi - log pi_old| over the
    // policy tokens
    double gate_sum, abs_log_ratio_sum;
    long long gate_tokens;
} MinibatchStats;

// Micro-batches (train.micro_batch): with 0 < micro < n the minibatch idx[0..n) is run as
// forward/backward passes of micro responses each, sorted by sequence length (longest
// first), so that a pass pads less; gradients accumulate over the passes and every
// normalizer is the whole minibatch's, so the update is the one-pass update up to float
// rounding. micro = 0 (or >= n): one pass over idx in its order. `grpolab train` resolves
// the setting's 0 by backend: UPDATE_CPU_MICRO_BATCH on the CPU (faster there, see
// docs/notebook/2026-12-04-bench-and-fig5-throughput.md), one pass on CUDA (launch-bound:
// more passes would be slower).
#define UPDATE_CPU_MICRO_BATCH 8

// The buffers of the update, host and device, sized once: minibatches of at most max_rows
// responses whose sequences fit the model's max_seq_len; with bias_diagnostic also two
// host copies of the gradient.
typedef struct UpdateWorkspace UpdateWorkspace;
UpdateWorkspace *update_workspace_create(Model *m, int max_rows, int bias_diagnostic);
void update_workspace_free(UpdateWorkspace *ws);

// Fills r->logp_old (and r->logp_ref with ref, if not NULL) for the n responses idx[0..n)
// with forward passes of m (and ref) over exactly that minibatch, in the passes
// update_minibatch_gradient makes of it with the same micro (so that the first update's
// ratios are exactly 1).
void update_old_logp(UpdateWorkspace *ws, Model *m, Model *ref, const Rollout *r,
                     const int *idx, int n, int micro);

// Forward passes over the minibatch idx[0..n) of r, the token weights w of objective oc
// (kn_token_weights; aggregation over this minibatch, M = n; 0 on the environment's tokens,
// which still count in |o|) written to weights (per-token layout of r; may be NULL), and
// backward passes with dlogp = -w, accumulated into m's gradients. The statistics in st are
// summed on the host in the passes' row order (on several CPU threads: each thread's passes
// in order, then the threads in order; update.c, pass_threads). If unbiased_adv is not NULL
// (the workspace made with bias_diagnostic), the gradients of the unbiased policy gradient
// over the same minibatch (token weight unbiased_adv[i] on every token of response i, sum
// over tokens, no normalisation; every pass is run forward again) are then computed as
// well: its cosine with the objective's gradient is returned and the objective's gradient is
// left in m. Returns NaN otherwise. With several ranks (dataparallel.h) this is one rank's
// call with its own rows: the gradients and statistics are those of all ranks' rows.
double update_minibatch_gradient(UpdateWorkspace *ws, Model *m, const ObjectiveConfig *oc,
                                 const Rollout *r, const int *idx, int n, int micro,
                                 float *weights, const float *unbiased_adv, MinibatchStats *st);

// A probe of update_epochs' minibatches (diagnostics.compare's points, compare.h), run with
// the parameters as they are before the update of the minibatch idx[0..n) of r: point
// UPDATE_PROBE_FIRST, the first minibatch of the first epoch, and UPDATE_PROBE_LAST, the
// last minibatch of the last epoch. It must leave m's parameters as they were.
enum { UPDATE_PROBE_FIRST = 0, UPDATE_PROBE_LAST = 1 };
typedef struct {
    void (*run)(void *ctx, int point, UpdateWorkspace *ws, Model *m, const Rollout *r,
                const int *idx, int n, int micro, const float *unbiased);
    void *ctx;
} MinibatchProbe;

// The PPO epochs of one step.
typedef struct {
    int epochs, minibatch, micro, bias_diagnostic;
    uint64_t seed;
    int step;
    const MinibatchProbe *probe;  // run at its points; or NULL
} EpochPlan;

// Sums over the step's minibatch updates.
typedef struct {
    double loss_sum, gnorm_sum, kl_sum, entropy_sum;
    double cosine;  // bias cosine of the first minibatch (NaN: not computed)
    long long tokens, clipped_low, clipped_high;  // over all epochs
    long long entropy_tokens;                     // first epoch only
    int n_updates;
} UpdateStats;

// plan->epochs epochs over the kept responses kept[0..n_kept) of r: each a Philox shuffle
// keyed by (seed, step, epoch) into order (n_kept), cut into minibatches of plan->minibatch
// (the last one smaller if n_kept is not a multiple: its c_i then use its own size), one
// AdamW step of m per minibatch. The first epoch first fills r's old (and reference)
// log-probs, those of its first minibatch from that minibatch's update forward unless
// plan->probe runs on it first, and writes the token weights to weights; unbiased (per
// response) is the bias diagnostic's advantage, used on the first minibatch when
// plan->bias_diagnostic, and passed to plan->probe. With several ranks each runs the rows of
// each minibatch that it sampled, normalised as the whole minibatch.
void update_epochs(UpdateWorkspace *ws, Model *m, Model *ref, const ObjectiveConfig *oc,
                   const AdamWConfig *opt, const EpochPlan *plan, const Rollout *r,
                   const int *kept, int n_kept, int *order, float *weights,
                   const float *unbiased, UpdateStats *out);

// One more epoch of update_epochs (epoch index epoch: its shuffle) after the plan's, without
// the probe, the token weights and the bias diagnostic, its sums into *out: the further
// epochs of diagnostics.compare's extra passes (compare.h), which undo them.
void update_extra_epoch(UpdateWorkspace *ws, Model *m, Model *ref, const ObjectiveConfig *oc,
                        const AdamWConfig *opt, const EpochPlan *plan, const Rollout *r,
                        const int *kept, int n_kept, int *order, int epoch, UpdateStats *out);

#endif
