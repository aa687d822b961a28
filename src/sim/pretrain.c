// pretrain.c: `grpolab pretrain`, the base model that RL starts from: next-token
// cross-entropy on the world's corpus (corpus.h), AdamW with linear warm-up and cosine decay.
#include "pretrain.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "../common.h"
#include "checkpoint.h"
#include "corpus.h"
#include "h5util.h"
#include "setup.h"
#include "tokenizer.h"
#include "train.h"

// Learning rate at step s: linear warm-up to lr over `warmup` steps, then cosine to lr*min_frac.
static float lr_at(int s, int steps, float lr, int warmup, float min_frac) {
    if (s < warmup) return lr * (float)(s + 1) / (float)warmup;
    float progress = steps > warmup ? (float)(s - warmup) / (float)(steps - warmup) : 1.0f;
    return lr * (min_frac + (1.0f - min_frac) * 0.5f * (1.0f + cosf(3.14159265f * progress)));
}

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
    // what RL and evaluation read, and keys that do not change the weights
    const char *ignore[] = {"train.*", "eval.*", "objective.*", "run.threads", "run.backend",
                            "run.out", "pretrain.out", "pretrain.log_every"};
    char diff[600];
    int n = config_diff(then, now, ignore, (int)(sizeof ignore / sizeof *ignore), diff, sizeof diff);
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
    const char *init = config_str(now, "pretrain.init");
    int rc = 0;
    if (train_init_fingerprint(init, now_fp, err, sizeof err) != 0) {
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

// 0 if out_path can take the checkpoint of a model of n_params parameters: its directory
// exists and is writable, and its filesystem has room for the file (the parameters as float32
// and 1 MiB for the metadata); else -1 with a message naming the path and errno's reason.
static int check_out_free(const char *out_path, size_t n_params, char *err, size_t errlen) {
    if (check_out_path("cannot write checkpoint", out_path, 1, err, errlen) != 0) return -1;
    char *dir = xstrdup(out_path), *slash = strrchr(dir, '/');
    if (slash) slash[slash == dir ? 1 : 0] = '\0';
    struct statvfs fs;
    int ret = 0;
    double need = (double)n_params * 4.0 + (1 << 20);
    if (statvfs(slash ? dir : ".", &fs) == 0 && (double)fs.f_bavail * (double)fs.f_frsize < need)
        ret = set_err(err, errlen, "cannot write checkpoint '%s': %s (the checkpoint needs about %.0f "
                      "bytes, the filesystem has %.0f free)", out_path, strerror(ENOSPC), need,
                      (double)fs.f_bavail * (double)fs.f_frsize);
    free(dir);
    return ret;
}

// Continued pretraining: loads the weights of init_path into m (its architecture must be m's;
// checkpoint_load names a field that differs) and returns what the output records of it, its
// stored config (*init_config, malloc'd; NULL if it has none) and the fingerprint of its
// weights (train_init_fingerprint). -1 with a message naming the file on error.
static int load_init(const char *init_path, Model *m, char **init_config, char fp[17], char *err,
                     size_t errlen) {
    *init_config = NULL;
    if (checkpoint_load(init_path, m, 0, err, errlen) != 0) return -1;
    if (checkpoint_read_meta(init_path, NULL, NULL, NULL, init_config, NULL, NULL, err, errlen) != 0 ||
        train_init_fingerprint(init_path, fp, err, errlen) != 0) {
        free(*init_config);
        *init_config = NULL;
        return -1;
    }
    return 0;
}

int pretrain_run(const Config *cfg, const char *backend_override, const char *out_path,
                 const char *init_path, PretrainStats *stats) {
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
    int steps = (int)config_int(cfg, "pretrain.steps");
    int B = (int)config_int(cfg, "pretrain.batch_size");
    int warmup = (int)config_int(cfg, "pretrain.warmup_steps");
    float min_frac = (float)config_float(cfg, "pretrain.min_lr_frac");
    int log_every = (int)config_int(cfg, "pretrain.log_every");
    uint64_t seed = (uint64_t)config_int(cfg, "run.seed");
    AdamWConfig opt = setup_adamw(cfg);
    float lr = opt.lr;
    int T = mc.max_seq_len;

    Model *m = model_create(bk, &mc);
    // the output is checked before any training: its directory, and room for the checkpoint
    if (check_out_free(out_path, model_num_params(m), err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        model_free(m);
        backend_destroy(bk);
        return 2;
    }
    char *init_config = NULL, init_fp[17] = "";
    if (!init_path && *config_str(cfg, "pretrain.init")) init_path = config_str(cfg, "pretrain.init");
    if (init_path) {
        if (load_init(init_path, m, &init_config, init_fp, err, sizeof err) != 0) {
            fprintf(stderr, "grpolab: error: %s\n", err);
            model_free(m);
            backend_destroy(bk);
            return 2;
        }
    } else {
        model_init_params(m, seed);
    }
    // Documents vary from ~20 to 256 tokens: a step's documents are sorted by length and run
    // as micro-batches of similar lengths (gradient accumulation), so little is spent on padding.
    int mb = (int)config_int(cfg, "pretrain.micro_batch");
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
    int n_acc = 0, n_cut = 0;
    long long total_tokens = 0;
    for (int s = 0; s < steps; s++) {
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
        if ((s + 1) % log_every == 0 || s + 1 == steps) {
            double now = wall_time(), elapsed = now - t_start;
            double eta = elapsed / (s + 1) * (steps - s - 1);
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
    }
    const char *vocab[256];
    int nv = tok_vocab_size(tk);
    for (int i = 0; i < nv; i++) vocab[i] = tok_str(tk, i);
    char *text = config_to_ini(cfg);
    CkptInfo info = {.vocab = vocab, .n_vocab = nv, .config_text = text, .step = steps, .with_optimizer = 0,
                     .init_config = init_path ? (init_config ? init_config : "") : NULL,
                     .init_fingerprint = init_path ? init_fp : NULL};
    int rc = 0;
    if (checkpoint_save(out_path, m, &info, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        rc = 1;
    } else {
        fprintf(stderr, "pretrain: wrote %s (%lld tokens in %.0f s; %d documents cut at the "
                "context of %d tokens)\n", out_path, total_tokens, wall_time() - t_start, n_cut, T);
    }
    free(text);
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
