// cmd_train.c: `grpolab train`: RL from train.init with the [objective] (the loop itself:
// rl/train.c), and the check that a config's [model] is its init checkpoint's.
#include <stdio.h>
#include <unistd.h>

#include "../../common.h"
#include "../io/cli.h"
#include "../io/config.h"
#include "../io/h5util.h"
#include "../model/checkpoint.h"
#include "../model/model.h"
#include "../parallel/dist.h"
#include "../rl/train.h"
#include "../world/tokenizer.h"
#include "commands.h"

static const CliOption train_opts[] = {
    {"config", "FILE", "config file (e.g. experiments/fig5/grpo.ini)"},
    {"set", "SECTION.KEY=VALUE", "override one key (repeatable)"},
    {"out", "FILE", "HDF5 run log to write (default: run.out, else data/runs/train.h5); "
                    "checkpoints go to FILE.ckpt.h5"},
    {"resume", NULL, "continue from FILE.ckpt.h5, truncating the log to the steps before it"},
    {"overwrite", NULL, "replace an existing run log FILE (without it, an existing FILE is an error)"},
    {"backend", "NAME", "auto|cpu|cuda (default: run.backend)"},
};
static const CliSpec train_spec = {
    "train",
    "RL on the task world with the [objective] (GRPO, Dr. GRPO, DAPO, RLOO): P prompts x G\n"
    "responses per step, PPO-clip minibatch updates; a progress line per step, an HDF5 run log\n"
    "(/train, /questions, /responses, /tokens, /eval) and checkpoints for --resume.",
    "--config FILE [--set SECTION.KEY=VALUE]... [--out FILE.h5] [--resume | --overwrite]\n"
    "       [--backend NAME]",
    train_opts, 6, 0, NULL};

int cli_check_train_init(Config *c) {
    return cli_check_model_init(c, SETTING_KEY(train, init), config_settings(c)->train.init, "RL trains", 0);
}

int cli_check_model_init(Config *c, const char *key, const char *init, const char *what,
                         int required) {
    if (!*init) return 0;
    ModelConfig mc;
    char err[1024];
    if (checkpoint_read_meta(init, &mc, NULL, NULL, NULL, NULL, NULL, err, sizeof err) != 0) {
        if (required) fprintf(stderr, "grpolab: error: %s: %s\n", key, err);
        return required ? -1 : 0;
    }
    const char *vocab[256];
    int nv = tok_strings(tokenizer_default(), vocab, 256);
    if (mc.vocab_size == nv && checkpoint_check_vocab(init, vocab, nv, 1, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s: %s\n", key, err);
        return -1;
    }
    const Settings *S = config_settings(c);
    const SettingsSet *given = config_settings_set(c);
    // the checkpoint's value, the config's (a float as the model holds it) and whether it is set
#define MODEL_KEY(field, now) {"model." #field, mc.field, now, given->model.field}
    struct {
        const char *key;
        double value, now;
        bool set;
    } keys[] = {MODEL_KEY(vocab_size, S->model.vocab_size), MODEL_KEY(d_model, S->model.d_model),
                MODEL_KEY(n_layers, S->model.n_layers), MODEL_KEY(n_heads, S->model.n_heads),
                MODEL_KEY(n_kv_heads, S->model.n_kv_heads), MODEL_KEY(d_ff, S->model.d_ff),
                MODEL_KEY(max_seq_len, S->model.max_seq_len),
                MODEL_KEY(tied_embeddings, S->model.tied_embeddings),
                MODEL_KEY(rope_theta, (float)S->model.rope_theta),
                MODEL_KEY(norm_eps, (float)S->model.norm_eps)};
#undef MODEL_KEY
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const CfgKey *k = config_schema_key(keys[i].key);
        const double now = keys[i].now;
        char set[128];
        if (now == keys[i].value) continue;
        if (keys[i].set) {
            fprintf(stderr, "grpolab: error: the config sets %s = %.9g, but %s '%s' is a model "
                    "with %.9g: the model %s is %s's; remove the key from [model] or "
                    "make it match\n", keys[i].key, now, key, init, keys[i].value, what, key);
            return -1;
        }
        if (k->type == CFG_BOOL)
            snprintf(set, sizeof set, "%s=%s", keys[i].key, keys[i].value != 0 ? "true" : "false");
        else
            snprintf(set, sizeof set, "%s=%.9g", keys[i].key, keys[i].value);
        if (config_set(c, set, err, sizeof err) != 0) die("%s's %s: %s", key, keys[i].key, err);
    }
    return 0;
}

int cmd_train(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&train_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    Config *c = cli_load_config(cli_get(&train_spec, &a, "config"), &a);
    if (!c) return 2;
    const char *out = cli_get(&train_spec, &a, "out");
    if (!out) out = *config_settings(c)->run.out ? config_settings(c)->run.out : "data/runs/train.h5";
    int resume = cli_flag(&train_spec, &a, "resume");
    if (resume && cli_flag(&train_spec, &a, "overwrite")) {
        fprintf(stderr, "grpolab train: error: --resume and --overwrite exclude each other\n");
        config_free(c);
        return 2;
    }
    // the claim first, so that the check below and the log's creation are one step for
    // another train on the same --out (train_run creates a missing directory and claims then);
    // with several ranks rank 0 alone claims and writes, and its answers hold for all
    char err[1024];
    int claimed = dist_rank() == 0 && check_parent_dir("", out, NULL, 0) == 0;
    int refused = claimed && out_claim("cannot write run log", out, err, sizeof err) != 0;
    if (refused) fprintf(stderr, "grpolab: error: %s\n", err);
    if (refused) claimed = 0;
    dist_broadcast(&refused, sizeof refused, 0);
    if (refused) {
        config_free(c);
        return 2;
    }
    int exists = access(out, F_OK) == 0;
    dist_broadcast(&exists, sizeof exists, 0);  // rank 0's answer: it creates the log
    if (!resume && !cli_flag(&train_spec, &a, "overwrite") && exists) {
        // a finished run's log is data: never replaced silently
        fprintf(stderr, "grpolab: error: run log '%s' already exists: continue it with --resume, "
                "replace it with --overwrite, or choose another --out\n", out);
        if (claimed) out_release(out);
        config_free(c);
        return 2;
    }
    if (cli_check_train_init(c) != 0) {
        if (claimed) out_release(out);
        config_free(c);
        return 2;
    }
    train_note_command(argc, argv);
    rc = train_run(c, cli_get(&train_spec, &a, "backend"), out,
                   resume ? TRAIN_RESUME : cli_flag(&train_spec, &a, "overwrite") ? TRAIN_OVERWRITE : TRAIN_NEW,
                   NULL);
    if (claimed) out_release(out);
    config_free(c);
    return rc;
}
