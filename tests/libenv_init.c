// libenv_init.c: every test binary starts as grpolab's main() does (src/sim/io/libenv.h), with
// the OpenBLAS kernels and OpenMP waiting that grpolab would choose, so that its numbers are
// those of the grpolab binary the tests run beside it. glibc passes (argc, argv, envp) to
// constructors.
#include "sim/io/libenv.h"

__attribute__((constructor)) static void libenv_init(int argc, char **argv, char **envp) {
    (void)argc;
    (void)envp;
    libenv_reexec(argv);
}
