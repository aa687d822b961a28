// test_check_includes.c: scripts/check-includes.sh (`make check-includes`) on small source
// trees built here, laid out as src/ is: a tree that keeps README's layers passes, and a
// circle of includes, an include of a higher layer and a circle of calls between objects
// each fail, naming the units; and src/ itself passes.
#include "test_util.h"

#include <sys/stat.h>

static char root[64];

// Writes text to root/rel, making its folders.
static void put(const char *rel, const char *text) {
    char cmd[512], path[256];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

// Runs the check on root/src (with root/obj when objs); its exit code, its output in out.
static int check(int objs, char *out, size_t cap) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "scripts/check-includes.sh %s/src %s%s 2>&1", root,
             objs ? root : "", objs ? "/obj" : "");
    return tu_run_cmd(cmd, out, cap);
}

// A tree that keeps the layers: rl/ uses io/ and kernels/, io/ uses common.h.
static void clean_tree(void) {
    put("src/common.h", "#pragma once\n");
    put("src/kernels/k.h", "#include \"../common.h\"\n");
    put("src/sim/io/a.h", "#include \"../../common.h\"\n");
    put("src/sim/io/a.c", "#include \"a.h\"\n#include <stdio.h>\n");
    put("src/sim/rl/b.h", "#include \"../io/a.h\"\n");
    put("src/sim/rl/b.c", "#include \"b.h\"\n#include \"../../kernels/k.h\"\n#include \"gen_version.h\"\n");
}

static int setup(void **state) {
    snprintf(root, sizeof root, "/tmp/grpolab_chkinc_XXXXXX");
    assert_non_null(mkdtemp(root));
    clean_tree();
    return 0;
}

static int teardown(void **state) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd);
}

static void test_clean_tree_passes(void **state) {
    char out[4096];
    assert_int_equal(check(0, out, sizeof out), 0);
    // b->k, b->a, k->common, a->common: four unit arrows (a.c with a.h is one unit;
    // gen_version.h is not in the tree and counts as none)
    assert_non_null(strstr(out, "4 include arrows"));
}

static void test_circle_fails(void **state) {
    char out[4096];
    // rl/c.c uses rl/d, rl/d.c uses rl/c: no file includes itself, but the units use each other
    put("src/sim/rl/c.h", "int c(void);\n");
    put("src/sim/rl/d.h", "int d(void);\n");
    put("src/sim/rl/c.c", "#include \"c.h\"\n#include \"d.h\"\n");
    put("src/sim/rl/d.c", "#include \"d.h\"\n#include \"c.h\"\n");
    assert_int_equal(check(0, out, sizeof out), 1);
    assert_non_null(strstr(out, "use each other"));
    assert_non_null(strstr(out, "sim/rl/c"));
    assert_non_null(strstr(out, "sim/rl/d"));
}

static void test_arrow_up_fails(void **state) {
    char out[4096];
    put("src/sim/io/a.c", "#include \"a.h\"\n#include \"../rl/b.h\"\n");  // io/ below rl/
    assert_int_equal(check(0, out, sizeof out), 1);
    assert_non_null(strstr(out, "sim/io/a.c includes ../rl/b.h"));
    assert_non_null(strstr(out, "arrow up"));
    // io/ and world/ share a rank: neither may include the other
    put("src/sim/io/a.c", "#include \"a.h\"\n");
    put("src/sim/world/w.c", "#include \"../io/a.h\"\n");
    assert_int_equal(check(0, out, sizeof out), 1);
    assert_non_null(strstr(out, "sim/world/w.c includes ../io/a.h"));
    // a folder of no layer
    put("src/sim/world/w.c", "\n");
    put("src/sim/extra/x.c", "#include \"../io/a.h\"\n");
    assert_int_equal(check(0, out, sizeof out), 1);
    assert_non_null(strstr(out, "in no layer"));
}

static void test_call_circle_fails(void **state) {
    char out[4096], cmd[1024];
    // two objects that call each other through a declaration, no include between them
    put("src/sim/rl/p.c", "int q(int);\nint p(int x) { return x ? q(x - 1) : 0; }\n");
    put("src/sim/rl/q.c", "int p(int);\nint q(int x) { return x ? p(x - 1) : 1; }\n");
    snprintf(cmd, sizeof cmd, "mkdir -p %s/obj/sim/rl && cc -c %s/src/sim/rl/p.c -o %s/obj/sim/rl/p.o && "
             "cc -c %s/src/sim/rl/q.c -o %s/obj/sim/rl/q.o", root, root, root, root, root);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(check(0, out, sizeof out), 0);  // the includes alone see nothing
    assert_int_equal(check(1, out, sizeof out), 1);
    assert_non_null(strstr(out, "call each other"));
    assert_non_null(strstr(out, "sim/rl/p"));
    assert_non_null(strstr(out, "sim/rl/q"));
    // one direction only passes
    put("src/sim/rl/q.c", "int q(int x) { return x + 1; }\n");
    snprintf(cmd, sizeof cmd, "cc -c %s/src/sim/rl/q.c -o %s/obj/sim/rl/q.o", root, root);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(check(1, out, sizeof out), 0);
    assert_non_null(strstr(out, "1 call arrows"));
}

static void test_src_passes(void **state) {
    char out[8192];
    assert_int_equal(tu_run_cmd("scripts/check-includes.sh src 2>&1", out, sizeof out), 0);
    assert_non_null(strstr(out, "no circle, none up"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_clean_tree_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_circle_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_arrow_up_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_circle_fails, setup, teardown),
        cmocka_unit_test(test_src_passes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
