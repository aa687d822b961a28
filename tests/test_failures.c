// test_failures.c: what every command guarantees on failure (docs/cli.md, "Failure
// behaviour"), through the binary ($GRPOLAB_BIN): outputs are never replaced without
// --overwrite, checked before any work, claimed against a second writer, written whole or not
// at all on a full disk (a small tmpfs where this process may mount one), standard output
// losses are errors, and a model with a NaN tensor or a foreign vocabulary is refused.
#include "spawn_util.h"

#include <errno.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <hdf5.h>

#include "sim/model/checkpoint.h"
#include "sim/io/h5util.h"
#include "sim/rl/resume.h"
#include "sim/io/runlog.h"
#include "sim/world/tokenizer.h"

static char dir[64];

static const char *path_in(const char *name) {
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}



// Put in front of the commands HDF5 leaks its own blocks in (expect_cli; "" for the others;
// spawn_util.h hdf5_leak_env).
static const char *cli_env = "";
static char leak_env[1024];
static void set_hdf5_leak_env(void) {
    hdf5_leak_env(leak_env, sizeof leak_env);
    cli_env = leak_env;
}

// Runs the binary with args (cli_env in front) and checks the exit code and that stderr holds
// every needle (NULL-ended).
static void expect_cli(int want_rc, const char *args, ...) {
    char out[8192];
    int rc = tu_run_cli_env(cli_env, args, out, sizeof out);
    printf("  grpolab %.90s -> exit %d: %s", args, rc, out);
    assert_int_equal(rc, want_rc);
    va_list ap;
    va_start(ap, args);
    for (const char *n; (n = va_arg(ap, const char *)) != NULL;)
        if (!strstr(out, n)) fail_msg("stderr lacks '%s'", n);
    va_end(ap);
}

// A model of this world (the tokenizer's vocabulary size) written by `grpolab init`.
static void init_world_model(const char *p) {
    char args[512];
    snprintf(args, sizeof args, "init --set model.vocab_size=%d --set model.d_model=32 --set "
             "model.n_layers=1 --set model.d_ff=48 --out %s --overwrite", tok_vocab_size(tokenizer_default()), p);
    expect_cli(0, args, NULL);
}

// ---------------------------------------------------------------- --overwrite and output paths
static void test_outputs_checked_first(void **state) {
    char args[512];
    const char *m = path_in("keep.h5");
    init_world_model(m);
    size_t n0 = 0, n1 = 0;
    char *before = tu_read_file(m, &n0);
    snprintf(args, sizeof args, "init --set run.seed=9 --out %s", m);
    expect_cli(2, args, m, "already exists", "--overwrite", NULL);
    snprintf(args, sizeof args, "pretrain --set pretrain.steps=100000 --out %s", m);
    expect_cli(2, args, m, "already exists", NULL);  // refused before any training step
    char *after = tu_read_file(m, &n1);
    assert_true(n0 == n1 && memcmp(before, after, n0) == 0);
    free(before);
    free(after);
    // a directory that does not exist, or is not writable, is found before the work
    snprintf(args, sizeof args, "pretrain --set model.vocab_size=%d --set pretrain.steps=100000 --out "
             "/nonexistent-grpolab/dir/x.h5", tok_vocab_size(tokenizer_default()));
    expect_cli(2, args, "/nonexistent-grpolab/dir", "does not exist", NULL);
    expect_cli(2, "init --out /proc/grpolab-x.h5", "/proc", NULL);
    assert_false(exists(path_in("keep.h5.tmp")));
    assert_false(exists(path_in("keep.h5.lock")));
}

// ---------------------------------------------------------------- concurrent writers
// A child process holds the claim on path (as a running train, init or strip does) until the
// parent writes to the pipe.
static pid_t hold_claim(const char *path, int fds[2]) {
    int ready[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(pipe(ready), 0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char e[512], c;
        int ok = out_claim("test", path, e, sizeof e) == 0;
        if (write(ready[1], ok ? "y" : "n", 1) != 1 || !ok) _exit(1);
        if (read(fds[0], &c, 1) < 0) _exit(1);
        _exit(0);
    }
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    close(ready[0]);
    close(ready[1]);
    return pid;
}

static void release_claim(pid_t pid, int fds[2]) {
    assert_int_equal(write(fds[1], "x", 1), 1);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    close(fds[0]);
    close(fds[1]);
}

static void test_concurrent_writers(void **state) {
    char args[512], err[512];
    const char *p = path_in("busy.h5");
    int fds[2];
    pid_t pid = hold_claim(p, fds);
    snprintf(args, sizeof args, "init --out %s", p);
    expect_cli(2, args, "another process (pid", p, NULL);
    snprintf(args, sizeof args, "pretrain --set pretrain.steps=100000 --out %s", p);
    expect_cli(2, args, "another process (pid", NULL);
    snprintf(args, sizeof args, "train --out %s --overwrite", p);  // refused before any work
    expect_cli(2, args, "another process (pid", NULL);
    // a run log (train, eval --out) and a copy (strip) take the same claim
    assert_null(runlog_create(p, 1, err, sizeof err));
    printf("  runlog_create: %s\n", err);
    assert_non_null(strstr(err, "another process (pid"));
    assert_false(exists(p));
    release_claim(pid, fds);
    // the holder is gone: the path is free again
    RunLog *rl = runlog_create(p, 0, err, sizeof err);
    assert_non_null(rl);
    assert_int_equal(runlog_close(rl, err, sizeof err), 0);
    assert_false(exists(path_in("busy.h5.lock")));
    // a second writer of a log this process writes is refused the same way
    pid = hold_claim(p, fds);
    assert_null(runlog_create(p, 1, err, sizeof err));
    release_claim(pid, fds);
}

// ---------------------------------------------------------------- standard output
static void test_stdout_errors(void **state) {
    const char *bin = getenv("GRPOLAB_BIN");
    if (!bin) bin = "build/grpolab";
    const char *cmds[] = {"config --keys", "config --keys --markdown", "version", "help"};
    for (int i = 0; i < 4; i++) {
        char cmd[1024], out[2048];
        snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/full", bin, cmds[i]);
        FILE *pp = popen(cmd, "r");
        assert_non_null(pp);
        size_t n = fread(out, 1, sizeof out - 1, pp);
        out[n] = '\0';
        int st = pclose(pp);
        printf("  grpolab %s >/dev/full -> exit %d: %s", cmds[i], WEXITSTATUS(st), out);
        assert_int_equal(WEXITSTATUS(st), 1);
        assert_non_null(strstr(out, "No space left on device"));
    }
    // --markdown is a form of the --keys table: alone it is a usage error
    expect_cli(2, "config --markdown", "grpolab config: error: --markdown goes with --keys", NULL);
}

// ---------------------------------------------------------------- models eval refuses
// Replaces the root attribute tokenizer.vocab of the checkpoint at p by the n strings v
// (n < 0: removes it).
static void set_vocab(const char *p, const char *const *v, int n) {
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    if (H5Aexists(f, "tokenizer.vocab") > 0) assert_true(H5Adelete(f, "tokenizer.vocab") >= 0);
    if (n >= 0) {
        hsize_t dims = (hsize_t)n;
        hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate_simple(1, &dims, NULL);
        H5Tset_size(t, H5T_VARIABLE);
        hid_t a = H5Acreate2(f, "tokenizer.vocab", t, s, H5P_DEFAULT, H5P_DEFAULT);
        assert_true(a >= 0 && H5Awrite(a, t, v) >= 0);
        H5Aclose(a);
        H5Sclose(s);
        H5Tclose(t);
    }
    H5Fclose(f);
}

static void test_eval_refuses_bad_models(void **state) {
    const Tokenizer *tk = tokenizer_default();
    int V = tok_vocab_size(tk);
    const char *v[256];
    for (int i = 0; i < V; i++) v[i] = tok_str(tk, i);
    const char *m = path_in("model.h5");
    char args[512];
    snprintf(args, sizeof args, "eval --model %s --limit 1 --backend cpu", m);
    init_world_model(m);
    expect_cli(0, args, NULL);  // init stores this world's vocabulary: evaluable
    set_vocab(m, v, -1);
    expect_cli(2, args, m, "stores no tokenizer vocabulary", NULL);
    set_vocab(m, v, V - 1);
    expect_cli(2, args, m, "has 57 tokens", NULL);
    const char *dup[256];
    memcpy(dup, v, sizeof(char *) * (size_t)V);
    dup[7] = dup[3];
    set_vocab(m, dup, V);
    expect_cli(2, args, m, "token 7", "duplicates token 3", NULL);
    // a NaN weight: refused, naming the tensor (a greedy eval used to exit 0, answers empty)
    init_world_model(m);
    hid_t f = H5Fopen(m, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, "norm", H5P_DEFAULT);
    float nan = NAN;
    hsize_t at = 3, one = 1;
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(1, &one, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &at, NULL, &one, NULL);
    assert_true(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, &nan) >= 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    H5Fclose(f);
    expect_cli(2, args, m, "tensor 'norm'", "non-finite", NULL);
    snprintf(args, sizeof args, "eval --model %s --limit 1 --backend cpu --temperature 1", m);
    expect_cli(2, args, "tensor 'norm'", NULL);
}

// ---------------------------------------------------------------- messages
// HDF5 failures come with errno's reason, and a long path does not cut the reason off.
static void test_messages(void **state) {
    char args[2048], longdir[600];
    // a directory tree whose path is ~400 characters
    snprintf(longdir, sizeof longdir, "%s", dir);
    while (strlen(longdir) < 400) {
        strcat(longdir, "/a-rather-long-directory-name");
        mkdir(longdir, 0777);
    }
    snprintf(args, sizeof args, "init --out %s/missing/x.h5", longdir);
    expect_cli(2, args, "does not exist (create it first)", NULL);
    snprintf(args, sizeof args, "summary %s/none.h5", longdir);
    expect_cli(1, args, "file does not exist", NULL);
    // a corrupt file in a long path: the reason is kept
    char bad[700];
    snprintf(bad, sizeof bad, "%s/bad.h5", longdir);
    FILE *f = fopen(bad, "w");
    fputs("\x89HDF\r\n\x1a\n garbage after a valid signature", f);
    fclose(f);
    snprintf(args, sizeof args, "eval --model %s", bad);
    expect_cli(2, args, "truncated or corrupt", NULL);
    // a read-only filesystem (root may write anywhere else): errno's reason, not "unknown"
    const char *ro = path_in("ro-disk");
    mkdir(ro, 0777);
    if (mount("tmpfs", ro, "tmpfs", MS_RDONLY, "size=64k") != 0) {
        printf("  (no read-only tmpfs: %s; that part skipped)\n", strerror(errno));
        rmdir(ro);
        return;
    }
    snprintf(args, sizeof args, "init --out %s/x.h5", ro);
    expect_cli(2, args, "Read-only file system", NULL);
    assert_int_equal(umount(ro), 0);
    rmdir(ro);
}

// ---------------------------------------------------------------- corrupt object headers
// A byte flipped inside a dataset's object header fails its checksum: the command names the
// file and the dataset (exit 1), and HDF5, which cannot close such a file, stays quiet at exit
// instead of adding "HDF5: infinite loop closing library" and a line of its modules
// (h5_quiet_for_good).
static void test_corrupt_header_quiet_exit(void **state) {
    const char *log = path_in("bad-header.h5");
    char err[512];
    RunLog *rl = runlog_create(log, 1, err, sizeof err);
    assert_non_null(rl);
    static const ColumnSpec cols[2] = {{"step", COL_I64, "step"}, {"x", COL_F64, "a value"}};
    assert_int_equal(runlog_add_table(rl, "train", cols, 2, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_add_table(rl, "tokens", cols, 2, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_start_swmr(rl, err, sizeof err), 0);
    int64_t st[3] = {0, 1, 2};
    double x[3] = {0.5, 1.5, 2.5};
    const void *data[2] = {st, x};
    assert_int_equal(runlog_append(rl, "train", 3, data, err, sizeof err), 0);
    assert_int_equal(runlog_close(rl, err, sizeof err), 0);
    break_object_header(log, "train/x");
    char args[600], out[8192];
    snprintf(args, sizeof args, "strip %s -o %s", log, path_in("bad-header-copy.h5"));
    set_hdf5_leak_env();  // HDF5 loses the cache entry of the header that failed its checksum
    int rc = tu_run_cli_env(cli_env, args, out, sizeof out);
    cli_env = "";
    printf("  grpolab strip (a corrupt object header) -> exit %d: %s", rc, out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "bad-header.h5"));
    assert_non_null(strstr(out, "/train/x"));
    assert_null(strstr(out, "infinite loop"));
    assert_null(strstr(out, "HDF5-DIAG"));
    assert_null(strstr(out, "LeakSanitizer"));
}

// ---------------------------------------------------------------- [model] in a train config
// The model RL trains is train.init's: a [model] key that disagrees is refused; the keys a
// config leaves unset are recorded with train.init's values, not the schema's defaults.
static void test_train_model_keys(void **state) {
    const char *m = path_in("init-small.h5"), *run = path_in("model-keys.h5");
    init_world_model(m);  // d_model 32, one layer
    char args[1024], err[512];
    const char *small = "--set train.steps=1 --set train.prompts_per_step=2 --set train.group_size=2 "
                        "--set train.minibatch_size=4 --set train.eval_every=0 --set "
                        "train.checkpoint_every=0 --set world.max_new_tokens=16 --set run.backend=cpu";
    snprintf(args, sizeof args, "train --set train.init=%s %s --set model.d_model=64 --out %s", m, small, run);
    expect_cli(2, args, "the config sets model.d_model = 64", m, "with 32", NULL);
    assert_false(exists(run));
    snprintf(args, sizeof args, "train --set train.init=%s %s --out %s", m, small, run);
    expect_cli(0, args, NULL);
    RunLogReader *rd = runlog_reader_open(run, err, sizeof err);
    assert_non_null(rd);
    char *cfg = runlog_read_attr_str(rd, "config", err, sizeof err);
    assert_non_null(cfg);
    assert_non_null(strstr(cfg, "d_model = 32"));
    assert_non_null(strstr(cfg, "n_layers = 1"));
    free(cfg);
    runlog_reader_close(rd);
}

// ---------------------------------------------------------------- a full disk
// A run log of about 1 MB (a table of 120000 float64 rows) to strip onto the small disk.
static void write_big_log(const char *p) {
    char err[512];
    RunLog *rl = runlog_create(p, 1, err, sizeof err);
    assert_non_null(rl);
    static const ColumnSpec cols[2] = {{"step", COL_I64, "step"}, {"x", COL_F64, "a value"}};
    assert_int_equal(runlog_add_table(rl, "train", cols, 2, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_add_table(rl, "tokens", cols, 2, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_start_swmr(rl, err, sizeof err), 0);
    enum { N = 60000 };
    int64_t *s = malloc(N * sizeof *s);
    double *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) s[i] = i, x[i] = i * 0.5;
    const void *data[2] = {s, x};
    assert_int_equal(runlog_append(rl, "train", N, data, err, sizeof err), 0);
    assert_int_equal(runlog_close(rl, err, sizeof err), 0);
    free(s);
    free(x);
}

static void test_disk_full(void **state) {
    const char *mnt = path_in("small-disk");
    mkdir(mnt, 0777);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=256k") != 0) {
        printf("  SKIP: cannot mount a small tmpfs on %s (%s): needs root, as in CI's container\n",
               mnt, strerror(errno));
        rmdir(mnt);
        skip();
    }
    char args[1024], sub[256];
    // init of a model larger than the disk: errno's reason, nothing left behind
    snprintf(sub, sizeof sub, "%s/big.h5", mnt);
    snprintf(args, sizeof args, "init --set model.d_model=256 --out %s", sub);
    expect_cli(1, args, sub, "No space left on device", NULL);
    // pretrain: refused before training, the room the checkpoint needs is checked first
    snprintf(args, sizeof args, "pretrain --set model.vocab_size=%d --set model.d_model=256 --set "
             "pretrain.steps=100000 --out %s", tok_vocab_size(tokenizer_default()), sub);
    expect_cli(2, args, "No space left on device", "need about", NULL);
    // strip of a log larger than the disk (it used to segfault inside H5Ocopy)
    const char *log = path_in("big-log.h5");
    write_big_log(log);
    snprintf(sub, sizeof sub, "%s/stripped.h5", mnt);
    snprintf(args, sizeof args, "strip %s -o %s --drop train", log, sub);
    expect_cli(0, args, NULL);  // an empty copy fits
    char out[8192];
    snprintf(args, sizeof args, "strip %s -o %s/copy.h5", log, mnt);
    int rc = tu_run_cli(args, out, sizeof out);
    printf("  grpolab strip (full disk) -> exit %d: %s", rc, out);
    assert_true(rc == 1 || rc == 2);
    assert_non_null(strstr(out, "No space left on device"));
    // train: the log's writes fail; a clear error (exit 1), no crash at exit, and what was
    // flushed before stays readable
    const char *m = path_in("disk-model.h5");
    init_world_model(m);
    snprintf(args, sizeof args, "train --set train.init=%s --set train.steps=40 --set "
             "train.prompts_per_step=2 --set train.group_size=4 --set train.minibatch_size=8 --set "
             "train.eval_every=0 --set train.checkpoint_every=0 --set run.backend=cpu --out %s/run.h5",
             m, mnt);
    set_hdf5_leak_env();  // HDF5 loses the chunk cache of the log it cannot flush or close
    expect_cli(1, args, "No space left on device", NULL);
    cli_env = "";
    snprintf(args, sizeof args, "summary %s/run.h5", mnt);
    rc = tu_run_cli(args, out, sizeof out);
    printf("  grpolab summary (the log of the full disk) -> exit %d\n", rc);
    assert_true(rc == 0 || rc == 1);  // 1: not a single step was flushed
    snprintf(args, sizeof args, "%s/run.h5", mnt);
    remove(args);
    // the log's copy a failed run keeps to go on from (docs/cli.md)
    snprintf(args, sizeof args, "%s/run.h5%s", mnt, RESUME_LOG_COPY_SUFFIX);
    assert_int_equal(remove(args), 0);
    // nothing but the one finished copy is left on the disk
    DIR *dd = opendir(mnt);
    int n = 0;
    for (struct dirent *e; (e = readdir(dd));)
        if (e->d_name[0] != '.') {
            printf("  on the disk: %s\n", e->d_name);
            n++;
        }
    closedir(dd);
    assert_int_equal(n, 1);
    assert_int_equal(umount(mnt), 0);
    rmdir(mnt);
}

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/grpolab-failures-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}
static int teardown(void **state) {
    umount2(path_in("small-disk"), MNT_DETACH);  // after a failed test
    umount2(path_in("ro-disk"), MNT_DETACH);
    tu_remove_dir(dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outputs_checked_first),
        cmocka_unit_test(test_concurrent_writers),
        cmocka_unit_test(test_stdout_errors),
        cmocka_unit_test(test_eval_refuses_bad_models),
        cmocka_unit_test(test_disk_full),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_corrupt_header_quiet_exit),
        cmocka_unit_test(test_train_model_keys),
    };
    return cmocka_run_group_tests_name("failures", tests, setup, teardown);
}
