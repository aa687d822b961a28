// spawn_util.h: commands run as their user would, and stopped from outside (test_resume.c,
// test_interrupt.c): the binary ($GRPOLAB_BIN, else build/grpolab) started in the
// background, signals, exit codes, and polls of the files it writes. Header only.
#ifndef GRPOLAB_SPAWN_UTIL_H
#define GRPOLAB_SPAWN_UTIL_H

#include <signal.h>
#include <time.h>

#include <hdf5.h>

#include "sim/io/runlog.h"
#include "test_util.h"

static inline int exists(const char *p) { return access(p, F_OK) == 0; }

// Starts the CLI with args (stderr to errpath), with env ("NAME=value ..." or "") in front;
// returns its pid.
static inline pid_t spawn_cli_env(const char *env, const char *args, const char *errpath) {
    const char *bin = getenv("GRPOLAB_BIN");
    if (!bin) bin = "build/grpolab";
    char cmd[3200];
    snprintf(cmd, sizeof cmd, "%s exec %s %s >/dev/null 2>'%s'", env, bin, args, errpath);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static inline pid_t spawn_cli(const char *args, const char *errpath) { return spawn_cli_env("", args, errpath); }

static inline int wait_rc(pid_t pid) {
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

// The text of file p (NUL-terminated), malloc'd.
static inline char *read_text(const char *p) {
    size_t n = 0;
    char *b = tu_read_file(p, &n);
    if (!b) fail_msg("cannot read %s", p);
    b[n] = '\0';
    return b;
}

// Polls until the checkpoint ckpt exists, for at most about 20 s.
static inline void wait_for_file(const char *ckpt) {
    for (int i = 0; i < 1000 && !exists(ckpt); i++) sleep_s(0.02);
    if (!exists(ckpt)) fail_msg("no %s after 20 s", ckpt);
}

// Polls until the file at p holds text, for at most about 20 s.
static inline void wait_for_text(const char *p, const char *text) {
    for (int i = 0; i < 1000; i++) {
        size_t n = 0;
        char *b = tu_read_file(p, &n);
        int found = 0;
        if (b) {
            b[n] = '\0';
            found = strstr(b, text) != NULL;
            free(b);
        }
        if (found) return;
        sleep_s(0.02);
    }
    fail_msg("%s: no '%s' after 20 s", p, text);
}

// The preloaded library that kills a run at a chosen write (tests/preload/kill_at_write.c),
// or NULL (the test is then skipped) where it was not built and not asked for.
static inline const char *kill_lib(void) {
    const char *lib = getenv("GRPOLAB_KILL_LIB");
    if (lib && !exists(lib)) fail_msg("GRPOLAB_KILL_LIB=%s does not exist", lib);
    if (!lib) lib = "build/tests/kill_at_write.so";
    return exists(lib) ? lib : NULL;
}

// The environment that preloads lib into a command (before its settings, GRPOLAB_KILL_AT=n
// ...): sanitized builds want their runtime first among the preloaded libraries, so ASan is
// told not to check the order.
static inline void preload_env(char *buf, size_t len, const char *lib) {
    const char *asan = getenv("ASAN_OPTIONS");
    snprintf(buf, len, "ASAN_OPTIONS='%s%sverify_asan_link_order=0' LD_PRELOAD='%s'", asan ? asan : "",
             asan && asan[0] ? ":" : "", lib);
}

// The environment of a command that HDF5 leaks its own blocks in (a full disk, a corrupt
// object header): in a sanitized build, LeakSanitizer leaves out exactly those
// (tests/lsan_hdf5.supp, which needs the slow unwinder to see them) and reports any other
// leak with an exit code of its own, 86, which no expected exit code equals.
static inline void hdf5_leak_env(char *buf, size_t len) {
    const char *asan = getenv("ASAN_OPTIONS");
    snprintf(buf, len, "ASAN_OPTIONS='%s%sfast_unwind_on_malloc=0:exitcode=86' "
             "LSAN_OPTIONS='suppressions=tests/lsan_hdf5.supp:print_suppressions=0'", asan ? asan : "",
             asan && asan[0] ? ":" : "");
}

// The rows of a column of a log that may not be readable (yet): -1 then.
static inline int64_t try_rows(const char *path, const char *dataset) {
    char err[512];
    int64_t n = -1;
    RunLogReader *rd = runlog_reader_open(path, err, sizeof err);
    double *x = rd ? runlog_read_column(rd, dataset, &n, err, sizeof err) : NULL;
    if (!x) n = -1;
    free(x);
    if (rd) runlog_reader_close(rd);
    return n;
}

// Fails unless the file at p holds exactly the bytes b (n).
static inline void assert_bytes(const char *p, const char *b, size_t n) {
    size_t m = 0;
    char *now = tu_read_file(p, &m);
    if (!now) fail_msg("%s is gone", p);
    if (m != n || memcmp(now, b, n) != 0) fail_msg("%s changed (%zu bytes, was %zu)", p, m, n);
    free(now);
}

// Flips a byte inside the object header of the dataset name ("train/x") of the HDF5 file at
// path (closed): its checksum then fails, as a flush cut short can leave it.
static inline void break_object_header(const char *path, const char *name) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    H5O_info_t oi;
    assert_true(f >= 0 && H5Oget_info_by_name2(f, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, (long)oi.addr + 16, SEEK_SET), 0);
    int c = fgetc(fp);
    assert_int_equal(fseek(fp, (long)oi.addr + 16, SEEK_SET), 0);
    fputc(c ^ 0xff, fp);
    fclose(fp);
}

#endif
