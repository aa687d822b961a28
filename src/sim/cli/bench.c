// bench.c: `grpolab bench`, the performance figures of docs/benchmarks.md.
// Training step (forward + backward + AdamW) tokens/s and GFLOP/s next to cblas_sgemm's
// GFLOP/s measured in the same run, and batched KV-cache decoding tokens/s.
#include "bench.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../../common.h"
#include "../../kernels/philox.h"
#include "../model/model.h"

double bench_sgemm_gflops(Backend *bk, int n, int reps) {
    size_t nn = (size_t)n * n;
    float *h = xmalloc(nn * sizeof(float));
    float *a = bk_alloc(bk, nn * sizeof(float)), *b = bk_alloc(bk, nn * sizeof(float));
    float *c = bk_alloc(bk, nn * sizeof(float));
    for (size_t i = 0; i < nn; i++) h[i] = philox_uniform(1, i) - 0.5f;
    bk_upload(bk, a, h, nn * sizeof(float));
    for (size_t i = 0; i < nn; i++) h[i] = philox_uniform(2, i) - 0.5f;
    bk_upload(bk, b, h, nn * sizeof(float));
    // C = A @ B^T, the layout of the linear layers: cblas_sgemm on the CPU, cuBLAS on CUDA
    kn_matmul_forward(bk, c, a, b, n, n, n);  // warm-up
    bk_sync(bk);
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = wall_time();
        kn_matmul_forward(bk, c, a, b, n, n, n);
        bk_sync(bk);
        double dt = wall_time() - t0;
        double g = 2.0 * n * (double)n * n / dt * 1e-9;
        if (g > best) best = g;
    }
    free(h);
    bk_free(bk, a);
    bk_free(bk, b);
    bk_free(bk, c);
    return best;
}

// FLOPs of one forward+backward per token, counted as llm.c does: 6 per parameter
// plus attention's 12 * L * C * T (T the sequence length, no causal discount).
static double flops_per_token(const Model *m, int T) {
    const ModelConfig *c = model_config(m);
    return 6.0 * (double)model_num_params(m) + 12.0 * c->n_layers * (double)c->d_model * T;
}

BenchTrain bench_train_step(Backend *bk, const ModelConfig *cfg, int B, int T, int steps) {
    Model *m = model_create(bk, cfg);
    model_init_params(m, 1);
    int *tokens = xmalloc((size_t)B * T * sizeof(int)), *targets = xmalloc((size_t)B * T * sizeof(int));
    int *lengths = xmalloc((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++) lengths[b] = T;
    for (size_t i = 0; i < (size_t)B * T; i++) {
        tokens[i] = (int)(philox_uniform(3, i) * cfg->vocab_size) % cfg->vocab_size;
        targets[i] = (int)(philox_uniform(4, i) * cfg->vocab_size) % cfg->vocab_size;
    }
    AdamWConfig opt = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0, .grad_clip = 1.0f};
    BenchTrain r = {0};
    double best = INFINITY;
    for (int s = 0; s < steps + 1; s++) {  // first step is warm-up (allocations)
        bk_sync(bk);
        double t0 = wall_time();
        model_forward(m, tokens, targets, lengths, B, T);
        model_zero_grad(m);
        r.loss = model_cross_entropy_step(m, 1, 0);
        model_adamw_step(m, &opt);
        bk_sync(bk);
        double dt = wall_time() - t0;
        if (s > 0 && dt < best) best = dt;
    }
    r.seconds = best;
    r.tokens_per_s = (double)B * T / best;
    r.gflops = flops_per_token(m, T) * B * T / best * 1e-9;
    r.params = model_num_params(m);
    free(tokens);
    free(targets);
    free(lengths);
    model_free(m);
    return r;
}

double bench_decode(Backend *bk, const ModelConfig *cfg, int B, int prompt, int new_tokens) {
    ModelConfig c = *cfg;
    if (c.max_seq_len < prompt + new_tokens) c.max_seq_len = prompt + new_tokens;
    Model *m = model_create(bk, &c);
    model_init_params(m, 1);
    model_kv_alloc(m, B);
    int *tokens = xmalloc((size_t)B * prompt * sizeof(int)), *lengths = xmalloc((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++) lengths[b] = prompt;
    for (size_t i = 0; i < (size_t)B * prompt; i++)
        tokens[i] = (int)(philox_uniform(5, i) * c.vocab_size) % c.vocab_size;
    float *logits = bk_alloc(bk, (size_t)B * c.vocab_size * sizeof(float));
    float *logp = bk_alloc(bk, (size_t)B * sizeof(float));
    int *next = bk_alloc(bk, (size_t)B * sizeof(int));
    uint64_t *counters_h = xmalloc((size_t)B * sizeof(uint64_t));
    uint64_t *counters = bk_alloc(bk, (size_t)B * sizeof(uint64_t));
    int *next_h = xmalloc((size_t)B * sizeof(int));
    bk_sync(bk);
    double t0 = wall_time();
    model_prefill(m, tokens, lengths, B, prompt, logits);
    for (int s = 0; s < new_tokens; s++) {
        for (int b = 0; b < B; b++) counters_h[b] = ((uint64_t)b << 32) | (uint64_t)s;
        bk_upload(bk, counters, counters_h, (size_t)B * sizeof(uint64_t));
        kn_sample(bk, next, logp, logits, B, c.vocab_size, 1.0f, 1.0f, 42, counters);
        bk_download(bk, next_h, next, (size_t)B * sizeof(int));
        if (s + 1 < new_tokens) model_decode_step(m, next_h, NULL, logits);
    }
    bk_sync(bk);
    double dt = wall_time() - t0;
    free(tokens);
    free(lengths);
    free(counters_h);
    free(next_h);
    bk_free(bk, logits);
    bk_free(bk, logp);
    bk_free(bk, next);
    bk_free(bk, counters);
    model_free(m);
    return (double)B * new_tokens / dt;
}
