// train.c: `grpolab train` (train.h): the settings of a run, its state and the loop
//   for step: [eval] -> rollout_collect -> rollout_score -> rollout_advantages ->
//             update_epochs -> trainlog_write_step -> [checkpoint]
// Every formula of the objectives is in objective.h, every phase in its own unit.
#include "train.h"

#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "checkpoint.h"
#include "dataparallel.h"
#include "dist.h"
#include "evaluate.h"
#include "resume.h"
#include "rollout.h"
#include "setup.h"
#include "train_state.h"
#include "trainlog.h"

// ---------------------------------------------------------------- settings
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

// ---------------------------------------------------------------- the state
void train_state_alloc(TrainState *s, const TrainSettings *S, Model *m, int with_ref) {
    const int P = S->P, N = P * S->G, cap = model_config(m)->max_seq_len;
    const size_t tok_cap = (size_t)N * S->max_new;
    Backend *bk = model_backend(m);
    memset(s, 0, sizeof *s);
    s->tasks = xmalloc((size_t)P * sizeof(Task));
    s->prompt_ids = xmalloc((size_t)P * cap * sizeof(int));
    s->plen_p = xmalloc((size_t)P * sizeof(int));
    s->prompts = xmalloc((size_t)N * cap * sizeof(int));
    s->plen = xmalloc((size_t)N * sizeof(int));
    s->prompt_ptr = xmalloc((size_t)N * sizeof(int *));
    s->resp_ptr = xmalloc((size_t)N * sizeof(int *));
    generation_alloc(&s->gen, N, S->max_new);
    s->resp_text = xmalloc((size_t)S->max_new * 16 + 16);
    s->verd = xmalloc((size_t)N * sizeof(Verdict));
    s->rewards = xmalloc((size_t)N * sizeof(float));
    s->adv = xmalloc((size_t)N * sizeof(float));
    s->unbiased = xmalloc((size_t)N * sizeof(float));
    s->gmean = xmalloc((size_t)P * sizeof(float));
    s->gstd = xmalloc((size_t)P * sizeof(float));
    s->d_rewards = bk_alloc(bk, (size_t)N * sizeof(float));
    s->d_adv = bk_alloc(bk, (size_t)N * sizeof(float));
    s->d_gmean = bk_alloc(bk, (size_t)P * sizeof(float));
    s->d_gstd = bk_alloc(bk, (size_t)P * sizeof(float));
    s->kept = xmalloc((size_t)N * sizeof(int));
    s->order = xmalloc((size_t)N * sizeof(int));
    s->tok_off = xmalloc((size_t)N * sizeof(int));
    s->tok_env = xmalloc(tok_cap);
    s->logp_old = xmalloc(tok_cap * sizeof(float));
    s->logp_ref = with_ref ? xmalloc(tok_cap * sizeof(float)) : NULL;
    s->weights = xmalloc(tok_cap * sizeof(float));
    s->tok_step = xmalloc(tok_cap * sizeof(int));
    s->ws = update_workspace_create(m, S->M, S->bias_diagnostic);
}

void train_state_free(TrainState *s, Backend *bk) {
    void *host[] = {s->tasks, s->prompt_ids, s->plen_p, s->prompts, s->plen, s->prompt_ptr,
                    s->resp_ptr, s->resp_text, s->verd, s->rewards, s->adv, s->unbiased,
                    s->gmean, s->gstd, s->kept, s->order, s->tok_off, s->tok_env, s->logp_old,
                    s->logp_ref, s->weights, s->tok_step};
    for (size_t j = 0; j < sizeof host / sizeof host[0]; j++) free(host[j]);
    bk_free(bk, s->d_rewards);
    bk_free(bk, s->d_adv);
    bk_free(bk, s->d_gmean);
    bk_free(bk, s->d_gstd);
    generation_free(&s->gen);
    update_workspace_free(s->ws);
    memset(s, 0, sizeof *s);
}

// ---------------------------------------------------------------- the run's objects
typedef struct {
    TrainSettings S;
    ObjectiveConfig oc;
    AdamWConfig opt;
    ModelConfig mc;
    const Tokenizer *tk;
    Backend *bk;
    Model *m, *ref;     // the policy; the frozen reference model (beta > 0, else NULL)
    SamplerConfig sc;   // the rollouts' sampler
    EvalConfig ec;      // the greedy evaluation
    RunLog *rl;
    char ckpt_path[4096];
    int64_t start_step; // steps done before this call (a resumed run's checkpoint)
} Trainer;

// The settings, the base model's shape and, with resume, the checks of the run to go on
// with. 0, or 2 with a message.
static int trainer_settings(Trainer *t, const Config *cfg, const char *out_path, int resume,
                            char *err, size_t errlen) {
    char msg[1024];
    if (train_settings(cfg, &t->S, &t->oc, err, errlen) != 0) return 2;
    if (dp_check(t->S.P, err, errlen) != 0) return 2;
    t->opt = setup_adamw(cfg);
    snprintf(t->ckpt_path, sizeof t->ckpt_path, "%s.ckpt.h5", out_path);
    if (checkpoint_read_meta(t->S.init, &t->mc, NULL, NULL, NULL, NULL, NULL, msg, sizeof msg) != 0) {
        set_err(err, errlen, "train.init: %s", msg);
        return 2;
    }
    t->tk = tokenizer_default();
    if (t->mc.vocab_size != tok_vocab_size(t->tk)) {
        set_err(err, errlen, "train.init = '%s' has model.vocab_size = %d, not the tokenizer's "
                "%d tokens: not a model of this world", t->S.init, t->mc.vocab_size,
                tok_vocab_size(t->tk));
        return 2;
    }
    if (resume && resume_check(cfg, out_path, t->ckpt_path, &t->start_step, err, errlen) != 0) return 2;
    return 0;
}

// The backend, the policy with train.init's weights, the sampler and the evaluation (every
// eval prompt must fit the context with the budget, checked before the log is created), and
// the reference model. 0, or 2 with a message.
static int trainer_models(Trainer *t, const Config *cfg, const char *backend_override,
                          char *err, size_t errlen) {
    TrainSettings *S = &t->S;
    char msg[1024];
    t->bk = setup_backend(cfg, backend_override, 1, err, errlen);
    if (!t->bk) return 2;
    // train.micro_batch resolved once: 0 by backend, then at most M (M: one pass)
    if (S->micro == 0 && t->bk->kind == BACKEND_CPU) S->micro = UPDATE_CPU_MICRO_BATCH;
    if (S->micro == 0 || S->micro > S->M) S->micro = S->M;
    t->m = model_create(t->bk, &t->mc);
    if (checkpoint_load(S->init, t->m, 0, msg, sizeof msg) != 0) {
        set_err(err, errlen, "train.init: %s", msg);
        return 2;
    }
    t->sc = (SamplerConfig){.temperature = S->temperature, .top_p = S->top_p,
                            .max_new_tokens = S->max_new, .eos_token = TOK_EOS,
                            .stop_token = template_stop_token(t->tk, S->template_kind),
                            .seed = S->seed, .env = setup_sampler_env(cfg)};
    t->ec = (EvalConfig){.template_kind = S->template_kind, .reward_rule = S->reward_rule,
                         .world_seed = (uint64_t)config_int(cfg, "world.seed"),
                         .batch = (int)config_int(cfg, "eval.batch"),
                         .limit = (int)config_int(cfg, "eval.limit"), .pool_seed = S->seed,
                         .sampler = t->sc};
    t->ec.sampler.temperature = 0.0f;  // greedy
    t->ec.sampler.top_p = 1.0f;
    if (S->eval_every > 0 && eval_check_prompts(t->m, t->tk, &t->ec, msg, sizeof msg) != 0) {
        set_err(err, errlen, "%s (lower world.max_new_tokens)", msg);
        return 2;
    }
    if (t->oc.beta > 0) {  // the frozen reference model is the initial policy
        t->ref = model_create(t->bk, &t->mc);
        model_copy_params(t->ref, t->m);
    }
    return 0;
}

// The run log: a new one, or with resume the checkpoint's state in the policy and the log cut
// back to its step. Every rank loads the checkpoint; only rank 0 writes the log. 0, or an
// exit code with a message.
static int trainer_open_log(Trainer *t, const Config *cfg, const char *out_path, int resume,
                            char *err, size_t errlen) {
    if (resume) {
        if (resume_load(t->ckpt_path, t->m, err, errlen) != 0) return 2;
        if (dist_rank() != 0) return 0;
        t->rl = resume_open_log(out_path, cfg, t->start_step, err, errlen);
    } else {
        if (dist_rank() != 0) return 0;
        char init_fp[17];
        resume_fingerprint(t->m, init_fp);  // m holds train.init's weights here
        t->rl = trainlog_create(out_path, cfg, &t->oc, &t->S, backend_name(t->bk->kind), &t->mc,
                                init_fp, err, errlen);
    }
    if (!t->rl || trainlog_declare(t->rl, err, errlen) != 0 ||
        runlog_start_swmr(t->rl, err, errlen) != 0)
        return resume ? 2 : 1;
    if (resume && resume_check_rows(t->rl, out_path, t->ckpt_path, t->start_step, err, errlen) != 0)
        return 2;
    return 0;
}

// Closes the log (a failure turns rc 0 into 1) and frees the models and the backend.
static int trainer_close(Trainer *t, int rc) {
    char err[1024];
    if (t->rl && runlog_close(t->rl, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        if (rc == 0) rc = 1;
    }
    if (t->ref) model_free(t->ref);
    if (t->m) model_free(t->m);
    if (t->bk) backend_destroy(t->bk);
    return rc;
}

// ---------------------------------------------------------------- one step
static int train_eval(Trainer *t, int step, char *err, size_t errlen) {
    EvalResult res;
    evaluate_benchmarks(t->m, t->tk, &t->ec, &res, NULL, NULL);
    return trainlog_write_eval(t->rl, step, &res, err, errlen) == 0 ? 0 : 1;
}

// One RL step: the rollout and its scores, the update, the step's rows in the log (row: its
// /train row). 0, or an exit code with a message.
static int train_step(Trainer *t, TrainState *s, int step, TrainRow *row, char *err,
                      size_t errlen) {
    const TrainSettings *S = &t->S;
    double t0 = wall_time();
    if (rollout_collect(s, S, t->m, t->tk, &t->sc, step, err, errlen) != 0) return 2;
    rollout_score(s, S, t->tk, step);
    rollout_advantages(s, S, t->bk, &t->oc);
    double t1 = wall_time();
    Rollout r = rollout_view(s, t->sc.env != NULL);
    EpochPlan plan = {.epochs = S->epochs, .minibatch = S->M, .micro = S->micro,
                      .bias_diagnostic = S->bias_diagnostic, .seed = S->seed, .step = step};
    UpdateStats us;
    update_epochs(s->ws, t->m, t->ref, &t->oc, &t->opt, &plan, &r, s->kept, s->rs.n_kept,
                  s->order, s->weights, s->unbiased, &us);
    // the per-token values of every rank's responses, for rank 0's log
    dp_gather_tokens(s->logp_old, s->tok_off, r.n, s->rs.n_tok);
    dp_gather_tokens(s->weights, s->tok_off, r.n, s->rs.n_tok);
    double t2 = wall_time();
    trainlog_train_row(row, step, S, &s->rs, &us, &t->oc, t->opt.lr, t1 - t0, t2 - t1);
    if (!t->rl) return 0;  // a rank other than 0
    return trainlog_write_step(t->rl, row, S, s, err, errlen) == 0 ? 0 : 1;
}

// ---------------------------------------------------------------- progress
static void print_start(const Trainer *t) {
    const TrainSettings *S = &t->S;
    const ObjectiveConfig *oc = &t->oc;
    char micro_text[64] = "one pass";
    if (S->micro < S->M) snprintf(micro_text, sizeof micro_text, "micro-batches of %d", S->micro);
    fprintf(stderr, "train: %zu parameters from %s, objective %s (baseline %s, scale %s, "
            "aggregation %s, eps %.2f/%.2f, beta %g), steps %lld..%d, P %d x G %d, minibatch %d "
            "(%s), %d epoch(s), backend %s\n", model_num_params(t->m), S->init, oc->preset,
            baseline_name(oc->baseline), scale_name(oc->scale), aggregation_name(oc->aggregation),
            oc->eps_low, oc->eps_high, oc->beta, (long long)t->start_step, S->steps, S->P, S->G,
            S->M, micro_text, S->epochs, backend_name(t->bk->kind));
    if (dist_size() > 1)
        fprintf(stderr, "train: data parallel over %d ranks (%s), %d prompts x %d responses "
                "each per step; rank 0 writes the log and the checkpoints\n", dist_size(),
                dist_transport(), S->P / dist_size(), S->G);
}

static void print_step(const TrainSettings *S, const TrainRow *row, double elapsed, int steps_run) {
    double step_s = row->rollout_seconds + row->update_seconds;
    double eta = elapsed / steps_run * (S->steps - row->step - 1);
    fprintf(stderr, "train step %4d/%d  reward %.3f  len %.1f (correct %.1f, incorrect %.1f)  "
            "clip %.3f/%.3f  gnorm %.3f  bias_cos %.3f  %6.0f tok/s  %.1f s/step  ETA %.0fs\n",
            row->step + 1, S->steps, row->reward_mean, row->length_mean, row->length_correct,
            row->length_incorrect, row->clip_frac_low, row->clip_frac_high, row->grad_norm,
            row->bias_cosine, row->tokens / step_s, step_s, eta);
}

// The throughput figures of docs/benchmarks.md.
static void print_totals(int steps_run, double tokens, double rollout_s, double update_s,
                         double run_s) {
    if (steps_run == 0) return;
    fprintf(stderr, "train: %d steps: rollout %.0f tokens/s, update %.0f tokens/s "
            "(generated tokens over sampling+scoring / update wall time), %.2f s/step\n",
            steps_run, tokens / rollout_s, tokens / update_s, run_s / steps_run);
}

// ---------------------------------------------------------------- the loop
// The exit code every rank agrees on after a phase that may fail on some (dist_agree); err
// is emptied where this rank is not the one to print the message.
static int agree(int rc, char *err) {
    int report;
    rc = dist_agree(rc, &report);
    if (!report) err[0] = '\0';
    return rc;
}

static int train_loop(Trainer *t, const Config *cfg, TrainStats *stats) {
    const TrainSettings *S = &t->S;
    char err[1024] = "";
    TrainState st;
    train_state_alloc(&st, S, t->m, t->ref != NULL);
    if (dist_rank() == 0) print_start(t);
    double t_run = wall_time(), rollout_s = 0, update_s = 0, tokens = 0;
    int rc = 0, steps_run = 0;
    for (int step = (int)t->start_step; step <= S->steps && rc == 0; step++) {
        if (S->eval_every > 0 && (step % S->eval_every == 0 || step == S->steps))
            rc = agree(dist_rank() == 0 ? train_eval(t, step, err, sizeof err) : 0, err);
        if (rc || step == S->steps) break;
        TrainRow row;
        rc = agree(train_step(t, &st, step, &row, err, sizeof err), err);
        if (rc) break;
        steps_run++;
        rollout_s += row.rollout_seconds;
        update_s += row.update_seconds;
        tokens += (double)row.tokens;
        if (stats) {
            if (steps_run == 1) stats->first_reward_mean = row.reward_mean;
            stats->last_reward_mean = row.reward_mean;
            stats->tokens += row.tokens;
            stats->steps_done = step + 1;
        }
        if (dist_rank() == 0) print_step(S, &row, wall_time() - t_run, steps_run);
        int done = step + 1;  // the log is flushed up to this step before the checkpoint
        if (dist_rank() == 0 &&
            ((S->checkpoint_every > 0 && done % S->checkpoint_every == 0) || done == S->steps))
            if (resume_save_checkpoint(t->ckpt_path, t->m, cfg, t->tk, done, err, sizeof err) != 0)
                rc = 1;
        rc = agree(rc, err);
    }
    if (rc && err[0]) fprintf(stderr, "grpolab: error: %s\n", err);
    if (stats && steps_run) stats->seconds_per_step = (wall_time() - t_run) / steps_run;
    if (dist_rank() == 0) print_totals(steps_run, tokens, rollout_s, update_s, wall_time() - t_run);
    train_state_free(&st, t->bk);
    return rc;
}

int train_run(const Config *cfg, const char *backend_override, const char *out_path, int resume,
              TrainStats *stats) {
    char err[1024];
    if (stats) memset(stats, 0, sizeof *stats);
    Trainer t;
    memset(&t, 0, sizeof t);
    // every rank goes on to the next phase, or none does
    int rc = agree(trainer_settings(&t, cfg, out_path, resume, err, sizeof err), err);
    if (rc == 0) rc = agree(trainer_models(&t, cfg, backend_override, err, sizeof err), err);
    if (rc == 0) rc = agree(trainer_open_log(&t, cfg, out_path, resume, err, sizeof err), err);
    if (rc == 0) rc = train_loop(&t, cfg, stats);
    else if (err[0]) fprintf(stderr, "grpolab: error: %s\n", err);
    return trainer_close(&t, rc);
}
