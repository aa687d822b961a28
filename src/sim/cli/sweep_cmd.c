// sweep_cmd.c: the pieces of `grpolab sweep` that cmd_sweep.c and cmd_sweep_slurm.c share
// (sweep_cmd.h): the checked sweep file with each run's state, the subcommands' argument
// check, and this binary's path.
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../analysis/runs.h"
#include "../../common.h"
#include "../io/cli.h"
#include "../io/h5util.h"
#include "../rl/resume.h"
#include "../rl/train.h"
#include "../sweep/sweep.h"
#include "sweep_cmd.h"

// The state of run i whose resolved config is c; msg says why where it is refused, and for a
// run that extends "from step K to N". The config is read from the log's copy where a killed
// run left one (its log may be torn).
RunState sweep_cmd_run_state(const Sweep *s, int i, const Config *c, char *msg, size_t msglen) {
    char *path = sweep_run_path(s, i), copy[4200];
    RunState st = RUN_NEW;
    if (access(path, F_OK) == 0) {
        // a larger train.steps than the log's is the same run, gone on for longer
        int same = resume_compare_run_config(resume_log_to_read(path, copy, sizeof copy), c, 1, msg, msglen);
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
            int64_t done = r ? r->n_steps : 0, steps = config_settings(c)->train.steps;
            run_free(r);
            char *ckpt = path_with_suffix(path, RESUME_CKPT_SUFFIX);
            int has_ckpt = access(ckpt, F_OK) == 0;
            if (complete && done >= steps) {
                st = RUN_COMPLETE;
            } else if (complete && !has_ckpt) {
                set_err(msg, msglen, "%s is complete at %lld steps and train.steps is now %lld, but its "
                        "checkpoint %s (the state to go on from) is gone: put it back, or delete or "
                        "move the run to train it again", path, (long long)done, (long long)steps, ckpt);
                st = RUN_REFUSED;
            } else if (complete) {
                set_err(msg, msglen, "from step %lld to %lld", (long long)done, (long long)steps);
                st = RUN_EXTEND;
            } else {
                st = has_ckpt ? RUN_RESUME : RUN_RESTART;
            }
            free(ckpt);
        }
    }
    free(path);
    return st;
}

// Loads and checks the sweep; with states, the state of every run (malloc'd), printing each
// refused run; returns NULL (after printing why) if the sweep cannot run.
Sweep *sweep_cmd_load(const char *file, RunState **states) {
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
        (*states)[i] = sweep_cmd_run_state(s, i, c, err, sizeof err);
        if ((*states)[i] == RUN_REFUSED) {
            fprintf(stderr, "grpolab sweep: %s\n", err);
            refused++;
        }
        const char *init = config_settings(c)->train.init;
        if ((*states)[i] != RUN_COMPLETE && (*states)[i] != RUN_RESUME && (*states)[i] != RUN_EXTEND &&
            access(init, R_OK) != 0) {
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
const char *sweep_cmd_self_exe(void) {
    static char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) die("cannot find this binary (/proc/self/exe): %s", strerror(errno));
    path[n] = '\0';
    return path;
}

// cli_parse, then exactly n_positional arguments: -1 to go on, else the exit code.
int sweep_cmd_args(const CliSpec *spec, int argc, char **argv, CliArgs *a, int n_positional) {
    int rc = cli_parse(spec, argc, argv, a);
    if (rc) return rc == 1 ? 0 : 2;
    if (a->n_positional != n_positional) {
        cli_print_usage(spec, stderr);
        return 2;
    }
    return -1;
}
