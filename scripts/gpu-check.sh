#!/usr/bin/env bash
# make gpu-check: everything that needs a GPU, in one short run (docs/benchmarks.md):
# build with CUDA, CUDA-vs-CPU parity tests (every op, the whole model, generation, one RL
# update of the trainer), a short GPU pretraining, a short RL run of the fig5 GRPO config on
# the GPU done twice (same seed: are the two logs identical?) and once on the CPU, and
# benchmarks on both backends; a summary table is printed last.
# Writes its full log to build/gpu-check.log (and to $OUT/gpu-check.log when $OUT is set).
#
# GPU_CHECK_PREBUILT=DIR uses the binaries that `make gpu-bundle` packed (DIR/grpolab,
# DIR/tests/, DIR/lib/, DIR/base.h5) instead of building: for a GPU machine without the
# Debian packages and without a network (docs/benchmarks.md says how).
# GPU_CHECK_RL_STEPS (default 10) sets the RL run's length, GPU_CHECK_RL_BACKEND (default
# cuda) its backend; GPU_CHECK_TF32=0 skips the TF32 bench, GPU_CHECK_BENCH=0 every bench.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
LOG=build/gpu-check.log
exec > >(tee "$LOG" ${OUT:+"$OUT/gpu-check.log"}) 2>&1  # $OUT's copy survives a kill
declare -a ROWS
row() { ROWS+=("$(printf '| %-36s | %-6s | %s |' "$1" "$2" "$3")"); }
T0=$(date +%s)

PRE=${GPU_CHECK_PREBUILT:-}
if [ -n "$PRE" ]; then
  B=$PRE/grpolab TESTS=$PRE/tests BASE=$PRE/base.h5
else
  B=build/grpolab TESTS=build/tests BASE=data/models/base.h5
fi
STEPS=${GPU_CHECK_RL_STEPS:-10}
RLB=${GPU_CHECK_RL_BACKEND:-cuda}  # cpu tries the script's RL part on a machine without a GPU

echo "== device"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
else
  echo "nvidia-smi not found"
fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) threads"

if [ -n "$PRE" ]; then
  echo "== prebuilt binaries in $PRE (make gpu-bundle)"
  # the bundle's libraries where the machine has none of that name; CUDA's from the machine
  . scripts/gpu-env.sh
  if [ ! -x "$B" ]; then row "build" "FAIL" "$B missing"
  elif [ -n "$GPU_ENV_MISSING" ]; then row "build" "FAIL" "prebuilt; libraries not found: $GPU_ENV_MISSING"
  else row "build" "ok" "prebuilt by make gpu-bundle"; fi
else
  echo "== build (CUDA)"
  if make -j"$(nproc)" all && make -s $(basename -s .c tests/test_cuda_*.c tests/test_backend_ops.c | sed "s|^|$TESTS/|"); then
    row "build" "ok" "make all (nvcc $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
  else row "build" "FAIL" "make failed"; fi
fi
ver=$($B version 2>&1); echo "$ver"
if echo "$ver" | grep -q "cuda (built; device available)"; then
  row "CUDA device" "ok" "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
else
  row "CUDA device" "FAIL" "$(echo "$ver" | tail -1 | cut -c1-80)"
fi

run_test() {  # name, binary
  echo "== $1"
  local out rc
  out=$(timeout 120 "$2" 2>&1); rc=$?
  echo "$out"
  local passed skipped failed worst
  passed=$(echo "$out" | sed -n 's/.*PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  skipped=$(echo "$out" | sed -n 's/.*SKIPPED \] \([0-9]*\) test.*/\1/p' | tail -1)
  failed=$(echo "$out" | sed -n 's/.*FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  worst=$(echo "$out" | grep -o 'rel err [0-9.e+-]*' | awk '{print $3}' | sort -g | tail -1)
  local res; res=$([ $rc = 0 ] && [ -z "$skipped" ] && [ "${passed:-0}" -gt 0 ] && echo ok || echo FAIL)
  row "$1" "$res" "passed ${passed:-0}, failed ${failed:-0}, skipped ${skipped:-0}, rc $rc; worst rel err ${worst:-n/a}"
  # a failure on the GPU: the memory checker's first findings, in the same run
  if [ "$res" = FAIL ] && [ -z "$skipped" ] && command -v compute-sanitizer >/dev/null; then
    echo "== $1 under compute-sanitizer (memcheck)"
    timeout 90 compute-sanitizer --tool memcheck --print-limit 20 "$2" 2>&1 | grep -v '^\[ \|^  ' | head -80
  fi
}
run_test "every op against the plain reference (test_backend_ops)" $TESTS/test_backend_ops
run_test "op parity (test_cuda_parity)" $TESTS/test_cuda_parity
run_test "model parity (test_cuda_model)" $TESTS/test_cuda_model
run_test "RL step parity (test_cuda_train)" $TESTS/test_cuda_train

echo "== short GPU pretraining (experiments/base/pretrain.ini, 200 steps)"
t0=$(date +%s)
out=$(timeout 120 $B pretrain --config experiments/base/pretrain.ini --backend cuda \
      --set pretrain.steps=200 --set pretrain.warmup_steps=20 --set pretrain.log_every=50 \
      --out build/gpu-check-base.h5 --overwrite 2>&1); rc=$?
echo "$out"
last=$(echo "$out" | grep 'pretrain step' | tail -1)
row "GPU pretraining, 200 steps" "$([ $rc = 0 ] && echo ok || echo FAIL)" \
    "$(( $(date +%s) - t0 )) s; last: loss $(echo "$last" | awk '{print $5}'), $(echo "$last" | grep -o '[0-9]* tok/s')"

# Compares two run logs dataset by dataset (the wall-time columns *_seconds aside).
compare_logs() {
  if python3 -c 'import h5py, numpy' 2>/dev/null; then
    python3 - "$1" "$2" <<'EOF'
import sys, h5py, numpy as np
fa, fb = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
fa.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
same, differ = 0, []
for n in names:
    if n.endswith("_seconds"):
        continue
    if n not in fb:
        differ.append(n + " (missing)")
        continue
    a, b = fa[n][()], fb[n][()]
    eq = a.shape == b.shape and (np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f" else np.array_equal(a, b))
    if eq:
        same += 1
    else:
        differ.append(n)
print(f"{same} datasets identical, {len(differ)} differ" + (": " + ", ".join(differ[:6]) if differ else ""))
EOF
  elif command -v h5diff >/dev/null; then
    local ex=() d
    for d in /train/rollout_seconds /train/update_seconds; do ex+=(--exclude-path "$d"); done
    # the attributes start_time and writer_pid differ between any two runs
    local objs; objs=$(h5diff -c "${ex[@]}" "$1" "$2" 2>&1 | grep -E '^(dataset|attribute|group|datatype):|^Not comparable: <' \
                       | grep -v -E '<(start_time|writer_pid) of' | sed 's/ and .*//; s/ has rank.*//; s/ or .*//' | sort -u)
    if [ -z "$objs" ]; then echo "datasets identical (h5diff; attributes start_time and writer_pid aside)";
    else echo "$(echo "$objs" | wc -l) objects differ (h5diff): $(echo "$objs" | head -6 | tr '\n' ' ')"; fi
  else echo "not compared (neither python3 with h5py nor h5diff here)"; fi
}

rl_run() {  # time limit (s), backend, out, steps, eval_every, further options... -> the run's output
  local limit=$1 be=$2 out=$3 steps=$4 ev=$5; shift 5
  timeout "$limit" $B train --config experiments/fig5/grpo.ini --backend "$be" --set train.init="$BASE" \
    --set train.steps="$steps" --set train.eval_every="$ev" --set train.checkpoint_every=0 "$@" \
    --overwrite --out "$out" 2>&1
}
throughput() {  # a run's output -> its closing throughput figures
  sed -n 's/^train: [0-9]* steps: rollout \([0-9]*\) tokens\/s, update \([0-9]*\) tokens\/s.*, \([0-9.]*\) s\/step/rollout \1 tok\/s, update \2 tok\/s, \3 s\/step/p' <<<"$1"
}
if [ -f "$BASE" ]; then
  for r in a b; do
    echo "== RL run $r: experiments/fig5/grpo.ini on $RLB, $STEPS steps from $BASE (eval at 0 and $STEPS)"
    t0=$(date +%s); out=$(rl_run 150 "$RLB" build/gpu-check-rl-$r.h5 "$STEPS" "$STEPS"); echo "$out"
    secs=$(( $(date +%s) - t0 ))
    fin_line=$(echo "$out" | grep -c '^train: [0-9]* steps')
    thr=$(throughput "$out")
    fin=$(echo "$out" | grep '^train step' | tail -1 | awk '{print "reward", $5, "len", $7}')
    ev=$(echo "$out" | grep '^train: eval at step' | tail -1 | awk '{print "eval score", $7}')
    row "$RLB RL run $r ($STEPS steps, fig5 grpo)" "$([ "$fin_line" = 1 ] && echo ok || echo FAIL)" "$secs s in all (2 evals); $thr; last step $fin; $ev"
  done
  cmp=$(compare_logs build/gpu-check-rl-a.h5 build/gpu-check-rl-b.h5); echo "determinism: $cmp"
  row "$RLB determinism (run a vs run b)" "$(echo "$cmp" | grep -q ' 0 differ\|datasets identical' && echo ok || echo DIFF)" "$cmp"
  # 2 threads: on a VM's many vCPUs all of them made the CPU backend far slower than 2
  # (docs/benchmarks.md, "GPU")
  echo "== RL run on the CPU backend (2 threads), 3 steps, no eval"
  out=$(rl_run 120 cpu build/gpu-check-rl-cpu.h5 3 0 --set run.threads=2); echo "$out"
  thr=$(throughput "$out")
  row "CPU RL run (2 threads, 3 steps)" "$([ -n "$thr" ] && echo ok || echo FAIL)" "$thr"
else
  row "GPU RL run" "n/a" "no base model $BASE (pretrain it first)"
fi

bench_rows() {  # label, bench args...
  local label=$1; shift
  echo "== bench $label"
  local out; out=$(timeout 120 $B bench "$@" 2>&1); echo "$out"
  local sg tr dec
  sg=$(echo "$out" | sed -n 's/.*sgemm.* \([0-9.]*\) GFLOP\/s.*/\1/p' | head -1)
  tr=$(echo "$out" | sed -n 's/^ *\([0-9]*\) tokens\/s *\([0-9.]*\) GFLOP\/s.*/\1 tok\/s, \2 GFLOP\/s/p' | head -1)
  dec=$(echo "$out" | tail -1 | sed -n 's/^ *\([0-9]*\) tokens\/s.*/\1/p')
  row "bench $label: sgemm" "" "${sg:-?} GFLOP/s"
  row "bench $label: train step" "" "${tr:-?}"
  [ -n "$dec" ] && row "bench $label: KV decode" "" "$dec tok/s"
}
if [ "${GPU_CHECK_BENCH:-1}" = 1 ]; then
  bench_rows cuda --backend cuda
  [ "${GPU_CHECK_TF32:-1}" = 1 ] && bench_rows "cuda TF32" --backend cuda --set run.tf32=true
  bench_rows "cpu, 2 threads" --backend cpu --set run.threads=2
  [ "$(nproc)" -gt 2 ] && bench_rows "cpu, $(nproc) threads" --backend cpu
fi

echo
echo "== gpu-check summary ($(date -u +%Y-%m-%dT%H:%MZ), commit $($B version 2>/dev/null | sed -n 's/.*commit \([0-9a-z-]*\).*/\1/p' | head -1), $(( $(date +%s) - T0 )) s)"
printf '| %-36s | %-6s | %s |\n' "check" "result" "figures"
printf '|%s|%s|%s|\n' "--------------------------------------" "--------" "------------------------------"
for r in "${ROWS[@]}"; do echo "$r"; done
if printf '%s\n' "${ROWS[@]}" | grep -q "| FAIL"; then exit 1; fi
exit 0
