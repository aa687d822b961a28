// pretrain.c: `grpolab pretrain`, the base model that RL starts from: next-token
// cross-entropy on the world's corpus (corpus.h), AdamW with linear warm-up and cosine decay.
#include "pretrain.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../../common.h"
#include "../model/checkpoint.h"
#include "../world/corpus.h"
#include "../io/h5util.h"
#include "../io/interrupt.h"
#include "resume.h"
#include "setup.h"
#include "../world/tokenizer.h"
#include "train.h"

// Learning rate at step s: linear warm-up to lr over `warmup` steps, then cosine to lr*min_frac.
static float lr_at(int s, int steps, float lr, int warmup, float min_frac) {
    if (s < warmup) return lr * (float)(s + 1) / (float)warmup;
    float progress = steps > warmup ? (float)(s - warmup) / (float)(steps - warmup) : 1.0f;
    return lr * (min_frac + (1.0f - min_frac) * 0.5f * (1.0f + cosf(3.14159265f * progress)));
}

// What RL and evaluation read, and keys that do not change the weights: a base model and a
// pretraining's checkpoint are compared with a config without them.
static const char *const PRETRAIN_FREE_KEYS[] = {
    "train.*", "eval.*", "objective.*", "run.threads", "run.backend", "run.out", "pretrain.out",
    "pretrain.log_every", "pretrain.checkpoint_every"};
#define N_PRETRAIN_FREE_KEYS ((int)(sizeof PRETRAIN_FREE_KEYS / sizeof *PRETRAIN_FREE_KEYS))

int pretrain_compare_model_config(const char *model_path, const Config *now, char *msg,
                                  size_t msglen) {
    char *text = NULL;
    if (checkpoint_read_meta(model_path, NULL, NULL, NULL, &text, NULL, NULL, msg, msglen) != 0)
        return -1;
    if (!text) {
        set_err(msg, msglen, "%s: no stored config (attribute 'config'): not written by grpolab "
                "pretrain?", model_path);
        return -1;
    }
    Config *then = config_from_stored(text, model_path, msg, msglen);
    free(text);
    if (!then) return -1;
    char diff[600];
    int n = config_diff(then, now, PRETRAIN_FREE_KEYS, N_PRETRAIN_FREE_KEYS, diff, sizeof diff);
    config_free(then);
    if (n > 0) {
        set_err(msg, msglen, "%s was pretrained with another config (%d key%s differ%s, stored vs "
                "now): %s", model_path, n, n == 1 ? "" : "s", n == 1 ? "s" : "", diff);
        return 1;
    }
    // continued pretraining: the model it continued must still be the one at pretrain.init
    char *then_fp = NULL, now_fp[17], err[512];
    if (checkpoint_read_str_attr(model_path, "init_fingerprint", &then_fp, msg, msglen) < 0) return -1;
    if (!then_fp) return 0;
    const char *init = config_settings(now)->pretrain.init;
    int rc = 0;
    if (resume_init_fingerprint(init, now_fp, err, sizeof err) != 0) {
        set_err(msg, msglen, "%s continued pretraining from pretrain.init '%s', which cannot be read "
                "now: %s", model_path, init, err);
        rc = 1;
    } else if (strcmp(then_fp, now_fp) != 0) {
        set_err(msg, msglen, "%s continued pretraining from other weights than those now at "
                "pretrain.init '%s' (fingerprint %s then, %s now): that model was pretrained again",
                model_path, init, then_fp, now_fp);
        rc = 1;
    }
    free(then_fp);
    return rc;
}

// ---------------------------------------------------------------- checkpoints for --resume
// A pretraining keeps "<out>" RESUME_CKPT_SUFFIX (the parameters, the AdamW moments and step,
// the steps done, the config) every pretrain.checkpoint_every steps, on a signal, and where
// writing the model fails; it is removed once the model is written. The documents of step s
// are the corpus's documents s*B .. s*B+B-1 and the learning rate is a function of s, so the
// steps done are the data position: nothing else is drawn after the initialisation.

// The checkpoint's path: out_path + RESUME_CKPT_SUFFIX, malloc'd.
static char *pretrain_ckpt_path(const char *out_path) {
    return path_with_suffix(out_path, RESUME_CKPT_SUFFIX);
}

static int pretrain_save_checkpoint(const char *ckpt_path, Model *m, const Config *cfg,
                                    int done, char *err, size_t errlen) {
    return resume_save_checkpoint(ckpt_path, m, cfg, tokenizer_default(), done, NULL, err, errlen);
}

// The steps a checkpoint at ckpt_path holds (in *done), after checking that it was saved by
// a pretraining with cfg (but for PRETRAIN_FREE_KEYS) within its pretrain.steps. 0, or -1 with
// a message naming the file and the keys that differ, stored vs now.
static int pretrain_check_checkpoint(const char *ckpt_path, const Config *cfg, int *done,
                                     char *err, size_t errlen) {
    char msg[1024], diff[600];
    char *text = NULL;
    int64_t step = 0;
    int has_opt = 0;
    if (checkpoint_read_meta(ckpt_path, NULL, NULL, NULL, &text, &step, &has_opt, msg, sizeof msg) != 0)
        return set_err(err, errlen, "--resume: %s", msg);
    if (!text || !has_opt) {
        free(text);
        return set_err(err, errlen, "--resume: %s holds no %s: not a checkpoint of a pretraining",
                       ckpt_path, text ? "optimizer state" : "config");
    }
    Config *then = config_from_stored(text, ckpt_path, msg, sizeof msg);
    free(text);
    if (!then) return set_err(err, errlen, "--resume: %s", msg);
    int n = config_diff(then, cfg, PRETRAIN_FREE_KEYS, N_PRETRAIN_FREE_KEYS, diff, sizeof diff);
    config_free(then);
    if (n > 0)
        return set_err(err, errlen, "--resume: the checkpoint %s was saved by a pretraining with "
                       "another config (%d key%s differ%s, stored vs now): %s (resume with the "
                       "config it started with, or start again with --overwrite)", ckpt_path, n,
                       n == 1 ? "" : "s", n == 1 ? "s" : "", diff);
    int64_t steps = config_settings(cfg)->pretrain.steps;
    if (step < 0 || step > steps)
        return set_err(err, errlen, "--resume: the checkpoint %s is at step %lld, outside 0 .. %lld "
                       "(pretrain.steps; corrupt?)", ckpt_path, (long long)step, (long long)steps);
    *done = (int)step;
    return 0;
}

// Before a pretraining starts: with resume, the checkpoint's state into m and the steps it
// holds into *done (0 where there is none yet: the pretraining starts from step 0); with
// overwrite, an earlier pretraining's checkpoint at this path removed; else one there is an
// error (an interrupted pretraining is not discarded silently). 0, or 2 with a message.
static int pretrain_prepare_checkpoint(const char *ckpt_path, const Config *cfg, int mode,
                                       Model *m, int *done, char *err, size_t errlen) {
    *done = 0;
    int exists = access(ckpt_path, F_OK) == 0;
    if (mode == PRETRAIN_RESUME) {
        if (!exists) {
            fprintf(stderr, "pretrain: --resume: no checkpoint %s yet: the pretraining starts from "
                    "step 0\n", ckpt_path);
            return 0;
        }
        char msg[1024];
        if (pretrain_check_checkpoint(ckpt_path, cfg, done, err, errlen) != 0) return 2;
        if (checkpoint_load(ckpt_path, m, 1, msg, sizeof msg) != 0) {
            set_err(err, errlen, "--resume: %s", msg);
            return 2;
        }
        fprintf(stderr, "pretrain: --resume: going on from %s after step %d\n", ckpt_path, *done);
        return 0;
    }
    char *tmp = path_with_suffix(ckpt_path, ".tmp");
    int rc = 0;
    if (mode == PRETRAIN_OVERWRITE) {
        const char *files[] = {ckpt_path, tmp};
        for (int i = 0; i < 2 && rc == 0; i++) {
            if (unlink(files[i]) == 0)
                fprintf(stderr, "pretrain: removed %s (of the pretraining this one replaces)\n", files[i]);
            else if (errno != ENOENT)
                rc = 2, set_err(err, errlen, "cannot remove '%s' (of the pretraining this one "
                                "replaces): %s", files[i], strerror(errno));
        }
    } else if (exists) {
        rc = 2;
        set_err(err, errlen, "%s exists: a pretraining into this output was interrupted; continue "
                "it with --resume, or start again with --overwrite", ckpt_path);
    }
    free(tmp);
    return rc;
}

// 0 if out_path can take the model of n_params parameters and its checkpoints: its directory
// exists and is writable, and its filesystem has room for the model and a checkpoint (the
// parameters as float32, and as many again for each AdamW moment in the checkpoint, and 1 MiB
// for the metadata); else -1 with a message naming the path and errno's reason.
static int check_out_free(const char *out_path, size_t n_params, char *err, size_t errlen) {
    if (check_out_path("cannot write checkpoint", out_path, 1, err, errlen) != 0) return -1;
    char *dir = xstrdup(out_path), *slash = strrchr(dir, '/');
    if (slash) slash[slash == dir ? 1 : 0] = '\0';
    struct statvfs fs;
    int ret = 0;
    double need = (double)n_params * 4.0 * 4 + (1 << 20);
    if (statvfs(slash ? dir : ".", &fs) == 0 && (double)fs.f_bavail * (double)fs.f_frsize < need)
        ret = set_err(err, errlen, "cannot write checkpoint '%s': %s (the model and its checkpoint "
                      "need about %.0f bytes, the filesystem has %.0f free)", out_path, strerror(ENOSPC), need,
                      (double)fs.f_bavail * (double)fs.f_frsize);
    free(dir);
    return ret;
}

// After a failed checkpoint save (err: why): the one on disk is whole, of the steps it says.
static void report_kept_checkpoint(const char *ckpt_path, const char *err) {
    int64_t step = -1;
    char msg[512];
    fprintf(stderr, "grpolab: error: %s\n", err);
    if (checkpoint_read_meta(ckpt_path, NULL, NULL, NULL, NULL, &step, NULL, msg, sizeof msg) == 0)
        fprintf(stderr, "pretrain: the last good checkpoint %s (after step %lld) is kept; make room "
                "and go on from it with --resume\n", ckpt_path, (long long)step);
    else
        fprintf(stderr, "pretrain: no checkpoint was saved: the pretraining starts again from step 0\n");
}

// Continued pretraining: the model of init_path (policy_open; its architecture must be mc's,
// the config's) and what the output records of it, its stored config (*init_config, malloc'd;
// NULL if it has none) and the fingerprint of the weights just loaded (resume_fingerprint, as
// resume_init_fingerprint would compute it from the file). NULL with a message naming the
// file on error.
static Model *open_init(Backend *bk, const char *init_path, const ModelConfig *mc, char **init_config,
                        char fp[17], char *err, size_t errlen) {
    *init_config = NULL;
    Model *m = policy_open(bk, init_path, mc, 0, NULL, err, errlen);
    if (!m) return NULL;
    if (checkpoint_read_meta(init_path, NULL, NULL, NULL, init_config, NULL, NULL, err, errlen) != 0) {
        free(*init_config);
        *init_config = NULL;
        model_free(m);
        return NULL;
    }
    resume_fingerprint(m, fp);
    return m;
}

int pretrain_run(const Config *cfg, const char *backend_override, const char *out_path,
                 const char *init_path, PretrainMode mode, PretrainStats *stats) {
    char err[1024];
    ModelConfig mc;
    if (setup_model_config(cfg, &mc, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        return 2;
    }
    const Tokenizer *tk = tokenizer_default();
    if (mc.vocab_size != tok_vocab_size(tk)) {  // an id without a token could be sampled
        fprintf(stderr, "grpolab: error: model.vocab_size = %d: a model of this world needs exactly "
                "the tokenizer's %d tokens (set model.vocab_size = %d)\n",
                mc.vocab_size, tok_vocab_size(tk), tok_vocab_size(tk));
        return 2;
    }
    CorpusParams cp;
    if (setup_corpus_params(cfg, &cp, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        return 2;
    }
    Backend *bk = setup_backend(cfg, backend_override, 1, err, sizeof err);
    if (!bk) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        return 2;
    }
    int steps = config_settings(cfg)->pretrain.steps;
    int B = config_settings(cfg)->pretrain.batch_size;
    int warmup = config_settings(cfg)->pretrain.warmup_steps;
    float min_frac = (float)config_settings(cfg)->pretrain.min_lr_frac;
    int log_every = config_settings(cfg)->pretrain.log_every;
    int ckpt_every = config_settings(cfg)->pretrain.checkpoint_every;
    uint64_t seed = (uint64_t)config_settings(cfg)->run.seed;
    AdamWConfig opt = setup_adamw(cfg);
    float lr = opt.lr;
    int T = mc.max_seq_len;

    char *init_config = NULL, init_fp[17] = "";
    if (!init_path && *config_settings(cfg)->pretrain.init) init_path = config_settings(cfg)->pretrain.init;
    Model *m = init_path ? open_init(bk, init_path, &mc, &init_config, init_fp, err, sizeof err)
                         : model_create(bk, &mc);
    // the output is checked before any training: its directory, and room for the checkpoint
    if (!m || check_out_free(out_path, model_num_params(m), err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        model_free(m);
        free(init_config);
        backend_destroy(bk);
        return 2;
    }
    if (!init_path) model_init_params(m, seed);
    char *ckpt_path = pretrain_ckpt_path(out_path);
    int start = 0, prc = pretrain_prepare_checkpoint(ckpt_path, cfg, mode, m, &start, err, sizeof err);
    if (prc != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        free(ckpt_path);
        model_free(m);
        backend_destroy(bk);
        return prc;
    }
    // Documents vary from ~20 to 256 tokens: a step's documents are sorted by length and run
    // as micro-batches of similar lengths (gradient accumulation), so little is spent on padding.
    int mb = config_settings(cfg)->pretrain.micro_batch;
    if (mb > B) mb = B;
    size_t cap = 8192;  // bytes of a document, and so at most as many tokens
    int *doc_ids = xmalloc((size_t)B * (T + 1) * sizeof(int)), *doc_len = xmalloc((size_t)B * sizeof(int));
    int *order = xmalloc((size_t)B * sizeof(int)), *ids = xmalloc(cap * sizeof(int));
    int *tokens = xmalloc((size_t)mb * T * sizeof(int)), *targets = xmalloc((size_t)mb * T * sizeof(int));
    int *lengths = xmalloc((size_t)mb * sizeof(int));
    char *doc = xmalloc(cap);
    fprintf(stderr, "pretrain: %zu parameters (d_model %d, %d layers), %d steps x %d documents "
            "(micro-batches of %d), backend %s\n", model_num_params(m), mc.d_model, mc.n_layers,
            steps, B, mb, backend_name(bk->kind));
    double t_start = wall_time(), loss_acc = 0, tokens_acc = 0, t_log = t_start;
    int n_acc = 0, n_cut = 0, rc = 0, saved = 1;  // saved: the state after the last step is on disk
    long long total_tokens = 0;
    InterruptHandlers handlers;
    interrupt_install(&handlers);
    int s = start;
    for (; s < steps && rc == 0; s++) {
        size_t n_targets = 0;
        for (int b = 0; b < B; b++) {
            int64_t index = (int64_t)s * B + b;
            if (corpus_document(&cp, seed, index, doc, cap, NULL) < 0)
                die("pretrain: corpus document %lld does not fit %zu bytes", (long long)index, cap);
            // documents longer than the context (deliberate loops) are cut: the model learns
            // their beginning, and that they can go on past the budget
            int n = tok_encode(tk, doc, ids, (int)cap, err, sizeof err);
            if (n < 0) die("pretrain: corpus document %lld: %s", (long long)index, err);
            if (n > T + 1) {
                n = T + 1;
                n_cut++;
            }
            if (n < 2) die("pretrain: corpus document %lld is empty", (long long)index);
            memcpy(doc_ids + (size_t)b * (T + 1), ids, (size_t)n * sizeof(int));
            doc_len[b] = n - 1;  // inputs ids[0..n-2], targets ids[1..n-1]
            n_targets += (size_t)(n - 1);
            order[b] = b;
        }
        for (int i = 1; i < B; i++)  // insertion sort by length (B is small)
            for (int j = i; j > 0 && doc_len[order[j - 1]] < doc_len[order[j]]; j--) {
                int t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            }
        model_zero_grad(m);
        double loss_sum = 0;
        for (int i0 = 0; i0 < B; i0 += mb) {
            int nb = B - i0 < mb ? B - i0 : mb, Tb = doc_len[order[i0]];
            for (int k = 0; k < nb; k++) {
                int d = order[i0 + k];
                const int *src = doc_ids + (size_t)d * (T + 1);
                lengths[k] = doc_len[d];
                for (int t = 0; t < Tb; t++) {
                    tokens[(size_t)k * Tb + t] = t < doc_len[d] ? src[t] : 0;
                    targets[(size_t)k * Tb + t] = t < doc_len[d] ? src[t + 1] : -1;
                }
            }
            model_forward(m, tokens, targets, lengths, nb, Tb);
            loss_sum += (double)model_cross_entropy_step(m, 1, (double)n_targets) *
                        (double)model_num_targets(m);
        }
        float loss = (float)(loss_sum / (double)n_targets);
        if (!isfinite(loss)) die("pretrain: loss is %f at step %d (lower optim.lr?)", loss, s);
        opt.lr = lr_at(s, steps, lr, warmup, min_frac);
        double gnorm = model_adamw_step(m, &opt);
        total_tokens += (long long)n_targets;
        if (stats) stats->tokens = total_tokens;
        loss_acc += loss;
        tokens_acc += (double)n_targets;
        n_acc++;
        saved = 0;
        if ((s + 1) % log_every == 0 || s + 1 == steps) {
            double now = wall_time(), elapsed = now - t_start;
            double eta = elapsed / (s + 1 - start) * (steps - s - 1);
            fprintf(stderr, "pretrain step %5d/%d  loss %.4f  lr %.2e  gnorm %.2f  %6.0f tok/s  "
                    "elapsed %4.0fs  ETA %4.0fs\n", s + 1, steps, loss_acc / n_acc, opt.lr, gnorm,
                    tokens_acc / (now - t_log), elapsed, eta);
            if (stats) {
                if (s + 1 <= log_every) stats->first_loss = (float)(loss_acc / n_acc);
                stats->last_loss = (float)(loss_acc / n_acc);
            }
            loss_acc = tokens_acc = 0;
            n_acc = 0;
            t_log = now;
        }
        int stop = interrupt_pending();
        if (s + 1 < steps && ((ckpt_every > 0 && (s + 1) % ckpt_every == 0) || stop)) {
            if (pretrain_save_checkpoint(ckpt_path, m, cfg, s + 1, err, sizeof err) != 0) {
                report_kept_checkpoint(ckpt_path, err);
                rc = 1;
            }
            saved = 1;
        }
        if (stop && rc == 0) {
            fprintf(stderr, "pretrain: stopped by signal %d after step %d (checkpointed in %s)\n",
                    stop, s + 1, ckpt_path);
            train_print_resume_hint("pretrain", out_path);
            rc = 128 + stop;
        }
    }
    interrupt_restore(&handlers);
    if (rc == 0) {
        const char *vocab[256];
        int nv = tok_strings(tk, vocab, 256);
        char *text = config_to_ini(cfg);
        CkptInfo info = {.vocab = vocab, .n_vocab = nv, .config_text = text, .step = steps, .with_optimizer = 0,
                         .init_config = init_path ? (init_config ? init_config : "") : NULL,
                         .init_fingerprint = init_path ? init_fp : NULL};
        if (checkpoint_save(out_path, m, &info, err, sizeof err) != 0) {
            // the state after the last step, for --resume to write the model again
            char err2[1024];
            fprintf(stderr, "grpolab: error: %s\n", err);
            if (!saved && pretrain_save_checkpoint(ckpt_path, m, cfg, steps, err2, sizeof err2) != 0)
                report_kept_checkpoint(ckpt_path, err2);
            else
                fprintf(stderr, "pretrain: the state after step %d is in %s: go on with --resume "
                        "once the model can be written\n", steps, ckpt_path);
            rc = 1;
        } else {
            fprintf(stderr, "pretrain: wrote %s (%lld tokens in %.0f s; %d documents cut at the "
                    "context of %d tokens)\n", out_path, total_tokens, wall_time() - t_start, n_cut, T);
            if (unlink(ckpt_path) != 0 && errno != ENOENT)
                fprintf(stderr, "pretrain: warning: cannot remove the checkpoint %s: %s\n", ckpt_path,
                        strerror(errno));
        }
        free(text);
    }
    free(ckpt_path);
    free(init_config);
    free(tokens);
    free(targets);
    free(lengths);
    free(ids);
    free(doc);
    free(doc_ids);
    free(doc_len);
    free(order);
    model_free(m);
    backend_destroy(bk);
    return rc;
}
