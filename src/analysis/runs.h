// runs.h: a `grpolab train` run log (docs/hdf5-schema.md) read into memory for the analysis
// commands (`grpolab plot`, `grpolab summary`), with every check a user's file can fail.
//
// run_load reads the root attributes (objective knobs, seed, config) and the per-step tables
// /train and /eval; run_load_responses adds /responses and /tokens (the per-token weights,
// large: only the length-bias figure needs them; a log without /tokens loads with
// has_tokens 0) and /questions. A run that is still being
// written (SWMR) is read up to its last flushed step; its columns are cut to the shortest.
//
// Errors (NULL / -1 with a message that names the file, the table or dataset, and what was
// expected): missing file, not HDF5, truncated, not a grpolab run log, an eval log instead
// of a train log, a missing table or column, a run without a single finished step.
#ifndef GRPOLAB_ANALYSIS_RUNS_H
#define GRPOLAB_ANALYSIS_RUNS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *path;
    char objective[32];      // the group label: objective.preset (grpo, dr_grpo, dapo, rloo),
                             // to which `summary` and `plot` add a sweep's grid values
                             // ("grpo_scale-none"); the curve's label
    char preset[32];         // objective.preset as logged
    char run_id[40];         // the log's run_id ("" where it has none)
    int64_t seed;
    int steps_planned;       // train.steps of the run's config (0 if unknown)
    int group_size;          // train.group_size (G)
    int minibatch_size;      // train.minibatch_size (M)
    int max_new_tokens;      // world.max_new_tokens (the response budget)
    char template_name[16];  // world.template (r1, boxed, none; "" if unknown)
    char question_set[48];   // train.question_set, "weights" followed by train.weight_level1..5
                             // ("weights 1,1,1,0,0") where no named set was used; "" if unknown
    // objective knobs as logged (objective.* root attributes)
    char scale[24], baseline[24], aggregation[40];
    int std_ddof, l_max;
    double std_eps;

    // /train, one row per step (n_steps rows; NaN where the log has NaN)
    int64_t n_steps;
    double *step, *reward, *len_mean, *len_correct, *len_incorrect, *truncation, *loop,
        *disagreement, *selfcheck, *bias_cosine, *mixed_groups;

    // /eval pooled per evaluation over the benchmarks (train_pool excluded): n_evals rows
    int n_evals;
    double *eval_step;      // steps done before the evaluation
    double *eval_score;     // unweighted mean accuracy over the benchmarks
    double *eval_len_correct, *eval_len_incorrect;  // pooled over the benchmarks' responses
                                                    // (NaN if there is none of the class)
    double *eval_n_incorrect;     // incorrect responses (reward 0), summed over the benchmarks
    double *eval_trunc_incorrect; // how many of them the budget cut; NULL where the log has
                                  // no /eval/truncation_incorrect (a log of an older grpolab)
    // The final policy's evaluations by `grpolab eval-run` beside the log (final_eval_path):
    // greedy (RUN.h5.greedy.h5) and sampled (RUN.h5.sampled.h5), pooled over the benchmarks.
    // n: responses (0: no such file); samples: per question.
    struct FinalEval {
        int n, samples;
        int64_t step;  // the steps of the policy evaluated (its root attribute step)
        double score, len_incorrect, n_incorrect, trunc_incorrect;
    } final_eval[2];  // FINAL_GREEDY, FINAL_SAMPLED

    // run_load_responses: /responses with per-response mean |token weight|, and /questions
    int64_t n_resp;
    double *resp_step, *resp_length, *resp_correct, *resp_advantage, *resp_mean_abs_w;
    int has_tokens;  // 0: the log has no /tokens table, resp_mean_abs_w is all NaN
    int64_t n_quest;
    double *q_step, *q_reward_mean, *q_mean_abs_adv, *q_sum_abs_w, *q_group_size;
} Run;

enum { FINAL_GREEDY, FINAL_SAMPLED };

// NULL and a message in err on error. The evaluations of `grpolab eval-run` beside the log
// are read too where they exist; one that cannot be read is left out with a note on stderr.
Run *run_load(const char *path, char *err, size_t errlen);

// The path of the file `grpolab eval-run` writes beside run log `run` for evaluation `which`
// (FINAL_GREEDY: RUN.h5.greedy.h5, FINAL_SAMPLED: RUN.h5.sampled.h5).
void final_eval_path(const char *run, int which, char *out, size_t len);

// The truncation of the incorrect responses of r's evaluation e (-1: the last), pooled over
// the benchmarks: *n_incorrect and *n_cut (counts) and the share n_cut / n_incorrect (NaN
// where no response is incorrect). Where it is not known (the log has no such column and,
// for the last evaluation, no greedy eval-run file of its step): NaN, counts 0. *source (may
// be NULL) says where it came from: "/eval", "eval-run", or NULL where not known.
double run_eval_trunc_incorrect(const Run *r, int e, double *n_incorrect, double *n_cut, const char **source);
// Adds the per-response and per-question data; -1 and a message on error.
int run_load_responses(Run *r, char *err, size_t errlen);
void run_free(Run *r);
// Frees runs[0..n) (run_free) and the array runs.
void runs_free(Run **runs, int n);

// What followed a visible self-check disagreement, from /responses, over the first
// (out[0]) and the last (out[1]) tenth of the steps (tenth_of): the share of responses with
// a disagreement, and among those the shares that ended correct, gave up and looped, and
// the mean length of those that failed (NaN where there is none). Going on after a
// disagreement pays in reward when `correct` rises (docs/notebook/2026-12-03-outcome-reward.md). -1 and a message on
// error (a log without the columns, e.g.).
typedef struct {
    double share, correct, gave_up, looped, fail_len;
} FailingStates;
int run_failing_states(const Run *r, FailingStates out[2], char *err, size_t errlen);

// The first and last tenth of a run's steps (at least one step each): [0, k) and [n-k, n).
int tenth_of(int n_steps);

// 1 if the run has logged all its planned steps.
int run_complete(const Run *r);

// Display name and colour of an objective (the paper's: GRPO grey, Dr. GRPO dark red).
const char *objective_title(const char *preset);
const char *objective_color(const char *preset, int index);

// A group's display name, from one of its runs: objective_title of a plain preset; for the
// 2x2 of GRPO's two terms, runs of preset grpo or dr_grpo whose group adds only their
// objective.scale and/or objective.aggregation ("grpo_scale-none"), the corner of that 2x2
// by their knobs: "GRPO" (1/|o| aggregation seq_mean_token_mean, scale group_std), "1/|o| only"
// (seq_mean_token_mean, none), "std only" (seq_mean_token_sum_norm, group_std), "Dr. GRPO"
// (seq_mean_token_sum_norm, none); otherwise the label (Run.objective) itself.
const char *group_title(const Run *r);
// The colour of group index g with a run r: group_title's GRPO and Dr. GRPO take the paper's.
const char *group_color(const Run *r, int g);

// Groups runs by objective in order of first appearance: for each run its group index
// (group[i]); returns the number of groups; names[g] points into the runs.
int group_by_objective(Run *const *runs, int n, int *group, const char **names, int max_groups);

// The largest response budget (world.max_new_tokens) among the runs of group g (0: unknown).
int group_budget(Run *const *runs, int n, const int *group, int g);

// A note for a figure's title about runs that have not logged all their planned steps
// ("in progress or stopped early: fig5_grpo_s1.h5 at step 120 of 250"); "" if none.
void runs_progress_note(Run *const *runs, int n, char *note, size_t len);

#endif
