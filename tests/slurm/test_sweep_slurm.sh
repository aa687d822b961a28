#!/usr/bin/env bash
# tests/slurm/test_sweep_slurm.sh (`make test-slurm`): `grpolab sweep slurm --submit` against a
# real Slurm. Starts a single-node cluster on this machine as root: munged with a generated key,
# slurmctld and slurmd in the foreground (-D) in the background, with a generated slurm.conf
# (select/cons_tres, proctrack/linuxproc, task/none: no cgroups; NodeName=localhost CPUs=2;
# every state, spool, log and socket file in a temporary directory; free ports). Then:
#   1. a sweep of 2 presets x 2 seeds of a tiny train config (a random-init model from
#      `grpolab init`, 3 RL steps) is submitted as a job array and waited for (bounded);
#   2. every task completed (jobcomp), every run's log is complete (`summary --check`), a
#      log per task exists and names its run;
#   3. the same sweep trained with `grpolab sweep run` gives the same `grpolab summary`
#      (both on one thread per run: the CPU's rounding depends on the thread count);
#   4. the array submitted again keeps every run (resumable tasks).
# The daemons are stopped on every exit (trap). Skips, saying why, only where the daemons
# cannot start (not root, Slurm or munge not installed, a daemon that does not come up).
# Environment: GRPOLAB_BIN (default build/grpolab), SLURM_TEST_TIMEOUT seconds for the array
# (default 300), KEEP=1 keeps the temporary directory. Last line: "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
BIN=$(realpath "${GRPOLAB_BIN:-build/grpolab}")
TIMEOUT=${SLURM_TEST_TIMEOUT:-300}
t0=$(date +%s)
say() { echo "test_sweep_slurm [$(( $(date +%s) - t0 ))s]: $*"; }
passed=0
failed=0
check() {  # check "what" command...: one line per check
  local what=$1; shift
  if "$@"; then passed=$((passed + 1)); say "ok: $what"; else failed=$((failed + 1)); say "FAILED: $what"; fi
}
skip() {
  say "SKIP: $*"
  echo "0 passed, 0 failed"
  exit 0
}

[ -x "$BIN" ] || { say "error: $BIN not found: run make first"; echo "0 passed, 1 failed"; exit 1; }
[ "$(id -u)" = 0 ] || skip "the test cluster's daemons run as root (slurmd starts jobs as their user); this is uid $(id -u)"
for d in munged slurmctld slurmd sbatch squeue sinfo scancel; do
  command -v "$d" >/dev/null 2>&1 || skip "'$d' is not installed (scripts/deps.sh --slurm installs slurm-wlm and munge)"
done

T=$(mktemp -d /tmp/grpolab-slurm-XXXXXX)
PIDS=()
cleanup() {
  if [ -n "${SLURM_CONF:-}" ] && [ -f "$T/slurmctld.started" ]; then
    scancel --quiet --full "${JOB:-0}" 2>/dev/null
  fi
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  if [ "${KEEP:-0}" = 1 ]; then say "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the cluster
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
CTLD_PORT=0
for _ in $(seq 50); do
  p=$((20000 + RANDOM % 30000))
  if port_free "$p" && port_free $((p + 1)); then CTLD_PORT=$p; break; fi
done
[ "$CTLD_PORT" != 0 ] || skip "no two free neighbouring TCP ports found for slurmctld and slurmd"
mkdir -p "$T/state" "$T/spool"
dd if=/dev/urandom of="$T/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$T/munge.key"
munged -F -f --key-file="$T/munge.key" --socket="$T/munge.sock" --pid-file="$T/munged.pid" \
  --log-file="$T/munged.log" --seed-file="$T/munged.seed" > "$T/munged.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$T/munge.sock" ] && break; sleep 0.1; done
[ -S "$T/munge.sock" ] || skip "munged did not start: $(tail -n 3 "$T/munged.out" | tr '\n' ' ')"

cat > "$T/slurm.conf" <<EOF
ClusterName=grpolabtest
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((CTLD_PORT + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge.sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$T/jobcomp.txt
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$T/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" > "$T/slurmctld.out" 2>&1 &
CTLD_PID=$!
PIDS+=($CTLD_PID)
touch "$T/slurmctld.started"
slurmd -D -N localhost -f "$SLURM_CONF" > "$T/slurmd.out" 2>&1 &
SLURMD_PID=$!
PIDS+=($SLURMD_PID)
state=""
for _ in $(seq 60); do
  state=$(sinfo -h -n localhost -o %T 2>/dev/null)
  [ "$state" = idle ] && break
  kill -0 "$CTLD_PID" 2>/dev/null && kill -0 "$SLURMD_PID" 2>/dev/null || break
  sleep 0.5
done
if [ "$state" != idle ]; then
  # the daemon's last words, without the notes every fresh start prints (no PMIx, no state yet)
  last() { grep -h -v -e pmix -e PMIx -e 'state file' -e 'NOTE:' "$T/$1.out" "$T/$1.log" 2>/dev/null | tail -n 2 | tr '\n' ' '; }
  why="node state '${state:-no answer}'"
  kill -0 "$CTLD_PID" 2>/dev/null || why="slurmctld exited: $(last slurmctld)"
  kill -0 "$SLURMD_PID" 2>/dev/null || why="$why; slurmd exited: $(last slurmd)"
  skip "the Slurm daemons did not come up: $why"
fi
say "single-node Slurm up: slurmctld on port $CTLD_PORT, slurmd, munged; files in $T"

# ---- the sweep: 2 presets x 2 seeds of a tiny run
cat > "$T/tiny.ini" <<EOF
[run]
backend = cpu
[model]
vocab_size = 58
d_model = 32
n_layers = 1
n_heads = 2
n_kv_heads = 1
d_ff = 64
max_seq_len = 96
[world]
max_new_tokens = 24
[train]
init = $T/tiny.h5
steps = 3
prompts_per_step = 2
group_size = 4
minibatch_size = 4
eval_every = 3
checkpoint_every = 1
[eval]
limit = 4
batch = 16
EOF
"$BIN" init --config "$T/tiny.ini" --out "$T/tiny.h5" > /dev/null || { say "error: grpolab init failed"; exit 1; }
for where in slurm local; do
  cat > "$T/$where.sweep" <<EOF
[sweep]
config = $T/tiny.ini
out = $T/$where
name = tiny
[grid]
objective.preset = grpo, dr_grpo
run.seed = 1234..1235
[slurm]
partition = debug
time = 00:10:00
cpus = 1
EOF
done

ts=$(date +%s)
out=$("$BIN" sweep slurm "$T/slurm.sweep" --submit 2>&1)
echo "$out"
JOB=$(echo "$out" | sed -n 's/^sweep slurm: submitted job \([0-9][0-9]*\).*/\1/p')
check "sweep slurm --submit printed a job id" test -n "$JOB"
check "the batch script names the job array's 4 tasks" grep -q -- '--array=0-3$' "$T/slurm/sweep.sbatch"
if [ -n "$JOB" ]; then
  waited=0
  while [ -n "$(squeue -h -j "$JOB" 2>/dev/null)" ] && [ "$waited" -lt "$TIMEOUT" ]; do
    sleep 2; waited=$((waited + 2))
    [ $((waited % 20)) = 0 ] && say "waiting for job $JOB: $(squeue -h -j "$JOB" -o '%i %T' | tr '\n' ' ')"
  done
  check "job array $JOB finished within ${TIMEOUT} s" test -z "$(squeue -h -j "$JOB" 2>/dev/null)"
  say "job array $JOB took $(( $(date +%s) - ts )) s from submission"
fi
check "4 tasks completed with exit code 0 (jobcomp)" \
  test "$(grep -c "ArrayJobId=${JOB:-x} .*" "$T/jobcomp.txt" 2>/dev/null)" = 4 -a \
       "$(grep "ArrayJobId=${JOB:-x} " "$T/jobcomp.txt" 2>/dev/null | grep -c 'JobState=COMPLETED.*ExitCode=0:0')" = 4
for i in 0 1 2 3; do
  check "task $i's log names its run" grep -q "^sweep task $i/4 of 'tiny'" "$T/slurm/logs/task-$i.log"
done
check "every run's log is complete (summary --check)" "$BIN" summary --check "$T/slurm"

ts=$(date +%s)
"$BIN" sweep run "$T/local.sweep" --jobs 2 --threads 1 > "$T/local.out" 2>&1
check "sweep run of the same sweep" grep -q "4 trained, 0 kept, 0 failed" "$T/local.out"
say "sweep run --jobs 2 took $(( $(date +%s) - ts )) s"
"$BIN" summary "$T/slurm" > "$T/summary.slurm" 2>&1
"$BIN" summary "$T/local" > "$T/summary.local" 2>&1
check "the summary of the Slurm runs equals that of sweep run" diff "$T/summary.slurm" "$T/summary.local"
check "the summary has a line per run" test "$(grep -c '^preset-' "$T/summary.slurm")" -ge 4

# resubmitted, every task keeps its complete run
out=$("$BIN" sweep slurm "$T/slurm.sweep" --submit 2>&1)
JOB=$(echo "$out" | sed -n 's/^sweep slurm: submitted job \([0-9][0-9]*\).*/\1/p')
waited=0
while [ -n "$JOB" ] && [ -n "$(squeue -h -j "$JOB" 2>/dev/null)" ] && [ "$waited" -lt "$TIMEOUT" ]; do
  sleep 1; waited=$((waited + 1))
done
check "resubmitted, all 4 tasks keep their complete runs" \
  test "$(cat "$T"/slurm/logs/task-*.log 2>/dev/null | grep -c 'complete (kept)')" = 4

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
