// fig6.h: Fig. 6 of Liu et al. 2025 (Sec. 3.3) as data: Dr. GRPO from one base model under
// each template (world.template) and question set (train.question_set). fig6_verdict
// computes the checks of the paper's four observations (their figures, 95% CIs, thresholds
// and pass/fail) without printing anything; `grpolab summary` prints them
// (fig6_summary_print) and `grpolab plot fig6` draws the figure (plot_fig6, analysis.h).
// Definitions and thresholds: docs/cli.md, "The Fig. 6 checks".
#ifndef GRPOLAB_ANALYSIS_FIG6_H
#define GRPOLAB_ANALYSIS_FIG6_H

#include <stdio.h>

#include "runs.h"
#include "verdict.h"  // Check, Estimate

// ---- which templates match the base model's pretraining format (docs/world.md, "Question
// sets"): the corpus ends every none and boxed document in its own format and 30% of the r1
// documents in another one
#define FIG6_MISMATCHED "r1"
#define FIG6_MATCHED_A "boxed"  // the Qwen-Math template's analogue
#define FIG6_MATCHED_B "none"
// ---- the question sets the observations compare (docs/world.md)
#define FIG6_FULL "all"       // levels 1-5: the MATH analogue
#define FIG6_NARROW "level1"  // the narrowest coverage
#define FIG6_OOD "ood"        // the out-of-distribution pool: the GSM-8K analogue

// ---- the thresholds of the checks (docs/cli.md)
#define FIG6_PLATEAU_FROM 0.75  // a run's plateau: its evaluations from this share of its last
                                // evaluation's step on
#define FIG6_START_GAP 0.02     // 1: each matched template starts at least this much above r1
#define FIG6_FINAL_SPREAD 0.03  // 2: the templates' plateaus on the full set lie within this
#define FIG6_COVERAGE_GAP 0.02  // 3: under r1 the full set's plateau at least this above level1's
#define FIG6_OOD_MARGIN 0.02    // 4: under each matched template the OOD set's plateau at least
                                // the full set's minus this

// ---- the figures of one run
double fig6_start_score(const Run *r);    // the greedy evaluation at step 0 (NaN if none)
double fig6_plateau_score(const Run *r);  // mean of the evaluations at steps >= FIG6_PLATEAU_FROM
                                          // x the last evaluation's step (> 0); NaN if none

// 1 if the runs are a Fig. 6 design: one objective, and more than one template or more than
// one question set among them (the summary then prints the Fig. 6 tables and checks).
int fig6_design(Run *const *runs, int n);

// ---- the checks
enum {
    FIG6_START,        // f[0], f[1], f[2]: start score of r1, boxed, none (mean over their runs)
    FIG6_COMPARABLE,   // f[0]: plateau spread (max - min) over the three templates on the full
                       // set, per seed, mean with CI; f[1]: the same of the start scores
    FIG6_NARROW_LOWER, // f[0]: plateau under r1, full set minus level1, per seed, mean with CI
    FIG6_OOD_AS_WELL,  // f[0], f[1]: plateau, OOD set minus full set, per seed, mean with CI,
                       // under boxed and under none
    FIG6_N_CHECKS
};

#define FIG6_MAX_CELLS 32
typedef struct {
    const char *template_name, *question_set;  // point into the runs
    int runs;
    Estimate start, plateau, last, reward;  // over its runs: mean and 95% CI (reward: last tenth)
} Fig6Cell;

typedef struct {
    int n_cells;  // template x question set, in order of first appearance (at most FIG6_MAX_CELLS)
    Fig6Cell cell[FIG6_MAX_CELLS];
    int checks;   // FIG6_N_CHECKS
    int passed;
    Check check[FIG6_N_CHECKS];
    int seeds[FIG6_N_CHECKS];  // the seeds each check's per-seed figure was formed over
} Fig6Verdict;

// The cells and the checks of the runs (at most 256 are read). Returns v->checks.
int fig6_verdict(Run *const *runs, int n, Fig6Verdict *v);

// The summary of a Fig. 6 design: per run, per cell, and the four checks.
void fig6_summary_print(FILE *f, Run *const *runs, int n, int md);

#endif
