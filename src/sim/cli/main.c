// main.c: `grpolab <command> [options]`, the command table and the small commands.
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../analysis/analysis.h"
#include "../../common.h"
#include "../../kernels/kernels.h"
#include "bench.h"
#include "../model/checkpoint.h"
#include "../io/cli.h"
#include "../io/config.h"
#include "../parallel/dist.h"
#include "eval_run.h"
#include "../rl/evaluate.h"
#include "../io/h5util.h"
#include "../io/interrupt.h"
#include "../io/libenv.h"
#include "../io/logschema.h"
#include "../model/model.h"
#include "../rl/objective.h"
#include "../rl/pretrain.h"
#include "../rl/resume.h"
#include "../rl/setup.h"
#include "../sweep/sweep.h"
#include "../world/tokenizer.h"
#include "../rl/train.h"

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} Command;

static int cmd_help(int argc, char **argv);
static int check_train_init(Config *c);
static int check_model_init(Config *c, const char *key, const char *init, const char *what,
                            int required);

// ---------------------------------------------------------------- version
static int cmd_version(int argc, char **argv) {
    static const CliSpec spec = {"version", "Print the version of grpolab and its backends.", "", NULL,
                                 0, 0, NULL};
    CliArgs a;
    int rc = cli_parse(&spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    char why[256];
    int cuda = backend_cuda_available(why, sizeof why);
    printf("grpolab %s (commit %s)\n", GRPOLAB_VERSION, grpolab_commit());
    printf("blas: %s\n", backend_blas_config());
    char origin[128];
    printf("blas kernels: %s (%s)\n", backend_blas_core(), libenv_blas_origin(origin, sizeof origin));
#ifdef GRPOLAB_CUDA
    printf("backends: cpu (built), cuda (built; %s)\n", cuda ? "device available" : why);
#else
    (void)cuda;
    printf("backends: cpu (built), cuda (not built: no nvcc at build time)\n");
#endif
    return 0;
}

// ---------------------------------------------------------------- config
static const CliOption config_opts[] = {
    {"print", "FILE", "print the resolved config of FILE (defaults + FILE + --set) as INI"},
    {"set", "SECTION.KEY=VALUE", "override one key (repeatable)"},
    {"keys", NULL, "list every config key: type, default, allowed values, meaning"},
    {"against", "RUN.h5", "instead of printing, compare with the config stored in a train run log: "
                          "exit 0 if the same, 1 (listing the keys) if not; run.threads, "
                          "run.backend and run.out are not compared"},
    {"against-model", "MODEL.h5", "the same for a base model written by `grpolab pretrain`, on "
                                  "the keys pretraining reads ([train], [eval], [objective], "
                                  "run.threads, run.backend, run.out, pretrain.out, "
                                  "pretrain.log_every and pretrain.checkpoint_every are not "
                                  "compared)"},
};
static const CliSpec config_spec = {
    "config", "Print a resolved config, or the list of config keys.",
    "(--print FILE [--set SECTION.KEY=VALUE]... [--against RUN.h5 | --against-model MODEL.h5] | "
    "--set ... | --keys)",
    config_opts, 5, 0, NULL};

static int cmd_config(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&config_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    if (cli_flag(&config_spec, &a, "keys")) {
        config_print_keys(stdout);
        return 0;
    }
    const char *path = cli_get(&config_spec, &a, "print");
    if (!path && a.n_sets == 0) {
        cli_print_usage(&config_spec, stderr);
        return 2;
    }
    Config *c = cli_load_config(path, &a);
    if (!c) return 2;
    ModelConfig mc;
    char err[512];
    if (setup_model_config(c, &mc, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s%s%s\n", path ? path : "", path ? ": " : "", err);
        config_free(c);
        return 2;
    }
    const char *run = cli_get(&config_spec, &a, "against");
    const char *model = cli_get(&config_spec, &a, "against-model");
    if (run && model) {
        fprintf(stderr, "grpolab config: error: --against and --against-model: give one of them\n");
        config_free(c);
        return 2;
    }
    if (run && check_train_init(c) != 0) {  // [model] as train would resolve it
        config_free(c);
        return 2;
    }
    if (run || model) {
        char msg[1024];
        int same = run ? resume_compare_run_config(run, c, 0, msg, sizeof msg)
                       : pretrain_compare_model_config(model, c, msg, sizeof msg);
        config_free(c);
        if (same < 0) {
            fprintf(stderr, "grpolab: error: %s\n", msg);
            return 2;
        }
        if (same > 0) {
            printf("%s\n", msg);
            return 1;
        }
        printf("%s was %s with this config\n", run ? run : model, run ? "trained" : "pretrained");
        return 0;
    }
    char *text = config_to_ini(c);
    fputs(text, stdout);
    free(text);
    config_free(c);
    return 0;
}

// The world's tokenizer vocabulary, token strings in id order (what checkpoints store).
static int world_vocab(const char *vocab[256]) {
    const Tokenizer *tk = tokenizer_default();
    int n = tok_vocab_size(tk);
    for (int i = 0; i < n; i++) vocab[i] = tok_str(tk, i);
    return n;
}

// ---------------------------------------------------------------- init
static const CliOption init_opts[] = {
    {"config", "FILE", "config file (INI); defaults are used for keys it does not set"},
    {"set", "SECTION.KEY=VALUE", "override one key (repeatable)"},
    {"out", "FILE", "checkpoint to write (required), e.g. data/models/init.h5"},
    {"overwrite", NULL, "replace an existing --out FILE (without it, an existing FILE is an error)"},
};
static const CliSpec init_spec = {
    "init", "Write a randomly initialised model (from [model] and run.seed) as an HDF5 checkpoint.",
    "[--config FILE] [--set SECTION.KEY=VALUE]... --out FILE [--overwrite]", init_opts, 4, 0, NULL};

static int cmd_init(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&init_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    const char *out = cli_get(&init_spec, &a, "out");
    if (!out || !*out) {
        fprintf(stderr, "grpolab init: error: --out FILE is required\n");
        return 2;
    }
    const char *cfg_path = cli_get(&init_spec, &a, "config");
    int overwrite = cli_flag(&init_spec, &a, "overwrite");
    Config *c = cli_load_config(cfg_path, &a);
    if (!c) return 2;
    char err[1024];
    ModelConfig mc;
    if (setup_model_config(c, &mc, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s%s%s\n", cfg_path ? cfg_path : "", cfg_path ? ": " : "", err);
        config_free(c);
        return 2;
    }
    if (check_out_path("cannot write checkpoint", out, overwrite, err, sizeof err) != 0 ||
        out_claim("cannot write checkpoint", out, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        config_free(c);
        return 2;
    }
    Backend *bk = backend_create(BACKEND_CPU, err, sizeof err);
    if (!bk) die("%s", err);
    Model *m = model_create(bk, &mc);
    model_init_params(m, (uint64_t)config_settings(c)->run.seed);
    char *text = config_to_ini(c);
    const char *vocab[256];
    int nv = world_vocab(vocab);  // stored when the model fits this world's tokenizer
    CkptInfo info = {.vocab = vocab, .n_vocab = mc.vocab_size == nv ? nv : 0, .config_text = text,
                     .step = 0, .with_optimizer = 0, .keep_existing = !overwrite};
    int ok = checkpoint_save(out, m, &info, err, sizeof err) == 0;
    out_release(out);
    if (ok)
        printf("wrote %s: %zu parameters (%d layers, d_model %d)\n", out, model_num_params(m),
               mc.n_layers, mc.d_model);
    else
        fprintf(stderr, "grpolab: error: %s\n", err);
    free(text);
    model_free(m);
    backend_destroy(bk);
    config_free(c);
    return ok ? 0 : 1;
}

// ---------------------------------------------------------------- bench
static const CliOption bench_opts[] = {
    {"backend", "NAME", "auto|cpu|cuda (default: run.backend, auto)"},
    {"steps", "N", "timed training steps, best one reported (default 3)"},
    {"quick", NULL, "a much smaller model and batch (smoke test of the benchmark itself)"},
    {"set", "SECTION.KEY=VALUE", "override one key, e.g. run.threads=1 (repeatable)"},
};
static const CliSpec bench_spec = {
    "bench",
    "Kernel benchmark of docs/benchmarks.md: training step (d_model 256, 4 layers, 4 heads,\n"
    "d_ff 688, vocab 64, batch 64 x 128) tokens/s and GFLOP/s against the backend's sgemm\n"
    "(cblas 1024^3 on the CPU, cuBLAS 4096^3 on CUDA) measured in the same run,\n"
    "and batched KV-cache decoding (256 sequences, 32-token prompt, 96 new tokens).",
    "[--backend NAME] [--steps N] [--quick] [--set SECTION.KEY=VALUE]...", bench_opts, 4, 0, NULL};

static int parse_positive_int(const char *opt, const char *s, int *out) {
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || *end != '\0' || v < 1 || v > 1000000) {
        fprintf(stderr, "grpolab: error: --%s '%s': expected an integer in [1, 1000000]\n", opt,
                s ? s : "");
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int cmd_bench(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&bench_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    int steps = 3;
    const char *s = cli_get(&bench_spec, &a, "steps");
    if (s && parse_positive_int("steps", s, &steps) != 0) return 2;
    int quick = cli_flag(&bench_spec, &a, "quick");
    Config *c = cli_load_config(NULL, &a);
    if (!c) return 2;
    char err[512];
    Backend *bk = setup_backend(c, cli_get(&bench_spec, &a, "backend"), 1, err, sizeof err);
    if (!bk) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        config_free(c);
        return 2;
    }
    ModelConfig mc = model_config_default();
    mc.vocab_size = 64;
    mc.d_model = quick ? 64 : 256;
    mc.n_layers = quick ? 2 : 4;
    mc.n_heads = 4;
    mc.n_kv_heads = 4;
    mc.d_ff = quick ? 172 : 688;
    mc.max_seq_len = 128;
    int B = quick ? 8 : 64, T = quick ? 64 : 128;
    int dB = quick ? 16 : 256, dP = 32, dN = quick ? 16 : 96;
    int threads = config_settings(c)->run.threads;
    printf("grpolab bench: backend %s, threads %s%d\n", backend_name(bk->kind),
           threads ? "" : "all = ", threads ? threads : omp_get_max_threads());
    int sn = quick ? 256 : (bk->kind == BACKEND_CUDA ? 4096 : 1024);
    double sg = bench_sgemm_gflops(bk, sn, 5);
    printf("  sgemm %dx%dx%d (%s)%*s %8.1f GFLOP/s\n", sn, sn, sn,
           bk->kind == BACKEND_CUDA ? (bk->use_tf32 ? "cuBLAS, TF32" : "cuBLAS") : "cblas", 8, "", sg);
    BenchTrain tr = bench_train_step(bk, &mc, B, T, steps);
    printf("  train step fwd+bwd+AdamW, %zu params, batch %dx%d:\n", tr.params, B, T);
    printf("      %10.0f tokens/s  %8.1f GFLOP/s  (%.1f%% of sgemm)  %.3f s/step\n",
           tr.tokens_per_s, tr.gflops, 100.0 * tr.gflops / sg, tr.seconds);
    double dec = bench_decode(bk, &mc, dB, dP, dN);
    printf("  KV-cache decoding, %d sequences, prompt %d, %d new tokens:\n", dB, dP, dN);
    printf("      %10.0f tokens/s\n", dec);
    backend_destroy(bk);
    config_free(c);
    return 0;
}

// ---------------------------------------------------------------- pretrain
static const CliOption pretrain_opts[] = {
    {"config", "FILE", "config file (e.g. experiments/base/pretrain.ini)"},
    {"set", "SECTION.KEY=VALUE", "override one key (repeatable)"},
    {"out", "FILE", "checkpoint to write (default: pretrain.out, data/models/base.h5)"},
    {"init", "FILE", "continue from this checkpoint (pretrain.init): its weights and architecture; "
                     "its config and weights' fingerprint are recorded in the output"},
    {"backend", "NAME", "auto|cpu|cuda (default: run.backend)"},
    {"overwrite", NULL, "replace an existing --out FILE and the checkpoint of an interrupted "
                        "pretraining into it (without it, either is an error)"},
    {"resume", NULL, "go on from FILE.ckpt.h5, the checkpoint of an interrupted pretraining "
                     "(from step 0 where there is none)"},
};
static const CliSpec pretrain_spec = {
    "pretrain",
    "Train the base model by next-token cross-entropy on the world's corpus (docs/corpus.md);\n"
    "prints a progress line (step, loss, tokens/s, ETA) and writes an HDF5 checkpoint; keeps\n"
    "FILE.ckpt.h5 every pretrain.checkpoint_every steps for --resume.",
    "[--config FILE] [--set SECTION.KEY=VALUE]... [--out FILE] [--resume | --overwrite]\n"
    "       [--init FILE] [--backend NAME]",
    pretrain_opts, 7, 0, NULL};

static int cmd_pretrain(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&pretrain_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    Config *c = cli_load_config(cli_get(&pretrain_spec, &a, "config"), &a);
    if (!c) return 2;
    // --init is pretrain.init, so the stored config names the model this one continues; the
    // architecture is the init's ([model] keys the config sets must agree with it)
    const char *init = cli_get(&pretrain_spec, &a, "init");
    char err[1024];
    if (init) {
        char set[1200];
        snprintf(set, sizeof set, "pretrain.init=%s", init);
        if (config_set(c, set, err, sizeof err) != 0) {
            fprintf(stderr, "grpolab: error: --init: %s\n", err);
            config_free(c);
            return 2;
        }
    }
    if (check_model_init(c, "pretrain.init", config_settings(c)->pretrain.init, "pretraining continues", 1) != 0) {
        config_free(c);
        return 2;
    }
    const char *out = cli_get(&pretrain_spec, &a, "out");
    if (!out) out = config_settings(c)->pretrain.out;
    // refused and claimed before any training: a run whose model cannot be saved never starts
    // (pretrain_run checks the directory and the free space after the config)
    int resume = cli_flag(&pretrain_spec, &a, "resume"), overwrite = cli_flag(&pretrain_spec, &a, "overwrite");
    if (resume && overwrite) {
        fprintf(stderr, "grpolab pretrain: error: --resume and --overwrite exclude each other\n");
        config_free(c);
        return 2;
    }
    // claimed first, so that the checks below and the output's creation are one step for
    // another pretraining into the same file
    int claimed = check_parent_dir("", out, NULL, 0) == 0;
    if (claimed && out_claim("cannot write checkpoint", out, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        config_free(c);
        return 2;
    }
    if (resume && access(out, F_OK) == 0) {
        // finished (a kill between writing the model and removing the checkpoint leaves both)
        rc = pretrain_compare_model_config(out, c, err, sizeof err) == 0 ? 0 : 2;
        char *ckpt = path_with_suffix(out, RESUME_CKPT_SUFFIX);
        if (rc == 0 && unlink(ckpt) == 0) fprintf(stderr, "pretrain: removed %s (the model was written)\n", ckpt);
        free(ckpt);
        if (rc == 0)
            fprintf(stderr, "pretrain: --resume: %s is complete (pretrained with this config): nothing "
                    "to do\n", out);
        else
            fprintf(stderr, "grpolab: error: --resume: %s exists and is not this pretraining's model: "
                    "%s\n", out, err);
    } else if (!overwrite && check_out_path("cannot write checkpoint", out, 0, err, sizeof err) != 0 &&
               access(out, F_OK) == 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        rc = 2;
    } else {
        train_note_command(argc, argv);
        rc = pretrain_run(c, cli_get(&pretrain_spec, &a, "backend"), out, NULL,
                          resume ? PRETRAIN_RESUME : overwrite ? PRETRAIN_OVERWRITE : PRETRAIN_NEW, NULL);
    }
    if (claimed) out_release(out);
    config_free(c);
    return rc;
}

// ---------------------------------------------------------------- eval
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
    const char *ks = cli_get(&eval_spec, a, "samples");
    if (ks && (parse_positive_int("samples", ks, &ec.samples) != 0 || ec.samples > EVAL_MAX_SAMPLES)) {
        if (ec.samples > EVAL_MAX_SAMPLES)
            fprintf(stderr, "grpolab eval: error: --samples %s: at most %d\n", ks, EVAL_MAX_SAMPLES);
        config_free(c);
        return 2;
    }
    if (ec.samples > 1 && !ts) {
        fprintf(stderr, "grpolab eval: error: --samples %d: greedy responses are all alike; give --temperature X\n",
                ec.samples);
        config_free(c);
        return 2;
    }
    ec.limit = config_settings(c)->eval.limit;
    const char *ls = cli_get(&eval_spec, a, "limit");
    if (ls && parse_positive_int("limit", ls, &ec.limit) != 0) {
        config_free(c);
        return 2;
    }
    const char *tp = cli_get(&eval_spec, a, "train-pool");
    if (tp && parse_positive_int("train-pool", tp, &ec.train_pool) != 0) {
        config_free(c);
        return 2;
    }
    ec.pool_seed = (uint64_t)config_settings(c)->run.seed;
    const char *sh = cli_get(&eval_spec, a, "show");
    if (sh && parse_positive_int("show", sh, &ec.show) != 0) {
        config_free(c);
        return 2;
    }
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
    ModelConfig mc;
    char *model_config = NULL;  // written to --out, so that the log says which corpus made the model
    if (checkpoint_read_meta(model_path, &mc, NULL, NULL, &model_config, NULL, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        config_free(c);
        free(model_config);
        return 2;
    }
    ec.model_config = model_config;
    const Tokenizer *tk = tokenizer_default();
    if (mc.vocab_size != tok_vocab_size(tk)) {
        fprintf(stderr, "grpolab: error: checkpoint '%s' has model.vocab_size = %d, not the "
                "tokenizer's %d tokens: not a model of this world\n", model_path, mc.vocab_size,
                tok_vocab_size(tk));
        config_free(c);
        free(model_config);
        return 2;
    }
    const char *vocab[256];
    int nv = world_vocab(vocab);
    if (checkpoint_check_vocab(model_path, vocab, nv, 0, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        config_free(c);
        free(model_config);
        return 2;
    }
    Backend *bk = setup_backend(c, cli_get(&eval_spec, a, "backend"), 1, err, sizeof err);
    if (!bk) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        config_free(c);
        free(model_config);
        return 2;
    }
    Model *m = model_create(bk, &mc);
    if (checkpoint_load(model_path, m, 0, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s\n", err);
        model_free(m);
        backend_destroy(bk);
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
    if (out) interrupt_restore(&handlers);
    if (res.stopped) {
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
done:
    free(config_text);
    free(recs);
    model_free(m);
    backend_destroy(bk);
    config_free(c);
    free(model_config);
    return rc;
}

static int cmd_eval(int argc, char **argv) {
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

// ---------------------------------------------------------------- train
static const CliOption train_opts[] = {
    {"config", "FILE", "config file (e.g. experiments/fig5/grpo.ini)"},
    {"set", "SECTION.KEY=VALUE", "override one key (repeatable)"},
    {"out", "FILE", "HDF5 run log to write (default: run.out, else data/runs/train.h5); "
                    "checkpoints go to FILE.ckpt.h5"},
    {"resume", NULL, "continue from FILE.ckpt.h5, truncating the log to the steps before it"},
    {"overwrite", NULL, "replace an existing run log FILE (without it, an existing FILE is an error)"},
    {"backend", "NAME", "auto|cpu|cuda (default: run.backend)"},
};
static const CliSpec train_spec = {
    "train",
    "RL on the task world with the [objective] (GRPO, Dr. GRPO, DAPO, RLOO): P prompts x G\n"
    "responses per step, PPO-clip minibatch updates; a progress line per step, an HDF5 run log\n"
    "(/train, /questions, /responses, /tokens, /eval) and checkpoints for --resume.",
    "--config FILE [--set SECTION.KEY=VALUE]... [--out FILE.h5] [--resume | --overwrite]\n"
    "       [--backend NAME]",
    train_opts, 6, 0, NULL};

// The model RL trains is train.init's: a [model] key the config sets must agree with it
// (else refused, naming the key, the config's value and the checkpoint's), and the keys it
// leaves unset take the checkpoint's values, so the run log records the model that was
// trained. A present tokenizer vocabulary must be this world's. An unreadable train.init is
// left to train_run, which says why.
static int check_train_init(Config *c) {
    return check_model_init(c, "train.init", config_settings(c)->train.init, "RL trains", 0);
}

// The same for the checkpoint init that the config key `key` names (train.init, pretrain.init;
// the name is for messages, init its value, which c's changes leave as it is): `what` says who
// trains it in the message; required: an unreadable checkpoint is an error here (else it is
// left to the caller's loader).
static int check_model_init(Config *c, const char *key, const char *init, const char *what,
                            int required) {
    if (!*init) return 0;
    ModelConfig mc;
    char err[1024];
    if (checkpoint_read_meta(init, &mc, NULL, NULL, NULL, NULL, NULL, err, sizeof err) != 0) {
        if (required) fprintf(stderr, "grpolab: error: %s: %s\n", key, err);
        return required ? -1 : 0;
    }
    const char *vocab[256];
    int nv = world_vocab(vocab);
    if (mc.vocab_size == nv && checkpoint_check_vocab(init, vocab, nv, 1, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab: error: %s: %s\n", key, err);
        return -1;
    }
    const Settings *S = config_settings(c);
    const SettingsSet *given = config_settings_set(c);
    // the checkpoint's value, the config's (a float as the model holds it) and whether it is set
#define MODEL_KEY(field, now) {"model." #field, mc.field, now, given->model.field}
    struct {
        const char *key;
        double value, now;
        bool set;
    } keys[] = {MODEL_KEY(vocab_size, S->model.vocab_size), MODEL_KEY(d_model, S->model.d_model),
                MODEL_KEY(n_layers, S->model.n_layers), MODEL_KEY(n_heads, S->model.n_heads),
                MODEL_KEY(n_kv_heads, S->model.n_kv_heads), MODEL_KEY(d_ff, S->model.d_ff),
                MODEL_KEY(max_seq_len, S->model.max_seq_len),
                MODEL_KEY(tied_embeddings, S->model.tied_embeddings),
                MODEL_KEY(rope_theta, (float)S->model.rope_theta),
                MODEL_KEY(norm_eps, (float)S->model.norm_eps)};
#undef MODEL_KEY
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const CfgKey *k = config_schema_key(keys[i].key);
        const double now = keys[i].now;
        char set[128];
        if (now == keys[i].value) continue;
        if (keys[i].set) {
            fprintf(stderr, "grpolab: error: the config sets %s = %.9g, but %s '%s' is a model "
                    "with %.9g: the model %s is %s's; remove the key from [model] or "
                    "make it match\n", keys[i].key, now, key, init, keys[i].value, what, key);
            return -1;
        }
        if (k->type == CFG_BOOL)
            snprintf(set, sizeof set, "%s=%s", keys[i].key, keys[i].value != 0 ? "true" : "false");
        else
            snprintf(set, sizeof set, "%s=%.9g", keys[i].key, keys[i].value);
        if (config_set(c, set, err, sizeof err) != 0) die("%s's %s: %s", key, keys[i].key, err);
    }
    return 0;
}

static int cmd_train(int argc, char **argv) {
    CliArgs a;
    int rc = cli_parse(&train_spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    Config *c = cli_load_config(cli_get(&train_spec, &a, "config"), &a);
    if (!c) return 2;
    const char *out = cli_get(&train_spec, &a, "out");
    if (!out) out = *config_settings(c)->run.out ? config_settings(c)->run.out : "data/runs/train.h5";
    int resume = cli_flag(&train_spec, &a, "resume");
    if (resume && cli_flag(&train_spec, &a, "overwrite")) {
        fprintf(stderr, "grpolab train: error: --resume and --overwrite exclude each other\n");
        config_free(c);
        return 2;
    }
    // the claim first, so that the check below and the log's creation are one step for
    // another train on the same --out (train_run creates a missing directory and claims then);
    // with several ranks rank 0 alone claims and writes, and its answers hold for all
    char err[1024];
    int claimed = dist_rank() == 0 && check_parent_dir("", out, NULL, 0) == 0;
    int refused = claimed && out_claim("cannot write run log", out, err, sizeof err) != 0;
    if (refused) fprintf(stderr, "grpolab: error: %s\n", err);
    if (refused) claimed = 0;
    dist_broadcast(&refused, sizeof refused, 0);
    if (refused) {
        config_free(c);
        return 2;
    }
    int exists = access(out, F_OK) == 0;
    dist_broadcast(&exists, sizeof exists, 0);  // rank 0's answer: it creates the log
    if (!resume && !cli_flag(&train_spec, &a, "overwrite") && exists) {
        // a finished run's log is data: never replaced silently
        fprintf(stderr, "grpolab: error: run log '%s' already exists: continue it with --resume, "
                "replace it with --overwrite, or choose another --out\n", out);
        if (claimed) out_release(out);
        config_free(c);
        return 2;
    }
    if (check_train_init(c) != 0) {
        if (claimed) out_release(out);
        config_free(c);
        return 2;
    }
    train_note_command(argc, argv);
    rc = train_run(c, cli_get(&train_spec, &a, "backend"), out,
                   resume ? TRAIN_RESUME : cli_flag(&train_spec, &a, "overwrite") ? TRAIN_OVERWRITE : TRAIN_NEW,
                   NULL);
    if (claimed) out_release(out);
    config_free(c);
    return rc;
}

// ---------------------------------------------------------------- schema
static int cmd_schema(int argc, char **argv) {
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

// ---------------------------------------------------------------- table
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
