// test_checkpoint.c: HDF5 checkpoints: exact round trips (parameters, AdamW state, metadata),
// tied and untied models, atomic saves, and a clear error for every kind of broken file.
#include <dirent.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>

#include "test_util.h"
#include "common.h"

#include "sim/model/checkpoint.h"
#include "sim/io/h5util.h"
#include "sim/model/model.h"

static char g_dir[64];  // mkdtemp directory holding every file of this test
static Backend *g_bk;

static const char *const VOCAB[] = {"<pad>", "<eos>", "\n", " ", "<think>", "</think>", "\\",
                                    "a",     "0",     "\"quoted\"", "tab\there", ""};
#define N_VOCAB ((int)(sizeof VOCAB / sizeof VOCAB[0]))
static const char *CONFIG_TEXT = "[model]\nd_model = 64\n\n[rl]\nobjective = dr_grpo\n";

static const char *tmp_path(const char *name) {
    static char buf[8][256];
    static int k = 0;
    char *p = buf[k++ % 8];
    snprintf(p, 256, "%s/%s", g_dir, name);
    return p;
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

// No HDF5 file, group, dataset or attribute id may stay open after a checkpoint call.
static void assert_no_open_h5_ids(void) { assert_int_equal(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0); }

static ModelConfig small_config(int tied, int d_model) {
    ModelConfig c = model_config_default();
    c.vocab_size = 32;
    c.d_model = d_model;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.d_ff = 48;
    c.max_seq_len = 40;
    c.tied_embeddings = tied;
    c.rope_theta = 12345.678f;  // not exactly representable in decimal: tests the exact round trip
    c.norm_eps = 1.1e-6f;
    return c;
}

static Model *make_model(int tied, int d_model, uint64_t seed) {
    ModelConfig c = small_config(tied, d_model);
    Model *m = model_create(g_bk, &c);
    model_init_params(m, seed);
    return m;
}

static float *download(Model *m, float *dev) {
    size_t bytes = model_num_params(m) * sizeof(float);
    float *h = malloc(bytes);
    bk_download(g_bk, h, dev, bytes);
    return h;
}

// Fills a device buffer of m with random values.
static void fill_random(Model *m, float *dev, uint64_t seed, float lo, float hi) {
    size_t n = model_num_params(m);
    float *h = malloc(n * sizeof(float));
    tu_fill_uniform(h, n, seed, lo, hi);
    bk_upload(g_bk, dev, h, n * sizeof(float));
    free(h);
}

static void assert_same_buffer(Model *a, float *da, Model *b, float *db, const char *what) {
    assert_int_equal(model_num_params(a), model_num_params(b));
    float *ha = download(a, da), *hb = download(b, db);
    int same = memcmp(ha, hb, model_num_params(a) * sizeof(float)) == 0;
    printf("  %-40s %s\n", what, same ? "bitwise equal" : "DIFFERENT");
    free(ha);
    free(hb);
    assert_true(same);
}

static void save_ok(const char *path, Model *m, const CkptInfo *info) {
    char err[512] = "";
    int rc = checkpoint_save(path, m, info, err, sizeof err);
    if (rc != 0) printf("  unexpected save error: %s\n", err);
    assert_int_equal(rc, 0);
    assert_no_open_h5_ids();
}

// Asserts that loading path into m fails with a message holding every one of parts (NULL-ended).
static void expect_load_error(const char *path, Model *m, int load_optimizer, ...) {
    char err[512] = "";
    int rc = checkpoint_load(path, m, load_optimizer, err, sizeof err);
    printf("  error: %s\n", err);
    assert_int_equal(rc, -1);
    va_list ap;
    va_start(ap, load_optimizer);
    for (const char *part; (part = va_arg(ap, const char *)) != NULL;) {
        if (!strstr(err, part)) printf("  missing in the message: \"%s\"\n", part);
        assert_non_null(strstr(err, part));
    }
    va_end(ap);
    assert_no_open_h5_ids();
}

// ---------------------------------------------------------------- round trips
static void test_roundtrip_tied(void **state) {
    const char *path = tmp_path("tied.h5");
    Model *a = make_model(1, 64, 1), *b = make_model(1, 64, 2);
    CkptInfo info = {.vocab = VOCAB, .n_vocab = N_VOCAB, .config_text = CONFIG_TEXT,
                     .step = 123456789012LL, .with_optimizer = 0};
    save_ok(path, a, &info);
    assert_false(file_exists(tmp_path("tied.h5.tmp")));

    ModelConfig cfg;
    char **vocab = NULL, *text = NULL, err[512] = "";
    int n_vocab = -1, has_opt = -1;
    int64_t step = 0;
    assert_int_equal(checkpoint_read_meta(path, &cfg, &vocab, &n_vocab, &text, &step, &has_opt, err,
                                          sizeof err), 0);
    assert_no_open_h5_ids();
    assert_memory_equal(&cfg, model_config(a), sizeof cfg);
    assert_int_equal(n_vocab, N_VOCAB);
    for (int i = 0; i < N_VOCAB; i++) assert_string_equal(vocab[i], VOCAB[i]);
    assert_string_equal(text, CONFIG_TEXT);
    assert_true(step == 123456789012LL);
    assert_int_equal(has_opt, 0);
    checkpoint_free_vocab(vocab, n_vocab);
    free(text);
    // every out-pointer may be NULL
    assert_int_equal(checkpoint_read_meta(path, NULL, NULL, NULL, NULL, NULL, NULL, err, sizeof err), 0);

    assert_int_equal(checkpoint_load(path, b, 0, err, sizeof err), 0);
    assert_same_buffer(a, model_params(a), b, model_params(b), "params (tied)");
    assert_no_open_h5_ids();

    // the file as h5py sees it: root datasets named like the table, no 'output' when tied
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_true(H5Lexists(f, "layers.0.attn.wq", H5P_DEFAULT) > 0);
    assert_true(H5Lexists(f, "tok_embeddings", H5P_DEFAULT) > 0);
    assert_true(H5Lexists(f, "norm", H5P_DEFAULT) > 0);
    assert_true(H5Lexists(f, "output", H5P_DEFAULT) == 0);
    assert_true(H5Lexists(f, "optimizer", H5P_DEFAULT) == 0);
    hid_t d = H5Dopen2(f, "layers.1.attn.wk", H5P_DEFAULT);
    hid_t sp = H5Dget_space(d), t = H5Dget_type(d);
    hsize_t dims[2];
    assert_int_equal(H5Sget_simple_extent_dims(sp, dims, NULL), 2);
    assert_int_equal(dims[0], 2 * 16);  // n_kv_heads * head_dim
    assert_int_equal(dims[1], 64);
    assert_true(H5Tequal(t, H5T_IEEE_F32LE) > 0);
    int version = 0;
    hid_t at = H5Aopen(f, "format_version", H5P_DEFAULT);
    H5Aread(at, H5T_NATIVE_INT, &version);
    assert_int_equal(version, CHECKPOINT_FORMAT_VERSION);
    H5Aclose(at);
    // the commit the binary was built from, as a variable-length string
    at = H5Aopen(f, "grpolab_commit", H5P_DEFAULT);
    assert_true(at >= 0);
    hid_t st = H5Aget_type(at);
    char *commit = NULL;
    assert_true(H5Aread(at, st, &commit) >= 0);
    assert_string_equal(commit, grpolab_commit());
    H5free_memory(commit);
    H5Tclose(st);
    H5Aclose(at);
    H5Tclose(t);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    model_free(a);
    model_free(b);
}

static void test_roundtrip_untied_optimizer(void **state) {
    const char *path = tmp_path("untied_opt.h5");
    Model *a = make_model(0, 64, 3), *b = make_model(0, 64, 4);
    fill_random(a, model_adam_m(a), 11, -1e-3f, 1e-3f);
    fill_random(a, model_adam_v(a), 12, 0.0f, 1e-6f);
    model_set_adam_step(a, 17);
    CkptInfo info = {.step = 17, .with_optimizer = 1};
    save_ok(path, a, &info);

    int has_opt = 0, n_vocab = -1;
    char **vocab = (char **)1, *text = (char *)1, err[512] = "";
    assert_int_equal(checkpoint_read_meta(path, NULL, &vocab, &n_vocab, &text, NULL, &has_opt, err,
                                          sizeof err), 0);
    assert_int_equal(has_opt, 1);
    assert_null(vocab);  // none given: none stored
    assert_int_equal(n_vocab, 0);
    assert_null(text);

    // without load_optimizer, only the parameters change
    float *m_before = download(b, model_adam_m(b));
    assert_int_equal(checkpoint_load(path, b, 0, err, sizeof err), 0);
    assert_same_buffer(a, model_params(a), b, model_params(b), "params (untied)");
    float *m_after = download(b, model_adam_m(b));
    assert_memory_equal(m_before, m_after, model_num_params(b) * sizeof(float));
    assert_int_equal(model_adam_step(b), 0);
    free(m_before);
    free(m_after);

    assert_int_equal(checkpoint_load(path, b, 1, err, sizeof err), 0);
    assert_no_open_h5_ids();
    assert_same_buffer(a, model_adam_m(a), b, model_adam_m(b), "AdamW m");
    assert_same_buffer(a, model_adam_v(a), b, model_adam_v(b), "AdamW v");
    assert_int_equal(model_adam_step(b), 17);

    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(H5Lexists(f, "output", H5P_DEFAULT) > 0);
    assert_true(H5Lexists(f, "optimizer", H5P_DEFAULT) > 0);
    hid_t g = H5Gopen2(f, "optimizer/v", H5P_DEFAULT);
    assert_true(H5Lexists(g, "layers.1.mlp.w_down", H5P_DEFAULT) > 0);
    H5Gclose(g);
    H5Fclose(f);
    model_free(a);
    model_free(b);
}

// A vocabulary whose attribute is far over HDF5's 64 KiB compact-attribute limit.
static void test_large_vocab(void **state) {
    const char *path = tmp_path("bigvocab.h5");
    ModelConfig c = small_config(1, 64);
    c.vocab_size = 20000;
    Model *a = model_create(g_bk, &c);
    model_init_params(a, 5);
    char **toks = malloc(20000 * sizeof *toks);
    for (int i = 0; i < 20000; i++) {
        toks[i] = malloc(32);
        snprintf(toks[i], 32, "tok_%d_%s", i, i % 3 ? "x" : "\n");
    }
    CkptInfo info = {.vocab = (const char *const *)toks, .n_vocab = 20000};
    save_ok(path, a, &info);
    char **vocab = NULL, err[512] = "";
    int n = 0;
    assert_int_equal(checkpoint_read_meta(path, NULL, &vocab, &n, NULL, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(n, 20000);
    for (int i = 0; i < 20000; i++) assert_string_equal(vocab[i], toks[i]);
    checkpoint_free_vocab(vocab, n);
    checkpoint_free_vocab(toks, 20000);
    model_free(a);
}

// ---------------------------------------------------------------- saving
static void test_atomic_save(void **state) {
    char err[512] = "";
    Model *a = make_model(1, 64, 1), *b = make_model(1, 64, 2), *c = make_model(1, 64, 3);

    // a missing directory: a clear error, nothing created
    const char *bad = tmp_path("no_such_dir/x.h5");
    assert_int_equal(checkpoint_save(bad, a, NULL, err, sizeof err), -1);
    printf("  error: %s\n", err);
    assert_non_null(strstr(err, bad));
    assert_non_null(strstr(err, "no_such_dir' does not exist"));
    assert_false(file_exists(tmp_path("no_such_dir")));

    // overwriting an existing checkpoint replaces it, and leaves no .tmp behind
    const char *path = tmp_path("atomic.h5");
    save_ok(path, a, NULL);
    save_ok(path, b, NULL);
    assert_false(file_exists(tmp_path("atomic.h5.tmp")));
    assert_int_equal(checkpoint_load(path, c, 0, err, sizeof err), 0);
    assert_same_buffer(b, model_params(b), c, model_params(c), "params after overwrite");

    // a failed save keeps the old checkpoint intact
    CkptInfo too_many = {.vocab = VOCAB, .n_vocab = 33};
    assert_int_equal(checkpoint_save(path, a, &too_many, err, sizeof err), -1);
    printf("  error: %s\n", err);
    assert_non_null(strstr(err, "33 tokens"));
    assert_int_equal(checkpoint_load(path, c, 0, err, sizeof err), 0);
    assert_same_buffer(b, model_params(b), c, model_params(c), "params after a failed save");

    // a stale .tmp from a crashed save is simply overwritten
    FILE *fp = fopen(tmp_path("atomic.h5.tmp"), "w");
    fputs("half-written", fp);
    fclose(fp);
    save_ok(path, a, NULL);
    assert_false(file_exists(tmp_path("atomic.h5.tmp")));
    assert_int_equal(checkpoint_load(path, c, 0, err, sizeof err), 0);
    assert_same_buffer(a, model_params(a), c, model_params(c), "params after a stale .tmp");

    // the path is a directory
    assert_int_equal(checkpoint_save(g_dir, a, NULL, err, sizeof err), -1);
    printf("  error: %s\n", err);
    assert_non_null(strstr(err, "is a directory"));
    model_free(a);
    model_free(b);
    model_free(c);
}

// ---------------------------------------------------------------- broken files
static void test_missing_file(void **state) {
    Model *m = make_model(1, 64, 1);
    const char *path = tmp_path("does_not_exist.h5");
    expect_load_error(path, m, 0, "cannot open checkpoint", path, "file does not exist", NULL);
    char err[512];
    assert_int_equal(checkpoint_read_meta(path, NULL, NULL, NULL, NULL, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "file does not exist"));
    model_free(m);
}

static void test_truncated_file(void **state) {
    Model *m = make_model(1, 64, 1);
    const char *path = tmp_path("trunc.h5");
    save_ok(path, m, NULL);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
    float *before = download(m, model_params(m));
    expect_load_error(path, m, 0, path, "truncated", NULL);
    // a failed load leaves the model unchanged
    float *after = download(m, model_params(m));
    assert_memory_equal(before, after, model_num_params(m) * sizeof(float));
    free(before);
    free(after);
    // cut inside the superblock too
    assert_int_equal(truncate(path, 40), 0);
    expect_load_error(path, m, 0, path, "truncated", NULL);
    assert_int_equal(truncate(path, 0), 0);
    expect_load_error(path, m, 0, path, "not an HDF5 file", NULL);
    model_free(m);
}

static void test_text_file(void **state) {
    Model *m = make_model(1, 64, 1);
    const char *path = tmp_path("text.h5");
    FILE *fp = fopen(path, "w");
    fputs("[model]\nd_model = 64\n", fp);
    fclose(fp);
    expect_load_error(path, m, 0, "checkpoint", path, "is not an HDF5 file", NULL);
    model_free(m);
}

static void test_no_format_attribute(void **state) {
    Model *m = make_model(1, 64, 1);
    const char *path = tmp_path("plain.h5");
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t n = 4;
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, "norm", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(sp);
    H5Fclose(f);
    expect_load_error(path, m, 0, path, "is not a grpolab checkpoint", "'format' missing",
                      "expected \"grpolab-checkpoint\"", NULL);
    model_free(m);
}

// Replaces root attribute name of an existing file by a scalar of type ftype holding *v.
static void rewrite_attr(const char *path, const char *name, hid_t ftype, hid_t mtype,
                         const void *v) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_true(H5Adelete(f, name) >= 0);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(H5Awrite(a, mtype, v) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Fclose(f);
}

static void test_wrong_format(void **state) {
    Model *m = make_model(1, 64, 1);
    const char *path = tmp_path("version.h5");
    save_ok(path, m, NULL);
    int seven = 7;
    rewrite_attr(path, "format_version", H5T_STD_I32LE, H5T_NATIVE_INT, &seven);
    expect_load_error(path, m, 0, path, "format_version 7", "reads version 1", "re-create it", NULL);

    save_ok(path, m, NULL);
    hid_t str_t = H5Tcopy(H5T_C_S1);
    H5Tset_size(str_t, H5T_VARIABLE);
    const char *other = "someone-elses-format";
    rewrite_attr(path, "format", str_t, str_t, &other);
    H5Tclose(str_t);
    expect_load_error(path, m, 0, path, "not a grpolab checkpoint", "\"someone-elses-format\"",
                      "expected \"grpolab-checkpoint\"", NULL);
    model_free(m);
}

// Replaces dataset name of an existing file by a float32 (or int32) dataset of the given shape.
static void replace_dataset(const char *path, const char *name, int rank, hsize_t d0, hsize_t d1,
                            hid_t type) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_true(H5Ldelete(f, name, H5P_DEFAULT) >= 0);
    hsize_t dims[2] = {d0, d1};
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(d >= 0);
    H5Dclose(d);
    H5Sclose(sp);
    H5Fclose(f);
}

static void test_wrong_shape(void **state) {
    Model *m = make_model(1, 64, 1);
    const char *path = tmp_path("shape.h5");
    save_ok(path, m, NULL);
    replace_dataset(path, "layers.0.attn.wq", 2, 32, 64, H5T_IEEE_F32LE);
    float *before = download(m, model_params(m));
    expect_load_error(path, m, 0, path, "tensor 'layers.0.attn.wq' has shape (32, 64), expected (64, 64)",
                      NULL);
    float *after = download(m, model_params(m));
    assert_memory_equal(before, after, model_num_params(m) * sizeof(float));
    free(before);
    free(after);

    save_ok(path, m, NULL);
    replace_dataset(path, "norm", 2, 64, 1, H5T_IEEE_F32LE);
    expect_load_error(path, m, 0, "tensor 'norm' has shape (64, 1), expected (64,)", NULL);

    save_ok(path, m, NULL);
    replace_dataset(path, "norm", 1, 64, 0, H5T_STD_I32LE);
    expect_load_error(path, m, 0, "tensor 'norm' has integer elements, expected float32", NULL);
    model_free(m);
}

static void test_missing_tensor(void **state) {
    Model *m = make_model(1, 64, 1);
    const char *path = tmp_path("missing.h5");
    save_ok(path, m, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(H5Ldelete(f, "norm", H5P_DEFAULT) >= 0);
    H5Fclose(f);
    expect_load_error(path, m, 0, path, "tensor 'norm' is missing", NULL);

    CkptInfo info = {.with_optimizer = 1};
    save_ok(path, m, &info);
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(H5Ldelete(f, "optimizer/v/layers.1.mlp_norm", H5P_DEFAULT) >= 0);
    H5Fclose(f);
    assert_int_equal(checkpoint_load(path, m, 0, (char[8]){0}, 8), 0);  // params alone are fine
    expect_load_error(path, m, 1, "tensor 'optimizer/v/layers.1.mlp_norm' is missing", NULL);
    model_free(m);
}

static void test_config_mismatch(void **state) {
    Model *a = make_model(1, 64, 1), *b = make_model(1, 128, 1), *untied = make_model(0, 64, 1);
    const char *path = tmp_path("cfg.h5");
    save_ok(path, b, NULL);
    expect_load_error(path, a, 0, path, "model.d_model is 128, the model being loaded has 64", NULL);
    save_ok(path, a, NULL);
    expect_load_error(path, untied, 0, "model.tied_embeddings is 1, the model being loaded has 0", NULL);

    // an attribute outside its config key's range is refused before anything is allocated
    int zero = 0;
    rewrite_attr(path, "model.n_layers", H5T_STD_I32LE, H5T_NATIVE_INT, &zero);
    char err[512];
    assert_int_equal(checkpoint_read_meta(path, NULL, NULL, NULL, NULL, NULL, NULL, err, sizeof err), -1);
    printf("  error: %s\n", err);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "'model.n_layers' is 0, outside the allowed 1 .. 128"));
    int64_t huge = 5553259250290448384LL;
    save_ok(path, a, NULL);
    rewrite_attr(path, "model.d_model", H5T_STD_I64LE, H5T_NATIVE_INT64, &huge);
    assert_int_equal(checkpoint_read_meta(path, NULL, NULL, NULL, NULL, NULL, NULL, err, sizeof err), -1);
    printf("  error: %s\n", err);
    assert_non_null(strstr(err, "'model.d_model' is 5.55"));
    // in range, but more parameters than the file can hold
    int wide = 8192;
    save_ok(path, a, NULL);
    rewrite_attr(path, "model.d_model", H5T_STD_I32LE, H5T_NATIVE_INT, &wide);
    assert_int_equal(checkpoint_read_meta(path, NULL, NULL, NULL, NULL, NULL, NULL, err, sizeof err), -1);
    printf("  error: %s\n", err);
    assert_non_null(strstr(err, "more than the file's"));
    // within every range, but not a valid model: the model's own check
    int three = 3;
    save_ok(path, a, NULL);
    rewrite_attr(path, "model.n_heads", H5T_STD_I32LE, H5T_NATIVE_INT, &three);
    assert_int_equal(checkpoint_read_meta(path, NULL, NULL, NULL, NULL, NULL, NULL, err, sizeof err), -1);
    printf("  error: %s\n", err);
    assert_non_null(strstr(err, "invalid model config"));
    save_ok(path, a, NULL);
    // the parameter count the file-size check uses is the model's own
    ModelConfig meta;
    assert_int_equal(checkpoint_read_meta(path, &meta, NULL, NULL, NULL, NULL, NULL, err, sizeof err), 0);

    // a config field stored as a string
    save_ok(path, a, NULL);
    hid_t str_t = H5Tcopy(H5T_C_S1);
    H5Tset_size(str_t, H5T_VARIABLE);
    const char *s = "64";
    rewrite_attr(path, "model.d_model", str_t, str_t, &s);
    H5Tclose(str_t);
    expect_load_error(path, a, 0, "root attribute 'model.d_model' is not a single integer", NULL);
    model_free(a);
    model_free(b);
    model_free(untied);
}

static void test_no_optimizer(void **state) {
    Model *m = make_model(1, 64, 1);
    const char *path = tmp_path("noopt.h5");
    save_ok(path, m, NULL);
    expect_load_error(path, m, 1, path, "holds no optimizer state (needed to resume", NULL);
    model_free(m);
}

// A NaN or Inf weight (a diverged run's checkpoint) is refused with the file and the tensor,
// for the parameters and for the optimizer state alike; the model stays untouched.
static void test_nonfinite_tensor(void **state) {
    Model *a = make_model(1, 64, 1), *b = make_model(1, 64, 2);
    const char *path = tmp_path("nan.h5");
    CkptInfo info = {.with_optimizer = 1};
    const char *names[2] = {"layers.1.mlp.w_up", "optimizer/v/norm"};
    const float vals[2] = {NAN, INFINITY};
    for (int k = 0; k < 2; k++) {
        save_ok(path, a, &info);
        hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, names[k], H5P_DEFAULT);
        assert_true(d >= 0);
        hsize_t one = 1, at = 5;
        hid_t fs = H5Dget_space(d), ms = H5Screate_simple(1, &one, NULL);
        if (H5Sget_simple_extent_ndims(fs) == 2) {
            hsize_t at2[2] = {0, 5}, one2[2] = {1, 1};
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, at2, NULL, one2, NULL);
        } else {
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, &at, NULL, &one, NULL);
        }
        assert_true(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, &vals[k]) >= 0);
        H5Sclose(ms);
        H5Sclose(fs);
        H5Dclose(d);
        H5Fclose(f);
        expect_load_error(path, b, k, path, names[k], "1 non-finite value", "at flat index 5",
                          "use an earlier checkpoint", NULL);
    }
    Model *c = make_model(1, 64, 2);
    assert_same_buffer(b, model_params(b), c, model_params(c), "params after refused loads");
    model_free(a);
    model_free(b);
    model_free(c);
}

// init and pretrain never replace a file without --overwrite (keep_existing); the refused save
// leaves the old file and no temporary file; a second writer of the same path is refused.
static void test_keep_existing_and_claim(void **state) {
    Model *a = make_model(1, 64, 1), *b = make_model(1, 64, 2), *c = make_model(1, 64, 3);
    const char *path = tmp_path("keep.h5");
    CkptInfo keep = {.keep_existing = 1};
    save_ok(path, a, &keep);
    char err[512] = "";
    assert_int_equal(checkpoint_save(path, b, &keep, err, sizeof err), -1);
    printf("  error: %s\n", err);
    assert_non_null(strstr(err, "already exists"));
    assert_false(file_exists(tmp_path("keep.h5.tmp")));
    assert_false(file_exists(tmp_path("keep.h5.lock")));
    assert_int_equal(checkpoint_load(path, c, 0, err, sizeof err), 0);
    assert_same_buffer(a, model_params(a), c, model_params(c), "the kept checkpoint");
    // another process holding the claim: refused, naming it
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char e[256];
        int ok = out_claim("test", path, e, sizeof e) == 0;
        if (write(fds[1], ok ? "y" : "n", 1) != 1) _exit(2);
        if (ok) sleep(2);
        _exit(ok ? 0 : 1);
    }
    char got = 0;
    assert_int_equal(read(fds[0], &got, 1), 1);
    assert_int_equal(got, 'y');
    assert_int_equal(checkpoint_save(path, b, NULL, err, sizeof err), -1);
    printf("  error: %s\n", err);
    assert_non_null(strstr(err, "another process (pid "));
    int status;
    waitpid(pid, &status, 0);
    close(fds[0]);
    close(fds[1]);
    save_ok(path, b, NULL);  // the claim died with its holder
    model_free(a);
    model_free(b);
    model_free(c);
}

// ---------------------------------------------------------------- setup
static int setup(void **state) {
    snprintf(g_dir, sizeof g_dir, "/tmp/grpolab-ckpt-XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    char err[256];
    g_bk = backend_create(BACKEND_CPU, err, sizeof err);
    return g_bk ? 0 : -1;
}

static int teardown(void **state) {
    tu_remove_dir(g_dir);
    backend_destroy(g_bk);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_tied),
        cmocka_unit_test(test_roundtrip_untied_optimizer),
        cmocka_unit_test(test_large_vocab),
        cmocka_unit_test(test_atomic_save),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_truncated_file),
        cmocka_unit_test(test_text_file),
        cmocka_unit_test(test_no_format_attribute),
        cmocka_unit_test(test_wrong_format),
        cmocka_unit_test(test_wrong_shape),
        cmocka_unit_test(test_missing_tensor),
        cmocka_unit_test(test_config_mismatch),
        cmocka_unit_test(test_no_optimizer),
        cmocka_unit_test(test_nonfinite_tensor),
        cmocka_unit_test(test_keep_existing_and_claim),
    };
    return cmocka_run_group_tests_name("checkpoint", tests, setup, teardown);
}
