// cmd_schema.c: `grpolab schema`: the run-log tables' columns as docs/hdf5-schema.md's Markdown.
#include <stdio.h>

#include "../io/cli.h"
#include "../io/logschema.h"
#include "commands.h"

int cmd_schema(int argc, char **argv) {
    static const CliSpec spec = {"schema", "Print the columns of every run-log table (src/sim/io/logschema.c) as the "
                                 "Markdown of docs/hdf5-schema.md: of the log of KIND (train, eval), or of both.",
                                 "[KIND]", NULL, 0, 1, "KIND"};
    CliArgs a;
    int rc = cli_parse(&spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    if (a.n_positional == 1) {
        const LogKind *k = logschema_kind(a.positional[0]);
        if (!k) {
            fprintf(stderr, "grpolab: error: schema: no run log of kind '%s' (kinds: train, eval)\n", a.positional[0]);
            return 2;
        }
        logschema_print_md(k, stdout);
        return 0;
    }
    for (int i = 0; i < N_LOG_KINDS; i++) {
        printf("%s## %s (kind \"%s\")\n\n", i ? "\n" : "", LOG_KINDS[i]->command, LOG_KINDS[i]->kind);
        logschema_print_md(LOG_KINDS[i], stdout);
    }
    return 0;
}
