#!/usr/bin/python3
"""Where the RL step's CPU time goes, per phase, from a `perf record -g --call-graph dwarf`
of `grpolab bench-rl` (docs/benchmarks.md "Profile of the RL step"):

    perf script -i rl.data -F ip,sym | scripts/perf_phases.py

Each sample goes to the phase of the first trainer function on its stack (rollout:
sampler_generate, verify_response; update: train_old_logp, train_minibatch_gradient,
model_adamw_step; else other) and to the first grpolab kernel (cpu_*, rope_*) on it, split
into the kernel's own code, the sgemm it calls and memset (OpenBLAS zeroing C for beta = 0).
"""
import collections
import sys

PHASES = [("sampler_generate", "rollout"), ("verify_response", "rollout"),
          ("train_old_logp", "update"), ("train_minibatch_gradient", "update"),
          ("model_adamw_step", "update")]


def kernel_of(names):
    """The first grpolab kernel on the stack (leaf first) and what the leaf is inside it."""
    leaf = names[0]
    for f in names:
        if f.startswith(("cpu_", "rope_")):
            inner = "sgemm" if leaf.startswith(("sgemm", "cblas")) else "memset" if "memset" in leaf else "own code"
            return f.split("._omp_fn")[0].replace(" (inlined)", "") + " / " + inner
    return leaf


def main():
    count, total = collections.Counter(), collections.Counter()
    frames = []
    # perf script prints per sample a header line, its stack frames (leaf first), a blank line
    for line in list(sys.stdin) + [""]:
        if line.startswith((" ", "\t")) and line.strip():
            frames.append(line.split()[1].split("+")[0] if len(line.split()) > 1 else "?")
            continue
        if not line.strip() and frames:
            phase = next((p for n, p in PHASES if n in frames), "other")
            count[(phase, kernel_of(frames))] += 1
            total[phase] += 1
            frames = []
    n = sum(total.values())
    for phase in ("rollout", "update", "other"):
        print(f"{phase}: {100 * total[phase] / max(n, 1):.1f}% of {n} samples")
        for (p, k), c in count.most_common():
            if p == phase and c / total[phase] > 0.01:
                print(f"   {k:44s} {100 * c / total[phase]:5.1f}%")


if __name__ == "__main__":
    main()
