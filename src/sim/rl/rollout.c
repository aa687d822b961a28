// rollout.c: sampling and scoring one RL step (rollout.h).
#include "rollout.h"

#include <math.h>
#include <string.h>

#include "../../common.h"
#include "../parallel/dataparallel.h"

int rollout_collect(TrainState *s, const TrainSettings *S, Model *m, const Tokenizer *tk,
                    const SamplerConfig *sc, int step, char *err, size_t errlen) {
    const int P = S->P, G = S->G, N = P * G, cap = model_config(m)->max_seq_len;
    char text[1024];
    int Tp = 1;
    for (int p = 0; p < P; p++) {
        if (S->question_set) world_question_set_task(S->question_set, S->seed, (int64_t)step * P + p, &s->tasks[p]);
        else world_train_task_mix(S->seed, (int64_t)step * P + p, S->level_weights, &s->tasks[p]);
        if (template_prompt(S->template_kind, &s->tasks[p], text, sizeof text) < 0)
            die("train: prompt of '%s' does not fit", s->tasks[p].question);
        s->plen_p[p] = tok_encode(tk, text, s->prompt_ids + (size_t)p * cap, cap, err, errlen);
        if (s->plen_p[p] < 0) die("train: cannot tokenize prompt '%s': %s", text, err);
        if (sampler_fits(m, sc, s->plen_p[p], err, errlen) != 0) {
            size_t used = strlen(err);
            snprintf(err + used, errlen - used, " (lower world.max_new_tokens)");
            return 2;
        }
        if (s->plen_p[p] > Tp) Tp = s->plen_p[p];
    }
    for (int i = 0; i < N; i++) {
        int p = i / G;
        s->plen[i] = s->plen_p[p];
        memset(s->prompts + (size_t)i * Tp, 0, (size_t)Tp * sizeof(int));
        memcpy(s->prompts + (size_t)i * Tp, s->prompt_ids + (size_t)p * cap,
               (size_t)s->plen_p[p] * sizeof(int));
        s->prompt_ptr[i] = s->prompt_ids + (size_t)p * cap;
    }
    // each rank samples its share, gathered on every rank (one process: all of them)
    dp_generate(m, sc, s->prompts, s->plen, N, Tp, (uint64_t)step * N, &s->gen);
    return 0;
}

void rollout_greedy(TrainState *s, const TrainSettings *S, Model *m, const Tokenizer *tk,
                    const SamplerConfig *sc) {
    const int P = S->P;
    int Tp = 1;
    for (int p = 0; p < P; p++) Tp = s->plen_p[p] > Tp ? s->plen_p[p] : Tp;
    const int cap = model_config(m)->max_seq_len;
    for (int p = 0; p < P; p++) {
        memset(s->greedy_prompts + (size_t)p * Tp, 0, (size_t)Tp * sizeof(int));
        memcpy(s->greedy_prompts + (size_t)p * Tp, s->prompt_ids + (size_t)p * cap,
               (size_t)s->plen_p[p] * sizeof(int));
    }
    SamplerConfig greedy = *sc;
    greedy.temperature = 0.0f;  // argmax: no random draws, so the stream ids do not matter
    greedy.top_p = 1.0f;
    sampler_generate(m, &greedy, s->greedy_prompts, s->plen_p, P, Tp, 0, &s->gen_greedy);
    for (int p = 0; p < P; p++) {
        const int *toks = s->gen_greedy.tokens + (size_t)p * s->gen_greedy.max_new;
        if (tok_decode(tk, toks, s->gen_greedy.length[p], s->resp_text, (size_t)S->max_new * 16 + 16) < 0)
            die("train: cannot decode a greedy response");
        Verdict v;
        verify_response(S->template_kind, &s->tasks[p], s->resp_text, s->gen_greedy.stopped[p], &v);
        verdict_apply_rule(&v, s->resp_text, S->reward_rule);
        s->greedy_reward[p] = (float)v.reward;
    }
}

void rollout_score(TrainState *s, const TrainSettings *S, const Tokenizer *tk, int step) {
    const int N = S->P * S->G;
    RolloutStats *rs = &s->rs;
    memset(rs, 0, sizeof *rs);
    for (int i = 0; i < N; i++) {
        const int *toks = s->gen.tokens + (size_t)i * s->gen.max_new;
        int len = s->gen.length[i];
        Verdict *v = &s->verd[i];
        s->resp_ptr[i] = toks;
        if (tok_decode(tk, toks, len, s->resp_text, (size_t)S->max_new * 16 + 16) < 0)
            die("train: cannot decode a response");
        verify_response(S->template_kind, &s->tasks[i / S->G], s->resp_text, s->gen.stopped[i], v);
        verdict_apply_rule(v, s->resp_text, S->reward_rule);
        s->rewards[i] = (float)v->reward;
        s->tok_off[i] = rs->n_tok;
        memcpy(s->tok_env + rs->n_tok, s->gen.env + (size_t)i * s->gen.max_new, (size_t)len);
        rs->n_tok += len;
        rs->len_sum += len;
        rs->reward_sum += s->rewards[i];
        if (v->reward) {
            rs->n_correct++;
            rs->len_correct += len;
        } else {
            rs->len_incorrect += len;
        }
        rs->n_trunc += v->truncated;
        rs->n_loop += v->looped;
        rs->n_dis += v->disagreement;
        rs->n_check += v->self_checked;
    }
    for (int j = 0; j < rs->n_tok; j++) {
        s->weights[j] = 0.0f;
        s->tok_step[j] = step;
        s->logp_old[j] = NAN;
    }
}

void rollout_advantages(TrainState *s, const TrainSettings *S, Backend *bk,
                        const ObjectiveConfig *oc) {
    const int P = S->P, G = S->G, N = P * G;
    // the verifier's rewards come from the host; the advantages and group statistics go back
    // for the minibatches and the log
    bk_upload(bk, s->d_rewards, s->rewards, (size_t)N * sizeof(float));
    bk_upload(bk, s->d_lengths, s->gen.length, (size_t)N * sizeof(int));
    int greedy = oc->baseline == BASELINE_GREEDY;  // rollout_greedy filled s->greedy_reward
    if (greedy || s->cmp.needs_greedy) bk_upload(bk, s->d_greedy, s->greedy_reward, (size_t)P * sizeof(float));
    kn_group_advantages(bk, s->d_adv, s->d_gmean, s->d_gstd, s->d_rewards, s->d_lengths,
                        greedy ? s->d_greedy : NULL, P, G, oc);
    bk_download(bk, s->adv, s->d_adv, (size_t)N * sizeof(float));
    bk_download(bk, s->gmean, s->d_gmean, (size_t)P * sizeof(float));
    bk_download(bk, s->gstd, s->d_gstd, (size_t)P * sizeof(float));
    s->rs.n_kept = s->rs.n_mixed = 0;
    for (int p = 0; p < P; p++) {
        int mixed = 0;
        for (int g = 1; g < G; g++) mixed |= s->rewards[p * G + g] != s->rewards[p * G];
        s->rs.n_mixed += mixed;
        for (int g = 0; g < G; g++) {
            int i = p * G + g;
            s->unbiased[i] = s->rewards[i] - s->gmean[p];
            if (mixed || !oc->dynamic_sampling) s->kept[s->rs.n_kept++] = i;
        }
    }
}

Rollout rollout_view(TrainState *s, int with_env) {
    return (Rollout){.n = s->gen.n, .prompt = s->prompt_ptr, .prompt_len = s->plen,
                     .resp = s->resp_ptr, .resp_len = s->gen.length, .advantage = s->adv,
                     .tok_offset = s->tok_off, .logp_old = s->logp_old, .logp_ref = s->logp_ref,
                     .env = with_env ? s->tok_env : NULL};
}
