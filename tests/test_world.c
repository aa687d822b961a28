// test_world.c: the embedded world: task generator and benchmarks (determinism, level
// statistics, no train/eval leak), tokenizer, templates, verifier, behaviour flags, and the
// pretraining corpus (fit in the context, <eos>, behaviour frequencies against the knobs,
// checking pays). WORLD_SAMPLES=n prints n sample documents of each level.
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "sim/world/corpus.h"
#include "sim/world/template.h"
#include "sim/world/tokenizer.h"
#include "sim/world/world.h"
#include "test_util.h"

// ---------------------------------------------------------------- hash set of questions

typedef struct {
    uint64_t *slot;
    size_t cap;
} HashSet;

static HashSet hs_new(size_t cap) {
    HashSet h = {calloc(cap, sizeof(uint64_t)), cap};
    assert_non_null(h.slot);
    return h;
}
static void hs_add(HashSet *h, uint64_t k) {
    k |= 1;  // 0 marks an empty slot
    for (size_t i = k % h->cap;; i = (i + 1) % h->cap) {
        if (h->slot[i] == k) return;
        if (h->slot[i] == 0) {
            h->slot[i] = k;
            return;
        }
    }
}
static int hs_has(const HashSet *h, uint64_t k) {
    k |= 1;
    for (size_t i = k % h->cap;; i = (i + 1) % h->cap) {
        if (h->slot[i] == k) return 1;
        if (h->slot[i] == 0) return 0;
    }
}

// ---------------------------------------------------------------- tokenizer

static void test_tokenizer_vocab(void **state) {
    const Tokenizer *tk = tokenizer_default();
    int V = tok_vocab_size(tk);
    printf("  vocabulary: %d tokens\n", V);
    assert_true(V > 7 && V <= 64);
    assert_string_equal(tok_str(tk, TOK_PAD), "<pad>");
    assert_string_equal(tok_str(tk, TOK_EOS), "<eos>");
    const char *tags[] = {"<think>", "</think>", "<answer>", "</answer>", "\\boxed{"};
    for (int i = 0; i < 5; i++) assert_int_equal(tok_id(tk, tags[i]), 2 + i);
    for (int i = 0; i < V; i++) {
        assert_non_null(tok_str(tk, i));
        assert_int_equal(tok_id(tk, tok_str(tk, i)), i);  // unique strings
    }
    assert_null(tok_str(tk, V));
    assert_null(tok_str(tk, -1));
    assert_int_equal(tok_id(tk, "<bos>"), -1);
    // every character the world writes is a single token
    const char *need = "0123456789 +-*()=\n.:}UserAssistantfindcheckoknoredorestartguessanswerinboxed";
    for (const char *c = need; *c; c++) {
        char s[2] = {*c, 0};
        assert_true(tok_id(tk, s) >= 7);
    }
}

static void test_tokenizer_encode_errors(void **state) {
    const Tokenizer *tk = tokenizer_default();
    int ids[64];
    char err[128];
    int n = tok_encode(tk, "<think> 3+4</think><answer>7</answer><eos>", ids, 64, err, sizeof err);
    assert_int_equal(n, 10);
    assert_int_equal(ids[0], tok_id(tk, "<think>"));
    assert_int_equal(ids[5], tok_id(tk, "</think>"));
    assert_int_equal(ids[6], tok_id(tk, "<answer>"));
    assert_int_equal(ids[9], TOK_EOS);
    n = tok_encode(tk, "\\boxed{12}", ids, 64, err, sizeof err);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], tok_id(tk, "\\boxed{"));
    // unknown characters: the offset and the character are named
    err[0] = 0;
    assert_int_equal(tok_encode(tk, "3+4=X", ids, 64, err, sizeof err), -1);
    printf("  '3+4=X': %s\n", err);
    assert_non_null(strstr(err, "'X'"));
    assert_non_null(strstr(err, "offset 4"));
    assert_int_equal(tok_encode(tk, "ab<thin", ids, 64, err, sizeof err), -1);
    assert_non_null(strstr(err, "offset 2"));
    assert_int_equal(tok_encode(tk, "\\box", ids, 64, err, sizeof err), -1);
    assert_int_equal(tok_encode(tk, "caf\xc3\xa9", ids, 64, err, sizeof err), -1);
    assert_non_null(strstr(err, "offset 3"));
    assert_int_equal(tok_encode(tk, "Zebra", ids, 64, err, sizeof err), -1);
    // too long
    assert_int_equal(tok_encode(tk, "123456", ids, 5, err, sizeof err), -1);
    printf("  too long: %s\n", err);
    assert_int_equal(tok_encode(tk, "12345", ids, 5, err, sizeof err), 5);
    // decode: <eos>/<pad> give nothing; bad ids and small buffers are errors
    int d[] = {TOK_PAD, tok_id(tk, "7"), TOK_EOS, tok_id(tk, "</answer>")};
    char out[32];
    assert_int_equal(tok_decode(tk, d, 4, out, sizeof out), 10);
    assert_string_equal(out, "7</answer>");
    assert_int_equal(tok_decode(tk, d, 4, out, 5), -1);
    int bad[] = {3, 99};
    assert_int_equal(tok_decode(tk, bad, 2, out, sizeof out), -1);
}

static void roundtrip(const Tokenizer *tk, const char *text) {
    static int ids[8192];
    static char back[16384];
    char err[128];
    int n = tok_encode(tk, text, ids, 8192, err, sizeof err);
    if (n < 0) printf("  encode failed: %s on '%s'\n", err, text);
    assert_true(n >= 0);
    assert_true(tok_decode(tk, ids, n, back, sizeof back) >= 0);
    assert_string_equal(back, text);
}

static void test_tokenizer_roundtrip_templates(void **state) {
    const Tokenizer *tk = tokenizer_default();
    int max_prompt = 0;
    for (int t = 0; t < TEMPLATE_COUNT; t++) {
        for (int b = 0; b < world_num_benchmarks(); b++)
            for (int j = 0; j < world_benchmark_size(b); j += 7) {
                Task task;
                world_benchmark_task(1234, b, j, &task);
                char prompt[256];
                assert_true(template_prompt((Template)t, &task, prompt, sizeof prompt) > 0);
                roundtrip(tk, prompt);
                int ids[256];
                char err[64];
                int n = tok_encode(tk, prompt, ids, 256, err, sizeof err);
                if (n > max_prompt) max_prompt = n;
            }
        for (int i = 0; i < 500; i++) {
            Task task;
            world_train_task(1234, i, &task);
            char prompt[256];
            template_prompt((Template)t, &task, prompt, sizeof prompt);
            roundtrip(tk, prompt);
        }
    }
    printf("  longest prompt over benchmarks and templates: %d tokens\n", max_prompt);
    assert_true(max_prompt <= 60);
    // the templates' tags, endings and markers
    roundtrip(tk, " 4*2=8. check 4*2=9 no. redo 4*2=8. restart. guess 3. </think> <answer> 11 "
                  "</answer>\n\\boxed{-11}\nanswer: 11 find 3+4*2.");
}

// ---------------------------------------------------------------- generator

static void test_world_determinism(void **state) {
    int differ = 0;
    for (int i = 0; i < 200; i++) {
        Task a, b, c;
        world_train_task(42, i, &a);
        world_train_task(42, i, &b);
        assert_string_equal(a.question, b.question);
        assert_true(a.answer == b.answer && a.level == b.level && a.hash == b.hash);
        assert_int_equal(a.index, i);
        world_train_task(43, i, &c);
        differ += strcmp(a.question, c.question) != 0;
        assert_true(a.hash == world_hash(a.question));
    }
    printf("  seeds 42 vs 43: %d/200 questions differ\n", differ);
    assert_true(differ > 180);
    Task a, b;
    world_benchmark_task(7, 0, 123, &a);
    world_benchmark_task(7, 1, 3, &b);  // another benchmark in between
    world_benchmark_task(7, 0, 123, &b);
    assert_string_equal(a.question, b.question);
    world_benchmark_task(8, 0, 123, &b);
    assert_true(strcmp(a.question, b.question) != 0 || a.answer != b.answer);
}

static void test_world_levels(void **state) {
    const int n = 3000;
    double prev_ops = 0, prev_parens = -1, prev_value = 0;
    int64_t prev_operand = 0;
    printf("  level  ops   mul   parens depth  operand<=  mean max|value|  max|value|  big_mul  "
           "|answer|<=\n");
    for (int level = 1; level <= WORLD_NUM_LEVELS; level++) {
        double ops = 0, mul = 0, parens = 0, depth = 0, value = 0, big = 0;
        int64_t max_abs = 0, max_ans = 0, operand = 0;
        int max_len = 0;
        for (int i = 0; i < n; i++) {
            Task t;
            world_level_task(99, WORLD_PURPOSE_USER + 5, i, level, &t);
            assert_int_equal(t.level, level);
            assert_int_equal(world_split_of(t.question), SPLIT_TRAIN);
            int64_t v;
            assert_int_equal(world_eval(t.question, &v), 0);
            assert_true(v == t.answer);
            TaskStats st;
            assert_int_equal(world_task_stats(t.question, &st), 0);
            ops += st.n_ops;
            mul += st.n_mul;
            parens += st.n_paren_pairs;
            depth += st.paren_depth;
            if (st.max_operand > operand) operand = st.max_operand;
            value += (double)st.max_abs_value;
            big += st.n_big_mul;
            if (st.max_abs_value > max_abs) max_abs = st.max_abs_value;
            int64_t aa = t.answer < 0 ? -t.answer : t.answer;
            if (aa > max_ans) max_ans = aa;
            int len = (int)strlen(t.question);
            if (len > max_len) max_len = len;
            // per-level make-up
            switch (level) {
            case 1: assert_int_equal(st.n_ops, 1); assert_int_equal(st.n_mul, 0); break;
            case 2: assert_int_equal(st.n_ops, 2); assert_int_equal(st.n_paren_pairs, 0); break;
            case 3: assert_int_equal(st.n_ops, 3); assert_true(st.n_paren_pairs <= 1); break;
            case 4: assert_int_equal(st.n_ops, 4); assert_true(st.n_paren_pairs >= 1); break;
            case 5:
                assert_true(st.n_ops >= 4 && st.n_ops <= 5);
                assert_true(st.paren_depth >= 2);  // nested
                assert_true(st.n_big_mul >= 1);    // two-digit by two-digit
                break;
            }
        }
        ops /= n, mul /= n, parens /= n, depth /= n, value /= n, big /= n;
        printf("  %d      %.2f  %.2f  %.2f   %.2f   %5lld      %7.1f          %6lld      %.2f     "
               "%lld (len<=%d)\n", level, ops, mul, parens, depth, (long long)operand, value,
               (long long)max_abs, big, (long long)max_ans, max_len);
        assert_true(ops >= prev_ops);
        assert_true(parens > prev_parens || level == 2);
        assert_true(operand > prev_operand);
        assert_true(value > prev_value);
        assert_true(max_abs <= WORLD_MAX_ABS_VALUE);
        assert_true(max_len < 40);
        prev_ops = ops, prev_parens = parens, prev_operand = operand, prev_value = value;
    }
}

static void test_world_train_mix(void **state) {
    int count[6] = {0};
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        Task t;
        world_train_task(5, i, &t);
        count[t.level]++;
    }
    for (int l = 1; l <= 5; l++) assert_true(abs(count[l] - n / 5) < 5 * 57);  // ~5 sigma
    const double w[5] = {0, 0, 1, 0, 3};
    memset(count, 0, sizeof count);
    for (int i = 0; i < n; i++) {
        Task t;
        world_train_task_mix(5, i, w, &t);
        count[t.level]++;
    }
    printf("  weights 0,0,1,0,3: %d %d %d %d %d\n", count[1], count[2], count[3], count[4],
           count[5]);
    assert_int_equal(count[1] + count[2] + count[4], 0);
    assert_true(fabs(count[5] / (double)n - 0.75) < 0.02);
}

static void test_world_benchmarks(void **state) {
    assert_int_equal(world_num_benchmarks(), 5);
    const int sizes[5] = {500, 30, 80, 100, 100};
    for (int b = 0; b < 5; b++) {
        assert_int_equal(world_benchmark_size(b), sizes[b]);
        assert_int_equal(world_benchmark_find(world_benchmark_name(b)), b);
        printf("  %-11s %3d  %s\n", world_benchmark_name(b), world_benchmark_size(b),
               world_benchmark_description(b));
        int level_count[6] = {0};
        HashSet seen = hs_new(2048);
        for (int j = 0; j < sizes[b]; j++) {
            Task t;
            world_benchmark_task(1234, b, j, &t);
            assert_int_equal(t.index, j);
            assert_int_equal(world_split_of(t.question), SPLIT_EVAL);
            assert_false(hs_has(&seen, t.hash));  // no duplicates inside a benchmark
            hs_add(&seen, t.hash);
            int64_t v;
            assert_int_equal(world_eval(t.question, &v), 0);
            assert_true(v == t.answer);
            assert_true(t.answer <= WORLD_MAX_ABS_VALUE && t.answer >= -WORLD_MAX_ABS_VALUE);
            level_count[t.level]++;
            TaskStats st;
            world_task_stats(t.question, &st);
            if (b == 3) assert_true(st.n_ops >= 6);           // longer than any level
            if (b == 4) assert_true(st.max_operand >= 100);   // larger than any level
        }
        free(seen.slot);
        switch (b) {
        case 0: for (int l = 1; l <= 5; l++) assert_int_equal(level_count[l], 100); break;
        case 1: assert_int_equal(level_count[5], 30); break;
        case 2: assert_int_equal(level_count[3], 40); assert_int_equal(level_count[4], 40); break;
        default: assert_int_equal(level_count[WORLD_LEVEL_OOD], sizes[b]); break;
        }
    }
    Task all[500], one;
    world_benchmark_tasks(1234, 0, all);
    world_benchmark_task(1234, 0, 321, &one);
    assert_string_equal(all[321].question, one.question);
    assert_int_equal(world_benchmark_size(5), -1);
    assert_null(world_benchmark_name(-1));
    assert_int_equal(world_benchmark_find("math500"), -1);
}

static void test_world_no_leak(void **state) {
    // every benchmark question (two benchmark seeds) against the first 200000 training
    // tasks and the first 20000 corpus documents' questions (two seeds)
    HashSet bench = hs_new(1 << 13);
    int n_bench = 0;
    const uint64_t bseeds[2] = {1234, 1};
    for (int s = 0; s < 2; s++)
        for (int b = 0; b < world_num_benchmarks(); b++)
            for (int j = 0; j < world_benchmark_size(b); j++) {
                Task t;
                world_benchmark_task(bseeds[s], b, j, &t);
                hs_add(&bench, t.hash);
                n_bench++;
            }
    double t0 = wall_time();
    int leaks = 0;
    for (int i = 0; i < 200000; i++) {
        Task t;
        world_train_task(i < 100000 ? 1234 : 77, i, &t);
        leaks += hs_has(&bench, t.hash);
    }
    CorpusParams cp = corpus_params_default();
    for (int i = 0; i < 20000; i++) {
        Task t;
        corpus_task(&cp, i < 10000 ? 1234 : 5, i, &t);
        leaks += hs_has(&bench, t.hash);
    }
    printf("  %d benchmark questions vs 200000 training + 20000 corpus tasks: %d shared "
           "(%.2f s)\n", n_bench, leaks, wall_time() - t0);
    assert_int_equal(leaks, 0);
    free(bench.slot);
}

// ---------------------------------------------------------------- verifier

typedef struct {
    Template t;
    const char *response;
    int stopped;
    int64_t truth;
    int reward, format_ok, correct, has_answer;
    int64_t answer;
} VCase;

static void test_verifier_table(void **state) {
    const Template R = TEMPLATE_R1, B = TEMPLATE_BOXED, N = TEMPLATE_NONE;
    const VCase cases[] = {
        // r1: right, wrong, formats
        {R, " 4*2=8. 3+8=11. </think> <answer> 11 </answer>", 1, 11, 1, 1, 1, 1, 11},
        {R, " 4*2=8. 3+8=12. </think> <answer> 12 </answer>", 1, 11, 0, 1, 0, 1, 12},
        {R, " x </think><answer>11</answer>", 1, 11, 1, 1, 1, 1, 11},        // no spaces needed
        {R, " x </think>\n <answer>11</answer> \n", 1, 11, 1, 1, 1, 1, 11},  // whitespace
        {R, " 3+8=11.\nanswer: 11", 1, 11, 0, 0, 1, 1, 11},                  // plain ending
        {R, " 3+8=11.\n\\boxed{11}", 1, 11, 0, 0, 1, 1, 11},                 // boxed ending
        {R, " 3+8=11. </think> answer: 11", 1, 11, 0, 0, 1, 1, 11},          // no <answer> tag
        {R, " 3+8=11. <answer> 11 </answer>", 1, 11, 0, 0, 1, 1, 11},        // no </think>
        {R, " 3+8=11. </think> <answer> 11", 1, 11, 0, 0, 0, 0, 0},          // unclosed answer
        {R, " 3+8=11. </think> 11 <answer> 11 </answer>", 1, 11, 0, 0, 1, 1, 11},  // junk first
        {R, " 3+8=11. </think> <answer> </answer>", 1, 11, 0, 0, 0, 0, 0},   // empty answer
        {R, " 3+8=11. </think> <answer> eleven </answer>", 1, 11, 0, 0, 0, 0, 0},
        {R, " 3+8=11.", 1, 11, 0, 0, 0, 0, 0},                               // no answer at all
        // truncated: reward 0 even when the answer is right
        {R, " 3+8=11. </think> <answer> 11 </answer>", 0, 11, 0, 1, 1, 1, 11},
        {R, " 3+8=11. check 3+8=11 no. redo", 0, 11, 0, 0, 0, 0, 0},
        // tricky numerals
        {R, " </think> <answer>+11</answer>", 1, 11, 1, 1, 1, 1, 11},
        {R, " </think> <answer> 011 </answer>", 1, 11, 1, 1, 1, 1, 11},
        {R, " </think> <answer> 0009 </answer>", 1, 9, 1, 1, 1, 1, 9},
        {R, " </think> <answer> -0 </answer>", 1, 0, 1, 1, 1, 1, 0},
        {R, " </think> <answer> 0 </answer>", 1, 0, 1, 1, 1, 1, 0},
        {R, " </think> <answer> -3 </answer>", 1, -3, 1, 1, 1, 1, -3},
        {R, " </think> <answer> - 3 </answer>", 1, -3, 1, 1, 1, 1, -3},      // "- 3" is -3
        {R, " </think> <answer> 3 </answer>", 1, -3, 0, 1, 0, 1, 3},         // sign matters
        {R, " </think> <answer> 11. </answer>", 1, 11, 1, 1, 1, 1, 11},      // sentence period
        {R, " </think> <answer> 11.0 </answer>", 1, 11, 1, 1, 1, 1, 11},
        {R, " </think> <answer> 11.5 </answer>", 1, 11, 0, 0, 0, 0, 0},      // not an integer
        {R, " </think> <answer> 1,1 </answer>", 1, 11, 0, 0, 0, 0, 0},
        {R, " </think> <answer> --3 </answer>", 1, -3, 0, 0, 0, 0, 0},
        {R, " </think> <answer> 1234567890123456789 </answer>", 1, 11, 0, 0, 0, 0, 0},
        // multiple answers: r1 takes the first block after </think>, and more text breaks the
        // format
        {R, " </think> <answer> 9 10 </answer>", 1, 9, 0, 0, 0, 0, 0},
        {R, " </think> <answer> 11 </answer> <answer> 12 </answer>", 1, 11, 0, 0, 1, 1, 11},
        {R, " </think> <answer> 12 </answer> <answer> 11 </answer>", 1, 11, 0, 0, 0, 1, 12},
        {R, " </think> <answer> 11 </answer> done", 1, 11, 0, 0, 1, 1, 11},
        // boxed: the last box counts
        {B, "4*2=8. 3+8=11.\n\\boxed{11}", 1, 11, 1, 1, 1, 1, 11},
        {B, "\\boxed{ +011 }", 1, 11, 1, 1, 1, 1, 11},
        {B, "\\boxed{12} no, \\boxed{11}", 1, 11, 1, 1, 1, 1, 11},
        {B, "\\boxed{11} no, \\boxed{12}", 1, 11, 0, 1, 0, 1, 12},
        {B, "\\boxed{11", 1, 11, 0, 0, 0, 0, 0},
        {B, "3+8=11.\nanswer: 11", 1, 11, 0, 0, 1, 1, 11},
        {B, "\\boxed{11}", 0, 11, 0, 1, 1, 1, 11},
        // none: the last line is "answer: N"; the last "answer:" counts
        {N, "4*2=8. 3+8=11.\nanswer: 11", 1, 11, 1, 1, 1, 1, 11},
        {N, "4*2=8. 3+8=11.\nanswer: 11\n", 1, 11, 1, 1, 1, 1, 11},
        {N, "answer: 12\nanswer: 11", 1, 11, 1, 1, 1, 1, 11},
        {N, "answer: 11\nanswer: 12", 1, 11, 0, 1, 0, 1, 12},
        {N, "answer: 11\nmore text", 1, 11, 0, 0, 1, 1, 11},
        {N, "answer:-0", 1, 0, 1, 1, 1, 1, 0},
        {N, "3+8=11.", 1, 11, 0, 0, 0, 0, 0},
        {N, "3+8=11.\n\\boxed{11}", 1, 11, 0, 0, 1, 1, 11},
    };
    Task task;
    memset(&task, 0, sizeof task);
    strcpy(task.question, "3+4*2");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const VCase *c = &cases[i];
        task.answer = c->truth;
        Verdict v;
        verify_response(c->t, &task, c->response, c->stopped, &v);
        if (v.reward != c->reward || v.format_ok != c->format_ok || v.correct != c->correct ||
            v.has_answer != c->has_answer || (v.has_answer && v.answer != c->answer)) {
            printf("  case %zu (%s) '%s': got reward %d format %d correct %d has %d answer %lld\n",
                   i, template_name(c->t), c->response, v.reward, v.format_ok, v.correct,
                   v.has_answer, (long long)v.answer);
            fail();
        }
        assert_int_equal(v.truncated, !c->stopped);
    }
    printf("  %zu verifier cases pass\n", sizeof cases / sizeof cases[0]);
    // numerals alone
    int64_t x;
    assert_int_equal(template_parse_numeral(" 9 ", 3, &x), 0);
    assert_true(x == 9);
    assert_int_equal(template_parse_numeral("", 0, &x), -1);
    assert_int_equal(template_parse_numeral("-", 1, &x), -1);
    assert_int_equal(template_parse_numeral(".5", 2, &x), -1);
    assert_int_equal(template_parse_numeral("000000000000000000000007", 24, &x), 0);
    assert_true(x == 7);
}

static void test_templates(void **state) {
    const Tokenizer *tk = tokenizer_default();
    Template t;
    assert_int_equal(template_parse("r1", &t), 0);
    assert_int_equal(t, TEMPLATE_R1);
    assert_int_equal(template_parse("boxed", &t), 0);
    assert_int_equal(template_parse("none", &t), 0);
    assert_int_equal(t, TEMPLATE_NONE);
    assert_int_equal(template_parse("R1x", &t), -1);
    for (int i = 0; i < TEMPLATE_COUNT; i++) {
        assert_int_equal(template_parse(template_name((Template)i), &t), 0);
        assert_int_equal(t, i);
    }
    Task task;
    memset(&task, 0, sizeof task);
    strcpy(task.question, "3+4*2");
    char p[128];
    assert_int_equal(template_prompt(TEMPLATE_R1, &task, p, sizeof p), 30);
    assert_string_equal(p, "User: 3+4*2\nAssistant: <think>");
    template_prompt(TEMPLATE_BOXED, &task, p, sizeof p);
    assert_string_equal(p, "answer in \\boxed{}.\n3+4*2\n");
    template_prompt(TEMPLATE_NONE, &task, p, sizeof p);
    assert_string_equal(p, "3+4*2\n");
    assert_int_equal(template_prompt(TEMPLATE_R1, &task, p, 10), -1);
    assert_int_equal(template_stop_token(tk, TEMPLATE_R1), tok_id(tk, "</answer>"));
    assert_int_equal(template_stop_token(tk, TEMPLATE_BOXED), -1);
    assert_int_equal(template_stop_token(tk, TEMPLATE_NONE), -1);
}

typedef struct {
    const char *response;
    int64_t truth;
    int self_checked, disagreement, recovered, looped, gave_up, n_checks, n_disagree;
} BCase;

static void test_behaviour_flags(void **state) {
    const BCase cases[] = {
        {" 4*2=8. 3+8=11. </think> <answer> 11 </answer>", 11, 0, 0, 0, 0, 0, 0, 0},
        {" 4*2=8. check 4*2=8 ok. 3+8=11. check 3+8=11 ok. </think> <answer> 11 </answer>", 11,
         1, 0, 0, 0, 0, 2, 0},
        // recover
        {" 4*2=9. check 4*2=9 no. redo 4*2=8. 3+8=11. </think> <answer> 11 </answer>", 11, 1, 1,
         1, 0, 0, 1, 1},
        // redo after a disagreement but a later silent error: not recovered
        {" 4*2=9. check 4*2=9 no. redo 4*2=8. 3+8=12. </think> <answer> 12 </answer>", 11, 1, 1,
         0, 0, 0, 1, 1},
        // loop: three disagreements on the same step, redo and restart
        {" 4*2=9. check 4*2=9 no. redo 4*2=7. check 4*2=7 no. restart. 4*2=6. check 4*2=6 no. "
         "3+6=9. </think> <answer> 9 </answer>", 11, 1, 1, 0, 1, 0, 3, 3},
        // a loop cut by the budget
        {" 4*2=9. check 4*2=9 no. redo 4*2=7. check 4*2=7 no. redo 4*2=10. check 4*2=10 no. redo",
         11, 1, 1, 0, 1, 0, 3, 3},
        // two disagreements on the same step only: not (yet) a loop
        {" 4*2=9. check 4*2=9 no. redo 4*2=7. check 4*2=7 no. redo 4*2=8. 3+8=11. </think> "
         "<answer> 11 </answer>", 11, 1, 1, 1, 0, 0, 2, 2},
        // three disagreements on different steps, each recovered: not a loop
        {" 2*3=7. check 2*3=7 no. redo 2*3=6. 4*5=21. check 4*5=21 no. redo 4*5=20. 6+20=27. "
         "check 6+20=27 no. redo 6+20=26. </think> <answer> 26 </answer>", 26, 1, 1, 1, 0, 0, 3,
         3},
        // give up
        {" 4*2=9. check 4*2=9 no. guess 14. </think> <answer> 14 </answer>", 11, 1, 1, 0, 0, 1,
         1, 1},
        // a missed error: checked, no disagreement
        {" 4*2=9. check 4*2=9 ok. 3+9=12.\nanswer: 12", 11, 1, 0, 0, 0, 0, 1, 0},
        // "guess" without a disagreement is not giving up
        {" guess 11. </think> <answer> 11 </answer>", 11, 0, 0, 0, 0, 0, 0, 0},
        // negative operands in parentheses
        {" 2-5=-3. check 2-5=-3 ok. 10-(-3)=12. check 10-(-3)=12 no. redo 10-(-3)=13. "
         "</think> <answer> 13 </answer>", 13, 1, 1, 1, 0, 0, 2, 1},
    };
    Task task;
    memset(&task, 0, sizeof task);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const BCase *c = &cases[i];
        task.answer = c->truth;
        Verdict v;
        verify_response(TEMPLATE_R1, &task, c->response, 1, &v);
        if (v.self_checked != c->self_checked || v.disagreement != c->disagreement ||
            v.recovered != c->recovered || v.looped != c->looped || v.gave_up != c->gave_up ||
            v.n_checks != c->n_checks || v.n_disagreements != c->n_disagree) {
            printf("  case %zu '%s': checked %d disagree %d recovered %d looped %d gave_up %d "
                   "checks %d no %d\n", i, c->response, v.self_checked, v.disagreement,
                   v.recovered, v.looped, v.gave_up, v.n_checks, v.n_disagreements);
            fail();
        }
    }
}

// world.reward_rule: each rule on hand-written responses (truth 11 for "3+4*2"); only the
// reward changes. Then template_has_false_step against corpus documents, whose generator
// knows which steps it wrote wrong.
static void test_reward_rule(void **state) {
    (void)state;
    static const struct {
        const char *response;
        // expected reward under each rule
        int outcome, disagreement_fails, false_step_fails, first_redo_forgives;
    } cases[] = {
        // a wrong step, refuted, redone right: the answer is right
        {" 4*2=9. check 4*2=9 no. redo 4*2=8. 3+8=11. </think> <answer> 11 </answer>", 1, 0, 0, 1},
        // ... after a re-check
        {" 4*2=9. check 4*2=9 no. check 4*2=9 no. redo 4*2=8. 3+8=11. </think> <answer> 11 "
         "</answer>", 1, 0, 0, 1},
        // ... at the second try: the first redo is a false step too
        {" 4*2=9. check 4*2=9 no. redo 4*2=7. check 4*2=7 no. redo 4*2=8. 3+8=11. </think> "
         "<answer> 11 </answer>", 1, 0, 0, 0},
        // ... after a restart instead of a redo
        {" 4*2=9. check 4*2=9 no. restart. 4*2=8. 3+8=11. </think> <answer> 11 </answer>", 1, 0,
         0, 0},
        // ... by a redo of another step, or after a check of another step
        {" 4*2=9. check 4*2=9 no. redo 2*4=8. 3+8=11. </think> <answer> 11 </answer>", 1, 0, 0, 0},
        {" 4*2=9. check 2*4=9 no. redo 4*2=8. 3+8=11. </think> <answer> 11 </answer>", 1, 0, 0, 0},
        // ... then a later wrong step that nobody checked
        {" 4*2=9. check 4*2=9 no. redo 4*2=8. 3+8=12. 3+8=11. </think> <answer> 11 </answer>", 1,
         0, 0, 0},
        // a check that miscopies a right step: its "no" is no false step
        {" 4*2=8. check 4*2=9 no. redo 4*2=8. 3+8=11. </think> <answer> 11 </answer>", 1, 0, 1, 1},
        // checked and agreed
        {" 4*2=8. check 4*2=8 ok. 3+8=11. </think> <answer> 11 </answer>", 1, 1, 1, 1},
        // no check
        {" 4*2=8. 3+8=11. </think> <answer> 11 </answer>", 1, 1, 1, 1},
        // a wrong step never checked, then a right answer anyway
        {" 4*2=9. 3+8=11. </think> <answer> 11 </answer>", 1, 1, 0, 0},
        // a wrong step whose check agrees (a miscopy): not refuted, so not forgiven
        {" 4*2=9. check 4*2=8 ok. redo 4*2=8. 3+8=11. </think> <answer> 11 </answer>", 1, 1, 0, 0},
        // a step that is not a step
        {" 4*2==8. 3+8=11. </think> <answer> 11 </answer>", 1, 1, 0, 0},
        {" 3+4*2=11. </think> <answer> 11 </answer>", 1, 1, 0, 0},
        // a wrong answer fails under all four
        {" 4*2=9. check 4*2=9 no. guess 14. </think> <answer> 14 </answer>", 0, 0, 0, 0},
        {" 4*2=9. check 4*2=9 no. redo 4*2=8. 3+8=12. </think> <answer> 12 </answer>", 0, 0, 0, 0},
        {" 4*2=9. 3+9=12. </think> <answer> 12 </answer>", 0, 0, 0, 0},
    };
    static const char *const names[] = {"outcome", "disagreement_fails", "false_step_fails",
                                        "first_redo_forgives"};
    Task task;
    memset(&task, 0, sizeof task);
    task.answer = 11;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int want[4] = {cases[i].outcome, cases[i].disagreement_fails,
                             cases[i].false_step_fails, cases[i].first_redo_forgives};
        Verdict v0;
        verify_response(TEMPLATE_R1, &task, cases[i].response, 1, &v0);
        for (int r = 0; r < 4; r++) {
            RewardRule rule;
            assert_int_equal(reward_rule_parse(names[r], &rule), 0);
            assert_int_equal((int)rule, r);
            Verdict v = v0;
            verdict_apply_rule(&v, cases[i].response, rule);
            if (v.reward != want[r]) {
                printf("  case %zu '%s' under %s: reward %d, want %d\n", i, cases[i].response,
                       names[r], v.reward, want[r]);
                fail();
            }
            // the rule changes the reward only: the flags stay the verifier's
            assert_int_equal(v.correct, v0.correct);
            assert_int_equal(v.recovered, v0.recovered);
            assert_int_equal(v.disagreement, v0.disagreement);
        }
    }
    RewardRule rule;
    assert_int_equal(reward_rule_parse("fail", &rule), -1);
    // steps of every shape the corpus writes
    assert_int_equal(template_has_false_step(" 2-5=-3. 10-(-3)=13. -3*4=-12. 0*7=0."), 0);
    assert_int_equal(template_has_false_step(" 2-5=3."), 1);
    assert_int_equal(template_has_false_step(" redo 10-(-3)=7."), 1);
    assert_int_equal(template_has_false_step(" check 10-(-3)=7 no."), 0);
    assert_int_equal(template_has_false_step(" 4*2="), 1);  // cut before the value
    assert_int_equal(template_has_false_step(" guess 12. </think> <answer> 12 </answer>"), 0);
    // independent reference: without false alarms every disagreement follows a first pass
    // written wrong, so an uncut document has a false step iff the generator wrote one
    CorpusParams p = corpus_params_default();
    p.p_false_alarm = 0;
    static char doc[4096];
    int n_err = 0, n_clean = 0, n_forgiven = 0;
    for (int d = 0; d < 3000; d++) {
        DocInfo in;
        assert_true(corpus_document(&p, 91, d, doc, sizeof doc, &in) > 0);
        if (in.truncated) continue;
        int f = template_has_false_step(doc + in.prompt_chars);
        if (f != (in.n_errors > 0)) {
            printf("  document %d: %d first passes wrong, has_false_step %d\n%s\n", d, in.n_errors,
                   f, doc);
            fail();
        }
        // ... and an unforgiven one iff a wrong first pass was not recovered (the generator
        // recovers by a right redo after the disagreement and its re-checks; a loop's
        // attempts are wrong redos)
        int u = template_has_unforgiven_step(doc + in.prompt_chars);
        if (u != (in.n_errors > in.n_recover)) {
            printf("  document %d: %d first passes wrong, %d recovered, has_unforgiven_step %d\n"
                   "%s\n", d, in.n_errors, in.n_recover, u, doc);
            fail();
        }
        n_err += in.n_errors > 0;
        n_clean += in.n_errors == 0;
        n_forgiven += in.n_errors > 0 && !u;
    }
    printf("  corpus: %d documents with a wrong step (%d of them all recovered at the first redo), "
           "%d without, all found as written\n", n_err, n_forgiven, n_clean);
    assert_true(n_err > 300 && n_clean > 300 && n_forgiven > 30);
}

// ---------------------------------------------------------------- corpus

#define DOC_CAP 4096

static void test_corpus_determinism_and_params(void **state) {
    CorpusParams p = corpus_params_default();
    char err[256];
    assert_int_equal(corpus_params_validate(&p, err, sizeof err), 0);
    static char a[DOC_CAP], b[DOC_CAP];
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        DocInfo ia, ib;
        int la = corpus_document(&p, 11, i, a, DOC_CAP, &ia);
        int lb = corpus_document(&p, 11, i, b, DOC_CAP, &ib);
        assert_true(la > 0 && la == lb);
        assert_string_equal(a, b);
        assert_memory_equal(&ia, &ib, sizeof ia);
        corpus_document(&p, 12, i, b, DOC_CAP, NULL);
        differ += strcmp(a, b) != 0;
    }
    assert_true(differ > 90);
    // the task does not depend on the behaviour knobs
    CorpusParams q = p;
    q.p_check_step = 0.9;
    q.p_error_by_level[4] = 0.5;
    Task ta, tb;
    corpus_task(&p, 11, 5, &ta);
    corpus_task(&q, 11, 5, &tb);
    assert_string_equal(ta.question, tb.question);
    assert_int_equal(corpus_document(&p, 11, 0, a, 8, NULL), -1);  // too small a buffer
    // bad knobs are named
    q = p;
    q.p_recover = 1.5;
    assert_int_equal(corpus_params_validate(&q, err, sizeof err), -1);
    printf("  %s\n", err);
    assert_non_null(strstr(err, "p_recover"));
    q = p;
    q.p_template_r1 = 0.7;
    q.p_template_boxed = 0.5;
    assert_int_equal(corpus_params_validate(&q, err, sizeof err), -1);
    q = p;
    q.loop_continue_p = 1.0;
    assert_int_equal(corpus_params_validate(&q, err, sizeof err), -1);
    assert_non_null(strstr(err, "loop_continue_p"));
    q = p;
    for (int l = 0; l < 5; l++) q.level_weights[l] = 0;
    assert_int_equal(corpus_params_validate(&q, err, sizeof err), -1);
    q = p;
    q.max_doc_tokens = 32;
    assert_int_equal(corpus_params_validate(&q, err, sizeof err), -1);
}

// Documents fit the context, end with <eos>, start with the template's prompt, round-trip
// through the tokenizer, and the verifier reads the same behaviour the generator wrote.
// The verifier's reading of an uncut document equals the generator's own record.
static int flags_agree(const Verdict *v, const DocInfo *in) {
    return v->looped == in->looped && v->gave_up == in->gave_up && v->recovered == in->recovered &&
           v->n_checks == in->n_checks && v->n_disagreements == in->n_disagree &&
           v->correct == in->correct && v->self_checked == in->self_checked &&
           v->disagreement == in->disagreement;
}

static void test_corpus_documents(void **state) {
    const Tokenizer *tk = tokenizer_default();
    CorpusParams p = corpus_params_default();
    const int n = 5000;
    static char doc[DOC_CAP], prompt[256];
    int n_loop = 0, n_loop_cut = 0, n_other_cut = 0, n_fit = 0, agree = 0, n_uncut = 0;
    int looped_cut_seen = 0, retries = 0;
    int max_prompt = 0, max_resp_nonloop = 0, over200 = 0;
    for (int i = 0; i < n; i++) {
        DocInfo in;
        int len = corpus_document(&p, 1234, i, doc, DOC_CAP, &in);
        assert_true(len > 0 && (size_t)len == strlen(doc));
        Task task;
        corpus_task(&p, 1234, i, &task);
        assert_int_equal(in.level, task.level);
        // the prompt part is exactly the template's prompt
        int pl = template_prompt(in.format, &task, prompt, sizeof prompt);
        assert_int_equal(pl, in.prompt_chars);
        assert_memory_equal(doc, prompt, (size_t)pl);
        if (in.prompt_tokens > max_prompt) max_prompt = in.prompt_tokens;
        if (i < 1000) {
            // round trip (the <eos> decodes to nothing)
            char *e = strstr(doc, "<eos>");
            if (e) *e = '\0';
            roundtrip(tk, doc);
            if (e) *e = '<';
        }
        static int ids[8192];
        char err[128];
        int nt = tok_encode(tk, doc, ids, 8192, err, sizeof err);
        assert_int_equal(nt, in.length_tokens);
        assert_true(nt <= p.max_doc_tokens);
        int ends_eos = len >= 5 && strcmp(doc + len - 5, "<eos>") == 0;
        assert_int_equal(ends_eos, !in.truncated);
        // <eos> only as the last token
        const char *eos = strstr(doc, "<eos>");
        if (eos) assert_true(eos == doc + len - 5);
        retries += in.retries;
        if (in.looped) {
            n_loop++;
            n_loop_cut += in.truncated;
        } else {
            n_other_cut += in.truncated;
            n_fit += !in.truncated;
            if (in.response_tokens > max_resp_nonloop) max_resp_nonloop = in.response_tokens;
            over200 += in.response_tokens > 200;
        }
        // the verifier reads the behaviour the generator wrote
        if (ends_eos) doc[len - 5] = '\0';
        Verdict v;
        verify_response(in.format, &task, doc + in.prompt_chars, !in.truncated, &v);
        if (!in.truncated) {
            n_uncut++;
            int same = flags_agree(&v, &in);
            agree += same;
            if (!same && n_uncut - agree < 4) printf("  disagrees: %s\n", doc);
            // the document's own format is followed unless it is an off-format r1 document
            assert_int_equal(v.format_ok, !in.off_format);
            assert_int_equal(v.reward, in.correct && !in.off_format);
        } else {
            assert_int_equal(v.reward, 0);
            looped_cut_seen += v.looped;
        }
    }
    printf("  %d documents: %.2f%% of non-looping ones fit the %d-token context (%d cut, %d "
           "redrawn drafts), %d loops of which %d (%.0f%%) cut at the context (%d visibly "
           "looped when cut)\n",
           n, 100.0 * n_fit / (n - n_loop), p.max_doc_tokens, n_other_cut, retries, n_loop,
           n_loop_cut, 100.0 * n_loop_cut / (n_loop ? n_loop : 1), looped_cut_seen);
    printf("  longest prompt %d tokens; longest non-looping response %d tokens (%d over 200); "
           "verifier agrees with the generator on %d/%d uncut documents\n",
           max_prompt, max_resp_nonloop, over200, agree, n_uncut);
    assert_true(n_fit >= 0.99 * (n - n_loop));
    assert_int_equal(n_other_cut, 0);
    assert_int_equal(agree, n_uncut);
    assert_true(max_prompt <= 60);
    assert_true(n_loop_cut > 0 && n_loop_cut < n_loop);  // loops sometimes run past the budget
}

// loop_max_cycles caps the attempts of a loop, so that a model learns where its loops end;
// 0 leaves the geometric draw uncapped (but for the writer's own limit), as before the knob.
static void test_corpus_loop_cap(void **state) {
    (void)state;
    CorpusParams p = corpus_params_default();
    p.p_template_r1 = 1, p.p_template_boxed = 0;
    p.p_recover = 0, p.p_loop = 1, p.p_give_up = 0;
    p.loop_min_cycles = 1, p.loop_continue_p = 0.8, p.p_loop_restart = 0, p.p_loop_repeat = 1;
    static char doc[DOC_CAP];
    char err[256];
    for (int cap = 0; cap <= 3; cap += 3) {
        p.loop_max_cycles = cap;
        assert_int_equal(corpus_params_validate(&p, err, sizeof err), 0);
        int loops = 0, longest = 0, at3 = 0;
        for (int i = 0; i < 3000; i++) {
            DocInfo in;
            assert_true(corpus_document(&p, 5, i, doc, DOC_CAP, &in) > 0);
            if (in.n_loop != 1) continue;  // one loop: its attempts are the document's
            loops++;
            if (in.loop_cycles > longest) longest = in.loop_cycles;
            at3 += in.loop_cycles == 3;
        }
        print_message("loop_max_cycles %d: %d documents with one loop, longest %d attempts, %d with 3\n",
                      cap, loops, longest, at3);
        assert_true(loops > 100);
        if (cap) {
            assert_int_equal(longest, cap);
            assert_true(at3 > loops / 3);  // 0.8^2 = 64% of the loops reach the cap
        } else {
            assert_true(longest > 3);
        }
    }
    p.loop_min_cycles = 2, p.loop_max_cycles = 1;
    assert_int_equal(corpus_params_validate(&p, err, sizeof err), -1);
    assert_non_null(strstr(err, "loop_max_cycles = 1"));
}

// The loop knobs of experiments/base/pretrain.ini: a loop repeats the checked wrong value in
// every attempt, writes loop_min_cycles + Geometric(loop_continue_p) attempts and ends with a
// guess. Checked on the text, against the verifier's flags and against the knobs.
static void test_corpus_repeating_loops(void **state) {
    (void)state;
    CorpusParams p = corpus_params_default();
    p.p_template_r1 = 1, p.p_template_boxed = 0;
    p.p_r1_off_format = 0;
    p.p_false_alarm = 0.005;
    p.p_recover = 0.7, p.p_loop = 0.2, p.p_give_up = 0.1;
    p.loop_min_cycles = 1, p.loop_continue_p = 0.3, p.p_loop_restart = 0;
    p.p_loop_repeat = 1, p.p_loop_give_up = 1;
    char err[256];
    assert_int_equal(corpus_params_validate(&p, err, sizeof err), 0);
    const int n = 6000;
    static char doc[DOC_CAP];
    int loops = 0, loops_uncut = 0, cycles = 0, repeats = 0, agree = 0, uncut = 0, flagged = 0;
    for (int i = 0; i < n; i++) {
        DocInfo in;
        int len = corpus_document(&p, 99, i, doc, DOC_CAP, &in);
        assert_true(len > 0);
        Task task;
        corpus_task(&p, 99, i, &task);
        if (in.n_loop == 1 && !in.truncated) {
            loops_uncut++;
            // the loop's last check "check A=V no." and every "redo A=" of the document
            // writes V (a false alarm before the loop repeats one wrong value instead)
            const char *no = NULL;
            for (const char *q = strstr(doc, " no."); q; q = strstr(q + 1, " no.")) no = q;
            assert_non_null(no);
            const char *chk = no;
            while (chk > doc && strncmp(chk, MARK_CHECK, strlen(MARK_CHECK)) != 0) chk--;
            chk += strlen(MARK_CHECK);
            const char *eq = strchr(chk, '=');
            char lhs[64], val[64], pat[80];
            snprintf(lhs, sizeof lhs, "%.*s", (int)(eq - chk), chk);
            snprintf(val, sizeof val, "%.*s", (int)(no - eq - 1), eq + 1);
            snprintf(pat, sizeof pat, "%s%s=", MARK_REDO, lhs);
            int redos = 0, same = 0;
            for (const char *q = strstr(doc, pat); q; q = strstr(q + 1, pat)) {
                const char *v = q + strlen(pat);
                redos++;
                same += strncmp(v, val, strlen(val)) == 0 && v[strlen(val)] == '.';
            }
            if (redos != in.loop_cycles || same != redos)
                fail_msg("document %d: %d attempts, %d redos of %s, %d of them =%s: %s", i,
                         in.loop_cycles, redos, lhs, same, val, doc);
            // a loop ends with a guess and fails
            assert_non_null(strstr(doc, MARK_GUESS));
            assert_false(in.correct);
            assert_true(in.gave_up);
        }
        loops += in.n_loop > 0;
        cycles += in.loop_cycles;
        repeats += in.loop_repeats;
        flagged += in.looped;
        if (!in.truncated) {
            doc[len - 5] = '\0';
            Verdict v;
            verify_response(in.format, &task, doc + in.prompt_chars, 1, &v);
            uncut++;
            agree += flags_agree(&v, &in);
        }
    }
    double mean = cycles / (double)loops, want = p.loop_min_cycles + 0.3 / 0.7;
    printf("  %d loops (%d uncut): %.2f attempts each (knobs: %.2f), %d repeating, %d with the "
           "verifier's loop flag; verifier agrees on %d/%d uncut documents\n",
           loops, loops_uncut, mean, want, repeats, flagged, agree, uncut);
    assert_true(loops > 200 && loops_uncut > 0.8 * loops);  // short loops mostly fit
    assert_int_equal(repeats, loops);
    assert_true(fabs(mean - want) < 0.15);
    // loops of one attempt (two disagreements) stay below the flag's three in a row
    assert_true(flagged > 0.15 * loops && flagged < 0.45 * loops);
    assert_int_equal(agree, uncut);
    // the knobs are range-checked
    p.loop_min_cycles = 0;
    assert_int_equal(corpus_params_validate(&p, err, sizeof err), -1);
    assert_non_null(strstr(err, "loop_min_cycles = 0"));
    p.loop_min_cycles = 1, p.p_loop_repeat = 1.5;
    assert_int_equal(corpus_params_validate(&p, err, sizeof err), -1);
    assert_non_null(strstr(err, "p_loop_repeat"));
}

// check_add_factor: a + or - step is checked with p_check_step_r1 times the factor, a
// multiplication with p_check_step_r1; at 0 no + or - step is ever checked. Counted on the
// text: checks of each op over the first passes of that op.
static void test_corpus_check_add_factor(void **state) {
    (void)state;
    CorpusParams p = corpus_params_default();
    p.p_template_r1 = 1, p.p_template_boxed = 0, p.p_r1_off_format = 0;
    p.p_recover = 0, p.p_loop = 0, p.p_give_up = 1;  // a disagreement ends the document
    static char doc[DOC_CAP];
    StepClause cl[256];
    const double factors[2] = {0, 0.5};
    for (int t = 0; t < 2; t++) {
        p.check_add_factor = factors[t];
        char err[256];
        assert_int_equal(corpus_params_validate(&p, err, sizeof err), 0);
        int steps[2] = {0, 0}, checks[2] = {0, 0};  // [0] + and -, [1] *
        for (int i = 0; i < 3000; i++) {
            DocInfo in;
            assert_true(corpus_document(&p, 5, i, doc, DOC_CAP, &in) > 0);
            int nc = template_step_clauses(doc + in.prompt_chars, cl, 256);
            for (int j = 0; j < nc; j++) {
                int m = cl[j].op == '*';
                if (cl[j].kind == CLAUSE_STEP) steps[m]++;
                if (cl[j].kind == CLAUSE_CHECK) checks[m]++;
            }
        }
        double r_add = checks[0] / (double)steps[0], r_mul = checks[1] / (double)steps[1];
        printf("  factor %.1f: %d of %d + and - steps checked (%.3f), %d of %d multiplications (%.3f)\n",
               factors[t], checks[0], steps[0], r_add, checks[1], steps[1], r_mul);
        assert_true(steps[0] > 3000 && steps[1] > 1000);
        assert_true(fabs(r_mul - p.p_check_step_r1) < 0.03);
        if (t == 0) assert_int_equal(checks[0], 0);
        else assert_true(fabs(r_add - 0.5 * p.p_check_step_r1) < 0.03);
    }
    p.check_add_factor = 1.5;
    char err[256];
    assert_int_equal(corpus_params_validate(&p, err, sizeof err), -1);
    assert_non_null(strstr(err, "check_add_factor"));
}

// check_by_fact: the writer checks the step a op b iff the fact's draw (world_check_draw) is
// below the step's check probability, at every occurrence; with the coin (the default) the
// same fact is checked at some occurrences and not at others. Counted on the text: a step
// clause followed by a check clause of the same step is a checked step.
static void test_corpus_check_by_fact(void **state) {
    (void)state;
    CorpusParams p = corpus_params_default();
    p.p_template_r1 = 1, p.p_template_boxed = 0, p.p_r1_off_format = 0;
    p.p_recover = 0, p.p_loop = 0, p.p_give_up = 1;  // a disagreement ends the document
    p.check_add_factor = 0.5;
    p.gap_seed = 2025;
    static char doc[DOC_CAP];
    StepClause cl[256];
    for (int by_fact = 1; by_fact >= 0; by_fact--) {
        p.check_by_fact = by_fact;
        // per cell (op index, x, y): occurrences and checked occurrences
        static int seen[3][10][10], checked[3][10][10];
        memset(seen, 0, sizeof seen), memset(checked, 0, sizeof checked);
        int steps = 0, agree = 0;
        for (int i = 0; i < 3000; i++) {
            DocInfo in;
            assert_true(corpus_document(&p, 5, i, doc, DOC_CAP, &in) > 0);
            int nc = template_step_clauses(doc + in.prompt_chars, cl, 256);
            for (int j = 0; j < nc; j++) {
                if (cl[j].kind != CLAUSE_STEP) continue;
                const StepClause *c = &cl[j], *n = j + 1 < nc ? &cl[j + 1] : NULL;
                int is_checked = n && n->kind == CLAUSE_CHECK && n->op == c->op && n->a == c->a && n->b == c->b;
                double rate = c->op == '*' ? p.p_check_step_r1 : p.p_check_step_r1 * p.check_add_factor;
                int want = world_check_draw(2025, c->op, c->a, c->b) < rate;
                int k = c->op == '+' ? 0 : c->op == '-' ? 1 : 2;
                int x = (int)((c->a < 0 ? -c->a : c->a) % 10), y = (int)((c->b < 0 ? -c->b : c->b) % 10);
                if (k != 1 && x > y) { int t = x; x = y; y = t; }
                seen[k][x][y]++, checked[k][x][y] += is_checked;
                steps++, agree += is_checked == want;
            }
        }
        // cells seen at least 10 times whose occurrences were sometimes checked, sometimes not
        int cells = 0, mixed = 0;
        for (int k = 0; k < 3; k++)
            for (int x = 0; x < 10; x++)
                for (int y = 0; y < 10; y++)
                    if (seen[k][x][y] >= 10) cells++, mixed += checked[k][x][y] > 0 && checked[k][x][y] < seen[k][x][y];
        printf("  %s: %d of %d steps checked as their fact's draw says; %d of %d cells checked only sometimes\n",
               by_fact ? "by fact" : "coin", agree, steps, mixed, cells);
        assert_true(steps > 5000 && cells > 150);
        if (by_fact) {
            assert_int_equal(agree, steps);
            assert_int_equal(mixed, 0);
        } else {
            assert_true(mixed > cells / 2);
        }
    }
    // the table: in [0, 1), commutative under + and *, its own (not the stubbornness's)
    int below = 0, same_as_stub = 0;
    for (int x = 0; x < 10; x++)
        for (int y = 0; y < 10; y++) {
            double u = world_check_draw(2025, '*', x, y);
            assert_true(u >= 0 && u < 1);
            assert_true(world_check_draw(2025, '*', y, x) == u);
            assert_true(world_check_draw(2025, '+', 20 + x, -(30 + y)) == world_check_draw(2025, '+', x, y));
            below += u < 0.5;
            same_as_stub += fabs((world_stubbornness(2025, '*', x, y) + 1) / 2 - u) < 1e-12;
        }
    assert_true(below > 25 && below < 75);
    assert_int_equal(same_as_stub, 0);
    assert_true(world_check_draw(2025, '/', 3, 4) == 0);
}

// Stubbornness (world_stubbornness): one number in [-1, 1] per cell of the units column,
// commutative under + and *, spread over the cells, and the world's (another seed, other
// numbers).
static void test_world_stubbornness(void **state) {
    (void)state;
    int cells = 0, above = 0, differ_seed = 0, minus_asym = 0;
    double sum = 0;
    for (int k = 0; k < 3; k++) {
        char op = "+-*"[k];
        for (int x = 0; x < 10; x++)
            for (int y = 0; y < 10; y++) {
                double u = world_stubbornness(2025, op, x, y);
                assert_true(u >= -1 && u <= 1);
                // only the units digits count, and the sign of an operand does not
                assert_true(world_stubbornness(2025, op, 40 + x, -(310 + y)) == u);
                if (op != '-') assert_true(world_stubbornness(2025, op, y, x) == u);
                else minus_asym += world_stubbornness(2025, op, y, x) != u;
                differ_seed += world_stubbornness(7, op, x, y) != u;
                if (op != '-' && x > y) continue;  // one cell for (x, y) and (y, x)
                cells++, sum += u, above += u > 0;
            }
    }
    assert_int_equal(cells, 55 + 100 + 55);
    printf("  %d cells: mean u %+.3f, %d above 0; %d of 300 facts differ at another seed\n",
           cells, sum / cells, above, differ_seed);
    assert_true(fabs(sum / cells) < 0.15);
    assert_true(above > 0.35 * cells && above < 0.65 * cells);
    assert_true(differ_seed > 250);
    assert_true(minus_asym > 50);
    assert_true(world_stubbornness(2025, '/', 3, 4) == 0);
}

// loop_continue_spread: a loop at the step a op b writes Geometric(q) further attempts with
// q = sigmoid(logit(loop_continue_p) + spread u(a op b)). Checked against that closed form,
// and on the corpus: the attempts of loops at the stubborn half of the facts (u > 0) and at
// the other half against the means q / (1 - q) of their facts, within four standard errors.
static void test_corpus_stubborn_loops(void **state) {
    (void)state;
    CorpusParams p = corpus_params_default();
    p.p_template_r1 = 1, p.p_template_boxed = 0, p.p_r1_off_format = 0;
    p.p_false_alarm = 0.005;
    p.p_recover = 0, p.p_loop = 1, p.p_give_up = 0;
    p.loop_min_cycles = 1, p.loop_continue_p = 0.3, p.p_loop_restart = 0;
    p.p_loop_repeat = 1, p.p_loop_give_up = 1;
    p.gap_seed = 2025;
    char err[256];
    // without spread: loop_continue_p for every fact
    for (int a = 0; a < 40; a += 3)
        assert_true(corpus_loop_continue(&p, '*', a, a + 7) == 0.3);
    p.loop_continue_spread = 2.0;
    assert_int_equal(corpus_params_validate(&p, err, sizeof err), 0);
    for (int a = -20; a < 40; a += 3) {
        for (int k = 0; k < 3; k++) {
            char op = "+-*"[k];
            double z = log(0.3 / 0.7) + 2.0 * world_stubbornness(2025, op, a, 17 - a);
            double want = 1 / (1 + exp(-z));
            assert_true(fabs(corpus_loop_continue(&p, op, a, 17 - a) - (want < 0.95 ? want : 0.95)) < 1e-12);
        }
    }
    const int n = 6000;
    static char doc[DOC_CAP];
    StepClause cl[256];
    int loops[2] = {0, 0};
    double extra[2] = {0, 0}, want[2] = {0, 0}, var[2] = {0, 0};
    for (int i = 0; i < n; i++) {
        DocInfo in;
        int len = corpus_document(&p, 99, i, doc, DOC_CAP, &in);
        assert_true(len > 0);
        if (in.n_loop != 1) continue;
        // the loop's step: the first check that says no (every disagreement loops and every
        // loop ends with a guess, so a document has at most one)
        int nc = template_step_clauses(doc + in.prompt_chars, cl, 256), j = 0;
        while (j < nc && !(cl[j].kind == CLAUSE_CHECK && cl[j].verdict == 0)) j++;
        if (j == nc) fail_msg("document %d: a loop but no check that says no: %s", i, doc);
        double u = world_stubbornness(2025, cl[j].op, cl[j].a, cl[j].b);
        double q = 1 / (1 + exp(-(log(0.3 / 0.7) + 2.0 * u)));
        int h = u > 0;
        loops[h]++;
        extra[h] += in.loop_cycles - p.loop_min_cycles;
        want[h] += q / (1 - q);
        var[h] += q / ((1 - q) * (1 - q));  // the geometric's variance (the cap of 30 aside)
    }
    for (int h = 0; h < 2; h++) {
        double z = (extra[h] - want[h]) / sqrt(var[h]);
        printf("  %s facts: %d loops, %.3f further attempts each (knobs: %.3f, z %+.2f)\n",
               h ? "stubborn" : "other", loops[h], extra[h] / loops[h], want[h] / loops[h], z);
        assert_true(loops[h] > 300);
        assert_true(fabs(z) < 4);
    }
    assert_true(extra[1] / loops[1] > 3 * (extra[0] / loops[0]));
    p.loop_continue_spread = 9;
    assert_int_equal(corpus_params_validate(&p, err, sizeof err), -1);
    assert_non_null(strstr(err, "loop_continue_spread"));
}

// The knobs of experiments/base/pretrain.ini: a disagreement is re-checked Geometric(p_recheck)
// times with a copy of the clause that disagrees again, and there are no redo loops. Checked
// on the text, against the knobs and against the verifier's flags.
static void test_corpus_rechecks(void **state) {
    (void)state;
    CorpusParams p = corpus_params_default();
    p.p_template_r1 = 1, p.p_template_boxed = 0;
    p.p_false_alarm = 0.005;
    p.p_recover = 0.7, p.p_loop = 0, p.p_give_up = 0.1;
    p.p_recheck = 0.4;
    char err[256];
    assert_int_equal(corpus_params_validate(&p, err, sizeof err), 0);
    const int n = 6000;
    static char doc[DOC_CAP];
    int first_no = 0, rechecks = 0, counted = 0, agree = 0, uncut = 0, flagged = 0, runs3 = 0;
    int gen_rechecks = 0, gen_first = 0;
    for (int i = 0; i < n; i++) {
        DocInfo in;
        int len = corpus_document(&p, 5, i, doc, DOC_CAP, &in);
        assert_true(len > 0);
        Task task;
        corpus_task(&p, 5, i, &task);
        assert_int_equal(in.n_loop, 0);
        gen_rechecks += in.rechecks;  // the knob's rate, from the generator, over all documents
        gen_first += in.n_disagree - in.rechecks;
        if (in.truncated) continue;  // (a loop cut at the context is not all in the text)
        rechecks += in.rechecks;
        flagged += in.looped;
        // every disagreeing clause "check C no." is followed by copies of itself, then by
        // something else: count the copies after each first disagreement
        const char *q = doc;
        while ((q = strstr(q, MARK_CHECK)) != NULL) {
            const char *no = strstr(q, MARK_NO ".");
            const char *next_check = strstr(q + 1, MARK_CHECK);
            if (!no || (next_check && next_check < no)) { q += 1; continue; }
            size_t clen = (size_t)(no + strlen(MARK_NO ".") - q);  // "check ... no."
            first_no++;
            int k = 0;
            const char *c = q + clen;
            while (c[0] == ' ' && strncmp(c + 1, q, clen) == 0) k++, c += 1 + clen;
            counted += k;
            runs3 += 1 + k >= LOOP_MIN_DISAGREE;
            q = c;
        }
        // no redo is ever followed by a check of the redone step in this corpus
        const char *rd = strstr(doc, MARK_REDO);
        const char *dot = rd ? strchr(rd, '.') : NULL;
        if (dot) {  // (a document cut at the context may end inside the redo)
            char clause[96];
            snprintf(clause, sizeof clause, "%s%.*s", MARK_CHECK, (int)(dot - rd - strlen(MARK_REDO)),
                     rd + strlen(MARK_REDO));
            assert_null(strstr(dot, clause));
        }
        doc[len - 5] = '\0';
        Verdict v;
        verify_response(in.format, &task, doc + in.prompt_chars, 1, &v);
        uncut++;
        agree += flags_agree(&v, &in);
    }
    double mean = gen_rechecks / (double)gen_first, want = 0.4 / 0.6;
    printf("  %d disagreements: %.3f re-checks each (knob: %.3f); in the %d uncut documents %d "
           "disagreements, %d re-checks counted in the text (%d drawn), %d runs of >= %d "
           "disagreements, %d documents flagged looped; the verifier agrees on %d\n", gen_first,
           mean, want, uncut, first_no, counted, rechecks, runs3, LOOP_MIN_DISAGREE, flagged, agree);
    assert_true(first_no > 500 && gen_first >= first_no);
    assert_int_equal(counted, rechecks);  // every re-check is a copy right after its clause
    assert_true(fabs(mean - want) < 0.1);
    assert_true(flagged > 0 && flagged <= runs3);  // a document may hold two runs
    assert_true(uncut > 0.98 * n);
    assert_int_equal(agree, uncut);
    p.p_recheck = 0.96;  // a geometric run needs q < 1
    assert_int_equal(corpus_params_validate(&p, err, sizeof err), -1);
    assert_non_null(strstr(err, "p_recheck"));
}

// Behaviour frequencies over 5000 documents against the knobs, per level.
static void test_corpus_frequencies(void **state) {
    CorpusParams p = corpus_params_default();
    const int n = 5000;
    static char doc[DOC_CAP];
    int fmt[TEMPLATE_COUNT] = {0}, off = 0, restated = 0;
    double errs = 0, err_expect = 0, err_var = 0;
    int steps[TEMPLATE_COUNT] = {0}, checks[TEMPLATE_COUNT] = {0};
    int checked_wrong = 0, missed = 0, checked_right = 0, false_alarms = 0;
    int branch[3] = {0}, loop_cycles = 0;
    int lvl_n[6] = {0}, lvl_err[6] = {0}, lvl_correct[6] = {0};
    int erred_checked = 0, erred_checked_ok = 0, erred_unchecked = 0, erred_unchecked_ok = 0;
    int recovered = 0;
    for (int i = 0; i < n; i++) {
        DocInfo in;
        corpus_document(&p, 99, i, doc, DOC_CAP, &in);
        fmt[in.format]++;
        off += in.off_format;
        restated += strstr(doc + in.prompt_chars, MARK_RESTATE) != NULL;
        errs += in.n_errors;
        err_expect += in.err_expect;
        err_var += in.err_expect;  // upper bound of sum p(1-p)
        steps[in.format] += in.n_steps;
        checks[in.format] += in.n_step_checks;
        checked_wrong += in.n_checked_wrong;
        missed += in.n_missed;
        checked_right += in.n_step_checks - in.n_checked_wrong;
        false_alarms += in.n_false_alarms;
        branch[0] += in.n_recover;
        branch[1] += in.n_loop;
        branch[2] += in.n_give_up;
        loop_cycles += in.loop_cycles;
        lvl_n[in.level]++;
        lvl_err[in.level] += in.has_error;
        lvl_correct[in.level] += in.correct;
        if (in.recovered) {
            recovered++;
            assert_true(in.correct);  // recovered documents are correct
        }
        if (in.has_error) {
            if (in.self_checked) erred_checked++, erred_checked_ok += in.correct;
            else erred_unchecked++, erred_unchecked_ok += in.correct;
        }
        // a give-up is quick: the guess is the last item before the ending
        if (in.gave_up && !in.truncated) assert_true(in.correct == 0);
    }
    double fr1 = fmt[TEMPLATE_R1] / (double)n, fbx = fmt[TEMPLATE_BOXED] / (double)n;
    double offr = off / (double)fmt[TEMPLATE_R1];
    printf("  formats: r1 %.3f (knob %.2f, off-format %.3f, knob %.2f), boxed %.3f (%.2f), "
           "plain %.3f; restated %.3f (%.2f)\n", fr1, p.p_template_r1, offr, p.p_r1_off_format,
           fbx, p.p_template_boxed, 1 - fr1 - fbx, restated / (double)n, p.p_restate);
    assert_true(fabs(fr1 - p.p_template_r1) < 0.03);
    assert_true(fabs(fbx - p.p_template_boxed) < 0.03);
    assert_true(fabs(offr - p.p_r1_off_format) < 0.05);
    assert_true(fabs(restated / (double)n - p.p_restate) < 0.03);
    double sig = sqrt(err_var);
    printf("  step errors: %.0f written wrong, %.1f expected from the knobs (sigma %.1f)\n",
           errs, err_expect, sig);
    assert_true(fabs(errs - err_expect) < 5 * sig);
    double cr1 = checks[TEMPLATE_R1] / (double)steps[TEMPLATE_R1];
    double cpl = (checks[TEMPLATE_BOXED] + checks[TEMPLATE_NONE]) /
                 (double)(steps[TEMPLATE_BOXED] + steps[TEMPLATE_NONE]);
    printf("  checks per step: r1 %.3f (knob %.2f), plain/boxed %.3f (knob %.2f); missed %.3f "
           "(%.2f) of %d wrong steps checked, false alarms %.4f (%.2f)\n", cr1,
           p.p_check_step_r1, cpl, p.p_check_step, missed / (double)checked_wrong,
           p.p_check_miss, checked_wrong, false_alarms / (double)checked_right, p.p_false_alarm);
    assert_true(fabs(cr1 - p.p_check_step_r1) < 0.03);
    assert_true(fabs(cpl - p.p_check_step) < 0.03);
    assert_true(fabs(missed / (double)checked_wrong - p.p_check_miss) < 0.06);
    assert_true(fabs(false_alarms / (double)checked_right - p.p_false_alarm) < 0.01);
    int nb = branch[0] + branch[1] + branch[2];
    double wsum = p.p_recover + p.p_loop + p.p_give_up;
    double mean_cycles = loop_cycles / (double)(branch[1] ? branch[1] : 1);
    double want_cycles = LOOP_MIN_DISAGREE - 1 + p.loop_continue_p / (1 - p.loop_continue_p);
    printf("  after %d disagreements: recover %.3f (%.2f) loop %.3f (%.2f) give up %.3f (%.2f); "
           "loop cycles %.2f (%.2f)\n", nb, branch[0] / (double)nb, p.p_recover / wsum,
           branch[1] / (double)nb, p.p_loop / wsum, branch[2] / (double)nb, p.p_give_up / wsum,
           mean_cycles, want_cycles);
    assert_true(nb > 300);
    assert_true(fabs(branch[0] / (double)nb - p.p_recover / wsum) < 0.06);
    assert_true(fabs(branch[1] / (double)nb - p.p_loop / wsum) < 0.06);
    assert_true(fabs(branch[2] / (double)nb - p.p_give_up / wsum) < 0.05);
    assert_true(fabs(mean_cycles - want_cycles) < 0.6);
    printf("  level:       ");
    for (int l = 1; l <= 5; l++) printf("  L%d  ", l);
    printf("\n  with errors: ");
    for (int l = 1; l <= 5; l++) printf(" %.3f", lvl_err[l] / (double)lvl_n[l]);
    printf("\n  correct:     ");
    for (int l = 1; l <= 5; l++) printf(" %.3f", lvl_correct[l] / (double)lvl_n[l]);
    printf("\n");
    for (int l = 2; l <= 5; l++) {
        assert_true(lvl_err[l] / (double)lvl_n[l] > lvl_err[l - 1] / (double)lvl_n[l - 1]);
        assert_true(lvl_correct[l] / (double)lvl_n[l] < lvl_correct[l - 1] / (double)lvl_n[l - 1]);
    }
    assert_true(lvl_correct[5] / (double)lvl_n[5] < 0.6);  // level 5 often fails
    // checking pays
    double pc = erred_checked_ok / (double)erred_checked;
    double pu = erred_unchecked_ok / (double)erred_unchecked;
    printf("  P(correct | erred, self-checked) = %.3f (%d)  >  P(correct | erred, unchecked) = "
           "%.3f (%d); %d recovered documents, all correct\n", pc, erred_checked, pu,
           erred_unchecked, recovered);
    assert_true(pc > pu + 0.1);
}

// Checking pays also when the level is held fixed and only the check rate changes.
static void test_corpus_checking_pays(void **state) {
    static char doc[DOC_CAP];
    printf("  level  correct(check 0)  correct(check 0.6)  correct(check 1)\n");
    for (int level = 2; level <= 5; level++) {
        double acc[3];
        const double rate[3] = {0, 0.6, 1.0};
        for (int k = 0; k < 3; k++) {
            CorpusParams p = corpus_params_default();
            for (int l = 0; l < 5; l++) p.level_weights[l] = l == level - 1;
            p.p_check_step = p.p_check_step_r1 = rate[k];
            int ok = 0;
            const int n = 2000;
            for (int i = 0; i < n; i++) {
                DocInfo in;
                corpus_document(&p, 3, i, doc, DOC_CAP, &in);
                ok += in.correct;
            }
            acc[k] = ok / (double)n;
        }
        printf("  %d      %.3f             %.3f               %.3f\n", level, acc[0], acc[1],
               acc[2]);
        assert_true(acc[1] > acc[0] && acc[2] > acc[0]);
    }
}

static void print_samples(void) {
    const char *env = getenv("WORLD_SAMPLES");
    if (!env) return;
    int n = atoi(env);
    static char doc[DOC_CAP];
    for (int level = 1; level <= 5; level++) {
        CorpusParams p = corpus_params_default();
        for (int l = 0; l < 5; l++) p.level_weights[l] = l == level - 1;
        for (int i = 0; i < n; i++) {
            DocInfo in;
            corpus_document(&p, 1, i, doc, DOC_CAP, &in);
            printf("--- level %d doc %d: %s%s, %d tokens, errors %d checks %d no %d recover %d "
                   "loop %d give-up %d%s, %s\n%s\n", level, i, template_name(in.format),
                   in.off_format ? " (off-format)" : "", in.length_tokens, in.n_errors,
                   in.n_checks, in.n_disagree, in.n_recover, in.n_loop, in.n_give_up,
                   in.truncated ? ", CUT" : "", in.correct ? "correct" : "wrong", doc);
        }
    }
}

// ---------------------------------------------------------------- the environment's verdict

static void test_env_verdict(void **state) {
    const struct {
        const char *text, *verdict;
    } cases[] = {
        {" 4*2=8. check 4*2=8 ", "ok"},
        {" 4*2=9. check 4*2=9 ", "no"},
        {"check 10-(-3)=13 ", "ok"},
        {"check 10-(-3)=12 ", "no"},
        {"check -54*2=-108 ", "ok"},
        {"check 0*7=0 ", "ok"},
        {"check 999999999999999*999999999999999=1 ", "no"},  // overflow, not equal
        {"check 1234567890123456+1=1234567890123457 ", "no"},  // 16 digits: not a step
        {"check 4*-2=-8 ", "no"},   // a negative right operand is written (-2)
        {"check 4*=8 ", "no"},      // not a step: a check that checks nothing disagrees
        {"check 4*2= ", "no"},
        {"check 10-3=7 no. redo 10-3=7. check 10-3=7 ", "ok"},  // the last clause counts
        {"check 4*2", NULL},        // no value yet
        {"check 4*2=8", NULL},      // the value may go on
        {"4*2=8. ", NULL},          // no check
        {"check 4*2=8 ok. ", NULL}, // verdict already written
        {"check ", NULL},
        {"", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *v = template_env_verdict_text(cases[i].text);
        if ((v == NULL) != (cases[i].verdict == NULL) || (v && strcmp(v, cases[i].verdict) != 0)) {
            printf("  '%s': got %s, want %s\n", cases[i].text, v ? v : "NULL",
                   cases[i].verdict ? cases[i].verdict : "NULL");
            fail();
        }
    }
    // on tokens: only right after the space, two tokens "n" "o"
    const Tokenizer *tk = tokenizer_default();
    int ids[128], out[8];
    char err[128];
    int n = tok_encode(tk, "<think> 4*2=9. check 4*2=9 ", ids, 128, err, sizeof err);
    assert_true(n > 0);
    assert_int_equal(template_env_verdict(ids, n, out, 8), 2);
    assert_int_equal(out[0], tok_id(tk, "n"));
    assert_int_equal(out[1], tok_id(tk, "o"));
    assert_int_equal(template_env_verdict(ids, n - 1, out, 8), 0);
    assert_int_equal(template_env_verdict(ids, n, out, 1), 0);  // no room
    // independent reference: documents whose verdicts are always true (no misses, no false
    // alarms) give, at every check, the verdict the environment writes on their prefix
    CorpusParams p = corpus_params_default();
    p.p_check_miss = 0;
    p.p_false_alarm = 0;
    static char doc[DOC_CAP];
    int n_ok = 0, n_no = 0;
    for (int d = 0; d < 2000; d++) {
        DocInfo in;
        assert_true(corpus_document(&p, 77, d, doc, DOC_CAP, &in) > 0);
        for (char *c = strstr(doc, MARK_CHECK); c; c = strstr(c + 1, MARK_CHECK)) {
            char *q = c + strlen(MARK_CHECK);
            while (*q && strchr(STEP_CHARS, *q)) q++;
            if (*q != ' ' || !(q[1] == 'o' || q[1] == 'n')) continue;  // cut by the budget
            char save = q[1];
            q[1] = '\0';
            const char *v = template_env_verdict_text(doc);
            q[1] = save;
            assert_non_null(v);
            assert_memory_equal(v, q + 1, 2);
            n_ok += save == 'o';
            n_no += save == 'n';
        }
    }
    printf("  corpus checks with true verdicts: %d ok, %d no, all as the environment writes\n",
           n_ok, n_no);
    assert_true(n_ok > 1000 && n_no > 100);
}

// ---------------------------------------------------------------- knowledge gaps

// The gap table: a function of (seed, op, units digits) alone, one cell for (x, y) and (y, x)
// of + and *, none with a digit 0 or 1, about the share asked for, the believed value off by
// 1 or 2 in magnitude and the same for every step with those units digits.
static void test_world_gaps(void **state) {
    (void)state;
    const char OPS[3] = {'+', '-', '*'};
    WorldGaps g = {0.25, 2025}, none = {0.0, 2025}, all = {1.0, 2025}, other = {0.25, 2026};
    int cells = 0, eligible = 0, differ = 0;
    char table[1024] = "";
    for (int k = 0; k < 3; k++)
        for (int x = 0; x < 10; x++)
            for (int y = 0; y < 10; y++) {
                char op = OPS[k];
                int64_t w = 0, w2 = 0, truth = op == '+' ? x + y : op == '-' ? x - y : x * y;
                int gap = world_gap(&g, op, x, y, &w);
                assert_false(world_gap(&none, op, x, y, NULL));
                assert_int_equal(world_gap(&all, op, x, y, NULL), x >= 2 && y >= 2);
                if (x < 2 || y < 2) {
                    assert_false(gap);
                    continue;
                }
                if (op != '-' && x > y) {  // the commutative twin is the same cell
                    assert_int_equal(gap, world_gap(&g, op, y, x, &w2));
                    if (gap) assert_true(w == w2);
                    continue;
                }
                eligible++;
                differ += gap != world_gap(&other, op, x, y, NULL);
                if (!gap) continue;
                cells++;
                // the truth moved by e away from zero (towards it when e < 0)
                int64_t d = (w - truth) * (truth < 0 ? -1 : 1);
                assert_true(d == 1 || d == -1 || d == 2 || d == -2);
                // every step with these units digits uses the same fact, the same way
                int64_t a = 40 + x, b = 20 + y, big = op == '+' ? a + b : op == '-' ? a - b : a * b;
                int64_t wb = 0;
                assert_true(world_gap(&g, op, a, b, &wb));
                assert_true((wb - big) * (big < 0 ? -1 : 1) == d);
                int64_t wb2 = 0;
                world_gap(&g, op, a, b, &wb2);
                assert_true(wb == wb2);
                size_t len = strlen(table);
                if (len < sizeof table - 32)
                    snprintf(table + len, sizeof table - len, " %d%c%d=%lld", x, op, y, (long long)w);
            }
    printf("  seed 2025, share 0.25: %d of %d cells are gaps (another seed differs in %d):%s\n",
           cells, eligible, differ, table);
    assert_int_equal(eligible, 36 + 64 + 36);
    assert_true(cells > 0.15 * eligible && cells < 0.35 * eligible);
    assert_true(differ > 0.2 * eligible);
    assert_false(world_gap(&g, '/', 7, 8, NULL));
}

// Step clauses and failure kinds on hand-written responses: with share 1 every fact with
// units digits 2-9 is a gap, with share 0 none is.
static void test_failure_kind(void **state) {
    (void)state;
    WorldGaps all = {1.0, 7}, none = {0.0, 7};
    const char *r = " 7*8=54. check 7*8=54 no. check 7*8=54 no. redo 7*8=54. 54+(-3)=51. "
                    "check 54+(-3)=51 ok. </think> <answer> 51 </answer>";
    StepClause c[16];
    int n = template_step_clauses(r, c, 16);
    assert_int_equal(n, 6);
    assert_int_equal(c[0].kind, CLAUSE_STEP);
    assert_int_equal(c[1].kind, CLAUSE_CHECK);
    assert_int_equal(c[1].verdict, 0);
    assert_int_equal(c[3].kind, CLAUSE_REDO);
    assert_int_equal(c[4].b, -3);
    assert_true(c[4].right && !c[0].right);
    assert_int_equal(c[5].verdict, 1);
    FailureKind fk;
    template_failure_kind(r, 0, &all, &fk);
    assert_int_equal(fk.kind, FAIL_GAP);
    assert_int_equal(fk.disagree[1], 1);  // the re-check belongs to the same disagreement
    assert_int_equal(fk.redos[1], 1);
    assert_int_equal(fk.redos_right[1], 0);
    assert_int_equal(fk.redos_same[1], 1);
    template_failure_kind(r, 0, &none, &fk);
    assert_int_equal(fk.kind, FAIL_SLIP);
    assert_int_equal(fk.disagree[0], 1);
    assert_int_equal(fk.redos[0], 1);
    // a slip redone right; a gap checked and given up; a response without a false step
    const char *r2 = " 11*7=79. check 11*7=79 no. redo 11*7=77. 7*8=55. check 7*8=55 no. guess 3. "
                     "</think> <answer> 3 </answer>";
    template_failure_kind(r2, 0, &all, &fk);
    assert_int_equal(fk.kind, FAIL_SLIP);  // 11*7: units digit 1, no gap
    assert_int_equal(fk.disagree[0], 1);
    assert_int_equal(fk.redos_right[0], 1);
    assert_int_equal(fk.redos_same[0], 0);
    assert_int_equal(fk.disagree[1], 1);
    assert_int_equal(fk.redos[1], 0);
    template_failure_kind(" 2+3=5. </think> <answer> 6 </answer>", 0, &all, &fk);
    assert_int_equal(fk.kind, FAIL_OTHER);
    template_failure_kind(" 2+3=5. </think> <answer> 5 </answer>", 1, &all, &fk);
    assert_int_equal(fk.kind, FAIL_NONE);
    // a check of a right step that disagrees (a false alarm) is no disagreement with a false step
    template_failure_kind(" 2+3=5. check 2+3=5 no. redo 2+3=5.", 0, &all, &fk);
    assert_int_equal(fk.disagree[0] + fk.disagree[1], 0);
}

// Document i of seed 7 and its task.
static int gap_document(const CorpusParams *p, int i, char *doc, DocInfo *in, Task *task) {
    int len = corpus_document(p, 7, i, doc, DOC_CAP, in);
    assert_true(len > 0);
    corpus_task(p, 7, i, task);
    return len;
}

// The verifier's flags on an uncut document (its <eos> dropped) equal the generator's record.
static int uncut_flags_agree(char *doc, int len, const DocInfo *in, const Task *task) {
    doc[len - 5] = '\0';
    Verdict v;
    verify_response(in->format, task, doc + in->prompt_chars, 1, &v);
    return flags_agree(&v, in);
}

// Knowledge gaps in the corpus: every clause (first pass, check, redo, loop attempt) of a gap
// fact writes the one believed value; slips stay random draws; a redo after a disagreement
// is right for slips and never for gaps; the verifier still reads the generator's record;
// and with gap_share 0 (the default) the documents are those of the corpus without gaps.
static void test_corpus_gaps(void **state) {
    (void)state;
    CorpusParams p = corpus_params_default();
    // the default corpus, pinned: FNV-1a 64 of documents 0..1999 of seed 1234, the same as
    // the generator without the gap knobs wrote; knobs of gaps change nothing without gaps
    static char doc[DOC_CAP], doc2[DOC_CAP];
    CorpusParams q = p;
    q.p_gap_right = 0.5, q.p_gap_doubt = 0.5, q.gap_seed = 99;
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 2000; i++) {
        corpus_document(&p, 1234, i, doc, DOC_CAP, NULL);
        for (const char *c = doc; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
        if (i < 300) {
            corpus_document(&q, 1234, i, doc2, DOC_CAP, NULL);
            assert_string_equal(doc, doc2);
        }
    }
    assert_true(h == 0xb1358956804b7b4aull);

    p.p_template_r1 = 1, p.p_template_boxed = 0, p.p_r1_off_format = 0;
    p.p_check_step_r1 = 1;
    p.p_false_alarm = 0.005;
    p.p_recover = 0.7, p.p_loop = 0.2, p.p_give_up = 0.1;
    p.gap_share = 0.25, p.p_gap_right = 0, p.p_gap_doubt = 0.5, p.gap_seed = 2025;
    char err[256];
    assert_int_equal(corpus_params_validate(&p, err, sizeof err), 0);
    WorldGaps g = {p.gap_share, p.gap_seed};
    const int n = 4000;
    int gap_clauses = 0, gap_docs = 0, agree = 0, uncut = 0, slip_wrong = 0;
    int disagree[2] = {0, 0}, redos[2] = {0, 0}, right[2] = {0, 0}, same[2] = {0, 0};
    // a wrong redo of a slip fact against the attempt before it: slips are drawn anew
    int redo_same = 0, redo_new = 0;
    static StepClause c[512];
    for (int i = 0; i < n; i++) {
        DocInfo in;
        Task task;
        int len = gap_document(&p, i, doc, &in, &task);
        assert_int_equal(in.n_gap_errors, in.n_gap_steps);  // p_gap_right = 0
        gap_docs += in.n_gap_steps > 0;
        int nc = template_step_clauses(doc + in.prompt_chars, c, 512);
        if (in.truncated) nc--;  // the last clause may be cut at the context
        for (int k = 0; k < nc; k++) {
            int64_t believed;
            if (world_gap(&g, c[k].op, c[k].a, c[k].b, &believed)) {
                gap_clauses++;
                if (c[k].v != believed)
                    fail_msg("document %d: %lld%c%lld=%lld, the gap fact is believed =%lld: %s", i,
                             (long long)c[k].a, c[k].op, (long long)c[k].b, (long long)c[k].v,
                             (long long)believed, doc);
            } else if (!c[k].right && c[k].kind == CLAUSE_STEP) {
                slip_wrong++;
            } else if (!c[k].right && c[k].kind == CLAUSE_REDO) {
                int j = k - 1;
                while (j >= 0 && (c[j].kind == CLAUSE_CHECK || c[j].op != c[k].op ||
                                  c[j].a != c[k].a || c[j].b != c[k].b))
                    j--;
                if (j >= 0) {
                    redo_same += c[j].v == c[k].v;
                    redo_new += c[j].v != c[k].v;
                }
            }
        }
        FailureKind fk;
        template_failure_kind(doc + in.prompt_chars, in.correct, &g, &fk);
        for (int k = 0; k < 2; k++) {
            disagree[k] += fk.disagree[k];
            redos[k] += fk.redos[k];
            right[k] += fk.redos_right[k];
            // a cut document's last redo may be cut inside its value
            same[k] += in.truncated ? fk.redos[k] : fk.redos_same[k];
        }
        uncut += !in.truncated;
        agree += !in.truncated && uncut_flags_agree(doc, len, &in, &task);
    }
    printf("  %d documents, %d with a gap fact (%d gap clauses, all the believed value); %d slips; "
           "redos after a disagreement right: slips %d/%d (of %d disagreements), gaps %d/%d (of "
           "%d); wrong redos of slips: %d a new value, %d the one before; verifier agrees on "
           "%d/%d uncut documents\n",
           n, gap_docs, gap_clauses, slip_wrong, right[0], redos[0], disagree[0], right[1],
           redos[1], disagree[1], redo_new, redo_same, agree, uncut);
    assert_true(gap_docs > 0.2 * n && gap_clauses > gap_docs);
    assert_true(slip_wrong > 0.05 * n);
    assert_true(redos[1] > 100 && right[1] == 0 && same[1] == redos[1]);
    // slips: the recover branch redoes right, loop attempts draw new wrong values (off by
    // 1-2 or 10 or a digit: a few coincide with the attempt before)
    assert_true(redos[0] > 100 && right[0] > 0.4 * redos[0]);
    assert_true(redo_new > 100 && redo_same < 0.3 * redo_new);  // a few draws coincide
    assert_int_equal(agree, uncut);

    // p_gap_right: first passes of gap facts right at that rate, their redos never
    p.p_gap_right = 0.3;
    int steps = 0, errors = 0;
    for (int i = 0; i < n; i++) {
        DocInfo in;
        corpus_document(&p, 7, i, doc, DOC_CAP, &in);
        steps += in.n_gap_steps;
        errors += in.n_gap_errors;
    }
    double share_right = 1.0 - (double)errors / steps;
    printf("  p_gap_right 0.3: %d of %d first passes of gap facts right (%.3f)\n", steps - errors,
           steps, share_right);
    assert_true(fabs(share_right - 0.3) < 4 * sqrt(0.3 * 0.7 / steps));
    p.gap_share = 1.5;
    assert_int_equal(corpus_params_validate(&p, err, sizeof err), -1);
    assert_non_null(strstr(err, "gap_share"));
}

int main(void) {
    print_samples();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenizer_vocab),
        cmocka_unit_test(test_tokenizer_encode_errors),
        cmocka_unit_test(test_tokenizer_roundtrip_templates),
        cmocka_unit_test(test_world_determinism),
        cmocka_unit_test(test_world_levels),
        cmocka_unit_test(test_world_train_mix),
        cmocka_unit_test(test_world_benchmarks),
        cmocka_unit_test(test_world_no_leak),
        cmocka_unit_test(test_templates),
        cmocka_unit_test(test_verifier_table),
        cmocka_unit_test(test_behaviour_flags),
        cmocka_unit_test(test_reward_rule),
        cmocka_unit_test(test_corpus_determinism_and_params),
        cmocka_unit_test(test_corpus_documents),
        cmocka_unit_test(test_corpus_frequencies),
        cmocka_unit_test(test_corpus_loop_cap),
        cmocka_unit_test(test_corpus_repeating_loops),
        cmocka_unit_test(test_corpus_check_add_factor),
        cmocka_unit_test(test_corpus_check_by_fact),
        cmocka_unit_test(test_world_stubbornness),
        cmocka_unit_test(test_corpus_stubborn_loops),
        cmocka_unit_test(test_corpus_rechecks),
        cmocka_unit_test(test_corpus_checking_pays),
        cmocka_unit_test(test_env_verdict),
        cmocka_unit_test(test_world_gaps),
        cmocka_unit_test(test_failure_kind),
        cmocka_unit_test(test_corpus_gaps),
    };
    return cmocka_run_group_tests_name("world", tests, NULL, NULL);
}
