// test_resume.c: what `grpolab train` guarantees when a run fails or is stopped (docs/cli.md,
// "Failure behaviour"): a diverging run stops before logging a non-finite step; a refused
// --resume changes no byte of the log or the checkpoint; --overwrite removes the checkpoint of
// the run it replaces and a checkpoint of another run is refused; a run killed before its
// first checkpoint restarts from step 0; SIGTERM ends the step, checkpoints and says how to go
// on; and runs killed (SIGKILL) at random moments, or at chosen writes to their files (half
// written or not), resumed, give the log of the uninterrupted run. Every run is on one
// thread, so the resumed logs equal bit for bit (docs/kernels.md).
#include <hdf5.h>
#include <signal.h>
#include <time.h>

#include "sim/io/logschema.h"
#include "sim/rl/resume.h"
#include "spawn_util.h"
#include "train_fixture.h"

// The fixture's runs on one thread, with the CLI's arguments of base_config.
static void cli_args(char *buf, size_t len, const char *out, const char *extra) {
    snprintf(buf, len, "train --set train.init=%s --set run.backend=cpu --set run.seed=11 "
             "--set run.threads=1 --set train.prompts_per_step=2 --set train.group_size=4 "
             "--set train.minibatch_size=4 --set world.max_new_tokens=24 --set optim.lr=3e-3 "
             "--set eval.limit=2 --set eval.batch=16 %s --out %s", model_path, extra, out);
}

static Config *one_thread(const char *const *extra, int n_extra) {
    Config *c = base_config(extra, n_extra);
    char err[256];
    if (config_set(c, "run.threads=1", err, sizeof err) != 0) fail_msg("%s", err);
    return c;
}

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }


static void copy_file(const char *from, const char *to) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

// Sets the root attribute "step" of a checkpoint (an int64).
static void set_ckpt_step(const char *path, int64_t step) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t a = H5Aopen(f, "step", H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, H5T_NATIVE_INT64, &step) >= 0);
    H5Aclose(a);
    H5Fclose(f);
}

// Sets the length of one column of a log (rows cut off, as a writer killed mid-flush leaves).
static void set_column_rows(const char *path, const char *dataset, hsize_t n) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t d = H5Dopen(f, dataset, H5P_DEFAULT);
    assert_true(d >= 0);
    assert_true(H5Dset_extent(d, &n) >= 0);
    H5Dclose(d);
    H5Fclose(f);
}

// Cuts every table of a train log to its rows of the steps before keep_below: the log of a
// run killed after logging those steps.
static void cut_log(const char *path, int64_t keep_below) {
    for (int t = 0; t < LOG_KIND_TRAIN.n_always; t++) {
        const TableSpec *ts = LOG_KIND_TRAIN.tables[t];
        char ds[160];
        snprintf(ds, sizeof ds, "%s/step", ts->name);
        int64_t n = 0, k = 0;
        double *step = col(path, ds, &n);
        while (k < n && step[k] < (double)keep_below) k++;
        free(step);
        for (int c = 0; c < ts->n_cols; c++) {
            snprintf(ds, sizeof ds, "%s/%s", ts->name, ts->cols[c].spec.name);
            set_column_rows(path, ds, (hsize_t)k);
        }
    }
}



static const char KILL_RUN[] = "--set train.steps=10 --set train.checkpoint_every=4 --set train.eval_every=3";


// ---------------------------------------------------------------- a diverging run
// optim.lr = 1 with beta2 = 0 and eps = 1e-12 (each value in range) makes AdamW take steps
// of size 1 in every parameter: the run diverges within a few steps.
static void test_nan_stops_the_run(void **state) {
    char out[160], ckpt[200], args[2048], msg[8192], err[512];
    path_of(out, sizeof out, "nan.h5");
    snprintf(ckpt, sizeof ckpt, "%s.ckpt.h5", out);
    char extra[] = "--set train.steps=12 --set train.checkpoint_every=1 --set train.eval_every=0 "
                   "--set optim.lr=1 --set optim.beta2=0 --set optim.eps=1e-12";
    cli_args(args, sizeof args, out, extra);
    int rc = tu_run_cli(args, msg, sizeof msg);
    printf("  exit %d: %s", rc, strstr(msg, "grpolab: error") ? strstr(msg, "grpolab: error") : msg);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(msg, "diverged"));
    const char *at = strstr(msg, "(/train/step ");  // the step named, as the log counts
    assert_non_null(at);
    int bad_step = atoi(at + strlen("(/train/step "));
    // the log keeps the steps before, all finite; the checkpoint is the last good state
    int64_t n = 0;
    double *gn = col(out, "train/grad_norm", &n);
    assert_int_equal(n, bad_step);
    for (int64_t i = 0; i < n; i++) assert_true(isfinite(gn[i]));
    free(gn);
    if (bad_step > 0) {
        ModelConfig mc = tiny_model_config();
        Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
        Model *m = model_create(bk, &mc);
        int64_t step = -1;
        // checkpoint_load refuses a non-finite tensor
        if (checkpoint_load(ckpt, m, 1, err, sizeof err) != 0) fail_msg("%s", err);
        assert_int_equal(checkpoint_read_meta(ckpt, NULL, NULL, NULL, NULL, &step, NULL, err, sizeof err), 0);
        assert_int_equal(step, bad_step);
        model_free(m);
        backend_destroy(bk);
    } else {
        assert_false(exists(out));  // nothing logged: no log left behind
    }
    // --resume goes on from the last good state and stops at the same step, the log as before
    if (bad_step > 0) {
        strcat(args, " --resume");
        rc = tu_run_cli(args, msg, sizeof msg);
        assert_int_equal(rc, 1);
        assert_non_null(strstr(msg, "diverged"));
        assert_int_equal(rows(out, "train/step"), bad_step);
    }
}

// ---------------------------------------------------------------- refused resumes
static void test_refused_resume_changes_nothing(void **state) {
    char out[160], ckpt[200], args[2048], msg[8192];
    path_of(out, sizeof out, "refused.h5");
    snprintf(ckpt, sizeof ckpt, "%s.ckpt.h5", out);
    cli_args(args, sizeof args, out, "--set train.steps=3 --set train.checkpoint_every=1 "
             "--set train.eval_every=2");
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 0);
    strcat(args, " --resume");
    size_t nl = 0, nc = 0;
    char *log0 = tu_read_file(out, &nl), *ck0 = tu_read_file(ckpt, &nc);
    // a checkpoint whose step is beyond train.steps, or negative
    const int64_t bad_steps[] = {7, -1};
    for (int i = 0; i < 2; i++) {
        set_ckpt_step(ckpt, bad_steps[i]);
        size_t nb = 0;
        char *ck_bad = tu_read_file(ckpt, &nb);
        assert_int_equal(tu_run_cli(args, msg, sizeof msg), 2);
        printf("  checkpoint step %lld: %s", (long long)bad_steps[i], msg);
        assert_non_null(strstr(msg, "outside"));
        assert_bytes(out, log0, nl);
        assert_bytes(ckpt, ck_bad, nb);
        free(ck_bad);
    }
    set_ckpt_step(ckpt, 3);
    // a ragged /train: a column shorter than the steps before the checkpoint
    set_column_rows(out, "train/loss", 1);
    size_t nr = 0;
    char *ragged = tu_read_file(out, &nr);
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 2);
    printf("  ragged /train: %s", msg);
    assert_non_null(strstr(msg, "train/loss"));
    assert_bytes(out, ragged, nr);  // tables and stored config alike
    free(ragged);
    free(log0);
    free(ck0);
}


// The case: a seed-11 run killed after a checkpoint, then a seed-99 run with
// --overwrite killed before its first, then --resume. The old checkpoint went with its log,
// so the resume restarts the seed-99 run from step 0; a checkpoint of the seed-11 run put
// back beside the seed-99 log is refused.
static void test_overwrite_and_other_runs_checkpoint(void **state) {
    char out[160], ckpt[200], old[200], errp[200], args[2048], msg[8192];
    path_of(out, sizeof out, "over.h5");
    snprintf(ckpt, sizeof ckpt, "%s.ckpt.h5", out);
    path_of(old, sizeof old, "over_seed11.ckpt.h5");
    path_of(errp, sizeof errp, "over.err");
    const char run[] = "--set train.steps=40 --set train.checkpoint_every=2 --set train.eval_every=0";
    cli_args(args, sizeof args, out, run);
    pid_t pid = spawn_cli(args, errp);
    wait_for_file(ckpt);
    kill(pid, SIGKILL);
    wait_rc(pid);
    copy_file(ckpt, old);
    // seed 99, its first checkpoint due only after step 30
    const char run99[] = "--set train.steps=32 --set train.checkpoint_every=30 --set train.eval_every=0 "
                         "--set run.seed=99";
    char over[256];
    snprintf(over, sizeof over, "%s --overwrite", run99);
    cli_args(args, sizeof args, out, over);
    pid = spawn_cli(args, errp);
    wait_for_text(errp, "train step    2/32");  // the new run logged two steps
    kill(pid, SIGKILL);
    wait_rc(pid);
    char *err = read_text(errp);
    assert_non_null(strstr(err, "removed"));  // the seed-11 checkpoint went with its log
    free(err);
    assert_false(exists(ckpt));
    // the seed-11 checkpoint put back beside the seed-99 log: refused, nothing changed
    copy_file(old, ckpt);
    size_t nl = 0;
    char *log0 = tu_read_file(out, &nl);
    char resume[256];
    snprintf(resume, sizeof resume, "%s --resume", run99);
    cli_args(args, sizeof args, out, resume);
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 2);
    printf("  %s", msg);
    assert_non_null(strstr(msg, "belongs to another run"));
    assert_bytes(out, log0, nl);
    free(log0);
    // without it the seed-99 run restarts from step 0 and ends as an uninterrupted one
    remove(ckpt);
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "starts again from step 0"));
    char full[160];
    path_of(full, sizeof full, "over_full.h5");
    cli_args(args, sizeof args, full, run99);
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 0);
    assert_same_logs(full, out);
}

// ---------------------------------------------------------------- before the first checkpoint
static void test_resume_without_checkpoint(void **state) {
    const char *extra[] = {"train.steps=4", "train.checkpoint_every=3", "train.eval_every=2"};
    Config *c = one_thread(extra, 3);
    char full[160], killed[160], ckpt[200], msg[1024];
    path_of(full, sizeof full, "nock_full.h5");
    path_of(killed, sizeof killed, "nock_killed.h5");
    snprintf(ckpt, sizeof ckpt, "%s.ckpt.h5", killed);
    run_ok(c, full, TRAIN_NEW);
    // killed after logging steps 0 and 1, before the checkpoint of step 3
    copy_file(full, killed);
    cut_log(killed, 2);
    assert_int_equal(rows(killed, "train/step"), 2);
    assert_false(exists(ckpt));
    run_ok(c, killed, TRAIN_RESUME);
    assert_same_logs(full, killed);
    // a log that holds a step after the first checkpoint, without it: refused, unchanged
    copy_file(full, killed);
    cut_log(killed, 4);
    remove(ckpt);
    size_t n = 0;
    char *before = tu_read_file(killed, &n);
    assert_int_equal(train_run(c, NULL, killed, TRAIN_RESUME, NULL), 2);
    assert_bytes(killed, before, n);
    free(before);
    (void)msg;
    config_free(c);
}

// A config refused at the first step (a training prompt and the budget exceed the context)
// leaves no log, so the corrected run is not refused as "already exists".
static void test_failed_start_leaves_no_log(void **state) {
    const char *extra[] = {"train.eval_every=0", "world.max_new_tokens=90"};
    Config *c = one_thread(extra, 2);
    char out[160];
    path_of(out, sizeof out, "nostart.h5");
    assert_int_not_equal(train_run(c, NULL, out, TRAIN_NEW, NULL), 0);
    assert_false(exists(out));
    config_free(c);
}

// ---------------------------------------------------------------- the stored config
// A dapo run that leaves objective.eps_high to the preset trains with 0.28: its stored config
// says so, and the config it was started with compares as the same.
static void test_stored_config_says_what_was_used(void **state) {
    const char *extra[] = {"train.steps=1", "objective.preset=dapo"};
    Config *c = one_thread(extra, 2);
    char out[160], err[512], msg[1024];
    path_of(out, sizeof out, "dapo.h5");
    run_ok(c, out, TRAIN_NEW);
    RunLogReader *rd = runlog_reader_open(out, err, sizeof err);
    if (!rd) fail_msg("%s", err);
    char *text = runlog_read_attr_str(rd, "config", err, sizeof err);
    runlog_reader_close(rd);
    assert_non_null(text);
    Config *stored = config_from_stored(text, out, err, sizeof err);
    assert_non_null(stored);
    assert_true(fabs(config_float(stored, "objective.eps_high") - 0.28) < 1e-12);
    assert_true(fabs(config_float(stored, "objective.eps_low") - 0.2) < 1e-12);
    assert_int_equal(resume_compare_run_config(out, c, 0, msg, sizeof msg), 0);
    // a config that sets every knob stores its own text unchanged
    const char *grpo[] = {"train.steps=1", "objective.eps_high=0.25"};
    Config *g = one_thread(grpo, 2);
    Config *r = resume_resolved_config(g, err, sizeof err);
    char *a = config_to_ini(g), *b = config_to_ini(r);
    assert_string_equal(a, b);
    free(a);
    free(b);
    config_free(r);
    config_free(g);
    config_free(stored);
    free(text);
    config_free(c);
}

// ---------------------------------------------------------------- signals and kills
static void test_sigterm_checkpoints_and_says_how_to_go_on(void **state) {
    char full[160], out[160], errp[200], args[2048], msg[8192];
    path_of(full, sizeof full, "sig_full.h5");
    path_of(out, sizeof out, "sig.h5");
    path_of(errp, sizeof errp, "sig.err");
    // long enough to be stopped in the middle
    const char run[] = "--set train.steps=30 --set train.checkpoint_every=8 --set train.eval_every=7";
    cli_args(args, sizeof args, full, run);
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 0);
    cli_args(args, sizeof args, out, run);
    pid_t pid = spawn_cli(args, errp);
    for (int i = 0; i < 500 && try_rows(out, "train/step") < 3; i++) sleep_s(0.02);  // a few steps
    kill(pid, SIGTERM);
    int rc = wait_rc(pid);
    char *err = read_text(errp);
    if (rc == 0) {  // the machine was too slow to stop it in the middle: nothing to check
        printf("  the run ended before the signal\n");
        free(err);
        return;
    }
    printf("  exit %d; %s", rc, strstr(err, "train: stopped") ? strstr(err, "train: stopped") : err);
    assert_int_equal(rc, 143);
    assert_non_null(strstr(err, "to go on: grpolab train"));
    assert_non_null(strstr(err, "--resume"));
    free(err);
    int64_t logged = rows(out, "train/step"), step = -1;
    char e[512];
    assert_int_equal(checkpoint_read_meta(out, NULL, NULL, NULL, NULL, NULL, NULL, e, sizeof e), -1);
    char ckpt[200];
    snprintf(ckpt, sizeof ckpt, "%s.ckpt.h5", out);
    assert_int_equal(checkpoint_read_meta(ckpt, NULL, NULL, NULL, NULL, &step, NULL, e, sizeof e), 0);
    assert_int_equal(step, logged);  // the checkpoint is of the last logged step
    // going on gives the uninterrupted run's log
    cli_args(args, sizeof args, out, run);
    strcat(args, " --resume");
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 0);
    assert_same_logs(full, out);
}

// Starts the run of run_args at out again, as its user would: with --resume where the log
// exists (a run killed before its log appeared left none). Fails unless it finishes.
static void go_on(const char *out, const char *run_args) {
    char args[2048], msg[8192];
    cli_args(args, sizeof args, out, run_args);
    if (exists(out)) strcat(args, " --resume");
    int rc = tu_run_cli(args, msg, sizeof msg);
    if (rc != 0) fail_msg("going on after the kills (%s): exit %d: %s", out, rc, msg);
}

// Runs killed with SIGKILL at moments drawn with a fixed seed over the length of a whole run
// (so before the log exists, before the first checkpoint, mid-step and between), then started
// again (--resume where the log exists) until they finish: each log equals the uninterrupted
// run's. GRPOLAB_KILLS=N runs N kills instead of 4.
static void test_kills_at_random_moments(void **state) {
    char full[160], args[2048], msg[8192];
    path_of(full, sizeof full, "kill_full.h5");
    cli_args(args, sizeof args, full, KILL_RUN);
    double t0 = wall_time();
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 0);
    const double whole = wall_time() - t0;
    int kills = getenv("GRPOLAB_KILLS") ? atoi(getenv("GRPOLAB_KILLS")) : 4;
    for (int k = 0; k < kills; k++) {
        char out[160], errp[200], ckpt[200], name[64];
        snprintf(name, sizeof name, "kill%d.h5", k);
        path_of(out, sizeof out, name);
        path_of(errp, sizeof errp, "kill.err");
        snprintf(ckpt, sizeof ckpt, "%s.ckpt.h5", out);
        // two kills per run: one while it starts, one while it goes on
        for (int round = 0; round < 2; round++) {
            double at = whole * philox_uniform(1234 + k, (uint64_t)round) * (round ? 1.0 : 0.6);
            cli_args(args, sizeof args, out, KILL_RUN);
            if (exists(out)) strcat(args, " --resume");
            pid_t pid = spawn_cli(args, errp);
            sleep_s(at);
            kill(pid, SIGKILL);
            int rc = wait_rc(pid);
            int64_t logged = try_rows(out, "train/step"), step = -1;
            char e[512];
            if (exists(ckpt)) checkpoint_read_meta(ckpt, NULL, NULL, NULL, NULL, &step, NULL, e, sizeof e);
            printf("  kill %d.%d at %.2f s: exit %d, %s%lld logged steps, checkpoint %s%lld\n", k, round,
                   at, rc, logged < 0 ? "no log, " : "", (long long)(logged < 0 ? 0 : logged),
                   step < 0 ? "none " : "of step ", (long long)(step < 0 ? 0 : step));
            if (rc != 137 && rc != 0) {  // killed, or done before the kill
                char *e2 = read_text(errp);
                fail_msg("exit %d before the kill: %s", rc, e2);
            }
        }
        go_on(out, KILL_RUN);
        assert_same_logs(full, out);
    }
}


// Runs killed at the n-th write to a file (the log's, the log copies' and the checkpoints'
// writes; kill_at_write.c), for n spread evenly over the writes of a whole run, every other
// one cut half-way through the write, then started again until they finish: each log equals
// the uninterrupted run's; every third one is killed again at a write of its --resume. A kill
// in the middle of a flush is what a kill at a random moment rarely hits.
// GRPOLAB_KILL_WRITES=N tries N writes instead of 24 (0: every write).
static void test_kills_at_writes(void **state) {
    const char *lib = kill_lib();
    if (!lib) {
        printf("  skipped: build/tests/kill_at_write.so not built (run it through make test)\n");
        skip();
    }
    char full[160], args[2048], env[1024], errp[200], countp[200];
    path_of(full, sizeof full, "writes_full.h5");
    path_of(errp, sizeof errp, "writes.err");
    path_of(countp, sizeof countp, "writes.count");
    char preload[900];
    preload_env(preload, sizeof preload, lib);
    snprintf(env, sizeof env, "%s GRPOLAB_COUNT_FILE='%s'", preload, countp);
    cli_args(args, sizeof args, full, KILL_RUN);
    assert_int_equal(wait_rc(spawn_cli_env(env, args, errp)), 0);
    char *count = read_text(countp);
    long total = atol(count);
    free(count);
    assert_true(total > 50);  // a run writes its log at every step
    long tries = getenv("GRPOLAB_KILL_WRITES") ? atol(getenv("GRPOLAB_KILL_WRITES")) : 24;
    if (tries <= 0 || tries > total) tries = total;
    int torn = 0, finished = 0, again = 0;
    for (long i = 0; i < tries; i++) {
        long n = tries == total ? i + 1 : 1 + (2 * i + 1) * total / (2 * tries);
        int half = (int)(i % 2);
        char out[160], name[64];
        snprintf(name, sizeof name, "writes%ld.h5", n);
        path_of(out, sizeof out, name);
        snprintf(env, sizeof env, "%s GRPOLAB_KILL_AT=%ld GRPOLAB_KILL_HALF=%d", preload, n, half);
        cli_args(args, sizeof args, out, KILL_RUN);
        int rc = wait_rc(spawn_cli_env(env, args, errp));
        if (rc != 137 && rc != 0) {
            char *e = read_text(errp);
            fail_msg("killed at write %ld of %ld: exit %d, not 137: %s", n, total, rc, e);
        }
        finished += rc == 0;
        torn += half && rc == 137;
        if (i % 3 == 2 && rc == 137 && exists(out)) {  // killed again while it goes on
            long m = 1 + (i * 37) % (total / 2);
            snprintf(env, sizeof env, "%s GRPOLAB_KILL_AT=%ld", preload, m);
            cli_args(args, sizeof args, out, KILL_RUN);
            strcat(args, " --resume");
            rc = wait_rc(spawn_cli_env(env, args, errp));
            char *e = read_text(errp);
            if (rc != 137 && rc != 0)
                fail_msg("killed at write %ld, resumed and killed at its write %ld: exit %d: %s", n,
                         m, rc, e);
            free(e);
            again += rc == 137;
        }
        go_on(out, KILL_RUN);
        assert_same_logs(full, out);
        remove(out);
    }
    printf("  killed at %ld of the run's %ld writes (%d of them half written; %d runs ended "
           "first; %d killed again while resuming): each went on to the uninterrupted run's log\n",
           tries, total, torn, finished, again);
}

int main(void) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nan_stops_the_run),
        cmocka_unit_test(test_refused_resume_changes_nothing),
        cmocka_unit_test(test_overwrite_and_other_runs_checkpoint),
        cmocka_unit_test(test_resume_without_checkpoint),
        cmocka_unit_test(test_failed_start_leaves_no_log),
        cmocka_unit_test(test_stored_config_says_what_was_used),
        cmocka_unit_test(test_sigterm_checkpoints_and_says_how_to_go_on),
        cmocka_unit_test(test_kills_at_random_moments),
        cmocka_unit_test(test_kills_at_writes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
