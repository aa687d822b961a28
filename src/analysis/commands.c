// commands.c: `grpolab plot fig5|length-bias|difficulty-bias RUN.h5...`,
// `grpolab summary RUN.h5...` and `grpolab strip RUN.h5 -o OUT.h5` (docs/cli.md).
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "../sim/io/cli.h"
#include "../sim/io/runlog.h"
#include "../sim/sweep/sweep.h"
#include "analysis.h"
#include "draws.h"
#include "fig6.h"
#include "fig7.h"

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

static const CliOption summary_opts[] = {
    {"md", NULL, "print markdown tables"},
    {"check", NULL, "only say whether every run has logged all its planned steps: exit 0 if so, 1 if not"},
    {"fig7", NULL, "the argument is a Fig. 7 directory (DIR/{general,math,mathqa}): the summary of its runs and "
                   "the checks of Fig. 7 (docs/cli.md)"},
    {"against", "GROUP", "the finding's checks of every other group against GROUP (a group label as in the "
                         "tables, e.g. dr_grpo_scale-none, or its name, e.g. \"Dr. GRPO\"), GROUP in Dr. GRPO's place"},
    {"groups", "LIST", "with --against: only these groups (comma-separated labels or names) in GRPO's place"},
    {"draws", "K", "after the checks, every K-subset of each comparison's seed pairs: how many pass each check "
                   "(K >= 2; with --placebo: runs per side, default 3)"},
    {"placebo", "GROUP", "only the placebo draws of GROUP's runs: every ordered pair of disjoint sets of K runs, "
                         "paired in order, checked as GRPO against Dr. GRPO; checks 1 and 2 must fail in >= 95%"},
};
static const CliSpec summary_spec = {
    "summary",
    "The final figures of each run and of each objective across seeds (mean and 95% CI): reward,\n"
    "train and eval lengths of correct and incorrect responses, the slope of the training length\n"
    "over the last half with its 95% CI, eval score, gradient-bias cosine, truncation, loop and\n"
    "self-check disagreement shares, the share of incorrect eval responses cut by the budget; with\n"
    "GRPO and Dr. GRPO runs, the checks of the paper's finding (of a sweep of the 2x2 of GRPO's two\n"
    "terms, every corner against Dr. GRPO's; --against: every group against another).\n"
    "Runs of one objective under several templates or question sets (a Fig. 6 sweep) get the Fig. 6\n"
    "summary instead: start and plateau scores per template and question set, and the checks of the\n"
    "paper's four observations.\n"
    "The out directory of a `grpolab sweep` stands for the runs of its manifest (sweep.runs).",
    "RUN.h5|SWEEP_DIR... [--md] [--check] [--against GROUP [--groups LIST]] [--draws K] [--placebo GROUP] | --fig7 DIR [--md]",
    summary_opts, (int)(sizeof summary_opts / sizeof summary_opts[0]), CLI_MAX_POSITIONAL, "RUN.h5..."};

// `summary --placebo GROUP`: the placebo draws' table. 0, or -1 with a message.
static int summary_placebo(Run *const *runs, int n, const char *group, int k, int md, char *err, size_t errlen) {
    DrawTally t;
    if (draws_placebo(runs, n, group, k, &t, err, errlen) < 0) return -1;
    draws_print(stdout, &t, md);
    return 0;
}

// `summary --draws K`: for each comparison the summary made, the table of its K-pair draws.
static int summary_draws(Run *const *runs, int n, const char *against, const char *only, int k, int md, char *err,
                         size_t errlen) {
    const char *test[MAX_OBJECTIVES], *ref[MAX_OBJECTIVES];
    int nv = verdict_plan(runs, n < 256 ? n : 256, against, only, test, ref, MAX_OBJECTIVES, err, errlen);
    if (nv < 0) return -1;
    for (int c = 0; c < nv; c++) {
        DrawTally t;
        if (draws_subsets(runs, n, test[c], ref[c], k, &t, err, errlen) < 0) return -1;
        draws_print(stdout, &t, md);
    }
    return 0;
}

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

static void free_runs(char **paths, char **groups, int n);

// The notes of expand_runs on how the runs of a sweep are grouped, printed by label_groups
// when it groups them so (a Fig. 6 design is not).
static char group_notes[4096];

// The run logs of the command line with every sweep out directory replaced by the runs of
// its manifest (sweep_expand_dir), in order, and per run its group within its objective
// (*groups; "" where none); NULL after printing an error. Free both with free_runs.
static char **expand_runs(const char *const *args, int n_args, int *n, char ***groups) {
    group_notes[0] = 0;
    char **paths = NULL;
    *n = 0;
    *groups = NULL;
    for (int i = 0; i < n_args; i++) {
        char **dir = NULL, **dir_groups = NULL, err[2048], note[1024];
        int k = sweep_expand_dir(args[i], &dir, &dir_groups, note, sizeof note, err, sizeof err);
        if (k < 0) {
            fprintf(stderr, "grpolab: error: %s\n", err);
            free_runs(paths, *groups, *n);
            return NULL;
        }
        int add = k ? k : 1;
        paths = realloc(paths, ((size_t)*n + (size_t)add) * sizeof *paths);
        *groups = realloc(*groups, ((size_t)*n + (size_t)add) * sizeof **groups);
        if (!paths || !*groups) die("out of memory");
        size_t used = strlen(group_notes);
        if (note[0])
            snprintf(group_notes + used, sizeof group_notes - used, "grpolab: note: the runs of %s also differ in "
                     "%s: they are grouped by objective and %s (OBJECTIVE_%s, ...)\n", args[i], note, note, dir_groups[0]);
        for (int j = 0; j < k; j++, (*n)++) {
            paths[*n] = dir[j];
            (*groups)[*n] = dir_groups[j];
        }
        if (k == 0) {
            paths[*n] = xstrdup(args[i]);
            (*groups)[(*n)++] = xstrdup("");
        }
        free(dir);
        free(dir_groups);
    }
    return paths;
}

static void free_runs(char **paths, char **groups, int n) {
    for (int i = 0; i < n; i++) {
        free(paths[i]);
        free(groups[i]);
    }
    free(paths);
    free(groups);
}

// Each run's group added to its objective, the label the analysis groups by ("grpo" in group
// "lr-1e-5": "grpo_lr-1e-5"); on error prints it, frees the runs and returns NULL.
static Run **label_groups(Run **runs, char **groups, int n) {
    if (runs) fputs(group_notes, stderr);
    for (int i = 0; runs && i < n; i++) {
        if (!groups[i][0]) continue;
        char label[sizeof runs[i]->objective];
        if (snprintf(label, sizeof label, "%s_%s", runs[i]->objective, groups[i]) >= (int)sizeof label) {
            fprintf(stderr, "grpolab: error: %s: the group '%s_%s' is longer than %zu characters: give "
                    "the runs of one value by name\n", runs[i]->path, runs[i]->objective, groups[i],
                    sizeof label - 1);
            for (int j = 0; j < n; j++) run_free(runs[j]);
            free(runs);
            return NULL;
        }
        memcpy(runs[i]->objective, label, sizeof label);
    }
    int ng = 0;  // distinct labels, at most MAX_OBJECTIVES drawn or tabulated
    for (int i = 0; runs && i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = strcmp(runs[j]->objective, runs[i]->objective) == 0;
        ng += !seen;
    }
    if (ng > MAX_OBJECTIVES) {
        fprintf(stderr, "grpolab: error: the runs form %d groups (objective and grid values), more than the %d "
                "the analysis keeps apart: give the runs of fewer values by name\n", ng, MAX_OBJECTIVES);
        for (int j = 0; j < n; j++) run_free(runs[j]);
        free(runs);
        return NULL;
    }
    return runs;
}

// load_runs, then label_groups; NULL after printing an error.
static Run **load_grouped(char **paths, char **groups, int n) {
    return label_groups(load_runs((const char *const *)paths, n), groups, n);
}

// cli_parse with -o X as the short form of --out X.
static int parse_with_o(const CliSpec *spec, int argc, char **argv, CliArgs *a) {
    char **av = xcalloc((size_t)argc + 1, sizeof(char *));
    for (int i = 0; i < argc; i++) av[i] = strcmp(argv[i], "-o") == 0 ? "--out" : argv[i];
    int rc = cli_parse(spec, argc, av, a);
    free(av);
    return rc;
}

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
    int rc = parse_with_o(&plot_spec, argc, argv, &a);
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
    int n;
    char **groups, **paths = expand_runs(a.positional + 1, a.n_positional - 1, &n, &groups);
    if (!paths) return 2;
    if (!draw) {  // sensitivity reads its files itself: train and eval logs, grouped by --axis
        fprintf(stderr, "plot sensitivity: %d file%s along %s -> %s\n", n, n == 1 ? "" : "s", axis, o.out);
        rc = plot_sensitivity(axis, paths, n, &o, err, sizeof err);
        free_runs(paths, groups, n);
        if (rc != 0) fprintf(stderr, "grpolab plot: error: %s\n", err);
        else fprintf(stderr, "plot sensitivity: wrote the table %s.md\n", o.out);
    } else {
        // Fig. 6 keeps the runs of a sweep apart by their template and question set itself
        Run **runs = draw == plot_fig6 ? load_runs((const char *const *)paths, n) : load_grouped(paths, groups, n);
        free_runs(paths, groups, n);
        if (!runs) return 1;
        fprintf(stderr, "plot %s: %d run%s -> %s\n", fig, n, n == 1 ? "" : "s", o.out);
        rc = draw(runs, n, &o, err, sizeof err);
        if (rc != 0) fprintf(stderr, "grpolab plot: error: %s\n", err);
        for (int i = 0; i < n; i++) run_free(runs[i]);
        free(runs);
    }
    if (rc == 0) plot_wrote(fig, &o);
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
    if (cli_flag(&summary_spec, &a, "fig7")) {
        if (a.n_positional != 1) {
            fprintf(stderr, "grpolab summary: error: --fig7 takes one directory, got %d arguments\n", a.n_positional);
            return 2;
        }
        char err[2048];
        int n, *base;
        Run **runs = fig7_load(a.positional[0], &n, &base, err, sizeof err);
        if (!runs) {
            fprintf(stderr, "grpolab summary: error: %s\n", err);
            return 1;
        }
        Fig7Verdict v;
        fig7_verdict(runs, n, base, &v);
        // the summary's table per objective and base ("dr_grpo_math")
        for (int i = 0; i < n; i++) {
            char label[sizeof runs[i]->objective];
            snprintf(label, sizeof label, "%.16s_%s", runs[i]->objective, FIG7_BASE_DIRS[base[i]]);
            memcpy(runs[i]->objective, label, sizeof label);
        }
        summary_print(stdout, runs, n, cli_flag(&summary_spec, &a, "md"));
        fig7_print(stdout, &v, cli_flag(&summary_spec, &a, "md"));
        fig7_free(runs, n, base);
        return 0;
    }
    int n;
    char **groups, **paths = expand_runs(a.positional, a.n_positional, &n, &groups);
    if (!paths) return 2;
    if (cli_flag(&summary_spec, &a, "check")) {
        // one line per run; an unreadable or empty run counts as not complete
        int all = 1;
        char err[2048];
        for (int i = 0; i < n; i++) {
            Run *r = run_load(paths[i], err, sizeof err);
            if (!r) {
                printf("%s: not complete: %s\n", paths[i], err);
                all = 0;
                continue;
            }
            printf("%s: %lld of %d steps%s\n", r->path, (long long)r->n_steps, r->steps_planned,
                   run_complete(r) ? ", complete" : "");
            all &= run_complete(r);
            run_free(r);
        }
        free_runs(paths, groups, n);
        return all ? 0 : 1;
    }
    const char *against = cli_get(&summary_spec, &a, "against"), *only = cli_get(&summary_spec, &a, "groups");
    if (only && !against) {
        fprintf(stderr, "grpolab summary: error: --groups '%s' needs --against GROUP (the group they are checked "
                "against)\n", only);
        free_runs(paths, groups, n);
        return 2;
    }
    long draws = 0;
    if (cli_get_int(&summary_spec, &a, "draws", 2, 64, &draws)) {
        free_runs(paths, groups, n);
        return 2;
    }
    Run **runs = load_runs((const char *const *)paths, n);
    int fig6 = runs && fig6_design(runs, n);  // a Fig. 6 sweep: its own tables and checks
    if (runs && !fig6) runs = label_groups(runs, groups, n);
    free_runs(paths, groups, n);
    if (!runs) return 1;
    char err[512];
    int md = cli_flag(&summary_spec, &a, "md");
    const char *placebo = cli_get(&summary_spec, &a, "placebo");
    if (fig6) fig6_summary_print(stdout, runs, n, md);
    else if (placebo) rc = summary_placebo(runs, n, placebo, draws ? (int)draws : 3, md, err, sizeof err);
    else rc = summary_print_against(stdout, runs, n, md, against, only, err, sizeof err);
    if (rc == 0 && draws && !fig6 && !placebo) rc = summary_draws(runs, n, against, only, (int)draws, md, err, sizeof err);
    if (rc != 0) fprintf(stderr, "grpolab summary: error: %s\n", err);
    for (int i = 0; i < n; i++) run_free(runs[i]);
    free(runs);
    return rc ? 2 : 0;
}

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
    int rc = parse_with_o(&strip_spec, argc, argv, &a);
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
