// test_corpus_mix.c: the corpus of Fig. 7's base models (issue 50): general and question-answer
// documents, and continued pretraining (pretrain --init: the weights loaded, the init's config
// and fingerprint recorded, a model pretrained again detected, a different architecture refused).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim/model/checkpoint.h"
#include "sim/io/config.h"
#include "sim/world/corpus.h"
#include "sim/rl/pretrain.h"
#include "sim/world/template.h"
#include "sim/world/tokenizer.h"
#include "sim/rl/resume.h"
#include "test_util.h"

static char dir[64];

static const char *tmp_path(const char *name) {
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

// ---------------------------------------------------------------- corpus

// General documents: no digit, no arithmetic symbol, no tag but the final <eos>, encodable, and
// between GENERAL_MIN_TOKENS and GENERAL_MAX_TOKENS tokens (or the cap); their share follows
// general_share; with both shares 0 every document is the default corpus's.
static void test_general_documents(void **state) {
    CorpusParams p = corpus_params_default();
    p.general_share = 1;
    const Tokenizer *tk = tokenizer_default();
    static char doc[8192];
    static int ids[8192];
    char err[128];
    for (int i = 0; i < 500; i++) {
        DocInfo info;
        int len = corpus_document(&p, 42, i, doc, sizeof doc, &info);
        assert_true(len > 5);
        assert_int_equal(info.kind, DOC_GENERAL);
        assert_string_equal(doc + len - 5, "<eos>");
        for (int j = 0; j < len - 5; j++)
            if (!(doc[j] >= 'a' && doc[j] <= 'z') && !strchr(" ,.?\n", doc[j]))
                fail_msg("general document %d has '%c' at %d: %s", i, doc[j], j, doc);
        int n = tok_encode(tk, doc, ids, 8192, err, sizeof err);
        assert_int_equal(n, info.length_tokens);
        assert_true(n >= 2 && n <= GENERAL_MAX_TOKENS);
    }
    // shares: 2000 documents at general_share 0.3 and qa_share 0.2; the counts within 4.5
    // binomial standard deviations of their means
    p.general_share = 0.3, p.qa_share = 0.2;
    int cnt[3] = {0, 0, 0};
    for (int i = 0; i < 2000; i++) cnt[corpus_doc_kind(&p, 42, i)]++;
    assert_true(fabs(cnt[DOC_GENERAL] - 600.0) < 4.5 * sqrt(2000 * 0.3 * 0.7));
    assert_true(fabs(cnt[DOC_QA] - 400.0) < 4.5 * sqrt(2000 * 0.2 * 0.8));
    // a math document of a mixed corpus is the default corpus's document of its index
    CorpusParams d = corpus_params_default();
    static char doc2[8192];
    int math = 0;
    for (int i = 0; i < 200; i++) {
        if (corpus_doc_kind(&p, 42, i) != DOC_MATH) continue;
        int a = corpus_document(&p, 42, i, doc, sizeof doc, NULL), b = corpus_document(&d, 42, i, doc2, sizeof doc2, NULL);
        assert_int_equal(a, b);
        assert_string_equal(doc, doc2);
        math++;
    }
    assert_true(math > 50);
    char e[256];
    p.general_share = 0.7, p.qa_share = 0.4;
    assert_int_equal(corpus_params_validate(&p, e, sizeof e), -1);
    assert_non_null(strstr(e, "general_share + qa_share"));
}

// Question-answer documents: the question in the document's format and a correct, unchecked
// solution: the verifier gives the reward and the format, no self-check, no disagreement.
static void test_qa_documents(void **state) {
    CorpusParams p = corpus_params_default();
    p.qa_share = 1;
    p.gap_share = 0.25;  // a QA document writes even the gap facts right
    p.p_r1_off_format = 1;
    static char doc[8192];
    int formats[3] = {0, 0, 0};
    for (int i = 0; i < 400; i++) {
        DocInfo info;
        int len = corpus_document(&p, 9, i, doc, sizeof doc, &info);
        assert_true(len > 0);
        assert_int_equal(info.kind, DOC_QA);
        Task t;
        corpus_task(&p, 9, i, &t);
        assert_int_equal(info.truncated, 0);
        assert_int_equal(info.n_checks, 0);
        assert_int_equal(info.n_errors, 0);
        // the response as the model would generate it: after the prompt, <eos> dropped
        char *resp = doc + info.prompt_chars;
        char *eos = strstr(resp, "<eos>");
        assert_non_null(eos);
        *eos = '\0';
        Verdict v;
        verify_response(info.format, &t, resp, 1, &v);
        if (!v.reward || !v.format_ok || v.self_checked) fail_msg("QA document %d fails its format: %s", i, doc);
        assert_null(strstr(resp, MARK_RESTATE));
        formats[info.format]++;
    }
    for (int f = 0; f < 3; f++) assert_true(formats[f] > 0);
}

// ---------------------------------------------------------------- continued pretraining

static Config *tiny_config(void) {
    char err[512];
    Config *c = config_new();
    const char *sets[] = {"model.vocab_size=58", "model.d_model=32", "model.n_layers=1", "model.n_heads=2",
                          "model.n_kv_heads=1", "model.d_ff=64", "pretrain.steps=3",
                          "pretrain.batch_size=4", "pretrain.micro_batch=4", "pretrain.warmup_steps=1",
                          "pretrain.log_every=10", "optim.lr=3e-3", "run.backend=cpu", "run.seed=7"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (config_set(c, sets[i], err, sizeof err) != 0) fail_msg("%s", err);
    return c;
}

static void test_continued_pretraining(void **state) {
    char err[1024], set[512];
    Config *c = tiny_config();
    assert_int_equal(config_set(c, "corpus.general_share=0.9", err, sizeof err), 0);
    const char *a = tmp_path("a.h5"), *b = tmp_path("b.h5");
    assert_int_equal(pretrain_run(c, NULL, a, NULL, PRETRAIN_NEW, NULL), 0);
    // stage 2 with lr 0: the output's weights are the init's (its fingerprint equals a's)
    assert_int_equal(config_set(c, "corpus.general_share=0", err, sizeof err), 0);
    assert_int_equal(config_set(c, "optim.lr=0", err, sizeof err), 0);
    snprintf(set, sizeof set, "pretrain.init=%s", a);
    assert_int_equal(config_set(c, set, err, sizeof err), 0);
    assert_int_equal(pretrain_run(c, NULL, b, NULL, PRETRAIN_NEW, NULL), 0);
    char fa[17], fb[17];
    assert_int_equal(resume_init_fingerprint(a, fa, err, sizeof err), 0);
    assert_int_equal(resume_init_fingerprint(b, fb, err, sizeof err), 0);
    assert_string_equal(fa, fb);
    // recorded: the init's fingerprint, its config (general_share 0.9), and its path
    char *fp = NULL, *init_cfg = NULL, *a_cfg = NULL, *b_cfg = NULL;
    assert_int_equal(checkpoint_read_str_attr(b, "init_fingerprint", &fp, err, sizeof err), 1);
    assert_string_equal(fp, fa);
    assert_int_equal(checkpoint_read_str_attr(b, "init_config", &init_cfg, err, sizeof err), 1);
    assert_int_equal(checkpoint_read_str_attr(a, "config", &a_cfg, err, sizeof err), 1);
    assert_string_equal(init_cfg, a_cfg);
    assert_non_null(strstr(init_cfg, "general_share = 0.9"));
    assert_int_equal(checkpoint_read_str_attr(b, "config", &b_cfg, err, sizeof err), 1);
    char want[600];
    snprintf(want, sizeof want, "init = \"%s\"", a);
    assert_non_null(strstr(b_cfg, want));
    // a model pretrained without --init records none
    char *none = NULL;
    assert_int_equal(checkpoint_read_str_attr(a, "init_fingerprint", &none, err, sizeof err), 0);
    assert_null(none);
    // the stored config agrees with now's, until the init is pretrained again
    assert_int_equal(pretrain_compare_model_config(b, c, err, sizeof err), 0);
    Config *c1 = tiny_config();
    assert_int_equal(config_set(c1, "corpus.general_share=0.9", err, sizeof err), 0);
    assert_int_equal(config_set(c1, "run.seed=8", err, sizeof err), 0);
    snprintf(set, sizeof set, "%s", a);
    unlink(a);
    assert_int_equal(pretrain_run(c1, NULL, a, NULL, PRETRAIN_NEW, NULL), 0);
    assert_int_equal(pretrain_compare_model_config(b, c, err, sizeof err), 1);
    assert_non_null(strstr(err, "pretrained again"));
    free(fp), free(init_cfg), free(a_cfg), free(b_cfg);
    config_free(c1);
    config_free(c);
    // the CLI: a [model] key that differs from the init's is refused, naming both values
    char out[4096], args[1024];
    snprintf(args, sizeof args, "pretrain --init %s --set model.d_model=64 --set pretrain.steps=1 --out %s",
             a, tmp_path("c.h5"));
    assert_int_equal(tu_run_cli(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "model.d_model = 64"));
    assert_non_null(strstr(out, "with 32"));
    assert_non_null(strstr(out, a));
    // ... and an unreadable init is named
    snprintf(args, sizeof args, "pretrain --init %s --set pretrain.steps=1 --out %s", tmp_path("missing.h5"),
             tmp_path("c.h5"));
    assert_int_not_equal(tu_run_cli(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "missing.h5"));
}

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/grpolab-cmix-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    tu_remove_dir(dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_general_documents), cmocka_unit_test(test_qa_documents),
        cmocka_unit_test(test_continued_pretraining),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
