// plot_masked_mean.c: `grpolab plot masked-mean`, the paper's picture of the biased and the
// unbiased masked mean: a response's per-token weight c_i and its total weight |o_i| c_i
// against its length |o_i|, under each framework's default loss aggregation (the preset map's
// Table 2, objective_table2.c) and under GRPO's per-response mean. Every coefficient is
// aggregation_coef (kernels/objective.h), the formula the trainer runs and the tests check.
//
// Data file masked_mean.dat: length, then per curve M c_i and |o_i| M c_i (M c_i: the weight
// relative to a plain mean over the M responses, so that the curves share a scale).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "../sim/rl/objective.h"
#include "analysis.h"

int masked_mean_curves(Aggregation *aggs, char labels[][160], int cap) {
    char names[8][96] = {{0}};
    int n = 0;
    aggs[n++] = AGG_SEQ_MEAN_TOKEN_MEAN;  // GRPO's per-response mean: the biased one the paper drew
    for (int k = 0; k < objective_framework_count(); k++) {
        const char *name;
        Aggregation agg;
        if (objective_framework_default(k, &name, &agg) != 0) continue;
        int j = 0;
        while (j < n && aggs[j] != agg) j++;
        if (j == n) {
            if (n == cap || n == 8) continue;
            aggs[n++] = agg;
        }
        size_t l = strlen(names[j]);
        snprintf(names[j] + l, sizeof names[j] - l, "%s%s", l ? ", " : "", name);
    }
    for (int j = 0; j < n; j++) {
        if (j == 0)
            snprintf(labels[j], 160, "GRPO's per-response mean (%s)%s%.90s", aggregation_name(aggs[j]),
                     names[j][0] ? ": the default of " : "", names[j]);
        else
            snprintf(labels[j], 160, "the default of %.90s (%s)", names[j], aggregation_name(aggs[j]));
    }
    return n;
}

double masked_mean_weight(Aggregation agg, int len) {
    double sum_len = (double)(MASKED_MEAN_M - 1) * MASKED_MEAN_OTHERS + (double)len;
    return (double)MASKED_MEAN_M * aggregation_coef(agg, MASKED_MEAN_M, len, sum_len, MASKED_MEAN_LMAX);
}

int plot_masked_mean(const PlotOptions *o, char *err, size_t errlen) {
    Aggregation aggs[8];
    char labels[8][160];
    int nc = masked_mean_curves(aggs, labels, 8);
    Figure fig;
    if (figure_begin(&fig, o->out, o->formats, 1300, 480, err, errlen) != 0) return -1;
    char path[1300];
    FILE *fp = figure_data(&fig, "masked_mean.dat", path, sizeof path, err, errlen);
    if (!fp) return -1;
    fprintf(fp, "# M = %d responses per minibatch, L_max = %d, the other responses %d tokens long\n",
            MASKED_MEAN_M, MASKED_MEAN_LMAX, MASKED_MEAN_OTHERS);
    fprintf(fp, "# length");
    for (int c = 0; c < nc; c++) fprintf(fp, " token_weight_%s total_%s", aggregation_name(aggs[c]),
                                         aggregation_name(aggs[c]));
    fprintf(fp, "\n");
    for (int len = 1; len <= MASKED_MEAN_LMAX; len++) {
        fprintf(fp, "%d", len);
        for (int c = 0; c < nc; c++) {
            double w = masked_mean_weight(aggs[c], len);
            fprintf(fp, " %.10g %.10g", w, w * len);
        }
        fprintf(fp, "\n");
    }
    if (fclose(fp) != 0) return set_err(err, errlen, "cannot write %s", path);

    static const char *const colors[] = {"#888888", "#8b0000", "#1f4e9c", "#2e8b57", "#b8860b",
                                         "#6a3d9a", "#d2691e", "#000000"};
    size_t cap = 16384, len = 0;
    char *body = xmalloc(cap);
#define OUT(...) (len += (size_t)snprintf(body + len, cap - len, __VA_ARGS__))
    OUT("set key top right box opaque samplen 2 font ',8'\nset grid lc rgb '#dddddd'\n"
        "set xlabel 'response length |o_i| (tokens)' noenhanced\nset logscale y\n"
        "set multiplot layout 1,2 title \"The masked mean: a response's weight against its length (M = %d "
        "responses per minibatch, L_max = %d, the other responses %d tokens)\" font ',11' noenhanced\n",
        MASKED_MEAN_M, MASKED_MEAN_LMAX, MASKED_MEAN_OTHERS);
    for (int p = 0; p < 2; p++) {
        OUT("set title '%s' noenhanced\nset ylabel '%s' noenhanced\nplot ",
            p == 0 ? "Per-token weight" : "Total weight of the response",
            p == 0 ? "M c_i" : "|o_i| M c_i");
        for (int c = 0; c < nc; c++) {
            char lab[200];
            gp_escape(lab, sizeof lab, labels[c]);
            OUT("%s\"%s\" u 1:%d w l lw 2 lc rgb '%s' title \"%s\"", c ? ", " : "", path, 2 + 2 * c + p,
                colors[c % 8], lab);
        }
        OUT("\n");
    }
#undef OUT
    int rc = figure_render(&fig, body, err, errlen);
    free(body);
    return rc;
}
