#!/usr/bin/env python3
"""`make conformance`: the framework columns of docs/objectives.md's presets run as a test.

The same batch (rewards, group ids, log-probs under pi_theta and pi_old, environment tokens) goes
to grpolab's objective (`grpolab objective --eval FILE`: kn_group_advantages and kn_token_weights
on the CPU backend) and to each framework's own function for the settings the map gives: verl's
advantage estimators, compute_policy_loss_* and agg_loss; TRL's GRPOTrainer._compute_loss (and
RLOOTrainer's, GMPOTrainer's); OpenRLHF's PolicyLoss and compute_advantages_and_returns. The
framework's token weights are w = -dL/dlog pi by autograd. Four conditions: rho = 1 and
off-policy (|log rho| up to 1.3, so PPO's clip and verl's dual clip at 3 bind), each without and
with environment tokens (a token with mask 0 that the policy did not write). A cell is "exact"
when every advantage and weight agrees within 1e-5 relative (to the largest magnitude of the
row), "differs" with the conditions and the worst relative error, or "not callable" with the
reason. Where a framework function needs an object (a trainer's self), a bare instance carries
only the attributes the function reads, and the model's forward pass is replaced by the given
log-probs; the arithmetic of the loss is the framework's own code.

Usage: conformance.py [--bin build/grpolab] [--markdown]
"""
import argparse
import importlib
import importlib.metadata as md
import json
import os
import random
import subprocess
import sys
import tempfile
import types
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
TOL = 1e-5
L_MAX = 12  # objective.l_max, TRL's max_completion_length, verl's loss_scale_factor

# ---- the batch: P groups of G, every response's tokens from position 0 (right padding)

P, G = 3, 4
REWARDS = [1, 0, 0, 0.5, 1, 1, 0, 1, 0.2, 0.9, 0.4, 0.7]  # a pass@k group, a tie at the best, spread
GREEDY = [0.5, 1.0, 0.3]


def make_batch(off_policy, env):
    rng = random.Random(11)
    lens = [rng.randint(3, 9) for _ in range(P * G)]
    old, logp, env_mask = [], [], []
    for k, n in enumerate(lens):
        o = [-rng.uniform(0.3, 3.0) for _ in range(n)]
        d = [rng.uniform(-1.3, 1.3) if off_policy else 0.0 for _ in range(n)]
        old.append(o)
        logp.append([a + b for a, b in zip(o, d)])
        env_mask.append([1 if env and 0 < t < n - 1 and (k + t) % 4 == 2 else 0 for t in range(n)])
    return SimpleNamespace(lens=lens, old=old, logp=logp, env=env_mask, T=max(lens), off=off_policy, has_env=env)


CONDITIONS = [("rho=1", False, False), ("off-policy", True, False), ("rho=1 env", False, True),
              ("off-policy env", True, True)]


def tensors(b):
    """(n, T) tensors: logp (a leaf with grad), old, the policy mask, the length mask."""
    n, T = len(b.lens), b.T
    lp, old = torch.zeros(n, T), torch.zeros(n, T)
    pol, length = torch.zeros(n, T), torch.zeros(n, T)
    for k, L in enumerate(b.lens):
        lp[k, :L] = torch.tensor(b.logp[k])
        old[k, :L] = torch.tensor(b.old[k])
        length[k, :L] = 1
        pol[k, :L] = torch.tensor([1.0 - e for e in b.env[k]])
    lp.requires_grad_(True)
    return lp, old, pol, length


def outcome_rewards(b):
    """verl's token_level_rewards: the reward on each response's last token."""
    r = torch.zeros(len(b.lens), b.T)
    for k, L in enumerate(b.lens):
        r[k, L - 1] = REWARDS[k]
    return r


def weights_of(loss, lp, b):
    (g,) = torch.autograd.grad(loss, lp)
    return [(-g[k, :L]).tolist() for k, L in enumerate(b.lens)]


# ---- grpolab


def grpolab(binary, preset, sets, b):
    lines = [f"preset {preset}", f"set objective.l_max={L_MAX}"] + [f"set {s}" for s in sets]
    lines += [f"groups {P} {G}", "rewards " + " ".join(map(repr, REWARDS)), "greedy " + " ".join(map(repr, GREEDY))]
    for k, L in enumerate(b.lens):
        vals = b.logp[k] + b.old[k] + b.env[k]
        lines.append(f"response {L} " + " ".join(repr(float(v)) if i < 2 * L else str(v) for i, v in enumerate(vals)))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        path = f.name
    try:
        out = subprocess.run([binary, "objective", "--eval", path], capture_output=True, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
    finally:
        os.unlink(path)
    if out.returncode != 0:
        raise RuntimeError(f"grpolab objective --eval: {out.stderr.strip()}")
    return json.loads(out.stdout)


# ---- verl (imported without its package __init__, which sets up Ray for the trainer)


def load_verl():
    site = os.path.dirname(os.path.dirname(torch.__file__))
    pkg = types.ModuleType("verl")
    pkg.__path__ = [os.path.join(site, "verl")]
    sys.modules["verl"] = pkg
    return importlib.import_module("verl.trainer.ppo.core_algos")


def verl_fn(est, loss_mode="vanilla", agg="token-mean", adv_kw=None, **actor):
    def run(ca, b):
        lp, old, pol, _ = tensors(b)
        idx = np.array([k // G for k in range(len(b.lens))])
        kw = dict(token_level_rewards=outcome_rewards(b), response_mask=pol)
        if est == "remax":
            base = torch.tensor([GREEDY[k // G] for k in range(len(b.lens))])
            adv, _ = ca.get_adv_estimator_fn(est)(reward_baselines=base, config=ca.AlgoConfig(), **kw)
        else:
            adv, _ = ca.get_adv_estimator_fn(est)(index=idx, config=ca.AlgoConfig(**(adv_kw or {})),
                                                  **(adv_kw or {}), **kw)
        a = [float(adv[k][pol[k] > 0][0]) for k in range(len(b.lens))]
        # the actor's config as verl's trainer makes it (FSDP; one micro-batch, one rank)
        from verl.workers.config import FSDPActorConfig

        cfg = FSDPActorConfig(strategy="fsdp", ppo_mini_batch_size=1, ppo_micro_batch_size_per_gpu=1, rollout_n=1,
                              loss_scale_factor=L_MAX, **actor)
        cfg.global_batch_info["loss_scale_factor"] = cfg.loss_scale_factor  # as verl/workers/utils/losses.py
        loss, _ = ca.get_policy_loss_fn(loss_mode)(old_log_prob=old, log_prob=lp, advantages=adv, response_mask=pol,
                                                   loss_agg_mode=agg, config=cfg)
        return a, weights_of(loss, lp, b)

    return run


# ---- TRL: the trainers' _compute_loss on a bare instance; advantages are made inline in
# _generate_and_score_completions (not callable alone), so the weights are fed grpolab's A_i.


def trl_fn(kind, **attrs):
    def run(mods, b, grpolab_adv):
        lp, old, pol, length = tensors(b)
        cls = {"grpo": mods["GRPOTrainer"], "rloo": mods["RLOOTrainer"], "gmpo": mods["GMPOTrainer"]}[kind]
        t = object.__new__(cls)
        acc = SimpleNamespace(num_processes=1, gather=lambda x: x, gather_for_metrics=lambda x: x,
                              reduce=lambda x, reduction="sum": x, sync_gradients=True)
        base = dict(model=SimpleNamespace(training=True), accelerator=acc, aux_loss_enabled=False,
                    _metrics={"train": defaultdict(list), "eval": defaultdict(list)}, top_entropy_quantile=1.0,
                    off_policy_mask_threshold=None, use_vllm=False, vllm_importance_sampling_correction=False,
                    current_gradient_accumulation_steps=1, _entropy_bonus_enabled=False, beta=0.0,
                    importance_sampling_level="token", epsilon_low=0.2, epsilon_high=0.2,
                    max_completion_length=L_MAX,
                    args=SimpleNamespace(delta=None, use_bias_correction_kl=False, sapo_temperature_pos=1.0,
                                         sapo_temperature_neg=1.05, steps_per_generation=1))
        base.update(attrs)
        for k, v in base.items():
            t.__dict__[k] = v
        t._get_per_token_logps_and_entropies = lambda *a, **k: (lp, torch.zeros_like(lp), None)
        n = len(b.lens)
        inputs = {"prompt_ids": torch.zeros(n, 1, dtype=torch.long), "prompt_mask": torch.ones(n, 1, dtype=torch.long),
                  "completion_ids": torch.zeros(n, b.T, dtype=torch.long), "completion_mask": length,
                  "tool_mask": pol, "advantages": torch.tensor(grpolab_adv), "old_per_token_logps": old,
                  "num_items_in_batch": pol.sum(), "old_logps": (old * length).sum(1)}
        loss = cls._compute_loss(t, None, inputs)
        return None, weights_of(loss, lp, b)

    return run


# ---- OpenRLHF: PolicyLoss, and RemoteExperienceMaker.compute_advantages_and_returns on a
# bare instance (its experiences carry the rewards, index and action mask it reads)


def load_openrlhf():
    site = os.path.dirname(os.path.dirname(torch.__file__))
    for name in ("openrlhf", "openrlhf.models", "openrlhf.trainer", "openrlhf.trainer.ppo_utils"):
        m = types.ModuleType(name)
        m.__path__ = [os.path.join(site, *name.split("."))]
        sys.modules[name] = m
    if "deepspeed" not in sys.modules:  # openrlhf.models.utils imports it for functions not used here
        try:
            importlib.import_module("deepspeed")
        except ImportError:
            sys.modules["deepspeed"] = types.ModuleType("deepspeed")
    loss = importlib.import_module("openrlhf.models.loss")
    try:
        em = importlib.import_module("openrlhf.trainer.ppo_utils.experience_maker")
    except Exception as e:  # noqa: BLE001 - reported in the table
        em = e
    return loss, em


def openrlhf_fn(estimator, loss_agg_mode="token-mean", policy_loss_type="ppo", eps=(0.2, 0.2)):
    def run(mods, b, grpolab_adv):
        loss_mod, em = mods
        lp, old, pol, _ = tensors(b)
        n = len(b.lens)
        if isinstance(em, Exception):  # the weights from grpolab's advantages
            a = None
            adv = torch.tensor(grpolab_adv).unsqueeze(1) * pol
        else:
            t = object.__new__(em.RemoteExperienceMaker)
            args = SimpleNamespace(rollout=SimpleNamespace(n_samples_per_prompt=G),
                                   algo=SimpleNamespace(advantage=SimpleNamespace(estimator=estimator, gamma=1.0,
                                                                                  no_std_norm=False)),
                                   reward=SimpleNamespace(clip_range=(-1e9, 1e9)))
            t.strategy = SimpleNamespace(args=args)
            t.kl_ctl = SimpleNamespace(value=0.0)
            t.advantage_estimator = estimator
            exp = SimpleNamespace(rewards=torch.tensor(REWARDS), index=list(range(n)), action_mask=pol.bool(),
                                  kl=torch.zeros(n, b.T), info={}, values=None)
            try:
                em.apply_length_penalties = lambda experiences, args: None  # no overlong penalty configured
                t.compute_advantages_and_returns([exp])
                adv = exp.advantages
                a = [float(adv[k][pol[k] > 0][0]) for k in range(n)]
            except Exception as e:  # noqa: BLE001
                raise RuntimeError(f"compute_advantages_and_returns: {type(e).__name__}: {e}")
        pl = loss_mod.PolicyLoss(clip_eps_low=eps[0], clip_eps_high=eps[1], policy_loss_type=policy_loss_type,
                                 token_level_loss=loss_agg_mode == "token-mean")
        loss = pl(lp, old, adv, action_mask=pol)[0]
        return a, weights_of(loss, lp, b)

    return run


# ---- the map: preset -> framework -> (grpolab --set for the framework's constants, function)

VERL_DUAL = ["objective.clip_ratio_c=3"]  # verl's vanilla loss: clip_ratio_c 3.0 by default
MAP = {
    "grpo": {"oat": ([], None), "verl": (VERL_DUAL, verl_fn("grpo", agg="seq-mean-token-mean")),
             "TRL": (["objective.std_eps=1e-4"], trl_fn("grpo", loss_type="grpo")),
             "OpenRLHF": (["objective.std_eps=1e-9"], openrlhf_fn("group_norm", "seq-mean-token-mean"))},
    "dr_grpo": {"oat": ([], None), "verl": (VERL_DUAL, verl_fn("grpo", agg="seq-mean-token-sum-norm",
                                            adv_kw={"norm_adv_by_std_in_grpo": False})),
                "TRL": ([], trl_fn("grpo", loss_type="dr_grpo"))},
    "dapo": {"verl": (VERL_DUAL, verl_fn("grpo", agg="token-mean", clip_ratio_low=0.2, clip_ratio_high=0.28)),
             "TRL": (["objective.std_eps=1e-4"], trl_fn("grpo", loss_type="dapo", epsilon_high=0.28)),
             "OpenRLHF": (["objective.std_eps=1e-9"], openrlhf_fn("group_norm", eps=(0.2, 0.28)))},
    "rloo": {"verl": (VERL_DUAL, verl_fn("rloo", agg="seq-mean-token-sum")),
             "TRL": ([], trl_fn("rloo"))},
    "bnpo": {"TRL": (["objective.std_eps=1e-4"], trl_fn("grpo", loss_type="bnpo"))},
    "lite_ppo": {"TRL": (["objective.std_eps=1e-4"], trl_fn("grpo", loss_type="dapo"))},
    "gspo": {"verl": ([], verl_fn("grpo", loss_mode="gspo", agg="seq-mean-token-mean", clip_ratio_low=3e-4,
                                  clip_ratio_high=4e-4)),
             "TRL": (["objective.std_eps=1e-4"], trl_fn("grpo", loss_type="grpo", importance_sampling_level="sequence",
                                                        epsilon_low=3e-4, epsilon_high=4e-4)),
             "OpenRLHF": (["objective.std_eps=1e-9"], openrlhf_fn("group_norm", policy_loss_type="gspo",
                                                                  eps=(3e-4, 4e-4)))},
    "gmpo": {"verl": ([], verl_fn("grpo", loss_mode="geo_mean", clip_ratio_low=0.4, clip_ratio_high=0.4)),
             "TRL": (["objective.std_eps=1e-4"], trl_fn("gmpo", epsilon_low=0.4, epsilon_high=0.4))},
    "cispo": {"verl": ([], verl_fn("grpo", loss_mode="cispo", clip_ratio_low=1.0, clip_ratio_high=4.0)),
              "TRL": (["objective.std_eps=1e-4"], trl_fn("grpo", loss_type="cispo", epsilon_high=5.0))},
    "sapo": {"verl": ([], verl_fn("grpo", loss_mode="sapo", tau_pos=1.0, tau_neg=1.05)),
             "TRL": (["objective.std_eps=1e-4"], trl_fn("grpo", loss_type="sapo"))},
    "reinforce_pp_baseline": {"verl": (VERL_DUAL, verl_fn("reinforce_plus_plus_baseline")),
                              "OpenRLHF": ([], openrlhf_fn("reinforce_baseline"))},
    "remax": {"verl": (VERL_DUAL, verl_fn("remax", agg="seq-mean-token-sum"))},
    "opo": {"verl": (VERL_DUAL, verl_fn("opo"))},
    "gpg": {"verl": ([], verl_fn("gpg", loss_mode="gpg"))},
    "grpo_passk": {"verl": (VERL_DUAL, verl_fn("grpo_passk", agg="seq-mean-token-mean",
                                               adv_kw={"norm_adv_by_std_in_grpo": True}))},
}
FRAMEWORKS = ["TRL", "verl", "OpenRLHF", "oat"]


def rel_err(a, b):
    scale = max([abs(x) for x in b] + [1e-12])
    return max(abs(x - y) for x, y in zip(a, b)) / scale


def versions():
    out = {}
    for d in ("torch", "trl", "transformers", "verl", "openrlhf", "oat-llm"):
        try:
            out[d] = md.version(d)
        except md.PackageNotFoundError:
            out[d] = None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/grpolab")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    a = ap.parse_args()
    vers = versions()
    mods, why = {}, {}
    try:
        mods["verl"] = load_verl()
    except Exception as e:  # noqa: BLE001
        why["verl"] = f"import failed: {type(e).__name__}: {e}"
    try:
        from trl import GRPOTrainer, RLOOTrainer
        from trl.experimental.gmpo import GMPOTrainer

        mods["TRL"] = {"GRPOTrainer": GRPOTrainer, "RLOOTrainer": RLOOTrainer, "GMPOTrainer": GMPOTrainer}
    except Exception as e:  # noqa: BLE001
        why["TRL"] = f"import failed: {type(e).__name__}: {e}"
    try:
        mods["OpenRLHF"] = load_openrlhf()
    except Exception as e:  # noqa: BLE001
        why["OpenRLHF"] = f"import failed: {type(e).__name__}: {e}"
    if "OpenRLHF" in mods and isinstance(mods["OpenRLHF"][1], Exception):
        e = mods["OpenRLHF"][1]
        print(f"conformance: OpenRLHF's advantages not callable (experience_maker: {type(e).__name__}: {e}); "
              "its PolicyLoss is given grpolab's advantages")
    why["oat"] = ("not callable: oat-llm's releases on PyPI need Python < 3.11, and its advantage and loss are "
                  "methods of PPOLearner that need vLLM, DeepSpeed and launchpad")
    batches = [(name, make_batch(off, env)) for name, off, env in CONDITIONS]
    rows = []
    for preset, fw in MAP.items():
        cells = {}
        for f in FRAMEWORKS:
            if f not in fw:
                cells[f] = "-"
                continue
            if f not in mods:
                cells[f] = why[f]
                continue
            sets, fn = fw[f]
            if fn is None:
                cells[f] = why[f]
                continue
            bad, worst = [], 0.0
            try:
                for cname, b in batches:
                    g = grpolab(a.bin, preset, sets, b)
                    if f in ("TRL", "OpenRLHF"):
                        adv, w = fn(mods[f], b, g["advantages"])
                    else:
                        adv, w = fn(mods[f], b)
                    e_adv = rel_err(adv, g["advantages"]) if adv is not None else 0.0
                    flat_w = [x for r in w for x in r]
                    flat_g = [x for r in g["weights"] for x in r]
                    e_w = rel_err(flat_w, flat_g)
                    e = max(e_adv, e_w)
                    worst = max(worst, e)
                    if e > TOL:
                        bad.append(f"{cname}: {'A' if e_adv > TOL else ''}{'w' if e_w > TOL else ''} {e:.1e}")
                w_only = f == "TRL" or (f == "OpenRLHF" and isinstance(mods[f][1], Exception))
                env_only = bool(bad) and all("env" in x for x in bad)
                cells[f] = ("w only: " if w_only else "") + (
                    f"exact (max err {worst:.0e})" if not bad else
                    "exact without environment tokens; differs with them: " + "; ".join(x.replace(" env:", ":") for x in bad)
                    if env_only else "differs: " + "; ".join(bad))
            except Exception as e:  # noqa: BLE001
                cells[f] = f"not callable: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}"
        rows.append((preset, cells))
    vline = ", ".join(f"{k} {v}" if v else f"{k} (not installed)" for k, v in vers.items())
    print(f"conformance: grpolab ({a.bin}) against {vline}; tolerance {TOL:g} relative")
    if a.markdown:
        print("\n| preset | " + " | ".join(FRAMEWORKS) + " |\n|---|" + "---|" * len(FRAMEWORKS))
        for preset, cells in rows:
            print(f"| {preset} | " + " | ".join(cells[f] for f in FRAMEWORKS) + " |")
    else:
        for preset, cells in rows:
            print(f"{preset}:")
            for f in FRAMEWORKS:
                print(f"  {f:9s} {cells[f]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
