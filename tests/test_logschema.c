// test_logschema.c: the run-log tables of src/sim/io/logschema.c against what depends on them:
// docs/hdf5-schema.md (its column lists are the output of `grpolab schema`), the logs that
// grpolab b4fd00f wrote (tests/fixtures/runlog: every table, column, type and doc attribute
// as the schema says, and the analysis reads them), every row struct field being a column,
// and rows appended by field name arriving in the column of that name.
#include <stddef.h>
#include <sys/stat.h>

#include <hdf5.h>

#include "test_util.h"

#include "analysis/runs.h"
#include "common.h"
#include "sim/io/logschema.h"
#include "sim/io/runlog.h"

#define DOC_PATH "docs/hdf5-schema.md"
#define FIXTURE_DIR "tests/fixtures/runlog/"

static char g_dir[64];

static int setup(void **state) {
    snprintf(g_dir, sizeof g_dir, "/tmp/grpolab-logschema-XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s (run the tests from the repository root)", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    char *text = malloc((size_t)len + 1);
    assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
    text[len] = '\0';
    fclose(f);
    return text;
}

static char *md_of(const LogKind *k) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    logschema_print_md(k, m);
    fclose(m);
    return buf;
}

// ---------------------------------------------------------------- the doc
// The text between the lines "<!-- begin: grpolab schema KIND ...-->" and
// "<!-- end: grpolab schema KIND -->" of doc (malloc'd), or NULL if there is no such block.
static char *doc_block(const char *doc, const char *kind) {
    char begin[64], end[64];
    snprintf(begin, sizeof begin, "<!-- begin: grpolab schema %s ", kind);
    snprintf(end, sizeof end, "<!-- end: grpolab schema %s -->", kind);
    const char *a = strstr(doc, begin), *b = strstr(doc, end);
    if (!a || !b) return NULL;
    a = strchr(a, '\n');
    if (!a || a + 1 > b) return NULL;
    a++;
    char *s = malloc((size_t)(b - a) + 1);
    memcpy(s, a, (size_t)(b - a));
    s[b - a] = '\0';
    return s;
}

static void test_doc_is_generated(void **state) {
    char *doc = read_text(DOC_PATH);
    for (int i = 0; i < N_LOG_KINDS; i++) {
        const LogKind *k = LOG_KINDS[i];
        char *want = md_of(k), *have = doc_block(doc, k->kind);
        if (!have) fail_msg("%s has no block '<!-- begin: grpolab schema %s ... -->' .. '<!-- end: grpolab schema %s -->'",
                            DOC_PATH, k->kind, k->kind);
        if (strcmp(want, have) != 0) {
            int line = 1;
            const char *w = want, *h = have;
            while (*w && *w == *h) line += *w == '\n', w++, h++;
            const char *wl = w, *hl = h;
            while (wl > want && wl[-1] != '\n') wl--;
            while (hl > have && hl[-1] != '\n') hl--;
            fail_msg("%s: the columns of the %s log differ from `grpolab schema %s` at line %d of the block:\n"
                     "  doc:    %.*s\n  schema: %.*s\n(paste the output of `grpolab schema %s` into the block)",
                     DOC_PATH, k->kind, k->kind, line, (int)strcspn(hl, "\n"), hl, (int)strcspn(wl, "\n"),
                     wl, k->kind);
        }
        printf("  %s: the %s log's %d tables as `grpolab schema %s` prints them\n", DOC_PATH, k->kind,
               k->n_tables, k->kind);
        free(want);
        free(have);
    }
    free(doc);
}

// ---------------------------------------------------------------- the tables themselves
static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Every field of a table's row struct is a column: the columns' slots, in offset order, follow
// each other as the C layout puts consecutive fields (only alignment padding between them).
static void test_rows_are_columns(void **state) {
    char err[512] = "", path[128];
    snprintf(path, sizeof path, "%s/declare.h5", g_dir);
    for (int i = 0; i < N_LOG_KINDS; i++) {
        const LogKind *k = LOG_KINDS[i];
        RunLog *rl = runlog_create(path, 1, err, sizeof err);
        assert_non_null(rl);
        if (logschema_declare(rl, k, err, sizeof err) != 0) fail_msg("%s", err);  // layout checks
        assert_int_equal(runlog_close(rl, err, sizeof err), 0);
        assert_ptr_equal(logschema_kind(k->kind), k);
        for (int t = 0; t < k->n_tables; t++) {
            const TableSpec *s = k->tables[t];
            assert_true(s->rows && s->rows[0]);
            size_t end = 0, max_align = 1;
            for (int n = 0; n < s->n_cols; n++) {  // by increasing offset
                const TableColumn *next = NULL;
                for (int c = 0; c < s->n_cols; c++)
                    if (s->cols[c].offset >= end && (!next || s->cols[c].offset < next->offset)) next = &s->cols[c];
                assert_non_null(next);
                assert_non_null(next->unit);
                size_t slot = s->layout == ROW_POINTERS ? sizeof(void *)
                              : next->spec.type == COL_I32 || next->spec.type == COL_F32 ? 4 : 8;
                if (next->offset != align_up(end, slot))
                    fail_msg("/%s: bytes %zu..%zu of its row struct are no column (a field without a column?)",
                             s->name, end, next->offset);
                end = next->offset + slot;
                if (slot > max_align) max_align = slot;
            }
            if (align_up(end, max_align) != s->row_size)
                fail_msg("/%s: its row struct has %zu bytes, its columns cover %zu", s->name, s->row_size, end);
        }
    }
    assert_null(logschema_kind("pretrain"));
}

// Rows filled by field name come back in the column of that name.
static void test_rows_by_field_name(void **state) {
    char err[512] = "", path[128];
    snprintf(path, sizeof path, "%s/train.h5", g_dir);
    RunLog *rl = runlog_create(path, 1, err, sizeof err);
    assert_non_null(rl);
    if (logschema_declare(rl, &LOG_KIND_TRAIN, err, sizeof err) != 0 || runlog_start_swmr(rl, err, sizeof err) != 0)
        fail_msg("%s", err);
    static const struct {
        const char *name;
        double value;
    } want[] = {{"step", 1}, {"reward_mean", 2}, {"length_mean", 3}, {"length_correct", 4},
                {"length_incorrect", 5}, {"truncation_rate", 6}, {"loop_rate", 7},
                {"disagreement_rate", 8}, {"selfcheck_rate", 9}, {"loss", 10}, {"grad_norm", 11},
                {"clip_frac_low", 12}, {"clip_frac_high", 13}, {"kl", 14}, {"entropy", 15},
                {"lr", 16}, {"tokens", 17}, {"rollout_seconds", 18}, {"update_seconds", 19},
                {"mixed_group_frac", 20}, {"bias_cosine", 21}};
    TrainRow row = {.step = 1, .reward_mean = 2, .length_mean = 3, .length_correct = 4,
                    .length_incorrect = 5, .truncation_rate = 6, .loop_rate = 7,
                    .disagreement_rate = 8, .selfcheck_rate = 9, .loss = 10, .grad_norm = 11,
                    .clip_frac_low = 12, .clip_frac_high = 13, .kl = 14, .entropy = 15, .lr = 16,
                    .tokens = 17, .rollout_seconds = 18, .update_seconds = 19,
                    .mixed_group_frac = 20, .bias_cosine = 21};
    assert_int_equal(LOG_TRAIN.n_cols, (int)(sizeof want / sizeof want[0]));
    ResponseRow resp[2] = {{.step = 5, .question_index = 6, .level = 7, .length = 8, .reward = 9,
                            .correct = 10, .truncated = 11, .advantage = 12.5f, .self_checked = 13,
                            .disagreement = 14, .looped = 15, .gave_up = 16, .token_offset = 17}};
    resp[1] = resp[0];
    resp[1].advantage = -1.5f;
    int32_t tstep[3] = {4, 4, 4};
    float tw[3] = {0.5f, -0.25f, 0}, tlp[3] = {-1, -2, -3};
    TokenColumns tc = {.step = tstep, .weight = tw, .logp_old = tlp};
    if (runlog_append_rows(rl, &LOG_TRAIN, 1, &row, err, sizeof err) != 0 ||
        runlog_append_rows(rl, &LOG_RESPONSES, 2, resp, err, sizeof err) != 0 ||
        runlog_append_columns(rl, &LOG_TOKENS, 3, &tc, err, sizeof err) != 0 ||
        runlog_close(rl, err, sizeof err) != 0)
        fail_msg("%s", err);

    RunLogReader *rd = runlog_reader_open(path, err, sizeof err);
    assert_non_null(rd);
    char ds[96];
    int64_t n;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        snprintf(ds, sizeof ds, "train/%s", want[i].name);
        double *v = runlog_read_column(rd, ds, &n, err, sizeof err);
        if (!v) fail_msg("%s", err);
        assert_int_equal(n, 1);
        if (v[0] != want[i].value) fail_msg("/%s holds %g, its field was %g", ds, v[0], want[i].value);
        free(v);
    }
    static const char *const rnames[] = {"step", "question_index", "level", "length", "reward", "correct",
                                         "truncated", "advantage", "self_checked", "disagreement",
                                         "looped", "gave_up", "token_offset"};
    for (int i = 0; i < 13; i++) {
        snprintf(ds, sizeof ds, "responses/%s", rnames[i]);
        double *v = runlog_read_column(rd, ds, &n, err, sizeof err);
        if (!v) fail_msg("%s", err);
        assert_int_equal(n, 2);
        double first = i == 7 ? 12.5 : 5 + i, second = i == 7 ? -1.5 : first;
        if (v[0] != first || v[1] != second) fail_msg("/%s holds %g %g, expected %g %g", ds, v[0], v[1], first, second);
        free(v);
    }
    double *w = runlog_read_column(rd, "tokens/weight", &n, err, sizeof err);
    double *lp = runlog_read_column(rd, "tokens/logp_old", &n, err, sizeof err);
    assert_true(w && lp && n == 3 && w[0] == 0.5 && w[1] == -0.25 && lp[2] == -3);
    free(w);
    free(lp);
    runlog_reader_close(rd);
}

// ---------------------------------------------------------------- logs of grpolab b4fd00f
// The columns the schema gained after b4fd00f: a log of b4fd00f lacks them, and the readers
// take such a log as one that does not know them (tested below).
static const struct {
    const char *kind, *table, *column;
} ADDED_SINCE[] = {
    {"train", "eval", "truncation_incorrect"},
    {"eval", "eval", "truncation_incorrect"},
    {"eval", "responses", "sample"},
};

static int added_since(const LogKind *k, const TableSpec *s, const char *col) {
    for (size_t i = 0; i < sizeof ADDED_SINCE / sizeof *ADDED_SINCE; i++)
        if (!strcmp(ADDED_SINCE[i].kind, k->kind) && !strcmp(ADDED_SINCE[i].table, s->name) &&
            !strcmp(ADDED_SINCE[i].column, col))
            return 1;
    return 0;
}

// Every table every log of kind k has (k->n_always: the others only with a setting such as
// diagnostics.compare), and only those, with every column of the schema but those added
// since (ADDED_SINCE), and only those, of the schema's type and with its doc attribute; the
// root attribute kind.
static void assert_log_matches(const char *path, const LogKind *k) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    H5G_info_t info;
    assert_true(H5Gget_info(f, &info) >= 0);
    assert_int_equal((int)info.nlinks, k->n_always);
    for (int t = 0; t < k->n_always; t++) {
        const TableSpec *s = k->tables[t];
        hid_t g = H5Gopen2(f, s->name, H5P_DEFAULT);
        if (g < 0) fail_msg("%s has no table /%s", path, s->name);
        assert_true(H5Gget_info(g, &info) >= 0);
        int added = 0;
        for (int c = 0; c < s->n_cols; c++) added += added_since(k, s, s->cols[c].spec.name);
        if ((int)info.nlinks != s->n_cols - added)
            fail_msg("%s: /%s has %d columns, the schema %d of which %d are newer", path, s->name, (int)info.nlinks,
                     s->n_cols, added);
        for (int c = 0; c < s->n_cols; c++) {
            const ColumnSpec *col = &s->cols[c].spec;
            if (added_since(k, s, col->name)) continue;
            hid_t d = H5Dopen2(g, col->name, H5P_DEFAULT);
            if (d < 0) fail_msg("%s has no column /%s/%s", path, s->name, col->name);
            hid_t ft = H5Dget_type(d);
            int is_int = H5Tget_class(ft) == H5T_INTEGER, size = (int)H5Tget_size(ft);
            int type = is_int ? (size == 4 ? COL_I32 : COL_I64) : (size == 4 ? COL_F32 : COL_F64);
            if (type != (int)col->type) fail_msg("%s: /%s/%s has another type than the schema's", path, s->name, col->name);
            hid_t a = H5Aopen(d, "doc", H5P_DEFAULT), st = H5Tcopy(H5T_C_S1);
            H5Tset_size(st, H5T_VARIABLE);
            H5Tset_cset(st, H5T_CSET_UTF8);
            char *doc = NULL;
            assert_true(a >= 0 && H5Aread(a, st, &doc) >= 0);
            if (strcmp(doc, col->doc) != 0)
                fail_msg("%s: /%s/%s has doc \"%s\", the schema \"%s\"", path, s->name, col->name, doc, col->doc);
            H5free_memory(doc);
            H5Tclose(st);
            H5Aclose(a);
            H5Tclose(ft);
            H5Dclose(d);
        }
        H5Gclose(g);
    }
    H5Fclose(f);
    char err[512];
    RunLogReader *rd = runlog_reader_open(path, err, sizeof err);
    if (!rd) fail_msg("%s", err);
    char *kind = runlog_read_attr_str(rd, "kind", err, sizeof err);
    assert_string_equal(kind, k->kind);
    free(kind);
    runlog_reader_close(rd);
    printf("  %s: %d tables, every column as the schema says\n", path, k->n_always);
}

static void test_reference_logs_match_schema(void **state) {
    assert_log_matches(FIXTURE_DIR "b4fd00f_train.h5", &LOG_KIND_TRAIN);
    assert_log_matches(FIXTURE_DIR "b4fd00f_eval.h5", &LOG_KIND_EVAL);
}

// A column of the fixture read with HDF5 itself (not the run-log reader), as doubles.
static double *h5_column(const char *path, const char *ds, int64_t *n) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, ds, H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    hsize_t dims[1];
    assert_int_equal(H5Sget_simple_extent_dims(sp, dims, NULL), 1);
    double *v = malloc((size_t)dims[0] * sizeof *v + 1);
    assert_true(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    *n = (int64_t)dims[0];
    return v;
}

// The train log of b4fd00f (2 steps, 2 prompts x 4 responses, evals at steps 0 and 2 on one
// question per benchmark) reads as the analysis reads a current one.
static void test_reads_reference_logs(void **state) {
    const char *path = FIXTURE_DIR "b4fd00f_train.h5";
    char err[1024] = "";
    Run *r = run_load(path, err, sizeof err);
    if (!r) fail_msg("%s", err);
    assert_string_equal(r->objective, "grpo");
    assert_int_equal(r->seed, 7);
    assert_int_equal(r->n_steps, 2);
    assert_int_equal(r->steps_planned, 2);
    assert_true(r->step[0] == 0 && r->step[1] == 1);
    assert_true(r->reward[0] == 0.625 && r->reward[1] == 0);
    assert_true(fabs(r->len_correct[0] - 34.8) < 1e-12 && isnan(r->len_correct[1]));
    assert_true(fabs(r->len_incorrect[1] - 42.875) < 1e-12);
    assert_int_equal(r->n_evals, 2);
    assert_true(r->eval_step[0] == 0 && r->eval_step[1] == 2);
    // no /eval/truncation_incorrect (nor a greedy eval-run file): the share is not known
    assert_null(r->eval_trunc_incorrect);
    double bad, cut;
    const char *src = "x";
    assert_true(isnan(run_eval_trunc_incorrect(r, -1, &bad, &cut, &src)));
    assert_null(src);
    assert_int_equal(r->final_eval[FINAL_GREEDY].n, 0);
    if (run_load_responses(r, err, sizeof err) != 0) fail_msg("%s", err);
    static const double lengths[16] = {34, 34, 47, 34, 36, 33, 36, 93, 115, 21, 53, 39, 54, 20, 21, 20};
    assert_int_equal(r->n_resp, 16);
    assert_int_equal(r->n_quest, 4);
    assert_int_equal(r->has_tokens, 1);
    int64_t nt, no;
    double *w = h5_column(path, "/tokens/weight", &nt), *off = h5_column(path, "/responses/token_offset", &no);
    assert_int_equal(no, 16);
    for (int i = 0; i < 16; i++) {
        assert_true(r->resp_length[i] == lengths[i]);
        double s = 0;
        for (int t = 0; t < (int)lengths[i]; t++) s += fabs(w[(int64_t)off[i] + t]);
        assert_true(fabs(r->resp_mean_abs_w[i] - s / lengths[i]) <= 1e-15 * (1 + s));
        assert_true(r->q_group_size[i / 4] == 4);
    }
    free(w);
    free(off);
    FailingStates fs[2];
    if (run_failing_states(r, fs, err, sizeof err) != 0) fail_msg("%s", err);
    run_free(r);
    assert_null(run_load(FIXTURE_DIR "b4fd00f_eval.h5", err, sizeof err));
    assert_non_null(strstr(err, "of kind 'eval', expected a train log"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doc_is_generated),
        cmocka_unit_test(test_rows_are_columns),
        cmocka_unit_test(test_rows_by_field_name),
        cmocka_unit_test(test_reference_logs_match_schema),
        cmocka_unit_test(test_reads_reference_logs),
    };
    return cmocka_run_group_tests_name("logschema", tests, setup, teardown);
}
