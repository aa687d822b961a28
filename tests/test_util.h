// test_util.h: helpers shared by the cmocka tests (header only).
#ifndef GRPOLAB_TEST_UTIL_H
#define GRPOLAB_TEST_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include <dirent.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "kernels/philox.h"

// Fills x (n) with uniform values in [lo, hi) drawn from (seed, i).
static inline void tu_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * philox_uniform(seed, i);
}

// Relative error ||a-b|| / max(||b||, tiny). NaN anywhere gives +inf (NaN never passes).
static inline double tu_rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i]) || isinf(a[i]) || isinf(b[i])) return INFINITY;
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return sqrt(num) / (sqrt(den) > 1e-30 ? sqrt(den) : 1e-30);
}

// Same for doubles.
static inline double tu_rel_err_d(const double *a, const double *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) return INFINITY;
        double d = a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return sqrt(num) / (sqrt(den) > 1e-300 ? sqrt(den) : 1e-300);
}

// Prints "  <what>: rel err <e>" and fails the test if e > tol (or e is NaN/inf).
static inline void tu_check_rel(const char *what, double e, double tol) {
    printf("  %-48s rel err %.3e (tol %.1e)\n", what, e, tol);
    fflush(stdout);
    assert_true(e <= tol);
}

// The CUDA parity tests compare a second backend with the CPU: CUDA where it is built and a
// device is usable. GRPOLAB_PARITY_SELF=1 makes the second backend another CPU one, so the
// tests can check themselves on a machine without a GPU (every error is then 0).
// 1 if the parity tests run, else 0 with the reason in why.
static inline int tu_parity_wanted(char *why, size_t whylen) {
    if (getenv("GRPOLAB_PARITY_SELF")) return 1;
    return backend_cuda_available(why, whylen);
}
// The second backend (NULL with the message in err if it cannot be created).
static inline Backend *tu_parity_backend(char *err, size_t errlen) {
    if (!getenv("GRPOLAB_PARITY_SELF")) return backend_create(BACKEND_CUDA, err, errlen);
    printf("GRPOLAB_PARITY_SELF: the CPU backend against itself (a check of the tests)\n");
    return backend_create(BACKEND_CPU, err, errlen);
}

// Removes a flat temporary directory (its files, then itself).
static inline void tu_remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

// Runs the shell command cmd; returns its exit code and what it writes to stdout in out.
static inline int tu_run_cmd(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    if (!p) fail_msg("cannot run %s", cmd);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The bytes of file p, malloc'd (*n bytes); NULL if it cannot be opened.
static inline char *tu_read_file(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)(len > 0 ? len : 0) + 1);
    *n = fread(b, 1, (size_t)(len > 0 ? len : 0), f);
    fclose(f);
    return b;
}

// Runs the grpolab binary ($GRPOLAB_BIN, else build/grpolab) with args, and env ("NAME=value
// ..." or "") in front; returns its exit code and its stderr in out (stdout is discarded).
static inline int tu_run_cli_env(const char *env, const char *args, char *out, size_t cap) {
    const char *bin = getenv("GRPOLAB_BIN");
    if (!bin) bin = "build/grpolab";
    char cmd[3072];
    snprintf(cmd, sizeof cmd, "%s %s %s 2>&1 >/dev/null", env, bin, args);
    return tu_run_cmd(cmd, out, cap);
}
static inline int tu_run_cli(const char *args, char *out, size_t cap) {
    return tu_run_cli_env("", args, out, cap);
}

// Reads data row `row` (0-based; '#' lines skipped) of a whitespace-separated data file, as a
// figure's BASE_data/*.dat, into v (up to cap columns); returns the columns read.
static inline int tu_read_row(const char *path, int row, double *v, int cap) {
    FILE *fp = fopen(path, "r");
    if (!fp) fail_msg("cannot open %s", path);
    char line[4096];
    int r = -1, n = 0;
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#') continue;
        if (++r < row) continue;
        char *save = NULL;
        for (char *t = strtok_r(line, " \t\n", &save); t && n < cap; t = strtok_r(NULL, " \t\n", &save))
            v[n++] = strtod(t, NULL);
        break;
    }
    fclose(fp);
    return n;
}

// 1 if gnuplot ($GNUPLOT, else gnuplot on PATH) can be run; else says that rendering is skipped.
static inline int tu_have_gnuplot(void) {
    const char *gp = getenv("GNUPLOT");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "command -v '%s' >/dev/null 2>&1", gp && *gp ? gp : "gnuplot");
    if (system(cmd) == 0) return 1;
    printf("  gnuplot not found: rendering skipped (scripts/deps.sh installs gnuplot-nox)\n");
    return 0;
}

#endif
