// compare.h: counterfactual diagnostics (diagnostics.compare): on every step's rollout, the
// advantages, token weights and gradient of each listed objective preset, against the
// unbiased policy gradient on the same responses and parameters (update.h's bias cosine),
// with the share of tokens each clips, what it passes of the advantage (the gate), and the
// sum of |w| per response-length bin split by correct and incorrect. Each is evaluated at
// several points of the step (logschema.h, COMPARE_POINT_*): with every ratio 1 (the first
// minibatch before the update), on the update's last minibatch before its optimizer step,
// and at diagnostics.compare_extra_epochs extra passes over the first minibatch's responses
// after the update. Extra pass k sees the parameters after the update and k - 1 more epochs
// of the trained objective (the epochs a run with train.ppo_epochs + k - 1 would take): those
// epochs run on the model itself, whose parameters and AdamW state are copied before the first
// and put back after the last, so that the run goes on exactly as without the diagnostics. The
// training is not touched: the objective trained is still objective.*'s (docs/objectives.md).
#ifndef GRPOLAB_COMPARE_H
#define GRPOLAB_COMPARE_H

#include "../io/config.h"
#include "../io/logschema.h"
#include "objective.h"
#include "update.h"

#define COMPARE_MAX 16

typedef struct Compare {
    int n;                          // objectives compared (0: none)
    char names[COMPARE_MAX * 24];   // diagnostics.compare as given, comma-separated
    ObjectiveConfig oc[COMPARE_MAX];
    int bins, max_new, needs_greedy;
    int extra_epochs;               // diagnostics.compare_extra_epochs
    int points;                     // COMPARE_POINT_EXTRA + extra_epochs
    // per step: each objective's advantages of the rollout (N), host and device
    float *adv[COMPARE_MAX], *d_adv;
    float *weights;                 // (tok_cap) a compared objective's token weights
    float *g_unb, *g_obj;           // (n_params) the unbiased gradient, a compared one's
    float *saved;                   // (3 n_params, device) parameters and AdamW moments
    int saved_adam_step;
    const float *rewards;           // (N) the step's rewards (set by the trainer)
    int *first_idx, first_n;        // the responses of the step's first minibatch
    int *resp_clipped;              // (N) per response: clipped tokens, sum of the gate
    double *resp_gate_sum;          //   (Rollout's outputs)
    double *bin_acc;                // (4 bins) per bin: policy tokens, clipped, gated, gate sum
    int step;
    CompareRow *rows;               // (points * n) the last step's results, row point * n + j
    CompareBinRow *bin_rows;        // (points * n * bins)
} Compare;

// The [diagnostics] section: each name of diagnostics.compare a preset (its own knobs, l_max
// the budget max_new). 0, or -1 with a message naming the key and the value.
int compare_from_config(const Config *c, int max_new, Compare *out, char *err, size_t errlen);
// Buffers for N responses, tok_cap tokens and a model of n_params on backend bk (nothing
// when c->n == 0).
void compare_alloc(Compare *c, int N, size_t tok_cap, size_t n_params, Backend *bk);
void compare_free(Compare *c, Backend *bk);

// Step `step`: each objective's advantages of its P groups of G (device rewards, lengths and
// greedy rewards or NULL, as kn_group_advantages takes them), and the step's rows reset (NaN
// cosine, no weights: what a point that is not reached logs).
void compare_advantages(Compare *c, Backend *bk, int step, const float *d_rewards,
                        const int *d_lengths, const float *d_greedy, int P, int G);

// Point `point` (COMPARE_POINT_*) on the minibatch idx[0..n) of r (passes of micro), with m's
// parameters as they are: the unbiased gradient of unbiased_adv once, then each objective's
// gradient in m, its cosine with the unbiased one, its norm, clip shares, gate and weights'
// sums into the point's rows. m's gradients are left zeroed. COMPARE_POINT_RHO1 also keeps
// idx as the step's first minibatch (first_idx), which the extra passes take.
void compare_point(Compare *c, int point, UpdateWorkspace *ws, Model *m, const Rollout *r,
                   const int *idx, int n, int micro, const float *unbiased_adv);

// The probe that runs compare_point at update_epochs' points (EpochPlan.probe): its first
// minibatch before the update (COMPARE_POINT_RHO1) and its last (COMPARE_POINT_LAST).
MinibatchProbe compare_probe(Compare *c);

// After update_epochs with the plan, r, kept and order it had (and compare_probe): the extra
// passes (COMPARE_POINT_EXTRA + k), each on the first minibatch's responses, with k further
// epochs of the trained objective (update_extra_epoch) in between, run on m and then undone
// (its parameters, AdamW moments and step). Nothing when c->n or c->extra_epochs is 0.
void compare_extra_passes(Compare *c, UpdateWorkspace *ws, Model *m, Model *ref,
                          const ObjectiveConfig *oc, const AdamWConfig *opt, const EpochPlan *plan,
                          const Rollout *r, const int *kept, int n_kept, int *order,
                          const float *unbiased);

// The last step's rows appended to /compare and /compare_bins of rl. 0, or -1 with a message.
int compare_write(const Compare *c, RunLog *rl, char *err, size_t errlen);

#endif
