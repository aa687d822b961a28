// dist.h: the communicator of a data-parallel run (docs/scaling.md, "One run over several
// processes (MPI)"): this process's rank among size ranks and the collectives the trainer
// needs. Built with MPI (the Makefile's probe finds mpicc: GRPOLAB_MPI) and started by a
// launcher (mpirun, srun), the ranks are MPI_COMM_WORLD's; otherwise, and in an MPI build
// started without a launcher, the run is one process: rank 0 of 1, where every collective
// is the identity (a sum over one rank is its own value, a gather of one block is in place).
// Every rank calls every collective in the same order with the same sizes.
#ifndef GRPOLAB_DIST_H
#define GRPOLAB_DIST_H

#include <stddef.h>

#include "../../kernels/kernels.h"

// Once, at the start of main: MPI_Init where a launcher started this process, and the GPU of
// this rank (local rank modulo the visible devices) in a CUDA build. dist_finalize at the end.
void dist_init(int *argc, char ***argv);
void dist_finalize(void);

int dist_rank(void);
int dist_size(void);
// "MPI (OpenMPI 4.1.4)", "NCCL + MPI", or "one process (built without MPI)", for messages.
const char *dist_transport(void);

// In-place sums over the ranks; every rank gets the same result.
void dist_sum_double(double *x, size_t n);
void dist_sum_float(float *x, size_t n);
// The largest of every rank's x.
int dist_max_int(int x);

// In place: rank r's block of `block` bytes at buf + r * block goes to every rank.
void dist_allgather(void *buf, size_t block);
// In place to rank 0: rank r's bytes at buf + offset[r] (count[r] bytes) go to rank 0's buf.
void dist_gather(void *buf, const size_t *offset, const size_t *count);
// bytes from root's buf to every rank's.
void dist_broadcast(void *buf, size_t bytes, int root);

// The gradients (n floats, on bk's device) summed over the ranks in place: NCCL on CUDA
// where built with it, else MPI (through the host for CUDA).
void dist_sum_grads(Backend *bk, float *grads, size_t n);

// An agreed exit code after a phase that may fail on some ranks: the largest rc of all.
// *report is 1 where this rank should print its own message (its rc is not 0, and it is rank
// 0 or rank 0 had none: the ranks then do not print one message R times).
int dist_agree(int rc, int *report);

// Ends every rank with code (MPI_Abort; exit in one process).
void dist_abort(int code);

#endif
