// run_args.c: the run-log arguments of `plot` and `summary` expanded, loaded and grouped
// (contract in run_args.h).
#include "run_args.h"

#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "../sim/sweep/sweep.h"
#include "analysis.h"

void run_args_free(RunArgs *ra) {
    for (int i = 0; i < ra->n; i++) {
        free(ra->paths[i]);
        free(ra->groups[i]);
    }
    free(ra->paths);
    free(ra->groups);
    ra->n = 0;
    ra->paths = ra->groups = NULL;
}

int run_args_expand(RunArgs *ra, const char *const *args, int n_args, char *err, size_t errlen) {
    ra->n = 0;
    ra->paths = ra->groups = NULL;
    ra->notes[0] = 0;
    for (int i = 0; i < n_args; i++) {
        char **dir = NULL, **dir_groups = NULL, note[1024];
        int k = sweep_expand_dir(args[i], &dir, &dir_groups, note, sizeof note, err, errlen);
        if (k < 0) {
            run_args_free(ra);
            return -1;
        }
        int add = k ? k : 1;
        ra->paths = realloc(ra->paths, ((size_t)ra->n + (size_t)add) * sizeof *ra->paths);
        ra->groups = realloc(ra->groups, ((size_t)ra->n + (size_t)add) * sizeof *ra->groups);
        if (!ra->paths || !ra->groups) die("out of memory");
        size_t used = strlen(ra->notes);
        if (note[0])
            snprintf(ra->notes + used, sizeof ra->notes - used, "grpolab: note: the runs of %s also differ in "
                     "%s: they are grouped by objective and %s (OBJECTIVE_%s, ...)\n", args[i], note, note, dir_groups[0]);
        for (int j = 0; j < k; j++, ra->n++) {
            ra->paths[ra->n] = dir[j];
            ra->groups[ra->n] = dir_groups[j];
        }
        if (k == 0) {
            ra->paths[ra->n] = xstrdup(args[i]);
            ra->groups[ra->n++] = xstrdup("");
        }
        free(dir);
        free(dir_groups);
    }
    return 0;
}

Run **run_args_load(const RunArgs *ra, char *err, size_t errlen) {
    Run **runs = xcalloc((size_t)ra->n + 1, sizeof(Run *));
    for (int i = 0; i < ra->n; i++) {
        runs[i] = run_load(ra->paths[i], err, errlen);
        if (!runs[i]) {
            runs_free(runs, i);
            return NULL;
        }
    }
    return runs;
}

int run_args_group(Run **runs, const RunArgs *ra, FILE *notes, char *err, size_t errlen) {
    if (notes) fputs(ra->notes, notes);
    int n = ra->n;
    for (int i = 0; i < n; i++) {
        if (!ra->groups[i][0]) continue;
        char label[sizeof runs[i]->objective];
        if (snprintf(label, sizeof label, "%s_%s", runs[i]->objective, ra->groups[i]) >= (int)sizeof label) {
            snprintf(err, errlen, "%s: the group '%s_%s' is longer than %zu characters: give the runs of one "
                     "value by name", runs[i]->path, runs[i]->objective, ra->groups[i], sizeof label - 1);
            return -1;
        }
        memcpy(runs[i]->objective, label, sizeof label);
    }
    int ng = 0;  // distinct labels, at most MAX_OBJECTIVES drawn or tabulated
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = strcmp(runs[j]->objective, runs[i]->objective) == 0;
        ng += !seen;
    }
    if (ng > MAX_OBJECTIVES) {
        snprintf(err, errlen, "the runs form %d groups (objective and grid values), more than the %d the "
                 "analysis keeps apart: give the runs of fewer values by name", ng, MAX_OBJECTIVES);
        return -1;
    }
    return 0;
}
