// cuda_ops.h: the CUDA implementation of every op in kernels.h (same contracts;
// see there). cuBLAS for matrix products; plain device allocations; every CUDA and cuBLAS call checked.
#ifndef GRPOLAB_CUDA_OPS_H
#define GRPOLAB_CUDA_OPS_H

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

void *cuda_backend_init(char *err, size_t errlen);
void cuda_backend_free(void *impl);
// 1 if a device is usable, else 0 with the driver's message in why.
int cuda_device_available(char *why, size_t whylen);
void *cuda_alloc(void *impl, size_t bytes);
void cuda_free(void *impl, void *p);
void cuda_zero(void *impl, void *p, size_t bytes);
void cuda_upload(void *impl, void *dst, const void *src, size_t bytes);
void cuda_download(void *impl, void *dst, const void *src, size_t bytes);
void cuda_copy(void *impl, void *dst, const void *src, size_t bytes);
void cuda_sync(void *impl);

void cuda_add(Backend *b, float *out, const float *x, const float *y, size_t n);
void cuda_scale(Backend *b, float *x, float s, size_t n);
void cuda_embedding_forward(Backend *b, float *out, const int *tokens, const float *wte, int N,
                           int C);
void cuda_embedding_backward(Backend *b, float *dwte, const float *dout, const int *tokens, int N,
                            int V, int C);
void cuda_rmsnorm_forward(Backend *b, float *out, float *rstd, const float *inp,
                         const float *weight, int N, int C, float eps);
void cuda_rmsnorm_backward(Backend *b, float *dinp, float *dweight, const float *dout,
                          const float *inp, const float *weight, const float *rstd, int N, int C);
void cuda_matmul_forward(Backend *b, float *out, const float *inp, const float *weight, int N,
                        int C, int OC);
void cuda_matmul_forward_add(Backend *b, float *out, const float *inp, const float *weight, int N,
                             int C, int OC);
void cuda_matmul_backward(Backend *b, float *dinp, float *dweight, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC);
void cuda_rope_forward(Backend *b, float *x, const int *pos, int N, int NH, int hd, float theta);
void cuda_rope_backward(Backend *b, float *dx, const int *pos, int N, int NH, int hd, float theta);
void cuda_attention_forward(Backend *b, float *out, float *att, const float *q, const float *k,
                           const float *v, const int *lengths, int B, int T, int NH, int NKV,
                           int hd);
void cuda_attention_backward(Backend *b, float *dq, float *dk, float *dv, const float *dout,
                            const float *att, const float *q, const float *k, const float *v,
                            const int *lengths, int B, int T, int NH, int NKV, int hd);
void cuda_kv_store(Backend *b, float *cache, const float *src, const int *start, const int *count,
                  int B, int T, int Tmax, int W);
size_t cuda_decode_packed_floats(Backend *b, int C, int OC);
void cuda_decode_pack(Backend *b, float *wp, const float *W, int C, int OC);
void cuda_decode_matmul(Backend *b, float *out, const float *inp, const float *wp, int N, int C,
                        int OC);
int cuda_decode_rows_free(Backend *b, int C, int OC);
void cuda_attention_decode(Backend *b, float *out, const float *q, const float *kcache,
                          const float *vcache, const int *pos, int B, int Tmax, int NH, int NKV,
                          int hd);
void cuda_swiglu_forward(Backend *b, float *out, const float *gate, const float *up, size_t n);
void cuda_swiglu_backward(Backend *b, float *dgate, float *dup, const float *dout,
                         const float *gate, const float *up, size_t n);
void cuda_logprob_forward(Backend *b, float *logp, float *entropy, float *lse, const float *x,
                         const float *W, const int *targets, int N, int C, int V);
void cuda_logprob_backward(Backend *b, float *dx, float *dW, const float *dlogp,
                          const float *dentropy, const float *x, const float *W,
                          const int *targets, const float *lse, int N, int C, int V);
void cuda_sample(Backend *b, int *tokens, float *logp, const float *logits, int B, int V,
                float temperature, float top_p, uint64_t seed, const uint64_t *counters);
void cuda_group_advantages(Backend *b, float *adv, float *group_mean, float *group_std,
                           const float *rewards, const int *lengths, const float *greedy, int P, int G,
                           const struct ObjectiveConfig *oc);
void cuda_token_weights(Backend *b, float *w, float *loss, float *kl, float *coef, int *clip_low,
                        int *clip_high, const float *logp, const float *logp_old,
                        const float *logp_ref, const unsigned char *mask, const float *adv,
                        const int *start, const int *len, int n, int T, int M, double sum_len,
                        const struct ObjectiveConfig *oc);
double cuda_sum_squares(Backend *b, const float *g, size_t n);
void cuda_adamw_update(Backend *b, float *params, const float *grads, float *m, float *v,
                      size_t n, float lr, float beta1, float beta2, float eps,
                      float weight_decay, float grad_scale, int t);

#ifdef __cplusplus
}
#endif

#endif
