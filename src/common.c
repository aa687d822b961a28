#include "common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void die_at(const char *file, int line, const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "grpolab: error: ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " [%s:%d]\n", file, line);
    exit(1);
}

void *xmalloc_at(const char *file, int line, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) die_at(file, line, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *xcalloc_at(const char *file, int line, size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) die_at(file, line, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

char *xstrdup_at(const char *file, int line, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = xmalloc_at(file, line, n);
    memcpy(p, s, n);
    return p;
}

FILE *xfopen_at(const char *file, int line, const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (!f) die_at(file, line, "cannot open '%s' (mode %s): %s", path, mode, strerror(errno));
    return f;
}

int set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
