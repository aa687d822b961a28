#!/usr/bin/env python3
"""TRL's GRPOTrainer as the peer of `grpolab bench-rl` (`make bench-rl PEER=trl`).

What a user of TRL would run for the same step: a Qwen2ForCausalLM of the same dimensions
(random init, fp32, CPU, eager attention), P prompts of the lengths in a `grpolab bench-rl
--lengths-out` file, num_generations = G, and per_device_train_batch_size = M / G prompts,
so that one optimizer step takes a minibatch of M completions and P * G / M trainer steps
make one RL step. Every completion runs to max_completion_length (= world.max_new_tokens):
the model has no EOS for generate, which is how the comparison forces equal lengths.

The GRPOTrainer generates inside each trainer step (a generate() call of M completions, not
one of P * G), computes no old log-probs (one epoch: the ratio is 1) and does one forward and
backward over the minibatch without micro-batches (TRL 0.14 also ran its reference model's
forward at beta 0). Rollout time = generate() and the reward; update = the rest of the trainer
steps. Prints RESULT like bench-rl, with the versions of TRL, transformers and torch. Runs in
the virtualenv of PyPI's newest releases that `make bench-rl` makes (build/venv-conformance).
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_rl_torch import flops, read_config  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--lengths", required=True)
    ap.add_argument("--forced", action="store_true", help="required: TRL runs at the budget only")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--set", nargs="*", default=[])
    a = ap.parse_args()
    if not a.forced:
        print("bench_rl_trl: only --forced (TRL cannot stop each completion at a given length)")
        return 0
    torch.set_num_threads(a.threads)
    from datasets import Dataset
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, TrainerCallback
    import transformers
    import trl
    from trl import GRPOConfig, GRPOTrainer
    import transformers.generation.utils as gen_utils

    # transformers asks whether the model is FSDP-managed by importing torch.distributed.fsdp,
    # which fails on Debian's torch 1.13 under Python 3.11 (a dataclass error); it is not
    gen_utils.is_fsdp_managed_module = lambda module: False

    k = read_config(a.config, a.set)
    V, C, L, NH, NKV, FF = k["V"], k["C"], k["L"], k["NH"], k["NKV"], k["FF"]
    budget, M, G, lr = k["budget"], k["M"], k["G"], k["lr"]
    plens = {}
    with open(a.lengths) as f:
        for line in f:
            s, pl, _ = map(int, line.split())
            plens.setdefault(s, []).append(pl)
    steps = sorted(plens)
    prompt_lens = [pl for s in steps for pl in plens[s][::G]]  # one prompt per group
    P = len(plens[steps[0]]) // G

    # a character-level tokenizer of V tokens: <pad>, <eos>, then V - 2 characters
    chars = [chr(ord("!") + i) for i in range(V - 2)]
    vocab = {"<pad>": 0, "<eos>": 1, **{c: i + 2 for i, c in enumerate(chars)}}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("."), "isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>",
                                  model_input_names=["input_ids", "attention_mask"])
    mc = Qwen2Config(vocab_size=V, hidden_size=C, intermediate_size=FF, num_hidden_layers=L,
                     num_attention_heads=NH, num_key_value_heads=NKV, tie_word_embeddings=True,
                     max_position_embeddings=512, rms_norm_eps=1e-5, eos_token_id=None,
                     bos_token_id=None, pad_token_id=0, attn_implementation="eager")
    torch.manual_seed(1234)
    model = Qwen2ForCausalLM(mc)
    model.generation_config.eos_token_id = None
    warm = [prompt_lens[i % len(prompt_lens)] for i in range(a.warmup * P)]
    texts = ["".join(chars[(7 * i + j) % len(chars)] for j in range(n)) for i, n in enumerate(warm + prompt_lens)]
    ds = Dataset.from_dict({"prompt": texts})

    timing = {"gen": 0.0}
    generate = model.generate

    def timed_generate(*args, **kw):
        t0 = time.perf_counter()
        out = generate(*args, **kw)
        timing["gen"] += time.perf_counter() - t0
        timing["tokens"] = timing.get("tokens", 0) + (out.shape[1] - kw["input_ids"].shape[1]) * out.shape[0]
        return out

    model.generate = timed_generate
    per_step = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            timing["t0"], timing["gen"], timing["tokens"] = time.perf_counter(), 0.0, 0

        def on_step_end(self, args, state, control, **kw):
            per_step.append((time.perf_counter() - timing["t0"], timing["gen"], timing["tokens"]))

    # max_prompt_length: TRL before 1.0 truncates prompts (none here is longer); later releases dropped it
    fields = GRPOConfig.__dataclass_fields__
    extra = {"max_prompt_length": max(prompt_lens)} if "max_prompt_length" in fields else {}
    # the per-device batch: M completions from TRL 1.0 on (generation_batch_size counts
    # completions), M / G in the 0.14 release this script was first written for
    per_device = M if int(trl.__version__.split(".")[0]) >= 1 else M // G
    args = GRPOConfig(output_dir="/tmp/bench_rl_trl", per_device_train_batch_size=per_device,
                      gradient_accumulation_steps=1, num_generations=G, **extra,
                      max_completion_length=budget, temperature=1.0, learning_rate=lr, beta=0.0,
                      adam_beta1=0.9, adam_beta2=0.95, weight_decay=0.0, max_grad_norm=1.0,
                      lr_scheduler_type="constant", max_steps=len(texts) * G // M, logging_steps=10**6,
                      save_strategy="no", report_to="none", use_cpu=True, disable_tqdm=True,
                      seed=1234, dataloader_drop_last=True)
    reward = lambda prompts, completions, **kw: [float(len(c) % 2) for c in completions]
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=ds, processing_class=tok,
                          callbacks=[Clock()])
    print(f"bench_rl_trl: trl GRPOTrainer, torch {torch.__version__}, {a.threads} threads, "
          f"{sum(p.numel() for p in model.parameters())} parameters, {len(steps)} step(s) of {P} x {G} "
          f"after {a.warmup} warm-up, minibatches of {M}, forced to {budget}", flush=True)
    trainer.train()
    per_rl = M // G and (P * G) // M
    timed = per_step[a.warmup * per_rl:]
    ro = sum(x[1] for x in timed)
    up = sum(x[0] - x[1] for x in timed)
    ngen = sum(x[2] for x in timed)
    N_mm = sum(p.numel() for p in model.parameters() if p.dim() == 2)
    seq = fro = fseq = 0.0
    for pl in prompt_lens:
        n = pl + budget - 1
        seq += G * n
        fseq += G * flops(C, L, N_mm, n)
        fro += G * flops(C, L, N_mm, n) - (G - 1) * flops(C, L, N_mm, pl)  # the prompt once (bench_rl.c)
    print(f"RESULT impl=trl mode=forced threads={a.threads} steps={len(steps)} gen_tokens={ngen:.0f} "
          f"seq_tokens={seq:.0f} rollout_s={ro:.4f} update_s={up:.4f} rollout_gflop={fro * 1e-9:.4f} "
          f"update_gflop={4 * fseq * 1e-9:.4f} versions=trl:{trl.__version__},transformers:{transformers.__version__},"
          f"torch:{torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
