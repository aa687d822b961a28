#!/usr/bin/env bash
# `make reproduce-fig5`: Fig. 5 of Liu et al. 2025 (GRPO vs Dr. GRPO) from a fresh clone.
#   1. pretrain the base model if it is missing (experiments/base/pretrain.ini)
#   2. train GRPO and Dr. GRPO from it (experiments/fig5/{grpo,dr_grpo}.ini), SEEDS seeds each
#      (run.seed = 1234, 1235, ...; both objectives get the same seeds): one `grpolab sweep run`
#      of the sweep file RUNS/fig5.sweep that this script writes (grpo.ini with the grid
#      objective.preset = grpo, dr_grpo x run.seed; the two files differ only in the preset)
#   3. draw plots/fig5, plots/length_bias, plots/difficulty_bias (.png .pdf .svg) and print
#      the summary (also written to plots/summary.md)
# Environment: SEEDS=N (default 3), QUICK=1 (a small smoke version: a base model briefly
# pretrained on level-1 questions, 12 RL steps of 4 level-1 prompts, a few minutes on 2
# cores; files under data/*/quick and plots/quick), BACKEND=auto|cpu|cuda (default auto),
# SET="key=value ..." (settings on top of both fig5 configs for the RL runs, as `--set`; the
# base model is not affected) with TAG=name (required with SET: the runs go to
# data/runs/NAME and the figures to plots/NAME, so that they do not mix with the default
# runs; scripts/fig5-paths.sh; run.seed and objective.preset are the grid's, not SET's),
# GRPOLAB=path of the binary, JOBS=N|auto: train N runs at a time (`sweep run --jobs N`), each
# on nproc/N threads (run.threads) when N > 1, with its output in RUNS/NAME.log and a progress
# line per run every minute.
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
# trained with now (`grpolab sweep plan`, as `config --against`); if they differ, nothing is trained and the
# keys are listed: delete (or move) data/runs/fig5_* to train afresh after changing a config.
set -euo pipefail
cd "$(dirname "$0")/.."

SEEDS=${SEEDS:-3}
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
# The sweep file: every run's settings on top of grpo.ini in [set] (a key given twice, as SET
# over QUICK's, keeps its last value), the grid in the order of the old per-run loop (seed,
# then objective) and the run logs named as before: RUNS/fig5_<preset>_s<seed>.h5.
SWEEP=$RUNS/fig5.sweep
declare -A SET_VAL=()
SET_KEYS=()
for ((j = 1; j < ${#TRAIN_SET[@]}; j += 2)); do
  kv=${TRAIN_SET[j]}
  [ -n "${SET_VAL[${kv%%=*}]+x}" ] || SET_KEYS+=("${kv%%=*}")
  SET_VAL[${kv%%=*}]=${kv#*=}
done
{
  echo "# written by scripts/reproduce-fig5.sh (make reproduce-fig5); it is written again each time"
  echo "[sweep]"
  echo "config = experiments/fig5/grpo.ini"
  echo "out = $RUNS"
  echo "name = fig5"
  echo "run_name = fig5_{objective.preset}_s{run.seed}"
  echo "[set]"
  [ -n "${SET_VAL[train.init]+x}" ] || echo "train.init = $BASE"
  for k in "${SET_KEYS[@]}"; do echo "$k = ${SET_VAL[$k]}"; done
  echo "[grid]"
  echo "run.seed = 1234..$((1233 + SEEDS))"
  echo "objective.preset = grpo, dr_grpo"
} > "$SWEEP"
runs=()
for ((k = 0; k < SEEDS; k++)); do
  for obj in grpo dr_grpo; do runs+=("$RUNS/fig5_${obj}_s$((1234 + k)).h5"); done
done
# Before anything is trained: every run that exists must have been made with the config it
# would be trained with now, or its figures would not be those of the config files.
rc=0
plan=$("$BIN" sweep plan "$SWEEP" 2>&1) || rc=$?
if [ "$rc" = 1 ]; then
  # the plan's line under each refused run: the log, the keys that differ, stored vs now
  while IFS= read -r msg; do say "$msg"; done < <(printf '%s\n' "$plan" | awk '/\[REFUSED\]$/ {getline; sub(/^ +/, ""); print}')
  say "stopping before training: delete or move the runs above to train them again with the current config (nothing was changed)"
  exit 1
elif [ "$rc" != 0 ]; then
  printf '%s\n' "$plan" >&2
  say "stopping: $SWEEP is refused (above)"
  exit 2
fi
rc=0
"$BIN" sweep run "$SWEEP" --jobs "$JOBS" --backend "$BACKEND" || rc=$?
if [ "$rc" -ne 0 ]; then
  [ "$rc" -gt 128 ] && exit "$rc"  # stopped by a signal: make reproduce-fig5 again continues
  say "stopping: a run failed"; exit 1
fi

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
