// eval_run.h: `grpolab eval-run RUN.h5|SWEEP_DIR...`: the five benchmarks run on the final
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
// A file that exists and belongs to the run is kept (--overwrite evaluates again). `grpolab
// summary` reads both (analysis/runs.h final_eval).
#ifndef GRPOLAB_EVAL_RUN_H
#define GRPOLAB_EVAL_RUN_H

#define EVAL_RUN_SAMPLES 4

int cmd_eval_run(int argc, char **argv);

#endif
