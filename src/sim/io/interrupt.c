// interrupt.c: SIGINT and SIGTERM as a request to stop at the next safe point (interrupt.h).
#include "interrupt.h"

#include <string.h>

static volatile sig_atomic_t pending;
static void on_stop(int sig) { pending = sig; }

void interrupt_install(InterruptHandlers *h) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    pending = 0;
    sigaction(SIGINT, &sa, &h->old_int);
    sigaction(SIGTERM, &sa, &h->old_term);
}

void interrupt_restore(const InterruptHandlers *h) {
    sigaction(SIGINT, &h->old_int, NULL);
    sigaction(SIGTERM, &h->old_term, NULL);
}

int interrupt_pending(void) { return (int)pending; }

void interrupt_set(int sig) { pending = sig; }
