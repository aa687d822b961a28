// commands.h: the entry points of grpolab's commands, one file each (cmd_<command>.c), that
// main.c's table dispatches to; each takes the command's argv (argv[0] its name) and returns
// its exit code (0 done, 1 a failure of the work, 2 a usage or input error: docs/cli.md).
#ifndef GRPOLAB_COMMANDS_H
#define GRPOLAB_COMMANDS_H

#include "../io/config.h"

int cmd_version(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_init(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_pretrain(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_schema(int argc, char **argv);
// `grpolab bench-rl`: the RL step of a train config timed phase by phase (docs/benchmarks.md).
int cmd_bench_rl(int argc, char **argv);
// `grpolab sweep plan|run|slurm|task|status FILE ...` (docs/cli.md, docs/scaling.md).
int cmd_sweep(int argc, char **argv);
// `grpolab plot FIGURE RUN.h5|SWEEP_DIR...`: a figure of analysis.h from run logs (docs/cli.md).
int cmd_plot(int argc, char **argv);
// `grpolab summary RUN.h5|SWEEP_DIR...`: the tables and the finding's checks (docs/cli.md).
int cmd_summary(int argc, char **argv);
// `grpolab strip RUN.h5 -o OUT.h5`: a run log copied without its per-token table.
int cmd_strip(int argc, char **argv);

// `grpolab eval-run RUN.h5|SWEEP_DIR...`: the five benchmarks run on the final
// policy of finished train runs, after the fact (docs/cli.md). For each run it loads the
// checkpoint train left beside the log (RUN.h5.ckpt.h5), which must belong to the log (its
// run_id) and be at the run's last step (train.steps), takes every setting the evaluation
// needs from the run's stored config (template, reward rule, budget, the checks' verdicts,
// eval.limit, eval.batch, run.seed, run.threads), and writes an eval log (docs/hdf5-schema.md)
// beside it:
//   RUN.h5.sampled.h5  sampled at temperature 1, top-p 1, K responses per question
//                      (--samples, default EVAL_RUN_SAMPLES); the sampler's seed is the
//                      run's run.seed, sample k of question j of benchmark b drawing from
//                      stream (b << 32 | k << 20 | j) (evaluate.h)
//   RUN.h5.greedy.h5   with --greedy: the greedy evaluation again (the one train makes at its
//                      last step), for logs that do not have /eval/truncation_incorrect
// A file that exists and belongs to the run is kept (--overwrite evaluates again); one of the
// run at an earlier step (the run extended since) is evaluated again. `grpolab
// summary` reads both (analysis/runs.h final_eval).
#define EVAL_RUN_SAMPLES 4
int cmd_eval_run(int argc, char **argv);

// The model a run trains is its init checkpoint's (train.init): a [model] key the config sets
// must agree with it (else refused, naming the key, the config's value and the checkpoint's),
// and the keys it leaves unset take the checkpoint's values, so that the run log records the
// model that was trained. A present tokenizer vocabulary must be this world's. An unreadable
// train.init is left to train_run, which says why. 0, or -1 with the message printed.
int cli_check_train_init(Config *c);
// The same for the checkpoint init that the config key `key` names (train.init,
// pretrain.init; the name is for messages, init its value, which c's changes leave as it is):
// `what` says who trains it in the message; required: an unreadable checkpoint is an error
// here (else it is left to the caller's loader).
int cli_check_model_init(Config *c, const char *key, const char *init, const char *what,
                         int required);

#endif
