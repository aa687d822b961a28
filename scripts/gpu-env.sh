# Sourced by the scripts that run the binaries of `make gpu-bundle` on a GPU machine without
# grpolab's Debian packages (scripts/gpu-check.sh, scripts/gpu-fig5.sh). Given PRE (the
# unpacked bundle), puts the bundle's libraries on LD_LIBRARY_PATH after the system's own (so
# they are used only where the machine lacks a library of that name) and finds CUDA's
# runtime and cuBLAS wherever the machine keeps them. Sets GPU_ENV_MISSING to the libraries
# that grpolab or a test binary still cannot find (empty when all are found).
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu:$PWD/$PRE/lib"
for so in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
  if ldd "$PRE/grpolab" 2>/dev/null | grep -q "$so => not found"; then
    d=$(find /usr /opt -name "$so" 2>/dev/null | head -1)
    [ -n "$d" ] && { echo "$so from $(dirname "$d")"; export LD_LIBRARY_PATH="$(dirname "$d"):$LD_LIBRARY_PATH"; }
  fi
done
GPU_ENV_MISSING=$(ldd "$PRE/grpolab" "$PRE"/tests/* 2>/dev/null | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
