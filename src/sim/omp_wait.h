// omp_wait.h: how OpenMP threads wait at the end of a parallel region.
// GNU OpenMP spins by default before it sleeps. grpolab runs many short parallel regions per
// token, and on a machine whose cores other processes share a spinning thread takes the CPU
// from the thread the region waits for (docs/benchmarks.md "Waiting threads"), so grpolab
// waits passively unless the user chose a policy. libgomp reads the policy once, when it is
// loaded, so choosing it means running the program again with the variable set (not under
// valgrind, which runs the program itself: there the default stays).
#ifndef GRPOLAB_OMP_WAIT_H
#define GRPOLAB_OMP_WAIT_H

// If neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set (and not under valgrind): sets
// OMP_WAIT_POLICY=passive and executes /proc/self/exe with argv again (does not return).
// Returns when a policy is set, under valgrind, or when the program cannot be executed again
// (then with the runtime's default policy).
void omp_wait_passive_reexec(char **argv);

#endif
