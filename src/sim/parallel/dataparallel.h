// dataparallel.h: one RL step over the ranks of dist.h (docs/scaling.md, "One run over
// several processes (MPI)"). Each of R ranks holds the same whole step as one process
// would: it samples its share of the N = P*G responses, a contiguous range of whole groups
// (P divisible by R), with the sampler's streams named by the global response index, and the
// shares are then gathered on every rank. Every rank then scores all N responses, so the
// rewards, advantages, group and batch statistics, the kept responses and the minibatch
// shuffle are the one-process ones on every rank. In the update each rank runs the members of
// a minibatch that are its own, with the whole minibatch's normalisers (M, the sum of
// lengths); gradients and statistics are summed over the ranks (update.c), so every rank
// takes the same optimizer step. With one rank every function here is the one-process path.
#ifndef GRPOLAB_DATAPARALLEL_H
#define GRPOLAB_DATAPARALLEL_H

#include <stddef.h>
#include <stdint.h>

#include "../model/sampler.h"

// 0 if P prompts per step split over the ranks in whole groups, else -1 with a message.
int dp_check(int P, char *err, size_t errlen);

// This rank's responses [*i0, *i1) of n.
void dp_share(int n, int *i0, int *i1);

// The rows of idx[0..n) that are this rank's (of a step's N responses), in idx's order,
// into mine; returns their count.
int dp_select(const int *idx, int n, int N, int *mine);

// sampler_generate of this rank's share of the N prompts (prompts (N, T), lengths
// prompt_len (N); response i's stream seq_id0 + i), then every share on every rank: gen
// (N rows) as one process's sampler_generate fills it.
void dp_generate(Model *m, const SamplerConfig *sc, const int *prompts, const int *prompt_len,
                 int N, int T, uint64_t seq_id0, Generation *gen);

// A per-token array x of the step (response i at tok_off[i] .. + its length; n_tok in all)
// whose values each rank filled for its own responses, gathered on rank 0.
void dp_gather_tokens(float *x, const int *tok_off, int N, int n_tok);

#endif
