// test_sweep.c: the sweep file reader and planner (src/sim/sweep/sweep.h): grid expansion and its
// order, integer ranges, run names, the resolved config of each run, refused sections, keys
// and values with the file, line, key and value named, the manifest a sweep directory is
// read through; and `grpolab sweep run` end to end on a tiny model: runs trained two at a
// time, complete runs kept, a run stopped by a signal continued from its checkpoint, a
// changed config refused before anything is trained, a complete run extended by a larger
// train.steps; `grpolab sweep status` through the runs' states.
#include "test_util.h"

#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/runs.h"
#include "sim/model/checkpoint.h"
#include "sim/io/runlog.h"
#include "sim/sweep/sweep.h"

static char err[2048];
static char dir[64];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static Sweep *load_ok(const char *text) {
    Sweep *s = sweep_load_text(text, "x.sweep", err, sizeof err);
    if (!s) fail_msg("load failed: %s", err);
    return s;
}

// Loads text, expects failure and a message with every needle (NULL-terminated).
static void expect_error(const char *text, ...) {
    err[0] = '\0';
    Sweep *s = sweep_load_text(text, "x.sweep", err, sizeof err);
    printf("  -> %s\n", err);
    assert_null(s);
    va_list ap;
    va_start(ap, text);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        if (!strstr(err, needle)) fail_msg("message lacks \"%s\": %s", needle, err);
    va_end(ap);
}

#define HEAD "[sweep]\nconfig = base.ini\nout = out/s\n"

static void test_grid_order_and_names(void **state) {
    Sweep *s = load_ok("# a sweep\n" HEAD "name = presets\n[grid]\n"
                       "objective.preset = grpo, dr_grpo   # two objectives\n"
                       "run.seed = 1234..1236\n"
                       "optim.lr = 1e-5,2e-5\n");
    assert_string_equal(s->name, "presets");
    assert_int_equal(s->n_axes, 3);
    assert_int_equal(s->axes[1].n_values, 3);
    assert_string_equal(s->axes[1].values[2], "1236");
    assert_int_equal(s->n_runs, 2 * 3 * 2);
    // the first key varies slowest, the last fastest
    char name[256];
    const char *want[] = {"preset-grpo_seed-1234_lr-1e-5", "preset-grpo_seed-1234_lr-2e-5",
                          "preset-grpo_seed-1235_lr-1e-5"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sweep_run_name(s, i, name, sizeof name), 0);
        assert_string_equal(name, want[i]);
    }
    assert_int_equal(sweep_run_name(s, 11, name, sizeof name), 0);
    assert_string_equal(name, "preset-dr_grpo_seed-1236_lr-2e-5");
    assert_int_equal(sweep_run_name(s, 11, name, 10), -1);  // does not fit
    int idx[3];
    sweep_run_indices(s, 7, idx);  // 7 = (1 * 3 + 0) * 2 + 1
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 0);
    assert_int_equal(idx[2], 1);
    char **sets = sweep_run_grid_sets(s, 7);
    assert_string_equal(sets[0], "objective.preset=dr_grpo");
    assert_string_equal(sets[1], "run.seed=1234");
    assert_string_equal(sets[2], "optim.lr=2e-5");
    sweep_free_sets(sets, s->n_axes);
    char *path = sweep_run_path(s, 7);
    assert_string_equal(path, "out/s/preset-dr_grpo_seed-1234_lr-2e-5.h5");
    free(path);
    assert_int_equal(s->slurm.cpus, 1);  // the defaults of [slurm]
    assert_int_equal(s->slurm.gpus, 0);
    assert_null(s->slurm.partition);
    sweep_free(s);
    // the default name is the file's base name; a range of one value; [slurm]
    s = sweep_load_text(HEAD "[grid]\nrun.seed = 5..5\n[slurm]\npartition = gpu\ntime = 1-02:00:00\n"
                        "cpus = 4\ngpus = 1\nmem = 8G\nmax_parallel = 2\n",
                        "experiments/sweeps/abl.sweep", err, sizeof err);
    assert_non_null(s);
    assert_string_equal(s->name, "abl");
    assert_int_equal(s->n_runs, 1);
    assert_string_equal(s->slurm.partition, "gpu");
    assert_string_equal(s->slurm.time, "1-02:00:00");
    assert_string_equal(s->slurm.mem, "8G");
    assert_int_equal(s->slurm.cpus, 4);
    assert_int_equal(s->slurm.gpus, 1);
    assert_int_equal(s->slurm.max_parallel, 2);
    sweep_free(s);
}

// Two axes with the same key name are told apart by their section; values with characters
// outside [A-Za-z0-9._+-] are written with '-' in the name.
static void test_name_labels(void **state) {
    Sweep *s = load_ok(HEAD "[grid]\nrun.seed = 1, 2\nworld.seed = 3\ntrain.init = data/m a.h5\n");
    char name[256];
    assert_int_equal(sweep_run_name(s, 1, name, sizeof name), 0);
    assert_string_equal(name, "run.seed-2_world.seed-3_init-data-m-a.h5");
    sweep_free(s);
}

// [sweep] run_name: the names from a pattern of {KEY}s (values written as above), e.g. the
// file names of make reproduce-fig5; a pattern that could give two runs one name, or a name
// that is not one file, is refused.
static void test_run_name_pattern(void **state) {
    Sweep *s = load_ok(HEAD "run_name = fig5_{objective.preset}_s{run.seed}\n[grid]\n"
                       "run.seed = 1234..1235\nobjective.preset = grpo, dr_grpo\n");
    char name[256];
    const char *want[] = {"fig5_grpo_s1234", "fig5_dr_grpo_s1234", "fig5_grpo_s1235", "fig5_dr_grpo_s1235"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sweep_run_name(s, i, name, sizeof name), 0);
        assert_string_equal(name, want[i]);
    }
    assert_int_equal(sweep_run_name(s, 1, name, 18), -1);  // 18 characters and the '\0'
    assert_int_equal(sweep_run_name(s, 1, name, 19), 0);
    char *path = sweep_run_path(s, 3);
    assert_string_equal(path, "out/s/fig5_dr_grpo_s1235.h5");
    free(path);
    sweep_free(s);
    s = load_ok(HEAD "run_name = {train.init}{train.init}\n[grid]\ntrain.init = a/b.h5\n");
    assert_int_equal(sweep_run_name(s, 0, name, sizeof name), 0);
    assert_string_equal(name, "a-b.h5a-b.h5");
    sweep_free(s);
    expect_error(HEAD "run_name = s{run.seed}\n[grid]\nrun.seed = 1, 2\noptim.lr = 1e-5, 2e-5\n",
                 "x.sweep:", "run_name", "does not name the [grid] key optim.lr", NULL);
    expect_error(HEAD "run_name = s{seed}\n[grid]\nrun.seed = 1\n", "'{seed}' is not a [grid] key", NULL);
    expect_error(HEAD "run_name = s{run.seed\n[grid]\nrun.seed = 1\n", "'{run.seed}' is not a [grid] key",
                 NULL);
    expect_error(HEAD "run_name = a/{run.seed}\n[grid]\nrun.seed = 1\n", "'/' is not allowed", NULL);
}

static void test_refused(void **state) {
    // keys and values against the config schema, with the line, the key and the value
    expect_error(HEAD "[grid]\nobjective.preset = grpo, drgrpo\n", "x.sweep:5:", "objective.preset",
                 "'drgrpo'", NULL);
    expect_error(HEAD "[grid]\nobjective.presets = grpo\n", "x.sweep:5:", "objective.presets", NULL);
    expect_error(HEAD "[grid]\nrun.seed = 1..x\n", "x.sweep:5:", "run.seed", "'1..x'", NULL);
    expect_error(HEAD "[grid]\noptim.lr = -1\n", "optim.lr", "'-1'", NULL);
    expect_error(HEAD "[set]\ntrain.steps = many\n[grid]\nrun.seed = 1\n", "x.sweep:5:", "train.steps",
                 "'many'", NULL);
    expect_error(HEAD "[set]\nrun.out = x.h5\n[grid]\nrun.seed = 1\n", "run.out", "[sweep] out", NULL);
    // ranges and lists
    expect_error(HEAD "[grid]\nrun.seed = 9..3\n", "range '9..3'", NULL);
    expect_error(HEAD "[grid]\nrun.seed = 1, , 2\n", "an empty value", NULL);
    expect_error(HEAD "[grid]\nrun.seed = 1, 2, 1..3\n", "value '1' is listed twice", NULL);
    expect_error(HEAD "[grid]\nrun.seed = 0..20000\n", "range", NULL);
    expect_error(HEAD "[grid]\nrun.seed = 0..99\nworld.seed = 0..99\noptim.lr = 1e-5, 2e-5\n",
                 "more than 10000 combinations", NULL);
    // the file's own structure
    expect_error(HEAD "[grid]\nrun.seed = 1\nrun.seed = 2\n", "x.sweep:6:", "run.seed is given twice", NULL);
    expect_error(HEAD "[set]\nrun.seed = 1\n[grid]\nrun.seed = 2\n", "run.seed is both in [set] and in [grid]",
                 NULL);
    expect_error(HEAD "[grids]\nrun.seed = 1\n", "x.sweep:4:", "unknown section '[grids]'", NULL);
    expect_error("run.seed = 1\n", "x.sweep:1:", "outside any section", NULL);
    expect_error(HEAD "[grid]\nrun.seed\n", "x.sweep:5:", "expected 'key = value'", NULL);
    expect_error(HEAD "output = x\n[grid]\nrun.seed = 1\n", "[sweep] unknown key 'output'", NULL);
    expect_error("[sweep]\nout = o\n[grid]\nrun.seed = 1\n", "[sweep] config = FILE is missing", NULL);
    expect_error("[sweep]\nconfig = c\n[grid]\nrun.seed = 1\n", "[sweep] out = DIR is missing", NULL);
    expect_error(HEAD, "[grid] is missing or empty", NULL);
    expect_error(HEAD "[grid]\nrun.seed = 1\n[slurm]\ncpus = 0\n", "[slurm] cpus = '0'", "[1, 4096]", NULL);
    expect_error(HEAD "[grid]\nrun.seed = 1\n[slurm]\npartition = a b\n", "[slurm] partition = 'a b'", NULL);
    expect_error(HEAD "[grid]\nrun.seed = 1\n[slurm]\nqueue = x\n", "[slurm] unknown key 'queue'", NULL);
    err[0] = '\0';
    assert_null(sweep_load("/nonexistent/x.sweep", err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent/x.sweep"));
}

// Loads text, expects sweep_check to fail with needle in its message.
static void expect_check_error(const char *text, const char *needle) {
    Sweep *s = load_ok(text);
    assert_int_equal(sweep_check(s, err, sizeof err), -1);
    printf("  -> %s\n", err);
    if (!strstr(err, needle)) fail_msg("message lacks \"%s\": %s", needle, err);
    sweep_free(s);
}

// Each run's config: defaults, the base config, [set], then its grid values; a run whose
// config does not resolve, or two runs with one name, are refused before anything runs.
static void test_run_config_and_check(void **state) {
    char base[128], text[1024];
    snprintf(base, sizeof base, "%s/base.ini", dir);
    write_file(base, "[run]\nseed = 7\n[train]\nsteps = 9\nprompts_per_step = 3\n[optim]\nlr = 1e-4\n");
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = %s/out\n[set]\ntrain.steps = 4\n"
             "[grid]\nobjective.preset = grpo, dr_grpo\nrun.seed = 1..2\n", base, dir);
    Sweep *s = load_ok(text);
    assert_int_equal(sweep_check(s, err, sizeof err), 0);
    Config *c = sweep_run_config(s, 3, err, sizeof err);
    assert_non_null(c);
    assert_string_equal(config_str(c, "objective.preset"), "dr_grpo");
    assert_int_equal(config_int(c, "run.seed"), 2);             // grid over the base config
    assert_int_equal(config_int(c, "train.steps"), 4);          // [set] over the base config
    assert_int_equal(config_int(c, "train.prompts_per_step"), 3);  // the base config
    assert_true(config_float(c, "optim.lr") == 1e-4);
    config_free(c);
    sweep_free(s);
    // a base config that does not load
    expect_check_error(HEAD "[grid]\nrun.seed = 1\n", "[sweep] config: cannot open config 'base.ini'");
    // values that are valid alone but not together (n_heads must divide d_model)
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = o\n[grid]\nmodel.n_heads = 4, 3\n", base);
    expect_check_error(text, "run 1 (n_heads-3)");
    // two runs with one name
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = o\n[grid]\ntrain.init = a/b.h5, a b.h5\n", base);
    expect_check_error(text, "runs 0 and 1 are both named 'init-a-b.h5'");
}

static void test_manifest(void **state) {
    char text[512], out[128], note[256], **runs = NULL;
    snprintf(out, sizeof out, "%s/deep/out", dir);
    snprintf(text, sizeof text, "[sweep]\nconfig = c.ini\nout = %s\n[grid]\nrun.seed = 3..4\n"
             "train.steps = 7\noptim.lr = 1e-5, 2e-5\nobjective.preset = grpo, dr_grpo\n", out);
    Sweep *s = load_ok(text);
    assert_int_equal(sweep_write_manifest(s, err, sizeof err), 0);  // creates the directories
    char **groups = NULL;
    int n = sweep_expand_dir(out, &runs, &groups, note, sizeof note, err, sizeof err);
    assert_int_equal(n, 8);
    assert_string_equal(note, "optim.lr");  // varies besides the seed and the objective
    for (int i = 0; i < n; i++) {
        char *want = sweep_run_path(s, i);
        assert_string_equal(runs[i], want);
        assert_string_equal(groups[i], i % 4 < 2 ? "lr-1e-5" : "lr-2e-5");  // (seed, lr, preset)
        free(want);
        free(runs[i]);
        free(groups[i]);
    }
    free(runs);
    free(groups);
    sweep_free(s);
    // objectives and seeds only: no groups within an objective
    snprintf(text, sizeof text, "[sweep]\nconfig = c.ini\nout = %s\n[grid]\nrun.seed = 3..4\n"
             "objective.preset = grpo, dr_grpo\n", out);
    s = load_ok(text);
    assert_int_equal(sweep_write_manifest(s, err, sizeof err), 0);
    assert_int_equal(sweep_expand_dir(out, &runs, &groups, note, sizeof note, err, sizeof err), 4);
    assert_string_equal(note, "");
    for (int i = 0; i < 4; i++) {
        assert_string_equal(groups[i], "");
        free(runs[i]);
        free(groups[i]);
    }
    free(runs);
    free(groups);
    // a file is not expanded; a directory without a manifest is an error
    char file[160];
    snprintf(file, sizeof file, "%s/sweep.runs", out);
    assert_int_equal(sweep_expand_dir(file, &runs, NULL, NULL, 0, err, sizeof err), 0);
    assert_int_equal(sweep_expand_dir(dir, &runs, NULL, NULL, 0, err, sizeof err), -1);
    printf("  -> %s\n", err);
    assert_non_null(strstr(err, "without a sweep manifest"));
    sweep_free(s);
}

// Runs `grpolab ARGS` with its stdout and stderr in out; returns the exit code.
static int run_both(const char *args, char *out, size_t cap) {
    const char *bin = getenv("GRPOLAB_BIN");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin ? bin : "build/grpolab", args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// run_both, then its output printed.
static int run_print(const char *args, char *out, size_t cap) {
    int rc = run_both(args, out, cap);
    printf("%s", out);
    return rc;
}

static int complete(const char *path) {
    Run *r = run_load(path, err, sizeof err);
    int ok = r && run_complete(r);
    run_free(r);
    return ok;
}

// A tiny config (2 steps) and its random-init model dir/tiny.h5, made once; its path in base.
static void tiny_base(char *base, size_t len) {
    char text[1024], args[512], out[4096];
    snprintf(base, len, "%s/tiny.ini", dir);
    if (access(base, F_OK) == 0) return;
    snprintf(text, sizeof text,
             "[run]\nbackend = cpu\n[model]\nvocab_size = 58\nd_model = 32\nn_layers = 1\nn_heads = 2\n"
             "n_kv_heads = 1\nd_ff = 64\nmax_seq_len = 96\n[world]\nmax_new_tokens = 24\n"
             "[train]\ninit = %s/tiny.h5\nsteps = 2\nprompts_per_step = 2\ngroup_size = 4\n"
             "minibatch_size = 4\neval_every = 4\ncheckpoint_every = 1\n[eval]\nlimit = 4\nbatch = 16\n", dir);
    write_file(base, text);
    snprintf(args, sizeof args, "init --config %s --out %s/tiny.h5", base, dir);
    assert_int_equal(run_both(args, out, sizeof out), 0);
}

// `grpolab sweep run` on a random-init tiny model (rewards are 0: this is about the runs,
// not what they learn).
static void test_sweep_run(void **state) {
    char base[128], sw[128], args[512], out[16384], path[256];
    char text[1024];
    tiny_base(base, sizeof base);
    snprintf(sw, sizeof sw, "%s/s.sweep", dir);
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = %s/runs\n[grid]\n"
             "objective.preset = grpo, dr_grpo\nrun.seed = 1..2\n", base, dir);
    write_file(sw, text);
    snprintf(args, sizeof args, "sweep run %s --jobs 2", sw);
    int rc = run_print(args, out, sizeof out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "4 trained, 0 kept, 0 failed"));
    assert_non_null(strstr(out, "2 at a time, run.threads="));  // nproc / jobs each
    Sweep *s = sweep_load(sw, err, sizeof err);
    assert_non_null(s);
    for (int i = 0; i < s->n_runs; i++) {
        char *p = sweep_run_path(s, i);
        assert_true(complete(p));
        free(p);
    }
    // again: every run is kept
    rc = run_both(args, out, sizeof out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "0 trained, 4 kept"));
    // the summary takes the sweep's directory
    snprintf(args, sizeof args, "summary --check %s/runs", dir);
    rc = run_print(args, out, sizeof out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "preset-dr_grpo_seed-2.h5: 2 of 2 steps, complete"));

    // over objectives and seeds alone: one group per objective, the finding's checks
    snprintf(args, sizeof args, "summary %s/runs", dir);
    assert_int_equal(run_both(args, out, sizeof out), 0);
    assert_null(strstr(out, "they are grouped by"));
    assert_non_null(strstr(out, "The finding of"));
    // a sweep that also varies the learning rate: grouped by objective and lr, no finding checks
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = %s/lr\n[grid]\n"
             "objective.preset = grpo, dr_grpo\noptim.lr = 1e-3, 2e-3\n", base, dir);
    write_file(sw, text);
    snprintf(args, sizeof args, "sweep run %s --jobs 2", sw);
    assert_int_equal(run_both(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "summary %s/lr", dir);
    rc = run_print(args, out, sizeof out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "they are grouped by objective and optim.lr"));
    assert_non_null(strstr(out, "\ngrpo_lr-2e-3 "));
    assert_non_null(strstr(out, "\ndr_grpo_lr-1e-3 "));
    assert_null(strstr(out, "The finding of"));

    // several files share one queue: each its own out directory and manifest, counted apart
    char sw2[160];
    snprintf(sw2, sizeof sw2, "%s/pair.sweep", dir);
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = %s/pair\nname = pair\n[grid]\n"
             "run.seed = 3..4\n", base, dir);
    write_file(sw2, text);
    snprintf(args, sizeof args, "sweep run %s %s --jobs 2", sw, sw2);
    assert_int_equal(run_print(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "0 trained, 4 kept, 0 failed"));  // the lr sweep's, complete above
    assert_non_null(strstr(out, "sweep run 'pair': 2 trained, 0 kept, 0 failed"));
    assert_non_null(strstr(out, "2 at a time with the other files'"));
    snprintf(args, sizeof args, "summary --check %s/pair", dir);
    assert_int_equal(run_print(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "seed-4.h5: 2 of 2 steps, complete"));
    // two files with one out directory are refused before anything runs
    snprintf(args, sizeof args, "sweep run %s %s", sw2, sw2);
    assert_int_equal(run_both(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "both write to out"));

    // a run stopped by a signal continues from its checkpoint
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = %s/long\n[set]\ntrain.steps = 20\n"
             "[grid]\nrun.seed = 5\n", base, dir);
    write_file(sw, text);
    const char *bin = getenv("GRPOLAB_BIN");
    snprintf(path, sizeof path, "%s/long/seed-5.h5.ckpt.h5", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        execl(bin ? bin : "build/grpolab", "grpolab", "sweep", "run", sw, (char *)NULL);
        _exit(127);
    }
    for (int t = 0; t < 600 && access(path, F_OK) != 0; t++) usleep(100000);
    assert_int_equal(access(path, F_OK), 0);  // its first checkpoint
    kill(pid, SIGTERM);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM);
    snprintf(args, sizeof args, "sweep plan %s", sw);
    rc = run_print(args, out, sizeof out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "resumes from its checkpoint"));
    snprintf(path, sizeof path, "%s/long/seed-5.h5", dir);
    assert_false(complete(path));
    // a changed config is refused before anything is trained
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = %s/long\n[set]\ntrain.steps = 20\n"
             "optim.lr = 5e-4\n[grid]\nrun.seed = 5\n", base, dir);
    write_file(sw, text);
    snprintf(args, sizeof args, "sweep run %s", sw);
    rc = run_print(args, out, sizeof out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "optim.lr"));
    assert_non_null(strstr(out, "nothing was trained"));
    // back to the run's config: it resumes and completes (fewer steps would be another config)
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = %s/long\n[set]\ntrain.steps = 20\n"
             "[grid]\nrun.seed = 5\n", base, dir);
    write_file(sw, text);
    rc = run_both(args, out, sizeof out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "resumes from its checkpoint"));
    assert_true(complete(path));
    sweep_free(s);
}

// Column by column, bit for bit: the columns of two logs that no wall clock enters.
static void assert_same_columns(const char *a, const char *b) {
    static const char *const cols[] = {"train/step", "train/reward_mean", "train/loss", "train/grad_norm",
                                       "train/length_mean", "train/lr", "questions/reward_mean",
                                       "responses/length", "responses/advantage", "tokens/logp_old",
                                       "tokens/weight", "eval/step", "eval/accuracy"};
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
        int64_t na = 0, nb = 0;
        RunLogReader *ra = runlog_reader_open(a, err, sizeof err), *rb = runlog_reader_open(b, err, sizeof err);
        assert_non_null(ra);
        assert_non_null(rb);
        double *x = runlog_read_column(ra, cols[c], &na, err, sizeof err);
        double *y = runlog_read_column(rb, cols[c], &nb, err, sizeof err);
        runlog_reader_close(ra);
        runlog_reader_close(rb);
        if (!x || !y) fail_msg("%s: %s", cols[c], err);
        if (na != nb) fail_msg("%s: %lld rows vs %lld", cols[c], (long long)na, (long long)nb);
        for (int64_t i = 0; i < na; i++)
            if (!(x[i] == y[i] || (isnan(x[i]) && isnan(y[i]))))
                fail_msg("%s row %lld: %.17g vs %.17g", cols[c], (long long)i, x[i], y[i]);
        free(x);
        free(y);
    }
}

// sw: a sweep of one run (seed 7) of the tiny config, `steps` steps, its log in dir/OUT.
static void seed7_sweep(const char *sw, const char *base, const char *out, int steps) {
    char text[512];
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = %s/%s\n[set]\ntrain.steps = %d\n[grid]\nrun.seed = 7\n",
             base, dir, out, steps);
    write_file(sw, text);
}

// `sweep SUB FILE [--threads 1]`, printed; its exit code (output in out).
static int sweep_cmd(const char *sub, const char *sw, char *out, size_t cap) {
    char args[512];
    snprintf(args, sizeof args, "sweep %s %s%s", sub, sw, strcmp(sub, "run") == 0 ? " --threads 1" : "");
    return run_print(args, out, cap);
}

// `sweep status` through the life of runs (new, done, failed with its error line, running,
// resumable with its checkpoint's step), and a complete run whose train.steps the sweep
// raises: extended from its last step to the log of a run trained that long at once.
static void test_status_and_extend(void **state) {
    char base[128], sw[128], text[1024], args[512], out[16384], path[256], line[512];
    tiny_base(base, sizeof base);
    snprintf(sw, sizeof sw, "%s/st.sweep", dir);
    // run 1 starts from a file that is no model: it fails
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = %s/st\n[set]\ntrain.steps = 3\n[grid]\n"
             "train.init = %s/tiny.h5, %s\n", base, dir, dir, base);
    write_file(sw, text);
    assert_int_equal(sweep_cmd("status", sw, out, sizeof out), 3);
    assert_non_null(strstr(out, "2 runs: 2 new"));
    assert_int_equal(sweep_cmd("run", sw, out, sizeof out), 1);
    assert_int_equal(sweep_cmd("status", sw, out, sizeof out), 1);
    assert_non_null(strstr(out, "2 runs: 1 done, 1 failed"));
    assert_non_null(strstr(out, " done       3 of 3 steps"));
    // the failed run's line: the last error line of its output, and the output named
    const char *f = strstr(out, " failed     grpolab: error: ");
    assert_non_null(f);
    assert_non_null(strstr(f, ".log)"));

    // a complete run of 3 steps; then train.steps = 6: it extends
    seed7_sweep(sw, base, "ext", 3);
    assert_int_equal(sweep_cmd("run", sw, out, sizeof out), 0);
    seed7_sweep(sw, base, "ext", 6);
    assert_int_equal(sweep_cmd("plan", sw, out, sizeof out), 0);
    assert_non_null(strstr(out, "[extends from its last step (train.steps raised): from step 3 to 6]"));
    assert_int_equal(sweep_cmd("status", sw, out, sizeof out), 3);
    assert_non_null(strstr(out, "resumable  complete; train.steps raised: extends from step 3 to 6"));
    assert_int_equal(sweep_cmd("run", sw, out, sizeof out), 0);
    assert_non_null(strstr(out, "1 trained, 0 kept, 0 failed"));
    snprintf(path, sizeof path, "%s/ext/seed-7.h5", dir);
    assert_true(complete(path));
    seed7_sweep(sw, base, "full", 6);
    assert_int_equal(sweep_cmd("run", sw, out, sizeof out), 0);
    snprintf(line, sizeof line, "%s/full/seed-7.h5", dir);
    assert_same_columns(path, line);
    // fewer steps than the log has is another run: refused
    seed7_sweep(sw, base, "ext", 2);
    assert_int_equal(sweep_cmd("plan", sw, out, sizeof out), 1);
    assert_non_null(strstr(out, "train.steps = 6 vs 2 (fewer)"));

    // extended again to 300 steps in the background: running (this machine's lock), then
    // stopped by a signal: resumable from its checkpoint
    seed7_sweep(sw, base, "ext", 300);
    const char *bin = getenv("GRPOLAB_BIN");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        execl(bin ? bin : "build/grpolab", "grpolab", "sweep", "run", sw, "--threads", "1", (char *)NULL);
        _exit(127);
    }
    // its checkpoint past step 6: the run trains (its signal handler is in place)
    snprintf(path, sizeof path, "%s/ext/seed-7.h5.ckpt.h5", dir);
    int64_t at_now = 0;
    for (int t = 0; t < 1200 && at_now <= 6; t++) {
        usleep(100000);
        if (checkpoint_read_meta(path, NULL, NULL, NULL, NULL, &at_now, NULL, err, sizeof err) != 0) at_now = 0;
    }
    assert_true(at_now > 6);
    snprintf(args, sizeof args, "sweep status %s", sw);
    int rc_running = run_print(args, out, sizeof out);
    assert_int_equal(rc_running, 3);
    assert_non_null(strstr(out, " running "));
    assert_non_null(strstr(out, "(pid "));
    kill(pid, SIGTERM);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(run_print(args, out, sizeof out), 3);
    const char *r = strstr(out, " resumable  checkpoint at step ");
    assert_non_null(r);
    int at = atoi(r + strlen(" resumable  checkpoint at step "));
    assert_true(at > 6 && at < 300);
    assert_non_null(strstr(r, " of 300"));
}

// A sweep whose binary is replaced while it runs (make rebuilds it: a new file renamed over
// the path) trains its next runs with the binary it started with.
static void test_binary_replaced(void **state) {
    char base[128], sw[128], bin2[160], cmd[1024], out[256], ckpt[256];
    tiny_base(base, sizeof base);
    const char *bin = getenv("GRPOLAB_BIN");
    snprintf(bin2, sizeof bin2, "%s/grpolab-copy", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", bin ? bin : "build/grpolab", bin2);
    assert_int_equal(system(cmd), 0);
    snprintf(sw, sizeof sw, "%s/rebuilt.sweep", dir);
    char text[512];
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = %s/rebuilt\n[set]\ntrain.steps = 20\n[grid]\n"
             "run.seed = 1, 2\n", base, dir);
    write_file(sw, text);
    snprintf(out, sizeof out, "%s/rebuilt.out", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        freopen(out, "w", stdout);
        execl(bin2, "grpolab", "sweep", "run", sw, "--threads", "1", (char *)NULL);
        _exit(127);
    }
    snprintf(ckpt, sizeof ckpt, "%s/rebuilt/seed-1.h5.ckpt.h5", dir);
    for (int t = 0; t < 300 && access(ckpt, F_OK) != 0; t++) usleep(100000);
    assert_int_equal(access(ckpt, F_OK), 0);  // the first run trains
    snprintf(cmd, sizeof cmd, "cp '%s' '%s.new' && mv -f '%s.new' '%s'", bin2, bin2, bin2, bin2);
    assert_int_equal(system(cmd), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    snprintf(cmd, sizeof cmd, "grep -q '2 trained, 0 kept, 0 failed' '%s'", out);
    assert_int_equal(system(cmd), 0);
}

static void test_cli_errors(void **state) {
    char out[4096], args[256];
    assert_int_equal(run_both("sweep", out, sizeof out), 2);
    assert_non_null(strstr(out, "plan"));
    assert_int_equal(run_both("sweep frobnicate x", out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown subcommand 'frobnicate'"));
    assert_int_equal(run_both("sweep plan /nonexistent.sweep", out, sizeof out), 2);
    assert_non_null(strstr(out, "cannot open sweep file '/nonexistent.sweep'"));
    char sw[128];
    snprintf(sw, sizeof sw, "%s/bad.sweep", dir);
    write_file(sw, HEAD "[grid]\nobjective.preset = grpo, gspo_typo\n");
    snprintf(args, sizeof args, "sweep plan %s", sw);
    assert_int_equal(run_both(args, out, sizeof out), 2);
    printf("  -> %s", out);
    assert_non_null(strstr(out, "gspo_typo"));
    snprintf(args, sizeof args, "sweep run %s --jobs 0", sw);
    assert_int_equal(run_both(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "--jobs '0'"));
    // a run that would start from a model that is not there: nothing is started
    char base[128], text[512];
    snprintf(base, sizeof base, "%s/noinit.ini", dir);
    write_file(base, "[train]\ninit = /nonexistent/base.h5\n");
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = %s/noinit\n[grid]\nrun.seed = 1, 2\n", base, dir);
    write_file(sw, text);
    snprintf(args, sizeof args, "sweep run %s", sw);
    assert_int_equal(run_both(args, out, sizeof out), 2);
    printf("  -> %s", out);
    assert_non_null(strstr(out, "train.init '/nonexistent/base.h5' (run 0) cannot be read"));
    assert_non_null(strstr(out, "2 runs would start from a model that is not there"));
    snprintf(args, sizeof args, "sweep task %s 2", sw);
    assert_int_equal(run_both(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "INDEX '2': expected a run of"));
    assert_int_equal(run_both("sweep slurm --help", out, sizeof out), 0);
    assert_non_null(strstr(out, "--submit"));
}

static int file_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

// The batch script of `sweep slurm` (no Slurm needed): the array, the [slurm] options with
// the flags over them, one resumable task per run; --submit without sbatch leaves the script.
static void test_slurm_script(void **state) {
    char base[128], sw[128], text[512], args[512], out[4096], script[160], line[512];
    snprintf(base, sizeof base, "%s/slurm.ini", dir);
    snprintf(text, sizeof text, "[train]\ninit = %s/slurm.ini\n", dir);  // any readable file
    write_file(base, text);
    snprintf(sw, sizeof sw, "%s/slurm.sweep", dir);
    snprintf(text, sizeof text, "[sweep]\nconfig = %s\nout = %s/sl\nname = abl\n[grid]\n"
             "objective.preset = grpo, dr_grpo, dapo\n[slurm]\npartition = cpu\ntime = 00:30:00\n"
             "cpus = 2\nmax_parallel = 2\n", base, dir);
    write_file(sw, text);
    snprintf(args, sizeof args, "sweep slurm %s --time 01:00:00 --gpus 1 --mem 4G", sw);
    int rc = run_print(args, out, sizeof out);
    assert_int_equal(rc, 0);
    snprintf(script, sizeof script, "%s/sl/sweep.sbatch", dir);
    const char *want[] = {"#SBATCH --job-name=grpolab-abl\n", "#SBATCH --array=0-2%2\n",
                          "#SBATCH --cpus-per-task=2\n", "#SBATCH --partition=cpu\n",
                          "#SBATCH --time=01:00:00\n", "#SBATCH --mem=4G\n", "#SBATCH --gres=gpu:1\n",
                          "/sl/logs/task-%a.log\n", "\"$SLURM_ARRAY_TASK_ID\" --threads 2\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!file_has(script, want[i])) fail_msg("%s lacks '%s'", script, want[i]);
    snprintf(line, sizeof line, " sweep task '%s' ", sw);  // the sweep file by absolute path
    assert_true(file_has(script, line));
    snprintf(line, sizeof line, "%s/sl/sweep.runs", dir);
    assert_int_equal(access(line, F_OK), 0);
    // a bad flag is checked as the [slurm] line would be
    snprintf(args, sizeof args, "sweep slurm %s --cpus two", sw);
    assert_int_equal(run_both(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "cpus = 'two'"));
    // --submit where no sbatch is on PATH: the script is written, exit 1
    unlink(script);
    const char *bin = getenv("GRPOLAB_BIN");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "PATH=/nonexistent %s sweep slurm %s --submit 2>&1", bin ? bin : "build/grpolab", sw);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    printf("%s", out);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    assert_non_null(strstr(out, "no sbatch on PATH"));
    assert_int_equal(access(script, F_OK), 0);
}

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/grpolab-sweep-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grid_order_and_names), cmocka_unit_test(test_name_labels),
        cmocka_unit_test(test_run_name_pattern),
        cmocka_unit_test(test_refused),              cmocka_unit_test(test_run_config_and_check),
        cmocka_unit_test(test_manifest),             cmocka_unit_test(test_sweep_run),
        cmocka_unit_test(test_status_and_extend),    cmocka_unit_test(test_binary_replaced),
        cmocka_unit_test(test_cli_errors),           cmocka_unit_test(test_slurm_script),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
