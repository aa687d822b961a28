// test_fuzz.c: the config parser and every HDF5 reader on inputs mutated from valid ones the
// test makes itself (byte flips, truncation, random bytes; for HDF5 files also wrong types and
// shapes written through HDF5); sweep files likewise, and `sweep slurm` on hostile paths and
// values (quotes, $(...), backticks, line breaks, names longer than PATH_MAX), whose batch
// script must quote them so that no value is ever run. Each reader must either succeed or fail with a message naming
// the file, within a time bound (a hang is a failure: SIGALRM), without a crash (run it under
// `make test-asan` for ASan + UBSan). The seed is fixed; GRPOLAB_FUZZ_ITERS multiplies the
// number of cases (default 1: well under a minute under the sanitizers) and GRPOLAB_FUZZ_SEED
// picks another seed, for longer local runs; GRPOLAB_FUZZ_FORK=1 reads each mutated file in a
// child process, so that a crash is counted and its file kept instead of ending the run.
#include "test_util.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>

#include "analysis/runs.h"
#include "common.h"
#include "sim/model/checkpoint.h"
#include "sim/io/config.h"
#include "sim/io/h5util.h"
#include "sim/model/model.h"
#include "sim/io/runlog.h"
#include "sim/sweep/sweep.h"

// HDF5 1.10 leaks some of its own allocations on the error paths of corrupt files (no frame
// of ours in the stacks); LeakSanitizer is told so here, for this test only.
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libhdf5_serial.so\nleak:libhdf5.so\n"; }

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

// ---------------------------------------------------------------- sweep files and sbatch
// Values that a shell must never run: if a script or a command line let one through, it
// creates a file named MARK (relative: in the directory the shell is in).
static const char *const HOSTILE[] = {"$(touch MARK)", "`touch MARK`", "x'; touch MARK; '", "a\"b; touch MARK",
                                      "a b\tc", "%a%j%%", "#; touch MARK", "\\'$(touch MARK)",
                                      "''''''''''''''''''''''''''''''''''''''''"};  // each quote is 4 bytes as a
// shell word: a command sized at twice its path's length would overflow
enum { N_HOSTILE = sizeof HOSTILE / sizeof HOSTILE[0] };

static char *long_text(size_t n, char c) {
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

// Sweep files mutated from a valid one, with the characters shells and the parser care about
// and values of thousands of characters: each loads or is refused with the file named, and a
// loaded one resolves every run (names, paths, --set lines, its manifest) or is refused by
// sweep_check with a message.
static void test_fuzz_sweep_files(void **state) {
    char base[128], err[2048];
    snprintf(base, sizeof base, "%s/base.ini", dir);
    spit(base, "[train]\nsteps = 2\n", 18);  // also the train.init of the sweeps below: a file
    char *valid = NULL;
    size_t vlen = 0;
    FILE *m = open_memstream(&valid, &vlen);
    fprintf(m, "[sweep]\nconfig = %s\nout = %s/sw out\nname = n'a $(x)\nrun_name = r_{run.seed}_{objective.preset}\n"
            "[set]\ntrain.steps = 3\n[grid]\nobjective.preset = grpo, dr_grpo\nrun.seed = 1..3\n"
            "[slurm]\ncpus = 2\nsignal = 60\nrequeue = false\n", base, dir);
    fclose(m);
    Sweep *s = sweep_load_text(valid, "fuzz.sweep", err, sizeof err);
    if (!s) fail_msg("the valid sweep file is refused: %s", err);
    assert_int_equal(sweep_check(s, err, sizeof err), 0);
    sweep_free(s);
    static const char specials[] = "[]=#;,.{}'\"`$()\\\n\r\t -x9";
    size_t cap = vlen + 8192;
    char *buf = malloc(cap);
    int cases = 1500 * mult, loaded = 0, checked = 0;
    for (int i = 0; i < cases; i++) {
        size_t len = mutate(buf, valid, vlen);
        for (size_t k = below(4); k > 0 && len > 0; k--) buf[below(len)] = specials[below(sizeof specials - 1)];
        if (below(8) == 0 && len > 0) {  // a run of 4100-5000 characters: a very long name or value
            size_t at = below(len), run = 4100 + below(900);
            if (len + run >= cap) run = cap - len - 1;
            memmove(buf + at + run, buf + at, len - at);
            memset(buf + at, "ab$'"[below(4)], run);
            len += run;
        }
        buf[len] = '\0';
        err[0] = '\0';
        s = sweep_load_text(buf, "fuzz.sweep", err, sizeof err);
        if (!s) {
            if (!strstr(err, "fuzz.sweep")) fail_msg("a refused sweep file without its name: '%s'", err);
            continue;
        }
        loaded++;
        if (sweep_check(s, err, sizeof err) != 0) {
            if (!err[0]) fail_msg("sweep_check refused without a message");
            sweep_free(s);
            continue;
        }
        checked++;
        for (int r = 0; r < s->n_runs && r < 8; r++) {
            char name[1024];
            assert_int_equal(sweep_run_name(s, r, name, sizeof name), 0);
            char *p = sweep_run_path(s, r), **sets = sweep_run_grid_sets(s, r);
            assert_non_null(strstr(p, name));
            sweep_free_sets(sets, s->n_axes);
            free(p);
        }
        sweep_free(s);
    }
    printf("  %d mutated sweep files: %d loaded, %d of them resolved\n", cases, loaded, checked);
    free(buf);
    free(valid);
}

// Runs `cd DIR && ENV BIN ARGS` (ARGS already shell words); its output in out. The exit code,
// or -1 where it did not exit; a sanitizer's report fails the test.
static int run_bin(const char *cwd, const char *env, const char *args, char *out, size_t cap) {
    const char *bin = getenv("GRPOLAB_BIN");
    char *abs_bin = realpath(bin ? bin : "build/grpolab", NULL);
    assert_non_null(abs_bin);
    char *qcwd = shell_quote(cwd), *qbin = shell_quote(abs_bin);
    char *cmd = xasprintf("cd %s && %s %s %s 2>&1", qcwd, env, qbin, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    if (strstr(out, "Sanitizer") || strstr(out, "runtime error")) fail_msg("`%s` crashed:\n%s", cmd, out);
    free(cmd);
    free(qcwd);
    free(qbin);
    free(abs_bin);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int marked(const char *d) {
    char *p = xasprintf("%s/MARK", d);
    int there = access(p, F_OK) == 0;
    free(p);
    return there;
}

// `sweep slurm` with hostile text in every place a user gives one: the directory it runs in,
// the sweep file's path and name, the out directory, --script (quotes, spaces, $(...),
// backticks, a line break, '%', '#', a backslash; and paths of more than 4096 characters).
// Each either exits 1 or 2 with a message or writes a script that `bash -n` accepts, whose
// only lines outside comments are its three commands, and that, run by bash, runs nothing of
// the values: the task it starts fails on a model that is not there, and no MARK appears.
static void test_fuzz_sweep_slurm(void **state) {
    char out[16384];
    int scripts = 0, refused = 0;
    for (int h = 0; h < N_HOSTILE; h++) {
        // the directory it runs in, and the sweep file's own name
        char *cwd = xasprintf("%s/cwd%d %s", dir, h, HOSTILE[h]);
        if (mkdir(cwd, 0777) != 0) fail_msg("mkdir '%s': %s", cwd, strerror(errno));
        // train.init is a file that is there but no model: the check before the script passes,
        // the training of a task fails at once
        char *ini = xasprintf("%s/base.ini", cwd), *init_line = xasprintf("[train]\ninit = %s/base.ini\n", dir);
        spit(ini, init_line, strlen(init_line));
        free(init_line);
        for (int where = 0; where < 4; where++) {
            const char *v = HOSTILE[(h + where) % N_HOSTILE];
            char *sweep = xasprintf("%s/%d %s.sweep", cwd, where, v);
            char *outdir = where == 1 ? xasprintf("o%d %s", h, v) : xasprintf("o%d", where);
            char *text = xasprintf("[sweep]\nconfig = base.ini\nout = %s\nname = %s\n[grid]\nrun.seed = 1, 2\n",
                                   outdir, where == 2 ? v : "n");
            spit(sweep, text, strlen(text));
            char *script = where == 3 ? xasprintf("%s/s %s\nx.sbatch", cwd, v) : NULL;
            char *qs = shell_quote(sweep), *qscript = script ? shell_quote(script) : xstrdup("");
            char *args = xasprintf("sweep slurm %s%s%s", qs, script ? " --script " : "", qscript);
            int rc = run_bin(cwd, "", args, out, sizeof out);
            const char *wrote = strstr(out, "sweep slurm: wrote "), *end = wrote ? strstr(wrote, ": a job array") : NULL;
            if (rc == 0 && !script) {  // OUT/sweep.sbatch, OUT as the sweep file reads it
                if (!end) fail_msg("no 'wrote' line:\n%s", out);
                char *rel = xasprintf("%.*s", (int)(end - wrote - 19), wrote + 19);
                script = rel[0] == '/' ? xstrdup(rel) : xasprintf("%s/%s", cwd, rel);
                free(rel);
                free(qscript);
                qscript = shell_quote(script);
            }
            if (rc == 0) {
                scripts++;
                char *bn = xasprintf("bash -n %s", qscript);
                if (system(bn) != 0) fail_msg("bash -n refuses the script of %s:\n%s", sweep, out);
                free(bn);
                FILE *f = fopen(script, "r");
                assert_non_null(f);
                char line[8192];
                int commands = 0;
                while (fgets(line, sizeof line, f)) commands += line[0] != '#';
                fclose(f);
                if (commands != 3) fail_msg("%s: %d lines outside comments, expected 3", script, commands);
                // run as Slurm would run task 0: the task fails (no base model), nothing else runs
                char *runit = xasprintf("cd %s && SLURM_ARRAY_TASK_ID=0 bash %s > /dev/null 2>&1", dir, qscript);
                int st = system(runit);
                free(runit);
                if (!(WIFEXITED(st) && WEXITSTATUS(st) != 0)) fail_msg("task 0 of %s did not fail as expected", script);
            } else {
                refused++;
                if (rc != 1 && rc != 2) fail_msg("sweep slurm exited %d:\n%s", rc, out);
                if (!strstr(out, "error:")) fail_msg("sweep slurm refused without an error:\n%s", out);
            }
            if (marked(cwd) || marked(dir)) fail_msg("a value was run by a shell: %s (out %s)", HOSTILE[h], out);
            free(qs), free(qscript), free(args), free(script), free(text), free(outdir), free(sweep);
        }
        free(ini);
        free(cwd);
    }
    // paths and names longer than PATH_MAX: an error naming what, never a crash
    char *lng = long_text(5000, 'q');
    char *cwd = xasprintf("%s/long", dir);
    mkdir(cwd, 0777);
    char *ini = xasprintf("%s/base.ini", cwd), *init_line = xasprintf("[train]\ninit = %s/base.ini\n", dir);
    spit(ini, init_line, strlen(init_line));
    free(init_line);
    const char *cases[][2] = {{"out", "--script s.sbatch"}, {"name", ""}, {"script", ""}};
    for (int k = 0; k < 3; k++) {
        char *text = xasprintf("[sweep]\nconfig = base.ini\nout = %s\nname = %s\n[grid]\nrun.seed = 1\n",
                               k == 0 ? lng : "o", k == 1 ? lng : "n");
        char *sweep = xasprintf("%s/%d.sweep", cwd, k);
        spit(sweep, text, strlen(text));
        char *args = k == 2 ? xasprintf("sweep slurm %d.sweep --script %s", k, lng)
                            : xasprintf("sweep slurm %d.sweep %s", k, cases[k][1]);
        int rc = run_bin(cwd, "", args, out, sizeof out);
        printf("  long %s: exit %d: %.200s\n", cases[k][0], rc, out);
        if (rc == 0 && k != 1) fail_msg("a %s of 5000 characters was accepted", cases[k][0]);
        if (rc != 0 && (rc > 2 || !strstr(out, "error:"))) fail_msg("exit %d without an error:\n%s", rc, out);
        free(text), free(sweep), free(args);
    }
    // --submit quotes the script's path for the shell it runs sbatch in: an sbatch that
    // prints its arguments, one a line, on stderr, first on PATH
    char *bin_dir = xasprintf("%s/fakebin", dir), *fake = xasprintf("%s/sbatch", bin_dir);
    mkdir(bin_dir, 0777);
    const char *sb = "#!/bin/sh\nfor a in \"$@\"; do printf 'arg:%s\\n' \"$a\" >&2; done\necho 4242\n";
    spit(fake, sb, strlen(sb));
    chmod(fake, 0755);
    char *env = xasprintf("PATH=%s:/usr/bin:/bin", bin_dir);
    char *text = xasprintf("[sweep]\nconfig = base.ini\nout = o\n[grid]\nrun.seed = 1\n");
    char *sub = xasprintf("%s/sub.sweep", cwd);
    spit(sub, text, strlen(text));
    free(sub);
    for (int h = 0; h < N_HOSTILE; h++) {
        char *script = xasprintf("%s/%s'.sbatch", cwd, HOSTILE[h]), *q = shell_quote(script);
        char *args = xasprintf("sweep slurm sub.sweep --submit --script %s", q);
        int rc = run_bin(cwd, env, args, out, sizeof out);
        char *want = xasprintf("arg:%s\n", script);
        if (rc != 0 || !strstr(out, want) || !strstr(out, "submitted job 4242"))
            fail_msg("--submit with script '%s': exit %d:\n%s", script, rc, out);
        if (marked(cwd)) fail_msg("a value was run by a shell: %s", script);
        free(script), free(q), free(args), free(want);
    }
    printf("  sweep slurm on %d hostile values: %d scripts checked (bash -n, run), %d refused\n",
           4 * N_HOSTILE, scripts, refused);
    free(text), free(env), free(fake), free(bin_dir), free(ini), free(cwd), free(lng);
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
        cmocka_unit_test(test_fuzz_sweep_files),
        cmocka_unit_test(test_fuzz_sweep_slurm),
    };
    return cmocka_run_group_tests_name("fuzz", tests, setup, teardown);
}
