// compare.h: counterfactual diagnostics (diagnostics.compare): on every step's rollout and
// the parameters before its first update, the advantages, token weights and gradient of each
// listed objective preset on the step's first minibatch, against the unbiased policy gradient
// on the same responses (update.h's bias cosine), with the sum of |w| per response-length bin
// split by correct and incorrect. The training itself is not touched: the objective trained
// is still objective.*'s, and its gradient is computed after these (docs/objectives.md).
#ifndef GRPOLAB_COMPARE_H
#define GRPOLAB_COMPARE_H

#include "config.h"
#include "logschema.h"
#include "objective.h"
#include "update.h"

#define COMPARE_MAX 16

typedef struct Compare {
    int n;                          // objectives compared (0: none)
    char names[COMPARE_MAX * 24];   // diagnostics.compare as given, comma-separated
    ObjectiveConfig oc[COMPARE_MAX];
    int bins, max_new, needs_greedy;
    // per step: each objective's advantages of the rollout (N), host and device
    float *adv[COMPARE_MAX], *d_adv;
    float *weights;                 // (tok_cap) a compared objective's token weights
    float *g_unb, *g_obj;           // (n_params) the unbiased gradient, a compared one's
    const float *rewards;           // (N) the step's rewards (set by the trainer)
    int step;
    CompareRow rows[COMPARE_MAX];   // the last step's results
    CompareBinRow *bin_rows;        // (n * bins)
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
// cosine, no weights: what a step without an update logs).
void compare_advantages(Compare *c, Backend *bk, int step, const float *d_rewards,
                        const int *d_lengths, const float *d_greedy, int P, int G);

// On the minibatch idx[0..n) of r (passes of micro): the unbiased gradient of unbiased_adv
// once, then each objective's gradient in m, its cosine with the unbiased one, its norm and
// its weights' sums into c->rows/c->bin_rows. m's gradients are left zeroed.
void compare_minibatch(Compare *c, UpdateWorkspace *ws, Model *m, const Rollout *r,
                       const int *idx, int n, int micro, const float *unbiased_adv);

// The last step's rows appended to /compare and /compare_bins of rl. 0, or -1 with a message.
int compare_write(const Compare *c, RunLog *rl, char *err, size_t errlen);

#endif
