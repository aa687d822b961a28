// fig7.h: the paper's Fig. 7 (Liu et al. 2025, Sec. 3.4) over the runs of `make
// reproduce-fig7`: Dr. GRPO from three base models (general, math-continued, math+QA-continued)
// and GRPO next to Dr. GRPO from the math base. A Fig. 7 directory DIR holds one sweep output
// directory per base, DIR/general, DIR/math and DIR/mathqa (the base is the directory).
//
// The checks of its two observations are computed by fig7_verdict without printing
// (docs/cli.md, "grpolab summary --fig7"):
//   ceiling_math  Dr. GRPO's ceiling from the math base is above the general base's: the
//                 difference of the means over seeds has its 95% CI above FIG7_CEILING_GAP
//   ceiling_qa    the math+QA base's ceiling is not below the math base's: the CI of the
//                 difference reaches up to -FIG7_QA_TOLERANCE or above
//   double_increase  under GRPO from the math base the training reward and length both rise
//                 (last tenth of the steps minus first tenth, CI above 0)
//   dr_length_flat   under Dr. GRPO from the math base the training length does not rise by
//                 more than FIG7_LENGTH_FLAT of its first tenth, while its final reward is
//                 within FIG7_REWARD_EQUAL of GRPO's
// With one run in a group, the CI of a rise comes from the steps of its two tenths and a
// difference of ceilings has none (a check then passes on the figure alone and says so).
#ifndef GRPOLAB_ANALYSIS_FIG7_H
#define GRPOLAB_ANALYSIS_FIG7_H

#include "analysis.h"
#include "verdict.h"

#define FIG7_CEILING_EVALS 2     // a run's ceiling: mean benchmark score of its last 2 evaluations
#define FIG7_CEILING_GAP 0.0     // ceiling_math: math - general, CI above this
#define FIG7_QA_TOLERANCE 0.0    // ceiling_qa: the CI of math+QA - math reaches -this or above
#define FIG7_LENGTH_FLAT 0.10    // dr_length_flat: last tenth <= (1 + this) x first tenth
#define FIG7_REWARD_EQUAL 0.05   // dr_length_flat: |final reward GRPO - Dr. GRPO| at most this

enum { FIG7_GENERAL, FIG7_MATH, FIG7_MATHQA, FIG7_N_BASES };
extern const char *const FIG7_BASE_DIRS[FIG7_N_BASES];    // general, math, mathqa
extern const char *const FIG7_BASE_TITLES[FIG7_N_BASES];  // as the paper's legend maps them

enum { FIG7_CEILING_MATH, FIG7_CEILING_QA, FIG7_DOUBLE_INCREASE, FIG7_DR_LENGTH_FLAT, FIG7_N_CHECKS };

typedef struct {
    int checks;                      // FIG7_N_CHECKS, or fewer where runs are missing
    int passed;
    Check check[FIG7_N_CHECKS];      // name NULL where the runs for it are missing
    Estimate ceiling[FIG7_N_BASES];  // Dr. GRPO's ceiling per base, mean over seeds with CI
    Estimate gain[FIG7_N_BASES];     // ... minus the score of the first evaluation
    int runs[FIG7_N_BASES][2];       // Dr. GRPO's and GRPO's runs per base
} Fig7Verdict;

// A run's ceiling: the mean score of its last FIG7_CEILING_EVALS evaluations (NaN if none).
double fig7_ceiling(const Run *r);
// Last tenth minus first tenth of a per-step curve y of run r (tenth_of), with the half-width
// of its 95% CI from the steps (diff_ci95).
double fig7_rise(const Run *r, const double *y, double *half);

// The checks over runs with base[i] in FIG7_* (objective.preset dr_grpo or grpo; others are
// left out). Returns v->checks.
int fig7_verdict(Run *const *runs, int n, const int *base, Fig7Verdict *v);
void fig7_print(FILE *f, const Fig7Verdict *v, int markdown);

// The runs of a Fig. 7 directory (its three sweep directories, those present), loaded, with
// base[i] (malloc'd, free with fig7_free); NULL with a message if none or one cannot be read.
Run **fig7_load(const char *dir, int *n, int **base, char *err, size_t errlen);
void fig7_free(Run **runs, int n, int *base);

// `grpolab plot fig7 DIR`: left, Dr. GRPO's benchmark score against the step from each base
// (mean over seeds with a 95% CI band); right, from the math base, the training reward and
// length of GRPO and Dr. GRPO (reward on the left axis, length on the right).
int plot_fig7(Run *const *runs, int n, const int *base, const PlotOptions *o, char *err, size_t errlen);

#endif
