// main.c: `grpolab <command> [options]`: the command table and the dispatch. Each command is
// in a file of its own (cmd_<command>.c; objective in rl/objective_cli.c), declared in
// commands.h.
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../io/h5util.h"
#include "../io/libenv.h"
#include "../parallel/dist.h"
#include "../rl/objective.h"
#include "commands.h"

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} Command;

static int cmd_help(int argc, char **argv);

static const Command commands[] = {
    {"config", "print a resolved config (--print FILE) or every config key (--keys)", cmd_config},
    {"pretrain", "train the base model on the world's corpus", cmd_pretrain},
    {"train", "RL training with an objective (GRPO, Dr. GRPO, DAPO, RLOO) and an HDF5 run log", cmd_train},
    {"sweep", "a grid of train runs from a sweep file: plan, run here N at a time, or a Slurm job array", cmd_sweep},
    {"eval", "run the five benchmarks on a model and print the table", cmd_eval},
    {"eval-run", "the benchmarks on the final policy of finished runs, sampled K times per question", cmd_eval_run},
    {"plot", "draw fig5, length-bias, difficulty-bias or objectives from train run logs (gnuplot)", cmd_plot},
    {"summary", "final figures, length slopes with 95% CIs and the finding's checks of train runs", cmd_summary},
    {"strip", "copy a run log without its per-token table (/tokens)", cmd_strip},
    {"schema", "print the columns of the run-log tables (docs/hdf5-schema.md)", cmd_schema},
    {"objective", "the objective presets: --list, --show NAME (knobs, formulas, other frameworks)", objective_cli},
    {"init", "write a randomly initialised model checkpoint", cmd_init},
    {"bench", "kernel and model benchmarks (make bench)", cmd_bench},
    {"bench-rl", "the RL step of a train config timed phase by phase (make bench-rl)", cmd_bench_rl},
    {"version", "print the version and which backends are usable", cmd_version},
    {"help", "list the commands", cmd_help},
};
static const int n_commands = (int)(sizeof commands / sizeof commands[0]);

static int cmd_help(int argc, char **argv) {
    printf("usage: grpolab <command> [options]   (grpolab <command> --help for its options)\n\n"
           "grpolab trains a small transformer LM with RL objectives (GRPO, Dr. GRPO, DAPO,\n"
           "RLOO) and dissects their length and difficulty biases (Liu et al. 2025).\n\ncommands:\n");
    for (int i = 0; i < n_commands; i++) printf("  %-10s %s\n", commands[i].name, commands[i].summary);
    return 0;
}

// A command's exit code, after making sure its standard output was written: output lost to
// a full disk, a closed pipe or /dev/full is an error (exit 1), not a silent success.
static int finish(int rc) {
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "grpolab: error: cannot write the standard output: %s\n", strerror(errno));
        return rc ? rc : 1;
    }
    return rc;
}

static int run_command(int argc, char **argv) {
    if (argc < 2) {
        cmd_help(0, NULL);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0) return cmd_help(0, NULL);
    if (strcmp(name, "--version") == 0) return cmd_version(1, argv + 1);
    for (int i = 0; i < n_commands; i++)
        if (strcmp(commands[i].name, name) == 0) return finish(commands[i].run(argc - 1, argv + 1));
    fprintf(stderr, "grpolab: error: unknown command '%s'\n", name);
    cmd_help(0, NULL);
    return 2;
}

int main(int argc, char **argv) {
    libenv_reexec(argv);
    h5_quiet_for_good();
    dist_init(&argc, &argv);  // MPI where mpirun or srun started this process (dist.h)
    int rc = run_command(argc, argv);
    dist_finalize();
    return rc;
}
