// evaluate.h: the five held-out benchmarks (world.h) run through the sampler and scored by
// the verifier (template.h). Used by `grpolab eval` and by the trainer's periodic eval.
// The benchmark score is the unweighted mean of the five accuracies, as in the paper.
#ifndef GRPOLAB_EVALUATE_H
#define GRPOLAB_EVALUATE_H

#include <stdint.h>
#include <stdio.h>

#include "../io/logschema.h"
#include "../model/model.h"
#include "../model/sampler.h"
#include "../world/template.h"
#include "../world/tokenizer.h"
#include "../world/world.h"

#define EVAL_MAX_BENCH 8
#define EVAL_MAX_SAMPLES 4095  // EvalConfig.samples: sample k takes 12 bits of the stream id

typedef struct {
    int n;                          // responses
    int n_correct;                  // reward 1
    int n_format, n_truncated;
    int n_truncated_incorrect;      // truncated responses with reward 0
    double len_sum, len_correct_sum, len_incorrect_sum;  // generated tokens
    int n_self_checked, n_disagreement, n_recovered, n_looped, n_gave_up;
    int level_n[WORLD_NUM_LEVELS + 1], level_correct[WORLD_NUM_LEVELS + 1];  // index = level (0: ood)
} EvalStats;

// Why responses fail, by level (index = level, 0: ood), for `grpolab eval --failure-profile`
// (template_failure_kind: the first false step a gap fact or a slip; redos after
// disagreements with a false step, [0] slips, [1] gaps).
typedef struct {
    int n[WORLD_NUM_LEVELS + 1];
    int kind[WORLD_NUM_LEVELS + 1][4];  // by FailKind (FAIL_NONE: reward 1)
    int disagree[WORLD_NUM_LEVELS + 1][2], redos[WORLD_NUM_LEVELS + 1][2],
        redos_right[WORLD_NUM_LEVELS + 1][2], redos_same[WORLD_NUM_LEVELS + 1][2];
} FailureProfile;

typedef struct {
    int n_bench;
    EvalStats bench[EVAL_MAX_BENCH];  // bench[n_bench]: the training-pool sample, if any
    int has_pool;
    double score;  // unweighted mean accuracy over the benchmarks (the pool not included)
    int stopped;   // 1: EvalConfig.after_batch stopped it; the statistics are of the questions
                   // done, the score is not set
    FailureProfile profile;  // when EvalConfig.gaps: of the training-pool sample if any, else
                             // of the benchmarks
} EvalResult;

// One evaluated response: a row of the eval log's /responses (logschema.h).
typedef EvalResponseRow EvalRecord;

typedef struct {
    Template template_kind;
    RewardRule reward_rule; // world.reward_rule (REWARD_OUTCOME when zeroed)
    SamplerConfig sampler;  // temperature 0 for greedy
    uint64_t world_seed;    // the benchmarks' seed
    int batch;              // sequences generated together
    int limit;              // if > 0, at most this many questions per benchmark (quick runs)
    int samples;            // responses per question (<= 1: one); sample k of question j of
                            // benchmark b draws from the sampler's stream (b << 32 | k << 20 | j),
                            // so sample 0 is the response of a one-sample evaluation
    const char *source_run; // eval_write_hdf5: the root attributes run (the train log whose
    int64_t source_step;    // final policy this is), step (its steps) and run_id (the log's;
    const char *source_run_id;  // NULL: none); source_run NULL: none of them written
    int train_pool;         // if > 0, also this many training-pool questions (reported apart)
    uint64_t pool_seed;     // the training pool's seed (run.seed)
    int progress;           // print a progress line per benchmark to stderr
    int show;               // print the first `show` responses of each benchmark to stdout
    const WorldGaps *gaps;  // if not NULL, the failure profile against this gap table
    // records[0 .. resume_from) hold the responses of an earlier run of the same evaluation
    // (eval --resume; eval_check_records vouches for them): counted in the result, not
    // generated again (nor shown, nor in the failure profile)
    int resume_from;
    // if not NULL, called after each batch with the records so far (NULL where the caller
    // keeps none) and their count; nonzero stops the evaluation there (EvalResult.stopped)
    int (*after_batch)(void *ctx, const EvalRecord *records, int n_records);
    void *after_batch_ctx;
    // stored in the file by eval_write_hdf5 (NULL: not stored): the resolved config and the
    // fingerprint of the model's weights, which eval --resume compares
    const char *config_text, *model_fingerprint;
    const char *model_config;  // the evaluated checkpoint's stored config (NULL: none), written
                               // by eval_write_hdf5 as the attribute model_config
} EvalConfig;

// Checks every prompt evaluate_benchmarks will generate for (each benchmark up to cfg->limit
// questions, then the training-pool sample): it can be templated and tokenized, and it fits
// model.max_seq_len together with cfg->sampler.max_new_tokens. 0, or -1 with a message that
// names the first question that does not ("eval: hard30 #4 ('...'): a prompt of ...").
int eval_check_prompts(const Model *m, const Tokenizer *tk, const EvalConfig *cfg, char *err,
                       size_t errlen);

// Runs every benchmark (call eval_check_prompts first: a prompt that does not fit is a fatal
// error here). records (optional, NULL) receives one row per response; *n_records
// its count (the caller allocates eval_num_responses(cfg) rows: questions x samples).
void evaluate_benchmarks(Model *m, const Tokenizer *tk, const EvalConfig *cfg, EvalResult *out,
                         EvalRecord *records, int *n_records);
int eval_num_questions(const EvalConfig *cfg);
// The responses: eval_num_questions x samples (what records must hold).
int eval_num_responses(const EvalConfig *cfg);
// Checks that records[0 .. n) are the responses evaluate_benchmarks writes first under cfg
// (benchmark and question index in its order) and end at a batch boundary, so that an
// evaluation can go on after them. 0, or -1 with a message naming the first row that is not.
int eval_check_records(const EvalConfig *cfg, const EvalRecord *records, int n, char *err,
                       size_t errlen);
// Prints the table of `grpolab eval` (accuracy, lengths, format and truncation rates,
// accuracy per level, behaviour shares) for each benchmark and the score.
void eval_print_table(const EvalResult *r, FILE *f);

// Prints the failure profile of r (EvalConfig.gaps set): per level, the share of failures
// whose first false step is a gap fact, a slip, or that have none, and per kind how often a
// disagreement is followed by a redo of the step and how often that redo is right; last the
// redos and the right ones over every level and both kinds (eval_profile_redos).
void eval_print_failure_profile(const EvalResult *r, FILE *f);
// The redos after a disagreement with a false step, over every level and both kinds, and how
// many of them are right: the chance that a redo after a rejected step is right.
void eval_profile_redos(const FailureProfile *p, int *redos, int *right);

// The file of an evaluation stopped after n_recs responses (complete = 0, no /eval rows), as
// eval_write_hdf5 writes it.
int eval_write_partial(const char *path, const char *model_path, const EvalConfig *cfg,
                       const EvalRecord *recs, int n_recs, char *err, size_t errlen);
// Reads the file of an evaluation to go on with (eval --resume) after checking that it was
// made with cfg's settings (template, temperature, top_p, max_new_tokens, world_seed, limit,
// train_pool, batch), config (but run.threads and run.backend) and model_fingerprint: its
// responses into recs (cap rows) as *n rows (eval_check_records vouches for them). 0; 1 if
// the file is complete (nothing to do); -1 with a message that starts "--resume: " and names
// the file and what differs.
int eval_read_partial(const char *path, const EvalConfig *cfg, EvalRecord *recs, int cap, int *n,
                      char *err, size_t errlen);

double eval_accuracy(const EvalStats *s);

// Writes the result as an HDF5 run log of kind "eval" (logschema.h LOG_KIND_EVAL): /eval one
// row per benchmark, /responses one row per response; root attributes name the model and the
// settings, hold the model's stored config (cfg->model_config) and, with cfg->gaps (and no
// resumed responses), the failure profile's redo counts (eval_profile_redos: profile_redos,
// profile_redos_right), and
// `complete` says whether every question was evaluated (0: r->stopped, the file holds the
// responses done and no /eval rows; eval --resume completes it). Written to "<path>.tmp" and
// renamed onto path: path holds a whole file, this one or the one before.
int eval_write_hdf5(const char *path, const char *model_path, const EvalConfig *cfg,
                    const EvalResult *r, const EvalRecord *recs, int n_recs, char *err,
                    size_t errlen);

#endif
