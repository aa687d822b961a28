// pretrain.h: `grpolab pretrain`, next-token cross-entropy on the world's corpus.
#ifndef GRPOLAB_PRETRAIN_H
#define GRPOLAB_PRETRAIN_H

#include "config.h"

// Trains the base model described by cfg ([model], [optim], [pretrain], [corpus], run.seed)
// and writes it to out_path. init_path (NULL: random init from run.seed) continues from a
// checkpoint. Returns an exit code (0 ok, 1 runtime failure, 2 bad input).
// stats (NULL: not wanted) receives the mean loss of the first and of the last log interval.
typedef struct {
    float first_loss, last_loss;
    long long tokens;
} PretrainStats;
int pretrain_run(const Config *cfg, const char *backend_override, const char *out_path,
                 const char *init_path, PretrainStats *stats);

#endif
