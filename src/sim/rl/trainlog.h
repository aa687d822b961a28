// trainlog.h: the run log of `grpolab train` (docs/hdf5-schema.md): its tables and root
// attributes, one step's rows, and the evaluations' rows.
#ifndef GRPOLAB_TRAINLOG_H
#define GRPOLAB_TRAINLOG_H

#include <stddef.h>
#include <stdint.h>

#include "../io/config.h"
#include "evaluate.h"
#include "../io/logschema.h"
#include "objective.h"
#include "../io/runlog.h"
#include "train_state.h"

// A new run's log at path (its directories made; an existing file is replaced only with
// overwrite): the root attributes of the run (config,
// seed, backend, init and its fingerprint, run_id, model size, objective). NULL with a message.
RunLog *trainlog_create(const char *path, int overwrite, const Config *cfg, const ObjectiveConfig *oc,
                        const TrainSettings *S, const char *backend, const ModelConfig *mc,
                        const char *init_fp, const char *run_id, char *err, size_t errlen);
// Creates the directories above path (like mkdir -p of its parent). 0, or -1 with a message.
int trainlog_make_parent_dirs(const char *path, char *err, size_t errlen);
// Declares the tables /train, /questions, /responses, /tokens and /eval, and with_compare
// /compare and /compare_bins (diagnostics.compare). 0, or -1.
int trainlog_declare(RunLog *rl, int with_compare, char *err, size_t errlen);
// Declares only /compare and /compare_bins (a resumed log's other tables are declared by
// resume_open_log). 0, or -1.
int trainlog_declare_compare(RunLog *rl, char *err, size_t errlen);

// The step's /train row from its rollout counts, its update sums, the learning rate and the
// wall times of the rollout and the update.
void trainlog_train_row(TrainRow *row, int step, const TrainSettings *S, const RolloutStats *rs,
                        const UpdateStats *us, const ObjectiveConfig *oc, double lr,
                        double rollout_seconds, double update_seconds);
// Appends the step's rows to /train (row), /questions, /responses and /tokens (from s) and
// flushes the log. 0, or -1 with a message.
int trainlog_write_step(RunLog *rl, const TrainRow *row, const TrainSettings *S,
                        const TrainState *s, char *err, size_t errlen);
// Appends the /eval rows of an evaluation after step steps and prints its scores.
int trainlog_write_eval(RunLog *rl, int step, const EvalResult *res, char *err, size_t errlen);

#endif
