// config_schema.c: every setting grpolab knows, one row each (see config.h).
// A module that needs a setting adds its row here; defaults are checked by
// tests/test_config.c and again by config_new.
#include "config.h"

#define NO_RANGE 0, 0
#define MAX_SEED 9007199254740992.0  // 2^53: seeds survive a round trip through a double

const CfgKey CONFIG_SCHEMA[] = {
    // ---- [run]
    {"run", "seed", CFG_INT, "1234", 0, MAX_SEED, NULL,
     "seed of every random stream (init, prompts, sampling); same seed, same run on the CPU"},
    {"run", "backend", CFG_ENUM, "auto", NO_RANGE, "auto|cpu|cuda",
     "kernel backend; auto = cuda when a GPU is usable, else cpu"},
    {"run", "threads", CFG_INT, "0", 0, 1024, NULL, "CPU threads; 0 = all cores (a CPU run's rounding depends on the count: docs/kernels.md)"},
    {"run", "decode_cache_mib", CFG_INT, "16", 0, 1048576, NULL,
     "CPU sampler: KV cache (MiB) a decode batch may read per step before it decodes as two halves, "
     "one after the other, so that the CPU's caches hold it; 0 = never. Responses do not depend on it "
     "(docs/kernels.md \"Determinism\")"},
    {"run", "tf32", CFG_BOOL, "false", NO_RANGE, NULL,
     "cuda backend: allow TF32 tensor-core matmuls (faster, ~1e-3 relative error)"},
    {"run", "out", CFG_STRING, "", NO_RANGE, NULL,
     "output path of the run (HDF5 log); empty = chosen from the command"},

    // ---- [model]
    {"model", "vocab_size", CFG_INT, "64", 2, 65536, NULL, "tokenizer vocabulary size V"},
    {"model", "d_model", CFG_INT, "64", 8, 8192, NULL, "residual stream width C"},
    {"model", "n_layers", CFG_INT, "2", 1, 128, NULL, "transformer blocks L"},
    {"model", "n_heads", CFG_INT, "4", 1, 256, NULL, "query heads NH; divides d_model"},
    {"model", "n_kv_heads", CFG_INT, "2", 1, 256, NULL,
     "key/value heads NKV (grouped-query attention); divides n_heads"},
    {"model", "d_ff", CFG_INT, "172", 8, 65536, NULL, "SwiGLU hidden size F"},
    {"model", "max_seq_len", CFG_INT, "256", 2, 65536, NULL,
     "longest sequence (prompt + response) in tokens"},
    {"model", "tied_embeddings", CFG_BOOL, "true", NO_RANGE, NULL,
     "output head shares the token embedding matrix"},
    {"model", "rope_theta", CFG_FLOAT, "10000", 1.0001, 1e9, NULL, "RoPE base frequency (> 1)"},
    {"model", "norm_eps", CFG_FLOAT, "1e-5", 1e-12, 1e-1, NULL, "RMSNorm epsilon"},

    // ---- [optim]
    {"optim", "lr", CFG_FLOAT, "1e-3", 0, 1, NULL, "AdamW learning rate"},
    {"optim", "beta1", CFG_FLOAT, "0.9", 0, 0.999999, NULL, "AdamW first-moment decay"},
    {"optim", "beta2", CFG_FLOAT, "0.95", 0, 0.9999999, NULL, "AdamW second-moment decay"},
    {"optim", "eps", CFG_FLOAT, "1e-8", 1e-12, 1, NULL, "AdamW epsilon"},
    {"optim", "weight_decay", CFG_FLOAT, "0", 0, 10, NULL, "AdamW decoupled weight decay"},
    {"optim", "grad_clip", CFG_FLOAT, "1.0", 0, 1e6, NULL,
     "max global gradient L2 norm; 0 = no clipping"},
    // [world]: the embedded task world (docs/world.md)
    {"world", "template", CFG_ENUM, "r1", NO_RANGE, "r1|boxed|none",
     "prompt template and answer format the verifier requires"},
    {"world", "seed", CFG_INT, "2025", 0, MAX_SEED, NULL,
     "seed of the evaluation benchmarks (fixed, so every run is scored on the same questions)"},
    {"world", "max_new_tokens", CFG_INT, "200", 1, 65536, NULL,
     "response budget in tokens; a response without a stop within it is truncated (reward 0)"},
    {"world", "check_verdict", CFG_ENUM, "policy", NO_RANGE, "policy|environment",
     "who writes a self-check's verdict (ok/no) in rollouts and evals: the policy, or the "
     "environment from the truth like a tool (its tokens get no gradient; docs/world.md)"},
    {"world", "reward_rule", CFG_ENUM, "outcome", NO_RANGE,
     "outcome|disagreement_fails|false_step_fails|first_redo_forgives",
     "outcome = the final answer's reward (a redo after a disagreement can still earn it); "
     "disagreement_fails = 0 for a response with a visible self-check disagreement; "
     "false_step_fails = 0 for a response with a false step, as from a grader that checks "
     "every step; first_redo_forgives = the same, but a false step checked and redone "
     "right at the first try is forgiven (docs/world.md)"},
    // [pretrain]: `grpolab pretrain`, next-token cross-entropy on the corpus
    {"pretrain", "steps", CFG_INT, "3000", 1, 100000000, NULL, "optimizer steps"},
    {"pretrain", "batch_size", CFG_INT, "32", 1, 65536, NULL, "corpus documents per step"},
    {"pretrain", "micro_batch", CFG_INT, "8", 1, 65536, NULL,
     "documents per forward pass (sorted by length; gradients accumulated over the step)"},
    {"pretrain", "warmup_steps", CFG_INT, "100", 0, 100000000, NULL,
     "linear learning-rate warm-up to optim.lr"},
    {"pretrain", "min_lr_frac", CFG_FLOAT, "0.1", 0, 1, NULL,
     "cosine decay ends at optim.lr * min_lr_frac"},
    {"pretrain", "log_every", CFG_INT, "50", 1, 100000000, NULL, "steps between progress lines"},
    {"pretrain", "checkpoint_every", CFG_INT, "200", 0, 100000000, NULL,
     "steps between checkpoints <out>.ckpt.h5 for --resume (with optimizer state; also on "
     "SIGINT/SIGTERM; removed when the model is written); 0 = only on a signal"},
    {"pretrain", "out", CFG_STRING, "data/models/base.h5", NO_RANGE, NULL,
     "checkpoint written at the end (--out overrides)"},
    {"pretrain", "init", CFG_STRING, "", NO_RANGE, NULL,
     "continue from this checkpoint (--init sets it; empty: a random init from run.seed); its "
     "architecture is the model's, its stored config and weights' fingerprint go into the output"},
    // [corpus]: the pretraining corpus's behaviour knobs (corpus.h, docs/corpus.md); the
    // defaults equal corpus_params_default() (tested)
    {"corpus", "p_template_r1", CFG_FLOAT, "0.30", 0, 1, NULL, "share of documents in the r1 format"},
    {"corpus", "p_template_boxed", CFG_FLOAT, "0.15", 0, 1, NULL, "share in the boxed format (the rest: plain)"},
    {"corpus", "p_r1_off_format", CFG_FLOAT, "0.30", 0, 1, NULL, "r1-prompted documents that end in another format"},
    {"corpus", "p_restate", CFG_FLOAT, "0.20", 0, 1, NULL, "the reasoning starts by restating the question"},
    {"corpus", "p_check_step", CFG_FLOAT, "0.20", 0, 1, NULL, "per-step re-check probability, plain and boxed documents"},
    {"corpus", "p_check_step_r1", CFG_FLOAT, "0.60", 0, 1, NULL, "per-step re-check probability, r1 documents"},
    {"corpus", "check_add_factor", CFG_FLOAT, "1", 0, 1, NULL, "x the check probability of a + or - step (0: the writer checks only its multiplications; docs/corpus.md)"},
    {"corpus", "check_by_fact", CFG_BOOL, "false", NO_RANGE, NULL, "whether a step is checked is fixed per digit fact by world.seed (a step is checked iff its fact's draw is below the check probability), not a coin per step (docs/corpus.md)"},
    {"corpus", "p_error_level1", CFG_FLOAT, "0.02", 0, 1, NULL, "per-step error probability at level 1"},
    {"corpus", "p_error_level2", CFG_FLOAT, "0.05", 0, 1, NULL, "per-step error probability at level 2"},
    {"corpus", "p_error_level3", CFG_FLOAT, "0.08", 0, 1, NULL, "per-step error probability at level 3"},
    {"corpus", "p_error_level4", CFG_FLOAT, "0.12", 0, 1, NULL, "per-step error probability at level 4"},
    {"corpus", "p_error_level5", CFG_FLOAT, "0.16", 0, 1, NULL, "per-step error probability at level 5"},
    {"corpus", "error_hard_factor", CFG_FLOAT, "2.0", 0, 10, NULL, "error probability factor: multiplication of two numbers >= 10"},
    {"corpus", "error_easy_factor", CFG_FLOAT, "0.5", 0, 10, NULL, "error probability factor: both operands one digit"},
    {"corpus", "p_check_miss", CFG_FLOAT, "0.10", 0, 1, NULL, "a check of a wrong step says ok"},
    {"corpus", "p_false_alarm", CFG_FLOAT, "0.02", 0, 1, NULL, "a check of a right step says no"},
    {"corpus", "p_recover", CFG_FLOAT, "0.60", 0, 1, NULL, "after a disagreement: redo the step right (weight)"},
    {"corpus", "p_loop", CFG_FLOAT, "0.25", 0, 1, NULL, "after a disagreement: loop on re-checks / restarts (weight)"},
    {"corpus", "p_give_up", CFG_FLOAT, "0.15", 0, 1, NULL, "after a disagreement: a quick wrong guess (weight)"},
    {"corpus", "loop_continue_p", CFG_FLOAT, "0.70", 0, 0.95, NULL, "after the minimum, one more loop cycle with this probability"},
    {"corpus", "loop_continue_spread", CFG_FLOAT, "0", 0, 8, NULL, "stubbornness: a loop at the step a op b goes on with sigmoid(logit(loop_continue_p) + spread u), u in [-1, 1] fixed per digit fact by world.seed (0 = the same for every fact; docs/corpus.md)"},
    {"corpus", "p_loop_restart", CFG_FLOAT, "0.30", 0, 1, NULL, "a loop cycle restarts from the first step (else redoes the step)"},
    {"corpus", "loop_min_cycles", CFG_INT, "2", 1, 16, NULL, "a loop writes at least this many further wrong attempts (2: every loop meets the verifier's looped flag)"},
    {"corpus", "loop_max_cycles", CFG_INT, "0", 0, 30, NULL, "a loop writes at most this many attempts (0: no cap but the writer's limit of loop_min_cycles + 30)"},
    {"corpus", "p_loop_repeat", CFG_FLOAT, "0", 0, 1, NULL, "a loop repeats the checked wrong value in every attempt (a literal repetition)"},
    {"corpus", "p_loop_give_up", CFG_FLOAT, "0", 0, 1, NULL, "a loop ends with a guess (give up) instead of going on with the wrong value"},
    {"corpus", "p_recheck", CFG_FLOAT, "0", 0, 0.95, NULL, "after a disagreement, check the same step again (it disagrees again), once more each time with this probability"},
    {"corpus", "gap_share", CFG_FLOAT, "0", 0, 1, NULL, "knowledge gaps: share of the digit facts (op and units digits 2-9) the corpus believes wrong, the same wrong value every time; the table is fixed by world.seed (0 = no gaps; docs/corpus.md)"},
    {"corpus", "p_gap_right", CFG_FLOAT, "0", 0, 1, NULL, "a first pass of a gap fact is written right anyway (a redo after a disagreement never is)"},
    {"corpus", "p_gap_doubt", CFG_FLOAT, "0", 0, 1, NULL, "a check of a gap fact written wrong disagrees (else it says ok: the writer believes it)"},
    {"corpus", "weight_level1", CFG_FLOAT, "1", 0, 1000, NULL, "relative share of level 1 in the corpus"},
    {"corpus", "weight_level2", CFG_FLOAT, "1", 0, 1000, NULL, "relative share of level 2 in the corpus"},
    {"corpus", "weight_level3", CFG_FLOAT, "1", 0, 1000, NULL, "relative share of level 3 in the corpus"},
    {"corpus", "weight_level4", CFG_FLOAT, "1", 0, 1000, NULL, "relative share of level 4 in the corpus"},
    {"corpus", "weight_level5", CFG_FLOAT, "1", 0, 1000, NULL, "relative share of level 5 in the corpus"},
    {"corpus", "general_share", CFG_FLOAT, "0", 0, 1, NULL, "share of general documents: generated prose over the letters and punctuation of the tokenizer, no digits or operators (docs/world.md, \"General and question-answer documents\")"},
    {"corpus", "qa_share", CFG_FLOAT, "0", 0, 1, NULL, "share of question-answer documents: the question and a short correct solution (its steps, no checks, no slips) in the document's format; general_share + qa_share <= 1"},
    {"corpus", "max_doc_tokens", CFG_INT, "256", 96, 1024, NULL,
     "documents are cut here (no <eos>); at most model.max_seq_len"},
    // [eval]: `grpolab eval` and the trainer's periodic evaluation
    {"eval", "batch", CFG_INT, "128", 1, 65536, NULL, "sequences generated together"},
    {"eval", "limit", CFG_INT, "0", 0, 100000000, NULL,
     "at most this many questions per benchmark (0 = all; for quick checks)"},
    // [objective]: the preset gives every knob's default (the table in sim/rl/objective.c and
    // docs/config.md); a knob the config sets (in a file or by --set; an enum other than
    // "preset") overrides it, and only then. The numbers below are the grpo preset's: what an
    // unset key holds in the Config and in its INI text, never read by the trainer.
    {"objective", "preset", CFG_ENUM, "grpo", NO_RANGE, "grpo|dr_grpo|dapo|rloo|bnpo|lite_ppo|gspo|gmpo|cispo|sapo|reinforce_pp_baseline|remax|opo|gpg|grpo_passk",
     "RL objective preset: the default of every objective key below (docs/objectives.md; "
     "`grpolab objective --show NAME`)"},
    {"objective", "baseline", CFG_ENUM, "preset", NO_RANGE, "preset|group_mean|leave_one_out|length_weighted|greedy|max_loo",
     "advantage baseline b_i (length_weighted: OPO's sum|o|r/sum|o|; greedy: the greedy response's "
     "reward, ReMax; max_loo: pass@k, the group's strict best gets r_max - r_second, the others "
     "0); preset = the preset's"},
    {"objective", "scale", CFG_ENUM, "preset", NO_RANGE, "preset|group_std|batch_std|none|batch_whiten",
     "advantage scale s_i (std + std_eps, or 1; batch_whiten: r - b whitened over the batch, "
     "REINFORCE++-baseline); preset = the preset's"},
    {"objective", "std_ddof", CFG_INT, "1", 0, 1, NULL,
     "delta degrees of freedom of the reward std (1: oat/TRL/verl; 0: population std); unset: "
     "the preset's (shown: grpo's)"},
    {"objective", "std_eps", CFG_FLOAT, "1e-6", 0, 1, NULL,
     "added to the std before dividing; unset: the preset's (shown: grpo's)"},
    {"objective", "aggregation", CFG_ENUM, "preset", NO_RANGE,
     "preset|seq_mean_token_mean|seq_mean_token_sum_norm|token_mean|seq_mean_token_sum|token_sum",
     "aggregation coefficient c_i (grpo: 1/(M|o_i|); dr_grpo: 1/(M L_max); dapo: 1/sum|o_j|; "
     "rloo: 1/M; token_sum: 1); preset = the preset's"},
    {"objective", "token_mean_scope", CFG_ENUM, "preset", NO_RANGE, "preset|global|micro_batch",
     "tokens a token_mean divides by: global = the whole minibatch's; micro_batch = the forward "
     "pass's times the number of passes (TRL's bnpo); preset = the preset's"},
    {"objective", "ratio", CFG_ENUM, "preset", NO_RANGE, "preset|token|sequence|geo_mean|none",
     "importance ratio: token (PPO), sequence (GSPO's exp(mean log rho)), geo_mean (GMPO, clip "
     "in log space), none (plain policy gradient, GPG); preset = the preset's"},
    {"objective", "clip", CFG_ENUM, "preset", NO_RANGE, "preset|ppo|cispo|sapo|none",
     "how the ratio enters: ppo (min-clip), cispo (clipped ratio as a stop-gradient weight), "
     "sapo (soft gate), none; preset = the preset's"},
    {"objective", "clip_ratio_c", CFG_FLOAT, "0", 0, 1e9, NULL,
     "dual clip (verl's clip_ratio_c, default 3 there): a token with A < 0 and ratio > "
     "clip_ratio_c gets no gradient (clip ppo); 0 = off; unset: the preset's (every preset: 0)"},
    {"objective", "tau_pos", CFG_FLOAT, "1", 1e-6, 1000, NULL,
     "SAPO gate temperature for A > 0; unset: the preset's (shown: grpo's)"},
    {"objective", "tau_neg", CFG_FLOAT, "1.05", 1e-6, 1000, NULL,
     "SAPO gate temperature for A <= 0; unset: the preset's (shown: grpo's)"},
    {"objective", "l_max", CFG_INT, "0", 0, 65536, NULL,
     "L_max of seq_mean_token_sum_norm; 0 = the sampler's max_new_tokens; unset: the preset's (shown: grpo's)"},
    {"objective", "eps_low", CFG_FLOAT, "0.2", 0, 1, NULL,
     "PPO clip: ratio >= 1 - eps_low; unset: the preset's (shown: grpo's)"},
    {"objective", "eps_high", CFG_FLOAT, "0.2", 0, 10, NULL,
     "PPO clip: ratio <= 1 + eps_high; unset: the preset's (shown: grpo's)"},
    {"objective", "beta", CFG_FLOAT, "0", 0, 10, NULL,
     "KL coefficient (k3 estimator against the frozen initial model); 0 = no KL term; unset: "
     "the preset's (shown: grpo's)"},
    {"objective", "dynamic_sampling", CFG_BOOL, "false", NO_RANGE, NULL,
     "DAPO dynamic sampling: drop groups whose rewards are all equal; unset: the preset's (shown: grpo's)"},
    // [diagnostics]: counterfactual diagnostics of `grpolab train` (compare.h)
    {"diagnostics", "compare", CFG_STRING, "", NO_RANGE, NULL,
     "objective presets (comma-separated) whose token weights and gradient every step also "
     "computes on the same responses and parameters, at rho = 1 (first minibatch), on the last "
     "minibatch and at the extra passes: their cosine with the unbiased policy gradient, norm, "
     "clip shares, gate and sum |w| per length bin (/compare, /compare_bins); empty = none"},
    {"diagnostics", "compare_extra_epochs", CFG_INT, "1", 0, 64, NULL,
     "extra passes of diagnostics.compare over the first minibatch's responses after the update: "
     "pass k at the parameters after k - 1 more epochs of the trained objective, run on the "
     "model and undone (the run is unchanged)"},
    {"diagnostics", "length_bins", CFG_INT, "8", 1, 1024, NULL,
     "response-length bins of /compare_bins (equal widths up to world.max_new_tokens)"},
    // [train]: `grpolab train`, RL on the task world (train.h; objective in [objective])
    {"train", "init", CFG_STRING, "data/models/base.h5", NO_RANGE, NULL,
     "checkpoint the policy starts from (and the reference model when objective.beta > 0)"},
    {"train", "steps", CFG_INT, "100", 1, 100000000, NULL, "RL steps (one rollout batch each)"},
    {"train", "prompts_per_step", CFG_INT, "16", 1, 65536, NULL, "P: training questions per step"},
    {"train", "group_size", CFG_INT, "8", 2, 65536, NULL,
     "G: responses sampled per question (>= 2: the baseline is a group mean)"},
    {"train", "minibatch_size", CFG_INT, "32", 1, 1048576, NULL,
     "M: responses per optimizer step; must divide prompts_per_step * group_size"},
    {"train", "micro_batch", CFG_INT, "0", 0, 1048576, NULL,
     "responses per forward/backward pass within a minibatch, sorted by length (gradients "
     "accumulated: the same update up to rounding, less padding); 0 = by backend: 8 on the CPU, "
     "one pass on CUDA; >= minibatch_size: one pass"},
    {"train", "ppo_epochs", CFG_INT, "1", 1, 1000, NULL, "mu: passes over each rollout batch"},
    {"train", "temperature", CFG_FLOAT, "1", 1e-3, 100, NULL, "sampling temperature of the rollouts"},
    {"train", "top_p", CFG_FLOAT, "1", 1e-6, 1, NULL, "nucleus sampling mass of the rollouts"},
    {"train", "eval_every", CFG_INT, "0", 0, 100000000, NULL,
     "greedy benchmark evaluation at step 0, every K steps and at the end; 0 = never"},
    {"train", "checkpoint_every", CFG_INT, "10", 0, 100000000, NULL,
     "steps between checkpoints <out>.ckpt.h5 (with optimizer state; also at the end); 0 = end only"},
    {"train", "bias_diagnostic", CFG_BOOL, "true", NO_RANGE, NULL,
     "log the cosine of the first minibatch's gradient with the unbiased policy gradient (one extra backward)"},
    {"train", "question_set", CFG_ENUM, "weights", NO_RANGE, "weights|level1|levels1-3|all|ood",
     "the training questions: weights = the levels by train.weight_level1..5; a named set of the "
     "world (docs/world.md, \"Question sets\") replaces those weights: level1, levels1-3, all "
     "(levels 1-5), ood (the out-of-distribution pool)"},
    {"train", "weight_level1", CFG_FLOAT, "1", 0, 1000, NULL, "relative share of level 1 in the training pool"},
    {"train", "weight_level2", CFG_FLOAT, "1", 0, 1000, NULL, "relative share of level 2 in the training pool"},
    {"train", "weight_level3", CFG_FLOAT, "1", 0, 1000, NULL, "relative share of level 3 in the training pool"},
    {"train", "weight_level4", CFG_FLOAT, "1", 0, 1000, NULL, "relative share of level 4 in the training pool"},
    {"train", "weight_level5", CFG_FLOAT, "1", 0, 1000, NULL, "relative share of level 5 in the training pool"},
};

const int CONFIG_SCHEMA_LEN = (int)(sizeof CONFIG_SCHEMA / sizeof CONFIG_SCHEMA[0]);
