// sampler.h: batched autoregressive generation with the model's KV cache.
// Temperature, top-p, a budget of new tokens, stop at EOS or the template's stop token.
// Records each generated token's log-prob under the sampling policy (kn_sample's
// definition: the full softmax at that temperature), which PPO's ratio uses as pi_old.
// Reproducible: the draw for token t of sequence `id` uses counter (id << 24) | t under
// the seed, so a sequence's sample does not depend on the batch it was generated in.
// An environment (SamplerConfig.env) may write tokens into a response, like a tool's
// output: they take no draw, are marked in Generation.env, and the trainer gives them no
// gradient.
#ifndef GRPOLAB_SAMPLER_H
#define GRPOLAB_SAMPLER_H

#include <stdint.h>

#include "model.h"

// an environment that writes tokens into a response (see SamplerConfig.env)
typedef int (*SamplerEnvFn)(const int *tokens, int len, int *out, int cap);

typedef struct {
    float temperature;   // 0 = greedy
    float top_p;         // (0, 1]
    int max_new_tokens;  // budget; a response that reaches it without a stop is truncated
    int eos_token;       // always stops
    int stop_token;      // also stops (e.g. "</answer>"); -1: none
    uint64_t seed;
    // The environment's part of a response; NULL: the policy writes every token. After each
    // token the policy writes, env(tokens, len, out, cap) is called with the response so far
    // (len tokens, that token last); it returns k in [0, cap] and the k tokens in out that
    // the environment writes next, one per step, before the policy writes again. They count
    // towards the budget, and their logp is the policy's log-prob of them (kn_sample's
    // definition). Example: template_env_verdict (template.h).
    SamplerEnvFn env;
    // 1: decode every row of the batch to the end, stopped sequences included (the reference
    // of the batch compaction; see sampler_generate). 0 (the default): compact.
    int no_compact;
    // CPU: the KV cache bytes a decode batch may read per step (its running rows' cache)
    // before it runs on as two halves, one after the other, each at least SAMPLER_MIN_ROWS
    // rows (SAMPLER_MIN_SPLIT_ROWS with the model's own decode products); 0: never.
    // Responses do not depend on it (run.decode_cache_mib).
    size_t split_bytes;
} SamplerConfig;

// sampler_generate's batch is not compacted below this many rows, nor split into halves
// of fewer, where its products are OpenBLAS's (model_decode_rows_free)
#define SAMPLER_MIN_ROWS 32
// the least rows of a split's half with the model's own decode products, whose numbers do
// not depend on the rows: fewer would read the weights for too few rows
#define SAMPLER_MIN_SPLIT_ROWS 16

// the most tokens an environment writes at once
#define SAMPLER_ENV_MAX 8

typedef struct {
    int n, max_new;  // sequences, budget (row stride of tokens/logp)
    int *length;     // (n) generated tokens, the stop token included
    int *stopped;    // (n) 1 if ended by eos/stop token, 0 if the budget ran out (truncated)
    int *tokens;     // (n, max_new) generated ids
    float *logp;     // (n, max_new) sampling log-probs
    unsigned char *env;  // (n, max_new) 1 where the environment wrote the token, else 0
    long decode_rows;    // rows the decode steps ran, summed over the steps (the work done)
    int splits;          // decode batches split in two (SamplerConfig.split_bytes)
} Generation;

void generation_alloc(Generation *g, int n, int max_new);
void generation_free(Generation *g);

// Generates one response for each of n prompts (prompts (n, T) right-padded, lengths
// prompt_len (n)); seq_id0 + i names sequence i's random stream. The decode batch shrinks
// as sequences stop (SamplerConfig.no_compact). Prompt length + budget
// must fit model.max_seq_len (dies with both numbers otherwise: check with sampler_fits).
void sampler_generate(Model *m, const SamplerConfig *sc, const int *prompts, const int *prompt_len,
                      int n, int T, uint64_t seq_id0, Generation *out);
// 0 if a prompt of prompt_len tokens plus the budget fits the model, else -1 with a message.
int sampler_fits(const Model *m, const SamplerConfig *sc, int prompt_len, char *err, size_t errlen);

#endif
