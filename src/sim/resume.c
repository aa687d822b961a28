// resume.c: going on with a run from its checkpoint, and the checks that make that safe
// (resume.h; train_compare_run_config and train_init_fingerprint of train.h).
#include "resume.h"

#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "checkpoint.h"
#include "train.h"

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

int train_init_fingerprint(const char *path, char hex[17], char *err, size_t errlen) {
    ModelConfig mc;
    if (checkpoint_read_meta(path, &mc, NULL, NULL, NULL, NULL, NULL, err, errlen) != 0) return -1;
    Backend *bk = backend_create(BACKEND_CPU, err, errlen);
    if (!bk) return -1;
    Model *m = model_create(bk, &mc);
    int rc = checkpoint_load(path, m, 0, err, errlen);
    if (rc == 0) resume_fingerprint(m, hex);
    model_free(m);
    backend_destroy(bk);
    return rc;
}

int train_compare_run_config(const char *run_path, const Config *now, int allow_more_steps,
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
    if (!then) {
        free(then_fp);
        return -1;
    }
    // keys that change what a run computes at most in rounding (threads: OpenBLAS's threaded
    // sgemm sums in another order; backend) or not at all (output path); train.steps may grow
    // when a run is resumed to go on for longer
    const char *ignore[] = {"run.threads", "run.backend", "run.out", "train.steps"};
    int n_ignore = allow_more_steps ? 4 : 3;
    char diff[600];
    int n = config_diff(then, now, ignore, n_ignore, diff, sizeof diff);
    if (n == 0 && allow_more_steps && config_int(now, "train.steps") < config_int(then, "train.steps"))
        n = 1, snprintf(diff, sizeof diff, "train.steps = %lld vs %lld (fewer)",
                        (long long)config_int(then, "train.steps"), (long long)config_int(now, "train.steps"));
    config_free(then);
    if (n > 0) {
        set_err(msg, msglen, "%s was trained with another config (%d key%s differ%s, stored vs now): %s",
                run_path, n, n == 1 ? "" : "s", n == 1 ? "s" : "", diff);
        free(then_fp);
        return 1;
    }
    // the same train.init path can hold other weights (a base model pretrained again)
    if (!then_fp) return 0;
    const char *init = config_str(now, "train.init");
    char now_fp[17];
    int rc = 0;
    if (train_init_fingerprint(init, now_fp, err, sizeof err) != 0) {
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
int resume_check(const Config *cfg, const char *out_path, const char *ckpt_path,
                 int64_t *start_step, char *err, size_t errlen) {
    char msg[1024];
    // going on with other settings would mix two configs in one log
    int same = train_compare_run_config(out_path, cfg, 1, msg, sizeof msg);
    if (same != 0)
        return set_err(err, errlen, "--resume: %s%s", msg,
                       same > 0 ? " (resume with the settings and base model the run started with, or start a new run)" : "");
    if (checkpoint_read_meta(ckpt_path, NULL, NULL, NULL, NULL, start_step, NULL, msg, sizeof msg) != 0)
        return set_err(err, errlen, "--resume: %s", msg);
    return 0;
}

int resume_load(const char *ckpt_path, Model *m, char *err, size_t errlen) {
    char msg[1024];
    if (checkpoint_load(ckpt_path, m, 1, msg, sizeof msg) != 0)
        return set_err(err, errlen, "--resume: %s", msg);
    return 0;
}

RunLog *resume_open_log(const char *out_path, const Config *cfg, int64_t start_step, char *err,
                        size_t errlen) {
    RunLog *rl = runlog_open_resume(out_path, "step", start_step, err, errlen);
    // the stored config becomes the one the run goes on with (it can differ only in
    // threads, backend, output path and a larger train.steps: train_compare_run_config)
    char *text = rl ? config_to_ini(cfg) : NULL;
    if (text && runlog_set_attr_str(rl, "config", text, err, errlen) != 0) {
        runlog_close(rl, NULL, 0);
        rl = NULL;
    }
    free(text);
    return rl;
}

int resume_check_rows(RunLog *rl, const char *out_path, const char *ckpt_path,
                      int64_t start_step, char *err, size_t errlen) {
    if (runlog_rows(rl, "train") == start_step) return 0;
    return set_err(err, errlen, "--resume: %s holds %lld /train rows before step %lld "
                   "(expected one per step): the log and the checkpoint %s do not match", out_path,
                   (long long)runlog_rows(rl, "train"), (long long)start_step, ckpt_path);
}

// ---------------------------------------------------------------- checkpoints
int resume_save_checkpoint(const char *ckpt_path, Model *m, const Config *cfg,
                           const Tokenizer *tk, int done_steps, char *err, size_t errlen) {
    char *cfg_text = config_to_ini(cfg);
    const char *vocab[256];
    int nv = tok_vocab_size(tk);
    for (int v = 0; v < nv; v++) vocab[v] = tok_str(tk, v);
    CkptInfo info = {.vocab = vocab, .n_vocab = nv, .config_text = cfg_text,
                     .step = done_steps, .with_optimizer = 1};
    int rc = checkpoint_save(ckpt_path, m, &info, err, errlen);
    free(cfg_text);
    return rc;
}
