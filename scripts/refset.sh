#!/usr/bin/env bash
# The reference set of a structure change (issue 52): the run logs and checkpoints a binary
# writes for a fixed set of small runs, made once before the change and once after it, and
# compared file by file. A change that only moves code must leave every file identical.
#
# Usage:
#   scripts/refset.sh make DIR [GRPOLAB]   writes the set into DIR with the binary GRPOLAB
#                                          (default build/grpolab); JOBS=N trains N runs at a
#                                          time (each on one thread: the files do not depend
#                                          on N). A make that stopped goes on where it was: a
#                                          DIR begun by the same binary keeps its finished files
#   scripts/refset.sh compare DIR_A DIR_B  compares every .h5 file of the two sets (h5diff);
#                                          one line per file, exit 0 only if all are identical
#
# The set, all on the CPU backend and one thread (run.threads=1: the products round otherwise
# on another count of threads, docs/kernels.md "Determinism"), a few minutes on one core:
#   base.h5                   the QUICK pretraining of `make reproduce-fig5 QUICK=1`
#                             (experiments/base/pretrain.ini with repro_paths' PRETRAIN_SET,
#                             scripts/reproduce-common.sh)
#   fig5_{grpo,dr_grpo}_s1234.h5 (+ .ckpt.h5)
#                             the QUICK fig5 pair from base.h5: experiments/fig5/grpo.ini with
#                             repro_quick_train_set's TRAIN_SET, run.seed 1234
#   preset_NAME.h5 (+ .ckpt.h5)
#                             five steps of every preset of `grpolab objective --list` from
#                             base.h5 with the QUICK settings, a greedy eval at steps 0 and 5
#                             and a checkpoint at step 5
# Every path a run stores (train.init, the log's name) is relative to DIR, so that two sets in
# two folders store the same config text. DIR/logs/ holds the binary's output, DIR/done the
# runs that finished, DIR/binary the binary's path and DIR/version.txt its `grpolab version`.
#
# What compare does not compare, and why (everything else must be equal, bit for bit):
#   datasets   /train/rollout_seconds, /train/update_seconds
#                the wall-time columns of the train log (src/sim/io/logschema.c, "wall time")
#   root attributes (of every file: run logs, checkpoints and base.h5)
#     grpolab_commit, grpolab_version   the binary that wrote the file
#     start_time                        when the run started (clock time)
#     run_id                            a run's id is drawn from the clock, pid and host
#     writer_host, writer_pid           the process writing a log (present while it writes)
# An attribute of another name, or of another object than the root, is compared, and one
# that only one of the two files has is a difference ("attribute NAME of OBJECT only in the
# first/second").
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

SKIP_DATASETS=(/train/rollout_seconds /train/update_seconds)
SKIP_ROOT_ATTRS=(grpolab_commit grpolab_version start_time run_id writer_host writer_pid)

usage() {
  echo "usage: scripts/refset.sh make DIR [GRPOLAB] | scripts/refset.sh compare DIR_A DIR_B" >&2
  exit 2
}

cmd_make() {
  local dir=$1 bin=${2:-$ROOT/build/grpolab} jobs=${JOBS:-1}
  [ -x "$bin" ] || { echo "refset: $bin: not an executable (run make first)" >&2; exit 2; }
  [[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "refset: JOBS='$jobs': expected a positive integer" >&2; exit 2; }
  bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
  mkdir -p "$dir/logs"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/binary" ] && [ "$(cat "$dir/binary")" != "$bin" ]; then
    echo "refset: $dir was begun with $(cat "$dir/binary"), not $bin: a set is made by one binary" >&2; exit 2
  fi
  echo "$bin" > "$dir/binary"
  # the QUICK settings, from where reproduce-fig5 takes them
  local NAME=refset SEEDS=1 QUICK=1 TAG="" PRETRAIN_SET TRAIN_SET
  cd "$ROOT"
  . scripts/reproduce-common.sh
  repro_paths
  repro_quick_train_set
  local presets
  presets=$("$bin" objective --list | awk '{print $1}')
  [ -n "$presets" ] || { echo "refset: '$bin objective --list' lists no preset" >&2; exit 1; }
  cd "$dir"
  touch done
  export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
  local one=(--set run.threads=1) t0 s obj p rc=0 fail=0 running=0
  t0=$(date +%s)
  local pre=(--config "$ROOT/experiments/base/pretrain.ini" "${PRETRAIN_SET[@]}" "${one[@]}")
  s=$(date +%s)
  # --resume keeps a base.h5 an earlier make finished (pretrained with this config) and goes
  # on from the checkpoint of one it left
  "$bin" pretrain "${pre[@]}" --out base.h5 --backend cpu --resume > logs/base.out 2>&1 ||
    { echo "refset: pretrain base.h5 failed (see $dir/logs/base.out)" >&2; exit 1; }
  echo "refset: pretrain base.h5 ($(( $(date +%s) - s )) s)"
  # run NAME SETTINGS...: train NAME.h5 from base.h5 in the background, JOBS at a time; a run
  # that an earlier make finished (its name in DIR/done) is kept
  run() {
    local name=$1; shift
    if grep -qx "$name" done; then echo "refset: $name: kept (made by an earlier make of this set)"; return; fi
    if [ "$running" -ge "$jobs" ]; then wait -n || fail=1; running=$((running - 1)); fi
    (
      s=$(date +%s)
      "$bin" train --config "$ROOT/experiments/fig5/grpo.ini" "${TRAIN_SET[@]}" "${one[@]}" \
        --set train.init=base.h5 --set run.seed=1234 "$@" --out "$name.h5" --backend cpu \
        --overwrite > "logs/$name.out" 2>&1 ||
        { echo "refset: $name failed (see $dir/logs/$name.out)" >&2; exit 1; }
      echo "$name" >> done
      echo "refset: $name ($(( $(date +%s) - s )) s)"
    ) &
    running=$((running + 1))
  }
  for obj in grpo dr_grpo; do run "fig5_${obj}_s1234" --set objective.preset=$obj; done
  for p in $presets; do
    run "preset_$p" --set objective.preset="$p" --set train.steps=5 --set train.eval_every=5 \
      --set train.checkpoint_every=5
  done
  while [ "$running" -gt 0 ]; do wait -n || fail=1; running=$((running - 1)); done
  [ "$fail" = 0 ] || { echo "refset: a run failed (above); make the set again to train it" >&2; exit 1; }
  "$bin" version > version.txt
  echo "refset: $dir: $(find . -name '*.h5' | wc -l) files in $(( $(date +%s) - t0 )) s"
}

# the objects of one file that differ (h5diff -v), less the root attributes not compared.
# h5diff -v begins with a table of the objects of both files ("x" under file1 and/or file2),
# then names each object it compares ("dataset: </a> and </a>", "attribute: <name of </a>>
# and ..."), each followed by "N differences found", or by "Not comparable: ..." for objects
# of other shapes or types (which h5diff's exit status does not count: the text is read).
diff_file() {
  local a=$1 b=$2 ex=() d out rc=0 skip
  for d in "${SKIP_DATASETS[@]}"; do ex+=(--exclude-path "$d"); done
  out=$(h5diff -v "${ex[@]}" "$a" "$b" 2>&1) || rc=$?
  [ "$rc" -le 1 ] || { echo "h5diff failed (exit $rc): $(printf '%s\n' "$out" | tail -2 | paste -sd ' ')"; return 0; }
  skip=$(IFS='|'; echo "${SKIP_ROOT_ATTRS[*]}")
  printf '%s\n' "$out" | awk -v skip="^(${skip})$" '
    /^    x           \// { o = $0; sub(/^ *x +/, "", o); sub(/ +$/, "", o); print "only in the first: " o; next }
    /^           x    \// { o = $0; sub(/^ *x +/, "", o); sub(/ +$/, "", o); print "only in the second: " o; next }
    /^(group|dataset|attribute|datatype) *: </ {
      kind = $1; sub(/:$/, "", kind); o = $0; sub(/^[a-z]+ *: </, "", o); sub(/> and <.*$/, "", o)
      ignore = 0
      if (kind == "attribute") {
        name = o; sub(/ of <.*$/, "", name); where = o; sub(/^.* of </, "", where); sub(/>$/, "", where)
        if (where == "/" && name ~ skip) ignore = 1
        o = name " of " where
      }
      cur = kind " " o; next
    }
    /^Not comparable: / { if (cur != "" && !ignore) print cur " (not comparable)"; cur = ""; next }
    /^[0-9]+ differences? found$/ { if (cur != "" && !ignore && $1 + 0 > 0) print cur " (" $1 " differences)"; cur = ""; next }'
}

# every attribute of a file as OBJECT@NAME, one per line, sorted (h5dump -H: the header of every
# group and dataset, their attributes without values). h5diff compares only the attributes both
# files have, so one that only one file has is found here.
attr_names() {
  h5dump -H "$1" 2>/dev/null | awk '
    /\{ *$/ {
      n++; kind[n] = ""
      if (match($0, /^ *(GROUP|DATASET|ATTRIBUTE) "/)) {
        k = $1; nm = $0; sub(/^ *[A-Z]+ "/, "", nm); sub(/" *\{ *$/, "", nm); kind[n] = k; name[n] = nm
        if (k == "ATTRIBUTE") {
          p = ""
          for (i = 1; i < n; i++) if (kind[i] == "GROUP" || kind[i] == "DATASET") p = (name[i] == "/" ? "" : p "/" name[i])
          print (p == "" ? "/" : p) "@" nm
        }
      }
      next
    }
    /^ *\} *$/ { n-- }' | LC_ALL=C sort
}

# the attributes only one of two files has, less the root attributes not compared
one_sided_attrs() {
  local skip
  skip=$(IFS='|'; echo "${SKIP_ROOT_ATTRS[*]}")
  LC_ALL=C comm -3 <(attr_names "$1") <(attr_names "$2") | awk -F'\t' -v skip="^/@(${skip})$" '
    { side = ($1 != "") ? "first" : "second"; a = ($1 != "") ? $1 : $2
      if (a ~ skip) next
      obj = a; sub(/@.*$/, "", obj); nm = a; sub(/^[^@]*@/, "", nm)
      print "attribute " nm " of " obj " only in the " side }'
}

cmd_compare() {
  local a=$1 b=$2 f diffs bad=0 n=0
  [ -d "$a" ] || { echo "refset: $a: not a folder" >&2; exit 2; }
  [ -d "$b" ] || { echo "refset: $b: not a folder" >&2; exit 2; }
  command -v h5diff > /dev/null || { echo "refset: h5diff not found (Debian's hdf5-tools: scripts/deps.sh)" >&2; exit 2; }
  local files
  files=$( { (cd "$a" && find . -name '*.h5'); (cd "$b" && find . -name '*.h5'); } | sed 's|^\./||' | sort -u)
  [ -n "$files" ] || { echo "refset: no .h5 file in $a or $b" >&2; exit 2; }
  for f in $files; do
    n=$((n + 1))
    if [ ! -f "$a/$f" ] || [ ! -f "$b/$f" ]; then
      echo "$f: differs: only in $([ -f "$a/$f" ] && echo "$a" || echo "$b")"; bad=$((bad + 1)); continue
    fi
    diffs=$(diff_file "$a/$f" "$b/$f"; one_sided_attrs "$a/$f" "$b/$f")
    if [ -z "$diffs" ]; then
      echo "$f: identical"
    else
      echo "$f: differs: $(printf '%s\n' "$diffs" | head -8 | paste -sd ';' | sed 's/;/; /g')$([ "$(printf '%s\n' "$diffs" | wc -l)" -gt 8 ] && echo '; ...')"
      bad=$((bad + 1))
    fi
  done
  echo "refset: $((n - bad)) of $n files identical ($a vs $b)"
  [ "$bad" = 0 ]
}

case "${1:-}" in
  make) [ $# -ge 2 ] && [ $# -le 3 ] || usage; cmd_make "$2" "${3:-}" ;;
  compare) [ $# = 3 ] || usage; cmd_compare "$2" "$3" ;;
  *) usage ;;
esac
