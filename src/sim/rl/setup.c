#include "setup.h"

#include <omp.h>
#include <stddef.h>
#include <string.h>

#include "../../common.h"
#include "../world/template.h"

// OpenBLAS's thread control (declared in its cblas.h; repeated here to keep cblas.h out).
void openblas_set_num_threads(int num_threads);

int setup_model_config(const Config *c, ModelConfig *m, char *err, size_t errlen) {
    m->vocab_size = (int)config_int(c, "model.vocab_size");
    m->d_model = (int)config_int(c, "model.d_model");
    m->n_layers = (int)config_int(c, "model.n_layers");
    m->n_heads = (int)config_int(c, "model.n_heads");
    m->n_kv_heads = (int)config_int(c, "model.n_kv_heads");
    m->d_ff = (int)config_int(c, "model.d_ff");
    m->max_seq_len = (int)config_int(c, "model.max_seq_len");
    m->tied_embeddings = config_bool(c, "model.tied_embeddings");
    m->rope_theta = (float)config_float(c, "model.rope_theta");
    m->norm_eps = (float)config_float(c, "model.norm_eps");
    return model_config_validate(m, err, errlen);
}

AdamWConfig setup_adamw(const Config *c) {
    AdamWConfig o = {.lr = (float)config_float(c, "optim.lr"),
                     .beta1 = (float)config_float(c, "optim.beta1"),
                     .beta2 = (float)config_float(c, "optim.beta2"),
                     .eps = (float)config_float(c, "optim.eps"),
                     .weight_decay = (float)config_float(c, "optim.weight_decay"),
                     .grad_clip = (float)config_float(c, "optim.grad_clip")};
    return o;
}

Backend *setup_backend(const Config *c, const char *override, int verbose, char *err,
                       size_t errlen) {
    int threads = (int)config_int(c, "run.threads");
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    }
    const char *want = override ? override : config_str(c, "run.backend");
    BackendKind kind;
    char why[256] = "";
    if (strcmp(want, "auto") == 0) {
        kind = backend_cuda_available(why, sizeof why) ? BACKEND_CUDA : BACKEND_CPU;
        if (verbose)
            fprintf(stderr, "grpolab: backend auto -> %s%s%s%s\n", backend_name(kind),
                    kind == BACKEND_CPU ? " (" : "", kind == BACKEND_CPU ? why : "",
                    kind == BACKEND_CPU ? ")" : "");
    } else if (backend_parse(want, &kind) != 0) {
        set_err(err, errlen, "backend '%s': not one of auto|cpu|cuda", want);
        return NULL;
    }
    Backend *b = backend_create(kind, err, errlen);
    if (b && kind == BACKEND_CUDA) b->use_tf32 = config_bool(c, "run.tf32");
    return b;
}

int setup_corpus_params(const Config *c, CorpusParams *p, char *err, size_t errlen) {
    *p = corpus_params_default();
    static const struct {
        const char *key;
        size_t offset;
    } knobs[] = {
#define KNOB(name, field) {"corpus." name, offsetof(CorpusParams, field)}
        KNOB("p_template_r1", p_template_r1),       KNOB("p_template_boxed", p_template_boxed),
        KNOB("p_r1_off_format", p_r1_off_format),   KNOB("p_restate", p_restate),
        KNOB("p_check_step", p_check_step),         KNOB("p_check_step_r1", p_check_step_r1),
        KNOB("p_error_level1", p_error_by_level[0]), KNOB("p_error_level2", p_error_by_level[1]),
        KNOB("p_error_level3", p_error_by_level[2]), KNOB("p_error_level4", p_error_by_level[3]),
        KNOB("p_error_level5", p_error_by_level[4]), KNOB("error_hard_factor", error_hard_factor),
        KNOB("error_easy_factor", error_easy_factor), KNOB("p_check_miss", p_check_miss),
        KNOB("p_false_alarm", p_false_alarm),       KNOB("p_recover", p_recover),
        KNOB("p_loop", p_loop),                     KNOB("p_give_up", p_give_up),
        KNOB("loop_continue_p", loop_continue_p),   KNOB("p_loop_restart", p_loop_restart),
        KNOB("weight_level1", level_weights[0]),    KNOB("weight_level2", level_weights[1]),
        KNOB("weight_level3", level_weights[2]),    KNOB("weight_level4", level_weights[3]),
        KNOB("weight_level5", level_weights[4]),    KNOB("p_loop_repeat", p_loop_repeat),
        KNOB("p_loop_give_up", p_loop_give_up),     KNOB("p_recheck", p_recheck),
        KNOB("gap_share", gap_share),               KNOB("p_gap_right", p_gap_right),
        KNOB("p_gap_doubt", p_gap_doubt),           KNOB("loop_continue_spread", loop_continue_spread),
        KNOB("check_add_factor", check_add_factor), KNOB("general_share", general_share),
        KNOB("qa_share", qa_share),
#undef KNOB
    };
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
        *(double *)((char *)p + knobs[i].offset) = config_float(c, knobs[i].key);
    p->max_doc_tokens = (int)config_int(c, "corpus.max_doc_tokens");
    p->loop_min_cycles = (int)config_int(c, "corpus.loop_min_cycles");
    p->loop_max_cycles = (int)config_int(c, "corpus.loop_max_cycles");
    p->check_by_fact = config_bool(c, "corpus.check_by_fact");
    p->gap_seed = (uint64_t)config_int(c, "world.seed");  // the gap table is the world's
    int max_len = (int)config_int(c, "model.max_seq_len");
    if (p->max_doc_tokens > max_len)
        return set_err(err, errlen, "corpus.max_doc_tokens = %d: more than model.max_seq_len = %d",
                       p->max_doc_tokens, max_len);
    return corpus_params_validate(p, err, errlen);
}

RewardRule setup_reward_rule(const Config *c) {
    RewardRule r = REWARD_OUTCOME;
    reward_rule_parse(config_str(c, "world.reward_rule"), &r);  // the schema allows only these
    return r;
}

size_t setup_split_bytes(const Config *c) { return (size_t)config_int(c, "run.decode_cache_mib") << 20; }

SamplerEnvFn setup_sampler_env(const Config *c) {
    return strcmp(config_str(c, "world.check_verdict"), "environment") == 0 ? template_env_verdict
                                                                           : NULL;
}
