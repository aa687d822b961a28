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
    {"run", "threads", CFG_INT, "0", 0, 1024, NULL, "CPU threads; 0 = all cores"},
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
    {"model", "rope_theta", CFG_FLOAT, "10000", 1, 1e9, NULL, "RoPE base frequency"},
    {"model", "norm_eps", CFG_FLOAT, "1e-5", 1e-12, 1e-1, NULL, "RMSNorm epsilon"},

    // ---- [optim]
    {"optim", "lr", CFG_FLOAT, "1e-3", 0, 1, NULL, "AdamW learning rate"},
    {"optim", "beta1", CFG_FLOAT, "0.9", 0, 0.999999, NULL, "AdamW first-moment decay"},
    {"optim", "beta2", CFG_FLOAT, "0.95", 0, 0.9999999, NULL, "AdamW second-moment decay"},
    {"optim", "eps", CFG_FLOAT, "1e-8", 1e-12, 1, NULL, "AdamW epsilon"},
    {"optim", "weight_decay", CFG_FLOAT, "0", 0, 10, NULL, "AdamW decoupled weight decay"},
    {"optim", "grad_clip", CFG_FLOAT, "1.0", 0, 1e6, NULL,
     "max global gradient L2 norm; 0 = no clipping"},
    // [objective]: a preset sets the defaults of the independent knobs; any knob set
    // explicitly (enum value other than "preset", or a number given in a file / --set) wins.
    {"objective", "preset", CFG_ENUM, "grpo", NO_RANGE, "grpo|dr_grpo|dapo|rloo",
     "RL objective preset (DESIGN.md table); sets the knobs below that are left at 'preset'"},
    {"objective", "baseline", CFG_ENUM, "preset", NO_RANGE, "preset|group_mean|leave_one_out",
     "advantage baseline b_i"},
    {"objective", "scale", CFG_ENUM, "preset", NO_RANGE, "preset|group_std|batch_std|none",
     "advantage scale s_i (std + std_eps, or 1)"},
    {"objective", "std_ddof", CFG_INT, "1", 0, 1, NULL,
     "delta degrees of freedom of the reward std (1: oat/TRL/verl; 0: population std)"},
    {"objective", "std_eps", CFG_FLOAT, "1e-6", 0, 1, NULL, "added to the std before dividing"},
    {"objective", "aggregation", CFG_ENUM, "preset", NO_RANGE,
     "preset|seq_mean_token_mean|seq_mean_token_sum_norm|token_mean|seq_mean_token_sum",
     "aggregation coefficient c_i (grpo: 1/(M|o_i|); dr_grpo: 1/(M L_max); dapo: 1/sum|o_j|; rloo: 1/M)"},
    {"objective", "l_max", CFG_INT, "0", 0, 65536, NULL,
     "L_max of seq_mean_token_sum_norm; 0 = the sampler's max_new_tokens"},
    {"objective", "eps_low", CFG_FLOAT, "0.2", 0, 1, NULL, "PPO clip: ratio >= 1 - eps_low"},
    {"objective", "eps_high", CFG_FLOAT, "0.2", 0, 10, NULL,
     "PPO clip: ratio <= 1 + eps_high (dapo preset: 0.28 unless set)"},
    {"objective", "beta", CFG_FLOAT, "0", 0, 10, NULL,
     "KL coefficient (k3 estimator against the frozen initial model); 0 = no KL term"},
    {"objective", "dynamic_sampling", CFG_BOOL, "false", NO_RANGE, NULL,
     "DAPO dynamic sampling: drop groups whose rewards are all equal"},
};

const int CONFIG_SCHEMA_LEN = (int)(sizeof CONFIG_SCHEMA / sizeof CONFIG_SCHEMA[0]);
