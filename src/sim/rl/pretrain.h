// pretrain.h: `grpolab pretrain`, next-token cross-entropy on the world's corpus.
#ifndef GRPOLAB_PRETRAIN_H
#define GRPOLAB_PRETRAIN_H

#include "../io/config.h"

// Trains the base model described by cfg ([model], [optim], [pretrain], [corpus], run.seed)
// and writes it to out_path. init_path continues from a checkpoint (NULL: pretrain.init's, and
// where that is empty a random init from run.seed); the output then stores the init's config
// (attribute init_config) and its weights' fingerprint (init_fingerprint). Its architecture
// must be cfg's: `grpolab pretrain` takes [model] from the init first. Every
// pretrain.checkpoint_every steps, and when SIGINT or SIGTERM ends the step under way, the
// state is saved to out_path + RESUME_CKPT_SUFFIX (resume.h; removed once the model is
// written); PRETRAIN_RESUME goes on from there (from step 0 where there is none) to the same
// model, bit for bit, as an uninterrupted run on the same backend and threads;
// PRETRAIN_OVERWRITE removes an earlier pretraining's checkpoint, which PRETRAIN_NEW refuses.
// Returns an exit code (0 ok, 1 runtime failure, 2 bad input, 128 + the signal when stopped).
// stats (NULL: not wanted) receives the mean loss of the first and of the last log interval.
typedef struct {
    float first_loss, last_loss;
    long long tokens;
} PretrainStats;
typedef enum { PRETRAIN_NEW, PRETRAIN_OVERWRITE, PRETRAIN_RESUME } PretrainMode;
int pretrain_run(const Config *cfg, const char *backend_override, const char *out_path,
                 const char *init_path, PretrainMode mode, PretrainStats *stats);

// Compares the config stored in a base model written by pretrain_run (model_path) with now,
// on the keys that decide what pretraining computes: [train], [eval], [objective],
// run.threads, run.backend, run.out, pretrain.out, pretrain.log_every and
// pretrain.checkpoint_every are not compared. A model with an init_fingerprint also differs
// when the weights now at pretrain.init are not those it continued from. Returns 0 if the
// same, 1 if not (msg lists the keys, stored vs now, or says which init changed), -1 if
// model_path cannot be read or holds no config (msg says why).
int pretrain_compare_model_config(const char *model_path, const Config *now, char *msg,
                                  size_t msglen);

#endif
