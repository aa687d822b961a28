// cmd_sweep_slurm.c: `grpolab sweep slurm FILE` (docs/cli.md, docs/scaling.md): writes (and
// with --submit submits) a Slurm job array whose task i runs `grpolab sweep task FILE i`.
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common.h"
#include "../io/cli.h"
#include "../sweep/sweep.h"
#include "commands.h"
#include "sweep_cmd.h"

static const CliOption slurm_opts[] = {
    {"partition", "NAME", "#SBATCH --partition (default: [slurm] partition; none: the cluster's default)"},
    {"account", "NAME", "#SBATCH --account (default: [slurm] account)"},
    {"time", "LIMIT", "#SBATCH --time per task, e.g. 02:00:00 (default: [slurm] time)"},
    {"cpus", "N", "#SBATCH --cpus-per-task, also each run's run.threads (default: [slurm] cpus, 1)"},
    {"gpus", "N", "#SBATCH --gres=gpu:N per task (default: [slurm] gpus, 0)"},
    {"mem", "SIZE", "#SBATCH --mem per task, e.g. 8G (default: [slurm] mem)"},
    {"max-parallel", "N", "at most N tasks at a time (--array=...%N; default: [slurm] max_parallel, no limit)"},
    {"signal", "SECS", "SIGTERM to the training SECS before the time limit, to checkpoint (#SBATCH "
                       "--signal=B:TERM@SECS; default: [slurm] signal, 300; 0: none)"},
    {"requeue", NULL, "#SBATCH --requeue: Slurm may requeue a preempted task (the default; [slurm] requeue)"},
    {"no-requeue", NULL, "#SBATCH --no-requeue instead"},
    {"script", "FILE", "the batch script to write (default: OUT/sweep.sbatch)"},
    {"submit", NULL, "submit it with sbatch and print the job id"},
};
static const CliSpec slurm_spec = {
    "sweep slurm",
    "Write an sbatch script for a Slurm job array with one task per run of a sweep file: task i\n"
    "runs `grpolab sweep task FILE i` (resumable: a complete run is kept, an interrupted one\n"
    "continues from its checkpoint), its output in OUT/logs/task-i.log. The training gets SIGTERM\n"
    "before the time limit (--signal) or at preemption and saves a checkpoint; a requeued or\n"
    "resubmitted task goes on from it. The binary, FILE and this directory are named by\n"
    "absolute path: the nodes must see them (a shared file system). Options come from the\n"
    "sweep file's [slurm] section; the flags override it.",
    "FILE [--partition NAME] [--account NAME] [--time LIMIT] [--cpus N] [--gpus N] [--mem SIZE]\n"
    "       [--max-parallel N] [--signal SECS] [--requeue | --no-requeue] [--script FILE] [--submit]",
    slurm_opts, 12, 1, "FILE"};

// An absolute version of path (malloc'd): realpath where it exists, else cwd/path.
static char *absolute(const char *path) {
    char *r = realpath(path, NULL);
    if (r) return r;
    if (path[0] == '/') return xstrdup(path);
    char *cwd = getcwd(NULL, 0);
    if (!cwd) die("getcwd: %s", strerror(errno));
    char *p = xasprintf("%s/%s", cwd, path);
    free(cwd);
    return p;
}

// [slurm] overridden by the flags (strings malloc'd; free with free_slurm_options); -1 after
// printing an error.
static int slurm_options(const Sweep *s, const CliArgs *a, SweepSlurm *o) {
    *o = s->slurm;
    o->partition = s->slurm.partition ? xstrdup(s->slurm.partition) : NULL;
    o->account = s->slurm.account ? xstrdup(s->slurm.account) : NULL;
    o->time = s->slurm.time ? xstrdup(s->slurm.time) : NULL;
    o->mem = s->slurm.mem ? xstrdup(s->slurm.mem) : NULL;
    if (cli_flag(&slurm_spec, a, "requeue") && cli_flag(&slurm_spec, a, "no-requeue")) {
        fprintf(stderr, "grpolab sweep slurm: error: --requeue and --no-requeue: give one\n");
        return -1;
    }
    if (cli_flag(&slurm_spec, a, "requeue")) o->requeue = 1;
    if (cli_flag(&slurm_spec, a, "no-requeue")) o->requeue = 0;
    // the flags go through the sweep file's own checks: one [slurm] line of text each
    static const char *const keys[][2] = {{"partition", "partition"}, {"account", "account"},
                                          {"time", "time"}, {"cpus", "cpus"}, {"gpus", "gpus"},
                                          {"mem", "mem"}, {"max-parallel", "max_parallel"},
                                          {"signal", "signal"}};
    enum { N_KEYS = sizeof keys / sizeof keys[0] };
    for (size_t k = 0; k < N_KEYS; k++) {
        const char *v = cli_get(&slurm_spec, a, keys[k][0]);
        if (!v) continue;
        if (strpbrk(v, "\n\r#;")) {
            fprintf(stderr, "grpolab sweep slurm: error: --%s '%s': expected one word, without a line "
                    "break, '#' or ';'\n", keys[k][0], v);
            return -1;
        }
        char err[1024];
        char *text = xasprintf("[sweep]\nconfig = -\nout = -\n[grid]\nrun.seed = 1\n[slurm]\n%s = %s\n",
                               keys[k][1], v);
        Sweep *f = sweep_load_text(text, "the command line", err, sizeof err);
        free(text);
        if (!f) {
            fprintf(stderr, "grpolab sweep slurm: error: %s\n", err);
            return -1;
        }
        char **str = k == 0 ? &o->partition : k == 1 ? &o->account : k == 2 ? &o->time : k == 5 ? &o->mem : NULL;
        const char *got = k == 0 ? f->slurm.partition : k == 1 ? f->slurm.account : k == 2 ? f->slurm.time
                                                                : k == 5 ? f->slurm.mem : NULL;
        if (str) {
            free(*str);
            *str = xstrdup(got);
        }
        if (k == 3) o->cpus = f->slurm.cpus;
        if (k == 4) o->gpus = f->slurm.gpus;
        if (k == 6) o->max_parallel = f->slurm.max_parallel;
        if (k == 7) o->signal_secs = f->slurm.signal_secs;
        sweep_free(f);
    }
    return 0;
}

static void free_slurm_options(SweepSlurm *o) {
    free(o->partition);
    free(o->account);
    free(o->time);
    free(o->mem);
}

// v as one argument of an #SBATCH line (malloc'd), or NULL with a message: sbatch reads those
// lines itself, not through a shell, with its own quoting ("..." and \X, '#' starting a
// comment); what is not a plain word is written in double quotes with \" for '"'. pattern: v
// is a file name pattern, where '%' is written '%%'. A line break or other control character
// but a tab, or a backslash (which turns the pattern off), cannot be written there.
static char *sbatch_word(const char *what, const char *v, int pattern, char *err, size_t errlen) {
    size_t n = 3, plain = 1;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f || *p == '\\') {
            set_err(err, errlen, "%s '%s' holds a %s: an #SBATCH line cannot name it (move the sweep's "
                    "out directory to a path without one)", what, v,
                    *p == '\\' ? "backslash" : *p == '\n' ? "line break" : "control character");
            return NULL;
        }
        plain &= isalnum(*p) || strchr("._+-/,:=@~", *p) != NULL;
        n += *p == '"' || *p == '%' ? 2 : 1;
    }
    if (plain) return xstrdup(v);
    char *q = xmalloc(n), *o = q;
    *o++ = '"';
    for (const char *p = v; *p; p++) {
        if (*p == '"') *o++ = '\\';
        if (*p == '%' && pattern) *o++ = '%';
        *o++ = *p;
    }
    *o++ = '"';
    *o = '\0';
    return q;
}

// Text for a comment line of the script: control characters (a line break would end the
// comment) as '?'. Malloc'd.
static char *comment_text(const char *v) {
    char *c = xstrdup(v);
    for (char *p = c; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return c;
}

static int write_sbatch(const Sweep *s, const SweepSlurm *o, const char *script, char *err, size_t errlen) {
    char *out = absolute(s->out), *file = absolute(s->path), *cwd = getcwd(NULL, 0);
    if (!cwd) die("getcwd: %s", strerror(errno));
    char *outq = NULL, *name = xstrdup(s->name);
    for (char *p = name; *p; p++)  // a label: [A-Za-z0-9._+-]
        if (!isalnum((unsigned char)*p) && !strchr("._+-", *p)) *p = '-';
    // OUT/logs/task-%a.log, %a the task's index (an sbatch pattern): OUT's own '%' are doubled
    char *outdir = xasprintf("%s/logs/", out);
    char *dirq = sbatch_word("the out directory", outdir, 1, err, errlen);
    if (dirq) {
        size_t k = strlen(dirq);
        outq = dirq[0] == '"' ? xasprintf("%.*stask-%%a.log\"", (int)(k - 1), dirq)
                              : xasprintf("%stask-%%a.log", dirq);
    }
    free(dirq);
    free(outdir);
    FILE *f = outq ? fopen(script, "w") : NULL;
    if (outq && !f) set_err(err, errlen, "cannot write '%s': %s", script, strerror(errno));
    int bad = !f;
    if (f) {
        char *cname = comment_text(s->name), *cfile = comment_text(file);
        fprintf(f, "#!/bin/bash\n"
                   "# grpolab sweep '%s' (%s) as a Slurm job array: task i trains run i of the sweep\n"
                   "# (`grpolab sweep plan` lists them); written by `grpolab sweep slurm`. A task that\n"
                   "# is run again (requeued, or the array submitted again) keeps a complete run and\n"
                   "# continues an interrupted one from its checkpoint. The training is this shell\n"
                   "# (exec), so Slurm's SIGTERM (--signal, preemption, scancel, scontrol requeue)\n"
                   "# reaches it and it saves a checkpoint before it exits.\n",
                cname, cfile);
        free(cname);
        free(cfile);
        fprintf(f, "#SBATCH --job-name=grpolab-%s\n", name);
        fprintf(f, "#SBATCH --array=0-%d", s->n_runs - 1);
        if (o->max_parallel > 0) fprintf(f, "%%%d", o->max_parallel);
        fprintf(f, "\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=%d\n", o->cpus);
        fprintf(f, "#SBATCH --output=%s\n#SBATCH --open-mode=append\n", outq);
        fprintf(f, "#SBATCH --%s\n", o->requeue ? "requeue" : "no-requeue");
        if (o->signal_secs > 0) fprintf(f, "#SBATCH --signal=B:TERM@%d\n", o->signal_secs);
        if (o->partition) fprintf(f, "#SBATCH --partition=%s\n", o->partition);
        if (o->account) fprintf(f, "#SBATCH --account=%s\n", o->account);
        if (o->time) fprintf(f, "#SBATCH --time=%s\n", o->time);
        if (o->mem) fprintf(f, "#SBATCH --mem=%s\n", o->mem);
        if (o->gpus > 0) fprintf(f, "#SBATCH --gres=gpu:%d\n", o->gpus);
        // every value below is one single-quoted shell word: nothing in it is run
        char *qcwd = shell_quote(cwd), *qexe = shell_quote(sweep_cmd_self_exe()), *qfile = shell_quote(file);
        fprintf(f, "set -eu\ncd %s\nexec %s sweep task %s \"$SLURM_ARRAY_TASK_ID\" --threads %d\n", qcwd, qexe,
                qfile, o->cpus);
        free(qcwd);
        free(qexe);
        free(qfile);
        bad = ferror(f);
        bad |= fclose(f) != 0;
        if (bad) set_err(err, errlen, "cannot write '%s'", script);
        else chmod(script, 0755);
    }
    free(out);
    free(file);
    free(cwd);
    free(outq);
    free(name);
    return bad ? -1 : 0;
}

int sweep_slurm(int argc, char **argv) {
    CliArgs a;
    int rc = sweep_cmd_args(&slurm_spec, argc, argv, &a, 1);
    if (rc >= 0) return rc;
    RunState *states = NULL;
    Sweep *s = sweep_cmd_load(a.positional[0], &states);
    if (!s) return 2;
    free(states);
    SweepSlurm o;
    char err[2048];
    if (slurm_options(s, &a, &o) != 0) {
        free_slurm_options(&o);
        sweep_free(s);
        return 2;
    }
    const char *given = cli_get(&slurm_spec, &a, "script");
    char *script = given ? xstrdup(given) : xasprintf("%s/sweep.sbatch", s->out);
    char *logs = xasprintf("%s/logs", s->out);
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
        char *q = shell_quote(script), *cmd = xasprintf("sbatch --parsable %s", q);
        free(q);
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
            printf("sweep slurm: submitted job %s (tasks %s_0 .. %s_%d); squeue -j %s to watch, "
                   "`grpolab sweep status %s` for the runs\n", id, id, id, s->n_runs - 1, id, s->path);
            char *jobs = xasprintf("%s/%s", s->out, SLURM_JOBS);
            FILE *jf = fopen(jobs, "a");
            int bad = !jf || fprintf(jf, "%s\n", id) < 0;
            if ((jf && fclose(jf) != 0) || bad)
                fprintf(stderr, "grpolab sweep slurm: warning: cannot record job %s in '%s': `sweep status` "
                        "will not ask Slurm about it\n", id, jobs);
            free(jobs);
        }
        free(cmd);
    }
    free_slurm_options(&o);
    free(script);
    free(logs);
    sweep_free(s);
    return rc;
}
