// test_bench_rl.c: `grpolab bench-rl` (src/sim/cli/cmd_bench_rl.c) on a tiny model: the step's
// token counts against the lengths it writes, its FLOP count against the closed form of
// docs/benchmarks.md computed here from the model's dimensions, and its bad-input errors.
#include "test_util.h"

// the tiny model: d_model 32, 1 layer, 4 heads (2 KV heads), d_ff 64, the tokenizer's 58 tokens
enum { V = 58, C = 32, L = 1, NH = 4, NKV = 2, FF = 64, P = 2, G = 4, BUDGET = 12 };
#define TINY "--config experiments/fig5/grpo.ini --set train.init=/nonexistent.h5 " \
    "--set model.d_model=32 --set model.n_layers=1 --set model.d_ff=64 " \
    "--set train.prompts_per_step=2 --set train.group_size=4 --set train.minibatch_size=4 " \
    "--set world.max_new_tokens=12 --set run.threads=1 --steps 2 --warmup 1"

// Runs bench-rl with extra args; its RESULT line's value of each key in keys (n of them).
static void run_bench(const char *extra, const char *lengths, const char **keys, double *vals, int n) {
    const char *bin = getenv("GRPOLAB_BIN");
    char cmd[2048], line[4096];
    snprintf(cmd, sizeof cmd, "%s bench-rl " TINY " %s --lengths-out %s 2>/dev/null",
             bin ? bin : "build/grpolab", extra, lengths);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int found = 0;
    while (fgets(line, sizeof line, p))
        if (strncmp(line, "RESULT ", 7) == 0) {
            found = 1;
            for (int k = 0; k < n; k++) {
                char pat[64];
                snprintf(pat, sizeof pat, " %s=", keys[k]);
                const char *at = strstr(line, pat);
                assert_non_null(at);
                vals[k] = atof(at + strlen(pat));
            }
        }
    assert_int_equal(pclose(p), 0);
    assert_true(found);
}

// Sums over the lengths file's responses: generated tokens, processed positions, the
// forward FLOPs of those positions (2 per weight of a matrix product, the tied output head
// once, plus 4 * L * C per attended key), and the rollout's FLOPs: the same with each
// group's prompt once (its G responses, consecutive in the file, share it).
static int read_lengths(const char *path, double *gen, double *seq, double *flops, double *rollout,
                        int *lens, double *fmin, double *fmax) {
    double Nmm = L * ((double)C * C + 2.0 * C * (NKV * C / NH) + (double)C * C + 3.0 * C * FF) + (double)V * C;
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int s, pl, rl, n = 0;
    *gen = *seq = *flops = *rollout = 0;
    *fmin = INFINITY;
    *fmax = 0;
    while (fscanf(f, "%d %d %d", &s, &pl, &rl) == 3) {
        double pos = pl + rl - 1, fl = pos * 2 * Nmm + 4.0 * L * C * pos * (pos + 1) / 2;
        double prompt = pl * 2 * Nmm + 4.0 * L * C * pl * (pl + 1.0) / 2;
        *gen += rl;
        *seq += pos;
        *flops += fl;
        *rollout += fl - (n % G == 0 ? 0 : prompt);
        *fmin = fl < *fmin ? fl : *fmin;
        *fmax = fl > *fmax ? fl : *fmax;
        lens[n++] = rl;
    }
    fclose(f);
    return n;
}

static void test_forced_counts(void **state) {
    char dir[] = "/tmp/grpolab-bench-rl-XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/len.txt", dir);
    const char *keys[] = {"gen_tokens", "seq_tokens", "rollout_gflop", "update_gflop", "steps"};
    double v[5], gen, seq, flops, rollout, fmin, fmax;
    int lens[64];
    run_bench("--forced", path, keys, v, 5);
    int n = read_lengths(path, &gen, &seq, &flops, &rollout, lens, &fmin, &fmax);
    assert_int_equal(n, 2 * P * G);  // two timed steps
    for (int i = 0; i < n; i++) assert_int_equal(lens[i], BUDGET);
    assert_int_equal((int)v[4], 2);
    assert_true(v[0] == 2.0 * P * G * BUDGET && v[0] == gen);
    assert_true(v[1] == seq);
    tu_check_rel("rollout GFLOP against the closed form", fabs(v[2] - rollout * 1e-9) / (rollout * 1e-9), 1e-6);
    assert_true(rollout < flops);  // the prompts, once per group
    // forward and backward (3x) and the old log-probs (1x), but for the first minibatch of
    // each step (4 responses, which ones unknown here), whose come from its own forward
    double hi = (4 * flops - 2 * 4 * fmin) * 1e-9, lo = (4 * flops - 2 * 4 * fmax) * 1e-9;
    printf("  update %.9g GFLOP, between %.9g and %.9g\n", v[3], lo, hi);
    assert_true(v[3] >= lo * (1 - 1e-9) && v[3] <= hi * (1 + 1e-9));
    tu_remove_dir(dir);
}

static void test_own_lengths(void **state) {
    char dir[] = "/tmp/grpolab-bench-rl-XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/len.txt", dir);
    const char *keys[] = {"gen_tokens", "seq_tokens"};
    double v[2], gen, seq, flops, rollout, fmin, fmax;
    int lens[64];
    run_bench("", path, keys, v, 2);
    int n = read_lengths(path, &gen, &seq, &flops, &rollout, lens, &fmin, &fmax);
    assert_int_equal(n, 2 * P * G);
    for (int i = 0; i < n; i++) assert_true(lens[i] >= 1 && lens[i] <= BUDGET);
    assert_true(v[0] == gen && v[1] == seq);
    tu_remove_dir(dir);
}

// The sgemm figure a phase is measured against: on one thread the one product's, on two the
// better of one product on both threads and one product per thread at once.
static void test_sgemm_limit(void **state) {
    char dir[] = "/tmp/grpolab-bench-rl-XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/len.txt", dir);
    const char *keys[] = {"threads", "sgemm_rollout", "sgemm_rollout_one", "sgemm_update", "sgemm_update_one"};
    double v[5];
    run_bench("", path, keys, v, 5);
    assert_int_equal((int)v[0], 1);
    assert_true(v[1] > 0 && v[1] == v[2] && v[3] > 0 && v[3] == v[4]);
    run_bench("--set run.threads=2", path, keys, v, 5);
    printf("  2 threads: rollout limit %.1f (one product %.1f), update %.1f (%.1f) GFLOP/s\n", v[1], v[2],
           v[3], v[4]);
    assert_int_equal((int)v[0], 2);
    assert_true(v[2] > 0 && v[1] >= v[2] && v[4] > 0 && v[3] >= v[4]);
    tu_remove_dir(dir);
}

// The fastest step's rate of each phase: at least the rate over all steps (the steps' FLOPs
// over their summed time), and that rate itself when one step is timed.
static void test_fastest_step(void **state) {
    char dir[] = "/tmp/grpolab-bench-rl-XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/len.txt", dir);
    const char *keys[] = {"rollout_gflop", "rollout_s", "update_gflop", "update_s", "rollout_gflops_fastest",
                          "update_gflops_fastest", "steps"};
    double v[7];
    for (int steps = 3; steps >= 1; steps -= 2) {
        char extra[32];
        snprintf(extra, sizeof extra, "--forced --steps %d", steps);
        run_bench(extra, path, keys, v, 7);
        assert_int_equal((int)v[6], steps);
        // the rates over all steps, with the RESULT line's rounding of the seconds (6 decimals)
        // and of the fastest rates (3 decimals)
        double ro_lo = v[0] / (v[1] + 5e-7) - 5e-4, ro_hi = v[0] / (v[1] - 5e-7) + 5e-4;
        double up_lo = v[2] / (v[3] + 5e-7) - 5e-4, up_hi = v[2] / (v[3] - 5e-7) + 5e-4;
        printf("  %d step(s): rollout %.3f GFLOP/s, fastest %.3f; update %.3f, fastest %.3f\n", steps,
               v[0] / v[1], v[4], v[2] / v[3], v[5]);
        assert_true(v[4] >= ro_lo && v[5] >= up_lo);
        if (steps == 1) assert_true(v[4] <= ro_hi && v[5] <= up_hi);
    }
    tu_remove_dir(dir);
}

static void test_bad_input(void **state) {
    char out[4096];
    assert_int_equal(tu_run_cli("bench-rl", out, sizeof out), 2);
    assert_non_null(strstr(out, "--config"));
    assert_int_equal(tu_run_cli("bench-rl --config experiments/fig5/grpo.ini --set train.minibatch_size=48", out,
                                sizeof out), 2);
    assert_non_null(strstr(out, "train.minibatch_size = 48"));
    assert_int_equal(tu_run_cli("bench-rl --config experiments/fig5/grpo.ini --steps 0", out, sizeof out), 2);
    assert_non_null(strstr(out, "--steps"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forced_counts),
        cmocka_unit_test(test_own_lengths),
        cmocka_unit_test(test_sgemm_limit),
        cmocka_unit_test(test_fastest_step),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
