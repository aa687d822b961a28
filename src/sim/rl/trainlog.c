// trainlog.c: the run log of `grpolab train` (trainlog.h).
#include "trainlog.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../../common.h"
#include "../../kernels/kernels.h"

// ---------------------------------------------------------------- the tables (logschema.h)
int trainlog_declare_compare(RunLog *rl, char *err, size_t errlen) {
    return runlog_declare(rl, &LOG_COMPARE, err, errlen) == 0 &&
                   runlog_declare(rl, &LOG_COMPARE_BINS, err, errlen) == 0
               ? 0
               : -1;
}

int trainlog_declare(RunLog *rl, int with_compare, char *err, size_t errlen) {
    if (logschema_declare(rl, &LOG_KIND_TRAIN, err, errlen) != 0) return -1;
    return with_compare ? trainlog_declare_compare(rl, err, errlen) : 0;
}

// ---------------------------------------------------------------- a new run's log
static int set_root_attrs(RunLog *rl, const Config *cfg, const ObjectiveConfig *oc,
                          const TrainSettings *s, const char *backend, const ModelConfig *mc,
                          const char *init_fp, const char *run_id, char *err, size_t errlen) {
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
             runlog_set_attr_i64(rl, SETTING_KEY(train, micro_batch), s->micro, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "threads", omp_get_max_threads(), err, errlen) == 0 &&
             runlog_set_attr_str(rl, "blas", backend_blas_config(), err, errlen) == 0 &&
             runlog_set_attr_str(rl, "start_time", when, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "init", s->init, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "init_fingerprint", init_fp, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "run_id", run_id, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "benchmarks", names, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, SETTING_KEY(model, n_layers), mc->n_layers, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, SETTING_KEY(model, d_model), mc->d_model, err, errlen) == 0;
    // the objective's knobs as the run uses them (the preset's where the config sets none)
    for (int i = 0; ok && i < objective_knob_count(); i++) {
        const char *text_value;
        double num;
        char kind;
        const char *key = objective_knob(i, oc, &kind, &text_value, &num);
        ok = (kind == 's'   ? runlog_set_attr_str(rl, key, text_value, err, errlen)
              : kind == 'f' ? runlog_set_attr_f64(rl, key, num, err, errlen)
                            : runlog_set_attr_i64(rl, key, (int64_t)num, err, errlen)) == 0;
    }
    ok = ok && (s->compare.n == 0 ||
                runlog_set_attr_str(rl, SETTING_KEY(diagnostics, compare), s->compare.names, err, errlen) == 0);
    free(text);
    return ok ? 0 : -1;
}

int trainlog_make_parent_dirs(const char *path, char *err, size_t errlen) {
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

RunLog *trainlog_create(const char *path, int overwrite, const Config *cfg, const ObjectiveConfig *oc,
                        const TrainSettings *S, const char *backend, const ModelConfig *mc,
                        const char *init_fp, const char *run_id, char *err, size_t errlen) {
    RunLog *rl = trainlog_make_parent_dirs(path, err, errlen) == 0 ? runlog_create(path, overwrite, err, errlen) : NULL;
    if (rl && set_root_attrs(rl, cfg, oc, S, backend, mc, init_fp, run_id, err, errlen) != 0) {
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
    int ok = runlog_append_rows(rl, &LOG_TRAIN, 1, row, err, errlen) == 0;
    for (int p = 0; ok && p < P; p++) {
        QuestionRow q = {.step = step, .question_index = (int64_t)step * P + p,
                         .level = s->tasks[p].level, .group_size = G,
                         .reward_mean = s->gmean[p], .reward_std = s->gstd[p]};
        for (int g = 0; g < G; g++) {
            int i = p * G + g;
            q.mean_abs_advantage += fabs(s->adv[i]) / G;
            for (int t = 0; t < gen->length[i]; t++) q.sum_abs_weight += fabs(s->weights[s->tok_off[i] + t]);
        }
        ok = runlog_append_rows(rl, &LOG_QUESTIONS, 1, &q, err, errlen) == 0;
    }
    int64_t tok_base = runlog_rows(rl, "tokens");
    for (int i = 0; ok && i < N; i++) {
        const Verdict *v = &s->verd[i];
        ResponseRow rr = {.step = step, .question_index = (int64_t)step * P + i / G,
                          .level = s->tasks[i / G].level, .length = gen->length[i],
                          .reward = v->reward, .correct = v->correct, .truncated = v->truncated,
                          .advantage = s->adv[i], .self_checked = v->self_checked,
                          .disagreement = v->disagreement, .looped = v->looped,
                          .gave_up = v->gave_up, .token_offset = tok_base + s->tok_off[i]};
        ok = runlog_append_rows(rl, &LOG_RESPONSES, 1, &rr, err, errlen) == 0;
    }
    TokenColumns tc = {.step = s->tok_step, .weight = s->weights, .logp_old = s->logp_old};
    if (ok) ok = runlog_append_columns(rl, &LOG_TOKENS, s->rs.n_tok, &tc, err, errlen) == 0;
    if (ok) ok = runlog_flush(rl, err, errlen) == 0;
    return ok ? 0 : -1;
}

int trainlog_write_eval(RunLog *rl, int step, const EvalResult *res, char *err, size_t errlen) {
    for (int b = 0; b < res->n_bench; b++) {
        const EvalStats *s = &res->bench[b];
        double acc = eval_accuracy(s), lm = safe_div(s->len_sum, s->n);
        double lc = safe_div(s->len_correct_sum, s->n_correct);
        double li = safe_div(s->len_incorrect_sum, s->n - s->n_correct);
        TrainEvalRow row = {.step = step, .bench = b, .accuracy = acc, .length_mean = lm,
                            .length_correct = lc, .length_incorrect = li, .n = s->n,
                            .truncation_incorrect = safe_div(s->n_truncated_incorrect, s->n - s->n_correct)};
        if (runlog_append_rows(rl, &LOG_TRAIN_EVAL, 1, &row, err, errlen) != 0) return -1;
    }
    fprintf(stderr, "train: eval at step %d: score %.4f", step, res->score);
    for (int b = 0; b < res->n_bench; b++)
        fprintf(stderr, "  %s %.3f", world_benchmark_name(b), eval_accuracy(&res->bench[b]));
    fprintf(stderr, "\n");
    return 0;
}
