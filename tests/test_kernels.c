// test_kernels.c: the CPU reference ops of kernels.h, one by one.
//   - every backward against central finite differences of its own forward, on a scalar
//     loss L = sum(out * R) for a fixed random R (L in double, the op in float);
//   - every backward accumulates (+=) (SwiGLU's writes), and skips a NULL gradient output;
//   - forwards against naive double-precision references written here;
//   - KV cache + decoding step against the training attention; AdamW against numbers
//     worked out by hand; sampling (greedy, temperature, top-p, frequencies);
//   - reductions give bitwise the same result on 1 and 2 threads.
// The CPU backend's "device pointers" are host memory, so buffers here are plain calloc.
#include <math.h>
#include <omp.h>
#include <string.h>

#include "common.h"
#include "kernels/kernels.h"
#include "test_util.h"

static Backend *bk;

// ---- helpers

static float *fnew(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    return p;
}

static float *frand(size_t n, uint64_t seed, float lo, float hi) {
    float *p = fnew(n);
    tu_fill_uniform(p, n, seed, lo, hi);
    return p;
}

static float *fcopy(const float *x, size_t n) {
    float *p = fnew(n);
    memcpy(p, x, n * sizeof(float));
    return p;
}

static double dot_d(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

static int all_zero(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0.0f) return 0;
    return 1;
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static void check(const char *op, const char *what, double e, double tol) {
    char label[256];
    snprintf(label, sizeof label, "%s %s", op, what);
    tu_check_rel(label, e, tol);
}

// ---- generic gradient check
// loss(ctx) runs the forward at the current parameters and returns L = sum(out*R);
// backward(ctx, grads) accumulates dL/dparam[i] into grads[i] (NULL: not needed).

enum { GC_MAX = 4 };

typedef struct {
    const char *op;
    int nparam;
    const char *name[GC_MAX];
    float *param[GC_MAX];
    size_t size[GC_MAX];
    double (*loss)(void *ctx);
    void (*backward)(void *ctx, float **grads);
    void *ctx;
    int accumulates;  // 1: +=; 0: rope_backward's in-place transform; -1: writes (=), swiglu
} GradCheck;

static void grad_check(const GradCheck *gc, float h, double tol) {
    float *ana[GC_MAX] = {0}, *fd[GC_MAX] = {0};
    for (int i = 0; i < gc->nparam; i++) {
        ana[i] = fnew(gc->size[i]);
        fd[i] = fnew(gc->size[i]);
    }
    gc->backward(gc->ctx, ana);
    char what[96];
    for (int i = 0; i < gc->nparam; i++) {
        float *x = gc->param[i];
        for (size_t j = 0; j < gc->size[i]; j++) {
            float x0 = x[j], xp = x0 + h, xm = x0 - h;
            x[j] = xp;
            double lp = gc->loss(gc->ctx);
            x[j] = xm;
            double lm = gc->loss(gc->ctx);
            x[j] = x0;
            fd[i][j] = (float)((lp - lm) / ((double)xp - (double)xm));
        }
        snprintf(what, sizeof what, "d%s vs finite differences", gc->name[i]);
        check(gc->op, what, tu_rel_err(ana[i], fd[i], gc->size[i]), tol);
    }
    if (gc->accumulates) {
        // starting from G0, two calls give G0 + 2 g (+=), or g (=)
        float *acc[GC_MAX] = {0}, *want[GC_MAX] = {0};
        for (int i = 0; i < gc->nparam; i++) {
            acc[i] = frand(gc->size[i], 900 + (uint64_t)i, -1, 1);
            want[i] = fnew(gc->size[i]);
            for (size_t j = 0; j < gc->size[i]; j++)
                want[i][j] = gc->accumulates > 0 ? acc[i][j] + 2.0f * ana[i][j] : ana[i][j];
        }
        gc->backward(gc->ctx, acc);
        gc->backward(gc->ctx, acc);
        for (int i = 0; i < gc->nparam; i++) {
            snprintf(what, sizeof what, gc->accumulates > 0 ? "d%s accumulates (G0 + 2 g)" : "d%s overwrites G0",
                     gc->name[i]);
            check(gc->op, what, tu_rel_err(acc[i], want[i], gc->size[i]), 1e-6);
            free(acc[i]);
            free(want[i]);
        }
    }
    if (gc->nparam > 1) {
        // each gradient alone (the others NULL) is the same gradient
        for (int i = 0; i < gc->nparam; i++) {
            float *only[GC_MAX] = {0};
            only[i] = fnew(gc->size[i]);
            gc->backward(gc->ctx, only);
            snprintf(what, sizeof what, "d%s alone (others NULL)", gc->name[i]);
            check(gc->op, what, tu_rel_err(only[i], ana[i], gc->size[i]), 1e-6);
            free(only[i]);
        }
    }
    for (int i = 0; i < gc->nparam; i++) {
        free(ana[i]);
        free(fd[i]);
    }
}

// ---- elementwise

static void test_add_scale(void **state) {
    enum { n = 10007 };
    float *x = frand(n, 1, -1, 1), *y = frand(n, 2, -1, 1), *out = fnew(n);
    kn_add(bk, out, x, y, n);
    for (int i = 0; i < n; i++) assert_true(out[i] == x[i] + y[i]);
    kn_add(bk, x, x, y, n);  // aliasing
    assert_memory_equal(x, out, n * sizeof(float));
    kn_scale(bk, out, -0.5f, n);
    for (int i = 0; i < n; i++) assert_true(out[i] == x[i] * -0.5f);
    free(x);
    free(y);
    free(out);
}

// ---- embedding

typedef struct {
    const int *tokens;
    int N, V, C;
    float *wte, *out, *R;
} EmbCtx;

static double emb_loss(void *p) {
    EmbCtx *c = p;
    kn_embedding_forward(bk, c->out, c->tokens, c->wte, c->N, c->C);
    return dot_d(c->out, c->R, (size_t)c->N * c->C);
}
static void emb_backward(void *p, float **g) {
    EmbCtx *c = p;
    kn_embedding_backward(bk, g[0], c->R, c->tokens, c->N, c->V, c->C);
}

static void test_embedding(void **state) {
    enum { N = 9, V = 6, C = 37 };
    const int tokens[N] = {3, 0, 5, 3, 3, 1, 0, 5, 2};  // repeats; token 4 unused
    EmbCtx c = {tokens, N, V, C, frand(V * C, 3, -1, 1), fnew(N * C), frand(N * C, 4, -1, 1)};
    kn_embedding_forward(bk, c.out, tokens, c.wte, N, C);
    for (int n = 0; n < N; n++)
        assert_memory_equal(c.out + n * C, c.wte + tokens[n] * C, C * sizeof(float));
    GradCheck gc = {"embedding", 1, {"wte"}, {c.wte}, {V * C}, emb_loss, emb_backward, &c, 1};
    grad_check(&gc, 1e-2f, 1e-4);
    float *d = fnew(V * C);
    kn_embedding_backward(bk, d, c.R, tokens, N, V, C);
    assert_true(all_zero(d + 4 * C, C));  // an unused token gets no gradient
    free(d);
    free(c.wte);
    free(c.out);
    free(c.R);
}

// ---- rmsnorm

typedef struct {
    int N, C;
    float eps;
    float *inp, *w, *out, *rstd, *R;
} RmsCtx;

static double rms_loss(void *p) {
    RmsCtx *c = p;
    kn_rmsnorm_forward(bk, c->out, c->rstd, c->inp, c->w, c->N, c->C, c->eps);
    return dot_d(c->out, c->R, (size_t)c->N * c->C);
}
static void rms_backward(void *p, float **g) {
    RmsCtx *c = p;
    kn_rmsnorm_forward(bk, c->out, c->rstd, c->inp, c->w, c->N, c->C, c->eps);
    kn_rmsnorm_backward(bk, g[0], g[1], c->R, c->inp, c->w, c->rstd, c->N, c->C);
}

static void test_rmsnorm(void **state) {
    enum { N = 7, C = 9 };
    RmsCtx c = {N, C, 1e-5f, frand(N * C, 5, -1, 1), frand(C, 6, 0.5f, 1.5f), fnew(N * C),
                fnew(N), frand(N * C, 7, -1, 1)};
    // forward vs naive double
    kn_rmsnorm_forward(bk, c.out, c.rstd, c.inp, c.w, N, C, c.eps);
    float ref[N * C], rref[N];
    for (int n = 0; n < N; n++) {
        double ss = 0;
        for (int j = 0; j < C; j++) ss += (double)c.inp[n * C + j] * c.inp[n * C + j];
        double r = 1.0 / sqrt(ss / C + c.eps);
        rref[n] = (float)r;
        for (int j = 0; j < C; j++) ref[n * C + j] = (float)(c.inp[n * C + j] * r * c.w[j]);
    }
    check("rmsnorm", "forward vs naive", tu_rel_err(c.out, ref, N * C), 1e-6);
    check("rmsnorm", "rstd vs naive", tu_rel_err(c.rstd, rref, N), 1e-6);
    GradCheck gc = {"rmsnorm",    2, {"inp", "weight"}, {c.inp, c.w}, {N * C, C},
                    rms_loss, rms_backward, &c, 1};
    grad_check(&gc, 1e-2f, 1e-2);
    free(c.inp);
    free(c.w);
    free(c.out);
    free(c.rstd);
    free(c.R);
}

// ---- matmul

typedef struct {
    int N, C, OC;
    float *inp, *w, *out, *R;
} MmCtx;

static double mm_loss(void *p) {
    MmCtx *c = p;
    kn_matmul_forward(bk, c->out, c->inp, c->w, c->N, c->C, c->OC);
    return dot_d(c->out, c->R, (size_t)c->N * c->OC);
}
static void mm_backward(void *p, float **g) {
    MmCtx *c = p;
    kn_matmul_backward(bk, g[0], g[1], c->R, c->inp, c->w, c->N, c->C, c->OC);
}

static void test_matmul(void **state) {
    enum { N = 11, C = 7, OC = 5 };
    MmCtx c = {N, C, OC, frand(N * C, 8, -1, 1), frand(OC * C, 9, -1, 1), fnew(N * OC),
               frand(N * OC, 10, -1, 1)};
    // out is overwritten, not accumulated
    for (int i = 0; i < N * OC; i++) c.out[i] = 1e6f;
    kn_matmul_forward(bk, c.out, c.inp, c.w, N, C, OC);
    float ref[N * OC];
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = 0;
            for (int j = 0; j < C; j++) s += (double)c.inp[n * C + j] * c.w[o * C + j];
            ref[n * OC + o] = (float)s;
        }
    check("matmul", "forward vs naive", tu_rel_err(c.out, ref, N * OC), 1e-6);
    // forward_add adds the product to what out holds
    float *base = frand(N * OC, 11, -1, 1), added[N * OC];
    memcpy(c.out, base, sizeof added);
    kn_matmul_forward_add(bk, c.out, c.inp, c.w, N, C, OC);
    for (int i = 0; i < N * OC; i++) added[i] = (float)((double)base[i] + ref[i]);
    check("matmul", "forward_add vs naive", tu_rel_err(c.out, added, N * OC), 1e-6);
    free(base);
    GradCheck gc = {"matmul", 2, {"inp", "weight"}, {c.inp, c.w}, {N * C, OC * C},
                    mm_loss, mm_backward, &c, 1};
    grad_check(&gc, 1e-2f, 1e-4);
    free(c.inp);
    free(c.w);
    free(c.out);
    free(c.R);
}

// ---- rope

typedef struct {
    const int *pos;
    int N, NH, hd;
    float theta;
    float *x, *out, *R;
} RopeCtx;

static double rope_loss(void *p) {
    RopeCtx *c = p;
    size_t n = (size_t)c->N * c->NH * c->hd;
    memcpy(c->out, c->x, n * sizeof(float));
    kn_rope_forward(bk, c->out, c->pos, c->N, c->NH, c->hd, c->theta);
    return dot_d(c->out, c->R, n);
}
static void rope_backward(void *p, float **g) {
    RopeCtx *c = p;
    size_t n = (size_t)c->N * c->NH * c->hd;
    float *d = fcopy(c->R, n);
    kn_rope_backward(bk, d, c->pos, c->N, c->NH, c->hd, c->theta);
    for (size_t i = 0; i < n; i++) g[0][i] += d[i];
    free(d);
}

static void test_rope(void **state) {
    enum { N = 6, NH = 3, hd = 8 };
    const int pos[N] = {0, 1, 2, 7, 31, 100};
    const size_t n = N * NH * hd;
    RopeCtx c = {pos, N, NH, hd, 10000.0f, frand(n, 11, -1, 1), fnew(n), frand(n, 12, -1, 1)};
    // forward vs the rotate-half formula in double
    float *y = fcopy(c.x, n), ref[N * NH * hd];
    kn_rope_forward(bk, y, pos, N, NH, hd, c.theta);
    for (int r = 0; r < N; r++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < hd / 2; i++) {
                double a = pos[r] * pow(c.theta, -2.0 * i / hd);
                const float *x = c.x + (r * NH + h) * hd;
                float *o = ref + (r * NH + h) * hd;
                o[i] = (float)(x[i] * cos(a) - x[i + hd / 2] * sin(a));
                o[i + hd / 2] = (float)(x[i] * sin(a) + x[i + hd / 2] * cos(a));
            }
    check("rope", "forward vs naive", tu_rel_err(y, ref, n), 1e-5);
    // position 0 is the identity
    assert_memory_equal(y, c.x, NH * hd * sizeof(float));
    // backward is the inverse rotation: forward then backward returns x
    kn_rope_backward(bk, y, pos, N, NH, hd, c.theta);
    check("rope", "backward(forward(x)) = x", tu_rel_err(y, c.x, n), 1e-6);
    GradCheck gc = {"rope", 1, {"x"}, {c.x}, {n}, rope_loss, rope_backward, &c, 0};
    grad_check(&gc, 1e-2f, 1e-4);
    // other head sizes, theta and position ranges (the CPU op caches cos/sin per
    // (theta, hd) for positions 0..65535 and computes the others): each against the
    // formula with the angle formed in float32 as Hugging Face does (at position 70000
    // that rounding is ~4e-3 rad, the double-precision angle would not match)
    const struct {
        int hd;
        float theta;
        int pos0;
    } more[] = {{6, 500.0f, 0},   {8, 10000.0f, 250}, {8, 10000.0f, -3},
                {4, 1e6f, 40},    {8, 10000.0f, 70000}};
    for (size_t m = 0; m < sizeof more / sizeof more[0]; m++) {
        int mhd = more[m].hd, mpos[N];
        for (int r = 0; r < N; r++) mpos[r] = more[m].pos0 + 3 * r;
        size_t mn = (size_t)N * NH * mhd;
        float *mx = frand(mn, 13 + m, -1, 1), *my = fcopy(mx, mn), *mref = fnew(mn);
        kn_rope_forward(bk, my, mpos, N, NH, mhd, more[m].theta);
        for (int r = 0; r < N; r++)
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < mhd / 2; i++) {
                    float inv_freq = 1.0f / powf(more[m].theta, (float)(2 * i) / (float)mhd);
                    double a = (float)mpos[r] * inv_freq;
                    const float *x = mx + (r * NH + h) * mhd;
                    float *o = mref + (r * NH + h) * mhd;
                    o[i] = (float)(x[i] * cos(a) - x[i + mhd / 2] * sin(a));
                    o[i + mhd / 2] = (float)(x[i] * sin(a) + x[i + mhd / 2] * cos(a));
                }
        char what[64];
        snprintf(what, sizeof what, "forward vs naive (hd %d, theta %g, pos %d..)", mhd,
                 more[m].theta, more[m].pos0);
        check("rope", what, tu_rel_err(my, mref, mn), 1e-5);
        free(mx);
        free(my);
        free(mref);
    }
    free(y);
    free(c.x);
    free(c.out);
    free(c.R);
}

// ---- attention

typedef struct {
    const int *lengths;
    int B, T, NH, NKV, hd;
    float *q, *k, *v, *out, *att, *R;
} AttCtx;

static double att_loss(void *p) {
    AttCtx *c = p;
    kn_attention_forward(bk, c->out, c->att, c->q, c->k, c->v, c->lengths, c->B, c->T, c->NH,
                         c->NKV, c->hd);
    return dot_d(c->out, c->R, (size_t)c->B * c->T * c->NH * c->hd);
}
static void att_backward(void *p, float **g) {
    AttCtx *c = p;
    kn_attention_forward(bk, c->out, c->att, c->q, c->k, c->v, c->lengths, c->B, c->T, c->NH,
                         c->NKV, c->hd);
    kn_attention_backward(bk, g[0], g[1], g[2], c->R, c->att, c->q, c->k, c->v, c->lengths,
                          c->B, c->T, c->NH, c->NKV, c->hd);
}

// Naive causal GQA attention in double: out (B,T,NH,hd), att (B,NH,T,T).
static void att_reference(float *out, float *att, const AttCtx *c) {
    int B = c->B, T = c->T, NH = c->NH, NKV = c->NKV, hd = c->hd;
    memset(out, 0, sizeof(float) * B * T * NH * hd);
    memset(att, 0, sizeof(float) * B * NH * T * T);
    double *sc = calloc(T, sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int kh = h / (NH / NKV);
            for (int t = 0; t < c->lengths[b]; t++) {
                const float *q = c->q + ((b * T + t) * NH + h) * hd;
                double mx = -INFINITY, sum = 0;
                for (int s = 0; s <= t; s++) {
                    const float *k = c->k + ((b * T + s) * NKV + kh) * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += (double)q[i] * k[i];
                    sc[s] = d / sqrt((double)hd);
                    mx = fmax(mx, sc[s]);
                }
                for (int s = 0; s <= t; s++) sum += exp(sc[s] - mx);
                for (int s = 0; s <= t; s++) {
                    double pr = exp(sc[s] - mx) / sum;
                    att[((b * NH + h) * T + t) * T + s] = (float)pr;
                    const float *v = c->v + ((b * T + s) * NKV + kh) * hd;
                    float *o = out + ((b * T + t) * NH + h) * hd;
                    for (int i = 0; i < hd; i++) o[i] += (float)(pr * v[i]);
                }
            }
        }
    free(sc);
}

static void attention_case(int B, int T, int NH, int NKV, int hd, const int *lengths,
                           uint64_t seed) {
    char op[96];
    snprintf(op, sizeof op, "attention B%d T%d NH%d NKV%d hd%d", B, T, NH, NKV, hd);
    size_t nq = (size_t)B * T * NH * hd, nkv = (size_t)B * T * NKV * hd,
           natt = (size_t)B * NH * T * T;
    AttCtx c = {lengths, B, T, NH, NKV, hd, frand(nq, seed, -1, 1), frand(nkv, seed + 1, -1, 1),
                frand(nkv, seed + 2, -1, 1), fnew(nq), fnew(natt), frand(nq, seed + 3, -1, 1)};
    // forward vs naive; stale values in out/att must be overwritten (padding rows zero)
    for (size_t i = 0; i < nq; i++) c.out[i] = 7.0f;
    for (size_t i = 0; i < natt; i++) c.att[i] = 7.0f;
    kn_attention_forward(bk, c.out, c.att, c.q, c.k, c.v, lengths, B, T, NH, NKV, hd);
    float *ref = fnew(nq), *aref = fnew(natt);
    att_reference(ref, aref, &c);
    check(op, "forward out vs naive", tu_rel_err(c.out, ref, nq), 1e-5);
    check(op, "forward att vs naive", tu_rel_err(c.att, aref, natt), 1e-5);
    for (int b = 0; b < B; b++)
        for (int t = lengths[b]; t < T; t++) {
            assert_true(all_zero(c.out + (size_t)(b * T + t) * NH * hd, (size_t)NH * hd));
            for (int h = 0; h < NH; h++)
                assert_true(all_zero(c.att + ((size_t)(b * NH + h) * T + t) * T, T));
        }
    GradCheck gc = {op,       3, {"q", "k", "v"}, {c.q, c.k, c.v}, {nq, nkv, nkv},
                    att_loss, att_backward, &c, 1};
    grad_check(&gc, 1e-2f, 1e-2);

    // padding is never read: NaN in q/k/v/dout rows t >= length changes nothing
    float *g[3] = {fnew(nq), fnew(nkv), fnew(nkv)};
    att_backward(&c, g);
    float *q2 = fcopy(c.q, nq), *k2 = fcopy(c.k, nkv), *v2 = fcopy(c.v, nkv),
          *R2 = fcopy(c.R, nq);
    for (int b = 0; b < B; b++)
        for (int t = lengths[b]; t < T; t++) {
            for (int i = 0; i < NH * hd; i++)
                q2[(size_t)(b * T + t) * NH * hd + i] = R2[(size_t)(b * T + t) * NH * hd + i] =
                    NAN;
            for (int i = 0; i < NKV * hd; i++)
                k2[(size_t)(b * T + t) * NKV * hd + i] = v2[(size_t)(b * T + t) * NKV * hd + i] =
                    NAN;
        }
    AttCtx c2 = c;
    c2.q = q2;
    c2.k = k2;
    c2.v = v2;
    c2.R = R2;
    float *g2[3] = {fnew(nq), fnew(nkv), fnew(nkv)};
    att_backward(&c2, g2);
    assert_true(all_finite(c2.out, nq));
    check(op, "NaN in padding: out unchanged", tu_rel_err(c2.out, c.out, nq), 0);
    check(op, "NaN in padding: dq unchanged", tu_rel_err(g2[0], g[0], nq), 0);
    check(op, "NaN in padding: dk unchanged", tu_rel_err(g2[1], g[1], nkv), 0);
    check(op, "NaN in padding: dv unchanged", tu_rel_err(g2[2], g[2], nkv), 0);
    for (int i = 0; i < 3; i++) {
        free(g[i]);
        free(g2[i]);
    }
    free(q2);
    free(k2);
    free(v2);
    free(R2);
    free(ref);
    free(aref);
    free(c.q);
    free(c.k);
    free(c.v);
    free(c.out);
    free(c.att);
    free(c.R);
}

static void test_attention(void **state) {
    const int len_a[2] = {7, 4};
    attention_case(2, 7, 3, 1, 6, len_a, 20);  // GQA 3:1, odd T, hd 6, padding
    const int len_b[3] = {5, 1, 3};
    attention_case(3, 5, 4, 2, 8, len_b, 30);  // GQA 2:1, a single-token sequence
    const int len_c[1] = {1};
    attention_case(1, 1, 2, 2, 4, len_c, 40);  // T = 1
    const int len_d[2] = {0, 6};
    attention_case(2, 6, 2, 2, 4, len_d, 50);  // plain MHA, an empty sequence
    // sequences of 64 tokens or more at head sizes 32 and 64 take cpu_ops.c's own products
    const int len_e[1] = {66};
    attention_case(1, 68, 2, 1, 32, len_e, 60);  // tiles of 8 rows, 2 rows left over, padding
    const int len_f[1] = {65};
    attention_case(1, 65, 1, 1, 64, len_f, 70);  // tiles of 4 rows and 1 left over
}

// The attention's vector paths (own products of sequences of 64 tokens or more, 16
// exponentials at a time) compute the sums of their scalar loops in the same order, so they
// equal them bit for bit: forward and backward, head sizes 32 and 64, sequences longer and
// shorter than 64 in one batch, scores wide enough that some exponentials flush to 0.
static void test_attention_vector_matches_scalar(void **state) {
    const struct {
        int B, T, NH, NKV, hd, len[3];
    } cases[] = {{3, 150, 4, 2, 32, {150, 64, 97}}, {2, 100, 2, 1, 64, {100, 63}}, {1, 75, 2, 2, 32, {71}}};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        int B = cases[ci].B, T = cases[ci].T, NH = cases[ci].NH, NKV = cases[ci].NKV, hd = cases[ci].hd;
        size_t nq = (size_t)B * T * NH * hd, nkv = (size_t)B * T * NKV * hd, natt = (size_t)B * NH * T * T;
        float *q = frand(nq, 110 + ci, -12, 12), *k = frand(nkv, 120 + ci, -12, 12);
        float *v = frand(nkv, 130 + ci, -1, 1), *dout = frand(nq, 140 + ci, -1, 1);
        float *out[2], *att[2], *dq[2], *dk[2], *dv[2];
        for (int path = 0; path < 2; path++) {  // 0: vector paths, 1: scalar loops
            out[path] = fnew(nq);
            att[path] = fnew(natt);
            dq[path] = fnew(nq);
            dk[path] = fnew(nkv);
            dv[path] = fnew(nkv);
            bk->paths.attention_vector = path == 0 ? 2 : 0;
            kn_attention_forward(bk, out[path], att[path], q, k, v, cases[ci].len, B, T, NH, NKV, hd);
            kn_attention_backward(bk, dq[path], dk[path], dv[path], dout, att[path], q, k, v,
                                  cases[ci].len, B, T, NH, NKV, hd);
        }
        bk->paths.attention_vector = 2;
        assert_memory_equal(out[0], out[1], nq * sizeof(float));
        assert_memory_equal(att[0], att[1], natt * sizeof(float));
        assert_memory_equal(dq[0], dq[1], nq * sizeof(float));
        assert_memory_equal(dk[0], dk[1], nkv * sizeof(float));
        assert_memory_equal(dv[0], dv[1], nkv * sizeof(float));
        size_t flushed = 0;  // probabilities on or below the diagonal that are 0
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < cases[ci].len[b]; t++)
                    for (int s2 = 0; s2 <= t; s2++)
                        flushed += att[0][(((size_t)b * NH + h) * T + t) * T + s2] == 0.0f;
        assert_true(flushed > 0);
        for (int path = 0; path < 2; path++) {
            free(out[path]);
            free(att[path]);
            free(dq[path]);
            free(dk[path]);
            free(dv[path]);
        }
        free(q);
        free(k);
        free(v);
        free(dout);
    }
#ifdef __AVX512F__
    printf("  attention vector paths = scalar loops, bit for bit (hd 32 and 64, lengths 63..150)\n");
#else
    printf("  (built without AVX-512: the attention has no vector paths to compare here)\n");
#endif
}

// ---- KV cache + decoding step

// The decode's own products (kn_decode_matmul, on weights packed by kn_decode_pack) give
// every entry as a chain of fused multiply-adds from 0 in the inner dimension's order, bit
// for bit, whatever the row count: rows 1 to 21 (whole tiles of 8 and remainders), output
// sizes around the packed panels' 16-float vectors and 48-float panels, inner sizes 1 to 344.
// On 1 and 2 threads. Where the machine's OpenBLAS sums so (kn_decode_rows_free), a
// product of 64 rows also equals cblas_sgemm's.
static void test_decode_matmul_is_fma_chain(void **state) {
    const int outs[] = {1, 13, 16, 17, 47, 48, 49, 58, 64, 100, 128, 344}, ins[] = {1, 5, 16, 128, 344};
    int saved = omp_get_max_threads();
    long checked = 0;
    for (size_t oi = 0; oi < sizeof outs / sizeof *outs; oi++)
        for (size_t ii = 0; ii < sizeof ins / sizeof *ins; ii++) {
            int OC = outs[oi], C = ins[ii], NMAX = 21;
            float *a = xmalloc((size_t)NMAX * C * sizeof(float)), *w = xmalloc((size_t)OC * C * sizeof(float));
            float *wp = xmalloc(kn_decode_packed_floats(bk, C, OC) * sizeof(float));
            float *o = xmalloc((size_t)NMAX * OC * sizeof(float));
            tu_fill_uniform(a, (size_t)NMAX * C, 71 + OC, -2, 2);
            tu_fill_uniform(w, (size_t)OC * C, 72 + C, -0.5f, 0.5f);
            kn_decode_pack(bk, wp, w, C, OC);
            for (int threads = 1; threads <= 2; threads++) {
                omp_set_num_threads(threads);
                for (int n = 1; n <= NMAX; n++) {
                    memset(o, 0xff, (size_t)NMAX * OC * sizeof(float));
                    kn_decode_matmul(bk, o, a, wp, n, C, OC);
                    for (int r = 0; r < n; r++)
                        for (int j = 0; j < OC; j++) {
                            float acc = 0.0f;
                            for (int k = 0; k < C; k++) acc = fmaf(a[(size_t)r * C + k], w[(size_t)j * C + k], acc);
                            if (memcmp(&acc, &o[(size_t)r * OC + j], sizeof acc) != 0)
                                fail_msg("OC %d C %d, %d rows: out[%d][%d] = %.9g, the chain gives %.9g", OC,
                                         C, n, r, j, o[(size_t)r * OC + j], acc);
                            checked++;
                        }
                    // rows past n are not written
                    for (size_t i = (size_t)n * OC; i < (size_t)NMAX * OC; i++) {
                        uint32_t bits;
                        memcpy(&bits, &o[i], sizeof bits);
                        assert_int_equal(bits, 0xffffffffu);
                    }
                }
            }
            free(a), free(w), free(wp), free(o);
        }
    omp_set_num_threads(saved);
    printf("  %ld entries equal their chains; OpenBLAS sums 128 x 128 and 344 x 128 so here: %d, %d\n",
           checked, kn_decode_rows_free(bk, 128, 128), kn_decode_rows_free(bk, 344, 128));
}

// The decode's vector paths (head sizes 32 and 64; 256-bit, and 512-bit where the build has
// AVX-512) compute their scores and value sums in the order of its scalar loops (cpu_ops.c,
// dot_lanes8), so they equal them bit for bit: keys with exact zeros of both signs, every
// position count from 1 to 70 (whole blocks of 8 and remainders), GQA groups of 1 to 4, and
// head counts that the 512-bit value sums take in one pass (up to 256 floats) or not.
static void test_decode_vector_matches_scalar(void **state) {
    const int shapes[][3] = {{4, 2, 32}, {4, 1, 32}, {4, 4, 32}, {8, 2, 64}, {2, 2, 64}, {4, 2, 16},
                             {8, 4, 32}, {6, 3, 32}, {3, 1, 64}, {16, 8, 32}};
    enum { B = 70, Tmax = 72 };
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int NH = shapes[si][0], NKV = shapes[si][1], hd = shapes[si][2];
        size_t W = (size_t)NKV * hd, nq = (size_t)B * NH * hd;
        float *q = frand(nq, 70 + si, -2, 2), *kc = frand((size_t)B * Tmax * W, 80 + si, -2, 2);
        float *vc = frand((size_t)B * Tmax * W, 90 + si, -1, 1), *o[3];
        for (size_t i = 0; i < (size_t)B * Tmax * W; i += 7) kc[i] = (i / 7) % 2 ? 0.0f : -0.0f;
        int pos[B];
        for (int b = 0; b < B; b++) pos[b] = b;  // row b attends to b + 1 positions
        for (int level = 0; level < 3; level++) {  // scalar, 256-bit, widest
            o[level] = fnew(nq);
            bk->paths.attention_vector = level;
            kn_attention_decode(bk, o[level], q, kc, vc, pos, NULL, NULL, B, Tmax, NH, NKV, hd);
        }
        bk->paths.attention_vector = 2;
        assert_memory_equal(o[1], o[0], nq * sizeof(float));
        assert_memory_equal(o[2], o[0], nq * sizeof(float));
        free(q);
        free(kc);
        free(vc);
        for (int level = 0; level < 3; level++) free(o[level]);
    }
    printf("  attention_decode vector paths = scalar loops, bit for bit (10 shapes, 1..70 positions)\n");
}

static void test_kv_decode(void **state) {
    enum { B = 3, T = 6, Tmax = 9, NH = 4, NKV = 2, hd = 6 };
    const int lengths[B] = {6, 2, 4};
    const size_t nq = B * T * NH * hd, nkv = B * T * NKV * hd, W = NKV * hd;
    float *q = frand(nq, 60, -1, 1), *k = frand(nkv, 61, -1, 1), *v = frand(nkv, 62, -1, 1);
    float *out = fnew(nq), *att = fnew((size_t)B * NH * T * T);
    kn_attention_forward(bk, out, att, q, k, v, lengths, B, T, NH, NKV, hd);

    // the prompt part in one call (first 2 rows each), then one row at a time like a sampler
    float *kc = frand(B * Tmax * W, 63, -9, 9), *vc = frand(B * Tmax * W, 64, -9, 9);
    const int zero[B] = {0, 0, 0}, two[B] = {2, 2, 2};
    kn_kv_store(bk, kc, k, zero, two, B, T, Tmax, (int)W);
    kn_kv_store(bk, vc, v, zero, two, B, T, Tmax, (int)W);
    float *qt = fnew(B * NH * hd), *ot = fnew(B * NH * hd), *krow = fnew(B * W),
          *vrow = fnew(B * W);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        int pos[B], one[B];
        for (int b = 0; b < B; b++) {
            pos[b] = t < lengths[b] ? t : -1;
            one[b] = t >= 2 && t < lengths[b];  // rows 0,1 are already stored
            memcpy(krow + b * W, k + (b * T + t) * W, W * sizeof(float));
            memcpy(vrow + b * W, v + (b * T + t) * W, W * sizeof(float));
            memcpy(qt + b * NH * hd, q + (b * T + t) * NH * hd, NH * hd * sizeof(float));
        }
        kn_kv_store(bk, kc, krow, pos, one, B, 1, Tmax, (int)W);
        kn_kv_store(bk, vc, vrow, pos, one, B, 1, Tmax, (int)W);
        for (int i = 0; i < B * NH * hd; i++) ot[i] = 5.0f;  // stale values must go
        kn_attention_decode(bk, ot, qt, kc, vc, pos, NULL, NULL, B, Tmax, NH, NKV, hd);
        for (int b = 0; b < B; b++) {
            const float *want = out + (b * T + t) * NH * hd;  // zeros for padding rows
            double e = tu_rel_err(ot + b * NH * hd, want, NH * hd);
            if (pos[b] < 0) assert_true(all_zero(ot + b * NH * hd, NH * hd));
            else worst = e > worst ? e : worst;
        }
    }
    check("kv_store + attention_decode", "vs attention_forward rows (worst)", worst, 1e-6);
    // the cache holds exactly the rows stored; the rest is untouched
    float *fresh = frand(B * Tmax * W, 63, -9, 9);
    for (int b = 0; b < B; b++)
        for (int s = 0; s < Tmax; s++) {
            const float *got = kc + (b * Tmax + s) * W;
            const float *want = s < lengths[b] ? k + (b * T + s) * W : fresh + (b * Tmax + s) * W;
            assert_memory_equal(got, want, W * sizeof(float));
        }
    // count NULL stores all T rows, at an offset
    float *kc2 = fnew(B * Tmax * W);
    const int start[B] = {3, 0, 1};
    kn_kv_store(bk, kc2, k, start, NULL, B, T, Tmax, (int)W);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            assert_memory_equal(kc2 + (b * Tmax + start[b] + t) * W, k + (b * T + t) * W,
                                W * sizeof(float));
    assert_true(all_zero(kc2, 3 * W));
    free(kc2);
    free(fresh);
    free(q);
    free(k);
    free(v);
    free(out);
    free(att);
    free(kc);
    free(vc);
    free(qt);
    free(ot);
    free(krow);
    free(vrow);
}

// ---- swiglu

typedef struct {
    size_t n;
    float *gate, *up, *out, *R;
} SwiCtx;

static double swi_loss(void *p) {
    SwiCtx *c = p;
    kn_swiglu_forward(bk, c->out, c->gate, c->up, c->n);
    return dot_d(c->out, c->R, c->n);
}
static void swi_backward(void *p, float **g) {
    SwiCtx *c = p;
    kn_swiglu_backward(bk, g[0], g[1], c->R, c->gate, c->up, c->n);
}

static void test_swiglu(void **state) {
    enum { n = 61 };
    SwiCtx c = {n, frand(n, 70, -4, 4), frand(n, 71, -1, 1), fnew(n), frand(n, 72, -1, 1)};
    c.gate[0] = -100.0f;  // silu saturates without NaN
    c.gate[1] = 100.0f;
    kn_swiglu_forward(bk, c.out, c.gate, c.up, n);
    float ref[n];
    for (int i = 0; i < n; i++)
        ref[i] = (float)(c.gate[i] / (1.0 + exp(-(double)c.gate[i])) * c.up[i]);
    check("swiglu", "forward vs naive", tu_rel_err(c.out, ref, n), 1e-6);
    GradCheck gc = {"swiglu", 2, {"gate", "up"}, {c.gate, c.up}, {n, n}, swi_loss, swi_backward,
                    &c, -1};
    grad_check(&gc, 1e-2f, 1e-3);
    free(c.gate);
    free(c.up);
    free(c.out);
    free(c.R);
}

// SwiGLU's 16-float loops (AVX-512) take the scalar loops' operations in their order, so they
// equal them bit for bit: saturating and flushing gates, zeros of both signs, infinities and
// NaNs, a masked last vector, and on every thread's share.
static void test_swiglu_vector_matches_scalar(void **state) {
    enum { n = 16 * 700 + 13 };
    float *gate = frand(n, 73, -120, 120), *up = frand(n, 74, -2, 2), *dout = frand(n, 75, -1, 1);
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 87.0f, -87.0f, 88.0f,
                             -88.0f, 1e-40f, -1e-40f, 3.4e38f, -3.4e38f};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++) gate[i * 37] = special[i];
    for (int i = 0; i < 500; i++) gate[n / 2 + i] *= 0.05f;  // the bulk of real gates
    float *out[2], *dg[2], *du[2];
    for (int path = 0; path < 2; path++) {  // 0: vector loops, 1: scalar loops
        out[path] = fnew(n);
        dg[path] = fnew(n);
        du[path] = fnew(n);
        bk->paths.attention_vector = path == 0 ? 2 : 0;
        kn_swiglu_forward(bk, out[path], gate, up, n);
        kn_swiglu_backward(bk, dg[path], du[path], dout, gate, up, n);
    }
    bk->paths.attention_vector = 2;
    assert_memory_equal(out[0], out[1], n * sizeof(float));
    assert_memory_equal(dg[0], dg[1], n * sizeof(float));
    assert_memory_equal(du[0], du[1], n * sizeof(float));
    for (int path = 0; path < 2; path++) {
        free(out[path]);
        free(dg[path]);
        free(du[path]);
    }
    free(gate);
    free(up);
    free(dout);
}

// ---- logprob

typedef struct {
    const int *targets;
    int N, C, V;
    float *x, *W, *logp, *ent, *lse, *Rl, *Re;  // Re NULL: loss without the entropy term
} LpCtx;

static double lp_loss(void *p) {
    LpCtx *c = p;
    kn_logprob_forward(bk, c->logp, c->Re ? c->ent : NULL, c->lse, c->x, c->W, c->targets, c->N,
                       c->C, c->V);
    double L = dot_d(c->logp, c->Rl, (size_t)c->N);
    if (c->Re) L += dot_d(c->ent, c->Re, (size_t)c->N);
    return L;
}
static void lp_backward(void *p, float **g) {
    LpCtx *c = p;
    kn_logprob_forward(bk, c->logp, c->ent, c->lse, c->x, c->W, c->targets, c->N, c->C, c->V);
    kn_logprob_backward(bk, g[0], g[1], c->Rl, c->Re, c->x, c->W, c->targets, c->lse, c->N, c->C,
                        c->V);
}

static void logprob_case(int N, int C, int V, int with_entropy, uint64_t seed) {
    char op[96];
    snprintf(op, sizeof op, "logprob N%d C%d V%d%s", N, C, V, with_entropy ? " +entropy" : "");
    int *targets = calloc(N, sizeof(int));
    for (int n = 0; n < N; n++)
        targets[n] = n % 5 == 3 ? -1 : (int)(philox_uniform(seed, n) * V) % V;
    LpCtx c = {targets,       N,          C,
               V,             frand((size_t)N * C, seed + 1, -1, 1),
               frand((size_t)V * C, seed + 2, -1, 1),
               fnew(N),       fnew(N),    fnew(N),
               frand(N, seed + 3, -1, 1), with_entropy ? frand(N, seed + 4, -1, 1) : NULL};
    // forward vs a naive full log-softmax in double
    for (int n = 0; n < N; n++) c.logp[n] = c.ent[n] = 9.0f;
    kn_logprob_forward(bk, c.logp, c.ent, c.lse, c.x, c.W, targets, N, C, V);
    float *rl = fnew(N), *re = fnew(N), *rlse = fnew(N);
    double *z = calloc(V, sizeof(double));
    for (int n = 0; n < N; n++) {
        double mx = -INFINITY, sum = 0, H = 0;
        for (int v = 0; v < V; v++) {
            z[v] = dot_d(c.x + (size_t)n * C, c.W + (size_t)v * C, C);
            mx = fmax(mx, z[v]);
        }
        for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
        double lse = mx + log(sum);
        for (int v = 0; v < V; v++) H -= exp(z[v] - lse) * (z[v] - lse);
        rlse[n] = (float)lse;
        rl[n] = targets[n] >= 0 ? (float)(z[targets[n]] - lse) : 0.0f;
        re[n] = targets[n] >= 0 ? (float)H : 0.0f;
    }
    check(op, "forward logp vs naive log-softmax", tu_rel_err(c.logp, rl, N), 1e-5);
    check(op, "forward entropy vs -sum p log p", tu_rel_err(c.ent, re, N), 1e-5);
    check(op, "forward lse vs naive", tu_rel_err(c.lse, rlse, N), 1e-6);
    for (int n = 0; n < N; n++)
        if (targets[n] < 0) assert_true(c.logp[n] == 0.0f && c.ent[n] == 0.0f);
    GradCheck gc = {op,      2,          {"x", "W"}, {c.x, c.W}, {(size_t)N * C, (size_t)V * C},
                    lp_loss, lp_backward, &c,        1};
    grad_check(&gc, 1e-2f, 1e-2);
    // padding rows get no gradient
    float *dx = fnew((size_t)N * C);
    lp_backward(&c, (float *[]){dx, NULL});
    for (int n = 0; n < N; n++)
        if (targets[n] < 0) assert_true(all_zero(dx + (size_t)n * C, C));
    free(dx);
    free(z);
    free(rl);
    free(re);
    free(rlse);
    free(targets);
    free(c.x);
    free(c.W);
    free(c.logp);
    free(c.ent);
    free(c.lse);
    free(c.Rl);
    free(c.Re);
}

// Many rows and a large vocabulary, so the logits are formed in several chunks (the CPU
// op holds at most max(256 rows, 2^20 floats) of them): forward and backward against
// naive double-precision formulas over the full (N,V) logits.
static void test_logprob_chunked(void **state) {
    enum { N = 600, C = 3, V = 4500 };
    const char *op = "logprob N600 C3 V4500 (chunked)";
    int *targets = calloc(N, sizeof(int));
    for (int n = 0; n < N; n++)
        targets[n] = n % 7 == 2 ? -1 : (int)(philox_uniform(130, n) * V) % V;
    float *x = frand(N * C, 131, -2, 2), *W = frand(V * C, 132, -2, 2);
    float *dlogp = frand(N, 133, -1, 1), *dent = frand(N, 134, -1, 1);
    float *logp = fnew(N), *ent = fnew(N), *lse = fnew(N), *dx = fnew(N * C), *dW = fnew(V * C);
    kn_logprob_forward(bk, logp, ent, lse, x, W, targets, N, C, V);
    kn_logprob_backward(bk, dx, dW, dlogp, dent, x, W, targets, lse, N, C, V);
    float *rl = fnew(N), *re = fnew(N), *rdx = fnew(N * C);
    double *z = calloc(V, sizeof(double)), *rdW = calloc((size_t)V * C, sizeof(double));
    for (int n = 0; n < N; n++) {
        const float *xn = x + n * C;
        double mx = -INFINITY, sum = 0, H = 0;
        for (int v = 0; v < V; v++) {
            z[v] = dot_d(xn, W + (size_t)v * C, C);
            mx = fmax(mx, z[v]);
        }
        for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
        double l = mx + log(sum);
        for (int v = 0; v < V; v++) H -= exp(z[v] - l) * (z[v] - l);
        if (targets[n] < 0) continue;
        rl[n] = (float)(z[targets[n]] - l);
        re[n] = (float)H;
        for (int v = 0; v < V; v++) {
            double pv = exp(z[v] - l);
            double dz = dlogp[n] * ((v == targets[n]) - pv) - dent[n] * pv * (z[v] - l + H);
            for (int c = 0; c < C; c++) {
                rdx[n * C + c] += (float)(dz * W[(size_t)v * C + c]);
                rdW[(size_t)v * C + c] += dz * xn[c];
            }
        }
    }
    float *rdWf = fnew(V * C);
    for (size_t i = 0; i < (size_t)V * C; i++) rdWf[i] = (float)rdW[i];
    check(op, "forward logp vs naive", tu_rel_err(logp, rl, N), 1e-5);
    check(op, "forward entropy vs naive", tu_rel_err(ent, re, N), 1e-5);
    check(op, "dx vs naive", tu_rel_err(dx, rdx, N * C), 1e-4);
    check(op, "dW vs naive", tu_rel_err(dW, rdWf, V * C), 1e-4);
    free(targets);
    free(x);
    free(W);
    free(dlogp);
    free(dent);
    free(logp);
    free(ent);
    free(lse);
    free(dx);
    free(dW);
    free(rl);
    free(re);
    free(rdx);
    free(z);
    free(rdW);
    free(rdWf);
}

static void test_logprob(void **state) {
    logprob_case(9, 8, 13, 1, 80);
    logprob_case(9, 8, 13, 0, 90);
    logprob_case(300, 3, 7, 1, 100);
}

// ---- AdamW: 3 parameters, 2 steps, worked out in double (see the update in kernels.h)

static void adamw_case(const char *what, float eps, float wd, float scale,
                       const double want_p[2][3], const double want_m[2][3],
                       const double want_v[2][3]) {
    float p[3] = {0.5f, -1.0f, 2.0f}, m[3] = {0}, v[3] = {0};
    const float g[2][3] = {{0.1f, -0.2f, 0.3f}, {-0.05f, 0.4f, 0.0f}};
    for (int t = 1; t <= 2; t++) {
        kn_adamw_update(bk, p, g[t - 1], m, v, 3, 0.1f, 0.9f, 0.999f, eps, wd, scale, t);
        float fp[3], fm[3], fv[3];
        for (int i = 0; i < 3; i++) {
            fp[i] = (float)want_p[t - 1][i];
            fm[i] = (float)want_m[t - 1][i];
            fv[i] = (float)want_v[t - 1][i];
        }
        char label[96];
        snprintf(label, sizeof label, "%s step %d params", what, t);
        check("adamw", label, tu_rel_err(p, fp, 3), 1e-6);
        snprintf(label, sizeof label, "%s step %d m", what, t);
        check("adamw", label, tu_rel_err(m, fm, 3), 1e-6);
        snprintf(label, sizeof label, "%s step %d v", what, t);
        check("adamw", label, tu_rel_err(v, fv, 3), 1e-4);  // 1 - 0.999f = 0.00099998713
    }
}

static void test_adamw(void **state) {
    // lr 0.1, betas (0.9, 0.999), eps 1e-8, weight decay 0.01, no clipping.
    // Step 1: m = 0.1 g, v = 0.001 g^2, so the step is lr*(sign(g) + wd*p):
    // 0.5 - 0.1*(1 + 0.005) = 0.3995, etc.
    const double p1[2][3] = {{0.39950001, -0.899000005, 1.89800000333},
                             {0.372466809393, -0.934711356541, 1.82909618108}};
    const double m1[2][3] = {{0.01, -0.02, 0.03}, {0.004, 0.022, 0.027}};
    const double v1[2][3] = {{1e-05, 4e-05, 9e-05}, {1.249e-05, 0.00019996, 8.991e-05}};
    adamw_case("wd 0.01", 1e-8f, 0.01f, 1.0f, p1, m1, v1);
    // grad_scale 0.5 (clipping), eps 0.01 so that the scale shows in the step,
    // no weight decay: step 1 of p[0] = 0.5 - 0.1 * 0.05 / (0.05 + 0.01) = 0.41667
    const double p2[2][3] = {{0.416666666667, -0.909090909091, 1.90625},
                             {0.39541106023, -0.943523857663, 1.84501857336}};
    const double m2[2][3] = {{0.005, -0.01, 0.015}, {0.002, 0.011, 0.0135}};
    const double v2[2][3] = {{2.5e-06, 1e-05, 2.25e-05}, {3.1225e-06, 4.999e-05, 2.24775e-05}};
    adamw_case("grad_scale 0.5", 0.01f, 0.0f, 0.5f, p2, m2, v2);
}

static void test_sum_squares(void **state) {
    const size_t n = 100003;
    float *g = frand(n, 110, -2, 2);
    double ref = 0;
    for (size_t i = 0; i < n; i++) ref += (double)g[i] * g[i];
    double got = kn_sum_squares(bk, g, n);
    check("sum_squares", "vs direct double sum", fabs(got - ref) / ref, 1e-12);
    assert_true(kn_sum_squares(bk, g, 0) == 0.0);
    free(g);
}

// ---- sampling

static double log_softmax_at(const float *z, int V, double T, int tok) {
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) mx = fmax(mx, z[v] / T);
    for (int v = 0; v < V; v++) sum += exp(z[v] / T - mx);
    return z[tok] / T - mx - log(sum);
}

static void test_sample_greedy_logp(void **state) {
    enum { B = 3, V = 5 };
    const float logits[B * V] = {1, 3, 3, 2, -1,  // tie: lower id
                                 0, 0, 0, 0, 0,   // all equal: id 0
                                 -5, 2, 9, 1, 8.5f};
    const uint64_t counters[B] = {1, 2, 3};
    int tok[B];
    float lp[B];
    kn_sample(bk, tok, lp, logits, B, V, 0.0f, 1.0f, 7, counters);
    assert_int_equal(tok[0], 1);
    assert_int_equal(tok[1], 0);
    assert_int_equal(tok[2], 2);
    float want[B];
    for (int b = 0; b < B; b++) want[b] = (float)log_softmax_at(logits + b * V, V, 1.0, tok[b]);
    check("sample", "greedy logp vs log softmax", tu_rel_err(lp, want, B), 1e-6);
    // temperature: logp is of the full tempered distribution
    kn_sample(bk, tok, lp, logits, B, V, 0.7f, 1.0f, 7, counters);
    for (int b = 0; b < B; b++) want[b] = (float)log_softmax_at(logits + b * V, V, 0.7, tok[b]);
    check("sample", "T=0.7 logp vs log softmax(z/T)", tu_rel_err(lp, want, B), 1e-6);
    // top_p tiny: the nucleus is the argmax, logp still of the full distribution
    for (uint64_t c = 0; c < 20; c++) {
        const uint64_t cs[B] = {c, c + 100, c + 200};
        kn_sample(bk, tok, lp, logits, B, V, 1.3f, 1e-6f, 11, cs);
        assert_int_equal(tok[0], 1);
        assert_int_equal(tok[1], 0);
        assert_int_equal(tok[2], 2);
        assert_true(fabs(lp[2] - log_softmax_at(logits + 2 * V, V, 1.3, 2)) < 1e-5);
    }
}

// Draws n tokens from one row of logits (counters 0..n-1); counts per token.
static void sample_counts(int *counts, const float *row, int V, float T, float top_p, int n,
                          uint64_t seed) {
    float *logits = fnew((size_t)n * V);
    uint64_t *ctr = calloc(n, sizeof(uint64_t));
    int *tok = calloc(n, sizeof(int));
    float *lp = fnew(n);
    for (int i = 0; i < n; i++) {
        memcpy(logits + (size_t)i * V, row, V * sizeof(float));
        ctr[i] = (uint64_t)i;
    }
    kn_sample(bk, tok, lp, logits, n, V, T, top_p, seed, ctr);
    memset(counts, 0, V * sizeof(int));
    for (int i = 0; i < n; i++) {
        assert_true(tok[i] >= 0 && tok[i] < V);
        counts[tok[i]]++;
    }
    free(logits);
    free(ctr);
    free(tok);
    free(lp);
}

// Pearson chi-square of counts against probabilities prob (tokens with prob 0 must have 0).
static double chi_square(const int *counts, const double *prob, int V, int n) {
    double chi = 0;
    for (int v = 0; v < V; v++) {
        if (prob[v] == 0) {
            if (counts[v] != 0) return INFINITY;
            continue;
        }
        double e = prob[v] * n;
        chi += (counts[v] - e) * (counts[v] - e) / e;
    }
    return chi;
}

static void test_sample_distribution(void **state) {
    enum { V = 6, n = 30000 };
    const float row[V] = {0.3f, -1.0f, 1.2f, 0.0f, 2.0f, -0.4f};
    int counts[V], again[V];
    double prob[V];
    // temperature 1.3, no truncation: frequencies follow softmax(z/T).
    // chi-square, 5 degrees of freedom: P(chi2 > 30) ~ 1e-5
    const float T = 1.3f;
    sample_counts(counts, row, V, T, 1.0f, n, 5);
    for (int v = 0; v < V; v++) prob[v] = exp(log_softmax_at(row, V, T, v));
    double chi = chi_square(counts, prob, V, n);
    printf("  sample T=1.3: chi2 %.2f (5 dof, bound 30), counts", chi);
    for (int v = 0; v < V; v++) printf(" %d", counts[v]);
    printf("\n");
    assert_true(chi < 30.0);
    // a wrong temperature is detected
    double probT1[V];
    for (int v = 0; v < V; v++) probT1[v] = exp(log_softmax_at(row, V, 1.0, v));
    assert_true(chi_square(counts, probT1, V, n) > 100.0);
    // reproducible for the same seed and counters; another seed gives other draws
    sample_counts(again, row, V, T, 1.0f, n, 5);
    assert_memory_equal(counts, again, sizeof counts);
    sample_counts(again, row, V, T, 1.0f, n, 6);
    assert_memory_not_equal(counts, again, sizeof counts);

    // top-p: p = (0.5, 0.3, 0.15, 0.05) in a shuffled order; top_p 0.75 keeps the two
    // largest (0.5 < 0.75 <= 0.8), renormalised to (0.625, 0.375).
    const float pr[4] = {0.15f, 0.5f, 0.05f, 0.3f};
    float lrow[4];
    for (int v = 0; v < 4; v++) lrow[v] = logf(pr[v]);
    int c4[4];
    sample_counts(c4, lrow, 4, 1.0f, 0.75f, 20000, 8);
    const double nucleus[4] = {0, 0.625, 0, 0.375};
    chi = chi_square(c4, nucleus, 4, 20000);
    printf("  sample top_p=0.75: chi2 %.2f (1 dof, bound 25), counts %d %d %d %d\n", chi, c4[0],
           c4[1], c4[2], c4[3]);
    assert_true(chi < 25.0);
    // ties at the edge of the nucleus go to the lower id: uniform over 4, top_p 0.5 -> {0,1}
    const float flat[4] = {0, 0, 0, 0};
    sample_counts(c4, flat, 4, 1.0f, 0.5f, 4000, 9);
    assert_int_equal(c4[2] + c4[3], 0);
    assert_true(c4[0] > 1700 && c4[1] > 1700);
}

// ---- determinism across thread counts

static void test_determinism(void **state) {
    enum { N = 1000, C = 70, V = 11 };
    int saved = omp_get_max_threads();
    float *inp = frand(N * C, 120, -1, 1), *w = frand(C, 121, 0.5f, 1.5f),
          *dout = frand(N * C, 122, -1, 1), *rstd = fnew(N), *out = fnew(N * C);
    int *tokens = calloc(N, sizeof(int));
    for (int n = 0; n < N; n++) tokens[n] = (int)(philox_uniform(123, n) * V) % V;
    float *dinp[2], *dw[2], *dwte[2];
    double ss[2];
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r + 1);
        dinp[r] = fnew(N * C);
        dw[r] = fnew(C);
        dwte[r] = fnew(V * C);
        kn_rmsnorm_forward(bk, out, rstd, inp, w, N, C, 1e-5f);
        kn_rmsnorm_backward(bk, dinp[r], dw[r], dout, inp, w, rstd, N, C);
        kn_embedding_backward(bk, dwte[r], dout, tokens, N, V, C);
        ss[r] = kn_sum_squares(bk, dout, (size_t)N * C);
    }
    // attention backward: dk/dv get the query heads of a group from one task, in order
    enum { AB = 4, AT = 32, ANH = 4, ANKV = 2, Ahd = 16 };
    const int alen[AB] = {32, 17, 1, 30};
    const size_t nq = AB * AT * ANH * Ahd, nkv = AB * AT * ANKV * Ahd;
    float *q = frand(nq, 124, -1, 1), *k = frand(nkv, 125, -1, 1), *v = frand(nkv, 126, -1, 1);
    float *ao = fnew(nq), *att = fnew((size_t)AB * ANH * AT * AT), *ad = frand(nq, 127, -1, 1);
    float *dq[2], *dk[2], *dv[2];
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r + 1);
        dq[r] = fnew(nq);
        dk[r] = fnew(nkv);
        dv[r] = fnew(nkv);
        kn_attention_forward(bk, ao, att, q, k, v, alen, AB, AT, ANH, ANKV, Ahd);
        kn_attention_backward(bk, dq[r], dk[r], dv[r], ad, att, q, k, v, alen, AB, AT, ANH, ANKV,
                              Ahd);
    }
    omp_set_num_threads(saved);
    assert_memory_equal(dinp[0], dinp[1], N * C * sizeof(float));
    assert_memory_equal(dw[0], dw[1], C * sizeof(float));
    assert_memory_equal(dwte[0], dwte[1], V * C * sizeof(float));
    assert_memory_equal(&ss[0], &ss[1], sizeof(double));
    assert_memory_equal(dq[0], dq[1], nq * sizeof(float));
    assert_memory_equal(dk[0], dk[1], nkv * sizeof(float));
    assert_memory_equal(dv[0], dv[1], nkv * sizeof(float));
    printf("  rmsnorm/embedding/attention backward, sum_squares: bitwise equal on 1 and 2 "
           "threads\n");
    for (int r = 0; r < 2; r++) {
        free(dinp[r]);
        free(dw[r]);
        free(dwte[r]);
        free(dq[r]);
        free(dk[r]);
        free(dv[r]);
    }
    free(q);
    free(k);
    free(v);
    free(ao);
    free(att);
    free(ad);
    free(inp);
    free(w);
    free(dout);
    free(rstd);
    free(out);
    free(tokens);
}

int main(void) {
    char err[256];
    bk = backend_create(BACKEND_CPU, err, sizeof err);
    if (!bk) {
        fprintf(stderr, "test_kernels: %s\n", err);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_scale),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_kv_decode),
        cmocka_unit_test(test_attention_vector_matches_scalar),
        cmocka_unit_test(test_decode_vector_matches_scalar),
        cmocka_unit_test(test_decode_matmul_is_fma_chain),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_swiglu_vector_matches_scalar),
        cmocka_unit_test(test_logprob),
        cmocka_unit_test(test_logprob_chunked),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_sum_squares),
        cmocka_unit_test(test_sample_greedy_logp),
        cmocka_unit_test(test_sample_distribution),
        cmocka_unit_test(test_determinism),
    };
    int failed = cmocka_run_group_tests_name("kernels", tests, NULL, NULL);
    backend_destroy(bk);
    return failed;
}
