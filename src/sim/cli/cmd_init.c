// cmd_init.c: `grpolab init`: a randomly initialised model of [model] as a checkpoint.
#include <stdio.h>
#include <stdlib.h>

#include "../../common.h"
#include "../../kernels/kernels.h"
#include "../io/cli.h"
#include "../io/config.h"
#include "../io/h5util.h"
#include "../model/checkpoint.h"
#include "../model/model.h"
#include "../rl/setup.h"
#include "../world/tokenizer.h"
#include "commands.h"

static const CliOption init_opts[] = {
    {"config", "FILE", "config file (INI); defaults are used for keys it does not set"},
    {"set", "SECTION.KEY=VALUE", "override one key (repeatable)"},
    {"out", "FILE", "checkpoint to write (required), e.g. data/models/init.h5"},
    {"overwrite", NULL, "replace an existing --out FILE (without it, an existing FILE is an error)"},
};
static const CliSpec init_spec = {
    "init", "Write a randomly initialised model (from [model] and run.seed) as an HDF5 checkpoint.",
    "[--config FILE] [--set SECTION.KEY=VALUE]... --out FILE [--overwrite]", init_opts, 4, 0, NULL};

int cmd_init(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&init_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    const char *out = cli_get(&init_spec, &a, "out");
    if (!out || !*out) {
        fprintf(stderr, "grpolab init: error: --out FILE is required\n");
        return 2;
    }
    const char *cfg_path = cli_get(&init_spec, &a, "config");
    int overwrite = cli_flag(&init_spec, &a, "overwrite");
    Config *c = cli_load_config(cfg_path, &a);
    if (!c) return 2;
    char err[1024];
    ModelConfig mc;
    if (setup_model_config(c, &mc, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s%s%s\n", cfg_path ? cfg_path : "", cfg_path ? ": " : "", err);
        config_free(c);
        return 2;
    }
    if (check_out_path("cannot write checkpoint", out, overwrite, err, sizeof err) != 0 ||
        out_claim("cannot write checkpoint", out, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        config_free(c);
        return 2;
    }
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    if (!bk) die("%s", err);
    Model *m = model_create(bk, &mc);
    model_init_params(m, (uint64_t)config_settings(c)->run.seed);
    char *text = config_to_ini(c);
    const char *vocab[256];
    int nv = tok_strings(tokenizer_default(), vocab, 256);  // stored when the model fits this world's tokenizer
    CkptInfo info = {.vocab = vocab, .n_vocab = mc.vocab_size == nv ? nv : 0, .config_text = text,
                     .step = 0, .with_optimizer = 0, .keep_existing = !overwrite};
    int ok = checkpoint_save(out, m, &info, err, sizeof err) == 0;
    out_release(out);
    if (ok)
        printf("wrote %s: %zu parameters (%d layers, d_model %d)\n", out, model_num_params(m),
               mc.n_layers, mc.d_model);
    else
        fprintf(stderr, "grpolab: error: %s\n", err);
    free(text);
    model_free(m);
    backend_destroy(bk);
    config_free(c);
    return ok ? 0 : 1;
}
