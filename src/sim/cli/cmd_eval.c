// cmd_eval.c: `grpolab eval`: the five benchmarks on a model, printed and optionally
// written to HDF5 (kept on a signal and completed by --resume).
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../common.h"
#include "../../kernels/kernels.h"
#include "../io/cli.h"
#include "../io/config.h"
#include "../io/h5util.h"
#include "../io/interrupt.h"
#include "../model/checkpoint.h"
#include "../model/model.h"
#include "../rl/evaluate.h"
#include "../rl/resume.h"
#include "../rl/setup.h"
#include "../rl/train.h"
#include "../world/template.h"
#include "../world/tokenizer.h"
#include "commands.h"

static const CliOption eval_opts[] = {
    {"model", "FILE", "checkpoint to evaluate (required)"},
    {"template", "NAME", "r1|boxed|none (default: world.template, r1)"},
    {"greedy", NULL, "greedy decoding (the default)"},
    {"temperature", "X", "sample at temperature X > 0 instead of greedy"},
    {"top-p", "P", "nucleus sampling mass in (0, 1] (default 1)"},
    {"samples", "K", "with --temperature: K responses per question (default 1), pooled in the table; "
                     "sample k of each question has a random stream of its own"},
    {"limit", "N", "at most N questions per benchmark (default: eval.limit, all)"},
    {"train-pool", "N", "also run N training-pool questions (reported apart, not in the score)"},
    {"show", "N", "print the first N responses of each benchmark with their verdicts"},
    {"out", "FILE", "also write the per-benchmark table and every response to this HDF5 file"},
    {"overwrite", NULL, "replace an existing --out FILE (without it, an existing FILE is an error)"},
    {"resume", NULL, "complete the --out FILE of an evaluation that was stopped, with its settings"},
    {"backend", "NAME", "auto|cpu|cuda (default: run.backend)"},
    {"set", "SECTION.KEY=VALUE", "override one key, e.g. world.max_new_tokens=200 (repeatable)"},
    {"failure-profile", "CONFIG", "also print why responses fail, by level: gap facts of the corpus "
                                  "of CONFIG (its corpus.gap_share and world.seed, e.g. "
                                  "experiments/base/pretrain_gaps.ini) or slips, and how often a redo "
                                  "after a disagreement is right (of the --train-pool sample if "
                                  "given, else of the benchmarks)"},
};
static const CliSpec eval_spec = {
    "eval",
    "Run the five held-out benchmarks and print accuracy, mean length (all, correct,\n"
    "incorrect), format and truncation rates, self-check behaviour, and accuracy per level.",
    "--model FILE [--template NAME] [--greedy | --temperature X [--top-p P] [--samples K]] [--limit N]\n"
    "       [--train-pool N] [--show N] [--out FILE.h5 [--overwrite | --resume]] [--backend NAME]\n"
    "       [--set SECTION.KEY=VALUE]... [--failure-profile CONFIG]",
    eval_opts, (int)(sizeof eval_opts / sizeof eval_opts[0]), 0, NULL};

static int parse_float_opt(const char *opt, const char *s, double lo, double hi, int lo_open,
                           double *out) {
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || !(lo_open ? v > lo : v >= lo) || v > hi) {
        fprintf(stderr, "grpolab: error: --%s '%s': expected a number in %s%g, %g]\n", opt, s,
                lo_open ? "(" : "[", lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

// ---- eval --out: the responses done are kept when a signal stops it, and every
// EVAL_SAVE_SECONDS, in a file that eval --resume completes
#define EVAL_SAVE_SECONDS 60.0
typedef struct {
    const char *out, *model_path;
    const EvalConfig *ec;
    double last_save;
    int failed;  // a save failed (its message printed)
} EvalSaver;

// EvalConfig.after_batch of eval --out: saves the responses so far on a signal (and stops)
// and every EVAL_SAVE_SECONDS.
static int eval_after_batch(void *ctx, const EvalRecord *records, int n_records) {
    EvalSaver *sv = ctx;
    int stop = interrupt_pending() != 0;
    if (!stop && wall_time() - sv->last_save < EVAL_SAVE_SECONDS) return 0;
    char err[1024];
    if (eval_write_partial(sv->out, sv->model_path, sv->ec, records, n_records, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s (the responses evaluated so far are not saved)\n", err);
        sv->failed = 1;
    }
    sv->last_save = wall_time();
    return stop;
}

// eval once its --out (if any) is claimed.
static int eval_run(const CliArgs *a, const char *model_path, const char *out, int resume) {
    int rc;
    Config *c = cli_load_config(NULL, a);
    if (!c) return 2;
    char err[1024];
    EvalConfig ec = {0};
    const char *tname = cli_get(&eval_spec, a, "template");
    if (!tname) tname = config_settings(c)->world.template;
    if (template_parse(tname, &ec.template_kind) != 0) {
        fprintf(stderr, "grpolab: error: --template '%s': not one of r1|boxed|none\n", tname);
        config_free(c);
        return 2;
    }
    ec.reward_rule = setup_reward_rule(c);
    double temp = 0, top_p = 1;
    const char *ts = cli_get(&eval_spec, a, "temperature"), *ps = cli_get(&eval_spec, a, "top-p");
    if (ts && cli_flag(&eval_spec, a, "greedy")) {
        fprintf(stderr, "grpolab eval: error: --greedy and --temperature exclude each other\n");
        config_free(c);
        return 2;
    }
    if ((ts && parse_float_opt("temperature", ts, 0, 100, 1, &temp) != 0) ||
        (ps && parse_float_opt("top-p", ps, 0, 1, 1, &top_p) != 0)) {
        config_free(c);
        return 2;
    }
    long samples = 0, limit = config_settings(c)->eval.limit, pool = 0, show = 0;
    if (cli_get_int(&eval_spec, a, "samples", 1, EVAL_MAX_SAMPLES, &samples) != 0 ||
        cli_get_int(&eval_spec, a, "limit", 1, 1000000, &limit) != 0 ||
        cli_get_int(&eval_spec, a, "train-pool", 1, 1000000, &pool) != 0 ||
        cli_get_int(&eval_spec, a, "show", 1, 1000000, &show) != 0) {
        config_free(c);
        return 2;
    }
    ec.samples = (int)samples;
    if (ec.samples > 1 && !ts) {
        fprintf(stderr, "grpolab eval: error: --samples %d: greedy responses are all alike; give --temperature X\n",
                ec.samples);
        config_free(c);
        return 2;
    }
    ec.limit = (int)limit;
    ec.train_pool = (int)pool;
    ec.show = (int)show;
    ec.pool_seed = (uint64_t)config_settings(c)->run.seed;
    ec.batch = config_settings(c)->eval.batch;
    ec.world_seed = (uint64_t)config_settings(c)->world.seed;
    ec.progress = 1;
    WorldGaps gaps;
    const char *fp = cli_get(&eval_spec, a, "failure-profile");
    if (fp) {  // the gap table of the corpus that config pretrains on
        Config *pc = cli_load_config(fp, a);
        CorpusParams cp;
        if (!pc || setup_corpus_params(pc, &cp, err, sizeof err) != 0) {
            if (pc) fprintf(stderr, "grpolab: error: --failure-profile %s: %s\n", fp, err);
            config_free(pc);
            config_free(c);
            return 2;
        }
        gaps = (WorldGaps){cp.gap_share, cp.gap_seed};
        ec.gaps = &gaps;
        config_free(pc);
    }
    char *model_config = NULL;  // written to --out, so that the log says which corpus made the model
    if (checkpoint_read_meta(model_path, NULL, NULL, NULL, &model_config, NULL, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        config_free(c);
        return 2;
    }
    ec.model_config = model_config;
    const Tokenizer *tk = tokenizer_default();
    Backend *bk = setup_backend(c, cli_get(&eval_spec, a, "backend"), 1, err, sizeof err);
    Model *m = bk ? policy_open(bk, model_path, NULL, 1, NULL, err, sizeof err) : NULL;
    if (!m) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        if (bk) backend_destroy(bk);
        config_free(c);
        free(model_config);
        return 2;
    }
    ec.sampler = (SamplerConfig){.temperature = (float)temp, .top_p = (float)top_p,
                                 .max_new_tokens = config_settings(c)->world.max_new_tokens,
                                 .eos_token = TOK_EOS, .stop_token = template_stop_token(tk, ec.template_kind),
                                 .seed = (uint64_t)config_settings(c)->run.seed,
                                 .env = setup_sampler_env(c),
                                 .split_bytes = setup_split_bytes(c)};
    if (eval_check_prompts(m, tk, &ec, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s (lower world.max_new_tokens)\n", err);
        model_free(m);
        backend_destroy(bk);
        config_free(c);
        free(model_config);
        return 2;
    }
    int nq = eval_num_responses(&ec), nrec = 0;
    EvalRecord *recs = xcalloc((size_t)nq, sizeof(EvalRecord));
    char fingerprint[17];
    resume_fingerprint(m, fingerprint);
    char *config_text = config_to_ini(c);
    ec.config_text = config_text;
    ec.model_fingerprint = fingerprint;
    rc = resume ? eval_read_partial(out, &ec, recs, nq, &ec.resume_from, err, sizeof err) : 0;
    if (rc != 0) {
        if (rc < 0) fprintf(stderr, "grpolab: error: %s\n", err);
        else fprintf(stderr, "eval: --resume: %s is complete: nothing to do\n", out);
        rc = rc < 0 ? 2 : 0;
        goto done;
    }
    fprintf(stderr, "eval: %s, template %s, %s, budget %d tokens\n", model_path,
            template_name(ec.template_kind), temp > 0 ? "sampling" : "greedy", ec.sampler.max_new_tokens);
    if (resume)
        fprintf(stderr, "eval: --resume: %d of %d questions done in %s; going on\n", ec.resume_from,
                nq, out);
    EvalSaver saver = {.out = out, .model_path = model_path, .ec = &ec, .last_save = wall_time()};
    InterruptHandlers handlers;
    if (out) {  // without a file a signal just ends the command, as a kill
        ec.after_batch = eval_after_batch;
        ec.after_batch_ctx = &saver;
        interrupt_install(&handlers);
    }
    EvalResult res;
    evaluate_benchmarks(m, tk, &ec, &res, recs, &nrec);
    if (res.stopped) {
        if (out) interrupt_restore(&handlers);
        rc = saver.failed ? 1 : 128 + interrupt_pending();
        if (!saver.failed) {
            fprintf(stderr, "eval: stopped by signal %d after %d of %d questions (kept in %s)\n",
                    interrupt_pending(), nrec, nq, out);
            train_print_resume_hint("eval", out);
        }
        goto done;
    }
    eval_print_table(&res, stdout);
    if (ec.gaps) eval_print_failure_profile(&res, stdout);
    rc = 0;
    if (out && eval_write_hdf5(out, model_path, &ec, &res, recs, nrec, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        rc = 1;
    }
    // The handlers stay through the table and the file: a signal after the last question
    // waits until --out is complete (with the default action the finished evaluation was lost)
    if (out) {
        interrupt_restore(&handlers);
        if (interrupt_pending() && rc == 0)
            fprintf(stderr, "eval: signal %d came after the last question; %s is complete\n",
                    interrupt_pending(), out);
    }
done:
    free(config_text);
    free(recs);
    model_free(m);
    backend_destroy(bk);
    config_free(c);
    free(model_config);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&eval_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    const char *model_path = cli_get(&eval_spec, &a, "model");
    if (!model_path) {
        fprintf(stderr, "grpolab eval: error: --model FILE is required\n");
        return 2;
    }
    // --out is claimed before the existence check: the check and the log's creation are then
    // one step for another writer of the same path
    const char *out = cli_get(&eval_spec, &a, "out");
    char err[1024];
    int claimed = out && check_parent_dir("", out, NULL, 0) == 0;
    if (claimed && out_claim("cannot write", out, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        return 2;
    }
    int resume = cli_flag(&eval_spec, &a, "resume"), overwrite = cli_flag(&eval_spec, &a, "overwrite");
    if (resume && (!out || overwrite || cli_get(&eval_spec, &a, "failure-profile"))) {
        // the failure profile reads the responses' text, which the file does not keep
        fprintf(stderr, "grpolab eval: error: %s\n",
                !out ? "--resume needs --out FILE (the file of the evaluation to complete)"
                : overwrite ? "--resume and --overwrite exclude each other"
                            : "--resume excludes --failure-profile (it reads the responses' text, "
                              "which the file does not keep: evaluate again with --overwrite)");
        rc = 2;
    } else if (resume && access(out, F_OK) != 0) {
        fprintf(stderr, "grpolab: error: --resume: '%s' does not exist (start the evaluation without "
                "--resume)\n", out);
        rc = 2;
    } else if (out && !overwrite && !resume && access(out, F_OK) == 0) {
        fprintf(stderr, "grpolab: error: '%s' already exists: replace it with --overwrite, complete "
                "a stopped evaluation with --resume, or choose another --out\n", out);
        rc = 2;
    } else {
        train_note_command(argc, argv);
        rc = eval_run(&a, model_path, out, resume);
    }
    if (claimed) out_release(out);
    return rc;
}
