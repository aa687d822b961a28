// test_fuzz.c: the config parser and every HDF5 reader on inputs mutated from valid ones the
// test makes itself (byte flips, truncation, random bytes; for HDF5 files also wrong types and
// shapes written through HDF5). Each reader must either succeed or fail with a message naming
// the file, within a time bound (a hang is a failure: SIGALRM), without a crash (run it under
// `make test-asan` for ASan + UBSan). The seed is fixed; GRPOLAB_FUZZ_ITERS multiplies the
// number of cases (default 1: well under a minute under the sanitizers) and GRPOLAB_FUZZ_SEED
// picks another seed, for longer local runs; GRPOLAB_FUZZ_FORK=1 reads each mutated file in a
// child process, so that a crash is counted and its file kept instead of ending the run.
#include "test_util.h"

#include <signal.h>
#include <sys/stat.h>

#include <hdf5.h>

#include "analysis/runs.h"
#include "sim/checkpoint.h"
#include "sim/config.h"
#include "sim/h5util.h"
#include "sim/model.h"
#include "sim/runlog.h"

static char dir[64];
static int mult = 1;
static uint64_t rng_state = 20251205;

static uint64_t rnd(void) {  // splitmix64
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }


static void spit(const char *p, const char *b, size_t n) {
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

// Mutates a copy of src (n bytes) in place into dst (cap n + 64): flips of 1-8 bits (biased to
// the first 16 KiB, where HDF5 keeps most metadata), a random run of bytes, a truncation, or
// an inserted byte. Returns the new length.
static size_t mutate(char *dst, const char *src, size_t n) {
    memcpy(dst, src, n);
    size_t len = n, meta = n < 16384 ? n : 16384;
    switch (below(5)) {
    case 0:
    case 1:
        for (size_t k = 1 + below(8); k > 0; k--) {
            size_t at = below(2) ? below(meta) : below(n);
            dst[at] ^= (char)(1u << below(8));
        }
        break;
    case 2: {
        size_t at = below(meta), run = 1 + below(16);
        for (size_t i = at; i < at + run && i < n; i++) dst[i] = (char)rnd();
        break;
    }
    case 3:
        len = below(n);
        break;
    default: {
        size_t at = below(n);
        memmove(dst + at + 1, dst + at, n - at);
        dst[at] = (char)rnd();
        len = n + 1;
    }
    }
    return len;
}

// A failed read must name the file (its base name at least).
static void check_message(int failed, const char *err, const char *file) {
    if (!failed) return;
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (!err[0] || !strstr(err, base)) fail_msg("a failure without the file's name: '%s'", err);
}

// ---------------------------------------------------------------- the config parser
static const char *VALID_INI =
    "# a config\n[run]\nseed = 7\nbackend = cpu ; inline comment\nout = \"runs/x y.h5\"\n"
    "[model]\nd_model = 32\nn_layers = 2\nrope_theta = 10000\nnorm_eps = 1e-5\n"
    "tied_embeddings = yes\n[optim]\nlr = 2e-3\n[train]\nsteps = 30\ngroup_size = 4\n"
    "temperature = 0.7\n[objective]\npreset = dr_grpo\nscale = none\n";

static void test_fuzz_config(void **state) {
    size_t n = strlen(VALID_INI);
    char *buf = malloc(n + 80), err[512];
    Config *c = config_new();
    assert_int_equal(config_load_text(c, VALID_INI, "fuzz.ini", err, sizeof err), 0);
    config_free(c);
    static const char specials[] = "[]=#;\"\\\n\r\t\0x.-+eE9 ";
    int ok = 0, refused = 0, cases = 3000 * mult;
    for (int i = 0; i < cases; i++) {
        size_t len = mutate(buf, VALID_INI, n);
        for (size_t k = below(3); k > 0 && len > 0; k--)  // syntax characters the parser reads
            buf[below(len)] = specials[below(sizeof specials - 1)];
        buf[len] = '\0';
        c = config_new();
        err[0] = '\0';
        int rc = config_load_text(c, buf, "fuzz.ini", err, sizeof err);
        if (rc != 0 && !strstr(err, "fuzz.ini")) fail_msg("config error without the file name: '%s'", err);
        rc == 0 ? ok++ : refused++;
        if (rc == 0) free(config_to_ini(c));
        config_free(c);
    }
    // --set lines: a key, '=', a value mutated from a valid one
    static const char *const sets[] = {"train.steps=30", "optim.lr=1e-3", "run.out=\"a b\"",
                                       "objective.preset=rloo", "model.tied_embeddings=off"};
    for (int i = 0; i < cases; i++) {
        const char *s = sets[below(5)];
        size_t len = mutate(buf, s, strlen(s));
        buf[len] = '\0';
        c = config_new();
        int rc = config_set(c, buf, err, sizeof err);
        if (rc != 0 && !err[0]) fail_msg("--set '%s' refused without a message", buf);
        config_free(c);
    }
    printf("  %d mutated configs: %d loaded, %d refused with a message; %d --set lines\n", cases, ok,
           refused, cases);
    free(buf);
}

// ---------------------------------------------------------------- HDF5 files
// A small model's checkpoint with vocabulary, config and optimizer state.
static void make_checkpoint(const char *p, Backend *bk) {
    ModelConfig mc = model_config_default();
    mc.vocab_size = 12;
    mc.d_model = 16;
    mc.n_layers = 1;
    mc.n_heads = 2;
    mc.n_kv_heads = 1;
    mc.d_ff = 24;
    mc.max_seq_len = 32;
    Model *m = model_create(bk, &mc);
    model_init_params(m, 3);
    const char *vocab[12] = {"<pad>", "<eos>", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
    CkptInfo info = {.vocab = vocab, .n_vocab = 12, .config_text = "[model]\nd_model = 16\n",
                     .step = 5, .with_optimizer = 1};
    char err[512];
    if (checkpoint_save(p, m, &info, err, sizeof err) != 0) fail_msg("%s", err);
    model_free(m);
}

// A train run log in the layout run_load reads (docs/hdf5-schema.md), a few steps long.
static void make_run_log(const char *p) {
    char err[512];
    RunLog *rl = runlog_create(p, 1, err, sizeof err);
    if (!rl) fail_msg("%s", err);
    const char *attrs[][2] = {{"kind", "train"}, {"objective.preset", "grpo"}, {"objective.scale", "group_std"},
                              {"objective.baseline", "group_mean"}, {"objective.aggregation", "seq_mean_token_mean"},
                              {"benchmarks", "a,train_pool"}, {"config", "[train]\nsteps = 6\ngroup_size = 2\n"}};
    for (int i = 0; i < 7; i++) assert_int_equal(runlog_set_attr_str(rl, attrs[i][0], attrs[i][1], err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "seed", 1, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "objective.std_ddof", 1, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "objective.l_max", 0, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_f64(rl, "objective.std_eps", 1e-6, err, sizeof err), 0);
    static const char *const train_cols[] = {"reward_mean", "length_mean", "length_correct", "length_incorrect",
                                             "truncation_rate", "loop_rate", "disagreement_rate",
                                             "selfcheck_rate", "bias_cosine", "mixed_group_frac"};
    ColumnSpec tc[11] = {{"step", COL_I32, "step"}};
    for (int i = 0; i < 10; i++) tc[i + 1] = (ColumnSpec){train_cols[i], COL_F64, "a value"};
    static const ColumnSpec ec[7] = {{"step", COL_I32, "s"}, {"bench", COL_I32, "b"}, {"accuracy", COL_F64, "a"},
                                     {"length_mean", COL_F64, "l"}, {"length_correct", COL_F64, "l"},
                                     {"length_incorrect", COL_F64, "l"}, {"n", COL_I32, "n"}};
    static const ColumnSpec qc[5] = {{"step", COL_I32, "s"}, {"group_size", COL_I32, "g"},
                                     {"reward_mean", COL_F64, "r"}, {"mean_abs_advantage", COL_F64, "a"},
                                     {"sum_abs_weight", COL_F64, "w"}};
    static const ColumnSpec rc[8] = {{"step", COL_I32, "s"}, {"length", COL_I32, "l"}, {"correct", COL_I32, "c"},
                                     {"advantage", COL_F32, "a"}, {"token_offset", COL_I64, "o"},
                                     {"disagreement", COL_I32, "d"}, {"gave_up", COL_I32, "g"},
                                     {"looped", COL_I32, "l"}};
    static const ColumnSpec kc[2] = {{"step", COL_I32, "s"}, {"weight", COL_F32, "w"}};
    assert_int_equal(runlog_add_table(rl, "train", tc, 11, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_add_table(rl, "eval", ec, 7, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_add_table(rl, "questions", qc, 5, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_add_table(rl, "responses", rc, 8, 0, 1, err, sizeof err), 0);
    assert_int_equal(runlog_add_table(rl, "tokens", kc, 2, 0, 1, err, sizeof err), 0);
    assert_int_equal(runlog_start_swmr(rl, err, sizeof err), 0);
    int64_t off = 0;
    for (int32_t s = 0; s < 6; s++) {
        double v[10];
        for (int i = 0; i < 10; i++) v[i] = 0.1 * (i + 1) + 0.01 * s;
        const void *row[11] = {&s, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]};
        assert_int_equal(runlog_append(rl, "train", 1, row, err, sizeof err), 0);
        for (int32_t b = 0; b < 2; b++) {
            double acc = 0.5, lm = 20, lcor = 15, linc = 25;
            int32_t n = 4;
            const void *er[7] = {&s, &b, &acc, &lm, &lcor, &linc, &n};
            assert_int_equal(runlog_append(rl, "eval", 1, er, err, sizeof err), 0);
        }
        int32_t g = 2;
        double r = 0.5, a = 1, w = 0.2;
        const void *qr[5] = {&s, &g, &r, &a, &w};
        assert_int_equal(runlog_append(rl, "questions", 1, qr, err, sizeof err), 0);
        for (int i = 0; i < 2; i++) {
            int32_t len = 3 + i, cor = i, d = 0, gu = 0, lp = 0;
            float adv = i ? 1.0f : -1.0f;
            const void *rr[8] = {&s, &len, &cor, &adv, &off, &d, &gu, &lp};
            assert_int_equal(runlog_append(rl, "responses", 1, rr, err, sizeof err), 0);
            for (int t = 0; t < len; t++, off++) {
                float wt = 0.1f * (float)t;
                const void *kr[2] = {&s, &wt};
                assert_int_equal(runlog_append(rl, "tokens", 1, kr, err, sizeof err), 0);
            }
        }
        assert_int_equal(runlog_flush(rl, err, sizeof err), 0);
    }
    assert_int_equal(runlog_close(rl, err, sizeof err), 0);
}

// Every reader of a run log on p; 1 if run_load accepted it.
static int read_run_log(const char *p) {
    char err[2048] = "";
    Run *r = run_load(p, err, sizeof err);
    check_message(!r, err, p);
    if (r) {
        err[0] = '\0';
        int failed = run_load_responses(r, err, sizeof err) != 0;
        check_message(failed, err, p);
        FailingStates fs[2];
        err[0] = '\0';
        failed = run_failing_states(r, fs, err, sizeof err) != 0;
        check_message(failed, err, p);
        run_free(r);
    }
    RunLogReader *rd = runlog_reader_open(p, err, sizeof err);
    check_message(!rd, err, p);
    if (rd) {
        static const char *const ds[] = {"train/step", "train/reward_mean", "eval/n", "tokens/weight",
                                         "responses/token_offset", "questions/group_size"};
        for (int i = 0; i < 6; i++) {
            int64_t n = 0;
            err[0] = '\0';
            double *v = runlog_read_column(rd, ds[i], &n, err, sizeof err);
            check_message(!v, err, p);
            free(v);
        }
        free(runlog_read_attr_str(rd, "config", err, sizeof err));
        runlog_reader_close(rd);
    }
    char copy[300];
    snprintf(copy, sizeof copy, "%s/copy.h5", dir);
    const char *drop[1] = {"tokens"};
    err[0] = '\0';
    int failed = runlog_copy(p, copy, drop, 1, 1, err, sizeof err) != 0;
    check_message(failed, err, p);
    remove(copy);
    return r != NULL;
}

// Every reader of a checkpoint on p; 1 if the metadata was accepted.
static int read_checkpoint(const char *p, Backend *bk) {
    char err[2048] = "", **vocab = NULL, *text = NULL;
    int nv = 0, has_opt = 0;
    int64_t step;
    ModelConfig mc;
    int failed = checkpoint_read_meta(p, &mc, &vocab, &nv, &text, &step, &has_opt, err, sizeof err) != 0;
    check_message(failed, err, p);
    if (failed) return 0;
    checkpoint_free_vocab(vocab, nv);
    free(text);
    Model *m = model_create(bk, &mc);  // bounded: read_meta checked the config against the file
    err[0] = '\0';
    failed = checkpoint_load(p, m, has_opt, err, sizeof err) != 0;
    check_message(failed, err, p);
    model_free(m);
    return 1;
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_fuzz: a reader ran past its time bound (a hang)\n";
    if (write(2, msg, sizeof msg - 1) < 0) {}
    _exit(3);
}

// Mutates the file at src cases times and runs read on each; counts the accepted ones.
static void fuzz_file(const char *what, const char *src, int cases, int (*read)(const char *, Backend *),
                      Backend *bk) {
    size_t n = 0;
    char *orig = tu_read_file(src, &n), *buf = malloc(n + 64), p[300];
    assert_non_null(orig);
    snprintf(p, sizeof p, "%s/mutant.h5", dir);
    int accepted = 0, failures = 0;
    for (int i = 0; i < cases; i++) {
        spit(p, buf, mutate(buf, orig, n));
        if (getenv("GRPOLAB_FUZZ_FORK")) {  // each case in a child: a crash is reported, not fatal
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                signal(SIGSEGV, SIG_DFL);
                signal(SIGBUS, SIG_DFL);
                signal(SIGABRT, SIG_DFL);
                signal(SIGFPE, SIG_DFL);
                signal(SIGILL, SIG_DFL);
                alarm(60);
                _exit(read(p, bk) ? 0 : 1);
            }
            int st;
            waitpid(pid, &st, 0);
            accepted += WIFEXITED(st) && WEXITSTATUS(st) == 0;
            if (!WIFEXITED(st) || WEXITSTATUS(st) > 1) {
                char keep[400];
                snprintf(keep, sizeof keep, "/tmp/grpolab-fuzz-found-%s-%d.h5", what[0] == 'c' ? "ckpt" : "log", i);
                rename(p, keep);
                printf("  case %d: %s; the file is kept as %s\n", i, WIFSIGNALED(st) ? "crash" : "hang", keep);
                failures++;
            }
            continue;
        }
        alarm(60);
        accepted += read(p, bk);
        alarm(0);
    }
    printf("  %s: %d mutated files, %d still read, the rest refused with a message\n", what, cases, accepted);
    assert_int_equal(failures, 0);
    free(orig);
    free(buf);
}

static int read_run_log_bk(const char *p, Backend *bk) { (void)bk; return read_run_log(p); }

static void test_fuzz_hdf5_bytes(void **state) {
    char err[256];
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    char ck[300], log[300];
    snprintf(ck, sizeof ck, "%s/ckpt.h5", dir);
    snprintf(log, sizeof log, "%s/run.h5", dir);
    make_checkpoint(ck, bk);
    make_run_log(log);
    assert_int_equal(read_checkpoint(ck, bk), 1);  // the originals read
    assert_int_equal(read_run_log(log), 1);
    if (!getenv("SKIPCK")) fuzz_file("checkpoint", ck, 150 * mult, read_checkpoint, bk);
    fuzz_file("run log", log, 150 * mult, read_run_log_bk, bk);
    backend_destroy(bk);
}

// Wrong types and shapes, written through HDF5 so the file itself is sound: a column replaced
// by strings, by a 2-D dataset or by a group; an attribute replaced by another type.
static void replace_object(const char *p, const char *name, int how) {
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    if (how == 3) {  // an attribute of another class: a 2-element float array
        if (H5Aexists(f, name) > 0) H5Adelete(f, name);
        hsize_t two = 2;
        double v[2] = {1e300, -1};
        hid_t s = H5Screate_simple(1, &two, NULL), a = H5Acreate2(f, name, H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_DOUBLE, v);
        H5Aclose(a);
        H5Sclose(s);
        H5Fclose(f);
        return;
    }
    if (H5Lexists(f, name, H5P_DEFAULT) > 0) H5Ldelete(f, name, H5P_DEFAULT);
    if (how == 0) {
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, 4);
        hsize_t n = 3;
        hid_t s = H5Screate_simple(1, &n, NULL);
        hid_t d = H5Dcreate2(f, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, "abcdefghijkl");
        H5Dclose(d);
        H5Sclose(s);
        H5Tclose(t);
    } else if (how == 1) {
        hsize_t dims[2] = {3, 2};
        float v[6] = {0};
        hid_t s = H5Screate_simple(2, dims, NULL);
        hid_t d = H5Dcreate2(f, name, H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
        H5Dclose(d);
        H5Sclose(s);
    } else {
        hid_t g = H5Gcreate2(f, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Gclose(g);
    }
    H5Fclose(f);
}

static void test_fuzz_hdf5_types(void **state) {
    char err[256];
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    char ck[300], log[300], p[300];
    snprintf(ck, sizeof ck, "%s/ckpt.h5", dir);
    snprintf(log, sizeof log, "%s/run.h5", dir);
    snprintf(p, sizeof p, "%s/typed.h5", dir);
    make_checkpoint(ck, bk);
    make_run_log(log);
    static const char *const log_objs[] = {"train/step", "train/reward_mean", "eval/step", "eval/bench",
                                           "questions/group_size", "responses/length", "tokens/weight",
                                           "responses/token_offset", "train", "tokens"};
    static const char *const log_attrs[] = {"kind", "config", "seed", "objective.std_eps", "format_version",
                                            "benchmarks"};
    static const char *const ck_objs[] = {"tok_embeddings", "norm", "layers.0.attn.wq", "optimizer/m/norm",
                                          "optimizer", "optimizer/v"};
    static const char *const ck_attrs[] = {"model.d_model", "model.vocab_size", "model.rope_theta", "format",
                                           "tokenizer.vocab", "config", "step", "format_version"};
    int cases = 0;
    size_t n = 0;
    for (int how = 0; how < 4; how++) {
        int k = how == 3 ? 6 : 10;
        for (int i = 0; i < k; i++) {
            char *b = tu_read_file(log, &n);
            spit(p, b, n);
            free(b);
            replace_object(p, how == 3 ? log_attrs[i] : log_objs[i], how);
            alarm(60);
            read_run_log(p);
            alarm(0);
            cases++;
        }
        k = how == 3 ? 8 : 6;
        for (int i = 0; i < k; i++) {
            char *b = tu_read_file(ck, &n);
            spit(p, b, n);
            free(b);
            replace_object(p, how == 3 ? ck_attrs[i] : ck_objs[i], how);
            alarm(60);
            read_checkpoint(p, bk);
            alarm(0);
            cases++;
        }
    }
    printf("  %d files with a column, tensor, group or attribute of the wrong type or shape\n", cases);
    backend_destroy(bk);
}

static int setup(void **state) {
    const char *m = getenv("GRPOLAB_FUZZ_ITERS"), *s = getenv("GRPOLAB_FUZZ_SEED");
    if (m && atoi(m) > 0) mult = atoi(m);
    if (s) rng_state = strtoull(s, NULL, 10);
    printf("fuzz: seed %llu, %dx the default cases (GRPOLAB_FUZZ_SEED, GRPOLAB_FUZZ_ITERS)\n",
           (unsigned long long)rng_state, mult);
    signal(SIGALRM, on_alarm);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);  // the test makes broken files on purpose
    snprintf(dir, sizeof dir, "/tmp/grpolab-fuzz-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}
static int teardown(void **state) {
    tu_remove_dir(dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_config),
        cmocka_unit_test(test_fuzz_hdf5_bytes),
        cmocka_unit_test(test_fuzz_hdf5_types),
    };
    return cmocka_run_group_tests_name("fuzz", tests, setup, teardown);
}
