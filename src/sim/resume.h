// resume.h: a run goes on from its checkpoint "<log>.ckpt.h5" (parameters, AdamW state, the
// steps done) with the config it started with; the log is cut back to the steps before it.
// Every random draw is keyed by (run.seed, step, ...), so a resumed run writes the same log
// and ends with the same parameters as the uninterrupted run.
#ifndef GRPOLAB_RESUME_H
#define GRPOLAB_RESUME_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "model.h"
#include "runlog.h"
#include "tokenizer.h"

// FNV-1a (64 bit) of a model's parameters as float32 bytes, as 16 hex digits: equal weights
// give equal fingerprints, whatever file or backend they came from (the log's
// init_fingerprint).
void resume_fingerprint(Model *m, char hex[17]);

// The run log at out_path was made with cfg (a larger train.steps allowed) from the same
// base weights, and its checkpoint ckpt_path says how many steps are done (*start_step).
// 0, or -1 with a message that starts "--resume: ".
int resume_check(const Config *cfg, const char *out_path, const char *ckpt_path,
                 int64_t *start_step, char *err, size_t errlen);
// The checkpoint's parameters and AdamW state into m. 0, or -1 with a message.
int resume_load(const char *ckpt_path, Model *m, char *err, size_t errlen);
// The run log cut back to the rows of the steps before start_step, its stored config set to
// cfg. NULL with a message.
RunLog *resume_open_log(const char *out_path, const Config *cfg, int64_t start_step, char *err,
                        size_t errlen);
// The log holds one /train row per step before start_step. 0, or -1 with a message.
int resume_check_rows(RunLog *rl, const char *out_path, const char *ckpt_path,
                      int64_t start_step, char *err, size_t errlen);

// Saves m's parameters and AdamW state with the vocabulary, cfg and the steps done.
int resume_save_checkpoint(const char *ckpt_path, Model *m, const Config *cfg,
                           const Tokenizer *tk, int done_steps, char *err, size_t errlen);

#endif
