#!/usr/bin/env bash
# `make reproduce-sensitivity`: the map of where GRPO's length bias shows (issue 49, item 2):
# GRPO and Dr. GRPO (the fig5 configs) along two axes, from the sweep files of
# experiments/sensitivity/:
#   recover  recover_*.ini: one base model per corpus.p_recover (experiments/base/pretrain.ini
#            with only that key changed, at the sweep file's train.init), its runs in
#            data/sweeps/sensitivity/recover-<v>
#   budget   budget.ini: world.max_new_tokens on the default base model, its runs in
#            data/sweeps/sensitivity/budget; its value 300 (the fig5 budget) is the point
#            p_recover = 0 of the recover axis, whose runs (recover_0.ini) serve both axes
# Steps: pretrain every base model that is missing (a base model that exists is kept if it
# was pretrained with the config it would be pretrained with now, else the script stops and
# lists the keys); profile each (base model, budget) with `grpolab eval`: greedy at that
# budget (the share of incorrect responses cut by the budget, their mean length) and at
# temperature 1 on 2000 training-pool questions with --failure-profile (the chance that a
# redo after a rejected step is right), kept in data/models/sensitivity/profile/ until the
# base model changes; run each sweep (`grpolab sweep run --jobs JOBS`: complete runs are
# kept, interrupted ones resumed, runs made with another config stop everything before it
# trains); draw plots/sensitivity/{recover,budget}.{png,pdf,svg} and write
# plots/sensitivity/table.md (`grpolab plot sensitivity`, docs/cli.md).
# Environment: AXIS=recover|budget|all (default all), SEEDS=N seed pairs per value (default 3,
# QUICK 2: run.seed 1234..1233+N), JOBS=N|auto (as make reproduce-fig5: auto is 1 on a GPU, else
# min(nproc, 2 x SEEDS)), BACKEND=auto|cpu|cuda, GRPOLAB=path of the binary, QUICK=1: the
# smoke version that CI runs (two values per axis; tiny base models, 2 layers of width 64,
# pretrained as make reproduce-fig5 QUICK=1 pretrains its own, 900 steps of level-1
# questions; the budget axis on the one of p_recover 0; the RL runs of make reproduce-fig5
# QUICK=1; files under data/models/quick/sensitivity, data/sweeps/quick/sensitivity and
# plots/quick/sensitivity).
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=reproduce-sensitivity
AXIS=${AXIS:-all}
QUICK=${QUICK:-0}
SEEDS=${SEEDS:-$([ "$QUICK" = 1 ] && echo 2 || echo 3)}
BACKEND=${BACKEND:-auto}
JOBS=${JOBS:-auto}
BIN=${GRPOLAB:-build/grpolab}
case "$AXIS" in recover|budget|all) ;; *) echo "$NAME: AXIS='$AXIS': expected recover, budget or all" >&2; exit 2 ;; esac
# the steps make reproduce-fig5 takes too: say, repro_check_args, repro_paths (PRETRAIN_SET,
# QUICK's pretraining), repro_base, repro_jobs, repro_sweep
. scripts/reproduce-common.sh
repro_check_args
repro_paths
TRAIN_SET=()
if [ "$QUICK" = 1 ]; then
  # the RL runs of make reproduce-fig5 QUICK=1: on level 1, as the smoke base models learnt
  TRAIN_SET=(--set train.steps=12 --set train.prompts_per_step=4 --set train.minibatch_size=16
             --set train.eval_every=6 --set train.checkpoint_every=6 --set eval.limit=8)
  for l in 2 3 4 5; do TRAIN_SET+=(--set "train.weight_level$l=0"); done
fi

EXP=experiments/sensitivity
if [ "$QUICK" = 1 ]; then
  MODELS=data/models/quick/sensitivity; SWEEPS=data/sweeps/quick/sensitivity; PLOTS=plots/quick/sensitivity
  # tiny base models: a smoke test of the machinery, not a measurement
  TINY=(--set model.d_model=64 --set model.n_layers=2 --set model.n_heads=2 --set model.n_kv_heads=1 --set model.d_ff=172)
  PRETRAIN_SET+=("${TINY[@]}")
  TRAIN_SET+=("${TINY[@]}")  # the runs' [model] rows repeat train.init's
  GREEDY_LIMIT=(--limit 8); POOL=64
else
  MODELS=data/models/sensitivity; SWEEPS=data/sweeps/sensitivity; PLOTS=plots/sensitivity
  GREEDY_LIMIT=(); POOL=2000
fi
PROFILES=$MODELS/profile
mkdir -p "$MODELS" "$PROFILES" "$SWEEPS" "$PLOTS"

# ini_get FILE SECTION KEY: the value (without a trailing comment) of KEY in [SECTION]
ini_get() {
  awk -v sec="$2" -v key="$3" '
    /^[ \t]*\[/ {s = $0; gsub(/[][ \t]/, "", s); next}
    s == sec && index($0, "=") {
      k = substr($0, 1, index($0, "=") - 1); v = substr($0, index($0, "=") + 1)
      gsub(/^[ \t]+|[ \t]+$/, "", k); sub(/[ \t]+[#;].*$/, "", v); gsub(/^[ \t]+|[ \t]+$/, "", v)
      if (k == key) {print v; exit}
    }' "$1"
}

# derive SRC DST SECTION/KEY=VALUE...: writes DST, the sweep file SRC with each [SECTION] KEY
# set to VALUE (its line replaced, or added at the end of the section)
derive() {
  local src=$1 dst=$2
  shift 2
  {
    echo "# written by scripts/reproduce-sensitivity.sh from $src; it is written again each time"
    awk -v sets="$(printf '%s\n' "$@")" '
      BEGIN {n = split(sets, a, "\n")
             for (i = 1; i <= n; i++) if (a[i] != "") {
               kv = a[i]; sk = substr(kv, 1, index(kv, "=") - 1)
               sec[i] = substr(sk, 1, index(sk, "/") - 1); key[i] = substr(sk, index(sk, "/") + 1)
               val[i] = substr(kv, index(kv, "=") + 1)}}
      function flush(   i) {for (i = 1; i <= n; i++) if (sec[i] == cur && !done[i]) {print key[i] " = " val[i]; done[i] = 1}}
      /^[ \t]*\[/ {flush(); cur = $0; gsub(/[][ \t]/, "", cur); print; next}
      index($0, "=") && $0 !~ /^[ \t]*[#;]/ {
        k = substr($0, 1, index($0, "=") - 1); gsub(/^[ \t]+|[ \t]+$/, "", k)
        for (i = 1; i <= n; i++) if (sec[i] == cur && key[i] == k) {print key[i] " = " val[i]; done[i] = 1; next}
      }
      {print}
      END {flush(); for (i = 1; i <= n; i++) if (!done[i]) {if (!(sec[i] in head)) print "[" sec[i] "]"; head[sec[i]] = 1; print key[i] " = " val[i]}}' "$src"
  } > "$dst"
}

# settings of every run on top of the sweep file's: the seeds, and QUICK's cut-down runs
run_sets() {
  local out=("grid/run.seed=1234..$((1233 + SEEDS))")
  for ((j = 1; j < ${#TRAIN_SET[@]}; j += 2)); do out+=("set/${TRAIN_SET[j]}"); done
  printf '%s\n' "${out[@]}"
}

# profile MODEL BUDGET: the base model's greedy and sampled evals at BUDGET (kept while they
# are newer than the model; each written under a temporary name and renamed when complete, so
# that an interrupted eval leaves nothing to keep); adds their paths to the array evals
profile() {
  local model=$1 budget=$2 stem kind
  stem=$PROFILES/$(basename "$model" .h5)_b$budget
  local env=(--set world.check_verdict=environment --set "world.max_new_tokens=$budget" --backend "$BACKEND")
  for kind in greedy sampled; do
    [ "${stem}_$kind.h5" -nt "$model" ] && continue
    if [ "$kind" = greedy ]; then
      say "profiling $model at a budget of $budget: greedy -> ${stem}_greedy.h5"
      "$BIN" eval --model "$model" "${env[@]}" "${GREEDY_LIMIT[@]}" --out "${stem}_greedy.h5.part" --overwrite \
        > "${stem}_greedy.txt"
    else
      say "profiling $model at a budget of $budget: temperature 1, $POOL training-pool questions, the failure profile -> ${stem}_sampled.h5"
      "$BIN" eval --model "$model" "${env[@]}" --temperature 1 --limit 1 --train-pool "$POOL" \
        --failure-profile experiments/base/pretrain.ini --out "${stem}_sampled.h5.part" --overwrite > "${stem}_sampled.txt"
    fi
    mv -f "${stem}_$kind.h5.part" "${stem}_$kind.h5"
  done
  evals+=("${stem}_greedy.h5" "${stem}_sampled.h5")
}

# base_model MODEL V: the base model of corpus.p_recover = V at MODEL (repro_base: kept if it
# was pretrained with experiments/base/pretrain.ini and that value, else pretrained)
base_model() {
  say "the base model of corpus.p_recover = $2: $1"
  local saved=("${PRETRAIN_SET[@]}")
  PRETRAIN_SET+=(--set "corpus.p_recover=$2")
  BASE=$1
  repro_base
  PRETRAIN_SET=("${saved[@]}")
}

repro_jobs $(( 2 * SEEDS ))
plots_ok=1
axes=()
[ "$AXIS" = all ] || [ "$AXIS" = recover ] && axes+=(recover)
[ "$AXIS" = all ] || [ "$AXIS" = budget ] && axes+=(budget)

# recover_value FILE: the value of corpus.p_recover of sweep file FILE (recover_*.ini): its
# base model, the base model's profile at the fig5 budget, its sweep; adds its out directory
# to the array dirs
recover_value() {
  local f=$1 v init out extra=() sweep
  v=$(ini_get "$f" set corpus.p_recover)
  init=$(ini_get "$f" set train.init)
  out=$(ini_get "$f" sweep out)
  [ -n "$v" ] && [ -n "$init" ] && [ -n "$out" ] ||
    { echo "$NAME: $f: expected [sweep] out, [set] corpus.p_recover and train.init" >&2; exit 2; }
  if [ "$QUICK" = 1 ]; then
    init=$MODELS/base_recover-$v.h5; out=$SWEEPS/recover-$v
    extra=("set/train.init=$init" "sweep/out=$out")
  fi
  base_model "$init" "$v"
  profile "$init" "$(ini_get experiments/fig5/grpo.ini world max_new_tokens)"
  sweep=$SWEEPS/$(basename "$f" .ini).sweep
  derive "$f" "$sweep" $(run_sets) "${extra[@]}"
  repro_sweep "$sweep"
  dirs+=("$out")
}

for axis in "${axes[@]}"; do
  dirs=(); evals=()
  if [ "$axis" = recover ]; then
    files=($(ls $EXP/recover_*.ini | sort -t_ -k2 -g))
    [ "$QUICK" = 1 ] && files=("${files[0]}" "${files[-1]}")   # the two ends of the axis
    for f in "${files[@]}"; do recover_value "$f"; done
    key=corpus.p_recover
  else
    # the fig5 budget, 300, is recover_0.ini's point (the default base model, the fig5
    # configs): its runs serve both axes; budget.ini adds the other budgets
    recover_value $EXP/recover_0.ini
    f=$EXP/budget.ini
    out=$(ini_get "$f" sweep out)
    init=$(ini_get "$f" set train.init)
    values=$(ini_get "$f" grid world.max_new_tokens)
    extra=()
    if [ "$QUICK" = 1 ]; then  # one more value, on the tiny base model of p_recover 0
      IFS=', ' read -r -a vs <<< "$values"
      values=${vs[0]}
      init=$MODELS/base_recover-0.h5; out=$SWEEPS/budget
      extra=("set/train.init=$init" "sweep/out=$out" "grid/world.max_new_tokens=$values")
    fi
    base_model "$init" 0
    IFS=', ' read -r -a vs <<< "$values"
    for b in "${vs[@]}"; do profile "$init" "$b"; done
    sweep=$SWEEPS/budget.sweep
    derive "$f" "$sweep" $(run_sets) "${extra[@]}"
    repro_sweep "$sweep"
    dirs+=("$out")
    key=world.max_new_tokens
  fi
  say "figure and table of the $axis axis -> $PLOTS/$axis.*"
  "$BIN" plot sensitivity --axis "$key" "${dirs[@]}" "${evals[@]}" -o "$PLOTS/$axis" || plots_ok=0
done

# the tables of both axes in one file (each axis's own is PLOTS/AXIS.md)
{
  echo "# The map of where the bias shows (make reproduce-sensitivity$([ "$QUICK" = 1 ] && echo " QUICK=1"))"
  for axis in recover budget; do
    if [ -f "$PLOTS/$axis.md" ]; then echo; cat "$PLOTS/$axis.md"; fi
  done
} > "$PLOTS/table.md"
if [ "$plots_ok" = 0 ]; then say "the runs are complete, but a figure or table failed (see above)"; exit 1; fi
say "done: $(for a in "${axes[@]}"; do printf '%s ' "$PLOTS/$a.{png,pdf,svg,md}"; done)and $PLOTS/table.md"
