// test_train.c: the RL trainer. Same seed, same log; a resumed run equals the uninterrupted
// one (log and parameters); at rho = 1 the logged token weights are the presets' closed
// forms; Dr. GRPO's gradient is the unbiased gradient / (M L_max) against an explicit sum of
// per-response grad log pi; bad configs give exit code 2 with the key named.
// The fixture (train_fixture.h) makes the groups hold both rewards.
#include "train_fixture.h"
#include "sim/io/logschema.h"

// The parameters, AdamW moments and step count of two checkpoints are equal, bit for bit.
static void assert_same_checkpoints(const char *ck_a, const char *ck_b) {
    char err[512];
    ModelConfig mc = tiny_model_config();
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    Model *a = model_create(bk, &mc), *b = model_create(bk, &mc);
    assert_int_equal(checkpoint_load(ck_a, a, 1, err, sizeof err), 0);
    assert_int_equal(checkpoint_load(ck_b, b, 1, err, sizeof err), 0);
    size_t np = model_num_params(a);
    assert_int_equal(model_adam_step(b), model_adam_step(a));
    assert_memory_equal(model_params(a), model_params(b), np * sizeof(float));
    assert_memory_equal(model_adam_m(a), model_adam_m(b), np * sizeof(float));
    assert_memory_equal(model_adam_v(a), model_adam_v(b), np * sizeof(float));
    model_free(a);
    model_free(b);
    backend_destroy(bk);
}

static void test_same_seed_same_log(void **state) {
    const char *extra[] = {"train.steps=3", "train.eval_every=2"};
    Config *c = base_config(extra, 2);
    char a[160], b[160];
    snprintf(a, sizeof a, "%s/det_a.h5", dir);
    snprintf(b, sizeof b, "%s/det_b.h5", dir);
    run_ok(c, a, 0);
    run_ok(c, b, 0);
    assert_same_logs(a, b);
    // the CPU threads the run started with, on which its rounding depends (docs/kernels.md)
    char err[512];
    RunLogReader *rd = runlog_reader_open(a, err, sizeof err);
    if (!rd) fail_msg("%s", err);
    char *threads = runlog_read_attr_str(rd, "threads", err, sizeof err);
    if (!threads) fail_msg("%s", err);
    assert_int_equal(atoi(threads), omp_get_max_threads());
    free(threads);
    runlog_reader_close(rd);
    // the fixture makes the groups mixed, so the runs did update the policy
    int64_t n;
    double *mixed = col(a, "train/mixed_group_frac", &n), *rows = col(a, "eval/step", &n);
    assert_true(mixed[0] > 0);
    assert_int_equal(n, 3 * world_num_benchmarks());  // evals at steps 0, 2 and 3 (the end)
    free(mixed);
    free(rows);
    config_free(c);
}

static void test_resume_equals_uninterrupted(void **state) {
    const char *extra[] = {"train.eval_every=3"};
    Config *c4 = base_config(extra, 1);
    char full[160], part[160], ck_full[200], ck_part[200], err[512];
    snprintf(full, sizeof full, "%s/full.h5", dir);
    snprintf(part, sizeof part, "%s/part.h5", dir);
    run_ok(c4, full, 0);
    const char *extra2[] = {"train.eval_every=3", "train.steps=2"};
    Config *c2 = base_config(extra2, 2);
    run_ok(c2, part, 0);
    // a run "killed" after logging step 2 but before its checkpoint: resume from step 2's
    // checkpoint with the log one step ahead (its rows of step 2 are dropped and redone)
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cp %s.ckpt.h5 %s/step2.ckpt.h5", part, dir);
    assert_int_equal(system(cmd), 0);
    const char *extra3[] = {"train.eval_every=3", "train.steps=3"};
    Config *c3 = base_config(extra3, 2);
    run_ok(c3, part, 1);
    snprintf(cmd, sizeof cmd, "cp %s/step2.ckpt.h5 %s.ckpt.h5", dir, part);
    assert_int_equal(system(cmd), 0);
    int64_t n3;
    double *steps3 = col(part, "train/step", &n3);
    assert_int_equal(n3, 3);
    free(steps3);
    run_ok(c4, part, 1);
    assert_same_logs(full, part);
    config_free(c3);
    // and the same parameters and optimizer state
    snprintf(ck_full, sizeof ck_full, "%s.ckpt.h5", full);
    snprintf(ck_part, sizeof ck_part, "%s.ckpt.h5", part);
    assert_same_checkpoints(ck_full, ck_part);
    ModelConfig mc = tiny_model_config();
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    Model *a = model_create(bk, &mc), *init = model_create(bk, &mc);
    assert_int_equal(checkpoint_load(ck_full, a, 1, err, sizeof err), 0);
    assert_int_equal(checkpoint_load(model_path, init, 0, err, sizeof err), 0);
    assert_int_equal(model_adam_step(a), 4 * 8 / 4);
    assert_memory_not_equal(model_params(a), model_params(init), model_num_params(a) * sizeof(float));
    model_free(a);
    model_free(init);
    backend_destroy(bk);
    config_free(c4);
    config_free(c2);
}

// A run is resumed only with the config it was started with: other settings would mix two
// configs in one log under the first one's name. Threads, backend and a larger step count
// may change; the refusal leaves the log as it was.
static void test_resume_refuses_other_config(void **state) {
    const char *extra[] = {"train.steps=2"};
    Config *c = base_config(extra, 1);
    char path[160], msg[1024];
    snprintf(path, sizeof path, "%s/cfg.h5", dir);
    run_ok(c, path, 0);
    assert_int_equal(resume_compare_run_config(path, c, 0, msg, sizeof msg), 0);
    const char *other[] = {"train.steps=3", "optim.lr=1e-3"};
    Config *d = base_config(other, 2);
    assert_int_equal(resume_compare_run_config(path, d, 1, msg, sizeof msg), 1);
    printf("  %s\n", msg);
    assert_non_null(strstr(msg, "cfg.h5"));
    assert_non_null(strstr(msg, "optim.lr = 0.003 vs 0.001"));
    assert_null(strstr(msg, "train.steps"));  // more steps are allowed on resume
    assert_int_equal(train_run(d, NULL, path, 1, NULL), 2);
    int64_t n;
    free(col(path, "train/step", &n));
    assert_int_equal(n, 2);
    // fewer steps than the run was started with: refused too
    const char *fewer[] = {"train.steps=1"};
    Config *e = base_config(fewer, 1);
    assert_int_equal(resume_compare_run_config(path, e, 1, msg, sizeof msg), 1);
    assert_non_null(strstr(msg, "train.steps = 2 vs 1"));
    // without allow_more_steps (`grpolab config --against`) any other step count differs
    const char *more[] = {"train.steps=3", "run.threads=1", "run.backend=auto"};
    Config *f = base_config(more, 3);
    assert_int_equal(resume_compare_run_config(path, f, 0, msg, sizeof msg), 1);
    assert_non_null(strstr(msg, "train.steps = 2 vs 3"));
    // threads and backend are not compared; with the same settings the resumed run goes on
    assert_int_equal(resume_compare_run_config(path, f, 1, msg, sizeof msg), 0);
    run_ok(f, path, 1);
    free(col(path, "train/step", &n));
    assert_int_equal(n, 3);
    // the stored config is now the one the run went on with
    assert_int_equal(resume_compare_run_config(path, f, 0, msg, sizeof msg), 0);
    // a file that is no run log
    assert_int_equal(resume_compare_run_config(model_path, c, 0, msg, sizeof msg), -1);
    printf("  %s\n", msg);
    assert_non_null(strstr(msg, "not a grpolab run log"));
    config_free(c);
    config_free(d);
    config_free(e);
    config_free(f);
}

// A base model made again under the same path is noticed: the run log keeps a fingerprint of
// the weights it started from.
static void test_compare_detects_other_init(void **state) {
    char init[160], path[160], set_init[200], msg[1024], err[512], fp[17], fp2[17];
    snprintf(init, sizeof init, "%s/init_copy.h5", dir);
    snprintf(path, sizeof path, "%s/fp.h5", dir);
    snprintf(set_init, sizeof set_init, "train.init=%s", init);
    ModelConfig mc = tiny_model_config();
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    Model *m = model_create(bk, &mc);
    assert_int_equal(checkpoint_load(model_path, m, 0, err, sizeof err), 0);
    assert_int_equal(checkpoint_save(init, m, NULL, err, sizeof err), 0);
    assert_int_equal(resume_init_fingerprint(init, fp, err, sizeof err), 0);
    assert_int_equal(resume_init_fingerprint(model_path, fp2, err, sizeof err), 0);
    assert_string_equal(fp, fp2);  // the same weights in another file
    const char *extra[] = {"train.steps=1", set_init};
    Config *c = base_config(extra, 2);
    run_ok(c, path, 0);
    int64_t n;
    free(col(path, "train/step", &n));
    assert_int_equal(n, 1);
    assert_int_equal(resume_compare_run_config(path, c, 0, msg, sizeof msg), 0);
    model_params(m)[0] += 1e-3f;  // the base model made again: other weights, same path
    assert_int_equal(checkpoint_save(init, m, NULL, err, sizeof err), 0);
    assert_int_equal(resume_init_fingerprint(init, fp2, err, sizeof err), 0);
    assert_string_not_equal(fp, fp2);
    assert_int_equal(resume_compare_run_config(path, c, 0, msg, sizeof msg), 1);
    printf("  %s\n", msg);
    assert_non_null(strstr(msg, "other weights"));
    assert_non_null(strstr(msg, fp));
    assert_int_equal(train_run(c, NULL, path, 1, NULL), 2);  // nor is it resumed from them
    remove(init);  // and a train.init that is gone is an error, not "the same"
    assert_int_equal(resume_compare_run_config(path, c, 0, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "train.init"));
    model_free(m);
    backend_destroy(bk);
    config_free(c);
}

// At rho = 1 (one minibatch, M = P*G: every update is the first of its rollout, pi_old
// recomputed with the same parameters) the logged weights are the presets' closed forms.
static void test_closed_form_weights(void **state) {
    const char *presets[] = {"grpo", "dr_grpo", "dapo", "rloo"};
    const int M = P_TEST * G_TEST;
    for (int k = 0; k < 4; k++) {
        char pset[64], out[160];
        snprintf(pset, sizeof pset, "objective.preset=%s", presets[k]);
        const char *extra[] = {pset, "train.minibatch_size=8", "train.steps=2"};
        Config *c = base_config(extra, 3);
        snprintf(out, sizeof out, "%s/cf_%s.h5", dir, presets[k]);
        run_ok(c, out, 0);
        int64_t nr, nt, n;
        double *adv = col(out, "responses/advantage", &nr), *len = col(out, "responses/length", &n);
        double *off = col(out, "responses/token_offset", &n), *step = col(out, "responses/step", &n);
        double *w = col(out, "tokens/weight", &nt), *cos = col(out, "train/bias_cosine", &n);
        double max_err = 0;
        int nonzero = 0;
        for (int64_t i = 0; i < nr; i++) {
            double sum_len = 0;  // the response's minibatch is its step's rollout
            for (int64_t j = 0; j < nr; j++)
                if (step[j] == step[i]) sum_len += len[j];
            double expect = k == 0   ? adv[i] / (M * len[i])
                            : k == 1 ? adv[i] / (M * (double)BUDGET)
                            : k == 2 ? adv[i] / sum_len
                                     : adv[i] / M;
            nonzero += expect != 0;
            for (int t = 0; t < (int)len[i]; t++) {
                double got = w[(int64_t)off[i] + t];
                double e = fabs(got - expect) / (fabs(expect) > 1e-12 ? fabs(expect) : 1.0);
                if (e > max_err) max_err = e;
            }
        }
        assert_int_equal((int64_t)off[nr - 1] + (int64_t)len[nr - 1], nt);
        printf("  %-8s %lld responses (%d with A != 0), %lld tokens: ", presets[k], (long long)nr,
               nonzero, (long long)nt);
        tu_check_rel("weights vs closed form", max_err, 1e-6);
        assert_true(nonzero > 0);
        // Dr. GRPO with one minibatch is the unbiased gradient scaled: cosine 1
        if (k == 1)
            for (int s = 0; s < 2; s++)
                if (!isnan(cos[s])) tu_check_rel("dr_grpo bias_cosine vs 1", fabs(cos[s] - 1.0), 1e-4);
        free(adv);
        free(len);
        free(off);
        free(step);
        free(w);
        free(cos);
        config_free(c);
    }
}

// DAPO's dynamic sampling: groups whose rewards are all equal are left out of the update
// (weight 0, no old log-prob); the token-mean normaliser sums over the kept responses only.
static void test_dynamic_sampling(void **state) {
    const char *extra[] = {"objective.preset=dapo", "objective.dynamic_sampling=true",
                           "train.minibatch_size=8", "train.steps=3"};
    Config *c = base_config(extra, 4);
    char out[160];
    snprintf(out, sizeof out, "%s/ds.h5", dir);
    run_ok(c, out, 0);
    int64_t nr, nt, n;
    double *adv = col(out, "responses/advantage", &nr), *len = col(out, "responses/length", &n);
    double *off = col(out, "responses/token_offset", &n), *step = col(out, "responses/step", &n);
    double *q = col(out, "responses/question_index", &n), *rew = col(out, "responses/reward", &n);
    double *w = col(out, "tokens/weight", &nt), *lpo = col(out, "tokens/logp_old", &nt);
    int n_kept = 0, n_dropped = 0;
    double max_err = 0;
    for (int64_t i = 0; i < nr; i++) {
        int mixed = 0;  // the group of response i
        for (int64_t j = 0; j < nr; j++) mixed |= q[j] == q[i] && rew[j] != rew[i];
        double sum_len = 0;  // over the kept responses of its step
        for (int64_t j = 0; j < nr; j++) {
            int mixed_j = 0;
            for (int64_t k = 0; k < nr; k++) mixed_j |= q[k] == q[j] && rew[k] != rew[j];
            if (step[j] == step[i] && mixed_j) sum_len += len[j];
        }
        for (int t = 0; t < (int)len[i]; t++) {
            int64_t o = (int64_t)off[i] + t;
            if (!mixed) {
                assert_true(w[o] == 0.0 && isnan(lpo[o]));
            } else {
                double e = fabs(w[o] - adv[i] / sum_len) / fabs(adv[i] / sum_len);
                if (e > max_err) max_err = e;
                assert_false(isnan(lpo[o]));
            }
        }
        if (mixed) n_kept++;
        else n_dropped++;
    }
    printf("  %d responses kept, %d dropped: ", n_kept, n_dropped);
    tu_check_rel("kept weights vs A / sum of kept lengths", max_err, 1e-6);
    assert_true(n_kept > 0 && n_dropped > 0);
    free(adv);
    free(len);
    free(off);
    free(step);
    free(q);
    free(rew);
    free(w);
    free(lpo);
    config_free(c);
}

// At rho = 1 the Dr. GRPO gradient equals the unbiased gradient sum_i A_i grad sum_t log pi(o_it)
// times 1/(M L_max), the sum taken explicitly with one backward per response.
// with_env: every third response token counts as written by the environment; those get
// weight 0 and no gradient, the others keep their Dr. GRPO weight (|o| counts all tokens)
static void dr_grpo_gradient_check(int with_env) {
    char err[512];
    const Tokenizer *tk = tokenizer_default();
    ModelConfig mc = tiny_model_config();
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    Model *m = model_create(bk, &mc);
    assert_int_equal(checkpoint_load(model_path, m, 0, err, sizeof err), 0);
    enum { N = P_TEST * G_TEST };
    int seq[P_TEST][96], plen_p[P_TEST], len;
    int prompts[N * 96], plen[N], Tp = 1;
    for (int p = 0; p < P_TEST; p++) {
        tiny_policy_sequence(SEED, p, seq[p], &plen_p[p], &len);
        if (plen_p[p] > Tp) Tp = plen_p[p];
    }
    for (int i = 0; i < N; i++) {
        plen[i] = plen_p[i / G_TEST];
        for (int t = 0; t < Tp; t++) prompts[i * Tp + t] = t < plen[i] ? seq[i / G_TEST][t] : 0;
    }
    SamplerConfig sc = {.temperature = 1.0f, .top_p = 1.0f, .max_new_tokens = BUDGET,
                        .eos_token = TOK_EOS, .stop_token = template_stop_token(tk, TEMPLATE_R1), .seed = 3};
    Generation g;
    generation_alloc(&g, N, BUDGET);
    sampler_generate(m, &sc, prompts, plen, N, Tp, 0, &g);
    // rewards: correct or not (the fixture's questions)
    float rewards[N], adv[N];
    double wts[5] = {1, 1, 1, 1, 1};
    for (int i = 0; i < N; i++) {
        char text[512];
        Task t;
        world_train_task_mix(SEED, i / G_TEST, wts, &t);
        tok_decode(tk, g.tokens + i * g.max_new, g.length[i], text, sizeof text);
        Verdict v;
        verify_response(TEMPLATE_R1, &t, text, g.stopped[i], &v);
        rewards[i] = (float)v.reward;
    }
    ObjectiveConfig oc;
    assert_int_equal(objective_preset("dr_grpo", BUDGET, &oc), 0);
    kn_group_advantages(bk, adv, NULL, NULL, rewards, NULL, NULL, P_TEST, G_TEST, &oc);
    int nonzero = 0;
    for (int i = 0; i < N; i++) nonzero += adv[i] != 0;
    assert_true(nonzero > 0);
    const int *pp[N], *rp[N];
    int off[N], idx[N], ntok = 0;
    for (int i = 0; i < N; i++) {
        pp[i] = seq[i / G_TEST];
        rp[i] = g.tokens + i * g.max_new;
        off[i] = ntok;
        ntok += g.length[i];
        idx[i] = i;
    }
    float *logp_old = xmalloc((size_t)ntok * sizeof(float)), *w = xmalloc((size_t)ntok * sizeof(float));
    unsigned char *env = xcalloc((size_t)ntok, 1);
    int n_env = 0;
    for (int i = 0; i < N && with_env; i++)
        for (int t = 2; t < g.length[i]; t += 3) {
            env[off[i] + t] = 1;
            n_env++;
        }
    Rollout r = {.n = N, .prompt = pp, .prompt_len = plen, .resp = rp, .resp_len = g.length,
                 .advantage = adv, .tok_offset = off, .logp_old = logp_old, .logp_ref = NULL,
                 .env = with_env ? env : NULL};
    UpdateWorkspace *ws = update_workspace_create(m, N, 0);
    update_old_logp(ws, m, NULL, &r, idx, N, 0);
    size_t np = model_num_params(m);
    float *g_trainer = xmalloc(np * sizeof(float)), *g_ref = xcalloc(np, sizeof(float));
    float *g_i = xmalloc(np * sizeof(float));
    model_zero_grad(m);
    MinibatchStats st;
    update_minibatch_gradient(ws, m, &oc, &r, idx, N, 0, w, NULL, &st);
    bk_download(bk, g_trainer, model_grads(m), np * sizeof(float));
    assert_int_equal(st.clipped_low + st.clipped_high, 0);
    // explicit: -dL/dtheta = sum_i A_i / (M L_max) * grad sum_t log pi(o_it)
    for (int i = 0; i < N; i++) {
        int T = plen[i] + g.length[i] - 1, tokens[128], targets[128];
        for (int t = 0; t < T; t++) {
            tokens[t] = t < plen[i] ? pp[i][t] : rp[i][t - plen[i]];
            targets[t] = t + 1 >= plen[i] ? rp[i][t + 1 - plen[i]] : -1;
        }
        model_forward(m, tokens, targets, &T, 1, T);
        float dlogp[128];
        for (int t = 0; t < T; t++)  // d(sum_t log pi) over the policy's tokens
            dlogp[t] = targets[t] >= 0 && !env[off[i] + t + 1 - plen[i]] ? 1.0f : 0.0f;
        float *d = bk_alloc(bk, (size_t)T * sizeof(float));
        bk_upload(bk, d, dlogp, (size_t)T * sizeof(float));
        model_zero_grad(m);
        model_backward(m, d, NULL);  // grads = d(sum_t log pi)/dtheta
        bk_free(bk, d);
        bk_download(bk, g_i, model_grads(m), np * sizeof(float));
        double scale = (double)adv[i] / ((double)N * BUDGET);
        for (size_t j = 0; j < np; j++) g_ref[j] += (float)(scale * g_i[j]);
    }
    for (size_t j = 0; j < np; j++) g_trainer[j] = -g_trainer[j];  // dL/dtheta -> -dL/dtheta
    printf("  %d responses, %d with A != 0, %d tokens, %d of them the environment's\n", N,
           nonzero, ntok, n_env);
    for (int i = 0; i < N; i++)  // the logged weights: A_i / (M L_max), 0 on env tokens
        for (int t = 0; t < g.length[i]; t++) {
            double want = env[off[i] + t] ? 0.0 : (double)adv[i] / ((double)N * BUDGET);
            assert_true(fabs(w[off[i] + t] - want) <= 1e-6 * fabs(want) + 1e-12);
        }
    tu_check_rel(with_env ? "Dr. GRPO gradient, env tokens masked, vs the policy tokens' sum"
                          : "Dr. GRPO gradient vs sum_i A_i grad log pi / (M L_max)",
                 tu_rel_err(g_trainer, g_ref, np), 1e-4);
    // the clip counts are of the policy's tokens only: with pi_old shifted by +1 every token
    // has rho = e^-1 < 1 - eps_low (clipped where A < 0), with -1 rho = e > 1 + eps_high
    // (clipped where A > 0)
    for (int shift = 1; shift >= -1; shift -= 2) {
        int want_low = 0, want_high = 0;
        for (int i = 0; i < N; i++)
            for (int t = 0; t < g.length[i]; t++) {
                logp_old[off[i] + t] += (float)shift - (shift < 0 ? 1.0f : 0.0f);
                if (env[off[i] + t]) continue;
                if (shift > 0 && adv[i] < 0) want_low++;
                if (shift < 0 && adv[i] > 0) want_high++;
            }
        update_minibatch_gradient(ws, m, &oc, &r, idx, N, 0, NULL, NULL, &st);
        printf("  pi_old %+d: clipped %lld low / %lld high of %lld policy tokens\n", shift,
               st.clipped_low, st.clipped_high, (long long)st.tokens);
        assert_int_equal(st.clipped_low, want_low);
        assert_int_equal(st.clipped_high, want_high);
        assert_true(want_low + want_high > 0);
    }
    update_workspace_free(ws);
    free(env);
    free(logp_old);
    free(w);
    free(g_trainer);
    free(g_ref);
    free(g_i);
    generation_free(&g);
    model_free(m);
    backend_destroy(bk);
}

static void test_dr_grpo_gradient(void **state) { dr_grpo_gradient_check(0); }
static void test_env_tokens_masked(void **state) { dr_grpo_gradient_check(1); }

// Micro-batches (train.micro_batch) give the one-pass update up to rounding: on a fixed
// rollout of N responses of unequal prompt and response lengths (every fifth response token
// the environment's), per objective, with pi_old shifted off pi_theta so that the clip binds
// on both sides, and for GRPO with a reference model and a KL term: old and reference
// log-probs, logged token weights, gradients, the bias cosine and the statistics of
// train_minibatch_gradient with micro = 3 (passes of 3, 3 and 2 responses) against micro = 0.
static void test_micro_batches_equal_one_pass(void **state) {
    enum { N = 8, PMAX = 12, RMAX = 40 };
    char err[256];
    ModelConfig mc = tiny_model_config();
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    assert_non_null(bk);
    Model *m = model_create(bk, &mc), *ref = model_create(bk, &mc);
    model_init_params(m, 5);
    model_init_params(ref, 6);
    int prompt[N][PMAX], resp[N][RMAX], plen[N], rlen[N], off[N], idx[N], ntok = 0;
    const int *pp[N], *rp[N];
    float adv[N], unbiased[N];
    int V = mc.vocab_size;
    for (int i = 0; i < N; i++) {
        plen[i] = 4 + (i * 5) % (PMAX - 4);
        rlen[i] = 1 + (i * 17 + 3) % RMAX;
        for (int t = 0; t < plen[i]; t++) prompt[i][t] = 2 + (i * 7 + t * 3) % (V - 2);
        for (int t = 0; t < rlen[i]; t++) resp[i][t] = 2 + (i * 11 + t * 5) % (V - 2);
        pp[i] = prompt[i];
        rp[i] = resp[i];
        off[i] = ntok;
        ntok += rlen[i];
        idx[i] = (i * 3) % N;  // a shuffled minibatch: 0 3 6 1 4 7 2 5
        adv[i] = (float)(i % 3) - 1.0f + 0.25f * (float)i / N;
        unbiased[i] = 0.5f * adv[i] + 0.1f;
    }
    unsigned char env[N * RMAX] = {0};
    for (int j = 4; j < ntok; j += 5) env[j] = 1;
    size_t np = model_num_params(m);
    UpdateWorkspace *ws = update_workspace_create(m, N, 1);
    const char *presets[] = {"grpo", "dr_grpo", "dapo", "rloo", "grpo"};
    for (int p = 0; p < 5; p++) {
        int with_ref = p == 4;
        ObjectiveConfig oc;
        assert_int_equal(objective_preset(presets[p], RMAX, &oc), 0);
        if (with_ref) oc.beta = 0.05f;
        float old[2][N * RMAX], lref[2][N * RMAX], w[2][N * RMAX], old0[N * RMAX], *g[2];
        MinibatchStats st[2];
        double cos[2];
        for (int pass = 0; pass < 2; pass++) {
            int micro = pass ? 3 : 0;
            Rollout r = {.n = N, .prompt = pp, .prompt_len = plen, .resp = rp, .resp_len = rlen,
                         .advantage = adv, .tok_offset = off, .logp_old = old[pass],
                         .logp_ref = with_ref ? lref[pass] : NULL, .env = env};
            update_old_logp(ws, m, with_ref ? ref : NULL, &r, idx, N, micro);
            if (!pass) memcpy(old0, old[0], (size_t)ntok * sizeof(float));
            if (pass) {
                tu_check_rel("old log-probs, micro-batches vs one pass",
                             tu_rel_err(old[1], old0, (size_t)ntok), 1e-5);
                if (with_ref)
                    tu_check_rel("ref log-probs, micro-batches vs one pass",
                                 tu_rel_err(lref[1], lref[0], (size_t)ntok), 1e-5);
            }
            for (int j = 0; j < ntok; j++)  // pi_old off pi_theta: ratios e^-0.4 .. e^0.4
                old[pass][j] += 0.8f * (float)((j * 37) % 101) / 100.0f - 0.4f;
            model_zero_grad(m);
            cos[pass] = update_minibatch_gradient(ws, m, &oc, &r, idx, N, micro, w[pass],
                                                  unbiased, &st[pass]);
            g[pass] = xmalloc(np * sizeof(float));
            bk_download(bk, g[pass], model_grads(m), np * sizeof(float));
        }
        printf("  %s%s: %lld tokens, clipped %lld low / %lld high; loss %.6g / %.6g, cosine "
               "%.6f / %.6f (one pass / micro-batches of 3)\n", presets[p],
               with_ref ? " with KL" : "", st[0].tokens, st[0].clipped_low, st[0].clipped_high,
               st[0].loss, st[1].loss, cos[0], cos[1]);
        assert_true(st[0].tokens == st[1].tokens && st[0].tokens < ntok);
        assert_true(st[0].clipped_low == st[1].clipped_low && st[0].clipped_high == st[1].clipped_high);
        assert_true(st[0].clipped_low > 0 && st[0].clipped_high > 0);
        tu_check_rel("token weights", tu_rel_err(w[1], w[0], (size_t)ntok), 1e-5);
        tu_check_rel("gradients", tu_rel_err(g[1], g[0], np), 1e-5);
        tu_check_rel("loss", tu_rel_err_d(&st[1].loss, &st[0].loss, 1), 1e-5);
        tu_check_rel("entropy sum", tu_rel_err_d(&st[1].entropy_sum, &st[0].entropy_sum, 1), 1e-5);
        if (with_ref) tu_check_rel("KL sum", tu_rel_err_d(&st[1].kl_sum, &st[0].kl_sum, 1), 1e-5);
        tu_check_rel("bias cosine", tu_rel_err_d(&cos[1], &cos[0], 1), 1e-5);
        free(g[0]);
        free(g[1]);
    }
    update_workspace_free(ws);
    model_free(m);
    model_free(ref);
    backend_destroy(bk);
}

static void test_bad_configs(void **state) {
    char out[4096], args[1024];
    struct {
        const char *set, *needle;
    } cases[] = {
        {"objective.preset=ppo", "objective.preset"},
        {"train.group_size=1", "train.group_size"},
        {"train.minibatch_size=3", "train.minibatch_size = 3: must divide"},
        {"objective.eps_low=1.5", "objective.eps_low"},
        {"objective.eps_high=-0.1", "objective.eps_high"},
        {"train.temperature=0", "train.temperature"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "train --set train.init=%s --set run.backend=cpu --set "
                 "train.prompts_per_step=2 --set train.group_size=4 --set train.minibatch_size=4 "
                 "--set %s --out %s/bad.h5", model_path, cases[i].set, dir);
        int rc = tu_run_cli(args, out, sizeof out);
        printf("  --set %s -> exit %d: %s", cases[i].set, rc, out);
        assert_int_equal(rc, 2);
        if (!strstr(out, cases[i].needle)) fail_msg("message lacks '%s'", cases[i].needle);
    }
    // through the library: train_run's own checks return 2
    const char *extra[] = {"train.minibatch_size=3"};
    Config *c = base_config(extra, 1);
    char path[160];
    snprintf(path, sizeof path, "%s/bad2.h5", dir);
    assert_int_equal(train_run(c, NULL, path, 0, NULL), 2);
    config_free(c);
    // an evaluation whose prompts do not fit the context with the budget (the tiny model has 96
    // positions) is refused before the log exists, not cut short by a die() at step 0's eval
    const char *no_room[] = {"train.eval_every=2", "world.max_new_tokens=90"};
    c = base_config(no_room, 2);
    snprintf(path, sizeof path, "%s/no_room.h5", dir);
    assert_int_equal(train_run(c, NULL, path, 0, NULL), 2);
    assert_int_equal(access(path, F_OK), -1);
    config_free(c);
    // --resume without a checkpoint
    snprintf(args, sizeof args, "train --set train.init=%s --set run.backend=cpu --out %s/none.h5 --resume",
             model_path, dir);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    printf("  --resume without checkpoint: %s", out);
    // an existing run log is never replaced without --overwrite
    char existing[200];
    snprintf(existing, sizeof existing, "%s/exists.h5", dir);
    FILE *f = fopen(existing, "w");
    assert_non_null(f);
    fputs("a finished run\n", f);
    fclose(f);
    snprintf(args, sizeof args, "train --set train.init=%s --set run.backend=cpu --out %s", model_path,
             existing);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    printf("  existing log: %s", out);
    assert_non_null(strstr(out, "already exists"));
    f = fopen(existing, "r");
    char line[64] = "";
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_string_equal(line, "a finished run\n");
}

// kn_token_weights with an environment mask on the CPU gives exactly what the trainer had
// before the mask moved into the op: the unmasked op's outputs with w, loss and kl set to 0 on
// the masked tokens, and the clip counts less the masked tokens that ppo_clipped flags, bit for
// bit; coef is unchanged (masked tokens still count in |o|).
static void test_token_weight_mask(void **state) {
    enum { n = 6, T = 48 };  // responses up to position 17 + 25
    char err[256];
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    assert_non_null(bk);
    int start[n], len[n];
    float logp[n * T], old[n * T], ref[n * T], adv[n], u[n * T];
    unsigned char mask[n * T];
    tu_fill_uniform(logp, n * T, 71, -5, -0.05f);
    tu_fill_uniform(ref, n * T, 72, -5, -0.05f);
    tu_fill_uniform(old, n * T, 73, -0.4f, 0.4f);  // ratios e^-0.4 .. e^0.4: the clip binds
    tu_fill_uniform(adv, n, 74, -2, 2);
    tu_fill_uniform(u, n * T, 75, 0, 1);
    double sum_len = 0;
    for (int k = 0; k < n; k++) {
        start[k] = 2 + 3 * k;
        len[k] = 5 + 4 * k;
        sum_len += len[k];
    }
    for (int j = 0; j < n * T; j++) {
        old[j] += logp[j];
        mask[j] = u[j] < 0.3f;
    }
    const char *presets[] = {"grpo", "dr_grpo", "dapo", "rloo"};
    for (int p = 0; p < 4; p++) {
        ObjectiveConfig oc;
        assert_int_equal(objective_preset(presets[p], 64, &oc), 0);
        oc.beta = 0.04f;
        float w0[n * T], l0[n * T], kl0[n * T], c0[n], w1[n * T], l1[n * T], kl1[n * T], c1[n];
        int lo0[n], hi0[n], lo1[n], hi1[n], n_masked = 0, n_clipped_masked = 0;
        kn_token_weights(bk, w0, l0, kl0, c0, lo0, hi0, logp, old, ref, NULL, adv, start, len, n,
                         T, n, sum_len, &oc);
        kn_token_weights(bk, w1, l1, kl1, c1, lo1, hi1, logp, old, ref, mask, adv, start, len, n,
                         T, n, sum_len, &oc);
        for (int k = 0; k < n; k++) {
            for (int t = start[k]; t < start[k] + len[k]; t++) {
                int j = k * T + t;
                if (!mask[j]) {
                    assert_memory_equal(&w1[j], &w0[j], sizeof(float));
                    assert_memory_equal(&l1[j], &l0[j], sizeof(float));
                    assert_memory_equal(&kl1[j], &kl0[j], sizeof(float));
                    continue;
                }
                assert_true(w1[j] == 0.0f && l1[j] == 0.0f && kl1[j] == 0.0f);
                n_masked++;
                if (ppo_clipped(adv[k], expf(logp[j] - old[j]), oc.eps_low, oc.eps_high, oc.clip_ratio_c)) {
                    n_clipped_masked++;
                    if (adv[k] < 0) lo0[k]--;
                    else hi0[k]--;
                }
            }
            assert_memory_equal(&c1[k], &c0[k], sizeof(float));
            assert_int_equal(lo1[k], lo0[k]);
            assert_int_equal(hi1[k], hi0[k]);
        }
        printf("  %s: %d masked tokens, %d of them clipped, left out of the counts\n", presets[p],
               n_masked, n_clipped_masked);
        assert_true(n_masked > 0 && n_clipped_masked > 0);
    }
    backend_destroy(bk);
}

// diagnostics.compare: the training is the same as without it (every column of /train but
// the wall times, /responses, /tokens, and the last checkpoint's parameters and AdamW state,
// bit for bit), with two extra passes (the second runs an epoch on the model and undoes it);
// /compare has a row per step, point and compared objective; at rho = 1 every gate is 1, no
// token is clipped and the ratio-level variants give their token-level twin's gradient
// (gspo, gmpo, sapo: grpo's; cispo: dapo's); off it the policy has moved and gspo's clip
// departs from grpo's; the trained objective's row repeats /train/bias_cosine; `grpolab plot
// objectives` draws it; an unknown preset is an error.
static void test_compare_diagnostics(void **state) {
    const char *extra_on[] = {"train.steps=3", "train.micro_batch=3", "train.bias_diagnostic=true", "optim.lr=3e-4",
                              "diagnostics.compare=dr_grpo,grpo,dapo,gspo,gmpo,cispo,sapo,remax",
                              "diagnostics.compare_extra_epochs=2"};
    const char *extra_off[] = {"train.steps=3", "train.micro_batch=3", "train.bias_diagnostic=true",
                               "optim.lr=3e-4"};
    Config *on = base_config(extra_on, 6), *off = base_config(extra_off, 4);
    char a[160], b[160], err[512];
    snprintf(a, sizeof a, "%s/compare_on.h5", dir);
    snprintf(b, sizeof b, "%s/compare_off.h5", dir);
    run_ok(on, a, 0);
    run_ok(off, b, 0);
    assert_same_table(a, b, "train", TRAIN_DET, sizeof TRAIN_DET / sizeof *TRAIN_DET);
    assert_same_table(a, b, "responses", RESPONSE_COLS, sizeof RESPONSE_COLS / sizeof *RESPONSE_COLS);
    assert_same_table(a, b, "tokens", TOKEN_COLS, sizeof TOKEN_COLS / sizeof *TOKEN_COLS);
    char ck_a[200], ck_b[200];  // the parameters the run ends with
    snprintf(ck_a, sizeof ck_a, "%s.ckpt.h5", a);
    snprintf(ck_b, sizeof ck_b, "%s.ckpt.h5", b);
    assert_same_checkpoints(ck_a, ck_b);
    enum { NO = 8, NP = 4, GRPO = 1, DAPO = 2, GSPO = 3, GMPO = 4, CISPO = 5, SAPO = 6 };
    int64_t n, nb, nt;
    double *step = col(a, "compare/step", &n), *point = col(a, "compare/point", &n);
    double *obj = col(a, "compare/objective", &n), *cs = col(a, "compare/bias_cosine", &n);
    double *gn = col(a, "compare/grad_norm", &n), *gate = col(a, "compare/gate_mean", &n);
    double *lo = col(a, "compare/clip_frac_low", &n), *hi = col(a, "compare/clip_frac_high", &n);
    double *alr = col(a, "compare/abs_log_ratio", &n);
    double *tc = col(a, "train/bias_cosine", &nt), *bins = col(a, "compare_bins/point", &nb);
    assert_int_equal(n, 3 * NP * NO);
    assert_int_equal(nb, 3 * NP * NO * 8);
    int with_value = 0, gspo_apart = 0, moved = 0;
    for (int64_t r = 0; r < n; r++) {
        int p = (int)point[r], j = (int)obj[r];
        assert_int_equal((int)step[r], (int)(r / (NP * NO)));
        assert_int_equal(p, (int)(r / NO % NP));
        assert_int_equal(j, (int)(r % NO));
        assert_int_equal((int)bins[r * 8], p);
        with_value += isfinite(cs[r]) && gn[r] > 0;
        if (p == COMPARE_POINT_RHO1) {
            if (j == GRPO) {  // the trained objective: the gradient of /train/bias_cosine
                double x = cs[r], y = tc[(int)step[r]];
                assert_true((isnan(x) && isnan(y)) || fabs(x - y) <= 1e-6);
            }
            assert_true(alr[r] == 0.0 && lo[r] == 0.0 && hi[r] == 0.0);
            if (isfinite(gate[r])) assert_true(fabs(gate[r] - 1.0) < 1e-6);
            int twin = j == GSPO || j == GMPO || j == SAPO ? GRPO : j == CISPO ? DAPO : -1;
            if (twin >= 0) {
                int64_t q = r - j + twin;
                assert_true((isnan(cs[r]) && isnan(cs[q])) || fabs(cs[r] - cs[q]) <= 1e-6);
                assert_true(fabs(gn[r] - gn[q]) <= 1e-6 * gn[q]);
            }
            continue;
        }
        // the policy has moved: the points after rho = 1 (the update has two minibatches)
        assert_true(isfinite(alr[r]) && alr[r] >= 0);
        moved += alr[r] > 0;
        if (j == GSPO) gspo_apart += hi[r] + lo[r] > 0 && fabs(gate[r] - gate[r - GSPO + GRPO]) > 1e-3;
    }
    printf("  %d rows with a gradient, %d off-policy rows, gspo apart from grpo in %d of %d\n",
           with_value, moved, gspo_apart, 3 * (NP - 1));
    // every step whose groups have a signal (the trained objective's cosine is a number) has
    // a gradient at every point for all but gspo (whose clip may stop every token off
    // rho = 1) and remax (whose greedy baseline may equal every reward)
    int signal = 0;
    for (int k = 0; k < 3; k++) signal += isfinite(tc[k]);
    assert_true(signal >= 1);
    assert_true(with_value >= signal * NP * (NO - 2));
    assert_true(moved >= NO);
    assert_true(gspo_apart > 0);
    RunLogReader *rd = runlog_reader_open(a, err, sizeof err);
    if (!rd) fail_msg("%s", err);
    char *names = runlog_read_attr_str(rd, "diagnostics.compare", err, sizeof err);
    assert_non_null(names);
    assert_string_equal(names, "dr_grpo,grpo,dapo,gspo,gmpo,cispo,sapo,remax");
    free(names);
    runlog_reader_close(rd);
    rd = runlog_reader_open(b, err, sizeof err);
    assert_false(runlog_reader_has(rd, "compare/step"));
    runlog_reader_close(rd);
    char args[512], out[4096], dat[256];
    snprintf(args, sizeof args, "plot objectives %s -o %s/objectives --format png", a, dir);
    if (tu_run_cli(args, out, sizeof out) != 0) fail_msg("%s: %s", args, out);
    snprintf(dat, sizeof dat, "%s/objectives_data/compare_gspo_p3.dat", dir);
    FILE *f = fopen(dat, "r");
    assert_non_null(f);
    fclose(f);
    snprintf(args, sizeof args, "plot objectives %s -o %s/none --format png", b, dir);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 1);  // no /compare: an error, no empty figure
    assert_non_null(strstr(out, "diagnostics.compare"));
    free(step), free(point), free(obj), free(cs), free(gn), free(gate), free(lo), free(hi);
    free(alr), free(tc), free(bins);
    config_free(on);
    config_free(off);
    // an unknown preset names the key and the value
    const char *bad[] = {"diagnostics.compare=grpo,ppo"};
    Config *c = base_config(bad, 1);
    TrainStats st;
    assert_int_equal(train_run(c, NULL, a, 0, &st), 2);
    config_free(c);
}

// Every objective preset trains end to end: two steps of each (micro-batches of 2, so that
// bnpo's micro-batch scope and the sequence-level ratios run through the split passes; remax
// makes its greedy rollout), with finite losses and gradient norms and the preset's knobs in
// the run log's attributes.
static void test_every_preset_trains(void **state) {
    for (int k = 0; k < objective_preset_count(); k++) {
        ObjectiveConfig o;
        const ObjectiveInfo *info = objective_preset_info(k, &o);
        char set[64], out[160], err[512];
        snprintf(set, sizeof set, "objective.preset=%s", info->name);
        const char *extra[] = {set, "train.steps=2", "train.micro_batch=2", "train.checkpoint_every=0"};
        Config *c = base_config(extra, 4);
        snprintf(out, sizeof out, "%s/preset_%s.h5", dir, info->name);
        run_ok(c, out, 0);
        int64_t n;
        double *loss = col(out, "train/loss", &n), *gn = col(out, "train/grad_norm", &n);
        assert_int_equal(n, 2);
        double gsum = 0;
        for (int i = 0; i < n; i++) {
            assert_true(isfinite(loss[i]) && isfinite(gn[i]));
            gsum += gn[i];
        }
        RunLogReader *rd = runlog_reader_open(out, err, sizeof err);
        if (!rd) fail_msg("%s", err);
        char *ratio = runlog_read_attr_str(rd, "objective.ratio", err, sizeof err);
        char *clip = runlog_read_attr_str(rd, "objective.clip", err, sizeof err);
        assert_non_null(ratio);
        assert_non_null(clip);
        assert_string_equal(ratio, ratio_name(o.ratio));
        assert_string_equal(clip, clip_name(o.clip));
        runlog_reader_close(rd);
        printf("  %-22s loss %.4g %.4g, grad norm %.3g %.3g (ratio %s, clip %s)\n", info->name,
               loss[0], loss[1], gn[0], gn[1], ratio, clip);
        assert_true(gsum > 0);
        free(ratio);
        free(clip);
        free(loss);
        free(gn);
        config_free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_weight_mask),
        cmocka_unit_test(test_closed_form_weights),
        cmocka_unit_test(test_dynamic_sampling),
        cmocka_unit_test(test_dr_grpo_gradient),
        cmocka_unit_test(test_env_tokens_masked),
        cmocka_unit_test(test_micro_batches_equal_one_pass),
        cmocka_unit_test(test_same_seed_same_log),
        cmocka_unit_test(test_resume_equals_uninterrupted),
        cmocka_unit_test(test_resume_refuses_other_config),
        cmocka_unit_test(test_compare_detects_other_init),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_every_preset_trains),
        cmocka_unit_test(test_compare_diagnostics),
    };
    return cmocka_run_group_tests_name("train", tests, setup, teardown);
}
