// common.h: error reporting and checked allocation shared by every module.
// Every call that can fail goes through a check that reports file, line and the
// library's own message. Library code returns errors to its caller
// with a message in a caller-provided buffer; only "cannot continue" conditions
// (out of memory, a failed CUDA call) exit through die().
#ifndef GRPOLAB_COMMON_H
#define GRPOLAB_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define GRPOLAB_VERSION "0.1.0"
// The git commit the binary was built from (`git describe --always --dirty`, "-dirty" when
// tracked files had uncommitted changes), or "unknown" outside a git checkout. The Makefile
// writes it to $(BUILD)/gen/git_commit.h; run logs and checkpoints store it as grpolab_commit.
const char *grpolab_commit(void);

#ifdef __GNUC__
#define GL_NORETURN __attribute__((noreturn))
#define GL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GL_NORETURN
#define GL_PRINTF(a, b)
#endif

// Prints "grpolab: error: <message>" (with file:line of the call site) and exits 1.
GL_NORETURN GL_PRINTF(3, 4) void die_at(const char *file, int line, const char *fmt, ...);
#define die(...) die_at(__FILE__, __LINE__, __VA_ARGS__)

// Allocation that never returns NULL: out of memory is fatal, with the size asked for.
void *xmalloc_at(const char *file, int line, size_t bytes);
void *xcalloc_at(const char *file, int line, size_t n, size_t size);
char *xstrdup_at(const char *file, int line, const char *s);
#define xmalloc(bytes) xmalloc_at(__FILE__, __LINE__, (bytes))
#define xcalloc(n, size) xcalloc_at(__FILE__, __LINE__, (n), (size))
#define xstrdup(s) xstrdup_at(__FILE__, __LINE__, (s))

// A string formatted into memory sized by the formatting itself (vsnprintf measures it
// first): the one way this code builds a string whose length depends on its inputs (paths,
// "key=value", shell words). Never NULL; free() it.
GL_PRINTF(3, 4) char *xasprintf_at(const char *file, int line, const char *fmt, ...);
#define xasprintf(...) xasprintf_at(__FILE__, __LINE__, __VA_ARGS__)
// s as one single-quoted POSIX shell word ('it'\''s'), so that a shell takes it as the
// literal text whatever it holds ($, `, ", \, newlines); free() it.
char *shell_quote(const char *s);

// fopen that dies with the path and strerror on failure.
FILE *xfopen_at(const char *file, int line, const char *path, const char *mode);
#define xfopen(path, mode) xfopen_at(__FILE__, __LINE__, (path), (mode))

// Formats into err (if err != NULL and errlen > 0); returns -1 so callers can write
// `return set_err(err, errlen, "...")`.
GL_PRINTF(3, 4) int set_err(char *err, size_t errlen, const char *fmt, ...);

// Monotonic wall clock in seconds.
double wall_time(void);

#endif
