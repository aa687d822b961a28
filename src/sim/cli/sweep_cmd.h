// sweep_cmd.h: what the two files of `grpolab sweep` share, cmd_sweep.c (plan, run, task,
// status and the dispatch) and cmd_sweep_slurm.c (slurm: the job array's sbatch script);
// defined in sweep_cmd.c, so that the two call it and not each other.
#ifndef GRPOLAB_SWEEP_CMD_H
#define GRPOLAB_SWEEP_CMD_H

#include "../io/cli.h"
#include "../sweep/sweep.h"

// What a run needs: train from scratch, nothing (complete), resume, go on past its end (a
// complete run whose train.steps the sweep raises: train --resume from its last step), or it
// is refused.
typedef enum { RUN_NEW, RUN_COMPLETE, RUN_RESUME, RUN_RESTART, RUN_EXTEND, RUN_REFUSED } RunState;

// The sweep file read and checked: every value against the schema and every run's config
// resolved; with states, each run's RunState, and nothing returned (NULL) where a run is
// refused or would start from a train.init that is not there. Messages go to stderr.
Sweep *sweep_cmd_load(const char *file, RunState **states);
// The state of run i of s whose resolved config is c; msg says why where it is refused, and
// for a run that extends "from step K to N".
RunState sweep_cmd_run_state(const Sweep *s, int i, const Config *c, char *msg, size_t msglen);
// The parsed arguments of a subcommand with exactly n_positional positionals: -1 to go on,
// else the exit code (0 after --help, 2 with the usage printed).
int sweep_cmd_args(const CliSpec *spec, int argc, char **argv, CliArgs *a, int n_positional);
// The path of this binary, so that every run is trained by the same grpolab.
const char *sweep_cmd_self_exe(void);

// OUT/slurm.jobs: the ids of the job arrays submitted for this sweep, one a line (`sweep
// status` asks squeue about them).
#define SLURM_JOBS "slurm.jobs"

// `grpolab sweep slurm FILE [options]` (cmd_sweep_slurm.c).
int sweep_slurm(int argc, char **argv);

#endif
