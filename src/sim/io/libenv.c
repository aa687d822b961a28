#include "libenv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../kernels/kernels.h"

const char *libenv_blas_core(const char *corename, int avx512, int avx2_fma) {
    if (!corename || strcmp(corename, "Prescott") != 0) return NULL;
    return avx512 ? "SkylakeX" : avx2_fma ? "Haswell" : NULL;
}

static const char *blas_core_wanted(void) {
    if (getenv("OPENBLAS_CORETYPE")) return NULL;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl");
    int avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return libenv_blas_core(backend_blas_core(), avx512, avx2_fma);
#else
    return NULL;
#endif
}

void libenv_reexec(char **argv) {
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) return;
    int wait = !getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT");
    const char *core = blas_core_wanted();
    if (!wait && !core) return;
    if (wait && setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    if (core && (setenv("OPENBLAS_CORETYPE", core, 1) != 0 ||
                 setenv(LIBENV_BLAS_FALLBACK, backend_blas_core(), 1) != 0 ||
                 setenv(LIBENV_BLAS_NAMED, core, 1) != 0))
        return;
    execv("/proc/self/exe", argv);
    // no /proc: the libraries' defaults, as if never set
    if (wait) unsetenv("OMP_WAIT_POLICY");
    if (core) {
        unsetenv("OPENBLAS_CORETYPE");
        unsetenv(LIBENV_BLAS_FALLBACK);
        unsetenv(LIBENV_BLAS_NAMED);
    }
}

const char *libenv_blas_origin(char *buf, size_t len) {
    const char *fallback = getenv(LIBENV_BLAS_FALLBACK), *named = getenv(LIBENV_BLAS_NAMED);
    const char *core = getenv("OPENBLAS_CORETYPE");
    if (fallback && named && core && strcmp(named, core) == 0)
        snprintf(buf, len, "named by grpolab: OpenBLAS took this CPU for %s", fallback);
    else if (core)
        snprintf(buf, len, "named by OPENBLAS_CORETYPE");
    else
        snprintf(buf, len, "OpenBLAS's choice for this CPU");
    return buf;
}
