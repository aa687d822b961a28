// cmd_plot.c: `grpolab plot FIGURE RUN.h5|SWEEP_DIR...` (docs/cli.md): the figures of
// analysis.h, fig6.h and fig7.h from the run logs of the command line (run_args.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../analysis/analysis.h"
#include "../../analysis/fig7.h"
#include "../../analysis/run_args.h"
#include "../io/cli.h"
#include "commands.h"

static const CliOption plot_opts[] = {
    {"out", "BASE", "output path without extension (also -o; default plots/<figure>): writes BASE.png/.pdf/.svg, "
                    "BASE.gp and the plotted numbers in BASE_data/"},
    {"format", "LIST", "comma-separated subset of png,pdf,svg (default: all three)"},
    {"smooth", "ALPHA", "fig5: EMA-smooth every run's curves with coefficient ALPHA in (0, 1] (default: none); "
                        "stated on the figure"},
    {"axis", "KEY", "sensitivity: the numeric config key whose values the runs and base-model evals differ in "
                    "(required), e.g. corpus.p_recover or world.max_new_tokens"},
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
    "  objectives       the objectives of diagnostics.compare on the same rollouts: cosine with the\n"
    "                   unbiased gradient, gradient norm, sum |w| and |w|-weighted length of correct /\n"
    "                   incorrect responses, one line per objective against the step\n"
    "  fig6             the paper's Fig. 6: the average benchmark score against the step, one panel per\n"
    "                   template (world.template), one curve per question set (train.question_set),\n"
    "                   seeds as mean with a 95% CI band\n"
    "  sensitivity      GRPO against Dr. GRPO along the values of a config key (--axis): eval ratio\n"
    "                   of incorrect lengths, slopes of the incorrect training length (95% CI bands),\n"
    "                   shares of incorrect eval responses cut by the budget; also BASE.md, a table\n"
    "                   with the final rewards and the base model's profile from `grpolab eval --out`\n"
    "                   logs given among the files (greedy; sampled with --failure-profile)\n"
    "  fig7 DIR         the paper's Fig. 7 from DIR/{general,math,mathqa} (make reproduce-fig7): Dr. GRPO's\n"
    "                   benchmark score from each base; GRPO's and Dr. GRPO's reward and length from\n"
    "                   the math base\n"
    "  masked-mean      (no run logs) a response's per-token weight and total weight against its\n"
    "                   length under GRPO's per-response mean and each framework's default loss\n"
    "                   (grpolab objective --table2)\n"
    "Runs still being written are read up to their last step (and said so on the figure).\n"
    "The out directory of a `grpolab sweep` stands for the runs of its manifest (sweep.runs).",
    "fig5|length-bias|difficulty-bias|objectives|fig6 RUN.h5|SWEEP_DIR... [-o BASE] [--format png,pdf,svg] [--smooth ALPHA]\n"
    "       grpolab plot sensitivity --axis KEY RUN.h5|EVAL.h5|SWEEP_DIR... [-o BASE] [--format png,pdf,svg]\n"
    "       grpolab plot fig7 DIR [-o BASE] [--format png,pdf,svg] [--smooth ALPHA]\n"
    "       grpolab plot masked-mean [-o BASE] [--format png,pdf,svg]",
    plot_opts, 4, CLI_MAX_POSITIONAL, "FIGURE RUN.h5..."};

// The options every figure takes (-o, --format, --smooth) into *o (def_out: the default
// --out); 2 after printing an error.
static int plot_options(const CliArgs *a, const char *def_out, PlotOptions *o) {
    *o = (PlotOptions){.out = cli_get(&plot_spec, a, "out"), .formats = FMT_ALL, .smooth = 0};
    if (!o->out) o->out = def_out;
    char err[2048];
    const char *fmt = cli_get(&plot_spec, a, "format");
    if (fmt && figure_parse_formats(fmt, &o->formats, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab plot: error: %s\n", err);
        return 2;
    }
    const char *sm = cli_get(&plot_spec, a, "smooth");
    if (sm) {
        char *end;
        o->smooth = strtod(sm, &end);
        if (!*sm || *end || !(o->smooth > 0 && o->smooth <= 1)) {
            fprintf(stderr, "grpolab plot: error: --smooth '%s': expected a number in (0, 1]\n", sm);
            return 2;
        }
    }
    return 0;
}

// Prints where a figure went.
static void plot_wrote(const char *fig, const PlotOptions *o) {
    fprintf(stderr, "plot %s: wrote", fig);
    static const char *const ext[] = {"png", "pdf", "svg"};
    for (int i = 0; i < 3; i++)
        if (o->formats & (1u << i)) fprintf(stderr, " %s.%s", o->out, ext[i]);
    fprintf(stderr, " (numbers in %s_data/, script %s.gp)\n", o->out, o->out);
}

// `plot masked-mean`: a figure of closed forms, no run logs.
static int plot_no_runs(const CliArgs *a) {
    if (a->n_positional != 1) {
        fprintf(stderr, "grpolab plot: error: masked-mean takes no run logs (got '%s')\n", a->positional[1]);
        return 2;
    }
    PlotOptions o;
    if (plot_options(a, "plots/masked_mean", &o) != 0) return 2;
    char err[2048];
    if (plot_masked_mean(&o, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab plot: error: %s\n", err);
        return 1;
    }
    plot_wrote("masked-mean", &o);
    return 0;
}

// `plot fig7 DIR`: the runs of a Fig. 7 directory (fig7.h).
static int plot_fig7_dir(const CliArgs *a) {
    if (a->n_positional != 2) {
        fprintf(stderr, "grpolab plot: error: fig7 takes one directory (DIR/{general,math,mathqa}, "
                "make reproduce-fig7), got %d arguments\n", a->n_positional - 1);
        return 2;
    }
    PlotOptions o;
    if (plot_options(a, "plots/fig7", &o) != 0) return 2;
    char err[2048];
    int n, *base;
    Run **runs = fig7_load(a->positional[1], &n, &base, err, sizeof err);
    if (!runs) {
        fprintf(stderr, "grpolab plot: error: %s\n", err);
        return 1;
    }
    fprintf(stderr, "plot fig7: %d run%s -> %s\n", n, n == 1 ? "" : "s", o.out);
    int rc = plot_fig7(runs, n, base, &o, err, sizeof err);
    if (rc != 0) fprintf(stderr, "grpolab plot: error: %s\n", err);
    else plot_wrote("fig7", &o);
    fig7_free(runs, n, base);
    return rc ? 1 : 0;
}

int cmd_plot(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse_with_o(&plot_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    if (a.n_positional >= 1 && strcmp(a.positional[0], "masked-mean") == 0) return plot_no_runs(&a);
    if (a.n_positional >= 1 && strcmp(a.positional[0], "fig7") == 0) return plot_fig7_dir(&a);
    if (a.n_positional < 2) {
        fprintf(stderr, "grpolab plot: error: %s\n", a.n_positional == 0 ? "which figure? (fig5, length-bias, difficulty-bias, objectives, fig6, sensitivity)"
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
    else if (strcmp(fig, "objectives") == 0) draw = plot_objectives, def_out = "plots/objectives";
    else if (strcmp(fig, "fig6") == 0) draw = plot_fig6, def_out = "plots/fig6";
    else if (strcmp(fig, "sensitivity") == 0) def_out = "plots/sensitivity/map";
    else {
        fprintf(stderr, "grpolab plot: error: unknown figure '%s' (allowed: fig5, length-bias, difficulty-bias, "
                "objectives, fig6, sensitivity)\n", fig);
        return 2;
    }
    const char *axis = cli_get(&plot_spec, &a, "axis");
    if (!draw != !!axis) {
        fprintf(stderr, "grpolab plot: error: %s\n", axis ? "--axis is an option of `plot sensitivity` only"
                                                           : "plot sensitivity: which config key? (--axis KEY, e.g. "
                                                             "--axis corpus.p_recover)");
        return 2;
    }
    PlotOptions o;
    if (plot_options(&a, def_out, &o) != 0) return 2;
    char err[2048];
    if (axis && sensitivity_axis_check(axis, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab plot: error: %s\n", err);
        return 2;
    }
    RunArgs ra;
    if (run_args_expand(&ra, a.positional + 1, a.n_positional - 1, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        return 2;
    }
    int n = ra.n;
    if (!draw) {  // sensitivity reads its files itself: train and eval logs, grouped by --axis
        fprintf(stderr, "plot sensitivity: %d file%s along %s -> %s\n", n, n == 1 ? "" : "s", axis, o.out);
        rc = plot_sensitivity(axis, ra.paths, n, &o, err, sizeof err);
        run_args_free(&ra);
        if (rc != 0) fprintf(stderr, "grpolab plot: error: %s\n", err);
        else fprintf(stderr, "plot sensitivity: wrote the table %s.md\n", o.out);
    } else {
        Run **runs = run_args_load(&ra, err, sizeof err);
        // Fig. 6 keeps the runs of a sweep apart by their template and question set itself
        if (runs && draw != plot_fig6 && run_args_group(runs, &ra, stderr, err, sizeof err) != 0) {
            runs_free(runs, n);
            runs = NULL;
        }
        run_args_free(&ra);
        if (!runs) {
            fprintf(stderr, "grpolab: error: %s\n", err);
            return 1;
        }
        fprintf(stderr, "plot %s: %d run%s -> %s\n", fig, n, n == 1 ? "" : "s", o.out);
        rc = draw(runs, n, &o, err, sizeof err);
        if (rc != 0) fprintf(stderr, "grpolab plot: error: %s\n", err);
        runs_free(runs, n);
    }
    if (rc == 0) plot_wrote(fig, &o);
    return rc ? 1 : 0;
}
