// logschema.c: the run-log tables of logschema.h. The "doc" strings are stored in every log as
// the datasets' attribute "doc"; the units only go into the docs (`grpolab schema`).
#include "logschema.h"

#include <stddef.h>
#include <string.h>

// The ColType of an expression of type int32_t, int64_t, float or double (any other type does
// not compile). Qualified variants are listed for compilers that keep the qualifier.
#define COL_TYPE_OF(x)                                                                           \
    _Generic((x), int32_t: COL_I32, const int32_t: COL_I32, int64_t: COL_I64,                     \
             const int64_t: COL_I64, float: COL_F32, const float: COL_F32, double: COL_F64,       \
             const double: COL_F64)
// A column named as field f of row struct S, of f's type.
#define COL(S, f, unit, doc) {{#f, COL_TYPE_OF(((S *)0)->f), doc}, unit, offsetof(S, f)}
// A column named as pointer field f of S, of the type f points to (ROW_POINTERS).
#define PCOL(S, f, unit, doc) {{#f, COL_TYPE_OF(*((S *)0)->f), doc}, unit, offsetof(S, f)}
#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

// ---------------------------------------------------------------- `grpolab train`
static const TableColumn TRAIN_COLS[] = {
    COL(TrainRow, step, "", "RL step (0-based)"),
    COL(TrainRow, reward_mean, "", "mean reward of the step's P*G responses"),
    COL(TrainRow, length_mean, "tokens", "mean response length, generated tokens (stop token included)"),
    COL(TrainRow, length_correct, "tokens", "mean length of responses with reward 1 (NaN if none)"),
    COL(TrainRow, length_incorrect, "tokens", "mean length of responses with reward 0 (NaN if none)"),
    COL(TrainRow, truncation_rate, "fraction", "share of responses cut by the budget (no stop)"),
    COL(TrainRow, loop_rate, "fraction", "share of responses flagged looped"),
    COL(TrainRow, disagreement_rate, "fraction", "share of responses with a visibly disagreeing check"),
    COL(TrainRow, selfcheck_rate, "fraction", "share of responses with at least one check"),
    COL(TrainRow, loss, "", "objective L of a minibatch, mean over the step's minibatch updates"),
    COL(TrainRow, grad_norm, "", "global grad norm before clipping, mean over the minibatch updates"),
    COL(TrainRow, clip_frac_low, "fraction", "share of updated tokens with A < 0 and rho < 1 - eps_low (all epochs)"),
    COL(TrainRow, clip_frac_high, "fraction", "share of updated tokens with A > 0 and rho > 1 + eps_high (all epochs)"),
    COL(TrainRow, kl, "nats", "mean k3 KL to the reference model per updated token (0 if beta = 0)"),
    COL(TrainRow, entropy, "nats", "mean policy entropy per updated token, nats"),
    COL(TrainRow, lr, "", "learning rate"),
    COL(TrainRow, tokens, "tokens", "generated tokens of the step"),
    COL(TrainRow, rollout_seconds, "s", "wall time of sampling and scoring, s"),
    COL(TrainRow, update_seconds, "s", "wall time of the updates (old log-probs included), s"),
    COL(TrainRow, mixed_group_frac, "fraction", "share of groups whose rewards are not all equal"),
    COL(TrainRow, bias_cosine, "", "cosine of the objective's first-minibatch gradient with the unbiased "
                                   "policy gradient on the same responses (NaN: not computed)"),
};
const TableSpec LOG_TRAIN = {"train", "one row per RL step", TRAIN_COLS, N_OF(TRAIN_COLS),
                             ROW_STRUCT, sizeof(TrainRow), 1024, 0};

static const TableColumn QUESTION_COLS[] = {
    COL(QuestionRow, step, "", "RL step"),
    COL(QuestionRow, question_index, "", "index of the task in the training pool (step * P + p)"),
    COL(QuestionRow, level, "", "difficulty level 1..5"),
    COL(QuestionRow, group_size, "responses", "responses G"),
    COL(QuestionRow, reward_mean, "", "mean reward of the group"),
    COL(QuestionRow, reward_std, "", "std of the group's rewards (objective.std_ddof)"),
    COL(QuestionRow, mean_abs_advantage, "", "mean |A_i| over the group"),
    COL(QuestionRow, sum_abs_weight, "", "sum of |w| over the group's tokens (first-epoch weights)"),
};
const TableSpec LOG_QUESTIONS = {"questions", "one row per (step, prompt)", QUESTION_COLS,
                                 N_OF(QUESTION_COLS), ROW_STRUCT, sizeof(QuestionRow), 4096, 0};

static const TableColumn RESPONSE_COLS[] = {
    COL(ResponseRow, step, "", "RL step"),
    COL(ResponseRow, question_index, "", "index of the task in the training pool"),
    COL(ResponseRow, level, "", "difficulty level 1..5"),
    COL(ResponseRow, length, "tokens", "generated tokens, the stop token included"),
    COL(ResponseRow, reward, "0/1", "verifier reward under world.reward_rule (0/1; 0 when truncated)"),
    COL(ResponseRow, correct, "0/1", "extracted answer equals the truth, format aside"),
    COL(ResponseRow, truncated, "0/1", "no stop within the budget"),
    COL(ResponseRow, advantage, "", "A_i"),
    COL(ResponseRow, self_checked, "0/1", "at least one re-check of a step"),
    COL(ResponseRow, disagreement, "0/1", "a re-check visibly disagreed"),
    COL(ResponseRow, looped, "0/1", "repeated disagreeing re-checks of one step"),
    COL(ResponseRow, gave_up, "0/1", "a quick guess after a disagreement"),
    COL(ResponseRow, token_offset, "", "row of the response's first token in /tokens"),
};
const TableSpec LOG_RESPONSES = {"responses", "one row per response", RESPONSE_COLS,
                                 N_OF(RESPONSE_COLS), ROW_STRUCT, sizeof(ResponseRow), 16384, 1};

static const TableColumn TOKEN_COLS[] = {
    PCOL(TokenColumns, step, "", "RL step"),
    PCOL(TokenColumns, weight, "", "token weight w = -dL/dlog pi of its first-epoch update (0: not updated)"),
    PCOL(TokenColumns, logp_old, "nats", "log pi_old of the token, recomputed before the first update (NaN: response not updated)"),
};
const TableSpec LOG_TOKENS = {"tokens", "one row per generated token", TOKEN_COLS, N_OF(TOKEN_COLS),
                              ROW_POINTERS, sizeof(TokenColumns), 65536, 1};

static const TableColumn TRAIN_EVAL_COLS[] = {
    COL(TrainEvalRow, step, "", "steps done before this greedy evaluation"),
    COL(TrainEvalRow, bench, "", "benchmark index (root attribute benchmarks lists the names)"),
    COL(TrainEvalRow, accuracy, "fraction", "share of responses with reward 1"),
    COL(TrainEvalRow, length_mean, "tokens", "mean response length, generated tokens"),
    COL(TrainEvalRow, length_correct, "tokens", "mean length of correct responses (NaN if none)"),
    COL(TrainEvalRow, length_incorrect, "tokens", "mean length of incorrect responses (NaN if none)"),
    COL(TrainEvalRow, n, "questions", "questions"),
    COL(TrainEvalRow, truncation_incorrect, "fraction", "share of the incorrect responses (reward 0) cut by the budget "
                                                        "(no stop; NaN if none is incorrect)"),
};
const TableSpec LOG_TRAIN_EVAL = {"eval", "one row per (evaluation, benchmark)", TRAIN_EVAL_COLS,
                                  N_OF(TRAIN_EVAL_COLS), ROW_STRUCT, sizeof(TrainEvalRow), 1024, 0};

// ---------------------------------------------------------------- `grpolab eval --out`
static const TableColumn EVAL_BENCH_COLS[] = {
    COL(EvalBenchRow, bench, "", "benchmark index (attribute benchmarks lists the names)"),
    COL(EvalBenchRow, n, "questions", "questions"),
    COL(EvalBenchRow, accuracy, "fraction", "share of responses with reward 1"),
    COL(EvalBenchRow, length_mean, "tokens", "mean response length, generated tokens"),
    COL(EvalBenchRow, length_correct, "tokens", "mean length of correct responses (NaN if none)"),
    COL(EvalBenchRow, length_incorrect, "tokens", "mean length of incorrect responses (NaN if none)"),
    COL(EvalBenchRow, format_rate, "fraction", "share of responses in the template's format"),
    COL(EvalBenchRow, truncation_rate, "fraction", "share of responses that ran into the budget"),
    COL(EvalBenchRow, truncation_incorrect, "fraction", "share of the incorrect responses (reward 0) that ran into "
                                                        "the budget (NaN if none is incorrect)"),
};
const TableSpec LOG_EVAL_BENCH = {"eval", "one row per benchmark", EVAL_BENCH_COLS,
                                  N_OF(EVAL_BENCH_COLS), ROW_STRUCT, sizeof(EvalBenchRow), 64, 0};

static const TableColumn EVAL_RESPONSE_COLS[] = {
    COL(EvalResponseRow, bench, "", "benchmark index"),
    COL(EvalResponseRow, index, "", "question index within the benchmark"),
    COL(EvalResponseRow, sample, "", "sample 0 .. samples - 1 of the question (root attribute samples; 0 when greedy)"),
    COL(EvalResponseRow, level, "", "difficulty level 1..5, 0 for the out-of-distribution benchmarks"),
    COL(EvalResponseRow, length, "tokens", "generated tokens, the stop token included"),
    COL(EvalResponseRow, reward, "0/1", "verifier reward (0/1)"),
    COL(EvalResponseRow, correct, "0/1", "final answer equals the truth, format aside"),
    COL(EvalResponseRow, format_ok, "0/1", "the template's format was followed"),
    COL(EvalResponseRow, truncated, "0/1", "no stop within the budget"),
    COL(EvalResponseRow, self_checked, "0/1", "at least one re-check of a step"),
    COL(EvalResponseRow, disagreement, "0/1", "a re-check visibly disagreed"),
    COL(EvalResponseRow, recovered, "0/1", "after a disagreement, redone and correct"),
    COL(EvalResponseRow, looped, "0/1", "repeated disagreeing re-checks of one step"),
    COL(EvalResponseRow, gave_up, "0/1", "a quick guess after a disagreement"),
};
const TableSpec LOG_EVAL_RESPONSES = {"responses", "one row per response", EVAL_RESPONSE_COLS,
                                      N_OF(EVAL_RESPONSE_COLS), ROW_STRUCT, sizeof(EvalResponseRow),
                                      4096, 1};

static const TableColumn COMPARE_COLS[] = {
    COL(CompareRow, step, "", "RL step"),
    COL(CompareRow, point, "", "where the objectives are evaluated: 0 = rho=1 (the first minibatch, parameters before "
                               "the update), 1 = last minibatch (the update's last, parameters before its optimizer "
                               "step), 1 + k = extra pass k (the first minibatch's responses, parameters after the "
                               "update and k - 1 more epochs on a copy)"),
    COL(CompareRow, objective, "", "index into the root attribute diagnostics.compare (the presets compared)"),
    COL(CompareRow, bias_cosine, "", "cosine of the objective's gradient on the point's minibatch with the unbiased "
                                     "policy gradient (same responses, same parameters; NaN: not computed)"),
    COL(CompareRow, grad_norm, "", "L2 norm of that gradient"),
    COL(CompareRow, sum_abs_weight_correct, "", "sum of |w| over the tokens of the minibatch's responses with reward > 0"),
    COL(CompareRow, sum_abs_weight_incorrect, "", "sum of |w| over the tokens of its responses with reward 0"),
    COL(CompareRow, weighted_length_correct, "tokens", "mean length of the correct responses weighted by their "
                                                       "sum of |w| (NaN if all 0)"),
    COL(CompareRow, weighted_length_incorrect, "tokens", "the same for the incorrect responses"),
    COL(CompareRow, clip_frac_low, "fraction", "share of the minibatch's policy tokens whose ratio the objective holds "
                                               "at its lower bound (as /train/clip_frac_low)"),
    COL(CompareRow, clip_frac_high, "fraction", "share held at the upper bound"),
    COL(CompareRow, gate_mean, "", "mean of w / (c_i A_i) over the policy tokens of responses with A_i != 0: what the "
                                   "objective passes of the advantage (1 at rho = 1; 0 where a clip stops the token)"),
    COL(CompareRow, abs_log_ratio, "nats", "mean |log pi_theta - log pi_old| over the minibatch's policy tokens "
                                           "(how far off-policy the point is; the same for every objective)"),
};
const TableSpec LOG_COMPARE = {"compare", "one row per (step, point, compared objective); only with "
                               "diagnostics.compare", COMPARE_COLS, N_OF(COMPARE_COLS), ROW_STRUCT,
                               sizeof(CompareRow), 1024, 0};

static const TableColumn COMPARE_BIN_COLS[] = {
    COL(CompareBinRow, step, "", "RL step"),
    COL(CompareBinRow, point, "", "as /compare/point"),
    COL(CompareBinRow, objective, "", "index into diagnostics.compare"),
    COL(CompareBinRow, bin, "", "response-length bin 0 .. diagnostics.length_bins - 1"),
    COL(CompareBinRow, length_lo, "tokens", "shortest length in the bin"),
    COL(CompareBinRow, length_hi, "tokens", "longest length in the bin"),
    COL(CompareBinRow, n_correct, "responses", "responses of the point's minibatch in the bin with reward > 0"),
    COL(CompareBinRow, n_incorrect, "responses", "those with reward 0"),
    COL(CompareBinRow, sum_abs_weight_correct, "", "sum of |w| over the bin's correct responses' tokens"),
    COL(CompareBinRow, sum_abs_weight_incorrect, "", "sum of |w| over the bin's incorrect responses' tokens"),
    COL(CompareBinRow, clip_frac, "fraction", "share of the bin's policy tokens held at a bound of the clip (low + high; "
                                              "NaN: no tokens)"),
    COL(CompareBinRow, gate_mean, "", "/compare/gate_mean over the bin's tokens (NaN: none with A_i != 0)"),
};
const TableSpec LOG_COMPARE_BINS = {"compare_bins", "one row per (step, point, compared objective, length bin); "
                                    "only with diagnostics.compare", COMPARE_BIN_COLS, N_OF(COMPARE_BIN_COLS),
                                    ROW_STRUCT, sizeof(CompareBinRow), 4096, 0};

void compare_point_label(int point, char *buf, size_t len) {
    if (point == COMPARE_POINT_RHO1) snprintf(buf, len, "rho=1");
    else if (point == COMPARE_POINT_LAST) snprintf(buf, len, "last minibatch");
    else snprintf(buf, len, "extra pass %d", point - COMPARE_POINT_EXTRA + 1);
}

// ---------------------------------------------------------------- the logs
static const TableSpec *const TRAIN_TABLES[] = {&LOG_TRAIN, &LOG_QUESTIONS, &LOG_RESPONSES, &LOG_TOKENS,
                                                &LOG_TRAIN_EVAL, &LOG_COMPARE, &LOG_COMPARE_BINS};
const LogKind LOG_KIND_TRAIN = {"train", "grpolab train --out RUN.h5", TRAIN_TABLES, N_OF(TRAIN_TABLES), 5};
static const TableSpec *const EVAL_TABLES[] = {&LOG_EVAL_BENCH, &LOG_EVAL_RESPONSES};
const LogKind LOG_KIND_EVAL = {"eval", "grpolab eval --out FILE.h5", EVAL_TABLES, N_OF(EVAL_TABLES),
                               N_OF(EVAL_TABLES)};

const LogKind *const LOG_KINDS[] = {&LOG_KIND_TRAIN, &LOG_KIND_EVAL};
const int N_LOG_KINDS = N_OF(LOG_KINDS);

const LogKind *logschema_kind(const char *kind) {
    for (int i = 0; kind && i < N_LOG_KINDS; i++)
        if (strcmp(LOG_KINDS[i]->kind, kind) == 0) return LOG_KINDS[i];
    return NULL;
}

int logschema_declare(RunLog *rl, const LogKind *k, char *err, size_t errlen) {
    for (int i = 0; i < k->n_always; i++)
        if (runlog_declare(rl, k->tables[i], err, errlen) != 0) return -1;
    return 0;
}

// s with every '|' escaped, so that it stays in its Markdown table cell.
static void put_cell(const char *s, FILE *f) {
    for (; s && *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s, f);
    }
}

void logschema_print_md(const LogKind *k, FILE *f) {
    static const char *const type_names[] = {"int32", "int64", "float32", "float64"};
    for (int i = 0; i < k->n_tables; i++) {
        const TableSpec *t = k->tables[i];
        fprintf(f, "%s`/%s`, %s:\n\n| column | type | unit | meaning |\n|---|---|---|---|\n",
                i ? "\n" : "", t->name, t->rows);
        for (int c = 0; c < t->n_cols; c++) {
            const TableColumn *col = &t->cols[c];
            fprintf(f, "| %s | %s | ", col->spec.name, type_names[col->spec.type]);
            put_cell(col->unit && col->unit[0] ? col->unit : "-", f);
            fprintf(f, " | ");
            put_cell(col->spec.doc, f);
            fprintf(f, " |\n");
        }
    }
}
