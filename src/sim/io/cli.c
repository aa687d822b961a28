#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common.h"

void cli_print_usage(const CliSpec *spec, FILE *f) {
    fprintf(f, "usage: grpolab %s %s\n\n%s\n", spec->command, spec->usage, spec->summary);
    if (spec->n_options > 0) fprintf(f, "\noptions:\n");
    for (int i = 0; i < spec->n_options; i++) {
        const CliOption *o = &spec->options[i];
        char lhs[96];
        snprintf(lhs, sizeof lhs, "--%s%s%s", o->name, o->metavar ? " " : "",
                 o->metavar ? o->metavar : "");
        fprintf(f, "  %-26s %s\n", lhs, o->help);
    }
    fprintf(f, "  %-26s %s\n", "-h, --help", "show this help");
}

static int find_option(const CliSpec *spec, const char *name, size_t len) {
    for (int i = 0; i < spec->n_options; i++)
        if (strlen(spec->options[i].name) == len && strncmp(spec->options[i].name, name, len) == 0)
            return i;
    return -1;
}

static int usage_error(const CliSpec *spec, const char *fmt, const char *arg) {
    fprintf(stderr, "grpolab %s: error: ", spec->command);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(run 'grpolab %s --help' for the options)\n", spec->command);
    return 2;
}

int cli_parse(const CliSpec *spec, int argc, char **argv, CliArgs *out) {
    memset(out, 0, sizeof *out);
    if (spec->n_options > 64) die("cli: too many options in spec '%s'", spec->command);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            cli_print_usage(spec, stdout);
            return 1;
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            if (arg[0] == '-' && arg[1] != '\0') return usage_error(spec, "unknown option '%s'", arg);
            if (out->n_positional >= spec->max_positional || out->n_positional >= CLI_MAX_POSITIONAL)
                return usage_error(spec, "unexpected argument '%s'", arg);
            out->positional[out->n_positional++] = arg;
            continue;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int k = find_option(spec, name, len);
        if (k < 0) return usage_error(spec, "unknown option '%s'", arg);
        const CliOption *o = &spec->options[k];
        const char *value = "";
        if (o->metavar) {
            if (eq) value = eq + 1;
            else if (i + 1 < argc) value = argv[++i];
            else return usage_error(spec, "option '%s' needs a value", arg);
        } else if (eq) {
            return usage_error(spec, "option '%s' takes no value", arg);
        }
        if (strcmp(o->name, "set") == 0) {
            if (out->n_sets >= CLI_MAX_SETS) return usage_error(spec, "too many --set options%s", "");
            out->sets[out->n_sets++] = value;
        } else {
            out->values[k] = value;
        }
    }
    return 0;
}

int cli_parse_with_o(const CliSpec *spec, int argc, char **argv, CliArgs *out) {
    // the parsed values point into the strings of argv (or at the literal), not into av
    char **av = xcalloc((size_t)argc + 1, sizeof(char *));
    for (int i = 0; i < argc; i++) av[i] = strcmp(argv[i], "-o") == 0 ? "--out" : argv[i];
    int rc = cli_parse(spec, argc, av, out);
    free(av);
    return rc;
}

const char *cli_get(const CliSpec *spec, const CliArgs *a, const char *name) {
    int k = find_option(spec, name, strlen(name));
    if (k < 0) die("cli: option '%s' is not in the spec of '%s'", name, spec->command);
    return a->values[k];
}

int cli_flag(const CliSpec *spec, const CliArgs *a, const char *name) {
    return cli_get(spec, a, name) != NULL;
}

int cli_get_int(const CliSpec *spec, const CliArgs *a, const char *name, long lo, long hi, long *out) {
    const char *s = cli_get(spec, a, name);
    if (!s) return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "grpolab %s: error: --%s '%s': wanted an integer from %ld to %ld\n", spec->command, name, s, lo, hi);
        return 2;
    }
    *out = v;
    return 0;
}

Config *cli_load_config(const char *config_path, const CliArgs *a) {
    char err[1024];
    Config *c = config_new();
    if (config_path && config_load_file(c, config_path, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        config_free(c);
        return NULL;
    }
    for (int i = 0; i < a->n_sets; i++) {
        if (config_set(c, a->sets[i], err, sizeof err) != 0) {
            fprintf(stderr, "grpolab: error: %s\n", err);
            config_free(c);
            return NULL;
        }
    }
    return c;
}
