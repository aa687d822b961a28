// Two properties of this machine's OpenBLAS that grpolab's numbers rest on (docs/kernels.md,
// "Determinism"); `make blas-order` builds and runs this, exit status 1 if either fails.
// 1. Do cpu_ops.c's own attention products keep OpenBLAS's numbers? Runs the attention
//    forward and backward (4 heads on 2 KV heads, head sizes 32 and 64, 2 sequences of every
//    length L from 1 to 384, random inputs) with the own products and with OpenBLAS for every
//    product, and counts the outputs that differ in any bit. Where none differs, runs keep
//    the numbers they had before the own products.
// 2. Does a row of the products C = A W^T (kn_matmul_forward, on the shapes of the base model
//    of experiments/base: d_model 128, 2 KV heads of 32, d_ff 344, 58 tokens) have the same
//    bits for every row count from SAMPLER_MIN_ROWS up (each count 1..255, and 512 to 6144
//    rows, against 8192)? The sampler prefills each distinct prompt once, and on OpenBLAS
//    compacts its decode batch down to that many rows; a response is the full batch's only
//    if so.
// It also says whether the decode's own products (kn_decode_matmul) give OpenBLAS's numbers
// on those shapes, which grpolab checks for itself (src/sim/model/model.c): informational.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels.h"
#include "sim/io/libenv.h"
#include "sim/model/sampler.h"

static unsigned long long rng = 88172645463325252ull;
static float uniform(float lo, float hi) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 40) / (double)(1 << 24));
}

int main(int argc, char **argv) {
    (void)argc;
    libenv_reexec(argv);  // OpenBLAS's kernels as grpolab runs them
    printf("blas_order: %s\n", backend_blas_config());
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
                bk->paths.attention_own_products = w == 0;
                for (int i = 2; i < 5; i++) memset(out[w][i], 0, m[i] * sizeof(float));
                kn_attention_forward(bk, out[w][0], out[w][1], q, k, v, len, B, T, NH, NKV, hd);
                kn_attention_backward(bk, out[w][2], out[w][3], out[w][4], dout, out[w][1], q, k, v,
                                      len, B, T, NH, NKV, hd);
            }
            bk->paths.attention_own_products = 1;
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
    // 2. row counts: each M against the product of all Mmax rows
    const int shapes[][2] = {{64, 128}, {128, 128}, {344, 128}, {128, 344}, {58, 128}}, Mmax = 8192;
    const int large[] = {512, 1000, 2048, 4096, 6144};
    long rows_differ = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int OC = shapes[s][0], C = shapes[s][1], floor = 0, bad = 0;
        float *A = malloc(sizeof(float) * Mmax * C), *W = malloc(sizeof(float) * OC * C);
        float *all = malloc(sizeof(float) * Mmax * OC), *part = malloc(sizeof(float) * Mmax * OC);
        for (int i = 0; i < Mmax * C; i++) A[i] = uniform(-2, 2);
        for (int i = 0; i < OC * C; i++) W[i] = uniform(-0.2f, 0.2f);
        kn_matmul_forward(bk, all, A, W, Mmax, C, OC);
        for (int i = 1; i < 256 + (int)(sizeof large / sizeof large[0]); i++) {
            int M = i < 256 ? i : large[i - 256];
            kn_matmul_forward(bk, part, A, W, M, C, OC);
            if (memcmp(part, all, sizeof(float) * (size_t)M * OC) == 0) continue;
            if (M < 256) floor = M + 1;  // the row counts that round as the whole batch start above M
            if (M >= SAMPLER_MIN_ROWS) bad++;
        }
        if (floor < 256)
            printf("product %d x %d: rows of every count from %d to 255 equal those of %d rows; of the "
                   "counts from %d up, %d round otherwise\n", OC, C, floor ? floor : 1, Mmax, SAMPLER_MIN_ROWS, bad);
        else
            printf("product %d x %d: rows of 255 rows differ from those of %d rows; of the counts "
                   "from %d up, %d round otherwise\n", OC, C, Mmax, SAMPLER_MIN_ROWS, bad);
        rows_differ += bad;
        free(A), free(W), free(all), free(part);
    }
    printf(rows_differ ? "blas-order: a product of %d rows or more can round a row otherwise than a larger one\n"
                       : "blas-order: products of %d rows or more round each row as a larger one\n",
           SAMPLER_MIN_ROWS);
    // 3. the decode's own products (informational: grpolab checks them itself when it makes a
    //    model and decodes on OpenBLAS, with its 32-row floor, where they differ)
    int own = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) own = own && kn_decode_rows_free(bk, shapes[s][1], shapes[s][0]);
    printf(own ? "blas-order: the decode's own products give OpenBLAS's numbers on these shapes (grpolab decodes "
                 "with them, its batches down to their running rows)\n"
               : "blas-order: the decode's own products do not give OpenBLAS's numbers on every shape here "
                 "(grpolab decodes on OpenBLAS, its batches not below %d rows)\n",
           SAMPLER_MIN_ROWS);
    backend_destroy(bk);
    return differ[0] + differ[1] + rows_differ ? 1 : 0;
}
