// resume.c: going on with a run from its checkpoint, and the checks that make that safe
// (resume.h).
#include "resume.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common.h"
#include "../model/checkpoint.h"
#include "setup.h"
#include "../io/logschema.h"
#include "objective.h"

// Keys a resumed run may change: they change what a run computes at most in rounding
// (threads: OpenBLAS's threaded sgemm sums in another order; backend) or not at all (output
// path); train.steps may grow when a run is resumed to go on for longer.
static const char *const RESUME_FREE_KEYS[] = {"run.threads", "run.backend", "run.out", "train.steps"};

// ---------------------------------------------------------------- the stored config
void resume_fingerprint(Model *m, char hex[17]) {
    size_t nb = model_num_params(m) * sizeof(float);
    unsigned char *b = xmalloc(nb);
    bk_download(model_backend(m), b, model_params(m), nb);
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < nb; i++) h = (h ^ b[i]) * 1099511628211ULL;
    snprintf(hex, 17, "%016llx", (unsigned long long)h);
    free(b);
}

int resume_init_fingerprint(const char *path, char hex[17], char *err, size_t errlen) {
    Backend *bk = backend_create(BACKEND_CPU, err, errlen);
    if (!bk) return -1;
    Model *m = policy_open(bk, path, NULL, 0, NULL, err, errlen);
    if (m) resume_fingerprint(m, hex);
    model_free(m);
    backend_destroy(bk);
    return m ? 0 : -1;
}

int resume_compare_run_config(const char *run_path, const Config *now, int allow_more_steps,
                             char *msg, size_t msglen) {
    char err[768];
    RunLogReader *rd = runlog_reader_open(run_path, err, sizeof err);
    if (!rd) {
        set_err(msg, msglen, "%s", err);
        return -1;
    }
    char *text = runlog_read_attr_str(rd, "config", err, sizeof err);
    // logs written before init_fingerprint existed are not compared on the weights
    char *then_fp = text && runlog_reader_has_attr(rd, "init_fingerprint")
                        ? runlog_read_attr_str(rd, "init_fingerprint", err, sizeof err) : NULL;
    runlog_reader_close(rd);
    if (!text) {
        set_err(msg, msglen, "%s: no stored config (attribute 'config'): %s", run_path, err);
        return -1;
    }
    Config *then = config_from_stored(text, run_path, msg, msglen);
    free(text);
    // the stored config holds the objective values the run used: now's resolved alike
    Config *resolved = then ? resume_resolved_config(now, msg, msglen) : NULL;
    if (!resolved) {
        config_free(then);
        free(then_fp);
        return -1;
    }
    char diff[600];
    int n = config_diff(then, resolved, RESUME_FREE_KEYS, allow_more_steps ? 4 : 3, diff, sizeof diff);
    if (n == 0 && allow_more_steps && config_settings(now)->train.steps < config_settings(then)->train.steps)
        n = 1, snprintf(diff, sizeof diff, "train.steps = %lld vs %lld (fewer)",
                        (long long)config_settings(then)->train.steps, (long long)config_settings(now)->train.steps);
    config_free(resolved);
    config_free(then);
    if (n > 0) {
        set_err(msg, msglen, "%s was trained with another config (%d key%s differ%s, stored vs now): %s",
                run_path, n, n == 1 ? "" : "s", n == 1 ? "s" : "", diff);
        free(then_fp);
        return 1;
    }
    // the same train.init path can hold other weights (a base model pretrained again)
    if (!then_fp) return 0;
    const char *init = config_settings(now)->train.init;
    char now_fp[17];
    int rc = 0;
    if (resume_init_fingerprint(init, now_fp, err, sizeof err) != 0) {
        set_err(msg, msglen, "train.init: %s", err);
        rc = -1;
    } else if (strcmp(then_fp, now_fp) != 0) {
        set_err(msg, msglen, "%s was trained from other weights than train.init = '%s' holds now "
                "(init_fingerprint %s in the run, %s now: the base model was made again)",
                run_path, init, then_fp, now_fp);
        rc = 1;
    }
    free(then_fp);
    return rc;
}

// ---------------------------------------------------------------- --resume
// Every table of a train log (the optional ones, e.g. /compare, where the log has them), every
// column of the schema, and in each a row for every step before start (key column "step" in
// order up to there). 0, or -1 with a message.
static int check_tables(RunLogReader *rd, const char *path, int64_t start, char *err,
                        size_t errlen) {
    char ds[192], msg[768];
    for (int t = 0; t < LOG_KIND_TRAIN.n_tables; t++) {
        const TableSpec *ts = LOG_KIND_TRAIN.tables[t];
        snprintf(ds, sizeof ds, "%s/step", ts->name);
        if (t >= LOG_KIND_TRAIN.n_always && !runlog_reader_has(rd, ds)) continue;
        int64_t nk = 0, k = 0;
        double *key = runlog_read_column(rd, ds, &nk, msg, sizeof msg);
        if (!key) return set_err(err, errlen, "--resume: %s", msg);
        for (double prev = 0; k < nk && key[k] < (double)start; prev = key[k], k++)
            if (!(key[k] >= prev) || key[k] != floor(key[k])) {
                set_err(err, errlen, "--resume: %s: row %lld of /%s is %g after %g: not a step in "
                        "order (corrupt log?)", path, (long long)k, ds, key[k], prev);
                free(key);
                return -1;
            }
        free(key);
        for (int c = 0; c < ts->n_cols; c++) {
            snprintf(ds, sizeof ds, "%s/%s", ts->name, ts->cols[c].spec.name);
            int64_t n = 0;
            double *col = runlog_read_column(rd, ds, &n, msg, sizeof msg);
            if (!col) return set_err(err, errlen, "--resume: %s", msg);
            free(col);
            if (n < k)
                return set_err(err, errlen, "--resume: %s: column /%s holds %lld rows, fewer than the "
                               "%lld rows of the steps before step %lld (a ragged table: corrupt log?)",
                               path, ds, (long long)n, (long long)k, (long long)start);
        }
    }
    return 0;
}

// The checkpoint belongs to the log: the same run_id (where either has one) and the same
// config (but for the keys a resume may change). 0, or -1 with a message.
static int check_checkpoint_run(const char *ckpt_path, const char *out_path, const char *log_id,
                                const Config *then, const char *ckpt_text, char *err, size_t errlen) {
    char msg[768], diff[600];
    char *ck_id = NULL;
    if (checkpoint_read_run_id(ckpt_path, &ck_id, msg, sizeof msg) < 0)
        return set_err(err, errlen, "--resume: %s", msg);
    int other = (log_id || ck_id) && (!log_id || !ck_id || strcmp(log_id, ck_id) != 0);
    if (other) {
        set_err(err, errlen, "--resume: the checkpoint %s belongs to another run (run_id %s) than the "
                "log %s (run_id %s): left by an earlier run at this path? Start the run again with "
                "--overwrite (which removes it)", ckpt_path, ck_id ? ck_id : "none", out_path,
                log_id ? log_id : "none");
        free(ck_id);
        return -1;
    }
    free(ck_id);
    if (!ckpt_text)
        return set_err(err, errlen, "--resume: the checkpoint %s stores no config: not a checkpoint "
                       "of a train run", ckpt_path);
    Config *ck = config_from_stored(ckpt_text, ckpt_path, msg, sizeof msg);
    if (!ck) return set_err(err, errlen, "--resume: %s", msg);
    int n = config_diff(then, ck, RESUME_FREE_KEYS, 4, diff, sizeof diff);
    config_free(ck);
    if (n > 0)
        return set_err(err, errlen, "--resume: the checkpoint %s was saved by a run with another config "
                       "than the log %s (%d key%s, log vs checkpoint: %s): start the run again with "
                       "--overwrite", ckpt_path, out_path, n, n == 1 ? "" : "s", diff);
    return 0;
}

const char *resume_log_to_read(const char *log_path, char *buf, size_t len) {
    if ((size_t)snprintf(buf, len, "%s%s", log_path, RESUME_LOG_COPY_SUFFIX) >= len) return log_path;
    return access(buf, F_OK) == 0 ? buf : log_path;
}

static int resume_check_log(const Config *cfg, const char *log_path, const char *ckpt_path,
                            ResumePoint *rp, char *err, size_t errlen) {
    char msg[1024], copy[4200];
    memset(rp, 0, sizeof *rp);
    struct stat st;
    const char *out_path = resume_log_to_read(log_path, copy, sizeof copy);
    rp->from_copy = out_path == copy;
    // going on with other settings would mix two configs in one log
    int same = resume_compare_run_config(out_path, cfg, 1, msg, sizeof msg);
    if (same < 0 && stat(ckpt_path, &st) != 0 && errno == ENOENT)
        // nothing to go on from: no step of the run is saved anywhere
        return set_err(err, errlen, "--resume: %s; and there is no checkpoint %s to go on from: "
                       "start the run again with --overwrite", msg, ckpt_path);
    if (same != 0)
        return set_err(err, errlen, "--resume: %s%s", msg,
                       same > 0 ? " (resume with the settings and base model the run started with, or start a new run)" : "");
    RunLogReader *rd = runlog_reader_open(out_path, msg, sizeof msg);
    if (!rd) return set_err(err, errlen, "--resume: %s", msg);
    int rc = -1;
    char *then_text = NULL, *log_id = NULL, *ck_text = NULL;
    Config *then = NULL;
    int64_t n_train = 0, logged = 0;
    double *step = runlog_read_column(rd, "train/step", &n_train, msg, sizeof msg);
    if (!step) {
        set_err(err, errlen, "--resume: %s", msg);
        goto done;
    }
    while (logged < n_train && step[logged] == (double)logged) logged++;  // steps 0, 1, ...
    free(step);
    if (!(then_text = runlog_read_attr_str(rd, "config", msg, sizeof msg)) ||
        !(then = config_from_stored(then_text, out_path, msg, sizeof msg))) {
        set_err(err, errlen, "--resume: %s", msg);
        goto done;
    }
    if (runlog_reader_has_attr(rd, "run_id") &&
        !(log_id = runlog_read_attr_str(rd, "run_id", msg, sizeof msg))) {
        set_err(err, errlen, "--resume: %s", msg);
        goto done;
    }
    if (stat(ckpt_path, &st) != 0 && errno == ENOENT) {
        // killed before its first checkpoint was saved: the run restarts from step 0 (every
        // draw is keyed by the step, so the steps redone are the ones logged). The checkpoint
        // after step `first` is saved before step `first` + 1 starts, so a log with more steps
        // had one.
        int64_t every = config_settings(then)->train.checkpoint_every, steps = config_settings(then)->train.steps;
        int64_t first = every > 0 && every < steps ? every : steps;
        if (logged > first) {
            set_err(err, errlen, "--resume: the checkpoint %s is missing, but the log %s holds %lld steps "
                    "and a checkpoint was saved after step %lld: it was removed or moved (put it back, "
                    "or start the run again with --overwrite)", ckpt_path, out_path, (long long)logged,
                    (long long)first);
            goto done;
        }
        rp->start_step = 0, rp->from_checkpoint = 0;
    } else {
        int64_t ck_step = 0;
        if (checkpoint_read_meta(ckpt_path, NULL, NULL, NULL, &ck_text, &ck_step, NULL, msg, sizeof msg) != 0) {
            set_err(err, errlen, "--resume: %s", msg);
            goto done;
        }
        if (check_checkpoint_run(ckpt_path, out_path, log_id, then, ck_text, err, errlen) != 0) goto done;
        int64_t steps = config_settings(cfg)->train.steps;
        if (ck_step < 0 || ck_step > steps || ck_step > logged) {
            set_err(err, errlen, "--resume: the checkpoint %s is at step %lld, outside 0 .. %lld (train.steps "
                    "%lld; the log %s holds steps 0 .. %lld in order)", ckpt_path, (long long)ck_step,
                    (long long)(logged < steps ? logged : steps), (long long)steps, out_path,
                    (long long)logged - 1);
            goto done;
        }
        rp->start_step = ck_step, rp->from_checkpoint = 1;
    }
    rp->logged_steps = n_train;
    if (check_tables(rd, out_path, rp->start_step, err, errlen) != 0) goto done;
    if (log_id) snprintf(rp->run_id, sizeof rp->run_id, "%s", log_id);
    rc = 0;
done:
    runlog_reader_close(rd);
    config_free(then);
    free(then_text);
    free(log_id);
    free(ck_text);
    return rc;
}

int resume_check(const Config *cfg, const char *log_path, const char *ckpt_path,
                 ResumePoint *rp, char *err, size_t errlen) {
    if (resume_check_log(cfg, log_path, ckpt_path, rp, err, errlen) == 0) return 0;
    // a log that does not read, without the copy: torn by a kill under a grpolab that kept
    // no copy (before 2026-12-06), it holds nothing to go on from
    if (!rp->from_copy && (strstr(err, "HDF5") || strstr(err, "corrupt"))) {
        size_t n = strlen(err);
        snprintf(err + n, errlen > n ? errlen - n : 0, ". The log has no copy %s%s to go on from: "
                 "a log torn by a kill under a grpolab older than that copy (2026-12-06) cannot be "
                 "resumed; start the run again with --overwrite", log_path, RESUME_LOG_COPY_SUFFIX);
    }
    return -1;
}

int resume_load(const char *ckpt_path, Model *m, char *err, size_t errlen) {
    char msg[1024];
    if (checkpoint_load(ckpt_path, m, 1, msg, sizeof msg) != 0)
        return set_err(err, errlen, "--resume: %s", msg);
    return 0;
}

RunLog *resume_open_log(const char *out_path, const Config *cfg, const ResumePoint *rp,
                        char *err, size_t errlen) {
    char copy[4200];
    snprintf(copy, sizeof copy, "%s%s", out_path, RESUME_LOG_COPY_SUFFIX);
    if (rp->from_copy ? runlog_save_copy(copy, out_path, err, errlen) != 0
                      : runlog_save_copy(out_path, copy, err, errlen) != 0)
        return NULL;
    // nothing in the file changes before runlog_start_swmr but the stored config, set last
    RunLog *rl = runlog_open_resume(out_path, "step", rp->start_step, err, errlen);
    if (!rl) return NULL;
    char *text = NULL;
    int ok = logschema_declare(rl, &LOG_KIND_TRAIN, err, errlen) == 0;
    if (ok && runlog_rows(rl, "train") != rp->start_step)
        ok = 0, set_err(err, errlen, "--resume: %s holds %lld /train rows before step %lld (expected one "
                        "per step)", out_path, (long long)runlog_rows(rl, "train"), (long long)rp->start_step);
    // the stored config becomes the one the run goes on with (it can differ only in
    // threads, backend, output path and a larger train.steps: resume_compare_run_config)
    if (ok) text = config_to_ini(cfg);
    if (ok) ok = runlog_set_attr_str(rl, "config", text, err, errlen) == 0;
    free(text);
    if (!ok) {
        runlog_close(rl, NULL, 0);
        return NULL;
    }
    return rl;
}

// ---------------------------------------------------------------- checkpoints
int resume_save_checkpoint(const char *ckpt_path, Model *m, const Config *cfg,
                           const Tokenizer *tk, int done_steps, const char *run_id, char *err,
                           size_t errlen) {
    char *cfg_text = config_to_ini(cfg);
    const char *vocab[256];
    int nv = tok_vocab_size(tk);
    for (int v = 0; v < nv; v++) vocab[v] = tok_str(tk, v);
    CkptInfo info = {.vocab = vocab, .n_vocab = nv, .config_text = cfg_text,
                     .step = done_steps, .with_optimizer = 1,
                     .run_id = run_id && run_id[0] ? run_id : NULL};
    int rc = checkpoint_save(ckpt_path, m, &info, err, errlen);
    free(cfg_text);
    return rc;
}

// ---------------------------------------------------------------- the stored config
// The shortest decimal text that reads back to the float v.
static void float_text(float v, char *buf, size_t len) {
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, len, "%.*g", digits, (double)v);
        if ((float)strtod(buf, NULL) == v) return;
    }
}

// Sets key to the value used in the Config ctx (objective_unset_knobs).
typedef struct {
    Config *c;
    char *err;
    size_t errlen;
} SetUsed;

static int set_used(void *ctx, const char *key, char kind, double used) {
    SetUsed *u = ctx;
    char value[64], set[160];
    if (kind == 'f') float_text((float)used, value, sizeof value);
    else if (kind == 'b') snprintf(value, sizeof value, "%s", used != 0 ? "true" : "false");
    else snprintf(value, sizeof value, "%.0f", used);
    snprintf(set, sizeof set, "%s=%s", key, value);
    return config_set(u->c, set, u->err, u->errlen);
}

Config *resume_resolved_config(const Config *cfg, char *err, size_t errlen) {
    const int max_new = config_settings(cfg)->world.max_new_tokens;
    ObjectiveConfig oc;
    if (objective_from_config(cfg, max_new, &oc, err, errlen) != 0) return NULL;
    char *text = config_to_ini(cfg);
    Config *c = config_from_stored(text, "the config", err, errlen);
    free(text);
    if (!c) return NULL;
    // each knob the preset gives a value: what the config's value means, and what is used
    SetUsed u = {c, err, errlen};
    if (objective_unset_knobs(cfg, max_new, &oc, set_used, &u) != 0) {
        config_free(c);
        return NULL;
    }
    return c;
}
