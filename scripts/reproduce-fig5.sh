#!/usr/bin/env bash
# `make reproduce-fig5`: Fig. 5 of Liu et al. 2025 (GRPO vs Dr. GRPO) from a fresh clone.
#   1. pretrain the base model if it is missing (experiments/base/pretrain.ini); an
#      interrupted pretraining goes on from its checkpoint BASE.ckpt.h5 (`pretrain --resume`)
#   2. train GRPO and Dr. GRPO from it (experiments/fig5/{grpo,dr_grpo}.ini), SEEDS seeds each
#      (run.seed = 1234, 1235, ...; both objectives get the same seeds): one `grpolab sweep run`
#      of the sweep file RUNS/fig5.sweep that this script writes (grpo.ini with the grid
#      objective.preset = grpo, dr_grpo x run.seed; the two files differ only in the preset)
#   3. `grpolab eval-run` of every run: its final policy sampled at temperature 1, 4 samples
#      per question (RUN.h5.sampled.h5, the summary's "sampled ratio"), kept where it exists
#   4. draw plots/fig5, plots/length_bias, plots/difficulty_bias (.png .pdf .svg) and print
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
# (docs/notebook/2026-12-06-reproduce-fig5-wall-times.md has both timings) and is how the
# runs of docs/results.md were made:
# the CPU's rounding depends on the thread count (OpenBLAS; docs/kernels.md,
# "Determinism"), so the same seed on another count of threads follows another trajectory.
# A base model that exists is kept if it was pretrained with the config it would be pretrained
# with now (`grpolab config --against-model`); if not, the script stops and lists the keys.
# Runs that are complete are kept and not trained again; an interrupted run continues from
# its checkpoint (--resume), and so does a complete run whose train.steps SET raises: it
# extends from its last step (SET="train.steps=400" TAG=long after a run with
# SET="train.steps=200" TAG=long), and its log ends as that of a 400-step run. A run that
# exists is first compared with the config it would be trained with now (`grpolab sweep
# plan`, as `config --against`; a larger train.steps is the same run); if they differ,
# nothing is trained and the keys are listed: delete (or move) data/runs/fig5_* to train
# afresh after changing a config.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=reproduce-fig5
SEEDS=${SEEDS:-3}
QUICK=${QUICK:-0}
BACKEND=${BACKEND:-auto}
BIN=${GRPOLAB:-build/grpolab}
JOBS=${JOBS:-auto}
. scripts/reproduce-common.sh
repro_check_args
repro_paths

repro_quick_train_set  # the smoke version (QUICK=1): the same configs, cut down
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
mkdir -p "$RUNS" "$PLOTS"
repro_base
# auto on the CPU: min(nproc, 2 x SEEDS)
repro_jobs $(( 2 * SEEDS ))
# The sweep file: every run's settings on top of grpo.ini in [set] (a key given twice, as SET
# over QUICK's, keeps its last value), the grid in the order of the old per-run loop (seed,
# then objective) and the run logs named as before: RUNS/fig5_<preset>_s<seed>.h5.
SWEEP=$RUNS/fig5.sweep
{
  echo "# written by scripts/reproduce-fig5.sh (make reproduce-fig5); it is written again each time"
  echo "[sweep]"
  echo "config = experiments/fig5/grpo.ini"
  echo "out = $RUNS"
  echo "name = fig5"
  echo "run_name = fig5_{objective.preset}_s{run.seed}"
  echo "[set]"
  repro_set_lines
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
repro_sweep "$SWEEP"

# the final policies at temperature 1, so that the summary's ratio does not rest on greedy
# loops alone (its "sampled ratio"; a file that exists is kept)
say "the final policies sampled at temperature 1 (grpolab eval-run)"
"$BIN" eval-run "${runs[@]}" --backend "$BACKEND"

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
