// train_fixture.h: what the trainer tests share (test_train.c, test_resume.c): the tiny
// fine-tuned policy of tiny_policy.h, a base config of tiny runs on it, and comparisons of
// run logs column by column. Header only: one test binary includes it.
#ifndef GRPOLAB_TRAIN_FIXTURE_H
#define GRPOLAB_TRAIN_FIXTURE_H

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "sim/model/checkpoint.h"
#include "sim/io/runlog.h"
#include "sim/model/sampler.h"
#include "sim/rl/resume.h"
#include "sim/rl/setup.h"
#include "sim/world/template.h"
#include "sim/rl/train.h"
#include "sim/rl/update.h"
#include "test_util.h"
#include "tiny_policy.h"

static char dir[64], model_path[128];
#define SEED 11
#define P_TEST 2
#define G_TEST 4
#define STEPS_MAX 4
#define BUDGET 24

static inline Config *base_config(const char *const *extra, int n_extra) {
    char err[512], init[256];
    Config *c = config_new();
    snprintf(init, sizeof init, "train.init=%s", model_path);
    const char *sets[] = {init, "run.backend=cpu", "run.seed=11", "train.prompts_per_step=2",
                          "train.group_size=4", "train.minibatch_size=4", "train.steps=4",
                          "world.max_new_tokens=24", "optim.lr=3e-3", "train.checkpoint_every=1",
                          "train.eval_every=0", "eval.limit=2", "eval.batch=16"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (config_set(c, sets[i], err, sizeof err) != 0) fail_msg("%s", err);
    for (int i = 0; i < n_extra; i++)
        if (config_set(c, extra[i], err, sizeof err) != 0) fail_msg("%s", err);
    return c;
}

static inline ModelConfig tiny_model_config(void) { return tiny_policy_config(); }

// The policy fine-tuned on the questions of the first STEPS_MAX steps (tiny_policy.h).
static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/grpolab-train-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(model_path, sizeof model_path, "%s/tiny.h5", dir);
    return tiny_policy_save(model_path, SEED, P_TEST * STEPS_MAX);
}

static int teardown(void **state) {
    tu_remove_dir(dir);
    return 0;
}

static inline double *col(const char *path, const char *dataset, int64_t *n) {
    char err[512];
    RunLogReader *rd = runlog_reader_open(path, err, sizeof err);
    if (!rd) fail_msg("%s", err);
    double *x = runlog_read_column(rd, dataset, n, err, sizeof err);
    if (!x) fail_msg("%s", err);
    runlog_reader_close(rd);
    return x;
}

static inline int64_t rows(const char *path, const char *dataset) {
    int64_t n = 0;
    free(col(path, dataset, &n));
    return n;
}

static const char *const TRAIN_DET[] = {
    "step", "reward_mean", "length_mean", "length_correct", "length_incorrect", "truncation_rate",
    "loop_rate", "disagreement_rate", "selfcheck_rate", "loss", "grad_norm", "clip_frac_low",
    "clip_frac_high", "kl", "entropy", "lr", "tokens", "mixed_group_frac", "bias_cosine"};
static const char *const QUESTION_COLS[] = {"step", "question_index", "level", "group_size",
                                            "reward_mean", "reward_std", "mean_abs_advantage",
                                            "sum_abs_weight"};
static const char *const RESPONSE_COLS[] = {"step", "question_index", "level", "length", "reward",
                                            "correct", "truncated", "advantage", "self_checked",
                                            "disagreement", "looped", "gave_up", "token_offset"};
static const char *const TOKEN_COLS[] = {"step", "weight", "logp_old"};
static const char *const EVAL_COLS[] = {"step", "bench", "accuracy", "length_mean",
                                        "length_correct", "length_incorrect", "n"};

// Column by column, bit for bit (NaN equals NaN).
static inline void assert_same_table(const char *a, const char *b, const char *table,
                              const char *const *cols, int n_cols) {
    for (int c = 0; c < n_cols; c++) {
        char ds[128];
        snprintf(ds, sizeof ds, "%s/%s", table, cols[c]);
        int64_t na, nb;
        double *x = col(a, ds, &na), *y = col(b, ds, &nb);
        if (na != nb) fail_msg("%s: %lld rows vs %lld", ds, (long long)na, (long long)nb);
        for (int64_t i = 0; i < na; i++)
            if (!(x[i] == y[i] || (isnan(x[i]) && isnan(y[i]))))
                fail_msg("%s row %lld: %.17g vs %.17g", ds, (long long)i, x[i], y[i]);
        free(x);
        free(y);
    }
}

static inline void assert_same_logs(const char *a, const char *b) {
    assert_same_table(a, b, "train", TRAIN_DET, sizeof TRAIN_DET / sizeof *TRAIN_DET);
    assert_same_table(a, b, "questions", QUESTION_COLS, sizeof QUESTION_COLS / sizeof *QUESTION_COLS);
    assert_same_table(a, b, "responses", RESPONSE_COLS, sizeof RESPONSE_COLS / sizeof *RESPONSE_COLS);
    assert_same_table(a, b, "tokens", TOKEN_COLS, sizeof TOKEN_COLS / sizeof *TOKEN_COLS);
    assert_same_table(a, b, "eval", EVAL_COLS, sizeof EVAL_COLS / sizeof *EVAL_COLS);
}

static inline void run_ok(Config *c, const char *out, int resume) {
    TrainStats st;
    assert_int_equal(train_run(c, NULL, out, resume, &st), 0);
}

#endif
