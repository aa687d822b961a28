// stats.c: statistics of the analysis commands (contract in stats.h).
#include "stats.h"

#include <math.h>
#include <stdlib.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_fit.h>

#include "../common.h"

int mean_ci95(const double *x, int n, double *mean, double *half) { return mean_ci(x, n, 0.95, mean, half); }

int mean_ci(const double *x, int n, double level, double *mean, double *half) {
    int k = 0;
    double s = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i])) s += x[i], k++;
    *mean = k ? s / k : NAN;
    *half = NAN;
    if (k >= 2) {
        double ss = 0;
        for (int i = 0; i < n; i++)
            if (isfinite(x[i])) ss += (x[i] - *mean) * (x[i] - *mean);
        *half = gsl_cdf_tdist_Pinv((1 + level) / 2, k - 1) * sqrt(ss / (k - 1)) / sqrt((double)k);
    }
    return k;
}

int log_mean_ci95(const double *x, int n, double *gm, double *lo, double *hi) {
    double *l = xmalloc(((size_t)n + 1) * sizeof(double)), m, h;
    for (int i = 0; i < n; i++) l[i] = isfinite(x[i]) && x[i] > 0 ? log(x[i]) : NAN;
    int k = mean_ci95(l, n, &m, &h);
    free(l);
    *gm = exp(m);
    *lo = isfinite(h) ? exp(m - h) : NAN;
    *hi = isfinite(h) ? exp(m + h) : NAN;
    return k;
}

int diff_ci95(const double *a, int na, const double *b, int nb, double *diff, double *half) {
    const double *x[2] = {a, b};
    int n[2] = {na, nb}, k[2] = {0, 0};
    double m[2], ss = 0;
    for (int t = 0; t < 2; t++) {
        double s = 0;
        for (int i = 0; i < n[t]; i++)
            if (isfinite(x[t][i])) s += x[t][i], k[t]++;
        m[t] = k[t] ? s / k[t] : NAN;
        for (int i = 0; i < n[t]; i++)
            if (isfinite(x[t][i])) ss += (x[t][i] - m[t]) * (x[t][i] - m[t]);
    }
    int df = k[0] + k[1] - 2;
    *diff = m[1] - m[0];
    *half = k[0] && k[1] && df > 0 ? gsl_cdf_tdist_Pinv(0.975, df) * sqrt(ss / df * (1.0 / k[0] + 1.0 / k[1]))
                                   : NAN;
    return k[0] + k[1];
}

int slope_ci95(const double *x, const double *y, int n, double *slope, double *half) {
    double *xs = xmalloc(((size_t)n + 1) * sizeof(double)), *ys = xmalloc(((size_t)n + 1) * sizeof(double));
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) xs[k] = x[i], ys[k] = y[i], k++;
    *slope = *half = NAN;
    if (k >= 2) {
        double c0, c1, cov00, cov01, cov11, sumsq;
        gsl_fit_linear(xs, 1, ys, 1, (size_t)k, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
        *slope = c1;
        if (k >= 3) *half = gsl_cdf_tdist_Pinv(0.975, k - 2) * sqrt(cov11);
    }
    free(xs);
    free(ys);
    return k;
}

double mean_range(const double *x, int lo, int hi) {
    double s = 0;
    int k = 0;
    for (int i = lo; i < hi; i++)
        if (isfinite(x[i])) s += x[i], k++;
    return k ? s / k : NAN;
}

void ema(const double *x, int n, double a, double *out) {
    double m = NAN;
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            out[i] = NAN;
            continue;
        }
        m = isfinite(m) ? a * x[i] + (1 - a) * m : x[i];
        out[i] = m;
    }
}

double closed_mean_abs_adv(double p, int G, int scale_std, int ddof, int leave_one_out) {
    if (p <= 0 || p >= 1) return 0;
    double centred = 2 * p * (1 - p);
    if (leave_one_out && G > 1) centred *= (double)G / (G - 1);
    if (!scale_std) return centred;
    double sd = sqrt(p * (1 - p));
    if (ddof == 1 && G > 1) sd *= sqrt((double)G / (G - 1));
    return centred / sd;
}
