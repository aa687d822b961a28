// runs.c: a train run log read into memory (contract in runs.h).
#include "runs.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common.h"
#include "../sim/io/config.h"
#include "../sim/io/logschema.h"
#include "../sim/io/runlog.h"

// A column of a logged table (by its name in the table's spec, logschema.h) and the field of
// the struct it is read into (a double *, by offsetof).
typedef struct {
    const char *column;
    size_t field;
} ColumnField;
#define FIELDS_OF(a) (int)(sizeof(a) / sizeof((a)[0]))

// Reads the columns of table (cut to the shortest: a run being written may be one column
// ahead) into the double * fields of dst that fields name: each a malloc'd array of *n values.
// A column the schema does not have is a bug in the reader, not in the file.
static int read_table(RunLogReader *rd, const TableSpec *table, const ColumnField *fields,
                      int n_fields, void *dst, int64_t *n, char *err, size_t errlen) {
    int64_t len = -1;
    char ds[128], e[512];
    double **col[32];
    if (n_fields > 32) die("runs.c: %d columns of /%s at once (at most 32)", n_fields, table->name);
    for (int c = 0; c < n_fields; c++) {
        if (!runlog_spec_column(table, fields[c].column))
            die("runs.c: reads column '%s', which /%s of logschema.c does not have", fields[c].column,
                table->name);
        col[c] = (double **)((char *)dst + fields[c].field);
        *col[c] = NULL;
    }
    for (int c = 0; c < n_fields; c++) {
        snprintf(ds, sizeof ds, "%s/%s", table->name, fields[c].column);
        int64_t k;
        *col[c] = runlog_read_column(rd, ds, &k, e, sizeof e);
        if (!*col[c]) {
            for (int j = 0; j < c; j++) free(*col[j]), *col[j] = NULL;
            return set_err(err, errlen, "%s", e);  // e names the file
        }
        if (len < 0 || k < len) len = k;
    }
    *n = len < 0 ? 0 : len;
    return 0;
}

// Refuses a column whose values are not whole numbers in [lo, hi] (a NaN included), naming
// the file, the dataset, the row and the value: the readers below size loops and arrays by
// these values, so a corrupt one must stop here (docs/hdf5-schema.md gives the ranges).
static int check_whole(const char *path, const char *ds, const double *v, int64_t n, double lo,
                       double hi, char *err, size_t errlen) {
    for (int64_t i = 0; i < n; i++)
        if (!(v[i] >= lo && v[i] <= hi && v[i] == floor(v[i])))
            return set_err(err, errlen, "%s: /%s row %lld is %g, expected a whole number in %.0f .. %.0f "
                           "(corrupt log?)", path, ds, (long long)i, v[i], lo, hi);
    return 0;
}

// Bounds of the schema's ranges (io/settings.h): train.steps, world.max_new_tokens,
// train.group_size.
#define MAX_STEPS 100000000.0
#define MAX_TOKENS 65536.0
#define MAX_GROUP 65536.0

static int attr_str(RunLogReader *rd, const char *path, const char *name, char *out, size_t outlen,
                    char *err, size_t errlen) {
    char e[512];
    char *s = runlog_read_attr_str(rd, name, e, sizeof e);
    if (!s) return set_err(err, errlen, "%s: %s (is it a log of a current grpolab train?)", path, e);
    snprintf(out, outlen, "%s", s);
    free(s);
    return 0;
}

static int attr_int(RunLogReader *rd, const char *path, const char *name, int64_t *out, char *err,
                    size_t errlen) {
    char buf[64], *end;
    if (attr_str(rd, path, name, buf, sizeof buf, err, errlen) != 0) return -1;
    *out = strtoll(buf, &end, 10);
    if (end == buf || *end) return set_err(err, errlen, "%s: root attribute %s is '%s', expected an integer", path, name, buf);
    return 0;
}

static int attr_float(RunLogReader *rd, const char *path, const char *name, double *out, char *err,
                      size_t errlen) {
    char buf[64], *end;
    if (attr_str(rd, path, name, buf, sizeof buf, err, errlen) != 0) return -1;
    *out = strtod(buf, &end);
    if (end == buf || *end) return set_err(err, errlen, "%s: root attribute %s is '%s', expected a number", path, name, buf);
    return 0;
}

// The run's config (root attribute "config", INI text) for the few settings the figures need.
// A config this grpolab cannot read (a newer version) leaves them at 0, with a note.
static void read_config(RunLogReader *rd, Run *r) {
    char e[512];
    char *text = runlog_read_attr_str(rd, "config", e, sizeof e);
    if (!text) {
        fprintf(stderr, "grpolab: note: %s: no readable config attribute (%s): planned steps unknown\n", r->path, e);
        return;
    }
    Config *c = config_new();
    char name[600];
    snprintf(name, sizeof name, "%s:/config", r->path);
    if (config_load_text(c, text, name, e, sizeof e) != 0) {
        fprintf(stderr, "grpolab: note: %s: its config does not read back (%s): planned steps unknown\n",
                r->path, e);
    } else {
        r->steps_planned = config_settings(c)->train.steps;
        r->group_size = config_settings(c)->train.group_size;
        r->minibatch_size = config_settings(c)->train.minibatch_size;
        r->max_new_tokens = config_settings(c)->world.max_new_tokens;
        snprintf(r->template_name, sizeof r->template_name, "%s", config_settings(c)->world.template);
        const char *qs = config_settings(c)->train.question_set;
        if (strcmp(qs, "weights") != 0) {
            snprintf(r->question_set, sizeof r->question_set, "%s", qs);
        } else {
            size_t k = (size_t)snprintf(r->question_set, sizeof r->question_set, "weights");
            const Settings *S = config_settings(c);
            const double w[] = {S->train.weight_level1, S->train.weight_level2, S->train.weight_level3,
                                S->train.weight_level4, S->train.weight_level5};
            for (int l = 1; l <= 5 && k < sizeof r->question_set; l++)
                k += (size_t)snprintf(r->question_set + k, sizeof r->question_set - k, "%s%g", l == 1 ? " " : ",",
                                      w[l - 1]);
        }
    }
    config_free(c);
    free(text);
}

// The columns of a table read into a struct of arrays whose fields are named as the columns.
#define SAME(S, f) {#f, offsetof(S, f)}
typedef struct {
    double *step, *bench, *accuracy, *length_correct, *length_incorrect, *n;
} EvalColumns;
typedef struct {
    double *bench, *n, *accuracy, *length_incorrect;
} EvalFileColumns;
typedef struct {
    double *step, *length, *correct, *advantage, *token_offset;
} ResponseColumns;
typedef struct {
    double *step, *length, *correct, *disagreement, *gave_up, *looped;
} BehaviourColumns;
typedef struct {
    double *step, *reward_mean, *mean_abs_advantage, *sum_abs_weight, *group_size;
} QuestionColumns;
typedef struct {
    double *weight;
} TokenWeights;

// The index of train_pool among the comma-separated benchmark names, or -1.
static int train_pool_index(const char *bench_names) {
    int idx = 0;
    for (const char *p = bench_names; p && *p; idx++) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == 10 && strncmp(p, "train_pool", 10) == 0) return idx;
        p = q ? q + 1 : p + len;
    }
    return -1;
}

// The column truncation_incorrect of table (/eval of a train or an eval log), n rows, or
// NULL where the log has none (an older grpolab) or it does not read (then a note).
static double *read_trunc_incorrect(RunLogReader *rd, const char *path, const char *table, int64_t n) {
    char ds[64], e[512];
    snprintf(ds, sizeof ds, "%s/truncation_incorrect", table);
    if (!runlog_reader_has(rd, ds)) return NULL;
    int64_t k;
    double *t = runlog_read_column(rd, ds, &k, e, sizeof e);
    if (t && k < n) free(t), t = NULL, snprintf(e, sizeof e, "%lld rows, /%s has %lld", (long long)k, table, (long long)n);
    if (!t) fprintf(stderr, "grpolab: note: %s: /%s left out (%s)\n", path, ds, e);
    return t;
}

// /eval pooled per evaluation over the benchmarks (train_pool excluded).
static int read_eval(RunLogReader *rd, Run *r, const char *bench_names, char *err, size_t errlen) {
    EvalColumns ev;
    static const ColumnField cols[] = {SAME(EvalColumns, step), SAME(EvalColumns, bench),
                                       SAME(EvalColumns, accuracy), SAME(EvalColumns, length_correct),
                                       SAME(EvalColumns, length_incorrect), SAME(EvalColumns, n)};
    int64_t n = 0;
    if (read_table(rd, &LOG_TRAIN_EVAL, cols, FIELDS_OF(cols), &ev, &n, err, errlen) != 0) return -1;
    if (check_whole(r->path, "eval/step", ev.step, n, 0, MAX_STEPS, err, errlen) != 0 ||
        check_whole(r->path, "eval/bench", ev.bench, n, 0, 64, err, errlen) != 0 ||
        check_whole(r->path, "eval/n", ev.n, n, 0, MAX_STEPS, err, errlen) != 0) {
        free(ev.step), free(ev.bench), free(ev.accuracy), free(ev.length_correct);
        free(ev.length_incorrect), free(ev.n);
        return -1;
    }
    int train_pool = train_pool_index(bench_names);
    double *trunc = read_trunc_incorrect(rd, r->path, "eval", n);
    r->eval_step = xcalloc((size_t)n + 1, sizeof(double));
    r->eval_score = xcalloc((size_t)n + 1, sizeof(double));
    r->eval_len_correct = xcalloc((size_t)n + 1, sizeof(double));
    r->eval_len_incorrect = xcalloc((size_t)n + 1, sizeof(double));
    r->eval_n_incorrect = xcalloc((size_t)n + 1, sizeof(double));
    if (trunc) r->eval_trunc_incorrect = xcalloc((size_t)n + 1, sizeof(double));
    r->n_evals = 0;
    for (int64_t i = 0; i < n;) {  // rows of one evaluation share a step and are adjacent
        double st = ev.step[i], acc = 0, sc = 0, nc = 0, si = 0, ni = 0, bad = 0, cut = 0;
        int nb = 0;
        for (; i < n && ev.step[i] == st; i++) {
            if ((int)ev.bench[i] == train_pool) continue;
            double q = ev.n[i], k = round(ev.accuracy[i] * q);
            acc += ev.accuracy[i];
            nb++;
            bad += q - k;
            if (k > 0 && isfinite(ev.length_correct[i])) sc += k * ev.length_correct[i], nc += k;
            if (q - k > 0 && isfinite(ev.length_incorrect[i])) si += (q - k) * ev.length_incorrect[i], ni += q - k;
            // the count behind the share; a share that is no count of q - k responses (NaN,
            // say) spoils the evaluation's
            double c = trunc ? trunc[i] * (q - k) : 0;
            if (trunc && q - k > 0) cut += fabs(c - round(c)) < 1e-6 ? round(c) : NAN;
        }
        if (nb == 0) continue;
        int e = r->n_evals++;
        r->eval_step[e] = st;
        r->eval_score[e] = acc / nb;
        r->eval_len_correct[e] = nc > 0 ? sc / nc : NAN;
        r->eval_len_incorrect[e] = ni > 0 ? si / ni : NAN;
        r->eval_n_incorrect[e] = bad;
        if (trunc) r->eval_trunc_incorrect[e] = cut;
    }
    free(trunc);
    free(ev.step), free(ev.bench), free(ev.accuracy), free(ev.length_correct);
    free(ev.length_incorrect), free(ev.n);
    return 0;
}

void final_eval_path(const char *run, int which, char *out, size_t len) {
    snprintf(out, len, "%s.%s.h5", run, which == FINAL_GREEDY ? "greedy" : "sampled");
}

// Reads the eval log `grpolab eval-run` wrote beside r into r->final_eval[which]: 0, or -1
// with a message (a missing file is not an error: n stays 0).
static int final_eval_read(Run *r, int which, char *err, size_t errlen) {
    char path[4200], e[1024], kind[64];
    final_eval_path(r->path, which, path, sizeof path);
    struct FinalEval *f = &r->final_eval[which];
    memset(f, 0, sizeof *f);
    if (access(path, F_OK) != 0) return 0;
    RunLogReader *rd = runlog_reader_open(path, e, sizeof e);
    if (!rd) return set_err(err, errlen, "%s", e);
    EvalFileColumns ev = {NULL};
    char *benches = NULL;
    int64_t n = 0, samples, step;
    double *trunc = NULL;
    int rc = -1;
    if (attr_str(rd, path, "kind", kind, sizeof kind, err, errlen) != 0) goto done;
    if (strcmp(kind, "eval") != 0) {
        set_err(err, errlen, "%s: a grpolab log of kind '%s', expected an eval log (grpolab eval-run)", path, kind);
        goto done;
    }
    if (attr_int(rd, path, "samples", &samples, err, errlen) != 0 || attr_int(rd, path, "step", &step, err, errlen) != 0)
        goto done;
    char id[40] = "";
    if (runlog_reader_has_attr(rd, "run_id") && attr_str(rd, path, "run_id", id, sizeof id, err, errlen) != 0) goto done;
    if (r->run_id[0] && strcmp(id, r->run_id) != 0) {
        set_err(err, errlen, "%s: of another run (run_id %s, the log's %s): an earlier run at this path?", path,
                id[0] ? id : "none", r->run_id);
        goto done;
    }
    static const ColumnField cols[] = {SAME(EvalFileColumns, bench), SAME(EvalFileColumns, n),
                                       SAME(EvalFileColumns, accuracy), SAME(EvalFileColumns, length_incorrect)};
    if (read_table(rd, &LOG_EVAL_BENCH, cols, FIELDS_OF(cols), &ev, &n, err, errlen) != 0) goto done;
    if (check_whole(path, "eval/n", ev.n, n, 0, MAX_STEPS, err, errlen) != 0) goto done;
    if (!(trunc = read_trunc_incorrect(rd, path, "eval", n))) {
        set_err(err, errlen, "%s: no readable /eval/truncation_incorrect", path);
        goto done;
    }
    benches = runlog_read_attr_str(rd, "benchmarks", e, sizeof e);
    int pool = train_pool_index(benches), nb = 0;
    double acc = 0, si = 0;
    for (int64_t i = 0; i < n; i++) {
        if ((int)ev.bench[i] == pool) continue;
        double q = ev.n[i], bad = q - round(ev.accuracy[i] * q);
        nb++, acc += ev.accuracy[i], f->n += (int)q, f->n_incorrect += bad;
        if (bad > 0) si += bad * ev.length_incorrect[i], f->trunc_incorrect += round(trunc[i] * bad);
    }
    f->samples = (int)samples, f->step = step;
    f->score = nb ? acc / nb : NAN;
    f->len_incorrect = f->n_incorrect > 0 ? si / f->n_incorrect : NAN;
    rc = 0;
done:
    if (rc != 0) memset(f, 0, sizeof *f);
    free(ev.bench), free(ev.n), free(ev.accuracy), free(ev.length_incorrect), free(trunc), free(benches);
    runlog_reader_close(rd);
    return rc;
}

static void read_final_eval(Run *r, int which) {
    char err[2048];
    if (final_eval_read(r, which, err, sizeof err) != 0)
        fprintf(stderr, "grpolab: note: %s: its %s eval-run file is left out: %s\n", r->path,
                which == FINAL_GREEDY ? "greedy" : "sampled", err);
}

double run_eval_trunc_incorrect(const Run *r, int e, double *n_incorrect, double *n_cut, const char **source) {
    *n_incorrect = *n_cut = 0;
    if (source) *source = NULL;
    if (e < 0) e = r->n_evals - 1;
    if (e < 0 || e >= r->n_evals) return NAN;
    double bad = NAN, cut = NAN;
    const char *from = NULL;
    if (r->eval_trunc_incorrect && r->eval_n_incorrect) {
        bad = r->eval_n_incorrect[e], cut = r->eval_trunc_incorrect[e], from = "/eval";
    } else if (e == r->n_evals - 1 && r->final_eval[FINAL_GREEDY].n > 0 &&
               (double)r->final_eval[FINAL_GREEDY].step == r->eval_step[e]) {
        bad = r->final_eval[FINAL_GREEDY].n_incorrect, cut = r->final_eval[FINAL_GREEDY].trunc_incorrect, from = "eval-run";
    }
    if (!isfinite(cut) || !isfinite(bad)) return NAN;
    *n_incorrect = bad, *n_cut = cut;
    if (source) *source = from;
    return bad > 0 ? cut / bad : NAN;
}

Run *run_load(const char *path, char *err, size_t errlen) {
    char e[1024], kind[64];
    RunLogReader *rd = runlog_reader_open(path, e, sizeof e);
    if (!rd) {
        set_err(err, errlen, "%s", e);
        return NULL;
    }
    Run *r = xcalloc(1, sizeof *r);
    r->path = xstrdup(path);
    char *benches = NULL;
    int64_t v;
    if (attr_str(rd, path, "kind", kind, sizeof kind, err, errlen) != 0) goto fail;
    if (strcmp(kind, "train") != 0) {
        set_err(err, errlen, "%s: a grpolab run log of kind '%s', expected a train log (written by "
                "grpolab train)", path, kind);
        goto fail;
    }
    if (attr_str(rd, path, "objective.preset", r->preset, sizeof r->preset, err, errlen) != 0 ||
        attr_str(rd, path, "objective.scale", r->scale, sizeof r->scale, err, errlen) != 0 ||
        attr_str(rd, path, "objective.baseline", r->baseline, sizeof r->baseline, err, errlen) != 0 ||
        attr_str(rd, path, "objective.aggregation", r->aggregation, sizeof r->aggregation, err, errlen) != 0 ||
        attr_float(rd, path, "objective.std_eps", &r->std_eps, err, errlen) != 0 ||
        attr_int(rd, path, "seed", &r->seed, err, errlen) != 0)
        goto fail;
    memcpy(r->objective, r->preset, sizeof r->objective);
    if (attr_int(rd, path, "objective.std_ddof", &v, err, errlen) != 0) goto fail;
    r->std_ddof = (int)v;
    if (attr_int(rd, path, "objective.l_max", &v, err, errlen) != 0) goto fail;
    r->l_max = (int)v;
    benches = runlog_read_attr_str(rd, "benchmarks", e, sizeof e);  // optional
    if (runlog_reader_has_attr(rd, "run_id")) attr_str(rd, path, "run_id", r->run_id, sizeof r->run_id, err, errlen);
    read_config(rd, r);

    static const ColumnField cols[] = {
        {"step", offsetof(Run, step)}, {"reward_mean", offsetof(Run, reward)},
        {"length_mean", offsetof(Run, len_mean)}, {"length_correct", offsetof(Run, len_correct)},
        {"length_incorrect", offsetof(Run, len_incorrect)},
        {"truncation_rate", offsetof(Run, truncation)}, {"loop_rate", offsetof(Run, loop)},
        {"disagreement_rate", offsetof(Run, disagreement)},
        {"selfcheck_rate", offsetof(Run, selfcheck)}, {"bias_cosine", offsetof(Run, bias_cosine)},
        {"mixed_group_frac", offsetof(Run, mixed_groups)}};
    if (read_table(rd, &LOG_TRAIN, cols, FIELDS_OF(cols), r, &r->n_steps, err, errlen) != 0) goto fail;
    if (r->n_steps == 0) {
        set_err(err, errlen, "%s: an empty run: /train has no finished step yet (is the run still "
                "starting, or did it fail before its first step?)", path);
        goto fail;
    }
    for (int64_t i = 0; i < r->n_steps; i++)  // one row per step, from step 0
        if (r->step[i] != (double)i) {
            set_err(err, errlen, "%s: /train/step row %lld is %g, expected %lld (one row per step from "
                    "0; corrupt log?)", path, (long long)i, r->step[i], (long long)i);
            goto fail;
        }
    if (read_eval(rd, r, benches, err, errlen) != 0) goto fail;
    free(benches);
    runlog_reader_close(rd);
    for (int w = 0; w < 2; w++) read_final_eval(r, w);
    return r;
fail:
    free(benches);
    runlog_reader_close(rd);
    run_free(r);
    return NULL;
}

// 1 if the log has column col of table (a column of its spec), else 0.
static int has_column(const RunLogReader *rd, const TableSpec *table, const char *col) {
    char ds[128];
    if (!runlog_spec_column(table, col))
        die("runs.c: looks for column '%s', which /%s of logschema.c does not have", col, table->name);
    snprintf(ds, sizeof ds, "%s/%s", table->name, col);
    return runlog_reader_has(rd, ds);
}

int run_load_responses(Run *r, char *err, size_t errlen) {
    char e[1024];
    RunLogReader *rd = runlog_reader_open(r->path, e, sizeof e);
    if (!rd) return set_err(err, errlen, "%s", e);
    static const ColumnField rc[] = {SAME(ResponseColumns, step), SAME(ResponseColumns, length),
                                     SAME(ResponseColumns, correct), SAME(ResponseColumns, advantage),
                                     SAME(ResponseColumns, token_offset)};
    static const ColumnField qc[] = {SAME(QuestionColumns, step), SAME(QuestionColumns, reward_mean),
                                     SAME(QuestionColumns, mean_abs_advantage),
                                     SAME(QuestionColumns, sum_abs_weight),
                                     SAME(QuestionColumns, group_size)};
    static const ColumnField tc[] = {SAME(TokenWeights, weight)};
    ResponseColumns R;
    QuestionColumns Q;
    TokenWeights T = {NULL};
    int64_t nr = 0, nq = 0, nt = 0;
    int ok = read_table(rd, &LOG_RESPONSES, rc, FIELDS_OF(rc), &R, &nr, err, errlen) == 0;
    if (ok && read_table(rd, &LOG_QUESTIONS, qc, FIELDS_OF(qc), &Q, &nq, err, errlen) != 0) {
        free(R.step), free(R.length), free(R.correct), free(R.advantage), free(R.token_offset);
        ok = 0;
    }
    // /tokens may be missing as a whole (a log stripped of it to travel, docs/hdf5-schema.md):
    // then no per-token weights, and has_tokens says so; a /tokens without its weight column
    // is an error as any other missing column
    r->has_tokens = has_column(rd, &LOG_TOKENS, "weight") || has_column(rd, &LOG_TOKENS, "step");
    if (ok && r->has_tokens && read_table(rd, &LOG_TOKENS, tc, FIELDS_OF(tc), &T, &nt, err, errlen) != 0) {
        free(R.step), free(R.length), free(R.correct), free(R.advantage), free(R.token_offset);
        free(Q.step), free(Q.reward_mean), free(Q.mean_abs_advantage), free(Q.sum_abs_weight);
        free(Q.group_size);
        ok = 0;
    }
    runlog_reader_close(rd);
    if (ok && (check_whole(r->path, "responses/step", R.step, nr, 0, MAX_STEPS, err, errlen) != 0 ||
               check_whole(r->path, "responses/length", R.length, nr, 0, MAX_TOKENS, err, errlen) != 0 ||
               check_whole(r->path, "responses/token_offset", R.token_offset, nr, 0, 9007199254740992.0,
                           err, errlen) != 0 ||
               check_whole(r->path, "questions/step", Q.step, nq, 0, MAX_STEPS, err, errlen) != 0 ||
               check_whole(r->path, "questions/group_size", Q.group_size, nq, 2,
                           nr < (int64_t)MAX_GROUP ? (double)(nr > 2 ? nr : 2) : MAX_GROUP, err, errlen) != 0)) {
        free(R.step), free(R.length), free(R.correct), free(R.advantage), free(R.token_offset);
        free(Q.step), free(Q.reward_mean), free(Q.mean_abs_advantage), free(Q.sum_abs_weight);
        free(Q.group_size), free(T.weight);
        ok = 0;
    }
    if (!ok) return -1;
    // keep only the steps /train has (a run being written may have rows of the next step)
    double last = r->step[r->n_steps - 1];
    while (nr > 0 && R.step[nr - 1] > last) nr--;
    while (nq > 0 && Q.step[nq - 1] > last) nq--;
    r->n_resp = nr;
    r->resp_step = R.step, r->resp_length = R.length, r->resp_correct = R.correct;
    r->resp_advantage = R.advantage;
    r->resp_mean_abs_w = xmalloc(((size_t)nr + 1) * sizeof(double));
    int64_t bad = 0;
    for (int64_t i = 0; i < nr; i++) {
        int64_t off = (int64_t)R.token_offset[i], len = (int64_t)R.length[i];
        if (off < 0 || len <= 0 || off + len > nt) {  // a token row the file does not hold
            r->resp_mean_abs_w[i] = NAN;
            bad++;
            continue;
        }
        double s = 0;
        for (int64_t t = 0; t < len; t++) s += fabs(T.weight[off + t]);
        r->resp_mean_abs_w[i] = s / (double)len;
    }
    if (!r->has_tokens)
        fprintf(stderr, "grpolab: note: %s has no /tokens table: no per-token weights (the length-bias "
                "figure draws their closed form only)\n", r->path);
    else if (bad)
        fprintf(stderr, "grpolab: note: %s: %lld responses point past the end of /tokens (%lld rows): "
                "left out\n", r->path, (long long)bad, (long long)nt);
    free(R.token_offset);
    free(T.weight);
    r->n_quest = nq;
    r->q_step = Q.step, r->q_reward_mean = Q.reward_mean, r->q_mean_abs_adv = Q.mean_abs_advantage;
    r->q_sum_abs_w = Q.sum_abs_weight, r->q_group_size = Q.group_size;
    return 0;
}

int run_failing_states(const Run *r, FailingStates out[2], char *err, size_t errlen) {
    char e[1024];
    RunLogReader *rd = runlog_reader_open(r->path, e, sizeof e);
    if (!rd) return set_err(err, errlen, "%s", e);
    static const ColumnField rc[] = {SAME(BehaviourColumns, step), SAME(BehaviourColumns, length),
                                     SAME(BehaviourColumns, correct),
                                     SAME(BehaviourColumns, disagreement),
                                     SAME(BehaviourColumns, gave_up), SAME(BehaviourColumns, looped)};
    BehaviourColumns R;
    int64_t nr = 0;
    int rc_ok = read_table(rd, &LOG_RESPONSES, rc, FIELDS_OF(rc), &R, &nr, err, errlen);
    runlog_reader_close(rd);
    if (rc_ok != 0) return -1;
    int n = (int)r->n_steps, k = tenth_of(n);
    double lo[2] = {r->step[0], r->step[n - k]}, hi[2] = {r->step[k - 1], r->step[n - 1]};
    for (int part = 0; part < 2; part++) {
        double all = 0, dis = 0, cor = 0, gave = 0, loop = 0, fails = 0, flen = 0;
        for (int64_t i = 0; i < nr; i++) {
            if (R.step[i] < lo[part] || R.step[i] > hi[part]) continue;
            all++;
            if (!(R.disagreement[i] > 0)) continue;
            dis++;
            cor += R.correct[i] > 0, gave += R.gave_up[i] > 0, loop += R.looped[i] > 0;
            if (!(R.correct[i] > 0)) fails++, flen += R.length[i];
        }
        out[part].share = all > 0 ? dis / all : NAN;
        out[part].correct = dis > 0 ? cor / dis : NAN;
        out[part].gave_up = dis > 0 ? gave / dis : NAN;
        out[part].looped = dis > 0 ? loop / dis : NAN;
        out[part].fail_len = fails > 0 ? flen / fails : NAN;
    }
    free(R.step), free(R.length), free(R.correct), free(R.disagreement), free(R.gave_up);
    free(R.looped);
    return 0;
}

void run_free(Run *r) {
    if (!r) return;
    double *arrays[] = {r->step, r->reward, r->len_mean, r->len_correct, r->len_incorrect,
                        r->truncation, r->loop, r->disagreement, r->selfcheck, r->bias_cosine,
                        r->mixed_groups, r->eval_step, r->eval_score, r->eval_len_correct,
                        r->eval_len_incorrect, r->eval_n_incorrect, r->eval_trunc_incorrect, r->resp_step, r->resp_length, r->resp_correct,
                        r->resp_advantage, r->resp_mean_abs_w, r->q_step, r->q_reward_mean,
                        r->q_mean_abs_adv, r->q_sum_abs_w, r->q_group_size};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++) free(arrays[i]);
    free(r->path);
    free(r);
}

void runs_free(Run **runs, int n) {
    if (!runs) return;
    for (int i = 0; i < n; i++) run_free(runs[i]);
    free(runs);
}

int tenth_of(int n_steps) { return n_steps / 10 > 0 ? n_steps / 10 : 1; }

int run_complete(const Run *r) { return r->steps_planned > 0 && r->n_steps >= r->steps_planned; }

const char *objective_title(const char *preset) {
    if (strcmp(preset, "grpo") == 0) return "GRPO";
    if (strcmp(preset, "dr_grpo") == 0) return "Dr. GRPO";
    if (strcmp(preset, "dapo") == 0) return "DAPO";
    if (strcmp(preset, "rloo") == 0) return "RLOO";
    return preset;
}

const char *objective_color(const char *preset, int index) {
    if (strcmp(preset, "grpo") == 0) return "#808080";     // grey, as in the paper
    if (strcmp(preset, "dr_grpo") == 0) return "#8b0000";  // dark red, as in the paper
    if (strcmp(preset, "dapo") == 0) return "#1f77b4";
    if (strcmp(preset, "rloo") == 0) return "#2ca02c";
    static const char *const more[] = {"#9467bd", "#ff7f0e", "#17becf", "#e377c2"};
    return more[index % 4];
}

const char *group_title(const Run *r) {
    if (strcmp(r->objective, r->preset) == 0) return objective_title(r->preset);
    if (strcmp(r->preset, "grpo") != 0 && strcmp(r->preset, "dr_grpo") != 0) return r->objective;
    // the labels a sweep gives a run whose grid varies the scale and/or the aggregation
    char forms[4][160];
    snprintf(forms[0], sizeof forms[0], "%s_scale-%s", r->preset, r->scale);
    snprintf(forms[1], sizeof forms[1], "%s_aggregation-%s", r->preset, r->aggregation);
    snprintf(forms[2], sizeof forms[2], "%s_scale-%s_aggregation-%s", r->preset, r->scale, r->aggregation);
    snprintf(forms[3], sizeof forms[3], "%s_aggregation-%s_scale-%s", r->preset, r->aggregation, r->scale);
    int match = 0;
    for (int i = 0; i < 4; i++) match |= strcmp(r->objective, forms[i]) == 0;
    if (!match || strcmp(r->baseline, "group_mean") != 0) return r->objective;
    int per_len = strcmp(r->aggregation, "seq_mean_token_mean") == 0;  // GRPO's 1/|o|
    int l_max = strcmp(r->aggregation, "seq_mean_token_sum_norm") == 0;  // Dr. GRPO's 1/L_max
    int by_std = strcmp(r->scale, "group_std") == 0, none = strcmp(r->scale, "none") == 0;
    if (!(per_len || l_max) || !(by_std || none)) return r->objective;
    return per_len ? (by_std ? "GRPO" : "1/|o| only") : (by_std ? "std only" : "Dr. GRPO");
}

const char *group_color(const Run *r, int g) {
    const char *t = group_title(r);
    if (strcmp(t, "GRPO") == 0) return objective_color("grpo", g);
    if (strcmp(t, "Dr. GRPO") == 0) return objective_color("dr_grpo", g);
    return objective_color(r->objective, g);
}

int group_by_objective(Run *const *runs, int n, int *group, const char **names, int max_groups) {
    int ng = 0;
    for (int i = 0; i < n; i++) {
        int g = 0;
        while (g < ng && strcmp(names[g], runs[i]->objective) != 0) g++;
        if (g == ng) {
            if (ng == max_groups) die("more than %d objectives", max_groups);
            names[ng++] = runs[i]->objective;
        }
        group[i] = g;
    }
    return ng;
}

int group_budget(Run *const *runs, int n, const int *group, int g) {
    int budget = 0;
    for (int i = 0; i < n; i++)
        if (group[i] == g && runs[i]->max_new_tokens > budget) budget = runs[i]->max_new_tokens;
    return budget;
}

void runs_progress_note(Run *const *runs, int n, char *note, size_t len) {
    note[0] = 0;
    size_t k = 0;
    for (int i = 0; i < n && k + 1 < len; i++) {
        if (runs[i]->steps_planned <= 0 || run_complete(runs[i])) continue;
        const char *base = strrchr(runs[i]->path, '/');
        base = base ? base + 1 : runs[i]->path;
        k += (size_t)snprintf(note + k, len - k, "%s%s at step %lld of %d", k ? "; " : "in progress or stopped early: ",
                              base, (long long)runs[i]->n_steps, runs[i]->steps_planned);
        if (k >= len) break;  // truncated
    }
}
