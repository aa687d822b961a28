// cmd_strip.c: `grpolab strip RUN.h5 -o OUT.h5`: a copy of a run log without its per-token
// table (runlog_copy; docs/cli.md).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common.h"
#include "../io/cli.h"
#include "../io/runlog.h"
#include "commands.h"

static const CliOption strip_opts[] = {
    {"out", "OUT.h5", "the copy to write (also -o; required)"},
    {"drop", "LIST", "comma-separated tables to leave out (default: tokens)"},
    {"overwrite", NULL, "replace OUT.h5 if it exists"},
};
static const CliSpec strip_spec = {
    "strip",
    "Copy a run log without its per-token table /tokens (or the tables of --drop): the root\n"
    "attributes and every other table as they are. /tokens holds one row per generated token\n"
    "and is most of a train log's size (docs/benchmarks.md gives sizes); the copy\n"
    "still serves `summary`, `plot fig5` and `plot difficulty-bias`, and `plot length-bias`\n"
    "draws the closed form of the weights for it. A log still being written is copied as far as\n"
    "it is flushed. The copy is written beside OUT.h5 and renamed onto it when complete.",
    "RUN.h5 -o OUT.h5 [--drop LIST] [--overwrite]",
    strip_opts, 3, 1, "RUN.h5"};

int cmd_strip(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse_with_o(&strip_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    const char *out = cli_get(&strip_spec, &a, "out");
    if (a.n_positional != 1 || !out || !out[0]) {
        fprintf(stderr, "grpolab strip: error: %s\n", a.n_positional != 1 ? "no run log given (RUN.h5)" : "no output given (-o OUT.h5)");
        cli_print_usage(&strip_spec, stderr);
        return 2;
    }
    const char *list = cli_get(&strip_spec, &a, "drop");
    char *buf = xstrdup(list ? list : "tokens");
    const char *drop[64];
    int n_drop = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strchr(t, '/') || n_drop == 64) {  // strtok_r gives no empty names
            fprintf(stderr, "grpolab strip: error: --drop '%s': expected up to 64 comma-separated table names (e.g. tokens)\n", list);
            free(buf);
            return 2;
        }
        drop[n_drop++] = t;
    }
    if (n_drop == 0) {
        fprintf(stderr, "grpolab strip: error: --drop '%s': no table named (e.g. --drop tokens)\n", list ? list : "");
        free(buf);
        return 2;
    }
    char err[2048];
    rc = runlog_copy(a.positional[0], out, drop, n_drop, cli_flag(&strip_spec, &a, "overwrite"), err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "grpolab strip: error: %s\n", err);
    else {
        printf("strip: %s -> %s without", a.positional[0], out);
        for (int i = 0; i < n_drop; i++) printf("%s /%s", i ? "," : "", drop[i]);
        printf("\n");
    }
    free(buf);
    return rc ? 1 : 0;
}
