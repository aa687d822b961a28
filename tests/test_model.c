// test_model.c: the transformer as a whole: finite-difference gradient check of every
// parameter tensor, KV-cache decoding against the full forward, and memorisation.
#include <math.h>
#include <string.h>

#include "common.h"
#include "sim/model/model.h"
#include "test_util.h"

static Backend *bk;

static int setup(void **state) {
    char err[256];
    bk = backend_create(BACKEND_CPU, err, sizeof err);
    return bk ? 0 : -1;
}
static int teardown(void **state) {
    backend_destroy(bk);
    return 0;
}

static ModelConfig tiny_config(int tied) {
    ModelConfig c = model_config_default();
    c.vocab_size = 11;
    c.d_model = 12;
    c.n_layers = 2;
    c.n_heads = 3;
    c.n_kv_heads = 1;
    c.d_ff = 10;
    c.max_seq_len = 16;
    c.tied_embeddings = tied;
    return c;
}

// A batch with padding and a single-token sequence.
enum { GB = 3, GT = 7 };
static const int g_lengths[GB] = {5, 1, 7};

static void make_batch(int *tokens, int *targets, int V, uint64_t seed) {
    for (int b = 0; b < GB; b++)
        for (int t = 0; t < GT; t++) {
            int i = b * GT + t;
            tokens[i] = (int)(philox_uniform(seed, (uint64_t)i) * V) % V;
            // every real position has a target except one, to test "no target"
            targets[i] = (t < g_lengths[b] && !(b == 2 && t == 3))
                             ? (int)(philox_uniform(seed + 1, (uint64_t)i) * V) % V
                             : -1;
        }
}

// L = sum_n wl[n] * logp[n] + we[n] * entropy[n], in double from the downloaded outputs.
static double loss_of(Model *m, const int *tokens, const int *targets, const float *wl,
                      const float *we) {
    model_forward(m, tokens, targets, g_lengths, GB, GT);
    float logp[GB * GT], ent[GB * GT];
    bk_download(bk, logp, model_logp(m), sizeof logp);
    bk_download(bk, ent, model_entropy(m), sizeof ent);
    double L = 0;
    for (int i = 0; i < GB * GT; i++) L += (double)wl[i] * logp[i] + (double)we[i] * ent[i];
    return L;
}

static void gradcheck(int tied) {
    ModelConfig c = tiny_config(tied);
    Model *m = model_create(bk, &c);
    model_init_params(m, 7);
    // larger weights than the default init make gradients large against float rounding
    size_t P = model_num_params(m);
    float *params = model_params(m);
    for (size_t i = 0; i < P; i++) params[i] *= 3.0f;
    int tokens[GB * GT], targets[GB * GT];
    float wl[GB * GT], we[GB * GT];
    make_batch(tokens, targets, c.vocab_size, 99);
    tu_fill_uniform(wl, GB * GT, 5, -1.0f, 1.0f);
    tu_fill_uniform(we, GB * GT, 6, -0.5f, 0.5f);
    for (int i = 0; i < GB * GT; i++)
        if (targets[i] < 0) wl[i] = we[i] = 0;  // entropy/logp at padding are 0 anyway

    model_forward(m, tokens, targets, g_lengths, GB, GT);
    model_zero_grad(m);
    float *dl = bk_alloc(bk, sizeof wl), *de = bk_alloc(bk, sizeof we);
    bk_upload(bk, dl, wl, sizeof wl);
    bk_upload(bk, de, we, sizeof we);
    model_backward(m, dl, de);
    const float *grads = model_grads(m);

    // central differences on every element of every tensor (the model is tiny)
    const float h = 1e-2f;
    double worst = 0;
    for (int ti = 0; ti < model_num_tensors(m); ti++) {
        const ParamTensor *t = model_tensor(m, ti);
        double *num = xmalloc(t->numel * sizeof(double)), *ana = xmalloc(t->numel * sizeof(double));
        for (size_t j = 0; j < t->numel; j++) {
            float *p = &params[t->offset + j];
            float saved = *p;
            *p = saved + h;
            double lp = loss_of(m, tokens, targets, wl, we);
            *p = saved - h;
            double lm = loss_of(m, tokens, targets, wl, we);
            *p = saved;
            num[j] = (lp - lm) / (2.0 * h);
            ana[j] = grads[t->offset + j];
        }
        double e = tu_rel_err_d(ana, num, t->numel);
        char what[96];
        snprintf(what, sizeof what, "%s model: d %s", tied ? "tied" : "untied", t->name);
        tu_check_rel(what, e, 1e-2);
        if (e > worst) worst = e;
        free(num);
        free(ana);
    }
    printf("  worst relative error over all tensors: %.3e\n", worst);
    bk_free(bk, dl);
    bk_free(bk, de);
    model_free(m);
}

static void test_gradcheck_tied(void **state) { gradcheck(1); }
static void test_gradcheck_untied(void **state) { gradcheck(0); }

// Log-softmax of every vocabulary entry at position pos of each sequence, from the full forward.
static void full_forward_logprobs(Model *m, const int *seqs, const int *lens, int B, int T,
                                  double *out /* (B,V) */) {
    int V = model_config(m)->vocab_size;
    int *targets = xmalloc((size_t)B * T * sizeof(int));
    float *logp = xmalloc((size_t)B * T * sizeof(float));
    for (int v = 0; v < V; v++) {
        for (int i = 0; i < B * T; i++) targets[i] = -1;
        for (int b = 0; b < B; b++) targets[b * T + lens[b] - 1] = v;
        model_forward(m, seqs, targets, lens, B, T);
        bk_download(bk, logp, model_logp(m), (size_t)B * T * sizeof(float));
        for (int b = 0; b < B; b++) out[b * V + v] = logp[b * T + lens[b] - 1];
    }
    free(targets);
    free(logp);
}

static void logits_to_logprobs(const float *logits, int B, int V, double *out) {
    for (int b = 0; b < B; b++) {
        double mx = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, logits[b * V + v]);
        for (int v = 0; v < V; v++) s += exp(logits[b * V + v] - mx);
        for (int v = 0; v < V; v++) out[b * V + v] = logits[b * V + v] - mx - log(s);
    }
}

static void test_kv_cache_matches_forward(void **state) {
    ModelConfig c = tiny_config(0);
    c.max_seq_len = 24;
    Model *m = model_create(bk, &c);
    model_init_params(m, 3);
    float *params = model_params(m);
    for (size_t i = 0; i < model_num_params(m); i++) params[i] *= 10.0f;
    enum { B = 4, STEPS = 9 };
    const int V = c.vocab_size, Tmax = c.max_seq_len;
    int plen[B] = {3, 6, 1, 5};
    int seqs[B * 24], lens[B];
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < Tmax; t++) seqs[b * Tmax + t] = (b * 7 + t * 3 + 1) % V;
        lens[b] = plen[b];
    }
    model_kv_alloc(m, B);
    float *d_logits = bk_alloc(bk, (size_t)B * V * sizeof(float));
    float logits[B * 11];
    double dec[B * 11], ref[B * 11];
    int prompt_T = 6;
    int prompts[B * 6];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < prompt_T; t++) prompts[b * prompt_T + t] = seqs[b * Tmax + t];
    model_prefill(m, prompts, plen, B, prompt_T, d_logits);
    double worst = 0;
    int active[B] = {1, 1, 1, 1};  // after the prefill every row's logits are live
    for (int step = 0; step <= STEPS; step++) {
        bk_download(bk, logits, d_logits, sizeof logits);
        logits_to_logprobs(logits, B, V, dec);
        full_forward_logprobs(m, seqs, lens, B, Tmax, ref);
        for (int b = 0; b < B; b++) {
            if (!active[b]) continue;  // a paused row's logits are not defined
            double e = tu_rel_err_d(dec + b * V, ref + b * V, (size_t)V);
            if (e > worst) worst = e;
            assert_true(e < 1e-5);
        }
        if (step == STEPS) break;
        // feed each sequence its next token; row 2 pauses every third step
        int next[B];
        for (int b = 0; b < B; b++) {
            active[b] = !(b == 2 && step % 3 == 1);
            next[b] = seqs[b * Tmax + lens[b]];
            if (active[b]) lens[b]++;
        }
        model_decode_step(m, next, active, d_logits);
        for (int b = 0; b < B; b++) assert_int_equal(model_kv_len(m, b), lens[b]);
    }
    tu_check_rel("KV-cache decoding vs full forward (worst step)", worst, 1e-5);
    bk_free(bk, d_logits);
    model_free(m);
}

// A tiny corpus of 4 sequences, memorised by next-token cross-entropy.
static void test_memorisation(void **state) {
    ModelConfig c = model_config_default();
    c.vocab_size = 16;
    c.d_model = 32;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.d_ff = 64;
    c.max_seq_len = 32;
    Model *m = model_create(bk, &c);
    model_init_params(m, 11);
    enum { B = 4, T = 20 };
    int tokens[B * T], targets[B * T], lengths[B] = {20, 17, 12, 20};
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) tokens[b * T + t] = (int)(philox_uniform(1000 + b, t) * 16) % 16;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            targets[b * T + t] = t + 1 < lengths[b] ? tokens[b * T + t + 1] : -1;
    AdamWConfig opt = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                       .weight_decay = 0.0f, .grad_clip = 1.0f};
    float first = 0, loss = 0;
    for (int step = 0; step < 150; step++) {
        model_forward(m, tokens, targets, lengths, B, T);
        model_zero_grad(m);
        loss = model_cross_entropy_step(m, 1, 0);
        if (step == 0) first = loss;
        model_adamw_step(m, &opt);
    }
    model_forward(m, tokens, targets, lengths, B, T);
    loss = model_cross_entropy_step(m, 0, 0);
    printf("  memorisation: cross-entropy %.4f -> %.4f after 150 AdamW steps (bound 0.05; "
           "uniform is ln 16 = %.3f)\n", first, loss, log(16.0));
    assert_true(first > 2.0f);
    assert_true(loss < 0.05f);
    model_free(m);
}

static void test_config_validation(void **state) {
    char err[256];
    ModelConfig c = model_config_default();
    assert_int_equal(model_config_validate(&c, err, sizeof err), 0);
    c.n_kv_heads = 3;
    assert_int_equal(model_config_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "model.n_kv_heads = 3"));
    c = model_config_default();
    c.d_model = 66;  // 66/4 not an integer
    assert_int_equal(model_config_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "model.d_model = 66"));
    c = model_config_default();
    c.d_model = 12;
    c.n_heads = 4;  // head size 3: odd
    c.n_kv_heads = 4;
    assert_int_equal(model_config_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "even"));
}

static void test_tensor_table(void **state) {
    ModelConfig c = tiny_config(0);
    Model *m = model_create(bk, &c);
    int i = model_find_tensor(m, "layers.1.attn.wk");
    assert_true(i >= 0);
    const ParamTensor *t = model_tensor(m, i);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], c.n_kv_heads * (c.d_model / c.n_heads));
    assert_int_equal(t->shape[1], c.d_model);
    assert_true(model_find_tensor(m, "output") >= 0);
    size_t total = 0;
    for (int k = 0; k < model_num_tensors(m); k++) {
        assert_int_equal(model_tensor(m, k)->offset, total);
        total += model_tensor(m, k)->numel;
    }
    assert_int_equal(total, model_num_params(m));
    model_free(m);
    c.tied_embeddings = 1;
    m = model_create(bk, &c);
    assert_int_equal(model_find_tensor(m, "output"), -1);
    model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_validation),
        cmocka_unit_test(test_tensor_table),
        cmocka_unit_test(test_gradcheck_tied),
        cmocka_unit_test(test_gradcheck_untied),
        cmocka_unit_test(test_kv_cache_matches_forward),
        cmocka_unit_test(test_memorisation),
    };
    return cmocka_run_group_tests_name("model", tests, setup, teardown);
}
