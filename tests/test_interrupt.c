// test_interrupt.c: `grpolab pretrain` and `grpolab eval` stopped from outside (docs/cli.md,
// "Failure behaviour"). A pretraining stopped by SIGTERM or SIGINT checkpoints and says how
// to go on; killed (SIGKILL) at moments over its whole length, at chosen writes of its files
// (half written or not), or stopped by a full disk, it goes on with --resume to the model of
// the uninterrupted run, bit for bit (one thread); a checkpoint of another config is refused.
// An evaluation stopped by a signal keeps the questions done in its --out file, and --resume
// completes it to the uninterrupted evaluation's file and table. A train run stopped in the
// middle of a periodic evaluation goes on to the uninterrupted run's log.
#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "sim/model/checkpoint.h"
#include "sim/io/logschema.h"
#include "sim/rl/resume.h"
#include "spawn_util.h"
#include "train_fixture.h"

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

// ---------------------------------------------------------------- pretraining
// A tiny pretraining of 80 steps on one thread, a checkpoint every 10 steps.
static void pretrain_args(char *buf, size_t len, const char *out, const char *extra) {
    snprintf(buf, len, "pretrain --set model.vocab_size=58 --set model.d_model=32 --set model.n_layers=1 "
             "--set model.n_heads=2 --set model.n_kv_heads=1 --set model.d_ff=64 --set pretrain.steps=80 "
             "--set pretrain.batch_size=8 --set pretrain.micro_batch=4 --set pretrain.warmup_steps=5 "
             "--set pretrain.log_every=50 --set optim.lr=3e-3 --set run.backend=cpu --set run.seed=7 "
             "--set run.threads=1 --set pretrain.checkpoint_every=10 %s --out %s", extra, out);
}

static char pt_full[160];  // the uninterrupted pretraining's model
static double pt_seconds;  // and how long it took

static void pretrain_reference(void) {
    if (pt_full[0]) return;
    char args[2048], msg[4096];
    path_of(pt_full, sizeof pt_full, "pt_full.h5");
    pretrain_args(args, sizeof args, pt_full, "");
    double t0 = wall_time();
    int rc = tu_run_cli(args, msg, sizeof msg);
    if (rc != 0) fail_msg("the uninterrupted pretraining: exit %d: %s", rc, msg);
    pt_seconds = wall_time() - t0;
}

// Fails unless the model at p equals the uninterrupted pretraining's, every tensor and
// attribute (h5diff), and no checkpoint is left beside it.
static void assert_same_model(const char *p) {
    char cmd[600], ckpt[300];
    snprintf(cmd, sizeof cmd, "h5diff -q '%s' '%s' >/dev/null 2>&1", pt_full, p);
    if (system(cmd) != 0) fail_msg("%s differs from the uninterrupted pretraining's %s", p, pt_full);
    snprintf(ckpt, sizeof ckpt, "%s%s", p, RESUME_CKPT_SUFFIX);
    if (exists(ckpt)) fail_msg("%s is left after the model was written", ckpt);
}

// The step of the checkpoint at p, or -1 where there is none (or it does not read).
static int64_t ckpt_step(const char *p) {
    int64_t step = -1;
    char e[512];
    if (exists(p) && checkpoint_read_meta(p, NULL, NULL, NULL, NULL, &step, NULL, e, sizeof e) != 0) step = -1;
    return step;
}

// The output named name (printf-style with k) in the test's directory, and its checkpoint.
static void out_paths(const char *name, int k, char out[160], char ckpt[200]) {
    char file[64];
    snprintf(file, sizeof file, name, k);
    path_of(out, 160, file);
    snprintf(ckpt, 200, "%s%s", out, RESUME_CKPT_SUFFIX);
}

// Starts the pretraining into out (stderr to errp) and waits for its first checkpoint ckpt.
static pid_t pretrain_until_checkpoint(const char *out, const char *ckpt, const char *errp) {
    char args[2048];
    pretrain_args(args, sizeof args, out, "");
    pid_t pid = spawn_cli(args, errp);
    wait_for_file(ckpt);
    return pid;
}

// Goes on with the pretraining into out until it ends (--resume, as its user would).
static void pretrain_go_on(const char *out) {
    char args[2048], msg[8192];
    pretrain_args(args, sizeof args, out, "--resume");
    int rc = tu_run_cli(args, msg, sizeof msg);
    if (rc != 0) fail_msg("pretrain --resume into %s: exit %d: %s", out, rc, msg);
}

// SIGTERM and SIGINT after a checkpoint: the step under way ends and is checkpointed, the
// command to go on is printed, exit 143 / 130; going on gives the uninterrupted model.
static void test_pretrain_signal(void **state) {
    pretrain_reference();
    const int sigs[2] = {SIGTERM, SIGINT};
    for (int k = 0; k < 2; k++) {
        char out[160], ckpt[200], errp[200];
        out_paths("pt_sig%d.h5", k, out, ckpt);
        path_of(errp, sizeof errp, "pt_sig.err");
        pid_t pid = pretrain_until_checkpoint(out, ckpt, errp);
        kill(pid, sigs[k]);
        int rc = wait_rc(pid);
        char *err = read_text(errp);
        printf("  signal %d -> exit %d, checkpoint of step %lld: %s", sigs[k], rc, (long long)ckpt_step(ckpt),
               strstr(err, "pretrain: stopped") ? strstr(err, "pretrain: stopped") : err);
        if (rc == 0) {  // ended before the signal came: nothing was stopped
            free(err);
            assert_same_model(out);
            continue;
        }
        assert_int_equal(rc, 128 + sigs[k]);
        assert_non_null(strstr(err, "to go on: grpolab pretrain"));
        assert_non_null(strstr(err, "--resume"));
        free(err);
        int64_t step = ckpt_step(ckpt);
        assert_true(step > 0 && step < 80);
        assert_false(exists(out));
        pretrain_go_on(out);
        assert_same_model(out);
    }
}

// SIGKILL at moments drawn with a fixed seed over the length of the whole pretraining (before
// the first checkpoint, between, during the model's write), and once more while it goes on:
// each pretraining then goes on to the uninterrupted model.
static void test_pretrain_kills(void **state) {
    pretrain_reference();
    for (int k = 0; k < 3; k++) {
        char out[160], ckpt[200], errp[200], args[2048];
        out_paths("pt_kill%d.h5", k, out, ckpt);
        path_of(errp, sizeof errp, "pt_kill.err");
        for (int round = 0; round < 2; round++) {
            // the first kill of the first run comes before any checkpoint
            double at = k == 0 && round == 0 ? 0.02 : pt_seconds * philox_uniform(4321 + k, (uint64_t)round);
            pretrain_args(args, sizeof args, out, round ? "--resume" : "");
            pid_t pid = spawn_cli(args, errp);
            sleep_s(at);
            kill(pid, SIGKILL);
            int rc = wait_rc(pid);
            printf("  kill %d.%d at %.2f s: exit %d, checkpoint %lld, model %s\n", k, round, at, rc,
                   (long long)ckpt_step(ckpt), exists(out) ? "written" : "not written");
            if (rc != 137 && rc != 0) {
                char *e = read_text(errp);
                fail_msg("exit %d before the kill: %s", rc, e);
            }
        }
        pretrain_go_on(out);
        assert_same_model(out);
    }
}

// Killed at the n-th write to a file (the checkpoints' and the model's; kill_at_write.c), n
// spread over the writes of a whole pretraining, every other one cut half-way through the
// write: the files left are whole (the checkpoint reads, or is absent), and going on gives
// the uninterrupted model.
static void test_pretrain_kills_at_writes(void **state) {
    const char *lib = kill_lib();
    if (!lib) {
        printf("  skipped: build/tests/kill_at_write.so not built (run it through make test)\n");
        skip();
    }
    pretrain_reference();
    char args[2048], env[1024], errp[200], countp[200], out[160];
    path_of(errp, sizeof errp, "pt_writes.err");
    path_of(countp, sizeof countp, "pt_writes.count");
    path_of(out, sizeof out, "pt_count.h5");
    char preload[900];
    preload_env(preload, sizeof preload, lib);
    snprintf(env, sizeof env, "%s GRPOLAB_COUNT_FILE='%s'", preload, countp);
    pretrain_args(args, sizeof args, out, "");
    assert_int_equal(wait_rc(spawn_cli_env(env, args, errp)), 0);
    char *count = read_text(countp);
    long total = atol(count);
    free(count);
    assert_true(total >= 8);  // 7 checkpoints and the model, each at least one write
    const long tries = 6;
    for (long i = 0; i < tries; i++) {
        long n = 1 + (2 * i + 1) * total / (2 * tries);
        char ckpt[200];
        out_paths("pt_writes%d.h5", (int)n, out, ckpt);
        snprintf(env, sizeof env, "%s GRPOLAB_KILL_AT=%ld GRPOLAB_KILL_HALF=%d", preload, n,
                 (int)(i % 2));
        pretrain_args(args, sizeof args, out, "");
        int rc = wait_rc(spawn_cli_env(env, args, errp));
        if (rc != 137) {
            char *e = read_text(errp);
            fail_msg("killed at write %ld of %ld: exit %d, not 137: %s", n, total, rc, e);
        }
        int64_t step = ckpt_step(ckpt);
        if (exists(ckpt) && step < 0) fail_msg("killed at write %ld: %s does not read", n, ckpt);
        pretrain_go_on(out);
        assert_same_model(out);
    }
    printf("  killed at %ld of the pretraining's %ld writes (half of them half written): each went on "
           "to the uninterrupted model\n", tries, total);
}

// A checkpoint of another config, or of a pretraining the command would discard, is refused
// and left as it was; --overwrite removes it; --resume of a finished pretraining does nothing.
static void test_pretrain_refusals(void **state) {
    pretrain_reference();
    char out[160], ckpt[200], errp[200], args[2048], msg[8192];
    out_paths("pt_refuse.h5", 0, out, ckpt);
    path_of(errp, sizeof errp, "pt_refuse.err");
    pid_t pid = pretrain_until_checkpoint(out, ckpt, errp);
    kill(pid, SIGTERM);
    int rc = wait_rc(pid);
    if (rc == 0) {
        printf("  the pretraining ended before the signal: nothing to refuse\n");
        return;
    }
    size_t n0 = 0;
    char *before = tu_read_file(ckpt, &n0);
    pretrain_args(args, sizeof args, out, "--resume --set pretrain.steps=81 --set corpus.weight_level2=0");
    rc = tu_run_cli(args, msg, sizeof msg);
    printf("  other config -> exit %d: %s", rc, msg);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(msg, "2 keys differ"));
    assert_non_null(strstr(msg, "pretrain.steps = 80 vs 81"));
    assert_non_null(strstr(msg, "corpus.weight_level2 = 1 vs 0"));
    pretrain_args(args, sizeof args, out, "--set run.threads=2");  // neither --resume nor --overwrite
    rc = tu_run_cli(args, msg, sizeof msg);
    printf("  no --resume -> exit %d: %s", rc, msg);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(msg, "--resume"));
    assert_bytes(ckpt, before, n0);
    free(before);
    pretrain_args(args, sizeof args, out, "--resume --overwrite");
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 2);
    pretrain_args(args, sizeof args, out, "--overwrite");
    rc = tu_run_cli(args, msg, sizeof msg);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(msg, "removed"));
    assert_same_model(out);
    pretrain_args(args, sizeof args, out, "--resume");
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "nothing to do"));
    pretrain_args(args, sizeof args, out, "--resume --set pretrain.steps=81");
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 2);
}

// The disk fills after the first checkpoint (the pretraining is held with SIGSTOP while a
// file takes the rest of a small tmpfs): the next checkpoint fails with errno's reason, the
// last good one is kept whole and said so, no temporary file is left; with room again,
// --resume goes on to the uninterrupted model.
static void test_pretrain_disk_full(void **state) {
    pretrain_reference();
    char mnt[160], out[200], ckpt[240], errp[200], fill[200];
    path_of(mnt, sizeof mnt, "pt-disk");
    mkdir(mnt, 0777);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=2m") != 0) {
        printf("  SKIP: cannot mount a small tmpfs on %s (%s): needs root, as in CI's container\n", mnt,
               strerror(errno));
        rmdir(mnt);
        skip();
    }
    snprintf(out, sizeof out, "%s/base.h5", mnt);
    snprintf(ckpt, sizeof ckpt, "%s%s", out, RESUME_CKPT_SUFFIX);
    snprintf(fill, sizeof fill, "%s/filler", mnt);
    path_of(errp, sizeof errp, "pt_disk.err");
    pid_t pid = pretrain_until_checkpoint(out, ckpt, errp);
    kill(pid, SIGSTOP);
    int64_t kept = ckpt_step(ckpt);
    int fd = open(fill, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    static char block[4096];
    while (write(fd, block, sizeof block) > 0) {}
    close(fd);
    kill(pid, SIGCONT);
    int rc = wait_rc(pid);
    char *err = read_text(errp);
    printf("  disk full after the checkpoint of step %lld -> exit %d: %s", (long long)kept, rc,
           strstr(err, "grpolab: error") ? strstr(err, "grpolab: error") : err);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "No space left on device"));
    assert_non_null(strstr(err, "last good checkpoint"));
    free(err);
    char tmp[260];
    snprintf(tmp, sizeof tmp, "%s.tmp", ckpt);
    assert_false(exists(tmp));
    assert_false(exists(out));
    int64_t step = ckpt_step(ckpt);
    assert_true(step >= kept && step > 0);
    unlink(fill);
    pretrain_go_on(out);
    assert_same_model(out);
    unlink(out);
    assert_int_equal(umount(mnt), 0);
    rmdir(mnt);
}

// ---------------------------------------------------------------- eval
static char eval_model[160];  // the tiny policy with the tokenizer's vocabulary, which eval needs

static void save_eval_model(void) {
    if (eval_model[0]) return;
    path_of(eval_model, sizeof eval_model, "tiny_vocab.h5");
    char err[512];
    ModelConfig mc = tiny_model_config();
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    assert_non_null(bk);
    Model *m = model_create(bk, &mc);
    assert_int_equal(checkpoint_load(model_path, m, 0, err, sizeof err), 0);
    const Tokenizer *tk = tokenizer_default();
    const char *vocab[256];
    for (int i = 0; i < tok_vocab_size(tk); i++) vocab[i] = tok_str(tk, i);
    CkptInfo info = {.vocab = vocab, .n_vocab = tok_vocab_size(tk)};
    if (checkpoint_save(eval_model, m, &info, err, sizeof err) != 0) fail_msg("%s", err);
    model_free(m);
    backend_destroy(bk);
}

// 100 questions of each of the five benchmarks and 8 of the training pool on the tiny policy,
// in batches of 4 (a signal stops it at the end of a batch).
static void eval_args(char *buf, size_t len, const char *out, const char *extra) {
    save_eval_model();
    snprintf(buf, len, "eval --model %s --backend cpu --set run.threads=1 --set eval.batch=4 --set "
             "world.max_new_tokens=24 --limit 100 --train-pool 8 %s --out %s", eval_model, extra, out);
}

// Runs grpolab with args; its stdout (the table) into out; the exit code.
static int run_stdout(const char *args, char *out, size_t cap) {
    const char *bin = getenv("GRPOLAB_BIN");
    char cmd[2600];
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", bin ? bin : "build/grpolab", args);
    return tu_run_cmd(cmd, out, cap);
}

static char *attr(const char *path, const char *name) {
    char err[512];
    RunLogReader *rd = runlog_reader_open(path, err, sizeof err);
    if (!rd) fail_msg("%s", err);
    char *v = runlog_read_attr_str(rd, name, err, sizeof err);
    if (!v) fail_msg("%s", err);
    runlog_reader_close(rd);
    return v;
}

// Two eval files hold the same responses, table and settings (every column of the eval log's
// schema, every root attribute but the writer's pid and host).
static void assert_same_eval_files(const char *a, const char *b) {
    for (int t = 0; t < LOG_KIND_EVAL.n_tables; t++) {
        const TableSpec *ts = LOG_KIND_EVAL.tables[t];
        const char *cols[32];
        for (int c = 0; c < ts->n_cols; c++) cols[c] = ts->cols[c].spec.name;
        assert_same_table(a, b, ts->name, cols, ts->n_cols);
    }
    const char *attrs[] = {"kind", "model", "template", "benchmarks", "temperature", "top_p",
                           "max_new_tokens", "world_seed", "score", "complete", "limit",
                           "train_pool", "batch", "config", "model_fingerprint"};
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) {
        char *x = attr(a, attrs[i]), *y = attr(b, attrs[i]);
        if (strcmp(x, y) != 0) fail_msg("root attribute %s: %s vs %s", attrs[i], x, y);
        free(x);
        free(y);
    }
}

static void test_eval_signal_and_resume(void **state) {
    char full[160], out[160], errp[200], args[2048], table_full[16384], table[16384], msg[8192];
    path_of(full, sizeof full, "eval_full.h5");
    path_of(out, sizeof out, "eval_part.h5");
    eval_args(args, sizeof args, full, "");
    if (run_stdout(args, table_full, sizeof table_full) != 0) {
        tu_run_cli(args, msg, sizeof msg);
        fail_msg("the uninterrupted evaluation: %s", msg);
    }
    int64_t total = 0;
    double *len = col(full, "responses/length", &total);
    int varied = 0;
    for (int64_t i = 1; i < total; i++) varied |= len[i] != len[0];
    free(len);
    assert_true(varied);  // the responses differ: their comparison below means something
    const int sigs[2] = {SIGTERM, SIGINT};
    for (int k = 0; k < 2; k++) {
        unlink(out);
        char name[32];
        snprintf(name, sizeof name, "eval%d.err", k);  // a file of its own: polled for its text
        path_of(errp, sizeof errp, name);
        eval_args(args, sizeof args, out, "");
        pid_t pid = spawn_cli(args, errp);
        wait_for_text(errp, "eval: mixed500");  // the first benchmark is done
        double t0 = wall_time();
        kill(pid, sigs[k]);
        int rc = wait_rc(pid);
        double took = wall_time() - t0;
        char *err = read_text(errp);
        printf("  signal %d -> exit %d after %.2f s: %s", sigs[k], rc, took,
               strstr(err, "eval: stopped") ? strstr(err, "eval: stopped") : err);
        if (rc == 0) {  // ended before the signal came
            free(err);
            assert_same_eval_files(full, out);
            continue;
        }
        assert_int_equal(rc, 128 + sigs[k]);
        assert_true(took < 10);
        assert_non_null(strstr(err, "to go on: grpolab eval"));
        free(err);
        char *complete = attr(out, "complete");
        assert_string_equal(complete, "0");
        free(complete);
        int64_t done = rows(out, "responses/index");
        printf("  %lld of %lld questions kept\n", (long long)done, (long long)total);
        assert_true(done > 0 && done < total);
        assert_int_equal(rows(out, "eval/n"), 0);
        // settings that differ are refused, naming them; the file is left as it was
        eval_args(args, sizeof args, out, "--resume --limit 5");
        assert_int_equal(tu_run_cli(args, msg, sizeof msg), 2);
        printf("  --limit 5: %s", msg);
        assert_non_null(strstr(msg, "limit = 100 vs 5"));
        eval_args(args, sizeof args, out, "--resume --set world.reward_rule=false_step_fails");
        assert_int_equal(tu_run_cli(args, msg, sizeof msg), 2);
        assert_non_null(strstr(msg, "world.reward_rule"));
        assert_int_equal(rows(out, "responses/index"), done);
        eval_args(args, sizeof args, out, "--resume");
        assert_int_equal(run_stdout(args, table, sizeof table), 0);
        assert_string_equal(table, table_full);
        assert_same_eval_files(full, out);
    }
    eval_args(args, sizeof args, out, "--resume");  // complete: nothing to do
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "nothing to do"));
    eval_args(args, sizeof args, out, "--resume --failure-profile experiments/base/pretrain_gaps.ini");
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 2);
    assert_non_null(strstr(msg, "--failure-profile"));
}

// ---------------------------------------------------------------- train's periodic eval
// A train run whose evaluations take most of its time (100 questions of each benchmark),
// stopped by SIGTERM once step 1 is logged, in the evaluation at step 2: it stops there,
// checkpoints and keeps the responses done beside the checkpoint (RESUME_EVAL_SUFFIX), and
// --resume goes on with the evaluation after them, to the uninterrupted run's log.
static void train_eval_args(char *buf, size_t len, const char *out, const char *extra) {
    snprintf(buf, len, "train --set train.init=%s --set run.backend=cpu --set run.seed=11 "
             "--set run.threads=1 --set train.prompts_per_step=2 --set train.group_size=4 "
             "--set train.minibatch_size=4 --set world.max_new_tokens=24 --set optim.lr=3e-3 "
             "--set train.steps=4 --set train.eval_every=2 --set train.checkpoint_every=1 "
             "--set eval.limit=100 --set eval.batch=4 %s --out %s", model_path, extra, out);
}

static void test_train_eval_stopped(void **state) {
    char full[160], out[160], errp[200], args[2048], msg[8192];
    path_of(full, sizeof full, "tev_full.h5");
    path_of(out, sizeof out, "tev.h5");
    path_of(errp, sizeof errp, "tev.err");
    train_eval_args(args, sizeof args, full, "");
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 0);
    train_eval_args(args, sizeof args, out, "");
    pid_t pid = spawn_cli(args, errp);
    for (int i = 0; i < 3000 && try_rows(out, "train/step") < 2; i++) sleep_s(0.01);
    kill(pid, SIGTERM);
    int rc = wait_rc(pid);
    char *err = read_text(errp);
    const char *said = strstr(err, "train: the evaluation");
    printf("  exit %d: %s", rc, said ? said : err);
    if (rc == 0) {
        printf("  the run ended before the signal\n");
    } else {
        assert_int_equal(rc, 143);
        assert_non_null(said);  // the evaluation at step 2 was the one stopped
        assert_non_null(strstr(said, "at step 2"));
        assert_non_null(strstr(said, "kept in"));
        char kept[200];
        snprintf(kept, sizeof kept, "%s%s", out, RESUME_EVAL_SUFFIX);
        int64_t done = rows(kept, "responses/index");
        char *step = attr(kept, "step"), *complete = attr(kept, "complete");
        printf("  %lld responses kept in %s (step %s, complete %s)\n", (long long)done, kept, step, complete);
        assert_true(done > 0 && done < 5 * 100);
        assert_string_equal(step, "2");
        assert_string_equal(complete, "0");
        free(step);
        free(complete);
        train_eval_args(args, sizeof args, out, "--resume");
        rc = tu_run_cli(args, msg, sizeof msg);
        if (rc != 0) fail_msg("--resume: exit %d: %s", rc, msg);
        char want[96];
        snprintf(want, sizeof want, "evaluation at step 2 goes on after its %lld responses", (long long)done);
        if (!strstr(msg, want)) fail_msg("--resume did not say '%s': %s", want, msg);
        assert_false(exists(kept));  // removed once the evaluation ended
    }
    free(err);
    assert_same_logs(full, out);
}

// ---------------------------------------------------------------- torn logs of older versions
// A grpolab before 2026-12-06 kept no copy of the log: a log it left torn by a kill (here: a
// stopped run's log without its copy, one object header's checksum broken as a flush cut
// short leaves it) cannot be resumed. --resume says so, naming the log and the copy it lacks,
// and changes nothing; --overwrite starts the run again.
static void test_torn_log_without_copy(void **state) {
    char out[160], errp[200], args[2048], msg[8192], copy[200];
    path_of(out, sizeof out, "torn.h5");
    path_of(errp, sizeof errp, "torn.err");
    snprintf(copy, sizeof copy, "%s%s", out, RESUME_LOG_COPY_SUFFIX);
    train_eval_args(args, sizeof args, out, "--set train.steps=30 --set train.eval_every=0");
    pid_t pid = spawn_cli(args, errp);
    for (int i = 0; i < 3000 && try_rows(out, "train/step") < 2; i++) sleep_s(0.01);
    kill(pid, SIGTERM);
    int rc = wait_rc(pid);
    if (rc == 0) {
        printf("  the run ended before the signal: nothing to tear\n");
        return;
    }
    assert_int_equal(rc, 143);
    assert_int_equal(unlink(copy), 0);
    break_object_header(out, "train/loop_rate");
    size_t n0 = 0;
    char *before = tu_read_file(out, &n0);
    train_eval_args(args, sizeof args, out, "--set train.steps=30 --set train.eval_every=0 --resume");
    char env[1024];
    hdf5_leak_env(env, sizeof env);  // HDF5 loses the cache entry of the header it cannot read
    rc = tu_run_cli_env(env, args, msg, sizeof msg);
    printf("  --resume -> exit %d: %s", rc, msg);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(msg, out));
    assert_non_null(strstr(msg, "has no copy"));
    assert_non_null(strstr(msg, "--overwrite"));
    assert_null(strstr(msg, "infinite loop"));
    assert_bytes(out, before, n0);
    free(before);
    train_eval_args(args, sizeof args, out, "--set train.steps=3 --set train.eval_every=0 --overwrite");
    assert_int_equal(tu_run_cli(args, msg, sizeof msg), 0);
}

static int teardown_all(void **state) {
    char mnt[160];
    path_of(mnt, sizeof mnt, "pt-disk");
    umount2(mnt, MNT_DETACH);  // after a failed test
    rmdir(mnt);
    return teardown(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pretrain_signal),
        cmocka_unit_test(test_pretrain_kills),
        cmocka_unit_test(test_pretrain_kills_at_writes),
        cmocka_unit_test(test_pretrain_refusals),
        cmocka_unit_test(test_pretrain_disk_full),
        cmocka_unit_test(test_eval_signal_and_resume),
        cmocka_unit_test(test_train_eval_stopped),
        cmocka_unit_test(test_torn_log_without_copy),
    };
    return cmocka_run_group_tests_name("interrupt", tests, setup, teardown_all);
}
