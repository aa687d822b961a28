// analysis.h: the analysis commands over train run logs (docs/cli.md, docs/results.md).
//   plot_fig5             the paper's Fig. 5: reward, train length, eval length of correct
//                         and of incorrect responses, benchmark score, against the step
//   plot_length_bias      per-token |weight| against response length (per objective) and the
//                         mean length of correct / incorrect responses over training
//   plot_difficulty_bias  each question's weight in the update against its accuracy p, with
//                         the closed forms
//   plot_objectives       the objectives of diagnostics.compare on the same rollouts: bias
//                         cosine, gradient norm, sum |w| and |w|-weighted length per class
//   plot_sensitivity      the eval ratio, slopes, rewards and truncation along a config key
//   summary_print         the table of final figures, slopes with CIs, and the finding checks
//                         (computed apart from their printing by finding_verdict, verdict.h)
// Several runs of one objective (its seeds) are drawn as their mean with a 95% CI band.
#ifndef GRPOLAB_ANALYSIS_H
#define GRPOLAB_ANALYSIS_H

#include <stdio.h>

#include "figure.h"
#include "runs.h"
#include "../kernels/objective.h"

#define MAX_OBJECTIVES 8

typedef struct {
    const char *out;   // output base path (figure.h)
    unsigned formats;  // FMT_* mask
    double smooth;     // EMA coefficient in (0, 1] for the curves of fig5; 0: none
} PlotOptions;

int plot_fig5(Run *const *runs, int n, const PlotOptions *o, char *err, size_t errlen);
// Writes data file eval_<name>.dat of fig: the greedy evaluations of the runs of group g
// (group[i] == g), per evaluation step the mean over them and its 95% CI of the benchmark
// score, of the eval lengths of correct and incorrect responses and of the share of the
// incorrect ones cut by the budget (plot_fig5.c names the columns); each run's curves
// EMA-smoothed with smooth (0: none) before the mean.
int plot_write_eval(const Figure *fig, Run *const *runs, int n, const int *group, int g,
                    const char *name, double smooth, char *err, size_t errlen);
// Writes train_<name>.dat the same way: per step the mean over the runs of group g and its
// 95% CI of the training reward and of the mean response length (EMA-smoothed with smooth).
int plot_write_train(const Figure *fig, Run *const *runs, int n, const int *group, int g,
                     const char *name, double smooth, char *err, size_t errlen);
// The paper's Fig. 6: the benchmark score over the steps, one panel per template, one curve
// per question set (fig6.c; its checks in fig6.h).
int plot_fig6(Run *const *runs, int n, const PlotOptions *o, char *err, size_t errlen);
// These two read the per-response data (run_load_responses) themselves.
int plot_length_bias(Run *const *runs, int n, const PlotOptions *o, char *err, size_t errlen);
int plot_difficulty_bias(Run *const *runs, int n, const PlotOptions *o, char *err, size_t errlen);

// The map of where the bias shows (plot_sensitivity.c, docs/cli.md): the train run logs and
// base-model eval logs of paths (n) grouped by the value of the numeric config key axis; per
// value the eval ratio and the slopes of the finding's checks 1 and 2 (finding_verdict), the
// final rewards, the shares of incorrect eval responses cut by the budget, and the base model's
// profile. Writes the figure (o->out), its numbers and o->out + ".md", the table.
int plot_sensitivity(const char *axis, char *const *paths, int n, const PlotOptions *o, char *err, size_t errlen);
// 0 if axis is a numeric (int or float) config key, else -1 and a message naming it.
int sensitivity_axis_check(const char *axis, char *err, size_t errlen);

// The statistics of diagnostics.compare (/compare) against the step, one line per compared
// objective (plot_compare.c).
int plot_objectives(Run *const *runs, int n, const PlotOptions *o, char *err, size_t errlen);
// The summary's table of each run's /compare (nothing for a run without one).
void summary_print_compare(FILE *f, Run *const *runs, int n, int markdown);

// `grpolab plot masked-mean` (plot_masked_mean.c): a response's per-token weight c_i and its
// total weight against its length under GRPO's per-response mean and each framework's default
// aggregation (objective --table2), in a minibatch of MASKED_MEAN_M responses with budget
// MASKED_MEAN_LMAX whose other responses are MASKED_MEAN_OTHERS tokens long (the fig5 run's
// minibatch and budget; the others at a third of the budget). No run logs.
#define MASKED_MEAN_M 64
#define MASKED_MEAN_LMAX 300
#define MASKED_MEAN_OTHERS 100
int plot_masked_mean(const PlotOptions *o, char *err, size_t errlen);
// The curves drawn: their aggregations and labels (at most cap); returns their number.
int masked_mean_curves(Aggregation *aggs, char labels[][160], int cap);
// M c_i of a response of len tokens under agg in that minibatch (aggregation_coef).
double masked_mean_weight(Aggregation agg, int len);


// Prints the summary (plain text or markdown) with the comparisons of verdict_plan(against,
// only). Returns 0, or -1 with a message for an unknown group (nothing printed by then but
// the tables).
int summary_print_against(FILE *f, Run *const *runs, int n, int markdown, const char *against, const char *only,
                          char *err, size_t errlen);
// summary_print_against with the default comparisons. Returns 0.
int summary_print(FILE *f, Run *const *runs, int n, int markdown);

#endif
