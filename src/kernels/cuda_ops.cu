// cuda_ops.cu: the CUDA implementation of every op in kernels.h (the contracts are
// there; this file only says how). cuBLAS for every matrix product, simple kernels
// for the rest. Everything runs on the legacy default stream, so ops, cuBLAS calls and
// cudaMemcpy are ordered without explicit synchronisation.
//
// Determinism: no atomics anywhere. Every reduction whose order matters
// has a partition that depends only on the problem sizes (fixed block sizes, fixed
// rows per partial), never on the number of SMs, and is summed in a fixed order, so
// the same inputs give bit-identical results on the same GPU and toolkit.
//
// Parity with the CPU reference (cpu_ops.c): the formulas below are the ones the CPU
// uses; where rounding could change a discrete outcome (RoPE angles, sampling) the
// exact expression is spelled out in a comment and must be the same on both sides.
//
// Set GRPOLAB_CUDA_SYNC=1 to synchronise after every kernel launch, so that a kernel
// fault is reported at the launch that caused it (debugging only; slow).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "../common.h"
#include "objective.h"  // the objective's formulas (OBJ_HD: host and device)
}
// Every cuda_* function below is defined extern "C" with the signature declared in
// cuda_ops.h, which the compiler checks against these definitions.
#include "cuda_ops.h"
#include "kernels.h"
#include "philox.h"

// ---------------------------------------------------------------- checks
#define CUDA_CHECK(call)                                                                   \
    do {                                                                                   \
        cudaError_t err_ = (call);                                                         \
        if (err_ != cudaSuccess)                                                           \
            die_at(__FILE__, __LINE__, "CUDA error %s: %s (in %s)", cudaGetErrorName(err_), \
                   cudaGetErrorString(err_), #call);                                       \
    } while (0)

#define CUBLAS_CHECK(call)                                                                \
    do {                                                                                  \
        cublasStatus_t st_ = (call);                                                      \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                 \
            die_at(__FILE__, __LINE__, "cuBLAS error %s: %s (in %s)",                     \
                   cublasGetStatusName(st_), cublasGetStatusString(st_), #call);          \
    } while (0)

static int g_sync_each_launch = 0;  // GRPOLAB_CUDA_SYNC=1

// After every kernel launch: a bad launch configuration is reported here; with
// GRPOLAB_CUDA_SYNC=1 a fault inside the kernel is reported here too.
static void launch_check(const char *file, int line, const char *kernel) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        die_at(file, line, "CUDA launch of %s failed: %s: %s", kernel, cudaGetErrorName(e),
               cudaGetErrorString(e));
    if (g_sync_each_launch) {
        e = cudaDeviceSynchronize();
        if (e != cudaSuccess)
            die_at(file, line, "CUDA kernel %s failed: %s: %s", kernel, cudaGetErrorName(e),
                   cudaGetErrorString(e));
    }
}
#define LAUNCH_CHECK(kernel) launch_check(__FILE__, __LINE__, kernel)

// ---------------------------------------------------------------- backend state
// Scratch buffers, grown on demand; each op uses its slot only while it runs.
enum { SCR_LOGITS = 0, SCR_ATT_D, SCR_PARTIALS, NUM_SCRATCH };

typedef struct {
    cublasHandle_t blas;
    int device;
    int tf32;  // math mode currently set on the cuBLAS handle
    size_t max_smem_optin;  // largest dynamic shared memory per block after opt-in
    void *scratch[NUM_SCRATCH];
    size_t scratch_bytes[NUM_SCRATCH];
} CudaImpl;

static CudaImpl *impl_of(Backend *b) { return (CudaImpl *)b->impl; }

static void *scratch(CudaImpl *c, int slot, size_t bytes) {
    if (bytes > c->scratch_bytes[slot]) {
        if (c->scratch[slot]) {
            CUDA_CHECK(cudaDeviceSynchronize());  // queued kernels may still read the old one
            CUDA_CHECK(cudaFree(c->scratch[slot]));
            c->scratch[slot] = NULL;
            c->scratch_bytes[slot] = 0;
        }
        size_t rounded = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
        cudaError_t e = cudaMalloc(&c->scratch[slot], rounded);
        if (e != cudaSuccess)
            die("CUDA: cannot allocate %zu bytes of scratch: %s", rounded, cudaGetErrorString(e));
        c->scratch_bytes[slot] = rounded;
    }
    return c->scratch[slot];
}

extern "C" int cuda_device_available(char *why, size_t whylen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        set_err(why, whylen, "no CUDA device: %s", cudaGetErrorString(e));
        cudaGetLastError();  // clear the error so later calls start clean
        return 0;
    }
    if (n <= 0) {
        set_err(why, whylen, "no CUDA device: the driver reports 0 devices");
        return 0;
    }
    int dev = 0, major = 0, minor = 0;
    e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (e != cudaSuccess) {
        set_err(why, whylen, "CUDA device not usable: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    if (major < 9) {
        set_err(why, whylen,
                "CUDA device %d has compute capability %d.%d but this build targets sm_90 "
                "(rebuild with NVCCFLAGS for your GPU's -gencode arch)",
                dev, major, minor);
        return 0;
    }
    return 1;
}

extern "C" void *cuda_backend_init(char *err, size_t errlen) {
    CudaImpl *c = (CudaImpl *)xcalloc(1, sizeof *c);
    cudaError_t e = cudaGetDevice(&c->device);
    if (e == cudaSuccess) e = cudaFree(0);  // creates the context now, not in the first op
    if (e != cudaSuccess) {
        set_err(err, errlen, "cannot initialise CUDA: %s", cudaGetErrorString(e));
        cudaGetLastError();
        free(c);
        return NULL;
    }
    int optin = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->device));
    c->max_smem_optin = (size_t)optin;
    cublasStatus_t st = cublasCreate(&c->blas);
    if (st != CUBLAS_STATUS_SUCCESS) {
        set_err(err, errlen, "cannot create the cuBLAS handle: %s: %s", cublasGetStatusName(st),
                cublasGetStatusString(st));
        free(c);
        return NULL;
    }
    CUBLAS_CHECK(cublasSetStream(c->blas, 0));  // the legacy default stream, like every op
    CUBLAS_CHECK(cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_HOST));
    CUBLAS_CHECK(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    c->tf32 = 0;
    const char *s = getenv("GRPOLAB_CUDA_SYNC");
    g_sync_each_launch = s && *s && strcmp(s, "0") != 0;
    return c;
}

extern "C" void cuda_backend_free(void *impl) {
    CudaImpl *c = (CudaImpl *)impl;
    if (!c) return;
    CUDA_CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < NUM_SCRATCH; i++)
        if (c->scratch[i]) CUDA_CHECK(cudaFree(c->scratch[i]));
    CUBLAS_CHECK(cublasDestroy(c->blas));
    free(c);
}

// ---------------------------------------------------------------- memory
// Allocations are zeroed, like the CPU backend's, so an unwritten buffer is never garbage.
extern "C" void *cuda_alloc(void *impl, size_t bytes) {
    (void)impl;
    void *p = NULL;
    size_t n = bytes ? bytes : 256;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess)
        die("CUDA: cannot allocate %zu bytes on the device: %s: %s", bytes, cudaGetErrorName(e),
            cudaGetErrorString(e));
    CUDA_CHECK(cudaMemset(p, 0, n));
    return p;
}
extern "C" void cuda_free(void *impl, void *p) {
    (void)impl;
    if (p) CUDA_CHECK(cudaFree(p));
}
extern "C" void cuda_zero(void *impl, void *p, size_t bytes) {
    (void)impl;
    if (bytes) CUDA_CHECK(cudaMemset(p, 0, bytes));
}
extern "C" void cuda_upload(void *impl, void *dst, const void *src, size_t bytes) {
    (void)impl;
    if (bytes) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
extern "C" void cuda_download(void *impl, void *dst, const void *src, size_t bytes) {
    (void)impl;
    if (bytes) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
// Regions must not overlap (unlike the CPU backend's memmove); dst == src is a no-op.
extern "C" void cuda_copy(void *impl, void *dst, const void *src, size_t bytes) {
    (void)impl;
    if (bytes && dst != src) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}
extern "C" void cuda_sync(void *impl) {
    (void)impl;
    CUDA_CHECK(cudaDeviceSynchronize());
}

// ---------------------------------------------------------------- launch helpers
#define EW_THREADS 256                      // elementwise kernels (grid-stride loops)
#define EW_MAX_BLOCKS ((size_t)1 << 20)

static unsigned ew_blocks(size_t n) {
    size_t blocks = (n + EW_THREADS - 1) / EW_THREADS;
    return (unsigned)(blocks < EW_MAX_BLOCKS ? blocks : EW_MAX_BLOCKS);
}

// Grid of one block per row (2^31-1 blocks at most).
static unsigned row_blocks(size_t rows, const char *what) {
    if (rows > 0x7fffffffu) die("CUDA %s: %zu rows exceed the grid limit", what, rows);
    return (unsigned)rows;
}

// Dynamic shared memory above the default 48 KiB needs an opt-in per kernel.
template <typename K>
static void smem_optin(CudaImpl *c, K *kernel, size_t bytes, const char *what) {
    if (bytes <= 48 * 1024) return;
    if (bytes > c->max_smem_optin)
        die("CUDA %s: needs %zu bytes of shared memory per block, the device allows %zu "
            "(sequence length or vocabulary too large for this kernel)",
            what, bytes, c->max_smem_optin);
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)bytes));
}

// ---------------------------------------------------------------- reductions
// Butterfly (xor) reductions: every lane ends with the same, order-fixed result.
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Block reductions (blockDim.x a multiple of 32, at most 1024); red holds 32 values.
// Every thread gets the result. The leading barrier makes red safe to reuse.
__device__ float block_sum(float v, float *red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < nw; i++) s += red[i];
    return s;
}
__device__ double block_sum_d(double v, double *red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    double s = 0.0;
    for (int i = 0; i < nw; i++) s += red[i];
    return s;
}
__device__ float block_max(float v, float *red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    float m = red[0];
    for (int i = 1; i < nw; i++) m = fmaxf(m, red[i]);
    return m;
}

// ---------------------------------------------------------------- elementwise
__global__ void add_kernel(float *out, const float *x, const float *y, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = x[i] + y[i];
}

__global__ void scale_kernel(float *x, float s, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

extern "C" void cuda_add(Backend *b, float *out, const float *x, const float *y, size_t n) {
    (void)b;
    if (n == 0) return;
    add_kernel<<<ew_blocks(n), EW_THREADS>>>(out, x, y, n);
    LAUNCH_CHECK("add_kernel");
}

extern "C" void cuda_scale(Backend *b, float *x, float s, size_t n) {
    (void)b;
    if (n == 0) return;
    scale_kernel<<<ew_blocks(n), EW_THREADS>>>(x, s, n);
    LAUNCH_CHECK("scale_kernel");
}

// ---------------------------------------------------------------- token embedding
__global__ void embedding_forward_kernel(float *out, const int *tokens, const float *wte, int N,
                                         int C) {
    size_t total = (size_t)N * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / (size_t)C, c = i % (size_t)C;
        out[i] = wte[(size_t)tokens[n] * C + c];
    }
}

// dwte (V,C) += per-token sums of dout rows, without atomics: block (32,EMB_TY) owns
// 32 columns of one vocabulary row v and scans all N tokens (row y of the block takes
// tokens y, y+EMB_TY, ...); the EMB_TY partials are added in a fixed order.
// Cost O(V*N*C/32) token reads: fine for the small vocabularies grpolab uses.
#define EMB_TY 8
__global__ void embedding_backward_kernel(float *dwte, const float *dout, const int *tokens, int N,
                                          int C) {
    __shared__ float part[EMB_TY][32];
    int ncb = (C + 31) / 32;
    int cb = blockIdx.x % ncb, v = blockIdx.x / ncb;
    int c = cb * 32 + threadIdx.x;
    float acc = 0.0f;
    if (c < C)
        for (int n = threadIdx.y; n < N; n += EMB_TY)
            if (tokens[n] == v) acc += dout[(size_t)n * C + c];
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float s = 0.0f;
        for (int j = 0; j < EMB_TY; j++) s += part[j][threadIdx.x];
        dwte[(size_t)v * C + c] += s;
    }
}

extern "C" void cuda_embedding_forward(Backend *b, float *out, const int *tokens, const float *wte,
                                       int N, int C) {
    (void)b;
    if (N <= 0 || C <= 0) return;
    embedding_forward_kernel<<<ew_blocks((size_t)N * C), EW_THREADS>>>(out, tokens, wte, N, C);
    LAUNCH_CHECK("embedding_forward_kernel");
}

extern "C" void cuda_embedding_backward(Backend *b, float *dwte, const float *dout,
                                        const int *tokens, int N, int V, int C) {
    (void)b;
    if (!dwte || N <= 0 || V <= 0 || C <= 0) return;
    size_t blocks = (size_t)((C + 31) / 32) * (size_t)V;
    embedding_backward_kernel<<<row_blocks(blocks, "embedding_backward"), dim3(32, EMB_TY)>>>(
        dwte, dout, tokens, N, C);
    LAUNCH_CHECK("embedding_backward_kernel");
}

// ---------------------------------------------------------------- RMSNorm
#define ROW_THREADS 256  // warp-per-row kernels: 8 rows per block
#define ROWS_PER_BLOCK (ROW_THREADS / 32)

// One warp per row: rstd = 1/sqrtf(mean(x^2) + eps), out = x * rstd * weight.
__global__ void rmsnorm_forward_kernel(float *out, float *rstd, const float *inp,
                                       const float *weight, int N, int C, float eps) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32) ss += x[c] * x[c];
    ss = warp_sum(ss);
    float r = 1.0f / sqrtf(ss / (float)C + eps);
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = x[c] * r * weight[c];
    if (lane == 0 && rstd) rstd[row] = r;
}

// dinp += rstd * (w*g - x * rstd^2 * sum_c(g w x) / C), one warp per row.
__global__ void rmsnorm_backward_dinp_kernel(float *dinp, const float *dout, const float *inp,
                                             const float *weight, const float *rstd, int N,
                                             int C) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= N) return;
    const float *g = dout + (size_t)row * C, *x = inp + (size_t)row * C;
    float r = rstd[row];
    float dot = 0.0f;
    for (int c = lane; c < C; c += 32) dot += g[c] * weight[c] * x[c];
    dot = warp_sum(dot);
    float k = r * r * dot / (float)C;
    float *d = dinp + (size_t)row * C;
    for (int c = lane; c < C; c += 32) d[c] += r * (weight[c] * g[c] - x[c] * k);
}

// Column sums without atomics, in two fixed stages: partial sums over COL_ROWS_PER_PART
// rows (block (32,8) per 32 columns x part), then one thread per column adds the parts.
#define COL_ROWS_PER_PART 256
#define COL_TY 8
// part (P,C) = per-part sums of dout * inp * rstd (the normalised input times the gradient)
__global__ void rmsnorm_dweight_partial_kernel(float *part, const float *dout, const float *inp,
                                               const float *rstd, int N, int C) {
    __shared__ float sh[COL_TY][32];
    int ncb = (C + 31) / 32;
    int cb = blockIdx.x % ncb, p = blockIdx.x / ncb;
    int c = cb * 32 + threadIdx.x;
    int r0 = p * COL_ROWS_PER_PART, r1 = min(r0 + COL_ROWS_PER_PART, N);
    float acc = 0.0f;
    if (c < C)
        for (int n = r0 + threadIdx.y; n < r1; n += COL_TY)
            acc += dout[(size_t)n * C + c] * inp[(size_t)n * C + c] * rstd[n];
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float s = 0.0f;
        for (int j = 0; j < COL_TY; j++) s += sh[j][threadIdx.x];
        part[(size_t)p * C + c] = s;
    }
}

// out (C) += sum over p of part (P,C), in order of p
__global__ void column_sum_kernel(float *out, const float *part, int P, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s = 0.0f;
    for (int p = 0; p < P; p++) s += part[(size_t)p * C + c];
    out[c] += s;
}

extern "C" void cuda_rmsnorm_forward(Backend *b, float *out, float *rstd, const float *inp,
                                     const float *weight, int N, int C, float eps) {
    (void)b;
    if (N <= 0 || C <= 0) return;
    unsigned blocks = (unsigned)((N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    rmsnorm_forward_kernel<<<blocks, ROW_THREADS>>>(out, rstd, inp, weight, N, C, eps);
    LAUNCH_CHECK("rmsnorm_forward_kernel");
}

extern "C" void cuda_rmsnorm_backward(Backend *b, float *dinp, float *dweight, const float *dout,
                                      const float *inp, const float *weight, const float *rstd,
                                      int N, int C) {
    if (N <= 0 || C <= 0) return;
    if (dinp) {
        unsigned blocks = (unsigned)((N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
        rmsnorm_backward_dinp_kernel<<<blocks, ROW_THREADS>>>(dinp, dout, inp, weight, rstd, N, C);
        LAUNCH_CHECK("rmsnorm_backward_dinp_kernel");
    }
    if (dweight) {
        int P = (N + COL_ROWS_PER_PART - 1) / COL_ROWS_PER_PART;
        float *part = (float *)scratch(impl_of(b), SCR_PARTIALS, (size_t)P * C * sizeof(float));
        size_t blocks = (size_t)((C + 31) / 32) * (size_t)P;
        rmsnorm_dweight_partial_kernel<<<row_blocks(blocks, "rmsnorm_backward"),
                                         dim3(32, COL_TY)>>>(part, dout, inp, rstd, N, C);
        LAUNCH_CHECK("rmsnorm_dweight_partial_kernel");
        column_sum_kernel<<<(C + 255) / 256, 256>>>(dweight, part, P, C);
        LAUNCH_CHECK("column_sum_kernel");
    }
}

// ---------------------------------------------------------------- matmul (cuBLAS)
// cuBLAS is column-major; a row-major (R,K) matrix is a column-major (K,R) one with
// leading dimension K, so every product below is the transposed one.
static void sgemm(Backend *b, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C,
                  int ldc) {
    CudaImpl *c = impl_of(b);
    int tf32 = b->use_tf32 ? 1 : 0;
    if (tf32 != c->tf32) {
        CUBLAS_CHECK(cublasSetMathMode(c->blas,
                                       tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
        c->tf32 = tf32;
    }
    const float one = 1.0f;
    CUBLAS_CHECK(cublasSgemm(c->blas, ta, tb, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc));
}

// out (N,OC) = inp (N,C) @ W (OC,C)^T   [column-major: out^T (OC,N) = W (OC,C) inp^T (C,N)]
static void linear_forward(Backend *b, float *out, const float *inp, const float *W, int N, int C,
                           int OC) {
    sgemm(b, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, W, C, inp, C, 0.0f, out, OC);
}
// dinp (N,C) += dout (N,OC) @ W (OC,C)   [column-major: dinp^T (C,N) += W^T (C,OC) dout^T (OC,N)]
static void linear_backward_inp(Backend *b, float *dinp, const float *dout, const float *W, int N,
                                int C, int OC) {
    sgemm(b, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, W, C, dout, OC, 1.0f, dinp, C);
}
// dW (OC,C) += dout^T (OC,N) @ inp (N,C)   [column-major: dW^T (C,OC) += inp^T (C,N) dout (N,OC)]
static void linear_backward_weight(Backend *b, float *dW, const float *dout, const float *inp,
                                   int N, int C, int OC) {
    sgemm(b, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C, dout, OC, 1.0f, dW, C);
}

extern "C" void cuda_matmul_forward(Backend *b, float *out, const float *inp, const float *weight,
                                    int N, int C, int OC) {
    if (N <= 0 || OC <= 0) return;
    if (C <= 0) {  // an empty sum
        CUDA_CHECK(cudaMemset(out, 0, (size_t)N * OC * sizeof(float)));
        return;
    }
    linear_forward(b, out, inp, weight, N, C, OC);
}

// The decode's products: the packed weights are W as it is (cuBLAS reads it in place), the
// product kn_matmul_forward's. Its numbers may depend on the row count (cuBLAS picks its
// kernels by shape), so no shape is rows-free.
extern "C" size_t cuda_decode_packed_floats(Backend *b, int C, int OC) {
    (void)b;
    return (size_t)C * OC;
}
extern "C" void cuda_decode_pack(Backend *b, float *wp, const float *W, int C, int OC) {
    (void)b;
    if ((size_t)C * OC > 0)
        CUDA_CHECK(cudaMemcpy(wp, W, (size_t)C * OC * sizeof(float), cudaMemcpyDeviceToDevice));
}
extern "C" void cuda_decode_matmul(Backend *b, float *out, const float *inp, const float *wp,
                                   int N, int C, int OC) {
    cuda_matmul_forward(b, out, inp, wp, N, C, OC);
}
extern "C" int cuda_decode_rows_free(Backend *b, int C, int OC) {
    (void)b, (void)C, (void)OC;
    return 0;
}

extern "C" void cuda_matmul_forward_add(Backend *b, float *out, const float *inp,
                                        const float *weight, int N, int C, int OC) {
    if (N <= 0 || OC <= 0 || C <= 0) return;
    sgemm(b, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight, C, inp, C, 1.0f, out, OC);
}

extern "C" void cuda_matmul_backward(Backend *b, float *dinp, float *dweight, const float *dout,
                                     const float *inp, const float *weight, int N, int C, int OC) {
    if (N <= 0 || C <= 0 || OC <= 0) return;
    if (dinp) linear_backward_inp(b, dinp, dout, weight, N, C, OC);
    if (dweight) linear_backward_weight(b, dweight, dout, inp, N, C, OC);
}

// ---------------------------------------------------------------- RoPE
// The inverse frequencies are computed on the host with the C library's powf, with the
// CPU reference's expression:   inv_freq[i] = 1.0f / powf(theta, (float)(2 * i) / (float)hd)
// and each kernel thread forms  angle = (float)pos * inv_freq[i]  (one float multiply)
// and takes sinf/cosf of it. So both backends rotate by the same float angle: a 1-ulp
// difference in inv_freq times a position of ~1000 would move the angle by ~1e-4 rad.
#define ROPE_MAX_HALF 256
struct RopeFreqs {
    float inv_freq[ROPE_MAX_HALF];
};

// x (N,NH,hd) in place; inverse = 1 applies the transpose (inverse) rotation.
__global__ void rope_kernel(float *x, const int *pos, int N, int NH, int hd, RopeFreqs fr,
                            int inverse) {
    int half = hd / 2;
    size_t total = (size_t)N * NH * half;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(idx % (size_t)half);
        size_t nh = idx / (size_t)half;  // row (n, h)
        size_t n = nh / (size_t)NH;
        float angle = (float)pos[n] * fr.inv_freq[i];
        float s, c;
        sincosf(angle, &s, &c);
        float *p = x + nh * (size_t)hd;
        float a = p[i], bb = p[i + half];
        if (!inverse) {
            p[i] = a * c - bb * s;
            p[i + half] = a * s + bb * c;
        } else {
            p[i] = a * c + bb * s;
            p[i + half] = -a * s + bb * c;
        }
    }
}

static void rope(float *x, const int *pos, int N, int NH, int hd, float theta, int inverse) {
    if (N <= 0 || NH <= 0 || hd <= 0) return;
    if (hd % 2 != 0 || hd / 2 > ROPE_MAX_HALF)
        die("CUDA rope: head dim %d must be even and at most %d", hd, 2 * ROPE_MAX_HALF);
    RopeFreqs fr;
    memset(&fr, 0, sizeof fr);
    for (int i = 0; i < hd / 2; i++) fr.inv_freq[i] = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
    size_t total = (size_t)N * NH * (hd / 2);
    rope_kernel<<<ew_blocks(total), EW_THREADS>>>(x, pos, N, NH, hd, fr, inverse);
    LAUNCH_CHECK("rope_kernel");
}

extern "C" void cuda_rope_forward(Backend *b, float *x, const int *pos, int N, int NH, int hd,
                                  float theta) {
    (void)b;
    rope(x, pos, N, NH, hd, theta, 0);
}

extern "C" void cuda_rope_backward(Backend *b, float *dx, const int *pos, int N, int NH, int hd,
                                   float theta) {
    (void)b;
    rope(dx, pos, N, NH, hd, theta, 1);
}

// ---------------------------------------------------------------- attention
// Simple row kernels: one block of ATT_THREADS per query row. Scores are computed one
// warp per key (lanes over the head dim, coalesced), softmax with block reductions,
// then one thread per output dim sums over keys in order.
#define ATT_THREADS 128
#define ATT_HD_MAX 256  // backward keeps hd/32 partial sums per lane in registers

// One query row attending keys 0..nkeys-1: o (hd) = softmax(q.k_s * scale) @ v;
// att_row (att_len) gets the probabilities (zeros for s >= nkeys) if not NULL.
// kb, vb: key/value of position 0 for this KV head; kvs: stride between positions.
// Shared: qs (hd), p (nkeys), red (32). Called by the whole block.
__device__ void attend_row(float *o, float *att_row, int att_len, const float *qr,
                           const float *kb, const float *vb, size_t kvs, int nkeys, int hd,
                           float scale, float *qs, float *p, float *red) {
    int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, nw = blockDim.x >> 5;
    for (int d = tid; d < hd; d += blockDim.x) qs[d] = qr[d];
    __syncthreads();
    for (int s = w; s < nkeys; s += nw) {
        const float *kr = kb + (size_t)s * kvs;
        float dot = 0.0f;
        for (int d = lane; d < hd; d += 32) dot += qs[d] * kr[d];
        dot = warp_sum(dot);
        if (lane == 0) p[s] = dot * scale;
    }
    __syncthreads();
    float m = -INFINITY;
    for (int s = tid; s < nkeys; s += blockDim.x) m = fmaxf(m, p[s]);
    m = block_max(m, red);
    float sum = 0.0f;
    for (int s = tid; s < nkeys; s += blockDim.x) {
        float e = expf(p[s] - m);
        p[s] = e;
        sum += e;
    }
    float inv = 1.0f / block_sum(sum, red);
    for (int s = tid; s < nkeys; s += blockDim.x) p[s] = p[s] * inv;
    __syncthreads();
    if (att_row)
        for (int s = tid; s < att_len; s += blockDim.x) att_row[s] = s < nkeys ? p[s] : 0.0f;
    for (int d = tid; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < nkeys; s++) acc += p[s] * vb[(size_t)s * kvs + d];
        o[d] = acc;
    }
}

// grid: one block per (b, h, t), t fastest (= the row of att)
__global__ void attention_forward_kernel(float *out, float *att, const float *q, const float *k,
                                         const float *v, const int *lengths, int T, int NH,
                                         int NKV, int hd, float scale) {
    extern __shared__ float sm[];  // qs (hd) | p (T)
    __shared__ float red[32];
    size_t row = blockIdx.x;
    int t = (int)(row % (size_t)T);
    int h = (int)((row / (size_t)T) % (size_t)NH);
    int b = (int)(row / ((size_t)T * NH));
    int L = min(max(lengths[b], 0), T);
    float *o = out + (((size_t)b * T + t) * NH + h) * hd;
    float *att_row = att ? att + row * (size_t)T : NULL;
    if (t >= L) {  // padding row: zeros (block-uniform branch)
        if (att_row)
            for (int s = threadIdx.x; s < T; s += blockDim.x) att_row[s] = 0.0f;
        for (int d = threadIdx.x; d < hd; d += blockDim.x) o[d] = 0.0f;
        return;
    }
    int kvh = h / (NH / NKV);
    const float *qr = q + (((size_t)b * T + t) * NH + h) * hd;
    size_t kv0 = ((size_t)b * T * NKV + kvh) * hd;
    attend_row(o, att_row, T, qr, k + kv0, v + kv0, (size_t)NKV * hd, t + 1, hd, scale, sm,
               sm + hd, red);
}

// grid: one block per (b, h)
__global__ void attention_decode_kernel(float *out, const float *q, const float *kcache,
                                        const float *vcache, const int *pos, int Tmax, int NH,
                                        int NKV, int hd, float scale) {
    extern __shared__ float sm[];  // qs (hd) | p (Tmax)
    __shared__ float red[32];
    int b = blockIdx.x / NH, h = blockIdx.x % NH;
    float *o = out + ((size_t)b * NH + h) * hd;
    int p = pos[b];
    if (p < 0) {  // inactive sequence: zeros
        for (int d = threadIdx.x; d < hd; d += blockDim.x) o[d] = 0.0f;
        return;
    }
    int nkeys = min(p + 1, Tmax);
    int kvh = h / (NH / NKV);
    size_t kv0 = ((size_t)b * Tmax * NKV + kvh) * hd;
    attend_row(o, NULL, 0, q + ((size_t)b * NH + h) * hd, kcache + kv0, vcache + kv0,
               (size_t)NKV * hd, nkeys, hd, scale, sm, sm + hd, red);
}

// Backward, part 1: one block per query row (b, h, t < L):
//   dP[s] = dout_t . v_s,  D = sum_s P[s] dP[s],  dS[s] = P[s] (dP[s] - D)
//   dq_t += scale * sum_s dS[s] k_s;   D is kept in Dbuf (B,NH,T) for part 2.
__global__ void attention_backward_dq_kernel(float *dq, float *Dbuf, const float *dout,
                                             const float *att, const float *k, const float *v,
                                             const int *lengths, int T, int NH, int NKV, int hd,
                                             float scale) {
    extern __shared__ float sm[];  // dos (hd) | ds (T)
    __shared__ float red[32];
    size_t row = blockIdx.x;
    int t = (int)(row % (size_t)T);
    int h = (int)((row / (size_t)T) % (size_t)NH);
    int b = (int)(row / ((size_t)T * NH));
    int L = min(max(lengths[b], 0), T);
    if (t >= L) return;  // padding rows have zero probabilities: no gradient
    int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, nw = blockDim.x >> 5;
    int kvh = h / (NH / NKV);
    size_t qi = (((size_t)b * T + t) * NH + h) * hd;
    const float *P = att + row * (size_t)T;
    size_t kv0 = ((size_t)b * T * NKV + kvh) * hd, kvs = (size_t)NKV * hd;
    const float *kb = k + kv0, *vb = v + kv0;
    float *dos = sm, *ds = sm + hd;
    for (int d = tid; d < hd; d += blockDim.x) dos[d] = dout[qi + d];
    __syncthreads();
    for (int s = w; s <= t; s += nw) {
        const float *vr = vb + (size_t)s * kvs;
        float dot = 0.0f;
        for (int d = lane; d < hd; d += 32) dot += dos[d] * vr[d];
        dot = warp_sum(dot);
        if (lane == 0) ds[s] = dot;
    }
    __syncthreads();
    float local = 0.0f;
    for (int s = tid; s <= t; s += blockDim.x) local += P[s] * ds[s];
    float D = block_sum(local, red);
    for (int s = tid; s <= t; s += blockDim.x) ds[s] = P[s] * (ds[s] - D);
    if (tid == 0) Dbuf[row] = D;
    __syncthreads();
    if (dq) {
        for (int d = tid; d < hd; d += blockDim.x) {
            float acc = 0.0f;
            for (int s = 0; s <= t; s++) acc += ds[s] * kb[(size_t)s * kvs + d];
            dq[qi + d] += scale * acc;
        }
    }
}

// Backward, part 2: one block per key row (b, kvh, s < L), no atomics: the block loops
// over the pairs (h in the KV head's group, t in s..L-1), one warp per pair (fixed
// round-robin), recomputing dS[h,t,s] = P (dout_t . v_s - D[h,t]); each lane keeps
// partial sums for dims lane, lane+32, ...; warps' partials are added in warp order.
//   dk_s += scale * sum dS q_t;   dv_s += sum P dout_t
__global__ void attention_backward_dkv_kernel(float *dk, float *dv, const float *Dbuf,
                                              const float *dout, const float *att,
                                              const float *q, const float *v, const int *lengths,
                                              int T, int NH, int NKV, int hd, float scale) {
    extern __shared__ float sm[];  // vs (hd) | pk (nw*hd) | pv (nw*hd)
    size_t blk = blockIdx.x;
    int s = (int)(blk % (size_t)T);
    int kvh = (int)((blk / (size_t)T) % (size_t)NKV);
    int b = (int)(blk / ((size_t)T * NKV));
    int L = min(max(lengths[b], 0), T);
    if (s >= L) return;  // a padding key is never attended
    int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, nw = blockDim.x >> 5;
    int group = NH / NKV, h0 = kvh * group, nt = L - s, total = group * nt;
    size_t ki = (((size_t)b * T + s) * NKV + kvh) * hd;
    float *vs = sm, *pk = sm + hd, *pv = pk + (size_t)nw * hd;
    for (int d = tid; d < hd; d += blockDim.x) vs[d] = v[ki + d];
    __syncthreads();
    float ak[ATT_HD_MAX / 32], av[ATT_HD_MAX / 32];
#pragma unroll
    for (int i = 0; i < ATT_HD_MAX / 32; i++) ak[i] = av[i] = 0.0f;
    for (int j = w; j < total; j += nw) {
        int h = h0 + j / nt, t = s + j % nt;
        size_t qi = (((size_t)b * T + t) * NH + h) * hd;
        const float *dor = dout + qi, *qr = q + qi;
        size_t arow = ((size_t)b * NH + h) * T + t;
        float P = att[arow * T + s];
        float dot = 0.0f;
        for (int d = lane; d < hd; d += 32) dot += dor[d] * vs[d];
        dot = warp_sum(dot);
        float dS = P * (dot - Dbuf[arow]);
#pragma unroll
        for (int i = 0; i < ATT_HD_MAX / 32; i++) {
            int d = lane + 32 * i;
            if (d < hd) {
                ak[i] += dS * qr[d];
                av[i] += P * dor[d];
            }
        }
    }
#pragma unroll
    for (int i = 0; i < ATT_HD_MAX / 32; i++) {
        int d = lane + 32 * i;
        if (d < hd) {
            pk[(size_t)w * hd + d] = ak[i];
            pv[(size_t)w * hd + d] = av[i];
        }
    }
    __syncthreads();
    for (int d = tid; d < hd; d += blockDim.x) {
        float sk = 0.0f, sv = 0.0f;
        for (int ww = 0; ww < nw; ww++) {
            sk += pk[(size_t)ww * hd + d];
            sv += pv[(size_t)ww * hd + d];
        }
        if (dk) dk[ki + d] += scale * sk;
        if (dv) dv[ki + d] += sv;
    }
}

static void check_heads(const char *what, int NH, int NKV) {
    if (NKV <= 0 || NH % NKV != 0)
        die("CUDA %s: %d query heads are not a multiple of %d KV heads", what, NH, NKV);
}

extern "C" void cuda_attention_forward(Backend *b, float *out, float *att, const float *q,
                                       const float *k, const float *v, const int *lengths, int B,
                                       int T, int NH, int NKV, int hd) {
    if (B <= 0 || T <= 0 || NH <= 0 || hd <= 0) return;
    check_heads("attention_forward", NH, NKV);
    size_t smem = ((size_t)hd + T) * sizeof(float);
    smem_optin(impl_of(b), attention_forward_kernel, smem, "attention_forward");
    unsigned blocks = row_blocks((size_t)B * NH * T, "attention_forward");
    attention_forward_kernel<<<blocks, ATT_THREADS, smem>>>(out, att, q, k, v, lengths, T, NH, NKV,
                                                            hd, 1.0f / sqrtf((float)hd));
    LAUNCH_CHECK("attention_forward_kernel");
}

extern "C" void cuda_attention_backward(Backend *b, float *dq, float *dk, float *dv,
                                        const float *dout, const float *att, const float *q,
                                        const float *k, const float *v, const int *lengths, int B,
                                        int T, int NH, int NKV, int hd) {
    if (B <= 0 || T <= 0 || NH <= 0 || hd <= 0) return;
    if (!dq && !dk && !dv) return;
    check_heads("attention_backward", NH, NKV);
    if (hd > ATT_HD_MAX) die("CUDA attention_backward: head dim %d > %d", hd, ATT_HD_MAX);
    CudaImpl *c = impl_of(b);
    float scale = 1.0f / sqrtf((float)hd);
    float *Dbuf = (float *)scratch(c, SCR_ATT_D, (size_t)B * NH * T * sizeof(float));
    size_t smem1 = ((size_t)hd + T) * sizeof(float);
    smem_optin(c, attention_backward_dq_kernel, smem1, "attention_backward");
    unsigned blocks1 = row_blocks((size_t)B * NH * T, "attention_backward");
    attention_backward_dq_kernel<<<blocks1, ATT_THREADS, smem1>>>(dq, Dbuf, dout, att, k, v,
                                                                  lengths, T, NH, NKV, hd, scale);
    LAUNCH_CHECK("attention_backward_dq_kernel");
    if (dk || dv) {
        size_t smem2 = (size_t)hd * (1 + 2 * (ATT_THREADS / 32)) * sizeof(float);
        unsigned blocks2 = row_blocks((size_t)B * NKV * T, "attention_backward");
        attention_backward_dkv_kernel<<<blocks2, ATT_THREADS, smem2>>>(
            dk, dv, Dbuf, dout, att, q, v, lengths, T, NH, NKV, hd, scale);
        LAUNCH_CHECK("attention_backward_dkv_kernel");
    }
}

__global__ void kv_store_kernel(float *cache, const float *src, const int *start,
                                const int *count, int B, int T, int Tmax, int W) {
    size_t total = (size_t)B * T * W;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        size_t w = idx % (size_t)W, bt = idx / (size_t)W;
        int t = (int)(bt % (size_t)T), b = (int)(bt / (size_t)T);
        int cnt = count ? count[b] : T;
        if (t >= cnt) continue;
        int dst = start[b] + t;
        if (dst < 0 || dst >= Tmax) continue;  // outside the cache: never written
        cache[((size_t)b * Tmax + dst) * W + w] = src[idx];
    }
}

extern "C" void cuda_kv_store(Backend *b, float *cache, const float *src, const int *start,
                              const int *count, int B, int T, int Tmax, int W) {
    (void)b;
    if (B <= 0 || T <= 0 || Tmax <= 0 || W <= 0) return;
    kv_store_kernel<<<ew_blocks((size_t)B * T * W), EW_THREADS>>>(cache, src, start, count, B, T,
                                                                  Tmax, W);
    LAUNCH_CHECK("kv_store_kernel");
}

extern "C" void cuda_attention_decode(Backend *b, float *out, const float *q, const float *kcache,
                                      const float *vcache, const int *pos, int B, int Tmax,
                                      int NH, int NKV, int hd) {
    if (B <= 0 || Tmax <= 0 || NH <= 0 || hd <= 0) return;
    check_heads("attention_decode", NH, NKV);
    size_t smem = ((size_t)hd + Tmax) * sizeof(float);
    smem_optin(impl_of(b), attention_decode_kernel, smem, "attention_decode");
    unsigned blocks = row_blocks((size_t)B * NH, "attention_decode");
    attention_decode_kernel<<<blocks, ATT_THREADS, smem>>>(out, q, kcache, vcache, pos, Tmax, NH,
                                                           NKV, hd, 1.0f / sqrtf((float)hd));
    LAUNCH_CHECK("attention_decode_kernel");
}

// ---------------------------------------------------------------- SwiGLU
// sigmoid(g) = 1 / (1 + expf(-g)); silu(g) = g * sigmoid(g)
__global__ void swiglu_forward_kernel(float *out, const float *gate, const float *up, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = gate[i];
        float sig = 1.0f / (1.0f + expf(-g));
        out[i] = g * sig * up[i];
    }
}

// dgate = dout * up * (sig + g sig (1 - sig)); dup = dout * g * sig (written, as on the CPU)
__global__ void swiglu_backward_kernel(float *dgate, float *dup, const float *dout,
                                       const float *gate, const float *up, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = gate[i];
        float sig = 1.0f / (1.0f + expf(-g));
        if (dgate) dgate[i] = dout[i] * up[i] * (sig + g * sig * (1.0f - sig));
        if (dup) dup[i] = dout[i] * g * sig;
    }
}

extern "C" void cuda_swiglu_forward(Backend *b, float *out, const float *gate, const float *up,
                                    size_t n) {
    (void)b;
    if (n == 0) return;
    swiglu_forward_kernel<<<ew_blocks(n), EW_THREADS>>>(out, gate, up, n);
    LAUNCH_CHECK("swiglu_forward_kernel");
}

extern "C" void cuda_swiglu_backward(Backend *b, float *dgate, float *dup, const float *dout,
                                     const float *gate, const float *up, size_t n) {
    (void)b;
    if (n == 0 || (!dgate && !dup)) return;
    swiglu_backward_kernel<<<ew_blocks(n), EW_THREADS>>>(dgate, dup, dout, gate, up, n);
    LAUNCH_CHECK("swiglu_backward_kernel");
}

// ---------------------------------------------------------------- log-probs of targets
// Rows are processed LOGITS_CHUNK_FLOATS / V at a time: cuBLAS forms the chunk's
// logits (rows,V) in scratch, a warp-per-row kernel reduces them.
#define LOGITS_CHUNK_FLOATS ((size_t)1 << 20)

static int logprob_chunk_rows(int N, int V) {
    size_t rows = LOGITS_CHUNK_FLOATS / (size_t)V;
    if (rows < 1) rows = 1;
    return rows < (size_t)N ? (int)rows : N;
}

// One warp per row of z (rows,V), the CPU reference's row statistics:
//   m = max z; S = sum expf(z - m); t = sum expf(z - m) (z - m)
//   lse = m + logf(S) (written for every row, padding included);
//   logp = z[target] - lse; entropy = logf(S) - t / S; both 0 for padding (target < 0).
__global__ void logprob_forward_rows_kernel(float *logp, float *entropy, float *lse,
                                            const float *logits, const int *targets, int rows,
                                            int V) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= rows) return;
    const float *z = logits + (size_t)row * V;
    float m = -INFINITY;
    for (int v = lane; v < V; v += 32) m = fmaxf(m, z[v]);
    m = warp_max(m);
    float S = 0.0f, t = 0.0f;
    for (int v = lane; v < V; v += 32) {
        float d = z[v] - m;
        float e = expf(d);
        S += e;
        t += e * d;
    }
    S = warp_sum(S);
    t = warp_sum(t);
    if (lane == 0) {
        float logsum = logf(S);
        float l = m + logsum;
        int tgt = targets[row];
        if (lse) lse[row] = l;
        logp[row] = tgt >= 0 ? z[tgt] - l : 0.0f;
        if (entropy) entropy[row] = tgt >= 0 ? logsum - t / S : 0.0f;
    }
}

// dlogits in place of the chunk's logits z (rows,V), one warp per row; lp_v = z_v - lse,
// p_v = expf(lp_v), H = -sum p lp (as the CPU reference):
//   dz_v = -dlogp p_v - dentropy p_v (lp_v + H)  (+ dlogp at v = target).
// Padding rows (target < 0) get dz = 0.
__global__ void logprob_backward_rows_kernel(float *z_dz, const float *dlogp,
                                             const float *dentropy, const int *targets,
                                             const float *lse, int rows, int V) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= rows) return;
    float *z = z_dz + (size_t)row * V;
    int tgt = targets[row];
    if (tgt < 0) {
        for (int v = lane; v < V; v += 32) z[v] = 0.0f;
        return;
    }
    float l = lse[row], gl = dlogp[row], ge = dentropy ? dentropy[row] : 0.0f;
    if (ge != 0.0f) {  // the same for the whole warp (one row)
        float H = 0.0f;
        for (int v = lane; v < V; v += 32) {
            float lp = z[v] - l;
            H -= expf(lp) * lp;
        }
        H = warp_sum(H);
        for (int v = lane; v < V; v += 32) {
            float lp = z[v] - l, p = expf(lp);
            z[v] = -gl * p - ge * p * (lp + H);
        }
    } else {
        for (int v = lane; v < V; v += 32) z[v] = -gl * expf(z[v] - l);
    }
    if (lane == (tgt & 31)) z[tgt] += gl;  // the lane that wrote z[tgt]
}

extern "C" void cuda_logprob_forward(Backend *b, float *logp, float *entropy, float *lse,
                                     const float *x, const float *W, const int *targets, int N,
                                     int C, int V) {
    if (N <= 0 || V <= 0) return;
    if (C <= 0) die("CUDA logprob_forward: model width %d", C);
    int chunk = logprob_chunk_rows(N, V);
    float *z = (float *)scratch(impl_of(b), SCR_LOGITS, (size_t)chunk * V * sizeof(float));
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int rows = min(chunk, N - r0);
        linear_forward(b, z, x + (size_t)r0 * C, W, rows, C, V);
        unsigned blocks = (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
        logprob_forward_rows_kernel<<<blocks, ROW_THREADS>>>(
            logp + r0, entropy ? entropy + r0 : NULL, lse ? lse + r0 : NULL, z, targets + r0,
            rows, V);
        LAUNCH_CHECK("logprob_forward_rows_kernel");
    }
}

extern "C" void cuda_logprob_backward(Backend *b, float *dx, float *dW, const float *dlogp,
                                      const float *dentropy, const float *x, const float *W,
                                      const int *targets, const float *lse, int N, int C, int V) {
    if (N <= 0 || V <= 0 || C <= 0 || (!dx && !dW)) return;
    int chunk = logprob_chunk_rows(N, V);
    float *z = (float *)scratch(impl_of(b), SCR_LOGITS, (size_t)chunk * V * sizeof(float));
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int rows = min(chunk, N - r0);
        const float *xc = x + (size_t)r0 * C;
        linear_forward(b, z, xc, W, rows, C, V);
        unsigned blocks = (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
        logprob_backward_rows_kernel<<<blocks, ROW_THREADS>>>(
            z, dlogp + r0, dentropy ? dentropy + r0 : NULL, targets + r0, lse + r0, rows, V);
        LAUNCH_CHECK("logprob_backward_rows_kernel");
        if (dx) linear_backward_inp(b, dx + (size_t)r0 * C, z, W, rows, C, V);
        if (dW) linear_backward_weight(b, dW, z, xc, rows, C, V);
    }
}

// ---------------------------------------------------------------- sampling
// One block per row; the parallel part is the row's max, the exponentials and the
// ranking; the order-sensitive sums run on thread 0 in exactly the CPU reference's
// order and precision (cpu_ops.c sample_row), so both pick the same token:
// temperature > 0:
//   m = max_v z_v / temperature;  e_v = expf(z_v / temperature - m);  total = sum_v e_v
//       (double, in order of v)
//   top_p < 1: sort by decreasing e, ties by lower id; keep the shortest prefix whose
//       double running sum reaches top_p * total (at least one token); its last entry
//       (cut_e, cut_id) defines the nucleus {v : e_v > cut_e or (e_v == cut_e and v <= cut_id)}
//       top_p >= 1: every token
//   u = philox_uniform(seed, counters[b]); the token is the first nucleus token in
//       increasing id whose double running sum of e exceeds u * (nucleus sum), else the last
//   logp = (z_tok / temperature - m) - logf((float)total)
// temperature <= 0: argmax (ties by lower id); logp = -logf(sum_v expf(z_v - z_tok)).
// A row with a NaN or +Inf logit, or without a finite one, has no distribution: token 0,
// logp NaN (never an id outside the vocabulary).
#define SAMPLE_THREADS 128
__global__ void sample_kernel(int *tokens, float *logp, const float *logits, int V,
                              float temperature, float top_p, uint64_t seed,
                              const uint64_t *counters) {
    extern __shared__ float sm[];  // e (V) | order (V ints)
    __shared__ float red[32];
    __shared__ float redv[32];
    __shared__ int redi[32];
    float *e = sm;
    int *order = (int *)(sm + V);
    int b = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5, nw = blockDim.x >> 5;
    const float *z = logits + (size_t)b * V;

    // a row without a distribution (a NaN or +Inf logit, or no finite one): token 0, logp NaN
    int bad = 0, finite = 0;
    for (int v = tid; v < V; v += blockDim.x) {
        bad |= isnan(z[v]) || z[v] == INFINITY;
        finite |= isfinite(z[v]);
    }
    bad = __syncthreads_or(bad);
    finite = __syncthreads_or(finite);
    if (bad || !finite) {  // block-uniform
        if (tid == 0) {
            tokens[b] = 0;
            logp[b] = __int_as_float(0x7fc00000);  // NaN
        }
        return;
    }

    if (!(temperature > 0.0f)) {  // greedy
        float bv = -INFINITY;
        int bi = -1;
        for (int v = tid; v < V; v += blockDim.x)  // increasing v: ">" keeps the lowest id
            if (bi < 0 || z[v] > bv) {
                bv = z[v];
                bi = v;
            }
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0) {
            redv[w] = bv;
            redi[w] = bi;
        }
        __syncthreads();
        float best_v = redv[0];
        int best = redi[0];
        for (int i = 1; i < nw; i++)
            if (redi[i] >= 0 &&
                (best < 0 || redv[i] > best_v || (redv[i] == best_v && redi[i] < best))) {
                best_v = redv[i];
                best = redi[i];
            }
        if (best < 0) best = 0;  // unreachable: NaN rows are handled above
        float s = 0.0f;
        for (int v = tid; v < V; v += blockDim.x) s += expf(z[v] - z[best]);
        s = block_sum(s, red);
        if (tid == 0) {
            tokens[b] = best;
            logp[b] = -logf(s);  // z_best - lse
        }
        return;
    }

    float m = -INFINITY;
    for (int v = tid; v < V; v += blockDim.x) m = fmaxf(m, z[v] / temperature);
    m = block_max(m, red);
    for (int v = tid; v < V; v += blockDim.x) {
        e[v] = expf(z[v] / temperature - m);
        order[v] = v;  // a valid permutation even if NaNs break the ranking below
    }
    __syncthreads();
    if (top_p < 1.0f) {  // (block-uniform) order[rank of v] = v, ranked by (decreasing e,
                         // increasing id); O(V^2), V is small
        for (int v = tid; v < V; v += blockDim.x) {
            float ev = e[v];
            int r = 0;
            for (int u = 0; u < V; u++) {
                float eu = e[u];
                r += (eu > ev || (eu == ev && u < v)) ? 1 : 0;
            }
            if (r < V) order[r] = v;
        }
        __syncthreads();
    }
    if (tid == 0) {
        double total = 0.0;
        for (int v = 0; v < V; v++) total += e[v];
        float cut_e = 0.0f;
        int cut_id = V - 1;
        if (top_p < 1.0f) {
            double need = (double)top_p * total, mass = 0.0;
            int k = 0;
            do {
                mass += e[order[k]];
                k++;
            } while (k < V && mass < need);
            cut_e = e[order[k - 1]];
            cut_id = order[k - 1];
        }
        double kept = 0.0;
        for (int v = 0; v < V; v++)
            if (e[v] > cut_e || (e[v] == cut_e && v <= cut_id)) kept += e[v];
        double target = (double)philox_uniform(seed, counters[b]) * kept, run = 0.0;
        int pick = -1;
        for (int v = 0; v < V; v++) {
            if (!(e[v] > cut_e || (e[v] == cut_e && v <= cut_id))) continue;
            pick = v;  // the last kept token if rounding leaves run <= target
            run += e[v];
            if (run > target) break;
        }
        if (pick < 0) pick = 0;  // unreachable: the row's largest logit is finite and kept
        tokens[b] = pick;
        logp[b] = (z[pick] / temperature - m) - logf((float)total);
    }
}

extern "C" void cuda_sample(Backend *b, int *tokens, float *logp, const float *logits, int B,
                            int V, float temperature, float top_p, uint64_t seed,
                            const uint64_t *counters) {
    if (B <= 0 || V <= 0) return;
    size_t smem = (size_t)V * (sizeof(float) + sizeof(int));
    smem_optin(impl_of(b), sample_kernel, smem, "sample");
    sample_kernel<<<row_blocks((size_t)B, "sample"), SAMPLE_THREADS, smem>>>(
        tokens, logp, logits, V, temperature, top_p, seed, counters);
    LAUNCH_CHECK("sample_kernel");
}

// ---------------------------------------------------------------- RL objective
// The formulas are objective.h's OBJ_HD functions, the very ones the CPU reference calls;
// the kernels only spread them over threads. The knobs travel by value.

// One block: thread 0 computes the batch statistics (only the batch scales read them), then
// one thread per group runs group_advantages over its G rewards.
#define ADV_THREADS 256
__global__ void group_advantages_kernel(float *adv, float *group_mean, float *group_std,
                                        const float *rewards, const int *lengths,
                                        const float *greedy, int P, int G, ObjectiveConfig oc) {
    __shared__ double batch_mean, batch_std;
    if (threadIdx.x == 0) {
        batch_mean = 0.0;
        batch_std = oc.scale == SCALE_BATCH_STD ? reward_std(rewards, P * G, oc.std_ddof) : 0.0;
        if (oc.scale == SCALE_BATCH_WHITEN)
            batch_centered_stats(&oc, rewards, lengths, greedy, P, G, &batch_mean, &batch_std);
    }
    __syncthreads();
    for (int g = threadIdx.x; g < P; g += blockDim.x)
        group_advantages(&oc, rewards + (size_t)g * G, lengths ? lengths + (size_t)g * G : NULL, G,
                         greedy ? greedy[g] : 0.0f, batch_mean, batch_std, adv + (size_t)g * G,
                         group_mean ? group_mean + g : NULL, group_std ? group_std + g : NULL);
}

extern "C" void cuda_group_advantages(Backend *b, float *adv, float *group_mean, float *group_std,
                                      const float *rewards, const int *lengths,
                                      const float *greedy, int P, int G,
                                      const struct ObjectiveConfig *oc) {
    (void)b;
    if (P <= 0 || G <= 0) return;
    group_advantages_kernel<<<1, ADV_THREADS>>>(adv, group_mean, group_std, rewards, lengths,
                                                greedy, P, G, *oc);
    LAUNCH_CHECK("group_advantages_kernel");
}

// One block per response k, threads over its row of T positions (masked tokens: all 0, not
// counted); the clip counts are per-thread integers added by thread 0 in thread order (exact).
// A sequence-level ratio first sums each thread's sequence_log_ratio_term in double; thread 0
// adds the partial sums in thread order.
#define TW_THREADS 128
__global__ void token_weights_kernel(float *w, float *loss, float *kl, float *coef,
                                     int *clip_low, int *clip_high, const float *logp,
                                     const float *logp_old, const float *logp_ref,
                                     const unsigned char *mask, const float *adv,
                                     const int *start, const int *len, int T, int M,
                                     double sum_len, ObjectiveConfig oc) {
    __shared__ int lo_part[TW_THREADS], hi_part[TW_THREADS];
    __shared__ double lr_part[TW_THREADS];
    __shared__ float seq_lr;
    int k = blockIdx.x;
    float A = adv[k];
    float c = aggregation_coef(oc.aggregation, M, len[k], sum_len, oc.l_max);
    int s0 = start[k], lk = len[k], lo = 0, hi = 0;
    if (ratio_is_sequence_level(&oc)) {
        double part = 0.0;
        int count = 0;
        for (int rt = threadIdx.x; rt < lk; rt += blockDim.x) {
            size_t p = (size_t)k * T + s0 + rt;
            if (mask && mask[p]) continue;
            part += sequence_log_ratio_term(&oc, A, logp[p], logp_old[p]);
            count++;
        }
        lr_part[threadIdx.x] = part;
        lo_part[threadIdx.x] = count;
        __syncthreads();
        if (threadIdx.x == 0) {
            double sum = 0.0;
            int n_pol = 0;
            for (int i = 0; i < blockDim.x; i++) {
                sum += lr_part[i];
                n_pol += lo_part[i];
            }
            seq_lr = n_pol ? (float)(sum / n_pol) : 0.0f;
        }
        __syncthreads();
    }
    float slr = ratio_is_sequence_level(&oc) ? seq_lr : 0.0f;
    for (int t = threadIdx.x; t < T; t += blockDim.x) {
        size_t p = (size_t)k * T + t;
        int rt = t - s0;
        float wt = 0.0f, lt = 0.0f, kt = 0.0f;
        if (rt >= 0 && rt < lk && !(mask && mask[p])) {
            float lp = logp[p], lp_old = logp_old[p], lp_ref = logp_ref ? logp_ref[p] : lp;
            wt = objective_token_weight(&oc, c, A, lp, lp_old, lp_ref, slr, &lt);
            if (kl) kt = kl_k3(lp, lp_ref);
            int side = token_clip_side(&oc, A, lp, lp_old, slr);
            lo += side < 0;
            hi += side > 0;
        }
        w[p] = wt;
        if (loss) loss[p] = lt;
        if (kl) kl[p] = kt;
    }
    __syncthreads();  // the sequence pass's counts in lo_part are read before this overwrite
    lo_part[threadIdx.x] = lo;
    hi_part[threadIdx.x] = hi;
    __syncthreads();
    if (threadIdx.x == 0) {
        int sl = 0, sh = 0;
        for (int i = 0; i < blockDim.x; i++) {
            sl += lo_part[i];
            sh += hi_part[i];
        }
        if (coef) coef[k] = c;
        if (clip_low) clip_low[k] = sl;
        if (clip_high) clip_high[k] = sh;
    }
}

extern "C" void cuda_token_weights(Backend *b, float *w, float *loss, float *kl, float *coef,
                                   int *clip_low, int *clip_high, const float *logp,
                                   const float *logp_old, const float *logp_ref,
                                   const unsigned char *mask, const float *adv, const int *start,
                                   const int *len, int n, int T, int M, double sum_len,
                                   const struct ObjectiveConfig *oc) {
    (void)b;
    if (n <= 0 || T <= 0) return;
    token_weights_kernel<<<row_blocks((size_t)n, "token_weights"), TW_THREADS>>>(
        w, loss, kl, coef, clip_low, clip_high, logp, logp_old, logp_ref, mask, adv, start, len,
        T, M, sum_len, *oc);
    LAUNCH_CHECK("token_weights_kernel");
}

// ---------------------------------------------------------------- optimizer
// Sum of squares in double, two passes with a grid that depends only on n:
// thread i of the grid takes elements i, i + grid size, ...; blocks reduce in a fixed tree;
// one block adds the block partials.
#define SS_THREADS 256
#define SS_MAX_BLOCKS 1024

__global__ void sum_squares_partial_kernel(double *part, const float *g, size_t n) {
    __shared__ double red[32];
    double acc = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double x = (double)g[i];
        acc += x * x;
    }
    acc = block_sum_d(acc, red);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

__global__ void sum_squares_final_kernel(double *out, const double *part, int nparts) {
    __shared__ double red[32];
    double acc = 0.0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc += part[i];
    acc = block_sum_d(acc, red);
    if (threadIdx.x == 0) *out = acc;
}

extern "C" double cuda_sum_squares(Backend *b, const float *g, size_t n) {
    if (n == 0) return 0.0;
    size_t nb = (n + SS_THREADS - 1) / SS_THREADS;
    int blocks = (int)(nb < SS_MAX_BLOCKS ? nb : SS_MAX_BLOCKS);
    double *part =
        (double *)scratch(impl_of(b), SCR_PARTIALS, (SS_MAX_BLOCKS + 1) * sizeof(double));
    sum_squares_partial_kernel<<<blocks, SS_THREADS>>>(part, g, n);
    LAUNCH_CHECK("sum_squares_partial_kernel");
    sum_squares_final_kernel<<<1, SS_THREADS>>>(part + SS_MAX_BLOCKS, part, blocks);
    LAUNCH_CHECK("sum_squares_final_kernel");
    double result = 0.0;
    CUDA_CHECK(cudaMemcpy(&result, part + SS_MAX_BLOCKS, sizeof(double), cudaMemcpyDeviceToHost));
    return result;
}

// bc1 = 1 - beta1^t, bc2 = 1 - beta2^t (computed on the host in double, passed as float,
// as the CPU reference does):
//   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//   p -= lr * ((m / bc1) / (sqrtf(v / bc2) + eps) + weight_decay * p)
__global__ void adamw_kernel(float *params, const float *grads, float *m, float *v, size_t n,
                             float lr, float beta1, float beta2, float eps, float weight_decay,
                             float grad_scale, float bc1, float bc2) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = grads[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = params[i];
        params[i] = p - lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + weight_decay * p);
    }
}

extern "C" void cuda_adamw_update(Backend *b, float *params, const float *grads, float *m,
                                  float *v, size_t n, float lr, float beta1, float beta2,
                                  float eps, float weight_decay, float grad_scale, int t) {
    (void)b;
    if (n == 0) return;
    if (t < 1) die("CUDA adamw_update: step t = %d, must be >= 1", t);
    float bc1 = (float)(1.0 - pow((double)beta1, (double)t));
    float bc2 = (float)(1.0 - pow((double)beta2, (double)t));
    adamw_kernel<<<ew_blocks(n), EW_THREADS>>>(params, grads, m, v, n, lr, beta1, beta2, eps,
                                               weight_decay, grad_scale, bc1, bc2);
    LAUNCH_CHECK("adamw_kernel");
}
