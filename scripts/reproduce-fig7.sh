#!/usr/bin/env bash
# `make reproduce-fig7`: Fig. 7 of Liu et al. 2025 (domain pretraining raises the RL ceiling;
# GRPO's double increase) from a fresh clone.
#   1. pretrain the chain of base models if missing, each checked against its config as
#      reproduce-fig5 does (scripts/reproduce-common.sh): a general model where arithmetic is
#      rare (experiments/fig7/pretrain_general.ini), continued on math text
#      (pretrain_math.ini), then on question-answer text (pretrain_mathqa.ini)
#   2. Dr. GRPO (R1 template, experiments/fig7/dr_grpo.ini) from each of the three, and GRPO
#      from the math base, SEEDS seeds each: one sweep per base, RUNS/{general,math,mathqa}
#   3. draw PLOTS/fig7 (.png .pdf .svg) and print the summary with the checks of Fig. 7 (also
#      written to PLOTS/fig7_summary.md)
# Environment: SEEDS=N (default 3), QUICK=1 (a smoke version: a short chain on level-1
# questions, 8 RL steps of 4 prompts; about 2-3 minutes on 2 cores; files under
# data/models/fig7/quick, data/runs/fig7/quick and plots/quick), BACKEND=auto|cpu|cuda,
# GRPOLAB=path of the binary, JOBS=N|auto: runs at a time (auto: 1 on a GPU, else
# min(nproc, 2)); the three sweeps share one queue, GRPO's runs first.
# The steps and mixtures and why: docs/notebook/2026-12-06-fig7-plan.md.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=reproduce-fig7
SEEDS=${SEEDS:-3}
QUICK=${QUICK:-0}
BACKEND=${BACKEND:-auto}
BIN=${GRPOLAB:-build/grpolab}
JOBS=${JOBS:-auto}
. scripts/reproduce-common.sh
repro_check_args

BASES=(general math mathqa)
if [ "$QUICK" = 1 ]; then
  MODELS=data/models/fig7/quick; RUNS=data/runs/fig7/quick; PLOTS=plots/quick
  # the smoke version: level-1 questions only (as reproduce-fig5's), a short chain of small
  # batches, and a few RL steps on level 1, so that the commands and files are exercised
  LEVELS=()
  for l in 2 3 4 5; do LEVELS+=(--set "corpus.weight_level$l=0"); done
  COMMON=(--set pretrain.batch_size=16 --set pretrain.warmup_steps=10 --set pretrain.log_every=100 "${LEVELS[@]}")
  STEPS=(--set pretrain.steps=150 --set pretrain.steps=150 --set pretrain.steps=60)
  TRAIN_SET=(train.steps=8 train.prompts_per_step=4 train.minibatch_size=16 train.eval_every=4
             train.checkpoint_every=4 eval.limit=8 train.weight_level2=0 train.weight_level3=0)
else
  MODELS=data/models/fig7; RUNS=data/runs/fig7; PLOTS=plots
  COMMON=(); STEPS=(); TRAIN_SET=()
fi
mkdir -p "$MODELS" "$RUNS" "$PLOTS"

# 1. the chain: each stage's pretrain.init is the model of the stage before
prev=
for k in 0 1 2; do
  b=${BASES[k]}
  args=("${COMMON[@]}")
  [ ${#STEPS[@]} -gt 0 ] && args+=("${STEPS[2 * k]}" "${STEPS[2 * k + 1]}")
  [ -n "$prev" ] && args+=(--set "pretrain.init=$prev")
  repro_pretrain "experiments/fig7/pretrain_$b.ini" "$MODELS/$b.h5" "the $b base model" "${args[@]}"
  prev=$MODELS/$b.h5
done

# auto on the CPU: min(nproc, 2): the two sides below
repro_jobs 2

# 2. one sweep per base: Dr. GRPO from each, GRPO as well from the math base
for b in "${BASES[@]}"; do
  presets=dr_grpo
  [ "$b" = math ] && presets="grpo, dr_grpo"
  {
    echo "# written by scripts/reproduce-fig7.sh (make reproduce-fig7); it is written again each time"
    echo "[sweep]"
    echo "config = experiments/fig7/dr_grpo.ini"
    echo "out = $RUNS/$b"
    echo "name = fig7_$b"
    echo "run_name = fig7_${b}_{objective.preset}_s{run.seed}"
    echo "[set]"
    echo "train.init = $MODELS/$b.h5"
    for kv in "${TRAIN_SET[@]}"; do echo "${kv%%=*} = ${kv#*=}"; done
    echo "[grid]"
    echo "objective.preset = $presets"
    echo "run.seed = 1234..$((1233 + SEEDS))"
  } > "$RUNS/$b.sweep"
done
for b in "${BASES[@]}"; do repro_sweep_check "$RUNS/$b.sweep"; done
# one queue of JOBS places over the three sweeps, longest runs first: GRPO from the math base
# (its responses grow to the budget: the longest runs), then the Dr. GRPO runs; every run on
# nproc/JOBS threads as reproduce-fig5's
repro_sweep_train "$JOBS" "" "$RUNS/math.sweep" "$RUNS/general.sweep" "$RUNS/mathqa.sweep"

# 3. the figure and the checks
say "figure -> $PLOTS/fig7"
plots_ok=1
"$BIN" plot fig7 "$RUNS" -o "$PLOTS/fig7" --smooth 0.1 || plots_ok=0   # per-step curves are noisy: EMA, stated on the figure
"$BIN" summary --fig7 "$RUNS" --md > "$PLOTS/fig7_summary.md"
"$BIN" summary --fig7 "$RUNS"
if [ "$plots_ok" = 0 ]; then
  say "the runs and the summary ($PLOTS/fig7_summary.md) are complete, but the figure failed (see above)"
  exit 1
fi
say "done: $PLOTS/fig7.{png,pdf,svg}, $PLOTS/fig7_summary.md"
