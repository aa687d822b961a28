// run_args.h: the RUN.h5|SWEEP_DIR... arguments of `grpolab plot` and `grpolab summary`
// turned into the runs the analysis draws and tabulates, grouped as it keeps them apart.
//
// run_args_expand replaces every sweep out directory among the arguments by the run logs of
// its manifest (sweep_expand_dir, in the manifest's order; any other argument is a run log as
// it is) and records per run its group within its objective: the values of the grid keys
// other than objective.preset and run.seed in which the sweep's runs differ ("lr-1e-5"), ""
// where none. run_args_load loads the runs; run_args_group adds each run's group to its label
// (Run.objective: "grpo" in group "lr-1e-5" becomes "grpo_lr-1e-5"), which is what the
// figures and the summary group by. A Fig. 6 design is not grouped so: it keeps the runs of a
// sweep apart by their template and question set itself (fig6.h).
//
// The state is the caller's (RunArgs); nothing is kept between calls. Errors are -1 / NULL
// with a message in err that names the file or directory and what is wrong; nothing is
// printed here except where a FILE is passed.
#ifndef GRPOLAB_ANALYSIS_RUN_ARGS_H
#define GRPOLAB_ANALYSIS_RUN_ARGS_H

#include <stddef.h>
#include <stdio.h>

#include "runs.h"

typedef struct {
    int n;            // run logs
    char **paths;     // [n] each run log, in the order of the arguments (malloc'd)
    char **groups;    // [n] each run's group within its objective; "" where none (malloc'd)
    char notes[4096]; // per sweep whose runs are grouped by more than their objective, a line
                      // "grpolab: note: the runs of DIR also differ in KEYS: ..." (cut at the
                      // buffer's end); "" if none
} RunArgs;

// Fills *ra from the n_args arguments args. 0, or -1 with a message in err (a directory
// without a readable manifest) and *ra empty (n 0, nothing to free).
int run_args_expand(RunArgs *ra, const char *const *args, int n_args, char *err, size_t errlen);
// Frees what run_args_expand allocated and leaves *ra empty.
void run_args_free(RunArgs *ra);

// Every run of ra loaded (run_load), in order: an array of ra->n runs (free it with
// runs_free, runs.h), or NULL with the message of the first that fails to load (nothing is left
// loaded).
Run **run_args_load(const RunArgs *ra, char *err, size_t errlen);
// Writes ra->notes to notes (may be NULL), then adds each run's group (ra->groups) to its
// label. 0, or -1 with a message where a label would exceed Run.objective or the runs form
// more than MAX_OBJECTIVES groups (analysis.h); the runs are then left to the caller to free,
// their labels partly changed.
int run_args_group(Run **runs, const RunArgs *ra, FILE *notes, char *err, size_t errlen);

#endif
