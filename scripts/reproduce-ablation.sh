#!/usr/bin/env bash
# `make reproduce-ablation`: the 2x2 of GRPO's two terms (experiments/ablation/terms_2x2.ini:
# objective.preset grpo, dr_grpo x objective.scale group_std, none x run.seed; docs/results.md).
#   1. the base model of reproduce-fig5.sh (pretrained if it is missing)
#   2. the sweep's runs, JOBS at a time (`grpolab sweep run`), into its out directory
#   3. `grpolab eval-run` of every run: its final policy sampled at temperature 1
#   4. `grpolab summary` of the sweep (every corner's checks against Dr. GRPO's, and their
#      table) into PLOTS/summary.md and printed; `grpolab plot fig5` of the four corners
#      into PLOTS/fig5.{png,pdf,svg}
# Environment: QUICK=1 (the smoke version: reproduce-fig5.sh's smoke base model and RL
# settings (scripts/reproduce-common.sh), two seeds, 6 steps; files under
# data/sweeps/quick/terms_2x2 and plots/quick/ablation), BACKEND=auto|cpu|cuda,
# JOBS=N|auto (auto: 1 on a GPU, min(nproc, runs) on the CPU), GRPOLAB=path of the binary.
# PLOTS: plots/ablation, or plots/quick/ablation with QUICK=1.
# Complete runs are kept, interrupted ones continue from their checkpoints, and runs made
# with another config stop the job before anything is trained (as reproduce-fig5.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=reproduce-ablation
QUICK=${QUICK:-0}
BACKEND=${BACKEND:-auto}
BIN=${GRPOLAB:-build/grpolab}
JOBS=${JOBS:-auto}
SEEDS=1 SET= TAG=  # the seeds are the sweep file's; no SET here
. scripts/reproduce-common.sh
repro_check_args
repro_paths  # BASE (and PRETRAIN_SET) as reproduce-fig5.sh's

GRID=experiments/ablation/terms_2x2.ini
# a key of the [sweep] section of GRID
sweep_key() { awk -F' *= *' -v k="$1" '/^\[/ {sec = $0} sec == "[sweep]" && $1 == k {sub(/ *#.*/, "", $2); print $2}' "$GRID"; }
if [ "$QUICK" = 1 ]; then
  repro_quick_train_set
  TRAIN_SET+=(--set train.steps=6 --set train.eval_every=3 --set train.checkpoint_every=3)
  OUT=data/sweeps/quick/terms_2x2
  PLOTS=plots/quick/ablation
  SWEEP=$OUT.sweep
  # GRID with the smoke settings on top: its [grid] as it is but for two seeds
  mkdir -p "$(dirname "$OUT")"
  {
    echo "# written by scripts/reproduce-ablation.sh (QUICK=1) from $GRID; it is written again each time"
    echo "[sweep]"
    echo "config = $(sweep_key config)"
    echo "out = $OUT"
    echo "name = terms_2x2"
    echo "run_name = $(sweep_key run_name)"
    echo "[set]"
    repro_set_lines
    awk '/^\[/ {sec = $0; if (sec == "[grid]") print; next}
         sec == "[grid]" && /^run\.seed *=/ {print "run.seed = 1234..1235"; next}
         sec == "[grid]" {print}' "$GRID"
  } > "$SWEEP"
else
  OUT=$(sweep_key out)
  PLOTS=plots/ablation
  SWEEP=$GRID
  if [ "$(sweep_key config)" != experiments/fig5/grpo.ini ] || [ "$BASE" != data/models/base.h5 ]; then
    say "$GRID: expected config = experiments/fig5/grpo.ini (whose train.init is $BASE)"; exit 2
  fi
fi
mkdir -p "$PLOTS"

repro_base
n_runs=$("$BIN" sweep plan "$SWEEP" 2>/dev/null | sed -n '1s/.*: \([0-9]*\) runs = .*/\1/p' || true)
repro_jobs "${n_runs:-2}"
repro_sweep "$SWEEP"

say "the final policies sampled at temperature 1 (grpolab eval-run)"
"$BIN" eval-run "$OUT" --backend "$BACKEND"

say "summary and figure -> $PLOTS/"
plots_ok=1
"$BIN" plot fig5 "$OUT" -o "$PLOTS/fig5" --smooth 0.1 || plots_ok=0
"$BIN" summary --md "$OUT" > "$PLOTS/summary.md"
"$BIN" summary "$OUT"
if [ "$plots_ok" = 0 ]; then
  say "the runs and the summary ($PLOTS/summary.md) are complete, but the figure failed (see above)"
  exit 1
fi
say "done: $PLOTS/fig5.{png,pdf,svg}, $PLOTS/summary.md"
