#!/usr/bin/python3
"""The PyTorch peer of `grpolab bench-rl` (docs/benchmarks.md "The RL step side by side").

The same RL step on the same model dimensions and batch, written as a PyTorch user would:
a Qwen2/Llama-style decoder (RMSNorm, RoPE, grouped KV heads, SwiGLU, tied embeddings) in
fp32 on the CPU; rollout = KV-cache sampling of all P*G responses in one batch (prompts
left-padded, every sequence decoded until the batch's longest response is done, as
transformers' generate does), then the GRPO update: old log-probs (the first minibatch's
from its own forward, as grpolab and TRL with one iteration), then per minibatch of M
responses micro-batches sorted by length (right-padded), PPO-clip loss with GRPO's
per-response token mean, backward, gradient clipping and one AdamW step.

The prompt and response lengths come from a `grpolab bench-rl --lengths-out` file, so both
sides process the same sequences; the tokens themselves are sampled from this model's own
(random) weights, which does not change the work. Prints RESULT key=value like bench-rl.
Needs Debian's python3-torch (scripts/deps.sh --bench).
"""
import argparse
import configparser
import math
import sys
import time

import torch
import torch.nn.functional as F


def read_config(path, sets):
    """The step's settings from a train config and the --set overrides bench-rl ran with."""
    cp = configparser.ConfigParser(inline_comment_prefixes=("#",))
    cp.read(path)
    for kv in sets:
        key, _, val = kv.partition("=")
        sec, _, k = key.partition(".")
        if not cp.has_section(sec):
            cp.add_section(sec)
        cp.set(sec, k, val)
    g = lambda s, k, d, f=int: f(cp.get(s, k, fallback=d))
    return dict(V=g("model", "vocab_size", 58), C=g("model", "d_model", 128), L=g("model", "n_layers", 4),
                NH=g("model", "n_heads", 4), NKV=g("model", "n_kv_heads", 2), FF=g("model", "d_ff", 344),
                T=g("model", "max_seq_len", 256), budget=g("world", "max_new_tokens", 200),
                M=g("train", "minibatch_size", 64), G=g("train", "group_size", 8),
                micro=g("train", "micro_batch", 0) or 8,  # 0: grpolab's CPU default
                lr=g("optim", "lr", 1e-5, float), eps=g("objective", "eps_low", 0.2, float))


class Model(torch.nn.Module):
    def __init__(self, V, C, L, NH, NKV, FF, T, theta=10000.0, eps=1e-5):
        super().__init__()
        self.V, self.C, self.L, self.NH, self.NKV, self.hd, self.eps = V, C, L, NH, NKV, C // NH, eps
        self.emb = torch.nn.Embedding(V, C)
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            m = torch.nn.Module()
            m.attn_norm = torch.nn.Parameter(torch.ones(C))
            m.wq, m.wk, m.wv = lin(C, NH * self.hd), lin(C, NKV * self.hd), lin(C, NKV * self.hd)
            m.wo = lin(NH * self.hd, C)
            m.mlp_norm = torch.nn.Parameter(torch.ones(C))
            m.w_gate, m.w_up, m.w_down = lin(C, FF), lin(C, FF), lin(FF, C)
            self.layers.append(m)
        self.norm = torch.nn.Parameter(torch.ones(C))
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)
        inv = 1.0 / theta ** (torch.arange(0, self.hd, 2).float() / self.hd)
        ang = torch.outer(torch.arange(T).float(), inv)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x, pos):  # x (B, H, T, hd), pos (B, T)
        c, s = self.cos[pos].unsqueeze(1), self.sin[pos].unsqueeze(1)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), -1).flatten(-2)

    def forward(self, tok, pos, keymask, cache=None, at=0):
        """tok, pos (B, T); keymask (B, Tk) True where a key may be attended (causality is
        added here); cache: list of (k, v) (B, NKV, Tmax, hd) written at [at, at + T)."""
        B, T = tok.shape
        x = self.emb(tok)
        Tk = at + T if cache is not None else T
        causal = torch.ones(T, Tk, dtype=torch.bool).tril(Tk - T)
        # every query sees itself, so that the left padding's rows stay finite
        mask = causal.unsqueeze(0) & keymask[:, None, :Tk]
        mask[:, torch.arange(T), at + torch.arange(T)] = True
        bias = torch.zeros(B, 1, T, Tk).masked_fill(~mask.unsqueeze(1), float("-inf"))
        rep = self.NH // self.NKV
        for i, m in enumerate(self.layers):
            h = self.rms(x, m.attn_norm)
            q = self.rope(m.wq(h).view(B, T, self.NH, self.hd).transpose(1, 2), pos)
            k = self.rope(m.wk(h).view(B, T, self.NKV, self.hd).transpose(1, 2), pos)
            v = m.wv(h).view(B, T, self.NKV, self.hd).transpose(1, 2)
            if cache is not None:
                ck, cv = cache[i]
                ck[:, :, at:at + T] = k
                cv[:, :, at:at + T] = v
                k, v = ck[:, :, :Tk], cv[:, :, :Tk]
            k = k.repeat_interleave(rep, 1)
            v = v.repeat_interleave(rep, 1)
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.hd) + bias, -1) @ v
            x = x + m.wo(a.transpose(1, 2).reshape(B, T, self.C))
            h = self.rms(x, m.mlp_norm)
            x = x + m.w_down(F.silu(m.w_gate(h)) * m.w_up(h))
        return self.rms(x, self.norm) @ self.emb.weight.t()


@torch.no_grad()
def rollout(model, plen, rlen, Tmax, gen):
    """KV-cache sampling at temperature 1 of len(plen) responses; response i stops after
    rlen[i] tokens. Returns the responses (list of lists) and their sampling log-probs."""
    B, Tp, steps = len(plen), max(plen), max(rlen)
    prompt = torch.randint(2, model.V, (B, Tp), generator=gen)
    keymask = torch.zeros(B, Tp + steps, dtype=torch.bool)
    for b, n in enumerate(plen):  # left padding
        keymask[b, Tp - n:] = True
    pos = (keymask[:, :Tp].long().cumsum(1) - 1).clamp(min=0)
    cache = [(torch.zeros(B, model.NKV, Tp + steps, model.hd), torch.zeros(B, model.NKV, Tp + steps, model.hd))
             for _ in range(model.L)]
    logits = model(prompt, pos, keymask, cache, 0)[:, -1]
    nxt_pos = pos[:, -1:] + 1
    toks, logps = [], []
    for t in range(steps):
        lp = torch.log_softmax(logits, -1)
        tok = torch.multinomial(lp.exp(), 1, generator=gen)
        toks.append(tok)
        logps.append(lp.gather(1, tok))
        if t + 1 == steps:
            break
        logits = model(tok, nxt_pos, keymask, cache, Tp + t)[:, -1]
        nxt_pos = nxt_pos + 1
    toks = torch.cat(toks, 1)
    resp = [toks[b, :rlen[b]].tolist() for b in range(B)]
    prompts = [prompt[b, Tp - plen[b]:].tolist() for b in range(B)]
    return prompts, resp


def pack(prompts, resp, rows):
    """Right-padded inputs/targets of prompt + response for the rows; mask of response targets."""
    seqs = [prompts[i] + resp[i] for i in rows]
    T = max(len(s) for s in seqs) - 1
    inp = torch.zeros(len(rows), T, dtype=torch.long)
    tgt = torch.zeros(len(rows), T, dtype=torch.long)
    mask = torch.zeros(len(rows), T)
    for k, (i, s) in enumerate(zip(rows, seqs)):
        n = len(s) - 1
        inp[k, :n] = torch.tensor(s[:-1])
        tgt[k, :n] = torch.tensor(s[1:])
        mask[k, len(prompts[i]) - 1:n] = 1.0
    pos = torch.arange(T).expand(len(rows), T)
    keymask = inp.new_ones(len(rows), T, dtype=torch.bool)  # pads only follow real tokens
    return inp, tgt, mask, pos, keymask


def token_logp(model, inp, tgt, pos, keymask):
    lp = torch.log_softmax(model(inp, pos, keymask), -1)
    with torch.no_grad():
        entropy = -(lp.exp() * lp).sum(-1)  # logged by the trainer, as grpolab's forward does
    return lp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1), entropy


def micro_batches(prompts, resp, rows, micro):
    rows = sorted(rows, key=lambda i: -(len(prompts[i]) + len(resp[i])))
    return [rows[c:c + micro] for c in range(0, len(rows), micro)]


def update(model, opt, prompts, resp, adv, M, micro, eps):
    """The update; returns the responses of the first minibatch (no separate old log-probs)."""
    N = len(resp)
    order = [(k * 97) % N for k in range(N)] if N % 97 else list(range(N))
    mbs = [order[k:k + M] for k in range(0, N, M)]
    old = {}
    with torch.no_grad():
        for mb in mbs[1:]:
            for rows in micro_batches(prompts, resp, mb, micro):
                inp, tgt, mask, pos, km = pack(prompts, resp, rows)
                old[tuple(rows)] = token_logp(model, inp, tgt, pos, km)[0]
    for mb in mbs:
        opt.zero_grad(set_to_none=True)
        for rows in micro_batches(prompts, resp, mb, micro):
            inp, tgt, mask, pos, km = pack(prompts, resp, rows)
            lp, _ = token_logp(model, inp, tgt, pos, km)
            a = adv[rows].unsqueeze(1)
            ratio = torch.exp(lp - old.get(tuple(rows), lp.detach()))
            l_tok = -torch.min(ratio * a, ratio.clamp(1 - eps, 1 + eps) * a)
            # GRPO: mean over each response's tokens, then over the minibatch's M responses
            loss = ((l_tok * mask).sum(1) / mask.sum(1)).sum() / len(mb)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return set(mbs[0])


def flops(C, L, N, n):  # forward FLOPs of positions 0..n-1 (bench_rl.c's count)
    return n * 2.0 * N + 4.0 * L * C * n * (n + 1) / 2.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="the train config grpolab bench-rl ran")
    ap.add_argument("--lengths", required=True, help="grpolab bench-rl --lengths-out file")
    ap.add_argument("--forced", action="store_true", help="every response runs to world.max_new_tokens")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--set", nargs="*", default=[], metavar="SECTION.KEY=VALUE",
                    help="the overrides grpolab bench-rl ran with")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    k = read_config(a.config, a.set)
    V, C, L, NH, NKV, FF, T = k["V"], k["C"], k["L"], k["NH"], k["NKV"], k["FF"], k["T"]
    budget, M, micro, G, lr, eps = k["budget"], k["M"], k["micro"], k["G"], k["lr"], k["eps"]
    steps = {}
    with open(a.lengths) as f:
        for line in f:
            s, pl, rl = map(int, line.split())
            steps.setdefault(s, []).append((pl, budget if a.forced else rl))
    torch.manual_seed(1234)
    model = Model(V, C, L, NH, NKV, FF, T + budget)
    N_mm = sum(p.numel() for p in model.parameters() if p.dim() == 2)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    gen = torch.Generator().manual_seed(1)
    print(f"bench_rl_torch: torch {torch.__version__}, {a.threads} threads, {sum(p.numel() for p in model.parameters())} "
          f"parameters, {len(steps)} step(s) of {len(next(iter(steps.values())))} responses, "
          f"{'forced to ' + str(budget) if a.forced else 'the lengths of ' + a.lengths}", flush=True)
    keys = sorted(steps)
    plan = [keys[0]] * a.warmup + keys
    tot = dict(ro=0.0, up=0.0, gen=0.0, seq=0.0, fro=0.0, fup=0.0)
    for j, s in enumerate(plan):
        plen = [pl for pl, _ in steps[s]]
        rlen = [rl for _, rl in steps[s]]
        t0 = time.perf_counter()
        prompts, resp = rollout(model, plen, rlen, T, gen)
        # scoring: a reward per response (the rule does not matter for the time), advantages
        # as GRPO's (r - mean) / (std + eps) over each group of G
        r = torch.tensor([float(sum(x) % 2) for x in resp]).view(-1, G)
        adv = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-6)).view(-1)
        t1 = time.perf_counter()
        first = update(model, opt, prompts, resp, adv, M, micro, eps)
        t2 = time.perf_counter()
        ngen = sum(rlen)
        print(f"  {'warm-up' if j < a.warmup else 'step'}: {ngen} generated tokens, rollout {t1 - t0:.2f} s, "
              f"update {t2 - t1:.2f} s", flush=True)
        if j < a.warmup:
            continue
        tot["ro"] += t1 - t0
        tot["up"] += t2 - t1
        tot["gen"] += ngen
        for i, (pl, rl) in enumerate(zip(plen, rlen)):
            n = pl + rl - 1
            tot["seq"] += n
            # the rollout's count: a group's prompt once, then each response (bench_rl.c)
            tot["fro"] += flops(C, L, N_mm, n) - (0 if i % G == 0 else flops(C, L, N_mm, pl))
            tot["fup"] += (3 if i in first else 4) * flops(C, L, N_mm, n)
    print(f"RESULT impl=torch mode={'forced' if a.forced else 'own'} threads={a.threads} steps={len(keys)} "
          f"gen_tokens={tot['gen']:.0f} seq_tokens={tot['seq']:.0f} rollout_s={tot['ro']:.4f} "
          f"update_s={tot['up']:.4f} rollout_gflop={tot['fro'] * 1e-9:.4f} update_gflop={tot['fup'] * 1e-9:.4f} "
          f"versions=torch:{torch.__version__}")


if __name__ == "__main__":
    sys.exit(main())
