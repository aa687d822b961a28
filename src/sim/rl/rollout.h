// rollout.h: the rollout of one RL step, into the TrainState: P training tasks (pool index
// step*P + p), G sampled responses each (sequence id (step*P + p)*G + g), the verifier's
// rewards and the step's counts, then the advantages (kn_group_advantages) and dynamic
// sampling (groups whose rewards are all equal are left out of the update).
#ifndef GRPOLAB_ROLLOUT_H
#define GRPOLAB_ROLLOUT_H

#include <stddef.h>

#include "objective.h"
#include "../world/tokenizer.h"
#include "train_state.h"

// The step's tasks, their prompts and the sampled responses (s->tasks .. s->gen); with
// several ranks each samples its share and every rank gets all (dataparallel.h).
// 0, or 2 with a message in err when a prompt with the budget does not fit the context.
int rollout_collect(TrainState *s, const TrainSettings *S, Model *m, const Tokenizer *tk,
                    const SamplerConfig *sc, int step, char *err, size_t errlen);

// The greedy response to each of the step's P prompts (after rollout_collect) and its reward
// (s->greedy_reward), the greedy baseline's input (ReMax).
void rollout_greedy(TrainState *s, const TrainSettings *S, Model *m, const Tokenizer *tk,
                    const SamplerConfig *sc);

// Verifies the responses (s->verd, s->rewards), lays out their tokens (s->tok_off,
// s->tok_env), counts the step's statistics (s->rs) and resets the step's per-token log
// values (weight 0, logp_old NaN: a response the update leaves out keeps them).
void rollout_score(TrainState *s, const TrainSettings *S, const Tokenizer *tk, int step);

// A_i on the backend (s->adv, s->gmean, s->gstd; the greedy baseline reads s->greedy_reward), the bias diagnostic's r_i - mean
// (s->unbiased), the mixed groups and the responses of the update (s->kept, s->rs.n_kept).
void rollout_advantages(TrainState *s, const TrainSettings *S, Backend *bk,
                        const ObjectiveConfig *oc);

// The update's view of the scored rollout (env: the environment's tokens are marked).
Rollout rollout_view(TrainState *s, int with_env);

#endif
