#!/usr/bin/env bash
# `make reproduce-fig5`: Fig. 5 of Liu et al. 2025 (GRPO vs Dr. GRPO) from a fresh clone.
#   1. pretrain the base model if it is missing (experiments/base/pretrain.ini)
#   2. train GRPO and Dr. GRPO from it (experiments/fig5/{grpo,dr_grpo}.ini), SEEDS seeds each
#      (run.seed = 1234, 1235, ...; both objectives get the same seeds)
#   3. draw plots/fig5, plots/length_bias, plots/difficulty_bias (.png .pdf .svg) and print
#      the summary (also written to plots/summary.md)
# Environment: SEEDS=N (default 1), QUICK=1 (a small smoke version: a base model briefly
# pretrained on level-1 questions, 12 RL steps of 4 level-1 prompts, a few minutes on 2
# cores; files under data/*/quick and plots/quick), BACKEND=auto|cpu|cuda (default auto),
# SET="key=value ..." (settings on top of both fig5 configs for the RL runs, as `--set`; the
# base model is not affected) with TAG=name (required with SET: the runs go to
# data/runs/NAME and the figures to plots/NAME, so that they do not mix with the default
# runs; scripts/fig5-paths.sh),
# GRPOLAB=path of the binary, JOBS=N|auto: train N runs at a time, each on nproc/N threads
# (run.threads) with its output in RUN.h5.log and a progress line per run every minute.
# auto (the default) is 1 on a GPU (where two runs side by side are slower than one after
# the other) and min(nproc, 2 x SEEDS) on the CPU: on the 2-core CPU both objectives side by
# side on one thread each, which is faster than one run after the other on two threads
# (docs/benchmarks.md has both timings) and is how the runs of docs/results.md were made:
# the CPU's rounding depends on the thread count (OpenBLAS; docs/kernels.md,
# "Determinism"), so the same seed on another count of threads follows another trajectory.
# A base model that exists is kept if it was pretrained with the config it would be pretrained
# with now (`grpolab config --against-model`); if not, the script stops and lists the keys.
# Runs that are complete are kept and not trained again; an interrupted run continues from
# its checkpoint (--resume). A run that exists is first compared with the config it would be
# trained with now (`grpolab config --against`); if they differ, nothing is trained and the
# keys are listed: delete (or move) data/runs/fig5_* to train afresh after changing a config.
set -euo pipefail
cd "$(dirname "$0")/.."

SEEDS=${SEEDS:-1}
QUICK=${QUICK:-0}
BACKEND=${BACKEND:-auto}
BIN=${GRPOLAB:-build/grpolab}
if ! [[ "$SEEDS" =~ ^[1-9][0-9]*$ ]]; then
  echo "reproduce-fig5: SEEDS='$SEEDS': expected a positive integer" >&2; exit 2
fi
JOBS=${JOBS:-auto}
if [ "$JOBS" != auto ] && ! [[ "$JOBS" =~ ^[1-9][0-9]*$ ]]; then
  echo "reproduce-fig5: JOBS='$JOBS': expected a positive integer or auto" >&2; exit 2
fi
if [ "$QUICK" != 0 ] && [ "$QUICK" != 1 ]; then
  echo "reproduce-fig5: QUICK='$QUICK': expected 0 or 1" >&2; exit 2
fi
[ -x "$BIN" ] || { echo "reproduce-fig5: $BIN not found: run make first" >&2; exit 2; }
SET=${SET:-}
if [ -n "$SET" ] && [ -z "${TAG:-}" ]; then
  echo "reproduce-fig5: SET='$SET' changes the runs: give TAG=name too (its runs go to data/runs/NAME, its figures to plots/NAME)" >&2; exit 2
fi
. scripts/fig5-paths.sh

PRETRAIN_SET=()
TRAIN_SET=()
if [ "$QUICK" = 1 ]; then
  # the smoke version: the same configs, cut down. Its base model sees only
  # level-1 questions (one operation), which 900 steps teach well enough to answer about one
  # in six of them at temperature 1 (levels 2-5 take the full pretraining), and RL trains on
  # level 1 only, so most groups are mixed and the updates are not zero.
  LEVELS=()
  for l in 2 3 4 5; do LEVELS+=(--set "corpus.weight_level$l=0"); done
  PRETRAIN_SET=(--set pretrain.steps=900 --set pretrain.warmup_steps=20 --set pretrain.log_every=100
                "${LEVELS[@]}")
  TRAIN_SET=(--set train.steps=12 --set train.prompts_per_step=4 --set train.minibatch_size=16
             --set train.eval_every=6 --set train.checkpoint_every=6 --set eval.limit=8
             "${LEVELS[@]//corpus./train.}")
fi
# SET's settings come last, so they override the smoke version's; each is checked against
# the configs before anything runs (grpolab names the key and value it refuses)
read -r -a SET_WORDS <<< "$SET"
for kv in "${SET_WORDS[@]}"; do TRAIN_SET+=(--set "$kv"); done
if [ ${#SET_WORDS[@]} -gt 0 ]; then
  for obj in grpo dr_grpo; do
    "$BIN" config --print "experiments/fig5/$obj.ini" "${TRAIN_SET[@]}" > /dev/null ||
      { echo "reproduce-fig5: SET='$SET' is refused for experiments/fig5/$obj.ini (above)" >&2; exit 2; }
  done
fi
mkdir -p "$(dirname "$BASE")" "$RUNS" "$PLOTS"
t0=$(date +%s)
say() { echo "reproduce-fig5 [$(( $(date +%s) - t0 ))s]: $*"; }

if [ -f "$BASE" ]; then
  # reused only if it was pretrained with the config it would be pretrained with now
  rc=0
  msg=$("$BIN" config --print experiments/base/pretrain.ini "${PRETRAIN_SET[@]}" --against-model "$BASE" 2>&1) || rc=$?
  if [ "$rc" -ne 0 ]; then
    say "$msg"
    say "stopping before training: delete or move $BASE to pretrain it again with the current config (nothing was changed)"
    exit 1
  fi
  say "base model $BASE exists and matches experiments/base/pretrain.ini (delete it to pretrain again)"
else
  if [ "$QUICK" = 1 ]; then
    say "pretraining the smoke base model -> $BASE (experiments/base/pretrain.ini, 900 steps of level-1 questions)"
  else
    say "pretraining the base model -> $BASE (experiments/base/pretrain.ini; its time on a CPU and a GPU: docs/benchmarks.md)"
  fi
  "$BIN" pretrain --config experiments/base/pretrain.ini "${PRETRAIN_SET[@]}" --out "$BASE" --backend "$BACKEND"
fi

if [ "$JOBS" = auto ]; then
  if [ "$BACKEND" = cuda ] ||
     { [ "$BACKEND" = auto ] && "$BIN" version | grep -q '^backends: .*cuda (built; device available)'; }; then
    JOBS=1
  else
    JOBS=$(( 2 * SEEDS < $(nproc) ? 2 * SEEDS : $(nproc) ))
  fi
  say "JOBS=auto: $JOBS run(s) at a time"
fi
THREADS=()
if [ "$JOBS" -gt 1 ]; then
  t=$(( $(nproc) / JOBS )); [ "$t" -ge 1 ] || t=1
  THREADS=(--set "run.threads=$t")
fi
# The settings a run of seed $1 is trained with on top of its config file (into `sets`).
run_sets() { sets=(--set "train.init=$BASE" --set "run.seed=$1" "${TRAIN_SET[@]}"); }
# Before anything is trained: every run that exists must have been made with the config it
# would be trained with now, or its figures would not be those of the config files.
stale=0
for ((k = 0; k < SEEDS; k++)); do
  for obj in grpo dr_grpo; do
    out=$RUNS/fig5_${obj}_s$((1234 + k)).h5
    [ -f "$out" ] || continue
    run_sets $((1234 + k))
    rc=0
    msg=$("$BIN" config --print "experiments/fig5/$obj.ini" "${sets[@]}" --against "$out" 2>&1) || rc=$?
    if [ "$rc" -ne 0 ]; then
      stale=1
      say "$msg"
    fi
  done
done
if [ "$stale" = 1 ]; then
  say "stopping before training: delete or move the runs above to train them again with the current config (nothing was changed)"
  exit 1
fi

runs=()
running=0
failed=0
declare -A RUN_OF=()  # background pid -> its run log
# Wait until one background run ends and remember a failure; meanwhile, every minute, the
# step, reward and ETA of each run from the last progress line of its .log.
reap() {
  local waited=0 pid rc line
  while :; do
    for pid in "${!RUN_OF[@]}"; do
      kill -0 "$pid" 2>/dev/null && continue
      rc=0
      wait "$pid" || rc=$?
      if [ "$rc" -ne 0 ]; then
        failed=1
        say "${RUN_OF[$pid]} failed (exit $rc): see ${RUN_OF[$pid]}.log"
      else
        say "${RUN_OF[$pid]} done"
      fi
      unset "RUN_OF[$pid]"
      running=$((running - 1))
      return
    done
    sleep 2
    waited=$((waited + 2))
    if [ $((waited % 60)) = 0 ]; then
      for pid in $(printf '%s\n' "${!RUN_OF[@]}" | sort -n); do  # in the order they started
        line=$(grep -a '^train step' "${RUN_OF[$pid]}.log" 2>/dev/null | tail -n 1 |
               sed -n 's/^train step *\([0-9]*\/[0-9]*\) *reward \([0-9.]*\).*ETA *\([0-9]*s\).*/step \1, reward \2, ETA \3/p')
        say "  $(basename "${RUN_OF[$pid]}"): ${line:-starting (step-0 evaluation)}"
      done
    fi
  done
}
for ((k = 0; k < SEEDS; k++)); do
  seed=$((1234 + k))
  for obj in grpo dr_grpo; do
    out=$RUNS/fig5_${obj}_s${seed}.h5
    runs+=("$out")
    mode=(--overwrite)
    run_sets "$seed"
    if [ -f "$out" ]; then
      if "$BIN" summary --check "$out" >/dev/null 2>&1; then
        say "$out is complete: kept"
        continue
      elif [ -f "$out.ckpt.h5" ]; then
        say "$out is incomplete: continuing from its checkpoint"
        mode=(--resume)
      else
        say "$out has no checkpoint (it stopped before its first one): training it again"
      fi
    fi
    cmd=("$BIN" train --config "experiments/fig5/$obj.ini" "${sets[@]}" "${THREADS[@]}" --out "$out"
         "${mode[@]}" --backend "$BACKEND")
    if [ "$JOBS" -gt 1 ]; then
      while [ "$running" -ge "$JOBS" ]; do reap; done
      say "training $obj, seed $seed -> $out (output in $out.log)"
      "${cmd[@]}" > "$out.log" 2>&1 &
      RUN_OF[$!]=$out
      running=$((running + 1))
    else
      say "training $obj, seed $seed -> $out"
      "${cmd[@]}"
    fi
  done
done
while [ "$running" -gt 0 ]; do reap; done
[ "$failed" = 0 ] || { say "stopping: a run failed"; exit 1; }

say "figures -> $PLOTS/"
# a figure that fails (no gnuplot, say) does not keep the summary from being printed
plots_ok=1
"$BIN" plot fig5 "${runs[@]}" -o "$PLOTS/fig5" --smooth 0.1 || plots_ok=0   # per-step curves are noisy: EMA, stated on the figure
"$BIN" plot length-bias "${runs[@]}" -o "$PLOTS/length_bias" || plots_ok=0
"$BIN" plot difficulty-bias "${runs[@]}" -o "$PLOTS/difficulty_bias" || plots_ok=0
"$BIN" summary --md "${runs[@]}" > "$PLOTS/summary.md"
"$BIN" summary "${runs[@]}"
if [ "$plots_ok" = 0 ]; then
  say "the runs and the summary ($PLOTS/summary.md) are complete, but a figure failed (see above)"
  exit 1
fi
say "done: $PLOTS/fig5.{png,pdf,svg}, $PLOTS/length_bias.*, $PLOTS/difficulty_bias.*, $PLOTS/summary.md"
