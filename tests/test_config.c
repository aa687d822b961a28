// test_config.c: INI parsing, --set overrides, validation messages and round trips of
// the config system (src/sim/io/config.h). Run from the repository root (fixture paths).
#include "test_util.h"

#include <string.h>
#include <unistd.h>

#include "sim/io/config.h"
#include "sim/rl/setup.h"

#define FIXTURE_DIR "tests/fixtures/config/"

static char err[1024];

// Loads text as "x.ini" into a fresh config, expects failure, and checks that the
// message contains every needle (NULL-terminated list).
static void expect_load_error(const char *text, ...) {
    Config *c = config_new();
    err[0] = '\0';
    int rc = config_load_text(c, text, "x.ini", err, sizeof err);
    printf("  -> %s\n", err);
    assert_int_equal(rc, -1);
    va_list ap;
    va_start(ap, text);
    for (const char *needle; (needle = va_arg(ap, const char *));) {
        if (!strstr(err, needle)) fail_msg("message lacks \"%s\": %s", needle, err);
    }
    va_end(ap);
    config_free(c);
}

// Same for one --set assignment.
static void expect_set_error(const char *assignment, ...) {
    Config *c = config_new();
    err[0] = '\0';
    int rc = config_set(c, assignment, err, sizeof err);
    printf("  -> %s\n", err);
    assert_int_equal(rc, -1);
    va_list ap;
    va_start(ap, assignment);
    for (const char *needle; (needle = va_arg(ap, const char *));) {
        if (!strstr(err, needle)) fail_msg("message lacks \"%s\": %s", needle, err);
    }
    va_end(ap);
    config_free(c);
}

static Config *load_ok(const char *text) {
    Config *c = config_new();
    if (config_load_text(c, text, "x.ini", err, sizeof err) != 0) fail_msg("load failed: %s", err);
    return c;
}

// Writes text to a fresh temporary file; path receives its name.
static void write_temp(char *path, size_t len, const char *text) {
    snprintf(path, len, "/tmp/grpolab_test_config_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

// ---------------------------------------------------------------- defaults and schema

static void test_defaults(void **state) {
    Config *c = config_new();
    assert_int_equal(config_int(c, "run.seed"), 1234);
    assert_string_equal(config_str(c, "run.backend"), "auto");
    assert_int_equal(config_int(c, "run.threads"), 0);
    assert_string_equal(config_str(c, "run.out"), "");
    assert_int_equal(config_int(c, "model.vocab_size"), 64);
    assert_int_equal(config_int(c, "model.d_model"), 64);
    assert_int_equal(config_int(c, "model.n_layers"), 2);
    assert_int_equal(config_int(c, "model.n_heads"), 4);
    assert_int_equal(config_int(c, "model.n_kv_heads"), 2);
    assert_int_equal(config_int(c, "model.d_ff"), 172);
    assert_int_equal(config_int(c, "model.max_seq_len"), 256);
    assert_int_equal(config_bool(c, "model.tied_embeddings"), 1);
    assert_true(config_float(c, "model.rope_theta") == 10000.0);
    assert_true(config_float(c, "model.norm_eps") == 1e-5);
    assert_true(config_float(c, "optim.lr") == 1e-3);
    assert_true(config_float(c, "optim.beta1") == 0.9);
    assert_true(config_float(c, "optim.beta2") == 0.95);
    assert_true(config_float(c, "optim.eps") == 1e-8);
    assert_true(config_float(c, "optim.weight_decay") == 0.0);
    assert_true(config_float(c, "optim.grad_clip") == 1.0);
    for (int i = 0; i < CONFIG_SCHEMA_LEN; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s.%s", CONFIG_SCHEMA[i].section, CONFIG_SCHEMA[i].key);
        assert_int_equal(config_was_set(c, name), 0);
    }
    config_free(c);
}

// Every row of the schema is well formed and its default passes its own validation.
static void test_schema_defaults_validate(void **state) {
    assert_true(CONFIG_SCHEMA_LEN > 0);
    for (int i = 0; i < CONFIG_SCHEMA_LEN; i++) {
        const CfgKey *k = &CONFIG_SCHEMA[i];
        char name[128], assignment[256];
        snprintf(name, sizeof name, "%s.%s", k->section, k->key);
        assert_non_null(k->def);
        assert_true(k->help && k->help[0]);
        for (const char *p = name; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.'))
                fail_msg("%s: key names are lower-case identifiers", name);
        for (int j = 0; j < i; j++)
            if (!strcmp(CONFIG_SCHEMA[j].section, k->section) && !strcmp(CONFIG_SCHEMA[j].key, k->key))
                fail_msg("%s: listed twice in the schema", name);
        if (k->type == CFG_INT || k->type == CFG_FLOAT) assert_true(k->min <= k->max);
        if (k->type == CFG_ENUM) assert_true(k->choices && k->choices[0]);
        else assert_null(k->choices);
        // The default, given as a --set, is accepted.
        Config *c = config_new();
        if (k->type == CFG_STRING)
            snprintf(assignment, sizeof assignment, "%s=\"%s\"", name, k->def);
        else
            snprintf(assignment, sizeof assignment, "%s=%s", name, k->def);
        if (config_set(c, assignment, err, sizeof err) != 0)
            fail_msg("default of %s does not validate: %s", name, err);
        assert_int_equal(config_was_set(c, name), 1);
        config_free(c);
    }
}

// ---------------------------------------------------------------- loading

static void test_load_fixture(void **state) {
    Config *c = config_new();
    if (config_load_file(c, FIXTURE_DIR "example.ini", err, sizeof err) != 0)
        fail_msg("%s (tests run from the repository root)", err);
    assert_int_equal(config_int(c, "run.seed"), 42);
    assert_string_equal(config_str(c, "run.backend"), "cpu");
    assert_string_equal(config_str(c, "run.out"), "runs/a #1; \"quoted\" \\ path");
    assert_int_equal(config_int(c, "model.d_model"), 128);
    assert_int_equal(config_int(c, "model.n_layers"), 4);
    assert_int_equal(config_int(c, "model.n_heads"), 8);
    assert_int_equal(config_bool(c, "model.tied_embeddings"), 0);
    assert_true(config_float(c, "model.norm_eps") == 1e-6);
    assert_true(config_float(c, "optim.lr") == 3e-4);
    assert_true(config_float(c, "optim.grad_clip") == 0.0);
    assert_int_equal(config_was_set(c, "model.d_model"), 1);
    assert_int_equal(config_was_set(c, "model.vocab_size"), 0);
    assert_int_equal(config_int(c, "model.vocab_size"), 64);
    config_free(c);
}

static void test_load_temp_file_and_error_location(void **state) {
    char path[64];
    write_temp(path, sizeof path, "[model]\nd_model = 256\n\n[optim]\nlr = 2\n");
    Config *c = config_new();
    assert_int_equal(config_load_file(c, path, err, sizeof err), -1);
    printf("  -> %s\n", err);
    char where[160];
    snprintf(where, sizeof where, "%s:5: optim.lr = 2: out of range (allowed: [0, 1])", path);
    assert_non_null(strstr(err, where));
    // A failed load changes nothing, not even the keys before the bad line.
    assert_int_equal(config_int(c, "model.d_model"), 64);
    assert_int_equal(config_was_set(c, "model.d_model"), 0);
    unlink(path);

    write_temp(path, sizeof path, "[model]\r\nd_model = 256\r\n");  // CRLF line ends
    assert_int_equal(config_load_file(c, path, err, sizeof err), 0);
    assert_int_equal(config_int(c, "model.d_model"), 256);
    unlink(path);
    config_free(c);
}

static void test_cannot_open(void **state) {
    Config *c = config_new();
    assert_int_equal(config_load_file(c, "nope.ini", err, sizeof err), -1);
    printf("  -> %s\n", err);
    assert_string_equal(err, "cannot open config 'nope.ini': No such file or directory");
    config_free(c);
}

static void test_set_overrides_file(void **state) {
    Config *c = load_ok("[model]\nn_layers = 4\nd_model = 96\n");
    assert_int_equal(config_set(c, "model.n_layers=6", err, sizeof err), 0);
    assert_int_equal(config_set(c, " optim.lr = 0.5 ", err, sizeof err), 0);
    assert_int_equal(config_set(c, "run.out=\"with space \\\"q\\\"\"", err, sizeof err), 0);
    assert_int_equal(config_set(c, "run.out=#not-a-comment", err, sizeof err), 0);
    assert_string_equal(config_str(c, "run.out"), "#not-a-comment");
    assert_int_equal(config_int(c, "model.n_layers"), 6);
    assert_int_equal(config_int(c, "model.d_model"), 96);
    assert_true(config_float(c, "optim.lr") == 0.5);
    assert_int_equal(config_was_set(c, "optim.lr"), 1);
    // A later file overrides earlier values; a duplicate only counts within one file.
    assert_int_equal(config_load_text(c, "[model]\nn_layers = 3\n", "y.ini", err, sizeof err), 0);
    assert_int_equal(config_int(c, "model.n_layers"), 3);
    // A failed --set leaves the value alone.
    assert_int_equal(config_set(c, "model.n_layers=0", err, sizeof err), -1);
    assert_int_equal(config_int(c, "model.n_layers"), 3);
    config_free(c);
}

static void test_round_trip(void **state) {
    Config *a = config_new();
    const char *sets[] = {
        "run.seed=9007199254740992", "run.backend=cuda", "run.threads=7",
        "run.out=\"a \\\"b\\\" \\\\c #d ;e\"", "model.tied_embeddings=no",
        "optim.lr=0.1", "optim.beta2=0.99987654321012345", "optim.eps=3e-9",
        "model.rope_theta=500000", "model.norm_eps=1e-12", "optim.weight_decay=0.3333333333333333",
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (config_set(a, sets[i], err, sizeof err) != 0) fail_msg("%s", err);
    char *ini = config_to_ini(a);
    printf("%s", ini);
    assert_non_null(strstr(ini, "[run]\nseed = 9007199254740992\n"));
    assert_non_null(strstr(ini, "\n\n[model]\n"));
    assert_non_null(strstr(ini, "lr = 0.1\n"));  // shortest exact form, not 0.100000001
    assert_non_null(strstr(ini, "out = \"a \\\"b\\\" \\\\c #d ;e\"\n"));
    Config *b = config_new();
    if (config_load_text(b, ini, "resolved", err, sizeof err) != 0) fail_msg("%s", err);
    char *ini2 = config_to_ini(b);
    assert_string_equal(ini, ini2);
    assert_string_equal(config_str(b, "run.out"), "a \"b\" \\c #d ;e");
    assert_true(config_float(b, "optim.beta2") == config_float(a, "optim.beta2"));
    assert_true(config_float(b, "optim.weight_decay") == config_float(a, "optim.weight_decay"));
    assert_int_equal(config_int(b, "run.seed"), 9007199254740992LL);
    assert_int_equal(config_bool(b, "model.tied_embeddings"), 0);
    free(ini);
    free(ini2);
    config_free(a);
    config_free(b);

    // Defaults round trip too, and every key appears.
    a = config_new();
    ini = config_to_ini(a);
    for (int i = 0; i < CONFIG_SCHEMA_LEN; i++) {
        char line[128];
        snprintf(line, sizeof line, "\n%s = ", CONFIG_SCHEMA[i].key);
        assert_non_null(strstr(ini, line));
    }
    b = load_ok(ini);
    ini2 = config_to_ini(b);
    assert_string_equal(ini, ini2);
    free(ini);
    free(ini2);
    config_free(a);
    config_free(b);
}

// ---------------------------------------------------------------- value syntax

// config_diff lists the keys whose resolved values differ, both values, skipping the ignored.
static void test_diff(void **state) {
    Config *a = load_ok("[optim]\nlr = 1e-4\n[run]\nthreads = 2\n");
    Config *b = load_ok("[optim]\nlr = 0.0001\n");  // the same value, written otherwise
    char out[256];
    assert_int_equal(config_diff(a, b, NULL, 0, out, sizeof out), 1);
    assert_string_equal(out, "run.threads = 2 vs 0");
    const char *ignore[] = {"run.threads"};
    assert_int_equal(config_diff(a, b, ignore, 1, out, sizeof out), 0);
    assert_string_equal(out, "");
    assert_int_equal(config_set(b, "optim.lr=3e-4", err, sizeof err), 0);
    assert_int_equal(config_set(b, "run.out=\"x y\"", err, sizeof err), 0);
    assert_int_equal(config_diff(a, b, ignore, 1, out, sizeof out), 2);
    assert_string_equal(out, "run.out = \"\" vs \"x y\"; optim.lr = 0.0001 vs 0.0003");
    assert_int_equal(config_diff(a, b, ignore, 1, NULL, 0), 2);  // count only
    assert_int_equal(config_diff(a, b, ignore, 1, out, 12), 2);  // a short buffer is cut
    assert_int_equal(strlen(out), 11);
    assert_int_equal(config_diff(a, a, NULL, 0, out, sizeof out), 0);
    // "section.*" skips every key of the section, and only of that section
    const char *ignore_optim[] = {"run.threads", "optim.*"};
    assert_int_equal(config_diff(a, b, ignore_optim, 2, out, sizeof out), 1);
    assert_string_equal(out, "run.out = \"\" vs \"x y\"");
    const char *ignore_prefix[] = {"run.threads", "opt.*", "optim"};  // no section of these names
    assert_int_equal(config_diff(a, b, ignore_prefix, 3, NULL, 0), 2);
    config_free(a);
    config_free(b);
}

static void test_bool_spellings(void **state) {
    const char *yes[] = {"true", "TRUE", "True", "1", "yes", "Yes", "on", "ON"};
    const char *no[] = {"false", "FALSE", "0", "no", "NO", "off", "Off"};
    char text[64];
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        snprintf(text, sizeof text, "[model]\ntied_embeddings = %s\n", yes[i]);
        Config *c = load_ok(text);
        assert_int_equal(config_bool(c, "model.tied_embeddings"), 1);
        config_free(c);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        snprintf(text, sizeof text, "[model]\ntied_embeddings = %s\n", no[i]);
        Config *c = load_ok(text);
        assert_int_equal(config_bool(c, "model.tied_embeddings"), 0);
        config_free(c);
    }
    expect_load_error("[model]\ntied_embeddings = maybe\n", "x.ini:2:", "model.tied_embeddings",
                      "'maybe'", "not a boolean", "true|false|1|0|yes|no|on|off", NULL);
    expect_load_error("[model]\ntied_embeddings = 2\n", "x.ini:2:", "'2'", "not a boolean", NULL);
}

static void test_int_syntax(void **state) {
    Config *c = load_ok("[run]\nseed = +17\nthreads = 0008\n");
    assert_int_equal(config_int(c, "run.seed"), 17);
    assert_int_equal(config_int(c, "run.threads"), 8);
    config_free(c);
    expect_load_error("[run]\nseed = 99999999999999999999\n", "x.ini:2:", "run.seed",
                      "99999999999999999999", "out of range", "[0, 9007199254740992]", NULL);
    expect_load_error("[run]\nseed = -99999999999999999999\n", "x.ini:2:", "out of range", NULL);
    expect_load_error("[run]\nseed = 9007199254740993\n", "out of range", NULL);
    expect_load_error("[run]\nthreads = -1\n", "x.ini:2: run.threads = -1: out of range "
                      "(allowed: [0, 1024])", NULL);
    expect_load_error("[model]\nn_layers = 2.0\n", "'2.0': not an integer", NULL);
    expect_load_error("[model]\nn_layers = 1e2\n", "'1e2': not an integer", NULL);
    expect_load_error("[model]\nn_layers = 0x10\n", "'0x10': not an integer", NULL);
    expect_load_error("[model]\nn_layers = 4 layers\n", "'4 layers': not an integer", NULL);
    expect_load_error("[model]\nn_layers =\n", "x.ini:2: model.n_layers = '': not an integer", NULL);
    expect_load_error("[model]\nn_layers = -\n", "'-': not an integer", NULL);
}

static void test_float_syntax(void **state) {
    Config *c = load_ok("[optim]\nlr = 1E-2\nbeta1=.5\neps = 1e-12\nweight_decay = 10\n");
    assert_true(config_float(c, "optim.lr") == 1e-2);
    assert_true(config_float(c, "optim.beta1") == 0.5);
    assert_true(config_float(c, "optim.eps") == 1e-12);  // both ends inclusive
    assert_true(config_float(c, "optim.weight_decay") == 10.0);
    config_free(c);
    expect_load_error("[optim]\nlr = nan\n", "x.ini:2:", "optim.lr", "'nan'", "not a finite number",
                      "[0, 1]", NULL);
    expect_load_error("[optim]\nlr = -inf\n", "'-inf'", "not a finite number", NULL);
    expect_load_error("[optim]\nlr = 1e999\n", "optim.lr = 1e999: out of range", NULL);
    expect_load_error("[optim]\nlr = 0.1x\n", "'0.1x': not a number (allowed: number in [0, 1])",
                      NULL);
    expect_load_error("[optim]\nlr = -1e-9\n", "out of range (allowed: [0, 1])", NULL);
    expect_load_error("[model]\nnorm_eps = 0\n", "model.norm_eps = 0: out of range "
                      "(allowed: [1e-12, 0.1])", NULL);
    // decimal only, like integers: hexadecimal floats are refused
    expect_load_error("[optim]\nlr = 0x1p-3\n", "'0x1p-3': not a number", NULL);
    expect_load_error("[optim]\nlr = 0X.8\n", "'0X.8': not a number", NULL);
    expect_load_error("[train]\nsteps = 0x10\n", "'0x10': not an integer", NULL);
}

// The schema's ranges are the ones the run enforces: every [model] float and every [corpus]
// number at either end of its range passes the model's and the corpus's own checks (the
// cross-key rules aside: the template shares and the context are set so that they hold).
static void test_ranges_are_the_runs(void **state) {
    char err[512], set[160];
    int checked = 0;
    for (int i = 0; i < CONFIG_SCHEMA_LEN; i++) {
        const CfgKey *k = &CONFIG_SCHEMA[i];
        int corpus = strcmp(k->section, "corpus") == 0, model = strcmp(k->section, "model") == 0;
        if (!(corpus || (model && k->type == CFG_FLOAT)) || (k->type != CFG_INT && k->type != CFG_FLOAT))
            continue;
        for (int end = 0; end < 2; end++) {
            Config *c = config_new();
            assert_int_equal(config_set(c, "model.max_seq_len=1024", err, sizeof err), 0);
            if (strstr(k->key, "p_template_"))  // the two template shares sum to at most 1
                assert_int_equal(config_set(c, strcmp(k->key, "p_template_r1") == 0 ? "corpus.p_template_boxed=0"
                                                                                   : "corpus.p_template_r1=0",
                                            err, sizeof err), 0);
            snprintf(set, sizeof set, "%s.%s=%.17g", k->section, k->key, end ? k->max : k->min);
            if (config_set(c, set, err, sizeof err) != 0) fail_msg("%s: %s", set, err);
            ModelConfig mc;
            CorpusParams cp;
            int rc = corpus ? setup_corpus_params(c, &cp, err, sizeof err) : setup_model_config(c, &mc, err, sizeof err);
            if (rc != 0) fail_msg("--set %s passes the schema but the run refuses it: %s", set, err);
            config_free(c);
            checked++;
        }
    }
    printf("  %d range ends accepted by the run's checks\n", checked);
    assert_true(checked > 40);
}

static void test_enum_values(void **state) {
    Config *c = load_ok("[run]\nbackend = Cuda\n");
    assert_string_equal(config_str(c, "run.backend"), "cuda");  // the schema's spelling
    config_free(c);
    expect_load_error("[run]\nbackend = gpu\n",
                      "x.ini:2: run.backend = 'gpu': not one of auto|cpu|cuda", NULL);
    expect_load_error("[run]\nbackend = \n", "x.ini:2: run.backend = '': not one of auto|cpu|cuda",
                      NULL);
    // world.reward_rule -> the verifier's reward rule
    c = load_ok("[world]\nreward_rule = false_step_fails\n");
    assert_int_equal(setup_reward_rule(c), REWARD_FALSE_STEP_FAILS);
    config_free(c);
    c = load_ok("[world]\nreward_rule = first_redo_forgives\n");
    assert_int_equal(setup_reward_rule(c), REWARD_FIRST_REDO_FORGIVES);
    config_free(c);
    c = load_ok("[world]\nreward_rule = disagreement_fails\n");
    assert_int_equal(setup_reward_rule(c), REWARD_DISAGREEMENT_FAILS);
    config_free(c);
    c = load_ok("[world]\n");
    assert_int_equal(setup_reward_rule(c), REWARD_OUTCOME);
    config_free(c);
    expect_load_error("[world]\nreward_rule = strict\n",
                      "x.ini:2: world.reward_rule = 'strict': not one of "
                      "outcome|disagreement_fails|false_step_fails|first_redo_forgives", NULL);
}

static void test_comments_and_quotes(void **state) {
    Config *c = load_ok("# header comment\n"
                        "  ; indented comment\n"
                        "\n"
                        "[run] # comment after a header\n"
                        "out = runs/x#1   # '#' without whitespace before it is text\n"
                        "[model]\n"
                        "d_model = 32 ; trailing comment\n");
    assert_string_equal(config_str(c, "run.out"), "runs/x#1");
    assert_int_equal(config_int(c, "model.d_model"), 32);
    config_free(c);

    c = load_ok("[run]\nout = \"  padded ; # \"  # comment\n");
    assert_string_equal(config_str(c, "run.out"), "  padded ; # ");
    config_free(c);
    c = load_ok("[run]\nout = \"\"\n");
    assert_string_equal(config_str(c, "run.out"), "");
    config_free(c);
    c = load_ok("[run]\nout = # empty value then a comment\n");
    assert_string_equal(config_str(c, "run.out"), "");
    config_free(c);
    c = load_ok("[model]\nn_layers = \"3\"\n");  // quotes work for any type
    assert_int_equal(config_int(c, "model.n_layers"), 3);
    config_free(c);

    expect_load_error("[run]\nout = \"abc\n", "x.ini:2:", "run.out", "\"abc",
                      "unterminated quoted string", NULL);
    expect_load_error("[run]\nout = \"abc\\\"\n", "x.ini:2:", "unterminated", NULL);
    expect_load_error("[run]\nout = \"a\\nb\"\n", "x.ini:2:", "unknown escape '\\n'",
                      "allowed: \\\" and \\\\", NULL);
    expect_load_error("[run]\nout = \"a\" b\n", "x.ini:2:", "run.out",
                      "unexpected text after the closing quote", NULL);
}

// ---------------------------------------------------------------- error messages

static void test_error_unknown_key(void **state) {
    expect_load_error("[model]\n\n\nd_modle = 64\n",
                      "x.ini:4: unknown key 'model.d_modle' (did you mean 'model.d_model'?); "
                      "keys of [model]: vocab_size, d_model, n_layers,",
                      "rope_theta, norm_eps", NULL);
    // The right key in the wrong section, and a key with no close match.
    expect_load_error("[run]\nd_model = 64\n",
                      "x.ini:2: unknown key 'run.d_model' (did you mean 'model.d_model'?); "
                      "keys of [run]: seed, backend, threads", NULL);
    expect_load_error("[optim]\nmomentum = 0.9\n", "x.ini:2: unknown key 'optim.momentum'; "
                      "keys of [optim]: lr, beta1, beta2, eps, weight_decay, grad_clip", NULL);
}

static void test_error_unknown_section(void **state) {
    expect_load_error("[run]\nseed = 1\n\n\n\n\n[modle]\nd_model = 64\n",
                      "x.ini:7: unknown section [modle] (did you mean [model]?); "
                      "sections: run, model, optim", NULL);
    expect_load_error("[training]\n", "x.ini:1: unknown section [training]; sections: run, model, optim",
                      NULL);
}

static void test_error_value_messages(void **state) {
    expect_load_error("[model]\n\nn_layers = two\n",
                      "x.ini:3: model.n_layers = 'two': not an integer "
                      "(allowed: integer in [1, 128])", NULL);
    expect_load_error("[optim]\n\nlr = 5\n", "x.ini:3: optim.lr = 5: out of range (allowed: [0, 1])",
                      NULL);
    expect_load_error("[run]\n\n\nbackend = gpu\n",
                      "x.ini:4: run.backend = 'gpu': not one of auto|cpu|cuda", NULL);
}

static void test_error_syntax(void **state) {
    expect_load_error("[run]\n\n\n\ngarbage line\n",
                      "x.ini:5: expected 'key = value', '[section]' or a comment, got 'garbage line'",
                      NULL);
    expect_load_error("[run]\n= 5\n", "x.ini:2: expected 'key = value'", "got '= 5'", NULL);
    expect_load_error("[model\nd_model = 3\n", "x.ini:1: missing ']' in section header '[model'",
                      NULL);
    expect_load_error("[model] d_model = 3\n", "x.ini:1: unexpected text after section header: "
                      "'d_model = 3'", NULL);
    expect_load_error("seed = 1\n", "x.ini:1: key 'seed' is outside any section (put it under [run])",
                      NULL);
    expect_load_error("# comment\nfoo = 1\n", "x.ini:2: key 'foo' is outside any section",
                      "sections: run, model, optim", NULL);
}

static void test_duplicate_key(void **state) {
    expect_load_error("[model]\nd_model = 32\nn_layers = 2\n[optim]\nlr = 0.1\n[model]\nd_model = 48\n",
                      "x.ini:7: duplicate key 'model.d_model' (first set at x.ini:2)", NULL);
}

static void test_set_errors(void **state) {
    expect_set_error("model.n_layers=0",
                     "--set 'model.n_layers=0': model.n_layers = 0: out of range (allowed: [1, 128])",
                     NULL);
    expect_set_error("model.d_model", "--set 'model.d_model': expected section.key=value", NULL);
    expect_set_error("d_model=32", "--set 'd_model=32': expected section.key=value "
                     "(did you mean 'model.d_model=32'?)", NULL);
    expect_set_error("=3", "--set '=3': expected section.key=value", NULL);
    expect_set_error("model.=3", "expected section.key=value", NULL);
    expect_set_error("model.d_modle=32", "--set 'model.d_modle=32': unknown key 'model.d_modle' "
                     "(did you mean 'model.d_model'?); keys of [model]:", NULL);
    expect_set_error("modle.d_model=32", "--set 'modle.d_model=32': unknown section [modle] "
                     "(did you mean [model]?); sections: run, model, optim", NULL);
    expect_set_error("run.backend=gpu", "--set 'run.backend=gpu': run.backend = 'gpu': "
                     "not one of auto|cpu|cuda", NULL);
    expect_set_error("optim.lr=nan", "--set 'optim.lr=nan': optim.lr = 'nan': not a finite number",
                     NULL);
    expect_set_error("run.out=\"abc", "--set 'run.out=\"abc': run.out", "unterminated", NULL);
    expect_set_error("run.out=a\nb", "line break", NULL);
}

static void test_short_error_buffer(void **state) {
    Config *c = config_new();
    char small[16];
    assert_int_equal(config_set(c, "model.d_modle=32", small, sizeof small), -1);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_int_equal(config_set(c, "model.d_modle=32", NULL, 0), -1);
    assert_int_equal(config_load_text(c, "[x]\n", "x.ini", NULL, 0), -1);
    config_free(c);
}

// What config_print_keys writes (malloc'd).
static char *keys_text(bool markdown) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    config_print_keys(f, markdown);
    fclose(f);
    return text;
}

// `grpolab config --keys` (plain text): a header, then a line per key in the schema's order,
// its columns aligned (each starts where the header's does), an enum's every choice in full,
// and the key's doc line at the end.
static void test_print_keys(void **state) {
    char *text = keys_text(false);
    printf("%s", text);
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    assert_non_null(line);
    static const char *const head[] = {"key", "type", "default", "allowed", "meaning"};
    int col[5];
    for (int c = 0; c < 5; c++) {
        const char *h = strstr(line, head[c]);
        assert_non_null(h);
        col[c] = (int)(h - line);
        if (c) assert_true(col[c] > col[c - 1] && line[col[c] - 1] == ' ' && line[col[c] - 2] == ' ');
    }
    for (int i = 0; i < CONFIG_SCHEMA_LEN; i++) {
        const CfgKey *k = &CONFIG_SCHEMA[i];
        line = strtok_r(NULL, "\n", &save);
        assert_non_null(line);
        char name[128];
        int n = snprintf(name, sizeof name, "%s.%s", k->section, k->key);
        if (strncmp(line, name, (size_t)n) != 0 || line[n] != ' ')
            fail_msg("line %d of --keys is '%.40s...', not key %s", i + 2, line, name);
        for (int c = 1; c < 5; c++)  // each column starts after two spaces, under its header
            assert_true(line[col[c] - 1] == ' ' && line[col[c] - 2] == ' ' && line[col[c]] != ' ');
        assert_int_equal(strncmp(line + col[3], k->type == CFG_ENUM ? k->choices : "", k->type == CFG_ENUM ? strlen(k->choices) : 0), 0);
        assert_string_equal(line + col[4], k->help);
    }
    assert_null(strtok_r(NULL, "\n", &save));
    free(text);
}

// docs/config.md's table of keys is what `grpolab config --keys --markdown` prints
// (config_print_keys), byte for byte, between its two marker lines; the test names the first
// line that differs.
#define DOCS_CONFIG_BEGIN "<!-- begin: grpolab config --keys --markdown"
#define DOCS_CONFIG_END "<!-- end: grpolab config --keys --markdown -->"
static void test_docs_table_is_generated(void **state) {
    FILE *f = fopen("docs/config.md", "r");
    if (!f) fail_msg("cannot open docs/config.md (run the tests from the repository root)");
    static char doc[1 << 17];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    doc[n] = '\0';
    fclose(f);
    assert_true(n < sizeof doc - 1);
    const char *b = strstr(doc, DOCS_CONFIG_BEGIN), *e = strstr(doc, DOCS_CONFIG_END);
    if (!b || !e || e < b || !strchr(b, '\n'))
        fail_msg("docs/config.md has no block '%s ... -->' .. '%s'", DOCS_CONFIG_BEGIN, DOCS_CONFIG_END);
    b = strchr(b, '\n') + 1;
    char *want = keys_text(true);
    // a header, its rule and a row per key, each of five cells: six '|' not escaped by '\\'
    static const char head[] = "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
    assert_true(strncmp(want, head, strlen(head)) == 0);
    int lines = 0, bars = 0;
    for (const char *p = want; *p; p++) {
        bars += *p == '|' && (p == want || p[-1] != '\\');
        if (*p == '\n') {
            if (bars != 6) fail_msg("line %d of the Markdown table has %d cell separators", lines + 1, bars);
            lines++;
            bars = 0;
        }
    }
    assert_int_equal(lines, 2 + CONFIG_SCHEMA_LEN);
    // compare line by line: the first difference is named
    const char *p = b, *q = want;
    for (int line = 1;; line++) {
        const char *pe = p < e ? memchr(p, '\n', (size_t)(e - p)) : NULL;
        const char *qe = strchr(q, '\n');
        if (!pe && !qe) break;
        size_t pl = pe ? (size_t)(pe - p) : 0, ql = qe ? (size_t)(qe - q) : 0;
        if (!pe || !qe || pl != ql || memcmp(p, q, pl) != 0)
            fail_msg("docs/config.md: line %d of the table differs from `grpolab config --keys "
                     "--markdown` (run `make docs-config`):\n  doc:  %.*s\n  keys: %.*s", line,
                     pe ? (int)pl : -1, pe ? p : "(the block ends)", qe ? (int)ql : -1,
                     qe ? q : "(the table ends)");
        p = pe + 1;
        q = qe + 1;
    }
    if (p != e) fail_msg("docs/config.md: text after the table before '%s' (run `make docs-config`)", DOCS_CONFIG_END);
    printf("  docs/config.md: %d keys as `grpolab config --keys --markdown` prints them\n", CONFIG_SCHEMA_LEN);
    free(want);
}

// Each typed field of config_settings() shows its key's value and flag: the field by its name
// (as code reads it) against the getter by the key's text, at the defaults, after a file and
// after --set; then every row's field at its offset against the getter.
static void test_typed_settings_follow_the_config(void **state) {
    (void)state;
    Config *c = config_new();
    const Settings *S = config_settings(c);
    const SettingsSet *set = config_settings_set(c);
    assert_int_equal(S->model.n_layers, 2);
    assert_true(S->optim.lr == 1e-3);
    assert_true(S->model.tied_embeddings);
    assert_string_equal(S->objective.preset, "grpo");
    assert_false(set->model.n_layers);
    char err[512];
    assert_int_equal(config_load_text(c, "[model]\nn_layers = 7\n[world]\ntemplate = BOXED\n", NULL, err, sizeof err), 0);
    assert_int_equal(S->model.n_layers, 7);
    assert_true(set->model.n_layers);
    assert_false(set->model.d_model);
    assert_string_equal(S->world.template, "boxed");
    assert_int_equal(config_set(c, "run.seed=9007199254740992", err, sizeof err), 0);
    assert_true(S->run.seed == INT64_C(9007199254740992));
    assert_int_equal(config_set(c, "model.tied_embeddings=off", err, sizeof err), 0);
    assert_false(S->model.tied_embeddings);
    assert_true(set->model.tied_embeddings);
    assert_int_equal(config_set(c, "objective.std_eps=0.125", err, sizeof err), 0);
    assert_true(S->objective.std_eps == 0.125);
    assert_int_equal(config_set(c, "diagnostics.compare=\"dapo,gspo\"", err, sizeof err), 0);
    assert_string_equal(S->diagnostics.compare, "dapo,gspo");
    assert_true(config_number(c, "objective.std_eps") == 0.125);
    assert_true(config_number(c, "model.n_layers") == 7.0);
    // every row: its field at its offset holds what the getter by name holds
    for (int i = 0; i < CONFIG_SCHEMA_LEN; i++) {
        const CfgKey *k = &CONFIG_SCHEMA[i];
        char name[128];
        snprintf(name, sizeof name, "%s.%s", k->section, k->key);
        const char *field = (const char *)S + k->offset;
        assert_int_equal(*((const bool *)((const char *)set + k->set_offset)), config_was_set(c, name));
        switch (k->type) {
            case CFG_INT:
                assert_true(k->ctype == CFG_C_INT64 ? *(const int64_t *)field == config_int(c, name)
                                                    : *(const int *)field == config_int(c, name));
                break;
            case CFG_FLOAT: assert_true(*(const double *)field == config_float(c, name)); break;
            case CFG_BOOL: assert_int_equal(*(const bool *)field, config_bool(c, name)); break;
            default: assert_ptr_equal(*(const char *const *)field, config_str(c, name)); break;
        }
    }
    config_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docs_table_is_generated),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_typed_settings_follow_the_config),
        cmocka_unit_test(test_schema_defaults_validate),
        cmocka_unit_test(test_load_fixture),
        cmocka_unit_test(test_load_temp_file_and_error_location),
        cmocka_unit_test(test_cannot_open),
        cmocka_unit_test(test_set_overrides_file),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_diff),
        cmocka_unit_test(test_bool_spellings),
        cmocka_unit_test(test_int_syntax),
        cmocka_unit_test(test_float_syntax),
        cmocka_unit_test(test_enum_values),
        cmocka_unit_test(test_comments_and_quotes),
        cmocka_unit_test(test_error_unknown_key),
        cmocka_unit_test(test_error_unknown_section),
        cmocka_unit_test(test_error_value_messages),
        cmocka_unit_test(test_error_syntax),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_set_errors),
        cmocka_unit_test(test_short_error_buffer),
        cmocka_unit_test(test_print_keys),
        cmocka_unit_test(test_ranges_are_the_runs),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
