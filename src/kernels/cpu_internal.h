// cpu_internal.h: what the CPU backend's files share (cpu_ops.c, cpu_attention.c): the
// backend's state, when a loop runs on a team of threads, and the exponential both the
// softmaxes and SwiGLU take. Not part of the kernel API (kernels.h).
#ifndef GRPOLAB_CPU_INTERNAL_H
#define GRPOLAB_CPU_INTERNAL_H

#ifdef __AVX2__
#include <immintrin.h>
#endif
#include <omp.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>

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

typedef struct {
    // RoPE cos/sin for one (theta, hd), positions [0, rope_npos): (npos, hd/2) each
    float rope_theta;
    int rope_hd, rope_npos;
    float *rope_cos, *rope_sin;
    // the shapes cpu_decode_rows_free has checked, and its answers
    struct { int C, OC, same; } dec_known[64];
    int n_dec_known;
} CpuBackend;

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

#endif
