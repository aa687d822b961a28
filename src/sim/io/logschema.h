// logschema.h: every table a grpolab command writes into a run log (runlog.h), defined once.
//
// Each table is a TableSpec (name, what a row is, and per column: name, HDF5 type, unit,
// meaning, and its field in the table's row struct below). The writers fill the row structs
// by field name and append them with runlog_append_rows (trainlog.c, evaluate.c); the analysis
// (analysis/runs.c) reads columns by the names of these specs; docs/hdf5-schema.md's column
// lists are the output of `grpolab schema` (logschema_print_md), and a test keeps them equal.
// A column's name is its field's name and its type the field's type (logschema.c derives both),
// so adding a statistic is one field here and one line in logschema.c.
#ifndef GRPOLAB_LOGSCHEMA_H
#define GRPOLAB_LOGSCHEMA_H

#include <stdint.h>
#include <stdio.h>

#include "runlog.h"

// ---------------------------------------------------------------- `grpolab train` (kind "train")
typedef struct {  // /train, one row per RL step
    int32_t step;
    double reward_mean, length_mean, length_correct, length_incorrect;
    double truncation_rate, loop_rate, disagreement_rate, selfcheck_rate;
    double loss, grad_norm, clip_frac_low, clip_frac_high, kl, entropy, lr;
    int64_t tokens;
    double rollout_seconds, update_seconds, mixed_group_frac, bias_cosine;
} TrainRow;

typedef struct {  // /questions, one row per (step, prompt)
    int32_t step;
    int64_t question_index;
    int32_t level, group_size;
    double reward_mean, reward_std, mean_abs_advantage, sum_abs_weight;
} QuestionRow;

typedef struct {  // /responses, one row per response
    int32_t step;
    int64_t question_index;
    int32_t level, length, reward, correct, truncated;
    float advantage;
    int32_t self_checked, disagreement, looped, gave_up;
    int64_t token_offset;
} ResponseRow;

typedef struct {  // /tokens, one row per generated token: n values per column (ROW_POINTERS)
    const int32_t *step;
    const float *weight, *logp_old;
} TokenColumns;

typedef struct {  // /eval of a train log, one row per (evaluation, benchmark)
    int32_t step, bench;
    double accuracy, length_mean, length_correct, length_incorrect;
    int32_t n;
    double truncation_incorrect;
} TrainEvalRow;

// The counterfactual diagnostics of diagnostics.compare (compare.h): only in the logs of runs
// that set it. Each step evaluates the compared objectives at several points (the column
// `point`): COMPARE_POINT_RHO1, the first minibatch with the parameters before the update
// (every ratio 1); COMPARE_POINT_LAST, the update's last minibatch with the parameters before
// its optimizer step; COMPARE_POINT_EXTRA + k - 1, extra pass k = 1..diagnostics.
// compare_extra_epochs, the first minibatch's responses with the parameters after the update
// and k - 1 more epochs of the trained objective on a copy (compare.h).
enum { COMPARE_POINT_RHO1 = 0, COMPARE_POINT_LAST = 1, COMPARE_POINT_EXTRA = 2 };

typedef struct {  // /compare, one row per (step, point, compared objective)
    int32_t step, point, objective;
    double bias_cosine, grad_norm, sum_abs_weight_correct, sum_abs_weight_incorrect;
    double weighted_length_correct, weighted_length_incorrect;
    double clip_frac_low, clip_frac_high, gate_mean, abs_log_ratio;
} CompareRow;

typedef struct {  // /compare_bins, one row per (step, point, compared objective, length bin)
    int32_t step, point, objective, bin, length_lo, length_hi, n_correct, n_incorrect;
    double sum_abs_weight_correct, sum_abs_weight_incorrect, clip_frac, gate_mean;
} CompareBinRow;

// The name of a point (COMPARE_POINT_*) for figures and tables: "rho=1", "last minibatch",
// "extra pass k".
void compare_point_label(int point, char *buf, size_t len);

extern const TableSpec LOG_TRAIN, LOG_QUESTIONS, LOG_RESPONSES, LOG_TOKENS, LOG_TRAIN_EVAL;
extern const TableSpec LOG_COMPARE, LOG_COMPARE_BINS;

// ---------------------------------------------------------------- `grpolab eval --out` (kind "eval")
typedef struct {  // /eval of an eval log, one row per benchmark
    int32_t bench, n;
    double accuracy, length_mean, length_correct, length_incorrect, format_rate, truncation_rate;
    double truncation_incorrect;
} EvalBenchRow;

typedef struct {  // /responses of an eval log, one row per response
    int32_t bench, index, sample, level, length, reward, correct, format_ok, truncated;
    int32_t self_checked, disagreement, recovered, looped, gave_up;
} EvalResponseRow;

extern const TableSpec LOG_EVAL_BENCH, LOG_EVAL_RESPONSES;

// ---------------------------------------------------------------- the logs
typedef struct {
    const char *kind;     // the log's root attribute "kind"
    const char *command;  // the command that writes it, for the docs
    const TableSpec *const *tables;
    int n_tables;
    int n_always;  // tables[0 .. n_always) are in every log; the rest only where a setting asks
} LogKind;

extern const LogKind LOG_KIND_TRAIN, LOG_KIND_EVAL;
extern const LogKind *const LOG_KINDS[];
extern const int N_LOG_KINDS;

// The log kind named kind ("train", "eval"), or NULL.
const LogKind *logschema_kind(const char *kind);

// Declares the tables every log of kind k has (the first n_always) in rl (runlog_declare), in
// k's order. 0, or -1 with a message.
int logschema_declare(RunLog *rl, const LogKind *k, char *err, size_t errlen);

// The column lists of kind k's tables as Markdown (the blocks of docs/hdf5-schema.md): per
// table a line "`/name`, <rows>:" and a table | column | type | unit | meaning |.
void logschema_print_md(const LogKind *k, FILE *f);

#endif
