// train.c: `grpolab train` (train.h): rollouts, advantages, PPO-clip minibatch updates and the
// HDF5 run log. Every formula of the objectives is in objective.h; this file only calls them.
#include "train.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../common.h"
#include "checkpoint.h"
#include "evaluate.h"
#include "runlog.h"
#include "sampler.h"
#include "setup.h"
#include "template.h"
#include "tokenizer.h"
#include "update.h"
#include "world.h"

// ---------------------------------------------------------------- settings
typedef struct {
    const char *init;
    int steps, P, G, M, micro, epochs, eval_every, checkpoint_every, bias_diagnostic;
    float temperature, top_p;
    double level_weights[WORLD_NUM_LEVELS];
    Template template_kind;
    RewardRule reward_rule;
    int max_new;
    uint64_t seed;
} TrainSettings;

static int train_settings(const Config *c, TrainSettings *s, ObjectiveConfig *oc, char *err,
                          size_t errlen) {
    s->init = config_str(c, "train.init");
    s->steps = (int)config_int(c, "train.steps");
    s->P = (int)config_int(c, "train.prompts_per_step");
    s->G = (int)config_int(c, "train.group_size");
    s->M = (int)config_int(c, "train.minibatch_size");
    s->micro = (int)config_int(c, "train.micro_batch");
    s->epochs = (int)config_int(c, "train.ppo_epochs");
    s->eval_every = (int)config_int(c, "train.eval_every");
    s->checkpoint_every = (int)config_int(c, "train.checkpoint_every");
    s->bias_diagnostic = config_bool(c, "train.bias_diagnostic");
    s->temperature = (float)config_float(c, "train.temperature");
    s->top_p = (float)config_float(c, "train.top_p");
    s->max_new = (int)config_int(c, "world.max_new_tokens");
    s->seed = (uint64_t)config_int(c, "run.seed");
    double wsum = 0;
    for (int l = 0; l < WORLD_NUM_LEVELS; l++) {
        char key[64];
        snprintf(key, sizeof key, "train.weight_level%d", l + 1);
        s->level_weights[l] = config_float(c, key);
        wsum += s->level_weights[l];
    }
    if (s->G < 2)
        return set_err(err, errlen, "train.group_size = %d: a group needs at least 2 responses "
                       "(the baseline is a mean over the group)", s->G);
    if (s->M < 1 || (s->P * s->G) % s->M != 0)
        return set_err(err, errlen, "train.minibatch_size = %d: must divide prompts_per_step * "
                       "group_size = %d * %d = %d", s->M, s->P, s->G, s->P * s->G);
    if (!(s->temperature > 0))
        return set_err(err, errlen, "train.temperature = %g: must be > 0 (the policy is sampled)",
                       s->temperature);
    if (!(s->top_p > 0 && s->top_p <= 1))
        return set_err(err, errlen, "train.top_p = %g: must be in (0, 1]", s->top_p);
    if (!(wsum > 0))
        return set_err(err, errlen, "train.weight_level1..5 are all 0: at least one level needs "
                       "a positive weight");
    const char *tn = config_str(c, "world.template");
    if (template_parse(tn, &s->template_kind) != 0)
        return set_err(err, errlen, "world.template = '%s': not one of r1|boxed|none", tn);
    s->reward_rule = setup_reward_rule(c);
    return objective_from_config(c, s->max_new, oc, err, errlen);
}

// ---------------------------------------------------------------- the log's tables
static const ColumnSpec TRAIN_COLS[] = {
    {"step", COL_I32, "RL step (0-based)"},
    {"reward_mean", COL_F64, "mean reward of the step's P*G responses"},
    {"length_mean", COL_F64, "mean response length, generated tokens (stop token included)"},
    {"length_correct", COL_F64, "mean length of responses with reward 1 (NaN if none)"},
    {"length_incorrect", COL_F64, "mean length of responses with reward 0 (NaN if none)"},
    {"truncation_rate", COL_F64, "share of responses cut by the budget (no stop)"},
    {"loop_rate", COL_F64, "share of responses flagged looped"},
    {"disagreement_rate", COL_F64, "share of responses with a visibly disagreeing check"},
    {"selfcheck_rate", COL_F64, "share of responses with at least one check"},
    {"loss", COL_F64, "objective L of a minibatch, mean over the step's minibatch updates"},
    {"grad_norm", COL_F64, "global grad norm before clipping, mean over the minibatch updates"},
    {"clip_frac_low", COL_F64, "share of updated tokens with A < 0 and rho < 1 - eps_low (all epochs)"},
    {"clip_frac_high", COL_F64, "share of updated tokens with A > 0 and rho > 1 + eps_high (all epochs)"},
    {"kl", COL_F64, "mean k3 KL to the reference model per updated token (0 if beta = 0)"},
    {"entropy", COL_F64, "mean policy entropy per updated token, nats"},
    {"lr", COL_F64, "learning rate"},
    {"tokens", COL_I64, "generated tokens of the step"},
    {"rollout_seconds", COL_F64, "wall time of sampling and scoring, s"},
    {"update_seconds", COL_F64, "wall time of the updates (old log-probs included), s"},
    {"mixed_group_frac", COL_F64, "share of groups whose rewards are not all equal"},
    {"bias_cosine", COL_F64, "cosine of the objective's first-minibatch gradient with the unbiased "
                             "policy gradient on the same responses (NaN: not computed)"},
};
enum { N_TRAIN_COLS = sizeof TRAIN_COLS / sizeof TRAIN_COLS[0] };
static const ColumnSpec QUESTION_COLS[] = {
    {"step", COL_I32, "RL step"},
    {"question_index", COL_I64, "index of the task in the training pool (step * P + p)"},
    {"level", COL_I32, "difficulty level 1..5"},
    {"group_size", COL_I32, "responses G"},
    {"reward_mean", COL_F64, "mean reward of the group"},
    {"reward_std", COL_F64, "std of the group's rewards (objective.std_ddof)"},
    {"mean_abs_advantage", COL_F64, "mean |A_i| over the group"},
    {"sum_abs_weight", COL_F64, "sum of |w| over the group's tokens (first-epoch weights)"},
};
enum { N_QUESTION_COLS = sizeof QUESTION_COLS / sizeof QUESTION_COLS[0] };
static const ColumnSpec RESPONSE_COLS[] = {
    {"step", COL_I32, "RL step"},
    {"question_index", COL_I64, "index of the task in the training pool"},
    {"level", COL_I32, "difficulty level 1..5"},
    {"length", COL_I32, "generated tokens, the stop token included"},
    {"reward", COL_I32, "verifier reward under world.reward_rule (0/1; 0 when truncated)"},
    {"correct", COL_I32, "extracted answer equals the truth, format aside"},
    {"truncated", COL_I32, "no stop within the budget"},
    {"advantage", COL_F32, "A_i"},
    {"self_checked", COL_I32, "at least one re-check of a step"},
    {"disagreement", COL_I32, "a re-check visibly disagreed"},
    {"looped", COL_I32, "repeated disagreeing re-checks of one step"},
    {"gave_up", COL_I32, "a quick guess after a disagreement"},
    {"token_offset", COL_I64, "row of the response's first token in /tokens"},
};
enum { N_RESPONSE_COLS = sizeof RESPONSE_COLS / sizeof RESPONSE_COLS[0] };
static const ColumnSpec TOKEN_COLS[] = {
    {"step", COL_I32, "RL step"},
    {"weight", COL_F32, "token weight w = -dL/dlog pi of its first-epoch update (0: not updated)"},
    {"logp_old", COL_F32, "log pi_old of the token, recomputed before the first update (NaN: response not updated)"},
};
enum { N_TOKEN_COLS = sizeof TOKEN_COLS / sizeof TOKEN_COLS[0] };
static const ColumnSpec EVAL_COLS[] = {
    {"step", COL_I32, "steps done before this greedy evaluation"},
    {"bench", COL_I32, "benchmark index (root attribute benchmarks lists the names)"},
    {"accuracy", COL_F64, "share of responses with reward 1"},
    {"length_mean", COL_F64, "mean response length, generated tokens"},
    {"length_correct", COL_F64, "mean length of correct responses (NaN if none)"},
    {"length_incorrect", COL_F64, "mean length of incorrect responses (NaN if none)"},
    {"n", COL_I32, "questions"},
};
enum { N_EVAL_COLS = sizeof EVAL_COLS / sizeof EVAL_COLS[0] };

static int declare_tables(RunLog *rl, char *err, size_t errlen) {
    return runlog_add_table(rl, "train", TRAIN_COLS, N_TRAIN_COLS, 1024, 0, err, errlen) == 0 &&
                   runlog_add_table(rl, "questions", QUESTION_COLS, N_QUESTION_COLS, 4096, 0, err, errlen) == 0 &&
                   runlog_add_table(rl, "responses", RESPONSE_COLS, N_RESPONSE_COLS, 16384, 1, err, errlen) == 0 &&
                   runlog_add_table(rl, "tokens", TOKEN_COLS, N_TOKEN_COLS, 65536, 1, err, errlen) == 0 &&
                   runlog_add_table(rl, "eval", EVAL_COLS, N_EVAL_COLS, 1024, 0, err, errlen) == 0
               ? 0
               : -1;
}

static int set_root_attrs(RunLog *rl, const Config *cfg, const ObjectiveConfig *oc,
                          const TrainSettings *s, const char *backend, const ModelConfig *mc,
                          const char *init_fp, char *err, size_t errlen) {
    char *text = config_to_ini(cfg), when[64], names[512] = "";
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    for (int b = 0; b < world_num_benchmarks(); b++) {
        if (b) strncat(names, ",", sizeof names - strlen(names) - 1);
        strncat(names, world_benchmark_name(b), sizeof names - strlen(names) - 1);
    }
    int ok = runlog_set_attr_str(rl, "kind", "train", err, errlen) == 0 &&
             runlog_set_attr_str(rl, "config", text, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "seed", (int64_t)s->seed, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "backend", backend, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "train.micro_batch", s->micro, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "threads", omp_get_max_threads(), err, errlen) == 0 &&
             runlog_set_attr_str(rl, "start_time", when, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "init", s->init, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "init_fingerprint", init_fp, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "benchmarks", names, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "model.num_layers", mc->n_layers, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "model.d_model", mc->d_model, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "objective.preset", oc->preset, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "objective.baseline", baseline_name(oc->baseline), err, errlen) == 0 &&
             runlog_set_attr_str(rl, "objective.scale", scale_name(oc->scale), err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "objective.std_ddof", oc->std_ddof, err, errlen) == 0 &&
             runlog_set_attr_f64(rl, "objective.std_eps", oc->std_eps, err, errlen) == 0 &&
             runlog_set_attr_str(rl, "objective.aggregation", aggregation_name(oc->aggregation), err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "objective.l_max", oc->l_max, err, errlen) == 0 &&
             runlog_set_attr_f64(rl, "objective.eps_low", oc->eps_low, err, errlen) == 0 &&
             runlog_set_attr_f64(rl, "objective.eps_high", oc->eps_high, err, errlen) == 0 &&
             runlog_set_attr_f64(rl, "objective.beta", oc->beta, err, errlen) == 0 &&
             runlog_set_attr_i64(rl, "objective.dynamic_sampling", oc->dynamic_sampling, err, errlen) == 0;
    free(text);
    return ok ? 0 : -1;
}

// ---------------------------------------------------------------- helpers
static double safe_div(double a, double b) { return b > 0 ? a / b : NAN; }

static int run_eval(Model *m, const Tokenizer *tk, const EvalConfig *ec, int step, RunLog *rl,
                    char *err, size_t errlen) {
    EvalResult res;
    evaluate_benchmarks(m, tk, ec, &res, NULL, NULL);
    for (int b = 0; b < res.n_bench; b++) {
        const EvalStats *s = &res.bench[b];
        double acc = eval_accuracy(s), lm = safe_div(s->len_sum, s->n);
        double lc = safe_div(s->len_correct_sum, s->n_correct);
        double li = safe_div(s->len_incorrect_sum, s->n - s->n_correct);
        const void *row[N_EVAL_COLS] = {&step, &b, &acc, &lm, &lc, &li, &s->n};
        if (runlog_append(rl, "eval", 1, row, err, errlen) != 0) return -1;
    }
    fprintf(stderr, "train: eval at step %d: score %.4f", step, res.score);
    for (int b = 0; b < res.n_bench; b++)
        fprintf(stderr, "  %s %.3f", world_benchmark_name(b), eval_accuracy(&res.bench[b]));
    fprintf(stderr, "\n");
    return 0;
}

// Creates the directories above path (like mkdir -p of its parent). 0, or -1 with a message.
static int make_parent_dirs(const char *path, char *err, size_t errlen) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return set_err(err, errlen, "cannot create directory '%s' for '%s': %s", buf, path,
                           strerror(errno));
        *p = '/';
    }
    return 0;
}

// ---------------------------------------------------------------- the stored config
// FNV-1a (64 bit) of a model's parameters as float32 bytes, as 16 hex digits: equal weights
// give equal fingerprints, whatever file or backend they came from.
static void params_fingerprint(Model *m, char hex[17]) {
    size_t nb = model_num_params(m) * sizeof(float);
    unsigned char *b = xmalloc(nb);
    bk_download(model_backend(m), b, model_params(m), nb);
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < nb; i++) h = (h ^ b[i]) * 1099511628211ULL;
    snprintf(hex, 17, "%016llx", (unsigned long long)h);
    free(b);
}

int train_init_fingerprint(const char *path, char hex[17], char *err, size_t errlen) {
    ModelConfig mc;
    if (checkpoint_read_meta(path, &mc, NULL, NULL, NULL, NULL, NULL, err, errlen) != 0) return -1;
    Backend *bk = backend_create(BACKEND_CPU, err, errlen);
    if (!bk) return -1;
    Model *m = model_create(bk, &mc);
    int rc = checkpoint_load(path, m, 0, err, errlen);
    if (rc == 0) params_fingerprint(m, hex);
    model_free(m);
    backend_destroy(bk);
    return rc;
}

int train_compare_run_config(const char *run_path, const Config *now, int allow_more_steps,
                             char *msg, size_t msglen) {
    char err[768];
    RunLogReader *rd = runlog_reader_open(run_path, err, sizeof err);
    if (!rd) {
        set_err(msg, msglen, "%s", err);
        return -1;
    }
    char *text = runlog_read_attr_str(rd, "config", err, sizeof err);
    // logs written before init_fingerprint existed are not compared on the weights
    char *then_fp = text && runlog_reader_has_attr(rd, "init_fingerprint")
                        ? runlog_read_attr_str(rd, "init_fingerprint", err, sizeof err) : NULL;
    runlog_reader_close(rd);
    if (!text) {
        set_err(msg, msglen, "%s: no stored config (attribute 'config'): %s", run_path, err);
        return -1;
    }
    Config *then = config_from_stored(text, run_path, msg, msglen);
    free(text);
    if (!then) {
        free(then_fp);
        return -1;
    }
    // keys that change what a run computes at most in rounding (threads: OpenBLAS's threaded
    // sgemm sums in another order; backend) or not at all (output path); train.steps may grow
    // when a run is resumed to go on for longer
    const char *ignore[] = {"run.threads", "run.backend", "run.out", "train.steps"};
    int n_ignore = allow_more_steps ? 4 : 3;
    char diff[600];
    int n = config_diff(then, now, ignore, n_ignore, diff, sizeof diff);
    if (n == 0 && allow_more_steps && config_int(now, "train.steps") < config_int(then, "train.steps"))
        n = 1, snprintf(diff, sizeof diff, "train.steps = %lld vs %lld (fewer)",
                        (long long)config_int(then, "train.steps"), (long long)config_int(now, "train.steps"));
    config_free(then);
    if (n > 0) {
        set_err(msg, msglen, "%s was trained with another config (%d key%s differ%s, stored vs now): %s",
                run_path, n, n == 1 ? "" : "s", n == 1 ? "s" : "", diff);
        free(then_fp);
        return 1;
    }
    // the same train.init path can hold other weights (a base model pretrained again)
    if (!then_fp) return 0;
    const char *init = config_str(now, "train.init");
    char now_fp[17];
    int rc = 0;
    if (train_init_fingerprint(init, now_fp, err, sizeof err) != 0) {
        set_err(msg, msglen, "train.init: %s", err);
        rc = -1;
    } else if (strcmp(then_fp, now_fp) != 0) {
        set_err(msg, msglen, "%s was trained from other weights than train.init = '%s' holds now "
                "(init_fingerprint %s in the run, %s now: the base model was made again)",
                run_path, init, then_fp, now_fp);
        rc = 1;
    }
    free(then_fp);
    return rc;
}

// ---------------------------------------------------------------- the run
int train_run(const Config *cfg, const char *backend_override, const char *out_path, int resume,
              TrainStats *stats) {
    char err[1024];
    if (stats) memset(stats, 0, sizeof *stats);
    TrainSettings S;
    ObjectiveConfig oc;
    if (train_settings(cfg, &S, &oc, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        return 2;
    }
    char ckpt_path[4096];
    snprintf(ckpt_path, sizeof ckpt_path, "%s.ckpt.h5", out_path);
    ModelConfig mc;
    if (checkpoint_read_meta(S.init, &mc, NULL, NULL, NULL, NULL, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: train.init: %s\n", err);
        return 2;
    }
    const Tokenizer *tk = tokenizer_default();
    if (mc.vocab_size != tok_vocab_size(tk)) {
        fprintf(stderr, "grpolab: error: train.init = '%s' has model.vocab_size = %d, not the "
                "tokenizer's %d tokens: not a model of this world\n", S.init, mc.vocab_size,
                tok_vocab_size(tk));
        return 2;
    }
    int64_t start_step = 0;
    if (resume) {  // going on with other settings would mix two configs in one log
        int same = train_compare_run_config(out_path, cfg, 1, err, sizeof err);
        if (same != 0) {
            fprintf(stderr, "grpolab: error: --resume: %s%s\n", err,
                    same > 0 ? " (resume with the settings and base model the run started with, or start a new run)" : "");
            return 2;
        }
    }
    if (resume && checkpoint_read_meta(ckpt_path, NULL, NULL, NULL, NULL, &start_step, NULL, err,
                                       sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: --resume: %s\n", err);
        return 2;
    }
    Backend *bk = setup_backend(cfg, backend_override, 1, err, sizeof err);
    if (!bk) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        return 2;
    }
    // train.micro_batch resolved once: 0 by backend, then at most M (M: one pass)
    if (S.micro == 0 && bk->kind == BACKEND_CPU) S.micro = UPDATE_CPU_MICRO_BATCH;
    if (S.micro == 0 || S.micro > S.M) S.micro = S.M;
    Model *m = model_create(bk, &mc), *ref = NULL;
    int rc = 0;
    RunLog *rl = NULL;
    if (checkpoint_load(S.init, m, 0, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: train.init: %s\n", err);
        model_free(m);
        backend_destroy(bk);
        return 2;
    }
    // the rollout sampler, and the greedy evaluation: every eval prompt must fit the context
    // with the budget, checked before the log is created (not a die() at the first eval)
    SamplerConfig sc = {.temperature = S.temperature, .top_p = S.top_p, .max_new_tokens = S.max_new,
                        .eos_token = TOK_EOS, .stop_token = template_stop_token(tk, S.template_kind),
                        .seed = S.seed, .env = setup_sampler_env(cfg)};
    EvalConfig ec = {.template_kind = S.template_kind, .reward_rule = S.reward_rule,
                     .world_seed = (uint64_t)config_int(cfg, "world.seed"),
                     .batch = (int)config_int(cfg, "eval.batch"), .limit = (int)config_int(cfg, "eval.limit"),
                     .pool_seed = S.seed, .sampler = sc};
    ec.sampler.temperature = 0.0f;  // greedy
    ec.sampler.top_p = 1.0f;
    if (S.eval_every > 0 && eval_check_prompts(m, tk, &ec, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s (lower world.max_new_tokens)\n", err);
        model_free(m);
        backend_destroy(bk);
        return 2;
    }
    if (oc.beta > 0) {  // the frozen reference model is the initial policy
        ref = model_create(bk, &mc);
        model_copy_params(ref, m);
    }
    if (resume && checkpoint_load(ckpt_path, m, 1, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: --resume: %s\n", err);
        rc = 2;
        goto done;
    }
    if (resume) {
        rl = runlog_open_resume(out_path, "step", start_step, err, sizeof err);
        // the stored config becomes the one the run goes on with (it can differ only in
        // threads, backend, output path and a larger train.steps: see above)
        char *text = rl ? config_to_ini(cfg) : NULL;
        if (text && runlog_set_attr_str(rl, "config", text, err, sizeof err) != 0) {
            runlog_close(rl, NULL, 0);
            rl = NULL;
        }
        free(text);
    } else {
        rl = make_parent_dirs(out_path, err, sizeof err) == 0 ? runlog_create(out_path, 1, err, sizeof err) : NULL;
        char init_fp[17];
        params_fingerprint(m, init_fp);  // m holds train.init's weights here
        if (rl && set_root_attrs(rl, cfg, &oc, &S, backend_name(bk->kind), &mc, init_fp, err, sizeof err) != 0) {
            fprintf(stderr, "grpolab: error: %s\n", err);
            rc = 1;
            goto done;
        }
    }
    if (!rl || declare_tables(rl, err, sizeof err) != 0 || runlog_start_swmr(rl, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        rc = resume ? 2 : 1;
        goto done;
    }
    if (resume && runlog_rows(rl, "train") != start_step) {
        fprintf(stderr, "grpolab: error: --resume: %s holds %lld /train rows before step %lld "
                "(expected one per step): the log and the checkpoint %s do not match\n", out_path,
                (long long)runlog_rows(rl, "train"), (long long)start_step, ckpt_path);
        rc = 2;
        goto done;
    }

    {
        const int P = S.P, G = S.G, N = P * G, M = S.M, max_new = S.max_new;
        const int cap = mc.max_seq_len;
        AdamWConfig opt = setup_adamw(cfg);
        Task *tasks = xmalloc((size_t)P * sizeof(Task));
        int *prompt_ids = xmalloc((size_t)P * cap * sizeof(int)), *plen_p = xmalloc((size_t)P * sizeof(int));
        int *prompts = xmalloc((size_t)N * cap * sizeof(int)), *plen = xmalloc((size_t)N * sizeof(int));
        const int **prompt_ptr = xmalloc((size_t)N * sizeof(int *)), **resp_ptr = xmalloc((size_t)N * sizeof(int *));
        float *rewards = xmalloc((size_t)N * sizeof(float)), *adv = xmalloc((size_t)N * sizeof(float));
        float *unbiased = xmalloc((size_t)N * sizeof(float));
        float *gmean = xmalloc((size_t)P * sizeof(float)), *gstd = xmalloc((size_t)P * sizeof(float));
        float *d_rewards = bk_alloc(bk, (size_t)N * sizeof(float)), *d_adv = bk_alloc(bk, (size_t)N * sizeof(float));
        float *d_gmean = bk_alloc(bk, (size_t)P * sizeof(float)), *d_gstd = bk_alloc(bk, (size_t)P * sizeof(float));
        int *tok_off = xmalloc((size_t)N * sizeof(int)), *kept = xmalloc((size_t)N * sizeof(int));
        int *order = xmalloc((size_t)N * sizeof(int));
        Verdict *verd = xmalloc((size_t)N * sizeof(Verdict));
        size_t tok_cap = (size_t)N * max_new;
        float *logp_old = xmalloc(tok_cap * sizeof(float)), *logp_ref = ref ? xmalloc(tok_cap * sizeof(float)) : NULL;
        float *weights = xmalloc(tok_cap * sizeof(float));
        int *tok_step = xmalloc(tok_cap * sizeof(int));
        unsigned char *tok_env = xmalloc(tok_cap);
        char *resp_text = xmalloc((size_t)max_new * 16 + 16), text[1024];
        Generation gen;
        generation_alloc(&gen, N, max_new);
        UpdateWorkspace *ws = update_workspace_create(m, M, S.bias_diagnostic);
        double t_run = wall_time(), sum_rollout_s = 0, sum_update_s = 0, sum_tokens = 0;
        char micro_text[64] = "one pass";
        if (S.micro < M) snprintf(micro_text, sizeof micro_text, "micro-batches of %d", S.micro);
        fprintf(stderr, "train: %zu parameters from %s, objective %s (baseline %s, scale %s, "
                "aggregation %s, eps %.2f/%.2f, beta %g), steps %lld..%d, P %d x G %d, minibatch %d "
                "(%s), %d epoch(s), backend %s\n", model_num_params(m), S.init, oc.preset,
                baseline_name(oc.baseline), scale_name(oc.scale), aggregation_name(oc.aggregation),
                oc.eps_low, oc.eps_high, oc.beta, (long long)start_step, S.steps, P, G, M,
                micro_text, S.epochs, backend_name(bk->kind));
        int steps_run = 0;
        for (int step = (int)start_step; step <= S.steps && rc == 0; step++) {
            if (S.eval_every > 0 && (step % S.eval_every == 0 || step == S.steps)) {
                if (run_eval(m, tk, &ec, step, rl, err, sizeof err) != 0) {
                    fprintf(stderr, "grpolab: error: %s\n", err);
                    rc = 1;
                    break;
                }
            }
            if (step == S.steps) break;
            double t0 = wall_time();
            // ---- rollout: P tasks x G responses
            int Tp = 1;
            for (int p = 0; p < P; p++) {
                world_train_task_mix(S.seed, (int64_t)step * P + p, S.level_weights, &tasks[p]);
                if (template_prompt(S.template_kind, &tasks[p], text, sizeof text) < 0)
                    die("train: prompt of '%s' does not fit", tasks[p].question);
                plen_p[p] = tok_encode(tk, text, prompt_ids + (size_t)p * cap, cap, err, sizeof err);
                if (plen_p[p] < 0) die("train: cannot tokenize prompt '%s': %s", text, err);
                if (sampler_fits(m, &sc, plen_p[p], err, sizeof err) != 0) {
                    fprintf(stderr, "grpolab: error: %s (lower world.max_new_tokens)\n", err);
                    rc = 2;
                    break;
                }
                if (plen_p[p] > Tp) Tp = plen_p[p];
            }
            if (rc) break;
            for (int i = 0; i < N; i++) {
                int p = i / G;
                plen[i] = plen_p[p];
                memset(prompts + (size_t)i * Tp, 0, (size_t)Tp * sizeof(int));
                memcpy(prompts + (size_t)i * Tp, prompt_ids + (size_t)p * cap, (size_t)plen_p[p] * sizeof(int));
                prompt_ptr[i] = prompt_ids + (size_t)p * cap;
            }
            sampler_generate(m, &sc, prompts, plen, N, Tp, (uint64_t)step * N, &gen);
            int n_tok = 0, n_correct = 0, n_trunc = 0, n_loop = 0, n_dis = 0, n_check = 0;
            double len_sum = 0, len_c = 0, len_i = 0, rew_sum = 0;
            for (int i = 0; i < N; i++) {
                const int *toks = gen.tokens + (size_t)i * gen.max_new;
                resp_ptr[i] = toks;
                if (tok_decode(tk, toks, gen.length[i], resp_text, (size_t)max_new * 16 + 16) < 0)
                    die("train: cannot decode a response");
                verify_response(S.template_kind, &tasks[i / G], resp_text, gen.stopped[i], &verd[i]);
                verdict_apply_rule(&verd[i], resp_text, S.reward_rule);
                rewards[i] = (float)verd[i].reward;
                tok_off[i] = n_tok;
                memcpy(tok_env + n_tok, gen.env + (size_t)i * gen.max_new, (size_t)gen.length[i]);
                n_tok += gen.length[i];
                len_sum += gen.length[i];
                rew_sum += rewards[i];
                if (verd[i].reward) {
                    n_correct++;
                    len_c += gen.length[i];
                } else {
                    len_i += gen.length[i];
                }
                n_trunc += verd[i].truncated;
                n_loop += verd[i].looped;
                n_dis += verd[i].disagreement;
                n_check += verd[i].self_checked;
            }
            // advantages on the backend (the verifier's rewards come from the host; the
            // advantages and group statistics go back for the minibatches and the log)
            bk_upload(bk, d_rewards, rewards, (size_t)N * sizeof(float));
            kn_group_advantages(bk, d_adv, d_gmean, d_gstd, d_rewards, P, G, &oc);
            bk_download(bk, adv, d_adv, (size_t)N * sizeof(float));
            bk_download(bk, gmean, d_gmean, (size_t)P * sizeof(float));
            bk_download(bk, gstd, d_gstd, (size_t)P * sizeof(float));
            int n_kept = 0, n_mixed = 0;
            for (int p = 0; p < P; p++) {
                int mixed = 0;
                for (int g = 1; g < G; g++) mixed |= rewards[p * G + g] != rewards[p * G];
                n_mixed += mixed;
                for (int g = 0; g < G; g++) {
                    int i = p * G + g;
                    unbiased[i] = rewards[i] - gmean[p];
                    if (mixed || !oc.dynamic_sampling) kept[n_kept++] = i;
                }
            }
            for (int j = 0; j < n_tok; j++) {
                weights[j] = 0.0f;
                tok_step[j] = step;
                logp_old[j] = NAN;
            }
            double t1 = wall_time();
            // ---- update: old log-probs, then epochs of minibatches
            Rollout r = {.n = N, .prompt = prompt_ptr, .prompt_len = plen, .resp = resp_ptr,
                         .resp_len = gen.length, .advantage = adv, .tok_offset = tok_off,
                         .logp_old = logp_old, .logp_ref = logp_ref, .env = sc.env ? tok_env : NULL};
            EpochPlan plan = {.epochs = S.epochs, .minibatch = M, .micro = S.micro,
                              .bias_diagnostic = S.bias_diagnostic, .seed = S.seed, .step = step};
            UpdateStats us;
            update_epochs(ws, m, ref, &oc, &opt, &plan, &r, kept, n_kept, order, weights, unbiased, &us);
            double t2 = wall_time();
            // ---- log
            double reward_mean = rew_sum / N, length_mean = len_sum / N;
            double lc = safe_div(len_c, n_correct), li = safe_div(len_i, N - n_correct);
            double trunc_rate = (double)n_trunc / N, loop_rate = (double)n_loop / N;
            double dis_rate = (double)n_dis / N, check_rate = (double)n_check / N;
            int n_updates = us.n_updates;
            long long upd_tok = us.tokens;
            double loss = n_updates ? us.loss_sum / n_updates : 0, gnorm = n_updates ? us.gnorm_sum / n_updates : 0;
            double cf_lo = upd_tok ? (double)us.clipped_low / upd_tok : 0, cf_hi = upd_tok ? (double)us.clipped_high / upd_tok : 0;
            double kl = oc.beta > 0 && upd_tok ? us.kl_sum / upd_tok : 0.0;
            double ent = us.entropy_tokens ? us.entropy_sum / us.entropy_tokens : NAN, lr = opt.lr, cosine = us.cosine;
            int64_t ntok64 = n_tok;
            double ro_s = t1 - t0, up_s = t2 - t1, mixed_frac = (double)n_mixed / P;
            sum_rollout_s += ro_s;
            sum_update_s += up_s;
            sum_tokens += n_tok;
            const void *trow[N_TRAIN_COLS] = {&step, &reward_mean, &length_mean, &lc, &li, &trunc_rate,
                                              &loop_rate, &dis_rate, &check_rate, &loss, &gnorm,
                                              &cf_lo, &cf_hi, &kl, &ent, &lr, &ntok64, &ro_s, &up_s,
                                              &mixed_frac, &cosine};
            int ok = runlog_append(rl, "train", 1, trow, err, sizeof err) == 0;
            for (int p = 0; ok && p < P; p++) {
                int64_t qi = (int64_t)step * P + p;
                double rm = gmean[p], rs = gstd[p], maa = 0, saw = 0;
                for (int g = 0; g < G; g++) {
                    int i = p * G + g;
                    maa += fabs(adv[i]) / G;
                    for (int t = 0; t < gen.length[i]; t++) saw += fabs(weights[tok_off[i] + t]);
                }
                const void *qrow[N_QUESTION_COLS] = {&step, &qi, &tasks[p].level, &G, &rm, &rs, &maa, &saw};
                ok = runlog_append(rl, "questions", 1, qrow, err, sizeof err) == 0;
            }
            int64_t tok_base = runlog_rows(rl, "tokens");
            for (int i = 0; ok && i < N; i++) {
                int64_t qi = (int64_t)step * P + i / G, off = tok_base + tok_off[i];
                const Verdict *v = &verd[i];
                const void *rrow[N_RESPONSE_COLS] = {&step, &qi, &tasks[i / G].level, &gen.length[i],
                                                     &v->reward, &v->correct, &v->truncated, &adv[i],
                                                     &v->self_checked, &v->disagreement, &v->looped,
                                                     &v->gave_up, &off};
                ok = runlog_append(rl, "responses", 1, rrow, err, sizeof err) == 0;
            }
            const void *krow[N_TOKEN_COLS] = {tok_step, weights, logp_old};
            if (ok) ok = runlog_append(rl, "tokens", n_tok, krow, err, sizeof err) == 0;
            if (ok) ok = runlog_flush(rl, err, sizeof err) == 0;
            if (!ok) {
                fprintf(stderr, "grpolab: error: %s\n", err);
                rc = 1;
                break;
            }
            steps_run++;
            if (stats) {
                if (steps_run == 1) stats->first_reward_mean = reward_mean;
                stats->last_reward_mean = reward_mean;
                stats->tokens += n_tok;
                stats->steps_done = step + 1;
            }
            double elapsed = wall_time() - t_run, eta = elapsed / steps_run * (S.steps - step - 1);
            fprintf(stderr, "train step %4d/%d  reward %.3f  len %.1f (correct %.1f, incorrect %.1f)  "
                    "clip %.3f/%.3f  gnorm %.3f  bias_cos %.3f  %6.0f tok/s  %.1f s/step  ETA %.0fs\n",
                    step + 1, S.steps, reward_mean, length_mean, lc, li, cf_lo, cf_hi, gnorm, cosine,
                    n_tok / (t2 - t0), t2 - t0, eta);
            int done_steps = step + 1;
            if ((S.checkpoint_every > 0 && done_steps % S.checkpoint_every == 0) || done_steps == S.steps) {
                // the log is flushed up to this step (above) before the checkpoint is saved
                char *cfg_text = config_to_ini(cfg);
                const char *vocab[256];
                int nv = tok_vocab_size(tk);
                for (int v = 0; v < nv; v++) vocab[v] = tok_str(tk, v);
                CkptInfo info = {.vocab = vocab, .n_vocab = nv, .config_text = cfg_text,
                                 .step = done_steps, .with_optimizer = 1};
                if (checkpoint_save(ckpt_path, m, &info, err, sizeof err) != 0) {
                    fprintf(stderr, "grpolab: error: %s\n", err);
                    rc = 1;
                }
                free(cfg_text);
            }
        }
        if (stats && steps_run) stats->seconds_per_step = (wall_time() - t_run) / steps_run;
        if (steps_run)  // the throughput figures of docs/benchmarks.md
            fprintf(stderr, "train: %d steps: rollout %.0f tokens/s, update %.0f tokens/s "
                    "(generated tokens over sampling+scoring / update wall time), %.2f s/step\n",
                    steps_run, sum_tokens / sum_rollout_s, sum_tokens / sum_update_s,
                    (wall_time() - t_run) / steps_run);
        generation_free(&gen);
        update_workspace_free(ws);
        free(tasks);
        free(prompt_ids);
        free(plen_p);
        free(prompts);
        free(plen);
        free(prompt_ptr);
        free(resp_ptr);
        free(rewards);
        free(adv);
        free(unbiased);
        free(gmean);
        free(gstd);
        bk_free(bk, d_rewards);
        bk_free(bk, d_adv);
        bk_free(bk, d_gmean);
        bk_free(bk, d_gstd);
        free(tok_off);
        free(kept);
        free(order);
        free(verd);
        free(logp_old);
        free(logp_ref);
        free(weights);
        free(tok_step);
        free(tok_env);
        free(resp_text);
    }
done:
    if (rl && runlog_close(rl, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        if (rc == 0) rc = 1;
    }
    if (ref) model_free(ref);
    model_free(m);
    backend_destroy(bk);
    return rc;
}
