// cpu_ops.c: the float32 CPU implementation of the ops of kernels.h but attention's
// (cpu_attention.c): the fast paths whose numbers the run logs hold. The plain reference that
// the tests hold them to is cpu_ref.c.
//
// Matrix products go to CBLAS (OpenBLAS); everything else is plain loops, parallel
// over rows / sequences / heads with OpenMP and written so the compiler can vectorise
// the innermost loop (-O3 -march=native). Contracts (shapes, "backward accumulates",
// NULL gradients skipped, padding) are the ones written in kernels.h.
//
// Determinism: no reduction's order depends on the thread count.
// Reductions over rows (rmsnorm dweight, embedding backward, sum_squares) are either
// split by columns, each column summed in row order, or reduced per fixed block of
// rows into a partial array whose entries are then summed in block order.
//
// At the top level parallel regions and BLAS calls alternate. Inside a parallel region (the
// sampler's and the update's batches of one thread each) OpenBLAS's OpenMP build runs each
// call on the calling thread, and so do the kernels below (par_team), which then enter no
// region at all; small problems run on one thread.
// A Backend is used by one host thread at a time (its state holds the RoPE table).
#include <cblas.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "objective.h"
#include "cpu_internal.h"
#include "cpu_ops.h"
#include "philox.h"

// Logits held at a time by the logprob ops: at most this many floats (but at least
// LOGITS_MIN_ROWS rows), i.e. a chunk of rows of (rows, V), never all N rows for large V.
#define LOGITS_CHUNK_FLOATS (1 << 20)
#define LOGITS_MIN_ROWS 256
// Rows per block of the partial sums of rmsnorm's dweight.
#define RMSNORM_ROW_BLOCK 64
// Columns per task of the embedding backward.
#define EMBED_COL_BLOCK 32
// Elements per partial sum of kn_sum_squares.
#define SUMSQ_BLOCK 16384
// Positions below this get their RoPE cos/sin from a table, the others are computed.
#define ROPE_TABLE_MAX 65536

void *cpu_backend_init(char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    return xcalloc(1, sizeof(CpuBackend));
}

void cpu_backend_free(void *impl) {
    CpuBackend *st = impl;
    if (!st) return;
    free(st->rope_cos);
    free(st->rope_sin);
    free(st);
}

// ---- elementwise

void cpu_add(Backend *b, float *out, const float *x, const float *y, size_t n) {
    if (par_team(n)) {
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) out[i] = x[i] + y[i];
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) out[i] = x[i] + y[i];
    }
}

void cpu_scale(Backend *b, float *x, float s, size_t n) {
    if (par_team(n)) {
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) x[i] *= s;
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) x[i] *= s;
    }
}

// ---- token embedding

void cpu_embedding_forward(Backend *b, float *out, const int *tokens, const float *wte, int N,
                           int C) {
    if (par_team((size_t)N * C)) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * C, wte + (size_t)tokens[n] * C, (size_t)C * sizeof(float));
    } else {
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * C, wte + (size_t)tokens[n] * C, (size_t)C * sizeof(float));
    }
}

// Split by columns: each task owns EMBED_COL_BLOCK columns of dwte and adds the rows of
// dout into them in row order, so every sum has the same order for any thread count.
void cpu_embedding_backward(Backend *b, float *dwte, const float *dout, const int *tokens, int N,
                            int V, int C) {
    if (!dwte) return;
    int nblk = (C + EMBED_COL_BLOCK - 1) / EMBED_COL_BLOCK;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= PAR_MIN)
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * EMBED_COL_BLOCK;
        int c1 = c0 + EMBED_COL_BLOCK < C ? c0 + EMBED_COL_BLOCK : C;
        for (int n = 0; n < N; n++) {
            float *dst = dwte + (size_t)tokens[n] * C;
            const float *src = dout + (size_t)n * C;
#pragma omp simd
            for (int c = c0; c < c1; c++) dst[c] += src[c];
        }
    }
}

// ---- RMSNorm

static inline void rmsnorm_row(float *o, float *rstd, const float *x, const float *weight, int C,
                               float eps) {
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int c = 0; c < C; c++) ss += x[c] * x[c];
    float r = 1.0f / sqrtf(ss / (float)C + eps);
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] = x[c] * r * weight[c];
    *rstd = r;
}

void cpu_rmsnorm_forward(Backend *b, float *out, float *rstd, const float *inp,
                         const float *weight, int N, int C, float eps) {
    if (par_team((size_t)N * C)) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            rmsnorm_row(out + (size_t)n * C, rstd + n, inp + (size_t)n * C, weight, C, eps);
    } else {
        for (int n = 0; n < N; n++)
            rmsnorm_row(out + (size_t)n * C, rstd + n, inp + (size_t)n * C, weight, C, eps);
    }
}

// y = x r w with r = (mean(x^2) + eps)^(-1/2):
//   dx_c = r w_c g_c - x_c r^3 / C * sum_j g_j w_j x_j,   dw_c = sum_n g_c x_c r.
// dweight is summed per fixed block of RMSNORM_ROW_BLOCK rows, then over blocks in order.
void cpu_rmsnorm_backward(Backend *b, float *dinp, float *dweight, const float *dout,
                          const float *inp, const float *weight, const float *rstd, int N,
                          int C) {
    if (N <= 0) return;
    int nblk = (N + RMSNORM_ROW_BLOCK - 1) / RMSNORM_ROW_BLOCK;
    float *partial = dweight ? xcalloc((size_t)nblk * C, sizeof(float)) : NULL;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= PAR_MIN)
    for (int blk = 0; blk < nblk; blk++) {
        int n1 = (blk + 1) * RMSNORM_ROW_BLOCK < N ? (blk + 1) * RMSNORM_ROW_BLOCK : N;
        float *pw = partial ? partial + (size_t)blk * C : NULL;
        for (int n = blk * RMSNORM_ROW_BLOCK; n < n1; n++) {
            const float *x = inp + (size_t)n * C;
            const float *g = dout + (size_t)n * C;
            float r = rstd[n];
            if (dinp) {
                float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                for (int c = 0; c < C; c++) dot += g[c] * weight[c] * x[c];
                float k = r * r * dot / (float)C;
                float *dx = dinp + (size_t)n * C;
#pragma omp simd
                for (int c = 0; c < C; c++) dx[c] += r * (weight[c] * g[c] - x[c] * k);
            }
            if (pw) {
#pragma omp simd
                for (int c = 0; c < C; c++) pw[c] += g[c] * x[c] * r;
            }
        }
    }
    if (partial) {
        for (int blk = 0; blk < nblk; blk++) {
            const float *pw = partial + (size_t)blk * C;
#pragma omp simd
            for (int c = 0; c < C; c++) dweight[c] += pw[c];
        }
        free(partial);
    }
}

// ---- linear layer (nn.Linear layout: weight (OC,C))

const char *cpu_blas_core(void) { return openblas_get_corename(); }
const char *cpu_blas_config(void) { return openblas_get_config(); }

void cpu_matmul_forward(Backend *b, float *out, const float *inp, const float *weight, int N,
                        int C, int OC) {
    if (N <= 0 || OC <= 0) return;
    if (C <= 0) {
        memset(out, 0, (size_t)N * OC * sizeof(float));
        return;
    }
    // out (N,OC) = inp (N,C) @ weight^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, 0.0f,
                out, OC);
}

void cpu_matmul_forward_add(Backend *b, float *out, const float *inp, const float *weight, int N,
                            int C, int OC) {
    if (N <= 0 || OC <= 0 || C <= 0) return;
    // out (N,OC) += inp (N,C) @ weight^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, 1.0f,
                out, OC);
}

void cpu_matmul_backward(Backend *b, float *dinp, float *dweight, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC) {
    if (N <= 0 || C <= 0 || OC <= 0) return;
    // dinp (N,C) += dout (N,OC) @ weight (OC,C)
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight,
                    C, 1.0f, dinp, C);
    // dweight (OC,C) += dout^T (OC,N) @ inp (N,C)
    if (dweight)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C,
                    1.0f, dweight, C);
}

// ---- the decode's products, on weights packed once per generation
// out (N,OC) = inp (N,C) @ W^T with W packed into panels of DEC_PANEL_V 16-float vectors of
// output columns (the last panel as wide as it needs), each panel (C, width) row-major, so a
// product reads its weights in order and never packs them again (OpenBLAS packs W at every
// call, a seventh of a decode step at 128 rows). Each entry is a chain of fused multiply-adds
// from 0 over the inner dimension in order: OpenBLAS's own order for products beyond its
// small-matrix kernels on the machines measured (docs/kernels.md "Determinism"), which
// decode_matches_blas checks on the spot. It is that order for every row count, so a
// row's numbers do not depend on how many rows the product has.
#define DEC_PANEL_V 3
#define DEC_ROWS 8

static int dec_panels(int OC) { return (OC + 16 * DEC_PANEL_V - 1) / (16 * DEC_PANEL_V); }
// where panel p starts in the packed weights: every panel before the last is whole
static size_t dec_panel_offset(int C, int p) { return (size_t)p * C * 16 * DEC_PANEL_V; }
// vectors of panel p
static int dec_panel_vectors(int OC, int p) {
    int left = (OC - p * 16 * DEC_PANEL_V + 15) / 16;
    return left < DEC_PANEL_V ? left : DEC_PANEL_V;
}

static size_t decode_packed_floats(int C, int OC) {
    size_t n = 0;
    for (int p = 0; p < dec_panels(OC); p++) n += (size_t)C * 16 * dec_panel_vectors(OC, p);
    return n;
}

size_t cpu_decode_packed_floats(Backend *b, int C, int OC) { return decode_packed_floats(C, OC); }

static void decode_pack(float *wp, const float *W, int C, int OC) {
    for (int p = 0; p < dec_panels(OC); p++) {
        int w = 16 * dec_panel_vectors(OC, p), o0 = p * 16 * DEC_PANEL_V;
        for (int k = 0; k < C; k++, wp += w)
            for (int j = 0; j < w; j++) wp[j] = o0 + j < OC ? W[(size_t)(o0 + j) * C + k] : 0.0f;
    }
}

#ifdef __AVX512F__
// R rows x V vectors of one panel (width 16 V floats): out[r][16 v + j] for j < 16 (the last
// vector: the lanes of mask)
static inline __attribute__((always_inline)) void dec_tile(float *out, size_t ldo, const float *inp,
                                                           size_t ldi, const float *wp, int C,
                                                           const int R, const int V, __mmask16 mask) {
    __m512 acc[DEC_ROWS][DEC_PANEL_V];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) acc[r][v] = _mm512_setzero_ps();
    for (int k = 0; k < C; k++) {
        __m512 w[DEC_PANEL_V];
        for (int v = 0; v < V; v++) w[v] = _mm512_loadu_ps(wp + (size_t)k * 16 * V + 16 * v);
        for (int r = 0; r < R; r++) {
            __m512 x = _mm512_set1_ps(inp[(size_t)r * ldi + k]);
            for (int v = 0; v < V; v++) acc[r][v] = _mm512_fmadd_ps(x, w[v], acc[r][v]);
        }
    }
    for (int r = 0; r < R; r++) {
        for (int v = 0; v < V - 1; v++) _mm512_storeu_ps(out + (size_t)r * ldo + 16 * v, acc[r][v]);
        _mm512_mask_storeu_ps(out + (size_t)r * ldo + 16 * (V - 1), mask, acc[r][V - 1]);
    }
}

#define DEC_TILE_V(R)                                                                    \
    case R:                                                                              \
        if (V == 3) dec_tile(out, ldo, inp, ldi, wp, C, R, 3, mask);                     \
        else if (V == 2) dec_tile(out, ldo, inp, ldi, wp, C, R, 2, mask);                \
        else dec_tile(out, ldo, inp, ldi, wp, C, R, 1, mask);                            \
        break;
static void dec_tile_any(float *out, size_t ldo, const float *inp, size_t ldi, const float *wp, int C,
                         int R, int V, __mmask16 mask) {
    switch (R) {
        DEC_TILE_V(1) DEC_TILE_V(2) DEC_TILE_V(3) DEC_TILE_V(4)
        DEC_TILE_V(5) DEC_TILE_V(6) DEC_TILE_V(7) DEC_TILE_V(8)
    }
}
#undef DEC_TILE_V
#endif

#ifdef __AVX512F__
// Tile t of decode_matmul: panel t / nt, rows from DEC_ROWS (t % nt)
static inline void dec_task(float *out, const float *inp, const float *wp, int N, int C, int OC, int nt, int t) {
    int p = t / nt, r0 = t % nt * DEC_ROWS, V = dec_panel_vectors(OC, p), o0 = p * 16 * DEC_PANEL_V;
    int R = N - r0 < DEC_ROWS ? N - r0 : DEC_ROWS, last = OC - o0 - 16 * (V - 1);
    __mmask16 mask = first_lanes(last);
    dec_tile_any(out + (size_t)r0 * OC + o0, (size_t)OC, inp + (size_t)r0 * C, (size_t)C,
                 wp + dec_panel_offset(C, p), C, R, V, mask);
}
#endif

static void decode_matmul(float *out, const float *inp, const float *wp, int N, int C, int OC) {
    if (N <= 0 || OC <= 0) return;
#ifdef __AVX512F__
    int np = dec_panels(OC), nt = (N + DEC_ROWS - 1) / DEC_ROWS;
    if (par_team((size_t)N * C * OC / 64)) {
#pragma omp parallel for schedule(static)
        for (int t = 0; t < np * nt; t++) dec_task(out, inp, wp, N, C, OC, nt, t);
    } else {
        for (int t = 0; t < np * nt; t++) dec_task(out, inp, wp, N, C, OC, nt, t);
    }
#else
    // the scalar order (no AVX-512: decode_matches_blas keeps OpenBLAS in use instead)
    for (int p = 0; p < dec_panels(OC); p++) {
        int w = 16 * dec_panel_vectors(OC, p), o0 = p * 16 * DEC_PANEL_V;
        size_t off = dec_panel_offset(C, p);
        for (int n = 0; n < N; n++)
            for (int j = 0; j < w && o0 + j < OC; j++) {
                float acc = 0.0f;
                for (int k = 0; k < C; k++) acc = fmaf(inp[(size_t)n * C + k], wp[off + (size_t)k * w + j], acc);
                out[(size_t)n * OC + o0 + j] = acc;
            }
    }
#endif
}

void cpu_decode_pack(Backend *b, float *wp, const float *W, int C, int OC) {
    decode_pack(wp, W, C, OC);
}
void cpu_decode_matmul(Backend *b, float *out, const float *inp, const float *wp, int N, int C,
                       int OC) {
    decode_matmul(out, inp, wp, N, C, OC);
}

// Whether decode_matmul gives cblas_sgemm's numbers for 64 rows of the shape on this machine
// (0 without AVX-512, where the products run a scalar loop only as the reference).
static int decode_matches_blas(int C, int OC) {
#ifdef __AVX512F__
    // a product of 64 rows (OpenBLAS's regular kernels on the machines measured) of values in
    // [-2, 2) and weights in [-0.2, 0.2), as the blas-order check draws them
    const int N = 64;
    float *a = xmalloc((size_t)N * C * sizeof(float)), *w = xmalloc((size_t)OC * C * sizeof(float));
    float *wp = xmalloc(decode_packed_floats(C, OC) * sizeof(float));
    float *o1 = xmalloc((size_t)N * OC * sizeof(float)), *o2 = xmalloc((size_t)N * OC * sizeof(float));
    for (size_t i = 0; i < (size_t)N * C; i++) a[i] = 4.0f * philox_uniform(0xdec0de, i) - 2.0f;
    for (size_t i = 0; i < (size_t)OC * C; i++) w[i] = 0.4f * philox_uniform(0xdec0df, i) - 0.2f;
    decode_pack(wp, w, C, OC);
    decode_matmul(o1, a, wp, N, C, OC);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, a, C, w, C, 0.0f, o2, OC);
    int same = memcmp(o1, o2, (size_t)N * OC * sizeof(float)) == 0;
    free(a), free(w), free(wp), free(o1), free(o2);
    return same;
#else
    (void)C, (void)OC;
    return 0;
#endif
}

// decode_matches_blas once per shape and backend
int cpu_decode_rows_free(Backend *b, int C, int OC) {
    CpuBackend *st = b->impl;
    for (int i = 0; i < st->n_dec_known; i++)
        if (st->dec_known[i].C == C && st->dec_known[i].OC == OC) return st->dec_known[i].same;
    int same = decode_matches_blas(C, OC);
    if (st->n_dec_known < 64) {
        st->dec_known[st->n_dec_known].C = C;
        st->dec_known[st->n_dec_known].OC = OC;
        st->dec_known[st->n_dec_known++].same = same;
    }
    return same;
}

// ---- rotary position embedding ("rotate half")
// Angles as Hugging Face forms them in float32: inv_freq_i = 1 / theta^(2i/hd),
// angle = pos * inv_freq_i. cos/sin of positions [0, rope_npos) come from a table in
// the backend state (the same positions recur every step), others are computed on the
// fly, with the same values. sign = +1 rotates by +angle (forward), -1 by -angle
// (backward: the transpose of a rotation is its inverse).

static void rope_angles(float *cs, float *sn, int pos, int hd, float theta) {
    for (int i = 0; i < hd / 2; i++) {
        float angle = (float)pos * (1.0f / powf(theta, (float)(2 * i) / (float)hd));
        cs[i] = cosf(angle);
        sn[i] = sinf(angle);
    }
}

// Makes the table of (theta, hd) cover positions [0, hi] (at most ROPE_TABLE_MAX of them).
static void rope_table_cover(CpuBackend *st, int hi, int hd, float theta) {
    int half = hd / 2;
    hi = hi < ROPE_TABLE_MAX ? hi : ROPE_TABLE_MAX - 1;
    if (st->rope_cos && st->rope_theta == theta && st->rope_hd == hd && hi < st->rope_npos)
        return;
    free(st->rope_cos);
    free(st->rope_sin);
    st->rope_theta = theta;
    st->rope_hd = hd;
    st->rope_npos = hi + 1;
    st->rope_cos = xmalloc((size_t)st->rope_npos * half * sizeof(float));
    st->rope_sin = xmalloc((size_t)st->rope_npos * half * sizeof(float));
    for (int p = 0; p < st->rope_npos; p++)
        rope_angles(st->rope_cos + (size_t)p * half, st->rope_sin + (size_t)p * half, p, hd,
                    theta);
}

// The NH heads of one row at position pos (own: room for the angles of a position off the table)
static inline void rope_row(float *x, int pos, const CpuBackend *st, float *own, int NH, int hd,
                            float theta, float sign) {
    int half = hd / 2;
    const float *cs = own, *sn = own + half;
    if (pos >= 0 && pos < st->rope_npos) {
        cs = st->rope_cos + (size_t)pos * half;
        sn = st->rope_sin + (size_t)pos * half;
    } else {
        rope_angles(own, own + half, pos, hd, theta);
    }
    for (int h = 0; h < NH; h++) {
        float *xr = x + (size_t)h * hd;
#pragma omp simd
        for (int i = 0; i < half; i++) {
            float x0 = xr[i], x1 = xr[i + half], s = sign * sn[i];
            xr[i] = x0 * cs[i] - x1 * s;
            xr[i + half] = x0 * s + x1 * cs[i];
        }
    }
}

static void rope_apply(Backend *b, float *x, const int *pos, int N, int NH, int hd, float theta,
                       float sign) {
    int half = hd / 2;
    if (N <= 0 || half <= 0) return;
    CpuBackend *st = b->impl;
    int hi = 0;
    for (int n = 0; n < N; n++) hi = pos[n] > hi ? pos[n] : hi;
    rope_table_cover(st, hi, hd, theta);
    if (par_team((size_t)N * NH * hd)) {
#pragma omp parallel
        {
            float *own = xmalloc((size_t)hd * sizeof(float));  // cos/sin of a row off the table
#pragma omp for schedule(static)
            for (int n = 0; n < N; n++) rope_row(x + (size_t)n * NH * hd, pos[n], st, own, NH, hd, theta, sign);
            free(own);
        }
    } else {
        float *own = xmalloc((size_t)hd * sizeof(float));
        for (int n = 0; n < N; n++) rope_row(x + (size_t)n * NH * hd, pos[n], st, own, NH, hd, theta, sign);
        free(own);
    }
}

void cpu_rope_forward(Backend *b, float *x, const int *pos, int N, int NH, int hd, float theta) {
    rope_apply(b, x, pos, N, NH, hd, theta, 1.0f);
}

void cpu_rope_backward(Backend *b, float *dx, const int *pos, int N, int NH, int hd, float theta) {
    rope_apply(b, dx, pos, N, NH, hd, theta, -1.0f);
}

// ---- SwiGLU

static inline float sigmoidf(float x) { return 1.0f / (1.0f + exp_fast(-x)); }

#ifdef __AVX512F__
// sigmoidf of 16 floats, its operations in its order (exp_fast16 equals exp_fast). A NaN
// lane returns x itself: sigmoidf gives -x there, and which NaN a product of two returns
// depends on the order the compiler puts them in; with x, SwiGLU's results are x's NaN as
// the scalar loops' are.
static inline __m512 sigmoid16(__m512 x) {
    __m512 one = _mm512_set1_ps(1.0f);
    __m512 neg = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
    __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, exp_fast16(neg)));
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return __builtin_expect(nan != 0, 0) ? _mm512_mask_mov_ps(s, nan, x) : s;
}

// SwiGLU's elements [i0, i1) in 16-float vectors (the last one masked), each as the scalar
// loops below compute it.
static void swiglu_forward16(float *out, const float *gate, const float *up, size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i += 16) {
        __mmask16 m = first_lanes((long)(i1 - i));
        __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
        __m512 y = _mm512_mul_ps(_mm512_mul_ps(g, sigmoid16(g)), _mm512_maskz_loadu_ps(m, up + i));
        _mm512_mask_storeu_ps(out + i, m, y);
    }
}

// dgate and dup of SwiGLU's elements [i0, i1), as the scalar loop below computes them.
static void swiglu_backward16(float *dgate, float *dup, const float *dout, const float *gate,
                              const float *up, size_t i0, size_t i1) {
    __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = i0; i < i1; i += 16) {
        __mmask16 m = first_lanes((long)(i1 - i));
        __m512 x = _mm512_maskz_loadu_ps(m, gate + i), s = sigmoid16(x), d = _mm512_maskz_loadu_ps(m, dout + i);
        __m512 xs = _mm512_mul_ps(x, s);  // x s (1 - s) and d x s both take x s first
        __m512 ds = _mm512_add_ps(s, _mm512_mul_ps(xs, _mm512_sub_ps(one, s)));
        _mm512_mask_storeu_ps(dgate + i, m, _mm512_mul_ps(_mm512_mul_ps(d, _mm512_maskz_loadu_ps(m, up + i)), ds));
        _mm512_mask_storeu_ps(dup + i, m, _mm512_mul_ps(_mm512_mul_ps(d, x), s));
    }
}

// SwiGLU's forward (dout NULL: out = y) or backward (dgate = y, dup) over [i0, i1).
static void swiglu16_range(float *y, float *dup, const float *dout, const float *gate,
                           const float *up, size_t i0, size_t i1) {
    if (dout) swiglu_backward16(y, dup, dout, gate, up, i0, i1);
    else swiglu_forward16(y, gate, up, i0, i1);
}

// swiglu16_range over n elements: on a team (par_team), each thread a share of whole vectors.
static void swiglu16(int vec, float *y, float *dup, const float *dout, const float *gate, const float *up,
                     size_t n) {
    if (!par_team(n)) {
        swiglu16_range(y, dup, dout, gate, up, 0, n);
        return;
    }
#pragma omp parallel
    {
        size_t v = (n + 15) / 16, th = (size_t)omp_get_thread_num(), nth = (size_t)omp_get_num_threads();
        size_t i0 = v * th / nth * 16, i1 = v * (th + 1) / nth * 16;
        swiglu16_range(y, dup, dout, gate, up, i0 < n ? i0 : n, i1 < n ? i1 : n);
    }
}
#endif

// SwiGLU's loops are elementwise: 512-bit vectors where the CPU has them round alike.
__attribute__((target("prefer-vector-width=512")))
void cpu_swiglu_forward(Backend *b, float *out, const float *gate, const float *up, size_t n) {
    const int vec = b->paths.attention_vector;
#ifdef __AVX512F__
    if (vec >= 2) {
        swiglu16(vec, out, NULL, NULL, gate, up, n);
        return;
    }
#endif
    if (par_team(n)) {
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) out[i] = gate[i] * sigmoidf(gate[i]) * up[i];
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) out[i] = gate[i] * sigmoidf(gate[i]) * up[i];
    }
}

// d silu(x)/dx = s + x s (1 - s), s = sigmoid(x); dgate and dup are written, not added to
__attribute__((target("prefer-vector-width=512")))
void cpu_swiglu_backward(Backend *b, float *dgate, float *dup, const float *dout,
                         const float *gate, const float *up, size_t n) {
    const int vec = b->paths.attention_vector;
#ifdef __AVX512F__
    if (dgate && dup && vec >= 2) {
        swiglu16(vec, dgate, dup, dout, gate, up, n);
        return;
    }
#endif
    if (dgate && dup) {  // the usual case: one pass over the five arrays
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            float x = gate[i], s = sigmoidf(x);
            dgate[i] = dout[i] * up[i] * (s + x * s * (1.0f - s));
            dup[i] = dout[i] * x * s;
        }
    } else if (dgate) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            float x = gate[i], s = sigmoidf(x);
            dgate[i] = dout[i] * up[i] * (s + x * s * (1.0f - s));
        }
    } else if (dup) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
        for (size_t i = 0; i < n; i++) dup[i] = dout[i] * gate[i] * sigmoidf(gate[i]);
    }
}

// ---- output projection + log-softmax + gather

static int logits_chunk_rows(int N, int V) {
    int rows = LOGITS_CHUNK_FLOATS / (V > 0 ? V : 1);
    rows = rows > LOGITS_MIN_ROWS ? rows : LOGITS_MIN_ROWS;
    return N < rows ? N : rows;
}

void cpu_logprob_forward(Backend *b, float *logp, float *entropy, float *lse, const float *x,
                         const float *W, const int *targets, int N, int C, int V) {
    if (N <= 0) return;
    int R = logits_chunk_rows(N, V);
    float *logits = xmalloc((size_t)R * V * sizeof(float));
    for (int r0 = 0; r0 < N; r0 += R) {
        int rows = N - r0 < R ? N - r0 : R;
        // logits (rows,V) = x[r0:r0+rows] (rows,C) @ W^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, V, C, 1.0f,
                    x + (size_t)r0 * C, C, W, C, 0.0f, logits, V);
        // with d = z - max: lse = max + log(sum e^d), entropy = log(sum e^d) - sum e^d d / sum e^d
#pragma omp parallel for schedule(static) if ((size_t)rows * V >= PAR_MIN)
        for (int i = 0; i < rows; i++) {
            int n = r0 + i;
            const float *z = logits + (size_t)i * V;
            float m = row_max(z, V), sum = 0.0f, ed = 0.0f;
#pragma omp simd reduction(+ : sum, ed)
            for (int v = 0; v < V; v++) {
                float d = z[v] - m, e = exp_fast(d);
                sum += e;
                ed += e * d;
            }
            float logsum = logf(sum);
            lse[n] = m + logsum;
            int tgt = targets[n];
            logp[n] = tgt >= 0 ? z[tgt] - lse[n] : 0.0f;
            if (entropy) entropy[n] = tgt >= 0 ? logsum - ed / sum : 0.0f;
        }
    }
    free(logits);
}

// With p = softmax(z), logp = z_y - lse and H = -sum p log p:
//   dlogp/dz_v = [v==y] - p_v,   dH/dz_v = -p_v (log p_v + H).
// dz overwrites the recomputed logits chunk, then dx += dz @ W and dW += dz^T @ x.
void cpu_logprob_backward(Backend *b, float *dx, float *dW, const float *dlogp,
                          const float *dentropy, const float *x, const float *W,
                          const int *targets, const float *lse, int N, int C, int V) {
    if (N <= 0 || (!dx && !dW)) return;
    int R = logits_chunk_rows(N, V);
    float *dz = xmalloc((size_t)R * V * sizeof(float));
    for (int r0 = 0; r0 < N; r0 += R) {
        int rows = N - r0 < R ? N - r0 : R;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, V, C, 1.0f,
                    x + (size_t)r0 * C, C, W, C, 0.0f, dz, V);
#pragma omp parallel for schedule(static) if ((size_t)rows * V >= PAR_MIN)
        for (int i = 0; i < rows; i++) {
            int n = r0 + i;
            float *z = dz + (size_t)i * V;
            int tgt = targets[n];
            if (tgt < 0) {  // padding: no gradient
                memset(z, 0, (size_t)V * sizeof(float));
                continue;
            }
            float l = lse[n], gl = dlogp[n];
            float ge = dentropy ? dentropy[n] : 0.0f;
#pragma omp simd
            for (int v = 0; v < V; v++) z[v] -= l;  // z = log p
            if (ge != 0.0f) {
                float H = 0.0f;
#pragma omp simd reduction(+ : H)
                for (int v = 0; v < V; v++) H -= exp_fast(z[v]) * z[v];
#pragma omp simd
                for (int v = 0; v < V; v++) {
                    float p = exp_fast(z[v]);
                    z[v] = -gl * p - ge * p * (z[v] + H);
                }
            } else {
#pragma omp simd
                for (int v = 0; v < V; v++) z[v] = -gl * exp_fast(z[v]);
            }
            z[tgt] += gl;
        }
        // dx[r0:r0+rows] (rows,C) += dz (rows,V) @ W (V,C)
        if (dx)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, C, V, 1.0f, dz, V, W, C,
                        1.0f, dx + (size_t)r0 * C, C);
        // dW (V,C) += dz^T (V,rows) @ x[r0:r0+rows] (rows,C)
        if (dW)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, rows, 1.0f, dz, V,
                        x + (size_t)r0 * C, C, 1.0f, dW, C);
    }
    free(dz);
}

// ---- sampling
// Nucleus: tokens sorted by decreasing probability (ties: lower id first); the smallest
// prefix whose mass reaches top_p (at least one token). The draw is the inverse CDF of
// the renormalised nucleus taken in increasing token id: the first kept token whose
// running mass exceeds u * (nucleus mass). top_p >= 1 keeps every token, no sort.

typedef struct {
    float p;
    int id;
} ProbId;

static int cmp_prob_desc(const void *a, const void *b) {
    const ProbId *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void sample_row(int *token, float *logp, const float *z, int V, float temperature,
                       float top_p, float u, float *e, ProbId *sorted) {
    // a row without a distribution (a NaN or +Inf logit, or no finite one): token 0, logp NaN
    int finite = 0, bad = 0;
    for (int v = 0; v < V; v++) {
        finite |= isfinite(z[v]);
        bad |= isnan(z[v]) || z[v] == INFINITY;
    }
    if (bad || !finite) {
        *token = 0;
        *logp = NAN;
        return;
    }
    if (temperature <= 0.0f) {
        int best = 0;
        for (int v = 1; v < V; v++)
            if (z[v] > z[best]) best = v;
        float sum = 0.0f;
        for (int v = 0; v < V; v++) sum += exp_fast(z[v] - z[best]);
        *token = best;
        *logp = -logf(sum);  // z[best] - lse
        return;
    }
    // e_v = exp(z_v/T - max), unnormalised probabilities
    float m = -INFINITY;
    for (int v = 0; v < V; v++) {
        e[v] = z[v] / temperature;
        m = e[v] > m ? e[v] : m;
    }
    double total = 0.0;
    for (int v = 0; v < V; v++) {
        e[v] = exp_fast(e[v] - m);
        total += e[v];
    }
    // the nucleus is {v : (e_v, -v) >= (cut_p, -cut_id)}; everything when top_p >= 1
    float cut_p = 0.0f;
    int cut_id = V - 1;
    if (top_p < 1.0f) {
        for (int v = 0; v < V; v++) sorted[v] = (ProbId){e[v], v};
        qsort(sorted, (size_t)V, sizeof *sorted, cmp_prob_desc);
        double need = (double)top_p * total, mass = 0.0;
        int k = 0;
        do {
            mass += sorted[k].p;
            k++;
        } while (k < V && mass < need);
        cut_p = sorted[k - 1].p;
        cut_id = sorted[k - 1].id;
    }
#define IN_NUCLEUS(v) (e[v] > cut_p || (e[v] == cut_p && (v) <= cut_id))
    double kept = 0.0;
    for (int v = 0; v < V; v++)
        if (IN_NUCLEUS(v)) kept += e[v];
    double target = (double)u * kept, run = 0.0;
    int pick = -1;
    for (int v = 0; v < V; v++) {
        if (!IN_NUCLEUS(v)) continue;
        pick = v;  // the last kept token if rounding leaves run <= target
        run += e[v];
        if (run > target) break;
    }
#undef IN_NUCLEUS
    if (pick < 0) pick = 0;  // unreachable: the row's largest logit is finite and kept
    *token = pick;
    *logp = (z[pick] / temperature - m) - logf((float)total);  // z/T - lse, full distribution
}

void cpu_sample(Backend *b, int *tokens, float *logp, const float *logits, int B, int V,
                float temperature, float top_p, uint64_t seed, const uint64_t *counters) {
#pragma omp parallel if ((size_t)B * V >= PAR_MIN)
    {
        float *e = xmalloc((size_t)V * sizeof(float));
        ProbId *sorted = top_p < 1.0f ? xmalloc((size_t)V * sizeof(ProbId)) : NULL;
#pragma omp for schedule(static)
        for (int bb = 0; bb < B; bb++) {
            float u = temperature > 0.0f ? philox_uniform(seed, counters[bb]) : 0.0f;
            sample_row(&tokens[bb], &logp[bb], logits + (size_t)bb * V, V, temperature, top_p,
                       u, e, sorted);
        }
        free(sorted);
        free(e);
    }
}

// ---- RL objective: the formulas are objective.h's OBJ_HD functions (CUDA calls the same)

void cpu_group_advantages(Backend *b, float *adv, float *group_mean, float *group_std,
                          const float *rewards, const int *lengths, const float *greedy, int P,
                          int G, const struct ObjectiveConfig *oc) {
    double batch_mean = 0, batch_std = 0;
    if (oc->scale == SCALE_BATCH_STD) batch_std = reward_std(rewards, P * G, oc->std_ddof);
    if (oc->scale == SCALE_BATCH_WHITEN)
        batch_centered_stats(oc, rewards, lengths, greedy, P, G, &batch_mean, &batch_std);
    for (int g = 0; g < P; g++)
        group_advantages(oc, rewards + (size_t)g * G, lengths ? lengths + (size_t)g * G : NULL, G,
                         greedy ? greedy[g] : 0.0f, batch_mean, batch_std, adv + (size_t)g * G,
                         group_mean ? group_mean + g : NULL, group_std ? group_std + g : NULL);
}

// One serial pass in response order (n*T is small next to the forward that produced logp);
// with a sequence-level ratio, a first pass over each response for its mean log-ratio.
void cpu_token_weights(Backend *b, float *w, float *loss, float *kl, float *coef, int *clip_low,
                       int *clip_high, const float *logp, const float *logp_old,
                       const float *logp_ref, const unsigned char *mask, const float *adv,
                       const int *start, const int *len, int n, int T, int M, double sum_len,
                       const struct ObjectiveConfig *oc) {
    size_t NT = (size_t)n * T;
    memset(w, 0, NT * sizeof(float));
    if (loss) memset(loss, 0, NT * sizeof(float));
    if (kl) memset(kl, 0, NT * sizeof(float));
    for (int k = 0; k < n; k++) {
        float A = adv[k];
        float c = aggregation_coef(oc->aggregation, M, len[k], sum_len, oc->l_max);
        float seq_lr = 0.0f;
        if (ratio_is_sequence_level(oc)) {  // mean over the response's policy tokens
            double sum = 0;
            int count = 0;
            for (int t = 0; t < len[k]; t++) {
                size_t p = (size_t)k * T + (size_t)(start[k] + t);
                if (mask && mask[p]) continue;
                sum += sequence_log_ratio_term(oc, A, logp[p], logp_old[p]);
                count++;
            }
            seq_lr = count ? (float)(sum / count) : 0.0f;
        }
        int lo = 0, hi = 0;
        for (int t = 0; t < len[k]; t++) {
            size_t p = (size_t)k * T + (size_t)(start[k] + t);
            if (mask && mask[p]) continue;  // the environment's token: w, loss, kl stay 0
            float lp = logp[p], lp_old = logp_old[p], lp_ref = logp_ref ? logp_ref[p] : lp, l;
            w[p] = objective_token_weight(oc, c, A, lp, lp_old, lp_ref, seq_lr, &l);
            if (loss) loss[p] = l;
            if (kl) kl[p] = kl_k3(lp, lp_ref);
            int side = token_clip_side(oc, A, lp, lp_old, seq_lr);
            lo += side < 0;
            hi += side > 0;
        }
        if (coef) coef[k] = c;
        if (clip_low) clip_low[k] = lo;
        if (clip_high) clip_high[k] = hi;
    }
}

// ---- optimizer

// Partial double sums per fixed block of SUMSQ_BLOCK elements, added in block order.
double cpu_sum_squares(Backend *b, const float *g, size_t n) {
    if (n == 0) return 0.0;
    size_t nblk = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    double *partial = xmalloc(nblk * sizeof(double));
#pragma omp parallel for schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t blk = 0; blk < nblk; blk++) {
        size_t i0 = blk * SUMSQ_BLOCK, i1 = i0 + SUMSQ_BLOCK < n ? i0 + SUMSQ_BLOCK : n;
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (size_t i = i0; i < i1; i++) s += (double)g[i] * (double)g[i];
        partial[blk] = s;
    }
    double total = 0.0;
    for (size_t blk = 0; blk < nblk; blk++) total += partial[blk];
    free(partial);
    return total;
}

void cpu_adamw_update(Backend *b, float *params, const float *grads, float *m, float *v,
                      size_t n, float lr, float beta1, float beta2, float eps,
                      float weight_decay, float grad_scale, int t) {
    float bc1 = (float)(1.0 - pow((double)beta1, (double)t));
    float bc2 = (float)(1.0 - pow((double)beta2, (double)t));
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float g = grads[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / bc1, vhat = vi / bc2;
        params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * params[i]);
    }
}
