// model.c: the transformer policy (see model.h for the architecture and the tensor names).
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../../common.h"
#include "../../kernels/philox.h"

// ---------------------------------------------------------------- activations
// One contiguous buffer, carved for a batch shape (B,T) by a size table. Everything the
// backward pass needs is kept per layer; gradient scratch is shared across layers.
enum {
    ACT_RESID,      // (L+1, N, C)  residual stream entering each layer, and the final one
    ACT_RESID_MID,  // (L, N, C)    residual stream after attention
    ACT_LN1,        // (L, N, C)
    ACT_RSTD1,      // (L, N)
    ACT_Q,          // (L, N, NH*hd) after RoPE
    ACT_K,          // (L, N, NKV*hd) after RoPE
    ACT_V,          // (L, N, NKV*hd)
    ACT_ATT,        // (L, B, NH, T, T)
    ACT_ATTY,       // (L, N, NH*hd)  attention output before wo
    ACT_LN2,        // (L, N, C)
    ACT_RSTD2,      // (L, N)
    ACT_GATE,       // (L, N, F)
    ACT_UP,         // (L, N, F)
    ACT_H,          // (L, N, F)  silu(gate) * up
    ACT_LNF,        // (N, C)
    ACT_RSTDF,      // (N)
    ACT_LOGP,       // (N)
    ACT_ENTROPY,    // (N)
    ACT_LSE,        // (N)
    // gradient scratch (backward)
    ACT_DRESID,     // (N, C)
    ACT_DLN,        // (N, C)
    ACT_DQ,         // (N, NH*hd)
    ACT_DK,         // (N, NKV*hd)
    ACT_DV,         // (N, NKV*hd)
    ACT_DATTY,      // (N, NH*hd)
    ACT_DGATE,      // (N, F)
    ACT_DUP,        // (N, F)
    ACT_DH,         // (N, F)
    ACT_DLOGP,      // (N) cross-entropy gradient
    NUM_ACTS
};

// Decoding buffers, (Bmax rows) each.
enum {
    DEC_X, DEC_LN, DEC_RSTD, DEC_Q, DEC_K, DEC_V, DEC_ATTY, DEC_PROJ, DEC_GATE, DEC_UP, DEC_H,
    NUM_DEC
};

struct Model {
    ModelConfig cfg;
    Backend *bk;
    int head_dim;
    int n_tensors;
    ParamTensor *tensors;
    size_t n_params;
    float *params, *grads, *adam_m, *adam_v;
    int adam_t;

    // training activations
    float *acts;
    size_t acts_capacity;  // floats
    float *act[NUM_ACTS];
    int B, T;
    int *d_tokens, *d_targets, *d_lengths, *d_pos;  // device (N), (N), (B), (N)
    size_t tok_capacity, len_capacity;
    int *h_targets;  // host copy of the last targets (N)
    size_t n_targets;  // positions with a target in the last forward

    // KV cache
    int kv_B;      // capacity of the cache (sequences)
    int dec_B;     // sequences in the current decode (set by prefill)
    float **kcache, **vcache;  // per layer (kv_B, max_seq_len, NKV*hd)
    int *kv_len;               // host (kv_B)
    // Rows whose prompts the prefill ran once (a group's responses) hold equal copies of its
    // keys and values; the decode reads a row's prompt positions [0, kv_plen) from the
    // batch's first row of its group, kv_share, where the other rows of the group find them
    // in the CPU's caches. kv_grp: the row's prompt (-1: none shared), moved with the row.
    int *kv_grp, *kv_plen, *kv_share;  // host (kv_B)
    float *dec;                // decoding activations
    float *dec_act[NUM_DEC];
    int *d_dec_tokens;   // (kv_B) the decoded tokens
    int *d_dec_pos;      // (kv_B) their positions, -1 for inactive rows (attention skips them)
    int *d_store_start;  // (kv_B) cache row of each sequence's first stored key: 0 at prefill,
                         // the new token's position at decode (also its RoPE position)
    int *d_store_count;  // (kv_B) rows stored per sequence: prompt length / 1 or 0
    int *h_scratch;            // host (kv_B)

    // the decode's own products (kn_decode_matmul): every weight they read, packed once per
    // generation by model_prefill (dec_wp, dec_wp_off per layer and product, the head last);
    // dec_own_ok: they are rows-free (kn_decode_rows_free) for every shape of this model
    // (checked at creation); dec_own: the current generation decodes with them
    float *dec_wp;
    size_t *dec_wp_off;  // (7 n_layers + 2): the last is the floats of dec_wp (a view: its viewer's)
    int dec_own_ok, dec_own;

    // models that decode beside this one on other threads (model_views); a view has
    // `viewer` set: its parameters are its viewer's, its backend its own
    Model *view[MODEL_MAX_VIEWS];
    int n_views;
    const Model *viewer;
};

// ---------------------------------------------------------------- config
ModelConfig model_config_default(void) {
    ModelConfig c = {.vocab_size = 64,
                     .d_model = 64,
                     .n_layers = 2,
                     .n_heads = 4,
                     .n_kv_heads = 2,
                     .d_ff = 172,
                     .max_seq_len = 256,
                     .tied_embeddings = 1,
                     .rope_theta = 10000.0f,
                     .norm_eps = 1e-5f};
    return c;
}

int model_config_validate(const ModelConfig *c, char *err, size_t errlen) {
#define REQUIRE(cond, ...) \
    if (!(cond)) return set_err(err, errlen, __VA_ARGS__)
    REQUIRE(c->vocab_size >= 2, "model.vocab_size = %d: must be >= 2", c->vocab_size);
    REQUIRE(c->d_model >= 2, "model.d_model = %d: must be >= 2", c->d_model);
    REQUIRE(c->n_layers >= 1, "model.n_layers = %d: must be >= 1", c->n_layers);
    REQUIRE(c->n_heads >= 1, "model.n_heads = %d: must be >= 1", c->n_heads);
    REQUIRE(c->n_kv_heads >= 1 && c->n_heads % c->n_kv_heads == 0,
            "model.n_kv_heads = %d: must divide model.n_heads = %d", c->n_kv_heads, c->n_heads);
    REQUIRE(c->d_model % c->n_heads == 0, "model.d_model = %d: must be a multiple of model.n_heads = %d",
            c->d_model, c->n_heads);
    REQUIRE((c->d_model / c->n_heads) % 2 == 0,
            "model.d_model / model.n_heads = %d: the head size must be even (RoPE rotates pairs)",
            c->d_model / c->n_heads);
    REQUIRE(c->d_ff >= 1, "model.d_ff = %d: must be >= 1", c->d_ff);
    REQUIRE(c->max_seq_len >= 2, "model.max_seq_len = %d: must be >= 2", c->max_seq_len);
    REQUIRE(c->rope_theta > 1.0f, "model.rope_theta = %g: must be > 1", c->rope_theta);
    REQUIRE(c->norm_eps > 0.0f, "model.norm_eps = %g: must be > 0", c->norm_eps);
#undef REQUIRE
    return 0;
}

// ---------------------------------------------------------------- parameters
static void add_tensor(Model *m, const char *name, int rows, int cols) {
    ParamTensor *t = &m->tensors[m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = cols > 0 ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols > 0 ? cols : 0;
    t->numel = (size_t)rows * (size_t)(cols > 0 ? cols : 1);
    t->offset = m->n_params;
    m->n_params += t->numel;
}

// The size table of the parameters: the one place the tensor names and shapes are defined.
static void build_tensor_table(Model *m) {
    const ModelConfig *c = &m->cfg;
    int C = c->d_model, hd = m->head_dim, F = c->d_ff;
    int max_tensors = 3 + 9 * c->n_layers;
    m->tensors = xcalloc((size_t)max_tensors, sizeof(ParamTensor));
    char name[MODEL_MAX_NAME];
    add_tensor(m, "tok_embeddings", c->vocab_size, C);
    for (int l = 0; l < c->n_layers; l++) {
#define LAYER_TENSOR(suffix, rows, cols)                           \
    snprintf(name, sizeof name, "layers.%d.%s", l, suffix); \
    add_tensor(m, name, rows, cols)
        LAYER_TENSOR("attn_norm", C, 0);
        LAYER_TENSOR("attn.wq", c->n_heads * hd, C);
        LAYER_TENSOR("attn.wk", c->n_kv_heads * hd, C);
        LAYER_TENSOR("attn.wv", c->n_kv_heads * hd, C);
        LAYER_TENSOR("attn.wo", C, c->n_heads * hd);
        LAYER_TENSOR("mlp_norm", C, 0);
        LAYER_TENSOR("mlp.w_gate", F, C);
        LAYER_TENSOR("mlp.w_up", F, C);
        LAYER_TENSOR("mlp.w_down", C, F);
#undef LAYER_TENSOR
    }
    add_tensor(m, "norm", C, 0);
    if (!c->tied_embeddings) add_tensor(m, "output", c->vocab_size, C);
}

// Layer tensors are laid out in table order: 1 + 9*l + k.
enum { T_ATTN_NORM, T_WQ, T_WK, T_WV, T_WO, T_MLP_NORM, T_WGATE, T_WUP, T_WDOWN };
static inline float *layer_param(float *base, const Model *m, int l, int k) {
    return base + m->tensors[1 + 9 * l + k].offset;
}
static inline float *embed_param(float *base, const Model *m) { return base + m->tensors[0].offset; }
static inline float *norm_param(float *base, const Model *m) {
    return base + m->tensors[1 + 9 * m->cfg.n_layers].offset;
}
static inline float *head_param(float *base, const Model *m) {
    return m->cfg.tied_embeddings ? embed_param(base, m)
                                  : base + m->tensors[2 + 9 * m->cfg.n_layers].offset;
}

// ---------------------------------------------------------------- the decode's own products
// A decode step's products in dec_wp's order: per layer wq, wk, wv, wo, wgate, wup, wdown,
// then the head (index 7 n_layers).
static const int dec_tensor[7] = {T_WQ, T_WK, T_WV, T_WO, T_WGATE, T_WUP, T_WDOWN};

// inner (C) and output (OC) size of product i
static void dec_shape(const Model *m, int i, int *C, int *OC) {
    const ModelConfig *c = &m->cfg;
    int QW = c->n_heads * m->head_dim, KW = c->n_kv_heads * m->head_dim;
    int in[7] = {c->d_model, c->d_model, c->d_model, QW, c->d_model, c->d_model, c->d_ff};
    int out[7] = {QW, KW, KW, c->d_model, c->d_ff, c->d_ff, c->d_model};
    int k = i % 7;
    *C = i == 7 * c->n_layers ? c->d_model : in[k];
    *OC = i == 7 * c->n_layers ? c->vocab_size : out[k];
}

// the weights (as the model holds them) of product i
static const float *dec_weight(const Model *m, int i) {
    int L = m->cfg.n_layers;
    return i == 7 * L ? head_param(m->params, m) : layer_param(m->params, m, i / 7, dec_tensor[i % 7]);
}

int model_decode_rows_free(const Model *m) { return m->dec_own; }

// The offsets of the packed weights, and whether every shape is rows-free.
static void dec_setup(Model *m) {
    int n = 7 * m->cfg.n_layers + 1, ok = 1;
    m->dec_wp_off = xmalloc((size_t)(n + 1) * sizeof(size_t));
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        int C, OC;
        dec_shape(m, i, &C, &OC);
        m->dec_wp_off[i] = off;
        off += kn_decode_packed_floats(m->bk, C, OC);
        ok = ok && kn_decode_rows_free(m->bk, C, OC);
    }
    m->dec_wp_off[n] = off;
    m->dec_own_ok = ok;
}

// Packs the weights of every decode product (their values now) into dec_wp.
static void dec_pack(Model *m) {
    int L = m->cfg.n_layers;
    if (!m->dec_wp) m->dec_wp = bk_alloc(m->bk, m->dec_wp_off[7 * L + 1] * sizeof(float));
    for (int i = 0; i <= 7 * L; i++) {
        int C, OC;
        dec_shape(m, i, &C, &OC);
        kn_decode_pack(m->bk, m->dec_wp + m->dec_wp_off[i], dec_weight(m, i), C, OC);
    }
}

// out (B,OC) = inp (B,C) @ W^T for product i of the decode step (dec_tensor; 7 n_layers: the head)
static void dec_matmul(Model *m, float *out, const float *inp, int i, int B) {
    int C, OC;
    dec_shape(m, i, &C, &OC);
    if (m->dec_own)
        kn_decode_matmul(m->bk, out, inp, m->dec_wp + m->dec_wp_off[i], B, C, OC);
    else
        kn_matmul_forward(m->bk, out, inp, dec_weight(m, i), B, C, OC);
}

Model *model_create(Backend *bk, const ModelConfig *c) {
    char err[256];
    if (model_config_validate(c, err, sizeof err) != 0) die("invalid model config: %s", err);
    Model *m = xcalloc(1, sizeof *m);
    m->cfg = *c;
    m->bk = bk;
    m->head_dim = c->d_model / c->n_heads;
    build_tensor_table(m);
    size_t bytes = m->n_params * sizeof(float);
    m->params = bk_alloc(bk, bytes);
    m->grads = bk_alloc(bk, bytes);
    m->adam_m = bk_alloc(bk, bytes);
    m->adam_v = bk_alloc(bk, bytes);
    bk_zero(bk, m->grads, bytes);
    bk_zero(bk, m->adam_m, bytes);
    bk_zero(bk, m->adam_v, bytes);
    dec_setup(m);
    return m;
}

static void free_kv(Model *m) {
    if (!m->kcache) return;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        bk_free(m->bk, m->kcache[l]);
        bk_free(m->bk, m->vcache[l]);
    }
    free(m->kcache);
    free(m->vcache);
    free(m->kv_len);
    free(m->kv_grp);
    free(m->kv_plen);
    free(m->kv_share);
    free(m->h_scratch);
    bk_free(m->bk, m->dec);
    bk_free(m->bk, m->d_dec_tokens);
    bk_free(m->bk, m->d_dec_pos);
    bk_free(m->bk, m->d_store_start);
    bk_free(m->bk, m->d_store_count);
    m->kcache = m->vcache = NULL;
    m->kv_B = 0;
}

void model_free(Model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_views; i++) model_free(m->view[i]);
    free_kv(m);
    bk_free(m->bk, m->grads);
    if (!m->viewer) {
        bk_free(m->bk, m->params);
        bk_free(m->bk, m->adam_m);
        bk_free(m->bk, m->adam_v);
    }
    bk_free(m->bk, m->acts);
    bk_free(m->bk, m->d_tokens);
    bk_free(m->bk, m->d_targets);
    bk_free(m->bk, m->d_pos);
    bk_free(m->bk, m->d_lengths);
    free(m->h_targets);
    free(m->tensors);
    if (m->dec_wp) bk_free(m->bk, m->dec_wp);
    if (!m->viewer) free(m->dec_wp_off);
    if (m->viewer) backend_destroy(m->bk);
    free(m);
}

Model **model_views(Model *m, int n, int with_grads) {
    if (m->viewer) die("model_views: a view has no views");
    if (m->bk->kind != BACKEND_CPU) die("model_views: the CPU backend only");
    if (n < 1 || n > MODEL_MAX_VIEWS) die("model_views: %d views (1..%d)", n, MODEL_MAX_VIEWS);
    for (; m->n_views < n; m->n_views++) {
        char err[256];
        Model *v = xcalloc(1, sizeof *v);
        v->cfg = m->cfg;
        v->bk = backend_create(BACKEND_CPU, err, sizeof err);
        if (!v->bk) die("model_views: %s", err);
        v->head_dim = m->head_dim;
        v->n_tensors = m->n_tensors;
        v->tensors = xmalloc((size_t)m->n_tensors * sizeof *v->tensors);
        memcpy(v->tensors, m->tensors, (size_t)m->n_tensors * sizeof *v->tensors);
        v->n_params = m->n_params;
        v->params = m->params;
        v->dec_wp_off = m->dec_wp_off;
        v->dec_own_ok = m->dec_own_ok;
        v->viewer = m;
        m->view[m->n_views] = v;
    }
    for (int i = 0; i < n; i++) m->view[i]->bk->paths = m->bk->paths;  // as they are now
    for (int i = 0; i < n && with_grads; i++)
        if (!m->view[i]->grads) {
            Model *v = m->view[i];
            v->grads = bk_alloc(v->bk, m->n_params * sizeof(float));
            bk_zero(v->bk, v->grads, m->n_params * sizeof(float));
        }
    return m->view;
}

int model_view_threads(const Model *m, int most) {
#ifdef _OPENMP
    if (m->bk->kind != BACKEND_CPU || omp_in_parallel()) return 1;
    int t = omp_get_max_threads();
    if (t > most) t = most;
    if (t > MODEL_MAX_VIEWS) t = MODEL_MAX_VIEWS;
    return t > 1 ? t : 1;
#else
    (void)m, (void)most;
    return 1;
#endif
}

void model_add_grads(Model *m, const Model *src) {
    if (src->n_params != m->n_params || !src->grads)
        die("model_add_grads: %zu parameters%s into %zu", src->n_params, src->grads ? "" : " without gradients",
            m->n_params);
    kn_add(m->bk, m->grads, m->grads, src->grads, m->n_params);
}

const ModelConfig *model_config(const Model *m) { return &m->cfg; }
Backend *model_backend(const Model *m) { return m->bk; }
size_t model_num_params(const Model *m) { return m->n_params; }
int model_num_tensors(const Model *m) { return m->n_tensors; }
const ParamTensor *model_tensor(const Model *m, int i) { return &m->tensors[i]; }
int model_find_tensor(const Model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return i;
    return -1;
}
float *model_params(Model *m) { return m->params; }
float *model_grads(Model *m) { return m->grads; }
float *model_adam_m(Model *m) { return m->adam_m; }
float *model_adam_v(Model *m) { return m->adam_v; }
int model_adam_step(const Model *m) { return m->adam_t; }
void model_set_adam_step(Model *m, int t) { m->adam_t = t; }

void model_init_params(Model *m, uint64_t seed) {
    float *h = xmalloc(m->n_params * sizeof(float));
    float residual_scale = 1.0f / sqrtf(2.0f * (float)m->cfg.n_layers);
    for (int i = 0; i < m->n_tensors; i++) {
        const ParamTensor *t = &m->tensors[i];
        float *p = h + t->offset;
        if (t->ndim == 1) {  // RMSNorm gains
            for (size_t j = 0; j < t->numel; j++) p[j] = 1.0f;
            continue;
        }
        float std = 0.02f;
        size_t n = strlen(t->name);
        if ((n > 3 && strcmp(t->name + n - 3, ".wo") == 0) ||
            (n > 7 && strcmp(t->name + n - 7, ".w_down") == 0))
            std *= residual_scale;
        for (size_t j = 0; j < t->numel; j++)
            p[j] = std * philox_normal(seed, ((uint64_t)i << 40) | (uint64_t)j);
    }
    bk_upload(m->bk, m->params, h, m->n_params * sizeof(float));
    free(h);
    size_t bytes = m->n_params * sizeof(float);
    bk_zero(m->bk, m->adam_m, bytes);
    bk_zero(m->bk, m->adam_v, bytes);
    m->adam_t = 0;
}

void model_copy_params(Model *dst, const Model *src) {
    if (dst->n_params != src->n_params || memcmp(&dst->cfg, &src->cfg, sizeof dst->cfg) != 0)
        die("model_copy_params: the two models have different configs");
    size_t bytes = dst->n_params * sizeof(float);
    if (dst->bk == src->bk) {
        bk_copy(dst->bk, dst->params, src->params, bytes);
        bk_copy(dst->bk, dst->adam_m, src->adam_m, bytes);
        bk_copy(dst->bk, dst->adam_v, src->adam_v, bytes);
    } else {  // across backends, through the host
        float *h = xmalloc(bytes);
        float *bufs_src[3] = {src->params, src->adam_m, src->adam_v};
        float *bufs_dst[3] = {dst->params, dst->adam_m, dst->adam_v};
        for (int i = 0; i < 3; i++) {
            bk_download(src->bk, h, bufs_src[i], bytes);
            bk_upload(dst->bk, bufs_dst[i], h, bytes);
        }
        free(h);
    }
    dst->adam_t = src->adam_t;
}

// ---------------------------------------------------------------- activation layout
static void act_sizes(const Model *m, int B, int T, size_t sizes[NUM_ACTS]) {
    const ModelConfig *c = &m->cfg;
    size_t N = (size_t)B * T, L = (size_t)c->n_layers, C = (size_t)c->d_model;
    size_t QW = (size_t)c->n_heads * m->head_dim, KW = (size_t)c->n_kv_heads * m->head_dim;
    size_t F = (size_t)c->d_ff;
    sizes[ACT_RESID] = (L + 1) * N * C;
    sizes[ACT_RESID_MID] = L * N * C;
    sizes[ACT_LN1] = L * N * C;
    sizes[ACT_RSTD1] = L * N;
    sizes[ACT_Q] = L * N * QW;
    sizes[ACT_K] = L * N * KW;
    sizes[ACT_V] = L * N * KW;
    sizes[ACT_ATT] = L * (size_t)B * c->n_heads * (size_t)T * T;
    sizes[ACT_ATTY] = L * N * QW;
    sizes[ACT_LN2] = L * N * C;
    sizes[ACT_RSTD2] = L * N;
    sizes[ACT_GATE] = L * N * F;
    sizes[ACT_UP] = L * N * F;
    sizes[ACT_H] = L * N * F;
    sizes[ACT_LNF] = N * C;
    sizes[ACT_RSTDF] = N;
    sizes[ACT_LOGP] = N;
    sizes[ACT_ENTROPY] = N;
    sizes[ACT_LSE] = N;
    sizes[ACT_DRESID] = N * C;
    sizes[ACT_DLN] = N * C;
    sizes[ACT_DQ] = N * QW;
    sizes[ACT_DK] = N * KW;
    sizes[ACT_DV] = N * KW;
    sizes[ACT_DATTY] = N * QW;
    sizes[ACT_DGATE] = N * F;
    sizes[ACT_DUP] = N * F;
    sizes[ACT_DH] = N * F;
    sizes[ACT_DLOGP] = N;
}

// Makes the activations fit (B,T), uploads the batch's integer inputs.
static void prepare_batch(Model *m, const int *tokens, const int *targets, const int *lengths,
                          int B, int T) {
    if (B < 1 || T < 1) die("model: empty batch (B=%d, T=%d)", B, T);
    if (T > m->cfg.max_seq_len)
        die("model: sequence length %d exceeds model.max_seq_len = %d", T, m->cfg.max_seq_len);
    size_t sizes[NUM_ACTS], total = 0;
    act_sizes(m, B, T, sizes);
    for (int i = 0; i < NUM_ACTS; i++) total += (sizes[i] + 15) / 16 * 16;  // 64-byte aligned
    if (total > m->acts_capacity) {
        bk_free(m->bk, m->acts);
        m->acts = bk_alloc(m->bk, total * sizeof(float));
        m->acts_capacity = total;
    }
    float *p = m->acts;
    for (int i = 0; i < NUM_ACTS; i++) {
        m->act[i] = p;
        p += (sizes[i] + 15) / 16 * 16;
    }
    size_t N = (size_t)B * T;
    if (N > m->tok_capacity) {
        bk_free(m->bk, m->d_tokens);
        bk_free(m->bk, m->d_targets);
        bk_free(m->bk, m->d_pos);
        free(m->h_targets);
        m->d_tokens = bk_alloc(m->bk, N * sizeof(int));
        m->d_targets = bk_alloc(m->bk, N * sizeof(int));
        m->d_pos = bk_alloc(m->bk, N * sizeof(int));
        m->h_targets = xmalloc(N * sizeof(int));
        m->tok_capacity = N;
    }
    if ((size_t)B > m->len_capacity) {
        bk_free(m->bk, m->d_lengths);
        m->d_lengths = bk_alloc(m->bk, (size_t)B * sizeof(int));
        m->len_capacity = (size_t)B;
    }
    int *pos = xmalloc(N * sizeof(int));
    m->n_targets = 0;
    for (int b = 0; b < B; b++) {
        if (lengths[b] < 1 || lengths[b] > T)
            die("model: sequence %d has length %d, expected 1..%d", b, lengths[b], T);
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            pos[i] = t;
            int tok = tokens[i];
            if (t < lengths[b] && (tok < 0 || tok >= m->cfg.vocab_size))
                die("model: token id %d at (%d,%d) outside the vocabulary [0,%d)", tok, b, t,
                    m->cfg.vocab_size);
            int tgt = targets ? targets[i] : -1;
            if (t >= lengths[b]) tgt = -1;  // padding never has a target
            if (tgt >= m->cfg.vocab_size)
                die("model: target id %d at (%d,%d) outside the vocabulary", tgt, b, t);
            m->h_targets[i] = tgt;
            if (tgt >= 0) m->n_targets++;
        }
    }
    // padding positions get token 0 so the embedding lookup stays in range
    int *tok_clean = xmalloc(N * sizeof(int));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            tok_clean[i] = t < lengths[b] ? tokens[i] : 0;
        }
    bk_upload(m->bk, m->d_tokens, tok_clean, N * sizeof(int));
    bk_upload(m->bk, m->d_targets, m->h_targets, N * sizeof(int));
    bk_upload(m->bk, m->d_pos, pos, N * sizeof(int));
    bk_upload(m->bk, m->d_lengths, lengths, (size_t)B * sizeof(int));
    free(tok_clean);
    free(pos);
    m->B = B;
    m->T = T;
}

// The saved activations of layer l for the current batch shape (B,T).
typedef struct {
    float *x, *x_mid, *x_out, *ln1, *rstd1, *q, *k, *v, *att, *atty, *ln2, *rstd2, *gate, *up, *h;
} LayerActs;

static LayerActs layer_acts(const Model *m, int l) {
    const ModelConfig *c = &m->cfg;
    size_t N = (size_t)m->B * m->T, C = (size_t)c->d_model, F = (size_t)c->d_ff;
    size_t QW = (size_t)c->n_heads * m->head_dim, KW = (size_t)c->n_kv_heads * m->head_dim;
    size_t L = (size_t)l;
    LayerActs a = {
        .x = m->act[ACT_RESID] + L * N * C,
        .x_mid = m->act[ACT_RESID_MID] + L * N * C,
        .x_out = m->act[ACT_RESID] + (L + 1) * N * C,
        .ln1 = m->act[ACT_LN1] + L * N * C,
        .rstd1 = m->act[ACT_RSTD1] + L * N,
        .q = m->act[ACT_Q] + L * N * QW,
        .k = m->act[ACT_K] + L * N * KW,
        .v = m->act[ACT_V] + L * N * KW,
        .att = m->act[ACT_ATT] + L * (size_t)m->B * c->n_heads * (size_t)m->T * m->T,
        .atty = m->act[ACT_ATTY] + L * N * QW,
        .ln2 = m->act[ACT_LN2] + L * N * C,
        .rstd2 = m->act[ACT_RSTD2] + L * N,
        .gate = m->act[ACT_GATE] + L * N * F,
        .up = m->act[ACT_UP] + L * N * F,
        .h = m->act[ACT_H] + L * N * F,
    };
    return a;
}

// ---------------------------------------------------------------- forward
// The transformer trunk up to the final RMSNorm: act[ACT_LNF] holds (N,C).
static void forward_trunk(Model *m) {
    Backend *bk = m->bk;
    const ModelConfig *c = &m->cfg;
    int B = m->B, T = m->T, N = B * T, C = c->d_model, F = c->d_ff, hd = m->head_dim;
    int NH = c->n_heads, NKV = c->n_kv_heads, QW = NH * hd, KW = NKV * hd;
    size_t NC = (size_t)N * C;
    float *P = m->params;

    kn_embedding_forward(bk, m->act[ACT_RESID], m->d_tokens, embed_param(P, m), N, C);
    for (int l = 0; l < c->n_layers; l++) {
        LayerActs a = layer_acts(m, l);
        float *x = a.x, *x_mid = a.x_mid, *x_out = a.x_out, *ln1 = a.ln1, *rstd1 = a.rstd1;
        float *q = a.q, *k = a.k, *v = a.v, *att = a.att, *atty = a.atty, *ln2 = a.ln2;
        float *rstd2 = a.rstd2, *gate = a.gate, *up = a.up, *h = a.h;

        // attention block
        kn_rmsnorm_forward(bk, ln1, rstd1, x, layer_param(P, m, l, T_ATTN_NORM), N, C, c->norm_eps);
        kn_matmul_forward(bk, q, ln1, layer_param(P, m, l, T_WQ), N, C, QW);
        kn_matmul_forward(bk, k, ln1, layer_param(P, m, l, T_WK), N, C, KW);
        kn_matmul_forward(bk, v, ln1, layer_param(P, m, l, T_WV), N, C, KW);
        kn_rope_forward(bk, q, m->d_pos, N, NH, hd, c->rope_theta);
        kn_rope_forward(bk, k, m->d_pos, N, NKV, hd, c->rope_theta);
        kn_attention_forward(bk, atty, att, q, k, v, m->d_lengths, B, T, NH, NKV, hd);
        bk_copy(bk, x_mid, x, NC * sizeof(float));  // x_mid = x + wo(atty)
        kn_matmul_forward_add(bk, x_mid, atty, layer_param(P, m, l, T_WO), N, QW, C);
        // MLP block
        kn_rmsnorm_forward(bk, ln2, rstd2, x_mid, layer_param(P, m, l, T_MLP_NORM), N, C, c->norm_eps);
        kn_matmul_forward(bk, gate, ln2, layer_param(P, m, l, T_WGATE), N, C, F);
        kn_matmul_forward(bk, up, ln2, layer_param(P, m, l, T_WUP), N, C, F);
        kn_swiglu_forward(bk, h, gate, up, (size_t)N * F);
        bk_copy(bk, x_out, x_mid, NC * sizeof(float));  // x_out = x_mid + w_down(h)
        kn_matmul_forward_add(bk, x_out, h, layer_param(P, m, l, T_WDOWN), N, F, C);
    }
    kn_rmsnorm_forward(bk, m->act[ACT_LNF], m->act[ACT_RSTDF],
                       m->act[ACT_RESID] + (size_t)c->n_layers * NC, norm_param(P, m), N, C,
                       c->norm_eps);
}

void model_forward(Model *m, const int *tokens, const int *targets, const int *lengths, int B,
                   int T) {
    prepare_batch(m, tokens, targets, lengths, B, T);
    forward_trunk(m);
    kn_logprob_forward(m->bk, m->act[ACT_LOGP], m->act[ACT_ENTROPY], m->act[ACT_LSE],
                       m->act[ACT_LNF], head_param(m->params, m), m->d_targets, B * T,
                       m->cfg.d_model, m->cfg.vocab_size);
}

float *model_logp(Model *m) { return m->act[ACT_LOGP]; }
float *model_entropy(Model *m) { return m->act[ACT_ENTROPY]; }

// ---------------------------------------------------------------- backward
void model_zero_grad(Model *m) { bk_zero(m->bk, m->grads, m->n_params * sizeof(float)); }

void model_backward(Model *m, const float *dlogp, const float *dentropy) {
    Backend *bk = m->bk;
    const ModelConfig *c = &m->cfg;
    int B = m->B, T = m->T, N = B * T, C = c->d_model, F = c->d_ff, hd = m->head_dim;
    int NH = c->n_heads, NKV = c->n_kv_heads, QW = NH * hd, KW = NKV * hd;
    size_t NC = (size_t)N * C;
    float *P = m->params, *G = m->grads;
    float *dresid = m->act[ACT_DRESID], *dln = m->act[ACT_DLN];
    float *dq = m->act[ACT_DQ], *dk = m->act[ACT_DK], *dv = m->act[ACT_DV];
    float *datty = m->act[ACT_DATTY], *dgate = m->act[ACT_DGATE], *dup = m->act[ACT_DUP];
    float *dh = m->act[ACT_DH];

    // head: logp = log softmax(lnf W^T)[target]; lnf = rmsnorm(x_L)
    bk_zero(bk, dln, NC * sizeof(float));
    kn_logprob_backward(bk, dln, head_param(G, m), dlogp, dentropy, m->act[ACT_LNF],
                        head_param(P, m), m->d_targets, m->act[ACT_LSE], N, C, c->vocab_size);
    bk_zero(bk, dresid, NC * sizeof(float));
    kn_rmsnorm_backward(bk, dresid, norm_param(G, m), dln,
                        m->act[ACT_RESID] + (size_t)c->n_layers * NC, norm_param(P, m),
                        m->act[ACT_RSTDF], N, C);

    for (int l = c->n_layers - 1; l >= 0; l--) {
        LayerActs a = layer_acts(m, l);
        float *x = a.x, *x_mid = a.x_mid, *ln1 = a.ln1, *rstd1 = a.rstd1, *q = a.q, *k = a.k;
        float *v = a.v, *att = a.att, *atty = a.atty, *ln2 = a.ln2, *rstd2 = a.rstd2;
        float *gate = a.gate, *up = a.up, *h = a.h;

        // MLP block: x_out = x_mid + w_down(swiglu(w_gate ln2, w_up ln2)); dresid holds dx_out
        bk_zero(bk, dh, (size_t)N * F * sizeof(float));
        kn_matmul_backward(bk, dh, layer_param(G, m, l, T_WDOWN), dresid, h,
                           layer_param(P, m, l, T_WDOWN), N, F, C);
        kn_swiglu_backward(bk, dgate, dup, dh, gate, up, (size_t)N * F);
        bk_zero(bk, dln, NC * sizeof(float));
        kn_matmul_backward(bk, dln, layer_param(G, m, l, T_WGATE), dgate, ln2,
                           layer_param(P, m, l, T_WGATE), N, C, F);
        kn_matmul_backward(bk, dln, layer_param(G, m, l, T_WUP), dup, ln2,
                           layer_param(P, m, l, T_WUP), N, C, F);
        kn_rmsnorm_backward(bk, dresid, layer_param(G, m, l, T_MLP_NORM), dln, x_mid,
                            layer_param(P, m, l, T_MLP_NORM), rstd2, N, C);  // dresid = dx_mid

        // attention block: x_mid = x + wo(attn(rope(wq ln1), rope(wk ln1), wv ln1))
        bk_zero(bk, datty, (size_t)N * QW * sizeof(float));
        kn_matmul_backward(bk, datty, layer_param(G, m, l, T_WO), dresid, atty,
                           layer_param(P, m, l, T_WO), N, QW, C);
        bk_zero(bk, dq, (size_t)N * QW * sizeof(float));
        bk_zero(bk, dk, (size_t)N * KW * sizeof(float));
        bk_zero(bk, dv, (size_t)N * KW * sizeof(float));
        kn_attention_backward(bk, dq, dk, dv, datty, att, q, k, v, m->d_lengths, B, T, NH, NKV, hd);
        kn_rope_backward(bk, dq, m->d_pos, N, NH, hd, c->rope_theta);
        kn_rope_backward(bk, dk, m->d_pos, N, NKV, hd, c->rope_theta);
        bk_zero(bk, dln, NC * sizeof(float));
        kn_matmul_backward(bk, dln, layer_param(G, m, l, T_WQ), dq, ln1, layer_param(P, m, l, T_WQ),
                           N, C, QW);
        kn_matmul_backward(bk, dln, layer_param(G, m, l, T_WK), dk, ln1, layer_param(P, m, l, T_WK),
                           N, C, KW);
        kn_matmul_backward(bk, dln, layer_param(G, m, l, T_WV), dv, ln1, layer_param(P, m, l, T_WV),
                           N, C, KW);
        kn_rmsnorm_backward(bk, dresid, layer_param(G, m, l, T_ATTN_NORM), dln, x,
                            layer_param(P, m, l, T_ATTN_NORM), rstd1, N, C);  // dresid = dx
    }
    kn_embedding_backward(bk, embed_param(G, m), dresid, m->d_tokens, N, c->vocab_size, C);
}

size_t model_num_targets(const Model *m) { return m->n_targets; }

float model_cross_entropy_step(Model *m, int backward, double denom) {
    size_t N = (size_t)m->B * m->T;
    if (m->n_targets == 0) die("model_cross_entropy_step: the last forward had no targets");
    float *logp = xmalloc(N * sizeof(float));
    bk_download(m->bk, logp, m->act[ACT_LOGP], N * sizeof(float));
    double sum = 0;
    for (size_t i = 0; i < N; i++)
        if (m->h_targets[i] >= 0) sum += logp[i];
    float loss = (float)(-sum / (double)m->n_targets);
    if (backward) {  // dL/dlogp = -1/denom at every position with a target
        float g = (float)(-1.0 / (denom > 0 ? denom : (double)m->n_targets));
        for (size_t i = 0; i < N; i++) logp[i] = m->h_targets[i] >= 0 ? g : 0.0f;
        bk_upload(m->bk, m->act[ACT_DLOGP], logp, N * sizeof(float));
        model_backward(m, m->act[ACT_DLOGP], NULL);
    }
    free(logp);
    return loss;
}

// ---------------------------------------------------------------- optimizer
double model_grad_norm(Model *m) { return sqrt(kn_sum_squares(m->bk, m->grads, m->n_params)); }

double model_adamw_step(Model *m, const AdamWConfig *opt) {
    double norm = model_grad_norm(m);
    float scale = 1.0f;
    if (opt->grad_clip > 0 && norm > opt->grad_clip) scale = (float)(opt->grad_clip / norm);
    m->adam_t++;
    kn_adamw_update(m->bk, m->params, m->grads, m->adam_m, m->adam_v, m->n_params, opt->lr,
                    opt->beta1, opt->beta2, opt->eps, opt->weight_decay, scale, m->adam_t);
    return norm;
}

// ---------------------------------------------------------------- KV-cache decoding
void model_kv_alloc(Model *m, int B) {
    if (B <= m->kv_B) return;
    free_kv(m);
    const ModelConfig *c = &m->cfg;
    size_t KW = (size_t)c->n_kv_heads * m->head_dim, QW = (size_t)c->n_heads * m->head_dim;
    size_t per_seq = (size_t)c->max_seq_len * KW;
    m->kv_B = B;
    m->kcache = xcalloc((size_t)c->n_layers, sizeof(float *));
    m->vcache = xcalloc((size_t)c->n_layers, sizeof(float *));
    for (int l = 0; l < c->n_layers; l++) {
        m->kcache[l] = bk_alloc(m->bk, (size_t)B * per_seq * sizeof(float));
        m->vcache[l] = bk_alloc(m->bk, (size_t)B * per_seq * sizeof(float));
    }
    m->kv_len = xcalloc((size_t)B, sizeof(int));
    m->kv_grp = xcalloc((size_t)B, sizeof(int));
    m->kv_plen = xcalloc((size_t)B, sizeof(int));
    m->kv_share = xcalloc((size_t)B, sizeof(int));
    m->h_scratch = xcalloc((size_t)B, sizeof(int));
    size_t C = (size_t)c->d_model, F = (size_t)c->d_ff;
    size_t sizes[NUM_DEC] = {C, C, 1, QW, KW, KW, QW, C, F, F, F};
    size_t total = 0;
    for (int i = 0; i < NUM_DEC; i++) total += (sizes[i] * B + 15) / 16 * 16;
    m->dec = bk_alloc(m->bk, total * sizeof(float));
    float *p = m->dec;
    for (int i = 0; i < NUM_DEC; i++) {
        m->dec_act[i] = p;
        p += (sizes[i] * B + 15) / 16 * 16;
    }
    m->d_dec_tokens = bk_alloc(m->bk, (size_t)B * sizeof(int));
    m->d_dec_pos = bk_alloc(m->bk, (size_t)B * sizeof(int));
    m->d_store_start = bk_alloc(m->bk, (size_t)B * sizeof(int));
    m->d_store_count = bk_alloc(m->bk, (size_t)B * sizeof(int));
}

int model_kv_len(const Model *m, int b) { return m->kv_len[b]; }

size_t model_kv_position_bytes(const Model *m) {
    return 2 * (size_t)m->cfg.n_layers * m->cfg.n_kv_heads * m->head_dim * sizeof(float);
}

// kv_share of rows [0, B): the first row of the batch with the same kv_grp, else the row itself
static void update_shares(Model *m, int B) {
    int *first = m->h_scratch;  // first[g]: the first row of prompt g (g < kv_B)
    for (int j = 0; j < m->kv_B; j++) first[j] = -1;
    for (int j = 0; j < B; j++) {
        int g = m->kv_grp[j];
        if (g >= 0 && first[g] < 0) first[g] = j;
        m->kv_share[j] = g >= 0 ? first[g] : j;
    }
}

void model_decode_compact(Model *m, const int *keep, int n_keep, int B) {
    if (n_keep < 0 || n_keep > B || B > m->kv_B)
        die("model_decode_compact: %d rows into %d of a cache of %d", n_keep, B, m->kv_B);
    const ModelConfig *c = &m->cfg;
    size_t KW = (size_t)c->n_kv_heads * m->head_dim, row = (size_t)c->max_seq_len * KW;
    for (int j = 0; j < n_keep; j++) {
        int b = keep[j];
        if (b < j || b >= m->kv_B || (j > 0 && b <= keep[j - 1]))
            die("model_decode_compact: keep[%d] = %d: rows must ascend within the cache of %d", j, b,
                m->kv_B);
        if (b == j) continue;
        size_t bytes = (size_t)m->kv_len[b] * KW * sizeof(float);  // rows b > j do not overlap
        for (int l = 0; l < c->n_layers; l++) {
            bk_copy(m->bk, m->kcache[l] + (size_t)j * row, m->kcache[l] + (size_t)b * row, bytes);
            bk_copy(m->bk, m->vcache[l] + (size_t)j * row, m->vcache[l] + (size_t)b * row, bytes);
        }
        m->kv_len[j] = m->kv_len[b];
        m->kv_grp[j] = m->kv_grp[b];
        m->kv_plen[j] = m->kv_plen[b];
    }
    for (int j = n_keep; j < B; j++) {
        m->kv_len[j] = 0;
        m->kv_grp[j] = -1;
    }
    m->dec_B = B;
    update_shares(m, B);
}

// logits (B,V) of rows x (B,C) after the final norm
static void head_logits(Model *m, float *logits, const float *x, int B) {
    const ModelConfig *c = &m->cfg;
    float *ln = m->dec_act[DEC_LN], *rstd = m->dec_act[DEC_RSTD];
    kn_rmsnorm_forward(m->bk, ln, rstd, x, norm_param(m->params, m), B, c->d_model, c->norm_eps);
    dec_matmul(m, logits, ln, 7 * c->n_layers, B);
}

// Which rows of a prefill batch repeat an earlier row's prompt (the same length and tokens; a
// group's responses share one): of[b] is row b's distinct prompt, numbered in the order they
// first appear, and rep[u] the first row with prompt u. Returns the number of distinct prompts.
static int distinct_prompts(const int *tokens, const int *lengths, int B, int T, int *of, int *rep) {
    int n = 0;
    for (int b = 0; b < B; b++) {
        int u = 0;
        for (; u < n; u++) {
            int r = rep[u];
            if (lengths[r] == lengths[b] &&
                memcmp(tokens + (size_t)r * T, tokens + (size_t)b * T, (size_t)lengths[b] * sizeof(int)) == 0)
                break;
        }
        if (u == n) rep[n++] = b;
        of[b] = u;
    }
    return n;
}

void model_prefill(Model *m, const int *tokens, const int *lengths, int B, int T, float *logits) {
    if (B > m->kv_B) die("model_prefill: batch %d larger than the KV cache (%d)", B, m->kv_B);
    const ModelConfig *c = &m->cfg;
    int KW = c->n_kv_heads * m->head_dim, C = c->d_model;
    m->dec_own = m->dec_own_ok && m->bk->paths.decode_own_products && B >= MODEL_DECODE_OWN_MIN_ROWS;
    if (m->dec_own) dec_pack(m);
    // On the CPU each distinct prompt goes through the trunk once, and the rows that repeat it
    // take its keys, values and last residual. A row's numbers do not depend on the other rows
    // of the trunk's products (with 32 rows or more: the row-count property of docs/kernels.md,
    // "Determinism", which `make blas-order` checks), so every row gets the full batch's bits.
    // The head runs on all B rows, as before.
    int *of = xmalloc((size_t)B * sizeof(int)), *rep = xmalloc((size_t)B * sizeof(int));
    int n = m->bk->paths.share_prompts ? distinct_prompts(tokens, lengths, B, T, of, rep) : B;
    if (n == B || (size_t)n * T < 32) {
        n = B;
        for (int b = 0; b < B; b++) of[b] = rep[b] = b;
    }
    int *tok_u = NULL, *len_u = NULL;
    if (n < B) {
        tok_u = xmalloc((size_t)n * T * sizeof(int));
        len_u = xmalloc((size_t)n * sizeof(int));
        for (int u = 0; u < n; u++) {
            memcpy(tok_u + (size_t)u * T, tokens + (size_t)rep[u] * T, (size_t)T * sizeof(int));
            len_u[u] = lengths[rep[u]];
        }
    }
    const int *len = n < B ? len_u : lengths;
    prepare_batch(m, n < B ? tok_u : tokens, NULL, len, n, T);
    forward_trunk(m);
    size_t N = (size_t)n * T;
    for (int u = 0; u < n; u++) m->h_scratch[u] = 0;
    bk_upload(m->bk, m->d_store_start, m->h_scratch, (size_t)n * sizeof(int));
    bk_upload(m->bk, m->d_store_count, len, (size_t)n * sizeof(int));
    for (int l = 0; l < c->n_layers; l++) {
        kn_kv_store(m->bk, m->kcache[l], m->act[ACT_K] + (size_t)l * N * KW, m->d_store_start,
                    m->d_store_count, n, T, c->max_seq_len, KW);
        kn_kv_store(m->bk, m->vcache[l], m->act[ACT_V] + (size_t)l * N * KW, m->d_store_start,
                    m->d_store_count, n, T, c->max_seq_len, KW);
    }
    // cache rows 0..n-1 hold the distinct prompts; row b takes prompt of[b] <= b, from the last
    // row down, so no prompt's row is overwritten before the rows that repeat it read it
    size_t row = (size_t)c->max_seq_len * KW;
    for (int b = B - 1; b >= 0; b--) {
        if (of[b] == b) continue;
        size_t bytes = (size_t)lengths[b] * KW * sizeof(float);
        for (int l = 0; l < c->n_layers; l++) {
            bk_copy(m->bk, m->kcache[l] + (size_t)b * row, m->kcache[l] + (size_t)of[b] * row, bytes);
            bk_copy(m->bk, m->vcache[l] + (size_t)b * row, m->vcache[l] + (size_t)of[b] * row, bytes);
        }
    }
    // the residual stream at each sequence's last prompt token -> logits
    float *x_last = m->dec_act[DEC_X];
    const float *x_final = m->act[ACT_RESID] + (size_t)c->n_layers * N * C;
    for (int b = 0; b < B; b++) {
        bk_copy(m->bk, x_last + (size_t)b * C, x_final + ((size_t)of[b] * T + lengths[b] - 1) * C,
                (size_t)C * sizeof(float));
        m->kv_len[b] = lengths[b];
        // only copies are equal for sure: a prompt that ran once per row may round otherwise
        m->kv_grp[b] = n < B ? of[b] : -1;
        m->kv_plen[b] = lengths[b];
    }
    m->dec_B = B;
    update_shares(m, B);
    head_logits(m, logits, x_last, B);
    free(of);
    free(rep);
    free(tok_u);
    free(len_u);
}

void model_decode_step(Model *m, const int *tokens, const int *active, float *logits) {
    Backend *bk = m->bk;
    const ModelConfig *c = &m->cfg;
    int B = m->dec_B, C = c->d_model, F = c->d_ff, hd = m->head_dim;
    int NH = c->n_heads, NKV = c->n_kv_heads, KW = NKV * hd;
    float *P = m->params;
    if (B < 1) die("model_decode_step: call model_prefill first");
    int *pos = m->h_scratch;
    int *tok = xmalloc((size_t)B * sizeof(int)), *count = xmalloc((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++) {
        int on = active ? active[b] : 1;
        if (on && m->kv_len[b] >= c->max_seq_len)
            die("model_decode_step: sequence %d is full (model.max_seq_len = %d)", b, c->max_seq_len);
        if (on && (tokens[b] < 0 || tokens[b] >= c->vocab_size))
            die("model_decode_step: token id %d outside the vocabulary", tokens[b]);
        tok[b] = on ? tokens[b] : 0;
        pos[b] = on ? m->kv_len[b] : -1;
        count[b] = on ? 1 : 0;
    }
    bk_upload(bk, m->d_dec_tokens, tok, (size_t)B * sizeof(int));
    // RoPE needs a valid position even for inactive rows (their results are discarded)
    for (int b = 0; b < B; b++) tok[b] = pos[b] < 0 ? 0 : pos[b];
    bk_upload(bk, m->d_store_start, tok, (size_t)B * sizeof(int));
    bk_upload(bk, m->d_dec_pos, pos, (size_t)B * sizeof(int));
    bk_upload(bk, m->d_store_count, count, (size_t)B * sizeof(int));
    free(tok);
    free(count);

    float *x = m->dec_act[DEC_X], *ln = m->dec_act[DEC_LN], *rstd = m->dec_act[DEC_RSTD];
    float *q = m->dec_act[DEC_Q], *k = m->dec_act[DEC_K], *v = m->dec_act[DEC_V];
    float *atty = m->dec_act[DEC_ATTY], *proj = m->dec_act[DEC_PROJ];
    float *gate = m->dec_act[DEC_GATE], *up = m->dec_act[DEC_UP], *h = m->dec_act[DEC_H];
    kn_embedding_forward(bk, x, m->d_dec_tokens, embed_param(P, m), B, C);
    for (int l = 0; l < c->n_layers; l++) {
        kn_rmsnorm_forward(bk, ln, rstd, x, layer_param(P, m, l, T_ATTN_NORM), B, C, c->norm_eps);
        dec_matmul(m, q, ln, 7 * l + 0, B);
        dec_matmul(m, k, ln, 7 * l + 1, B);
        dec_matmul(m, v, ln, 7 * l + 2, B);
        kn_rope_forward(bk, q, m->d_store_start, B, NH, hd, c->rope_theta);
        kn_rope_forward(bk, k, m->d_store_start, B, NKV, hd, c->rope_theta);
        kn_kv_store(bk, m->kcache[l], k, m->d_store_start, m->d_store_count, B, 1, c->max_seq_len, KW);
        kn_kv_store(bk, m->vcache[l], v, m->d_store_start, m->d_store_count, B, 1, c->max_seq_len, KW);
        // a group's prompt read from its first row (kv_share)
        kn_attention_decode(bk, atty, q, m->kcache[l], m->vcache[l], m->d_dec_pos, m->kv_share,
                            m->kv_plen, B, c->max_seq_len, NH, NKV, hd);
        dec_matmul(m, proj, atty, 7 * l + 3, B);
        kn_add(bk, x, x, proj, (size_t)B * C);
        kn_rmsnorm_forward(bk, ln, rstd, x, layer_param(P, m, l, T_MLP_NORM), B, C, c->norm_eps);
        dec_matmul(m, gate, ln, 7 * l + 4, B);
        dec_matmul(m, up, ln, 7 * l + 5, B);
        kn_swiglu_forward(bk, h, gate, up, (size_t)B * F);
        dec_matmul(m, proj, h, 7 * l + 6, B);
        kn_add(bk, x, x, proj, (size_t)B * C);
    }
    head_logits(m, logits, x, B);
    for (int b = 0; b < B; b++)
        if (pos[b] >= 0) m->kv_len[b]++;
}
