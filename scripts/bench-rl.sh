#!/usr/bin/env bash
# `make bench-rl`: the RL step of a train config in grpolab and, alternating in the same run,
# its PyTorch peer (scripts/bench_rl_torch.py) and with PEER=trl also TRL's GRPOTrainer
# (scripts/bench_rl_trl.py); then the table of docs/benchmarks.md "The RL step side by side".
# Settings (environment): BIN (build/grpolab), CONFIG (experiments/fig5/grpo.ini),
# MODES ("forced own"), ROUNDS (2: pairs per mode), STEPS (2 timed steps after 1 warm-up),
# THREADS (2), PEER (torch | trl | none: trl also runs torch), PEER_PY (the Python of the peers:
# `make bench-rl` gives the virtualenv of PyPI's newest torch, TRL and transformers), SET (extra --set k=v ...),
# OUT (folder for the logs and lengths, build/bench-rl), INIT (a checkpoint for --init;
# default: train.init if that file exists, else a fresh model).
set -eu
BIN=${BIN:-build/grpolab}
CONFIG=${CONFIG:-experiments/fig5/grpo.ini}
MODES=${MODES:-forced own}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-2}
THREADS=${THREADS:-2}
PEER=${PEER:-torch}
PEER_PY=${PEER_PY:-/usr/bin/python3}
OUT=${OUT:-build/bench-rl}
mkdir -p "$OUT"
# every implementation waits the way grpolab does by default (src/sim/io/libenv.h): PyTorch's
# OpenMP threads spin like grpolab's would, and on a shared machine that decides the figures
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# and with the OpenBLAS kernels grpolab runs: where OpenBLAS does not know this CPU, grpolab
# names the kernels its features allow (src/sim/io/libenv.h), and PyTorch's products run through
# OpenBLAS too with Debian's python3-torch (PEER_PY=/usr/bin/python3; PyPI's torch brings its own
# BLAS kernels)
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  core=$("$BIN" version | sed -n 's/^blas kernels: \([^ ]*\) (named by grpolab.*/\1/p')
  if [ -n "$core" ]; then export OPENBLAS_CORETYPE=$core; echo "bench-rl: OPENBLAS_CORETYPE=$core for every implementation"; fi
fi
sets=(--set "run.threads=$THREADS")
for kv in ${SET:-}; do sets+=(--set "$kv"); done
results="$OUT/results.txt"
: > "$results"
for mode in $MODES; do
  flag=""; [ "$mode" = forced ] && flag=--forced
  for round in $(seq 1 "$ROUNDS"); do
    echo "== $mode, round $round: grpolab"
    "$BIN" bench-rl --config "$CONFIG" ${INIT:+--init "$INIT"} $flag --steps "$STEPS" --warmup 1 "${sets[@]}" \
      --lengths-out "$OUT/lengths-$mode.txt" | tee "$OUT/grpolab-$mode-$round.log"
    grep '^RESULT' "$OUT/grpolab-$mode-$round.log" | sed "s/\$/ round=$round/" >> "$results"
    if [ "$PEER" != none ]; then
      echo "== $mode, round $round: PyTorch"
      # the same step's config with the command line's --set applied (micro_batch, budget, P)
      "$PEER_PY" scripts/bench_rl_torch.py --config "$CONFIG" $flag --threads "$THREADS" \
        --lengths "$OUT/lengths-$mode.txt" --set ${SET:-} | tee "$OUT/torch-$mode-$round.log"
      grep '^RESULT' "$OUT/torch-$mode-$round.log" | sed "s/\$/ round=$round/" >> "$results"
    fi
    if [ "$PEER" = trl ]; then
      echo "== $mode, round $round: TRL GRPOTrainer"
      if "$PEER_PY" scripts/bench_rl_trl.py --config "$CONFIG" $flag \
           --threads "$THREADS" --lengths "$OUT/lengths-$mode.txt" --set ${SET:-} \
           > "$OUT/trl-$mode-$round.log" 2>&1; then
        grep '^RESULT' "$OUT/trl-$mode-$round.log" | sed "s/\$/ round=$round/" >> "$results"
      else
        echo "bench-rl: TRL failed, see $OUT/trl-$mode-$round.log:"; tail -5 "$OUT/trl-$mode-$round.log"
      fi
    fi
  done
done
/usr/bin/python3 scripts/bench_rl_report.py "$results"
