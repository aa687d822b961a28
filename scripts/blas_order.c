// Do cpu_ops.c's own attention products keep this machine's OpenBLAS numbers? Runs the
// attention forward and backward (4 heads on 2 KV heads, head sizes 32 and 64, 2 sequences
// of every length L from 1 to 384, random inputs) with the own products and with OpenBLAS
// for every product, and counts the outputs that differ in any bit. Where none differs,
// runs keep the numbers they had before the own products (docs/kernels.md). `make
// blas-order` builds and runs it; exit status 1 if any output differs.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_ops.h"
#include "kernels/kernels.h"

static unsigned long long rng = 88172645463325252ull;
static float uniform(float lo, float hi) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 40) / (double)(1 << 24));
}

int main(void) {
    char err[256];
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    if (!bk) return fprintf(stderr, "blas_order: %s\n", err), 2;
    const int B = 2, NH = 4, NKV = 2, Tmax = 384;
    long differ[2] = {0, 0}, checked[2] = {0, 0};
    int first_bad[2] = {0, 0};
    for (int hi = 0; hi < 2; hi++) {
        int hd = hi ? 64 : 32;
        size_t nq = (size_t)B * Tmax * NH * hd, nkv = (size_t)B * Tmax * NKV * hd;
        size_t natt = (size_t)B * NH * Tmax * Tmax, n[5] = {nq, natt, nq, nkv, nkv};
        float *in = malloc((2 * nq + 2 * nkv) * sizeof(float)), *out[2][5];
        float *q = in, *dout = in + nq, *k = in + 2 * nq, *v = in + 2 * nq + nkv;
        for (int w = 0; w < 2; w++)
            for (int i = 0; i < 5; i++) out[w][i] = malloc(n[i] * sizeof(float));
        for (int L = 1; L <= Tmax; L++) {
            int T = L, len[2] = {L, L > 1 ? L - 1 : 1};
            for (size_t i = 0; i < 2 * nq + 2 * nkv; i++) in[i] = uniform(-2, 2);
            size_t m[5] = {(size_t)B * T * NH * hd, (size_t)B * NH * T * T, (size_t)B * T * NH * hd,
                           (size_t)B * T * NKV * hd, (size_t)B * T * NKV * hd};
            for (int w = 0; w < 2; w++) {
                cpu_attention_own_products(w == 0);
                for (int i = 2; i < 5; i++) memset(out[w][i], 0, m[i] * sizeof(float));
                kn_attention_forward(bk, out[w][0], out[w][1], q, k, v, len, B, T, NH, NKV, hd);
                kn_attention_backward(bk, out[w][2], out[w][3], out[w][4], dout, out[w][1], q, k, v,
                                      len, B, T, NH, NKV, hd);
            }
            cpu_attention_own_products(1);
            int side = L >= 64;
            for (int i = 0; i < 5; i++)
                for (size_t j = 0; j < m[i]; j++) {
                    checked[side]++;
                    if (memcmp(&out[0][i][j], &out[1][i][j], sizeof(float))) {
                        if (!differ[side]) first_bad[side] = L;
                        differ[side]++;
                    }
                }
        }
        for (int w = 0; w < 2; w++)
            for (int i = 0; i < 5; i++) free(out[w][i]);
        free(in);
    }
    const char *what[2] = {"sequences of 1-63 tokens (OpenBLAS either way)", "sequences of 64-384 tokens"};
    for (int side = 0; side < 2; side++) {
        printf("%s: %ld of %ld outputs differ", what[side], differ[side], checked[side]);
        if (differ[side]) printf(" (the first at L = %d)", first_bad[side]);
        printf("\n");
    }
#ifndef __AVX512F__
    printf("built without AVX-512: the own products do not run here, every product is OpenBLAS's\n");
#endif
    printf(differ[0] + differ[1] ? "blas-order: the own products change this machine's numbers\n"
                                  : "blas-order: the own products keep this machine's OpenBLAS numbers\n");
    backend_destroy(bk);
    return differ[0] + differ[1] ? 1 : 0;
}
