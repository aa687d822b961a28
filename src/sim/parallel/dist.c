// dist.c: the communicator (dist.h): MPI where built with it and started by a launcher, one
// process otherwise. The MPI calls are all here, so the trainer has no #ifdef of its own.
#include "dist.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../../common.h"

#ifdef GRPOLAB_MPI
#include <mpi.h>
#ifdef GRPOLAB_CUDA
#define DIST_CUDA 1  // ranks choose their GPU
#include <cuda_runtime.h>
#ifdef GRPOLAB_NCCL
#define DIST_NCCL 1  // CUDA gradients summed by NCCL
#include <nccl.h>
#endif
#endif
#endif

static int g_rank = 0, g_size = 1;
#ifdef GRPOLAB_MPI
static int g_mpi = 0;  // MPI_Init was called
#endif
#ifdef DIST_NCCL
static ncclComm_t g_nccl;
static int g_nccl_ready = 0;
#endif

// 1 if a launcher (OpenMPI's mpirun, PMI/PMIx as srun uses) started this process.
static int launched(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

#ifdef DIST_CUDA
// This process's rank among the ranks on its node.
static int local_rank(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return atoi(getenv(vars[i]));
    return 0;
}
#endif

void dist_init(int *argc, char ***argv) {
#ifdef GRPOLAB_MPI
    if (!launched()) return;
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    g_mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
#ifdef DIST_CUDA
    // one rank per GPU: the CUDA backend takes the current device
    int ndev = 0;
    if (g_size > 1 && cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0)
        cudaSetDevice(local_rank() % ndev);
#endif
#else
    (void)argc;
    (void)argv;
    // R copies of one run would write the same log: refuse rather than run them
    const char *n = getenv("OMPI_COMM_WORLD_SIZE") ? getenv("OMPI_COMM_WORLD_SIZE") : getenv("PMI_SIZE");
    if (launched() && n && atoi(n) > 1) {
        fprintf(stderr, "grpolab: error: started as one of %s processes, but this grpolab was "
                "built without MPI (install libopenmpi-dev and openmpi-bin, scripts/deps.sh, and "
                "rebuild; or run one process without mpirun)\n", n);
        exit(2);
    }
#endif
}

void dist_finalize(void) {
#ifdef DIST_NCCL
    if (g_nccl_ready) ncclCommDestroy(g_nccl);
    g_nccl_ready = 0;
#endif
#ifdef GRPOLAB_MPI
    if (g_mpi) MPI_Finalize();
    g_mpi = 0;
#endif
}

int dist_rank(void) { return g_rank; }
int dist_size(void) { return g_size; }

const char *dist_transport(void) {
#ifdef GRPOLAB_MPI
    if (!g_mpi) return "one process (not started by mpirun or srun)";
#ifdef DIST_NCCL
    return "MPI (NCCL for CUDA gradients)";
#else
    return "MPI";
#endif
#else
    return "one process (built without MPI)";
#endif
}

// The collectives. With MPI they call it only with more than one rank: with one, the data is
// already where it belongs (a sum over one rank is its own value, a gather of one block is
// in place), and a run without a launcher never calls MPI.
#ifdef GRPOLAB_MPI
#define MPI_CHUNK ((size_t)1 << 30)  // MPI counts are int

// In-place MPI_SUM of n values of type t (elem bytes each), in chunks MPI's int counts hold.
static void mpi_sum(void *x, size_t n, MPI_Datatype t, size_t elem) {
    if (g_size == 1) return;
    for (size_t i = 0; i < n; i += MPI_CHUNK)
        MPI_Allreduce(MPI_IN_PLACE, (char *)x + i * elem,
                      (int)(n - i < MPI_CHUNK ? n - i : MPI_CHUNK), t, MPI_SUM, MPI_COMM_WORLD);
}

static int mpi_count(size_t bytes) {
    if (bytes > INT_MAX) die("dist: a message of %zu bytes (MPI counts are int)", bytes);
    return (int)bytes;
}

void dist_sum_double(double *x, size_t n) { mpi_sum(x, n, MPI_DOUBLE, sizeof *x); }
void dist_sum_float(float *x, size_t n) { mpi_sum(x, n, MPI_FLOAT, sizeof *x); }

int dist_max_int(int x) {
    if (g_size > 1) MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return x;
}

void dist_allgather(void *buf, size_t block) {
    if (g_size > 1)
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, mpi_count(block), MPI_BYTE,
                      MPI_COMM_WORLD);
}

void dist_gather(void *buf, const size_t *offset, const size_t *count) {
    if (g_size == 1) return;
    int *cnt = xmalloc((size_t)g_size * sizeof(int)), *dsp = xmalloc((size_t)g_size * sizeof(int));
    for (int r = 0; r < g_size; r++) {
        cnt[r] = mpi_count(count[r]);
        dsp[r] = mpi_count(offset[r]);
    }
    if (g_rank == 0)
        MPI_Gatherv(MPI_IN_PLACE, 0, MPI_BYTE, buf, cnt, dsp, MPI_BYTE, 0, MPI_COMM_WORLD);
    else
        MPI_Gatherv((char *)buf + offset[g_rank], cnt[g_rank], MPI_BYTE, NULL, NULL, NULL,
                    MPI_BYTE, 0, MPI_COMM_WORLD);
    free(cnt);
    free(dsp);
}

void dist_broadcast(void *buf, size_t bytes, int root) {
    if (g_size > 1) MPI_Bcast(buf, mpi_count(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
}
#else  // one process
void dist_sum_double(double *x, size_t n) { (void)x, (void)n; }
void dist_sum_float(float *x, size_t n) { (void)x, (void)n; }
int dist_max_int(int x) { return x; }
void dist_allgather(void *buf, size_t block) { (void)buf, (void)block; }
void dist_gather(void *buf, const size_t *offset, const size_t *count) {
    (void)buf, (void)offset, (void)count;
}
void dist_broadcast(void *buf, size_t bytes, int root) { (void)buf, (void)bytes, (void)root; }
#endif

#ifdef DIST_NCCL
// The NCCL communicator of the ranks, made at the first use (its id goes out over MPI).
static void nccl_ready(void) {
    if (g_nccl_ready) return;
    ncclUniqueId id;
    if (g_rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) die("dist: ncclGetUniqueId failed");
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclResult_t e = ncclCommInitRank(&g_nccl, g_size, id, g_rank);
    if (e != ncclSuccess) die("dist: ncclCommInitRank: %s", ncclGetErrorString(e));
    g_nccl_ready = 1;
}
#endif

void dist_sum_grads(Backend *bk, float *grads, size_t n) {
    if (g_size == 1) return;
    if (bk->kind == BACKEND_CPU) {
        dist_sum_float(grads, n);
        return;
    }
#ifdef DIST_NCCL
    nccl_ready();
    // every op runs on the legacy default stream (cuda_ops.cu): NCCL joins it there
    ncclResult_t e = ncclAllReduce(grads, grads, n, ncclFloat, ncclSum, g_nccl, 0);
    if (e != ncclSuccess) die("dist: ncclAllReduce: %s", ncclGetErrorString(e));
    if (cudaStreamSynchronize(0) != cudaSuccess) die("dist: the NCCL all-reduce failed");
#else
    float *h = xmalloc(n * sizeof(float));
    bk_download(bk, h, grads, n * sizeof(float));
    dist_sum_float(h, n);
    bk_upload(bk, grads, h, n * sizeof(float));
    free(h);
#endif
}

int dist_agree(int rc, int *report) {
    int all = dist_max_int(rc), rc0 = rc;
    dist_broadcast(&rc0, sizeof rc0, 0);
    *report = rc != 0 && (g_rank == 0 || rc0 == 0);
    return all;
}

void dist_abort(int code) {
#ifdef GRPOLAB_MPI
    if (g_mpi && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    exit(code);
}
