#include "setup.h"

#include <omp.h>
#include <stddef.h>
#include <string.h>

#include "../../common.h"
#include "../model/checkpoint.h"
#include "../world/template.h"
#include "../world/tokenizer.h"

// OpenBLAS's thread control (declared in its cblas.h; repeated here to keep cblas.h out).
void openblas_set_num_threads(int num_threads);

int setup_model_config(const Config *c, ModelConfig *m, char *err, size_t errlen) {
    const Settings *S = config_settings(c);
    m->vocab_size = S->model.vocab_size;
    m->d_model = S->model.d_model;
    m->n_layers = S->model.n_layers;
    m->n_heads = S->model.n_heads;
    m->n_kv_heads = S->model.n_kv_heads;
    m->d_ff = S->model.d_ff;
    m->max_seq_len = S->model.max_seq_len;
    m->tied_embeddings = S->model.tied_embeddings;
    m->rope_theta = (float)S->model.rope_theta;
    m->norm_eps = (float)S->model.norm_eps;
    return model_config_validate(m, err, errlen);
}

AdamWConfig setup_adamw(const Config *c) {
    const Settings *S = config_settings(c);
    AdamWConfig o = {.lr = (float)S->optim.lr,
                     .beta1 = (float)S->optim.beta1,
                     .beta2 = (float)S->optim.beta2,
                     .eps = (float)S->optim.eps,
                     .weight_decay = (float)S->optim.weight_decay,
                     .grad_clip = (float)S->optim.grad_clip};
    return o;
}

Backend *setup_backend(const Config *c, const char *override, int verbose, char *err,
                       size_t errlen) {
    const Settings *S = config_settings(c);
    int threads = S->run.threads;
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    }
    const char *want = override ? override : S->run.backend;
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
    if (b && kind == BACKEND_CUDA) b->use_tf32 = S->run.tf32;
    return b;
}

int setup_corpus_params(const Config *c, CorpusParams *p, char *err, size_t errlen) {
    *p = corpus_params_default();
    const Settings *S = config_settings(c);
    p->p_template_r1 = S->corpus.p_template_r1;
    p->p_template_boxed = S->corpus.p_template_boxed;
    p->p_r1_off_format = S->corpus.p_r1_off_format;
    p->p_restate = S->corpus.p_restate;
    p->p_check_step = S->corpus.p_check_step;
    p->p_check_step_r1 = S->corpus.p_check_step_r1;
    p->check_add_factor = S->corpus.check_add_factor;
    p->check_by_fact = S->corpus.check_by_fact;
    const double p_error[] = {S->corpus.p_error_level1, S->corpus.p_error_level2, S->corpus.p_error_level3,
                              S->corpus.p_error_level4, S->corpus.p_error_level5};
    const double weight[] = {S->corpus.weight_level1, S->corpus.weight_level2, S->corpus.weight_level3,
                             S->corpus.weight_level4, S->corpus.weight_level5};
    for (int l = 0; l < WORLD_NUM_LEVELS; l++) {
        p->p_error_by_level[l] = p_error[l];
        p->level_weights[l] = weight[l];
    }
    p->error_hard_factor = S->corpus.error_hard_factor;
    p->error_easy_factor = S->corpus.error_easy_factor;
    p->p_check_miss = S->corpus.p_check_miss;
    p->p_false_alarm = S->corpus.p_false_alarm;
    p->p_recover = S->corpus.p_recover;
    p->p_loop = S->corpus.p_loop;
    p->p_give_up = S->corpus.p_give_up;
    p->loop_continue_p = S->corpus.loop_continue_p;
    p->loop_continue_spread = S->corpus.loop_continue_spread;
    p->p_loop_restart = S->corpus.p_loop_restart;
    p->loop_min_cycles = S->corpus.loop_min_cycles;
    p->loop_max_cycles = S->corpus.loop_max_cycles;
    p->p_loop_repeat = S->corpus.p_loop_repeat;
    p->p_loop_give_up = S->corpus.p_loop_give_up;
    p->p_recheck = S->corpus.p_recheck;
    p->gap_share = S->corpus.gap_share;
    p->p_gap_right = S->corpus.p_gap_right;
    p->p_gap_doubt = S->corpus.p_gap_doubt;
    p->general_share = S->corpus.general_share;
    p->qa_share = S->corpus.qa_share;
    p->max_doc_tokens = S->corpus.max_doc_tokens;
    p->gap_seed = (uint64_t)S->world.seed;  // the gap table is the world's
    int max_len = S->model.max_seq_len;
    if (p->max_doc_tokens > max_len)
        return set_err(err, errlen, "corpus.max_doc_tokens = %d: more than model.max_seq_len = %d",
                       p->max_doc_tokens, max_len);
    return corpus_params_validate(p, err, errlen);
}

RewardRule setup_reward_rule(const Config *c) {
    RewardRule r = REWARD_OUTCOME;
    reward_rule_parse(config_settings(c)->world.reward_rule, &r);  // the schema allows only these
    return r;
}

size_t setup_split_bytes(const Config *c) { return (size_t)config_settings(c)->run.decode_cache_mib << 20; }

SamplerEnvFn setup_sampler_env(const Config *c) {
    return strcmp(config_settings(c)->world.check_verdict, "environment") == 0 ? template_env_verdict
                                                                           : NULL;
}

Model *policy_open(Backend *bk, const char *path, const ModelConfig *want, int vocab_required,
                   ModelConfig *mc, char *err, size_t errlen) {
    ModelConfig file;
    if (checkpoint_read_meta(path, &file, NULL, NULL, NULL, NULL, NULL, err, errlen) != 0) return NULL;
    const Tokenizer *tk = tokenizer_default();
    if (file.vocab_size != tok_vocab_size(tk)) {
        set_err(err, errlen, "%s has model.vocab_size = %d, not the tokenizer's %d tokens: not a "
                "model of this world", path, file.vocab_size, tok_vocab_size(tk));
        return NULL;
    }
    const char *vocab[256];
    int nv = tok_strings(tk, vocab, 256);
    if (checkpoint_check_vocab(path, vocab, nv, !vocab_required, err, errlen) != 0) return NULL;
    if (want) file = *want;
    Model *m = model_create(bk, &file);
    if (checkpoint_load(path, m, 0, err, errlen) != 0) {
        model_free(m);
        return NULL;
    }
    if (mc) *mc = file;
    return m;
}
