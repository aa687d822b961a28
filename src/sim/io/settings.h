// settings.h: every setting grpolab knows, one row each, and the typed structs made from the
// rows. The table generates the config schema (CONFIG_SCHEMA: defaults, range and enum checks,
// the INI writer, --set, the config diff of --resume and sweeps, `grpolab config --keys` and
// the table of docs/config.md) and the struct Settings that code reads
// (config_settings(c)->model.d_model), so that code never names a setting by a string.
//
// Row: X(section, key, TYPE, C type, default as text, min, max, enum choices, doc line)
//   TYPE     INT, FLOAT, BOOL, STRING or ENUM (config.h: how the value is parsed and checked)
//   C type   the field's type in Settings: int or int64_t (INT), double (FLOAT), bool (BOOL),
//            const char * (STRING and ENUM: ENUM values in the table's spelling)
//   min, max the inclusive range of INT and FLOAT (0, 0 otherwise)
//   choices  ENUM: "a|b|c" (NULL otherwise)
//   doc line the key's meaning, as docs/config.md shows it (`make docs-config` writes it there;
//            a test fails while they differ); only --keys and the docs show it, no run stores it
// Adding a setting: one row here (its section's list), then read config_settings(c)->section.key
// and run `make docs-config`.
// The order of the rows is the order of the INI text a run stores (config_to_ini): a new row
// goes at the end of its section, or stored configs change text. Defaults are checked by
// tests/test_config.c and again by config_new.
#ifndef GRPOLAB_SETTINGS_H
#define GRPOLAB_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#define SETTINGS_MAX_SEED 9007199254740992.0  // 2^53: seeds survive a round trip through a double

#define SETTINGS_RUN(X) \
    X(run, seed, INT, int64_t, "1234", 0, SETTINGS_MAX_SEED, NULL, \
      "seed of every random stream (init, prompts, sampling); same seed, same run on the CPU") \
    X(run, backend, ENUM, const char *, "auto", 0, 0, "auto|cpu|cuda", \
      "kernel backend; auto = cuda when a GPU is usable, else cpu") \
    X(run, threads, INT, int, "0", 0, 1024, NULL, \
      "CPU threads; 0 = all cores (a CPU run's rounding depends on the count: docs/kernels.md). " \
      "Idle threads wait passively unless the environment sets OMP_WAIT_POLICY or GOMP_SPINCOUNT, " \
      "and where OpenBLAS does not know the CPU grpolab names the kernels the CPU allows " \
      "(src/sim/io/libenv.h)") \
    X(run, decode_cache_mib, INT, int, "16", 0, 1048576, NULL, \
      "CPU sampler: KV cache (MiB) a decode batch may read per step before it decodes as two halves, " \
      "one after the other, so that the CPU's caches hold it; 0 = never. Responses do not depend on it " \
      "(docs/kernels.md \"Determinism\")") \
    X(run, tf32, BOOL, bool, "false", 0, 0, NULL, \
      "cuda backend: allow TF32 tensor-core matmuls (faster, ~1e-3 relative error)") \
    X(run, out, STRING, const char *, "", 0, 0, NULL, \
      "output path of the run (HDF5 log); empty = chosen from the command") \

#define SETTINGS_MODEL(X) \
    X(model, vocab_size, INT, int, "64", 2, 65536, NULL, \
      "tokenizer vocabulary size V") \
    X(model, d_model, INT, int, "64", 8, 8192, NULL, \
      "residual stream width C") \
    X(model, n_layers, INT, int, "2", 1, 128, NULL, \
      "transformer blocks L") \
    X(model, n_heads, INT, int, "4", 1, 256, NULL, \
      "query heads NH; divides d_model") \
    X(model, n_kv_heads, INT, int, "2", 1, 256, NULL, \
      "key/value heads NKV (grouped-query attention); divides n_heads") \
    X(model, d_ff, INT, int, "172", 8, 65536, NULL, \
      "SwiGLU hidden size F") \
    X(model, max_seq_len, INT, int, "256", 2, 65536, NULL, \
      "longest sequence (prompt + response) in tokens") \
    X(model, tied_embeddings, BOOL, bool, "true", 0, 0, NULL, \
      "output head shares the token embedding matrix") \
    X(model, rope_theta, FLOAT, double, "10000", 1.0001, 1e9, NULL, \
      "RoPE base frequency (> 1)") \
    X(model, norm_eps, FLOAT, double, "1e-5", 1e-12, 1e-1, NULL, \
      "RMSNorm epsilon") \

#define SETTINGS_OPTIM(X) \
    X(optim, lr, FLOAT, double, "1e-3", 0, 1, NULL, \
      "AdamW learning rate") \
    X(optim, beta1, FLOAT, double, "0.9", 0, 0.999999, NULL, \
      "AdamW first-moment decay") \
    X(optim, beta2, FLOAT, double, "0.95", 0, 0.9999999, NULL, \
      "AdamW second-moment decay") \
    X(optim, eps, FLOAT, double, "1e-8", 1e-12, 1, NULL, \
      "AdamW epsilon") \
    X(optim, weight_decay, FLOAT, double, "0", 0, 10, NULL, \
      "AdamW decoupled weight decay (applied to every tensor)") \
    X(optim, grad_clip, FLOAT, double, "1.0", 0, 1e6, NULL, \
      "max global gradient L2 norm; 0 = no clipping") \

#define SETTINGS_WORLD(X) \
    /* [world]: the embedded task world (docs/world.md) */ \
    X(world, template, ENUM, const char *, "r1", 0, 0, "r1|boxed|none", \
      "prompt template and answer format the verifier requires (docs/world.md)") \
    X(world, seed, INT, int64_t, "2025", 0, SETTINGS_MAX_SEED, NULL, \
      "seed of the evaluation benchmarks (fixed, so every run is scored on the same questions)") \
    X(world, max_new_tokens, INT, int, "200", 1, 65536, NULL, \
      "response budget in tokens; a response without a stop within it is truncated (reward 0)") \
    X(world, check_verdict, ENUM, const char *, "policy", 0, 0, "policy|environment", \
      "who writes a self-check's verdict (ok/no) in rollouts and evals: the policy, or the " \
      "environment from the truth like a tool (its tokens get no gradient; docs/world.md)") \
    X(world, reward_rule, ENUM, const char *, "outcome", 0, 0, "outcome|disagreement_fails|false_step_fails|first_redo_forgives", \
      "outcome = the final answer's reward (a redo after a disagreement can still earn it); " \
      "disagreement_fails = 0 for a response with a visible self-check disagreement; " \
      "false_step_fails = 0 for a response with a false step, as from a grader that checks " \
      "every step; first_redo_forgives = the same, but a false step checked and redone " \
      "right at the first try is forgiven (docs/world.md)") \

#define SETTINGS_PRETRAIN(X) \
    /* [pretrain]: `grpolab pretrain`, next-token cross-entropy on the corpus */ \
    X(pretrain, steps, INT, int, "3000", 1, 100000000, NULL, \
      "optimizer steps") \
    X(pretrain, batch_size, INT, int, "32", 1, 65536, NULL, \
      "corpus documents per step") \
    X(pretrain, micro_batch, INT, int, "8", 1, 65536, NULL, \
      "documents per forward pass (sorted by length; gradients accumulated over the step)") \
    X(pretrain, warmup_steps, INT, int, "100", 0, 100000000, NULL, \
      "linear learning-rate warm-up to optim.lr") \
    X(pretrain, min_lr_frac, FLOAT, double, "0.1", 0, 1, NULL, \
      "cosine decay ends at optim.lr * min_lr_frac") \
    X(pretrain, log_every, INT, int, "50", 1, 100000000, NULL, \
      "steps between progress lines") \
    X(pretrain, checkpoint_every, INT, int, "200", 0, 100000000, NULL, \
      "steps between checkpoints `<out>.ckpt.h5` for --resume (with optimizer state; also on " \
      "SIGINT/SIGTERM; removed when the model is written); 0 = only on a signal") \
    X(pretrain, out, STRING, const char *, "data/models/base.h5", 0, 0, NULL, \
      "checkpoint written at the end (--out overrides)") \
    X(pretrain, init, STRING, const char *, "", 0, 0, NULL, \
      "continue from this checkpoint (--init sets it; empty: a random init from run.seed); its " \
      "architecture is the model's, its stored config and weights' fingerprint go into the output") \

#define SETTINGS_CORPUS(X) \
    /* [corpus]: the pretraining corpus's behaviour knobs (corpus.h, docs/corpus.md); the */ \
    /* defaults equal corpus_params_default() (tested) */ \
    X(corpus, p_template_r1, FLOAT, double, "0.30", 0, 1, NULL, \
      "share of documents in the r1 format") \
    X(corpus, p_template_boxed, FLOAT, double, "0.15", 0, 1, NULL, \
      "share in the boxed format (the rest: plain)") \
    X(corpus, p_r1_off_format, FLOAT, double, "0.30", 0, 1, NULL, \
      "r1-prompted documents that end in another format") \
    X(corpus, p_restate, FLOAT, double, "0.20", 0, 1, NULL, \
      "the reasoning starts by restating the question") \
    X(corpus, p_check_step, FLOAT, double, "0.20", 0, 1, NULL, \
      "per-step re-check probability, plain and boxed documents") \
    X(corpus, p_check_step_r1, FLOAT, double, "0.60", 0, 1, NULL, \
      "per-step re-check probability, r1 documents") \
    X(corpus, check_add_factor, FLOAT, double, "1", 0, 1, NULL, \
      "x the check probability of a + or - step (0: the writer checks only its multiplications; docs/corpus.md)") \
    X(corpus, check_by_fact, BOOL, bool, "false", 0, 0, NULL, \
      "whether a step is checked is fixed per digit fact by world.seed (a step is checked iff its fact's draw is below the check probability), not a coin per step (docs/corpus.md)") \
    X(corpus, p_error_level1, FLOAT, double, "0.02", 0, 1, NULL, \
      "per-step error probability at level 1") \
    X(corpus, p_error_level2, FLOAT, double, "0.05", 0, 1, NULL, \
      "per-step error probability at level 2") \
    X(corpus, p_error_level3, FLOAT, double, "0.08", 0, 1, NULL, \
      "per-step error probability at level 3") \
    X(corpus, p_error_level4, FLOAT, double, "0.12", 0, 1, NULL, \
      "per-step error probability at level 4") \
    X(corpus, p_error_level5, FLOAT, double, "0.16", 0, 1, NULL, \
      "per-step error probability at level 5") \
    X(corpus, error_hard_factor, FLOAT, double, "2.0", 0, 10, NULL, \
      "error probability factor: multiplication of two numbers >= 10") \
    X(corpus, error_easy_factor, FLOAT, double, "0.5", 0, 10, NULL, \
      "error probability factor: both operands one digit") \
    X(corpus, p_check_miss, FLOAT, double, "0.10", 0, 1, NULL, \
      "a check of a wrong step says ok") \
    X(corpus, p_false_alarm, FLOAT, double, "0.02", 0, 1, NULL, \
      "a check of a right step says no") \
    X(corpus, p_recover, FLOAT, double, "0.60", 0, 1, NULL, \
      "after a disagreement: redo the step right (weight)") \
    X(corpus, p_loop, FLOAT, double, "0.25", 0, 1, NULL, \
      "after a disagreement: loop on re-checks / restarts (weight)") \
    X(corpus, p_give_up, FLOAT, double, "0.15", 0, 1, NULL, \
      "after a disagreement: a quick wrong guess (weight)") \
    X(corpus, loop_continue_p, FLOAT, double, "0.70", 0, 0.95, NULL, \
      "after the minimum, one more loop cycle with this probability") \
    X(corpus, loop_continue_spread, FLOAT, double, "0", 0, 8, NULL, \
      "stubbornness: a loop at the step a op b goes on with sigmoid(logit(loop_continue_p) + spread u), u in [-1, 1] fixed per digit fact by world.seed (0 = the same for every fact; docs/corpus.md)") \
    X(corpus, p_loop_restart, FLOAT, double, "0.30", 0, 1, NULL, \
      "a loop cycle restarts from the first step (else redoes the step)") \
    X(corpus, loop_min_cycles, INT, int, "2", 1, 16, NULL, \
      "a loop writes at least this many further wrong attempts (2: every loop meets the verifier's looped flag)") \
    X(corpus, loop_max_cycles, INT, int, "0", 0, 30, NULL, \
      "a loop writes at most this many attempts (0: no cap but the writer's limit of loop_min_cycles + 30)") \
    X(corpus, p_loop_repeat, FLOAT, double, "0", 0, 1, NULL, \
      "a loop repeats the checked wrong value in every attempt (a literal repetition)") \
    X(corpus, p_loop_give_up, FLOAT, double, "0", 0, 1, NULL, \
      "a loop ends with a guess (give up) instead of going on with the wrong value") \
    X(corpus, p_recheck, FLOAT, double, "0", 0, 0.95, NULL, \
      "after a disagreement, check the same step again (it disagrees again), once more each time with this probability") \
    X(corpus, gap_share, FLOAT, double, "0", 0, 1, NULL, \
      "knowledge gaps: share of the digit facts (op and units digits 2-9) the corpus believes wrong, the same wrong value every time; the table is fixed by world.seed (0 = no gaps; docs/corpus.md)") \
    X(corpus, p_gap_right, FLOAT, double, "0", 0, 1, NULL, \
      "a first pass of a gap fact is written right anyway (a redo after a disagreement never is)") \
    X(corpus, p_gap_doubt, FLOAT, double, "0", 0, 1, NULL, \
      "a check of a gap fact written wrong disagrees (else it says ok: the writer believes it)") \
    X(corpus, weight_level1, FLOAT, double, "1", 0, 1000, NULL, \
      "relative share of level 1 in the corpus") \
    X(corpus, weight_level2, FLOAT, double, "1", 0, 1000, NULL, \
      "relative share of level 2 in the corpus") \
    X(corpus, weight_level3, FLOAT, double, "1", 0, 1000, NULL, \
      "relative share of level 3 in the corpus") \
    X(corpus, weight_level4, FLOAT, double, "1", 0, 1000, NULL, \
      "relative share of level 4 in the corpus") \
    X(corpus, weight_level5, FLOAT, double, "1", 0, 1000, NULL, \
      "relative share of level 5 in the corpus") \
    X(corpus, general_share, FLOAT, double, "0", 0, 1, NULL, \
      "share of general documents: generated prose over the letters and punctuation of the tokenizer, no digits or operators (docs/world.md, \"General and question-answer documents\")") \
    X(corpus, qa_share, FLOAT, double, "0", 0, 1, NULL, \
      "share of question-answer documents: the question and a short correct solution (its steps, no checks, no slips) in the document's format; general_share + qa_share <= 1") \
    X(corpus, max_doc_tokens, INT, int, "256", 96, 1024, NULL, \
      "documents are cut here (no `<eos>`); at most model.max_seq_len") \

#define SETTINGS_EVAL(X) \
    /* [eval]: `grpolab eval` and the trainer's periodic evaluation */ \
    X(eval, batch, INT, int, "128", 1, 65536, NULL, \
      "sequences generated together") \
    X(eval, limit, INT, int, "0", 0, 100000000, NULL, \
      "at most this many questions per benchmark (0 = all; for quick checks)") \

#define SETTINGS_OBJECTIVE(X) \
    /* [objective]: the preset gives every knob's default (the table in sim/rl/objective.c and */ \
    /* docs/config.md); a knob the config sets (in a file or by --set; an enum other than */ \
    /* "preset") overrides it, and only then. The numbers below are the grpo preset's: what an */ \
    /* unset key holds in the Config and in its INI text, never read by the trainer. */ \
    X(objective, preset, ENUM, const char *, "grpo", 0, 0, "grpo|dr_grpo|dapo|rloo|bnpo|lite_ppo|gspo|gmpo|cispo|sapo|reinforce_pp_baseline|remax|opo|gpg|grpo_passk", \
      "RL objective preset: the default of every objective key below (docs/objectives.md; " \
      "`grpolab objective --show NAME`)") \
    X(objective, baseline, ENUM, const char *, "preset", 0, 0, "preset|group_mean|leave_one_out|length_weighted|greedy|max_loo", \
      "advantage baseline b_i (length_weighted: OPO's sum_j |o_j| r_j / sum_j |o_j|; greedy: the " \
      "reward of the prompt's greedy response, ReMax, one more greedy generation per prompt and " \
      "step; max_loo: pass@k, only the group's strict best response gets r_max - r_second, every " \
      "other response 0); preset = the preset's") \
    X(objective, scale, ENUM, const char *, "preset", 0, 0, "preset|group_std|batch_std|none|batch_whiten", \
      "advantage scale s_i (group_std, batch_std: the group's or the batch's reward std + std_eps; " \
      "none: 1; batch_whiten: r - b minus its batch mean, over its batch std + std_eps, " \
      "REINFORCE++-baseline); preset = the preset's") \
    X(objective, std_ddof, INT, int, "1", 0, 1, NULL, \
      "delta degrees of freedom of the reward std: 1 (oat/TRL/verl) gives the groups (1,1,0,0) and " \
      "(1,1,1,0) the advantages 0.87, -0.87 and 0.5, -1.5; 0 (population std) gives 1, -1 and 0.58," \
      " -1.73; unset: the preset's (shown: grpo's)") \
    X(objective, std_eps, FLOAT, double, "1e-6", 0, 1, NULL, \
      "added to the std before dividing; unset: the preset's (shown: grpo's)") \
    X(objective, aggregation, ENUM, const char *, "preset", 0, 0, "preset|seq_mean_token_mean|seq_mean_token_sum_norm|token_mean|seq_mean_token_sum|token_sum", \
      "aggregation coefficient c_i (seq_mean_token_mean, grpo's: 1/(M |o_i|); " \
      "seq_mean_token_sum_norm, dr_grpo's: 1/(M L_max); token_mean, dapo's: 1/sum_j |o_j|; " \
      "seq_mean_token_sum, rloo's: 1/M; token_sum: 1); preset = the preset's") \
    X(objective, token_mean_scope, ENUM, const char *, "preset", 0, 0, "preset|global|micro_batch", \
      "the tokens a token_mean divides by: global = the whole minibatch's (every data-parallel " \
      "rank's); micro_batch = the forward pass's times the number of passes (TRL's bnpo: depends on" \
      " train.micro_batch); preset = the preset's") \
    X(objective, ratio, ENUM, const char *, "preset", 0, 0, "preset|token|sequence|geo_mean|none", \
      "importance ratio: token (PPO), sequence (GSPO's s_i = exp(mean_t log rho_t)), geo_mean " \
      "(GMPO: geometric mean, clip in log space), none (plain policy gradient -A log pi, GPG); " \
      "preset = the preset's") \
    X(objective, clip, ENUM, const char *, "preset", 0, 0, "preset|ppo|cispo|sapo|none", \
      "how the ratio enters: ppo (min-clip), cispo (clipped ratio as a stop-gradient weight on log " \
      "pi), sapo (soft gate with tau_pos/tau_neg), none (unclipped ratio); preset = the preset's") \
    X(objective, clip_ratio_c, FLOAT, double, "0", 0, 1e9, NULL, \
      "dual clip (Ye et al. 2019; verl's `actor.clip_ratio_c`, 3 there by default): a token with A " \
      "< 0 and ratio > clip_ratio_c is held there and gets no gradient; 0 = off, else > 1 and only " \
      "with clip ppo and ratio token or sequence; unset: the preset's (every preset: 0)") \
    X(objective, tau_pos, FLOAT, double, "1", 1e-6, 1000, NULL, \
      "SAPO gate temperature for A > 0; unset: the preset's (shown: grpo's)") \
    X(objective, tau_neg, FLOAT, double, "1.05", 1e-6, 1000, NULL, \
      "SAPO gate temperature for A <= 0; unset: the preset's (shown: grpo's)") \
    X(objective, l_max, INT, int, "0", 0, 65536, NULL, \
      "L_max of seq_mean_token_sum_norm; 0 = the sampler's max_new_tokens; unset: the preset's (shown: grpo's)") \
    X(objective, eps_low, FLOAT, double, "0.2", 0, 1, NULL, \
      "PPO clip: ratio >= 1 - eps_low; unset: the preset's (shown: grpo's)") \
    X(objective, eps_high, FLOAT, double, "0.2", 0, 10, NULL, \
      "PPO clip: ratio <= 1 + eps_high; unset: the preset's (shown: grpo's)") \
    X(objective, beta, FLOAT, double, "0", 0, 10, NULL, \
      "KL coefficient (k3 estimator against the frozen initial model); 0 = no KL term; unset: " \
      "the preset's (shown: grpo's)") \
    X(objective, dynamic_sampling, BOOL, bool, "false", 0, 0, NULL, \
      "DAPO dynamic sampling: drop groups whose rewards are all equal; unset: the preset's (shown: grpo's)") \

#define SETTINGS_DIAGNOSTICS(X) \
    /* [diagnostics]: counterfactual diagnostics of `grpolab train` (compare.h) */ \
    X(diagnostics, compare, STRING, const char *, "", 0, 0, NULL, \
      "objective presets (comma-separated, e.g. `grpo,dr_grpo,dapo,gspo,gmpo,cispo,sapo`) whose " \
      "advantages, token weights and gradient every step also computes on the same responses and " \
      "parameters as the trained objective, at several points: rho = 1 (the first minibatch, " \
      "parameters before the update), the update's last minibatch (parameters before its optimizer " \
      "step; the policy has moved, rho != 1) and the extra passes of " \
      "`diagnostics.compare_extra_epochs`: each one's cosine with the unbiased policy gradient, its" \
      " norm, the share of tokens it clips, the mean share of the advantage it passes (gate), and " \
      "the sum of |w| per response-length bin split by correct and incorrect, with each bin's clip " \
      "share and gate (tables /compare and /compare_bins, docs/hdf5-schema.md; `grpolab plot " \
      "objectives`, docs/objectives.md). Training is not changed. Empty = none") \
    X(diagnostics, compare_extra_epochs, INT, int, "1", 0, 64, NULL, \
      "K extra points of diagnostics.compare after the update, on the first minibatch's responses: " \
      "pass k sees the parameters after the update and k - 1 more epochs of the trained objective " \
      "(the epochs a run with train.ppo_epochs + k - 1 would take). Those epochs run on the model, " \
      "whose parameters and AdamW state are saved before and put back after, so the run's " \
      "trajectory and log are those of the run without the diagnostic (a test checks it). Each pass" \
      " costs one forward and backward per compared objective plus one, and each pass after the " \
      "first an epoch of updates") \
    X(diagnostics, length_bins, INT, int, "8", 1, 1024, NULL, \
      "response-length bins of /compare_bins (equal widths up to world.max_new_tokens)") \

#define SETTINGS_TRAIN(X) \
    /* [train]: `grpolab train`, RL on the task world (train.h; objective in [objective]) */ \
    X(train, init, STRING, const char *, "data/models/base.h5", 0, 0, NULL, \
      "checkpoint the policy starts from (and the reference model when objective.beta > 0)") \
    X(train, steps, INT, int, "100", 1, 100000000, NULL, \
      "RL steps (one rollout batch each)") \
    X(train, prompts_per_step, INT, int, "16", 1, 65536, NULL, \
      "P: training questions per step") \
    X(train, group_size, INT, int, "8", 2, 65536, NULL, \
      "G: responses sampled per question (>= 2: the baseline is a group mean)") \
    X(train, minibatch_size, INT, int, "32", 1, 1048576, NULL, \
      "M: responses per optimizer step; must divide prompts_per_step * group_size") \
    X(train, micro_batch, INT, int, "0", 0, 1048576, NULL, \
      "responses per forward/backward pass within a minibatch, sorted by length, gradients " \
      "accumulated: the same update up to float rounding, with less padding; 0 = by backend: 8 on " \
      "the CPU (a faster update there: docs/notebook/2026-12-04-bench-and-fig5-throughput.md), one " \
      "pass on CUDA; >= minibatch_size: one pass") \
    X(train, ppo_epochs, INT, int, "1", 1, 1000, NULL, \
      "mu: passes over each rollout batch") \
    X(train, temperature, FLOAT, double, "1", 1e-3, 100, NULL, \
      "sampling temperature of the rollouts") \
    X(train, top_p, FLOAT, double, "1", 1e-6, 1, NULL, \
      "nucleus sampling mass of the rollouts") \
    X(train, eval_every, INT, int, "0", 0, 100000000, NULL, \
      "greedy benchmark evaluation at step 0, every K steps and at the end; 0 = never") \
    X(train, checkpoint_every, INT, int, "10", 0, 100000000, NULL, \
      "steps between checkpoints `<out>.ckpt.h5` (with optimizer state; also at the end); 0 = end " \
      "only") \
    X(train, bias_diagnostic, BOOL, bool, "true", 0, 0, NULL, \
      "log the cosine of the first minibatch's gradient with the unbiased policy gradient (one extra backward)") \
    X(train, question_set, ENUM, const char *, "weights", 0, 0, "weights|level1|levels1-3|all|ood", \
      "the training questions: `weights` = the levels by train.weight_level1..5; a named set of the" \
      " world replaces those weights: `level1`, `levels1-3`, `all` (levels 1-5), `ood` (the " \
      "out-of-distribution pool; docs/world.md, \"Question sets\")") \
    X(train, weight_level1, FLOAT, double, "1", 0, 1000, NULL, \
      "relative share of level 1 in the training pool") \
    X(train, weight_level2, FLOAT, double, "1", 0, 1000, NULL, \
      "relative share of level 2 in the training pool") \
    X(train, weight_level3, FLOAT, double, "1", 0, 1000, NULL, \
      "relative share of level 3 in the training pool") \
    X(train, weight_level4, FLOAT, double, "1", 0, 1000, NULL, \
      "relative share of level 4 in the training pool") \
    X(train, weight_level5, FLOAT, double, "1", 0, 1000, NULL, \
      "relative share of level 5 in the training pool") \

// Every section, in the order of the INI text.
#define SETTINGS_SECTIONS(S) \
    S(run, RUN) S(model, MODEL) S(optim, OPTIM) S(world, WORLD) S(pretrain, PRETRAIN) \
    S(corpus, CORPUS) S(eval, EVAL) S(objective, OBJECTIVE) S(diagnostics, DIAGNOSTICS) S(train, TRAIN)

// Every row, sections in order.
#define SETTINGS_ROWS(X) \
    SETTINGS_RUN(X) SETTINGS_MODEL(X) SETTINGS_OPTIM(X) SETTINGS_WORLD(X) SETTINGS_PRETRAIN(X) \
    SETTINGS_CORPUS(X) SETTINGS_EVAL(X) SETTINGS_OBJECTIVE(X) SETTINGS_DIAGNOSTICS(X) SETTINGS_TRAIN(X)

#define SETTINGS_FIELD_(sec, key, type, ctype, ...) ctype key;
#define SETTINGS_FLAG_(sec, key, ...) bool key;
#define SETTINGS_SECTION_FIELDS_(sec, SEC) struct { SETTINGS_##SEC(SETTINGS_FIELD_) } sec;
#define SETTINGS_SECTION_FLAGS_(sec, SEC) struct { SETTINGS_##SEC(SETTINGS_FLAG_) } sec;

// The values of a Config, one field per row (strings live until the key changes or the Config
// is freed).
typedef struct {
    SETTINGS_SECTIONS(SETTINGS_SECTION_FIELDS_)
} Settings;

// The name "section.key" of a setting, for a run-log attribute or a message that names it:
// it does not compile unless Settings has that field, so the name cannot drift from the key.
#define SETTING_KEY(section, key) ((void)sizeof(((Settings *)0)->section.key), #section "." #key)

// Per row: true if a file or --set gave the key (even at its default). The [objective] knobs
// override their preset's value only where set (sim/rl/objective.h).
typedef struct {
    SETTINGS_SECTIONS(SETTINGS_SECTION_FLAGS_)
} SettingsSet;

#endif
