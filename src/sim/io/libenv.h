// libenv.h: settings that grpolab's libraries read once, when they are loaded, so that
// choosing them means running the program again with the variable set.
//
// - How OpenMP threads wait (OMP_WAIT_POLICY). GNU OpenMP spins by default before it sleeps.
//   grpolab runs many short parallel regions per token, and on a machine whose cores other
//   processes share a spinning thread takes the CPU from the thread the region waits for
//   (docs/notebook/2026-12-05-bench-rl-history.md, "Waiting threads: OMP_WAIT_POLICY"), so
//   grpolab waits passively unless the user chose a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT
//   set).
// - Which kernels OpenBLAS runs (OPENBLAS_CORETYPE). Debian's OpenBLAS (DYNAMIC_ARCH) picks
//   its kernels by the CPU's model number and gives a model it does not know its generic
//   x86-64 kernels, "Prescott" (SSE3, no FMA): a newer Xeon with AVX-512 then runs every
//   product several times slower (docs/benchmarks.md "Kernels and model";
//   docs/notebook/2026-12-06-bench-rl-history.md, "OpenBLAS's kernels on a CPU it does not
//   know"). Where OpenBLAS fell back so and the CPU has the features, grpolab names the
//   kernels they allow: SkylakeX (AVX-512 F, CD, BW, DQ and VL) or Haswell (AVX2 and FMA).
//   A user's OPENBLAS_CORETYPE is kept. A run's rounding depends on the kernels, so the run
//   log records them (attribute `blas`, docs/hdf5-schema.md).
//
// Neither is changed under valgrind, which runs the program itself (running /proc/self/exe
// would leave the tool) and does not emulate AVX-512.
#ifndef GRPOLAB_LIBENV_H
#define GRPOLAB_LIBENV_H

#include <stddef.h>

// The kernel set to name in OPENBLAS_CORETYPE for a CPU with these features where OpenBLAS
// chose `corename` (openblas_get_corename()), or NULL to keep OpenBLAS's choice.
const char *libenv_blas_core(const char *corename, int avx512, int avx2_fma);

// Set beside OPENBLAS_CORETYPE where grpolab named the kernels: the core OpenBLAS chose, and
// the one grpolab named (a later OPENBLAS_CORETYPE of the user's differs from it).
#define LIBENV_BLAS_FALLBACK "GRPOLAB_BLAS_FALLBACK"
#define LIBENV_BLAS_NAMED "GRPOLAB_BLAS_NAMED"

// Who chose the kernels OpenBLAS runs, in words, into buf: OpenBLAS, the user, or grpolab
// (with the fallback it replaced).
const char *libenv_blas_origin(char *buf, size_t len);

// Sets what the environment leaves unset of the above and executes /proc/self/exe with argv
// again (does not return). Returns when nothing is to be set, under valgrind, or when the
// program cannot be executed again (then with the libraries' defaults).
void libenv_reexec(char **argv);

#endif
