// cpu_ops.h: the CPU backend's implementation of every op in kernels.h (cpu_ops.c,
// cpu_attention.c; same contracts, see there): OpenMP over rows, CBLAS (OpenBLAS) for matrix
// products, AVX-512 kernels where the CPU has them. Only backend.c calls these.
#ifndef GRPOLAB_CPU_OPS_H
#define GRPOLAB_CPU_OPS_H

#include "kernels.h"

void *cpu_backend_init(char *err, size_t errlen);
void cpu_backend_free(void *impl);

void cpu_add(Backend *b, float *out, const float *x, const float *y, size_t n);
void cpu_scale(Backend *b, float *x, float s, size_t n);
void cpu_embedding_forward(Backend *b, float *out, const int *tokens, const float *wte, int N,
                           int C);
void cpu_embedding_backward(Backend *b, float *dwte, const float *dout, const int *tokens, int N,
                            int V, int C);
void cpu_rmsnorm_forward(Backend *b, float *out, float *rstd, const float *inp,
                         const float *weight, int N, int C, float eps);
void cpu_rmsnorm_backward(Backend *b, float *dinp, float *dweight, const float *dout,
                          const float *inp, const float *weight, const float *rstd, int N, int C);
void cpu_matmul_forward(Backend *b, float *out, const float *inp, const float *weight, int N,
                        int C, int OC);
void cpu_matmul_forward_add(Backend *b, float *out, const float *inp, const float *weight, int N,
                            int C, int OC);
void cpu_matmul_backward(Backend *b, float *dinp, float *dweight, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC);
void cpu_rope_forward(Backend *b, float *x, const int *pos, int N, int NH, int hd, float theta);
void cpu_rope_backward(Backend *b, float *dx, const int *pos, int N, int NH, int hd, float theta);
void cpu_attention_forward(Backend *b, float *out, float *att, const float *q, const float *k,
                           const float *v, const int *lengths, int B, int T, int NH, int NKV,
                           int hd);
void cpu_attention_backward(Backend *b, float *dq, float *dk, float *dv, const float *dout,
                            const float *att, const float *q, const float *k, const float *v,
                            const int *lengths, int B, int T, int NH, int NKV, int hd);
void cpu_kv_store(Backend *b, float *cache, const float *src, const int *start, const int *count,
                  int B, int T, int Tmax, int W);
// share, plen (B) or NULL: row b reads its positions [0, plen[b]) from row share[b] of the
// cache, which holds the same keys and values there (a group's prompt), the rest from its own
void cpu_attention_decode(Backend *b, float *out, const float *q, const float *kcache,
                          const float *vcache, const int *pos, const int *share, const int *plen,
                          int B, int Tmax, int NH, int NKV, int hd);
// The kernel set OpenBLAS runs (openblas_get_corename(), e.g. "SkylakeX"), and its build
// configuration with that name (openblas_get_config()): src/sim/io/libenv.h.
const char *cpu_blas_core(void);
size_t cpu_decode_packed_floats(Backend *b, int C, int OC);
void cpu_decode_pack(Backend *b, float *wp, const float *W, int C, int OC);
void cpu_decode_matmul(Backend *b, float *out, const float *inp, const float *wp, int N, int C,
                       int OC);
int cpu_decode_rows_free(Backend *b, int C, int OC);
const char *cpu_blas_config(void);
void cpu_swiglu_forward(Backend *b, float *out, const float *gate, const float *up, size_t n);
void cpu_swiglu_backward(Backend *b, float *dgate, float *dup, const float *dout,
                         const float *gate, const float *up, size_t n);
void cpu_logprob_forward(Backend *b, float *logp, float *entropy, float *lse, const float *x,
                         const float *W, const int *targets, int N, int C, int V);
void cpu_logprob_backward(Backend *b, float *dx, float *dW, const float *dlogp,
                          const float *dentropy, const float *x, const float *W,
                          const int *targets, const float *lse, int N, int C, int V);
void cpu_sample(Backend *b, int *tokens, float *logp, const float *logits, int B, int V,
                float temperature, float top_p, uint64_t seed, const uint64_t *counters);
void cpu_group_advantages(Backend *b, float *adv, float *group_mean, float *group_std,
                          const float *rewards, const int *lengths, const float *greedy, int P, int G,
                          const struct ObjectiveConfig *oc);
void cpu_token_weights(Backend *b, float *w, float *loss, float *kl, float *coef, int *clip_low,
                       int *clip_high, const float *logp, const float *logp_old,
                       const float *logp_ref, const unsigned char *mask, const float *adv,
                       const int *start, const int *len, int n, int T, int M, double sum_len,
                       const struct ObjectiveConfig *oc);
double cpu_sum_squares(Backend *b, const float *g, size_t n);
void cpu_adamw_update(Backend *b, float *params, const float *grads, float *m, float *v,
                      size_t n, float lr, float beta1, float beta2, float eps,
                      float weight_decay, float grad_scale, int t);

#endif
