// cmd_version.c: `grpolab version` (and `grpolab --version`): the version, the BLAS and the backends.
#include <stdio.h>

#include "../../common.h"
#include "../../kernels/kernels.h"
#include "../io/cli.h"
#include "../io/libenv.h"
#include "commands.h"

int cmd_version(int argc, char **argv) {
    static const CliSpec spec = {"version", "Print the version of grpolab and its backends.", "", NULL,
                                 0, 0, NULL};
    CliArgs a;
    int rc = cli_parse(&spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    char why[256];
    int cuda = backend_cuda_available(why, sizeof why);
    printf("grpolab %s (commit %s)\n", GRPOLAB_VERSION, grpolab_commit());
    printf("blas: %s\n", backend_blas_config());
    char origin[128];
    printf("blas kernels: %s (%s)\n", backend_blas_core(), libenv_blas_origin(origin, sizeof origin));
#ifdef GRPOLAB_CUDA
    printf("backends: cpu (built), cuda (built; %s)\n", cuda ? "device available" : why);
#else
    (void)cuda;
    printf("backends: cpu (built), cuda (not built: no nvcc at build time)\n");
#endif
    return 0;
}
