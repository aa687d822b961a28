// cmd_bench.c: `grpolab bench`: the kernel benchmark of docs/benchmarks.md (the
// measurements themselves: bench.c).
#include <omp.h>
#include <stdio.h>

#include "../../kernels/kernels.h"
#include "../io/cli.h"
#include "../io/config.h"
#include "../model/model.h"
#include "../rl/setup.h"
#include "bench.h"
#include "commands.h"

static const CliOption bench_opts[] = {
    {"backend", "NAME", "auto|cpu|cuda (default: run.backend, auto)"},
    {"steps", "N", "timed training steps, best one reported (default 3)"},
    {"quick", NULL, "a much smaller model and batch (smoke test of the benchmark itself)"},
    {"set", "SECTION.KEY=VALUE", "override one key, e.g. run.threads=1 (repeatable)"},
};
static const CliSpec bench_spec = {
    "bench",
    "Kernel benchmark of docs/benchmarks.md: training step (d_model 256, 4 layers, 4 heads,\n"
    "d_ff 688, vocab 64, batch 64 x 128) tokens/s and GFLOP/s against the backend's sgemm\n"
    "(cblas 1024^3 on the CPU, cuBLAS 4096^3 on CUDA) measured in the same run,\n"
    "and batched KV-cache decoding (256 sequences, 32-token prompt, 96 new tokens).",
    "[--backend NAME] [--steps N] [--quick] [--set SECTION.KEY=VALUE]...", bench_opts, 4, 0, NULL};

int cmd_bench(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&bench_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    long steps = 3;
    if (cli_get_int(&bench_spec, &a, "steps", 1, 1000000, &steps) != 0) return 2;
    int quick = cli_flag(&bench_spec, &a, "quick");
    Config *c = cli_load_config(NULL, &a);
    if (!c) return 2;
    char err[512];
    Backend *bk = setup_backend(c, cli_get(&bench_spec, &a, "backend"), 1, err, sizeof err);
    if (!bk) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        config_free(c);
        return 2;
    }
    ModelConfig mc = model_config_default();
    mc.vocab_size = 64;
    mc.d_model = quick ? 64 : 256;
    mc.n_layers = quick ? 2 : 4;
    mc.n_heads = 4;
    mc.n_kv_heads = 4;
    mc.d_ff = quick ? 172 : 688;
    mc.max_seq_len = 128;
    int B = quick ? 8 : 64, T = quick ? 64 : 128;
    int dB = quick ? 16 : 256, dP = 32, dN = quick ? 16 : 96;
    int threads = config_settings(c)->run.threads;
    printf("grpolab bench: backend %s, threads %s%d\n", backend_name(bk->kind),
           threads ? "" : "all = ", threads ? threads : omp_get_max_threads());
    int sn = quick ? 256 : (bk->kind == BACKEND_CUDA ? 4096 : 1024);
    double sg = bench_sgemm_gflops(bk, sn, 5);
    printf("  sgemm %dx%dx%d (%s)%*s %8.1f GFLOP/s\n", sn, sn, sn,
           bk->kind == BACKEND_CUDA ? (bk->use_tf32 ? "cuBLAS, TF32" : "cuBLAS") : "cblas", 8, "", sg);
    BenchTrain tr = bench_train_step(bk, &mc, B, T, (int)steps);
    printf("  train step fwd+bwd+AdamW, %zu params, batch %dx%d:\n", tr.params, B, T);
    printf("      %10.0f tokens/s  %8.1f GFLOP/s  (%.1f%% of sgemm)  %.3f s/step\n",
           tr.tokens_per_s, tr.gflops, 100.0 * tr.gflops / sg, tr.seconds);
    double dec = bench_decode(bk, &mc, dB, dP, dN);
    printf("  KV-cache decoding, %d sequences, prompt %d, %d new tokens:\n", dB, dP, dN);
    printf("      %10.0f tokens/s\n", dec);
    backend_destroy(bk);
    config_free(c);
    return 0;
}
