// resume.h: a run goes on from its checkpoint "<log>.ckpt.h5" (parameters, AdamW state, the
// steps done) with the config it started with; the log is cut back to the steps before it.
// Every random draw is keyed by (run.seed, step, ...), so a resumed run writes the same log
// and ends with the same parameters as the uninterrupted run.
#ifndef GRPOLAB_RESUME_H
#define GRPOLAB_RESUME_H

#include <stddef.h>
#include <stdint.h>

#include "../io/config.h"
#include "../model/model.h"
#include "../io/runlog.h"
#include "../world/tokenizer.h"

// FNV-1a (64 bit) of a model's parameters as float32 bytes, as 16 hex digits: equal weights
// give equal fingerprints, whatever file or backend they came from (the log's
// init_fingerprint).
void resume_fingerprint(Model *m, char hex[17]);

// The files a train run keeps beside its log <log> while it runs:
//   <log>.ckpt.h5      the checkpoint (resume_save_checkpoint)
//   <log>.ckpt.log.h5  the log as of that checkpoint (runlog_save_copy): a closed copy saved
//                      when the log is created and before every checkpoint, removed when the
//                      run ends. A writer killed mid-flush can leave <log> itself unreadable;
//                      --resume goes on from this copy, which holds every step the
//                      checkpoint has.
//   <log>.ckpt.eval.h5 the periodic evaluation at the checkpoint's step, stopped by a signal:
//                      the responses done (eval_write_partial, with the step and run_id of
//                      the run); --resume's evaluation at that step goes on from them. Removed
//                      when that evaluation ends; one of another step or run is not used.
#define RESUME_CKPT_SUFFIX ".ckpt.h5"
#define RESUME_LOG_COPY_SUFFIX ".ckpt.log.h5"
#define RESUME_EVAL_SUFFIX ".ckpt.eval.h5"

// The file that holds a run's log as --resume sees it: the copy beside log_path where one
// exists (the log itself may be torn), written into buf (len bytes), else log_path.
const char *resume_log_to_read(const char *log_path, char *buf, size_t len);

// Where a resumed run goes on from (resume_check).
typedef struct {
    int64_t start_step;    // steps done: the checkpoint's step, or 0 without a checkpoint
    int from_checkpoint;   // 0: no checkpoint yet (killed before the first): restart from step 0
    int from_copy;         // 1: the checks read the log's copy (RESUME_LOG_COPY_SUFFIX), which
                           // replaces the log before it is opened; 0: the log itself
    int64_t logged_steps;  // /train rows the log holds (those from start_step on are redone)
    char run_id[40];       // the log's run_id ("" for a log written without one)
} ResumePoint;

// Everything a resume needs, checked before the log or the checkpoint is changed, so a
// refused resume changes nothing: the log at out_path was made with cfg (a larger
// train.steps allowed) from the same base weights; every table of the log holds every
// column of the schema, each with a row for every step before the resume point (a table
// may be ragged only after it: a writer killed mid-flush); /train holds the steps 0, 1, ...
// in order; and the checkpoint ckpt_path belongs to this log (the same run_id, the same
// config) and its step is within train.steps and the logged steps. Without a checkpoint
// (a run killed before its first one) the run restarts from step 0, unless the log holds a
// step a checkpoint was due at (then the checkpoint was removed: refused). 0, or -1 with a
// message that starts "--resume: ".
// Where the log's copy exists, every check reads the copy instead of the log.
int resume_check(const Config *cfg, const char *out_path, const char *ckpt_path,
                 ResumePoint *rp, char *err, size_t errlen);
// The checkpoint's parameters and AdamW state into m. 0, or -1 with a message.
int resume_load(const char *ckpt_path, Model *m, char *err, size_t errlen);
// The run log opened to go on at rp->start_step: first replaced by its copy (rp->from_copy),
// or, without a copy, copied (so a kill from here on leaves one); then its tables declared,
// cut back to the rows of the steps before it, and its stored config set to cfg (after every
// check, so a refusal leaves the config as it was). NULL with a message.
RunLog *resume_open_log(const char *out_path, const Config *cfg, const ResumePoint *rp,
                        char *err, size_t errlen);

// Saves m's parameters and AdamW state with the vocabulary, cfg, the steps done and the run
// log's run_id (NULL or "": none).
int resume_save_checkpoint(const char *ckpt_path, Model *m, const Config *cfg,
                           const Tokenizer *tk, int done_steps, const char *run_id, char *err,
                           size_t errlen);

// cfg with the [objective] values the run uses written in where the config leaves them to
// the preset (e.g. objective.eps_high of dapo), so a stored config says what was used;
// keys whose value already means what is used are left as they are. NULL with a message.
Config *resume_resolved_config(const Config *cfg, char *err, size_t errlen);

// Compares now with the config stored in the train run log at run_path (root attribute
// "config"), ignoring run.threads, run.backend and run.out, and with allow_more_steps also
// a larger train.steps (a resumed run may go on for longer); then, where the log has an
// init_fingerprint, the weights in now's train.init with it. 0: the same; 1: they differ,
// msg names the run and lists the keys with both values; -1: the log or its config cannot
// be read (msg says why).
int resume_compare_run_config(const char *run_path, const Config *now, int allow_more_steps,
                              char *msg, size_t msglen);
// The fingerprint of a checkpoint's weights stored as the run log's init_fingerprint: FNV-1a
// (64 bit) of the parameters as float32 bytes, 16 hex digits. 0, or -1 with a message.
int resume_init_fingerprint(const char *path, char hex[17], char *err, size_t errlen);

#endif
