// model.h: the policy, a decoder-only transformer in the Qwen2/Llama style.
//
//   x = tok_embeddings[tokens]
//   for each layer:  x += attn(rmsnorm(x))   (RoPE, causal, grouped KV heads)
//                    x += mlp(rmsnorm(x))    (SwiGLU: w_down(silu(w_gate x) * w_up x))
//   logits = rmsnorm(x) @ output^T           (output = tok_embeddings when tied)
//
// Parameters, gradients, AdamW moments and activations each live in one contiguous
// device buffer carved by a size table into named tensors. Tensor names
// are in the style of Meta's Llama checkpoints, so a PyTorch user recognises them:
//   tok_embeddings (V,C); layers.{i}.attn_norm (C); layers.{i}.attn.wq (NH*hd,C);
//   layers.{i}.attn.wk, .wv (NKV*hd,C); layers.{i}.attn.wo (C,NH*hd); layers.{i}.mlp_norm (C);
//   layers.{i}.mlp.w_gate, .w_up (F,C); layers.{i}.mlp.w_down (C,F); norm (C); output (V,C)
//   (output only when untied). Matrices are (out_features, in_features) like nn.Linear.
#ifndef GRPOLAB_MODEL_H
#define GRPOLAB_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../../kernels/kernels.h"

typedef struct {
    int vocab_size;   // V
    int d_model;      // C
    int n_layers;     // L
    int n_heads;      // NH (query heads)
    int n_kv_heads;   // NKV, divides NH (grouped-query attention)
    int d_ff;         // F, SwiGLU hidden size
    int max_seq_len;  // longest sequence (prompt + response) the model is run on
    int tied_embeddings;  // 1: the output head is tok_embeddings
    float rope_theta;
    float norm_eps;
} ModelConfig;

#define MODEL_MAX_NAME 64

typedef struct {
    char name[MODEL_MAX_NAME];
    int ndim;      // 1 or 2
    int shape[2];  // shape[1] unused when ndim == 1
    size_t offset; // in floats, into the params/grads/m/v buffers
    size_t numel;
} ParamTensor;

typedef struct {
    float lr;
    float beta1, beta2, eps;
    float weight_decay;
    float grad_clip;  // max global grad norm; <= 0: no clipping
} AdamWConfig;

typedef struct Model Model;

// 0 if the config is usable, else -1 and a message naming the field, value and what is allowed.
int model_config_validate(const ModelConfig *c, char *err, size_t errlen);
// A small default (used by tests and as the base of configs).
ModelConfig model_config_default(void);

// Allocates parameters (uninitialised), gradients and AdamW state on the backend.
Model *model_create(Backend *bk, const ModelConfig *c);
void model_free(Model *m);

const ModelConfig *model_config(const Model *m);
Backend *model_backend(const Model *m);
size_t model_num_params(const Model *m);
int model_num_tensors(const Model *m);
const ParamTensor *model_tensor(const Model *m, int i);
// Index of the named tensor, or -1.
int model_find_tensor(const Model *m, const char *name);

// Device buffers (n = model_num_params floats each).
float *model_params(Model *m);
float *model_grads(Model *m);
float *model_adam_m(Model *m);
float *model_adam_v(Model *m);
int model_adam_step(const Model *m);     // number of AdamW steps taken
void model_set_adam_step(Model *m, int t);

// Initialises parameters from (seed): normal(0, 0.02) for matrices, the residual
// output projections (wo, w_down) scaled by 1/sqrt(2L), norms at 1. Zeroes AdamW state.
void model_init_params(Model *m, uint64_t seed);

// Copies all parameters (and AdamW state) from src, which must have the same config.
void model_copy_params(Model *dst, const Model *src);

// ---- training forward / backward over a batch of right-padded sequences
// tokens, targets (B,T) host ints; sequence b holds tokens[b, 0..lengths[b]-1];
// targets[b,t] is the token whose log-prob is wanted at position t (-1: none).
// B*T must not exceed what the activations were sized for (grown on demand), T <= max_seq_len.
// After the call, model_logp / model_entropy hold (B,T) device arrays (0 where no target).
void model_forward(Model *m, const int *tokens, const int *targets, const int *lengths, int B,
                   int T);
float *model_logp(Model *m);
float *model_entropy(Model *m);

void model_zero_grad(Model *m);
// Backpropagates dL/dlogp (B,T) (device array; e.g. the RL token weights negated, or
// -1/count for cross-entropy) and optionally dL/dentropy (NULL: none) from the last forward,
// accumulating into the gradients.
void model_backward(Model *m, const float *dlogp, const float *dentropy);

// Mean cross-entropy over the positions with a target in the last forward, and (if
// backward) the gradient of sum(-logp) / denom accumulated into the gradients (denom <= 0:
// the last forward's target count, i.e. the gradient of the mean; with gradient accumulation
// over micro-batches pass the total target count of all of them). Returns the mean loss.
float model_cross_entropy_step(Model *m, int backward, double denom);
// Positions with a target in the last forward.
size_t model_num_targets(const Model *m);

// Global L2 norm of the gradients.
double model_grad_norm(Model *m);
// Clips the gradients to opt->grad_clip (global norm) and applies one AdamW step with
// learning rate opt->lr. Returns the grad norm before clipping.
double model_adamw_step(Model *m, const AdamWConfig *opt);

// ---- incremental decoding with a KV cache
// Allocates the cache for up to B sequences of max_seq_len tokens.
void model_kv_alloc(Model *m, int B);
// Runs the prompts tokens (B,T) (host, right-padded, lengths (B) >= 1) through the
// model, fills the cache, and writes the next-token logits of each sequence's last
// prompt token to logits (B,V) (device array). On the CPU a prompt that several rows
// repeat (a group's responses) goes through the model once, with the same numbers.
void model_prefill(Model *m, const int *tokens, const int *lengths, int B, int T, float *logits);
// (The backend's paths.share_prompts; 0 runs every row through the model, repeated prompts
// included.)
// The decode's products: where kn_decode_matmul is rows-free (kn_decode_rows_free: on the
// CPU, its own products give OpenBLAS's numbers) for every product shape of the model (checked
// when the model is made)
// and a generation starts with MODEL_DECODE_OWN_MIN_ROWS rows or more, model_prefill packs
// the weights and the decode steps run on them. From that many rows OpenBLAS's products
// round each row as a larger product does (docs/kernels.md "Determinism"), so no number of
// such a generation changes, and its later steps, whatever their rows, keep those numbers.
#define MODEL_DECODE_OWN_MIN_ROWS 32
// 1 if the current generation decodes with the own products: a decode step's rows then have
// the same numbers however many rows the batch has.
int model_decode_rows_free(const Model *m);
// Appends one token per sequence of the last prefill's batch B (host array (B); active (B)
// host flags or NULL for all: inactive sequences are left untouched and their logits rows
// are meaningless) at the sequence's next position and writes the next-token logits (B,V)
// (device). A sequence must not grow past max_seq_len.
void model_decode_step(Model *m, const int *tokens, const int *active, float *logits);
// Makes the decode batch B rows: row j becomes the sequence of cache row keep[j] (keep
// ascending, keep[j] >= j, n_keep <= B <= the cache's rows), its cache and length moved
// down; rows n_keep..B-1 are empty (decode them as inactive). The following steps cost B
// rows, not the prefill's. Rows past the batch keep their cache and length until a step or
// a move writes them, so a caller may set rows aside beyond a smaller batch and bring them
// back later (the sampler's split).
void model_decode_compact(Model *m, const int *keep, int n_keep, int B);
// Current length of sequence b in the cache.
int model_kv_len(const Model *m, int b);
// The cache's bytes for one position of one sequence: K and V of every layer.
size_t model_kv_position_bytes(const Model *m);

// ---- several passes at once (CPU)
// n models (n <= MODEL_MAX_VIEWS) that read m's parameters, each with its own activations,
// KV cache and CPU backend, and with_grads its own gradients, so that n threads can decode
// (sampler_generate) or run forward and backward passes (update.c) at once, one each. Made
// on the first call that asks for them and kept with m (model_free frees them). They read
// m's parameters in place, so they see every update of m; they have no optimizer state
// (model_add_grads brings their gradients to m). CPU backend only.
#define MODEL_MAX_VIEWS 64
Model **model_views(Model *m, int n, int with_grads);
// How many threads can each run a view of m at once for `most` pieces of work: the OpenMP
// threads, at most `most` and MODEL_MAX_VIEWS; 1 off the CPU and inside a parallel region.
int model_view_threads(const Model *m, int most);
// m's gradients += src's (elementwise, the same order on any thread count).
void model_add_grads(Model *m, const Model *src);

#endif
