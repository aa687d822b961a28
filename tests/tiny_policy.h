// tiny_policy.h: the tiny policy model of the trainer's tests (train_fixture.h, test_mpi.c).
// A random-init model never answers correctly (every reward 0, every advantage 0, nothing
// to test), so the policy is a tiny transformer fine-tuned by cross-entropy on the shortest
// correct r1 responses (" </think> <answer> 11 </answer>") of exactly the training questions
// the runs draw, until they have probability about one half: the groups then hold both
// rewards.
#ifndef GRPOLAB_TINY_POLICY_H
#define GRPOLAB_TINY_POLICY_H

#include <stdint.h>

#include "sim/model/model.h"

// 1 layer, d_model 32, max_seq_len 96, the default tokenizer's vocabulary.
ModelConfig tiny_policy_config(void);

// Tokens of the prompt (*plen) and the shortest correct r1 response of training task `index`
// of world seed `seed` into seq (96), *len in all.
void tiny_policy_sequence(uint64_t seed, int64_t index, int *seq, int *plen, int *len);

// The fine-tuned policy on training tasks 0 .. n_questions - 1 of run.seed `seed`, saved to
// path. 0, or -1 (cmocka failures for the steps that cannot fail otherwise).
int tiny_policy_save(const char *path, uint64_t seed, int n_questions);

#endif
