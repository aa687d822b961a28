#!/usr/bin/env bash
# make gpu-bundle: the CUDA binaries of `make gpu-check`, built here, for a GPU machine that
# has neither grpolab's Debian packages nor a network to install them (docs/benchmarks.md,
# "GPU"). Builds build-gpu/ (-march=x86-64-v3, so
# it runs on any AVX2 CPU; sm_90 CUDA code as in every build) and packs
# build-gpu/bundle.tar.gz: grpolab, the three CUDA test binaries, lib/ with the shared
# libraries they load that are neither glibc's nor CUDA's (HDF5, GSL, OpenBLAS, cmocka and
# theirs; gpu-check puts them after the system's own on LD_LIBRARY_PATH, so they are used
# only where the machine lacks them) and data/models/base.h5 when it exists (the short RL
# run of gpu-check starts from it). On the GPU machine:
#   tar xzf build-gpu/bundle.tar.gz -C build-gpu && GPU_CHECK_PREBUILT=build-gpu/bundle scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
B=build-gpu
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "gpu-bundle: no nvcc (on PATH or in /usr/local/cuda/bin): the bundle needs the CUDA backend" >&2; exit 1; }
TESTS=$(basename -s .c tests/test_cuda_*.c tests/test_backend_ops.c)  # the test binaries gpu-check runs
make --no-print-directory BUILD=$B OPT="-O3 -march=x86-64-v3" CUDA=1 $B/grpolab \
  $(for t in $TESTS; do echo $B/tests/$t; done)
D=$B/bundle
rm -rf "$D" && mkdir -p "$D/tests" "$D/lib"
cp $B/grpolab "$D/"
for t in $TESTS; do cp "$B/tests/$t" "$D/tests/"; done
ldd "$D/grpolab" "$D"/tests/* | awk '/=> \// {print $3}' | sort -u | while read -r so; do
  case "$(basename "$so")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|ld-linux*) continue ;;
    libcuda.so*|libcudart.so*|libcublas*.so*) continue ;;  # the GPU machine's own CUDA
  esac
  cp -L "$so" "$D/lib/"
done
if [ -f data/models/base.h5 ]; then cp data/models/base.h5 "$D/base.h5"; else
  echo "gpu-bundle: no data/models/base.h5: gpu-check will skip its RL run (run grpolab pretrain first)"; fi
tar -C $B -czf $B/bundle.tar.gz bundle
echo "gpu-bundle: $B/bundle.tar.gz ($(du -h $B/bundle.tar.gz | cut -f1); $(ls "$D/lib" | wc -l) libraries," \
  "commit $(git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown))"
