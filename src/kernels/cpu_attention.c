// cpu_attention.c: the CPU backend's attention ops (kn_attention_forward / backward, the KV
// cache store, the one-token decode; contracts in kernels.h). OpenMP, BLAS and determinism
// as in cpu_ops.c. The backend's paths choose the vector paths (attention_vector: the scalar
// loops are the same sums in the same order) and the own products (attention_own_products).
#include <cblas.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "cpu_internal.h"
#include "cpu_ops.h"

// ---- attention
// One task is one (sequence, KV head): the query heads that share the KV head run in it,
// so the backward accumulates dk/dv without races and in a fixed order. The T x T products
// are sgemms on the task's thread.

static inline int clamp_len(int len, int T) { return len < 0 ? 0 : (len > T ? T : len); }

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
