// cmd_sweep.c: `grpolab sweep plan|run|slurm|task|status FILE` (docs/cli.md, docs/scaling.md).
// Every run is a `grpolab train` of this same binary: `run` starts them here N at a time,
// `slurm` writes (and submits) a job array whose task i runs `sweep task FILE i`
// (cmd_sweep_slurm.c; what the two files share: sweep_cmd.h). Before
// anything is trained, every run's config is resolved and every run log that exists is
// compared with the config it would be trained with now: a finished run is kept, an
// interrupted one continues from its checkpoint (train --resume), as does a complete one whose
// train.steps the sweep raises (it extends from its last step); one made with another config
// (fewer train.steps included) stops the sweep with the keys that differ.
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../analysis/runs.h"
#include "../../common.h"
#include "../model/checkpoint.h"
#include "../io/cli.h"
#include "../io/h5util.h"
#include "../rl/resume.h"
#include "../sweep/sweep.h"
#include "../rl/train.h"
#include "commands.h"
#include "sweep_cmd.h"

static const char *const STATE_NAME[] = {"new", "complete (kept)", "resumes from its checkpoint",
                                         "trains again (no checkpoint yet)",
                                         "extends from its last step (train.steps raised)", "REFUSED"};

// execv of this very binary with av (av[0] its path, for messages): through /proc/self/exe,
// which stays the running file where the binary was rebuilt meanwhile (its path then names
// a new file, or none). Returns only on failure.
static void exec_self(char **av) {
    execv("/proc/self/exe", av);
    execv(av[0], av);
}

// The argv of run i's `grpolab train` (NULL-terminated, malloc'd strings; free with
// sweep_free_sets(argv, *argc)). threads > 0 sets run.threads; backend may be NULL.
static char **train_argv(const Sweep *s, int i, RunState st, int threads, const char *backend, int *argc) {
    char **grid = sweep_run_grid_sets(s, i);
    int cap = 12 + 2 * (s->n_sets + s->n_axes), n = 0;
    char **av = xcalloc((size_t)cap, sizeof *av);
    av[n++] = xstrdup(sweep_cmd_self_exe());
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
    av[n++] = xstrdup(st == RUN_RESUME || st == RUN_EXTEND ? "--resume" : "--overwrite");
    sweep_free_sets(grid, s->n_axes);
    *argc = n;
    return av;
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
    int rc = sweep_cmd_args(&plan_spec, argc, argv, &a, 1);
    if (rc >= 0) return rc;
    Sweep *s = sweep_cmd_load(a.positional[0], NULL);
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
        RunState st = sweep_cmd_run_state(s, i, c, err, sizeof err);
        config_free(c);
        char **grid = sweep_run_grid_sets(s, i);
        printf("%4d  %-32s ", i, name);
        for (int ax = 0; ax < s->n_axes; ax++) printf(" --set %s", grid[ax]);
        printf("   [%s%s%s]\n", STATE_NAME[st], st == RUN_EXTEND ? ": " : "", st == RUN_EXTEND ? err : "");
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
    "Train the runs of sweep files on this machine, N at a time, each with its output in\n"
    "OUT/NAME.log and a progress line per running run every minute. Complete runs are kept,\n"
    "interrupted ones continue from their checkpoint; a run log made with another config stops\n"
    "the command before anything is trained. Several FILEs share one queue of N places, in\n"
    "the order given (their runs in each file's order), so that a long sweep does not wait for\n"
    "a short one. Writes OUT/sweep.runs of each file for `grpolab summary OUT`.",
    "FILE... [--jobs N] [--threads T] [--backend NAME]", run_opts, 3, 64, "FILE"};

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


// One run of the queue `sweep run` works through: run i of sweep k.
typedef struct {
    int k, i;
    pid_t pid;     // 0: not running
    double start;  // wall time it started
} Job;

static int sweep_run(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&run_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    if (a.n_positional < 1) {
        cli_print_usage(&run_spec, stderr);
        return 2;
    }
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
    // every file is read and checked before anything is trained
    int ns = a.n_positional, n_jobs = 0, bad = 0;
    Sweep **sw = xcalloc((size_t)ns, sizeof *sw);
    RunState **states = xcalloc((size_t)ns, sizeof *states);
    for (int k = 0; k < ns; k++) {
        if (!(sw[k] = sweep_cmd_load(a.positional[k], &states[k]))) {
            bad = 1;
            continue;
        }
        n_jobs += sw[k]->n_runs;
        for (int j = 0; j < k; j++)
            if (sw[j] && strcmp(sw[j]->out, sw[k]->out) == 0) {
                fprintf(stderr, "grpolab sweep: error: %s and %s both write to out = %s (one directory "
                        "per sweep: its sweep.runs lists that sweep's runs)\n", a.positional[j],
                        a.positional[k], sw[k]->out);
                bad = 1;
            }
    }
    char err[2048];
    for (int k = 0; k < ns && !bad; k++)
        if (sweep_write_manifest(sw[k], err, sizeof err) != 0) {
            fprintf(stderr, "grpolab sweep: error: %s\n", err);
            bad = 1;
        }
    if (bad) {
        for (int k = 0; k < ns; k++) free(states[k]), sweep_free(sw[k]);
        free(states), free(sw);
        return 2;
    }
    double t0 = wall_time();
    Job *q = xcalloc((size_t)n_jobs, sizeof *q);
    int *n_todo = xcalloc((size_t)ns, sizeof *n_todo), *n_done = xcalloc((size_t)ns, sizeof *n_done),
        *n_failed = xcalloc((size_t)ns, sizeof *n_failed);
    for (int k = 0, n = 0; k < ns; k++) {
        const Sweep *s = sw[k];
        for (int i = 0; i < s->n_runs; i++, n++) {
            q[n] = (Job){.k = k, .i = i};
            n_todo[k] += states[k][i] != RUN_COMPLETE;
        }
        printf("sweep run '%s': %d run%s, %d to train (%d kept), %d at a time%s%s%.0d%s; output in %s/NAME.log\n",
               s->name, s->n_runs, s->n_runs == 1 ? "" : "s", n_todo[k], s->n_runs - n_todo[k], jobs, ns > 1 ? " with the other files'" : "",
               threads ? ", run.threads=" : "", threads, "", s->out);
    }
    fflush(stdout);
    struct sigaction sa = {0};
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int next = 0, running = 0, stopped = 0;
    double last_report = t0;
    while (next < n_jobs || running > 0) {
        if (stop_signal) {
            printf("[%5.0fs] %s: stopping the %d running run%s; `grpolab sweep run` again continues them "
                   "from their checkpoints\n", wall_time() - t0, strsignal(stop_signal), running,
                   running == 1 ? "" : "s");
            fflush(stdout);
            for (int n = 0; n < n_jobs; n++)
                if (q[n].pid) kill(q[n].pid, SIGTERM);
            while (running > 0 && wait(NULL) > 0) running--;
            stopped = 1;
            break;
        }
        while (running < jobs && next < n_jobs) {
            Job *jb = &q[next++];
            const Sweep *s = sw[jb->k];
            RunState st = states[jb->k][jb->i];
            char name[1024];
            sweep_run_name(s, jb->i, name, sizeof name);
            if (st == RUN_COMPLETE) {
                printf("[%5.0fs] %s is complete: kept\n", wall_time() - t0, name);
                continue;
            }
            int n;
            char **av = train_argv(s, jb->i, st, threads, backend, &n);
            char *log = xasprintf("%s/%s.log", s->out, name);
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
                exec_self(av);
                fprintf(stderr, "grpolab sweep: cannot run '%s': %s\n", av[0], strerror(errno));
                _exit(127);
            }
            printf("[%5.0fs] training %s (%d/%d, %s) -> %s/%s.h5, output in %s\n", wall_time() - t0, name,
                   jb->i + 1, s->n_runs, STATE_NAME[st], s->out, name, log);
            fflush(stdout);
            jb->pid = pid;
            jb->start = wall_time();
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
                for (int n = 0; n < n_jobs; n++) {
                    if (!q[n].pid) continue;
                    char name[1024], line[512];
                    sweep_run_name(sw[q[n].k], q[n].i, name, sizeof name);
                    char *log = xasprintf("%s/%s.log", sw[q[n].k]->out, name);
                    last_progress(log, line, sizeof line);
                    free(log);
                    printf("[%5.0fs]   %s: %s\n", wall_time() - t0, name, line);
                }
                fflush(stdout);
            }
            continue;
        }
        for (int n = 0; n < n_jobs; n++) {
            Job *jb = &q[n];
            if (jb->pid != pid) continue;
            char name[1024];
            sweep_run_name(sw[jb->k], jb->i, name, sizeof name);
            if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                printf("[%5.0fs] %s done (%.0f s)\n", wall_time() - t0, name, wall_time() - jb->start);
                n_done[jb->k]++;
            } else {
                printf("[%5.0fs] %s FAILED (%s %d): see %s/%s.log\n", wall_time() - t0, name,
                       WIFEXITED(status) ? "exit" : "signal",
                       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), sw[jb->k]->out, name);
                n_failed[jb->k]++;
            }
            fflush(stdout);
            jb->pid = 0;
            running--;
        }
    }
    int failed = 0;
    for (int k = 0; k < ns; k++) {
        failed += n_failed[k];
        if (!stopped)
            printf("sweep run '%s': %d trained, %d kept, %d failed in %.0f s; `grpolab summary %s` for the table\n",
                   sw[k]->name, n_done[k], sw[k]->n_runs - n_todo[k], n_failed[k], wall_time() - t0, sw[k]->out);
        free(states[k]);
        sweep_free(sw[k]);
    }
    free(q), free(n_todo), free(n_done), free(n_failed), free(states), free(sw);
    return stopped ? 128 + (int)stop_signal : failed ? 1 : 0;
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
    int rc = sweep_cmd_args(&task_spec, argc, argv, &a, 2);
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
    RunState st = sweep_cmd_run_state(s, index, c, err, sizeof err);
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
    exec_self(av);
    fprintf(stderr, "grpolab sweep: error: cannot run '%s': %s\n", av[0], strerror(errno));
    sweep_free_sets(av, n);
    return 1;
}

// ---------------------------------------------------------------- status

static const CliSpec status_spec = {
    "sweep status",
    "The state of every run of a sweep file, trained here (`sweep run`) or by Slurm (`sweep\n"
    "slurm`): done; running (a process here holds its log's lock, or squeue says the array\n"
    "task runs); queued (squeue: pending); resumable (stopped, with the step of its checkpoint;\n"
    "a `sweep run` or a resubmitted array goes on from there); failed (the last error line of\n"
    "its output, OUT/NAME.log or OUT/logs/task-i.log); refused (made with another config);\n"
    "new. Exit 0 when every run is done, 1 when one failed or is refused, 3 otherwise.",
    "FILE", NULL, 0, 1, "FILE"};

// The Slurm state of each run ("RUNNING", "PENDING", ...; NULL: not in the queue) from squeue,
// for the job arrays OUT/slurm.jobs lists. 0, or -1 where the file lists jobs but squeue
// cannot be asked (then every state is NULL).
static int slurm_states(const Sweep *s, char **state, char **job) {
    char *jobs = xasprintf("%s/%s", s->out, SLURM_JOBS);
    FILE *f = fopen(jobs, "r");
    free(jobs);
    if (!f) return 0;
    char id[64];
    int rc = 0;
    while (fgets(id, sizeof id, f)) {  // later arrays override earlier ones
        id[strcspn(id, "\n")] = '\0';
        if (!*id || strspn(id, "0123456789") != strlen(id)) continue;
        char *cmd = xasprintf("squeue -h -r -j %s -o '%%F %%K %%T' 2>/dev/null", id);
        FILE *p = popen(cmd, "r");
        free(cmd);
        char line[256];
        int any = 0;
        while (p && fgets(line, sizeof line, p)) {
            char array[64], st[64];
            int task;
            if (sscanf(line, "%63s %d %63s", array, &task, st) != 3 || task < 0 || task >= s->n_runs) continue;
            free(state[task]);
            free(job[task]);
            state[task] = xstrdup(st);
            job[task] = xasprintf("%s_%d", array, task);
            any = 1;
        }
        int ps = p ? pclose(p) : -1;
        // squeue answers 1 for a job that has left the queue; 127: no squeue
        if (!any && (ps == -1 || (WIFEXITED(ps) && WEXITSTATUS(ps) == 127))) rc = -1;
    }
    fclose(f);
    return rc;
}

// The output of run i's last attempt: the newer of OUT/NAME.log (`sweep run`) and
// OUT/logs/task-i.log (`sweep slurm`), malloc'd, or NULL if neither exists.
static char *run_output(const Sweep *s, int i, const char *name) {
    char *a = xasprintf("%s/%s.log", s->out, name), *b = xasprintf("%s/logs/task-%d.log", s->out, i);
    struct stat sa, sb;
    int ha = stat(a, &sa) == 0, hb = stat(b, &sb) == 0;
    char *pick = ha && (!hb || sa.st_mtime >= sb.st_mtime) ? a : hb ? b : NULL;
    if (pick != a) free(a);
    if (pick != b) free(b);
    return pick;
}

// The last line with "error:" of the output's last attempt (after its last "sweep task" line:
// a task log gathers every attempt of the task) into line; 0 if there is none.
static int last_error(const char *output, char *line, size_t len) {
    FILE *f = output ? fopen(output, "r") : NULL;
    if (!f) return 0;
    char buf[1024];
    int found = 0;
    while (fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = '\0';
        if (strncmp(buf, "sweep task ", 11) == 0) found = 0;
        if (strstr(buf, "error:") && !strstr(buf, "slurmstepd")) {  // Slurm's own: a kill, not a failure
            snprintf(line, len, "%s", buf);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static int sweep_status(int argc, char **argv) {
    CliArgs a;
    int rc = sweep_cmd_args(&status_spec, argc, argv, &a, 1);
    if (rc >= 0) return rc;
    Sweep *s = sweep_cmd_load(a.positional[0], NULL);
    if (!s) return 2;
    char **sl_state = xcalloc((size_t)s->n_runs, sizeof *sl_state);
    char **sl_job = xcalloc((size_t)s->n_runs, sizeof *sl_job);
    int no_squeue = slurm_states(s, sl_state, sl_job) != 0;
    enum { DONE, RUNNING, QUEUED, RESUMABLE, FAILED, REFUSED, NEW, N_KINDS };
    static const char *const KIND[] = {"done", "running", "queued", "resumable", "failed", "refused", "new"};
    int count[N_KINDS] = {0};
    char *lines = NULL;
    size_t lines_len = 0;
    FILE *mem = open_memstream(&lines, &lines_len);
    if (!mem) die("open_memstream: %s", strerror(errno));
    for (int i = 0; i < s->n_runs; i++) {
        char name[1024], msg[2048];
        sweep_run_name(s, i, name, sizeof name);
        char *path = sweep_run_path(s, i), *output = run_output(s, i, name), *detail = NULL;
        Config *c = sweep_run_config(s, i, msg, sizeof msg);  // resolved by sweep_check
        RunState st = sweep_cmd_run_state(s, i, c, msg, sizeof msg);
        long long steps = (long long)config_settings(c)->train.steps;
        config_free(c);
        long pid = out_writer(path);
        const char *sq = sl_state[i];
        int kind;
        if (pid || (sq && !strcmp(sq, "RUNNING"))) {
            kind = RUNNING;
            char progress[512] = "no output yet", by[160] = "";
            if (output) last_progress(output, progress, sizeof progress);
            if (pid) snprintf(by, sizeof by, " (pid %ld)", pid);
            else snprintf(by, sizeof by, " (Slurm task %s)", sl_job[i]);
            detail = xasprintf("%s%s", progress, by);
        } else if (sq && st != RUN_COMPLETE) {
            kind = QUEUED;
            detail = xasprintf("Slurm task %s is %s", sl_job[i], sq);
        } else if (st == RUN_REFUSED) {
            kind = REFUSED;
            detail = xstrdup(msg);
        } else if (st == RUN_COMPLETE) {
            kind = DONE;
            detail = xasprintf("%lld of %lld steps", steps, steps);
        } else {
            char *where = NULL;
            if (st == RUN_RESUME) {
                char *ckpt = path_with_suffix(path, RESUME_CKPT_SUFFIX), e[512];
                int64_t at = -1;
                where = checkpoint_read_meta(ckpt, NULL, NULL, NULL, NULL, &at, NULL, e, sizeof e) == 0
                            ? xasprintf("checkpoint at step %lld of %lld", (long long)at, steps)
                            : xasprintf("its checkpoint cannot be read: %s", e);
                free(ckpt);
            } else if (st == RUN_EXTEND) {
                where = xasprintf("complete; train.steps raised: extends %s", msg);
            } else if (st == RUN_RESTART) {
                where = xasprintf("no checkpoint yet: starts again at step 0 of %lld", steps);
            } else {
                where = xstrdup("");
            }
            char err_line[1024];
            if (st != RUN_EXTEND && last_error(output, err_line, sizeof err_line)) {
                kind = FAILED;
                detail = xasprintf("%s (%s)%s%s", err_line, output, where[0] ? "; " : "", where);
            } else {
                kind = st == RUN_NEW ? NEW : RESUMABLE;
                detail = xstrdup(where);
            }
            free(where);
        }
        count[kind]++;
        fprintf(mem, "%4d  %-32s %-9s  %s\n", i, name, KIND[kind], detail);
        free(detail);
        free(path);
        free(output);
    }
    fclose(mem);
    printf("sweep '%s' (%s): %d run%s:", s->name, s->path, s->n_runs, s->n_runs == 1 ? "" : "s");
    for (int k = 0, first = 1; k < N_KINDS; k++)
        if (count[k]) printf("%s %d %s", first ? "" : ",", count[k], KIND[k]), first = 0;
    printf("\n%s", lines);
    if (no_squeue)
        printf("note: %s/%s lists Slurm jobs but squeue cannot be asked here: Slurm's running and queued "
               "tasks are not shown\n", s->out, SLURM_JOBS);
    free(lines);
    for (int i = 0; i < s->n_runs; i++) free(sl_state[i]), free(sl_job[i]);
    free(sl_state);
    free(sl_job);
    int all_done = count[DONE] == s->n_runs;
    sweep_free(s);
    fflush(stdout);
    return count[FAILED] || count[REFUSED] ? 1 : all_done ? 0 : 3;
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
        {"status", "the state of each run: done, running, queued, resumable, failed, new", sweep_status},
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
