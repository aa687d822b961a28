// cmd_bench_rl.c: `grpolab bench-rl`, the RL step of a train config timed phase by phase
// (docs/benchmarks.md "The RL step side by side"). A step is the trainer's: P tasks x G
// responses sampled with the KV cache, verified and scored (rollout), then the old log-probs
// and one AdamW step per minibatch of M responses in micro-batches (update), through the
// trainer's own step (train_step_phases: rollout_collect, rollout_score, rollout_advantages,
// update_epochs). Left out: the run log, the evals, checkpoints, the finite check, the bias
// diagnostic's extra backward and the compared objectives (diagnostics.compare).
// FLOPs are counted per processed position and compared with cblas_sgemm measured in the same
// run on the model's own matrix shapes (sgemm_rates, SgemmRef).
#include "bench.h"
#include "commands.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common.h"
#include "../../kernels/philox.h"
#include "../model/checkpoint.h"
#include "../io/cli.h"
#include "../rl/rollout.h"
#include "../model/sampler.h"
#include "../rl/setup.h"
#include "../world/template.h"
#include "../world/tokenizer.h"
#include "../rl/train.h"
#include "../rl/train_state.h"
#include "../world/world.h"

// Parameters that take part in a matrix product per processed position: every matrix but
// the input embedding (a lookup), which with tied embeddings is the output head and counts
// once. The "N" of 2N / 6N FLOPs per token.
static double matmul_params(const Model *m) {
    const ModelConfig *c = model_config(m);
    double n = 0;
    for (int i = 0; i < model_num_tensors(m); i++) {
        const ParamTensor *t = model_tensor(m, i);
        if (t->ndim == 2) n += (double)t->numel;
    }
    return c->tied_embeddings ? n : n - (double)c->vocab_size * c->d_model;
}

// Attention FLOPs of one position attending `keys` positions, forward: q.k and the weighted
// sum of v over n_heads x head_dim = d_model, 2 FLOPs per multiply-add, per layer.
static double attn_flops(const ModelConfig *c, double keys) {
    return 4.0 * c->n_layers * c->d_model * keys;
}

// Forward FLOPs of positions 0..n-1 of one sequence (position p attends p + 1 keys).
static double seq_forward_flops(const ModelConfig *c, double N, int n) {
    return n * 2.0 * N + attn_flops(c, (double)n * (n + 1) / 2.0);
}

// Best GFLOP/s of cblas_sgemm (kn_matmul_forward) over the model's forward matrix products
// with `rows` rows: every weight shape once per layer, FLOP-weighted (total FLOPs over the
// summed best times). apart = 1: one product at a time, on all threads; apart > 1 (CPU): that
// many threads at once, each on a product of its own with `rows` rows on one thread (the way
// the sampler and the update share out their batches on the CPU), all their FLOPs over the
// time until the last is done.
double bench_sgemm_model_shapes(Backend *bk, const ModelConfig *c, int rows, int reps, int apart) {
    if (apart < 1 || bk->kind != BACKEND_CPU) apart = 1;
    int hd = c->d_model / c->n_heads, C = c->d_model;
    int shapes[][3] = {  // {out, in, count}
        {c->n_heads * hd, C, c->n_layers},      {c->n_kv_heads * hd, C, 2 * c->n_layers},
        {C, c->n_heads * hd, c->n_layers},      {c->d_ff, C, 2 * c->n_layers},
        {C, c->d_ff, c->n_layers},              {c->vocab_size, C, 1},
    };
    int big = c->d_ff > C ? c->d_ff : C;
    if (c->vocab_size > big) big = c->vocab_size;
    size_t na = (size_t)rows * big, nw = (size_t)big * big;
    float *a = bk_alloc(bk, apart * na * sizeof(float)), *w = bk_alloc(bk, nw * sizeof(float));
    float *o = bk_alloc(bk, apart * na * sizeof(float)), *h = xmalloc((na > nw ? na : nw) * sizeof(float));
    for (size_t i = 0; i < na; i++) h[i] = philox_uniform(7, i) - 0.5f;
    for (int t = 0; t < apart; t++) bk_upload(bk, a + t * na, h, na * sizeof(float));
    for (size_t i = 0; i < nw; i++) h[i] = philox_uniform(8, i) - 0.5f;
    bk_upload(bk, w, h, nw * sizeof(float));
    double flops = 0, secs = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int OC = shapes[s][0], IC = shapes[s][1];
        double best = INFINITY;
        for (int r = 0; r <= reps; r++) {  // r = 0 warms up
            bk_sync(bk);
            double t0 = wall_time();
            if (apart == 1) {
                kn_matmul_forward(bk, o, a, w, rows, IC, OC);
            } else {
#pragma omp parallel num_threads(apart)
                {
                    size_t t = (size_t)omp_get_thread_num();
                    kn_matmul_forward(bk, o + t * na, a + t * na, w, rows, IC, OC);
                }
            }
            bk_sync(bk);
            double dt = wall_time() - t0;
            if (r > 0 && dt < best) best = dt;
        }
        flops += 2.0 * apart * rows * IC * (double)OC * shapes[s][2];
        secs += best * shapes[s][2];
    }
    bk_free(bk, a);
    bk_free(bk, w);
    bk_free(bk, o);
    free(h);
    return flops / secs * 1e-9;
}

// The two sgemm rates of `rows` rows of a phase that runs on nt threads: one product on all
// threads, and (on the CPU, else 0) nt products at once, one thread each (rows_apart: the
// rows each thread takes then). The machine's limit for the phase is the better of them.
static void sgemm_rates(Backend *bk, const ModelConfig *c, int rows, int rows_apart, int nt,
                        double *one, double *apart) {
    *one = bench_sgemm_model_shapes(bk, c, rows, 5, 1);
    *apart = nt > 1 && bk->kind == BACKEND_CPU ? bench_sgemm_model_shapes(bk, c, rows_apart, 5, nt) : 0;
}

// The sgemm references of both phases, each the best measured so far: they are measured after
// every timed step (the machine's limit is the best it reaches; one measurement taken while
// something else ran would set it too low). The rollout's batch is N rows (a share of N / nt
// per thread on the CPU); the update's passes have `ur` rows (one pass per thread at once).
typedef struct {
    double ro_one, ro_apart, up_one, up_apart;
} SgemmRef;

static void sgemm_ref_update(SgemmRef *r, Backend *bk, const ModelConfig *c, int N, int ur, int nt) {
    double one, apart;
    sgemm_rates(bk, c, N, (N + nt - 1) / nt, nt, &one, &apart);
    if (one > r->ro_one) r->ro_one = one;
    if (apart > r->ro_apart) r->ro_apart = apart;
    sgemm_rates(bk, c, ur, ur, nt, &one, &apart);
    if (one > r->up_one) r->up_one = one;
    if (apart > r->up_apart) r->up_apart = apart;
}

static const CliOption bench_rl_opts[] = {
    {"config", "FILE", "train config of the step (e.g. experiments/fig5/grpo.ini)"},
    {"init", "FILE", "model checkpoint (default: train.init if the file exists, else a fresh model of [model])"},
    {"forced", NULL, "every response runs to the budget (no stop token, no environment tokens)"},
    {"steps", "N", "timed steps after the warm-up (default 3)"},
    {"warmup", "N", "untimed steps first (default 1)"},
    {"lengths-out", "FILE", "write 'step prompt_len response_len' per response of the timed steps"},
    {"backend", "NAME", "auto|cpu|cuda (default: run.backend)"},
    {"set", "SECTION.KEY=VALUE", "override one key (repeatable)"},
};
static const CliSpec bench_rl_spec = {
    "bench-rl",
    "Times the RL step of a train config (rollout = sampling + scoring, update = old log-probs\n"
    "+ minibatch updates) and prints tokens/s per phase, s/step, s per 1k generated tokens and\n"
    "each phase's FLOP rate against cblas_sgemm on the model's own shapes (docs/benchmarks.md).\n"
    "The last line, RESULT key=value ..., is what scripts/bench-rl.sh reads.",
    "--config FILE [--init FILE] [--forced] [--steps N] [--warmup N] [--lengths-out FILE] "
    "[--backend NAME] [--set SECTION.KEY=VALUE]...",
    bench_rl_opts, 8, 0, NULL};

static int opt_int(const CliArgs *a, const char *name, int def, int lo, int *out) {
    const char *s = cli_get(&bench_rl_spec, a, name);
    *out = def;
    if (!s) return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < lo || v > 100000) {
        fprintf(stderr, "grpolab: error: --%s '%s': expected an integer in [%d, 100000]\n", name, s, lo);
        return -1;
    }
    *out = (int)v;
    return 0;
}

// One step's figures.
typedef struct {
    double rollout_s, update_s, gen_tokens, seq_tokens, rollout_flops, update_flops;
} StepTimes;

typedef struct {
    Model *m, *ref;  // the policy; the frozen reference model (objective.beta > 0, else NULL)
    const Tokenizer *tk;
    SamplerConfig sc;
    ObjectiveConfig oc;
    AdamWConfig opt;
    TrainSettings S;
    int forced;
} StepSetup;

// One RL step (step index step) through the trainer's own phases (train_step_phases), timed;
// writes its lengths to lf if not NULL.
static StepTimes rl_step(StepSetup *B, TrainState *s, int step, FILE *lf) {
    const TrainSettings *S = &B->S;
    Backend *bk = model_backend(B->m);
    const ModelConfig *mc = model_config(B->m);
    const int N = S->P * S->G;
    char err[512];
    StepTimes st = {0};
    StepModels p = {.S = S, .oc = &B->oc, .opt = &B->opt, .tk = B->tk, .sc = &B->sc, .bk = bk,
                    .m = B->m, .ref = B->ref};
    UpdateStats us;
    double t0, t1;
    if (train_step_phases(&p, s, step, &us, &t0, &t1, err, sizeof err) != 0) die("bench-rl: %s", err);
    bk_sync(bk);
    double t2 = wall_time();
    double Np = matmul_params(B->m);
    // the first minibatch (order[0..M) of the one epoch) takes its old log-probs from its own
    // forward passes (update_epochs)
    unsigned char *first = xcalloc((size_t)N, 1);
    for (int k = 0; k < S->M && k < s->rs.n_kept; k++) first[s->order[k]] = 1;
    for (int i = 0; i < N; i++) {
        int n = s->plen[i] + s->gen.length[i] - 1;  // the positions a forward pass runs over
        double f = seq_forward_flops(mc, Np, n), prompt = seq_forward_flops(mc, Np, s->plen[i]);
        // the rollout: its group's prompt once (the G responses share it), then one decode per
        // generated token but the last
        st.rollout_flops += f - prompt + (i % S->G == 0 ? prompt : 0);
        // old log-probs (1x) + forward and backward (3x), and the reference model's forward
        // (objective.beta > 0)
        st.update_flops += ((first[i] ? 3.0 : 4.0) + (B->ref ? 1.0 : 0.0)) * f;
        st.seq_tokens += n;
        if (lf) fprintf(lf, "%d %d %d\n", step, s->plen[i], s->gen.length[i]);
    }
    free(first);
    st.rollout_s = t1 - t0;
    st.update_s = t2 - t1;
    st.gen_tokens = s->rs.n_tok;
    return st;
}

int cmd_bench_rl(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&bench_rl_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    int steps, warmup;
    if (opt_int(&a, "steps", 3, 1, &steps) != 0 || opt_int(&a, "warmup", 1, 0, &warmup) != 0) return 2;
    const char *cfg_path = cli_get(&bench_rl_spec, &a, "config");
    if (!cfg_path) {
        fprintf(stderr, "grpolab: error: bench-rl needs --config FILE (e.g. experiments/fig5/grpo.ini)\n");
        return 2;
    }
    Config *c = cli_load_config(cfg_path, &a);
    if (!c) return 2;
    char err[1024];
    StepSetup B = {0};
    B.forced = cli_flag(&bench_rl_spec, &a, "forced");
    B.tk = tokenizer_default();
    if (train_settings(c, &B.S, &B.oc, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s: %s\n", cfg_path, err);
        config_free(c);
        return 2;
    }
    TrainSettings *S = &B.S;
    S->epochs = 1;  // one pass over the minibatches, as the fig5 configs' ppo_epochs
    S->bias_diagnostic = 0;
    S->compare.n = 0;
    int max_new = S->max_new;
    B.opt = setup_adamw(c);
    Backend *bk = setup_backend(c, cli_get(&bench_rl_spec, &a, "backend"), 1, err, sizeof err);
    if (!bk) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        config_free(c);
        return 2;
    }
    if (S->micro == 0 && bk->kind == BACKEND_CPU) S->micro = UPDATE_CPU_MICRO_BATCH;
    if (S->micro == 0 || S->micro > S->M) S->micro = S->M;
    // the model: --init, else train.init if it exists, else a fresh one of [model]
    const char *init = cli_get(&bench_rl_spec, &a, "init");
    if (!init && access(config_settings(c)->train.init, R_OK) == 0) init = config_settings(c)->train.init;
    ModelConfig mc;
    if (init ? !(B.m = policy_open(bk, init, NULL, 0, &mc, err, sizeof err))
             : setup_model_config(c, &mc, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s%s%s\n", init ? "" : cfg_path, init ? "" : ": ", err);
        backend_destroy(bk);
        config_free(c);
        return 2;
    }
    if (!init) {
        B.m = model_create(bk, &mc);
        model_init_params(B.m, (uint64_t)config_settings(c)->run.seed);
    }
    B.sc = (SamplerConfig){.temperature = (float)config_settings(c)->train.temperature,
                           .top_p = (float)config_settings(c)->train.top_p, .max_new_tokens = max_new,
                           .eos_token = B.forced ? -1 : TOK_EOS,
                           .stop_token = B.forced ? -1 : template_stop_token(B.tk, S->template_kind),
                           .seed = (uint64_t)config_settings(c)->run.seed,
                           .env = B.forced ? NULL : setup_sampler_env(c),
                           .split_bytes = setup_split_bytes(c)};
    const char *lpath = cli_get(&bench_rl_spec, &a, "lengths-out");
    FILE *lf = lpath ? fopen(lpath, "w") : NULL;
    if (lpath && !lf) {
        fprintf(stderr, "grpolab: error: --lengths-out '%s': cannot write\n", lpath);
        rc = 2;
    }
    double Np = matmul_params(B.m);
    printf("grpolab bench-rl: %s, model %s (%zu parameters, %.0f in matrix products), backend %s, "
           "threads %d\n", cfg_path, init ? init : "fresh (no train.init file)",
           model_num_params(B.m), Np, backend_name(bk->kind), omp_get_max_threads());
    printf("  step: %d questions x %d responses, minibatches of %d, micro-batches of %d, budget %d, %s\n",
           S->P, S->G, S->M, S->micro, max_new,
           B.forced ? "every response forced to the budget" : "the model's own lengths");
    StepTimes sum = {0};
    if (B.oc.beta > 0) {  // the frozen reference model is the initial policy, as in train
        B.ref = model_create(bk, &mc);
        model_copy_params(B.ref, B.m);
    }
    TrainState st;
    train_state_alloc(&st, S, B.m, B.ref != NULL);
    const int N = S->P * S->G, nt = omp_get_max_threads();
    int ur = 1;  // the update's rows per pass: a micro-batch of the mean sequence length so far
    SgemmRef ref = {0};
    double ro_fast = 0, up_fast = 0;  // each phase's GFLOP/s in its fastest timed step
    for (int s = 0; s < warmup + steps && rc == 0; s++) {
        StepTimes t = rl_step(&B, &st, s, s >= warmup ? lf : NULL);
        printf("  %s %d: %6.0f generated tokens (%.1f per response), rollout %.2f s, update %.2f s\n",
               s < warmup ? "warm-up" : "step", s < warmup ? s + 1 : s - warmup + 1, t.gen_tokens,
               t.gen_tokens / (S->P * S->G), t.rollout_s, t.update_s);
        fflush(stdout);
        if (s < warmup) continue;
        sum.rollout_s += t.rollout_s;
        sum.update_s += t.update_s;
        sum.gen_tokens += t.gen_tokens;
        sum.seq_tokens += t.seq_tokens;
        sum.rollout_flops += t.rollout_flops;
        sum.update_flops += t.update_flops;
        ro_fast = fmax(ro_fast, t.rollout_flops / t.rollout_s * 1e-9);
        up_fast = fmax(up_fast, t.update_flops / t.update_s * 1e-9);
        int done = s - warmup + 1, rows = (int)(S->micro * (sum.seq_tokens / (done * (double)N)) + 0.5);
        ur = rows > 0 ? rows : 1;
        sgemm_ref_update(&ref, bk, &mc, N, ur, nt);
    }
    train_state_free(&st, bk);
    if (lf) fclose(lf);
    if (rc == 0) {
        double ro_one = ref.ro_one, ro_apart = ref.ro_apart, up_one = ref.up_one, up_apart = ref.up_apart;
        double sg_ro = ro_one > ro_apart ? ro_one : ro_apart, sg_up = up_one > up_apart ? up_one : up_apart;
        double ro_g = sum.rollout_flops / sum.rollout_s * 1e-9, up_g = sum.update_flops / sum.update_s * 1e-9;
        double step_s = (sum.rollout_s + sum.update_s) / steps;
        printf("  rollout  %8.0f generated tokens/s  %6.2f GFLOP/s  %5.1f%% of sgemm on its shapes "
               "(%d rows: %.1f GFLOP/s", sum.gen_tokens / sum.rollout_s, ro_g, 100 * ro_g / sg_ro, N, ro_one);
        if (ro_apart > 0) printf("; %d x %d rows apart: %.1f", nt, (N + nt - 1) / nt, ro_apart);
        printf(")\n  update   %8.0f generated tokens/s  %6.2f GFLOP/s  %5.1f%% of sgemm on its shapes "
               "(%d rows: %.1f GFLOP/s", sum.gen_tokens / sum.update_s, up_g, 100 * up_g / sg_up, ur, up_one);
        if (up_apart > 0) printf("; %d x %d rows apart: %.1f", nt, ur, up_apart);
        printf(")\n");
        printf("  fastest of the %d steps: rollout %.2f GFLOP/s (%.1f%% of sgemm), update %.2f GFLOP/s "
               "(%.1f%%)\n", steps, ro_fast, 100 * ro_fast / sg_ro, up_fast, 100 * up_fast / sg_up);
        printf("  step     %.3f s/step  %.4f s per 1k generated tokens  (%.0f generated tokens per step)\n",
               step_s, 1000 * step_s * steps / sum.gen_tokens, sum.gen_tokens / steps);
        printf("RESULT impl=grpolab mode=%s threads=%d steps=%d gen_tokens=%.0f seq_tokens=%.0f "
               "rollout_s=%.6f update_s=%.6f rollout_gflop=%.9g update_gflop=%.9g "
               "sgemm_rollout=%.3f sgemm_update=%.3f sgemm_rollout_one=%.3f sgemm_update_one=%.3f "
               "rollout_gflops_fastest=%.3f update_gflops_fastest=%.3f\n",
               B.forced ? "forced" : "own", nt, steps, sum.gen_tokens, sum.seq_tokens, sum.rollout_s,
               sum.update_s, sum.rollout_flops * 1e-9, sum.update_flops * 1e-9, sg_ro, sg_up, ro_one,
               up_one, ro_fast, up_fast);
    }
    if (B.ref) model_free(B.ref);
    model_free(B.m);
    backend_destroy(bk);
    config_free(c);
    return rc;
}
