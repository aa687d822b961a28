// cmd_pretrain.c: `grpolab pretrain`: the base model, by next-token cross-entropy on the
// world's corpus (the training itself: rl/pretrain.c).
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../common.h"
#include "../io/cli.h"
#include "../io/config.h"
#include "../io/h5util.h"
#include "../rl/pretrain.h"
#include "../rl/resume.h"
#include "../rl/train.h"
#include "commands.h"

static const CliOption pretrain_opts[] = {
    {"config", "FILE", "config file (e.g. experiments/base/pretrain.ini)"},
    {"set", "SECTION.KEY=VALUE", "override one key (repeatable)"},
    {"out", "FILE", "checkpoint to write (default: pretrain.out, data/models/base.h5)"},
    {"init", "FILE", "continue from this checkpoint (pretrain.init): its weights and architecture; "
                     "its config and weights' fingerprint are recorded in the output"},
    {"backend", "NAME", "auto|cpu|cuda (default: run.backend)"},
    {"overwrite", NULL, "replace an existing --out FILE and the checkpoint of an interrupted "
                        "pretraining into it (without it, either is an error)"},
    {"resume", NULL, "go on from FILE.ckpt.h5, the checkpoint of an interrupted pretraining "
                     "(from step 0 where there is none)"},
};
static const CliSpec pretrain_spec = {
    "pretrain",
    "Train the base model by next-token cross-entropy on the world's corpus (docs/corpus.md);\n"
    "prints a progress line (step, loss, tokens/s, ETA) and writes an HDF5 checkpoint; keeps\n"
    "FILE.ckpt.h5 every pretrain.checkpoint_every steps for --resume.",
    "[--config FILE] [--set SECTION.KEY=VALUE]... [--out FILE] [--resume | --overwrite]\n"
    "       [--init FILE] [--backend NAME]",
    pretrain_opts, 7, 0, NULL};

int cmd_pretrain(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&pretrain_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    Config *c = cli_load_config(cli_get(&pretrain_spec, &a, "config"), &a);
    if (!c) return 2;
    // --init is pretrain.init, so the stored config names the model this one continues; the
    // architecture is the init's ([model] keys the config sets must agree with it)
    const char *init = cli_get(&pretrain_spec, &a, "init");
    char err[1024];
    if (init) {
        char set[1200];
        snprintf(set, sizeof set, "pretrain.init=%s", init);
        if (config_set(c, set, err, sizeof err) != 0) {
            fprintf(stderr, "grpolab: error: --init: %s\n", err);
            config_free(c);
            return 2;
        }
    }
    if (cli_check_model_init(c, SETTING_KEY(pretrain, init), config_settings(c)->pretrain.init, "pretraining continues", 1) != 0) {
        config_free(c);
        return 2;
    }
    const char *out = cli_get(&pretrain_spec, &a, "out");
    if (!out) out = config_settings(c)->pretrain.out;
    // refused and claimed before any training: a run whose model cannot be saved never starts
    // (pretrain_run checks the directory and the free space after the config)
    int resume = cli_flag(&pretrain_spec, &a, "resume"), overwrite = cli_flag(&pretrain_spec, &a, "overwrite");
    if (resume && overwrite) {
        fprintf(stderr, "grpolab pretrain: error: --resume and --overwrite exclude each other\n");
        config_free(c);
        return 2;
    }
    // claimed first, so that the checks below and the output's creation are one step for
    // another pretraining into the same file
    int claimed = check_parent_dir("", out, NULL, 0) == 0;
    if (claimed && out_claim("cannot write checkpoint", out, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        config_free(c);
        return 2;
    }
    if (resume && access(out, F_OK) == 0) {
        // finished (a kill between writing the model and removing the checkpoint leaves both)
        rc = pretrain_compare_model_config(out, c, err, sizeof err) == 0 ? 0 : 2;
        char *ckpt = path_with_suffix(out, RESUME_CKPT_SUFFIX);
        if (rc == 0 && unlink(ckpt) == 0) fprintf(stderr, "pretrain: removed %s (the model was written)\n", ckpt);
        free(ckpt);
        if (rc == 0)
            fprintf(stderr, "pretrain: --resume: %s is complete (pretrained with this config): nothing "
                    "to do\n", out);
        else
            fprintf(stderr, "grpolab: error: --resume: %s exists and is not this pretraining's model: "
                    "%s\n", out, err);
    } else if (!overwrite && check_out_path("cannot write checkpoint", out, 0, err, sizeof err) != 0 &&
               access(out, F_OK) == 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        rc = 2;
    } else {
        train_note_command(argc, argv);
        rc = pretrain_run(c, cli_get(&pretrain_spec, &a, "backend"), out, NULL,
                          resume ? PRETRAIN_RESUME : overwrite ? PRETRAIN_OVERWRITE : PRETRAIN_NEW, NULL);
    }
    if (claimed) out_release(out);
    config_free(c);
    return rc;
}
