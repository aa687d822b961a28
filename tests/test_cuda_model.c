// test_cuda_model.c: the whole model on the CUDA backend against the CPU backend:
// forward log-probs and entropies, every parameter gradient, one AdamW step, and KV-cache
// decoding with sampling. Skips with a message where CUDA is not built or no GPU is usable.
#include <math.h>
#include <string.h>

#include "common.h"
#include "sim/model/model.h"
#include "sim/model/sampler.h"
#include "test_util.h"

static Backend *cpu, *gpu;
static char why[256];

static int setup(void **state) {
    char err[256];
    cpu = backend_create(BACKEND_CPU, err, sizeof err);
    if (backend_cuda_available(why, sizeof why)) gpu = backend_create(BACKEND_CUDA, err, sizeof err);
    else printf("no usable CUDA backend (%s): skipping the model parity tests\n", why);
    return cpu ? 0 : -1;
}
static int teardown(void **state) {
    backend_destroy(cpu);
    if (gpu) backend_destroy(gpu);
    return 0;
}

static ModelConfig parity_config(void) {
    ModelConfig c = model_config_default();
    c.vocab_size = 37;
    c.d_model = 48;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.d_ff = 100;
    c.max_seq_len = 64;
    c.tied_embeddings = 0;
    return c;
}

static void download_all(Model *m, float *dst, const float *src) {
    bk_download(model_backend(m), dst, src, model_num_params(m) * sizeof(float));
}

static void test_forward_backward_step(void **state) {
    if (!gpu) skip();
    ModelConfig c = parity_config();
    Model *mc = model_create(cpu, &c), *mg = model_create(gpu, &c);
    model_init_params(mc, 21);
    model_copy_params(mg, mc);
    enum { B = 5, T = 23 };
    int tokens[B * T], targets[B * T], lengths[B] = {23, 1, 17, 9, 20};
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (int)(philox_uniform(1, i) * c.vocab_size) % c.vocab_size;
        targets[i] = (int)(philox_uniform(2, i) * c.vocab_size) % c.vocab_size;
    }
    float wl[B * T], we[B * T], lc[B * T], lg[B * T], ec[B * T], eg[B * T];
    tu_fill_uniform(wl, B * T, 3, -1, 1);
    tu_fill_uniform(we, B * T, 4, -0.2f, 0.2f);
    model_forward(mc, tokens, targets, lengths, B, T);
    model_forward(mg, tokens, targets, lengths, B, T);
    bk_download(cpu, lc, model_logp(mc), sizeof lc);
    bk_download(gpu, lg, model_logp(mg), sizeof lg);
    bk_download(cpu, ec, model_entropy(mc), sizeof ec);
    bk_download(gpu, eg, model_entropy(mg), sizeof eg);
    tu_check_rel("model forward logp (cuda vs cpu)", tu_rel_err(lg, lc, B * T), 1e-5);
    tu_check_rel("model forward entropy (cuda vs cpu)", tu_rel_err(eg, ec, B * T), 1e-5);

    float *dlc = bk_alloc(cpu, sizeof wl), *dec = bk_alloc(cpu, sizeof we);
    float *dlg = bk_alloc(gpu, sizeof wl), *deg = bk_alloc(gpu, sizeof we);
    bk_upload(cpu, dlc, wl, sizeof wl);
    bk_upload(cpu, dec, we, sizeof we);
    bk_upload(gpu, dlg, wl, sizeof wl);
    bk_upload(gpu, deg, we, sizeof we);
    model_zero_grad(mc);
    model_zero_grad(mg);
    model_backward(mc, dlc, dec);
    model_backward(mg, dlg, deg);
    size_t P = model_num_params(mc);
    float *gc = xmalloc(P * sizeof(float)), *gg = xmalloc(P * sizeof(float));
    download_all(mc, gc, model_grads(mc));
    download_all(mg, gg, model_grads(mg));
    for (int i = 0; i < model_num_tensors(mc); i++) {
        const ParamTensor *t = model_tensor(mc, i);
        char what[96];
        snprintf(what, sizeof what, "grad %s", t->name);
        tu_check_rel(what, tu_rel_err(gg + t->offset, gc + t->offset, t->numel), 2e-5);
    }
    // eps 1e-4, as in test_cuda_train: the first AdamW step moves an element by about
    // lr * g / (|g| + eps), and at eps 1e-8 the elements with |g| near 1e-8 (whose relative
    // error between backends is large) move by up to lr differently, past the tolerance
    // while every gradient is within it (docs/notebook/2026-12-04-gpu-check-h200.md).
    AdamWConfig opt = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-4f,
                       .weight_decay = 0.01f, .grad_clip = 0.5f};
    double nc = model_adamw_step(mc, &opt), ng = model_adamw_step(mg, &opt);
    printf("  grad norm cpu %.9g cuda %.9g\n", nc, ng);
    assert_true(fabs(nc - ng) <= 1e-5 * nc);
    download_all(mc, gc, model_params(mc));
    download_all(mg, gg, model_params(mg));
    tu_check_rel("parameters after one AdamW step", tu_rel_err(gg, gc, P), 1e-6);
    free(gc);
    free(gg);
    bk_free(cpu, dlc);
    bk_free(cpu, dec);
    bk_free(gpu, dlg);
    bk_free(gpu, deg);
    model_free(mc);
    model_free(mg);
}

static void test_generation(void **state) {
    if (!gpu) skip();
    ModelConfig c = parity_config();
    Model *mc = model_create(cpu, &c), *mg = model_create(gpu, &c);
    model_init_params(mc, 8);
    model_copy_params(mg, mc);
    enum { N = 6, TP = 7, BUDGET = 24 };
    int prompts[N * TP], plen[N] = {7, 3, 1, 5, 7, 2};
    for (int i = 0; i < N * TP; i++) prompts[i] = 2 + (i * 7) % (c.vocab_size - 2);
    SamplerConfig sc = {.temperature = 1.0f, .top_p = 0.95f, .max_new_tokens = BUDGET,
                        .eos_token = 1, .stop_token = 5, .seed = 77};
    Generation gc, gg;
    generation_alloc(&gc, N, BUDGET);
    generation_alloc(&gg, N, BUDGET);
    sampler_generate(mc, &sc, prompts, plen, N, TP, 0, &gc);
    sampler_generate(mg, &sc, prompts, plen, N, TP, 0, &gg);
    int same = 1;
    double worst = 0;
    for (int i = 0; i < N; i++) {
        same &= gc.length[i] == gg.length[i];
        for (int t = 0; t < gc.length[i] && t < gg.length[i]; t++) {
            same &= gc.tokens[i * BUDGET + t] == gg.tokens[i * BUDGET + t];
            double e = fabs(gc.logp[i * BUDGET + t] - gg.logp[i * BUDGET + t]);
            if (e > worst) worst = e;
        }
    }
    printf("  generation: identical tokens %s, worst |logp difference| %.3e\n", same ? "yes" : "NO",
           worst);
    assert_true(same);
    assert_true(worst < 1e-4);
    generation_free(&gc);
    generation_free(&gg);
    model_free(mc);
    model_free(mg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_backward_step),
        cmocka_unit_test(test_generation),
    };
    return cmocka_run_group_tests_name("cuda_model", tests, setup, teardown);
}
