// test_question_set.c: the training question sets of Fig. 6 (train.question_set;
// docs/world.md, "Question sets"). Each named set draws only its levels, in the shares its
// weights give; the out-of-distribution pool draws only its own kind of question (3-4 + and -,
// no *, operands 1-30, at most one pair of parentheses), from the training partition, none
// of them a question of the main pool; the config's choices are the world's sets; and the
// trainer draws a run's questions from its set (the /questions table of a short run).
#include <math.h>

#include "sim/io/config.h"
#include "train_fixture.h"

#define N_DRAW 20000

// The shares of levels 0..5 among N_DRAW questions of set qs at seed.
static void level_counts(const WorldQuestionSet *qs, uint64_t seed, int count[6]) {
    memset(count, 0, 6 * sizeof(int));
    for (int i = 0; i < N_DRAW; i++) {
        Task t;
        world_question_set_task(qs, seed, i, &t);
        assert_true(t.level >= 0 && t.level <= 5);
        assert_int_equal(t.index, i);
        count[t.level]++;
    }
}

static void test_sets_draw_their_levels(void **state) {
    assert_int_equal(world_num_question_sets(), 4);
    assert_null(world_question_set(4));
    assert_null(world_question_set_find("weights"));  // the config's default, not a set
    assert_null(world_question_set_find("level2"));
    // the levels each set may draw, and the share of each (uniform over them)
    static const struct {
        const char *name;
        int levels[6];  // 1 where level l (0 = the OOD pool) belongs to the set
    } WANT[] = {
        {"level1", {0, 1, 0, 0, 0, 0}},
        {"levels1-3", {0, 1, 1, 1, 0, 0}},
        {"all", {0, 1, 1, 1, 1, 1}},
        {"ood", {1, 0, 0, 0, 0, 0}},
    };
    for (size_t k = 0; k < sizeof WANT / sizeof WANT[0]; k++) {
        const WorldQuestionSet *qs = world_question_set_find(WANT[k].name);
        assert_non_null(qs);
        int count[6], m = 0;
        level_counts(qs, 7, count);
        for (int l = 0; l <= 5; l++) m += WANT[k].levels[l];
        printf("  %-9s levels 0..5: %d %d %d %d %d %d\n", qs->name, count[0], count[1], count[2], count[3],
               count[4], count[5]);
        for (int l = 0; l <= 5; l++) {
            if (!WANT[k].levels[l]) {
                assert_int_equal(count[l], 0);
                continue;
            }
            // binomial(N, 1/m): within 5 standard deviations of N/m
            double p = 1.0 / m, sd = sqrt(N_DRAW * p * (1 - p));
            assert_true(fabs(count[l] - N_DRAW * p) <= 5 * sd + 1e-9);
        }
    }
    // a named set of levels draws the questions of world_train_task_mix with its weights
    const WorldQuestionSet *l13 = world_question_set_find("levels1-3");
    const double w[5] = {1, 1, 1, 0, 0};
    for (int i = 0; i < 500; i++) {
        Task a, b;
        world_question_set_task(l13, 1234, i, &a);
        world_train_task_mix(1234, i, w, &b);
        assert_string_equal(a.question, b.question);
        assert_true(a.answer == b.answer);
    }
}

static void test_ood_pool(void **state) {
    const WorldQuestionSet *ood = world_question_set_find("ood");
    assert_non_null(ood);
    assert_true(ood->ood);
    int ops_seen[8] = {0}, parens = 0, negative = 0;
    for (int i = 0; i < N_DRAW; i++) {
        Task t, u;
        world_ood_train_task(5, i, &t);
        world_ood_train_task(5, i, &u);  // deterministic
        assert_string_equal(t.question, u.question);
        assert_int_equal(t.level, WORLD_LEVEL_OOD);
        assert_int_equal(world_split_of(t.question), SPLIT_TRAIN);
        assert_true(t.hash == world_hash(t.question));
        int64_t v;
        assert_int_equal(world_eval(t.question, &v), 0);
        assert_true(v == t.answer);
        TaskStats st;
        assert_int_equal(world_task_stats(t.question, &st), 0);
        assert_true(st.n_ops >= 3 && st.n_ops <= 4);
        assert_int_equal(st.n_mul, 0);
        assert_true(st.max_operand >= 1 && st.max_operand <= 30);
        assert_true(st.n_paren_pairs <= 1);
        assert_true(st.max_abs_value <= 999);
        ops_seen[st.n_ops]++;
        parens += st.n_paren_pairs;
        negative += t.answer < 0;
    }
    printf("  ood: 3 ops %d, 4 ops %d, with parentheses %d, negative answers %d of %d\n", ops_seen[3],
           ops_seen[4], parens, negative, N_DRAW);
    assert_true(ops_seen[3] > N_DRAW / 4 && ops_seen[4] > N_DRAW / 4);
    assert_true(parens > 0 && negative > 0);
    // another seed, another pool; and a stream of its own: not the main pool's questions at the
    // same seed and index
    int same_seed = 0, same_main = 0;
    for (int i = 0; i < 1000; i++) {
        Task a, b, c;
        world_ood_train_task(5, i, &a);
        world_ood_train_task(6, i, &b);
        world_train_task(5, i, &c);
        same_seed += strcmp(a.question, b.question) == 0;
        same_main += strcmp(a.question, c.question) == 0;
    }
    assert_true(same_seed < 50);
    assert_int_equal(same_main, 0);
    // no OOD question is a question of a level: every level-1 question has one operation and
    // every question of levels 2-5 a multiplication, so none can be among 20000 of the main pool
    for (int i = 0; i < N_DRAW; i++) {
        Task t;
        world_train_task(5, i, &t);
        TaskStats st;
        assert_int_equal(world_task_stats(t.question, &st), 0);
        assert_true(st.n_ops == 1 || st.n_mul > 0);
    }
}

// The enum of train.question_set in the schema lists "weights" and exactly the world's sets.
static void test_config_choices(void **state) {
    const CfgKey *k = NULL;
    for (int i = 0; i < CONFIG_SCHEMA_LEN; i++)
        if (strcmp(CONFIG_SCHEMA[i].section, "train") == 0 && strcmp(CONFIG_SCHEMA[i].key, "question_set") == 0)
            k = &CONFIG_SCHEMA[i];
    assert_non_null(k);
    assert_string_equal(k->def, "weights");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", k->choices);
    int n = 0, weights = 0;
    for (char *save = NULL, *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
        if (strcmp(t, "weights") == 0) weights++;
        else assert_non_null(world_question_set_find(t));
        n++;
    }
    assert_int_equal(weights, 1);
    assert_int_equal(n, 1 + world_num_question_sets());
}

// A run's /questions hold the levels of its set: the OOD pool's 0, level1's 1, and by default
// (weights) the levels the weights allow.
static void test_trainer_draws_the_set(void **state) {
    static const struct {
        const char *set;
        int lo, hi;
    } CASES[] = {{"train.question_set=ood", 0, 0},
                 {"train.question_set=level1", 1, 1},
                 {"train.weight_level1=0", 2, 5}};
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        const char *extra[] = {"train.steps=2", "train.prompts_per_step=4", CASES[k].set};
        Config *c = base_config(extra, 3);
        char path[160];
        snprintf(path, sizeof path, "%s/qset%zu.h5", dir, k);
        run_ok(c, path, 0);
        int64_t n, ni;
        double *lv = col(path, "questions/level", &n), *idx = col(path, "questions/question_index", &ni);
        assert_int_equal(n, 2 * 4);
        assert_int_equal(ni, n);
        for (int64_t i = 0; i < n; i++) {
            assert_true(lv[i] >= CASES[k].lo && lv[i] <= CASES[k].hi);
            assert_true(idx[i] == (double)i);  // step * P + p
        }
        free(lv);
        free(idx);
        config_free(c);
    }
    // a bad value names the key and the value
    char out[4096], args[512];
    snprintf(args, sizeof args, "train --set train.init=%s --set run.backend=cpu --set train.question_set=gsm8k "
             "--out %s/bad_qset.h5", model_path, dir);
    int rc = tu_run_cli(args, out, sizeof out);
    printf("  --set train.question_set=gsm8k -> exit %d: %s", rc, out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "train.question_set"));
    assert_non_null(strstr(out, "gsm8k"));
}

int main(void) {
    (void)assert_same_logs, (void)tiny_model_config;  // the fixture's, for the other trainer tests
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sets_draw_their_levels),
        cmocka_unit_test(test_ood_pool),
        cmocka_unit_test(test_config_choices),
        cmocka_unit_test(test_trainer_draws_the_set),
    };
    return cmocka_run_group_tests_name("question_set", tests, setup, teardown);
}
