// Every op of every backend against the plain reference (src/kernels/cpu_ref.c), over several
// shapes, as ggml's test-backend-ops does: the CPU backend with its fast paths (AVX-512
// kernels, own products, OpenBLAS), and CUDA where it is built and a device is usable. The
// fast paths round otherwise than the reference's double sums, so each comparison allows a
// relative error (tu_rel_err, the norm of the difference over the reference's); the KV store
// and greedy tokens are exact. The shapes cross the fast paths' thresholds: sequences of 64
// tokens or more at head sizes 32 and 64 (the own attention products), odd sizes around the
// 16-float vectors and 48-float panels of the decode products.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels/cpu_ref.h"
#include "kernels/kernels.h"
#include "test_util.h"

#define TOL 1e-5  // float32 sums against double ones (the largest seen is about 2e-6)

static Backend *backends[2];
static int n_backends;
static uint64_t seed = 1000;

static float *hrand(size_t n, float lo, float hi) {
    float *x = xmalloc((n ? n : 1) * sizeof(float));
    tu_fill_uniform(x, n, seed++, lo, hi);
    return x;
}
static float *hcopy(const float *x, size_t n) {
    float *y = xmalloc((n ? n : 1) * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}
// a device copy of host bytes
static void *up(Backend *b, const void *h, size_t bytes) {
    void *d = bk_alloc(b, bytes ? bytes : 4);
    bk_upload(b, d, h, bytes);
    return d;
}
// the device array d (n floats) on the host (a new array); frees d
static float *down(Backend *b, float *d, size_t n) {
    float *h = xmalloc((n ? n : 1) * sizeof(float));
    bk_download(b, h, d, n * sizeof(float));
    bk_free(b, d);
    return h;
}
static void check(Backend *b, const char *op, const char *shape, const float *got, const float *want,
                  size_t n, double tol) {
    char what[160];
    snprintf(what, sizeof what, "%s %s %s", backend_name(b->kind), op, shape);
    tu_check_rel(what, tu_rel_err(got, want, n), tol);
}

static void test_matmul(void **state) {
    (void)state;
    const int shapes[][3] = {{1, 1, 1}, {3, 5, 17}, {33, 64, 172}, {70, 172, 64}, {8, 128, 344}};
    for (int bi = 0; bi < n_backends; bi++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            Backend *b = backends[bi];
            int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
            char sh[64];
            snprintf(sh, sizeof sh, "N %d C %d OC %d", N, C, OC);
            float *x = hrand((size_t)N * C, -2, 2), *w = hrand((size_t)OC * C, -0.5f, 0.5f);
            float *o0 = hrand((size_t)N * OC, -1, 1), *dout = hrand((size_t)N * OC, -1, 1);
            float *dx0 = hrand((size_t)N * C, -1, 1), *dw0 = hrand((size_t)OC * C, -1, 1);
            float *want = hcopy(o0, (size_t)N * OC);
            float *dx_want = hcopy(dx0, (size_t)N * C), *dw_want = hcopy(dw0, (size_t)OC * C);
            float *dxd = up(b, x, (size_t)N * C * 4), *dwd = up(b, w, (size_t)OC * C * 4);
            ref_matmul_forward(want, x, w, N, C, OC, 0);
            float *od = up(b, o0, (size_t)N * OC * 4);
            kn_matmul_forward(b, od, dxd, dwd, N, C, OC);
            float *got = down(b, od, (size_t)N * OC);
            check(b, "matmul_forward", sh, got, want, (size_t)N * OC, TOL);
            // the decode's products on packed weights: the same product
            float *wp = bk_alloc(b, kn_decode_packed_floats(b, C, OC) * sizeof(float) + 4);
            kn_decode_pack(b, wp, dwd, C, OC);
            od = up(b, o0, (size_t)N * OC * 4);
            kn_decode_matmul(b, od, dxd, wp, N, C, OC);
            free(got);
            got = down(b, od, (size_t)N * OC);
            check(b, "decode_matmul", sh, got, want, (size_t)N * OC, TOL);
            bk_free(b, wp);
            memcpy(want, o0, (size_t)N * OC * sizeof(float));
            ref_matmul_forward(want, x, w, N, C, OC, 1);
            od = up(b, o0, (size_t)N * OC * 4);
            kn_matmul_forward_add(b, od, dxd, dwd, N, C, OC);
            free(got);
            got = down(b, od, (size_t)N * OC);
            check(b, "matmul_forward_add", sh, got, want, (size_t)N * OC, TOL);
            ref_matmul_backward(dx_want, dw_want, dout, x, w, N, C, OC);
            float *gdx = up(b, dx0, (size_t)N * C * 4), *gdw = up(b, dw0, (size_t)OC * C * 4);
            float *gdout = up(b, dout, (size_t)N * OC * 4);
            kn_matmul_backward(b, gdx, gdw, gdout, dxd, dwd, N, C, OC);
            float *hdx = down(b, gdx, (size_t)N * C), *hdw = down(b, gdw, (size_t)OC * C);
            check(b, "matmul_backward dinp", sh, hdx, dx_want, (size_t)N * C, TOL);
            check(b, "matmul_backward dweight", sh, hdw, dw_want, (size_t)OC * C, TOL);
            bk_free(b, dxd), bk_free(b, dwd), bk_free(b, gdout);
            free(x), free(w), free(o0), free(dout), free(dx0), free(dw0), free(want), free(dx_want);
            free(dw_want), free(got), free(hdx), free(hdw);
        }
}

static void test_embedding_rmsnorm_swiglu(void **state) {
    (void)state;
    const int shapes[][3] = {{1, 1, 2}, {5, 7, 3}, {70, 64, 40}, {33, 130, 64}};  // N, C, V
    for (int bi = 0; bi < n_backends; bi++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            Backend *b = backends[bi];
            int N = shapes[s][0], C = shapes[s][1], V = shapes[s][2];
            size_t NC = (size_t)N * C;
            char sh[64];
            snprintf(sh, sizeof sh, "N %d C %d", N, C);
            int *tok = xmalloc((size_t)N * sizeof(int));
            for (int n = 0; n < N; n++) tok[n] = (int)(philox_uniform(seed, (uint64_t)n) * V);
            seed++;
            float *wte = hrand((size_t)V * C, -1, 1), *dwte0 = hrand((size_t)V * C, -1, 1);
            float *x = hrand(NC, -2, 2), *w = hrand((size_t)C, 0.5f, 1.5f), *dout = hrand(NC, -1, 1);
            float *dx0 = hrand(NC, -1, 1), *dw0 = hrand((size_t)C, -1, 1), *up_ = hrand(NC, -2, 2);
            int *dtok = up(b, tok, (size_t)N * sizeof(int));
            float *want = xmalloc(NC * sizeof(float)), *rstd = xmalloc((size_t)N * sizeof(float));
            // embedding
            float *dwt = up(b, wte, (size_t)V * C * 4), *od = bk_alloc(b, NC * 4);
            kn_embedding_forward(b, od, dtok, dwt, N, C);
            ref_embedding_forward(want, tok, wte, N, C);
            float *got = down(b, od, NC);
            check(b, "embedding_forward", sh, got, want, NC, 0);
            float *dwte_want = hcopy(dwte0, (size_t)V * C), *gdwte = up(b, dwte0, (size_t)V * C * 4);
            float *gdout = up(b, dout, NC * 4);
            kn_embedding_backward(b, gdwte, gdout, dtok, N, V, C);
            ref_embedding_backward(dwte_want, dout, tok, N, C);
            float *hdwte = down(b, gdwte, (size_t)V * C);
            check(b, "embedding_backward", sh, hdwte, dwte_want, (size_t)V * C, TOL);
            // RMSNorm
            float *gx = up(b, x, NC * 4), *gw = up(b, w, (size_t)C * 4), *grstd = bk_alloc(b, (size_t)N * 4);
            od = bk_alloc(b, NC * 4);
            kn_rmsnorm_forward(b, od, grstd, gx, gw, N, C, 1e-5f);
            ref_rmsnorm_forward(want, rstd, x, w, N, C, 1e-5f);
            free(got);
            got = down(b, od, NC);
            check(b, "rmsnorm_forward", sh, got, want, NC, TOL);
            float *dx_want = hcopy(dx0, NC), *dw_want = hcopy(dw0, (size_t)C);
            float *gdx = up(b, dx0, NC * 4), *gdw = up(b, dw0, (size_t)C * 4);
            kn_rmsnorm_backward(b, gdx, gdw, gdout, gx, gw, grstd, N, C);
            ref_rmsnorm_backward(dx_want, dw_want, dout, x, w, N, C, 1e-5f);
            float *hdx = down(b, gdx, NC), *hdw = down(b, gdw, (size_t)C);
            check(b, "rmsnorm_backward dinp", sh, hdx, dx_want, NC, TOL);
            check(b, "rmsnorm_backward dweight", sh, hdw, dw_want, (size_t)C, TOL);
            // SwiGLU on n = N C elements, gates x
            float *gup = up(b, up_, NC * 4);
            od = bk_alloc(b, NC * 4);
            kn_swiglu_forward(b, od, gx, gup, NC);
            ref_swiglu_forward(want, x, up_, NC);
            free(got);
            got = down(b, od, NC);
            check(b, "swiglu_forward", sh, got, want, NC, TOL);
            float *dg = bk_alloc(b, NC * 4), *du = bk_alloc(b, NC * 4);
            kn_swiglu_backward(b, dg, du, gdout, gx, gup, NC);
            ref_swiglu_backward(dx_want, want, dout, x, up_, NC);
            float *hdg = down(b, dg, NC), *hdu = down(b, du, NC);
            check(b, "swiglu_backward dgate", sh, hdg, dx_want, NC, TOL);
            check(b, "swiglu_backward dup", sh, hdu, want, NC, TOL);
            bk_free(b, dtok), bk_free(b, dwt), bk_free(b, gdout), bk_free(b, gx), bk_free(b, gw);
            bk_free(b, grstd), bk_free(b, gup);
            free(tok), free(wte), free(dwte0), free(x), free(w), free(dout), free(dx0), free(dw0);
            free(up_), free(want), free(rstd), free(got), free(dwte_want), free(hdwte), free(dx_want);
            free(dw_want), free(hdx), free(hdw), free(hdg), free(hdu);
        }
}

static void test_rope(void **state) {
    (void)state;
    const int shapes[][3] = {{1, 1, 2}, {7, 4, 8}, {40, 2, 32}, {9, 3, 64}};  // N, NH, hd
    for (int bi = 0; bi < n_backends; bi++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            Backend *b = backends[bi];
            int N = shapes[s][0], NH = shapes[s][1], hd = shapes[s][2];
            size_t n = (size_t)N * NH * hd;
            char sh[64];
            snprintf(sh, sizeof sh, "N %d NH %d hd %d", N, NH, hd);
            int *pos = xmalloc((size_t)N * sizeof(int));
            for (int i = 0; i < N; i++) pos[i] = (i * 37) % 300;
            float *x = hrand(n, -2, 2), *want = hcopy(x, n);
            int *gpos = up(b, pos, (size_t)N * sizeof(int));
            for (int sign = 1; sign >= -1; sign -= 2) {
                float *gx = up(b, x, n * 4);
                if (sign > 0) kn_rope_forward(b, gx, gpos, N, NH, hd, 10000.0f);
                else kn_rope_backward(b, gx, gpos, N, NH, hd, 10000.0f);
                memcpy(want, x, n * sizeof(float));
                ref_rope(want, pos, N, NH, hd, 10000.0f, sign);
                float *got = down(b, gx, n);
                check(b, sign > 0 ? "rope_forward" : "rope_backward", sh, got, want, n, TOL);
                free(got);
            }
            bk_free(b, gpos);
            free(pos), free(x), free(want);
        }
}

static void test_attention(void **state) {
    (void)state;
    const struct { int B, T, NH, NKV, hd, len[2]; } cases[] = {
        {1, 1, 1, 1, 2, {1}}, {2, 7, 4, 2, 8, {7, 3}}, {2, 70, 2, 1, 32, {70, 66}},
        {1, 65, 2, 2, 64, {65}}, {2, 20, 4, 4, 64, {20, 9}}};
    for (int bi = 0; bi < n_backends; bi++)
        for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
            Backend *b = backends[bi];
            int B = cases[ci].B, T = cases[ci].T, NH = cases[ci].NH, NKV = cases[ci].NKV, hd = cases[ci].hd;
            size_t nq = (size_t)B * T * NH * hd, nkv = (size_t)B * T * NKV * hd, natt = (size_t)B * NH * T * T;
            char sh[80];
            snprintf(sh, sizeof sh, "B %d T %d NH %d NKV %d hd %d", B, T, NH, NKV, hd);
            float *q = hrand(nq, -2, 2), *k = hrand(nkv, -2, 2), *v = hrand(nkv, -1, 1);
            float *dout = hrand(nq, -1, 1), *dq0 = hrand(nq, -1, 1), *dk0 = hrand(nkv, -1, 1);
            float *dv0 = hrand(nkv, -1, 1);
            float *out_w = xmalloc(nq * 4), *att_w = xmalloc(natt * 4);
            float *dq_w = hcopy(dq0, nq), *dk_w = hcopy(dk0, nkv), *dv_w = hcopy(dv0, nkv);
            ref_attention_forward(out_w, att_w, q, k, v, cases[ci].len, B, T, NH, NKV, hd);
            ref_attention_backward(dq_w, dk_w, dv_w, dout, q, k, v, cases[ci].len, B, T, NH, NKV, hd);
            float *gq = up(b, q, nq * 4), *gk = up(b, k, nkv * 4), *gv = up(b, v, nkv * 4);
            float *gout = bk_alloc(b, nq * 4), *gatt = bk_alloc(b, natt * 4), *gdout = up(b, dout, nq * 4);
            float *gdq = up(b, dq0, nq * 4), *gdk = up(b, dk0, nkv * 4), *gdv = up(b, dv0, nkv * 4);
            int *glen = up(b, cases[ci].len, (size_t)B * sizeof(int));
            kn_attention_forward(b, gout, gatt, gq, gk, gv, glen, B, T, NH, NKV, hd);
            kn_attention_backward(b, gdq, gdk, gdv, gdout, gatt, gq, gk, gv, glen, B, T, NH, NKV, hd);
            float *out = down(b, gout, nq), *att = down(b, gatt, natt);
            float *dq = down(b, gdq, nq), *dk = down(b, gdk, nkv), *dv = down(b, gdv, nkv);
            check(b, "attention_forward out", sh, out, out_w, nq, TOL);
            check(b, "attention_forward att", sh, att, att_w, natt, TOL);
            check(b, "attention_backward dq", sh, dq, dq_w, nq, TOL);
            check(b, "attention_backward dk", sh, dk, dk_w, nkv, TOL);
            check(b, "attention_backward dv", sh, dv, dv_w, nkv, TOL);
            bk_free(b, gq), bk_free(b, gk), bk_free(b, gv), bk_free(b, gdout), bk_free(b, glen);
            free(q), free(k), free(v), free(dout), free(dq0), free(dk0), free(dv0), free(out_w);
            free(att_w), free(dq_w), free(dk_w), free(dv_w), free(out), free(att), free(dq), free(dk);
            free(dv);
        }
}

// The KV store (exact) and the one-token decode, with and without rows that share a prompt.
static void test_kv_store_and_decode(void **state) {
    (void)state;
    const int shapes[][4] = {{1, 4, 1, 2}, {5, 40, 4, 8}, {6, 90, 2, 32}, {4, 70, 4, 64}};  // B, Tmax, NH, hd
    for (int bi = 0; bi < n_backends; bi++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            Backend *b = backends[bi];
            int B = shapes[s][0], Tmax = shapes[s][1], NH = shapes[s][2], hd = shapes[s][3];
            int NKV = NH > 1 ? NH / 2 : 1, W = NKV * hd, T = 3;
            size_t ncache = (size_t)B * Tmax * W, nq = (size_t)B * NH * hd;
            char sh[80];
            snprintf(sh, sizeof sh, "B %d Tmax %d NH %d NKV %d hd %d", B, Tmax, NH, NKV, hd);
            // kv_store: T rows of each sequence at start[b], count[b] of them
            float *cache = hrand(ncache, -2, 2), *src = hrand((size_t)B * T * W, -2, 2);
            int *start = xmalloc((size_t)B * sizeof(int)), *count = xmalloc((size_t)B * sizeof(int));
            for (int i = 0; i < B; i++) start[i] = (i * 7) % Tmax, count[i] = i % (T + 1);
            float *want = hcopy(cache, ncache);
            for (int i = 0; i < B; i++)
                for (int t = 0; t < count[i] && start[i] + t < Tmax; t++)
                    memcpy(want + ((size_t)i * Tmax + start[i] + t) * W, src + ((size_t)i * T + t) * W,
                           (size_t)W * sizeof(float));
            float *gc = up(b, cache, ncache * 4), *gs = up(b, src, (size_t)B * T * W * 4);
            int *gst = up(b, start, (size_t)B * 4), *gct = up(b, count, (size_t)B * 4);
            kn_kv_store(b, gc, gs, gst, gct, B, T, Tmax, W);
            float *got = down(b, gc, ncache);
            check(b, "kv_store", sh, got, want, ncache, 0);
            // decode: row i at position pos[i] (the last past the cache, one inactive where B > 2)
            float *kc = hrand(ncache, -2, 2), *vc = hrand(ncache, -1, 1), *q = hrand(nq, -2, 2);
            int *pos = xmalloc((size_t)B * sizeof(int)), *share = xmalloc((size_t)B * sizeof(int));
            int *plen = xmalloc((size_t)B * sizeof(int));
            for (int i = 0; i < B; i++) pos[i] = (i * 13 + 5) % Tmax;
            pos[B - 1] = Tmax + 3;
            if (B > 2) pos[1] = -1;
            // rows 2.. share row 0's first positions: their caches hold copies of them
            int P = Tmax / 3;
            for (int i = 0; i < B; i++) {
                share[i] = i >= 2 ? 0 : i;
                plen[i] = i >= 2 ? P : 0;
                if (i >= 2)
                    for (size_t j = 0; j < (size_t)P * W; j++) {
                        kc[(size_t)i * Tmax * W + j] = kc[j];
                        vc[(size_t)i * Tmax * W + j] = vc[j];
                    }
            }
            float *out_w = xcalloc(nq, sizeof(float));
            ref_attention_decode(out_w, q, kc, vc, pos, B, Tmax, NH, NKV, hd);
            float *gk = up(b, kc, ncache * 4), *gv = up(b, vc, ncache * 4), *gq = up(b, q, nq * 4);
            int *gpos = up(b, pos, (size_t)B * 4);
            for (int shared = 0; shared < 2; shared++) {
                float *go = bk_alloc(b, nq * 4);
                bk_zero(b, go, nq * 4);
                kn_attention_decode(b, go, gq, gk, gv, gpos, shared ? share : NULL, shared ? plen : NULL, B,
                                    Tmax, NH, NKV, hd);
                float *out = down(b, go, nq);
                if (B > 2)  // the inactive row is not compared
                    memset(out + (size_t)NH * hd, 0, (size_t)NH * hd * sizeof(float));
                check(b, shared ? "attention_decode (shared prompts)" : "attention_decode", sh, out, out_w,
                      nq, TOL);
                free(out);
            }
            bk_free(b, gs), bk_free(b, gst), bk_free(b, gct), bk_free(b, gk), bk_free(b, gv);
            bk_free(b, gq), bk_free(b, gpos);
            free(cache), free(src), free(start), free(count), free(want), free(got), free(kc), free(vc);
            free(q), free(pos), free(share), free(plen), free(out_w);
        }
}

static void test_logprob_and_sample(void **state) {
    (void)state;
    const int shapes[][3] = {{1, 2, 2}, {6, 32, 64}, {40, 64, 300}};  // N, C, V
    for (int bi = 0; bi < n_backends; bi++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            Backend *b = backends[bi];
            int N = shapes[s][0], C = shapes[s][1], V = shapes[s][2];
            char sh[64];
            snprintf(sh, sizeof sh, "N %d C %d V %d", N, C, V);
            float *x = hrand((size_t)N * C, -1, 1), *w = hrand((size_t)V * C, -1, 1);
            float *dlogp = hrand((size_t)N, -1, 1), *dent = hrand((size_t)N, -1, 1);
            float *dx0 = hrand((size_t)N * C, -1, 1), *dw0 = hrand((size_t)V * C, -1, 1);
            int *tgt = xmalloc((size_t)N * sizeof(int));
            for (int n = 0; n < N; n++) tgt[n] = n == 3 ? -1 : (n * 7) % V;  // row 3: padding
            float *lp_w = xmalloc((size_t)N * 4), *ent_w = xmalloc((size_t)N * 4), *lse_w = xmalloc((size_t)N * 4);
            float *dx_w = hcopy(dx0, (size_t)N * C), *dw_w = hcopy(dw0, (size_t)V * C);
            ref_logprob_forward(lp_w, ent_w, lse_w, x, w, tgt, N, C, V);
            ref_logprob_backward(dx_w, dw_w, dlogp, dent, x, w, tgt, N, C, V);
            float *gx = up(b, x, (size_t)N * C * 4), *gw = up(b, w, (size_t)V * C * 4);
            int *gt = up(b, tgt, (size_t)N * 4);
            float *glp = bk_alloc(b, (size_t)N * 4), *gent = bk_alloc(b, (size_t)N * 4);
            float *glse = bk_alloc(b, (size_t)N * 4), *gdlp = up(b, dlogp, (size_t)N * 4);
            float *gdent = up(b, dent, (size_t)N * 4), *gdx = up(b, dx0, (size_t)N * C * 4);
            float *gdw = up(b, dw0, (size_t)V * C * 4);
            kn_logprob_forward(b, glp, gent, glse, gx, gw, gt, N, C, V);
            kn_logprob_backward(b, gdx, gdw, gdlp, gdent, gx, gw, gt, glse, N, C, V);
            float *lp = down(b, glp, (size_t)N), *ent = down(b, gent, (size_t)N);
            float *lse = down(b, glse, (size_t)N), *dx = down(b, gdx, (size_t)N * C);
            float *dw = down(b, gdw, (size_t)V * C);
            if (N > 3) ent[3] = ent_w[3], lse[3] = lse_w[3];  // padding: only its logp 0 is defined
            check(b, "logprob_forward logp", sh, lp, lp_w, (size_t)N, TOL);
            check(b, "logprob_forward entropy", sh, ent, ent_w, (size_t)N, TOL);
            check(b, "logprob_forward lse", sh, lse, lse_w, (size_t)N, TOL);
            check(b, "logprob_backward dx", sh, dx, dx_w, (size_t)N * C, TOL);
            check(b, "logprob_backward dW", sh, dw, dw_w, (size_t)V * C, TOL);
            // sampling from N rows of V logits: greedy takes the argmax; every token's logp is
            // the reference's log softmax at that token
            float *logits = hrand((size_t)N * V, -4, 4);
            uint64_t *ctr = xmalloc((size_t)N * sizeof(uint64_t));
            for (int n = 0; n < N; n++) ctr[n] = (uint64_t)n;
            float *gl = up(b, logits, (size_t)N * V * 4);
            uint64_t *gctr = up(b, ctr, (size_t)N * sizeof(uint64_t));
            int *gtok = bk_alloc(b, (size_t)N * sizeof(int)), *tok = xmalloc((size_t)N * sizeof(int));
            const float temps[] = {0.0f, 1.0f, 0.7f};
            for (int ti = 0; ti < 3; ti++) {
                float *gslp = bk_alloc(b, (size_t)N * 4);
                kn_sample(b, gtok, gslp, gl, N, V, temps[ti], ti == 2 ? 0.9f : 1.0f, 77, gctr);
                bk_download(b, tok, gtok, (size_t)N * sizeof(int));
                float *slp = down(b, gslp, (size_t)N), *slp_w = xmalloc((size_t)N * 4);
                for (int n = 0; n < N; n++) {
                    assert_true(tok[n] >= 0 && tok[n] < V);
                    if (ti == 0) {
                        int best = 0;
                        for (int j = 1; j < V; j++) best = logits[(size_t)n * V + j] > logits[(size_t)n * V + best] ? j : best;
                        assert_int_equal(tok[n], best);
                    }
                    slp_w[n] = (float)ref_token_logp(logits + (size_t)n * V, V, temps[ti], tok[n]);
                }
                check(b, ti == 0 ? "sample greedy logp" : "sample logp", sh, slp, slp_w, (size_t)N, TOL);
                free(slp), free(slp_w);
            }
            bk_free(b, gx), bk_free(b, gw), bk_free(b, gt), bk_free(b, gdlp), bk_free(b, gdent);
            bk_free(b, gl), bk_free(b, gctr), bk_free(b, gtok);
            free(x), free(w), free(dlogp), free(dent), free(dx0), free(dw0), free(tgt), free(lp_w);
            free(ent_w), free(lse_w), free(dx_w), free(dw_w), free(lp), free(ent), free(lse), free(dx);
            free(dw), free(logits), free(ctr), free(tok);
        }
}

static void test_optimizer(void **state) {
    (void)state;
    const size_t sizes[] = {1, 17, 20000, 70001};
    for (int bi = 0; bi < n_backends; bi++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            Backend *b = backends[bi];
            size_t n = sizes[s];
            char sh[64];
            snprintf(sh, sizeof sh, "n %zu", n);
            float *g = hrand(n, -1, 1), *p = hrand(n, -1, 1), *m = hrand(n, -0.1f, 0.1f);
            float *v = hrand(n, 0, 0.01f);
            float *gg = up(b, g, n * 4), *gp = up(b, p, n * 4), *gm = up(b, m, n * 4), *gv = up(b, v, n * 4);
            float ss = (float)kn_sum_squares(b, gg, n), ss_w = (float)ref_sum_squares(g, n);
            check(b, "sum_squares", sh, &ss, &ss_w, 1, TOL);
            kn_adamw_update(b, gp, gg, gm, gv, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
            ref_adamw_update(p, g, m, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
            float *hp = down(b, gp, n), *hm = down(b, gm, n), *hv = down(b, gv, n);
            check(b, "adamw_update params", sh, hp, p, n, TOL);
            check(b, "adamw_update m", sh, hm, m, n, TOL);
            check(b, "adamw_update v", sh, hv, v, n, TOL);
            bk_free(b, gg);
            free(g), free(p), free(m), free(v), free(hp), free(hm), free(hv);
        }
}

int main(void) {
    char err[256], why[256];
    backends[n_backends++] = backend_create(BACKEND_CPU, err, sizeof err);
    if (backend_cuda_available(why, sizeof why)) {
        backends[n_backends] = backend_create(BACKEND_CUDA, err, sizeof err);
        if (!backends[n_backends]) die("test_backend_ops: %s", err);
        n_backends++;
    } else {
        printf("test_backend_ops: the CPU backend only (cuda: %s)\n", why);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),     cmocka_unit_test(test_embedding_rmsnorm_swiglu),
        cmocka_unit_test(test_rope),       cmocka_unit_test(test_attention),
        cmocka_unit_test(test_kv_store_and_decode), cmocka_unit_test(test_logprob_and_sample),
        cmocka_unit_test(test_optimizer),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (int i = 0; i < n_backends; i++) backend_destroy(backends[i]);
    return rc;
}
