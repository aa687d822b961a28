// verdict.h: the finding of Liu et al. 2025 as data. GRPO lengthens its incorrect responses,
// Dr. GRPO does not, at the same reward (docs/results.md); GRPO differs from Dr. GRPO in two
// terms, the 1/|o| of its aggregation and the group std of its advantage, and the 2x2 of
// experiments/ablation/terms_2x2.ini puts each alone in GRPO's place. From a set of runs,
// finding_verdict (and verdict_compare for any two groups) computes the checks of that
// finding (their figures, CIs, thresholds and pass/fail) without printing anything;
// `grpolab summary` prints them (summary.c; definitions in docs/cli.md).
//
// Also here: the figures of one run at the end of training that the summary's tables and
// the checks share (run_figures), and the slope of an objective's seed-mean length curve.
#ifndef GRPOLAB_ANALYSIS_VERDICT_H
#define GRPOLAB_ANALYSIS_VERDICT_H

#include "runs.h"

// ---- the thresholds of the checks (docs/cli.md)
#define VERDICT_RATIO_MIN 1.3       // eval ratio: GRPO / Dr. GRPO at least this, its CI above 1
#define VERDICT_FLAT_SHARE 0.1   // slope: Dr. GRPO's CI's upper end below this share of GRPO's
                                    // slope (its failures grow at most a tenth as fast)
#define VERDICT_DISAGREE_KEEP 0.25  // disagreements: last tenth at least this share of the first
#define VERDICT_REWARD_MARGIN 0.03  // final reward: the CI of the mean pair difference (Dr. GRPO
                                    // minus GRPO) within +- this (equivalence, two one-sided tests)
#define VERDICT_REWARD_LEVEL 0.90   // that CI's level: two one-sided tests at 5% each
#define VERDICT_SATURATION 0.8      // note to the slope check: GRPO's incorrect training length
                                    // at least this share of the budget is saturation
#define VERDICT_REWARD_RISE 0.05    // reward rises: last tenth minus first at least this under
                                    // both objectives, the CI above 0
#define VERDICT_TRUNC_SHARE 0.5     // GRPO's final greedy eval: the share of its incorrect
                                    // responses that the budget cut, pooled over its runs, below
                                    // this (failures not capped)

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
    RF_ETRUNC0,   // share of the incorrect eval responses cut by the budget, first evaluation
    RF_ETRUNC1,   // last evaluation (run_eval_trunc_incorrect; NaN where not known)
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
    CHECK_EVAL_RATIO,      // f[0]: GRPO / Dr. GRPO eval length of incorrect responses per seed
                           // pair, their geometric mean with the CI of log_mean_ci95 (the ratio
                           // of the objectives' means, no CI, if there is no pair); f[1]
                           // (information): the arithmetic mean of the pair ratios with its t CI,
                           // the statistic of docs/notebook/2026-12-07-check-statistics-decision.md's
                           // "before"
    CHECK_LENGTH_SLOPE,    // f[0], f[1]: slope of GRPO's, Dr. GRPO's incorrect training length
                           // (group_length_slope) with CI; GRPO's CI above 0, Dr. GRPO's upper
                           // end below VERDICT_FLAT_SHARE x GRPO's slope
    CHECK_FAILING_STATES,  // f[0], f[1]: truncation rate, last minus first tenth, GRPO, Dr. GRPO;
                           // f[2], f[3]: the same of the loop share; both rise under GRPO, by
                           // more than under Dr. GRPO
    CHECK_DISAGREEMENT,    // f[0], f[1]: GRPO's disagreement share, first and last tenth; f[2],
                           // f[3]: Dr. GRPO's; last >= VERDICT_DISAGREE_KEEP x first and > 0
    CHECK_REWARD,          // f[0]: final training reward, Dr. GRPO minus GRPO, mean over the
                           // seed pairs with its VERDICT_REWARD_LEVEL CI (t, pairs - 1 df); f[1],
                           // f[2]: final training reward of Dr. GRPO, GRPO (means over runs)
    CHECK_REWARD_RISES,    // f[0], f[1]: training reward, last tenth minus first, GRPO, Dr. GRPO:
                           // mean over the runs with its CI; with one run the CI comes from
                           // the steps of its two tenths (two-sample t, pooled variance)
    CHECK_EVAL_TRUNC,      // f[0]: share of GRPO's incorrect responses of its final greedy eval
                           // cut by the budget, pooled over its runs (cut / incorrect, summed);
                           // f[1]: GRPO's final eval length of incorrect responses, mean over
                           // its runs with CI (information); f[2]: the budget; f[3]: the runs
                           // whose share is known (all must be)
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
    char title[2][48];  // the compared groups' names (group_title): [0] in GRPO's place, [1] in
                        // Dr. GRPO's; "GRPO" and "Dr. GRPO" for finding_verdict
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
    int reward_pairs;               // seed pairs with both final rewards (check 5's samples)
    int trunc_runs;                 // GRPO's runs (check 7: f[3] of them have the share)
    const char *trunc_source;       // where check 7's shares come from: "/eval", "eval-run",
                                    // "/eval and eval-run" (run_eval_trunc_incorrect), NULL: none
    // Information, not a check: the final policy sampled at temperature 1 (`grpolab eval-run`,
    // Run.final_eval[FINAL_SAMPLED]): GRPO / Dr. GRPO eval length of incorrect responses, mean
    // over the seed pairs that have it with its 95% CI, and the samples per question (0: no
    // pair has a sampled eval; -1: the pairs differ in it)
    Estimate sampled_ratio;
    int sampled_pairs, sampled_k;
} FindingVerdict;

// The checks of the finding for runs (GRPO runs: group grpo, Dr. GRPO: dr_grpo; other groups
// are left out; at most 256 runs are read). Returns v->checks.
int finding_verdict(Run *const *runs, int n, FindingVerdict *v);

// The same checks with the runs of group `test` in GRPO's place and those of group `ref` in
// Dr. GRPO's (group labels, Run.objective). Returns v->checks (0 if either has no run).
int verdict_compare(Run *const *runs, int n, const char *test, const char *ref, FindingVerdict *v);

// The comparisons `grpolab summary` makes (docs/cli.md): against = NULL: grpo against
// dr_grpo where both groups exist, else, where a group is the 2x2's Dr. GRPO corner
// (group_title), every other group against it; against = a group's label or title: every
// other group against it, or only those of `only` (comma-separated labels or titles; NULL:
// all). Fills test[k] (and ref[k]) with group labels; returns the comparisons (at most max),
// or -1 with a message naming the unknown group.
int verdict_plan(Run *const *runs, int n, const char *against, const char *only, const char **test,
                 const char **ref, int max, char *err, size_t errlen);

// The group (index into names[0..ng), as group_by_objective gives them) whose label or
// display name (group_title) is name[0..len), or -1.
int verdict_find_group(Run *const *runs, int n, const int *group, const char *const *names, int ng,
                       const char *name, size_t len);

// Two one-sided tests of equivalence, as check 5 makes them: the mean of the finite x[0..n),
// its CI at `level` (t with k - 1 df over the k finite values), and whether the CI lies within
// (-margin, margin). *lo = *hi = NaN (and 0 returned) where k < 2.
int tost_within(const double *x, int n, double level, double margin, double *mean, double *lo, double *hi);

#endif
