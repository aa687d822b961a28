// train.c: `grpolab train` (train.h): the settings of a run, its state and the loop
//   for step: [eval] -> rollout_collect -> rollout_score -> rollout_advantages ->
//             update_epochs -> trainlog_write_step -> [checkpoint]
// Every formula of the objectives is in objective.h, every phase in its own unit.
#include "train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../common.h"
#include "../model/checkpoint.h"
#include "../parallel/dataparallel.h"
#include "../parallel/dist.h"
#include "evaluate.h"
#include "../io/h5util.h"
#include "../io/interrupt.h"
#include "../io/runlog.h"
#include "resume.h"
#include "rollout.h"
#include "setup.h"
#include "train_state.h"
#include "trainlog.h"

// ---------------------------------------------------------------- settings
int train_settings(const Config *c, TrainSettings *s, ObjectiveConfig *oc, char *err,
                   size_t errlen) {
    const Settings *C = config_settings(c);
    s->init = C->train.init;
    s->steps = C->train.steps;
    s->P = C->train.prompts_per_step;
    s->G = C->train.group_size;
    s->M = C->train.minibatch_size;
    s->micro = C->train.micro_batch;
    s->epochs = C->train.ppo_epochs;
    s->eval_every = C->train.eval_every;
    s->checkpoint_every = C->train.checkpoint_every;
    s->bias_diagnostic = C->train.bias_diagnostic;
    s->temperature = (float)C->train.temperature;
    s->top_p = (float)C->train.top_p;
    s->max_new = C->world.max_new_tokens;
    s->seed = (uint64_t)C->run.seed;
    const double weights[WORLD_NUM_LEVELS] = {C->train.weight_level1, C->train.weight_level2,
                                              C->train.weight_level3, C->train.weight_level4,
                                              C->train.weight_level5};
    double wsum = 0;
    for (int l = 0; l < WORLD_NUM_LEVELS; l++) {
        s->level_weights[l] = weights[l];
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
    const char *qs = C->train.question_set;
    s->question_set = world_question_set_find(qs);  // NULL for "weights"
    if (!s->question_set && strcmp(qs, "weights") != 0)
        return set_err(err, errlen, "train.question_set = '%s': not a question set of the world", qs);
    if (!s->question_set && !(wsum > 0))
        return set_err(err, errlen, "train.weight_level1..5 are all 0: at least one level needs "
                       "a positive weight");
    const char *tn = C->world.template;
    if (template_parse(tn, &s->template_kind) != 0)
        return set_err(err, errlen, "world.template = '%s': not one of r1|boxed|none", tn);
    s->reward_rule = setup_reward_rule(c);
    if (compare_from_config(c, s->max_new, &s->compare, err, errlen) != 0) return -1;
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
    s->d_lengths = bk_alloc(bk, (size_t)N * sizeof(int));
    s->greedy_prompts = xmalloc((size_t)P * cap * sizeof(int));
    generation_alloc(&s->gen_greedy, P, S->max_new);
    s->greedy_reward = xmalloc((size_t)P * sizeof(float));
    s->d_greedy = bk_alloc(bk, (size_t)P * sizeof(float));
    s->kept = xmalloc((size_t)N * sizeof(int));
    s->order = xmalloc((size_t)N * sizeof(int));
    s->tok_off = xmalloc((size_t)N * sizeof(int));
    s->tok_env = xmalloc(tok_cap);
    s->logp_old = xmalloc(tok_cap * sizeof(float));
    s->logp_ref = with_ref ? xmalloc(tok_cap * sizeof(float)) : NULL;
    s->weights = xmalloc(tok_cap * sizeof(float));
    s->tok_step = xmalloc(tok_cap * sizeof(int));
    s->ws = update_workspace_create(m, S->M, S->bias_diagnostic);
    s->cmp = S->compare;
    compare_alloc(&s->cmp, N, tok_cap, model_num_params(m), bk);
}

void train_state_free(TrainState *s, Backend *bk) {
    void *host[] = {s->tasks, s->prompt_ids, s->plen_p, s->prompts, s->plen, s->prompt_ptr,
                    s->resp_ptr, s->resp_text, s->verd, s->rewards, s->adv, s->unbiased,
                    s->gmean, s->gstd, s->kept, s->order, s->tok_off, s->tok_env, s->logp_old,
                    s->logp_ref, s->weights, s->tok_step, s->greedy_prompts, s->greedy_reward};
    for (size_t j = 0; j < sizeof host / sizeof host[0]; j++) free(host[j]);
    bk_free(bk, s->d_rewards);
    bk_free(bk, s->d_adv);
    bk_free(bk, s->d_gmean);
    bk_free(bk, s->d_gstd);
    bk_free(bk, s->d_lengths);
    bk_free(bk, s->d_greedy);
    generation_free(&s->gen_greedy);
    compare_free(&s->cmp, bk);
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
    const char *out_path;
    char ckpt_path[4096];
    char copy_path[4096]; // the log as of the checkpoint (resume.h RESUME_LOG_COPY_SUFFIX)
    char eval_path[4096]; // a stopped evaluation's responses (resume.h RESUME_EVAL_SUFFIX)
    int64_t start_step; // steps done before this call (a resumed run's checkpoint)
    ResumePoint rp;     // with resume: where the run goes on from
    char run_id[40];    // the log's run_id, stored in its checkpoints
    float *params;      // host copy of the parameters for the finite check
    int created;        // this call created the log (a new run)
    int overwrite;      // a new run may replace the log of another
    int diverged;       // stopped by check_finite
} Trainer;

// The settings, the companions' paths and, with resume, the checks of the run to go on
// with. 0, or 2 with a message.
static int trainer_settings(Trainer *t, const Config *cfg, const char *out_path, int resume,
                            char *err, size_t errlen) {
    if (train_settings(cfg, &t->S, &t->oc, err, errlen) != 0) return 2;
    if (dp_check(t->S.P, err, errlen) != 0) return 2;
    t->opt = setup_adamw(cfg);
    // the companions' names whole, or the run is refused: a cut name would be another file
    if ((size_t)snprintf(t->ckpt_path, sizeof t->ckpt_path, "%s%s", out_path, RESUME_CKPT_SUFFIX) >= sizeof t->ckpt_path ||
        (size_t)snprintf(t->copy_path, sizeof t->copy_path, "%s%s", out_path, RESUME_LOG_COPY_SUFFIX) >= sizeof t->copy_path ||
        (size_t)snprintf(t->eval_path, sizeof t->eval_path, "%s%s", out_path, RESUME_EVAL_SUFFIX) >= sizeof t->eval_path) {
        set_err(err, errlen, "run log '%.64s...' (%zu characters): too long a path for its checkpoint "
                "beside it (at most %zu characters)", out_path, strlen(out_path),
                sizeof t->eval_path - sizeof RESUME_EVAL_SUFFIX);
        return 2;
    }
    t->tk = tokenizer_default();
    if (resume) {
        if (resume_check(cfg, out_path, t->ckpt_path, &t->rp, err, errlen) != 0) return 2;
        t->start_step = t->rp.start_step;
        snprintf(t->run_id, sizeof t->run_id, "%s", t->rp.run_id);
    }
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
    if (!(t->m = policy_open(t->bk, S->init, NULL, 0, &t->mc, msg, sizeof msg))) {
        set_err(err, errlen, "train.init: %s", msg);
        return 2;
    }
    t->sc = (SamplerConfig){.temperature = S->temperature, .top_p = S->top_p,
                            .max_new_tokens = S->max_new, .eos_token = TOK_EOS,
                            .stop_token = template_stop_token(t->tk, S->template_kind),
                            .seed = S->seed, .env = setup_sampler_env(cfg),
                            .split_bytes = setup_split_bytes(cfg)};
    t->ec = (EvalConfig){.template_kind = S->template_kind, .reward_rule = S->reward_rule,
                         .world_seed = (uint64_t)config_settings(cfg)->world.seed,
                         .batch = config_settings(cfg)->eval.batch,
                         .limit = config_settings(cfg)->eval.limit, .pool_seed = S->seed,
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

// A new run's id (16 hex digits from the time, the process and the host): its log and its
// checkpoints carry it, so a checkpoint left by another run at the same path is refused.
static void new_run_id(char id[40]) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    uint64_t h = 1469598103934665603ULL, v[3] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid()};
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 8; b++) h = (h ^ ((v[i] >> (8 * b)) & 0xff)) * 1099511628211ULL;
    for (const char *p = host; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    snprintf(id, 40, "%016llx", (unsigned long long)h);
}

// Removes the files a run keeps beside its log (its checkpoint, the log's copy and a dead
// writer's temporary files of both): a new log never goes on with another run's weights. 0,
// or -1 with a message.
static int remove_companions(const Trainer *t, char *err, size_t errlen) {
    char tmp[4200], copy_tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", t->ckpt_path);
    snprintf(copy_tmp, sizeof copy_tmp, "%s.tmp", t->copy_path);
    const char *files[] = {t->ckpt_path, tmp, t->copy_path, copy_tmp, t->eval_path};
    for (int i = 0; i < 5; i++) {
        if (unlink(files[i]) == 0) {
            fprintf(stderr, "train: removed %s (of the run this log replaces)\n", files[i]);
        } else if (errno != ENOENT) {
            return set_err(err, errlen, "cannot remove '%s' (of the run this log replaces): %s",
                           files[i], strerror(errno));
        }
    }
    return 0;
}

// The run log: a new one (the files of a run it replaces removed), or with resume the
// checkpoint's state in the policy and the log cut back to its step. 0, or an exit code
// with a message.
static int trainer_open_log(Trainer *t, const Config *cfg, const char *out_path, int resume,
                            char *err, size_t errlen) {
    if (resume) {
        if (t->rp.from_checkpoint && resume_load(t->ckpt_path, t->m, err, errlen) != 0) return 2;
        if (dist_rank() != 0) return 0;  // every rank loads the checkpoint; rank 0 writes the log
        if (!t->rp.from_checkpoint)
            fprintf(stderr, "train: --resume: no checkpoint %s yet (the run stopped before its first): "
                    "the run starts again from step 0 with its logged config; the %lld logged step%s "
                    "are run again\n", t->ckpt_path, (long long)t->rp.logged_steps,
                    t->rp.logged_steps == 1 ? "" : "s");
        t->rl = resume_open_log(out_path, cfg, &t->rp, err, errlen);
        if (!t->rl) return 2;
        if (t->S.compare.n > 0 && trainlog_declare_compare(t->rl, err, errlen) != 0) return 2;
    } else {
        if (dist_rank() != 0) return 0;
        char init_fp[17];
        resume_fingerprint(t->m, init_fp);  // m holds train.init's weights here
        new_run_id(t->run_id);
        if (remove_companions(t, err, errlen) != 0) return 1;
        t->rl = trainlog_create(out_path, t->overwrite, cfg, &t->oc, &t->S, backend_name(t->bk->kind),
                                &t->mc, init_fp, t->run_id, err, errlen);
        if (!t->rl) return 1;
        t->created = 1;
        if (trainlog_declare(t->rl, t->S.compare.n > 0, err, errlen) != 0) return 1;
        // the copy a run killed before its first checkpoint goes on from, saved before the
        // log appears at out_path (runlog_start_swmr): a log there always has its copy
        if (runlog_keep_copy(t->rl, t->copy_path, err, errlen) != 0) return 1;
    }
    return runlog_start_swmr(t->rl, err, errlen) == 0 ? 0 : 1;
}

// The log's copy, then the checkpoint after `done` steps (rank 0; the log is flushed up to
// there): the copy first, so that the copy on disk always holds every step of the
// checkpoint on disk. 0, or -1 with a message.
static int save_checkpoint(Trainer *t, const Config *cfg, int done, char *err, size_t errlen) {
    if (runlog_keep_copy(t->rl, t->copy_path, err, errlen) != 0) return -1;
    return resume_save_checkpoint(t->ckpt_path, t->m, cfg, t->tk, done, t->run_id, err, errlen);
}

// Closes the log (a failure turns rc 0 into 1) and frees the models and the backend. A run
// that ended and closed its log needs no copy of it. A new run that failed before its first
// step leaves no log: it holds nothing to go on from, and the corrected run must not be
// refused as "already exists".
static int trainer_close(Trainer *t, int rc) {
    char err[1024];
    int empty = t->rl && t->created && rc != 0 && runlog_rows(t->rl, "train") <= 0;
    int had_log = t->rl != NULL;
    if (t->rl && runlog_close(t->rl, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        if (rc == 0) rc = 1;
    }
    if (had_log && (rc == 0 || empty)) unlink(t->copy_path);
    if (empty) unlink(t->eval_path);  // an evaluation at step 0 of a run that never began
    if (empty && unlink(t->out_path) == 0)
        fprintf(stderr, "train: removed %s: the run stopped before its first step\n", t->out_path);
    free(t->params);
    if (t->ref) model_free(t->ref);
    if (t->m) model_free(t->m);
    if (t->bk) backend_destroy(t->bk);
    return rc;
}

// ---------------------------------------------------------------- one step
// Stops an evaluation at the next batch once SIGINT or SIGTERM came (EvalConfig.after_batch).
static int eval_interrupted(void *ctx, const EvalRecord *records, int n_records) {
    return interrupt_pending() != 0;
}

// The responses of the evaluation at step that a stopped run kept (t->eval_path, which
// exists) into recs (cap rows): their count, or 0 where it is of another step or run, or it
// does not fit ec (said on stderr; the evaluation then runs from its start).
static int eval_kept(const Trainer *t, const EvalConfig *ec, int step, EvalRecord *recs, int cap) {
    char msg[1024];
    RunLogReader *rd = runlog_reader_open(t->eval_path, msg, sizeof msg);
    char *at = rd ? runlog_read_attr_str(rd, "step", msg, sizeof msg) : NULL;
    char *id = at ? runlog_read_attr_str(rd, "run_id", msg, sizeof msg) : NULL;
    if (rd) runlog_reader_close(rd);
    int same_run = id && strcmp(id, t->run_id) == 0, same_step = at && strtoll(at, NULL, 10) == step, n = 0;
    int ours = same_run && same_step && eval_read_partial(t->eval_path, ec, recs, cap, &n, msg, sizeof msg) == 0;
    if (!ours)
        fprintf(stderr, "train: %s not used (%s): the evaluation at step %d runs from its start\n", t->eval_path,
                !id ? msg : !same_run ? "of another run" : !same_step ? "of another step" : msg, step);
    else fprintf(stderr, "train: the evaluation at step %d goes on after its %d responses kept in %s\n", step, n,
                 t->eval_path);
    free(at);
    free(id);
    return ours ? n : 0;
}

// What a kept evaluation file stores and is checked against (eval_write_partial,
// eval_read_partial): the weights' fingerprint into fp and the config as text into *text
// (the caller frees it), set in ec. Computed only where such a file is read or written.
static void eval_identity(const Trainer *t, const Config *cfg, EvalConfig *ec, char fp[17], char **text) {
    if (*text) return;
    resume_fingerprint(t->m, fp);
    *text = config_to_ini(cfg);
    ec->config_text = *text, ec->model_fingerprint = fp;
}

// The greedy evaluation at step, logged. One stopped by a signal keeps its responses in
// t->eval_path for --resume (the run's checkpoint is then of the steps before it), and one
// that a stopped run kept goes on from them: the same responses as one run whole.
static int train_eval(Trainer *t, const Config *cfg, int step, char *err, size_t errlen) {
    EvalResult res;
    EvalConfig ec = t->ec;
    char fp[17], *config_text = NULL;
    ec.after_batch = eval_interrupted;
    ec.source_run = t->out_path, ec.source_step = step, ec.source_run_id = t->run_id;
    int cap = eval_num_responses(&ec), n = 0, rc = 0;
    EvalRecord *recs = xcalloc((size_t)cap + 1, sizeof *recs);
    if (access(t->eval_path, F_OK) == 0) {
        eval_identity(t, cfg, &ec, fp, &config_text);
        ec.resume_from = eval_kept(t, &ec, step, recs, cap);
    }
    evaluate_benchmarks(t->m, t->tk, &ec, &res, recs, &n);
    if (res.stopped) {
        char msg[1024];
        eval_identity(t, cfg, &ec, fp, &config_text);
        if (eval_write_partial(t->eval_path, t->out_path, &ec, recs, n, msg, sizeof msg) == 0)
            fprintf(stderr, "train: the evaluation at step %d was stopped by the signal after %d of %d responses, "
                    "kept in %s; --resume goes on with it\n", step, n, cap, t->eval_path);
        else
            fprintf(stderr, "train: the evaluation at step %d was stopped by the signal; its responses could not "
                    "be kept (%s): --resume runs it again\n", step, msg);
    } else {
        if (unlink(t->eval_path) != 0 && errno != ENOENT)
            fprintf(stderr, "train: warning: cannot remove %s: %s\n", t->eval_path, strerror(errno));
        rc = trainlog_write_eval(t->rl, step, &res, err, errlen) == 0 ? 0 : 1;
    }
    free(recs);
    free(config_text);
    return rc;
}

// The step's loss and grad norm (summed over its updates: one NaN makes the sum NaN) and the
// parameters after its updates are finite. 0, or -1 with a message naming the step and the
// quantity: a diverged run stops before its step is logged or checkpointed.
static int check_finite(Trainer *t, int step, const UpdateStats *us, char *err, size_t errlen) {
    const char *what = NULL, *tensor = "";
    double value = 0;
    if (!isfinite(us->loss_sum)) what = "loss", value = us->loss_sum;
    else if (!isfinite(us->gnorm_sum)) what = "grad norm", value = us->gnorm_sum;
    else {
        size_t n = model_num_params(t->m);
        if (!t->params) t->params = xmalloc(n * sizeof(float));
        bk_download(t->bk, t->params, model_params(t->m), n * sizeof(float));
        for (size_t i = 0; i < n && !what; i++)
            if (!isfinite(t->params[i])) {
                what = "parameters after the update", value = t->params[i];
                for (int k = 0; k < model_num_tensors(t->m); k++) {
                    const ParamTensor *pt = model_tensor(t->m, k);
                    if (i >= pt->offset && i < pt->offset + pt->numel) tensor = pt->name;
                }
            }
    }
    if (!what) return 0;
    t->diverged = 1;
    return set_err(err, errlen, "train step %d/%d (/train/step %d): the %s%s%s %s %g: training "
                   "diverged (lower optim.lr, or raise optim.eps or optim.beta2). Nothing of this step "
                   "is logged or checkpointed: the log keeps the steps before it, %s the last "
                   "checkpoint saved before it (--resume goes on from there and, with this config, "
                   "diverges again: change the config and start again with --overwrite)", step + 1,
                   t->S.steps, step, what, *tensor ? " (" : "", tensor, *tensor ? ") hold" : "is",
                   value, t->ckpt_path);
}

int train_step_phases(const StepModels *p, TrainState *s, int step, UpdateStats *us,
                      double *t_start, double *t_rollout, char *err, size_t errlen) {
    const TrainSettings *S = p->S;
    *t_start = wall_time();
    if (rollout_collect(s, S, p->m, p->tk, p->sc, step, err, errlen) != 0) return 2;
    rollout_score(s, S, p->tk, step);
    int greedy = p->oc->baseline == BASELINE_GREEDY || s->cmp.needs_greedy;
    if (greedy) rollout_greedy(s, S, p->m, p->tk, p->sc);
    rollout_advantages(s, S, p->bk, p->oc);
    if (s->cmp.n) {  // every compared objective's advantages of the same rollout
        compare_advantages(&s->cmp, p->bk, step, s->d_rewards, s->d_lengths,
                           greedy ? s->d_greedy : NULL, S->P, S->G);
        s->cmp.rewards = s->rewards;
    }
    *t_rollout = wall_time();
    Rollout r = rollout_view(s, p->sc->env != NULL);
    MinibatchProbe probe = compare_probe(&s->cmp);
    EpochPlan plan = {.epochs = S->epochs, .minibatch = S->M, .micro = S->micro,
                      .bias_diagnostic = S->bias_diagnostic, .seed = S->seed, .step = step,
                      .probe = s->cmp.n ? &probe : NULL};
    update_epochs(s->ws, p->m, p->ref, p->oc, p->opt, &plan, &r, s->kept, s->rs.n_kept,
                  s->order, s->weights, s->unbiased, us);
    compare_extra_passes(&s->cmp, s->ws, p->m, p->ref, p->oc, p->opt, &plan, &r, s->kept,
                         s->rs.n_kept, s->order, s->unbiased);
    return 0;
}

// One RL step: train_step_phases, the finite check, the step's rows in the log (row: its
// /train row). 0, or an exit code with a message.
static int train_step(Trainer *t, TrainState *s, int step, TrainRow *row, char *err,
                      size_t errlen) {
    const TrainSettings *S = &t->S;
    StepModels p = {.S = S, .oc = &t->oc, .opt = &t->opt, .tk = t->tk, .sc = &t->sc,
                    .bk = t->bk, .m = t->m, .ref = t->ref};
    UpdateStats us;
    double t0, t1;
    int rc = train_step_phases(&p, s, step, &us, &t0, &t1, err, errlen);
    if (rc) return rc;
    if (check_finite(t, step, &us, err, errlen) != 0) return 1;  // nothing of the step is logged
    // the per-token values of every rank's responses, for rank 0's log
    dp_gather_tokens(s->logp_old, s->tok_off, s->gen.n, s->rs.n_tok);
    dp_gather_tokens(s->weights, s->tok_off, s->gen.n, s->rs.n_tok);
    double t2 = wall_time();
    trainlog_train_row(row, step, S, &s->rs, &us, &t->oc, t->opt.lr, t1 - t0, t2 - t1);
    if (!t->rl) return 0;  // a rank other than 0
    if (compare_write(&s->cmp, t->rl, err, errlen) != 0) return 1;
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

// ---------------------------------------------------------------- stopping on a signal
// SIGINT and SIGTERM (interrupt.h) let the step being run finish and be logged, or stop the
// evaluation under way (it is run again on resume); the loop then saves a checkpoint, closes
// the log and exits 128 + the signal.
static char resume_command[2048];

void train_note_command(int argc, char **argv) {
    size_t n = snprintf(resume_command, sizeof resume_command, "grpolab");
    int has_resume = 0;
    for (int i = 0; i < argc && n < sizeof resume_command; i++) {
        if (strcmp(argv[i], "--overwrite") == 0) continue;
        has_resume |= strcmp(argv[i], "--resume") == 0;
        // quoted for a POSIX shell where it holds anything but [A-Za-z0-9_./=,:+-]
        int plain = argv[i][0] != '\0';
        for (const char *p = argv[i]; *p; p++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=,:+-", *p)) plain = 0;
        n += snprintf(resume_command + n, sizeof resume_command - n, plain ? " %s" : " '", argv[i]);
        if (!plain) {
            for (const char *p = argv[i]; *p && n < sizeof resume_command; p++)
                n += snprintf(resume_command + n, sizeof resume_command - n, *p == '\'' ? "'\\''" : "%c", *p);
            if (n < sizeof resume_command) n += snprintf(resume_command + n, sizeof resume_command - n, "'");
        }
    }
    if (!has_resume && n < sizeof resume_command)
        snprintf(resume_command + n, sizeof resume_command - n, " --resume");
    if (n >= sizeof resume_command) resume_command[0] = '\0';  // too long to print whole
}

void train_print_resume_hint(const char *who, const char *out_path) {
    if (resume_command[0]) fprintf(stderr, "%s: to go on: %s\n", who, resume_command);
    else fprintf(stderr, "%s: to go on: the same command with --resume (and --out %s)\n", who, out_path);
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
    InterruptHandlers handlers;
    interrupt_install(&handlers);
    double t_run = wall_time(), rollout_s = 0, update_s = 0, tokens = 0;
    int rc = 0, steps_run = 0, saved = 1;  // saved: the state after the last step is on disk
    int step = (int)t->start_step;
    for (; step <= S->steps && rc == 0; step++) {
        if (S->eval_every > 0 && (step % S->eval_every == 0 || step == S->steps))
            rc = agree(dist_rank() == 0 ? train_eval(t, cfg, step, err, sizeof err) : 0, err);
        interrupt_set(dist_max_int(interrupt_pending()));  // a signal to one rank stops them all
        if (rc || step == S->steps || interrupt_pending()) break;
        TrainRow row;
        rc = agree(train_step(t, &st, step, &row, err, sizeof err), err);
        if (rc) break;
        steps_run++;
        saved = 0;
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
        if ((S->checkpoint_every > 0 && done % S->checkpoint_every == 0) || done == S->steps) {
            if (dist_rank() == 0 && save_checkpoint(t, cfg, done, err, sizeof err) != 0) rc = 1;
            saved = 1;
        }
        rc = agree(rc, err);
    }
    interrupt_restore(&handlers);
    int stop_signal = interrupt_pending();
    if (rc && err[0]) fprintf(stderr, "grpolab: error: %s\n", err);
    if (rc == 0 && stop_signal && dist_rank() != 0) {
        rc = 128 + stop_signal;  // rank 0 saves and says how to go on
    } else if (rc == 0 && stop_signal) {
        // every draw is keyed by (run.seed, step): a checkpoint after any step goes on exactly
        rc = 128 + stop_signal;
        if (!saved && save_checkpoint(t, cfg, step, err, sizeof err) != 0) {
            fprintf(stderr, "grpolab: error: %s\n", err);
        } else if (steps_run > 0 || !t->created) {
            fprintf(stderr, "train: stopped by signal %d after step %d (logged and checkpointed)\n",
                    (int)stop_signal, step);
            train_print_resume_hint("train", t->out_path);
        } else {
            fprintf(stderr, "train: stopped by signal %d before the first step\n", (int)stop_signal);
        }
    } else if (rc == 1 && !t->diverged && steps_run + t->start_step > 0 && dist_rank() == 0) {
        train_print_resume_hint("train", t->out_path);
    }
    if (stats && steps_run) stats->seconds_per_step = (wall_time() - t_run) / steps_run;
    if (dist_rank() == 0) print_totals(steps_run, tokens, rollout_s, update_s, wall_time() - t_run);
    train_state_free(&st, t->bk);
    return rc;
}

int train_run(const Config *cfg_in, const char *backend_override, const char *out_path, int mode,
              TrainStats *stats) {
    char err[1024];
    if (stats) memset(stats, 0, sizeof *stats);
    const int resume = mode == TRAIN_RESUME;
    // the output claimed and checked before any work: its directory exists (a new run's is
    // made) and is writable, no other process writes this run, and a new run replaces no log
    // unless asked to (checked under the claim: two runs started at once cannot both pass)
    const char *what = resume ? "cannot resume run log" : "cannot create run log";
    int rc = 0;  // rank 0 alone claims and writes the output; the other ranks take its answer
    err[0] = '\0';
    if (dist_rank() == 0) {
        if ((!resume && trainlog_make_parent_dirs(out_path, err, sizeof err) != 0) ||
            out_claim(what, out_path, err, sizeof err) != 0) {
            rc = 2;
        } else if (check_out_path(what, out_path, mode != TRAIN_NEW, err, sizeof err) != 0 ||
                   (resume && access(out_path, F_OK) != 0 &&
                    set_err(err, sizeof err, "--resume: run log '%s' does not exist (start the run "
                            "without --resume)", out_path))) {
            out_release(out_path);
            rc = 2;
        }
    }
    if (agree(rc, err) != 0) {
        if (err[0]) fprintf(stderr, "grpolab: error: %s\n", err);
        return 2;
    }
    Config *cfg = resume_resolved_config(cfg_in, err, sizeof err);
    if (!cfg) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        if (dist_rank() == 0) out_release(out_path);
        return 2;
    }
    Trainer t;
    memset(&t, 0, sizeof t);
    t.out_path = out_path;
    t.overwrite = mode == TRAIN_OVERWRITE;
    // every rank goes on to the next phase, or none does
    rc = agree(trainer_settings(&t, cfg, out_path, resume, err, sizeof err), err);
    if (rc == 0) rc = agree(trainer_models(&t, cfg, backend_override, err, sizeof err), err);
    if (rc == 0) rc = agree(trainer_open_log(&t, cfg, out_path, resume, err, sizeof err), err);
    if (rc == 0) rc = train_loop(&t, cfg, stats);
    else if (err[0]) fprintf(stderr, "grpolab: error: %s\n", err);
    rc = trainer_close(&t, rc);
    config_free(cfg);
    if (dist_rank() == 0) out_release(out_path);
    return rc;
}
