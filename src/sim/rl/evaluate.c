#include "evaluate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common.h"
#include "../io/config.h"
#include "../io/h5util.h"
#include "../io/runlog.h"

double eval_accuracy(const EvalStats *s) { return s->n ? (double)s->n_correct / s->n : 0.0; }

// The name of benchmark b, or "train_pool" for the training-pool sample (b == n_bench).
static const char *bench_label(int b, int n_bench) {
    return b == n_bench ? "train_pool" : world_benchmark_name(b);
}

// Question j of benchmark b (the training-pool sample when pool): its task, and its prompt's
// token ids in ids[0..cap). The prompt's length, or -1 with a message naming the question.
static int eval_prompt(const Tokenizer *tk, const EvalConfig *cfg, int b, int pool, int j, Task *t,
                       int *ids, int cap, char *err, size_t errlen) {
    char text[1024], why[256];
    if (pool) world_train_task(cfg->pool_seed, j, t);
    else world_benchmark_task(cfg->world_seed, b, j, t);
    if (template_prompt(cfg->template_kind, t, text, sizeof text) < 0)
        return set_err(err, errlen, "the prompt of '%s' is longer than %zu characters", t->question,
                       sizeof text);
    int n = tok_encode(tk, text, ids, cap, why, sizeof why);
    if (n < 0) return set_err(err, errlen, "cannot tokenize the prompt of '%s': %s", t->question, why);
    return n;
}

// How many questions of benchmark b (b == n_bench: the training-pool sample) are evaluated.
static int eval_size(const EvalConfig *cfg, int b, int n_bench) {
    if (b == n_bench) return cfg->train_pool;
    int size = world_benchmark_size(b);
    return cfg->limit > 0 && cfg->limit < size ? cfg->limit : size;
}

static int eval_num_benchmarks(void) {
    int n = world_num_benchmarks();
    return n > EVAL_MAX_BENCH - 1 ? EVAL_MAX_BENCH - 1 : n;
}

int eval_num_questions(const EvalConfig *cfg) {
    int n_bench = eval_num_benchmarks(), total = 0;
    for (int b = 0; b < n_bench + (cfg->train_pool > 0); b++) total += eval_size(cfg, b, n_bench);
    return total;
}

static int eval_samples(const EvalConfig *cfg) { return cfg->samples > 1 ? cfg->samples : 1; }

int eval_num_responses(const EvalConfig *cfg) { return eval_num_questions(cfg) * eval_samples(cfg); }

int eval_check_prompts(const Model *m, const Tokenizer *tk, const EvalConfig *cfg, char *err,
                       size_t errlen) {
    int n_bench = eval_num_benchmarks(), cap = model_config(m)->max_seq_len;
    int *ids = xmalloc((size_t)cap * sizeof(int)), rc = 0;
    char why[384];
    for (int b = 0; b < n_bench + (cfg->train_pool > 0) && rc == 0; b++) {
        int size = eval_size(cfg, b, n_bench);
        for (int j = 0; j < size && rc == 0; j++) {
            Task t;
            int n = eval_prompt(tk, cfg, b, b == n_bench, j, &t, ids, cap, why, sizeof why);
            if (n >= 0 && sampler_fits(m, &cfg->sampler, n, why, sizeof why) == 0) continue;
            rc = set_err(err, errlen, "eval: %s #%d ('%s'): %s", bench_label(b, n_bench), j, t.question, why);
        }
    }
    free(ids);
    return rc;
}

static void profile_add(FailureProfile *p, int lv, const char *resp, int reward, const WorldGaps *g) {
    FailureKind fk;
    template_failure_kind(resp, reward, g, &fk);
    p->n[lv]++;
    p->kind[lv][fk.kind]++;
    for (int k = 0; k < 2; k++) {
        p->disagree[lv][k] += fk.disagree[k];
        p->redos[lv][k] += fk.redos[k];
        p->redos_right[lv][k] += fk.redos_right[k];
        p->redos_same[lv][k] += fk.redos_same[k];
    }
}

// Counts one evaluated response in st.
static void stats_add(EvalStats *st, const EvalRecord *r) {
    st->n++;
    st->n_correct += r->reward;
    st->n_format += r->format_ok;
    st->n_truncated += r->truncated;
    st->n_truncated_incorrect += r->truncated && !r->reward;
    st->len_sum += r->length;
    if (r->reward) st->len_correct_sum += r->length;
    else st->len_incorrect_sum += r->length;
    st->n_self_checked += r->self_checked;
    st->n_disagreement += r->disagreement;
    st->n_recovered += r->recovered;
    st->n_looped += r->looped;
    st->n_gave_up += r->gave_up;
    int lv = r->level >= 0 && r->level <= WORLD_NUM_LEVELS ? r->level : 0;
    st->level_n[lv]++;
    st->level_correct[lv] += r->reward;
}

static int eval_batch_size(const EvalConfig *cfg) { return cfg->batch > 0 ? cfg->batch : 64; }

int eval_check_records(const EvalConfig *cfg, const EvalRecord *records, int n, char *err,
                       size_t errlen) {
    int n_bench = eval_num_benchmarks(), batch = eval_batch_size(cfg), k = 0;
    for (int b = 0; b < n_bench + (cfg->train_pool > 0); b++) {
        int size = eval_size(cfg, b, n_bench);
        for (int s = 0; s < eval_samples(cfg); s++)
        for (int j = 0; j < size; j++, k++) {
            if (k == n) {
                if (j % batch == 0) return 0;
                return set_err(err, errlen, "the %d responses end inside a batch of %d questions "
                               "(%s #%d): not where an evaluation stops", n, batch,
                               bench_label(b, n_bench), j);
            }
            if (records[k].bench != b || records[k].index != j || records[k].sample != s)
                return set_err(err, errlen, "response row %d is of benchmark %d question %d sample %d, "
                               "expected %s (benchmark %d) question %d sample %d", k, records[k].bench,
                               records[k].index, records[k].sample, bench_label(b, n_bench), b, j, s);
        }
    }
    if (k != n)
        return set_err(err, errlen, "%d response rows, more than the %d questions of this "
                       "evaluation", n, k);
    return 0;
}

void evaluate_benchmarks(Model *m, const Tokenizer *tk, const EvalConfig *cfg, EvalResult *out,
                         EvalRecord *records, int *n_records) {
    memset(out, 0, sizeof *out);
    int n_bench = eval_num_benchmarks();
    out->n_bench = n_bench;
    out->has_pool = cfg->train_pool > 0;
    int max_new = cfg->sampler.max_new_tokens, batch = eval_batch_size(cfg);
    int max_len = model_config(m)->max_seq_len;
    int *prompts = xmalloc((size_t)batch * max_len * sizeof(int));
    int *plen = xmalloc((size_t)batch * sizeof(int));
    Task *tasks = xmalloc((size_t)batch * sizeof(Task));
    Generation g;
    generation_alloc(&g, batch, max_new);
    char err[512];
    char *resp = xmalloc((size_t)max_new * 16 + 16);
    int nrec = 0;
    for (int b = 0; b < n_bench + out->has_pool; b++) {
        int pool = b == n_bench;  // the training-pool sample comes last
        int size = eval_size(cfg, b, n_bench);
        EvalStats *st = &out->bench[b];
        double t0 = wall_time();
        for (int k = 0; k < eval_samples(cfg) && !out->stopped; k++)
        for (int j0 = 0; j0 < size && !out->stopped; j0 += batch) {
            int n = size - j0 < batch ? size - j0 : batch, T = 1;
            if (nrec + n <= cfg->resume_from) {  // evaluated before: counted, not generated
                for (int i = 0; i < n; i++, nrec++) stats_add(st, &records[nrec]);
                continue;
            }
            for (int i = 0; i < n; i++) {
                // eval_check_prompts has vouched for every prompt: a failure here is a bug
                plen[i] = eval_prompt(tk, cfg, b, pool, j0 + i, &tasks[i], prompts + (size_t)i * max_len,
                                      max_len, err, sizeof err);
                if (plen[i] < 0) die("eval: %s", err);
                if (plen[i] > T) T = plen[i];
            }
            // repack to stride T
            for (int i = 1; i < n; i++)
                memmove(prompts + (size_t)i * T, prompts + (size_t)i * max_len, (size_t)plen[i] * sizeof(int));
            sampler_generate(m, &cfg->sampler, prompts, plen, n, T,
                             ((uint64_t)b << 32) | ((uint64_t)k << 20) | (uint64_t)j0, &g);
            for (int i = 0; i < n; i++) {
                int len = g.length[i];
                if (tok_decode(tk, g.tokens + (size_t)i * g.max_new, len, resp, (size_t)max_new * 16 + 16) < 0)
                    die("eval: cannot decode a response");
                Verdict v;
                verify_response(cfg->template_kind, &tasks[i], resp, g.stopped[i], &v);
                verdict_apply_rule(&v, resp, cfg->reward_rule);
                if (st->n < cfg->show)
                    printf("[%s #%d level %d] %s = %lld -> reward %d%s%s\n  %s\n",
                           bench_label(b, n_bench), j0 + i, tasks[i].level,
                           tasks[i].question, (long long)tasks[i].answer, v.reward,
                           v.truncated ? " (truncated)" : "", v.format_ok ? "" : " (format)", resp);
                EvalRecord rec = {.bench = b, .index = j0 + i, .sample = k, .level = tasks[i].level,
                                  .length = len, .reward = v.reward, .correct = v.correct,
                                  .format_ok = v.format_ok, .truncated = v.truncated,
                                  .self_checked = v.self_checked, .disagreement = v.disagreement,
                                  .recovered = v.recovered, .looped = v.looped, .gave_up = v.gave_up};
                stats_add(st, &rec);
                int lv = rec.level >= 0 && rec.level <= WORLD_NUM_LEVELS ? rec.level : 0;
                if (cfg->gaps && (pool || !out->has_pool)) profile_add(&out->profile, lv, resp, v.reward, cfg->gaps);
                if (records) records[nrec] = rec;
                nrec++;
            }
            if (cfg->after_batch && cfg->after_batch(cfg->after_batch_ctx, records, nrec))
                out->stopped = 1;
        }
        if (out->stopped) break;
        if (cfg->progress)
            fprintf(stderr, "eval: %-10s %4d questions  accuracy %.3f  (%.1f s)\n",
                    bench_label(b, n_bench), st->n, eval_accuracy(st),
                    wall_time() - t0);
        if (!pool) out->score += eval_accuracy(st) / n_bench;
    }
    if (n_records) *n_records = nrec;
    generation_free(&g);
    free(prompts);
    free(plen);
    free(tasks);
    free(resp);
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }
// A mean over n items: NaN when there are none (no correct responses, no disagreements).
static double mean_of(double sum, double n) { return n > 0 ? sum / n : NAN; }

// One column of the table: the value, or "-" right-aligned where it is NaN (nothing to average).
static void put_field(FILE *f, int width, int prec, double x) {
    if (isnan(x)) fprintf(f, " %*s", width, "-");
    else fprintf(f, " %*.*f", width, prec, x);
}

void eval_print_table(const EvalResult *r, FILE *f) {
    fprintf(f, "%-10s %5s %6s %7s %7s %7s %6s %6s %6s %6s %6s %6s %6s  %s\n", "benchmark", "n",
            "acc", "len", "len_ok", "len_bad", "format", "trunc", "check", "disagr", "recov",
            "loop", "giveup", "acc by level 1..5 (ood)");
    for (int b = 0; b < r->n_bench + r->has_pool; b++) {
        const EvalStats *s = &r->bench[b];
        int n_bad = s->n - s->n_correct;
        fprintf(f, "%-10s %5d", bench_label(b, r->n_bench), s->n);
        const double cols[] = {
            eval_accuracy(s), mean_of(s->len_sum, s->n), mean_of(s->len_correct_sum, s->n_correct),
            mean_of(s->len_incorrect_sum, n_bad), mean_of(s->n_format, s->n),
            mean_of(s->n_truncated, s->n), mean_of(s->n_self_checked, s->n),
            mean_of(s->n_disagreement, s->n), mean_of(s->n_recovered, s->n_disagreement),
            mean_of(s->n_looped, s->n_disagreement), mean_of(s->n_gave_up, s->n_disagreement)};
        for (int k = 0; k < 11; k++) put_field(f, k >= 1 && k <= 3 ? 7 : 6, k >= 1 && k <= 3 ? 1 : 3, cols[k]);
        fprintf(f, "  ");
        for (int lv = 1; lv <= WORLD_NUM_LEVELS; lv++) {
            if (s->level_n[lv]) fprintf(f, "%.2f ", ratio(s->level_correct[lv], s->level_n[lv]));
            else fprintf(f, "  -  ");
        }
        if (s->level_n[0]) fprintf(f, "(%.2f)", ratio(s->level_correct[0], s->level_n[0]));
        fprintf(f, "\n");
    }
    fprintf(f, "score (unweighted mean accuracy over the %d benchmarks%s): %.4f\n", r->n_bench,
            r->has_pool ? ", train_pool not included" : "", r->score);
    fprintf(f, "(len in generated tokens; recov/loop/giveup as shares of responses with a "
               "visible disagreement)\n");
}

// ---------------------------------------------------------------- HDF5 output of `grpolab eval`
int eval_write_hdf5(const char *path, const char *model_path, const EvalConfig *cfg,
                    const EvalResult *r, const EvalRecord *recs, int n_recs, char *err,
                    size_t errlen) {
    char *tmp = path_with_suffix(path, ".tmp");
    RunLog *rl = runlog_create(tmp, 1, err, errlen);
    if (!rl) {
        free(tmp);
        return -1;
    }
    // the failure profile counts the responses generated in this process only (a resumed
    // evaluation's earlier ones are not in it): its redo counts are written only when whole
    int profile = cfg->gaps && cfg->resume_from == 0, redos = 0, right = 0;
    if (profile) eval_profile_redos(&r->profile, &redos, &right);
    char names[512] = "";
    for (int b = 0; b < r->n_bench + r->has_pool; b++) {
        if (b) strncat(names, ",", sizeof names - strlen(names) - 1);
        strncat(names, bench_label(b, r->n_bench),
                sizeof names - strlen(names) - 1);
    }
    int ok = runlog_set_attr_str(rl, "kind", "eval", err, errlen) == 0 &&
             runlog_set_attr_str(rl, "model", model_path, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "template", template_name(cfg->template_kind), err, errlen) == 0 &&
             runlog_set_attr_str(rl, "benchmarks", names, err, errlen) == 0 &&
             runlog_set_attr_f64(rl, "temperature", cfg->sampler.temperature, err, errlen) == 0 &&
             runlog_set_attr_f64(rl, "top_p", cfg->sampler.top_p, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "max_new_tokens", cfg->sampler.max_new_tokens, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "world_seed", (int64_t)cfg->world_seed, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "seed", (int64_t)cfg->sampler.seed, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "samples", eval_samples(cfg), err, errlen) == 0 &&
             (!cfg->source_run || (runlog_set_attr_str(rl, "run", cfg->source_run, err, errlen) == 0 &&
                                   runlog_set_attr_i64(rl, "step", cfg->source_step, err, errlen) == 0 &&
                                   (!cfg->source_run_id ||
                                    runlog_set_attr_str(rl, "run_id", cfg->source_run_id, err, errlen) == 0))) &&
             runlog_set_attr_f64(rl, "score", r->stopped ? NAN : r->score, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "complete", !r->stopped, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "limit", cfg->limit, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "train_pool", cfg->train_pool, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "batch", eval_batch_size(cfg), err, errlen) == 0 &&
             (!cfg->config_text || runlog_set_attr_str(rl, "config", cfg->config_text, err, errlen) == 0) &&
             (!cfg->model_fingerprint ||
              runlog_set_attr_str(rl, "model_fingerprint", cfg->model_fingerprint, err, errlen) == 0) &&
             (!cfg->model_config || runlog_set_attr_str(rl, "model_config", cfg->model_config, err, errlen) == 0) &&
             (!profile || (runlog_set_attr_i64(rl, "profile_redos", redos, err, errlen) == 0 &&
                           runlog_set_attr_i64(rl, "profile_redos_right", right, err, errlen) == 0)) &&
             logschema_declare(rl, &LOG_KIND_EVAL, err, errlen) == 0 &&
             runlog_start_swmr(rl, err, errlen) == 0;
    for (int b = 0; ok && !r->stopped && b < r->n_bench + r->has_pool; b++) {
        const EvalStats *s = &r->bench[b];
        int n_bad = s->n - s->n_correct;
        EvalBenchRow row = {.bench = b, .n = s->n, .accuracy = eval_accuracy(s),
                            .length_mean = ratio(s->len_sum, s->n),
                            .length_correct = mean_of(s->len_correct_sum, s->n_correct),
                            .length_incorrect = mean_of(s->len_incorrect_sum, n_bad),
                            .format_rate = ratio(s->n_format, s->n),
                            .truncation_rate = ratio(s->n_truncated, s->n),
                            .truncation_incorrect = mean_of(s->n_truncated_incorrect, n_bad)};
        ok = runlog_append_rows(rl, &LOG_EVAL_BENCH, 1, &row, err, errlen) == 0;
    }
    if (ok) ok = runlog_append_rows(rl, &LOG_EVAL_RESPONSES, n_recs, recs, err, errlen) == 0;
    char err2[256];
    if (runlog_close(rl, ok ? err : err2, ok ? errlen : sizeof err2) != 0) ok = 0;
    if (ok && rename(tmp, path) != 0)
        ok = 0, set_err(err, errlen, "cannot write '%s': cannot rename '%s' to it: %s", path, tmp,
                        strerror(errno));
    if (!ok) unlink(tmp);
    free(tmp);
    return ok ? 0 : -1;
}

void eval_profile_redos(const FailureProfile *p, int *redos, int *right) {
    *redos = *right = 0;
    for (int lv = 0; lv <= WORLD_NUM_LEVELS; lv++)
        for (int k = 0; k < 2; k++) *redos += p->redos[lv][k], *right += p->redos_right[lv][k];
}

void eval_print_failure_profile(const EvalResult *r, FILE *f) {
    const FailureProfile *p = &r->profile;
    fprintf(f, "failure profile (%s): failures by their first false step, and redos after a "
               "disagreement with a false step\n", r->has_pool ? "train_pool" : "benchmarks");
    fprintf(f, "%-6s %5s %6s %6s %6s %6s | %6s %6s %6s %6s | %6s %6s %6s %6s\n", "level", "n",
            "fail", "gap", "slip", "other", "gap_dis", "redo", "right", "same", "slipdis", "redo",
            "right", "same");
    FailureProfile all = {0};
    for (int lv = 0; lv <= WORLD_NUM_LEVELS; lv++) {
        all.n[0] += p->n[lv];
        for (int k = 0; k < 4; k++) all.kind[0][k] += p->kind[lv][k];
        for (int k = 0; k < 2; k++) {
            all.disagree[0][k] += p->disagree[lv][k];
            all.redos[0][k] += p->redos[lv][k];
            all.redos_right[0][k] += p->redos_right[lv][k];
            all.redos_same[0][k] += p->redos_same[lv][k];
        }
    }
    for (int row = 1; row <= WORLD_NUM_LEVELS + 2; row++) {
        // levels 1..5, then the out-of-distribution questions, then all
        int lv = row <= WORLD_NUM_LEVELS ? row : 0;
        const FailureProfile *q = row == WORLD_NUM_LEVELS + 2 ? &all : p;
        if (q->n[lv] == 0) continue;
        int fails = q->n[lv] - q->kind[lv][FAIL_NONE];
        char name[8];
        if (row <= WORLD_NUM_LEVELS) snprintf(name, sizeof name, "%d", lv);
        else snprintf(name, sizeof name, "%s", row == WORLD_NUM_LEVELS + 1 ? "ood" : "all");
        fprintf(f, "%-6s %5d", name, q->n[lv]);
        const double cols[] = {mean_of(fails, q->n[lv]), mean_of(q->kind[lv][FAIL_GAP], fails),
                               mean_of(q->kind[lv][FAIL_SLIP], fails),
                               mean_of(q->kind[lv][FAIL_OTHER], fails)};
        for (int k = 0; k < 4; k++) put_field(f, 6, 3, cols[k]);
        for (int k = 1; k >= 0; k--) {  // gaps, then slips
            fprintf(f, " | %6d", q->disagree[lv][k]);
            put_field(f, 6, 3, mean_of(q->redos[lv][k], q->disagree[lv][k]));
            put_field(f, 6, 3, mean_of(q->redos_right[lv][k], q->redos[lv][k]));
            put_field(f, 6, 3, mean_of(q->redos_same[lv][k], q->redos[lv][k]));
        }
        fprintf(f, "\n");
    }
    fprintf(f, "(fail: share of responses with reward 0; gap / slip / other: shares of the failures "
               "whose first false step uses a gap fact / another fact / that have none; "
               "gap_dis, slipdis: disagreements with a false step of each kind; redo: share of "
               "them followed by a redo of the step; right, same: shares of those redos that are right / "
               "that repeat the rejected value)\n");
    int redos, right;
    eval_profile_redos(p, &redos, &right);
    fprintf(f, "redos after a rejected step (gap facts and slips, every level): %d, right %d: share", redos, right);
    put_field(f, 6, 3, mean_of(right, redos));
    fprintf(f, "\n");
}

// ---------------------------------------------------------------- eval --resume
int eval_write_partial(const char *path, const char *model_path, const EvalConfig *cfg,
                       const EvalRecord *recs, int n_recs, char *err, size_t errlen) {
    EvalResult r = {.n_bench = eval_num_benchmarks(), .has_pool = cfg->train_pool > 0, .stopped = 1};
    return eval_write_hdf5(path, model_path, cfg, &r, recs, n_recs, err, errlen);
}

// Keys an evaluation may go on with changed: they change what it computes at most in rounding.
static const char *const EVAL_FREE_KEYS[] = {"run.threads", "run.backend"};

// The settings of an eval file that --resume compares: the root attributes eval_write_hdf5
// writes from cfg, as runlog_read_attr_str reads them back (numbers as decimal text).
static int settings_differ(RunLogReader *rd, const char *path, const EvalConfig *cfg, char *err,
                           size_t errlen) {
    char now[8][48], diff[600] = "", msg[512];
    const char *names[8] = {"template", "temperature", "top_p", "max_new_tokens", "world_seed",
                            "limit", "train_pool", "batch"};
    snprintf(now[0], sizeof now[0], "%s", template_name(cfg->template_kind));
    snprintf(now[1], sizeof now[1], "%.17g", (double)cfg->sampler.temperature);
    snprintf(now[2], sizeof now[2], "%.17g", (double)cfg->sampler.top_p);
    snprintf(now[3], sizeof now[3], "%d", cfg->sampler.max_new_tokens);
    snprintf(now[4], sizeof now[4], "%lld", (long long)(int64_t)cfg->world_seed);
    snprintf(now[5], sizeof now[5], "%d", cfg->limit);
    snprintf(now[6], sizeof now[6], "%d", cfg->train_pool);
    snprintf(now[7], sizeof now[7], "%d", eval_batch_size(cfg));
    int n = 0;
    for (int i = 0; i < 8; i++) {
        char *then = runlog_read_attr_str(rd, names[i], msg, sizeof msg);
        if (!then) return set_err(err, errlen, "--resume: %s", msg);
        if (strcmp(then, now[i]) != 0) {
            size_t k = strlen(diff);
            snprintf(diff + k, sizeof diff - k, "%s%s = %s vs %s", n ? "; " : "", names[i], then, now[i]);
            n++;
        }
        free(then);
    }
    if (n > 0)
        return set_err(err, errlen, "--resume: %s was evaluated with other settings (%d differ%s, "
                       "stored vs now): %s (resume with the options it started with, or start "
                       "again with --overwrite)", path, n, n == 1 ? "s" : "", diff);
    return 0;
}

// The stored config and model fingerprint against cfg's. 0, or -1 with a message.
static int config_differs(RunLogReader *rd, const char *path, const EvalConfig *cfg, char *err,
                          size_t errlen) {
    char msg[768], diff[600];
    const char *attrs[2] = {"config", "model_fingerprint"};
    char *stored[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        if (!(stored[i] = runlog_read_attr_str(rd, attrs[i], msg, sizeof msg))) {
            free(stored[0]);
            return set_err(err, errlen, "--resume: %s (not written by an eval that can be resumed)", msg);
        }
    int rc = 0;
    if (cfg->model_fingerprint && strcmp(stored[1], cfg->model_fingerprint) != 0)
        rc = set_err(err, errlen, "--resume: %s was evaluated on other weights than the model now "
                     "holds (model_fingerprint %s in the file, %s now)", path, stored[1],
                     cfg->model_fingerprint);
    Config *then = rc == 0 && cfg->config_text ? config_from_stored(stored[0], path, msg, sizeof msg) : NULL;
    Config *now = then ? config_from_stored(cfg->config_text, "the config", msg, sizeof msg) : NULL;
    if (rc == 0 && cfg->config_text && !now) rc = set_err(err, errlen, "--resume: %s", msg);
    int n = now ? config_diff(then, now, EVAL_FREE_KEYS, 2, diff, sizeof diff) : 0;
    if (n > 0)
        rc = set_err(err, errlen, "--resume: %s was evaluated with another config (%d key%s differ%s, "
                     "stored vs now): %s (resume with the settings it started with, or start again "
                     "with --overwrite)", path, n, n == 1 ? "" : "s", n == 1 ? "s" : "", diff);
    config_free(then);
    config_free(now);
    free(stored[0]);
    free(stored[1]);
    return rc;
}

// /responses of the file into recs (cap rows) as *n rows, column by column by the schema.
static int read_responses(RunLogReader *rd, EvalRecord *recs, int cap, int *n, char *err,
                          size_t errlen) {
    char ds[128], msg[768];
    *n = -1;
    for (int c = 0; c < LOG_EVAL_RESPONSES.n_cols; c++) {
        const TableColumn *col = &LOG_EVAL_RESPONSES.cols[c];
        snprintf(ds, sizeof ds, "%s/%s", LOG_EVAL_RESPONSES.name, col->spec.name);
        int64_t rows = 0;
        double *x = runlog_read_column(rd, ds, &rows, msg, sizeof msg);
        if (!x) return set_err(err, errlen, "--resume: %s", msg);
        if ((*n >= 0 && rows != *n) || rows > cap) {
            free(x);
            return set_err(err, errlen, "--resume: column /%s holds %lld rows, %s", ds, (long long)rows,
                           rows > cap ? "more than the evaluation's questions" : "unlike the other columns");
        }
        *n = (int)rows;
        for (int64_t i = 0; i < rows; i++) {
            if (x[i] != (int32_t)x[i]) {
                free(x);
                return set_err(err, errlen, "--resume: row %lld of /%s is %g, not an int32", (long long)i,
                               ds, x[i]);
            }
            *(int32_t *)((char *)&recs[i] + col->offset) = (int32_t)x[i];
        }
        free(x);
    }
    return 0;
}

int eval_read_partial(const char *path, const EvalConfig *cfg, EvalRecord *recs, int cap, int *n,
                      char *err, size_t errlen) {
    char msg[768];
    RunLogReader *rd = runlog_reader_open(path, msg, sizeof msg);
    if (!rd) return set_err(err, errlen, "--resume: %s", msg);
    int rc = -1;
    char *kind = runlog_read_attr_str(rd, "kind", msg, sizeof msg), *complete = NULL;
    if (!kind || strcmp(kind, "eval") != 0) {
        set_err(err, errlen, "--resume: %s is not an eval log (%s%s)", path, kind ? "kind " : "",
                kind ? kind : msg);
        goto done;
    }
    if (!(complete = runlog_read_attr_str(rd, "complete", msg, sizeof msg))) {
        set_err(err, errlen, "--resume: %s (written by an eval that cannot be resumed)", msg);
        goto done;
    }
    if (settings_differ(rd, path, cfg, err, errlen) != 0 || config_differs(rd, path, cfg, err, errlen) != 0)
        goto done;
    if (strcmp(complete, "0") != 0) {
        rc = 1;  // nothing left to do
        goto done;
    }
    if (read_responses(rd, recs, cap, n, err, errlen) != 0) goto done;
    if (eval_check_records(cfg, recs, *n, msg, sizeof msg) != 0) {
        set_err(err, errlen, "--resume: %s: %s (corrupt?)", path, msg);
        goto done;
    }
    rc = 0;
done:
    free(kind);
    free(complete);
    runlog_reader_close(rd);
    return rc;
}
