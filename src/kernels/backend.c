// backend.c: the Backend handle, memory, and the dispatch of every op in kernels.h
// to its CPU (cpu_ops.c) or CUDA (cuda_ops.cu) implementation.
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../common.h"
#include "cpu_ops.h"
#include "kernels.h"
#include "objective.h"
#ifdef GRPOLAB_CUDA
#include "cuda_ops.h"
#endif

const char *backend_blas_config(void) { return cpu_blas_config(); }
const char *backend_blas_core(void) { return cpu_blas_core(); }

const char *backend_name(BackendKind kind) { return kind == BACKEND_CUDA ? "cuda" : "cpu"; }

int backend_parse(const char *s, BackendKind *out) {
    if (strcmp(s, "cpu") == 0) { *out = BACKEND_CPU; return 0; }
    if (strcmp(s, "cuda") == 0) { *out = BACKEND_CUDA; return 0; }
    return -1;
}

int backend_cuda_available(char *why, size_t whylen) {
#ifdef GRPOLAB_CUDA
    return cuda_device_available(why, whylen);
#else
    set_err(why, whylen, "this grpolab was built without nvcc (no CUDA backend)");
    return 0;
#endif
}

Backend *backend_create(BackendKind kind, char *err, size_t errlen) {
    void *impl = NULL;
    if (kind == BACKEND_CUDA) {
#ifdef GRPOLAB_CUDA
        char why[256];
        if (!cuda_device_available(why, sizeof why)) {
            set_err(err, errlen, "backend 'cuda' is not usable: %s (use --backend cpu)", why);
            return NULL;
        }
        impl = cuda_backend_init(err, errlen);
#else
        set_err(err, errlen,
                "backend 'cuda' is not usable: this grpolab was built without nvcc "
                "(install the CUDA toolkit and rebuild, or use --backend cpu)");
        return NULL;
#endif
    } else {
        impl = cpu_backend_init(err, errlen);
    }
    if (!impl) return NULL;
    Backend *b = xcalloc(1, sizeof *b);
    b->kind = kind;
    b->impl = impl;
    int cpu = kind == BACKEND_CPU;
    b->paths = (BackendPaths){.attention_vector = 2,
                              .attention_own_products = 1,
                              .decode_own_products = cpu,
                              .share_prompts = cpu,
                              .split_decode = cpu};
    return b;
}

void backend_destroy(Backend *b) {
    if (!b) return;
#ifdef GRPOLAB_CUDA
    if (b->kind == BACKEND_CUDA) cuda_backend_free(b->impl);
    else
#endif
        cpu_backend_free(b->impl);
    free(b);
}

// ---- memory
#ifdef GRPOLAB_CUDA
#define IF_CUDA(call)                    \
    if (b->kind == BACKEND_CUDA) {       \
        call;                            \
        return;                          \
    }
#define IF_CUDA_RET(call) \
    if (b->kind == BACKEND_CUDA) return call;
#else
#define IF_CUDA(call)
#define IF_CUDA_RET(call)
#endif

// Buffers of this size or more go on 2 MB pages where the kernel allows them (transparent
// huge pages in "madvise" mode, Debian's default, take only buffers that ask): the model's
// activations and attention matrices are tens of MB, walked by rows and columns, and with
// 4 KB pages their address translations miss the TLB.
#define HUGE_PAGE (2u << 20)

void *bk_alloc(Backend *b, size_t bytes) {
    IF_CUDA_RET(cuda_alloc(b->impl, bytes));
    // 64-byte aligned for vector loads; zeroed so an unwritten buffer is never garbage
    size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
    size_t rounded = (bytes + align - 1) / align * align;
    void *p = aligned_alloc(align, rounded ? rounded : align);
    if (!p) die("out of memory allocating %zu bytes", bytes);
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE) madvise(p, rounded, MADV_HUGEPAGE);  // a hint: failure changes nothing
#endif
    memset(p, 0, rounded ? rounded : align);
    return p;
}
void bk_free(Backend *b, void *p) {
    if (!p) return;
    IF_CUDA(cuda_free(b->impl, p));
    free(p);
}
void bk_zero(Backend *b, void *p, size_t bytes) {
    IF_CUDA(cuda_zero(b->impl, p, bytes));
    memset(p, 0, bytes);
}
void bk_upload(Backend *b, void *dst, const void *src, size_t bytes) {
    IF_CUDA(cuda_upload(b->impl, dst, src, bytes));
    memcpy(dst, src, bytes);
}
void bk_download(Backend *b, void *dst, const void *src, size_t bytes) {
    IF_CUDA(cuda_download(b->impl, dst, src, bytes));
    memcpy(dst, src, bytes);
}
void bk_copy(Backend *b, void *dst, const void *src, size_t bytes) {
    IF_CUDA(cuda_copy(b->impl, dst, src, bytes));
    memmove(dst, src, bytes);
}
void bk_sync(Backend *b) {
    IF_CUDA(cuda_sync(b->impl));
}

// ---- ops: one line each, same arguments to both implementations
#ifdef GRPOLAB_CUDA
#define DISPATCH(op, ...)                  \
    do {                                   \
        if (b->kind == BACKEND_CUDA)       \
            cuda_##op(b, __VA_ARGS__);     \
        else                               \
            cpu_##op(b, __VA_ARGS__);      \
    } while (0)
#define DISPATCH_RET(op, ...) \
    return b->kind == BACKEND_CUDA ? cuda_##op(b, __VA_ARGS__) : cpu_##op(b, __VA_ARGS__)
#else
#define DISPATCH(op, ...) cpu_##op(b, __VA_ARGS__)
#define DISPATCH_RET(op, ...) return cpu_##op(b, __VA_ARGS__)
#endif

void kn_add(Backend *b, float *out, const float *x, const float *y, size_t n) {
    DISPATCH(add, out, x, y, n);
}
void kn_scale(Backend *b, float *x, float s, size_t n) { DISPATCH(scale, x, s, n); }
void kn_embedding_forward(Backend *b, float *out, const int *tokens, const float *wte, int N,
                          int C) {
    DISPATCH(embedding_forward, out, tokens, wte, N, C);
}
void kn_embedding_backward(Backend *b, float *dwte, const float *dout, const int *tokens, int N,
                           int V, int C) {
    DISPATCH(embedding_backward, dwte, dout, tokens, N, V, C);
}
void kn_rmsnorm_forward(Backend *b, float *out, float *rstd, const float *inp,
                        const float *weight, int N, int C, float eps) {
    DISPATCH(rmsnorm_forward, out, rstd, inp, weight, N, C, eps);
}
void kn_rmsnorm_backward(Backend *b, float *dinp, float *dweight, const float *dout,
                         const float *inp, const float *weight, const float *rstd, int N, int C) {
    DISPATCH(rmsnorm_backward, dinp, dweight, dout, inp, weight, rstd, N, C);
}
void kn_matmul_forward(Backend *b, float *out, const float *inp, const float *weight, int N, int C,
                       int OC) {
    DISPATCH(matmul_forward, out, inp, weight, N, C, OC);
}
void kn_matmul_forward_add(Backend *b, float *out, const float *inp, const float *weight, int N,
                           int C, int OC) {
    DISPATCH(matmul_forward_add, out, inp, weight, N, C, OC);
}
void kn_matmul_backward(Backend *b, float *dinp, float *dweight, const float *dout,
                        const float *inp, const float *weight, int N, int C, int OC) {
    DISPATCH(matmul_backward, dinp, dweight, dout, inp, weight, N, C, OC);
}
void kn_rope_forward(Backend *b, float *x, const int *pos, int N, int NH, int hd, float theta) {
    DISPATCH(rope_forward, x, pos, N, NH, hd, theta);
}
void kn_rope_backward(Backend *b, float *dx, const int *pos, int N, int NH, int hd, float theta) {
    DISPATCH(rope_backward, dx, pos, N, NH, hd, theta);
}
void kn_attention_forward(Backend *b, float *out, float *att, const float *q, const float *k,
                          const float *v, const int *lengths, int B, int T, int NH, int NKV,
                          int hd) {
    DISPATCH(attention_forward, out, att, q, k, v, lengths, B, T, NH, NKV, hd);
}
void kn_attention_backward(Backend *b, float *dq, float *dk, float *dv, const float *dout,
                           const float *att, const float *q, const float *k, const float *v,
                           const int *lengths, int B, int T, int NH, int NKV, int hd) {
    DISPATCH(attention_backward, dq, dk, dv, dout, att, q, k, v, lengths, B, T, NH, NKV, hd);
}
void kn_kv_store(Backend *b, float *cache, const float *src, const int *start, const int *count,
                 int B, int T, int Tmax, int W) {
    DISPATCH(kv_store, cache, src, start, count, B, T, Tmax, W);
}
void kn_attention_decode(Backend *b, float *out, const float *q, const float *kcache,
                         const float *vcache, const int *pos, const int *share, const int *plen,
                         int B, int Tmax, int NH, int NKV, int hd) {
#ifdef GRPOLAB_CUDA
    if (b->kind == BACKEND_CUDA) {  // a shared prompt is the same numbers in every row's cache
        cuda_attention_decode(b, out, q, kcache, vcache, pos, B, Tmax, NH, NKV, hd);
        return;
    }
#endif
    cpu_attention_decode(b, out, q, kcache, vcache, pos, share, plen, B, Tmax, NH, NKV, hd);
}
size_t kn_decode_packed_floats(Backend *b, int C, int OC) {
    DISPATCH_RET(decode_packed_floats, C, OC);
}
void kn_decode_pack(Backend *b, float *wp, const float *W, int C, int OC) {
    DISPATCH(decode_pack, wp, W, C, OC);
}
void kn_decode_matmul(Backend *b, float *out, const float *inp, const float *wp, int N, int C,
                      int OC) {
    DISPATCH(decode_matmul, out, inp, wp, N, C, OC);
}
int kn_decode_rows_free(Backend *b, int C, int OC) {
    DISPATCH_RET(decode_rows_free, C, OC);
}
void kn_swiglu_forward(Backend *b, float *out, const float *gate, const float *up, size_t n) {
    DISPATCH(swiglu_forward, out, gate, up, n);
}
void kn_swiglu_backward(Backend *b, float *dgate, float *dup, const float *dout, const float *gate,
                        const float *up, size_t n) {
    DISPATCH(swiglu_backward, dgate, dup, dout, gate, up, n);
}
void kn_logprob_forward(Backend *b, float *logp, float *entropy, float *lse, const float *x,
                        const float *W, const int *targets, int N, int C, int V) {
    DISPATCH(logprob_forward, logp, entropy, lse, x, W, targets, N, C, V);
}
void kn_logprob_backward(Backend *b, float *dx, float *dW, const float *dlogp,
                         const float *dentropy, const float *x, const float *W,
                         const int *targets, const float *lse, int N, int C, int V) {
    DISPATCH(logprob_backward, dx, dW, dlogp, dentropy, x, W, targets, lse, N, C, V);
}
void kn_sample(Backend *b, int *tokens, float *logp, const float *logits, int B, int V,
               float temperature, float top_p, uint64_t seed, const uint64_t *counters) {
    DISPATCH(sample, tokens, logp, logits, B, V, temperature, top_p, seed, counters);
}
void kn_group_advantages(Backend *b, float *adv, float *group_mean, float *group_std,
                         const float *rewards, const int *lengths, const float *greedy, int P,
                         int G, const struct ObjectiveConfig *oc) {
    if (oc->baseline == BASELINE_LENGTH_WEIGHTED && !lengths)
        die("kn_group_advantages: the length_weighted baseline needs the responses' lengths");
    if (oc->baseline == BASELINE_GREEDY && !greedy)
        die("kn_group_advantages: the greedy baseline needs the greedy responses' rewards");
    DISPATCH(group_advantages, adv, group_mean, group_std, rewards, lengths, greedy, P, G, oc);
}
void kn_token_weights(Backend *b, float *w, float *loss, float *kl, float *coef, int *clip_low,
                      int *clip_high, const float *logp, const float *logp_old,
                      const float *logp_ref, const unsigned char *mask, const float *adv,
                      const int *start, const int *len, int n, int T, int M, double sum_len,
                      const struct ObjectiveConfig *oc) {
    DISPATCH(token_weights, w, loss, kl, coef, clip_low, clip_high, logp, logp_old, logp_ref, mask,
             adv, start, len, n, T, M, sum_len, oc);
}
double kn_sum_squares(Backend *b, const float *g, size_t n) { DISPATCH_RET(sum_squares, g, n); }
void kn_adamw_update(Backend *b, float *params, const float *grads, float *m, float *v, size_t n,
                     float lr, float beta1, float beta2, float eps, float weight_decay,
                     float grad_scale, int t) {
    DISPATCH(adamw_update, params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, grad_scale,
             t);
}
