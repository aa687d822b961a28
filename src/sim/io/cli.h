// cli.h: command-line parsing shared by every `grpolab <command>`.
// Options are `--name VALUE`, `--name=VALUE` or flags `--name`; `--set section.key=value`
// may repeat; `-h`/`--help` prints the command's usage. Unknown options, a missing value
// and stray arguments are errors (exit code 2), never ignored.
#ifndef GRPOLAB_CLI_H
#define GRPOLAB_CLI_H

#include <stdio.h>

#include "config.h"

typedef struct {
    const char *name;     // without the leading "--"
    const char *metavar;  // NULL: a flag without value
    const char *help;
} CliOption;

typedef struct {
    const char *command;  // e.g. "train"
    const char *summary;  // one line
    const char *usage;    // e.g. "--config FILE [--set k=v]... [--out FILE]"
    const CliOption *options;
    int n_options;
    int max_positional;   // how many positional arguments are allowed (e.g. run files)
    const char *positional_name;  // e.g. "RUN.h5"
} CliSpec;

#define CLI_MAX_SETS 256
#define CLI_MAX_POSITIONAL 256

typedef struct {
    const char *values[64];  // per option in spec order: value, "" for a set flag, NULL if absent
    const char *sets[CLI_MAX_SETS];
    int n_sets;
    const char *positional[CLI_MAX_POSITIONAL];
    int n_positional;
} CliArgs;

// Parses argv (argv[0] is the command name). Returns 0 ok, 1 if --help was printed
// (caller exits 0), 2 after printing an error (caller exits 2).
int cli_parse(const CliSpec *spec, int argc, char **argv, CliArgs *out);
// cli_parse with -o X as the short form of --out X (spec has an option "out").
int cli_parse_with_o(const CliSpec *spec, int argc, char **argv, CliArgs *out);
void cli_print_usage(const CliSpec *spec, FILE *f);
// Value of option `name` or NULL (dies on a name not in the spec: a programming error).
const char *cli_get(const CliSpec *spec, const CliArgs *a, const char *name);
int cli_flag(const CliSpec *spec, const CliArgs *a, const char *name);
// Integer option `name`: *out = its value if given (else left as is); 0 ok, 2 after printing
// "grpolab CMD: error: --NAME 'V': ..." where V is not an integer in [lo, hi].
int cli_get_int(const CliSpec *spec, const CliArgs *a, const char *name, long lo, long hi, long *out);

// The shared config path: defaults, then --config FILE (if given), then each --set in
// order. On error prints "grpolab: error: <message>" and returns NULL (exit code 2).
Config *cli_load_config(const char *config_path, const CliArgs *a);

#endif
