#!/usr/bin/env bash
# `make reproduce-fig6`: Fig. 6 of Liu et al. 2025 (template x question-set coverage, Sec. 3.3)
# from a fresh clone.
#   1. pretrain the base model if it is missing (experiments/base/pretrain.ini; the fig5 base
#      model, shared with make reproduce-fig5)
#   2. train Dr. GRPO from it under the templates r1, boxed, none x the question sets level1,
#      levels1-3, all, ood (experiments/fig6/fig6.ini), SEEDS seeds each (run.seed = 1234,
#      1235, ...): one `grpolab sweep run` of the sweep file RUNS/fig6/fig6.sweep that this
#      script writes from fig6.ini (its [set] with QUICK's and SET's settings over it, its grid
#      with the seeds of SEEDS)
#   3. draw PLOTS/fig6 (.png .pdf .svg) and print the summary with the four checks (also
#      written to PLOTS/fig6_summary.md)
# Environment: SEEDS=N (default 1: 12 runs; N seeds give the checks CIs and take N times as
# long), QUICK=1 (the smoke version: the smoke base model of make reproduce-fig5 QUICK=1, 6 RL
# steps of 4 prompts, evaluations on 8 questions per benchmark, for CI; files under
# data/*/quick and plots/quick), BACKEND, GRPOLAB, JOBS
# (auto: 1 on a GPU, else min(nproc, 12 x SEEDS)), SET="key=value ..." with TAG=name: as for
# make reproduce-fig5 (scripts/reproduce-fig5.sh); the runs go to data/runs[/quick][/TAG]/fig6.
# A base model or a run that exists is kept only if it was made with the config it would be
# made with now; else the script stops before training and lists the keys (as reproduce-fig5).
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=reproduce-fig6
SEEDS=${SEEDS:-1}
QUICK=${QUICK:-0}
BACKEND=${BACKEND:-auto}
BIN=${GRPOLAB:-build/grpolab}
JOBS=${JOBS:-auto}
SRC=experiments/fig6/fig6.ini
. scripts/reproduce-common.sh
repro_check_args
repro_paths
RUNS6=$RUNS/fig6

# The settings of every run: fig6.ini's [set], then the smoke version's, then SET's (a key
# given twice keeps its last value: repro_set_lines).
TRAIN_SET=()
while IFS= read -r kv; do TRAIN_SET+=(--set "$kv"); done < <(
  awk '/^\[/ {sec = $0; next}
       sec == "[set]" {sub(/[#;].*/, ""); if ($0 !~ /=/) next; k = $0; v = $0
                       sub(/=.*/, "", k); sub(/^[^=]*=/, "", v); gsub(/[ \t]/, "", k); gsub(/^[ \t]+|[ \t]+$/, "", v)
                       print k "=" v}' "$SRC")
if [ "$QUICK" = 1 ]; then
  TRAIN_SET+=(--set train.steps=6 --set train.prompts_per_step=4 --set train.minibatch_size=16
              --set train.eval_every=3 --set train.checkpoint_every=3 --set eval.limit=8)
fi
read -r -a SET_WORDS <<< "$SET"
for kv in "${SET_WORDS[@]}"; do TRAIN_SET+=(--set "$kv"); done
if [ ${#SET_WORDS[@]} -gt 0 ]; then
  "$BIN" config --print experiments/fig5/dr_grpo.ini "${TRAIN_SET[@]}" > /dev/null ||
    { echo "$NAME: SET='$SET' is refused for experiments/fig5/dr_grpo.ini (above)" >&2; exit 2; }
fi
mkdir -p "$RUNS6" "$PLOTS"
repro_base
repro_jobs $(( 12 * SEEDS ))

# The sweep file: fig6.ini with its out directory, [set] and seeds replaced
SWEEP=$RUNS6/fig6.sweep
{
  echo "# written by scripts/reproduce-fig6.sh (make reproduce-fig6) from $SRC; it is written again each time"
  awk -v out="$RUNS6" -v seeds="1234..$((1233 + SEEDS))" -v sets="$(repro_set_lines)" '
    /^\[/ {sec = $0; print; if (sec == "[set]") print sets; next}
    sec == "[sweep]" && $1 == "out" {print "out = " out; next}
    sec == "[set]" {next}
    sec == "[grid]" && $1 == "run.seed" {print "run.seed = " seeds; next}
    {print}' "$SRC"
} > "$SWEEP"
repro_sweep "$SWEEP"

say "figure -> $PLOTS/fig6.{png,pdf,svg}"
# a figure that fails (no gnuplot, say) does not keep the summary from being printed
plots_ok=1
"$BIN" plot fig6 "$RUNS6" -o "$PLOTS/fig6" || plots_ok=0
"$BIN" summary --md "$RUNS6" > "$PLOTS/fig6_summary.md"
"$BIN" summary "$RUNS6"
if [ "$plots_ok" = 0 ]; then
  say "the runs and the summary ($PLOTS/fig6_summary.md) are complete, but the figure failed (see above)"
  exit 1
fi
say "done: $PLOTS/fig6.{png,pdf,svg}, $PLOTS/fig6_summary.md"
