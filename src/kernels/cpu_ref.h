// cpu_ref.h: the plain reference of the ops of kernels.h, on host arrays: scalar loops that
// follow each op's definition in kernels.h line by line, summing in double, with no
// threads, vectors, BLAS, tables or fast exponentials. Nothing in a run calls them; the
// tests hold every backend's op to them within a tolerance (tests/test_backend_ops.c), as
// ggml's test-backend-ops does. Shapes, "backward accumulates" and padding as in kernels.h.
#ifndef GRPOLAB_CPU_REF_H
#define GRPOLAB_CPU_REF_H

#include <stddef.h>

void ref_embedding_forward(float *out, const int *tokens, const float *wte, int N, int C);
void ref_embedding_backward(float *dwte, const float *dout, const int *tokens, int N, int C);
void ref_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N,
                         int C, float eps);
void ref_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                          const float *weight, int N, int C, float eps);
// out (N,OC) = inp (N,C) @ weight (OC,C)^T, plus out's own value if add
void ref_matmul_forward(float *out, const float *inp, const float *weight, int N, int C, int OC,
                        int add);
void ref_matmul_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                         const float *weight, int N, int C, int OC);
// sign +1: the rotation of kn_rope_forward, -1: its inverse (kn_rope_backward)
void ref_rope(float *x, const int *pos, int N, int NH, int hd, float theta, int sign);
void ref_attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           const int *lengths, int B, int T, int NH, int NKV, int hd);
void ref_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const int *lengths, int B, int T,
                            int NH, int NKV, int hd);
// the rows with pos[b] >= 0
void ref_attention_decode(float *out, const float *q, const float *kcache, const float *vcache,
                          const int *pos, int B, int Tmax, int NH, int NKV, int hd);
void ref_swiglu_forward(float *out, const float *gate, const float *up, size_t n);
void ref_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                         const float *up, size_t n);
void ref_logprob_forward(float *logp, float *entropy, float *lse, const float *x, const float *W,
                         const int *targets, int N, int C, int V);
void ref_logprob_backward(float *dx, float *dW, const float *dlogp, const float *dentropy,
                          const float *x, const float *W, const int *targets, int N, int C, int V);
// log softmax(logits / temperature)[token] of one row (temperature 0: of the logits)
double ref_token_logp(const float *logits, int V, float temperature, int token);
double ref_sum_squares(const float *g, size_t n);
void ref_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                      int t);

#endif
