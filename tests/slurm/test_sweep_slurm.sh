#!/usr/bin/env bash
# tests/slurm/test_sweep_slurm.sh (`make test-slurm`): `grpolab sweep slurm --submit` against a
# real Slurm. Starts a single-node cluster on this machine as root: munged with a generated key,
# slurmctld and slurmd in the foreground (-D) in the background, with a generated slurm.conf
# (select/cons_tres, proctrack/linuxproc, task/none: no cgroups; NodeName=localhost CPUs=2;
# every state, spool, log and socket file in a temporary directory; free ports). Then:
#   1. a sweep of 2 presets x 2 seeds of a tiny train config (a random-init model from
#      `grpolab init`, 200 RL steps), its out directory named with a space and a quote, is
#      submitted as a job array (bounded waits);
#   2. while tasks 0 and 1 train (`sweep status` says so), task 0 is requeued (`scontrol
#      requeue`: SIGTERM, then Slurm starts it again) and task 1 gets SIGTERM (`scancel
#      --signal=TERM`): both checkpoint and stop; task 0 runs again and resumes its run;
#      then task 2 is killed while it trains (SIGKILL, as when its node dies);
#   3. `sweep status` then shows runs 1 and 2 resumable from their checkpoints (exit 3); the
#      array submitted again resumes them and keeps the 2 complete runs; status says 4 done
#      (exit 0);
#   4. the same sweep trained uninterrupted by `grpolab sweep run` gives the same logs,
#      dataset by dataset (h5diff; all but the wall-time columns), and the same summary
#      (both on one thread per run: the CPU's rounding depends on the thread count).
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

# ---- the sweep: 2 presets x 2 seeds of a tiny run, long enough (200 steps of 0.02-0.1 s,
# as the machine is loaded) to be stopped while it trains
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
steps = 200
prompts_per_step = 2
group_size = 4
minibatch_size = 4
eval_every = 100
checkpoint_every = 1
[eval]
limit = 4
batch = 16
EOF
"$BIN" init --config "$T/tiny.ini" --out "$T/tiny.h5" > /dev/null || { say "error: grpolab init failed"; exit 1; }
# the Slurm sweep's out directory has a space and a quote: sbatch reads its #SBATCH --output
# line with its own quoting
SOUT="$T/slurm out's"
for where in slurm local; do
  out_dir=$T/local
  [ "$where" = slurm ] && out_dir=$SOUT
  cat > "$T/$where.sweep" <<EOF
[sweep]
config = $T/tiny.ini
out = $out_dir
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

job_of() { sed -n 's/^sweep slurm: submitted job \([0-9][0-9]*\).*/\1/p'; }
wait_job() {  # wait_job ID: until it has left the queue, at most TIMEOUT seconds
  local waited=0
  while [ -n "$(squeue -h -j "$1" 2>/dev/null)" ] && [ "$waited" -lt "$TIMEOUT" ]; do
    sleep 1; waited=$((waited + 1))
    [ $((waited % 20)) = 0 ] && say "waiting for job $1: $(squeue -h -r -j "$1" -o '%i %T' | tr '\n' ' ')"
  done
  test -z "$(squeue -h -j "$1" 2>/dev/null)"
}
wait_ckpt() {  # wait_ckpt RUN: until its first checkpoint is there (the run is training)
  for _ in $(seq 300); do [ -f "$SOUT/$1.h5.ckpt.h5" ] && return 0; sleep 0.1; done
  return 1
}
run0=preset-grpo_seed-1234
run1=preset-grpo_seed-1235
run2=preset-dr_grpo_seed-1234

ts=$(date +%s)
out=$("$BIN" sweep slurm "$T/slurm.sweep" --submit 2>&1)
echo "$out"
JOB=$(echo "$out" | job_of)
check "sweep slurm --submit printed a job id" test -n "$JOB"
check "the batch script names the job array's 4 tasks" grep -q -- '--array=0-3$' "$SOUT/sweep.sbatch"
check "the batch script asks for SIGTERM before the time limit" grep -q -- '--signal=B:TERM@300$' "$SOUT/sweep.sbatch"
check "the batch script lets Slurm requeue a task" grep -q -- '^#SBATCH --requeue$' "$SOUT/sweep.sbatch"
# task 2 is held until tasks 0 and 1 have been stopped, so that it is still training when it
# is killed below: a tiny run would otherwise finish while the test handles tasks 0 and 1
[ -n "$JOB" ] && { scontrol hold "${JOB}_2" || say "could not hold task ${JOB}_2"; }

# while tasks 0 and 1 train: task 0 requeued (Slurm stops it with SIGTERM and starts it
# again), task 1 sent SIGTERM alone (it stops; the next submission resumes it)
if [ -n "$JOB" ] && wait_ckpt "$run0" && wait_ckpt "$run1"; then
  "$BIN" sweep status "$T/slurm.sweep" > "$T/status.running" 2>&1
  check "sweep status shows a training task as running" grep -q " $run1 *running " "$T/status.running"
  scontrol requeue "${JOB}_0"
  scancel --batch --signal=TERM "${JOB}_1"
  say "requeued task ${JOB}_0, sent SIGTERM to task ${JOB}_1"
  # Slurm holds a requeued job back for minutes (its begin time): started now instead
  for _ in $(seq 100); do
    [ "$(squeue -h -j "${JOB}_0" -o %T 2>/dev/null)" = PENDING ] && break; sleep 0.2
  done
  scontrol update JobId="${JOB}_0" StartTime=now || say "could not move task ${JOB}_0's start to now"
else
  check "tasks 0 and 1 started training (their first checkpoints)" false
fi
# task 2 killed without warning while it trains (SIGKILL: as when its node dies)
[ -n "$JOB" ] && { scontrol release "${JOB}_2" || say "could not release task ${JOB}_2"; }
if [ -n "$JOB" ] && wait_ckpt "$run2"; then
  scancel --batch --signal=KILL "${JOB}_2"
  say "sent SIGKILL to task ${JOB}_2"
else
  check "task 2 started training (its first checkpoint)" false
fi
[ -n "$JOB" ] && check "job array $JOB finished within ${TIMEOUT} s" wait_job "$JOB"
say "job array $JOB took $(( $(date +%s) - ts )) s from submission"
log0=$SOUT/logs/task-0.log
log1=$SOUT/logs/task-1.log
check "task 0 was stopped by the requeue's SIGTERM with a checkpoint" grep -q "stopped by signal 15" "$log0"
check "task 0 ran again and resumed its run" \
  test "$(grep -c "^sweep task 0/4 of 'tiny'" "$log0")" = 2 -a -n "$(grep "^sweep task 0/4 .*resumes from its checkpoint" "$log0")"
check "task 1 was stopped by SIGTERM with a checkpoint" grep -q "stopped by signal 15" "$log1"
check "task 3's log names its run" grep -q "^sweep task 3/4 of 'tiny'" "$SOUT/logs/task-3.log"
rc=0
"$BIN" sweep status "$T/slurm.sweep" > "$T/status.stopped" 2>&1 || rc=$?
cat "$T/status.stopped"
check "sweep status: runs 1 and 2 resumable from their checkpoints, exit 3" \
  test "$rc" = 3 -a -n "$(grep " $run1 *resumable *checkpoint at step [1-9][0-9]* of 200" "$T/status.stopped")" \
       -a -n "$(grep " $run2 *resumable *checkpoint at step [1-9][0-9]* of 200" "$T/status.stopped")"
check "sweep status: the other 2 runs done" grep -q "4 runs: 2 done, 2 resumable" "$T/status.stopped"

# submitted again: tasks 1 and 2 resume their runs, the others keep theirs
out=$("$BIN" sweep slurm "$T/slurm.sweep" --submit 2>&1)
JOB=$(echo "$out" | job_of)
[ -n "$JOB" ] && check "the resubmitted array finished" wait_job "$JOB"
check "resubmitted, task 1 resumes its run" grep -q "^sweep task 1/4 .*resumes from its checkpoint" "$log1"
check "resubmitted, task 2 resumes its killed run" \
  grep -q "^sweep task 2/4 .*resumes from its checkpoint" "$SOUT/logs/task-2.log"
check "resubmitted, tasks 0 and 3 keep their complete runs" \
  test "$(cat "$SOUT"/logs/task-[03].log | grep -c 'complete (kept)')" = 2
rc=0
"$BIN" sweep status "$T/slurm.sweep" > "$T/status.done" 2>&1 || rc=$?
check "sweep status: 4 done, exit 0" test "$rc" = 0 -a -n "$(grep "4 runs: 4 done" "$T/status.done")"
check "every run's log is complete (summary --check)" "$BIN" summary --check "$SOUT"

ts=$(date +%s)
"$BIN" sweep run "$T/local.sweep" --jobs 2 --threads 1 > "$T/local.out" 2>&1
check "sweep run of the same sweep" grep -q "4 trained, 0 kept, 0 failed" "$T/local.out"
say "sweep run --jobs 2 took $(( $(date +%s) - ts )) s"
# every dataset of every log equal (h5diff), but the wall-time columns (their doc says so)
same_log() {
  local a=$1 b=$2 ds list_a list_b
  list_a=$(h5ls -r "$a" | awk '$2 == "Dataset" {print $1}')
  list_b=$(h5ls -r "$b" | awk '$2 == "Dataset" {print $1}')
  [ -n "$list_a" ] && [ "$list_a" = "$list_b" ] || { say "$a and $b hold other datasets"; return 1; }
  for ds in $list_a; do
    h5dump -A -d "$ds" "$a" | grep -q '"wall time' && continue
    h5diff -q "$a" "$b" "$ds" "$ds" > /dev/null || { say "$ds differs: $a vs $b"; return 1; }
  done
}
for r in "$run0" "$run1" preset-dr_grpo_seed-1234 preset-dr_grpo_seed-1235; do
  check "$r: the log of the interrupted Slurm sweep equals sweep run's (h5diff)" same_log "$SOUT/$r.h5" "$T/local/$r.h5"
done
"$BIN" summary "$SOUT" > "$T/summary.slurm" 2>&1
"$BIN" summary "$T/local" > "$T/summary.local" 2>&1
check "the summary of the Slurm runs equals that of sweep run" diff "$T/summary.slurm" "$T/summary.local"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
