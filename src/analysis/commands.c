// commands.c: `grpolab plot fig5|length-bias|difficulty-bias RUN.h5...` and
// `grpolab summary RUN.h5...` (docs/cli.md).
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "../sim/cli.h"
#include "analysis.h"

static const CliOption plot_opts[] = {
    {"out", "BASE", "output path without extension (also -o; default plots/<figure>): writes BASE.png/.pdf/.svg, "
                    "BASE.gp and the plotted numbers in BASE_data/"},
    {"format", "LIST", "comma-separated subset of png,pdf,svg (default: all three)"},
    {"smooth", "ALPHA", "fig5: EMA-smooth every run's curves with coefficient ALPHA in (0, 1] (default: none); "
                        "stated on the figure"},
};
static const CliSpec plot_spec = {
    "plot",
    "Draw a figure from grpolab train run logs (gnuplot at run time):\n"
    "  fig5             the paper's Fig. 5: training reward, training length, eval length of correct\n"
    "                   and of incorrect responses, benchmark score, against the step; one curve per\n"
    "                   objective (GRPO grey, Dr. GRPO dark red), seeds as mean with a 95% CI band\n"
    "  length-bias      per-token |weight| against response length, correct / incorrect, one panel\n"
    "                   per objective, and the mean correct / incorrect length over training\n"
    "  difficulty-bias  each question's mean |advantage| and sum of token |weights| against its\n"
    "                   accuracy p, with the closed forms and the example groups (1,1,0,0), (1,1,1,0)\n"
    "Runs still being written are read up to their last step (and said so on the figure).",
    "fig5|length-bias|difficulty-bias RUN.h5... [-o BASE] [--format png,pdf,svg] [--smooth ALPHA]",
    plot_opts, 3, CLI_MAX_POSITIONAL, "FIGURE RUN.h5..."};

static const CliOption summary_opts[] = {
    {"md", NULL, "print markdown tables"},
    {"check", NULL, "only say whether every run has logged all its planned steps: exit 0 if so, 1 if not"},
};
static const CliSpec summary_spec = {
    "summary",
    "The final figures of each run and of each objective across seeds (mean and 95% CI): reward,\n"
    "train and eval lengths of correct and incorrect responses, the slope of the training length\n"
    "over the last half with its 95% CI, eval score, gradient-bias cosine, truncation, loop and\n"
    "self-check disagreement shares; with GRPO and Dr. GRPO runs, the checks of the paper's finding.",
    "RUN.h5... [--md] [--check]",
    summary_opts, 2, CLI_MAX_POSITIONAL, "RUN.h5..."};

// Loads every run; on error prints it and frees what was loaded.
static Run **load_runs(const char *const *paths, int n) {
    Run **runs = xcalloc((size_t)n + 1, sizeof(Run *));
    char err[2048];
    for (int i = 0; i < n; i++) {
        runs[i] = run_load(paths[i], err, sizeof err);
        if (!runs[i]) {
            fprintf(stderr, "grpolab: error: %s\n", err);
            for (int j = 0; j < i; j++) run_free(runs[j]);
            free(runs);
            return NULL;
        }
    }
    return runs;
}

int cmd_plot(int argc, char **argv) {
    // -o BASE is the short form of --out BASE
    char **av = xcalloc((size_t)argc + 1, sizeof(char *));
    for (int i = 0; i < argc; i++) av[i] = strcmp(argv[i], "-o") == 0 ? "--out" : argv[i];
    CliArgs a;
    int rc = cli_parse(&plot_spec, argc, av, &a);
    free(av);
    if (rc) return rc == 1 ? 0 : 2;
    if (a.n_positional < 2) {
        fprintf(stderr, "grpolab plot: error: %s\n", a.n_positional == 0 ? "which figure? (fig5, length-bias, difficulty-bias)"
                                                                           : "no run log given (RUN.h5...)");
        cli_print_usage(&plot_spec, stderr);
        return 2;
    }
    const char *fig = a.positional[0];
    int (*draw)(Run *const *, int, const PlotOptions *, char *, size_t) = NULL;
    const char *def_out = NULL;
    if (strcmp(fig, "fig5") == 0) draw = plot_fig5, def_out = "plots/fig5";
    else if (strcmp(fig, "length-bias") == 0) draw = plot_length_bias, def_out = "plots/length_bias";
    else if (strcmp(fig, "difficulty-bias") == 0) draw = plot_difficulty_bias, def_out = "plots/difficulty_bias";
    else {
        fprintf(stderr, "grpolab plot: error: unknown figure '%s' (allowed: fig5, length-bias, difficulty-bias)\n", fig);
        return 2;
    }
    PlotOptions o = {.out = cli_get(&plot_spec, &a, "out"), .formats = FMT_ALL, .smooth = 0};
    if (!o.out) o.out = def_out;
    char err[2048];
    const char *fmt = cli_get(&plot_spec, &a, "format");
    if (fmt && figure_parse_formats(fmt, &o.formats, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab plot: error: %s\n", err);
        return 2;
    }
    const char *sm = cli_get(&plot_spec, &a, "smooth");
    if (sm) {
        char *end;
        o.smooth = strtod(sm, &end);
        if (!*sm || *end || !(o.smooth > 0 && o.smooth <= 1)) {
            fprintf(stderr, "grpolab plot: error: --smooth '%s': expected a number in (0, 1]\n", sm);
            return 2;
        }
    }
    int n = a.n_positional - 1;
    Run **runs = load_runs(a.positional + 1, n);
    if (!runs) return 1;
    fprintf(stderr, "plot %s: %d run%s -> %s\n", fig, n, n == 1 ? "" : "s", o.out);
    rc = draw(runs, n, &o, err, sizeof err);
    if (rc != 0) fprintf(stderr, "grpolab plot: error: %s\n", err);
    else {
        fprintf(stderr, "plot %s: wrote", fig);
        static const char *const ext[] = {"png", "pdf", "svg"};
        for (int i = 0; i < 3; i++)
            if (o.formats & (1u << i)) fprintf(stderr, " %s.%s", o.out, ext[i]);
        fprintf(stderr, " (numbers in %s_data/, script %s.gp)\n", o.out, o.out);
    }
    for (int i = 0; i < n; i++) run_free(runs[i]);
    free(runs);
    return rc ? 1 : 0;
}

int cmd_summary(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&summary_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    if (a.n_positional == 0) {
        fprintf(stderr, "grpolab summary: error: no run log given (RUN.h5...)\n");
        cli_print_usage(&summary_spec, stderr);
        return 2;
    }
    int n = a.n_positional;
    if (cli_flag(&summary_spec, &a, "check")) {
        // one line per run; an unreadable or empty run counts as not complete
        int all = 1;
        char err[2048];
        for (int i = 0; i < n; i++) {
            Run *r = run_load(a.positional[i], err, sizeof err);
            if (!r) {
                printf("%s: not complete: %s\n", a.positional[i], err);
                all = 0;
                continue;
            }
            printf("%s: %lld of %d steps%s\n", r->path, (long long)r->n_steps, r->steps_planned,
                   run_complete(r) ? ", complete" : "");
            all &= run_complete(r);
            run_free(r);
        }
        return all ? 0 : 1;
    }
    Run **runs = load_runs(a.positional, n);
    if (!runs) return 1;
    summary_print(stdout, runs, n, cli_flag(&summary_spec, &a, "md"));
    for (int i = 0; i < n; i++) run_free(runs[i]);
    free(runs);
    return 0;
}
