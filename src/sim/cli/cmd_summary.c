// cmd_summary.c: `grpolab summary RUN.h5|SWEEP_DIR...` and `grpolab summary --fig7 DIR`
// (docs/cli.md): the tables and checks of analysis.h, fig6.h, fig7.h and draws.h over the run
// logs of the command line (run_args.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../analysis/analysis.h"
#include "../../analysis/draws.h"
#include "../../analysis/fig6.h"
#include "../../analysis/fig7.h"
#include "../../analysis/run_args.h"
#include "../io/cli.h"
#include "commands.h"

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
    RunArgs ra;
    char err[2048];
    if (run_args_expand(&ra, a.positional, a.n_positional, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        return 2;
    }
    int n = ra.n;
    if (cli_flag(&summary_spec, &a, "check")) {
        // one line per run; an unreadable or empty run counts as not complete
        int all = 1;
        for (int i = 0; i < n; i++) {
            Run *r = run_load(ra.paths[i], err, sizeof err);
            if (!r) {
                printf("%s: not complete: %s\n", ra.paths[i], err);
                all = 0;
                continue;
            }
            printf("%s: %lld of %d steps%s\n", r->path, (long long)r->n_steps, r->steps_planned,
                   run_complete(r) ? ", complete" : "");
            all &= run_complete(r);
            run_free(r);
        }
        run_args_free(&ra);
        return all ? 0 : 1;
    }
    const char *against = cli_get(&summary_spec, &a, "against"), *only = cli_get(&summary_spec, &a, "groups");
    if (only && !against) {
        fprintf(stderr, "grpolab summary: error: --groups '%s' needs --against GROUP (the group they are checked "
                "against)\n", only);
        run_args_free(&ra);
        return 2;
    }
    long draws = 0;
    if (cli_get_int(&summary_spec, &a, "draws", 2, 64, &draws)) {
        run_args_free(&ra);
        return 2;
    }
    Run **runs = run_args_load(&ra, err, sizeof err);
    int fig6 = runs && fig6_design(runs, n);  // a Fig. 6 sweep: its own tables and checks
    if (runs && !fig6 && run_args_group(runs, &ra, stderr, err, sizeof err) != 0) {
        runs_free(runs, n);
        runs = NULL;
    }
    run_args_free(&ra);
    if (!runs) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        return 1;
    }
    int md = cli_flag(&summary_spec, &a, "md");
    const char *placebo = cli_get(&summary_spec, &a, "placebo");
    if (fig6) fig6_summary_print(stdout, runs, n, md);
    else if (placebo) rc = summary_placebo(runs, n, placebo, draws ? (int)draws : 3, md, err, sizeof err);
    else rc = summary_print_against(stdout, runs, n, md, against, only, err, sizeof err);
    if (rc == 0 && draws && !fig6 && !placebo) rc = summary_draws(runs, n, against, only, (int)draws, md, err, sizeof err);
    if (rc != 0) fprintf(stderr, "grpolab summary: error: %s\n", err);
    runs_free(runs, n);
    return rc ? 2 : 0;
}
