// cmd_eval_run.c: `grpolab eval-run` (its contract in commands.h).
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../analysis/runs.h"
#include "../../common.h"
#include "../model/checkpoint.h"
#include "../io/cli.h"
#include "../io/config.h"
#include "../rl/evaluate.h"
#include "../io/h5util.h"
#include "../rl/resume.h"
#include "../io/runlog.h"
#include "../rl/setup.h"
#include "../sweep/sweep.h"
#include "../world/tokenizer.h"
#include "../world/world.h"

static const CliOption opts[] = {
    {"samples", "K", "responses per question of the sampled evaluation (default 4)"},
    {"greedy", NULL, "also evaluate greedily again (RUN.h5.greedy.h5), for logs without /eval/truncation_incorrect"},
    {"threads", "N", "CPU threads (default: the run's run.threads; the greedy responses follow the thread count)"},
    {"backend", "NAME", "auto|cpu|cuda (default: the run's run.backend)"},
    {"overwrite", NULL, "evaluate again where the file exists (default: keep it)"},
};
static const CliSpec spec = {
    "eval-run",
    "Run the five benchmarks on the final policy of finished train runs (RUN.h5.ckpt.h5, at the\n"
    "run's last step) with the run's own settings, sampled at temperature 1 with K responses per\n"
    "question (seeded by the run's run.seed), and write the eval log RUN.h5.sampled.h5 beside the\n"
    "run (--greedy: also RUN.h5.greedy.h5). `grpolab summary` reads them: the sampled eval ratio\n"
    "of incorrect lengths beside the greedy one, and check 7 for logs of an older grpolab.\n"
    "The out directory of a `grpolab sweep` stands for the runs of its manifest (sweep.runs).",
    "RUN.h5|SWEEP_DIR... [--samples K] [--greedy] [--threads N] [--backend NAME] [--overwrite]",
    opts, 5, 256, "RUN.h5..."};

// A run's final policy and what evaluating it needs.
typedef struct {
    const char *run;
    char ckpt[4200];
    Config *cfg;       // the run's config (with --threads applied)
    char *run_id;      // the log's (NULL: none)
    int64_t step;      // the checkpoint's
    ModelConfig mc;
} Final;

// The root attribute name of the log at path (malloc'd; NULL where it has none).
static char *log_attr(const char *path, const char *name) {
    char e[512];
    RunLogReader *rd = runlog_reader_open(path, e, sizeof e);
    if (!rd) return NULL;
    char *v = runlog_reader_has_attr(rd, name) ? runlog_read_attr_str(rd, name, e, sizeof e) : NULL;
    runlog_reader_close(rd);
    return v;
}

// Checks that run is a finished train run whose checkpoint is its final policy, and reads
// its config. 0, or -1 with a message.
static int final_open(Final *f, const char *run, const char *threads, char *err, size_t errlen) {
    char e[1024], *text = NULL, *kind = NULL, *ck_id = NULL;
    memset(f, 0, sizeof *f);
    f->run = run;
    snprintf(f->ckpt, sizeof f->ckpt, "%s%s", run, RESUME_CKPT_SUFFIX);
    RunLogReader *rd = runlog_reader_open(run, e, sizeof e);
    if (!rd) return set_err(err, errlen, "%s", e);
    kind = runlog_read_attr_str(rd, "kind", e, sizeof e);
    if (kind && strcmp(kind, "train") == 0) text = runlog_read_attr_str(rd, "config", e, sizeof e);
    if (runlog_reader_has_attr(rd, "run_id")) f->run_id = runlog_read_attr_str(rd, "run_id", e, sizeof e);
    runlog_reader_close(rd);
    int rc = -1;
    if (!kind || strcmp(kind, "train") != 0) {
        set_err(err, errlen, "%s: %s%s%s, expected a train log (written by grpolab train)", run,
                kind ? "a grpolab log of kind '" : "no root attribute kind", kind ? kind : "", kind ? "'" : "");
        goto done;
    }
    if (!text || !(f->cfg = config_from_stored(text, run, e, sizeof e))) {
        set_err(err, errlen, "%s: %s", run, text ? e : "no config attribute");
        goto done;
    }
    if (access(f->ckpt, F_OK) != 0) {
        set_err(err, errlen, "%s: its final checkpoint %s does not exist (train.checkpoint_every = 0 still "
                "writes one at the last step; was the run moved without it?)", run, f->ckpt);
        goto done;
    }
    if (checkpoint_read_meta(f->ckpt, &f->mc, NULL, NULL, NULL, &f->step, NULL, e, sizeof e) != 0 ||
        checkpoint_read_run_id(f->ckpt, &ck_id, e, sizeof e) < 0) {
        set_err(err, errlen, "%s", e);
        goto done;
    }
    if ((f->run_id || ck_id) && (!f->run_id || !ck_id || strcmp(f->run_id, ck_id) != 0)) {
        set_err(err, errlen, "%s: the checkpoint %s belongs to another run (run_id %s, the log's %s)", run, f->ckpt,
                ck_id ? ck_id : "none", f->run_id ? f->run_id : "none");
        goto done;
    }
    int64_t steps = config_settings(f->cfg)->train.steps;
    if (f->step != steps) {
        set_err(err, errlen, "%s: the checkpoint %s is at step %lld of the run's %lld: the run is not finished "
                "(grpolab train --resume goes on)", run, f->ckpt, (long long)f->step, (long long)steps);
        goto done;
    }
    if (threads) {
        char set[64];
        snprintf(set, sizeof set, "run.threads=%s", threads);
        if (config_set(f->cfg, set, e, sizeof e) != 0) {
            set_err(err, errlen, "--threads %s: %s", threads, e);
            goto done;
        }
    }
    rc = 0;
done:
    free(text), free(kind), free(ck_id);
    return rc;
}

static void final_close(Final *f) {
    config_free(f->cfg);
    free(f->run_id);
}

// Whose the eval log at path is (its attributes run_id and step).
enum { EVAL_OF_STEP, EVAL_OF_EARLIER_STEP, EVAL_OF_OTHER };

// EVAL_OF_STEP: this run at its final step; EVAL_OF_EARLIER_STEP: this run (the same run_id)
// at another step, left by the run before it was extended (train.steps raised), so it no
// longer describes the final policy; EVAL_OF_OTHER: another run's, or a log that cannot say.
static int eval_owner(const char *path, const Final *f, long long *step_out) {
    char *id = log_attr(path, "run_id"), *step = log_attr(path, "step");
    int same_run = !f->run_id || (id && strcmp(id, f->run_id) == 0);
    long long st = step ? strtoll(step, NULL, 10) : -1;
    *step_out = st;
    int who = !step || !same_run ? EVAL_OF_OTHER
              : st == f->step    ? EVAL_OF_STEP
              : f->run_id        ? EVAL_OF_EARLIER_STEP
                                 : EVAL_OF_OTHER;
    free(id), free(step);
    return who;
}

// Evaluates f's policy m (greedy: which == FINAL_GREEDY) into its file. 0, or -1 with a message.
static int evaluate_into(const Final *f, Model *m, int which, int samples, char *err, size_t errlen) {
    const Config *c = f->cfg;
    const Tokenizer *tk = tokenizer_default();
    char out[4300], e[1024];
    final_eval_path(f->run, which, out, sizeof out);
    EvalConfig ec = {.reward_rule = setup_reward_rule(c), .world_seed = (uint64_t)config_settings(c)->world.seed,
                     .batch = config_settings(c)->eval.batch, .limit = config_settings(c)->eval.limit,
                     .pool_seed = (uint64_t)config_settings(c)->run.seed, .progress = 1,
                     .samples = which == FINAL_GREEDY ? 1 : samples, .source_run = f->run, .source_step = f->step,
                     .source_run_id = f->run_id};
    if (template_parse(config_settings(c)->world.template, &ec.template_kind) != 0)
        return set_err(err, errlen, "%s: world.template '%s' is not known", f->run, config_settings(c)->world.template);
    ec.sampler = (SamplerConfig){.temperature = which == FINAL_GREEDY ? 0.0f : 1.0f, .top_p = 1.0f,
                                 .max_new_tokens = config_settings(c)->world.max_new_tokens, .eos_token = TOK_EOS,
                                 .stop_token = template_stop_token(tk, ec.template_kind),
                                 .seed = (uint64_t)config_settings(c)->run.seed, .env = setup_sampler_env(c),
                                 .split_bytes = setup_split_bytes(c)};
    if (eval_check_prompts(m, tk, &ec, e, sizeof e) != 0) return set_err(err, errlen, "%s: %s", f->run, e);
    fprintf(stderr, "eval-run: %s at step %lld, %s -> %s\n", f->run, (long long)f->step,
            which == FINAL_GREEDY ? "greedy" : "temperature 1", out);
    int nr = eval_num_responses(&ec), nrec = 0;
    EvalRecord *recs = xcalloc((size_t)nr + 1, sizeof *recs);
    EvalResult res;
    double t0 = wall_time();
    evaluate_benchmarks(m, tk, &ec, &res, recs, &nrec);
    int rc = out_claim("cannot write", out, err, errlen);
    if (rc == 0) {
        rc = eval_write_hdf5(out, f->ckpt, &ec, &res, recs, nrec, err, errlen);
        out_release(out);
    }
    free(recs);
    if (rc == 0)
        fprintf(stderr, "eval-run: %s: score %.4f over %d responses (%.0f s)\n", out, res.score, nrec, wall_time() - t0);
    return rc;
}

// Evaluates one run; 0, or -1 with a message.
static int eval_one(const char *run, int samples, int greedy, const char *threads, const char *backend,
                    int overwrite, char *err, size_t errlen) {
    Final f;
    if (final_open(&f, run, threads, err, errlen) != 0) {
        final_close(&f);
        return -1;
    }
    int todo[2] = {greedy, 1}, any = 0;
    for (int w = 0; w < 2; w++) {
        char out[4300];
        final_eval_path(run, w, out, sizeof out);
        if (todo[w] && !overwrite && access(out, F_OK) == 0) {
            long long was;
            int who = eval_owner(out, &f, &was);
            if (who == EVAL_OF_STEP) {
                fprintf(stderr, "eval-run: %s exists (kept; --overwrite evaluates again)\n", out);
                todo[w] = 0;
            } else if (who == EVAL_OF_EARLIER_STEP) {
                fprintf(stderr, "eval-run: %s is of this run at step %lld, before it went on to step %lld: "
                        "evaluated again\n", out, was, (long long)f.step);
            } else {
                final_close(&f);
                return set_err(err, errlen, "%s exists and is not of this run (run_id %s) at step %lld (an earlier "
                               "run at this path?): give --overwrite to replace it", out,
                               f.run_id ? f.run_id : "none", (long long)f.step);
            }
        }
        any |= todo[w];
    }
    int rc = 0;
    if (any) {
        Backend *bk = NULL;
        Model *m = NULL;
        char e[1024];
        if (!(bk = setup_backend(f.cfg, backend, 1, e, sizeof e)) ||
            !(m = policy_open(bk, f.ckpt, NULL, 1, NULL, e, sizeof e)))
            rc = set_err(err, errlen, "%s", e);
        for (int w = 0; w < 2 && rc == 0; w++)
            if (todo[w]) rc = evaluate_into(&f, m, w, samples, err, errlen);
        model_free(m);
        if (bk) backend_destroy(bk);
    }
    final_close(&f);
    return rc;
}

int cmd_eval_run(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    if (a.n_positional == 0) {
        fprintf(stderr, "grpolab eval-run: error: no run log given (RUN.h5...)\n");
        cli_print_usage(&spec, stderr);
        return 2;
    }
    int samples = EVAL_RUN_SAMPLES;
    const char *ks = cli_get(&spec, &a, "samples"), *threads = cli_get(&spec, &a, "threads");
    char *end;
    if (ks) {
        long k = strtol(ks, &end, 10);
        if (!*ks || *end || k < 1 || k > EVAL_MAX_SAMPLES) {
            fprintf(stderr, "grpolab eval-run: error: --samples '%s': expected a whole number in 1 .. %d\n", ks,
                    EVAL_MAX_SAMPLES);
            return 2;
        }
        samples = (int)k;
    }
    if (threads) {
        long t = strtol(threads, &end, 10);
        if (!*threads || *end || t < 1) {
            fprintf(stderr, "grpolab eval-run: error: --threads '%s': expected a positive whole number\n", threads);
            return 2;
        }
    }
    int failed = 0, done = 0;
    char err[2048];
    for (int i = 0; i < a.n_positional; i++) {
        char **runs = NULL, note[8];
        int n = sweep_expand_dir(a.positional[i], &runs, NULL, note, sizeof note, err, sizeof err);
        if (n < 0) {
            fprintf(stderr, "grpolab eval-run: error: %s\n", err);
            return 2;
        }
        for (int j = 0; j < (n ? n : 1); j++) {
            const char *run = n ? runs[j] : a.positional[i];
            if (eval_one(run, samples, cli_flag(&spec, &a, "greedy"), threads, cli_get(&spec, &a, "backend"),
                         cli_flag(&spec, &a, "overwrite"), err, sizeof err) != 0) {
                fprintf(stderr, "grpolab eval-run: error: %s\n", err);
                failed++;
            } else {
                done++;
            }
            if (n) free(runs[j]);
        }
        free(runs);
    }
    if (failed) fprintf(stderr, "eval-run: %d run%s evaluated, %d failed (above)\n", done, done == 1 ? "" : "s", failed);
    return failed ? 1 : 0;
}
