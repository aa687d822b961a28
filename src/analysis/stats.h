// stats.h: the statistics of the analysis commands (GSL): means with t-based 95% confidence
// intervals, least-squares slopes with their 95% CI, EMA smoothing, and the closed forms the
// difficulty-bias figure draws. NaN inputs are skipped everywhere (a step with no incorrect
// response has no incorrect length).
#ifndef GRPOLAB_ANALYSIS_STATS_H
#define GRPOLAB_ANALYSIS_STATS_H

#include <stddef.h>

// Mean of the finite values of x (n) and the half-width of its 95% CI, t_{0.975, k-1} s/sqrt(k)
// over the k finite values (NaN if k < 2). Returns k.
int mean_ci95(const double *x, int n, double *mean, double *half);
// The same at another two-sided level: t_{(1 + level) / 2, k-1} s/sqrt(k) (level 0.90 gives
// the interval of two one-sided tests at 5%). level in (0, 1).
int mean_ci(const double *x, int n, double level, double *mean, double *half);

// A ratio's mean on the log scale: over the k finite, positive values of x, the mean m of
// log x and its 95% CI m +- t_{0.975, k-1} s/sqrt(k) (s of the logs), returned as exp(m) (the
// geometric mean) in *gm and exp of the CI's ends in *lo, *hi (NaN if k < 2). A multiplicative
// effect is additive on the log scale, where a t interval is founded; a ratio's own spread
// grows with its size. Returns k.
int log_mean_ci95(const double *x, int n, double *gm, double *lo, double *hi);

// Difference of the means of the finite values of b and a (mean b - mean a) and the half-width
// of its 95% CI, two-sample t with pooled variance: t_{0.975, ka+kb-2} s_p sqrt(1/ka + 1/kb)
// (NaN if either is empty or ka + kb < 3). Returns ka + kb.
int diff_ci95(const double *a, int na, const double *b, int nb, double *diff, double *half);

// Least-squares line y = a + b x over the pairs where both are finite (gsl_fit_linear):
// slope b and the half-width of its 95% CI, t_{0.975, k-2} sqrt(cov_bb) (NaN if k < 3).
// Returns k (the pairs used).
int slope_ci95(const double *x, const double *y, int n, double *slope, double *half);

// Mean of the finite values of x[lo..hi) (NaN if none).
double mean_range(const double *x, int lo, int hi);

// Exponential moving average out_t = a x_t + (1 - a) out_{t-1}, starting at the first finite
// value; NaN inputs keep the previous average (and stay NaN in out). a in (0, 1]; out may be x.
void ema(const double *x, int n, double a, double *out);

// Closed forms of the expected mean |advantage| of a group of G binary rewards with success
// share p (the difficulty bias, Liu et al. 2025 Sec. 3.1): |r_i - mean| averages 2p(1-p);
// std scaling (ddof 0, eps 0) divides by sqrt(p(1-p)), giving 2 sqrt(p(1-p)); ddof 1
// multiplies the std by sqrt(G/(G-1)); leave-one-out multiplies the centred reward by
// G/(G-1). scale_std: 1 if the advantage is divided by the group std. 0 at p = 0 or 1.
double closed_mean_abs_adv(double p, int G, int scale_std, int ddof, int leave_one_out);

#endif
