// interrupt.h: SIGINT and SIGTERM as a request to stop at the next safe point. A command
// that installs these handlers finishes the unit of work under way (a train step, a
// pretraining step, a batch of an evaluation), saves what it has, prints how to go on and
// exits 128 + the signal. A second signal stops at once (SA_RESETHAND: the default action
// again, as a kill).
#ifndef GRPOLAB_INTERRUPT_H
#define GRPOLAB_INTERRUPT_H

#include <signal.h>

typedef struct {
    struct sigaction old_int, old_term;
} InterruptHandlers;

// Installs the handlers (the previous ones into h) and forgets an earlier signal.
void interrupt_install(InterruptHandlers *h);
// Puts back the handlers interrupt_install replaced.
void interrupt_restore(const InterruptHandlers *h);
// The signal received since interrupt_install, or 0.
int interrupt_pending(void);
// Sets the signal to act on (the ranks of a data-parallel run agree on one).
void interrupt_set(int sig);

#endif
