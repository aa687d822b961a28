// dataparallel.c: the data-parallel step (dataparallel.h) on the collectives of dist.h.
#include "dataparallel.h"

#include <stdlib.h>

#include "../../common.h"
#include "dist.h"

int dp_check(int P, char *err, size_t errlen) {
    int R = dist_size();
    if (P % R != 0)
        return set_err(err, errlen, "train.prompts_per_step = %d does not split over %d ranks "
                       "in whole groups: use a multiple of %d, or a number of ranks that divides %d",
                       P, R, R, P);
    return 0;
}

// Rank r's share [*i0, *i1) of n.
static void share_of(int n, int r, int *i0, int *i1) {
    int R = dist_size();
    *i0 = (int)((int64_t)n * r / R);
    *i1 = (int)((int64_t)n * (r + 1) / R);
}

void dp_share(int n, int *i0, int *i1) { share_of(n, dist_rank(), i0, i1); }

int dp_select(const int *idx, int n, int N, int *mine) {
    int i0, i1, k = 0;
    dp_share(N, &i0, &i1);
    for (int j = 0; j < n; j++)
        if (idx[j] >= i0 && idx[j] < i1) mine[k++] = idx[j];
    return k;
}

void dp_generate(Model *m, const SamplerConfig *sc, const int *prompts, const int *prompt_len,
                 int N, int T, uint64_t seq_id0, Generation *gen) {
    int i0, i1;
    dp_share(N, &i0, &i1);
    const size_t nl = (size_t)(i1 - i0), W = (size_t)gen->max_new;
    Generation part = *gen;  // this rank's rows of gen
    part.n = (int)nl;
    part.length += i0;
    part.stopped += i0;
    part.tokens += (size_t)i0 * W;
    part.logp += (size_t)i0 * W;
    part.env += (size_t)i0 * W;
    sampler_generate(m, sc, prompts + (size_t)i0 * T, prompt_len + i0, (int)nl, T,
                     seq_id0 + (uint64_t)i0, &part);
    // equal shares (dp_check), so rank r's rows are block r of each array
    dist_allgather(gen->length, nl * sizeof(int));
    dist_allgather(gen->stopped, nl * sizeof(int));
    dist_allgather(gen->tokens, nl * W * sizeof(int));
    dist_allgather(gen->logp, nl * W * sizeof(float));
    dist_allgather(gen->env, nl * W);
}

void dp_gather_tokens(float *x, const int *tok_off, int N, int n_tok) {
    int R = dist_size();
    if (R == 1) return;
    size_t *off = xmalloc((size_t)R * sizeof(size_t)), *cnt = xmalloc((size_t)R * sizeof(size_t));
    for (int r = 0; r < R; r++) {
        int i0, i1;
        share_of(N, r, &i0, &i1);
        int t0 = tok_off[i0], t1 = i1 < N ? tok_off[i1] : n_tok;
        off[r] = (size_t)t0 * sizeof(float);
        cnt[r] = (size_t)(t1 - t0) * sizeof(float);
    }
    dist_gather(x, off, cnt);
    free(off);
    free(cnt);
}
