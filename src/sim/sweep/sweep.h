// sweep.h: a sweep file (a grid of `grpolab train` runs over one base config) read and
// expanded into its runs; `grpolab sweep plan|run|slurm|task|status` (docs/cli.md,
// docs/scaling.md).
//
// File syntax (INI, like the configs: [section], key = value, # and ; comments):
//   [sweep]
//   config = experiments/fig5/grpo.ini   base config of every run (required)
//   out    = data/sweeps/presets         output directory (required): OUT/NAME.h5 per run
//   name   = presets                     the sweep's name (default: the file's base name)
//   run_name = fig5_{objective.preset}_s{run.seed}   run names from a pattern (optional; below)
//   [set]                                settings of every run, as --set (optional)
//   train.steps = 12
//   [grid]                               the axes (at least one); each run is one combination
//   objective.preset = grpo, dr_grpo     a comma-separated list of values
//   run.seed = 1234..1237                an inclusive range of integers
//   [slurm]                              defaults of `grpolab sweep slurm` (optional)
//   partition = gpu ; account = ...; time = 02:00:00; cpus = 2; gpus = 1; mem = 8G;
//   max_parallel = 4 (tasks running at once; 0: no limit); signal = 300 (seconds before the
//   time limit at which a task's training gets SIGTERM to checkpoint; 0: none); requeue =
//   true (Slurm may requeue a task after preemption or a node failure; it resumes its run)
// Paths are relative to the directory grpolab runs in, as with --config.
//
// Runs are numbered 0..n_runs-1 with the first grid key varying slowest (nested loops in the
// file's order). A run's name joins "KEY-VALUE" of every axis with '_', KEY the part after
// the dot (the whole name where two axes share it) and VALUE the text as written with every
// character outside [A-Za-z0-9._+-] replaced by '-': preset-dr_grpo_seed-1234. With
// [sweep] run_name, the name is that pattern with every {KEY} (a [grid] key, each of them at
// least once) replaced by the run's value, written the same way; the text outside the braces
// is of [A-Za-z0-9._+-] (so that a name stays one file in OUT).
//
// Errors are returned, never printed: NULL / -1 and a message in err that starts with
// "FILE:LINE: " where a line is to blame and names the key and the value.
#ifndef GRPOLAB_SWEEP_H
#define GRPOLAB_SWEEP_H

#include <stddef.h>

#include "../io/config.h"

#define SWEEP_MAX_AXES 16
#define SWEEP_MAX_RUNS 10000
// Seconds before a Slurm task's time limit at which its training is sent SIGTERM: it ends
// the step it is in, saves a checkpoint and exits, so the step must fit in this time.
#define SWEEP_SIGNAL_SECS 300

typedef struct {
    char *key;      // "section.key"
    char *label;    // the name's KEY part: "seed" (or "run.seed" where two axes share "seed")
    int n_values;
    char **values;  // as written (trimmed), ranges expanded
} SweepAxis;

typedef struct {
    char *partition, *account, *time, *mem;  // NULL: not given
    int cpus;          // cpus per task (default 1)
    int gpus;          // GPUs per task (default 0)
    int max_parallel;  // array tasks running at once (0: no limit)
    int signal_secs;   // #SBATCH --signal=B:TERM@SECS (0: none; default SWEEP_SIGNAL_SECS)
    int requeue;       // #SBATCH --requeue (1, the default) or --no-requeue (0)
} SweepSlurm;

typedef struct {
    char *path;    // the sweep file
    char *name;    // [sweep] name
    char *run_name;  // [sweep] run_name, the pattern of the run names (NULL: KEY-VALUE_...)
    char *config;  // [sweep] config
    char *out;     // [sweep] out
    int n_sets;
    char **sets;   // [set] as "section.key=value"
    int n_axes;
    SweepAxis axes[SWEEP_MAX_AXES];
    int n_runs;
    SweepSlurm slurm;
} Sweep;

// Reads a sweep file; every [set] and [grid] value is checked against the config schema
// (config_set on a default config), every [slurm] value against its type.
Sweep *sweep_load(const char *path, char *err, size_t errlen);
// The same for text in memory; name is the file name in messages and the default name.
Sweep *sweep_load_text(const char *text, const char *name, char *err, size_t errlen);
void sweep_free(Sweep *s);

// The value index of every axis in run i (idx has n_axes entries).
void sweep_run_indices(const Sweep *s, int i, int *idx);
// The name of run i (see above); -1 if it does not fit in len.
int sweep_run_name(const Sweep *s, int i, char *buf, size_t len);
// The run's log: OUT/NAME.h5 (malloc'd).
char *sweep_run_path(const Sweep *s, int i);
// The grid's --set assignments of run i, "section.key=value" (n_axes of them, malloc'd;
// free with sweep_free_sets).
char **sweep_run_grid_sets(const Sweep *s, int i);
void sweep_free_sets(char **sets, int n);
// The resolved config of run i: defaults, the base config file, [set], then the run's grid
// values. NULL and a message naming the run, the key and the value if it does not resolve.
Config *sweep_run_config(const Sweep *s, int i, char *err, size_t errlen);
// Before anything runs: every run's config resolves (sweep_run_config, setup_model_config)
// and the run names are distinct. 0 or -1 with a message.
int sweep_check(const Sweep *s, char *err, size_t errlen);

// The manifest OUT/sweep.runs that `sweep run` and `sweep slurm` write: a comment line, then
// one line per run, "NAME<TAB>key=value<TAB>..." (the grid's values). sweep_write_manifest
// creates OUT (and its parents) as needed.
int sweep_write_manifest(const Sweep *s, char *err, size_t errlen);
// Creates OUT and its parents as needed: 0, or -1 with a message.
int sweep_make_out_dir(const Sweep *s, char *err, size_t errlen);
// If path is a directory holding a manifest, the run logs it lists (DIR/NAME.h5, malloc'd,
// in the manifest's order) and their count; 0 if path is not a directory; -1 with a message
// if it is one without a readable manifest. Lets `grpolab summary DIR` and `grpolab plot FIG
// DIR` take a sweep's output directory. The analysis groups runs by objective; where the
// runs also differ in other grid keys than objective.preset and run.seed, groups (may be
// NULL) receives per run the values of those keys as "lr-1e-5_eps_high-0.28" (KEY the part
// after the dot; "" for every run where there is no such key) to add to its group, and note
// (may be NULL) the keys, comma-separated ("" if none).
int sweep_expand_dir(const char *path, char ***runs, char ***groups, char *note, size_t notelen,
                     char *err, size_t errlen);

#endif
