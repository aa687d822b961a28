#!/usr/bin/env bash
# `make reproduce-fig5` on a GPU machine without grpolab's Debian packages and without a
# network, from the binary of `make gpu-bundle`:
#   tar xzf build-gpu/bundle.tar.gz -C build-gpu && scripts/gpu-fig5.sh
# (carry build-gpu/bundle.tar.gz to that machine, or unpack it first as here).
# It calls scripts/reproduce-fig5.sh with BACKEND=cuda and SEEDS=1, 2, 3, ...: each call
# trains one more seed pair (GRPO and Dr. GRPO, seed 1234 + k), keeps the pairs already
# trained and prints the summary and checks of all pairs so far. One run at a time: on one
# GPU two runs side by side are slower than one after the other
# (docs/notebook/2026-12-04-bench-and-fig5-throughput.md).
# The base model is pretrained on the GPU when data/models/base.h5 is missing.
#
# GPU_FIG5_SEEDS (default 3) pairs are trained, and further ones up to GPU_FIG5_MAX_SEEDS
# (default 6), as long as GPU_FIG5_SECONDS (default 540) since the start leave time for one
# more pair at the pace of the last one; no pair is started that would end past it.
# After each pair its two run logs without their /tokens table (`grpolab strip`; /tokens is
# too large to bring back, and the length-bias figure then draws the closed form of the
# weights, not the measured ones) go into $OUT/pair_sSEED.tar, and the whole output, the
# runs' included, into $OUT/gpu-fig5.log. GPU_CHECK_PREBUILT=DIR names the unpacked
# bundle as for gpu-check (default build-gpu/bundle). The figures need gnuplot, which such a machine may
# lack: then the summary is printed without them and the runs are drawn where it is.
# SET and TAG pass through to reproduce-fig5 (an ablation of the RL settings, its runs in
# data/runs/TAG), e.g. TAG=p64 SET="train.prompts_per_step=64 train.minibatch_size=128"
# (its time on an H200: docs/notebook/2026-12-04-bench-and-fig5-throughput.md).
# GPU_FIG5_BACKEND=cpu with QUICK=1 (reproduce-fig5's smoke version) tries the script here.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu-fig5-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-fig5.log") 2>&1
T0=$(date +%s)
say() { echo "gpu-fig5 [$(( $(date +%s) - T0 ))s]: $*"; }

PRE=${GPU_CHECK_PREBUILT:-build-gpu/bundle}
[ -x "$PRE/grpolab" ] || { echo "gpu-fig5: $PRE/grpolab not found: run make gpu-bundle and unpack build-gpu/bundle.tar.gz" >&2; exit 2; }
. scripts/gpu-env.sh
[ -z "$GPU_ENV_MISSING" ] || { echo "gpu-fig5: libraries not found: $GPU_ENV_MISSING" >&2; exit 2; }
"$PRE/grpolab" version
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

BACKEND=${GPU_FIG5_BACKEND:-cuda}   # cpu tries the script on a machine without a GPU
. scripts/fig5-paths.sh   # RUNS as reproduce-fig5 has it (QUICK, TAG; SET and TAG pass through)
WANT=${GPU_FIG5_SEEDS:-3}
MAX=${GPU_FIG5_MAX_SEEDS:-6}
LIMIT=${GPU_FIG5_SECONDS:-540}
for v in WANT MAX LIMIT; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-fig5: $v='${!v}': expected a positive integer" >&2; exit 2; }
done

# a run log without /tokens (`grpolab strip`: the bundle's own HDF5, no python needed)
strip_tokens() { "$PRE/grpolab" strip "$1" -o "$2" --overwrite >/dev/null; }

pair_secs=0
n=0
while [ "$n" -lt "$MAX" ]; do
  elapsed=$(( $(date +%s) - T0 ))
  if [ "$n" -ge 1 ] && [ $(( elapsed + pair_secs * 11 / 10 )) -gt "$LIMIT" ]; then
    say "stopping after $n pair(s): another at $pair_secs s would end past ${LIMIT} s"; break
  fi
  [ "$n" -ge "$WANT" ] && say "$n pairs done; time is left for another"
  n=$((n + 1)); seed=$((1233 + n)); t1=$(date +%s)
  say "SEEDS=$n: training the pair of seed $seed"
  SEEDS=$n JOBS=1 BACKEND=$BACKEND GRPOLAB=$PRE/grpolab scripts/reproduce-fig5.sh
  rc=$?
  # the pair's training output (`sweep run` writes it to RUNS/NAME.log) into this log too
  for obj in grpo dr_grpo; do cat "$RUNS/fig5_${obj}_s$seed.log" 2>/dev/null || true; done
  why=""
  for obj in grpo dr_grpo; do
    f=$RUNS/fig5_${obj}_s$seed.h5
    if ! "$PRE/grpolab" summary --check "$f" >/dev/null 2>&1; then
      why="$f did not complete (reproduce-fig5 exit $rc)"
    elif ! strip_tokens "$f" "$RUNS/fig5_${obj}_s$seed.notokens.h5"; then
      why="$f is complete but its copy without /tokens failed (grpolab strip, above)"
    fi
    [ -z "$why" ] || break
  done
  [ -z "$why" ] || { say "the pair of seed $seed: $why: stopping"; break; }
  tar -C "$RUNS" -cf "$OUT/pair_s$seed.tar" "fig5_grpo_s$seed.notokens.h5" "fig5_dr_grpo_s$seed.notokens.h5"
  pair_secs=$(( $(date +%s) - t1 ))
  say "pair of seed $seed: $pair_secs s (reproduce-fig5 exit $rc; 1 when only the figures failed)"
done
say "done: $n pair(s) in $(( $(date +%s) - T0 )) s"
