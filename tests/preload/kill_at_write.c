// kill_at_write.c: a library preloaded (LD_PRELOAD) into `grpolab train` by test_resume to
// kill the process at a chosen write to a file: HDF5's pwrite calls (the run log) and the
// write calls to any descriptor but stdin, stdout and stderr (the checkpoints and the log's
// copies). Its environment:
//   GRPOLAB_KILL_AT=n     SIGKILL at the n-th such write, before it (0 or unset: never)
//   GRPOLAB_KILL_HALF=1   write the first half of that write's bytes, then SIGKILL (a torn
//                         write)
//   GRPOLAB_COUNT_FILE=p  at exit, write the number of such writes to the file p
// Not linked into any test binary: the Makefile builds it on its own as a shared library.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);

static long writes, kill_at;
static int half, ready;
static pwrite_fn real_pwrite;
static write_fn real_write;

static void setup(void) {
    if (ready) return;
    real_pwrite = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite64");
    real_write = (write_fn)dlsym(RTLD_NEXT, "write");
    const char *k = getenv("GRPOLAB_KILL_AT"), *h = getenv("GRPOLAB_KILL_HALF");
    kill_at = k ? atol(k) : 0;
    half = h && h[0] == '1';
    ready = 1;
}

// Counts one write; at the chosen one, writes half of it if asked and dies.
static void count(int fd, const void *buf, size_t n, off_t off, int positioned) {
    if (++writes != kill_at) return;
    if (half && n > 1) {
        if (positioned) real_pwrite(fd, buf, n / 2, off);
        else real_write(fd, buf, n / 2);
    }
    raise(SIGKILL);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    setup();
    count(fd, buf, n, off, 1);
    return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) { return pwrite64(fd, buf, n, off); }

ssize_t write(int fd, const void *buf, size_t n) {
    setup();
    if (fd > 2) count(fd, buf, n, 0, 0);
    return real_write(fd, buf, n);
}

__attribute__((destructor)) static void report(void) {
    const char *p = getenv("GRPOLAB_COUNT_FILE");
    if (!p) return;
    setup();
    char line[32];
    int len = snprintf(line, sizeof line, "%ld\n", writes);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    real_write(fd, line, (size_t)len);
    close(fd);
}
