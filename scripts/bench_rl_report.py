#!/usr/bin/python3
"""Table of `make bench-rl` (scripts/bench-rl.sh) from its RESULT lines: per mode and round,
each implementation's phase rates, s/step, s per 1k generated tokens, FLOP rates as a share
of the cblas_sgemm rate grpolab measured in the same round on the model's own shapes (over
all timed steps, and grpolab's fastest step of each phase), and
grpolab's speed-up over each peer of the same round (the runs alternate, so a round's
implementations saw about the same load)."""
import sys
from statistics import median


def main(path):
    rows = []
    with open(path) as f:
        for line in f:
            kv = dict(x.split("=", 1) for x in line.split()[1:])
            rows.append(kv)
    for mode in dict.fromkeys(r["mode"] for r in rows):
        print(f"\nbench-rl, mode {mode} ({'every response at the budget' if mode == 'forced' else 'the model''s own lengths'}):")
        print(f"{'round':>5} {'impl':>8} {'rollout tok/s':>13} {'update tok/s':>12} {'s/step':>7} "
              f"{'s/1k tok':>8} {'rollout GF/s':>12} {'% sgemm':>7} {'update GF/s':>11} {'% sgemm':>7} "
              f"{'fastest step, % sgemm':>21}")
        speedups = {}
        for rnd in dict.fromkeys(r["round"] for r in rows if r["mode"] == mode):
            rr = [r for r in rows if r["mode"] == mode and r["round"] == rnd]
            g = next((r for r in rr if r["impl"] == "grpolab"), None)
            for r in rr:
                ro, up, n, st = float(r["rollout_s"]), float(r["update_s"]), float(r["gen_tokens"]), int(r["steps"])
                rg, ug = float(r["rollout_gflop"]) / ro, float(r["update_gflop"]) / up
                sro = 100 * rg / float(g["sgemm_rollout"]) if g else float("nan")
                sup = 100 * ug / float(g["sgemm_update"]) if g else float("nan")
                r["s1k"] = 1000 * (ro + up) / n
                fastest = ""  # grpolab's fastest timed step, rollout / update
                if "update_gflops_fastest" in r and g:
                    fastest = (f"{100 * float(r['rollout_gflops_fastest']) / float(g['sgemm_rollout']):.0f}% / "
                               f"{100 * float(r['update_gflops_fastest']) / float(g['sgemm_update']):.0f}%")
                print(f"{rnd:>5} {r['impl']:>8} {n / ro:13.0f} {n / up:12.0f} {(ro + up) / st:7.2f} "
                      f"{r['s1k']:8.3f} {rg:12.2f} {sro:6.0f}% {ug:11.2f} {sup:6.0f}% {fastest:>21}")
            for r in rr:
                if g and r is not g:
                    speedups.setdefault(r["impl"], []).append(
                        (r["s1k"] / g["s1k"], float(r["rollout_s"]) / float(g["rollout_s"]) * float(g["gen_tokens"]) / float(r["gen_tokens"]),
                         float(r["update_s"]) / float(g["update_s"]) * float(g["gen_tokens"]) / float(r["gen_tokens"])))
        for impl, v in dict.fromkeys((r["impl"], r["versions"]) for r in rows if r["mode"] == mode and "versions" in r):
            print(f"  {impl}: {v.replace(':', ' ').replace(',', ', ')}")
        for impl, s in speedups.items():
            fmt = lambda v: f"{min(v):.2f}-{max(v):.2f}x (median {median(v):.2f})"
            print(f"  grpolab over {impl}: per generated token {fmt([x[0] for x in s])}; "
                  f"rollout {fmt([x[1] for x in s])}; update {fmt([x[2] for x in s])}")


if __name__ == "__main__":
    main(sys.argv[1])
