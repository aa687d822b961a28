# Sourced by reproduce-fig5.sh, reproduce-fig6.sh, reproduce-fig7.sh and reproduce-ablation.sh:
# the steps the reproductions share.
# The caller sets NAME (its name in messages), SEEDS, QUICK, BACKEND, JOBS and BIN (their
# defaults are the caller's), then calls, in this order:
#   repro_check_args          refuses a SEEDS, JOBS or QUICK that is not one, a missing BIN,
#                             and SET without TAG (SET's runs must not mix with the default ones)
#   repro_paths               BASE, RUNS, PLOTS from QUICK and TAG (scripts/fig5-paths.sh)
#   repro_base                the base model: kept if it was pretrained with the config it would
#                             be pretrained with now, else the script stops; pretrained if missing
#                             (QUICK=1: the smoke base model, PRETRAIN_SET)
#   repro_jobs N              JOBS=auto resolved: 1 on a GPU (two runs side by side are slower
#                             there than one after the other), else min(nproc, N) for N runs
#   repro_sweep FILE          every run of the sweep file that exists must have been made with
#                             the config it would be trained with now (`grpolab sweep plan`),
#                             else the script stops before training; then `grpolab sweep run`
#                             (the two halves: repro_sweep_check FILE, then repro_sweep_train
#                             JOBS THREADS FILE...: THREADS empty for nproc/JOBS; several FILEs
#                             share one queue of JOBS places, for a caller with several sweeps)
#   repro_pretrain CONFIG OUT WHAT [--set K=V]...  repro_base's step for any model (the
#                             stages of reproduce-fig7's chain): kept if pretrained with CONFIG
#                             and the settings (and, for a continued stage, from the model now
#                             at its pretrain.init), else the script stops; pretrained if missing
#   repro_quick_train_set     TRAIN_SET: the RL settings of reproduce-fig5's smoke version
#                             (QUICK=1; empty otherwise), which reproduce-ablation's builds on
#   repro_set_lines           the settings of the array TRAIN_SET (--set k=v pairs) as a sweep
#                             file's [set] lines, a key given twice with its last value, and
#                             train.init = BASE unless TRAIN_SET sets it
# and `say MESSAGE` prints a line with the seconds since repro_check_args.

say() { echo "$NAME [$(( $(date +%s) - t0 ))s]: $*"; }

repro_check_args() {
  if ! [[ "$SEEDS" =~ ^[1-9][0-9]*$ ]]; then
    echo "$NAME: SEEDS='$SEEDS': expected a positive integer" >&2; exit 2
  fi
  if [ "$JOBS" != auto ] && ! [[ "$JOBS" =~ ^[1-9][0-9]*$ ]]; then
    echo "$NAME: JOBS='$JOBS': expected a positive integer or auto" >&2; exit 2
  fi
  if [ "$QUICK" != 0 ] && [ "$QUICK" != 1 ]; then
    echo "$NAME: QUICK='$QUICK': expected 0 or 1" >&2; exit 2
  fi
  [ -x "$BIN" ] || { echo "$NAME: $BIN not found: run make first" >&2; exit 2; }
  SET=${SET:-}
  if [ -n "$SET" ] && [ -z "${TAG:-}" ]; then
    echo "$NAME: SET='$SET' changes the runs: give TAG=name too (its runs and figures go to directories of that name: scripts/fig5-paths.sh)" >&2; exit 2
  fi
  t0=$(date +%s)
}

repro_paths() {
  . scripts/fig5-paths.sh
  # the smoke version's base model sees only level-1 questions (one operation), which 900
  # steps teach well enough to answer about one in six of them at temperature 1 (levels 2-5
  # take the full pretraining)
  PRETRAIN_SET=()
  if [ "$QUICK" = 1 ]; then
    PRETRAIN_SET=(--set pretrain.steps=900 --set pretrain.warmup_steps=20 --set pretrain.log_every=100)
    for l in 2 3 4 5; do PRETRAIN_SET+=(--set "corpus.weight_level$l=0"); done
  fi
}

repro_base() {
  local what="the base model"
  [ "$QUICK" = 1 ] && what="the smoke base model (900 steps of level-1 questions)"
  repro_pretrain experiments/base/pretrain.ini "$BASE" "$what" "${PRETRAIN_SET[@]}"
}

repro_pretrain() {
  local config=$1 out=$2 what=$3 rc=0 msg
  shift 3
  mkdir -p "$(dirname "$out")"
  if [ -f "$out" ]; then
    # reused only if it was pretrained with the config it would be pretrained with now
    msg=$("$BIN" config --print "$config" "$@" --against-model "$out" 2>&1) || rc=$?
    if [ "$rc" -ne 0 ]; then
      say "$msg"
      say "stopping before training: delete or move $out to pretrain it again with the current config (nothing was changed)"
      exit 1
    fi
    say "$what $out exists and matches $config (delete it to pretrain again)"
  else
    say "pretraining $what -> $out ($config; its time on a CPU and a GPU: docs/benchmarks.md)"
    # an interrupted pretraining goes on from its checkpoint (pretrain --resume)
    [ -f "$out.ckpt.h5" ] && say "an interrupted pretraining goes on from $out.ckpt.h5 (delete it to start again)"
    "$BIN" pretrain --config "$config" "$@" --out "$out" --backend "$BACKEND" --resume || rc=$?
    if [ "$rc" -ne 0 ]; then
      [ "$rc" -gt 128 ] && exit "$rc"  # stopped by a signal: the same make target again goes on
      say "stopping: the pretraining of $out failed (above)"; exit 1
    fi
  fi
}

repro_jobs() {
  [ "$JOBS" = auto ] || return 0
  if [ "$BACKEND" = cuda ] ||
     { [ "$BACKEND" = auto ] && "$BIN" version | grep -q '^backends: .*cuda (built; device available)'; }; then
    JOBS=1
  else
    JOBS=$(( $1 < $(nproc) ? $1 : $(nproc) ))
  fi
  say "JOBS=auto: $JOBS run(s) at a time"
}

repro_sweep() {
  repro_sweep_check "$1"
  repro_sweep_train "$JOBS" "" "$1"
}

repro_sweep_check() {
  local sweep=$1 rc=0 plan msg
  plan=$("$BIN" sweep plan "$sweep" 2>&1) || rc=$?
  if [ "$rc" = 1 ]; then
    # the plan's line under each refused run: the log, the keys that differ, stored vs now
    while IFS= read -r msg; do say "$msg"; done < <(printf '%s\n' "$plan" | awk '/\[REFUSED\]$/ {getline; sub(/^ +/, ""); print}')
    say "stopping before training: delete or move the runs above to train them again with the current config (nothing was changed)"
    exit 1
  elif [ "$rc" != 0 ]; then
    printf '%s\n' "$plan" >&2
    say "stopping: $sweep is refused (above)"
    exit 2
  fi
  # the runs a raised train.steps extends: "NAME ... [extends ...: from step K to N]"
  while IFS= read -r msg; do say "$msg"; done < <(printf '%s\n' "$plan" |
    sed -n 's/^ *[0-9][0-9]*  *\([^ ]*\) .*\[extends from its last step (train.steps raised): \(from step .*\)\]$/\1 extends \2 (train.steps raised)/p')
}

repro_sweep_train() {
  local jobs=$1 rc=0 threads=()
  [ -n "$2" ] && threads=(--threads "$2")
  shift 2
  "$BIN" sweep run "$@" --jobs "$jobs" "${threads[@]}" --backend "$BACKEND" || rc=$?
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -gt 128 ] && exit "$rc"  # stopped by a signal: the make target again continues
    say "stopping: a run of $* failed"; exit 1
  fi
}

repro_quick_train_set() {
  TRAIN_SET=()
  [ "$QUICK" = 1 ] || return 0
  # the same configs, cut down. RL trains on level 1 only, as the smoke base model was
  # pretrained (repro_paths), so most groups are mixed and the updates are not zero.
  TRAIN_SET=(--set train.steps=12 --set train.prompts_per_step=4 --set train.minibatch_size=16
             --set train.eval_every=6 --set train.checkpoint_every=6 --set eval.limit=8)
  for l in 2 3 4 5; do TRAIN_SET+=(--set "train.weight_level$l=0"); done
}

repro_set_lines() {
  local -A val=()
  local keys=() j kv k
  for ((j = 1; j < ${#TRAIN_SET[@]}; j += 2)); do
    kv=${TRAIN_SET[j]}
    [ -n "${val[${kv%%=*}]+x}" ] || keys+=("${kv%%=*}")
    val[${kv%%=*}]=${kv#*=}
  done
  [ -n "${val[train.init]+x}" ] || echo "train.init = $BASE"
  for k in "${keys[@]}"; do echo "$k = ${val[$k]}"; done
}
