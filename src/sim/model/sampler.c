#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../common.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void generation_alloc(Generation *g, int n, int max_new) {
    g->n = n;
    g->max_new = max_new;
    g->length = xcalloc((size_t)n, sizeof(int));
    g->stopped = xcalloc((size_t)n, sizeof(int));
    g->tokens = xcalloc((size_t)n * max_new, sizeof(int));
    g->logp = xcalloc((size_t)n * max_new, sizeof(float));
    g->env = xcalloc((size_t)n * max_new, 1);
}

void generation_free(Generation *g) {
    free(g->length);
    free(g->stopped);
    free(g->tokens);
    free(g->logp);
    free(g->env);
    memset(g, 0, sizeof *g);
}

int sampler_fits(const Model *m, const SamplerConfig *sc, int prompt_len, char *err, size_t errlen) {
    int max_len = model_config(m)->max_seq_len;
    if (prompt_len + sc->max_new_tokens > max_len)
        return set_err(err, errlen,
                       "a prompt of %d tokens plus max_new_tokens = %d exceeds model.max_seq_len = %d",
                       prompt_len, sc->max_new_tokens, max_len);
    return 0;
}

// log softmax(row / temperature)[tok] (temperature 0: of row itself), kn_sample's logp
static float row_logp(const float *row, int V, float temperature, int tok) {
    float inv = temperature > 0 ? 1.0f / temperature : 1.0f, mx = row[0] * inv;
    for (int v = 1; v < V; v++) mx = fmaxf(mx, row[v] * inv);
    double z = 0;
    for (int v = 0; v < V; v++) z += exp((double)(row[v] * inv - mx));
    return (float)((double)(row[tok] * inv - mx) - log(z));
}

// Whether row r of the decode batch holds a sequence that has not stopped (seq[r] = -1: empty).
static int row_running(const int *seq, const int *active, int r) {
    return seq[r] >= 0 && active[seq[r]];
}

// Rows a split set aside (generate_rows): their sequences and next tokens, their rows of the
// KV cache (ascending), and the step whose token they decode next.
typedef struct {
    int n, t;
    int *seq, *tok, *row;
} ParkedRows;

// The KV cache bytes a decode step reads for the running rows of the batch after step t.
static double running_cache_bytes(const Model *m, const int *seq, const int *active, const int *prompt_len,
                                  int B, int t) {
    double per_pos = (double)model_kv_position_bytes(m), sum = 0;
    for (int r = 0; r < B; r++)
        if (row_running(seq, active, r)) sum += (double)(prompt_len[seq[r]] + t + 1) * per_pos;
    return sum;
}

// The batch's running rows, ascending, into rows; returns their count.
static int running_rows(const int *seq, const int *active, int B, int *rows) {
    int k = 0;
    for (int r = 0; r < B; r++)
        if (row_running(seq, active, r)) rows[k++] = r;
    return k;
}

// Makes rows[0..k) (ascending) the first k rows of a batch of nb, with their sequences and
// next tokens; rows k..nb-1 are empty.
static void rows_to_front(Model *m, int *seq, int *tok, const int *rows, int k, int nb) {
    for (int j = 0; j < k; j++) {  // rows[j] >= j, so no row is read after it is written
        tok[j] = tok[rows[j]];
        seq[j] = seq[rows[j]];
    }
    for (int j = k; j < nb; j++) seq[j] = -1;
    model_decode_compact(m, rows, k, nb);
}

// The generation of sequences [0, n) into out's rows [0, n): one decode batch on m, split
// into halves as its KV cache grows (SamplerConfig.split_bytes).
static void generate_rows(Model *m, const SamplerConfig *sc, const int *prompts, const int *prompt_len,
                          int n, int T, uint64_t seq_id0, Generation *out) {
    Backend *bk = model_backend(m);
    int V = model_config(m)->vocab_size;
    model_kv_alloc(m, n);
    float *logits = bk_alloc(bk, (size_t)n * V * sizeof(float));
    float *d_logp = bk_alloc(bk, (size_t)n * sizeof(float));
    int *d_tok = bk_alloc(bk, (size_t)n * sizeof(int));
    uint64_t *d_ctr = bk_alloc(bk, (size_t)n * sizeof(uint64_t));
    uint64_t *ctr = xmalloc((size_t)n * sizeof(uint64_t));
    // Row r of the decode batch holds sequence seq[r] (-1: an empty row). Rows start as the
    // sequences; once an eighth of the rows have stopped, the batch is compacted (below).
    int *tok = xmalloc((size_t)n * sizeof(int)), *active = xmalloc((size_t)n * sizeof(int));
    int *seq = xmalloc((size_t)n * sizeof(int)), *row_on = xmalloc((size_t)n * sizeof(int));
    float *lp = xmalloc((size_t)n * sizeof(float));
    // the environment's pending tokens per sequence, and the logits on the host for their logp
    int *pend = xmalloc((size_t)n * SAMPLER_ENV_MAX * sizeof(int));
    int *n_pend = xcalloc((size_t)n, sizeof(int)), *at_pend = xcalloc((size_t)n, sizeof(int));
    float *logits_h = sc->env ? xmalloc((size_t)n * V * sizeof(float)) : NULL;
    for (int i = 0; i < n; i++) {
        out->length[i] = 0;
        out->stopped[i] = 0;
        active[i] = 1;
        seq[i] = i;
    }
    out->decode_rows = 0;
    out->splits = 0;
    // A batch whose running rows read more than split_bytes of KV cache per step runs on as
    // two: the first half of its running rows to the end, then the second, parked meanwhile
    // (LIFO, so a half that splits again finishes both its quarters first). Each half reads
    // half the cache per step, which the CPU's caches can hold where the whole did not. On
    // OpenBLAS's products a half keeps SAMPLER_MIN_ROWS rows or more, so its responses are
    // the whole batch's bit for bit (below); the own decode products keep them at any rows,
    // and a half keeps SAMPLER_MIN_SPLIT_ROWS. A GPU wants the whole batch at once: a backend
    // splits where its paths.split_decode says so (the CPU's).
    double split = bk->paths.split_decode ? (double)sc->split_bytes : 0;
    ParkedRows park[32];
    int n_park = 0;
    model_prefill(m, prompts, prompt_len, n, T, logits);
    int n_active = sc->max_new_tokens > 0 ? n : 0, B = n;
    for (int t = 0; n_active > 0;) {
        for (int r = 0; r < B; r++)  // an empty row draws from sequence 0's stream, unused
            ctr[r] = ((seq_id0 + (uint64_t)(seq[r] < 0 ? 0 : seq[r])) << 24) | (uint64_t)t;
        bk_upload(bk, d_ctr, ctr, (size_t)B * sizeof(uint64_t));
        kn_sample(bk, d_tok, d_logp, logits, B, V, sc->temperature, sc->top_p, sc->seed, d_ctr);
        bk_download(bk, tok, d_tok, (size_t)B * sizeof(int));
        bk_download(bk, lp, d_logp, (size_t)B * sizeof(float));
        int any_env = 0;
        for (int r = 0; r < B; r++)
            any_env |= row_running(seq, active, r) && at_pend[seq[r]] < n_pend[seq[r]];
        if (any_env) bk_download(bk, logits_h, logits, (size_t)B * V * sizeof(float));
        for (int r = 0; r < B; r++) {
            if (!row_running(seq, active, r)) continue;
            int i = seq[r];
            size_t o = (size_t)i * out->max_new + t;
            if (at_pend[i] < n_pend[i]) {  // the environment's token replaces the draw
                tok[r] = pend[i * SAMPLER_ENV_MAX + at_pend[i]++];
                lp[r] = row_logp(logits_h + (size_t)r * V, V, sc->temperature, tok[r]);
                out->env[o] = 1;
            }
            out->tokens[o] = tok[r];
            out->logp[o] = lp[r];
            out->length[i] = t + 1;
            if (sc->env && !out->env[o] && tok[r] != sc->eos_token && tok[r] != sc->stop_token) {
                int k = sc->env(out->tokens + (size_t)i * out->max_new, t + 1,
                                pend + i * SAMPLER_ENV_MAX, SAMPLER_ENV_MAX);
                if (k < 0 || k > SAMPLER_ENV_MAX)
                    die("sampler: the environment returned %d tokens (0..%d allowed)", k,
                        SAMPLER_ENV_MAX);
                n_pend[i] = k;
                at_pend[i] = 0;
            }
            if (tok[r] == sc->eos_token || (sc->stop_token >= 0 && tok[r] == sc->stop_token)) {
                out->stopped[i] = 1;
                active[i] = 0;
                n_active--;
            }
        }
        if (n_active == 0 || t + 1 >= sc->max_new_tokens) {  // this batch is done
            // (the last token of the budget needs no forward pass)
            if (n_park == 0) break;
            ParkedRows *pk = &park[--n_park];  // its rows move to the front and go on
            model_decode_compact(m, pk->row, pk->n, pk->n);
            memcpy(seq, pk->seq, (size_t)pk->n * sizeof(int));
            memcpy(tok, pk->tok, (size_t)pk->n * sizeof(int));
            B = n_active = pk->n;
            t = pk->t;
            free(pk->seq);
            free(pk->tok);
            free(pk->row);
        } else if (!sc->no_compact) {
            // Once an eighth of the rows have stopped, the running sequences move to the front
            // and the batch shrinks to them. With OpenBLAS's products not below
            // SAMPLER_MIN_ROWS rows: a small row count can make sgemm round a row otherwise,
            // and above it a response is that of the full batch bit for bit (docs/kernels.md,
            // "Determinism"; tests/test_sampler.c). The model's own decode products round a
            // row alike at any count (model_decode_rows_free), so with them down to the
            // running rows. Moving the rows copies their KV cache, so not at every stop.
            int rows_free = model_decode_rows_free(m), least = rows_free ? 1 : SAMPLER_MIN_ROWS;
            int least_half = rows_free ? SAMPLER_MIN_SPLIT_ROWS : SAMPLER_MIN_ROWS;
            if (B > least && n_active <= B - B / 8) {
                int nb = n_active > least ? n_active : least;
                rows_to_front(m, seq, tok, row_on, running_rows(seq, active, B, row_on), nb);
                B = nb;
            }
            if (split > 0 && n_active >= 2 * least_half && n_park < (int)(sizeof park / sizeof *park) &&
                running_cache_bytes(m, seq, active, prompt_len, B, t) > split) {
                int k = running_rows(seq, active, B, row_on), h = k / 2;
                // the second half waits in its rows, which the first half's never reach:
                // they lie above row_on[h - 1] >= h - 1, and the first half moves to [0, h)
                ParkedRows *pk = &park[n_park++];
                pk->n = k - h;
                pk->t = t;
                pk->seq = xmalloc((size_t)pk->n * sizeof(int));
                pk->tok = xmalloc((size_t)pk->n * sizeof(int));
                pk->row = xmalloc((size_t)pk->n * sizeof(int));
                for (int j = 0; j < pk->n; j++) {
                    pk->row[j] = row_on[h + j];
                    pk->seq[j] = seq[row_on[h + j]];
                    pk->tok[j] = tok[row_on[h + j]];
                }
                rows_to_front(m, seq, tok, row_on, h, h);
                B = n_active = h;
                out->splits++;
            }
        }
        for (int r = 0; r < B; r++) row_on[r] = row_running(seq, active, r);
        model_decode_step(m, tok, row_on, logits);
        out->decode_rows += B;
        t++;
    }
    free(ctr);
    free(tok);
    free(active);
    free(seq);
    free(row_on);
    free(lp);
    free(pend);
    free(n_pend);
    free(at_pend);
    free(logits_h);
    bk_free(bk, logits);
    bk_free(bk, d_logp);
    bk_free(bk, d_tok);
    bk_free(bk, d_ctr);
}

// How many threads decode at once: on the CPU each takes a decode batch of its own (at least
// SAMPLER_MIN_ROWS rows, so its rows round as in one batch of all), with every kernel inside
// it on one thread.
static int decode_threads(const Model *m, int n) { return model_view_threads(m, n / SAMPLER_MIN_ROWS); }

void sampler_generate(Model *m, const SamplerConfig *sc, const int *prompts, const int *prompt_len,
                      int n, int T, uint64_t seq_id0, Generation *out) {
    if (n < 1) return;
    if (out->n < n || out->max_new < sc->max_new_tokens)
        die("sampler_generate: generation buffer too small (%d x %d for %d x %d)", out->n,
            out->max_new, n, sc->max_new_tokens);
    char err[256];
    for (int i = 0; i < n; i++)
        if (sampler_fits(m, sc, prompt_len[i], err, sizeof err) != 0) die("sampler: %s", err);
    memset(out->env, 0, (size_t)out->n * out->max_new);
    int nt = decode_threads(m, n);
    if (nt == 1) {
        generate_rows(m, sc, prompts, prompt_len, n, T, seq_id0, out);
        return;
    }
#ifdef _OPENMP
    // Thread t decodes the contiguous sequences [n t / nt, n (t + 1) / nt) on a view of m: a
    // response is the one of a single batch bit for bit (its rows never fewer than
    // SAMPLER_MIN_ROWS; tests/test_sampler.c), and the kernels' own parallel regions, nested,
    // run on one thread, as does OpenBLAS inside a parallel region.
    Model **views = model_views(m, nt, 0);
    long rows = 0;
    int splits = 0;
#pragma omp parallel num_threads(nt) reduction(+ : rows, splits)
    {
        int t = omp_get_thread_num(), i0 = (int)((long)n * t / nt), i1 = (int)((long)n * (t + 1) / nt);
        size_t o = (size_t)i0 * out->max_new;
        Generation part = {.n = i1 - i0, .max_new = out->max_new, .length = out->length + i0,
                           .stopped = out->stopped + i0, .tokens = out->tokens + o,
                           .logp = out->logp + o, .env = out->env + o};
        generate_rows(views[t], sc, prompts + (size_t)i0 * T, prompt_len + i0, i1 - i0, T,
                      seq_id0 + (uint64_t)i0, &part);
        rows += part.decode_rows;
        splits += part.splits;
    }
    out->decode_rows = rows;
    out->splits = splits;
#endif
}
