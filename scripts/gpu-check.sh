#!/usr/bin/env bash
# make gpu-check: everything that needs a GPU, in one short run (a few minutes on an H100/H200):
# build with CUDA, CUDA-vs-CPU parity tests (every op, the whole model, generation, one RL
# update of the trainer), a short GPU training run, and benchmarks on both backends; a
# summary table is printed last.
# Writes its full log to build/gpu-check.log (and to $OUT/gpu-check.log when $OUT is set).
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=build/gpu-check.log
mkdir -p build
exec > >(tee "$LOG") 2>&1
declare -a ROWS
row() { ROWS+=("$(printf '| %-34s | %-10s | %s |' "$1" "$2" "$3")"); }

echo "== device"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
else
  echo "nvidia-smi not found"
fi

echo "== build (CUDA)"
if ! make -j"$(nproc)" all; then row "build" "FAIL" "make failed"; fi
B=build/grpolab
if ! $B version | tee /dev/stderr | grep -q "device available"; then
  row "CUDA device" "FAIL" "$($B version | tail -1)"
else
  row "CUDA device" "ok" "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
fi

run_test() {  # name, binary
  echo "== $1"
  make -s "$2" >/dev/null
  local out; out=$("$2" 2>&1); local rc=$?
  echo "$out"
  local passed skipped failed
  passed=$(echo "$out" | sed -n 's/.*PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  skipped=$(echo "$out" | sed -n 's/.*SKIPPED \] \([0-9]*\) test.*/\1/p' | tail -1)
  failed=$(echo "$out" | sed -n 's/.*FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  local worst; worst=$(echo "$out" | sed -n 's/.*rel err \([0-9.e+-]*\).*/\1/p' | sort -g | tail -1)
  row "$1" "$([ $rc = 0 ] && [ -z "$skipped" ] && echo ok || echo FAIL)" \
      "passed ${passed:-0}, failed ${failed:-0}, skipped ${skipped:-0}; worst rel err ${worst:-n/a}"
}
run_test "op parity (test_cuda_parity)" build/tests/test_cuda_parity
run_test "model parity (test_cuda_model)" build/tests/test_cuda_model
run_test "RL step parity (test_cuda_train)" build/tests/test_cuda_train

echo "== short GPU training run"
if $B pretrain --help >/dev/null 2>&1; then
  t0=$(date +%s)
  if $B pretrain --config experiments/base/pretrain.ini --backend cuda \
       --set pretrain.steps=60 --set pretrain.log_every=10 --out build/gpu-check-base.h5; then
    row "GPU pretraining, 60 steps" "ok" "$(( $(date +%s) - t0 )) s"
  else
    row "GPU pretraining, 60 steps" "FAIL" "see log"
  fi
else
  row "GPU training run" "n/a" "no pretrain command in this build"
fi

for be in cuda cpu; do
  echo "== bench ($be)"
  out=$($B bench --backend $be 2>&1); echo "$out"
  sg=$(echo "$out" | sed -n 's/.*sgemm.* \([0-9.]*\) GFLOP\/s/\1/p')
  tr=$(echo "$out" | sed -n 's/^ *\([0-9]*\) tokens\/s *\([0-9.]*\) GFLOP\/s.*/\1 tok\/s, \2 GFLOP\/s/p')
  dec=$(echo "$out" | tail -1 | sed -n 's/^ *\([0-9]*\) tokens\/s.*/\1/p')
  row "bench $be: sgemm GFLOP/s" "" "$sg"
  row "bench $be: train step" "" "$tr"
  row "bench $be: KV decode tokens/s" "" "$dec"
done
if [ "${GPU_CHECK_TF32:-1}" = 1 ]; then
  out=$($B bench --backend cuda --set run.tf32=true 2>&1); echo "$out"
  row "bench cuda TF32: train step" "" "$(echo "$out" | sed -n 's/^ *\([0-9]*\) tokens\/s *\([0-9.]*\) GFLOP\/s.*/\1 tok\/s, \2 GFLOP\/s/p')"
fi

echo
echo "== gpu-check summary ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null))"
printf '| %-34s | %-10s | %s |\n' "check" "result" "figures"
printf '|%s|%s|%s|\n' "------------------------------------" "------------" "------------------------------"
for r in "${ROWS[@]}"; do echo "$r"; done
[ -n "${OUT:-}" ] && cp "$LOG" "$OUT/gpu-check.log"
if printf '%s\n' "${ROWS[@]}" | grep -q "| FAIL"; then exit 1; fi
exit 0
