// test_sampler.c: batched generation against the full forward, reproducibility and stops.
#include <math.h>
#include <omp.h>
#include <string.h>

#include "common.h"
#include "kernels/kernels.h"
#include "sim/model/sampler.h"
#include "test_util.h"

static Backend *bk;
static Model *model;

static int setup(void **state) {
    char err[256];
    bk = backend_create(BACKEND_CPU, err, sizeof err);
    ModelConfig c = model_config_default();
    c.vocab_size = 13;
    c.d_model = 16;
    c.n_heads = 2;
    c.n_kv_heads = 1;
    c.d_ff = 24;
    c.max_seq_len = 40;
    model = model_create(bk, &c);
    model_init_params(model, 5);
    float *p = model_params(model);
    for (size_t i = 0; i < model_num_params(model); i++) p[i] *= 20.0f;  // peaked distributions
    return 0;
}
static int teardown(void **state) {
    model_free(model);
    backend_destroy(bk);
    return 0;
}

enum { N = 5, TP = 6, BUDGET = 12 };
static const int plen[N] = {3, 6, 1, 4, 2};
static int prompts[N * TP];

static void make_prompts(void) {
    for (int i = 0; i < N * TP; i++) prompts[i] = 2 + (i * 5) % 11;
}

// log softmax(logits/temperature) of the token after seq[0..len-1], via the full forward
static double full_logprob(const int *seq, int len, int target) {
    int targets[40];
    int lens[1] = {len};
    for (int t = 0; t < len; t++) targets[t] = t == len - 1 ? target : -1;
    model_forward(model, seq, targets, lens, 1, len);
    float lp[40];
    bk_download(bk, lp, model_logp(model), (size_t)len * sizeof(float));
    return lp[len - 1];
}

static void check_against_forward(const SamplerConfig *sc, const Generation *g, int greedy) {
    const int V = model_config(model)->vocab_size;
    double worst = 0;
    for (int i = 0; i < N; i++) {
        int seq[40];
        memcpy(seq, prompts + i * TP, (size_t)plen[i] * sizeof(int));
        int len = plen[i];
        for (int t = 0; t < g->length[i]; t++) {
            int tok = g->tokens[i * g->max_new + t];
            double ref = full_logprob(seq, len, tok);
            double e = fabs(ref - g->logp[i * g->max_new + t]) / fmax(1.0, fabs(ref));
            if (e > worst) worst = e;
            if (greedy)  // the chosen token is the argmax of the full forward
                for (int v = 0; v < V; v++) assert_true(full_logprob(seq, len, v) <= ref + 1e-5);
            seq[len++] = tok;
        }
    }
    tu_check_rel(greedy ? "greedy: logp vs full forward" : "T=1: logp vs full forward", worst, 1e-5);
}

static void test_greedy_matches_forward(void **state) {
    make_prompts();
    SamplerConfig sc = {.temperature = 0, .top_p = 1, .max_new_tokens = BUDGET, .eos_token = 1,
                        .stop_token = -1, .seed = 3};
    Generation g;
    generation_alloc(&g, N, BUDGET);
    sampler_generate(model, &sc, prompts, plen, N, TP, 0, &g);
    check_against_forward(&sc, &g, 1);
    generation_free(&g);
}

static void test_sampling_logp_and_reproducibility(void **state) {
    make_prompts();
    SamplerConfig sc = {.temperature = 1, .top_p = 1, .max_new_tokens = BUDGET, .eos_token = 1,
                        .stop_token = 7, .seed = 9};
    Generation g, g1;
    generation_alloc(&g, N, BUDGET);
    generation_alloc(&g1, 1, BUDGET);
    sampler_generate(model, &sc, prompts, plen, N, TP, 100, &g);
    check_against_forward(&sc, &g, 0);
    // each sequence alone, with its own stream id, gives the same response
    for (int i = 0; i < N; i++) {
        sampler_generate(model, &sc, prompts + i * TP, plen + i, 1, TP, 100 + i, &g1);
        assert_int_equal(g1.length[0], g.length[i]);
        assert_int_equal(g1.stopped[0], g.stopped[i]);
        assert_memory_equal(g1.tokens, g.tokens + i * BUDGET, (size_t)g.length[i] * sizeof(int));
    }
    // stops: a stopped response ends with eos or the stop token and has nothing of them before
    int n_stopped = 0, n_trunc = 0;
    for (int i = 0; i < N; i++) {
        for (int t = 0; t < g.length[i] - 1; t++) {
            int tok = g.tokens[i * BUDGET + t];
            assert_true(tok != 1 && tok != 7);
        }
        int last = g.tokens[i * BUDGET + g.length[i] - 1];
        if (g.stopped[i]) {
            assert_true(last == 1 || last == 7);
            n_stopped++;
        } else {
            assert_int_equal(g.length[i], BUDGET);
            n_trunc++;
        }
    }
    printf("  %d stopped, %d truncated at the budget of %d\n", n_stopped, n_trunc, BUDGET);
    // another seed gives other samples
    sc.seed = 10;
    Generation g2;
    generation_alloc(&g2, N, BUDGET);
    sampler_generate(model, &sc, prompts, plen, N, TP, 100, &g2);
    int differ = 0;
    for (int i = 0; i < N * BUDGET; i++) differ |= g2.tokens[i] != g.tokens[i];
    assert_true(differ);
    generation_free(&g);
    generation_free(&g1);
    generation_free(&g2);
}

// a toy environment: after every policy token 4 it writes 9 then 10
static int toy_env(const int *tokens, int len, int *out, int cap) {
    (void)cap;
    if (tokens[len - 1] != 4) return 0;
    out[0] = 9;
    out[1] = 10;
    return 2;
}

static void test_environment_tokens(void **state) {
    make_prompts();
    enum { B2 = 30 };
    SamplerConfig sc = {.temperature = 1, .top_p = 1, .max_new_tokens = B2, .eos_token = 1,
                        .stop_token = -1, .seed = 21, .env = toy_env};
    Generation g;
    generation_alloc(&g, N, B2);
    for (int i = 0; i < N * B2; i++) g.env[i] = 7;  // poison: every flag must be written
    sampler_generate(model, &sc, prompts, plen, N, TP, 500, &g);
    int n_env = 0, n_fours = 0;
    for (int i = 0; i < N; i++)
        for (int t = 0; t < B2; t++) {
            const int *tk = g.tokens + i * B2;
            unsigned char e = g.env[i * B2 + t];
            assert_true(e == 0 || e == 1);
            if (t >= g.length[i]) {
                assert_int_equal(e, 0);
                continue;
            }
            // env tokens are exactly the two after each policy 4
            int want = (t >= 1 && tk[t - 1] == 4 && !g.env[i * B2 + t - 1]) ||
                       (t >= 2 && tk[t - 2] == 4 && !g.env[i * B2 + t - 2] && g.env[i * B2 + t - 1]);
            assert_int_equal(e, want);
            if (e) assert_int_equal(tk[t], tk[t - 1] == 4 ? 9 : 10);
            n_env += e;
            n_fours += tk[t] == 4 && !e;
        }
    printf("  %d policy tokens 4, %d environment tokens\n", n_fours, n_env);
    assert_true(n_env > 0);
    // the logp of every token, the environment's included, is the policy's (full forward)
    check_against_forward(&sc, &g, 0);
    // without an environment no token is flagged
    Generation g0;
    generation_alloc(&g0, N, B2);
    sc.env = NULL;
    sampler_generate(model, &sc, prompts, plen, N, TP, 500, &g0);
    for (int i = 0; i < N * B2; i++) assert_int_equal(g0.env[i], 0);
    generation_free(&g);
    generation_free(&g0);
}

// The prompts of the batch tests: n prompts of 1..T tokens (right-padded to T).
static void batch_prompts(int *pr, int *pl, int n, int T) {
    for (int i = 0; i < n; i++) {
        pl[i] = 1 + i % T;
        for (int t = 0; t < T; t++) pr[i * T + t] = 2 + (i * 7 + t * 5) % 11;
    }
}

// Two generations of the same n sequences agree bit for bit: lengths, stop flags, tokens,
// log-probs and the environment's marks.
static void assert_same_generation(const Generation *g, const Generation *ref, int n, int budget) {
    size_t cells = (size_t)n * budget;
    assert_memory_equal(g->length, ref->length, (size_t)n * sizeof(int));
    assert_memory_equal(g->stopped, ref->stopped, (size_t)n * sizeof(int));
    assert_memory_equal(g->tokens, ref->tokens, cells * sizeof(int));
    assert_memory_equal(g->logp, ref->logp, cells * sizeof(float));
    assert_memory_equal(g->env, ref->env, cells);
}

// The sampler of the batch tests: temperature 1 with toy_env's tokens, or greedy.
static SamplerConfig batch_sampler(int greedy, int budget) {
    return (SamplerConfig){.temperature = greedy ? 0.0f : 1.0f, .top_p = 1, .max_new_tokens = budget,
                           .eos_token = 1, .stop_token = 7, .seed = 31, .env = greedy ? NULL : toy_env};
}

// The decode batch shrinks as sequences stop (sampler.c): every response, flag and logp is
// the one of the full batch decoded to the end (no_compact), bit for bit, at temperature 1
// with an environment and greedily, and the compacted decode runs fewer rows.
static void test_compaction_matches_full_batch(void **state) {
    enum { NB = 3 * SAMPLER_MIN_ROWS + 5, TB = 6, BUDGET_C = 30 };
    int *pr = xmalloc(NB * TB * sizeof(int)), *pl = xmalloc(NB * sizeof(int));
    batch_prompts(pr, pl, NB, TB);
    for (int greedy = 0; greedy <= 1; greedy++) {
        SamplerConfig sc = batch_sampler(greedy, BUDGET_C);
        Generation g, ref;
        generation_alloc(&g, NB, BUDGET_C);
        generation_alloc(&ref, NB, BUDGET_C);
        sampler_generate(model, &sc, pr, pl, NB, TB, 900, &g);
        sc.no_compact = 1;
        sampler_generate(model, &sc, pr, pl, NB, TB, 900, &ref);
        assert_same_generation(&g, &ref, NB, BUDGET_C);
        int longest = 0, stopped = 0;
        for (int i = 0; i < NB; i++) {
            if (g.length[i] > longest) longest = g.length[i];
            stopped += g.stopped[i];
        }
        // the full batch decodes every row until the longest response's last token
        assert_int_equal(ref.decode_rows, (long)NB * (longest - 1));
        printf("  %s: %d of %d stopped, longest %d; rows decoded %ld, full batch %ld\n",
               greedy ? "greedy" : "T=1", stopped, NB, longest, g.decode_rows, ref.decode_rows);
        assert_true(g.decode_rows < ref.decode_rows);
        generation_free(&g);
        generation_free(&ref);
    }
    free(pr);
    free(pl);
}

// With the model's own decode products (model.c, cpu_decode_matmul) the decode batch
// compacts below SAMPLER_MIN_ROWS rows, down to its running rows: every response, flag and
// logp is that of the full batch decoded to the end on OpenBLAS (own products off,
// no_compact), bit for bit, at temperature 1 with an environment and greedily, on 1 and 2
// threads; and it decodes fewer rows than with OpenBLAS and its 32-row floor.
static void test_own_decode_products_match_openblas(void **state) {
    enum { NB = 3 * SAMPLER_MIN_ROWS + 5, TB = 6, BUDGET_C = 30 };
    int *pr = xmalloc(NB * TB * sizeof(int)), *pl = xmalloc(NB * sizeof(int));
    batch_prompts(pr, pl, NB, TB);
    int saved = omp_get_max_threads();
    for (int run = 0; run < 4; run++) {
        int threads = 1 + (run >> 1), greedy = run & 1;
        omp_set_num_threads(threads);
        SamplerConfig sc = batch_sampler(greedy, BUDGET_C);
        Generation own, floor32, ref;
        generation_alloc(&own, NB, BUDGET_C);
        generation_alloc(&floor32, NB, BUDGET_C);
        generation_alloc(&ref, NB, BUDGET_C);
        sampler_generate(model, &sc, pr, pl, NB, TB, 900, &own);
        // (the model itself decodes on 1 thread; on 2 its views do, as the first runs found)
        if (run == 0 && !model_decode_rows_free(model)) {
            printf("  skipped: this machine's OpenBLAS sums the test model's products otherwise\n");
            generation_free(&own), generation_free(&floor32), generation_free(&ref);
            break;
        }
        model_backend(model)->paths.decode_own_products = 0;
        sampler_generate(model, &sc, pr, pl, NB, TB, 900, &floor32);
        sc.no_compact = 1;
        sampler_generate(model, &sc, pr, pl, NB, TB, 900, &ref);
        model_backend(model)->paths.decode_own_products = 1;
        assert_same_generation(&own, &ref, NB, BUDGET_C);
        assert_same_generation(&floor32, &ref, NB, BUDGET_C);
        printf("  %d thread(s), %s: rows decoded %ld with the own products, %ld on OpenBLAS, %ld in "
               "the full batch\n", threads, greedy ? "greedy" : "T=1", own.decode_rows, floor32.decode_rows,
               ref.decode_rows);
        assert_true(own.decode_rows < floor32.decode_rows);
        generation_free(&own), generation_free(&floor32), generation_free(&ref);
    }
    omp_set_num_threads(saved);
    free(pr);
    free(pl);
}

// The n prompts pr (lengths pl, T wide) generated with the prefill sharing repeated prompts
// (share 1) or running every row (0).
static void generate_sharing(int share, const SamplerConfig *sc, const int *pr, const int *pl,
                             int n, int T, Generation *g) {
    generation_alloc(g, n, sc->max_new_tokens);
    model_backend(model)->paths.share_prompts = share;
    sampler_generate(model, sc, pr, pl, n, T, 700, g);
    model_backend(model)->paths.share_prompts = 1;
}

// Groups of responses share their prompt: the prefill runs each distinct prompt once and
// copies its keys, values and last residual to the rows that repeat it (model.c). Every
// response, flag and logp is the one of a prefill of every row, bit for bit, at temperature
// 1 with an environment and greedily, on one thread and on two, with the groups' rows in
// order and interleaved.
static void test_shared_prompts_match_every_row(void **state) {
    enum { G = 8, NP = 9, NB = G * NP, TB = 7, BUDGET_C = 30 };
    int *pr = xmalloc(NB * TB * sizeof(int)), *pl = xmalloc(NB * sizeof(int));
    int *one = xmalloc(NP * TB * sizeof(int)), *one_len = xmalloc(NP * sizeof(int));
    batch_prompts(one, one_len, NP, TB);
    int saved = omp_get_max_threads();
    // runs: rows in groups or interleaved, x 1 or 2 threads, x temperature 1 or greedy
    for (int run = 0; run < 8; run++) {
        int interleaved = run >> 2, threads = 1 + ((run >> 1) & 1), greedy = run & 1;
        for (int i = 0; i < NB; i++) {  // row i repeats prompt p: in groups, or p = i mod NP
            int p = interleaved ? i % NP : i / G;
            memcpy(pr + (size_t)i * TB, one + (size_t)p * TB, TB * sizeof(int));
            pl[i] = one_len[p];
        }
        SamplerConfig sc = batch_sampler(greedy, BUDGET_C);
        Generation shared, every;
        omp_set_num_threads(threads);
        generate_sharing(1, &sc, pr, pl, NB, TB, &shared);
        generate_sharing(0, &sc, pr, pl, NB, TB, &every);
        assert_same_generation(&shared, &every, NB, BUDGET_C);
        generation_free(&shared);
        generation_free(&every);
    }
    omp_set_num_threads(saved);
    printf("  %d prompts x %d rows, in groups and interleaved, 1 and 2 threads: the same responses\n", NP, G);
    free(pr);
    free(pl);
    free(one);
    free(one_len);
}

// A decode batch whose KV cache outgrows SamplerConfig.split_bytes runs on as two halves,
// one after the other (sampler.c): with a budget of one byte every batch of 64 running rows
// or more splits, and every response, flag and logp is the unsplit batch's bit for bit, at
// temperature 1 with an environment and greedily, on one thread and on two.
static void test_split_matches_whole_batch(void **state) {
    enum { NB = 6 * SAMPLER_MIN_ROWS + 5, TB = 6, BUDGET_C = 30 };
    int *pr = xmalloc(NB * TB * sizeof(int)), *pl = xmalloc(NB * sizeof(int));
    batch_prompts(pr, pl, NB, TB);
    int saved = omp_get_max_threads();
    for (int threads = 1; threads <= 2; threads++)
        for (int greedy = 0; greedy <= 1; greedy++) {
            SamplerConfig sc = batch_sampler(greedy, BUDGET_C);
            Generation g, ref;
            generation_alloc(&g, NB, BUDGET_C);
            generation_alloc(&ref, NB, BUDGET_C);
            omp_set_num_threads(threads);
            sampler_generate(model, &sc, pr, pl, NB, TB, 900, &ref);
            sc.split_bytes = 1;
            sampler_generate(model, &sc, pr, pl, NB, TB, 900, &g);
            omp_set_num_threads(saved);
            assert_int_equal(ref.splits, 0);
            // every thread's batch (197 rows, or 98 and 99) splits at its first step at least
            assert_true(g.splits >= threads);
            assert_same_generation(&g, &ref, NB, BUDGET_C);
            printf("  %s, %d thread(s): %d splits, same responses (rows decoded %ld, unsplit %ld)\n",
                   greedy ? "greedy" : "T=1", threads, g.splits, g.decode_rows, ref.decode_rows);
            generation_free(&g);
            generation_free(&ref);
        }
    free(pr);
    free(pl);
}

// On several threads the CPU sampler gives each thread a decode batch of its own, on a view
// of the model: every response is the one-thread batch's bit for bit, at both temperatures,
// and the views read the parameters in place (after a change of the parameters the threads
// agree again, on other responses).
static void test_threads_match_one_batch(void **state) {
    enum { NB = 3 * SAMPLER_MIN_ROWS + 5, TB = 6, BUDGET_C = 30 };
    int *pr = xmalloc(NB * TB * sizeof(int)), *pl = xmalloc(NB * sizeof(int));
    batch_prompts(pr, pl, NB, TB);
    int saved = omp_get_max_threads();
    float *p = model_params(model);
    size_t np = model_num_params(model);
    int *before = xmalloc((size_t)NB * BUDGET_C * sizeof(int));
    for (int round = 0; round < 2; round++) {
        for (int greedy = 0; greedy <= 1; greedy++) {
            SamplerConfig sc = batch_sampler(greedy, BUDGET_C);
            Generation g, ref;
            generation_alloc(&g, NB, BUDGET_C);
            generation_alloc(&ref, NB, BUDGET_C);
            omp_set_num_threads(1);
            sampler_generate(model, &sc, pr, pl, NB, TB, 900, &ref);
            omp_set_num_threads(3);  // three decode batches of 33-34 rows
            sampler_generate(model, &sc, pr, pl, NB, TB, 900, &g);
            omp_set_num_threads(saved);
            assert_same_generation(&g, &ref, NB, BUDGET_C);
            int env_tokens = 0;
            for (size_t k = 0; k < (size_t)NB * BUDGET_C; k++) env_tokens += g.env[k];
            printf("  %s, round %d: 3 threads = 1 thread over %d responses (%d environment tokens; rows "
                   "decoded %ld and %ld)\n", greedy ? "greedy" : "T=1", round, NB, env_tokens, g.decode_rows,
                   ref.decode_rows);
            if (!greedy && round == 0) memcpy(before, g.tokens, (size_t)NB * BUDGET_C * sizeof(int));
            if (!greedy && round == 1)  // the views saw the new parameters
                assert_memory_not_equal(before, g.tokens, (size_t)NB * BUDGET_C * sizeof(int));
            generation_free(&g);
            generation_free(&ref);
        }
        for (size_t i = 0; i < np; i++) p[i] *= round == 0 ? 0.5f : 2.0f;  // round 1 on other weights
    }
    free(before);
    free(pr);
    free(pl);
}

// Rows without a distribution (a NaN or +Inf logit, or no finite one) give token 0 and a NaN
// logp under every setting; finite rows beside them are unaffected (the -Inf row of a masked
// vocabulary is a distribution). Under ASan this also checks that no pick reads outside the row.
static void test_nonfinite_logits(void **state) {
    enum { R = 6, V = 13 };
    float z[R * V];
    for (int i = 0; i < R * V; i++) z[i] = (float)((i * 7) % 11) * 0.3f;
    z[0 * V + 4] = NAN;                                    // one NaN
    for (int v = 0; v < V; v++) z[1 * V + v] = NAN;        // all NaN
    z[2 * V + 9] = INFINITY;                               // +Inf
    for (int v = 0; v < V; v++) z[3 * V + v] = -INFINITY;  // nothing finite
    for (int v = 0; v < V; v++) z[4 * V + v] = v == 7 ? 2.0f : -INFINITY;  // masked: only 7
    // row 5: finite, a reference for the greedy pick
    uint64_t ctr[R];
    for (int r = 0; r < R; r++) ctr[r] = 100u + (uint64_t)r;
    const float temps[3] = {0.0f, 1.0f, 0.7f}, tops[3] = {1.0f, 1.0f, 0.5f};
    for (int k = 0; k < 3; k++) {
        int tok[R];
        float lp[R];
        kn_sample(bk, tok, lp, z, R, V, temps[k], tops[k], 42, ctr);
        for (int r = 0; r < 4; r++) {
            assert_int_equal(tok[r], 0);
            assert_true(isnan(lp[r]));
        }
        assert_int_equal(tok[4], 7);
        assert_true(fabsf(lp[4]) < 1e-6f);
        assert_true(tok[5] >= 0 && tok[5] < V && isfinite(lp[5]));
    }
}

static void test_budget_check(void **state) {
    char err[256];
    SamplerConfig sc = {.temperature = 1, .top_p = 1, .max_new_tokens = 38, .eos_token = 1,
                        .stop_token = -1, .seed = 1};
    assert_int_equal(sampler_fits(model, &sc, 2, err, sizeof err), 0);
    assert_int_equal(sampler_fits(model, &sc, 3, err, sizeof err), -1);
    assert_non_null(strstr(err, "model.max_seq_len = 40"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_matches_forward),
        cmocka_unit_test(test_sampling_logp_and_reproducibility),
        cmocka_unit_test(test_environment_tokens),
        cmocka_unit_test(test_compaction_matches_full_batch),
        cmocka_unit_test(test_own_decode_products_match_openblas),
        cmocka_unit_test(test_threads_match_one_batch),
        cmocka_unit_test(test_split_matches_whole_batch),
        cmocka_unit_test(test_shared_prompts_match_every_row),
        cmocka_unit_test(test_budget_check),
        cmocka_unit_test(test_nonfinite_logits),
    };
    return cmocka_run_group_tests_name("sampler", tests, setup, teardown);
}
