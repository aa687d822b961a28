// setup.h: turns a resolved Config into the objects a command needs (backend, model
// config, optimizer settings), with errors that name the config key.
#ifndef GRPOLAB_SETUP_H
#define GRPOLAB_SETUP_H

#include "../../kernels/kernels.h"
#include "../io/config.h"
#include "../world/corpus.h"
#include "../model/model.h"
#include "../model/sampler.h"

// [model] section -> ModelConfig; -1 with a message naming the key on an inconsistent config.
int setup_model_config(const Config *c, ModelConfig *out, char *err, size_t errlen);
// [corpus] section -> CorpusParams (validated; max_doc_tokens <= model.max_seq_len).
int setup_corpus_params(const Config *c, CorpusParams *p, char *err, size_t errlen);
// [optim] section -> AdamWConfig.
AdamWConfig setup_adamw(const Config *c);
// world.check_verdict -> the sampler's environment: template_env_verdict for
// "environment", NULL (the policy writes every token) for "policy".
SamplerEnvFn setup_sampler_env(const Config *c);
// run.decode_cache_mib -> SamplerConfig.split_bytes.
size_t setup_split_bytes(const Config *c);
// world.reward_rule -> the verifier's reward rule (template.h).
RewardRule setup_reward_rule(const Config *c);
// run.backend (auto|cpu|cuda, or the override if not NULL) -> a backend; auto picks cuda
// when a device is usable, else cpu. Prints which one and why to stderr when verbose.
// Applies run.threads to OpenMP and OpenBLAS. NULL with a message on failure.
Backend *setup_backend(const Config *c, const char *override, int verbose, char *err,
                       size_t errlen);
// The policy stored at path (a model of `grpolab init` or `grpolab pretrain`, or a run's
// checkpoint) as a Model on bk with its weights: the one way train, eval, bench-rl and
// pretrain (pretrain.init) open a model. Its shape is the file's, or, when want is not NULL,
// want (the caller's [model]), which the file must have (checkpoint_load names a field that
// differs). It must be a model of this world: the tokenizer's vocabulary size, and its tokens
// where the file stores them (a file without them is refused when vocab_required: eval decodes
// text with them). *mc (may be NULL) gets the shape. NULL with a message naming the file.
Model *policy_open(Backend *bk, const char *path, const ModelConfig *want, int vocab_required,
                   ModelConfig *mc, char *err, size_t errlen);

#endif
