// philox.h: the one random number generator of grpolab, Philox4x32-10
// (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
// Counter-based: the output is a pure function of (key, counter), so a draw does
// not depend on thread count, on the order of calls, or on the backend. Header
// only; the same code runs on the host and in CUDA kernels.
//
// Use: a stream of draws is named by (seed, counter); callers build counters from
// what a draw is for (e.g. tensor index and element, or sequence id and position)
// so that no two purposes share a counter.
#ifndef GRPOLAB_PHILOX_H
#define GRPOLAB_PHILOX_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define PHILOX_FN static inline __host__ __device__
#else
#define PHILOX_FN static inline
#endif

typedef struct {
    uint32_t v[4];
} Philox4;

PHILOX_FN uint32_t philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

// Philox4x32-10 of counter (c0..c3) under key (k0,k1).
PHILOX_FN Philox4 philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                             uint32_t k1) {
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = philox_mulhilo(0xD2511F53u, c0, &hi0);
        uint32_t lo1 = philox_mulhilo(0xCD9E8D57u, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    Philox4 r = {{c0, c1, c2, c3}};
    return r;
}

// Four 32-bit words for (seed, counter, sub) where sub separates draws that share a counter.
PHILOX_FN Philox4 philox_draw(uint64_t seed, uint64_t counter, uint32_t sub) {
    return philox4x32((uint32_t)counter, (uint32_t)(counter >> 32), sub, 0u, (uint32_t)seed,
                      (uint32_t)(seed >> 32));
}

// 32 random bits -> float uniform in [0,1) with 24 bits of resolution.
PHILOX_FN float philox_u01(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

// One uniform in [0,1) for (seed, counter).
PHILOX_FN float philox_uniform(uint64_t seed, uint64_t counter) {
    return philox_u01(philox_draw(seed, counter, 0u).v[0]);
}

// One standard normal for (seed, counter), Box-Muller on the first two words.
PHILOX_FN float philox_normal(uint64_t seed, uint64_t counter) {
    Philox4 r = philox_draw(seed, counter, 1u);
    float u1 = ((float)(r.v[0] >> 8) + 1.0f) * (1.0f / 16777216.0f);  // (0,1]
    float u2 = philox_u01(r.v[1]);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}

#endif
