// test_pretrain_eval.c: a short pretraining run lowers the loss and writes a checkpoint with
// the vocabulary; eval on that tiny model fills the table and the HDF5 datasets consistently,
// with several samples per question too;
// the commands reject bad arguments with exit code 2 and a message.
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "sim/model/checkpoint.h"
#include "sim/rl/evaluate.h"
#include "sim/rl/pretrain.h"
#include "sim/io/runlog.h"
#include "sim/rl/setup.h"
#include "sim/world/template.h"
#include "test_util.h"

// The pretrain cases write to a path of their own, not to the config's data/models/base.h5,
// which may exist in a working tree (an existing output is refused before the config is).
#define NO_OUT_PATH "/tmp/grpolab-test-cli-errors-never-written.h5"
#define NO_OUT "--out " NO_OUT_PATH

static char dir[64], model_path[128];

static Config *tiny_config(void) {
    char err[512];
    Config *c = config_new();
    const char *sets[] = {"model.vocab_size=58", "model.d_model=32", "model.n_layers=1", "model.n_heads=2",
                          "model.n_kv_heads=1", "model.d_ff=64", "pretrain.steps=40",
                          "pretrain.batch_size=8", "pretrain.micro_batch=4",
                          "pretrain.warmup_steps=5", "pretrain.log_every=10", "optim.lr=3e-3",
                          "run.backend=cpu", "run.seed=7"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (config_set(c, sets[i], err, sizeof err) != 0) fail_msg("%s", err);
    return c;
}

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/grpolab-pe-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(model_path, sizeof model_path, "%s/tiny.h5", dir);
    return 0;
}

static int teardown(void **state) {
    tu_remove_dir(dir);
    return 0;
}

// The [corpus] keys' schema defaults are corpus_params_default() (the knobs live in two
// places: the config schema and corpus.c; this keeps them equal).
static void test_corpus_defaults_match(void **state) {
    char err[512];
    Config *c = config_new();
    CorpusParams a, b = corpus_params_default();
    assert_int_equal(setup_corpus_params(c, &a, err, sizeof err), 0);
    // every field (the struct's tail padding aside)
    assert_memory_equal(&a, &b, offsetof(CorpusParams, max_doc_tokens) + sizeof(int));
    config_free(c);
}

static void test_pretrain_lowers_loss(void **state) {
    Config *c = tiny_config();
    PretrainStats st = {0};
    assert_int_equal(pretrain_run(c, NULL, model_path, NULL, PRETRAIN_NEW, &st), 0);
    printf("  pretrain: loss %.3f (steps 1-10) -> %.3f (steps 31-40), %lld tokens\n",
           st.first_loss, st.last_loss, st.tokens);
    assert_true(st.first_loss > 3.0f);             // about ln(58) at the start
    assert_true(st.last_loss < st.first_loss - 0.5f);  // stated bound: 0.5 nats in 40 steps
    // the checkpoint carries the tokenizer's vocabulary and the config
    ModelConfig mc;
    char **vocab = NULL, *text = NULL, err[512];
    int nv = 0;
    assert_int_equal(checkpoint_read_meta(model_path, &mc, &vocab, &nv, &text, NULL, NULL, err, sizeof err), 0);
    const Tokenizer *tk = tokenizer_default();
    assert_int_equal(nv, tok_vocab_size(tk));
    for (int i = 0; i < nv; i++) assert_string_equal(vocab[i], tok_str(tk, i));
    assert_non_null(strstr(text, "steps = 40"));
    assert_int_equal(mc.d_model, 32);
    checkpoint_free_vocab(vocab, nv);
    free(text);
    // same seed, same model
    char again[160];
    snprintf(again, sizeof again, "%s/again.h5", dir);
    assert_int_equal(pretrain_run(c, NULL, again, NULL, PRETRAIN_NEW, NULL), 0);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "h5diff -q %s %s >/dev/null 2>&1", model_path, again);
    assert_int_equal(system(cmd), 0);
    config_free(c);
}

// A base model is compared with a config on the keys pretraining reads (make
// reproduce-fig5 reuses data/models/base.h5 only when they are the same).
static void test_compare_model_config(void **state) {
    char msg[1024], err[512];
    Config *c = tiny_config();
    assert_int_equal(pretrain_compare_model_config(model_path, c, msg, sizeof msg), 0);
    // keys that do not change the weights, and the RL sections, are not compared
    const char *same[] = {"run.threads=2", "pretrain.log_every=20", "pretrain.out=\"elsewhere.h5\"",
                          "train.steps=7", "objective.preset=dr_grpo", "eval.limit=3"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        assert_int_equal(config_set(c, same[i], err, sizeof err), 0);
    assert_int_equal(pretrain_compare_model_config(model_path, c, msg, sizeof msg), 0);
    // a corpus, model or schedule key does
    assert_int_equal(config_set(c, "corpus.weight_level2=0", err, sizeof err), 0);
    assert_int_equal(config_set(c, "pretrain.steps=41", err, sizeof err), 0);
    assert_int_equal(pretrain_compare_model_config(model_path, c, msg, sizeof msg), 1);
    printf("  %s\n", msg);
    assert_non_null(strstr(msg, "2 keys differ"));
    assert_non_null(strstr(msg, "pretrain.steps = 40 vs 41"));
    assert_non_null(strstr(msg, "corpus.weight_level2 = 1 vs 0"));
    // the CLI: exit 1 when they differ (the keys go to stdout), 2 on a file it cannot read
    char out[4096], args[600];
    snprintf(args, sizeof args, "config --set pretrain.steps=41 --against-model %s", model_path);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 1);
    snprintf(args, sizeof args, "config --against-model /nonexistent/base.h5 --set run.seed=7");
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "/nonexistent/base.h5"));
    snprintf(args, sizeof args, "config --set run.seed=7 --against %s --against-model %s", model_path,
             model_path);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "give one of them"));
    config_free(c);
}

// The tiny model test_pretrain_lowers_loss wrote, on a CPU backend (*bk, for backend_destroy).
static Model *load_tiny_model(Backend **bk) {
    char err[512];
    ModelConfig mc;
    assert_int_equal(checkpoint_read_meta(model_path, &mc, NULL, NULL, NULL, NULL, NULL, err, sizeof err), 0);
    *bk = backend_create(BACKEND_CPU, err, sizeof err);
    assert_non_null(*bk);
    Model *m = model_create(*bk, &mc);
    assert_int_equal(checkpoint_load(model_path, m, 0, err, sizeof err), 0);
    return m;
}

static void test_eval_table_and_hdf5(void **state) {
    char err[512];
    Backend *bk;
    Model *m = load_tiny_model(&bk);
    const Tokenizer *tk = tokenizer_default();
    EvalConfig ec = {.template_kind = TEMPLATE_R1, .world_seed = 2025, .batch = 7, .limit = 6};
    ec.sampler = (SamplerConfig){.temperature = 1.0f, .top_p = 1.0f, .max_new_tokens = 40,
                                 .eos_token = TOK_EOS, .stop_token = template_stop_token(tk, TEMPLATE_R1),
                                 .seed = 3};
    int nq = eval_num_responses(&ec), nrec = 0;
    assert_int_equal(nq, 6 * world_num_benchmarks());
    EvalRecord *recs = xcalloc((size_t)nq, sizeof(EvalRecord));
    EvalResult r;
    evaluate_benchmarks(m, tk, &ec, &r, recs, &nrec);
    eval_print_table(&r, stdout);
    assert_int_equal(nrec, nq);
    double score = 0;
    for (int b = 0; b < r.n_bench; b++) {
        const EvalStats *s = &r.bench[b];
        assert_int_equal(s->n, 6);
        int levels = 0, trunc = 0, correct = 0;
        double len = 0;
        for (int lv = 0; lv <= WORLD_NUM_LEVELS; lv++) levels += s->level_n[lv];
        assert_int_equal(levels, 6);
        for (int i = 0; i < nrec; i++)
            if (recs[i].bench == b) {
                trunc += recs[i].truncated;
                correct += recs[i].reward;
                len += recs[i].length;
                assert_true(recs[i].length >= 1 && recs[i].length <= 40);
                if (recs[i].truncated) assert_int_equal(recs[i].length, 40);
                if (recs[i].truncated) assert_int_equal(recs[i].reward, 0);
            }
        assert_int_equal(trunc, s->n_truncated);
        assert_int_equal(correct, s->n_correct);
        assert_true(fabs(len - s->len_sum) < 1e-9);
        score += eval_accuracy(s) / r.n_bench;
    }
    assert_true(fabs(score - r.score) < 1e-12);
    // HDF5 output: /eval one row per benchmark, /responses one row per response
    char h5[160];
    snprintf(h5, sizeof h5, "%s/eval.h5", dir);
    assert_int_equal(eval_write_hdf5(h5, model_path, &ec, &r, recs, nrec, err, sizeof err), 0);
    RunLogReader *rd = runlog_reader_open(h5, err, sizeof err);
    assert_non_null(rd);
    int64_t n = 0;
    double *acc = runlog_read_column(rd, "eval/accuracy", &n, err, sizeof err);
    assert_int_equal(n, r.n_bench);
    for (int b = 0; b < r.n_bench; b++) assert_true(fabs(acc[b] - eval_accuracy(&r.bench[b])) < 1e-12);
    // the length of a class with no responses is NaN, not 0 (as in a train log's /eval)
    const char *len_cols[] = {"eval/length_correct", "eval/length_incorrect"};
    for (int k = 0; k < 2; k++) {
        double *lc = runlog_read_column(rd, len_cols[k], &n, err, sizeof err);
        assert_non_null(lc);
        for (int b = 0; b < r.n_bench; b++) {
            const EvalStats *s = &r.bench[b];
            int n_class = k == 0 ? s->n_correct : s->n - s->n_correct;
            double sum = k == 0 ? s->len_correct_sum : s->len_incorrect_sum;
            if (n_class == 0) assert_true(isnan(lc[b]));
            else assert_true(fabs(lc[b] - sum / n_class) < 1e-12);
        }
        free(lc);
    }
    double *len = runlog_read_column(rd, "responses/length", &n, err, sizeof err);
    assert_int_equal(n, nrec);
    for (int i = 0; i < nrec; i++) assert_true(len[i] == recs[i].length);
    char *tpl = runlog_read_attr_str(rd, "template", err, sizeof err);
    assert_string_equal(tpl, "r1");
    free(tpl);
    free(acc);
    free(len);
    runlog_reader_close(rd);
    free(recs);
    model_free(m);
    backend_destroy(bk);
}

// Several samples per question (EvalConfig.samples, `grpolab eval --samples`): sample 0 is
// the response of a one-sample evaluation, the other samples draw from streams of their
// own, and the count of truncated incorrect responses is the records'.
static void test_samples(void **state) {
    Backend *bk;
    Model *m = load_tiny_model(&bk);
    const Tokenizer *tk = tokenizer_default();
    enum { LIMIT = 4, K = 3 };
    EvalConfig ec = {.template_kind = TEMPLATE_R1, .world_seed = 2025, .batch = 5, .limit = LIMIT};
    ec.sampler = (SamplerConfig){.temperature = 1.0f, .top_p = 1.0f, .max_new_tokens = 40, .eos_token = TOK_EOS,
                                 .stop_token = template_stop_token(tk, TEMPLATE_R1), .seed = 5};
    const int nb = world_num_benchmarks();
    int n1 = eval_num_responses(&ec), nk, r1 = 0, rk = 0;
    assert_int_equal(n1, LIMIT * nb);
    EvalRecord *one = xcalloc((size_t)n1, sizeof *one);
    EvalResult res1, resk;
    evaluate_benchmarks(m, tk, &ec, &res1, one, &r1);
    ec.samples = K;
    nk = eval_num_responses(&ec);
    assert_int_equal(nk, K * n1);
    EvalRecord *many = xcalloc((size_t)nk, sizeof *many);
    evaluate_benchmarks(m, tk, &ec, &resk, many, &rk);
    assert_int_equal(rk, nk);
    int same = 0, differ = 0;
    for (int b = 0; b < nb; b++) {
        const EvalStats *s = &resk.bench[b];
        assert_int_equal(s->n, K * LIMIT);
        int count[K] = {0}, cut = 0;
        for (int i = 0; i < rk; i++) {
            const EvalRecord *r = &many[i];
            if (r->bench != b) continue;
            assert_true(r->sample >= 0 && r->sample < K && r->index >= 0 && r->index < LIMIT);
            count[r->sample]++;
            cut += r->truncated && !r->reward;
            for (int j = 0; j < r1; j++)  // the one-sample response to the same question
                if (one[j].bench == b && one[j].index == r->index) {
                    if (r->sample == 0) assert_true(one[j].length == r->length && one[j].reward == r->reward);
                    else same += one[j].length == r->length, differ += one[j].length != r->length;
                }
        }
        for (int k = 0; k < K; k++) assert_int_equal(count[k], LIMIT);
        assert_int_equal(cut, s->n_truncated_incorrect);
    }
    printf("  samples 1, 2 against sample 0: %d of the same length, %d of another\n", same, differ);
    assert_true(differ > 0);  // the other samples draw from streams of their own
    free(one);
    free(many);
    model_free(m);
    backend_destroy(bk);
}

// The longest prompt (tokens) among the first n questions of benchmark b, or of the training
// pool when b < 0: the reference for eval_check_prompts, computed here on its own.
static int longest_prompt(const EvalConfig *ec, int b, int n) {
    int longest = 0, ids[512];
    char text[1024], err[256];
    for (int j = 0; j < n; j++) {
        Task t;
        if (b < 0) world_train_task(ec->pool_seed, j, &t);
        else world_benchmark_task(ec->world_seed, b, j, &t);
        assert_true(template_prompt(ec->template_kind, &t, text, sizeof text) > 0);
        int len = tok_encode(tokenizer_default(), text, ids, 512, err, sizeof err);
        assert_true(len > 0);
        if (len > longest) longest = len;
    }
    return longest;
}

// eval_check_prompts accepts a budget exactly when the longest prompt evaluated (benchmarks up
// to eval.limit, then the training-pool sample) plus the budget fits model.max_seq_len, and
// names the question that does not fit; `grpolab eval` turns that into exit 2.
static void test_eval_prompts_must_fit(void **state) {
    char err[512];
    Backend *bk;
    Model *m = load_tiny_model(&bk);
    const Tokenizer *tk = tokenizer_default();
    EvalConfig ec = {.template_kind = TEMPLATE_R1, .world_seed = 2025, .limit = 3, .pool_seed = 99};
    ec.sampler = (SamplerConfig){.temperature = 0.0f, .top_p = 1.0f, .eos_token = TOK_EOS};
    int bench_longest = 0;
    for (int b = 0; b < world_num_benchmarks(); b++) {
        int l = longest_prompt(&ec, b, 3);
        if (l > bench_longest) bench_longest = l;
    }
    const int L = model_config(m)->max_seq_len;
    for (int pool = 0; pool <= 1; pool++) {
        // the pool sample is as large as it takes to hold a prompt longer than the benchmarks'
        ec.train_pool = 0;
        int longest = bench_longest;
        if (pool) {
            for (int n = 1; n <= 20000 && longest == bench_longest; n *= 2) {
                ec.train_pool = n;
                longest = longest_prompt(&ec, -1, n);
                if (longest < bench_longest) longest = bench_longest;
            }
            assert_true(longest > bench_longest);
        }
        printf("  train_pool %d: longest prompt %d tokens, max_seq_len %d\n", ec.train_pool, longest, L);
        ec.sampler.max_new_tokens = L - longest;
        assert_int_equal(eval_check_prompts(m, tk, &ec, err, sizeof err), 0);
        ec.sampler.max_new_tokens = L - longest + 1;
        assert_int_equal(eval_check_prompts(m, tk, &ec, err, sizeof err), -1);
        printf("  budget %d: %s\n", ec.sampler.max_new_tokens, err);
        assert_non_null(strstr(err, "exceeds model.max_seq_len"));
        if (pool) assert_non_null(strstr(err, "eval: train_pool #"));
    }
    // the first question named when nothing fits
    ec.train_pool = 0;
    ec.sampler.max_new_tokens = L;
    assert_int_equal(eval_check_prompts(m, tk, &ec, err, sizeof err), -1);
    char first[64];
    snprintf(first, sizeof first, "eval: %s #0 (", world_benchmark_name(0));
    if (strncmp(err, first, strlen(first)) != 0) fail_msg("'%s' does not start with '%s'", err, first);
    model_free(m);
    backend_destroy(bk);
    // the CLI: exit 2 with the message, before any generation
    char out[4096], args[600];
    snprintf(args, sizeof args, "eval --model %s --backend cpu --limit 2 --set world.max_new_tokens=%d",
             model_path, L);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    printf("  grpolab %s: %s", args, out);
    assert_non_null(strstr(out, "lower world.max_new_tokens"));
}

static void test_cli_errors(void **state) {
    char out[4096], args[512];
    struct {
        const char *args, *needle;
    } cases[] = {
        {"eval", "--model FILE is required"},
        {"eval --model /nonexistent/m.h5", "/nonexistent/m.h5"},
        {"eval --model x.h5 --temperature -1", "--temperature '-1'"},
        {"eval --model x.h5 --template latex", "--template 'latex'"},
        {"eval --model x.h5 --bogus", "unknown option '--bogus'"},
        {"eval --model x.h5 --greedy --temperature 1", "exclude each other"},
        {"pretrain --set model.vocab_size=64 " NO_OUT, "needs exactly the tokenizer's 58 tokens"},
        {"pretrain --set pretrain.steps=0 " NO_OUT, "pretrain.steps = 0: out of range"},
        {"pretrain --set corpus.p_loop=2 " NO_OUT, "corpus.p_loop = 2: out of range"},
        {"pretrain --config /nonexistent.ini " NO_OUT, "cannot open config '/nonexistent.ini'"},
        {"pretrain --set model.vocab_size=58 --set corpus.max_doc_tokens=512 " NO_OUT, "more than model.max_seq_len"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = tu_run_cli(cases[i].args, out, sizeof out);
        printf("  grpolab %s -> exit %d: %s", cases[i].args, rc, out);
        assert_int_equal(rc, 2);
        if (!strstr(out, cases[i].needle)) fail_msg("message lacks '%s'", cases[i].needle);
    }
    assert_int_equal(access(NO_OUT_PATH, F_OK), -1);  // refused before anything was written
    // an existing --out file is never replaced without --overwrite
    snprintf(args, sizeof args, "eval --model %s --out %s", model_path, model_path);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "already exists"));
    char err[256];
    assert_int_equal(checkpoint_read_meta(model_path, NULL, NULL, NULL, NULL, NULL, NULL, err, sizeof err), 0);
    // a checkpoint that is not a model of this world (vocabulary too small)
    snprintf(args, sizeof args, "init --set model.vocab_size=16 --out %s/small.h5", dir);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "eval --model %s/small.h5", dir);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "not a model of this world"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_defaults_match),
        cmocka_unit_test(test_pretrain_lowers_loss),
        cmocka_unit_test(test_compare_model_config),
        cmocka_unit_test(test_eval_table_and_hdf5),
        cmocka_unit_test(test_samples),
        cmocka_unit_test(test_eval_prompts_must_fit),
        cmocka_unit_test(test_cli_errors),
    };
    return cmocka_run_group_tests_name("pretrain_eval", tests, setup, teardown);
}
