// test_runlog.c: the HDF5 run log: exact round trips of every column type across buffered and
// direct writes, SWMR reading while a writer runs (in another process), resume (also after a
// writer was killed) giving the same file as a straight run, a clear error for every broken
// file and misuse, copies without a table (also of a log still being written), and the
// append speed.
#include <dirent.h>
#include <stddef.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>

#include "test_util.h"

#include "common.h"
#include "sim/io/runlog.h"

static char g_dir[64];  // mkdtemp directory holding every file of this test

static const char *tmp_path(const char *name) {
    static char buf[8][256];
    static int k = 0;
    char *p = buf[k++ % 8];
    snprintf(p, 256, "%s/%s", g_dir, name);
    return p;
}

// No HDF5 file, group, dataset or attribute id may stay open after a run log call.
static void assert_no_open_h5_ids(void) { assert_int_equal(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0); }

static void assert_contains(const char *s, const char *part) {
    if (!strstr(s, part)) fail_msg("message \"%s\"\ndoes not contain \"%s\"", s, part);
}

// ---------------------------------------------------------------- the tables used here
static const ColumnSpec TRAIN_COLS[] = {
    {"step", COL_I64, "training step (0-based)"},
    {"reward_mean", COL_F32, "mean reward over the step's responses"},
};
static const ColumnSpec TOKEN_COLS[] = {
    {"step", COL_I32, "training step of the token"},
    {"offset", COL_I64, "global token index"},
    {"weight", COL_F32, "token weight w_{i,t}"},
    {"old_logp", COL_F64, "log-probability under the sampling policy (nats)"},
};
#define N_TRAIN 2
#define N_TOKEN 4

// Values for row r (salt != 0: a different run that must be dropped on resume).
static float train_reward(int64_t step, int salt) { return (float)step * 0.25f - 1.0f / 3.0f + 100.0f * (float)salt; }
static int64_t token_offset(int64_t r) { return r * 1000003LL + 7;  }  // large but < 2^53
static float token_weight(int64_t r, int salt) { return (float)(r % 1000) * 1e-3f - 0.5f + (float)salt; }
static double token_logp(int64_t r, int salt) { return -(double)r * 1e-3 - 1.0 / 3.0 - salt; }
static int tokens_of_step(int64_t step) { return 3 + (int)(step % 4); }

static RunLog *create_ok(const char *path, int64_t train_chunk) {
    char err[512] = "";
    RunLog *rl = runlog_create(path, 0, err, sizeof err);
    if (!rl) fail_msg("%s", err);
    if (runlog_add_table(rl, "train", TRAIN_COLS, N_TRAIN, train_chunk, 0, err, sizeof err) != 0 ||
        runlog_add_table(rl, "tokens", TOKEN_COLS, N_TOKEN, 0, 1, err, sizeof err) != 0)
        fail_msg("%s", err);
    return rl;
}

// Appends steps [from, to) with one flush per step: one /train row, tokens_of_step /tokens
// rows (global token rows counted from the rows already in the table).
static int write_steps(RunLog *rl, int64_t from, int64_t to, int salt, char *err, size_t errlen) {
    for (int64_t s = from; s < to; s++) {
        float reward = train_reward(s, salt);
        const void *row[N_TRAIN] = {&s, &reward};
        if (runlog_append(rl, "train", 1, row, err, errlen) != 0) return -1;
        int n = tokens_of_step(s);
        int64_t r0 = runlog_rows(rl, "tokens");
        int32_t step[8];
        int64_t off[8];
        float w[8];
        double lp[8];
        for (int i = 0; i < n; i++) {
            step[i] = (int32_t)s;
            off[i] = token_offset(r0 + i);
            w[i] = token_weight(r0 + i, salt);
            lp[i] = token_logp(r0 + i, salt);
        }
        const void *cols[N_TOKEN] = {step, off, w, lp};
        if (runlog_append(rl, "tokens", n, cols, err, errlen) != 0) return -1;
        if (runlog_flush(rl, err, errlen) != 0) return -1;
    }
    return 0;
}

static void write_steps_ok(RunLog *rl, int64_t from, int64_t to, int salt) {
    char err[512] = "";
    if (write_steps(rl, from, to, salt, err, sizeof err) != 0) fail_msg("%s", err);
}

static void close_ok(RunLog *rl) {
    char err[512] = "";
    if (runlog_close(rl, err, sizeof err) != 0) fail_msg("%s", err);
    assert_no_open_h5_ids();
}

static RunLog *start_ok(RunLog *rl) {
    char err[512] = "";
    if (runlog_start_swmr(rl, err, sizeof err) != 0) fail_msg("%s", err);
    return rl;
}

// A straight run of steps [0, n_steps).
static void write_straight(const char *path, int64_t n_steps) {
    RunLog *rl = start_ok(create_ok(path, 16));
    write_steps_ok(rl, 0, n_steps, 0);
    close_ok(rl);
}

static double *read_col(RunLogReader *rd, const char *name, int64_t *n) {
    char err[512] = "";
    double *v = runlog_read_column(rd, name, n, err, sizeof err);
    if (!v) fail_msg("%s", err);
    return v;
}

static RunLogReader *reader_ok(const char *path) {
    char err[512] = "";
    RunLogReader *rd = runlog_reader_open(path, err, sizeof err);
    if (!rd) fail_msg("%s", err);
    return rd;
}

// Every column of /train and /tokens of a equals that of b, bit for bit.
static void assert_same_logs(const char *a, const char *b) {
    RunLogReader *ra = reader_ok(a), *rb = reader_ok(b);
    const char *names[] = {"train/step", "train/reward_mean", "tokens/step", "tokens/offset",
                           "tokens/weight", "tokens/old_logp"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int64_t na, nb;
        double *va = read_col(ra, names[i], &na), *vb = read_col(rb, names[i], &nb);
        if (na != nb) fail_msg("%s: %lld rows vs %lld", names[i], (long long)na, (long long)nb);
        if (memcmp(va, vb, (size_t)na * sizeof *va) != 0) fail_msg("%s differs", names[i]);
        printf("  %-20s %5lld rows, equal\n", names[i], (long long)na);
        free(va);
        free(vb);
    }
    runlog_reader_close(ra);
    runlog_reader_close(rb);
    assert_no_open_h5_ids();
}

// ---------------------------------------------------------------- round trip
// The "doc" attribute of dataset name of path (malloc'd), read with plain HDF5.
static char *dataset_doc(const char *path, const char *name) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t a = H5Aopen(d, "doc", H5P_DEFAULT);
    assert_true(a >= 0);
    hid_t t = H5Aget_type(a);
    assert_true(H5Tis_variable_str(t) > 0);
    char *s = NULL;
    assert_true(H5Aread(a, t, &s) >= 0);
    char *out = strdup(s);
    H5free_memory(s);
    H5Tclose(t);
    H5Aclose(a);
    H5Dclose(d);
    H5Fclose(f);
    return out;
}

// The number of filters (shuffle, deflate) on dataset name of path.
static int dataset_nfilters(const char *path, const char *name) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t p = H5Dget_create_plist(d);
    int n = H5Pget_nfilters(p);
    H5Pclose(p);
    H5Dclose(d);
    H5Fclose(f);
    return n;
}

static void test_roundtrip(void **state) {
    const char *path = tmp_path("roundtrip.h5");
    const char *config = "[rl]\nobjective = dr_grpo\nG = 8\n\n[model]\nd_model = 64   # ünïcode\n";
    char err[512] = "";
    RunLog *rl = create_ok(path, 16);
    assert_int_equal(runlog_set_attr_str(rl, "config", config, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_str(rl, "git_commit", "0123abc", err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "seed", 1234567890123LL, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_f64(rl, "lr", 1.0 / 3.0, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "seed", -42, err, sizeof err), 0);  // replaces
    start_ok(rl);

    // /train: 100 rows in 10 flushes (chunk 16: several chunks, partial ones rewritten)
    // /tokens: batches of 1, 4095, 4097, 100000 (larger than the buffer: written directly),
    // 30000 + 40000 (the second overflows the buffer), 0 rows
    const int64_t batches[] = {1, 4095, 4097, 100000, 30000, 40000, 0, 123};
    const int n_batches = (int)(sizeof batches / sizeof batches[0]);
    int64_t total = 0;
    for (int b = 0; b < n_batches; b++) total += batches[b];
    int32_t *step = malloc((size_t)total * sizeof *step);
    int64_t *off = malloc((size_t)total * sizeof *off);
    float *w = malloc((size_t)total * sizeof *w);
    double *lp = malloc((size_t)total * sizeof *lp);
    for (int64_t r = 0; r < total; r++) {
        step[r] = (int32_t)(r / 37);
        off[r] = token_offset(r);
        w[r] = token_weight(r, 0);
        lp[r] = token_logp(r, 0);
    }
    int64_t at = 0, train_rows = 0;
    for (int b = 0; b < n_batches; b++) {
        const void *cols[N_TOKEN] = {step + at, off + at, w + at, lp + at};
        assert_int_equal(runlog_append(rl, "/tokens", batches[b], cols, err, sizeof err), 0);
        at += batches[b];
        assert_int_equal(runlog_rows(rl, "tokens"), at);
        for (int k = 0; k < 10; k++, train_rows++) {
            float reward = train_reward(train_rows, 0);
            const void *row[N_TRAIN] = {&train_rows, &reward};
            if (runlog_append(rl, "train", 1, row, err, sizeof err) != 0) fail_msg("%s", err);
        }
        if (runlog_flush(rl, err, sizeof err) != 0) fail_msg("%s", err);
    }
    assert_int_equal(runlog_rows(rl, "train"), train_rows);
    assert_int_equal(runlog_rows(rl, "nope"), -1);
    close_ok(rl);

    RunLogReader *rd = reader_ok(path);
    int64_t n;
    double *v = read_col(rd, "tokens/step", &n);
    assert_int_equal(n, total);
    for (int64_t r = 0; r < n; r++) assert_true(v[r] == step[r]);
    free(v);
    v = read_col(rd, "/tokens/offset", &n);
    assert_int_equal(n, total);
    for (int64_t r = 0; r < n; r++) assert_true(v[r] == (double)off[r]);
    free(v);
    v = read_col(rd, "tokens/weight", &n);
    assert_int_equal(n, total);
    for (int64_t r = 0; r < n; r++) assert_true(v[r] == w[r]);
    free(v);
    v = read_col(rd, "tokens/old_logp", &n);
    assert_int_equal(n, total);
    for (int64_t r = 0; r < n; r++) assert_true(v[r] == lp[r]);
    free(v);
    v = read_col(rd, "train/step", &n);
    assert_int_equal(n, train_rows);
    for (int64_t r = 0; r < n; r++) assert_true(v[r] == (double)r);
    free(v);
    v = read_col(rd, "train/reward_mean", &n);
    assert_int_equal(n, train_rows);
    for (int64_t r = 0; r < n; r++) assert_true(v[r] == train_reward(r, 0));
    free(v);
    printf("  /tokens %lld rows x 4 types, /train %lld rows: exact\n", (long long)total,
           (long long)train_rows);

    assert_true(runlog_reader_has(rd, "train/reward_mean"));
    assert_true(runlog_reader_has(rd, "/tokens/old_logp"));
    assert_false(runlog_reader_has(rd, "train"));  // a group, not a dataset
    assert_false(runlog_reader_has(rd, "train/nope"));
    assert_false(runlog_reader_has(rd, "nope/step"));

    const char *want[][2] = {{"format", RUNLOG_FORMAT}, {"format_version", "1"},
                             {"config", config},         {"git_commit", "0123abc"},
                             {"seed", "-42"},            {"lr", "0.33333333333333331"},
                             {"grpolab_commit", grpolab_commit()}};
    assert_true(strlen(grpolab_commit()) > 0);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char *s = runlog_read_attr_str(rd, want[i][0], err, sizeof err);
        if (!s) fail_msg("%s", err);
        assert_string_equal(s, want[i][1]);
        free(s);
    }
    char *pid = runlog_read_attr_str(rd, "writer_pid", err, sizeof err);
    assert_non_null(pid);
    assert_int_equal(atoll(pid), getpid());
    free(pid);
    assert_null(runlog_read_attr_str(rd, "nope", err, sizeof err));
    assert_contains(err, "has no root attribute 'nope'");
    runlog_reader_close(rd);
    assert_no_open_h5_ids();

    for (int i = 0; i < N_TOKEN; i++) {
        char name[64];
        snprintf(name, sizeof name, "tokens/%s", TOKEN_COLS[i].name);
        char *doc = dataset_doc(path, name);
        assert_string_equal(doc, TOKEN_COLS[i].doc);
        free(doc);
    }
    assert_int_equal(dataset_nfilters(path, "tokens/weight"), H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0 ? 2 : 0);
    assert_int_equal(dataset_nfilters(path, "train/step"), 0);
    char *doc = dataset_doc(path, "train/reward_mean");
    assert_string_equal(doc, TRAIN_COLS[1].doc);
    free(doc);
    free(step);
    free(off);
    free(w);
    free(lp);
}

// ---------------------------------------------------------------- SWMR: a reader in another process
// The child is forked before the writer opens the file (so it shares no HDF5 file state);
// it reads whenever the parent says so and answers with the row counts it saw (-1: error).
static void reader_child(const char *path, int in, int out) {
    RunLogReader *rd = NULL;
    char cmd, err[512];
    while (read(in, &cmd, 1) == 1 && cmd == 'r') {
        int64_t ans[2] = {-1, -1};
        if (!rd) rd = runlog_reader_open(path, err, sizeof err);
        if (rd) {
            int64_t n1 = 0, n2 = 0;
            double *a = runlog_read_column(rd, "train/step", &n1, err, sizeof err);
            double *b = runlog_read_column(rd, "tokens/weight", &n2, err, sizeof err);
            int ok = a && b;
            for (int64_t r = 0; ok && r < n1; r++) ok = a[r] == (double)r;
            for (int64_t r = 0; ok && r < n2; r++) ok = b[r] == token_weight(r, 0);
            if (ok) ans[0] = n1, ans[1] = n2;
            free(a);
            free(b);
        }
        if (ans[0] < 0) fprintf(stderr, "reader child: %s\n", err);
        if (write(out, ans, sizeof ans) != sizeof ans) break;
    }
    runlog_reader_close(rd);
    _exit(0);
}

static void ask_reader(int to, int from, int64_t want_train, int64_t want_tokens) {
    char cmd = 'r';
    int64_t ans[2];
    assert_int_equal(write(to, &cmd, 1), 1);
    assert_int_equal(read(from, ans, sizeof ans), sizeof ans);
    printf("  reader process sees /train %lld rows, /tokens %lld rows (writer still open)\n",
           (long long)ans[0], (long long)ans[1]);
    assert_int_equal(ans[0], want_train);
    assert_int_equal(ans[1], want_tokens);
}

static void test_swmr_reader(void **state) {
    const char *path = tmp_path("swmr.h5");
    int p2c[2], c2p[2];
    assert_int_equal(pipe(p2c), 0);
    assert_int_equal(pipe(c2p), 0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p2c[1]);
        close(c2p[0]);
        reader_child(path, p2c[0], c2p[1]);
    }
    close(p2c[0]);
    close(c2p[1]);
    RunLog *rl = start_ok(create_ok(path, 16));
    write_steps_ok(rl, 0, 5, 0);
    int64_t tok5 = runlog_rows(rl, "tokens");
    ask_reader(p2c[1], c2p[0], 5, tok5);
    // rows appended but not flushed stay invisible; after the flush the same reader sees them
    char err[512];
    int64_t s = 5;
    float reward = train_reward(5, 0);
    const void *row[N_TRAIN] = {&s, &reward};
    assert_int_equal(runlog_append(rl, "train", 1, row, err, sizeof err), 0);
    ask_reader(p2c[1], c2p[0], 5, tok5);
    assert_int_equal(runlog_flush(rl, err, sizeof err), 0);
    ask_reader(p2c[1], c2p[0], 6, tok5);
    // many more rows, more chunks
    for (int k = 0; k < 50; k++) {
        int64_t r0 = runlog_rows(rl, "tokens");
        enum { N = 1000 };
        static int32_t st[N];
        static int64_t off[N];
        static float w[N];
        static double lp[N];
        for (int i = 0; i < N; i++) {
            st[i] = 5;
            off[i] = token_offset(r0 + i);
            w[i] = token_weight(r0 + i, 0);
            lp[i] = token_logp(r0 + i, 0);
        }
        const void *cols[N_TOKEN] = {st, off, w, lp};
        assert_int_equal(runlog_append(rl, "tokens", N, cols, err, sizeof err), 0);
    }
    assert_int_equal(runlog_flush(rl, err, sizeof err), 0);
    ask_reader(p2c[1], c2p[0], 6, tok5 + 50000);
    close_ok(rl);
    ask_reader(p2c[1], c2p[0], 6, tok5 + 50000);  // and after the writer closed
    close(p2c[1]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(c2p[0]);
}

// ---------------------------------------------------------------- resume
static RunLog *resume_ok(const char *path, int64_t keep_below) {
    char err[512] = "";
    RunLog *rl = runlog_open_resume(path, "step", keep_below, err, sizeof err);
    if (!rl) fail_msg("%s", err);
    if (runlog_add_table(rl, "tokens", TOKEN_COLS, N_TOKEN, 0, 1, err, sizeof err) != 0 ||
        runlog_add_table(rl, "train", TRAIN_COLS, N_TRAIN, 0, 0, err, sizeof err) != 0)
        fail_msg("%s", err);
    return rl;
}

static int64_t tokens_before(int64_t step) {
    int64_t n = 0;
    for (int64_t s = 0; s < step; s++) n += tokens_of_step(s);
    return n;
}

static void test_resume(void **state) {
    const char *straight = tmp_path("straight.h5"), *resumed = tmp_path("resumed.h5");
    write_straight(straight, 10);
    // the first attempt: steps 0..5 as in the straight run, then 6..9 different (salt 1)
    RunLog *rl = start_ok(create_ok(resumed, 16));
    write_steps_ok(rl, 0, 6, 0);
    write_steps_ok(rl, 6, 10, 1);
    close_ok(rl);

    rl = resume_ok(resumed, 6);
    assert_int_equal(runlog_rows(rl, "train"), 6);
    assert_int_equal(runlog_rows(rl, "tokens"), tokens_before(6));
    start_ok(rl);
    write_steps_ok(rl, 6, 10, 0);
    assert_int_equal(runlog_rows(rl, "train"), 10);
    close_ok(rl);
    assert_same_logs(resumed, straight);

    // resuming at the end (nothing dropped) and at 0 (everything dropped) work too
    rl = resume_ok(resumed, 10);
    assert_int_equal(runlog_rows(rl, "tokens"), tokens_before(10));
    close_ok(rl);
    rl = resume_ok(resumed, 0);
    assert_int_equal(runlog_rows(rl, "train"), 0);
    assert_int_equal(runlog_rows(rl, "tokens"), 0);
    start_ok(rl);
    write_steps_ok(rl, 0, 10, 0);
    close_ok(rl);
    assert_same_logs(resumed, straight);
}

// A writer killed without closing (here: _exit after some flushed steps and an unflushed one)
// leaves the file marked "open for writing": readers still read it, and resume takes it over.
static void test_resume_after_kill(void **state) {
    const char *straight = tmp_path("straight-k.h5"), *killed = tmp_path("killed.h5");
    write_straight(straight, 10);
    int go[2];
    assert_int_equal(pipe(go), 0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {  // the writer: 8 steps flushed, step 8 appended only, then it dies
        close(go[1]);
        char err[512];
        RunLog *rl = runlog_create(killed, 0, err, sizeof err);
        if (!rl || runlog_add_table(rl, "train", TRAIN_COLS, N_TRAIN, 16, 0, err, sizeof err) != 0 ||
            runlog_add_table(rl, "tokens", TOKEN_COLS, N_TOKEN, 0, 1, err, sizeof err) != 0 ||
            runlog_start_swmr(rl, err, sizeof err) != 0 || write_steps(rl, 0, 8, 0, err, sizeof err) != 0) {
            fprintf(stderr, "writer child: %s\n", err);
            _exit(1);
        }
        int64_t s = 8;
        float reward = 0;
        const void *row[N_TRAIN] = {&s, &reward};
        runlog_append(rl, "train", 1, row, err, sizeof err);
        char c;
        if (read(go[0], &c, 1) < 0) _exit(1);  // wait until the parent tried to resume
        _exit(0);
    }
    close(go[0]);
    // while the writer lives, resume refuses
    char err[512] = "";
    RunLog *rl = NULL;
    for (int tries = 0; tries < 500; tries++) {  // wait for the writer's first steps
        usleep(10000);
        RunLogReader *rd = runlog_reader_open(killed, NULL, 0);
        int64_t n = 0;
        double *v = rd ? runlog_read_column(rd, "train/step", &n, NULL, 0) : NULL;
        free(v);
        runlog_reader_close(rd);
        if (n == 8) break;
    }
    rl = runlog_open_resume(killed, "step", 5, err, sizeof err);
    assert_null(rl);
    printf("  writer alive: %s\n", err);
    assert_contains(err, killed);
    char who[64];
    snprintf(who, sizeof who, "still marked as being written by pid %d", (int)pid);
    assert_contains(err, who);
    assert_contains(err, "h5clear -s");
    assert_int_equal(write(go[1], "x", 1), 1);  // now it dies, without closing
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(go[1]);

    // readers: the 8 flushed steps
    RunLogReader *rd = reader_ok(killed);
    int64_t n;
    double *v = read_col(rd, "train/step", &n);
    assert_int_equal(n, 8);
    free(v);
    runlog_reader_close(rd);
    // resume from step 5: the dead writer's mark is cleared, steps 5.. are written again
    rl = resume_ok(killed, 5);
    assert_int_equal(runlog_rows(rl, "train"), 5);
    start_ok(rl);
    write_steps_ok(rl, 5, 10, 0);
    close_ok(rl);
    assert_same_logs(killed, straight);
}

// Mismatched tables fail with a message and leave the file as it was.
static void test_resume_mismatch(void **state) {
    const char *path = tmp_path("mismatch.h5");
    write_straight(path, 10);
    char err[512] = "";
    struct {
        const char *key;             // key column
        int drop_train_col;          // declare /train without its last column
        int extra_col;               // declare /train with a column the file lacks
        int wrong_type;              // declare reward_mean as float64
        int skip_tokens;             // do not declare /tokens (fails at start_swmr)
        int extra_table;             // declare a table the file lacks
        const char *expect;
    } cases[] = {
        {"step", 1, 0, 0, 0, 0, "table /train has column 'reward_mean', which this run does not log"},
        {"step", 0, 1, 0, 0, 0, "table /train has no column 'kl', which this run logs"},
        {"step", 0, 0, 1, 0, 0, "column /train/reward_mean is float32 in the file, this run logs float64"},
        {"step", 0, 0, 0, 1, 0, "it has table /tokens, which this run does not log"},
        {"step", 0, 0, 0, 0, 1, "it has no table /eval, which this run logs"},
        {"iteration", 0, 0, 0, 0, 0, "table /tokens has no column 'iteration' (every table needs it to resume)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        RunLog *rl = runlog_open_resume(path, cases[i].key, 3, err, sizeof err);
        int r = rl ? 0 : -1;
        ColumnSpec train[3] = {TRAIN_COLS[0], TRAIN_COLS[1], {"kl", COL_F32, "KL"}};
        if (cases[i].wrong_type) train[1].type = COL_F64;
        int n_train = cases[i].drop_train_col ? 1 : cases[i].extra_col ? 3 : 2;
        if (r == 0 && !cases[i].skip_tokens)
            r = runlog_add_table(rl, "tokens", TOKEN_COLS, N_TOKEN, 0, 1, err, sizeof err);
        if (r == 0) r = runlog_add_table(rl, "train", train, n_train, 0, 0, err, sizeof err);
        if (r == 0 && cases[i].extra_table) r = runlog_add_table(rl, "eval", train, 2, 0, 0, err, sizeof err);
        if (r == 0) r = runlog_start_swmr(rl, err, sizeof err);
        assert_int_equal(r, -1);
        printf("  %s\n", err);
        assert_contains(err, path);
        assert_contains(err, cases[i].expect);
        runlog_close(rl, NULL, 0);
        assert_no_open_h5_ids();
    }
    // a key column that is not an integer
    const char *fkey = tmp_path("floatkey.h5");
    RunLog *rl = runlog_create(fkey, 0, err, sizeof err);
    ColumnSpec fcol[1] = {{"step", COL_F64, "step as a float"}};
    assert_int_equal(runlog_add_table(rl, "t", fcol, 1, 0, 0, err, sizeof err), 0);
    close_ok(rl);
    assert_null(runlog_open_resume(fkey, "step", 3, err, sizeof err));
    printf("  %s\n", err);
    assert_contains(err, "key column /t/step is float64, expected an integer column");
    assert_no_open_h5_ids();

    // untouched: still 10 steps
    RunLogReader *rd = reader_ok(path);
    int64_t n;
    free(read_col(rd, "train/step", &n));
    assert_int_equal(n, 10);
    free(read_col(rd, "tokens/old_logp", &n));
    assert_int_equal(n, tokens_before(10));
    runlog_reader_close(rd);
}

// ---------------------------------------------------------------- errors
static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void expect_reader_error(const char *path, const char *part1, const char *part2) {
    char err[512] = "";
    RunLogReader *rd = runlog_reader_open(path, err, sizeof err);
    assert_null(rd);
    printf("  %s\n", err);
    assert_contains(err, path);
    assert_contains(err, part1);
    if (part2) assert_contains(err, part2);
    assert_no_open_h5_ids();
}

// A plain HDF5 file with optional format attributes and a 2-D dataset /t/m.
static void write_foreign_h5(const char *path, const char *format, int version) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t s = H5Screate(H5S_SCALAR);
    if (format) {
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, H5T_VARIABLE);
        hid_t a = H5Acreate2(f, "format", t, s, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, t, &format);
        H5Aclose(a);
        H5Tclose(t);
        a = H5Acreate2(f, "format_version", H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT, &version);
        H5Aclose(a);
    }
    hid_t g = H5Gcreate2(f, "t", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[2] = {3, 4};
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t d = H5Dcreate2(g, "m", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    float x[12] = {0};
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x);
    H5Dclose(d);
    H5Sclose(sp);
    H5Gclose(g);
    H5Sclose(s);
    H5Fclose(f);
}

static void test_reader_errors(void **state) {
    expect_reader_error(tmp_path("missing.h5"), "file does not exist", NULL);
    expect_reader_error(g_dir, "it is a directory", NULL);
    const char *text = tmp_path("text.h5");
    write_file(text, "step,reward\n0,1.0\n", 18);
    expect_reader_error(text, "not an HDF5 file", NULL);

    // truncated: a good log cut to half its size, and to its first 100 bytes
    const char *good = tmp_path("good.h5");
    write_straight(good, 200);
    struct stat st;
    assert_int_equal(stat(good, &st), 0);
    FILE *f = fopen(good, "rb");
    char *bytes = malloc((size_t)st.st_size);
    assert_int_equal(fread(bytes, 1, (size_t)st.st_size, f), (size_t)st.st_size);
    fclose(f);
    const char *half = tmp_path("half.h5"), *head = tmp_path("head.h5");
    write_file(half, bytes, (size_t)st.st_size / 2);
    write_file(head, bytes, 100);
    free(bytes);
    expect_reader_error(half, "truncated or corrupt", NULL);
    expect_reader_error(head, "truncated", NULL);

    const char *plain = tmp_path("plain.h5");
    write_foreign_h5(plain, NULL, 0);
    expect_reader_error(plain, "is not a grpolab run log (root attribute 'format' is missing; expected \"grpolab-runlog\")", NULL);
    write_foreign_h5(plain, "grpolab-checkpoint", 1);
    expect_reader_error(plain, "is not a grpolab run log (root attribute 'format' is \"grpolab-checkpoint\"", NULL);
    write_foreign_h5(plain, RUNLOG_FORMAT, 2);
    expect_reader_error(plain, "has format_version 2", "reads version 1");

    // datasets: missing table, missing column, a group, rank 2
    write_foreign_h5(plain, RUNLOG_FORMAT, 1);
    RunLogReader *rd = reader_ok(good);
    char err[512];
    int64_t n = -7;
    assert_null(runlog_read_column(rd, "trian/step", &n, err, sizeof err));
    printf("  %s\n", err);
    assert_contains(err, "has no table '/trian' (tables: tokens, train)");
    assert_null(runlog_read_column(rd, "train/reward", &n, err, sizeof err));
    printf("  %s\n", err);
    assert_contains(err, "table '/train' has no column 'reward' (columns: reward_mean, step)");
    assert_null(runlog_read_column(rd, "train", &n, err, sizeof err));
    assert_contains(err, "'/train' is a group, not a dataset");
    assert_null(runlog_read_column(rd, "train/step/x", &n, err, sizeof err));
    assert_contains(err, "'/train/step' is not a table");
    assert_int_equal(n, -7);
    runlog_reader_close(rd);
    rd = reader_ok(plain);
    assert_null(runlog_read_column(rd, "t/m", &n, err, sizeof err));
    printf("  %s\n", err);
    assert_contains(err, "dataset '/t/m' has rank 2, expected a 1-D column");
    runlog_reader_close(rd);
    assert_no_open_h5_ids();
}

static void test_writer_errors(void **state) {
    char err[512] = "";
    const char *path = tmp_path("exists.h5");
    write_straight(path, 3);
    struct stat before, after;
    assert_int_equal(stat(path, &before), 0);
    assert_null(runlog_create(path, 0, err, sizeof err));
    printf("  %s\n", err);
    assert_contains(err, path);
    assert_contains(err, "already exists");
    assert_int_equal(stat(path, &after), 0);
    assert_int_equal(before.st_size, after.st_size);
    assert_null(runlog_create(g_dir, 1, err, sizeof err));
    assert_contains(err, "it is a directory");
    assert_null(runlog_create("/nonexistent-dir-grpolab/x.h5", 0, err, sizeof err));
    assert_contains(err, "directory '/nonexistent-dir-grpolab' does not exist");
    assert_null(runlog_open_resume(tmp_path("nope.h5"), "step", 0, err, sizeof err));
    assert_contains(err, "file does not exist");

    // misuse of the API
    RunLog *rl = runlog_create(path, 1, err, sizeof err);  // overwrite: the caller decided
    assert_non_null(rl);
    int64_t s = 0;
    float x = 0;
    const void *row[N_TRAIN] = {&s, &x};
    ColumnSpec nodoc[1] = {{"a", COL_F32, ""}};
    ColumnSpec twice[2] = {{"a", COL_F32, "a"}, {"a", COL_F64, "b"}};
    ColumnSpec slash[1] = {{"a/b", COL_F32, "a"}};
    assert_int_equal(runlog_add_table(rl, "t", nodoc, 1, 0, 0, err, sizeof err), -1);
    assert_contains(err, "column /t/a has no doc");
    assert_int_equal(runlog_add_table(rl, "t", twice, 2, 0, 0, err, sizeof err), -1);
    assert_contains(err, "declares column 'a' twice");
    assert_int_equal(runlog_add_table(rl, "t", slash, 1, 0, 0, err, sizeof err), -1);
    assert_contains(err, "invalid name 'a/b'");
    assert_int_equal(runlog_add_table(rl, "a/b", TRAIN_COLS, N_TRAIN, 0, 0, err, sizeof err), -1);
    assert_contains(err, "invalid table name 'a/b'");
    assert_int_equal(runlog_add_table(rl, "t", TRAIN_COLS, N_TRAIN, -1, 0, err, sizeof err), -1);
    assert_contains(err, "chunk_rows = -1");
    assert_int_equal(runlog_add_table(rl, "t", TRAIN_COLS, N_TRAIN, 0, 2, err, sizeof err), -1);
    assert_contains(err, "compress = 2");
    assert_int_equal(runlog_add_table(rl, "train", TRAIN_COLS, N_TRAIN, 0, 0, err, sizeof err), 0);
    assert_int_equal(runlog_add_table(rl, "train", TRAIN_COLS, N_TRAIN, 0, 0, err, sizeof err), -1);
    assert_contains(err, "table /train is declared twice");
    assert_int_equal(runlog_set_attr_str(rl, "format", "x", err, sizeof err), -1);
    assert_contains(err, "reserved");
    assert_int_equal(runlog_append(rl, "train", 1, row, err, sizeof err), -1);
    assert_contains(err, "cannot append before runlog_start_swmr");
    start_ok(rl);
    assert_int_equal(runlog_start_swmr(rl, err, sizeof err), -1);
    assert_int_equal(runlog_set_attr_i64(rl, "seed", 1, err, sizeof err), -1);
    assert_contains(err, "after runlog_start_swmr");
    assert_int_equal(runlog_add_table(rl, "eval", TRAIN_COLS, N_TRAIN, 0, 0, err, sizeof err), -1);
    assert_contains(err, "after runlog_start_swmr");
    assert_int_equal(runlog_append(rl, "eval", 1, row, err, sizeof err), -1);
    assert_contains(err, "cannot append to table /eval: it was not declared");
    assert_int_equal(runlog_append(rl, "train", -1, row, err, sizeof err), -1);
    const void *half[N_TRAIN] = {&s, NULL};
    assert_int_equal(runlog_append(rl, "train", 1, half, err, sizeof err), -1);
    assert_contains(err, "no data for column 'reward_mean'");
    assert_int_equal(runlog_append(rl, "train", 1, row, err, sizeof err), 0);
    close_ok(rl);
    RunLogReader *rd = reader_ok(path);
    int64_t n;
    free(read_col(rd, "train/step", &n));
    assert_int_equal(n, 1);
    assert_int_equal(runlog_reader_has(rd, "tokens/step"), 0);  // the old file was replaced
    runlog_reader_close(rd);
    assert_no_open_h5_ids();
}

// ---------------------------------------------------------------- rows appended by name
typedef struct {
    int32_t a;
    double b;
    float c;
    int64_t d;
} Row;  // the columns are declared in another order than the fields: names decide, not positions
static const TableColumn ROW_COLS[] = {
    {{"d", COL_I64, "int64 field"}, "", offsetof(Row, d)},
    {{"b", COL_F64, "double field"}, "s", offsetof(Row, b)},
    {{"a", COL_I32, "int32 field"}, "", offsetof(Row, a)},
    {{"c", COL_F32, "float field"}, "", offsetof(Row, c)},
};
static const TableSpec ROW_TABLE = {"rows", "one row per record", ROW_COLS, 4, ROW_STRUCT, sizeof(Row), 0, 0};
typedef struct {
    const int32_t *a;
    const double *b;
} Cols;
static const TableColumn PTR_COLS[] = {
    {{"b", COL_F64, "double column"}, "", offsetof(Cols, b)},
    {{"a", COL_I32, "int32 column"}, "", offsetof(Cols, a)},
};
static const TableSpec PTR_TABLE = {"cols", "one row per value", PTR_COLS, 2, ROW_POINTERS, sizeof(Cols), 0, 1};

static void expect_declare_error(const TableSpec *t, const char *part) {
    char err[512] = "";
    RunLog *rl = runlog_create(tmp_path("layout.h5"), 1, err, sizeof err);
    assert_non_null(rl);
    assert_int_equal(runlog_declare(rl, t, err, sizeof err), -1);
    printf("  %s\n", err);
    assert_contains(err, part);
    close_ok(rl);
}

static void test_rows_by_name(void **state) {
    const char *path = tmp_path("rows.h5");
    char err[512] = "";
    RunLog *rl = runlog_create(path, 0, err, sizeof err);
    assert_non_null(rl);
    assert_int_equal(runlog_declare(rl, &ROW_TABLE, err, sizeof err), 0);
    assert_int_equal(runlog_declare(rl, &PTR_TABLE, err, sizeof err), 0);
    assert_int_equal(runlog_add_table(rl, "plain", TRAIN_COLS, N_TRAIN, 0, 0, err, sizeof err), 0);
    start_ok(rl);
    enum { N = 300, NP = 70000 };  // NP: more than a buffer, written straight
    Row *rows = calloc(N, sizeof *rows);
    for (int i = 0; i < N; i++) rows[i] = (Row){.a = i, .b = i + 0.25, .c = -0.5f * (float)i, .d = 3LL * i + (1LL << 40)};
    assert_int_equal(runlog_append_rows(rl, &ROW_TABLE, 1, rows, err, sizeof err), 0);
    assert_int_equal(runlog_append_rows(rl, &ROW_TABLE, N - 1, rows + 1, err, sizeof err), 0);
    assert_int_equal(runlog_append_rows(rl, &ROW_TABLE, 0, NULL, err, sizeof err), 0);
    int32_t *pa = malloc(NP * sizeof *pa);
    double *pb = malloc(NP * sizeof *pb);
    for (int i = 0; i < NP; i++) pa[i] = 7 * i, pb[i] = i / 3.0;
    Cols cols = {.a = pa, .b = pb};
    assert_int_equal(runlog_append_columns(rl, &PTR_TABLE, NP, &cols, err, sizeof err), 0);
    // misuse: the other layout, a table declared without a spec, another spec of the same name
    assert_int_equal(runlog_append_columns(rl, &ROW_TABLE, 1, &cols, err, sizeof err), -1);
    assert_contains(err, "append with runlog_append_rows");
    assert_int_equal(runlog_append_rows(rl, &PTR_TABLE, 1, rows, err, sizeof err), -1);
    assert_contains(err, "append with runlog_append_columns");
    static const TableColumn PLAIN_COLS[] = {{{"step", COL_I64, "s"}, "", 0}, {{"reward_mean", COL_F32, "r"}, "", 8}};
    TableSpec plain = {"plain", "", PLAIN_COLS, N_TRAIN, ROW_STRUCT, 16, 0, 0};
    assert_int_equal(runlog_append_rows(rl, &plain, 1, rows, err, sizeof err), -1);
    assert_contains(err, "not declared with this spec");
    assert_int_equal(runlog_append_rows(rl, &ROW_TABLE, 1, NULL, err, sizeof err), -1);
    assert_contains(err, "no rows");
    close_ok(rl);

    RunLogReader *rd = reader_ok(path);
    int64_t n;
    double *a = read_col(rd, "rows/a", &n), *b = read_col(rd, "rows/b", &n), *c = read_col(rd, "rows/c", &n);
    double *d = read_col(rd, "rows/d", &n);
    assert_int_equal(n, N);
    for (int i = 0; i < N; i++) {
        assert_true(a[i] == i && b[i] == i + 0.25 && c[i] == -0.5 * i);
        assert_true(d[i] == (double)(3LL * i + (1LL << 40)));
    }
    double *ca = read_col(rd, "cols/a", &n), *cb = read_col(rd, "cols/b", &n);
    assert_int_equal(n, NP);
    for (int i = 0; i < NP; i++) assert_true(ca[i] == 7.0 * i && cb[i] == i / 3.0);
    free(a), free(b), free(c), free(d), free(ca), free(cb), free(rows), free(pa), free(pb);
    runlog_reader_close(rd);
    assert_no_open_h5_ids();

    // layouts that would put a value into the wrong column, or outside the row
    TableColumn overlap[2] = {{{"x", COL_F64, "x"}, "", 0}, {{"y", COL_I32, "y"}, "", 4}};
    expect_declare_error(&(TableSpec){"t", "", overlap, 2, ROW_STRUCT, 16, 0, 0}, "overlap in the row");
    TableColumn outside[1] = {{{"x", COL_F64, "x"}, "", 8}};
    expect_declare_error(&(TableSpec){"t", "", outside, 1, ROW_STRUCT, 12, 0, 0}, "of a row of 12 bytes");
    TableColumn unaligned[1] = {{{"x", COL_F32, "x"}, "", 2}};
    expect_declare_error(&(TableSpec){"t", "", unaligned, 1, ROW_STRUCT, 8, 0, 0}, "aligned to 4");
    TableColumn ptr_same[2] = {{{"x", COL_I32, "x"}, "", 0}, {{"y", COL_I32, "y"}, "", 0}};
    expect_declare_error(&(TableSpec){"t", "", ptr_same, 2, ROW_POINTERS, 8, 0, 0}, "overlap in the row");
    expect_declare_error(&(TableSpec){"t", "", ptr_same, 2, (RowLayout)7, 16, 0, 0}, "invalid row layout");
    TableColumn nodoc[1] = {{{"x", COL_I32, ""}, "", 0}};
    expect_declare_error(&(TableSpec){"t", "", nodoc, 1, ROW_STRUCT, 4, 0, 0}, "has no doc");
}

// ---------------------------------------------------------------- speed (printed, not asserted)
static void test_append_speed(void **state) {
    const char *path = tmp_path("speed.h5");
    static const ColumnSpec cols[] = {
        {"response", COL_I32, "row of the token's response in /responses"},
        {"token_id", COL_I32, "generated token id"},
        {"weight", COL_F32, "token weight w_{i,t}"},
    };
    char err[512] = "";
    RunLog *rl = runlog_create(path, 0, err, sizeof err);
    assert_non_null(rl);
    assert_int_equal(runlog_add_table(rl, "tokens", cols, 3, 0, 1, err, sizeof err), 0);
    start_ok(rl);
    enum { BATCH = 5000, TOTAL = 2000000 };
    int32_t *resp = malloc(BATCH * sizeof *resp), *tok = malloc(BATCH * sizeof *tok);
    float *w = malloc(BATCH * sizeof *w);
    double t0 = wall_time();
    for (int64_t at = 0; at < TOTAL; at += BATCH) {
        for (int i = 0; i < BATCH; i++) {
            int64_t r = at + i;
            resp[i] = (int32_t)(r / 300);  // responses of 300 tokens
            tok[i] = (int32_t)(philox_uniform(7, (uint64_t)r) * 4096.0f);
            w[i] = 1.0f / (float)(1 + (r / 300) % 512);
        }
        const void *data[3] = {resp, tok, w};
        if (runlog_append(rl, "tokens", BATCH, data, err, sizeof err) != 0 ||
            runlog_flush(rl, err, sizeof err) != 0)
            fail_msg("%s", err);
    }
    close_ok(rl);
    double dt = wall_time() - t0;
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    printf("  %d rows x 3 columns in batches of %d, one flush per batch: %.3f s, %.2f M rows/s; "
           "file %.2f MB (%.2f bytes/row, raw 12)\n", TOTAL, BATCH, dt, TOTAL / dt / 1e6,
           (double)st.st_size / 1e6, (double)st.st_size / TOTAL);
    RunLogReader *rd = reader_ok(path);
    int64_t n;
    t0 = wall_time();
    double *v = read_col(rd, "tokens/weight", &n);
    printf("  read back one column (%lld rows) in %.3f s\n", (long long)n, wall_time() - t0);
    assert_int_equal(n, TOTAL);
    assert_true(v[TOTAL - 1] == 1.0f / (float)(1 + ((TOTAL - 1) / 300) % 512));
    free(v);
    runlog_reader_close(rd);
    free(resp);
    free(tok);
    free(w);
}

// ---------------------------------------------------------------- copy without a table
// No leftover "<dst>.tmp-PID" file in the test directory.
static void assert_no_tmp_files(void) {
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp-")) fail_msg("leftover temporary file %s/%s", g_dir, e->d_name);
    closedir(d);
}

static void assert_column_equal(const char *a, const char *b, const char *name) {
    RunLogReader *ra = reader_ok(a), *rb = reader_ok(b);
    int64_t na, nb;
    double *va = read_col(ra, name, &na), *vb = read_col(rb, name, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(va, vb, (size_t)na * sizeof *va);
    free(va);
    free(vb);
    runlog_reader_close(ra);
    runlog_reader_close(rb);
}

static char *attr_ok(const char *path, const char *name) {
    RunLogReader *rd = reader_ok(path);
    char err[512] = "";
    char *v = runlog_read_attr_str(rd, name, err, sizeof err);
    if (!v) fail_msg("%s", err);
    runlog_reader_close(rd);
    return v;
}

static void test_copy(void **state) {
    // own copies: tmp_path's buffers are reused after eight calls
    char src[256], dst[256], dst2[256], other[256], missing[256], nodir[256], text[256];
    snprintf(src, sizeof src, "%s", tmp_path("copy-src.h5"));
    snprintf(dst, sizeof dst, "%s", tmp_path("copy-dst.h5"));
    snprintf(dst2, sizeof dst2, "%s", tmp_path("copy-dst2.h5"));
    snprintf(other, sizeof other, "%s", tmp_path("copy-x.h5"));
    snprintf(missing, sizeof missing, "%s", tmp_path("no-such.h5"));
    snprintf(nodir, sizeof nodir, "%s", tmp_path("no-dir/x.h5"));
    snprintf(text, sizeof text, "%s", tmp_path("copy-text.h5"));
    char err[512] = "";
    RunLog *rl = create_ok(src, 16);
    assert_int_equal(runlog_set_attr_str(rl, "config", "[run]\nseed = 7\n", err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_i64(rl, "seed", -1234567890123LL, err, sizeof err), 0);
    assert_int_equal(runlog_set_attr_f64(rl, "lr", 1.0 / 3.0, err, sizeof err), 0);
    start_ok(rl);
    write_steps_ok(rl, 0, 10, 0);
    close_ok(rl);

    const char *tokens[] = {"tokens"};
    if (runlog_copy(src, dst, tokens, 1, 0, err, sizeof err) != 0) fail_msg("%s", err);
    assert_no_open_h5_ids();
    assert_no_tmp_files();
    RunLogReader *rd = reader_ok(dst);  // a run log like any other
    assert_true(runlog_reader_has(rd, "train/step"));
    assert_false(runlog_reader_has(rd, "tokens/weight"));
    runlog_reader_close(rd);
    assert_column_equal(src, dst, "train/step");
    assert_column_equal(src, dst, "train/reward_mean");
    const char *attrs[] = {"format", "format_version", "grpolab_version", "config", "seed", "lr"};
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        char *a = attr_ok(src, attrs[i]), *b = attr_ok(dst, attrs[i]);
        printf("  attribute %-16s %s\n", attrs[i], b ? b : "(missing)");
        assert_string_equal(a, b);
        free(a);
        free(b);
    }
    char *da = dataset_doc(src, "/train/reward_mean"), *db = dataset_doc(dst, "/train/reward_mean");
    assert_string_equal(da, db);
    free(da);
    free(db);

    // leaving out another table keeps the compressed one as it was (filters too)
    const char *train[] = {"train"};
    if (runlog_copy(src, dst2, train, 1, 0, err, sizeof err) != 0) fail_msg("%s", err);
    assert_column_equal(src, dst2, "tokens/weight");
    assert_column_equal(src, dst2, "tokens/old_logp");
    assert_int_equal(dataset_nfilters(dst2, "/tokens/weight"), dataset_nfilters(src, "/tokens/weight"));

    // errors: each leaves dst as it was and no temporary file behind
    struct {
        const char *src, *dst, *drop;
        int overwrite;
        const char *want;
    } bad[] = {
        {src, dst, "tokens", 0, "already exists"},
        {src, src, "tokens", 1, "onto itself"},
        {src, other, "nope", 0, "has no table '/nope' to leave out (tables: tokens, train)"},
        {dst, other, "tokens", 0, "has no table '/tokens'"},
        {missing, other, "tokens", 0, "file does not exist"},
        {src, nodir, "tokens", 0, "does not exist (create it first)"},
        {src, g_dir, "tokens", 1, "it is a directory"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *drop[] = {bad[i].drop};
        err[0] = '\0';
        assert_int_equal(runlog_copy(bad[i].src, bad[i].dst, drop, 1, bad[i].overwrite, err, sizeof err), -1);
        printf("  %s\n", err);
        assert_contains(err, bad[i].want);
        assert_no_open_h5_ids();
        assert_no_tmp_files();
    }
    struct stat st;
    assert_int_not_equal(stat(other, &st), 0);
    assert_column_equal(src, dst, "train/reward_mean");  // dst and src unchanged
    rd = reader_ok(src);
    assert_true(runlog_reader_has(rd, "tokens/weight"));
    runlog_reader_close(rd);
    // a file that is not a run log
    FILE *f = fopen(text, "w");
    assert_non_null(f);
    fputs("not hdf5\n", f);
    fclose(f);
    assert_int_equal(runlog_copy(text, other, tokens, 1, 0, err, sizeof err), -1);
    assert_contains(err, "not an HDF5 file");
    // with overwrite an existing file is replaced
    if (runlog_copy(src, dst2, tokens, 1, 1, err, sizeof err) != 0) fail_msg("%s", err);
    rd = reader_ok(dst2);
    assert_true(runlog_reader_has(rd, "train/step"));
    assert_false(runlog_reader_has(rd, "tokens/weight"));
    runlog_reader_close(rd);
    assert_no_tmp_files();
}

// A log still being written (in this process, SWMR) is copied by another process up to its
// last flush; the writer goes on unharmed.
static void test_copy_while_written(void **state) {
    const char *src = tmp_path("copy-live.h5"), *dst = tmp_path("copy-live-dst.h5");
    int go[2];
    assert_int_equal(pipe(go), 0);
    fflush(stdout);
    pid_t pid = fork();  // before the writer opens the file: the child shares no HDF5 state
    assert_true(pid >= 0);
    if (pid == 0) {
        close(go[1]);
        char c, err[512];
        if (read(go[0], &c, 1) != 1) _exit(3);
        const char *tokens[] = {"tokens"};
        int r = runlog_copy(src, dst, tokens, 1, 0, err, sizeof err);
        if (r != 0) fprintf(stderr, "copy child: %s\n", err);
        _exit(r == 0 ? 0 : 1);
    }
    close(go[0]);
    RunLog *rl = start_ok(create_ok(src, 16));
    write_steps_ok(rl, 0, 6, 0);
    char err[512];  // one more row appended but not flushed: not in the copy
    int64_t s = 6;
    float reward = train_reward(6, 0);
    const void *row[N_TRAIN] = {&s, &reward};
    assert_int_equal(runlog_append(rl, "train", 1, row, err, sizeof err), 0);
    assert_int_equal(write(go[1], "x", 1), 1);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(go[1]);
    assert_int_equal(runlog_flush(rl, err, sizeof err), 0);
    write_steps_ok(rl, 7, 10, 0);
    close_ok(rl);
    RunLogReader *rd = reader_ok(dst);
    int64_t n;
    double *v = read_col(rd, "train/step", &n);
    printf("  copy of the log being written: /train %lld rows (writer at 6 flushed, 7 appended)\n", (long long)n);
    assert_int_equal(n, 6);
    for (int64_t r = 0; r < n; r++) assert_true(v[r] == (double)r);
    free(v);
    assert_false(runlog_reader_has(rd, "tokens/weight"));
    runlog_reader_close(rd);
    rd = reader_ok(src);  // and the writer's log is whole
    v = read_col(rd, "train/step", &n);
    assert_int_equal(n, 10);
    free(v);
    runlog_reader_close(rd);
}

// ---------------------------------------------------------------- setup
static int setup(void **state) {
    snprintf(g_dir, sizeof g_dir, "/tmp/grpolab-runlog-XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    tu_remove_dir(g_dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_swmr_reader),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_resume_after_kill),
        cmocka_unit_test(test_resume_mismatch),
        cmocka_unit_test(test_reader_errors),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_rows_by_name),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_copy_while_written),
        cmocka_unit_test(test_append_speed),
    };
    return cmocka_run_group_tests_name("runlog", tests, setup, teardown);
}
