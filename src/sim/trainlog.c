// trainlog.c: the run log of `grpolab train` (trainlog.h).
#include "trainlog.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../common.h"

// ---------------------------------------------------------------- the tables
static const ColumnSpec TRAIN_COLS[] = {
    {"step", COL_I32, "RL step (0-based)"},
    {"reward_mean", COL_F64, "mean reward of the step's P*G responses"},
    {"length_mean", COL_F64, "mean response length, generated tokens (stop token included)"},
    {"length_correct", COL_F64, "mean length of responses with reward 1 (NaN if none)"},
    {"length_incorrect", COL_F64, "mean length of responses with reward 0 (NaN if none)"},
    {"truncation_rate", COL_F64, "share of responses cut by the budget (no stop)"},
    {"loop_rate", COL_F64, "share of responses flagged looped"},
    {"disagreement_rate", COL_F64, "share of responses with a visibly disagreeing check"},
    {"selfcheck_rate", COL_F64, "share of responses with at least one check"},
    {"loss", COL_F64, "objective L of a minibatch, mean over the step's minibatch updates"},
    {"grad_norm", COL_F64, "global grad norm before clipping, mean over the minibatch updates"},
    {"clip_frac_low", COL_F64, "share of updated tokens with A < 0 and rho < 1 - eps_low (all epochs)"},
    {"clip_frac_high", COL_F64, "share of updated tokens with A > 0 and rho > 1 + eps_high (all epochs)"},
    {"kl", COL_F64, "mean k3 KL to the reference model per updated token (0 if beta = 0)"},
    {"entropy", COL_F64, "mean policy entropy per updated token, nats"},
    {"lr", COL_F64, "learning rate"},
    {"tokens", COL_I64, "generated tokens of the step"},
    {"rollout_seconds", COL_F64, "wall time of sampling and scoring, s"},
    {"update_seconds", COL_F64, "wall time of the updates (old log-probs included), s"},
    {"mixed_group_frac", COL_F64, "share of groups whose rewards are not all equal"},
    {"bias_cosine", COL_F64, "cosine of the objective's first-minibatch gradient with the unbiased "
                             "policy gradient on the same responses (NaN: not computed)"},
};
enum { N_TRAIN_COLS = sizeof TRAIN_COLS / sizeof TRAIN_COLS[0] };
static const ColumnSpec QUESTION_COLS[] = {
    {"step", COL_I32, "RL step"},
    {"question_index", COL_I64, "index of the task in the training pool (step * P + p)"},
    {"level", COL_I32, "difficulty level 1..5"},
    {"group_size", COL_I32, "responses G"},
    {"reward_mean", COL_F64, "mean reward of the group"},
    {"reward_std", COL_F64, "std of the group's rewards (objective.std_ddof)"},
    {"mean_abs_advantage", COL_F64, "mean |A_i| over the group"},
    {"sum_abs_weight", COL_F64, "sum of |w| over the group's tokens (first-epoch weights)"},
};
enum { N_QUESTION_COLS = sizeof QUESTION_COLS / sizeof QUESTION_COLS[0] };
static const ColumnSpec RESPONSE_COLS[] = {
    {"step", COL_I32, "RL step"},
    {"question_index", COL_I64, "index of the task in the training pool"},
    {"level", COL_I32, "difficulty level 1..5"},
    {"length", COL_I32, "generated tokens, the stop token included"},
    {"reward", COL_I32, "verifier reward under world.reward_rule (0/1; 0 when truncated)"},
    {"correct", COL_I32, "extracted answer equals the truth, format aside"},
    {"truncated", COL_I32, "no stop within the budget"},
    {"advantage", COL_F32, "A_i"},
    {"self_checked", COL_I32, "at least one re-check of a step"},
    {"disagreement", COL_I32, "a re-check visibly disagreed"},
    {"looped", COL_I32, "repeated disagreeing re-checks of one step"},
    {"gave_up", COL_I32, "a quick guess after a disagreement"},
    {"token_offset", COL_I64, "row of the response's first token in /tokens"},
};
enum { N_RESPONSE_COLS = sizeof RESPONSE_COLS / sizeof RESPONSE_COLS[0] };
static const ColumnSpec TOKEN_COLS[] = {
    {"step", COL_I32, "RL step"},
    {"weight", COL_F32, "token weight w = -dL/dlog pi of its first-epoch update (0: not updated)"},
    {"logp_old", COL_F32, "log pi_old of the token, recomputed before the first update (NaN: response not updated)"},
};
enum { N_TOKEN_COLS = sizeof TOKEN_COLS / sizeof TOKEN_COLS[0] };
static const ColumnSpec EVAL_COLS[] = {
    {"step", COL_I32, "steps done before this greedy evaluation"},
    {"bench", COL_I32, "benchmark index (root attribute benchmarks lists the names)"},
    {"accuracy", COL_F64, "share of responses with reward 1"},
    {"length_mean", COL_F64, "mean response length, generated tokens"},
    {"length_correct", COL_F64, "mean length of correct responses (NaN if none)"},
    {"length_incorrect", COL_F64, "mean length of incorrect responses (NaN if none)"},
    {"n", COL_I32, "questions"},
};
enum { N_EVAL_COLS = sizeof EVAL_COLS / sizeof EVAL_COLS[0] };

int trainlog_declare(RunLog *rl, char *err, size_t errlen) {
    return runlog_add_table(rl, "train", TRAIN_COLS, N_TRAIN_COLS, 1024, 0, err, errlen) == 0 &&
                   runlog_add_table(rl, "questions", QUESTION_COLS, N_QUESTION_COLS, 4096, 0, err, errlen) == 0 &&
                   runlog_add_table(rl, "responses", RESPONSE_COLS, N_RESPONSE_COLS, 16384, 1, err, errlen) == 0 &&
                   runlog_add_table(rl, "tokens", TOKEN_COLS, N_TOKEN_COLS, 65536, 1, err, errlen) == 0 &&
                   runlog_add_table(rl, "eval", EVAL_COLS, N_EVAL_COLS, 1024, 0, err, errlen) == 0
               ? 0
               : -1;
}


// ---------------------------------------------------------------- a new run's log
static int set_root_attrs(RunLog *rl, const Config *cfg, const ObjectiveConfig *oc,
                          const TrainSettings *s, const char *backend, const ModelConfig *mc,
                          const char *init_fp, char *err, size_t errlen) {
    char *text = config_to_ini(cfg), when[64], names[512] = "";
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    for (int b = 0; b < world_num_benchmarks(); b++) {
        if (b) strncat(names, ",", sizeof names - strlen(names) - 1);
        strncat(names, world_benchmark_name(b), sizeof names - strlen(names) - 1);
    }
    int ok = runlog_set_attr_str(rl, "kind", "train", err, errlen) == 0 &&
             runlog_set_attr_str(rl, "config", text, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "seed", (int64_t)s->seed, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "backend", backend, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "train.micro_batch", s->micro, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "threads", omp_get_max_threads(), err, errlen) == 0 &&
             runlog_set_attr_str(rl, "start_time", when, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "init", s->init, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "init_fingerprint", init_fp, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "benchmarks", names, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "model.num_layers", mc->n_layers, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "model.d_model", mc->d_model, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "objective.preset", oc->preset, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "objective.baseline", baseline_name(oc->baseline), err, errlen) == 0 &&
             runlog_set_attr_str(rl, "objective.scale", scale_name(oc->scale), err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "objective.std_ddof", oc->std_ddof, err, errlen) == 0 &&
             runlog_set_attr_f64(rl, "objective.std_eps", oc->std_eps, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "objective.aggregation", aggregation_name(oc->aggregation), err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "objective.l_max", oc->l_max, err, errlen) == 0 &&
             runlog_set_attr_f64(rl, "objective.eps_low", oc->eps_low, err, errlen) == 0 &&
             runlog_set_attr_f64(rl, "objective.eps_high", oc->eps_high, err, errlen) == 0 &&
             runlog_set_attr_f64(rl, "objective.beta", oc->beta, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "objective.dynamic_sampling", oc->dynamic_sampling, err, errlen) == 0;
    free(text);
    return ok ? 0 : -1;
}

// Creates the directories above path (like mkdir -p of its parent). 0, or -1 with a message.
static int make_parent_dirs(const char *path, char *err, size_t errlen) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return set_err(err, errlen, "cannot create directory '%s' for '%s': %s", buf, path,
                           strerror(errno));
        *p = '/';
    }
    return 0;
}

RunLog *trainlog_create(const char *path, const Config *cfg, const ObjectiveConfig *oc,
                        const TrainSettings *S, const char *backend, const ModelConfig *mc,
                        const char *init_fp, char *err, size_t errlen) {
    RunLog *rl = make_parent_dirs(path, err, errlen) == 0 ? runlog_create(path, 1, err, errlen) : NULL;
    if (rl && set_root_attrs(rl, cfg, oc, S, backend, mc, init_fp, err, errlen) != 0) {
        runlog_close(rl, NULL, 0);
        return NULL;
    }
    return rl;
}

// ---------------------------------------------------------------- rows
static double safe_div(double a, double b) { return b > 0 ? a / b : NAN; }

void trainlog_train_row(TrainRow *row, int step, const TrainSettings *S, const RolloutStats *rs,
                        const UpdateStats *us, const ObjectiveConfig *oc, double lr,
                        double rollout_seconds, double update_seconds) {
    const int N = S->P * S->G, n_updates = us->n_updates;
    const long long upd_tok = us->tokens;
    row->step = step;
    row->reward_mean = rs->reward_sum / N;
    row->length_mean = rs->len_sum / N;
    row->length_correct = safe_div(rs->len_correct, rs->n_correct);
    row->length_incorrect = safe_div(rs->len_incorrect, N - rs->n_correct);
    row->truncation_rate = (double)rs->n_trunc / N;
    row->loop_rate = (double)rs->n_loop / N;
    row->disagreement_rate = (double)rs->n_dis / N;
    row->selfcheck_rate = (double)rs->n_check / N;
    row->loss = n_updates ? us->loss_sum / n_updates : 0;
    row->grad_norm = n_updates ? us->gnorm_sum / n_updates : 0;
    row->clip_frac_low = upd_tok ? (double)us->clipped_low / upd_tok : 0;
    row->clip_frac_high = upd_tok ? (double)us->clipped_high / upd_tok : 0;
    row->kl = oc->beta > 0 && upd_tok ? us->kl_sum / upd_tok : 0.0;
    row->entropy = us->entropy_tokens ? us->entropy_sum / us->entropy_tokens : NAN;
    row->lr = lr;
    row->tokens = rs->n_tok;
    row->rollout_seconds = rollout_seconds;
    row->update_seconds = update_seconds;
    row->mixed_group_frac = (double)rs->n_mixed / S->P;
    row->bias_cosine = us->cosine;
}

int trainlog_write_step(RunLog *rl, const TrainRow *row, const TrainSettings *S,
                        const TrainState *s, char *err, size_t errlen) {
    const int P = S->P, G = S->G, N = P * G, step = row->step;
    const Generation *gen = &s->gen;
    const void *trow[N_TRAIN_COLS] = {&row->step, &row->reward_mean, &row->length_mean,
                                      &row->length_correct, &row->length_incorrect,
                                      &row->truncation_rate, &row->loop_rate,
                                      &row->disagreement_rate, &row->selfcheck_rate, &row->loss,
                                      &row->grad_norm, &row->clip_frac_low, &row->clip_frac_high,
                                      &row->kl, &row->entropy, &row->lr, &row->tokens,
                                      &row->rollout_seconds, &row->update_seconds,
                                      &row->mixed_group_frac, &row->bias_cosine};
    int ok = runlog_append(rl, "train", 1, trow, err, errlen) == 0;
    for (int p = 0; ok && p < P; p++) {
        int64_t qi = (int64_t)step * P + p;
        double rm = s->gmean[p], rs = s->gstd[p], maa = 0, saw = 0;
        for (int g = 0; g < G; g++) {
            int i = p * G + g;
            maa += fabs(s->adv[i]) / G;
            for (int t = 0; t < gen->length[i]; t++) saw += fabs(s->weights[s->tok_off[i] + t]);
        }
        const void *qrow[N_QUESTION_COLS] = {&step, &qi, &s->tasks[p].level, &G, &rm, &rs, &maa, &saw};
        ok = runlog_append(rl, "questions", 1, qrow, err, errlen) == 0;
    }
    int64_t tok_base = runlog_rows(rl, "tokens");
    for (int i = 0; ok && i < N; i++) {
        int64_t qi = (int64_t)step * P + i / G, off = tok_base + s->tok_off[i];
        const Verdict *v = &s->verd[i];
        const void *rrow[N_RESPONSE_COLS] = {&step, &qi, &s->tasks[i / G].level, &gen->length[i],
                                             &v->reward, &v->correct, &v->truncated, &s->adv[i],
                                             &v->self_checked, &v->disagreement, &v->looped,
                                             &v->gave_up, &off};
        ok = runlog_append(rl, "responses", 1, rrow, err, errlen) == 0;
    }
    const void *krow[N_TOKEN_COLS] = {s->tok_step, s->weights, s->logp_old};
    if (ok) ok = runlog_append(rl, "tokens", s->rs.n_tok, krow, err, errlen) == 0;
    if (ok) ok = runlog_flush(rl, err, errlen) == 0;
    return ok ? 0 : -1;
}

int trainlog_write_eval(RunLog *rl, int step, const EvalResult *res, char *err, size_t errlen) {
    for (int b = 0; b < res->n_bench; b++) {
        const EvalStats *s = &res->bench[b];
        double acc = eval_accuracy(s), lm = safe_div(s->len_sum, s->n);
        double lc = safe_div(s->len_correct_sum, s->n_correct);
        double li = safe_div(s->len_incorrect_sum, s->n - s->n_correct);
        const void *row[N_EVAL_COLS] = {&step, &b, &acc, &lm, &lc, &li, &s->n};
        if (runlog_append(rl, "eval", 1, row, err, errlen) != 0) return -1;
    }
    fprintf(stderr, "train: eval at step %d: score %.4f", step, res->score);
    for (int b = 0; b < res->n_bench; b++)
        fprintf(stderr, "  %s %.3f", world_benchmark_name(b), eval_accuracy(&res->bench[b]));
    fprintf(stderr, "\n");
    return 0;
}
