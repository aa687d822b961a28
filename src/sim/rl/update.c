// update.c: the policy update (update.h). Every formula of the objectives is in objective.h
// (run by kn_token_weights); this file packs minibatches, runs the passes and sums statistics.
#include "update.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../../common.h"
#include "../../kernels/philox.h"
#include "../parallel/dataparallel.h"
#include "../parallel/dist.h"
#include "../world/tokenizer.h"

struct UpdateWorkspace {
    Backend *bk;
    int max_rows, max_T;
    size_t n_params;  // of the gradient copies g_obj, g_unb (0: no bias diagnostic)
    // host: the rows of a pass, its packed sequences and the forward's outputs (rows, T)
    int *rows, *tokens, *targets, *lengths;
    float *logp, *entropy;
    // host: kn_token_weights' inputs in the (rows, T) layout, and its outputs
    float *old_h, *ref_h, *adv_h;
    int *start_h, *len_h;
    unsigned char *env_h;
    float *w, *loss, *kl, *coef;
    int *clip_low, *clip_high;
    float *g_obj, *g_unb;
    int *mine;  // this rank's rows of a minibatch (dataparallel.h)
    // device: the same inputs and outputs, and dL/dlogp of the backward
    float *d_logp_old, *d_logp_ref, *d_adv, *d_w, *d_loss, *d_kl, *d_coef, *d_dlogp;
    int *d_start, *d_len, *d_clip_low, *d_clip_high;
    unsigned char *d_env;
    // on the CPU with several threads: thread t's workspace, on the backend of view t of the
    // model (pass_threads), made on first use
    UpdateWorkspace *part[MODEL_MAX_VIEWS];
    int n_parts;
};

// The workspace's buffers and their sizes in bytes: host (xmalloc) and device (bk_alloc).
typedef struct {
    void **p;
    size_t bytes;
} Buffer;

static size_t host_buffers(UpdateWorkspace *ws, Buffer *b) {
    size_t R = (size_t)ws->max_rows, NT = R * (size_t)ws->max_T, np = ws->n_params;
    size_t fb = NT * sizeof(float), ib = NT * sizeof(int), rf = R * sizeof(float), ri = R * sizeof(int);
    Buffer all[] = {
        {(void **)&ws->rows, ri},     {(void **)&ws->tokens, ib},    {(void **)&ws->targets, ib},
        {(void **)&ws->lengths, ri},  {(void **)&ws->logp, fb},      {(void **)&ws->entropy, fb},
        {(void **)&ws->old_h, fb},    {(void **)&ws->ref_h, fb},     {(void **)&ws->adv_h, rf},
        {(void **)&ws->start_h, ri},  {(void **)&ws->len_h, ri},     {(void **)&ws->env_h, NT},
        {(void **)&ws->w, fb},        {(void **)&ws->loss, fb},      {(void **)&ws->kl, fb},
        {(void **)&ws->coef, rf},     {(void **)&ws->clip_low, ri},  {(void **)&ws->clip_high, ri},
        {(void **)&ws->g_obj, np * sizeof(float)}, {(void **)&ws->g_unb, np * sizeof(float)},
        {(void **)&ws->mine, ri},
    };
    memcpy(b, all, sizeof all);
    return sizeof all / sizeof all[0];
}

static size_t device_buffers(UpdateWorkspace *ws, Buffer *b) {
    size_t R = (size_t)ws->max_rows, NT = R * (size_t)ws->max_T;
    size_t fb = NT * sizeof(float), rf = R * sizeof(float), ri = R * sizeof(int);
    Buffer all[] = {
        {(void **)&ws->d_logp_old, fb}, {(void **)&ws->d_logp_ref, fb}, {(void **)&ws->d_adv, rf},
        {(void **)&ws->d_w, fb},        {(void **)&ws->d_loss, fb},     {(void **)&ws->d_kl, fb},
        {(void **)&ws->d_coef, rf},     {(void **)&ws->d_dlogp, fb},    {(void **)&ws->d_start, ri},
        {(void **)&ws->d_len, ri},      {(void **)&ws->d_clip_low, ri}, {(void **)&ws->d_clip_high, ri},
        {(void **)&ws->d_env, NT},
    };
    memcpy(b, all, sizeof all);
    return sizeof all / sizeof all[0];
}

enum { MAX_BUFFERS = 32 };

UpdateWorkspace *update_workspace_create(Model *m, int max_rows, int bias_diagnostic) {
    UpdateWorkspace *ws = xcalloc(1, sizeof *ws);
    ws->bk = model_backend(m);
    ws->max_rows = max_rows > 0 ? max_rows : 1;
    ws->max_T = model_config(m)->max_seq_len;
    ws->n_params = bias_diagnostic ? model_num_params(m) : 0;
    Buffer b[MAX_BUFFERS];
    for (size_t j = 0, n = host_buffers(ws, b); j < n; j++) *b[j].p = b[j].bytes ? xmalloc(b[j].bytes) : NULL;
    for (size_t j = 0, n = device_buffers(ws, b); j < n; j++) *b[j].p = bk_alloc(ws->bk, b[j].bytes);
    return ws;
}

void update_workspace_free(UpdateWorkspace *ws) {
    if (!ws) return;
    for (int t = 0; t < ws->n_parts; t++) update_workspace_free(ws->part[t]);
    Buffer b[MAX_BUFFERS];
    for (size_t j = 0, n = host_buffers(ws, b); j < n; j++) free(*b[j].p);
    for (size_t j = 0, n = device_buffers(ws, b); j < n; j++) bk_free(ws->bk, *b[j].p);
    free(ws);
}

// ---------------------------------------------------------------- forward passes

// Packs the rows idx[0..n) into right-padded (prompt + response) sequences in ws: inputs are
// the sequence without its last token, the target at position t is token t+1, and only the
// response tokens are targets. tokens, targets (n, T), lengths (n). Returns T.
static int pack_minibatch(UpdateWorkspace *ws, const Rollout *r, const int *idx, int n) {
    if (n > ws->max_rows) die("update: a pass of %d responses, the workspace holds %d", n, ws->max_rows);
    int T = 1;
    for (int k = 0; k < n; k++) {
        int i = idx[k], len = r->prompt_len[i] + r->resp_len[i] - 1;
        if (len > T) T = len;
    }
    if (T > ws->max_T) die("update: a sequence of %d tokens exceeds model.max_seq_len = %d", T, ws->max_T);
    for (int k = 0; k < n; k++) {
        int i = idx[k], pl = r->prompt_len[i], rl = r->resp_len[i];
        int *tok = ws->tokens + (size_t)k * T, *tgt = ws->targets + (size_t)k * T;
        ws->lengths[k] = pl + rl - 1;
        for (int t = 0; t < T; t++) {
            int next = t + 1;  // position of the target token in prompt + response
            tok[t] = t < pl ? r->prompt[i][t] : t < pl + rl ? r->resp[i][t - pl] : TOK_PAD;
            tgt[t] = next >= pl && next < pl + rl ? r->resp[i][next - pl] : -1;
        }
    }
    return T;
}

// Forward of m over the rows idx[0..n); host copies of logp and entropy (n, T) into ws->logp
// and ws->entropy, each if asked. Returns T.
static int minibatch_forward(UpdateWorkspace *ws, Model *m, const Rollout *r, const int *idx,
                             int n, int want_logp, int want_entropy) {
    int T = pack_minibatch(ws, r, idx, n);
    model_forward(m, ws->tokens, ws->targets, ws->lengths, n, T);
    size_t bytes = (size_t)n * T * sizeof(float);
    if (want_logp) bk_download(ws->bk, ws->logp, model_logp(m), bytes);
    if (want_entropy) bk_download(ws->bk, ws->entropy, model_entropy(m), bytes);
    return T;
}

// Position in the (n, T) layout of response token t of minibatch row k (response i): the
// target of input position prompt_len - 1 + t.
static size_t token_pos(const Rollout *r, int i, int k, int T, int t) {
    return (size_t)k * T + (size_t)(r->prompt_len[i] - 1 + t);
}

// The rows of the minibatch idx[0..n) in the order the forward passes take them, into
// ws->rows, and the rows per pass (returned): with micro-batches of micro < n rows, sorted
// by sequence length, longest first (ties keep idx's order), so that a pass pads little;
// otherwise idx as it is.
static int forward_rows(UpdateWorkspace *ws, const Rollout *r, const int *idx, int n, int micro) {
    if (n > ws->max_rows) die("update: a minibatch of %d responses, the workspace holds %d", n, ws->max_rows);
    int *rows = ws->rows;
    memcpy(rows, idx, (size_t)n * sizeof(int));
    int mb = micro > 0 && micro < n ? micro : n;
    if (mb == n) return mb;
    for (int a = 1; a < n; a++)  // insertion sort: stable, n is a minibatch
        for (int b = a; b > 0; b--) {
            int p = rows[b - 1], q = rows[b];
            if (r->prompt_len[p] + r->resp_len[p] >= r->prompt_len[q] + r->resp_len[q]) break;
            rows[b - 1] = q;
            rows[b] = p;
        }
    return mb;
}

// ---------------------------------------------------------------- passes on several threads

// How many threads run the passes of a minibatch at once. On the CPU each takes whole passes
// on a view of the model (model_views) with every kernel inside it on one thread (nested
// parallel regions and OpenBLAS inside a parallel region run on one), so that a pass's
// log-probs and gradient are those of one thread bit for bit; each thread sums its passes'
// gradients, and the threads' sums are added to the model's in thread order. 1 (the passes
// one after another on the model, its kernels on all threads) with one pass, on CUDA and
// inside a parallel region.
static int pass_threads(const Model *m, int passes) { return model_view_threads(m, passes); }

// The thread of pass p of nt threads: the passes go out in a snake (0 1 .. nt-1 nt-1 .. 1 0
// 0 1 ..), so that with the passes sorted longest first each thread gets a like share of
// the tokens.
static int pass_thread(int p, int nt) {
    int k = p % nt;
    return (p / nt) % 2 ? nt - 1 - k : k;
}

// The views of m for nt threads, with a workspace for each (ws->part); made on first use.
static Model **pass_views(UpdateWorkspace *ws, Model *m, int nt) {
    Model **views = model_views(m, nt, 1);
    for (; ws->n_parts < nt; ws->n_parts++)
        ws->part[ws->n_parts] = update_workspace_create(views[ws->n_parts], ws->max_rows, 0);
    return views;
}

// The passes of a minibatch of n rows in passes of mb, and the rows of pass p.
static int pass_count(int n, int mb) { return (n + mb - 1) / mb; }
static int pass_rows(int n, int mb, int p) { return n - p * mb < mb ? n - p * mb : mb; }

// ---------------------------------------------------------------- old log-probs

// The log-probs of the last forward (ws->logp, rows idx[0..n) of T positions) into dst (r's
// per-token layout).
static void logp_to(UpdateWorkspace *ws, const Rollout *r, const int *idx, int n, int T, float *dst) {
    for (int k = 0; k < n; k++) {
        int i = idx[k];
        for (int t = 0; t < r->resp_len[i]; t++) dst[r->tok_offset[i] + t] = ws->logp[token_pos(r, i, k, T, t)];
    }
}

// Forward of m over the rows idx[0..n) of one pass; their log-probs into dst.
static void logp_pass(UpdateWorkspace *ws, Model *m, const Rollout *r, const int *idx, int n,
                      float *dst) {
    logp_to(ws, r, idx, n, minibatch_forward(ws, m, r, idx, n, 1, 0), dst);
}

// update_old_logp, of pi_old only with_old (and of pi_ref with ref).
static void old_logp(UpdateWorkspace *ws, Model *m, Model *ref, const Rollout *r, const int *idx,
                     int n, int micro, int with_old) {
    if (!with_old && !ref) return;
    int mb = forward_rows(ws, r, idx, n, micro);
    int passes = pass_count(n, mb), nt = pass_threads(m, passes);
    for (int pass = with_old ? 0 : 1; pass < (ref ? 2 : 1); pass++) {
        Model *src = pass ? ref : m;
        float *dst = pass ? r->logp_ref : r->logp_old;
        if (nt == 1) {
            for (int p = 0; p < passes; p++) logp_pass(ws, src, r, ws->rows + p * mb, pass_rows(n, mb, p), dst);
            continue;
        }
        pass_views(ws, m, nt);  // the workspaces
        Model **views = model_views(src, nt, 0);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
        {
            int t = omp_get_thread_num();
            for (int p = 0; p < passes; p++)
                if (pass_thread(p, nt) == t)
                    logp_pass(ws->part[t], views[t], r, ws->rows + p * mb, pass_rows(n, mb, p), dst);
        }
#endif
    }
}

void update_old_logp(UpdateWorkspace *ws, Model *m, Model *ref, const Rollout *r,
                     const int *idx, int n, int micro) {
    old_logp(ws, m, ref, r, idx, n, micro, 1);
}

// ---------------------------------------------------------------- the gradient

// Backward of dL/dlogp = -w (device, (n, T)) through the last forward.
static void backward_weights(UpdateWorkspace *ws, Model *m, const float *d_w, int n, int T) {
    size_t NT = (size_t)n * T;
    bk_copy(ws->bk, ws->d_dlogp, d_w, NT * sizeof(float));
    kn_scale(ws->bk, ws->d_dlogp, -1.0f, NT);
    model_backward(m, ws->d_dlogp, NULL);
}

// kn_token_weights' inputs for the rows idx[0..n) of the last forward (T positions), from
// the rollout to the device.
static void token_weight_inputs_upload(UpdateWorkspace *ws, const Rollout *r, const int *idx,
                                       int n, int T) {
    size_t NT = (size_t)n * T, fb = NT * sizeof(float), nb = (size_t)n * sizeof(float);
    memset(ws->old_h, 0, fb);
    memset(ws->ref_h, 0, fb);
    memset(ws->env_h, 0, NT);
    for (int k = 0; k < n; k++) {
        int i = idx[k];
        ws->adv_h[k] = r->advantage[i];
        ws->start_h[k] = r->prompt_len[i] - 1;
        ws->len_h[k] = r->resp_len[i];
        for (int t = 0; t < r->resp_len[i]; t++) {
            size_t p = token_pos(r, i, k, T, t);
            ws->old_h[p] = r->logp_old[r->tok_offset[i] + t];
            if (r->logp_ref) ws->ref_h[p] = r->logp_ref[r->tok_offset[i] + t];
            if (r->env) ws->env_h[p] = r->env[r->tok_offset[i] + t];
        }
    }
    bk_upload(ws->bk, ws->d_logp_old, ws->old_h, fb);
    if (r->logp_ref) bk_upload(ws->bk, ws->d_logp_ref, ws->ref_h, fb);
    if (r->env) bk_upload(ws->bk, ws->d_env, ws->env_h, NT);
    bk_upload(ws->bk, ws->d_adv, ws->adv_h, nb);
    bk_upload(ws->bk, ws->d_start, ws->start_h, (size_t)n * sizeof(int));
    bk_upload(ws->bk, ws->d_len, ws->len_h, (size_t)n * sizeof(int));
}

// kn_token_weights' outputs for n rows of T positions back to the host.
static void token_weight_outputs_download(UpdateWorkspace *ws, int n, int T, int with_kl) {
    Backend *bk = ws->bk;
    size_t fb = (size_t)n * T * sizeof(float);
    bk_download(bk, ws->w, ws->d_w, fb);
    bk_download(bk, ws->loss, ws->d_loss, fb);
    if (with_kl) bk_download(bk, ws->kl, ws->d_kl, fb);
    bk_download(bk, ws->coef, ws->d_coef, (size_t)n * sizeof(float));
    bk_download(bk, ws->clip_low, ws->d_clip_low, (size_t)n * sizeof(int));
    bk_download(bk, ws->clip_high, ws->d_clip_high, (size_t)n * sizeof(int));
}

// Forward of the rows idx[0..n) (a whole minibatch, or a micro-batch of one of M responses
// whose lengths sum to sum_len), with fill_old its log-probs into r->logp_old (the parameters
// are still pi_old's), their token weights (into weights, if not NULL), their
// statistics added to *s in row order, and the backward of dlogp = -w, accumulated into m's
// gradients.
static void rows_gradient(UpdateWorkspace *ws, Model *m, const ObjectiveConfig *oc,
                         const Rollout *r, const int *idx, int n, int M, double sum_len,
                         int fill_old, float *weights, MinibatchStats *s) {
    int T = minibatch_forward(ws, m, r, idx, n, 1, 1);
    if (fill_old) logp_to(ws, r, idx, n, T, r->logp_old);
    int with_kl = oc->beta != 0.0f;
    token_weight_inputs_upload(ws, r, idx, n, T);
    kn_token_weights(ws->bk, ws->d_w, ws->d_loss, with_kl ? ws->d_kl : NULL, ws->d_coef,
                     ws->d_clip_low, ws->d_clip_high, model_logp(m), ws->d_logp_old,
                     r->logp_ref ? ws->d_logp_ref : NULL, r->env ? ws->d_env : NULL, ws->d_adv,
                     ws->d_start, ws->d_len, n, T, M, sum_len, oc);
    // the step's statistics and the logged weights, summed on the host in row order
    token_weight_outputs_download(ws, n, T, with_kl);
    for (int k = 0; k < n; k++) {
        int i = idx[k];
        double gate_sum = 0;
        for (int t = 0; t < r->resp_len[i]; t++) {
            size_t p = token_pos(r, i, k, T, t);
            if (weights) weights[r->tok_offset[i] + t] = ws->w[p];
            // the environment's tokens are observations, not actions: not in the statistics
            if (r->env && r->env[r->tok_offset[i] + t]) continue;
            s->loss += (double)ws->coef[k] * ws->loss[p];
            if (with_kl) s->kl_sum += ws->kl[p];
            s->entropy_sum += ws->entropy[p];
            s->tokens++;
            s->abs_log_ratio_sum += fabs((double)ws->logp[p] - ws->old_h[p]);
            if (ws->adv_h[k] != 0.0f && ws->coef[k] != 0.0f) {
                gate_sum += (double)ws->w[p] / ((double)ws->coef[k] * ws->adv_h[k]);
                s->gate_tokens++;
            }
        }
        s->gate_sum += gate_sum;
        s->clipped_low += ws->clip_low[k];
        s->clipped_high += ws->clip_high[k];
        if (r->resp_clipped) r->resp_clipped[i] = ws->clip_low[k] + ws->clip_high[k];
        if (r->resp_gate_sum) r->resp_gate_sum[i] = gate_sum;
    }
    backward_weights(ws, m, ws->d_w, n, T);
}

// Backward of the unbiased policy gradient through the last forward, of the rows idx[0..n)
// in its (n, T) layout: weight unbiased_adv[i] on every policy token of response i (sum over
// tokens, no normalisation), accumulated into m's gradients.
static void unbiased_backward(UpdateWorkspace *ws, Model *m, const Rollout *r, const int *idx,
                              int n, int T, const float *unbiased_adv) {
    size_t NT = (size_t)n * T;
    float *w = ws->w;
    memset(w, 0, NT * sizeof(float));
    for (int k = 0; k < n; k++) {
        int i = idx[k];
        for (int t = 0; t < r->resp_len[i]; t++)
            if (!r->env || !r->env[r->tok_offset[i] + t]) w[token_pos(r, i, k, T, t)] = unbiased_adv[i];
    }
    bk_upload(ws->bk, ws->d_w, w, NT * sizeof(float));
    backward_weights(ws, m, ws->d_w, n, T);
}

// The cosine of the objective's gradient (in m, summed over the ranks) with the unbiased
// policy gradient over the same minibatch, whose passes (this rank's n rows) are ws->rows in
// runs of mb, run again one after another on m. The objective's gradient is left in m.
static double bias_cosine(UpdateWorkspace *ws, Model *m, const Rollout *r, int n, int mb,
                          const float *unbiased_adv) {
    size_t np = model_num_params(m);
    if (np != ws->n_params) die("update: the bias diagnostic needs a workspace made for it");
    bk_download(ws->bk, ws->g_obj, model_grads(m), np * sizeof(float));
    model_zero_grad(m);
    for (int p = 0; p < pass_count(n, mb); p++) {
        const int *pr = ws->rows + (size_t)p * mb;
        int nc = pass_rows(n, mb, p), T = minibatch_forward(ws, m, r, pr, nc, 0, 0);
        unbiased_backward(ws, m, r, pr, nc, T, unbiased_adv);
    }
    bk_download(ws->bk, ws->g_unb, model_grads(m), np * sizeof(float));
    dist_sum_float(ws->g_unb, np);  // the other ranks' rows of the minibatch
    bk_upload(ws->bk, model_grads(m), ws->g_obj, np * sizeof(float));
    double dot = 0, na = 0, nb = 0;
    for (size_t j = 0; j < np; j++) {
        dot += (double)ws->g_obj[j] * ws->g_unb[j];
        na += (double)ws->g_obj[j] * ws->g_obj[j];
        nb += (double)ws->g_unb[j] * ws->g_unb[j];
    }
    return na > 0 && nb > 0 ? dot / sqrt(na * nb) : NAN;
}

// The sum of the response lengths of the rows idx[0..n), in their order.
static double lengths_sum(const Rollout *r, const int *idx, int n) {
    double sum = 0;
    for (int k = 0; k < n; k++) sum += r->resp_len[idx[k]];
    return sum;
}

// The statistics of a minibatch summed over the ranks.
static void stats_sum(MinibatchStats *s) {
    double x[9] = {s->loss, s->kl_sum, s->entropy_sum, (double)s->tokens, (double)s->clipped_low,
                   (double)s->clipped_high, s->gate_sum, s->abs_log_ratio_sum, (double)s->gate_tokens};
    dist_sum_double(x, 9);
    *s = (MinibatchStats){.loss = x[0], .kl_sum = x[1], .entropy_sum = x[2],
                          .tokens = (long long)x[3], .clipped_low = (long long)x[4],
                          .clipped_high = (long long)x[5], .gate_sum = x[6],
                          .abs_log_ratio_sum = x[7], .gate_tokens = (long long)x[8]};
}

// The gradient of pass p (rows[p mb ..], passes in all) of a minibatch of M responses whose
// lengths sum to sum_len, on m and ws, added to m's gradients and its statistics to *s.
static void pass_gradient(UpdateWorkspace *ws, Model *m, const ObjectiveConfig *oc,
                          const Rollout *r, const int *rows, int n, int mb, int p, int M,
                          double sum_len, int fill_old, float *weights, MinibatchStats *s) {
    int passes = pass_count(n, mb), nc = pass_rows(n, mb, p);
    const int *pr = rows + (size_t)p * mb;
    double norm = sum_len;
    if (oc->scope == SCOPE_MICRO_BATCH) {  // each pass its own token-mean, averaged over passes
        norm = 0;
        for (int k = 0; k < nc; k++) norm += r->resp_len[pr[k]];
        norm *= passes;
    }
    rows_gradient(ws, m, oc, r, pr, nc, M, norm, fill_old, weights, s);
}

static void stats_add(MinibatchStats *s, const MinibatchStats *x) {
    s->loss += x->loss;
    s->kl_sum += x->kl_sum;
    s->entropy_sum += x->entropy_sum;
    s->tokens += x->tokens;
    s->clipped_low += x->clipped_low;
    s->clipped_high += x->clipped_high;
    s->gate_sum += x->gate_sum;
    s->abs_log_ratio_sum += x->abs_log_ratio_sum;
    s->gate_tokens += x->gate_tokens;
}

// update_minibatch_gradient of this rank's rows idx[0..n) of a minibatch of M responses
// whose lengths sum to sum_len; the gradients and statistics are then the whole minibatch's,
// summed over the ranks (with one rank: its own). fill_old: the forward passes also write
// the rows' r->logp_old (m holds pi_old), which update_old_logp would have computed in the
// same passes, bit for bit.
static double minibatch_gradient(UpdateWorkspace *ws, Model *m, const ObjectiveConfig *oc,
                                 const Rollout *r, const int *idx, int n, int M, double sum_len,
                                 int micro, int fill_old, float *weights,
                                 const float *unbiased_adv, MinibatchStats *st) {
    MinibatchStats s = {0};
    int mb = forward_rows(ws, r, idx, n, micro);
    int passes = pass_count(n, mb), nt = pass_threads(m, passes);
    if (nt == 1) {
        for (int p = 0; p < passes; p++)
            pass_gradient(ws, m, oc, r, ws->rows, n, mb, p, M, sum_len, fill_old, weights, &s);
    } else {
        Model **views = pass_views(ws, m, nt);
        MinibatchStats part[MODEL_MAX_VIEWS];
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
        {
            int t = omp_get_thread_num();
            part[t] = (MinibatchStats){0};
            model_zero_grad(views[t]);
            for (int p = 0; p < passes; p++)
                if (pass_thread(p, nt) == t)
                    pass_gradient(ws->part[t], views[t], oc, r, ws->rows, n, mb, p, M, sum_len, fill_old,
                                  weights, &part[t]);
        }
#endif
        for (int t = 0; t < nt; t++) {
            model_add_grads(m, views[t]);
            stats_add(&s, &part[t]);
        }
    }
    dist_sum_grads(ws->bk, model_grads(m), model_num_params(m));
    stats_sum(&s);
    double cosine = unbiased_adv ? bias_cosine(ws, m, r, n, mb, unbiased_adv) : NAN;
    if (st) *st = s;
    return cosine;
}

double update_minibatch_gradient(UpdateWorkspace *ws, Model *m, const ObjectiveConfig *oc,
                                 const Rollout *r, const int *idx, int n, int micro,
                                 float *weights, const float *unbiased_adv, MinibatchStats *st) {
    if (n <= 0) {
        if (st) *st = (MinibatchStats){0};
        return NAN;
    }
    // the aggregation's normalizers are the whole minibatch's
    return minibatch_gradient(ws, m, oc, r, idx, n, n, lengths_sum(r, idx, n), micro, 0, weights,
                              unbiased_adv, st);
}

// ---------------------------------------------------------------- PPO epochs

// Philox permutation of x (n) keyed by (seed, step, epoch): Fisher-Yates.
static void shuffle(int *x, int n, uint64_t seed, int step, int epoch) {
    uint64_t counter = (0x5348ull << 48) | ((uint64_t)(uint32_t)step << 16) | (uint64_t)(epoch & 0xffff);
    for (int i = n - 1; i > 0; i--) {
        uint32_t u = philox_draw(seed, counter, (uint32_t)i).v[0];
        int j = (int)((uint64_t)u * (uint64_t)(i + 1) >> 32);
        int t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}

// Epoch `epoch` of update_epochs over the kept responses: its shuffle into order, one AdamW
// step per minibatch, the sums into *out. The first epoch (0) fills the old log-probs and
// writes the token weights (weights, if not NULL); probe (or NULL) is run on the real epochs'
// first and last minibatches (last_epoch: this is the last of them).
static void update_epoch(UpdateWorkspace *ws, Model *m, Model *ref, const ObjectiveConfig *oc,
                         const AdamWConfig *opt, const EpochPlan *plan, const Rollout *r,
                         const int *kept, int n_kept, int *order, int epoch, int last_epoch,
                         float *weights, const float *unbiased, const MinibatchProbe *probe,
                         UpdateStats *out) {
    const int M = plan->minibatch;
    memcpy(order, kept, (size_t)n_kept * sizeof(int));
    shuffle(order, n_kept, plan->seed, plan->step, epoch);
    // pi_old of the first minibatch comes from its own forward passes, which run on pi_old's
    // parameters (as TRL with one iteration), unless the diagnostics compare objectives on
    // it first
    int first_fills = epoch == 0 && !probe;
    // each rank runs its own rows of a minibatch (dataparallel.h)
    if (epoch == 0)
        for (int k0 = 0; k0 < n_kept; k0 += M) {
            int nl = dp_select(order + k0, n_kept - k0 < M ? n_kept - k0 : M, r->n, ws->mine);
            old_logp(ws, m, ref, r, ws->mine, nl, plan->micro, !(first_fills && k0 == 0));
        }
    for (int k0 = 0; k0 < n_kept; k0 += M) {
        int n = n_kept - k0 < M ? n_kept - k0 : M;
        int diag = plan->bias_diagnostic && epoch == 0 && k0 == 0;
        if (probe && epoch == 0 && k0 == 0)  // same responses, parameters before the update
            probe->run(probe->ctx, UPDATE_PROBE_FIRST, ws, m, r, order + k0, n, plan->micro, unbiased);
        else if (probe && last_epoch && k0 + M >= n_kept)  // the policy has moved: rho != 1
            probe->run(probe->ctx, UPDATE_PROBE_LAST, ws, m, r, order + k0, n, plan->micro, unbiased);
        double sum_len = lengths_sum(r, order + k0, n);  // of the whole minibatch
        int nl = dp_select(order + k0, n, r->n, ws->mine);
        MinibatchStats st;
        model_zero_grad(m);
        double cs = minibatch_gradient(ws, m, oc, r, ws->mine, nl, n, sum_len, plan->micro,
                                       first_fills && k0 == 0, epoch == 0 ? weights : NULL,
                                       diag ? unbiased : NULL, &st);
        if (diag) out->cosine = cs;
        out->gnorm_sum += model_adamw_step(m, opt);
        out->loss_sum += st.loss;
        out->kl_sum += st.kl_sum;
        out->tokens += st.tokens;
        out->clipped_low += st.clipped_low;
        out->clipped_high += st.clipped_high;
        if (epoch == 0) {
            out->entropy_sum += st.entropy_sum;
            out->entropy_tokens += st.tokens;
        }
        out->n_updates++;
    }
}

void update_epochs(UpdateWorkspace *ws, Model *m, Model *ref, const ObjectiveConfig *oc,
                   const AdamWConfig *opt, const EpochPlan *plan, const Rollout *r,
                   const int *kept, int n_kept, int *order, float *weights,
                   const float *unbiased, UpdateStats *out) {
    memset(out, 0, sizeof *out);
    out->cosine = NAN;
    if (n_kept <= 0) return;
    for (int epoch = 0; epoch < plan->epochs; epoch++)
        update_epoch(ws, m, ref, oc, opt, plan, r, kept, n_kept, order, epoch,
                     epoch == plan->epochs - 1, weights, unbiased, plan->probe, out);
}

void update_extra_epoch(UpdateWorkspace *ws, Model *m, Model *ref, const ObjectiveConfig *oc,
                        const AdamWConfig *opt, const EpochPlan *plan, const Rollout *r,
                        const int *kept, int n_kept, int *order, int epoch, UpdateStats *out) {
    if (n_kept > 0)
        update_epoch(ws, m, ref, oc, opt, plan, r, kept, n_kept, order, epoch, 0, NULL, NULL, NULL,
                     out);
}
