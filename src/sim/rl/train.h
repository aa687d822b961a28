// train.h: `grpolab train`, RL on the task world with the objectives of objective.h.
//
// One step: draw P training tasks, sample G responses each, verify -> rewards, advantages
// (kn_group_advantages), optional dynamic sampling (groups whose rewards are all equal are
// dropped from the update) (rollout.h); then ppo_epochs epochs over minibatches of M
// responses in a Philox shuffle keyed by (run.seed, step, epoch): forward, per-token weight
// w = ppo_token_weight(c_i, A_i, ...), dlogp = -w on the response tokens, backward, one AdamW
// step per minibatch (update.h); then the step's rows of the run log (trainlog.h) and, every
// train.checkpoint_every steps, a checkpoint to go on from (resume.h). The logged token
// weight (/tokens/weight) is the w of the token's first-epoch update.
#ifndef GRPOLAB_TRAIN_H
#define GRPOLAB_TRAIN_H

#include "../io/config.h"
#include "../model/model.h"
#include "objective.h"

typedef struct {
    int steps_done;           // steps completed (the final step count)
    double first_reward_mean; // /train/reward_mean of the first step this call ran
    double last_reward_mean;  // ... of the last
    double seconds_per_step;  // mean wall time of the steps this call ran
    long long tokens;         // generated tokens in the steps this call ran
} TrainStats;

// What train_run does with out_path.
enum {
    TRAIN_NEW = 0,       // a new run: an existing log is an error
    TRAIN_RESUME = 1,    // go on with the run whose log is out_path
    TRAIN_OVERWRITE = 2, // a new run replacing the log and the checkpoint of any run there
};

// Runs cfg's [train] section (with [objective], [optim], [world], [eval], run.seed) and
// writes the HDF5 run log to out_path and checkpoints to "<out_path>.ckpt.h5" (mode: a new
// run, --resume, --overwrite). With TRAIN_RESUME it continues from that checkpoint
// (parameters, AdamW state, step), or from step 0 when the run stopped before its first, and
// truncates the log to the steps before it, after checking everything (resume.h), so a
// refused resume changes no file. The stored config holds the objective values used
// (resume_resolved_config). On failure (docs/cli.md, "Failure behaviour"): a non-finite loss,
// grad norm or parameter stops the run before the step is logged or checkpointed (exit 1);
// SIGINT or SIGTERM ends the step being run, logs it, saves a checkpoint and exits 128 +
// the signal; a new run that stops before its first step leaves no log. Returns an exit
// code (0 ok, 1 runtime failure, 2 bad input, 130/143 interrupted).
int train_run(const Config *cfg, const char *backend_override, const char *out_path, int mode,
              TrainStats *stats);

// The command line of `grpolab train`, `pretrain` or `eval` (argv[0] = the command), for the
// command printed to go on after an interruption (without --overwrite, with --resume).
void train_note_command(int argc, char **argv);
// Prints "<who>: to go on: <that command>" to stderr (or, where it was too long to keep,
// the advice to run the same command with --resume and --out out_path).
void train_print_resume_hint(const char *who, const char *out_path);

#endif
