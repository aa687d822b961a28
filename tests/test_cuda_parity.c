// test_cuda_parity.c: every CUDA op against the CPU reference on random inputs. Each
// output's relative error ||cuda - cpu|| / ||cpu|| is printed; NaN never passes. Outputs an
// op overwrites are poisoned with NaN on the CUDA side before the call (zeros on the CPU
// side), so an element the kernel forgets to write fails.
// Gradient outputs start from the same small random values on both sides, so a
// backward that overwrites instead of accumulating fails too.
//
// Tolerances (relative error of the whole output): 1e-5 in fp32, 1e-3 with TF32; the errors
// measured on a GPU are in docs/benchmarks.md ("make gpu-check").
//   TOL        1e-5  fp32, same formula, only the summation order and the last ulp of
//                    expf/sinf differ between the backends
//   TOL_CANCEL 1e-5  gradients formed from cancelling sums: attention backward
//                    (dS = P (dP - D), D the P-weighted mean of dP) and logprob backward
//                    (onehot - p, and p (log p + H)); rounding differences are amplified;
//                    and token_weights' KL k3 = exp(lr) - lr - 1, which cancels for small lr
//   TOL_TF32   1e-3  TF32 tensor-core matmuls: operands keep 10 mantissa bits (unit
//                    roundoff 2^-11, or 2^-10 where the hardware truncates)
//   exact            kv_store (a copy), sampled token ids, token_weights' clip counts
//   1e-12            sum_squares (double accumulation on both sides)
// Skips cleanly (exit 0) when the CUDA backend is not built or no device is present;
// GRPOLAB_PARITY_SELF=1 runs every test CPU against CPU (a check of the tests themselves).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "kernels/kernels.h"
#include "sim/rl/objective.h"

#ifdef GRPOLAB_CUDA

#define TOL 1e-5
#define TOL_CANCEL 1e-5
#define TOL_TF32 1e-3
#define TOL_SUMSQ 1e-12

static Backend *g_cpu, *g_gpu;

// Every test: skip without a device; start with fp32 matmuls (a failed TF32 test may
// have left use_tf32 set).
static int setup(void **state) {
    (void)state;
    if (g_gpu) g_gpu->use_tf32 = 0;
    return 0;
}
#define NEED_GPU()            \
    do {                      \
        if (!g_gpu) skip();   \
    } while (0)

// ---------------------------------------------------------------- paired buffers
// The same tensor on the CPU (c) and CUDA (g) backends.
typedef struct {
    float *c, *g;
    size_t n;
} Pair;
typedef struct {
    int *c, *g;
    size_t n;
} IPair;

static Pair pair_from(const float *h, size_t n) {
    Pair p = {bk_alloc(g_cpu, n * sizeof(float)), bk_alloc(g_gpu, n * sizeof(float)), n};
    bk_upload(g_cpu, p.c, h, n * sizeof(float));
    bk_upload(g_gpu, p.g, h, n * sizeof(float));
    return p;
}

// uniform in [lo, hi) from (seed, i), identical on both sides
static Pair pair_rand(size_t n, uint64_t seed, float lo, float hi) {
    float *h = malloc(n * sizeof(float));
    assert_non_null(h);
    tu_fill_uniform(h, n, seed, lo, hi);
    Pair p = pair_from(h, n);
    free(h);
    return p;
}

// An output the op overwrites: zeros on the CPU, NaN on the GPU.
static Pair pair_out(size_t n) {
    Pair p = {bk_alloc(g_cpu, n * sizeof(float)), bk_alloc(g_gpu, n * sizeof(float)), n};
    float *h = malloc(n * sizeof(float));
    assert_non_null(h);
    for (size_t i = 0; i < n; i++) h[i] = NAN;
    bk_upload(g_gpu, p.g, h, n * sizeof(float));
    free(h);
    return p;
}

static IPair ipair_from(const int *h, size_t n) {
    IPair p = {bk_alloc(g_cpu, n * sizeof(int)), bk_alloc(g_gpu, n * sizeof(int)), n};
    bk_upload(g_cpu, p.c, h, n * sizeof(int));
    bk_upload(g_gpu, p.g, h, n * sizeof(int));
    return p;
}

static void pair_free(Pair *p) {
    bk_free(g_cpu, p->c);
    bk_free(g_gpu, p->g);
    p->c = p->g = NULL;
}
static void ipair_free(IPair *p) {
    bk_free(g_cpu, p->c);
    bk_free(g_gpu, p->g);
    p->c = p->g = NULL;
}

static float *fetch(Backend *b, const float *dev, size_t n) {
    float *h = malloc(n * sizeof(float));
    assert_non_null(h);
    bk_download(b, h, dev, n * sizeof(float));
    return h;
}

// Prints the relative error of the CUDA result against the CPU one and checks it.
static void check_pair(const char *what, Pair p, double tol) {
    float *c = fetch(g_cpu, p.c, p.n), *g = fetch(g_gpu, p.g, p.n);
    double e = tu_rel_err(g, c, p.n);
    free(c);
    free(g);
    tu_check_rel(what, e, tol);
}

// An output that must be exactly 0 everywhere on both sides (NaN fails).
static void check_pair_zero(const char *what, Pair p) {
    float *c = fetch(g_cpu, p.c, p.n), *g = fetch(g_gpu, p.g, p.n);
    int zero = 1;
    for (size_t i = 0; i < p.n; i++) zero &= c[i] == 0.0f && g[i] == 0.0f;
    printf("  %-48s %s\n", what, zero ? "all 0" : "NOT 0");
    free(c);
    free(g);
    assert_true(zero);
}

// ints in [lo, hi) from (seed, i)
static void fill_ints(int *x, size_t n, uint64_t seed, int lo, int hi) {
    for (size_t i = 0; i < n; i++) {
        int v = lo + (int)(philox_uniform(seed, i) * (float)(hi - lo));
        x[i] = v < hi ? v : hi - 1;
    }
}

// ---------------------------------------------------------------- elementwise
static void test_add_scale(void **state) {
    (void)state;
    NEED_GPU();
    size_t n = 100003;
    Pair x = pair_rand(n, 1, -1, 1), y = pair_rand(n, 2, -1, 1), out = pair_out(n);
    kn_add(g_cpu, out.c, x.c, y.c, n);
    kn_add(g_gpu, out.g, x.g, y.g, n);
    check_pair("add", out, TOL);
    kn_add(g_cpu, x.c, x.c, y.c, n);  // out aliasing an input
    kn_add(g_gpu, x.g, x.g, y.g, n);
    check_pair("add (out == x)", x, TOL);
    kn_scale(g_cpu, y.c, -0.37f, n);
    kn_scale(g_gpu, y.g, -0.37f, n);
    check_pair("scale", y, TOL);
    pair_free(&x);
    pair_free(&y);
    pair_free(&out);
}

static void test_swiglu(void **state) {
    (void)state;
    NEED_GPU();
    size_t n = 10007;
    Pair gate = pair_rand(n, 3, -8, 8), up = pair_rand(n, 4, -2, 2), out = pair_out(n);
    kn_swiglu_forward(g_cpu, out.c, gate.c, up.c, n);
    kn_swiglu_forward(g_gpu, out.g, gate.g, up.g, n);
    check_pair("swiglu forward", out, TOL);
    Pair dout = pair_rand(n, 5, -1, 1);
    Pair dgate = pair_rand(n, 6, -0.1f, 0.1f), dup = pair_rand(n, 7, -0.1f, 0.1f);
    kn_swiglu_backward(g_cpu, dgate.c, dup.c, dout.c, gate.c, up.c, n);
    kn_swiglu_backward(g_gpu, dgate.g, dup.g, dout.g, gate.g, up.g, n);
    check_pair("swiglu backward dgate", dgate, TOL);
    check_pair("swiglu backward dup", dup, TOL);
    kn_swiglu_backward(g_cpu, dgate.c, NULL, dout.c, gate.c, up.c, n);  // a NULL gradient
    kn_swiglu_backward(g_gpu, dgate.g, NULL, dout.g, gate.g, up.g, n);
    check_pair("swiglu backward dgate (dup NULL)", dgate, TOL);
    pair_free(&gate);
    pair_free(&up);
    pair_free(&out);
    pair_free(&dout);
    pair_free(&dgate);
    pair_free(&dup);
}

// ---------------------------------------------------------------- embedding
static void test_embedding(void **state) {
    (void)state;
    NEED_GPU();
    int N = 1001, V = 50, C = 67;
    int *tok = malloc((size_t)N * sizeof(int));
    fill_ints(tok, (size_t)N, 10, 0, V - 3);  // the last 3 vocabulary rows get no gradient
    IPair tokens = ipair_from(tok, (size_t)N);
    Pair wte = pair_rand((size_t)V * C, 11, -1, 1), out = pair_out((size_t)N * C);
    kn_embedding_forward(g_cpu, out.c, tokens.c, wte.c, N, C);
    kn_embedding_forward(g_gpu, out.g, tokens.g, wte.g, N, C);
    check_pair("embedding forward", out, TOL);
    Pair dout = pair_rand((size_t)N * C, 12, -1, 1);
    Pair dwte = pair_rand((size_t)V * C, 13, -0.1f, 0.1f);
    kn_embedding_backward(g_cpu, dwte.c, dout.c, tokens.c, N, V, C);
    kn_embedding_backward(g_gpu, dwte.g, dout.g, tokens.g, N, V, C);
    check_pair("embedding backward dwte", dwte, TOL);
    free(tok);
    ipair_free(&tokens);
    pair_free(&wte);
    pair_free(&out);
    pair_free(&dout);
    pair_free(&dwte);
}

// ---------------------------------------------------------------- RMSNorm
static void rmsnorm_case(int N, int C, uint64_t seed) {
    printf(" rmsnorm N=%d C=%d\n", N, C);
    Pair inp = pair_rand((size_t)N * C, seed, -2, 2), w = pair_rand((size_t)C, seed + 1, 0.5f, 1.5f);
    Pair out = pair_out((size_t)N * C), rstd = pair_out((size_t)N);
    kn_rmsnorm_forward(g_cpu, out.c, rstd.c, inp.c, w.c, N, C, 1e-5f);
    kn_rmsnorm_forward(g_gpu, out.g, rstd.g, inp.g, w.g, N, C, 1e-5f);
    check_pair("rmsnorm forward out", out, TOL);
    check_pair("rmsnorm forward rstd", rstd, TOL);
    Pair dout = pair_rand((size_t)N * C, seed + 2, -1, 1);
    Pair dinp = pair_rand((size_t)N * C, seed + 3, -0.1f, 0.1f);
    Pair dw = pair_rand((size_t)C, seed + 4, -0.1f, 0.1f);
    kn_rmsnorm_backward(g_cpu, dinp.c, dw.c, dout.c, inp.c, w.c, rstd.c, N, C);
    kn_rmsnorm_backward(g_gpu, dinp.g, dw.g, dout.g, inp.g, w.g, rstd.g, N, C);
    check_pair("rmsnorm backward dinp", dinp, TOL);
    check_pair("rmsnorm backward dweight", dw, TOL);
    pair_free(&inp);
    pair_free(&w);
    pair_free(&out);
    pair_free(&rstd);
    pair_free(&dout);
    pair_free(&dinp);
    pair_free(&dw);
}

static void test_rmsnorm(void **state) {
    (void)state;
    NEED_GPU();
    rmsnorm_case(517, 96, 20);  // several 256-row partials of dweight on the GPU
    rmsnorm_case(33, 75, 30);   // C not a multiple of 32
}

// ---------------------------------------------------------------- matmul
static void matmul_case(int N, int C, int OC, int tf32, uint64_t seed) {
    double tol = tf32 ? TOL_TF32 : TOL;
    g_gpu->use_tf32 = tf32;
    printf(" matmul N=%d C=%d OC=%d %s\n", N, C, OC, tf32 ? "TF32" : "fp32");
    Pair inp = pair_rand((size_t)N * C, seed, -1, 1), w = pair_rand((size_t)OC * C, seed + 1, -1, 1);
    Pair out = pair_out((size_t)N * OC);
    kn_matmul_forward(g_cpu, out.c, inp.c, w.c, N, C, OC);
    kn_matmul_forward(g_gpu, out.g, inp.g, w.g, N, C, OC);
    check_pair("matmul forward", out, tol);
    kn_matmul_forward_add(g_cpu, out.c, inp.c, w.c, N, C, OC);  // out += the product again
    kn_matmul_forward_add(g_gpu, out.g, inp.g, w.g, N, C, OC);
    check_pair("matmul forward_add", out, tol);
    Pair dout = pair_rand((size_t)N * OC, seed + 2, -1, 1);
    Pair dinp = pair_rand((size_t)N * C, seed + 3, -0.1f, 0.1f);
    Pair dw = pair_rand((size_t)OC * C, seed + 4, -0.1f, 0.1f);
    kn_matmul_backward(g_cpu, dinp.c, dw.c, dout.c, inp.c, w.c, N, C, OC);
    kn_matmul_backward(g_gpu, dinp.g, dw.g, dout.g, inp.g, w.g, N, C, OC);
    check_pair("matmul backward dinp", dinp, tol);
    check_pair("matmul backward dweight", dw, tol);
    kn_matmul_backward(g_cpu, NULL, dw.c, dout.c, inp.c, w.c, N, C, OC);  // dinp not needed
    kn_matmul_backward(g_gpu, NULL, dw.g, dout.g, inp.g, w.g, N, C, OC);
    check_pair("matmul backward dweight (dinp NULL)", dw, tol);
    g_gpu->use_tf32 = 0;
    pair_free(&inp);
    pair_free(&w);
    pair_free(&out);
    pair_free(&dout);
    pair_free(&dinp);
    pair_free(&dw);
}

static void test_matmul(void **state) {
    (void)state;
    NEED_GPU();
    matmul_case(129, 67, 95, 0, 40);
    matmul_case(512, 256, 768, 0, 50);
    matmul_case(1, 33, 7, 0, 60);  // one row, as in decoding with B = 1
}

static void test_matmul_tf32(void **state) {
    (void)state;
    NEED_GPU();
    matmul_case(512, 256, 768, 1, 70);
}

// ---------------------------------------------------------------- RoPE
static void rope_case(int N, int NH, int hd, float theta, int maxpos, uint64_t seed) {
    printf(" rope N=%d NH=%d hd=%d theta=%g positions < %d\n", N, NH, hd, theta, maxpos);
    size_t n = (size_t)N * NH * hd;
    int *pos = malloc((size_t)N * sizeof(int));
    fill_ints(pos, (size_t)N, seed, 0, maxpos);
    IPair p = ipair_from(pos, (size_t)N);
    Pair x = pair_rand(n, seed + 1, -1, 1);
    kn_rope_forward(g_cpu, x.c, p.c, N, NH, hd, theta);
    kn_rope_forward(g_gpu, x.g, p.g, N, NH, hd, theta);
    check_pair("rope forward", x, TOL);
    Pair dx = pair_rand(n, seed + 2, -1, 1);
    kn_rope_backward(g_cpu, dx.c, p.c, N, NH, hd, theta);
    kn_rope_backward(g_gpu, dx.g, p.g, N, NH, hd, theta);
    check_pair("rope backward", dx, TOL);
    // backward is the inverse rotation: backward(forward(x)) == x on the GPU
    float *x0 = malloc(n * sizeof(float));
    tu_fill_uniform(x0, n, seed + 1, -1, 1);
    kn_rope_backward(g_gpu, x.g, p.g, N, NH, hd, theta);
    float *back = fetch(g_gpu, x.g, n);
    tu_check_rel("rope backward(forward(x)) == x (cuda)", tu_rel_err(back, x0, n), TOL);
    free(back);
    free(x0);
    free(pos);
    ipair_free(&p);
    pair_free(&x);
    pair_free(&dx);
}

static void test_rope(void **state) {
    (void)state;
    NEED_GPU();
    rope_case(300, 3, 16, 10000.0f, 600, 80);
    rope_case(64, 2, 64, 1000000.0f, 4096, 90);  // large angles: same float angle both sides
}

// ---------------------------------------------------------------- attention
static void attention_case(int B, int T, int NH, int NKV, int hd, const int *len, uint64_t seed) {
    printf(" attention B=%d T=%d NH=%d NKV=%d hd=%d lengths", B, T, NH, NKV, hd);
    for (int b = 0; b < B; b++) printf(" %d", len[b]);
    printf("\n");
    size_t nq = (size_t)B * T * NH * hd, nkv = (size_t)B * T * NKV * hd;
    size_t natt = (size_t)B * NH * T * T;
    IPair lengths = ipair_from(len, (size_t)B);
    Pair q = pair_rand(nq, seed, -1, 1), k = pair_rand(nkv, seed + 1, -1, 1);
    Pair v = pair_rand(nkv, seed + 2, -1, 1);
    Pair out = pair_out(nq), att = pair_out(natt);
    kn_attention_forward(g_cpu, out.c, att.c, q.c, k.c, v.c, lengths.c, B, T, NH, NKV, hd);
    kn_attention_forward(g_gpu, out.g, att.g, q.g, k.g, v.g, lengths.g, B, T, NH, NKV, hd);
    check_pair("attention forward out", out, TOL);
    check_pair("attention forward att", att, TOL);
    Pair dout = pair_rand(nq, seed + 3, -1, 1);
    Pair dq = pair_rand(nq, seed + 4, -0.1f, 0.1f), dk = pair_rand(nkv, seed + 5, -0.1f, 0.1f);
    Pair dv = pair_rand(nkv, seed + 6, -0.1f, 0.1f);
    kn_attention_backward(g_cpu, dq.c, dk.c, dv.c, dout.c, att.c, q.c, k.c, v.c, lengths.c, B, T,
                          NH, NKV, hd);
    kn_attention_backward(g_gpu, dq.g, dk.g, dv.g, dout.g, att.g, q.g, k.g, v.g, lengths.g, B, T,
                          NH, NKV, hd);
    check_pair("attention backward dq", dq, TOL_CANCEL);
    check_pair("attention backward dk", dk, TOL_CANCEL);
    check_pair("attention backward dv", dv, TOL_CANCEL);
    // only dk needed (dq, dv NULL)
    kn_attention_backward(g_cpu, NULL, dk.c, NULL, dout.c, att.c, q.c, k.c, v.c, lengths.c, B, T,
                          NH, NKV, hd);
    kn_attention_backward(g_gpu, NULL, dk.g, NULL, dout.g, att.g, q.g, k.g, v.g, lengths.g, B, T,
                          NH, NKV, hd);
    check_pair("attention backward dk (dq, dv NULL)", dk, TOL_CANCEL);
    ipair_free(&lengths);
    pair_free(&q);
    pair_free(&k);
    pair_free(&v);
    pair_free(&out);
    pair_free(&att);
    pair_free(&dout);
    pair_free(&dq);
    pair_free(&dk);
    pair_free(&dv);
}

static void test_attention(void **state) {
    (void)state;
    NEED_GPU();
    int l1[] = {37, 20, 1};
    attention_case(3, 37, 4, 2, 16, l1, 100);  // GQA, padding
    int l2[] = {64, 64};
    attention_case(2, 64, 4, 4, 32, l2, 200);  // plain multi-head, no padding
    int l3[] = {5, 0, 19};
    attention_case(3, 19, 6, 1, 24, l3, 300);  // one KV head, hd not a multiple of 32, empty seq
    int l4[] = {129};
    attention_case(1, 130, 2, 1, 64, l4, 400);  // T larger than a block of threads
}

// ---------------------------------------------------------------- KV cache and decoding
static void test_kv_store(void **state) {
    (void)state;
    NEED_GPU();
    int B = 4, T = 9, Tmax = 40, W = 32;
    int start_h[] = {0, 5, 35, 0}, count_h[] = {9, 3, 9, 0};  // row 2 runs past Tmax
    IPair start = ipair_from(start_h, 4), count = ipair_from(count_h, 4);
    Pair cache = pair_rand((size_t)B * Tmax * W, 500, -1, 1);
    Pair src = pair_rand((size_t)B * T * W, 501, -1, 1);
    kn_kv_store(g_cpu, cache.c, src.c, start.c, count.c, B, T, Tmax, W);
    kn_kv_store(g_gpu, cache.g, src.g, start.g, count.g, B, T, Tmax, W);
    check_pair("kv_store (exact)", cache, 0.0);
    int zero_h[] = {0, 0, 0, 0};
    IPair zero = ipair_from(zero_h, 4);
    Pair src1 = pair_rand((size_t)B * 1 * W, 502, -1, 1);
    kn_kv_store(g_cpu, cache.c, src1.c, start.c, NULL, B, 1, Tmax, W);  // count NULL: all rows
    kn_kv_store(g_gpu, cache.g, src1.g, start.g, NULL, B, 1, Tmax, W);
    kn_kv_store(g_cpu, cache.c, src.c, zero.c, NULL, B, T, Tmax, W);
    kn_kv_store(g_gpu, cache.g, src.g, zero.g, NULL, B, T, Tmax, W);
    check_pair("kv_store count NULL (exact)", cache, 0.0);
    ipair_free(&start);
    ipair_free(&count);
    ipair_free(&zero);
    pair_free(&cache);
    pair_free(&src);
    pair_free(&src1);
}

static void test_attention_decode(void **state) {
    (void)state;
    NEED_GPU();
    int B = 5, Tmax = 140, NH = 4, NKV = 2, hd = 16;
    int pos_h[] = {0, 17, 139, -1, 130};  // first, middle, last position; an inactive row
    IPair pos = ipair_from(pos_h, (size_t)B);
    size_t ncache = (size_t)B * Tmax * NKV * hd;
    Pair kc = pair_rand(ncache, 600, -1, 1), vc = pair_rand(ncache, 601, -1, 1);
    Pair q = pair_rand((size_t)B * NH * hd, 602, -1, 1), out = pair_out((size_t)B * NH * hd);
    kn_attention_decode(g_cpu, out.c, q.c, kc.c, vc.c, pos.c, NULL, NULL, B, Tmax, NH, NKV, hd);
    kn_attention_decode(g_gpu, out.g, q.g, kc.g, vc.g, pos.g, NULL, NULL, B, Tmax, NH, NKV, hd);
    check_pair("attention decode", out, TOL);
    ipair_free(&pos);
    pair_free(&kc);
    pair_free(&vc);
    pair_free(&q);
    pair_free(&out);
}

// ---------------------------------------------------------------- log-probs
static void logprob_case(int N, int C, int V, int with_entropy, uint64_t seed) {
    printf(" logprob N=%d C=%d V=%d entropy %s\n", N, C, V, with_entropy ? "yes" : "no");
    int *tg = malloc((size_t)N * sizeof(int));
    fill_ints(tg, (size_t)N, seed, 0, V);
    for (int n = 0; n < N; n += 7) tg[n] = -1;  // padding rows
    IPair targets = ipair_from(tg, (size_t)N);
    Pair x = pair_rand((size_t)N * C, seed + 1, -1, 1);
    Pair W = pair_rand((size_t)V * C, seed + 2, -0.5f, 0.5f);
    Pair logp = pair_out((size_t)N), ent = pair_out((size_t)N), lse = pair_out((size_t)N);
    kn_logprob_forward(g_cpu, logp.c, with_entropy ? ent.c : NULL, lse.c, x.c, W.c, targets.c, N,
                       C, V);
    kn_logprob_forward(g_gpu, logp.g, with_entropy ? ent.g : NULL, lse.g, x.g, W.g, targets.g, N,
                       C, V);
    check_pair("logprob forward logp", logp, TOL);
    check_pair("logprob forward lse", lse, TOL);
    if (with_entropy) check_pair("logprob forward entropy", ent, TOL);
    Pair dlogp = pair_rand((size_t)N, seed + 3, -1, 1), dent = pair_rand((size_t)N, seed + 4, -1, 1);
    Pair dx = pair_rand((size_t)N * C, seed + 5, -0.01f, 0.01f);
    Pair dW = pair_rand((size_t)V * C, seed + 6, -0.01f, 0.01f);
    kn_logprob_backward(g_cpu, dx.c, dW.c, dlogp.c, with_entropy ? dent.c : NULL, x.c, W.c,
                        targets.c, lse.c, N, C, V);
    kn_logprob_backward(g_gpu, dx.g, dW.g, dlogp.g, with_entropy ? dent.g : NULL, x.g, W.g,
                        targets.g, lse.g, N, C, V);
    check_pair("logprob backward dx", dx, TOL_CANCEL);
    check_pair("logprob backward dW", dW, TOL_CANCEL);
    free(tg);
    ipair_free(&targets);
    pair_free(&x);
    pair_free(&W);
    pair_free(&logp);
    pair_free(&ent);
    pair_free(&lse);
    pair_free(&dlogp);
    pair_free(&dent);
    pair_free(&dx);
    pair_free(&dW);
}

static void test_logprob(void **state) {
    (void)state;
    NEED_GPU();
    logprob_case(300, 48, 67, 1, 700);
    logprob_case(20000, 16, 67, 0, 800);  // several logit chunks on both backends
    logprob_case(20000, 16, 67, 1, 900);
}

// ---------------------------------------------------------------- sampling
static void sample_case(const float *logits_h, int B, int V, float temperature, float top_p,
                        const uint64_t *ctr_h) {
    printf(" sample B=%d V=%d temperature=%g top_p=%g\n", B, V, temperature, top_p);
    Pair logits = pair_from(logits_h, (size_t)B * V);
    uint64_t *ctr_c = bk_alloc(g_cpu, (size_t)B * sizeof(uint64_t));
    uint64_t *ctr_g = bk_alloc(g_gpu, (size_t)B * sizeof(uint64_t));
    bk_upload(g_cpu, ctr_c, ctr_h, (size_t)B * sizeof(uint64_t));
    bk_upload(g_gpu, ctr_g, ctr_h, (size_t)B * sizeof(uint64_t));
    int *poison = malloc((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++) poison[b] = -1;
    IPair tok = ipair_from(poison, (size_t)B);
    Pair logp = pair_out((size_t)B);
    uint64_t seed = 0x5eed5eedULL;
    kn_sample(g_cpu, tok.c, logp.c, logits.c, B, V, temperature, top_p, seed, ctr_c);
    kn_sample(g_gpu, tok.g, logp.g, logits.g, B, V, temperature, top_p, seed, ctr_g);
    int *tc = malloc((size_t)B * sizeof(int)), *tgpu = malloc((size_t)B * sizeof(int));
    bk_download(g_cpu, tc, tok.c, (size_t)B * sizeof(int));
    bk_download(g_gpu, tgpu, tok.g, (size_t)B * sizeof(int));
    int mismatches = 0;
    for (int b = 0; b < B; b++)
        if (tc[b] != tgpu[b]) {
            if (mismatches < 5) printf("  row %d: cpu token %d, cuda token %d\n", b, tc[b], tgpu[b]);
            mismatches++;
        }
    printf("  %-48s %d of %d rows differ\n", "sample tokens", mismatches, B);
    assert_int_equal(mismatches, 0);
    // rows without a distribution have a NaN logp on both sides; the others are compared
    float *lc = fetch(g_cpu, logp.c, (size_t)B), *lg = fetch(g_gpu, logp.g, (size_t)B);
    int nan_rows = 0;
    for (int b = 0; b < B; b++) {
        assert_int_equal(isnan(lc[b]) != 0, isnan(lg[b]) != 0);
        if (isnan(lc[b])) lc[b] = lg[b] = 0.0f, nan_rows++;
    }
    if (nan_rows) printf("  %-48s %d rows, token 0 on both\n", "sample logp NaN (no distribution)", nan_rows);
    tu_check_rel("sample logp", tu_rel_err(lg, lc, (size_t)B), TOL);
    free(lc);
    free(lg);
    free(poison);
    free(tc);
    free(tgpu);
    bk_free(g_cpu, ctr_c);
    bk_free(g_gpu, ctr_g);
    pair_free(&logits);
    ipair_free(&tok);
    pair_free(&logp);
}

static void test_sample(void **state) {
    (void)state;
    NEED_GPU();
    int B = 256, V = 67;
    float *logits = malloc((size_t)B * V * sizeof(float));
    tu_fill_uniform(logits, (size_t)B * V, 1000, -4, 4);
    for (int b = 0; b < B; b += 4)  // rows with many exact ties
        for (int v = 0; v < V; v++) logits[(size_t)b * V + v] = roundf(logits[(size_t)b * V + v]);
    for (int v = 0; v < V; v++) logits[(size_t)1 * V + v] = 0.5f;  // a uniform row
    uint64_t *ctr = malloc((size_t)B * sizeof(uint64_t));
    for (int b = 0; b < B; b++) ctr[b] = (uint64_t)b * 7919u + 13u;
    sample_case(logits, B, V, 1.0f, 1.0f, ctr);
    sample_case(logits, B, V, 0.7f, 0.9f, ctr);
    sample_case(logits, B, V, 1.3f, 0.5f, ctr);
    sample_case(logits, B, V, 1.0f, 0.0f, ctr);  // nucleus of one token
    sample_case(logits, B, V, 0.0f, 0.9f, ctr);  // greedy, ties by lower id
    // rows without a distribution: token 0 and a NaN logp on both backends
    for (int v = 0; v < V; v++) {
        logits[(size_t)2 * V + v] = v == 5 ? NAN : logits[(size_t)2 * V + v];
        logits[(size_t)3 * V + v] = v == 60 ? INFINITY : logits[(size_t)3 * V + v];
        logits[(size_t)5 * V + v] = NAN;
        logits[(size_t)6 * V + v] = -INFINITY;
    }
    sample_case(logits, B, V, 1.0f, 1.0f, ctr);
    sample_case(logits, B, V, 0.7f, 0.9f, ctr);
    sample_case(logits, B, V, 0.0f, 1.0f, ctr);
    free(logits);
    free(ctr);
}

// ---------------------------------------------------------------- optimizer
static void test_sum_squares(void **state) {
    (void)state;
    NEED_GPU();
    size_t sizes[] = {5, 1000003};
    for (int i = 0; i < 2; i++) {
        size_t n = sizes[i];
        Pair g = pair_rand(n, 1100 + (uint64_t)i, -1, 1);
        double c = kn_sum_squares(g_cpu, g.c, n), d = kn_sum_squares(g_gpu, g.g, n);
        double d2 = kn_sum_squares(g_gpu, g.g, n);
        char what[64];
        snprintf(what, sizeof what, "sum_squares n=%zu", n);
        tu_check_rel(what, tu_rel_err_d(&d, &c, 1), TOL_SUMSQ);
        assert_true(memcmp(&d, &d2, sizeof d) == 0);  // deterministic
        pair_free(&g);
    }
}

static void test_adamw(void **state) {
    (void)state;
    NEED_GPU();
    size_t n = 100003;
    Pair p = pair_rand(n, 1200, -1, 1), g = pair_rand(n, 1201, -1, 1);
    Pair m = pair_rand(n, 1202, -0.1f, 0.1f), v = pair_rand(n, 1203, 0.0f, 0.01f);
    int steps[] = {1, 50};
    for (int i = 0; i < 2; i++) {
        printf(" adamw t=%d\n", steps[i]);
        // a large lr so the update, not the old value, dominates the compared params
        kn_adamw_update(g_cpu, p.c, g.c, m.c, v.c, n, 0.5f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f,
                        steps[i]);
        kn_adamw_update(g_gpu, p.g, g.g, m.g, v.g, n, 0.5f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f,
                        steps[i]);
        check_pair("adamw params", p, TOL);
        check_pair("adamw m", m, TOL);
        check_pair("adamw v", v, TOL);
    }
    pair_free(&p);
    pair_free(&g);
    pair_free(&m);
    pair_free(&v);
}

// ---------------------------------------------------------------- RL objective
static ObjectiveConfig objective(const char *preset, Scale scale, int ddof, float beta) {
    ObjectiveConfig oc;
    assert_int_equal(objective_preset(preset, 40, &oc), 0);
    oc.scale = scale;
    oc.std_ddof = ddof;
    oc.beta = beta;
    return oc;
}

// An int output: -1 on both sides before the call (the CPU writes every element too).
static IPair ipair_out(size_t n) {
    int *h = malloc(n * sizeof(int));
    assert_non_null(h);
    for (size_t i = 0; i < n; i++) h[i] = -1;
    IPair p = ipair_from(h, n);
    free(h);
    return p;
}

static void check_ipair_equal(const char *what, IPair p) {
    int *c = malloc(p.n * sizeof(int)), *g = malloc(p.n * sizeof(int));
    assert_non_null(c);
    assert_non_null(g);
    bk_download(g_cpu, c, p.c, p.n * sizeof(int));
    bk_download(g_gpu, g, p.g, p.n * sizeof(int));
    long sum = 0;
    int same = memcmp(c, g, p.n * sizeof(int)) == 0;
    for (size_t i = 0; i < p.n; i++) sum += c[i];
    printf("  %-48s %s (sum %ld)\n", what, same ? "equal" : "DIFFERENT", sum);
    free(c);
    free(g);
    assert_true(same);
}

// Advantages of P groups of G on both backends; lengths and greedy rewards are random (read
// only by the baselines that need them).
static void group_advantages_case(const char *what, const float *r, int P, int G,
                                  const ObjectiveConfig *oc) {
    Pair rew = pair_from(r, (size_t)P * G), adv = pair_out((size_t)P * G);
    Pair mean = pair_out((size_t)P), std = pair_out((size_t)P);
    int *len_h = malloc((size_t)P * G * sizeof(int));
    float *greedy_h = malloc((size_t)P * sizeof(float));
    fill_ints(len_h, (size_t)P * G, 1450, 1, 200);
    tu_fill_uniform(greedy_h, (size_t)P, 1451, 0, 1);
    IPair len = ipair_from(len_h, (size_t)P * G);
    Pair greedy = pair_from(greedy_h, (size_t)P);
    kn_group_advantages(g_cpu, adv.c, mean.c, std.c, rew.c, len.c, greedy.c, P, G, oc);
    kn_group_advantages(g_gpu, adv.g, mean.g, std.g, rew.g, len.g, greedy.g, P, G, oc);
    char name[96];
    snprintf(name, sizeof name, "group_advantages %s: adv", what);
    check_pair(name, adv, TOL);
    snprintf(name, sizeof name, "group_advantages %s: group mean", what);
    check_pair(name, mean, TOL);
    snprintf(name, sizeof name, "group_advantages %s: group std", what);
    check_pair(name, std, TOL);
    free(len_h);
    free(greedy_h);
    ipair_free(&len);
    pair_free(&greedy);
    pair_free(&rew);
    pair_free(&adv);
    pair_free(&mean);
    pair_free(&std);
}

static void test_group_advantages(void **state) {
    (void)state;
    NEED_GPU();
    // P above the kernel's thread count; 0/1 rewards (some groups all equal) and graded ones
    int P = 300, G = 8;
    float *r01 = malloc((size_t)P * G * sizeof(float)), *rg = malloc((size_t)P * G * sizeof(float));
    tu_fill_uniform(rg, (size_t)P * G, 1400, 0, 1);
    for (int i = 0; i < P * G; i++) r01[i] = rg[i] < 0.3f ? 1.0f : 0.0f;
    ObjectiveConfig grpo = objective("grpo", SCALE_GROUP_STD, 1, 0), dr = objective("dr_grpo", SCALE_NONE, 1, 0);
    ObjectiveConfig rloo = objective("rloo", SCALE_NONE, 1, 0), bstd = objective("dapo", SCALE_BATCH_STD, 0, 0);
    group_advantages_case("grpo 0/1", r01, P, G, &grpo);
    group_advantages_case("grpo graded", rg, P, G, &grpo);
    group_advantages_case("dr_grpo 0/1", r01, P, G, &dr);
    group_advantages_case("rloo graded", rg, P, G, &rloo);
    group_advantages_case("batch std ddof 0", r01, P, G, &bstd);
    group_advantages_case("grpo G=2", rg, P * 4, 2, &grpo);
    // the other baselines and scales of the presets
    const char *more[] = {"opo", "remax", "grpo_passk", "reinforce_pp_baseline", "lite_ppo"};
    for (int k = 0; k < 5; k++) {
        ObjectiveConfig o;
        assert_int_equal(objective_preset(more[k], 40, &o), 0);
        char what[64];
        snprintf(what, sizeof what, "%s 0/1", more[k]);
        group_advantages_case(what, r01, P, G, &o);
        snprintf(what, sizeof what, "%s graded", more[k]);
        group_advantages_case(what, rg, P, G, &o);
    }
    free(r01);
    free(rg);
}

// n responses in the (n,T) layout: random starts and lengths, ratios pi/pi_old in
// [0.67, 1.5] (the clip binds on both sides), some advantages exactly 0; a micro-batch of a
// minibatch of M = 3n responses whose other lengths sum to as much again. with_mask: about one
// token in four is masked (the environment's).
static void token_weights_case(const ObjectiveConfig *oc, int with_ref, int with_mask,
                               uint64_t seed) {
    int n = 37, T = 61, M = 3 * n;
    size_t NT = (size_t)n * T;
    int *start = malloc((size_t)n * sizeof(int)), *len = malloc((size_t)n * sizeof(int));
    float *old = malloc(NT * sizeof(float)), *a = malloc((size_t)n * sizeof(float));
    fill_ints(start, (size_t)n, seed, 0, T / 2);
    fill_ints(len, (size_t)n, seed + 1, 1, T / 2 + 1);
    tu_fill_uniform(a, (size_t)n, seed + 2, -2, 2);
    for (int k = 0; k < n; k += 5) a[k] = 0.0f;
    double sum_len = 0;
    for (int k = 0; k < n; k++) sum_len += 2 * len[k];
    Pair logp = pair_rand(NT, seed + 3, -6, -0.01f), ref = pair_rand(NT, seed + 4, -6, -0.01f);
    float *lp = fetch(g_cpu, logp.c, NT);
    tu_fill_uniform(old, NT, seed + 5, -0.4f, 0.4f);
    for (size_t j = 0; j < NT; j++) old[j] += lp[j];
    Pair lold = pair_from(old, NT), adv = pair_from(a, (size_t)n);
    IPair st = ipair_from(start, (size_t)n), ln = ipair_from(len, (size_t)n);
    unsigned char *mask_h = malloc(NT), *mask_c = NULL, *mask_g = NULL;
    float *mu = malloc(NT * sizeof(float));
    tu_fill_uniform(mu, NT, seed + 6, 0, 1);
    for (size_t j = 0; j < NT; j++) mask_h[j] = mu[j] < 0.25f;
    if (with_mask) {
        mask_c = bk_alloc(g_cpu, NT);
        mask_g = bk_alloc(g_gpu, NT);
        bk_upload(g_cpu, mask_c, mask_h, NT);
        bk_upload(g_gpu, mask_g, mask_h, NT);
    }
    Pair w = pair_out(NT), loss = pair_out(NT), kl = pair_out(NT), coef = pair_out((size_t)n);
    IPair lo = ipair_out((size_t)n), hi = ipair_out((size_t)n);
    kn_token_weights(g_cpu, w.c, loss.c, kl.c, coef.c, lo.c, hi.c, logp.c, lold.c,
                     with_ref ? ref.c : NULL, mask_c, adv.c, st.c, ln.c, n, T, M, sum_len, oc);
    kn_token_weights(g_gpu, w.g, loss.g, kl.g, coef.g, lo.g, hi.g, logp.g, lold.g,
                     with_ref ? ref.g : NULL, mask_g, adv.g, st.g, ln.g, n, T, M, sum_len, oc);
    char what[96];
    printf(" token_weights %s: %s, ratio %s, clip %s, beta %g, %s%s\n", oc->preset,
           aggregation_name(oc->aggregation), ratio_name(oc->ratio), clip_name(oc->clip), oc->beta,
           with_ref ? "pi_ref given" : "no pi_ref", with_mask ? ", environment tokens masked" : "");
    check_pair("token_weights w", w, TOL);
    check_pair("token_weights loss", loss, TOL);
    snprintf(what, sizeof what, "token_weights kl%s", with_ref ? "" : " (all 0)");
    if (with_ref) check_pair(what, kl, TOL_CANCEL);
    else check_pair_zero(what, kl);
    check_pair("token_weights coef", coef, TOL);
    check_ipair_equal("token_weights clip_low counts", lo);
    check_ipair_equal("token_weights clip_high counts", hi);
    // the optional outputs skipped: w alone
    Pair w2 = pair_out(NT);
    kn_token_weights(g_cpu, w2.c, NULL, NULL, NULL, NULL, NULL, logp.c, lold.c,
                     with_ref ? ref.c : NULL, mask_c, adv.c, st.c, ln.c, n, T, M, sum_len, oc);
    kn_token_weights(g_gpu, w2.g, NULL, NULL, NULL, NULL, NULL, logp.g, lold.g,
                     with_ref ? ref.g : NULL, mask_g, adv.g, st.g, ln.g, n, T, M, sum_len, oc);
    check_pair("token_weights w (other outputs NULL)", w2, TOL);
    if (with_mask) {  // the masked tokens are exactly 0 on the device
        float *wg = fetch(g_gpu, w.g, NT), *lg = fetch(g_gpu, loss.g, NT);
        for (int k = 0; k < n; k++)
            for (int t = start[k]; t < start[k] + len[k]; t++) {
                size_t p = (size_t)k * T + (size_t)t;
                if (mask_h[p]) assert_true(wg[p] == 0.0f && lg[p] == 0.0f);
            }
        free(wg);
        free(lg);
        bk_free(g_cpu, mask_c);
        bk_free(g_gpu, mask_g);
    }
    free(mask_h);
    free(mu);
    pair_free(&w2);
    free(start);
    free(len);
    free(old);
    free(a);
    free(lp);
    pair_free(&logp);
    pair_free(&ref);
    pair_free(&lold);
    pair_free(&adv);
    ipair_free(&st);
    ipair_free(&ln);
    pair_free(&w);
    pair_free(&loss);
    pair_free(&kl);
    pair_free(&coef);
    ipair_free(&lo);
    ipair_free(&hi);
}

static void test_token_weights(void **state) {
    (void)state;
    NEED_GPU();
    const char *presets[4] = {"grpo", "dr_grpo", "dapo", "rloo"};
    for (int k = 0; k < 4; k++) {
        ObjectiveConfig oc = objective(presets[k], k == 0 || k == 2 ? SCALE_GROUP_STD : SCALE_NONE, 1, 0);
        token_weights_case(&oc, 0, 0, 1500 + (uint64_t)k * 10);
        token_weights_case(&oc, 0, 1, 1700 + (uint64_t)k * 10);
    }
    ObjectiveConfig kl = objective("grpo", SCALE_GROUP_STD, 1, 0.04f);
    token_weights_case(&kl, 1, 0, 1600);
    token_weights_case(&kl, 0, 0, 1610);
    token_weights_case(&kl, 1, 1, 1620);
    // every other preset (ratio levels, clip styles), and GSPO with a clip wide enough to pass
    for (int k = 4; k < objective_preset_count(); k++) {
        ObjectiveConfig o;
        objective_preset_info(k, &o);
        o.l_max = 40;
        token_weights_case(&o, 0, 0, 1800 + (uint64_t)k * 10);
        token_weights_case(&o, 0, 1, 1900 + (uint64_t)k * 10);
    }
    ObjectiveConfig gspo = objective("gspo", SCALE_GROUP_STD, 1, 0.04f);
    gspo.eps_low = gspo.eps_high = 0.2f;
    token_weights_case(&gspo, 1, 1, 2000);
    ObjectiveConfig sapo = objective("sapo", SCALE_GROUP_STD, 1, 0.04f);
    token_weights_case(&sapo, 1, 1, 2010);
}

// ---------------------------------------------------------------- determinism, empty sizes
// Backward reductions have no atomics: two runs give bit-identical gradients.
static void gpu_twice_equal(const char *what, float *a, float *b, size_t n) {
    float *ha = fetch(g_gpu, a, n), *hb = fetch(g_gpu, b, n);
    int same = memcmp(ha, hb, n * sizeof(float)) == 0;
    printf("  %-48s %s\n", what, same ? "bit-identical" : "DIFFERENT");
    free(ha);
    free(hb);
    assert_true(same);
}

static void test_deterministic_backward(void **state) {
    (void)state;
    NEED_GPU();
    int B = 2, T = 50, NH = 4, NKV = 2, hd = 32, C = 64, V = 40, N = B * T;
    int len_h[] = {50, 31};
    int *tok = malloc((size_t)N * sizeof(int));
    fill_ints(tok, (size_t)N, 1300, 0, V);
    int *len = bk_alloc(g_gpu, sizeof len_h), *dtok = bk_alloc(g_gpu, (size_t)N * sizeof(int));
    bk_upload(g_gpu, len, len_h, sizeof len_h);
    bk_upload(g_gpu, dtok, tok, (size_t)N * sizeof(int));
    size_t nq = (size_t)N * NH * hd, nkv = (size_t)N * NKV * hd, natt = (size_t)B * NH * T * T;
    Pair q = pair_rand(nq, 1301, -1, 1), k = pair_rand(nkv, 1302, -1, 1), v = pair_rand(nkv, 1303, -1, 1);
    Pair dout = pair_rand(nq, 1304, -1, 1), x = pair_rand((size_t)N * C, 1305, -1, 1);
    Pair w = pair_rand((size_t)C, 1306, 0.5f, 1.5f), dxo = pair_rand((size_t)N * C, 1307, -1, 1);
    float *att = bk_alloc(g_gpu, natt * sizeof(float)), *out = bk_alloc(g_gpu, nq * sizeof(float));
    float *rstd = bk_alloc(g_gpu, (size_t)N * sizeof(float));
    float *xn = bk_alloc(g_gpu, (size_t)N * C * sizeof(float));
    kn_attention_forward(g_gpu, out, att, q.g, k.g, v.g, len, B, T, NH, NKV, hd);
    kn_rmsnorm_forward(g_gpu, xn, rstd, x.g, w.g, N, C, 1e-5f);
    float *r[2][6];
    size_t sz[6] = {nq, nkv, nkv, (size_t)C, (size_t)V * C, (size_t)N * C};
    for (int run = 0; run < 2; run++) {
        for (int i = 0; i < 6; i++) {
            r[run][i] = bk_alloc(g_gpu, sz[i] * sizeof(float));
            bk_zero(g_gpu, r[run][i], sz[i] * sizeof(float));
        }
        kn_attention_backward(g_gpu, r[run][0], r[run][1], r[run][2], dout.g, att, q.g, k.g, v.g,
                              len, B, T, NH, NKV, hd);
        kn_rmsnorm_backward(g_gpu, r[run][5], r[run][3], dxo.g, x.g, w.g, rstd, N, C);
        kn_embedding_backward(g_gpu, r[run][4], dxo.g, dtok, N, V, C);
    }
    const char *names[6] = {"attention dq", "attention dk", "attention dv", "rmsnorm dweight",
                            "embedding dwte", "rmsnorm dinp"};
    for (int i = 0; i < 6; i++) gpu_twice_equal(names[i], r[0][i], r[1][i], sz[i]);
    for (int run = 0; run < 2; run++)
        for (int i = 0; i < 6; i++) bk_free(g_gpu, r[run][i]);
    free(tok);
    bk_free(g_gpu, len);
    bk_free(g_gpu, dtok);
    bk_free(g_gpu, att);
    bk_free(g_gpu, out);
    bk_free(g_gpu, rstd);
    bk_free(g_gpu, xn);
    pair_free(&q);
    pair_free(&k);
    pair_free(&v);
    pair_free(&dout);
    pair_free(&x);
    pair_free(&w);
    pair_free(&dxo);
}

// Zero-sized calls launch nothing (a grid of 0 blocks would be a launch error).
static void test_empty_sizes(void **state) {
    (void)state;
    NEED_GPU();
    float *f = bk_alloc(g_gpu, 1024 * sizeof(float));
    int *i = bk_alloc(g_gpu, 64 * sizeof(int));
    uint64_t *u = bk_alloc(g_gpu, 64 * sizeof(uint64_t));
    kn_add(g_gpu, f, f, f, 0);
    kn_scale(g_gpu, f, 2.0f, 0);
    kn_embedding_forward(g_gpu, f, i, f, 0, 8);
    kn_embedding_backward(g_gpu, f, f, i, 0, 4, 8);
    kn_rmsnorm_forward(g_gpu, f, f, f, f, 0, 8, 1e-5f);
    kn_rmsnorm_backward(g_gpu, f, f, f, f, f, f, 0, 8);
    kn_matmul_forward(g_gpu, f, f, f, 0, 8, 8);
    kn_matmul_backward(g_gpu, f, f, f, f, f, 0, 8, 8);
    kn_rope_forward(g_gpu, f, i, 0, 2, 8, 10000.0f);
    kn_rope_backward(g_gpu, f, i, 0, 2, 8, 10000.0f);
    kn_attention_forward(g_gpu, f, f, f, f, f, i, 0, 4, 2, 1, 8);
    kn_attention_backward(g_gpu, f, f, f, f, f, f, f, f, i, 0, 4, 2, 1, 8);
    kn_kv_store(g_gpu, f, f, i, i, 0, 1, 4, 8);
    kn_attention_decode(g_gpu, f, f, f, f, i, NULL, NULL, 0, 4, 2, 1, 8);
    kn_swiglu_forward(g_gpu, f, f, f, 0);
    kn_swiglu_backward(g_gpu, f, f, f, f, f, 0);
    kn_logprob_forward(g_gpu, f, f, f, f, f, i, 0, 8, 8);
    kn_logprob_backward(g_gpu, f, f, f, f, f, f, i, f, 0, 8, 8);
    kn_sample(g_gpu, i, f, f, 0, 8, 1.0f, 0.9f, 1, u);
    assert_true(kn_sum_squares(g_gpu, f, 0) == 0.0);
    kn_adamw_update(g_gpu, f, f, f, f, 0, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 1);
    ObjectiveConfig oc = objective("grpo", SCALE_GROUP_STD, 1, 0);
    kn_group_advantages(g_gpu, f, f, f, f, i, f, 0, 4, &oc);
    kn_token_weights(g_gpu, f, f, f, f, i, i, f, f, f, NULL, f, i, i, 0, 8, 1, 1.0, &oc);
    bk_sync(g_gpu);
    bk_free(g_gpu, f);
    bk_free(g_gpu, i);
    bk_free(g_gpu, u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_add_scale, setup),
        cmocka_unit_test_setup(test_swiglu, setup),
        cmocka_unit_test_setup(test_embedding, setup),
        cmocka_unit_test_setup(test_rmsnorm, setup),
        cmocka_unit_test_setup(test_matmul, setup),
        cmocka_unit_test_setup(test_matmul_tf32, setup),
        cmocka_unit_test_setup(test_rope, setup),
        cmocka_unit_test_setup(test_attention, setup),
        cmocka_unit_test_setup(test_kv_store, setup),
        cmocka_unit_test_setup(test_attention_decode, setup),
        cmocka_unit_test_setup(test_logprob, setup),
        cmocka_unit_test_setup(test_sample, setup),
        cmocka_unit_test_setup(test_sum_squares, setup),
        cmocka_unit_test_setup(test_adamw, setup),
        cmocka_unit_test_setup(test_group_advantages, setup),
        cmocka_unit_test_setup(test_token_weights, setup),
        cmocka_unit_test_setup(test_deterministic_backward, setup),
        cmocka_unit_test_setup(test_empty_sizes, setup),
    };
    size_t ntests = sizeof tests / sizeof tests[0];
    char why[512] = "";
    if (tu_parity_wanted(why, sizeof why)) {
        char err[512] = "";
        g_cpu = backend_create(BACKEND_CPU, err, sizeof err);
        if (g_cpu) g_gpu = tu_parity_backend(err, sizeof err);
        if (!g_cpu || !g_gpu) {
            fprintf(stderr, "test_cuda_parity: cannot create the backends: %s\n", err);
            return 1;
        }
    } else {
        const char *reason = why;  // the backend's message may already say "no CUDA device: "
        if (strncmp(reason, "no CUDA device: ", 16) == 0) reason += 16;
        printf("no CUDA device (%s): skipping %zu parity tests\n", reason, ntests);
        fflush(stdout);
    }
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    backend_destroy(g_gpu);
    backend_destroy(g_cpu);
    return failed;
}

#else  // built without nvcc

static void test_cuda_not_built(void **state) {
    (void)state;
    printf("CUDA backend not built (no nvcc): skipping parity tests\n");
    fflush(stdout);
    skip();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cuda_not_built)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
