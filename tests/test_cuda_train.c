// test_cuda_train.c: one RL update of the trainer (update.c's update_old_logp,
// update_minibatch_gradient and model_adamw_step, with kn_group_advantages before them) on the
// CUDA backend against the CPU backend, on forced identical rollouts: the same fixed prompts,
// responses and rewards on both sides (no sampling) and the same initial parameters.
// Two minibatches of one epoch, so the second one's weights have rho != 1 (the first
// AdamW step moved the policy) and its clip can bind; once more with micro-batches and every
// fourth response token the environment's (masked in kn_token_weights). Compared, relative
// errors printed:
// advantages, old and reference log-probs, the token weights of each minibatch, the step
// statistics, the gradients and the parameters after each AdamW step.
//
// Tolerances:
//   1e-5  advantages, log-probs, first-minibatch weights (rho = 1 exactly on each backend:
//         pi_old is the same forward on the same parameters), entropy, parameters
//   2e-5  gradients and grad norms (the model parity test's tolerance for gradients)
//   1e-4  second-minibatch weights, loss and KL, and their gradients: rho and KL come from
//         differences of log-probs (abs. error ~1e-5 of |logp| ~ 3 on either side)
//   exact clip counts and token counts
// AdamW runs with eps = 1e-4 so that its update is a smooth function of the gradient (at
// eps = 1e-8 an element within rounding of 0 may take either sign and move by +-lr).
// Skips with a message where CUDA is not built or no GPU is usable; GRPOLAB_PARITY_SELF=1
// runs it CPU against CPU (every error 0).
#include <math.h>
#include <string.h>

#include "common.h"
#include "sim/model/model.h"
#include "sim/rl/objective.h"
#include "sim/rl/update.h"
#include "test_util.h"

enum { P = 3, G = 4, N = P * G, M = 6, MAX_PROMPT = 10, MAX_RESP = 20 };

static Backend *cpu, *gpu;

static int setup(void **state) {
    char why[256] = "", err[256] = "";
    cpu = backend_create(BACKEND_CPU, err, sizeof err);
    if (tu_parity_wanted(why, sizeof why)) gpu = tu_parity_backend(err, sizeof err);
    else printf("no usable CUDA backend (%s): skipping the RL step parity tests\n", why);
    return cpu ? 0 : -1;
}
static int teardown(void **state) {
    if (gpu) backend_destroy(gpu);
    backend_destroy(cpu);
    return 0;
}

// The base model's shape (experiments/base/pretrain.ini), scaled down: GQA 4/2 heads and tied
// embeddings, so the trainer's output head reaches the embedding through both paths
// (test_cuda_model checks untied embeddings).
static ModelConfig step_config(void) {
    ModelConfig c = model_config_default();
    c.vocab_size = 58;
    c.d_model = 32;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.d_ff = 88;
    c.max_seq_len = 48;
    c.tied_embeddings = 1;
    return c;
}

// The forced rollout: P prompts x G responses of fixed tokens and rewards.
typedef struct {
    int prompt[N][MAX_PROMPT], resp[N][MAX_RESP], plen[N], rlen[N], tok_off[N], ntok;
    float rewards[N];
    unsigned char env[N * MAX_RESP];  // every fourth token the environment's
} Forced;

static void forced_rollout(Forced *f, int V) {
    // group 0 mixed, group 1 all correct (A = 0), group 2 one correct
    const float rewards[N] = {1, 0, 0, 1, 1, 1, 1, 1, 0, 1, 0, 0};
    f->ntok = 0;
    for (int i = 0; i < N; i++) {
        int p = i / G;
        f->plen[i] = 4 + 3 * p;
        f->rlen[i] = 1 + (int)(philox_uniform(40, (uint64_t)i) * MAX_RESP) % MAX_RESP;
        for (int t = 0; t < f->plen[i]; t++)
            f->prompt[i][t] = 2 + (int)(philox_uniform(41, (uint64_t)(p * MAX_PROMPT + t)) * (V - 2)) % (V - 2);
        for (int t = 0; t < f->rlen[i]; t++)
            f->resp[i][t] = 2 + (int)(philox_uniform(42, (uint64_t)(i * MAX_RESP + t)) * (V - 2)) % (V - 2);
        f->rewards[i] = rewards[i];
        for (int t = 0; t < f->rlen[i]; t++) f->env[f->ntok + t] = t % 4 == 3;
        f->tok_off[i] = f->ntok;
        f->ntok += f->rlen[i];
    }
}

// What one backend's step produced (host copies).
typedef struct {
    float adv[N], logp_old[N * MAX_RESP], logp_ref[N * MAX_RESP], weights[N * MAX_RESP];
    MinibatchStats st[2];
    double gnorm[2], cosine;
    float *grads[2], *params[2];  // after each minibatch's backward / AdamW step
} StepResult;

// The minibatch order of the epoch (a fixed permutation of the N responses).
static const int ORDER[N] = {5, 0, 9, 2, 11, 7, 1, 4, 10, 3, 8, 6};

static void rl_step(Backend *bk, const Model *init, const Model *init_ref, const Forced *f,
                    const ObjectiveConfig *oc, int micro, int with_env, StepResult *out) {
    ModelConfig c = step_config();
    Model *m = model_create(bk, &c), *ref = init_ref ? model_create(bk, &c) : NULL;
    model_copy_params(m, init);
    if (ref) model_copy_params(ref, init_ref);
    // advantages on the backend
    float *d_r = bk_alloc(bk, sizeof f->rewards), *d_a = bk_alloc(bk, sizeof out->adv);
    bk_upload(bk, d_r, f->rewards, sizeof f->rewards);
    kn_group_advantages(bk, d_a, NULL, NULL, d_r, NULL, NULL, P, G, oc);
    bk_download(bk, out->adv, d_a, sizeof out->adv);
    bk_free(bk, d_r);
    bk_free(bk, d_a);
    float unbiased[N];
    for (int i = 0; i < N; i++) {
        int g0 = i / G * G;
        double mean = 0;
        for (int j = 0; j < G; j++) mean += f->rewards[g0 + j] / G;
        unbiased[i] = (float)(f->rewards[i] - mean);
    }
    const int *pp[N], *rp[N];
    for (int i = 0; i < N; i++) {
        pp[i] = f->prompt[i];
        rp[i] = f->resp[i];
    }
    Rollout r = {.n = N, .prompt = pp, .prompt_len = f->plen, .resp = rp, .resp_len = f->rlen,
                 .advantage = out->adv, .tok_offset = f->tok_off, .logp_old = out->logp_old,
                 .logp_ref = ref ? out->logp_ref : NULL, .env = with_env ? f->env : NULL};
    // update_epochs' epoch: pi_old of every minibatch first, then one update per minibatch
    UpdateWorkspace *ws = update_workspace_create(m, M, 1);
    for (int k0 = 0; k0 < N; k0 += M) update_old_logp(ws, m, ref, &r, ORDER + k0, M, micro);
    AdamWConfig opt = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-4f,
                       .weight_decay = 0.0f, .grad_clip = 1.0f};
    size_t np = model_num_params(m);
    for (int mb = 0; mb < 2; mb++) {
        model_zero_grad(m);
        double cs = update_minibatch_gradient(ws, m, oc, &r, ORDER + mb * M, M, micro, out->weights,
                                              mb == 0 ? unbiased : NULL, &out->st[mb]);
        if (mb == 0) out->cosine = cs;
        out->grads[mb] = xmalloc(np * sizeof(float));
        bk_download(bk, out->grads[mb], model_grads(m), np * sizeof(float));
        out->gnorm[mb] = model_adamw_step(m, &opt);
        out->params[mb] = xmalloc(np * sizeof(float));
        bk_download(bk, out->params[mb], model_params(m), np * sizeof(float));
    }
    update_workspace_free(ws);
    model_free(m);
    if (ref) model_free(ref);
}

static void result_free(StepResult *s) {
    for (int mb = 0; mb < 2; mb++) {
        free(s->grads[mb]);
        free(s->params[mb]);
    }
}

// Relative error of the tokens of minibatch mb (its responses' rows of the per-token layout).
static double minibatch_rel_err(const Forced *f, const float *a, const float *b, int mb) {
    float x[N * MAX_RESP], y[N * MAX_RESP];
    int n = 0;
    for (int k = mb * M; k < (mb + 1) * M; k++) {
        int i = ORDER[k];
        for (int t = 0; t < f->rlen[i]; t++) {
            x[n] = a[f->tok_off[i] + t];
            y[n++] = b[f->tok_off[i] + t];
        }
    }
    return tu_rel_err(x, y, (size_t)n);
}

static void check_scalar(const char *what, double got, double ref, double tol) {
    tu_check_rel(what, tu_rel_err_d(&got, &ref, 1), tol);
}

static void rl_step_case(const char *preset, float beta, int micro, int with_env) {
    ObjectiveConfig oc;
    assert_int_equal(objective_preset(preset, MAX_RESP, &oc), 0);
    oc.beta = beta;
    printf(" one RL step, %s, beta %g, %s%s\n", preset, beta,
           micro ? "micro-batches of 4 (train.micro_batch)" : "one pass per minibatch",
           with_env ? ", environment tokens" : "");
    ModelConfig c = step_config();
    Model *init = model_create(cpu, &c), *init_ref = beta > 0 ? model_create(cpu, &c) : NULL;
    model_init_params(init, 61);
    if (init_ref) model_init_params(init_ref, 62);  // a reference policy away from pi_theta
    Forced f;
    forced_rollout(&f, c.vocab_size);
    StepResult rc, rg;
    rl_step(cpu, init, init_ref, &f, &oc, micro, with_env, &rc);
    rl_step(gpu, init, init_ref, &f, &oc, micro, with_env, &rg);
    size_t np = model_num_params(init);
    tu_check_rel("advantages", tu_rel_err(rg.adv, rc.adv, N), 1e-5);
    tu_check_rel("old log-probs", tu_rel_err(rg.logp_old, rc.logp_old, (size_t)f.ntok), 1e-5);
    if (beta > 0) tu_check_rel("ref log-probs", tu_rel_err(rg.logp_ref, rc.logp_ref, (size_t)f.ntok), 1e-5);
    check_scalar("bias cosine (first minibatch)", rg.cosine, rc.cosine, 1e-4);
    for (int mb = 0; mb < 2; mb++) {
        const MinibatchStats *sc = &rc.st[mb], *sg = &rg.st[mb];
        double tol_w = mb == 0 ? 1e-5 : 1e-4;
        char what[96];
        printf("  minibatch %d: %lld tokens, clipped low %lld/%lld high %lld/%lld (cpu/cuda)\n", mb,
               sc->tokens, sc->clipped_low, sg->clipped_low, sc->clipped_high, sg->clipped_high);
        assert_true(sc->tokens == sg->tokens);
        assert_true(sc->clipped_low == sg->clipped_low && sc->clipped_high == sg->clipped_high);
        snprintf(what, sizeof what, "minibatch %d token weights", mb);
        tu_check_rel(what, minibatch_rel_err(&f, rg.weights, rc.weights, mb), tol_w);
        snprintf(what, sizeof what, "minibatch %d loss", mb);
        check_scalar(what, sg->loss, sc->loss, 1e-4);
        if (beta > 0) {
            snprintf(what, sizeof what, "minibatch %d KL sum", mb);
            check_scalar(what, sg->kl_sum, sc->kl_sum, 1e-4);
        }
        snprintf(what, sizeof what, "minibatch %d entropy sum", mb);
        check_scalar(what, sg->entropy_sum, sc->entropy_sum, 1e-5);
        snprintf(what, sizeof what, "minibatch %d gradients", mb);
        tu_check_rel(what, tu_rel_err(rg.grads[mb], rc.grads[mb], np), mb == 0 ? 2e-5 : 1e-4);
        snprintf(what, sizeof what, "minibatch %d grad norm", mb);
        check_scalar(what, rg.gnorm[mb], rc.gnorm[mb], mb == 0 ? 2e-5 : 1e-4);
        snprintf(what, sizeof what, "parameters after AdamW step %d", mb + 1);
        tu_check_rel(what, tu_rel_err(rg.params[mb], rc.params[mb], np), 1e-5);
    }
    // the step did something: the policy moved and the first minibatch has signal
    assert_true(rc.st[0].loss != 0.0 && tu_rel_err(rc.params[1], rc.params[0], np) > 0);
    result_free(&rc);
    result_free(&rg);
    model_free(init);
    if (init_ref) model_free(init_ref);
}

static void test_rl_step_grpo(void **state) {
    if (!gpu) skip();
    rl_step_case("grpo", 0.0f, 0, 0);
}

static void test_rl_step_dapo_kl(void **state) {
    if (!gpu) skip();
    rl_step_case("dapo", 0.05f, 0, 0);
}

static void test_rl_step_dr_grpo(void **state) {
    if (!gpu) skip();
    rl_step_case("dr_grpo", 0.0f, 0, 0);
}

// Passes of 4 and 2 responses per minibatch of 6, the bias diagnostic's forward run again,
// environment tokens masked.
static void test_rl_step_dapo_kl_micro(void **state) {
    if (!gpu) skip();
    rl_step_case("dapo", 0.05f, 4, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rl_step_grpo),
        cmocka_unit_test(test_rl_step_dapo_kl),
        cmocka_unit_test(test_rl_step_dr_grpo),
        cmocka_unit_test(test_rl_step_dapo_kl_micro),
    };
    return cmocka_run_group_tests_name("cuda_train", tests, setup, teardown);
}
