// test_eval_run.c: `grpolab eval-run` of a finished run (src/sim/cli/commands.h): its greedy
// file repeats the trainer's last evaluation, its sampled file holds K responses per
// question, both read back by the analysis; a file of the run is kept, one of the run before
// it was extended is evaluated again, and a checkpoint of
// another run, a missing one or a log of another kind are refused. (Several samples per
// question themselves: tests/test_pretrain_eval.c.)
#include "train_fixture.h"

#include "analysis/runs.h"

// A finished run of 4 steps with evaluations at steps 0, 2 and 4, on a budget that cuts
// some of the tiny policy's responses (about 10 tokens long).
static void finished_run(const char *path) {
    const char *extra[] = {"train.eval_every=2", "world.max_new_tokens=10"};
    Config *c = base_config(extra, 2);
    run_ok(c, path, 0);
    config_free(c);
}

static void test_eval_run(void **state) {
    char run[200], other[200], out[8192], args[1200], path[300], err[1024];
    snprintf(run, sizeof run, "%s/er.h5", dir);
    snprintf(other, sizeof other, "%s/er_other.h5", dir);
    finished_run(run);
    snprintf(args, sizeof args, "eval-run %s --samples 2 --greedy --threads %d", run, omp_get_max_threads());
    int rc = tu_run_cli(args, out, sizeof out);
    printf("  grpolab %s -> exit %d\n%s", args, rc, out);
    assert_int_equal(rc, 0);
    Run *r = run_load(run, err, sizeof err);
    if (!r) fail_msg("%s", err);
    const struct FinalEval *g = &r->final_eval[FINAL_GREEDY], *s = &r->final_eval[FINAL_SAMPLED];
    const int q = 2 * world_num_benchmarks();  // eval.limit = 2
    assert_int_equal(g->n, q);
    assert_int_equal(g->samples, 1);
    assert_int_equal(g->step, 4);
    assert_int_equal(s->n, 2 * q);
    assert_int_equal(s->samples, 2);
    // the greedy evaluation again is the trainer's last one: the same policy, the same threads
    int e = r->n_evals - 1;
    assert_true(r->eval_step[e] == 4);
    assert_non_null(r->eval_trunc_incorrect);
    printf("  greedy again: %g incorrect, %g cut, score %.4f; the trainer's last: %g, %g, %.4f\n", g->n_incorrect,
           g->trunc_incorrect, g->score, r->eval_n_incorrect[e], r->eval_trunc_incorrect[e], r->eval_score[e]);
    assert_true(g->n_incorrect == r->eval_n_incorrect[e]);
    assert_true(g->len_incorrect == r->eval_len_incorrect[e]);
    assert_true(g->trunc_incorrect == r->eval_trunc_incorrect[e]);
    assert_true(fabs(g->score - r->eval_score[e]) < 1e-12);
    run_free(r);
    // done once: kept; the seed is the run's, so evaluating again gives the same file's figures
    assert_int_equal(tu_run_cli(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "exists (kept; --overwrite evaluates again)"));
    r = run_load(run, err, sizeof err);
    double score = r->final_eval[FINAL_SAMPLED].score, len = r->final_eval[FINAL_SAMPLED].len_incorrect;
    run_free(r);
    snprintf(args, sizeof args, "eval-run %s --samples 2 --overwrite --threads %d", run, omp_get_max_threads());
    assert_int_equal(tu_run_cli(args, out, sizeof out), 0);
    r = run_load(run, err, sizeof err);
    assert_true(r->final_eval[FINAL_SAMPLED].score == score);
    assert_true(r->final_eval[FINAL_SAMPLED].len_incorrect == len || (isnan(len) && isnan(r->final_eval[FINAL_SAMPLED].len_incorrect)));
    run_free(r);
    // the run extended (train.steps raised to 6): its files are of step 4, evaluated again
    const char *longer[] = {"train.eval_every=2", "world.max_new_tokens=10", "train.steps=6"};
    Config *c6 = base_config(longer, 3);
    run_ok(c6, run, 1);
    config_free(c6);
    snprintf(args, sizeof args, "eval-run %s --samples 2 --threads %d", run, omp_get_max_threads());
    rc = tu_run_cli(args, out, sizeof out);
    printf("  grpolab %s -> exit %d\n%s", args, rc, out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "is of this run at step 4, before it went on to step 6: evaluated again"));
    r = run_load(run, err, sizeof err);
    assert_int_equal(r->final_eval[FINAL_SAMPLED].step, 6);
    run_free(r);
    // refused: the checkpoint of another run, a missing checkpoint, a log that is not a train log
    finished_run(other);
    char ck[260], ck_other[260];
    snprintf(ck, sizeof ck, "%s.ckpt.h5", run);
    snprintf(ck_other, sizeof ck_other, "%s.ckpt.h5", other);
    assert_int_equal(rename(ck_other, ck), 0);
    snprintf(args, sizeof args, "eval-run %s --overwrite", run);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 1);
    printf("  %s", out);
    assert_non_null(strstr(out, "belongs to another run"));
    snprintf(args, sizeof args, "eval-run %s", other);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 1);
    printf("  %s", out);
    assert_non_null(strstr(out, "its final checkpoint"));
    final_eval_path(run, FINAL_SAMPLED, path, sizeof path);
    snprintf(args, sizeof args, "eval-run %s", path);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 1);
    printf("  %s", out);
    assert_non_null(strstr(out, "of kind 'eval', expected a train log"));
    static const char *const bad[][2] = {{"eval-run", "no run log given"},
                                         {"eval-run x.h5 --samples 0", "--samples '0'"},
                                         {"eval-run x.h5 --threads two", "--threads 'two'"},
                                         {"eval --model x.h5 --samples 3", "give --temperature"}};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tu_run_cli(bad[i][0], out, sizeof out), 2);
        if (!strstr(out, bad[i][1])) fail_msg("grpolab %s: '%s' lacks '%s'", bad[i][0], out, bad[i][1]);
    }
}

int main(void) {
    (void)assert_same_logs, (void)tiny_model_config;  // the fixture's, for the other trainer tests
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eval_run),
    };
    return cmocka_run_group_tests_name("eval_run", tests, setup, teardown);
}
