#!/usr/bin/env bash
# Installs the Debian packages grpolab needs, only those that are missing.
# Usage: scripts/deps.sh [--check] [--slurm] [--bench] [--bench-torch]
#   --check  list what is missing, install nothing
#   --slurm  the optional Slurm and munge packages of `make test-slurm` instead (tests/slurm/)
#   --bench  also what `make bench-rl` and `make conformance` need: venv and pip for their
#            virtualenv of PyPI's torch and TRL
#   --bench-torch  and Debian's python3-torch (`make bench-rl PEER_PY=/usr/bin/python3`)
set -eu
PKGS="build-essential pkg-config libhdf5-dev hdf5-tools libgsl-dev libopenblas-dev libopenblas-openmp-dev libcmocka-dev gnuplot-nox libopenmpi-dev openmpi-bin"
BENCH_PKGS="python3-venv python3-pip"
CHECK=0
for a in "$@"; do
  case "$a" in
    --check) CHECK=1 ;;
    --slurm) PKGS="slurm-wlm munge" ;;
    --bench) PKGS="$PKGS $BENCH_PKGS" ;;
    --bench-torch) PKGS="$PKGS $BENCH_PKGS python3-torch" ;;
    *) echo "deps: unknown option '$a' (allowed: --check, --slurm, --bench, --bench-torch)" >&2; exit 2 ;;
  esac
done
missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -z "$missing" ]; then
  exit 0
fi
if [ "$CHECK" = 1 ]; then
  echo "deps: missing:$missing"
  exit 1
fi
echo "deps: installing:$missing"
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "deps: need root (or sudo) to install:$missing" >&2; exit 1; fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
