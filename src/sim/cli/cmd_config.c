// cmd_config.c: `grpolab config`: a resolved config as INI, the list of keys, or the
// comparison with the config a run or a base model was made with.
#include <stdio.h>
#include <stdlib.h>

#include "../io/cli.h"
#include "../io/config.h"
#include "../rl/pretrain.h"
#include "../rl/resume.h"
#include "../rl/setup.h"
#include "commands.h"

static const CliOption config_opts[] = {
    {"print", "FILE", "print the resolved config of FILE (defaults + FILE + --set) as INI"},
    {"set", "SECTION.KEY=VALUE", "override one key (repeatable)"},
    {"keys", NULL, "list every config key: type, default, allowed values, meaning"},
    {"markdown", NULL, "with --keys: as the Markdown table of docs/config.md"},
    {"against", "RUN.h5", "instead of printing, compare with the config stored in a train run log: "
                          "exit 0 if the same, 1 (listing the keys) if not; run.threads, "
                          "run.backend and run.out are not compared"},
    {"against-model", "MODEL.h5", "the same for a base model written by `grpolab pretrain`, on "
                                  "the keys pretraining reads ([train], [eval], [objective], "
                                  "run.threads, run.backend, run.out, pretrain.out, "
                                  "pretrain.log_every and pretrain.checkpoint_every are not "
                                  "compared)"},
};
static const CliSpec config_spec = {
    "config", "Print a resolved config, or the list of config keys.",
    "(--print FILE [--set SECTION.KEY=VALUE]... [--against RUN.h5 | --against-model MODEL.h5] | "
    "--set ... | --keys [--markdown])",
    config_opts, 6, 0, NULL};

int cmd_config(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&config_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    int markdown = cli_flag(&config_spec, &a, "markdown");
    if (cli_flag(&config_spec, &a, "keys")) {
        config_print_keys(stdout, markdown);
        return 0;
    }
    if (markdown) {
        fprintf(stderr, "grpolab config: error: --markdown goes with --keys\n");
        return 2;
    }
    const char *path = cli_get(&config_spec, &a, "print");
    if (!path && a.n_sets == 0) {
        cli_print_usage(&config_spec, stderr);
        return 2;
    }
    Config *c = cli_load_config(path, &a);
    if (!c) return 2;
    ModelConfig mc;
    char err[512];
    if (setup_model_config(c, &mc, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s%s%s\n", path ? path : "", path ? ": " : "", err);
        config_free(c);
        return 2;
    }
    const char *run = cli_get(&config_spec, &a, "against");
    const char *model = cli_get(&config_spec, &a, "against-model");
    if (run && model) {
        fprintf(stderr, "grpolab config: error: --against and --against-model: give one of them\n");
        config_free(c);
        return 2;
    }
    if (run && cli_check_train_init(c) != 0) {  // [model] as train would resolve it
        config_free(c);
        return 2;
    }
    if (run || model) {
        char msg[1024];
        int same = run ? resume_compare_run_config(run, c, 0, msg, sizeof msg)
                       : pretrain_compare_model_config(model, c, msg, sizeof msg);
        config_free(c);
        if (same < 0) {
            fprintf(stderr, "grpolab: error: %s\n", msg);
            return 2;
        }
        if (same > 0) {
            printf("%s\n", msg);
            return 1;
        }
        printf("%s was %s with this config\n", run ? run : model, run ? "trained" : "pretrained");
        return 0;
    }
    char *text = config_to_ini(c);
    fputs(text, stdout);
    free(text);
    config_free(c);
    return 0;
}
