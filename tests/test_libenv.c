// test_libenv.c: the settings grpolab makes for its libraries before they start
// (src/sim/io/libenv.h): OpenBLAS's kernels where it fell back to its generic ones, a user's
// OPENBLAS_CORETYPE kept, and the kernels named in `grpolab version` and in this test
// binary itself (tests/libenv_init.c).
#include "test_util.h"

#include "kernels/kernels.h"
#include "sim/io/libenv.h"

static int cpu_has_avx2_fma(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

static void test_blas_core_choice(void **state) {
    (void)state;
    assert_string_equal(libenv_blas_core("Prescott", 1, 1), "SkylakeX");
    assert_string_equal(libenv_blas_core("Prescott", 0, 1), "Haswell");
    assert_null(libenv_blas_core("Prescott", 0, 0));
    // a CPU OpenBLAS knows keeps its kernels, whatever they are
    assert_null(libenv_blas_core("SkylakeX", 1, 1));
    assert_null(libenv_blas_core("Haswell", 1, 1));
    assert_null(libenv_blas_core("Zen", 0, 1));
    assert_null(libenv_blas_core(NULL, 1, 1));
}

// The `blas:` line of `grpolab version` run with env_prefix (e.g. "env -u X").
static void version_blas(const char *env_prefix, char *line, size_t cap) {
    const char *bin = getenv("GRPOLAB_BIN");
    if (!bin) bin = "build/grpolab";
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "%s %s version", env_prefix, bin);
    assert_int_equal(tu_run_cmd(cmd, out, sizeof out), 0);
    const char *b = strstr(out, "blas: ");
    assert_non_null(b);
    size_t n = strcspn(b, "\n");
    snprintf(line, cap, "%.*s", (int)n, b);
    printf("  %s -> %s\n", cmd, line);
}

static void test_version_names_kernels_not_fallback(void **state) {
    (void)state;
    char line[512];
    version_blas("env -u OPENBLAS_CORETYPE", line, sizeof line);
    if (!cpu_has_avx2_fma()) {
        printf("  (this CPU has no AVX2 and FMA: OpenBLAS's own choice stays)\n");
        return;
    }
    assert_null(strstr(line, " Prescott "));
    // the same in this process, which tests/libenv_init.c started as grpolab starts
    printf("  this test binary: %s\n", backend_blas_core());
    assert_string_not_equal(backend_blas_core(), "Prescott");
}

static void test_user_choice_kept(void **state) {
    (void)state;
    if (!cpu_has_avx2_fma()) {
        printf("  skipped: this CPU has no AVX2 and FMA for OpenBLAS's Haswell kernels\n");
        return;
    }
    char line[512];
    version_blas("OPENBLAS_CORETYPE=Haswell", line, sizeof line);
    assert_non_null(strstr(line, " Haswell "));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blas_core_choice),
        cmocka_unit_test(test_version_names_kernels_not_fallback),
        cmocka_unit_test(test_user_choice_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
