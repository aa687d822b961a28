// test_mpi.c: `grpolab train` data parallel over MPI (src/sim/parallel/dataparallel.h), run with
// mpirun on the CPU. For every preset, 3 steps over 1, 2 and 3 ranks give the rollouts of
// one process exactly (/responses lengths and rewards, token counts) and its parameters,
// optimizer state and log columns up to float summation order (the ranks sum their own rows'
// gradients and statistics, then MPI_Allreduce sums the ranks'); 1 rank equals one process
// bit for bit. A prompts_per_step the ranks cannot split is refused with one message. A rank
// killed mid-run stops the run with mpirun's message and a non-zero exit, and --resume from
// the last checkpoint then gives the uninterrupted run's log and parameters bit for bit.
// Skipped (with the reason) where grpolab is built without MPI or mpirun is missing.
#include <ctype.h>
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "sim/model/checkpoint.h"
#include "sim/io/logschema.h"
#include "sim/io/runlog.h"
#include "sim/rl/objective.h"
#include "test_util.h"
#include "tiny_policy.h"

static char dir[64], model_path[128], ini_path[128];
#define SEED 11
#define P_RUN 6  // split by 1, 2 and 3 ranks
#define STEPS 3
// Under AddressSanitizer (make test-asan) the ranks check memory errors but not leaks:
// OpenMPI's own allocations outlive MPI_Finalize, in components it has unloaded by then, which
// no suppression can name. The one-process runs keep the leak check.
#define MPIRUN "mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS " \
               "-x ASAN_OPTIONS=detect_leaks=0"
// |a - b| <= TOL * (1 + |b|) for a value of R ranks against one process; the measured
// largest errors are printed (docs/scaling.md)
#define TOL 1e-4

static const char *bin(void) {
    const char *b = getenv("GRPOLAB_BIN");
    return b ? b : "build/grpolab";
}

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/grpolab-mpi-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(model_path, sizeof model_path, "%s/tiny.h5", dir);
    snprintf(ini_path, sizeof ini_path, "%s/run.ini", dir);
    FILE *f = fopen(ini_path, "w");
    if (!f) return -1;
    // minibatches of 8 of the 24 responses: each one holds rows of several ranks
    fprintf(f, "[run]\nbackend = cpu\nseed = %d\n[train]\ninit = %s\nprompts_per_step = %d\n"
            "group_size = 4\nminibatch_size = 8\nsteps = %d\ncheckpoint_every = 1\n"
            "eval_every = 0\n[world]\nmax_new_tokens = 24\n[optim]\nlr = 3e-3\n", SEED,
            model_path, P_RUN, STEPS);
    fclose(f);
    setenv("OMP_NUM_THREADS", "1", 1);  // every process of every run: the same rounding
    return tiny_policy_save(model_path, SEED, P_RUN * STEPS);
}

static int teardown(void **state) {
    tu_remove_dir(dir);
    return 0;
}

// Runs `[mpirun -np ranks] grpolab train` (ranks 0: one process without mpirun) with the
// test's config and extra arguments; returns the exit code, the output in out.
static int train(int ranks, const char *extra, char *out, size_t cap) {
    char cmd[1024];
    char np[160] = "";
    if (ranks > 0) snprintf(np, sizeof np, MPIRUN " -np %d", ranks);
    snprintf(cmd, sizeof cmd, "%s %s train --config %s %s 2>&1", np, bin(), ini_path, extra);
    return tu_run_cmd(cmd, out, cap);
}

static void train_ok(int ranks, const char *extra) {
    static char out[1 << 16];
    int rc = train(ranks, extra, out, sizeof out);
    if (rc != 0) fail_msg("train with %d ranks (%s): exit %d:\n%s", ranks, extra, rc, out);
}

static double *column(const char *path, const char *ds, int64_t *n) {
    char err[512];
    RunLogReader *rd = runlog_reader_open(path, err, sizeof err);
    if (!rd) fail_msg("%s", err);
    double *x = runlog_read_column(rd, ds, n, err, sizeof err);
    if (!x) fail_msg("%s", err);
    runlog_reader_close(rd);
    return x;
}

// Columns whose values depend on the clock, not on the run.
static int timing(const char *col) {
    size_t n = strlen(col);
    return n > 8 && strcmp(col + n - 8, "_seconds") == 0;
}

// Columns a rollout fixes: equal bit for bit over any number of ranks.
static int rollout_column(const char *table, const char *col) {
    if (strcmp(table, "responses") == 0)
        return strcmp(col, "advantage") != 0;  // advantages too, but checked with the rest
    if (strcmp(table, "train") == 0)
        return strstr(col, "length") || strstr(col, "rate") || strcmp(col, "tokens") == 0 ||
               strcmp(col, "reward_mean") == 0 || strcmp(col, "step") == 0;
    return strcmp(col, "step") == 0;
}

// Every column of every table of the train log b against a: the same rows, rollout columns
// equal, the others within tol (tol 0: bit for bit; NaN equals NaN). Returns the largest
// |a - b| / (1 + |b|).
static double compare_logs(const char *a, const char *b, double tol) {
    double worst = 0;
    const LogKind *k = &LOG_KIND_TRAIN;
    for (int t = 0; t < k->n_always; t++) {
        const TableSpec *ts = k->tables[t];
        for (int c = 0; c < ts->n_cols; c++) {
            const char *name = ts->cols[c].spec.name;
            if (timing(name)) continue;
            char ds[128];
            snprintf(ds, sizeof ds, "%s/%s", ts->name, name);
            int64_t na, nb;
            double *x = column(a, ds, &na), *y = column(b, ds, &nb);
            if (na != nb) fail_msg("%s: %lld rows vs %lld", ds, (long long)na, (long long)nb);
            double ctol = rollout_column(ts->name, name) ? 0 : tol;
            for (int64_t i = 0; i < na; i++) {
                if (isnan(x[i]) && isnan(y[i])) continue;
                double e = fabs(x[i] - y[i]) / (1 + fabs(y[i]));
                if (!(e <= ctol)) fail_msg("%s row %lld: %.9g vs %.9g", ds, (long long)i, x[i], y[i]);
                if (e > worst) worst = e;
            }
            free(x);
            free(y);
        }
    }
    return worst;
}

// The parameters and AdamW moments of two checkpoints: the largest relative error.
static double compare_checkpoints(const char *a, const char *b) {
    char err[512];
    ModelConfig mc = tiny_policy_config();
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    Model *x = model_create(bk, &mc), *y = model_create(bk, &mc);
    if (checkpoint_load(a, x, 1, err, sizeof err) != 0) fail_msg("%s", err);
    if (checkpoint_load(b, y, 1, err, sizeof err) != 0) fail_msg("%s", err);
    assert_int_equal(model_adam_step(x), model_adam_step(y));
    size_t np = model_num_params(x);
    double e[3] = {tu_rel_err(model_params(x), model_params(y), np),
                   tu_rel_err(model_adam_m(x), model_adam_m(y), np),
                   tu_rel_err(model_adam_v(x), model_adam_v(y), np)};
    model_free(x);
    model_free(y);
    backend_destroy(bk);
    double worst = e[0];
    for (int j = 1; j < 3; j++) worst = e[j] > worst ? e[j] : worst;
    return worst;
}

static void test_ranks_equal_one_process(void **state) {
    const char *PRESETS[64];
    int n_presets = objective_preset_count();
    assert_true(n_presets > 0 && n_presets <= 64);
    for (int i = 0; i < n_presets; i++) PRESETS[i] = objective_preset_info(i, NULL)->name;
    for (int p = 0; p < n_presets; p++) {
        ObjectiveConfig knobs;
        objective_preset_info(p, &knobs);
        if (knobs.scope == SCOPE_MICRO_BATCH) {  // its normaliser is each pass's: the split is part of it
            printf("  %-8s skipped: token_mean_scope micro_batch normalises per micro-batch, and the "
                   "ranks' micro-batches are other rows than one process's (docs/scaling.md)\n",
                   PRESETS[p]);
            continue;
        }
        char extra[512], one[160], many[160], ck_one[200], ck_many[200];
        snprintf(one, sizeof one, "%s/%s_one.h5", dir, PRESETS[p]);
        snprintf(extra, sizeof extra, "--set objective.preset=%s --out %s --overwrite", PRESETS[p], one);
        train_ok(0, extra);
        int64_t n;
        double *mixed = column(one, "train/mixed_group_frac", &n);
        assert_true(mixed[0] > 0);  // the policy was updated
        free(mixed);
        for (int R = 1; R <= 3; R++) {
            snprintf(many, sizeof many, "%s/%s_%d.h5", dir, PRESETS[p], R);
            snprintf(extra, sizeof extra, "--set objective.preset=%s --out %s --overwrite",
                     PRESETS[p], many);
            train_ok(R, extra);
            snprintf(ck_one, sizeof ck_one, "%s.ckpt.h5", one);
            snprintf(ck_many, sizeof ck_many, "%s.ckpt.h5", many);
            double tol = R == 1 ? 0 : TOL;
            double e_log = compare_logs(one, many, tol), e_par = compare_checkpoints(ck_one, ck_many);
            printf("  %-8s %d rank(s): log columns max |a-b|/(1+|b|) %.3e, parameters and "
                   "moments max rel err %.3e (tol %.0e)\n", PRESETS[p], R, e_log, e_par, tol);
            fflush(stdout);
            assert_true(e_par <= tol);
        }
    }
}

static void test_uneven_split_refused(void **state) {
    char out[1 << 14], extra[256];
    snprintf(extra, sizeof extra, "--out %s/uneven.h5 --overwrite", dir);
    assert_int_equal(train(4, extra, out, sizeof out), 2);
    printf("  4 ranks, 6 prompts: %s", out);
    const char *msg = "train.prompts_per_step = 6 does not split over 4 ranks";
    char *first = strstr(out, msg);
    assert_non_null(first);
    assert_null(strstr(first + 1, msg));  // one message, not one per rank
}

// The pid of the child of parent started as MPI rank `rank`, or -1.
static pid_t rank_pid(pid_t parent, int rank) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = -1;
    char want[64];
    snprintf(want, sizeof want, "OMPI_COMM_WORLD_RANK=%d", rank);
    while (d && found < 0 && (e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        char path[300], buf[1 << 15];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        int ppid = -1;
        if (f) {
            if (fscanf(f, "%*d %*s %*c %d", &ppid) != 1) ppid = -1;
            fclose(f);
        }
        if (ppid != parent) continue;
        snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
        f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
            if (strcmp(buf + i, want) == 0) found = (pid_t)atoi(e->d_name);
    }
    if (d) closedir(d);
    return found;
}

static void test_killed_rank_stops_and_resumes(void **state) {
    enum { LONG_STEPS = 30 };
    char full[160], part[160], ckpt[200], out_path[200], extra[512];
    snprintf(full, sizeof full, "%s/kill_full.h5", dir);
    snprintf(part, sizeof part, "%s/kill_part.h5", dir);
    snprintf(ckpt, sizeof ckpt, "%s.ckpt.h5", part);
    snprintf(out_path, sizeof out_path, "%s/kill.out", dir);
    snprintf(extra, sizeof extra, "--set train.steps=%d --out %s --overwrite", LONG_STEPS, full);
    train_ok(2, extra);
    // the same run, rank 1 killed once the first checkpoint is there
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "exec " MPIRUN " -np 2 %s train --config %s --set "
                 "train.steps=%d --out %s --overwrite > %s 2>&1", bin(), ini_path, LONG_STEPS,
                 part, out_path);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    struct stat sb;
    pid_t victim = -1;
    for (int i = 0; i < 6000 && victim < 0; i++) {
        usleep(10000);
        if (stat(ckpt, &sb) == 0) victim = rank_pid(pid, 1);
        if (waitpid(pid, NULL, WNOHANG) == pid) fail_msg("the run ended before it was killed");
    }
    assert_true(victim > 0);
    kill(victim, SIGKILL);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    char out[1 << 15];
    FILE *f = fopen(out_path, "r");
    assert_non_null(f);
    out[fread(out, 1, sizeof out - 1, f)] = '\0';
    fclose(f);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    printf("  rank 1 killed: mpirun exit %d, its message: %s\n",
           rc, strstr(out, "mpirun noticed") ? strstr(out, "mpirun noticed") : "(none)");
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(out, "rank 1"));
    assert_non_null(strstr(out, "signal 9"));
    // rank 0, killed by mpirun while it wrote the log, left the log's SWMR mark: cleared as
    // the refusal to resume says, then resumed from the last checkpoint, the run is the
    // uninterrupted one bit for bit
    char ck_full[200], cmd[400];
    snprintf(extra, sizeof extra, "--set train.steps=%d --out %s --resume", LONG_STEPS, part);
    if (train(2, extra, out, sizeof out) != 0) {
        assert_non_null(strstr(out, "h5clear -s"));
        snprintf(cmd, sizeof cmd, "h5clear -s %s", part);
        assert_int_equal(system(cmd), 0);
        train_ok(2, extra);
    }
    snprintf(ck_full, sizeof ck_full, "%s.ckpt.h5", full);
    assert_true(compare_logs(full, part, 0) == 0);
    assert_true(compare_checkpoints(ck_full, ckpt) == 0);
}

int main(void) {
#ifndef GRPOLAB_MPI
    printf("test_mpi: skipped: grpolab is built without MPI (install libopenmpi-dev and "
           "openmpi-bin: scripts/deps.sh)\n");
    return 0;
#else
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("test_mpi: skipped: no mpirun on PATH (install openmpi-bin: scripts/deps.sh)\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks_equal_one_process),
        cmocka_unit_test(test_uneven_split_refused),
        cmocka_unit_test(test_killed_rank_stops_and_resumes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
#endif
}
