// verdict.h: the finding of Liu et al. 2025 as data. GRPO's 1/|o| weight lengthens its
// incorrect responses, Dr. GRPO's does not, at the same reward (docs/results.md). From a set
// of runs, finding_verdict computes the checks of that finding (their figures, 95% CIs,
// thresholds and pass/fail) without printing anything; `grpolab summary` prints them
// (summary.c; definitions in docs/cli.md).
//
// Also here: the figures of one run at the end of training that the summary's tables and
// the checks share (run_figures), and the slope of an objective's seed-mean length curve.
#ifndef GRPOLAB_ANALYSIS_VERDICT_H
#define GRPOLAB_ANALYSIS_VERDICT_H

#include "runs.h"

// ---- the thresholds of the checks (docs/cli.md)
#define VERDICT_RATIO_MIN 1.3       // eval ratio: GRPO / Dr. GRPO at least this, its CI above 1
#define VERDICT_DISAGREE_KEEP 0.25  // disagreements: last tenth at least this share of the first
#define VERDICT_REWARD_MARGIN 0.03  // final reward: Dr. GRPO at least GRPO's minus this
#define VERDICT_SATURATION 0.8      // note to the slope check: GRPO's incorrect training length
                                    // at least this share of the budget is saturation
#define VERDICT_REWARD_RISE 0.05    // reward rises: last tenth minus first at least this under
                                    // both objectives, the CI above 0
#define VERDICT_BUDGET_SHARE 0.8    // GRPO's final eval length of incorrect responses below this
                                    // share of the budget (world.max_new_tokens)

// ---- the figures of one run (first / last tenth as tenth_of; eval = the last evaluation)
enum {
    RF_REWARD,    // training reward, last tenth
    RF_TLEN_C,    // training length of correct responses, last tenth
    RF_TLEN_I,    // training length of incorrect responses, last tenth
    RF_ELEN_C,    // eval length of correct responses (NaN without evaluations)
    RF_ELEN_I,    // eval length of incorrect responses (NaN without evaluations)
    RF_SCORE,     // benchmark score (NaN without evaluations)
    RF_SLOPE,     // slope of the training length over the last half, tokens per 100 steps
    RF_SLOPE_I,   // the same of incorrect responses
    RF_BIAS,      // bias cosine, mean over all steps
    RF_TRUNC0,    // truncation rate, first tenth
    RF_TRUNC1,    // last tenth
    RF_LOOP0,     // loop share, first tenth
    RF_LOOP1,     // last tenth
    RF_DIS0,      // share with a visible self-check disagreement, first tenth
    RF_DIS1,      // last tenth
    N_RUN_FIGURES
};
typedef struct {
    double v[N_RUN_FIGURES];
    double slope_half[2];  // 95% CI half-widths of RF_SLOPE, RF_SLOPE_I
} RunFigures;

void run_figures(const Run *r, RunFigures *f);

// The slope of the seed-mean curve of the training length (incorrect: of incorrect responses)
// over the runs of group g (group_by_objective), over the last half of the steps all of them
// have, in tokens per 100 steps, and the half-width of its 95% CI from the regression.
void group_length_slope(Run *const *runs, int n, const int *group, int g, int incorrect, double *slope,
                        double *half);

// ---- the checks
enum {
    CHECK_EVAL_RATIO,      // f[0]: GRPO / Dr. GRPO eval length of incorrect responses, mean over
                           // the seed pairs (the ratio of the objectives' means if none), CI
    CHECK_LENGTH_SLOPE,    // f[0], f[1]: slope of GRPO's, Dr. GRPO's incorrect training length
                           // (group_length_slope) with CI; GRPO's CI above 0, Dr. GRPO's not
    CHECK_FAILING_STATES,  // f[0], f[1]: truncation rate, last minus first tenth, GRPO, Dr. GRPO;
                           // f[2], f[3]: the same of the loop share; both rise under GRPO, by
                           // more than under Dr. GRPO
    CHECK_DISAGREEMENT,    // f[0], f[1]: GRPO's disagreement share, first and last tenth; f[2],
                           // f[3]: Dr. GRPO's; last >= VERDICT_DISAGREE_KEEP x first and > 0
    CHECK_REWARD,          // f[0], f[1]: final training reward of Dr. GRPO, GRPO
    CHECK_REWARD_RISES,    // f[0], f[1]: training reward, last tenth minus first, GRPO, Dr. GRPO:
                           // mean over the runs with its CI; with one run the CI comes from
                           // the steps of its two tenths (two-sample t, pooled variance)
    CHECK_EVAL_BUDGET,     // f[0]: GRPO's final eval length of incorrect responses, mean over
                           // its runs with CI; f[1]: the budget; f[2]: f[0] / budget
    N_CHECKS
};

typedef struct {
    double v, lo, hi;  // a figure and its 95% CI (lo = hi = NaN where there is none)
} Estimate;

typedef struct {
    const char *name;  // short name (e.g. "eval_ratio")
    int pass;          // NaN figures never pass
    Estimate f[4];       // the check's figures (the enum above says which)
    double threshold;  // the number it is held against
    char reason[192];  // one line: why it passed or failed
} Check;

typedef struct {
    int checks;       // N_CHECKS, or 0 where GRPO or Dr. GRPO runs are missing (no checks)
    int passed;       // how many passed
    Check check[N_CHECKS];
    int pairs;        // GRPO and Dr. GRPO runs paired by seed (the eval ratio's samples)
    int unpaired;     // 1 if some GRPO run had no Dr. GRPO run of its seed (left out)
    int runs[2];      // GRPO's and Dr. GRPO's runs
    // GRPO's incorrect training responses at the budget: set where the slope check fails on
    // GRPO's side while they average >= VERDICT_SATURATION x budget over the last tenth
    int saturated;
    int budget;       // GRPO's world.max_new_tokens (the largest of its runs; 0: unknown)
    double grpo_len_i, grpo_trunc;  // their length and truncation rate, last tenth
} Verdict;

// The checks of the finding for runs (GRPO runs: objective.preset grpo, Dr. GRPO: dr_grpo;
// other objectives are left out; at most 256 runs are read). Returns v->checks.
int finding_verdict(Run *const *runs, int n, Verdict *v);

#endif
