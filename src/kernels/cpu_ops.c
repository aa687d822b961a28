// cpu_ops.c: the float32 CPU reference implementation of every op in kernels.h.
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
// Below about this many flops / elements a loop runs on one thread (fork/join costs more).
#define PAR_MIN 8192

// Whether a kernel's loop over `work` floats runs on a team of threads. Below PAR_MIN, on one
// thread, or inside another parallel region (the sampler's and the update's batches of one
// thread each, where a team would have one thread) it runs on the calling thread without
// entering a region: libgomp's parallel region costs about half a microsecond and two futex
// calls even with a team of one, and a decode step calls the kernels below ~80 times. The
// loops do the same work in the same order either way.
static inline int par_team(size_t work) {
    return work >= PAR_MIN && omp_get_max_threads() > 1 && !omp_in_parallel();
}

// Positions below this get their RoPE cos/sin from a table, the others are computed.
#define ROPE_TABLE_MAX 65536

typedef struct {
    // RoPE cos/sin for one (theta, hd), positions [0, rope_npos): (npos, hd/2) each
    float rope_theta;
    int rope_hd, rope_npos;
    float *rope_cos, *rope_sin;
    // the shapes cpu_decode_rows_free has checked, and its answers
    struct { int C, OC, same; } dec_known[64];
    int n_dec_known;
} CpuBackend;

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

// exp(x) that gcc vectorises (it leaves calls to libm's expf scalar unless -fno-math-errno):
// x = n ln2 + r, n = round(x / ln2), |r| <= ln2/2 (Cody-Waite ln2 split), e^r by the
// Cephes expf polynomial, times 2^n assembled in the exponent bits. Max relative error
// ~1.5 ulp. Saturates at e^88 above, flushes to 0 below -87 (e^-87 = 1.6e-38); NaN -> NaN.
// Rounding uses the 1.5*2^23 trick, so this file must not be built with -ffast-math.
static inline float exp_fast(float x) {
    float xc = x > -87.0f ? (x < 88.0f ? x : 88.0f) : -87.0f;  // NaN -> -87, restored below
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        float f;
        int32_t i;
    } scale = {.i = ((int32_t)n + 127) << 23};
    float y = p * scale.f;
    return x != x ? x : (x < -87.0f ? 0.0f : y);
}

#ifdef __AVX512F__
// exp_fast of 16 floats: the same operations in the same order (no fused multiply-adds), so
// each lane equals exp_fast of its float bit for bit (checked for all 2^32 floats). min/max
// clamp as exp_fast's compares do for every number; a NaN lane gets another clamped value,
// but returns the NaN. The scaling by 2^n is vscalefps: the exact product p 2^n rounded once,
// as the multiplication by the float 2^n rounds it, subnormal results included. The lanes
// below -87 or NaN are set apart only when a vector has one.
static inline __m512 exp_fast16(__m512 x) {
    __m512 xc = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.0f)), _mm512_set1_ps(-87.0f));
    __m512 big = _mm512_set1_ps(12582912.0f);
    __m512 n = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)), big), big);
    __m512 r = _mm512_add_ps(_mm512_sub_ps(xc, _mm512_mul_ps(n, _mm512_set1_ps(0.693359375f))),
                             _mm512_mul_ps(n, _mm512_set1_ps(2.12194440e-4f)));
    __m512 p = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(1.9875691500e-4f), r),
                             _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, r), r), r), _mm512_set1_ps(1.0f));
    __m512 y = _mm512_scalef_ps(p, n);  // p 2^n, rounded once as p times the float 2^n is
    if (__builtin_expect(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_NGE_UQ) != 0, 0)) {
        y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_NLT_UQ), y);  // x < -87: 0
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);                   // NaN: x
    }
    return y;
}

// The first n of 16 lanes (none for n <= 0, all for n >= 16): a masked vector's valid floats.
static inline __mmask16 first_lanes(long n) {
    unsigned k = n <= 0 ? 0u : n >= 16 ? 16u : (unsigned)n;  // clamped, so no branch is needed
    return (__mmask16)((1u << k) - 1);
}

// The low and the high 8 floats of a vector of 16.
static inline __m256 lo8(__m512 v) { return _mm512_castps512_ps256(v); }
static inline __m256 hi8(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }
#endif

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

// ---- attention
// One task is one (sequence, KV head): the query heads that share the KV head run in it,
// so the backward accumulates dk/dv without races and in a fixed order. The T x T products
// are sgemms on the task's thread.

static inline int clamp_len(int len, int T) { return len < 0 ? 0 : (len > T ? T : len); }

// max(x[0..n)) in 16 lanes, so that the compares do not wait on one another (a single
// running maximum waits on each compare's latency). The maximum of finite values is exact in
// any order; of equal zeros it may be the other sign, which no caller can tell apart (they
// take x - max). NaNs are skipped, as by one running `x > m ? x : m`.
static inline float row_max(const float *x, int n) {
    float lane[16], m = -INFINITY;
    for (int i = 0; i < 16; i++) lane[i] = -INFINITY;
    int s = 0;
    for (; s + 16 <= n; s += 16)
#pragma omp simd
        for (int i = 0; i < 16; i++) lane[i] = x[s + i] > lane[i] ? x[s + i] : lane[i];
    for (; s < n; s++) m = x[s] > m ? x[s] : m;
    for (int i = 0; i < 16; i++) m = lane[i] > m ? lane[i] : m;
    return m;
}


// The order of a decode score q . k (n = hd terms), fixed here so that it does not depend on
// how a compiler vectorises: of the first m = 8 floor(n / 8) terms, term i is added to lane
// i % 8 in ascending i; the terms m..n-1 are then added to lane 0 in order; each product is
// rounded before its sum (this file is built without contraction to fused multiply-adds,
// -std=c11), and the 8 lanes are summed in order 0..7 onto +0. It is the order gcc 12 gave
// the earlier `omp simd reduction` loop with 8-float vectors (a vector loop, its scalar
// remainder, the lanes), so sampled responses did not change with it. The vector path below
// computes the same sums 8 positions at a time.
static inline float dot_lanes8(const float *q, const float *k, int n) {
    float lane[8] = {0};
    int m = n / 8 * 8;
    for (int i = 0; i < m; i++) lane[i % 8] += q[i] * k[i];
    for (int i = m; i < n; i++) lane[0] += q[i] * k[i];
    float d = 0.0f;
    for (int j = 0; j < 8; j++) d += lane[j];
    return d;
}

// dot_lanes8 with its 8 lanes in one vector where the CPU has AVX (vec >= 1): the
// same sums in the same order.
static inline float dot_lanes8_any(int vec, const float *a, const float *b, int n) {
#ifdef __AVX__
    if (vec >= 1) {
        __m256 acc = _mm256_setzero_ps();
        int m = n / 8 * 8;
        for (int i = 0; i < m; i += 8)
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
        float lane[8];
        _mm256_storeu_ps(lane, acc);
        for (int i = m; i < n; i++) lane[0] += a[i] * b[i];
        float d = 0.0f;
        for (int j = 0; j < 8; j++) d += lane[j];
        return d;
    }
#endif
    return dot_lanes8(a, b, n);
}

// p[s] = exp_fast((p[s] - maxv) * scale) for s < n (the softmax's numerators), and their
// sum in a fixed order: of the first m = 8 floor(n / 8), p[s] is added to lane s % 8 in
// ascending s; the rest to lane 0 in order; the 8 lanes are summed in order 0..7 onto +0.
// It is the order gcc 12 gave the earlier `omp simd reduction` loop with 8-float vectors,
// so no softmax changed with it (the order of dot_lanes8 above). The AVX-512 path computes
// 16 exponentials at a time and adds them to the lanes as two vectors of 8.
static inline float exp_sum(int vec, float *p, int n, float maxv, float scale) {
    float lane[8] = {0};
    int s = 0, m = n / 8 * 8;
#ifdef __AVX512F__
    if (vec >= 2) {
        __m512 mv = _mm512_set1_ps(maxv), sc = _mm512_set1_ps(scale);
        __m256 acc = _mm256_setzero_ps();
        for (; s + 32 <= m; s += 32) {  // two at a time: independent chains hide the latency
            __m512 e0 = exp_fast16(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(p + s), mv), sc));
            __m512 e1 = exp_fast16(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(p + s + 16), mv), sc));
            _mm512_storeu_ps(p + s, e0);
            _mm512_storeu_ps(p + s + 16, e1);
            acc = _mm256_add_ps(acc, lo8(e0));
            acc = _mm256_add_ps(acc, hi8(e0));
            acc = _mm256_add_ps(acc, lo8(e1));
            acc = _mm256_add_ps(acc, hi8(e1));
        }
        for (; s + 16 <= m; s += 16) {
            __m512 e = exp_fast16(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(p + s), mv), sc));
            _mm512_storeu_ps(p + s, e);
            acc = _mm256_add_ps(acc, lo8(e));
            acc = _mm256_add_ps(acc, hi8(e));
        }
        float tail[16];
        int j = 0, left = n - s;  // < 16: one vector of 8 into the lanes, then lane 0
        if (left > 0) {
            __mmask16 in = first_lanes(left);
            __m512 e = exp_fast16(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(in, p + s), mv), sc));
            _mm512_mask_storeu_ps(p + s, in, e);
            _mm512_storeu_ps(tail, e);
            if (s + 8 <= m) {
                acc = _mm256_add_ps(acc, lo8(e));
                j = 8;
            }
        }
        _mm256_storeu_ps(lane, acc);
        for (; j < left; j++) lane[0] += tail[j];
        s = n;
    }
#endif
    for (; s < m; s += 8)
        for (int j = 0; j < 8; j++) lane[j] += p[s + j] = exp_fast((p[s + j] - maxv) * scale);
    for (; s < n; s++) lane[0] += p[s] = exp_fast((p[s] - maxv) * scale);
    float d = 0.0f;
    for (int j = 0; j < 8; j++) d += lane[j];
    return d;
}

// The (L, L) products of causal attention by blocks of rows (or columns), leaving out the
// blocks above the diagonal, where the probabilities are zero: about half the work at long
// sequences. A block's product keeps the whole product's inner dimension in its order (the
// left-out terms are zeros at the end or the start of each sum), and every block has
// ATT_BLOCK to 2 ATT_BLOCK - 1 rows (the last takes the remainder), so with OpenBLAS 0.3.21
// each entry rounds as in the whole product: checked for every L from 1 to 384 on the Intel
// Xeon development machine, where blocks of 32, or a last block of fewer than 64 rows, took
// other kernels for the small products and rounded otherwise (docs/kernels.md).
#define ATT_BLOCK 64

// The end of the block that starts at row r0 of L.
static inline int block_end(int r0, int L) { return L - r0 < 2 * ATT_BLOCK ? L : r0 + ATT_BLOCK; }

// C[t, s] = alpha A_t . B_s for s below the end of t's block (A (L, n), B (L, n)).
static void causal_nt(int L, int n, float alpha, const float *A, int lda, const float *B, int ldb,
                      float *C, int ldc) {
    for (int r0 = 0, r1; r0 < L; r0 = r1) {
        r1 = block_end(r0, L);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, n, alpha, A + (size_t)r0 * lda,
                    lda, B, ldb, 0.0f, C + (size_t)r0 * ldc, ldc);
    }
}

// O = P X + beta O, with P (L, L) zero above the diagonal, X (L, n).
static void causal_nn(int L, int n, const float *P, int ldp, const float *X, int ldx, float beta,
                      float *O, int ldo) {
    for (int r0 = 0, r1; r0 < L; r0 = r1) {
        r1 = block_end(r0, L);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, n, r1, 1.0f, P + (size_t)r0 * ldp,
                    ldp, X, ldx, beta, O + (size_t)r0 * ldo, ldo);
    }
}

// D += P^T X, with P (L, L) zero above the diagonal, X (L, n).
static void causal_tn(int L, int n, const float *P, int ldp, const float *X, int ldx, float *D, int ldd) {
    for (int c0 = 0, c1; c0 < L; c0 = c1) {
        c1 = block_end(c0, L);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c1 - c0, n, L - c0, 1.0f,
                    P + (size_t)c0 * ldp + c0, ldp, X + (size_t)c0 * ldx, ldx, 1.0f, D + (size_t)c0 * ldd, ldd);
    }
}

// ---- attention products of our own, for sequences of OWN_MIN_LEN tokens or more
// OpenBLAS 0.3.21 on the Intel Xeon development machine (SKYLAKEX kernels) computes every
// entry of the products above, for blocks of 64 rows or more, as a chain of fused
// multiply-adds from 0 in the inner dimension's order, then alpha times it plus beta C
// (checked for every entry, L from 64 to 384: docs/kernels.md). The kernels below compute
// the products in that order themselves, so runs keep their numbers there bit for bit,
// without OpenBLAS's packing and zeroing of C and with the causal triangle cut at a finer
// grain:
//   scores_rows:  S[t][s] = alpha (A_t . B_s) for s <= t (the scores, and dP = dO V^T),
//   nn_rows:      O[t][j] (+)= sum_{s=0}^{t} P[t][s] X[s][j] (O = P V, dQ += dS K),
//   tn_acc_rows:  D[c][j] += sum_{t=c}^{L-1} P[t][c] X[t][j] (dV and dK), by blocks of rows.
// Shorter sequences keep OpenBLAS, whose kernels for fewer rows round otherwise. The tiles
// are AVX-512 vectors; elsewhere every product is OpenBLAS's. cpu_vec(0) runs
// the same sums as scalar loops: the reference of tests/test_kernels.c.
// cpu_attention_own_products(0) takes OpenBLAS for every product: `make blas-order` compares
// the two on this machine (scripts/blas_order.c).
#define OWN_MIN_LEN ATT_BLOCK

static inline int own_products(const Backend *b, int L, int hd) {
#ifdef __AVX512F__
    return b->paths.attention_own_products && L >= OWN_MIN_LEN && (hd == 32 || hd == 64);
#else
    return 0 * L * hd;
#endif
}

// scores_rows takes B transposed: bt = B^T (hd x bt_ld(L), zero past L), from causal_bt.
static inline int bt_ld(int L) { return (L + 31) / 32 * 32; }

#ifdef __AVX512F__
// The 16 x 16 floats r[i][j] into r[j][i] (unpacks within 128-bit lanes, then lane shuffles).
static inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}
#endif

static void causal_bt(int vec, float *bt, const float *B, int ldb, int L, int hd) {
    int ld = bt_ld(L);
#ifdef __AVX512F__
    if (vec >= 2 && hd % 16 == 0) {  // blocks of 16 x 16 (ld is a multiple of 32)
        for (int s0 = 0; s0 < ld; s0 += 16)
            for (int c0 = 0; c0 < hd; c0 += 16) {
                __m512 r[16];
                for (int i = 0; i < 16; i++)
                    r[i] = s0 + i < L ? _mm512_loadu_ps(B + (size_t)(s0 + i) * ldb + c0) : _mm512_setzero_ps();
                transpose16(r);
                for (int j = 0; j < 16; j++) _mm512_storeu_ps(bt + (size_t)(c0 + j) * ld + s0, r[j]);
            }
        return;
    }
#endif
    for (int s = 0; s < ld; s++) {  // rows of B in order: hd output rows filled alongside
        const float *br = B + (size_t)s * ldb;
        for (int c = 0; c < hd; c++) bt[(size_t)c * ld + s] = s < L ? br[c] : 0.0f;
    }
}

#ifdef __AVX512F__
// R rows x ncols (<= 32) columns of S, each entry's chain over c; the accumulators have a
// fixed size (R <= 8), so that they stay in registers. Loads read bt up to 32 columns on
// (bt_ld pads it), stores write ncols. With lmax, row i's entries in the columns up to
// diag + i (its diagonal, counted from the tile's first column) go into its 16 lane maxima
// lmax[i], as row_max's lanes take them (NaNs skipped).
static inline __attribute__((always_inline)) void scores_tile(float *S, size_t lds, const float *A,
                                                             size_t lda, const float *bt, size_t ldbt,
                                                             int hd, int ncols, float alpha, const int R,
                                                             __m512 *lmax, int diag) {
    __m512 acc[8][2];
    for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int c = 0; c < hd; c++) {
        __m512 b0 = _mm512_loadu_ps(bt + (size_t)c * ldbt), b1 = _mm512_loadu_ps(bt + (size_t)c * ldbt + 16);
        for (int i = 0; i < R; i++) {
            __m512 a = _mm512_set1_ps(A[(size_t)i * lda + c]);
            acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
        }
    }
    // the masks written out: with first_lanes, gcc's code for the whole tile ran slower
    __mmask16 m0 = ncols >= 16 ? 0xFFFF : (__mmask16)((1u << ncols) - 1);
    __mmask16 m1 = ncols >= 32 ? 0xFFFF : (ncols > 16 ? (__mmask16)((1u << (ncols - 16)) - 1) : 0);
    __m512 al = _mm512_set1_ps(alpha);
    for (int i = 0; i < R; i++) {
        __m512 s0 = _mm512_mul_ps(acc[i][0], al), s1 = _mm512_mul_ps(acc[i][1], al);
        _mm512_mask_storeu_ps(S + (size_t)i * lds, m0, s0);
        _mm512_mask_storeu_ps(S + (size_t)i * lds + 16, m1, s1);
        if (lmax) {  // the row's entries up to its diagonal (diag + i, >= 0), to its lanes' maxima
            int n = diag + i + 1 < ncols ? diag + i + 1 : ncols;
            __mmask16 v0 = n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1);
            __mmask16 v1 = n >= 32 ? 0xFFFF : (n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0);
            lmax[i] = _mm512_mask_max_ps(lmax[i], v0, s0, lmax[i]);  // s > max ? s : max
            lmax[i] = _mm512_mask_max_ps(lmax[i], v1, s1, lmax[i]);
        }
    }
}

// R rows of O, HC vectors of 16 columns (hd = 16 HC): the chains over s = 0..n-1 of
// P[t][s] X[s][j], then O = the sum (beta 0) or O += it (beta 1).
static inline __attribute__((always_inline)) void nn_tile(float *O, size_t ldo, const float *P, size_t ldp,
                                                         const float *X, size_t ldx, int n, int beta,
                                                         const int R, const int HC) {
    __m512 acc[8][4], x[4];  // fixed sizes (R <= 8, HC <= 4), so that they stay in registers
    for (int i = 0; i < R; i++)
        for (int h = 0; h < HC; h++) acc[i][h] = _mm512_setzero_ps();
    for (int s = 0; s < n; s++) {
        for (int h = 0; h < HC; h++) x[h] = _mm512_loadu_ps(X + (size_t)s * ldx + 16 * h);
        for (int i = 0; i < R; i++) {
            __m512 a = _mm512_set1_ps(P[(size_t)i * ldp + s]);
            for (int h = 0; h < HC; h++) acc[i][h] = _mm512_fmadd_ps(a, x[h], acc[i][h]);
        }
    }
    for (int i = 0; i < R; i++)
        for (int h = 0; h < HC; h++) {
            float *o = O + (size_t)i * ldo + 16 * h;
            _mm512_storeu_ps(o, beta ? _mm512_add_ps(_mm512_loadu_ps(o), acc[i][h]) : acc[i][h]);
        }
}

// acc[c] (rows c < ncol of HC vectors of 16 floats, row stride hd = 16 HC) continues its
// chains over the R rows t of P and X: acc[c][j] = fma(P[t][c], X[t][j], acc[c][j]) in
// ascending t. The R rows of X stay in registers while the columns of P go by.
static inline __attribute__((always_inline)) void tn_acc_tile(float *acc, const float *P, size_t ldp,
                                                             const float *X, size_t ldx, int R, int ncol,
                                                             const int HC) {
    __m512 x[8][4];  // fixed sizes (R <= 8, HC <= 4, R HC <= 16), so that they stay in registers
    for (int i = 0; i < R; i++)
        for (int h = 0; h < HC; h++) x[i][h] = _mm512_loadu_ps(X + (size_t)i * ldx + 16 * h);
    for (int c = 0; c < ncol; c++) {
        float *ac = acc + (size_t)c * 16 * HC;
        __m512 a[4];
        for (int h = 0; h < HC; h++) a[h] = _mm512_loadu_ps(ac + 16 * h);
        for (int i = 0; i < R; i++) {
            __m512 pv = _mm512_set1_ps(P[(size_t)i * ldp + c]);
            for (int h = 0; h < HC; h++) a[h] = _mm512_fmadd_ps(pv, x[i][h], a[h]);
        }
        for (int h = 0; h < HC; h++) _mm512_storeu_ps(ac + 16 * h, a[h]);
    }
}
#endif

// Rows t0..t1-1 of S: tiles of 8 rows x 32 columns up to each tile's last row;
// the columns a tile covers past the diagonal are written too (the callers overwrite them).
// With mx (the forward's scores), mx[t] = max_{s <= t} S[t][s], as row_max gives it.
static void scores_rows(int vec, int t0, int t1, int L, int hd, float alpha, const float *A, int lda,
                        const float *bt, float *S, int lds, float *mx) {
    size_t ldbt = (size_t)bt_ld(L);
#ifdef __AVX512F__
    if (vec >= 2) {
        __m512 lmax[8], *lm = mx ? lmax : NULL;
        for (; t0 + 8 <= t1; t0 += 8) {
            for (int i = 0; i < 8; i++) lmax[i] = _mm512_set1_ps(-INFINITY);
            for (int s0 = 0; s0 < t0 + 8; s0 += 32)
                scores_tile(S + (size_t)t0 * lds + s0, (size_t)lds, A + (size_t)t0 * lda, (size_t)lda,
                            bt + s0, ldbt, hd, L - s0 < 32 ? L - s0 : 32, alpha, 8, lm, t0 - s0);
            if (mx)
                for (int i = 0; i < 8; i++) mx[t0 + i] = _mm512_reduce_max_ps(lmax[i]);
        }
        for (; t0 < t1; t0++) {
            lmax[0] = _mm512_set1_ps(-INFINITY);
            for (int s0 = 0; s0 <= t0; s0 += 32)
                scores_tile(S + (size_t)t0 * lds + s0, (size_t)lds, A + (size_t)t0 * lda, (size_t)lda,
                            bt + s0, ldbt, hd, L - s0 < 32 ? L - s0 : 32, alpha, 1, lm, t0 - s0);
            if (mx) mx[t0] = _mm512_reduce_max_ps(lmax[0]);
        }
    }
#endif
    for (; t0 < t1; t0++) {
        for (int s = 0; s <= t0; s++) {
            float acc = 0.0f;
            for (int c = 0; c < hd; c++) acc = fmaf(A[(size_t)t0 * lda + c], bt[(size_t)c * ldbt + s], acc);
            S[(size_t)t0 * lds + s] = acc * alpha;
        }
        if (mx) mx[t0] = row_max(S + (size_t)t0 * lds, t0 + 1);
    }
}

#ifdef __AVX512F__
// nn_rows' tiles of R rows, then single rows for the last ones. Returns the row after them.
static inline __attribute__((always_inline)) int nn_tiles(int t0, int t1, const float *P, int ldp, const float *X,
                                                         int ldx, int beta, float *O, int ldo, const int R,
                                                         const int HC) {
    for (; t0 + R <= t1; t0 += R)
        nn_tile(O + (size_t)t0 * ldo, (size_t)ldo, P + (size_t)t0 * ldp, (size_t)ldp, X, (size_t)ldx, t0 + R,
                beta, R, HC);
    for (; t0 < t1; t0++)
        nn_tile(O + (size_t)t0 * ldo, (size_t)ldo, P + (size_t)t0 * ldp, (size_t)ldp, X, (size_t)ldx, t0 + 1,
                beta, 1, HC);
    return t0;
}
#endif

// Rows t0..t1-1 of O = P X (beta 0) or O += P X (beta 1), P zero past the diagonal: each entry
// the chain over s = 0..t1-1 from 0 (the zeros past a row's diagonal leave it as it is), in
// tiles of 8 rows (4 where hd = 64).
static void nn_rows(int vec, int t0, int t1, int hd, const float *P, int ldp, const float *X, int ldx,
                    int beta, float *O, int ldo) {
#ifdef __AVX512F__
    if (vec >= 2 && hd == 32) t0 = nn_tiles(t0, t1, P, ldp, X, ldx, beta, O, ldo, 8, 2);
    if (vec >= 2 && hd == 64) t0 = nn_tiles(t0, t1, P, ldp, X, ldx, beta, O, ldo, 4, 4);
#endif
    for (; t0 < t1; t0++)
        for (int j = 0; j < hd; j++) {
            float acc = 0.0f;
            for (int s = 0; s <= t0; s++) acc = fmaf(P[(size_t)t0 * ldp + s], X[(size_t)s * ldx + j], acc);
            float *o = O + (size_t)t0 * ldo + j;
            *o = beta ? *o + acc : acc;
        }
}

// D += P^T X by blocks of rows: acc (ncol x hd) continues the chains of P^T X over the n rows
// of P (row stride ldp, columns c < ncol) and X, in ascending row order. Called for the blocks
// of rows from 0 on in turn on an acc of zeros, then D += acc: each entry of D gets its chain
// over t ascending from 0 (the zeros of P above the diagonal add nothing to it), as OpenBLAS
// sums, with P read by rows (by columns, its strided loads waited on the L3 cache).
static void tn_acc_rows(int vec, float *acc, int hd, const float *P, int ldp, const float *X, int ldx, int n, int ncol) {
#ifdef __AVX512F__
    if (vec >= 2 && (hd == 32 || hd == 64)) {
        int step = hd == 32 ? 8 : 4;  // rows of X in registers: 16 vectors
        for (int i0 = 0; i0 < n; i0 += step) {
            int R = n - i0 < step ? n - i0 : step;
            const float *pb = P + (size_t)i0 * ldp, *xb = X + (size_t)i0 * ldx;
            if (hd == 32) tn_acc_tile(acc, pb, (size_t)ldp, xb, (size_t)ldx, R, ncol, 2);
            else tn_acc_tile(acc, pb, (size_t)ldp, xb, (size_t)ldx, R, ncol, 4);
        }
        return;
    }
#endif
    for (int i = 0; i < n; i++)
        for (int c = 0; c < ncol; c++)
            for (int j = 0; j < hd; j++)
                acc[(size_t)c * hd + j] = fmaf(P[(size_t)i * ldp + c], X[(size_t)i * ldx + j], acc[(size_t)c * hd + j]);
}

// x[0..n) *= s, the last partial vector masked (gcc's loop ends in scalar steps).
static inline void scale_row(int vec, float *x, int n, float s) {
    int i = 0;
#ifdef __AVX512F__
    if (vec >= 2) {
        __m512 sv = _mm512_set1_ps(s);
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), sv));
        if (i < n) {
            __mmask16 m = first_lanes(n - i);
            _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), sv));
        }
        return;
    }
#endif
#pragma omp simd
    for (int j = i; j < n; j++) x[j] *= s;
}

// The causal softmax of rows 0..L-1 of the scores p (row stride T), in place, with zeros
// past the diagonal to column T; mx: the rows' maxima where the scores' product gave them.
// 512-bit vectors where the CPU has them: none of its loops sums in an order that the width
// would change (exp_sum fixes its own).
__attribute__((target("prefer-vector-width=512")))
static void softmax_rows(int vec, float *p, int T, int L, const float *mx) {
    for (int t = 0; t < L; t++) {
        float *pr = p + (size_t)t * T;
        float inv = 1.0f / exp_sum(vec, pr, t + 1, mx ? mx[t] : row_max(pr, t + 1), 1.0f);
        scale_row(vec, pr, t + 1, inv);
        memset(pr + t + 1, 0, (size_t)(T - t - 1) * sizeof(float));
    }
}

// Rows t0..t1-1 of dS = P * (dP - rowsum(P * dP)) * scale, in place of dP (ds, row stride T),
// zero past the diagonal to column zero_to (what the products after it read: the block's
// end for the own ones, L for OpenBLAS's blocks).
// rowsum(P * dP) in dot_lanes8's order (that of the `omp simd reduction` loop it replaced).
static void softmax_backward_rows(int vec, const float *p, float *ds, int T, int zero_to, int t0, int t1,
                                  float scale) {
    for (int t = t0; t < t1; t++) {
        const float *pr = p + (size_t)t * T;
        float *dr = ds + (size_t)t * T, pdp = dot_lanes8_any(vec, pr, dr, t + 1);
#pragma omp simd
        for (int s2 = 0; s2 <= t; s2++) dr[s2] = pr[s2] * (dr[s2] - pdp) * scale;
        for (int s2 = t + 1; s2 < zero_to; s2++) dr[s2] = 0.0f;
    }
}

// The backward's rows of a head in blocks of ATT_ROWS with the own products: a block's dP,
// dS, dQ and its share of dV and dK run while its rows are in the L1 cache.
#define ATT_ROWS 8

// Per (sequence, head): S = scale Q K^T, the causal softmax, O = P V, the products as
// single-threaded sgemms (OpenBLAS's OpenMP build runs BLAS called inside a parallel region
// on the calling thread) or our own (above). Work is split by (sequence, KV head), so a task
// owns its dk/dv rows and transposes its keys once.
void cpu_attention_forward(Backend *b, float *out, float *att, const float *q, const float *k,
                           const float *v, const int *lengths, int B, int T, int NH, int NKV,
                           int hd) {
    const int vec = b->paths.attention_vector;
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)hd);
    size_t qstride = (size_t)NH * hd, kvstride = (size_t)NKV * hd;
#pragma omp parallel if ((size_t)B * NH * T * T * hd >= PAR_MIN)
    {
        float *kt = xmalloc(((size_t)hd * bt_ld(T) + 1) * sizeof(float));  // K^T for scores_rows
        float *mx = xmalloc(((size_t)T + 1) * sizeof(float));              // the rows' maxima
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int bb = 0; bb < B; bb++) {
            for (int kh = 0; kh < NKV; kh++) {
                int L = clamp_len(lengths[bb], T), own = own_products(b, L, hd);
                const float *kb = k + (size_t)bb * T * kvstride + (size_t)kh * hd;
                const float *vb = v + (size_t)bb * T * kvstride + (size_t)kh * hd;
                if (own) causal_bt(vec, kt, kb, (int)kvstride, L, hd);
                for (int h = kh * group; h < (kh + 1) * group; h++) {
                    float *p = att + ((size_t)bb * NH + h) * T * T;  // (T,T)
                    const float *qb = q + (size_t)bb * T * qstride + (size_t)h * hd;
                    float *ob = out + (size_t)bb * T * qstride + (size_t)h * hd;
                    if (own) scores_rows(vec, 0, L, L, hd, scale, qb, (int)qstride, kt, p, T, mx);
                    else causal_nt(L, hd, scale, qb, (int)qstride, kb, (int)kvstride, p, T);
                    softmax_rows(vec, p, T, L, own ? mx : NULL);
                    if (own) nn_rows(vec, 0, L, hd, p, T, vb, (int)kvstride, 0, ob, (int)qstride);
                    else causal_nn(L, hd, p, T, vb, (int)kvstride, 0.0f, ob, (int)qstride);
                    for (int t = L; t < T; t++) {
                        memset(p + (size_t)t * T, 0, (size_t)T * sizeof(float));
                        memset(ob + (size_t)t * qstride, 0, (size_t)hd * sizeof(float));
                    }
                }
            }
        }
        free(kt);
        free(mx);
    }
}

// With P the saved probabilities (zero for s > t) and dO the output gradient, per head:
//   dV += P^T dO;  dP = dO V^T;  dS = P * (dP - rowsum(P * dP)) * scale;
//   dQ += dS K;  dK += dS^T Q   (each a single-threaded sgemm on the (L,L) block, or our own
//   products above, all of them by blocks of ATT_ROWS rows).
void cpu_attention_backward(Backend *b, float *dq, float *dk, float *dv, const float *dout,
                            const float *att, const float *q, const float *k, const float *v,
                            const int *lengths, int B, int T, int NH, int NKV, int hd) {
    const int vec = b->paths.attention_vector;
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)hd);
    size_t qstride = (size_t)NH * hd, kvstride = (size_t)NKV * hd;
    int need_ds = dq != NULL || dk != NULL;
    if (!need_ds && !dv) return;
#pragma omp parallel if ((size_t)B * NH * T * T * hd >= PAR_MIN)
    {
        float *ds = xmalloc(((size_t)T * T + 1) * sizeof(float));
        float *vt = xmalloc(((size_t)hd * bt_ld(T) + 1) * sizeof(float));  // V^T for scores_rows
        float *accv = xmalloc(((size_t)T * hd + 1) * sizeof(float));        // dV, dK of a head
        float *acck = xmalloc(((size_t)T * hd + 1) * sizeof(float));
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int bb = 0; bb < B; bb++) {
            for (int kh = 0; kh < NKV; kh++) {
                int L = clamp_len(lengths[bb], T);
                if (L == 0) continue;
                size_t kvoff = (size_t)bb * T * kvstride + (size_t)kh * hd;
                int own = own_products(b, L, hd);
                if (own && need_ds) causal_bt(vec, vt, v + kvoff, (int)kvstride, L, hd);
                for (int h = kh * group; h < (kh + 1) * group; h++) {
                    const float *p = att + ((size_t)bb * NH + h) * T * T;
                    size_t qoff = (size_t)bb * T * qstride + (size_t)h * hd;
                    if (own) {
                        size_t nacc = (size_t)L * hd * sizeof(float);
                        if (dv) memset(accv, 0, nacc);
                        if (dk) memset(acck, 0, nacc);
                        for (int t0 = 0, t1; t0 < L; t0 = t1) {
                            t1 = L - t0 < ATT_ROWS ? L : t0 + ATT_ROWS;
                            size_t qt = qoff + (size_t)t0 * qstride;
                            if (dv) tn_acc_rows(vec, accv, hd, p + (size_t)t0 * T, T, dout + qt, (int)qstride, t1 - t0, t1);
                            if (!need_ds) continue;
                            scores_rows(vec, t0, t1, L, hd, 1.0f, dout + qoff, (int)qstride, vt, ds, T, NULL);
                            softmax_backward_rows(vec, p, ds, T, t1, t0, t1, scale);
                            if (dq) nn_rows(vec, t0, t1, hd, ds, T, k + kvoff, (int)kvstride, 1, dq + qoff, (int)qstride);
                            if (dk) tn_acc_rows(vec, acck, hd, ds + (size_t)t0 * T, T, q + qt, (int)qstride, t1 - t0, t1);
                        }
                        for (int c = 0; c < L; c++)
                            for (int j = 0; j < hd; j++) {
                                size_t o = kvoff + (size_t)c * kvstride + j, a = (size_t)c * hd + j;
                                if (dv) dv[o] += accv[a];
                                if (dk) dk[o] += acck[a];
                            }
                    } else {
                        if (dv) causal_tn(L, hd, p, T, dout + qoff, (int)qstride, dv + kvoff, (int)kvstride);
                        if (!need_ds) continue;
                        causal_nt(L, hd, 1.0f, dout + qoff, (int)qstride, v + kvoff, (int)kvstride, ds, T);
                        softmax_backward_rows(vec, p, ds, T, L, 0, L, scale);
                        if (dq) causal_nn(L, hd, ds, T, k + kvoff, (int)kvstride, 1.0f, dq + qoff, (int)qstride);
                        if (dk) causal_tn(L, hd, ds, T, q + qoff, (int)qstride, dk + kvoff, (int)kvstride);
                    }
                }
            }
        }
        free(ds);
        free(vt);
        free(accv);
        free(acck);
    }
}

// Rows that would land outside [0, Tmax) are not written (the caller sized the cache).
static inline void kv_store_row(float *cache, const float *src, int start, int n, int Tmax, int W) {
    for (int t = 0; t < n; t++) {
        int dst = start + t;
        if (dst < 0 || dst >= Tmax) continue;
        memcpy(cache + (size_t)dst * W, src + (size_t)t * W, (size_t)W * sizeof(float));
    }
}

void cpu_kv_store(Backend *b, float *cache, const float *src, const int *start, const int *count,
                  int B, int T, int Tmax, int W) {
#define KV_ROW(bb) kv_store_row(cache + (size_t)(bb) * Tmax * W, src + (size_t)(bb) * T * W, start[bb], \
                                count ? (count[bb] < T ? count[bb] : T) : T, Tmax, W)
    if (par_team((size_t)B * T * W)) {
#pragma omp parallel for schedule(static)
        for (int bb = 0; bb < B; bb++) KV_ROW(bb);
    } else {
        for (int bb = 0; bb < B; bb++) KV_ROW(bb);
    }
#undef KV_ROW
}

// One query row per (b, h) against its cached keys. A sequence's heads are done together
// so its cache rows (NKV*hd contiguous floats per position) stream through once; keys are
// read in place, with no transpose, since each is used by only `group` queries.
// The decode loops read each sequence's K and V rows once, in order, and wait on those loads
// (docs/notebook/2026-12-05-bench-rl-history.md, "Profile of the RL step"); the hardware
// prefetcher restarts at every 4 KiB page, so the rows a few positions ahead are requested
// explicitly. A hint only: the arithmetic is unchanged (a prefetch past the cache's end does
// not fault).
#define DECODE_PREFETCH_ROWS 8
static inline void prefetch_row(const float *row, size_t n) {
    for (size_t i = 0; i < n; i += 16) __builtin_prefetch(row + i, 0, 3);
}

#ifdef __AVX2__
// d[p] = ((0 + a[p][0]) + a[p][1]) + ... + a[p][7] for p = 0..7: the lanes of 8 vectors
// summed in order, by an 8 x 8 transpose.
static inline __m256 lane_sums8(const __m256 a[8]) {
    __m256 t0 = _mm256_unpacklo_ps(a[0], a[1]), t1 = _mm256_unpackhi_ps(a[0], a[1]);
    __m256 t2 = _mm256_unpacklo_ps(a[2], a[3]), t3 = _mm256_unpackhi_ps(a[2], a[3]);
    __m256 t4 = _mm256_unpacklo_ps(a[4], a[5]), t5 = _mm256_unpackhi_ps(a[4], a[5]);
    __m256 t6 = _mm256_unpacklo_ps(a[6], a[7]), t7 = _mm256_unpackhi_ps(a[6], a[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    // lane j of every vector: j = 0..3 in the low halves of u0..u3, j = 4..7 in the high
    __m256 d = _mm256_add_ps(_mm256_setzero_ps(), _mm256_permute2f128_ps(u0, u4, 0x20));
    d = _mm256_add_ps(d, _mm256_permute2f128_ps(u1, u5, 0x20));
    d = _mm256_add_ps(d, _mm256_permute2f128_ps(u2, u6, 0x20));
    d = _mm256_add_ps(d, _mm256_permute2f128_ps(u3, u7, 0x20));
    d = _mm256_add_ps(d, _mm256_permute2f128_ps(u0, u4, 0x31));
    d = _mm256_add_ps(d, _mm256_permute2f128_ps(u1, u5, 0x31));
    d = _mm256_add_ps(d, _mm256_permute2f128_ps(u2, u6, 0x31));
    return _mm256_add_ps(d, _mm256_permute2f128_ps(u3, u7, 0x31));
}

// Scores of query head qh (HC * 8 floats) against the keys of n <= 8 positions (rows kr,
// kr + stride, ...), in dot_lanes8's order; each position's score is its own lane, so the
// lanes past n (zero) change no other. HC is a constant at each call, so the loops
// unroll and the 8 lane vectors stay in registers.
static inline __attribute__((always_inline)) __m256 scores8(const float *qh, const float *kr,
                                                           size_t stride, const int HC, int n) {
    __m256 a[8];
    for (int p = 0; p < 8; p++) {
        if (p >= n) {  // fewer than 8 positions: the rest score 0 and are not used
            a[p] = _mm256_setzero_ps();
            continue;
        }
        const float *k = kr + (size_t)p * stride;
        __m256 s = _mm256_mul_ps(_mm256_loadu_ps(qh), _mm256_loadu_ps(k));
        for (int c = 1; c < HC; c++)
            s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_loadu_ps(qh + 8 * c), _mm256_loadu_ps(k + 8 * c)));
        a[p] = s;
    }
    return lane_sums8(a);
}

// out_h += sum_s p_h[s] v_s for NHB heads that share one KV head (vr: its first value row),
// each sum in ascending s onto out_h's values, with products rounded first, as the scalar
// loop; the NHB * HC accumulators stay in registers.
static inline __attribute__((always_inline)) void values_heads(float *o, size_t ostride,
                                                               const float *p, size_t pstride,
                                                               const float *vr, size_t stride,
                                                               int nk, const int HC, const int NHB) {
    __m256 acc[2][8];  // NHB <= 2, HC <= 8 (of fixed size: gcc keeps a variable-length array in memory)
    for (int j = 0; j < NHB; j++)
        for (int c = 0; c < HC; c++) acc[j][c] = _mm256_loadu_ps(o + (size_t)j * ostride + 8 * c);
    for (int s = 0; s < nk; s++) {
        const float *v = vr + (size_t)s * stride;
        prefetch_row(v + DECODE_PREFETCH_ROWS * stride, (size_t)HC * 8);
        for (int j = 0; j < NHB; j++) {
            __m256 ps = _mm256_set1_ps(p[(size_t)j * pstride + s]);
            for (int c = 0; c < HC; c++)
                acc[j][c] = _mm256_add_ps(acc[j][c], _mm256_mul_ps(ps, _mm256_loadu_ps(v + 8 * c)));
        }
    }
    for (int j = 0; j < NHB; j++)
        for (int c = 0; c < HC; c++) _mm256_storeu_ps(o + (size_t)j * ostride + 8 * c, acc[j][c]);
}
#endif

#ifdef __AVX512F__
// lane_sums8 on two sets of 8 vectors at once: a[p] holds one set in its low 8 floats and
// the other in its high 8; the result holds each set's 8 sums in the same half, each in
// lane_sums8's order. The in-lane shuffles act on both halves alike; the 128-bit swaps
// that cross a half there take the matching quarters of each half here.
static inline __m512 lane_sums8x2(const __m512 a[8]) {
    __m512 t0 = _mm512_unpacklo_ps(a[0], a[1]), t1 = _mm512_unpackhi_ps(a[0], a[1]);
    __m512 t2 = _mm512_unpacklo_ps(a[2], a[3]), t3 = _mm512_unpackhi_ps(a[2], a[3]);
    __m512 t4 = _mm512_unpacklo_ps(a[4], a[5]), t5 = _mm512_unpackhi_ps(a[4], a[5]);
    __m512 t6 = _mm512_unpacklo_ps(a[6], a[7]), t7 = _mm512_unpackhi_ps(a[6], a[7]);
    __m512 u0 = _mm512_shuffle_ps(t0, t2, 0x44), u1 = _mm512_shuffle_ps(t0, t2, 0xEE);
    __m512 u2 = _mm512_shuffle_ps(t1, t3, 0x44), u3 = _mm512_shuffle_ps(t1, t3, 0xEE);
    __m512 u4 = _mm512_shuffle_ps(t4, t6, 0x44), u5 = _mm512_shuffle_ps(t4, t6, 0xEE);
    __m512 u6 = _mm512_shuffle_ps(t5, t7, 0x44), u7 = _mm512_shuffle_ps(t5, t7, 0xEE);
    // _mm256_permute2f128_ps(x, y, 0x20) in each half: x's first quarter, y's first quarter
    const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    const __m512i hi = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    __m512 d = _mm512_add_ps(_mm512_setzero_ps(), _mm512_permutex2var_ps(u0, lo, u4));
    d = _mm512_add_ps(d, _mm512_permutex2var_ps(u1, lo, u5));
    d = _mm512_add_ps(d, _mm512_permutex2var_ps(u2, lo, u6));
    d = _mm512_add_ps(d, _mm512_permutex2var_ps(u3, lo, u7));
    d = _mm512_add_ps(d, _mm512_permutex2var_ps(u0, hi, u4));
    d = _mm512_add_ps(d, _mm512_permutex2var_ps(u1, hi, u5));
    d = _mm512_add_ps(d, _mm512_permutex2var_ps(u2, hi, u6));
    return _mm512_add_ps(d, _mm512_permutex2var_ps(u3, hi, u7));
}

// 8 floats at x in both halves of a vector of 16 (a broadcast load)
static inline __m512 bcast8(const float *x) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(x))));
}

// scores8 of two query heads that share one KV head, at once: qp[c] holds chunk c of the
// first head's query in its low 8 floats and of the second's in its high 8; each key chunk is
// read once into both halves. The low 8 floats of the result are the first head's scores.
static inline __attribute__((always_inline)) __m512 scores8_pair(const __m512 *qp, const float *kr,
                                                                size_t stride, const int HC, int n) {
    __m512 a[8];
    for (int p = 0; p < 8; p++) {
        if (p >= n) {
            a[p] = _mm512_setzero_ps();
            continue;
        }
        const float *k = kr + (size_t)p * stride;
        __m512 s = _mm512_mul_ps(qp[0], bcast8(k));
        for (int c = 1; c < HC; c++)
            s = _mm512_add_ps(s, _mm512_mul_ps(qp[c], bcast8(k + 8 * c)));
        a[p] = s;
    }
    return lane_sums8x2(a);
}

// values_heads with 16 floats to a vector, for NHB heads at once (head j's values at
// vr + voff[j]; out_h at o + j * hd): each output float's sum is the same chain in ascending
// s, so the width does not change a number. One pass over the value rows serves all NHB heads.
static inline __attribute__((always_inline)) void values16(float *o, int hd, const float *p, size_t pstride,
                                                           const float *vr, const size_t *voff,
                                                           size_t stride, int nk, const int HC, const int NHB) {
    __m512 acc[16];  // NHB * HC <= 16 (of fixed size: gcc keeps a variable-length array in memory)
    const float *vh[16];
#pragma GCC unroll 16
    for (int j = 0; j < NHB; j++) {
        vh[j] = vr + voff[j];
#pragma GCC unroll 16
        for (int c = 0; c < HC; c++) acc[j * HC + c] = _mm512_loadu_ps(o + (size_t)j * hd + 16 * c);
    }
    for (int s = 0; s < nk; s++) {
        prefetch_row(vr + (size_t)(s + DECODE_PREFETCH_ROWS) * stride, stride);
#pragma GCC unroll 16
        for (int j = 0; j < NHB; j++) {
            __m512 ps = _mm512_set1_ps(p[(size_t)j * pstride + s]);
            const float *v = vh[j] + (size_t)s * stride;
#pragma GCC unroll 16
            for (int c = 0; c < HC; c++)
                acc[j * HC + c] = _mm512_add_ps(acc[j * HC + c], _mm512_mul_ps(ps, _mm512_loadu_ps(v + 16 * c)));
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < NHB; j++)
#pragma GCC unroll 16
        for (int c = 0; c < HC; c++) _mm512_storeu_ps(o + (size_t)j * hd + 16 * c, acc[j * HC + c]);
}
#endif

// prob[h][s] = q_h . k_s for positions [s0, nk) of every head, in dot_lanes8's order (kb:
// the keys of position 0 on).
static void decode_scores(int vec, float *prob, size_t Tmax, const float *qb, const float *kb,
                          size_t kvstride, int NH, int group, int hd, int s0, int nk) {
    int s = s0;
#ifdef __AVX512F__
    // heads in pairs that share a KV head, two to a vector (their queries paired once)
    if (vec >= 2 && (hd == 32 || hd == 64) && group % 2 == 0 && NH / 2 * (hd / 8) <= 32) {
        __m512 qp[32];
        int HC = hd / 8;
        for (int h = 0; h < NH; h += 2)
            for (int c = 0; c < HC; c++)
                qp[h / 2 * HC + c] = _mm512_castpd_ps(_mm512_insertf64x4(
                    _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(qb + (size_t)h * hd + 8 * c))),
                    _mm256_castps_pd(_mm256_loadu_ps(qb + (size_t)(h + 1) * hd + 8 * c)), 1));
        for (; s < nk; s += 8) {
            int n = nk - s < 8 ? nk - s : 8;  // the last block: the missing positions as zero keys
            const float *kt = kb + (size_t)s * kvstride;
            if (n == 8)
                for (int p = 0; p < 8; p++)
                    prefetch_row(kt + (size_t)(p + DECODE_PREFETCH_ROWS) * kvstride, kvstride);
            for (int h = 0; h < NH; h += 2) {
                const float *kr = kt + (size_t)(h / group) * hd;
                float *p0 = prob + (size_t)h * Tmax + s, *p1 = prob + (size_t)(h + 1) * Tmax + s;
                if (n == 8) {
                    __m512 d = hd == 32 ? scores8_pair(qp + h / 2 * 4, kr, kvstride, 4, 8)
                                        : scores8_pair(qp + h / 2 * 8, kr, kvstride, 8, 8);
                    _mm256_storeu_ps(p0, lo8(d));
                    _mm256_storeu_ps(p1, hi8(d));
                } else {
                    float t[16];
                    _mm512_storeu_ps(t, hd == 32 ? scores8_pair(qp + h / 2 * 4, kr, kvstride, 4, n)
                                                 : scores8_pair(qp + h / 2 * 8, kr, kvstride, 8, n));
                    memcpy(p0, t, (size_t)n * sizeof(float));
                    memcpy(p1, t + 8, (size_t)n * sizeof(float));
                }
            }
        }
        return;
    }
#endif
#ifdef __AVX2__
    if (vec && (hd == 32 || hd == 64)) {
        for (; s < nk; s += 8) {
            int n = nk - s < 8 ? nk - s : 8;  // the last block: the missing positions as zero keys
            const float *kt = kb + (size_t)s * kvstride;
            if (n == 8)
                for (int p = 0; p < 8; p++)
                    prefetch_row(kt + (size_t)(p + DECODE_PREFETCH_ROWS) * kvstride, kvstride);
            for (int h = 0; h < NH; h++) {
                const float *qh = qb + (size_t)h * hd, *kr = kt + (size_t)(h / group) * hd;
                if (n == 8) {
                    __m256 d = hd == 32 ? scores8(qh, kr, kvstride, 4, 8) : scores8(qh, kr, kvstride, 8, 8);
                    _mm256_storeu_ps(prob + (size_t)h * Tmax + s, d);
                } else {
                    float t[8];
                    _mm256_storeu_ps(t, hd == 32 ? scores8(qh, kr, kvstride, 4, n) : scores8(qh, kr, kvstride, 8, n));
                    memcpy(prob + (size_t)h * Tmax + s, t, (size_t)n * sizeof(float));
                }
            }
        }
        return;
    }
#endif
    for (; s < nk; s++)
        for (int h = 0; h < NH; h++)
            prob[(size_t)h * Tmax + s] =
                dot_lanes8(qb + (size_t)h * hd, kb + (size_t)s * kvstride + (size_t)(h / group) * hd, hd);
}

// out_h += sum_s p_h[s] v_s over positions [s0, nk) (vb: the values of position 0 on; ob
// zeroed by the caller before the first range), each sum in ascending s.
static void decode_values(int vec, float *ob, const float *prob, size_t Tmax, const float *vb,
                          size_t kvstride, int NH, int group, int hd, int s0, int nk) {
    if (nk <= s0) return;
#ifdef __AVX512F__
    // all heads in one pass over the value rows where their sums fit in 16 registers
    if (vec >= 2 && (hd == 32 || hd == 64) && NH * hd <= 256) {
        size_t voff[8];
        for (int h = 0; h < NH; h++) voff[h] = (size_t)(h / group) * hd;
        const float *p = prob + s0, *vr = vb + (size_t)s0 * kvstride;
        int n = nk - s0;
#define VALUES16(HC, NHB) values16(ob, hd, p, Tmax, vr, voff, kvstride, n, HC, NHB)
        switch (hd / 16 * 16 + NH) {
        case 2 * 16 + 1: VALUES16(2, 1); return;
        case 2 * 16 + 2: VALUES16(2, 2); return;
        case 2 * 16 + 3: VALUES16(2, 3); return;
        case 2 * 16 + 4: VALUES16(2, 4); return;
        case 2 * 16 + 5: VALUES16(2, 5); return;
        case 2 * 16 + 6: VALUES16(2, 6); return;
        case 2 * 16 + 7: VALUES16(2, 7); return;
        case 2 * 16 + 8: VALUES16(2, 8); return;
        case 4 * 16 + 1: VALUES16(4, 1); return;
        case 4 * 16 + 2: VALUES16(4, 2); return;
        case 4 * 16 + 3: VALUES16(4, 3); return;
        case 4 * 16 + 4: VALUES16(4, 4); return;
        }
#undef VALUES16
    }
#endif
#ifdef __AVX2__
    if (vec && ((hd == 32 && group % 2 == 0) || hd == 64)) {
        int nhb = hd == 32 ? 2 : 1;
        for (int h = 0; h < NH; h += nhb) {
            float *o = ob + (size_t)h * hd;
            const float *p = prob + (size_t)h * Tmax + s0, *vr = vb + (size_t)s0 * kvstride + (size_t)(h / group) * hd;
            if (hd == 32) values_heads(o, hd, p, Tmax, vr, kvstride, nk - s0, 4, 2);
            else values_heads(o, hd, p, Tmax, vr, kvstride, nk - s0, 8, 1);
        }
        return;
    }
#endif
    for (int s = s0; s < nk; s++) {
        const float *vr = vb + (size_t)s * kvstride;
        prefetch_row(vr + DECODE_PREFETCH_ROWS * kvstride, kvstride);
        for (int h = 0; h < NH; h++) {
            float ps = prob[(size_t)h * Tmax + s], *o = ob + (size_t)h * hd;
            const float *vv = vr + (size_t)(h / group) * hd;
#pragma omp simd
            for (int i = 0; i < hd; i++) o[i] += ps * vv[i];
        }
    }
}

// Row bb of cpu_attention_decode (prob: room for NH x Tmax scores).
static void decode_row(int vec, float *out, float *prob, const float *q, const float *kcache, const float *vcache,
                       const int *pos, const int *share, const int *plen, int bb, int Tmax, int NH,
                       int NKV, int hd) {
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)hd);
    size_t kvstride = (size_t)NKV * hd;
    int nk = pos[bb] < Tmax ? pos[bb] + 1 : Tmax;  // (pos >= Tmax: out of contract)
    float *ob = out + (size_t)bb * NH * hd;
    memset(ob, 0, (size_t)NH * hd * sizeof(float));
    if (nk <= 0) return;
    const float *qb = q + (size_t)bb * NH * hd;
    const float *kb = kcache + (size_t)bb * Tmax * kvstride;
    const float *vb = vcache + (size_t)bb * Tmax * kvstride;
    // positions [0, np) from the row that shares them (the same numbers, likely cached)
    int np = share && share[bb] != bb ? (plen[bb] < nk ? plen[bb] : nk) : 0;
    const float *ks = np ? kcache + (size_t)share[bb] * Tmax * kvstride : kb;
    const float *vs = np ? vcache + (size_t)share[bb] * Tmax * kvstride : vb;
    decode_scores(vec, prob, (size_t)Tmax, qb, ks, kvstride, NH, group, hd, 0, np);
    decode_scores(vec, prob, (size_t)Tmax, qb, kb, kvstride, NH, group, hd, np, nk);
    for (int h = 0; h < NH; h++) {  // softmax of each head's scores
        float *p = prob + (size_t)h * Tmax;
        scale_row(vec, p, nk, 1.0f / exp_sum(vec, p, nk, row_max(p, nk), scale));
    }
    decode_values(vec, ob, prob, (size_t)Tmax, vs, kvstride, NH, group, hd, 0, np);
    decode_values(vec, ob, prob, (size_t)Tmax, vb, kvstride, NH, group, hd, np, nk);
}

void cpu_attention_decode(Backend *b, float *out, const float *q, const float *kcache,
                          const float *vcache, const int *pos, const int *share, const int *plen,
                          int B, int Tmax, int NH, int NKV, int hd) {
    const int vec = b->paths.attention_vector;
    size_t nprob = (size_t)NH * Tmax + 1;
    if (par_team((size_t)B * NH * Tmax * hd)) {
#pragma omp parallel
        {
            float *prob = xmalloc(nprob * sizeof(float));  // (NH, Tmax)
#pragma omp for schedule(dynamic, 2)
            for (int bb = 0; bb < B; bb++)
                decode_row(vec, out, prob, q, kcache, vcache, pos, share, plen, bb, Tmax, NH, NKV, hd);
            free(prob);
        }
    } else {
        float *prob = xmalloc(nprob * sizeof(float));
        for (int bb = 0; bb < B; bb++)
            decode_row(vec, out, prob, q, kcache, vcache, pos, share, plen, bb, Tmax, NH, NKV, hd);
        free(prob);
    }
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
