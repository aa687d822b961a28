#!/usr/bin/env bash
# The include graph of src/ checked against the layering of README's "Layout" (`make
# check-includes`, run by `make test`). A unit is a .c/.cu file with its .h (src/sim/rl/update.c
# and update.h are the unit src/sim/rl/update); it uses every unit it includes. Two rules:
#   no circle   no units that use each other, directly or round a longer circle (tsort finds
#               them)
#   no arrow up a folder includes only itself and the folders before it in LAYERS; folders of
#               the same rank include nothing of each other
# With OBJ_DIR (the objects of SRC_DIR, build/src), the same for the call graph: a unit calls
# the unit whose object defines a function it uses (nm); no circle there either.
# Prints every circle and every upward include, exit 1 if there is one, 0 otherwise.
# Usage: scripts/check-includes.sh [SRC_DIR [OBJ_DIR]] (default src; tests point it at a copy).
set -euo pipefail
src=${1:-src} obj=${2:-}
[ -d "$src" ] || { echo "check-includes: '$src': not a directory" >&2; exit 2; }
[ -z "$obj" ] || [ -d "$obj" ] || { echo "check-includes: '$obj': not a directory" >&2; exit 2; }
[ -z "$obj" ] || obj=$(cd "$obj" && pwd)
cd "$src"

# folder rank: common.h; the kernels; io/ and world/ (neither includes the other); model/;
# parallel/; rl/; sweep/; analysis/; cli/
LAYERS="common:0 kernels:1 sim/io:2 sim/world:2 sim/model:3 sim/parallel:4 sim/rl:5 sim/sweep:6
analysis:7 sim/cli:8"
rank_of() {  # the folder of unit $1 and its rank, "folder rank"; "" if no layer holds it
  local u=$1 l
  for l in $LAYERS; do
    local d=${l%%:*} r=${l##*:}
    if [ "$d" = common ]; then [ "$u" = common ] && { echo "common $r"; return; }
    elif [ "${u%/*}" = "$d" ]; then echo "$d $r"; return; fi
  done
}

edges=$(mktemp) calls=$(mktemp)
trap 'rm -f "$edges" "$calls" "$calls.def" "$calls.use"' EXIT
bad=0
while IFS= read -r f; do
  dir=$(dirname "$f")
  from=${f%.*}
  while IFS= read -r inc; do
    [ -n "$inc" ] || continue
    target=$(realpath -m --relative-to=. "$dir/$inc")
    [ -f "$target" ] || continue  # a generated header (build/gen) or a system one
    to=${target%.*}
    [ "$to" = "$from" ] && continue
    echo "$from $to" >> "$edges"
    read -r fd fr <<< "$(rank_of "$from")" || true
    read -r td tr <<< "$(rank_of "$to")" || true
    if [ -z "${fd:-}" ] || [ -z "${td:-}" ]; then
      echo "check-includes: $f includes $inc: ${fd:+$to}${fd:-$from} is in no layer (add its folder to LAYERS and README's Layout)"
      bad=1
    elif [ "$fd" != "$td" ] && [ "$tr" -ge "$fr" ]; then
      echo "check-includes: $f includes $inc: $fd/ (rank $fr) may not include $td/ (rank $tr), an arrow up"
      bad=1
    fi
    fd= td=
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sed 's|^\./||' | sort)

# tsort reports each circle of the unit graph ("input contains a loop:" and its units)
if ! loops=$(sort -u "$edges" | tsort 2>&1 >/dev/null); then
  echo "check-includes: units that use each other (each circle as tsort lists it):"
  echo "$loops" | sed 's/^tsort: /  /'
  bad=1
fi
if [ -n "$obj" ]; then
  # the objects of this tree's sources: one left in $obj by a source since moved or deleted
  # would bring back the calls of code that is gone
  objects=$(find "$obj" -name '*.o' | sed "s|^$obj/||" | sort | while IFS= read -r o; do
              if [ -f "${o%.o}.c" ] || [ -f "${o%.o}.cu" ]; then echo "$o"; fi
            done)
  # "symbol unit" of every function an object defines, and of every one it uses
  for o in $objects; do
    nm -g --defined-only "$obj/$o" | awk -v u="${o%.o}" '$2 ~ /^[TDBR]$/ {print $3, u}'
  done | sort > "$calls.def"
  for o in $objects; do
    nm -u "$obj/$o" | awk -v u="${o%.o}" '{print $2, u}'
  done | sort > "$calls.use"
  join "$calls.use" "$calls.def" | awk '$2 != $3 {print $2, $3}' | sort -u > "$calls"
  if ! loops=$(tsort "$calls" 2>&1 >/dev/null); then
    echo "check-includes: units that call each other (objects of $obj; each circle as tsort lists it):"
    echo "$loops" | sed 's/^tsort: /  /'
    bad=1
  fi
fi
[ $bad = 0 ] && echo "check-includes: $(sort -u "$edges" | wc -l) include arrows of $src${obj:+ and $(wc -l < "$calls") call arrows}, no circle, none up"
exit $bad
