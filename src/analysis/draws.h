// draws.h: how often a design passes the finding's checks (verdict.h), from more runs than
// the design has. Two kinds of draw:
//   subsets  every k-pair subset of the seed pairs of a comparison (group `test` in GRPO's
//            place, `ref` in Dr. GRPO's): the share of, e.g., the triples of five pairs that
//            pass, i.e. how often `make reproduce-fig5`'s three pairs would;
//   placebo  from the runs of one group, every ordered pair of disjoint k-run sets, the
//            first in GRPO's place, the second in Dr. GRPO's, paired in order: a comparison
//            with no effect, which checks 1 and 2 must fail (their calibration: docs/cli.md).
// Each draw is verdict_compare on the draw's runs alone.
#ifndef GRPOLAB_ANALYSIS_DRAWS_H
#define GRPOLAB_ANALYSIS_DRAWS_H

#include <stdio.h>

#include "verdict.h"

#define DRAWS_MAX 200000          // more draws than this: an error (ask for a smaller k)
#define DRAWS_PLACEBO_FAIL 0.95   // calibration: each of checks 1 and 2 fails in at least this
                                  // share of the placebo draws

typedef struct {
    int placebo;             // 1: placebo draws
    char title[2][48];       // the compared groups' names (one group twice for a placebo)
    int k, units;            // runs per side in a draw; seed pairs (subsets) or runs (placebo)
    long draws;
    long pass[N_CHECKS];     // draws in which each check passed
    long pass_1to6, pass_all;
    // the statistics of checks 1 and 2 before docs/notebook/2026-12-07-check-statistics-decision.md,
    // from the same draws (Check.f): the arithmetic mean of the pair ratios >= 1.3 with its t
    // CI above 1; Dr. GRPO's slope CI containing 0 or below
    long pass_ratio_mean, pass_slope_zero;
} DrawTally;

// Every k-subset of the seed pairs of `test` against `ref`. Returns the draws, or -1 with a
// message (fewer than k pairs, too many draws, no such group).
long draws_subsets(Run *const *runs, int n, const char *test, const char *ref, int k, DrawTally *t, char *err,
                   size_t errlen);

// Placebo draws from the runs of `group` (a label or a name, as --against takes). Returns the
// draws, or -1 with a message (fewer than 2k runs, too many draws, no such group).
long draws_placebo(Run *const *runs, int n, const char *group, int k, DrawTally *t, char *err, size_t errlen);

// The tally as a table (markdown with md); a placebo's ends with the calibration's verdicts.
void draws_print(FILE *f, const DrawTally *t, int md);

#endif
