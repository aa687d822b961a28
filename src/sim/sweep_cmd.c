// sweep_cmd.c: `grpolab sweep plan|run|slurm|task FILE` (docs/cli.md, docs/scaling.md).
// Every run is a `grpolab train` of this same binary: `run` starts them here N at a time,
// `slurm` writes (and submits) a job array whose task i runs `sweep task FILE i`. Before
// anything is trained, every run's config is resolved and every run log that exists is
// compared with the config it would be trained with now: a finished run is kept, an
// interrupted one continues from its checkpoint (train --resume), one made with another
// config stops the sweep with the keys that differ.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../analysis/runs.h"
#include "../common.h"
#include "cli.h"
#include "h5util.h"
#include "resume.h"
#include "sweep.h"
#include "train.h"

// What a run needs: train from scratch, nothing (complete), resume, or it is refused.
typedef enum { RUN_NEW, RUN_COMPLETE, RUN_RESUME, RUN_RESTART, RUN_REFUSED } RunState;
static const char *const STATE_NAME[] = {"new", "complete (kept)", "resumes from its checkpoint",
                                         "trains again (no checkpoint yet)", "REFUSED"};

// The state of run i whose resolved config is c; msg says why where it is refused. The config
// is read from the log's copy where a killed run left one (its log may be torn).
static RunState run_state(const Sweep *s, int i, const Config *c, char *msg, size_t msglen) {
    char *path = sweep_run_path(s, i), copy[4200];
    RunState st = RUN_NEW;
    if (access(path, F_OK) == 0) {
        int same = train_compare_run_config(resume_log_to_read(path, copy, sizeof copy), c, 0, msg, msglen);
        if (same != 0) {
            if (same < 0) {
                size_t n = strlen(msg);
                snprintf(msg + n, msglen - n, " (delete or move it to train it again)");
            }
            st = RUN_REFUSED;
        } else {
            char err[1024];
            Run *r = run_load(path, err, sizeof err);
            int complete = r && run_complete(r);
            run_free(r);
            char *ckpt = path_with_suffix(path, RESUME_CKPT_SUFFIX);
            st = complete ? RUN_COMPLETE : access(ckpt, F_OK) == 0 ? RUN_RESUME : RUN_RESTART;
            free(ckpt);
        }
    }
    free(path);
    return st;
}

// Loads and checks the sweep; with states, the state of every run (malloc'd), printing each
// refused run; returns NULL (after printing why) if the sweep cannot run.
static Sweep *load_checked(const char *file, RunState **states) {
    char err[2048];
    Sweep *s = sweep_load(file, err, sizeof err);
    if (!s || sweep_check(s, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab sweep: error: %s\n", err);
        sweep_free(s);
        return NULL;
    }
    if (!states) return s;
    *states = xcalloc((size_t)s->n_runs, sizeof **states);
    int refused = 0, no_init = 0;
    char missing[1024] = "";  // the last train.init reported missing: each is said once
    for (int i = 0; i < s->n_runs; i++) {
        Config *c = sweep_run_config(s, i, err, sizeof err);  // resolved by sweep_check
        (*states)[i] = run_state(s, i, c, err, sizeof err);
        if ((*states)[i] == RUN_REFUSED) {
            fprintf(stderr, "grpolab sweep: %s\n", err);
            refused++;
        }
        const char *init = config_str(c, "train.init");
        if ((*states)[i] != RUN_COMPLETE && (*states)[i] != RUN_RESUME && access(init, R_OK) != 0) {
            if (strcmp(init, missing) != 0)
                fprintf(stderr, "grpolab sweep: error: train.init '%s' (run %d) cannot be read: %s (pretrain or copy the base model there first)\n", init, i, strerror(errno));
            snprintf(missing, sizeof missing, "%s", init);
            no_init++;
        }
        config_free(c);
    }
    if (no_init && !refused) {
        fprintf(stderr, "grpolab sweep: error: %d run%s would start from a model that is not there (above): "
                "nothing was started\n", no_init, no_init == 1 ? "" : "s");
        free(*states);
        *states = NULL;
        sweep_free(s);
        return NULL;
    }
    if (refused) {
        fprintf(stderr, "grpolab sweep: error: %d run log%s in %s %s made with another config than "
                "the sweep gives now (above): nothing was trained; delete or move %s to train %s "
                "again\n", refused, refused == 1 ? "" : "s", s->out, refused == 1 ? "was" : "were",
                refused == 1 ? "it" : "them", refused == 1 ? "it" : "them");
        free(*states);
        *states = NULL;
        sweep_free(s);
        return NULL;
    }
    return s;
}

// The path of this binary, so that every run is trained by the same grpolab.
static const char *self_exe(void) {
    static char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) die("cannot find this binary (/proc/self/exe): %s", strerror(errno));
    path[n] = '\0';
    return path;
}

// The argv of run i's `grpolab train` (NULL-terminated, malloc'd strings; free with
// sweep_free_sets(argv, *argc)). threads > 0 sets run.threads; backend may be NULL.
static char **train_argv(const Sweep *s, int i, RunState st, int threads, const char *backend, int *argc) {
    char **grid = sweep_run_grid_sets(s, i);
    int cap = 12 + 2 * (s->n_sets + s->n_axes), n = 0;
    char **av = xcalloc((size_t)cap, sizeof *av);
    av[n++] = xstrdup(self_exe());
    av[n++] = xstrdup("train");
    av[n++] = xstrdup("--config");
    av[n++] = xstrdup(s->config);
    for (int j = 0; j < s->n_sets + s->n_axes; j++) {
        av[n++] = xstrdup("--set");
        av[n++] = xstrdup(j < s->n_sets ? s->sets[j] : grid[j - s->n_sets]);
    }
    if (threads > 0) {
        char t[48];
        snprintf(t, sizeof t, "run.threads=%d", threads);
        av[n++] = xstrdup("--set");
        av[n++] = xstrdup(t);
    }
    if (backend) {
        av[n++] = xstrdup("--backend");
        av[n++] = xstrdup(backend);
    }
    av[n++] = xstrdup("--out");
    av[n++] = sweep_run_path(s, i);
    av[n++] = xstrdup(st == RUN_RESUME ? "--resume" : "--overwrite");
    sweep_free_sets(grid, s->n_axes);
    *argc = n;
    return av;
}

// cli_parse, then exactly n_positional arguments: -1 to go on, else the exit code.
static int parse_args(const CliSpec *spec, int argc, char **argv, CliArgs *a, int n_positional) {
    int rc = cli_parse(spec, argc, argv, a);
    if (rc) return rc == 1 ? 0 : 2;
    if (a->n_positional != n_positional) {
        cli_print_usage(spec, stderr);
        return 2;
    }
    return -1;
}

static int parse_count(const char *opt, const char *v, int lo, int hi, int *out) {
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || x < lo || x > hi) {
        fprintf(stderr, "grpolab sweep: error: --%s '%s': expected an integer in [%d, %d]\n", opt,
                v ? v : "", lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

// ---------------------------------------------------------------- plan

static const CliSpec plan_spec = {
    "sweep plan", "List the runs of a sweep file: index, name, state of its log, and its --set lines.\n"
                  "Every value is checked against the config schema and every run's config resolved.",
    "FILE", NULL, 0, 1, "FILE"};

static int sweep_plan(int argc, char **argv) {
    CliArgs a;
    int rc = parse_args(&plan_spec, argc, argv, &a, 1);
    if (rc >= 0) return rc;
    Sweep *s = load_checked(a.positional[0], NULL);
    if (!s) return 2;
    char err[2048];
    printf("sweep '%s' (%s): %d run%s", s->name, s->path, s->n_runs, s->n_runs == 1 ? "" : "s");
    for (int ax = 0; ax < s->n_axes; ax++)
        printf("%s%d %s", ax ? " x " : " = ", s->axes[ax].n_values, s->axes[ax].key);
    printf("\n  base config %s, logs in %s/NAME.h5\n", s->config, s->out);
    for (int j = 0; j < s->n_sets; j++) printf("  every run: --set %s\n", s->sets[j]);
    int refused = 0;
    for (int i = 0; i < s->n_runs; i++) {
        char name[1024];
        sweep_run_name(s, i, name, sizeof name);
        Config *c = sweep_run_config(s, i, err, sizeof err);
        RunState st = run_state(s, i, c, err, sizeof err);
        config_free(c);
        char **grid = sweep_run_grid_sets(s, i);
        printf("%4d  %-32s ", i, name);
        for (int ax = 0; ax < s->n_axes; ax++) printf(" --set %s", grid[ax]);
        printf("   [%s]\n", STATE_NAME[st]);
        if (st == RUN_REFUSED) printf("        %s\n", err), refused++;
        sweep_free_sets(grid, s->n_axes);
    }
    sweep_free(s);
    return refused ? 1 : 0;
}

// ---------------------------------------------------------------- run

static const CliOption run_opts[] = {
    {"jobs", "N", "train N runs at a time (default 1), each on nproc/N threads (run.threads) when N > 1"},
    {"threads", "T", "run.threads of every run instead (the CPU's rounding depends on it)"},
    {"backend", "NAME", "auto|cpu|cuda for every run (default: run.backend)"},
};
static const CliSpec run_spec = {
    "sweep run",
    "Train the runs of a sweep file on this machine, N at a time, each with its output in\n"
    "OUT/NAME.log and a progress line per running run every minute. Complete runs are kept,\n"
    "interrupted ones continue from their checkpoint; a run log made with another config stops\n"
    "the sweep before anything is trained. Writes OUT/sweep.runs for `grpolab summary OUT`.",
    "FILE [--jobs N] [--threads T] [--backend NAME]", run_opts, 3, 1, "FILE"};

// The last "train step" line of a run's output, shortened (or "starting").
static void last_progress(const char *log, char *out, size_t len) {
    snprintf(out, len, "starting (step-0 evaluation)");
    FILE *f = fopen(log, "rb");
    if (!f) return;
    char buf[8192];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *line = NULL;
    for (char *p = strstr(buf, "train step"); p; p = strstr(p + 1, "train step")) line = p;
    if (!line) return;
    line[strcspn(line, "\n")] = '\0';
    char *clip = strstr(line, "  clip");  // step, reward and lengths; then the ETA
    char *eta = strstr(line, "ETA");
    if (clip) *clip = '\0';
    snprintf(out, len, "%s%s%s", line, eta ? ", " : "", eta ? eta : "");
}

// SIGINT or SIGTERM to `sweep run`: its runs are stopped too (they would go on unattended
// otherwise) and a later `sweep run` continues them from their checkpoints.
static volatile sig_atomic_t stop_signal;
static void on_stop(int sig) { stop_signal = sig; }

static int sweep_run(int argc, char **argv) {
    CliArgs a;
    int rc = parse_args(&run_spec, argc, argv, &a, 1);
    if (rc >= 0) return rc;
    int jobs = 1, threads = 0;
    const char *js = cli_get(&run_spec, &a, "jobs"), *ts = cli_get(&run_spec, &a, "threads");
    if ((js && parse_count("jobs", js, 1, 1024, &jobs) != 0) ||
        (ts && parse_count("threads", ts, 1, 4096, &threads) != 0))
        return 2;
    if (!ts && jobs > 1) {
        long np = sysconf(_SC_NPROCESSORS_ONLN);
        threads = np / jobs >= 1 ? (int)(np / jobs) : 1;
    }
    const char *backend = cli_get(&run_spec, &a, "backend");
    RunState *states = NULL;
    Sweep *s = load_checked(a.positional[0], &states);
    if (!s) return 2;
    char err[2048];
    if (sweep_write_manifest(s, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab sweep: error: %s\n", err);
        free(states);
        sweep_free(s);
        return 1;
    }
    double t0 = wall_time();
    int n_todo = 0;
    for (int i = 0; i < s->n_runs; i++) n_todo += states[i] != RUN_COMPLETE;
    printf("sweep run '%s': %d runs, %d to train (%d kept), %d at a time%s%.0d%s; output in %s/NAME.log\n",
           s->name, s->n_runs, n_todo, s->n_runs - n_todo, jobs, threads ? ", run.threads=" : "",
           threads, "", s->out);
    fflush(stdout);
    struct sigaction sa = {0};
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    pid_t *pid_of = xcalloc((size_t)s->n_runs, sizeof *pid_of);  // 0: not running
    double *start = xcalloc((size_t)s->n_runs, sizeof *start);
    int next = 0, running = 0, failed = 0, done = 0;
    double last_report = t0;
    while (next < s->n_runs || running > 0) {
        if (stop_signal) {
            printf("[%5.0fs] %s: stopping the %d running run%s; `grpolab sweep run` again continues them "
                   "from their checkpoints\n", wall_time() - t0, strsignal(stop_signal), running,
                   running == 1 ? "" : "s");
            fflush(stdout);
            for (int i = 0; i < s->n_runs; i++)
                if (pid_of[i]) kill(pid_of[i], SIGTERM);
            while (running > 0 && wait(NULL) > 0) running--;
            failed = -1;
            break;
        }
        while (running < jobs && next < s->n_runs) {
            int i = next++;
            char name[1024];
            sweep_run_name(s, i, name, sizeof name);
            if (states[i] == RUN_COMPLETE) {
                printf("[%5.0fs] %s is complete: kept\n", wall_time() - t0, name);
                continue;
            }
            int n;
            char **av = train_argv(s, i, states[i], threads, backend, &n);
            char *log = xmalloc(strlen(s->out) + strlen(name) + 6);
            sprintf(log, "%s/%s.log", s->out, name);
            fflush(stdout);
            pid_t pid = fork();
            if (pid < 0) die("fork: %s", strerror(errno));
            if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
                if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) {
                    fprintf(stderr, "grpolab sweep: cannot write '%s': %s\n", log, strerror(errno));
                    _exit(127);
                }
                close(fd);
                execv(av[0], av);
                fprintf(stderr, "grpolab sweep: cannot run '%s': %s\n", av[0], strerror(errno));
                _exit(127);
            }
            printf("[%5.0fs] training %s (%d/%d, %s) -> %s/%s.h5, output in %s\n", wall_time() - t0, name,
                   i + 1, s->n_runs, STATE_NAME[states[i]], s->out, name, log);
            fflush(stdout);
            pid_of[i] = pid;
            start[i] = wall_time();
            running++;
            free(log);
            sweep_free_sets(av, n);
        }
        if (running == 0) break;
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0 && errno != EINTR) die("waitpid: %s", strerror(errno));
        if (pid <= 0) {
            sleep(1);
            if (wall_time() - last_report >= 60) {
                last_report = wall_time();
                for (int i = 0; i < s->n_runs; i++) {
                    if (!pid_of[i]) continue;
                    char name[1024], log[2048], line[512];
                    sweep_run_name(s, i, name, sizeof name);
                    snprintf(log, sizeof log, "%s/%s.log", s->out, name);
                    last_progress(log, line, sizeof line);
                    printf("[%5.0fs]   %s: %s\n", wall_time() - t0, name, line);
                }
                fflush(stdout);
            }
            continue;
        }
        for (int i = 0; i < s->n_runs; i++) {
            if (pid_of[i] != pid) continue;
            char name[1024];
            sweep_run_name(s, i, name, sizeof name);
            int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            if (ok) {
                printf("[%5.0fs] %s done (%.0f s)\n", wall_time() - t0, name, wall_time() - start[i]);
                done++;
            } else {
                printf("[%5.0fs] %s FAILED (%s %d): see %s/%s.log\n", wall_time() - t0, name,
                       WIFEXITED(status) ? "exit" : "signal",
                       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), s->out, name);
                failed++;
            }
            fflush(stdout);
            pid_of[i] = 0;
            running--;
        }
    }
    if (failed >= 0)
        printf("sweep run '%s': %d trained, %d kept, %d failed in %.0f s; `grpolab summary %s` for the table\n",
               s->name, done, s->n_runs - n_todo, failed, wall_time() - t0, s->out);
    free(pid_of);
    free(start);
    free(states);
    sweep_free(s);
    return failed < 0 ? 128 + (int)stop_signal : failed ? 1 : 0;
}

// ---------------------------------------------------------------- task

static const CliOption task_opts[] = {
    {"threads", "T", "run.threads of the run (default: the config's)"},
    {"backend", "NAME", "auto|cpu|cuda (default: run.backend)"},
};
static const CliSpec task_spec = {
    "sweep task",
    "Train run INDEX of a sweep file (one task of the job array of `grpolab sweep slurm`): kept\n"
    "if complete, continued from its checkpoint if interrupted, refused if its log was made with\n"
    "another config; else trained. The training's output goes to this command's output.",
    "FILE INDEX [--threads T] [--backend NAME]", task_opts, 2, 2, "FILE INDEX"};

static int sweep_task(int argc, char **argv) {
    CliArgs a;
    int rc = parse_args(&task_spec, argc, argv, &a, 2);
    if (rc >= 0) return rc;
    int threads = 0, index;
    const char *ts = cli_get(&task_spec, &a, "threads");
    if (ts && parse_count("threads", ts, 1, 4096, &threads) != 0) return 2;
    char err[2048];
    Sweep *s = sweep_load(a.positional[0], err, sizeof err);
    if (!s) {
        fprintf(stderr, "grpolab sweep: error: %s\n", err);
        return 2;
    }
    char *end;
    long ix = strtol(a.positional[1], &end, 10);
    if (!*a.positional[1] || *end || ix < 0 || ix >= s->n_runs) {
        fprintf(stderr, "grpolab sweep task: error: INDEX '%s': expected a run of %s, 0 to %d\n",
                a.positional[1], s->path, s->n_runs - 1);
        sweep_free(s);
        return 2;
    }
    index = (int)ix;
    char name[1024];
    Config *c = NULL;
    if (sweep_run_name(s, index, name, sizeof name) != 0 || !(c = sweep_run_config(s, index, err, sizeof err))) {
        fprintf(stderr, "grpolab sweep: error: %s\n", c ? "the run's name is too long" : err);
        sweep_free(s);
        return 2;
    }
    RunState st = run_state(s, index, c, err, sizeof err);
    config_free(c);
    char *path = sweep_run_path(s, index);
    printf("sweep task %d/%d of '%s': %s -> %s: %s\n", index, s->n_runs, s->name, name, path, STATE_NAME[st]);
    fflush(stdout);
    free(path);
    if (st == RUN_REFUSED) {
        fprintf(stderr, "grpolab sweep: error: %s\n", err);
        sweep_free(s);
        return 1;
    }
    if (st == RUN_COMPLETE) {
        sweep_free(s);
        return 0;
    }
    if (sweep_make_out_dir(s, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab sweep: error: %s\n", err);
        sweep_free(s);
        return 1;
    }
    int n;
    char **av = train_argv(s, index, st, threads, cli_get(&task_spec, &a, "backend"), &n);
    sweep_free(s);
    execv(av[0], av);
    fprintf(stderr, "grpolab sweep: error: cannot run '%s': %s\n", av[0], strerror(errno));
    sweep_free_sets(av, n);
    return 1;
}

// ---------------------------------------------------------------- slurm

static const CliOption slurm_opts[] = {
    {"partition", "NAME", "#SBATCH --partition (default: [slurm] partition; none: the cluster's default)"},
    {"account", "NAME", "#SBATCH --account (default: [slurm] account)"},
    {"time", "LIMIT", "#SBATCH --time per task, e.g. 02:00:00 (default: [slurm] time)"},
    {"cpus", "N", "#SBATCH --cpus-per-task, also each run's run.threads (default: [slurm] cpus, 1)"},
    {"gpus", "N", "#SBATCH --gres=gpu:N per task (default: [slurm] gpus, 0)"},
    {"mem", "SIZE", "#SBATCH --mem per task, e.g. 8G (default: [slurm] mem)"},
    {"max-parallel", "N", "at most N tasks at a time (--array=...%N; default: [slurm] max_parallel, no limit)"},
    {"script", "FILE", "the batch script to write (default: OUT/sweep.sbatch)"},
    {"submit", NULL, "submit it with sbatch and print the job id"},
};
static const CliSpec slurm_spec = {
    "sweep slurm",
    "Write an sbatch script for a Slurm job array with one task per run of a sweep file: task i\n"
    "runs `grpolab sweep task FILE i` (resumable: a complete run is kept, an interrupted one\n"
    "continues from its checkpoint), its output in OUT/logs/task-i.log. The binary, FILE and\n"
    "this directory are named by absolute path: the nodes must see them (a shared file system).\n"
    "Options come from the sweep file's [slurm] section; the flags override it.",
    "FILE [--partition NAME] [--account NAME] [--time LIMIT] [--cpus N] [--gpus N] [--mem SIZE]\n"
    "       [--max-parallel N] [--script FILE] [--submit]",
    slurm_opts, 9, 1, "FILE"};

// Writes s as a shell word in single quotes.
static void put_quoted(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

// An absolute version of path (malloc'd): realpath where it exists, else cwd/path.
static char *absolute(const char *path) {
    char *r = realpath(path, NULL);
    if (r) return r;
    if (path[0] == '/') return xstrdup(path);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) die("getcwd: %s", strerror(errno));
    char *p = xmalloc(strlen(cwd) + strlen(path) + 2);
    sprintf(p, "%s/%s", cwd, path);
    return p;
}

// [slurm] overridden by the flags; -1 after printing an error.
static int slurm_options(const Sweep *s, const CliArgs *a, SweepSlurm *o) {
    *o = s->slurm;
    // the flags go through the sweep file's own checks: one [slurm] line of text each
    static const char *const keys[][2] = {{"partition", "partition"}, {"account", "account"},
                                          {"time", "time"}, {"cpus", "cpus"}, {"gpus", "gpus"},
                                          {"mem", "mem"}, {"max-parallel", "max_parallel"}};
    char text[4096] = "[sweep]\nconfig = -\nout = -\n[grid]\nrun.seed = 1\n[slurm]\n";
    int any = 0;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const char *v = cli_get(&slurm_spec, a, keys[k][0]);
        if (!v) continue;
        if (strchr(v, '\n') || strlen(text) + strlen(v) + 64 > sizeof text) {
            fprintf(stderr, "grpolab sweep slurm: error: --%s: a value on one short line, please\n", keys[k][0]);
            return -1;
        }
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s = %s\n", keys[k][1], v);
        any = 1;
    }
    if (!any) return 0;
    char err[1024];
    Sweep *f = sweep_load_text(text, "the command line", err, sizeof err);
    if (!f) {
        fprintf(stderr, "grpolab sweep slurm: error: %s\n", err);
        return -1;
    }
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        if (!cli_get(&slurm_spec, a, keys[k][0])) continue;
        const char *key = keys[k][1];
        if (!strcmp(key, "partition")) o->partition = xstrdup(f->slurm.partition);
        if (!strcmp(key, "account")) o->account = xstrdup(f->slurm.account);
        if (!strcmp(key, "time")) o->time = xstrdup(f->slurm.time);
        if (!strcmp(key, "mem")) o->mem = xstrdup(f->slurm.mem);
        if (!strcmp(key, "cpus")) o->cpus = f->slurm.cpus;
        if (!strcmp(key, "gpus")) o->gpus = f->slurm.gpus;
        if (!strcmp(key, "max_parallel")) o->max_parallel = f->slurm.max_parallel;
    }
    sweep_free(f);
    return 0;
}

static int write_sbatch(const Sweep *s, const SweepSlurm *o, const char *script, char *err, size_t errlen) {
    char *out = absolute(s->out), *file = absolute(s->path), cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) die("getcwd: %s", strerror(errno));
    FILE *f = fopen(script, "w");
    if (!f) {
        set_err(err, errlen, "cannot write '%s': %s", script, strerror(errno));
        free(out);
        free(file);
        return -1;
    }
    fprintf(f, "#!/bin/bash\n"
               "# grpolab sweep '%s' (%s) as a Slurm job array: task i trains run i of the sweep\n"
               "# (`grpolab sweep plan` lists them); written by `grpolab sweep slurm`. A task that\n"
               "# is run again keeps a complete run and continues an interrupted one.\n",
            s->name, file);
    fprintf(f, "#SBATCH --job-name=grpolab-%s\n", s->name);
    fprintf(f, "#SBATCH --array=0-%d", s->n_runs - 1);
    if (o->max_parallel > 0) fprintf(f, "%%%d", o->max_parallel);
    fprintf(f, "\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=%d\n", o->cpus);
    fprintf(f, "#SBATCH --output=%s/logs/task-%%a.log\n", out);
    if (o->partition) fprintf(f, "#SBATCH --partition=%s\n", o->partition);
    if (o->account) fprintf(f, "#SBATCH --account=%s\n", o->account);
    if (o->time) fprintf(f, "#SBATCH --time=%s\n", o->time);
    if (o->mem) fprintf(f, "#SBATCH --mem=%s\n", o->mem);
    if (o->gpus > 0) fprintf(f, "#SBATCH --gres=gpu:%d\n", o->gpus);
    fprintf(f, "set -eu\ncd ");
    put_quoted(f, cwd);
    fprintf(f, "\nexec ");
    put_quoted(f, self_exe());
    fprintf(f, " sweep task ");
    put_quoted(f, file);
    fprintf(f, " \"$SLURM_ARRAY_TASK_ID\" --threads %d\n", o->cpus);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    free(out);
    free(file);
    if (bad) return set_err(err, errlen, "cannot write '%s'", script);
    chmod(script, 0755);
    return 0;
}

static int sweep_slurm(int argc, char **argv) {
    CliArgs a;
    int rc = parse_args(&slurm_spec, argc, argv, &a, 1);
    if (rc >= 0) return rc;
    RunState *states = NULL;
    Sweep *s = load_checked(a.positional[0], &states);
    if (!s) return 2;
    free(states);
    SweepSlurm o;
    char err[2048];
    if (slurm_options(s, &a, &o) != 0) {
        sweep_free(s);
        return 2;
    }
    char *script = cli_get(&slurm_spec, &a, "script") ? xstrdup(cli_get(&slurm_spec, &a, "script")) : NULL;
    if (!script) {
        script = xmalloc(strlen(s->out) + 16);
        sprintf(script, "%s/sweep.sbatch", s->out);
    }
    char *logs = xmalloc(strlen(s->out) + 8);
    sprintf(logs, "%s/logs", s->out);
    rc = sweep_write_manifest(s, err, sizeof err);
    if (rc == 0 && mkdir(logs, 0777) != 0 && errno != EEXIST)
        rc = set_err(err, sizeof err, "cannot create '%s': %s", logs, strerror(errno));
    if (rc == 0) rc = write_sbatch(s, &o, script, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "grpolab sweep slurm: error: %s\n", err);
        rc = 1;
    }
    if (rc == 0) {
        printf("sweep slurm: wrote %s: a job array of %d task%s (%d CPU%s, %d GPU%s each), logs %s/task-<i>.log\n",
               script, s->n_runs, s->n_runs == 1 ? "" : "s", o.cpus, o.cpus == 1 ? "" : "s", o.gpus,
               o.gpus == 1 ? "" : "s", logs);
    }
    if (rc == 0 && cli_flag(&slurm_spec, &a, "submit")) {
        char *cmd = xmalloc(2 * strlen(script) + 64);
        sprintf(cmd, "sbatch --parsable ");
        char *q = cmd + strlen(cmd);
        *q++ = '\'';
        for (const char *p = script; *p; p++) {
            if (*p == '\'') q += sprintf(q, "'\\''");
            else *q++ = *p;
        }
        sprintf(q, "'");
        fflush(stdout);
        FILE *p = popen(cmd, "r");
        char id[256] = "";
        if (p && !fgets(id, sizeof id, p)) id[0] = '\0';
        int st = p ? pclose(p) : -1;
        id[strcspn(id, ";\n")] = '\0';  // --parsable: "JOBID" or "JOBID;CLUSTER"
        if (st != 0 || !id[0]) {
            fprintf(stderr, "grpolab sweep slurm: error: `%s` failed (%s): the script is written; submit it by "
                    "hand where Slurm runs\n", cmd, st == -1 ? strerror(errno)
                    : WIFEXITED(st) && WEXITSTATUS(st) == 127 ? "no sbatch on PATH" : "see its message above");
            rc = 1;
        } else {
            printf("sweep slurm: submitted job %s (tasks %s_0 .. %s_%d); squeue -j %s to watch\n", id, id, id,
                   s->n_runs - 1, id);
        }
        free(cmd);
    }
    if (o.partition != s->slurm.partition) free(o.partition);
    if (o.account != s->slurm.account) free(o.account);
    if (o.time != s->slurm.time) free(o.time);
    if (o.mem != s->slurm.mem) free(o.mem);
    free(script);
    free(logs);
    sweep_free(s);
    return rc;
}

// ---------------------------------------------------------------- dispatch

int cmd_sweep(int argc, char **argv) {
    static const struct {
        const char *name, *summary;
        int (*run)(int, char **);
    } subs[] = {
        {"plan", "list the runs, their names, --set lines and the state of their logs", sweep_plan},
        {"run", "train the runs here, N at a time (--jobs N)", sweep_run},
        {"slurm", "write (and --submit) an sbatch script for a job array, one task per run", sweep_slurm},
        {"task", "train one run of the sweep (a task of the job array)", sweep_task},
    };
    const char *sub = argc >= 2 ? argv[1] : NULL;
    for (size_t i = 0; sub && i < sizeof subs / sizeof subs[0]; i++)
        if (strcmp(sub, subs[i].name) == 0) return subs[i].run(argc - 1, argv + 1);
    int help = sub && (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0);
    FILE *f = help ? stdout : stderr;
    if (sub && !help) fprintf(f, "grpolab sweep: error: unknown subcommand '%s'\n", sub);
    fprintf(f, "usage: grpolab sweep <subcommand> FILE [options]   (grpolab sweep <subcommand> --help)\n\n"
               "A sweep file names a base config, a grid of settings and an output directory\n"
               "(docs/scaling.md); each combination of the grid is one `grpolab train` run.\n\n");
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) fprintf(f, "  %-6s %s\n", subs[i].name, subs[i].summary);
    return help ? 0 : 2;
}
