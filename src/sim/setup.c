#include "setup.h"

#include <omp.h>
#include <string.h>

#include "../common.h"

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
