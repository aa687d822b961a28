#!/bin/sh
# docs-block.sh FILE TAG COMMAND...: replaces the lines of FILE between its line that starts
# "<!-- begin: TAG" and its line "<!-- end: TAG -->" by what COMMAND prints; the two marker
# lines and the rest of FILE (the hand-written prose) stay. FILE is left alone if COMMAND
# fails or FILE has not exactly one such block. `make docs-config` runs it.
set -eu
if [ $# -lt 3 ]; then
    echo "usage: scripts/docs-block.sh FILE TAG COMMAND..." >&2
    exit 2
fi
file=$1 tag=$2
shift 2
out=$(mktemp)
new=$(mktemp)
trap 'rm -f "$out" "$new"' EXIT
"$@" >"$out" || { echo "docs-block.sh: '$*' failed; $file unchanged" >&2; exit 1; }
if ! awk -v begin="<!-- begin: $tag" -v end="<!-- end: $tag -->" -v out="$out" '
    index($0, begin) == 1 { print; while ((getline l < out) > 0) print l; inside = 1; nb++; next }
    $0 == end { if (!inside) bad = 1; inside = 0; ne++; print; next }
    !inside { print }
    END { exit (bad || inside || nb != 1 || ne != 1) }' "$file" >"$new"; then
    echo "docs-block.sh: $file: not exactly one block from a line '<!-- begin: $tag ...' to a line '<!-- end: $tag -->'; unchanged" >&2
    exit 1
fi
cat "$new" >"$file"
