// kernels.h: the backend-neutral numeric kernel API of grpolab.
//
// Every op exists twice with the same contract: a float32 CPU implementation (cpu_ops.c and
// cpu_attention.c: OpenMP, AVX-512 kernels, CBLAS from OpenBLAS for matrix products) and a
// CUDA one (cuda_ops.cu, cuBLAS); cpu_ref.c holds the plain scalar reference that the tests
// hold both to (tests/test_backend_ops.c). Callers only see this header: a Backend handle and
// "device pointers" (host memory on the CPU backend, GPU memory on CUDA) that
// come from bk_alloc. Integer arrays (tokens, lengths, positions) are device
// pointers too.
//
// Conventions:
// - shapes are given in a comment above each op, row-major, last index fastest;
// - every backward ACCUMULATES (+=) into its gradient outputs, parameter and
//   activation gradients alike, so zero-grad is one bk_zero (but RoPE's, in place,
//   and SwiGLU's, which writes); a NULL gradient output means "not needed" and is
//   skipped;
// - results do not depend on the number of threads used for reductions whose
//   order matters within one backend (deterministic; see docs/kernels.md);
// - a Backend is used by one host thread at a time (it owns scratch and tables).
#ifndef GRPOLAB_KERNELS_H
#define GRPOLAB_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { BACKEND_CPU = 0, BACKEND_CUDA = 1 } BackendKind;

// Which of a backend's paths its ops and their callers take. backend_create sets the defaults
// of its kind (the fast paths wherever they give the numbers the logs hold); a test or a
// script that compares paths sets the fields on its own Backend. Views of a model copy their
// viewer's (src/sim/model/model.c).
typedef struct BackendPaths {
    // CPU attention, decode attention and SwiGLU: 2 the AVX-512 kernels where the CPU has
    // them, 1 the AVX lane sums only, 0 the scalar loops (the same sums in the same order)
    int attention_vector;
    // CPU attention: 1 its T x T products are our own where they give OpenBLAS's numbers
    // (docs/kernels.md), 0 OpenBLAS for every product (`make blas-order` compares the two)
    int attention_own_products;
    // the model decodes with kn_decode_matmul where kn_decode_rows_free says it may (the CPU:
    // where it gives kn_matmul_forward's numbers); 0 keeps the decode on kn_matmul_forward
    int decode_own_products;
    // model_prefill runs each distinct prompt of a batch once (the CPU: its rows repeat it
    // with the same numbers); 0 runs every row
    int share_prompts;
    // the sampler splits a decode batch whose KV cache outgrows the CPU's caches
    // (SamplerConfig.split_bytes); a GPU wants the whole batch at once
    int split_decode;
} BackendPaths;

typedef struct Backend {
    BackendKind kind;
    void *impl;    // backend-private state (cuBLAS handle, scratch buffers, ...)
    int use_tf32;  // CUDA only: allow TF32 tensor-core matmuls (off by default)
    BackendPaths paths;
} Backend;

// "cpu" / "cuda"
const char *backend_name(BackendKind kind);
// Parses "cpu" / "cuda" (returns 0) or returns -1.
int backend_parse(const char *s, BackendKind *out);
// The BLAS the CPU backend calls: its build configuration and the kernels it runs.
const char *backend_blas_config(void);
const char *backend_blas_core(void);
// 1 if the CUDA backend was compiled in and a device is usable; else 0 and the
// reason in why (e.g. "built without nvcc", "no CUDA device: <driver message>").
int backend_cuda_available(char *why, size_t whylen);
// Creates a backend; NULL with a message in err if it cannot (e.g. cuda without a GPU).
Backend *backend_create(BackendKind kind, char *err, size_t errlen);
void backend_destroy(Backend *b);

// ---- memory (all sizes in bytes; failures are fatal with file:line and the library's message)
void *bk_alloc(Backend *b, size_t bytes);
void bk_free(Backend *b, void *p);
void bk_zero(Backend *b, void *p, size_t bytes);
void bk_upload(Backend *b, void *dst_dev, const void *src_host, size_t bytes);
void bk_download(Backend *b, void *dst_host, const void *src_dev, size_t bytes);
void bk_copy(Backend *b, void *dst_dev, const void *src_dev, size_t bytes);
void bk_sync(Backend *b);

// ---- elementwise
// out (n) = a (n) + b (n)   (out may alias a or b)
void kn_add(Backend *b, float *out, const float *x, const float *y, size_t n);
// x (n) *= s
void kn_scale(Backend *b, float *x, float s, size_t n);

// ---- token embedding
// tokens (N) in [0,V), wte (V,C) -> out (N,C)
void kn_embedding_forward(Backend *b, float *out, const int *tokens, const float *wte, int N,
                          int C);
// dwte (V,C) += sum over n with tokens[n]==v of dout (N,C)[n]
void kn_embedding_backward(Backend *b, float *dwte, const float *dout, const int *tokens, int N,
                           int V, int C);

// ---- RMSNorm: out = inp / sqrt(mean(inp^2) + eps) * weight
// inp (N,C), weight (C) -> out (N,C); rstd (N) kept for backward
void kn_rmsnorm_forward(Backend *b, float *out, float *rstd, const float *inp,
                        const float *weight, int N, int C, float eps);
// dinp (N,C) +=, dweight (C) +=
void kn_rmsnorm_backward(Backend *b, float *dinp, float *dweight, const float *dout,
                         const float *inp, const float *weight, const float *rstd, int N, int C);

// ---- linear layer without bias (PyTorch nn.Linear layout)
// inp (N,C), weight (OC,C) -> out (N,OC) = inp @ weight^T   (overwrites out)
void kn_matmul_forward(Backend *b, float *out, const float *inp, const float *weight, int N, int C,
                       int OC);
// inp (N,C), weight (OC,C) -> out (N,OC) += inp @ weight^T: a residual branch added in place,
// each entry out + (the product's entry as kn_matmul_forward sums it), one rounding. With a BLAS
// that sums the inner dimension in one block, as OpenBLAS does for C up to its block size, that
// is kn_matmul_forward into a scratch then kn_add, without the scratch's passes.
void kn_matmul_forward_add(Backend *b, float *out, const float *inp, const float *weight, int N,
                           int C, int OC);
// dinp (N,C) += dout @ weight; dweight (OC,C) += dout^T @ inp; dout (N,OC)
void kn_matmul_backward(Backend *b, float *dinp, float *dweight, const float *dout,
                        const float *inp, const float *weight, int N, int C, int OC);

// ---- decode-time products: many products of few rows by the same weights (a decode step's)
// W (OC,C) is packed once into wp (kn_decode_packed_floats floats, bk_alloc'd), then
// out (N,OC) = inp (N,C) @ W^T as often as needed. CPU: panels of 16-float vectors, each
// entry a chain of fused multiply-adds from 0 over the inner dimension in order, whatever N.
// CUDA: wp is W as it is and the product kn_matmul_forward's.
size_t kn_decode_packed_floats(Backend *b, int C, int OC);
void kn_decode_pack(Backend *b, float *wp, const float *W, int C, int OC);
void kn_decode_matmul(Backend *b, float *out, const float *inp, const float *wp, int N, int C,
                      int OC);
// 1 if kn_decode_matmul's rows at this shape are kn_matmul_forward's of a product of 32 rows
// or more, whatever N (checked once per shape and backend; 0 on CUDA, whose products depend
// on their row count). A caller takes the decode products only with paths.decode_own_products.
int kn_decode_rows_free(Backend *b, int C, int OC);

// ---- rotary position embedding, "rotate half" convention of Llama/Qwen2 in HF:
// for head h, i < hd/2, angle = pos[n] * theta^(-2i/hd):
//   x'[i]        = x[i] cos - x[i+hd/2] sin
//   x'[i+hd/2]   = x[i] sin + x[i+hd/2] cos
// x (N,NH,hd) rotated in place; pos (N) the position of each row's token.
void kn_rope_forward(Backend *b, float *x, const int *pos, int N, int NH, int hd, float theta);
// dx (N,NH,hd) in place: gradient w.r.t. the rotated x -> gradient w.r.t. the input x
// (the inverse rotation; an in-place transform, the one op that does not accumulate).
void kn_rope_backward(Backend *b, float *dx, const int *pos, int N, int NH, int hd, float theta);

// ---- causal multi-head self-attention with grouped KV heads (GQA), over a batch
// of right-padded sequences: sequence b holds tokens 0..lengths[b]-1.
// Query head h reads KV head h / (NH/NKV). Query t attends keys s <= t, scaled by 1/sqrt(hd).
// q (B,T,NH,hd), k,v (B,T,NKV,hd), lengths (B) -> out (B,T,NH,hd);
// att (B,NH,T,T): softmax probabilities kept for backward.
// Rows t >= lengths[b] are written as zeros in out and att.
void kn_attention_forward(Backend *b, float *out, float *att, const float *q, const float *k,
                          const float *v, const int *lengths, int B, int T, int NH, int NKV,
                          int hd);
// dq (B,T,NH,hd) +=, dk, dv (B,T,NKV,hd) +=
void kn_attention_backward(Backend *b, float *dq, float *dk, float *dv, const float *dout,
                           const float *att, const float *q, const float *k, const float *v,
                           const int *lengths, int B, int T, int NH, int NKV, int hd);
// KV cache: cache (B,Tmax,W); src (B,T,W) -> cache[b, start[b]+t, :] = src[b,t,:]
// for t < min(T, count[b]) (count NULL: all T rows); rows falling outside [0, Tmax) are skipped.
void kn_kv_store(Backend *b, float *cache, const float *src, const int *start, const int *count,
                 int B, int T, int Tmax, int W);
// One decoding step: q (B,NH,hd) is the query of the token at position pos[b] of
// sequence b, whose keys/values for positions 0..pos[b] (its own included) are in
// kcache, vcache (B,Tmax,NKV,hd). -> out (B,NH,hd). Rows with pos[b] < 0 are skipped (zeros);
// pos[b] >= Tmax reads the Tmax cached keys.
// share, plen (B, host) or NULL: row b's first plen[b] cached positions equal those of row
// share[b] (a group's prompt, copied from its first row), which the CPU then reads instead,
// while they are still in its caches; the numbers are the same either way (CUDA ignores them).
void kn_attention_decode(Backend *b, float *out, const float *q, const float *kcache,
                         const float *vcache, const int *pos, const int *share, const int *plen,
                         int B, int Tmax, int NH, int NKV, int hd);

// ---- SwiGLU: out = silu(gate) * up, silu(x) = x * sigmoid(x)
// gate, up (n) -> out (n)
void kn_swiglu_forward(Backend *b, float *out, const float *gate, const float *up, size_t n);
// dgate (n) =, dup (n) = (written: the one backward besides RoPE's that does not accumulate;
// its outputs are activation gradients that nothing else adds to, so the caller saves a
// zeroing pass over them)
void kn_swiglu_backward(Backend *b, float *dgate, float *dup, const float *dout, const float *gate,
                        const float *up, size_t n);

// ---- output projection + log-softmax + gather of the targets' log-probs.
// x (N,C), W (V,C), targets (N) -> logp (N) = log softmax(x W^T)[n, targets[n]],
// lse (N) = logsumexp of each row (kept for backward), entropy (N) = -sum p log p
// (NULL: not computed). Logits are formed a bounded chunk of rows at a time (scratch of
// at most max(256 rows, 2^20 floats)), never for an unbounded N.
// Rows with targets[n] < 0 are padding: logp = 0.
void kn_logprob_forward(Backend *b, float *logp, float *entropy, float *lse, const float *x,
                        const float *W, const int *targets, int N, int C, int V);
// dlogp (N) = dL/dlogp, dentropy (N) = dL/dentropy or NULL -> dx (N,C) +=, dW (V,C) +=
// (logits are recomputed chunk by chunk from x, W and lse).
void kn_logprob_backward(Backend *b, float *dx, float *dW, const float *dlogp,
                         const float *dentropy, const float *x, const float *W,
                         const int *targets, const float *lse, int N, int C, int V);

// ---- sampling from logits (B,V): the sampler's per-token work.
// temperature > 0: softmax(logits / temperature), restricted to the smallest set of
// tokens (in order of decreasing probability, ties by lower id) whose mass reaches
// top_p, renormalised, sampled with the uniform u = philox_uniform(seed, counters[b]) by
// inverse CDF over the kept tokens taken in increasing id order.
// temperature == 0: greedy (argmax, ties by lower id).
// tokens (B) out; logp (B) out = log softmax(logits / temperature)[token] of the full
// (not top-p truncated) distribution (temperature 0: log softmax(logits)[token]).
// A row with a NaN or +Inf logit, or without a finite one, has no distribution: its token is
// 0 and its logp NaN, so a broken model never yields an id outside [0, V).
void kn_sample(Backend *b, int *tokens, float *logp, const float *logits, int B, int V,
               float temperature, float top_p, uint64_t seed, const uint64_t *counters);

// ---- RL objective: advantages and token weights (the formulas are objective.h's OBJ_HD
// functions, called by both backends; the knobs come in oc, a host pointer).
struct ObjectiveConfig;
// Group advantages: rewards (P*G), group g = responses g*G .. g*G+G-1 -> adv (P*G)
// A_i = (r_i - b_i) / s_i (group_advantages of objective.h; batch statistics over all P*G);
// lengths (P*G): the responses' lengths, needed by the length_weighted baseline (else may be
// NULL); greedy (P): the reward of each prompt's greedy response, needed by the greedy
// baseline (else may be NULL); group_mean (P), group_std (P) the groups' reward statistics
// (NULL: not written).
void kn_group_advantages(Backend *b, float *adv, float *group_mean, float *group_std,
                         const float *rewards, const int *lengths, const float *greedy, int P,
                         int G, const struct ObjectiveConfig *oc);
// Token weights of n responses in the trainer's (n,T) layout: the tokens of response
// k are row k, positions start[k] .. start[k]+len[k]-1 (the logp of a response token sits at
// its input position). The n rows are all or part (a micro-batch) of a minibatch of M
// responses whose lengths sum to sum_len: the aggregation's normalizers (for a whole
// minibatch M = n and sum_len = sum_k len[k]; token_mean divides by sum_len, which the caller
// chooses by the objective's scope: the whole step's tokens, or a micro-batch's times the
// number of micro-batches).
// logp, logp_old (n,T); logp_ref (n,T) or NULL (then pi_ref = pi_theta: no KL);
// mask (n,T) or NULL (none): a response token with mask != 0 is not the policy's action (the
// environment wrote it): w = loss = kl = 0 there and it is not in the clip counts, but it
// still counts in len[k] (|o_k|) and sum_len; adv (n) A_k; start, len (n) ->
//   w (n,T)     token weight w = -dL/dlogp = objective_token_weight(c_k, A_k, ...), 0 elsewhere
//               (a sequence-level ratio first reduces each response's policy tokens to the
//               mean of sequence_log_ratio_term);
//   loss (n,T)  per-token loss l (objective_token_weight's) before c_k, 0 elsewhere
//               (L = sum_k sum_t coef[k] * loss);
//   kl (n,T)    KL_k3(pi_theta, pi_ref) per token, 0 elsewhere;
//   coef (n)    aggregation coefficient c_k;
//   clip_low, clip_high (n): unmasked tokens of response k whose ratio is held at the lower /
//               upper bound of its clip (token_clip_side; for PPO: the clip binds with A < 0 /
//               A > 0).
// Every output but w may be NULL (not computed). Positions outside the responses are
// never read.
void kn_token_weights(Backend *b, float *w, float *loss, float *kl, float *coef, int *clip_low,
                      int *clip_high, const float *logp, const float *logp_old,
                      const float *logp_ref, const unsigned char *mask, const float *adv,
                      const int *start, const int *len, int n, int T, int M, double sum_len,
                      const struct ObjectiveConfig *oc);

// ---- optimizer
// Sum of squares of g (n), returned on the host; deterministic order.
double kn_sum_squares(Backend *b, const float *g, size_t n);
// AdamW (Loshchilov & Hutter), step t >= 1, with bias correction; the gradient is
// multiplied by grad_scale first (global grad-norm clipping: scale = min(1, max_norm/norm)).
//   g = grad*grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//   p -= lr * ( (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + weight_decay * p )
void kn_adamw_update(Backend *b, float *params, const float *grads, float *m, float *v, size_t n,
                     float lr, float beta1, float beta2, float eps, float weight_decay,
                     float grad_scale, int t);

#ifdef __cplusplus
}
#endif

#endif
