# Sourced by reproduce-fig5.sh and gpu-fig5.sh: where the fig5 job keeps its files, from
# QUICK (0 or 1) and TAG (empty, or a name for runs made with SET; reproduce-fig5.sh).
#   BASE  the base model: data/models/base.h5, or data/models/quick/base.h5 with QUICK=1
#   RUNS  the run logs: data/runs[/quick][/TAG]
#   PLOTS the figures and summary.md: plots[/quick][/TAG]
# A TAG that is not a plain name ([A-Za-z0-9._-], not starting with '.') stops the caller.
TAG=${TAG:-}
if [ -n "$TAG" ] && ! [[ "$TAG" =~ ^[A-Za-z0-9_-][A-Za-z0-9._-]*$ ]]; then
  echo "$(basename "$0"): TAG='$TAG': expected a plain name (letters, digits, . _ -)" >&2; exit 2
fi
if [ "${QUICK:-0}" = 1 ]; then
  BASE=data/models/quick/base.h5; RUNS=data/runs/quick; PLOTS=plots/quick
else
  BASE=data/models/base.h5; RUNS=data/runs; PLOTS=plots
fi
if [ -n "$TAG" ]; then RUNS=$RUNS/$TAG; PLOTS=$PLOTS/$TAG; fi
