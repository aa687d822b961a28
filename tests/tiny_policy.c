// tiny_policy.c: the trainer tests' policy model (tiny_policy.h).
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "tiny_policy.h"

#include "sim/model/checkpoint.h"
#include "sim/world/template.h"
#include "sim/world/tokenizer.h"
#include "sim/world/world.h"

enum { TINY_T = 96 };

ModelConfig tiny_policy_config(void) {
    ModelConfig mc = model_config_default();
    mc.vocab_size = tok_vocab_size(tokenizer_default());
    mc.d_model = 32;
    mc.n_layers = 1;
    mc.n_heads = 2;
    mc.n_kv_heads = 1;
    mc.d_ff = 64;
    mc.max_seq_len = TINY_T;
    return mc;
}

void tiny_policy_sequence(uint64_t seed, int64_t index, int *seq, int *plen, int *len) {
    const Tokenizer *tk = tokenizer_default();
    double w[5] = {1, 1, 1, 1, 1};
    Task t;
    char text[512], err[256];
    world_train_task_mix(seed, index, w, &t);
    int n = template_prompt(TEMPLATE_R1, &t, text, sizeof text);
    assert_true(n > 0);
    *plen = tok_encode(tk, text, seq, TINY_T, err, sizeof err);
    snprintf(text, sizeof text, " </think> <answer> %lld </answer>", (long long)t.answer);
    int r = tok_encode(tk, text, seq + *plen, TINY_T - *plen, err, sizeof err);
    assert_true(*plen > 0 && r > 0);
    *len = *plen + r;
}

int tiny_policy_save(const char *path, uint64_t seed, int n_questions) {
    const int NQ = n_questions, T = TINY_T;
    char err[512];
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    ModelConfig mc = tiny_policy_config();
    Model *m = model_create(bk, &mc);
    model_init_params(m, 5);
    // cross-entropy on the responses of the questions
    int *seq = malloc((size_t)NQ * T * sizeof(int)), *plen = malloc((size_t)NQ * sizeof(int));
    int *len = malloc((size_t)NQ * sizeof(int)), *lengths = malloc((size_t)NQ * sizeof(int));
    int *tokens = malloc((size_t)NQ * T * sizeof(int)), *targets = malloc((size_t)NQ * T * sizeof(int));
    int maxlen = 0;
    for (int q = 0; q < NQ; q++) {
        tiny_policy_sequence(seed, q, seq + (size_t)q * T, &plen[q], &len[q]);
        if (len[q] - 1 > maxlen) maxlen = len[q] - 1;
    }
    for (int q = 0; q < NQ; q++) {
        const int *sq = seq + (size_t)q * T;
        lengths[q] = len[q] - 1;
        for (int t = 0; t < maxlen; t++) {
            tokens[q * maxlen + t] = t < len[q] - 1 ? sq[t] : 0;
            targets[q * maxlen + t] = t + 1 >= plen[q] && t + 1 < len[q] ? sq[t + 1] : -1;
        }
    }
    AdamWConfig opt = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_clip = 1.0f};
    int s;
    double seq_logp = -1e9;
    for (s = 0; s < 2000; s++) {
        model_forward(m, tokens, targets, lengths, NQ, maxlen);
        model_zero_grad(m);
        float loss = model_cross_entropy_step(m, 1, 0);
        // mean log-probability of a whole response
        seq_logp = -(double)loss * (double)model_num_targets(m) / NQ;
        if (seq_logp > -0.7) break;
        model_adamw_step(m, &opt);
    }
    printf("  fixture: %d fine-tuning steps, mean response log-prob %.3f\n", s, seq_logp);
    int ok = checkpoint_save(path, m, NULL, err, sizeof err) == 0;
    free(seq);
    free(plen);
    free(len);
    free(lengths);
    free(tokens);
    free(targets);
    model_free(m);
    backend_destroy(bk);
    return ok ? 0 : -1;
}
