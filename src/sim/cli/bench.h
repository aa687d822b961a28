// bench.h: measurements behind `grpolab bench` (docs/benchmarks.md).
#ifndef GRPOLAB_BENCH_H
#define GRPOLAB_BENCH_H

#include <stddef.h>

#include "../../kernels/kernels.h"
#include "../model/model.h"

typedef struct {
    double seconds;       // best step time
    double tokens_per_s;  // B*T / seconds
    double gflops;        // llm.c's count: (6*params + 12*L*C*T) * tokens / seconds
    float loss;
    size_t params;
} BenchTrain;

// Best GFLOP/s of the backend's fp32 matrix product (cblas_sgemm on the CPU, cuBLAS sgemm
// on CUDA) on an n^3 product over reps runs.
double bench_sgemm_gflops(Backend *bk, int n, int reps);
// Forward + backward + AdamW on a (B,T) batch of full-length sequences; best of `steps`.
BenchTrain bench_train_step(Backend *bk, const ModelConfig *cfg, int B, int T, int steps);
// Batched KV-cache decoding: B sequences, a prompt of `prompt` tokens, `new_tokens` sampled
// (temperature 1); returns new tokens per second (prefill included in the time).
double bench_decode(Backend *bk, const ModelConfig *cfg, int B, int prompt, int new_tokens);

// cblas_sgemm's (kn_matmul_forward's) GFLOP/s on the model's forward matrix products with
// `rows` rows, every weight shape as often as a forward pass has it; best of reps per shape.
// apart > 1 (CPU): that many threads each run such a product of their own at once, on one
// thread each, and the rate is all of theirs.
double bench_sgemm_model_shapes(Backend *bk, const ModelConfig *c, int rows, int reps, int apart);

#endif
