// runlog_write.c: the HDF5 run log's writer: create, declare, append, flush, resume, keep a
// copy (layout and contract in runlog.h; shared with the reader and conventions:
// runlog_internal.h).
#include "runlog_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <hdf5.h>

#include "h5util.h"

#include "../../common.h"

// ---------------------------------------------------------------- HDF5 helpers
// A variable-length UTF-8 string type (caller closes it).
static hid_t vstr_type(void) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    if (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

// Writes the scalar attribute name of obj, replacing one of the same name.
static herr_t write_attr(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *buf) {
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0 || (ex > 0 && H5Adelete(obj, name) < 0)) return -1;
    hid_t s = H5Screate(H5S_SCALAR);
    if (s < 0) return -1;
    hid_t a = H5Acreate2(obj, name, ftype, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t r = a < 0 ? -1 : H5Awrite(a, mtype, buf);
    if (a >= 0 && H5Aclose(a) < 0) r = -1;
    H5Sclose(s);
    return r;
}

static herr_t write_str_attr(hid_t obj, const char *name, const char *value) {
    hid_t t = vstr_type();
    if (t < 0) return -1;
    herr_t r = write_attr(obj, name, t, t, &value);
    H5Tclose(t);
    return r;
}

// ---------------------------------------------------------------- the writer
typedef struct {
    char *name;
    ColType type;
    hid_t dset;
    int64_t file_len;  // resume: its length in the file before truncation
    char *buf;         // buffered rows (cap values)
} Column;

typedef struct {
    char *name;
    hid_t group;
    int n_cols;
    Column *cols;     // in declaration order (resume, before declaration: file order)
    int declared;
    const TableSpec *spec;  // declared with runlog_declare: the row layout appends use
    int64_t rows;     // rows in the file (resume, before runlog_start_swmr: rows to keep)
    int64_t n_buf;    // buffered rows
    int64_t cap;      // capacity of the buffers, in rows
    int64_t max_buf;  // buffers are written out before growing past this
} Table;

enum { ST_SETUP, ST_WRITING, ST_BROKEN };

struct RunLog {
    char *path;
    char *part;  // a new log's file until runlog_start_swmr renames it to path (else NULL)
    hid_t file;
    int state;
    int resume;
    int deflate_ok;  // deflate available for writing
    int n_tables;
    Table *tables;
    char broken[384];  // the error that broke the log
    int claimed;       // this writer holds the claim on path (h5util.h out_claim)
};

static const char *const RESERVED_ATTRS[] = {"format", "format_version", "writer_host",
                                             "writer_pid"};

static void table_free(Table *t) {
    for (int c = 0; c < t->n_cols; c++) {
        free(t->cols[c].name);
        free(t->cols[c].buf);
    }
    free(t->cols);
    free(t->name);
}

// Closes every id of rl and frees it; -1 if HDF5 failed to close the file.
static int runlog_free(RunLog *rl) {
    int r = 0;
    for (int i = 0; i < rl->n_tables; i++) {
        Table *t = &rl->tables[i];
        for (int c = 0; c < t->n_cols; c++)
            if (h5_close(t->cols[c].dset) != 0) r = -1;
        if (h5_close(t->group) != 0) r = -1;
        table_free(t);
    }
    free(rl->tables);
    if (h5_close(rl->file) != 0) r = -1;
    if (rl->claimed) out_release(rl->path);
    free(rl->path);
    free(rl->part);
    free(rl);
    return r;
}

// A new log's file appears at its path, whole: renamed there from "<path>.part". 0, or -1
// with a message.
static int publish(RunLog *rl, char *err, size_t errlen) {
    if (!rl->part) return 0;
    if (rename(rl->part, rl->path) != 0)
        return set_err(err, errlen, "run log '%s': cannot rename '%s' to it: %s", rl->path, rl->part,
                       strerror(errno));
    free(rl->part);
    rl->part = NULL;
    return 0;
}

static Table *find_table(const RunLog *rl, const char *name) {
    if (!name) return NULL;
    if (name[0] == '/') name++;
    for (int i = 0; i < rl->n_tables; i++)
        if (strcmp(rl->tables[i].name, name) == 0) return &rl->tables[i];
    return NULL;
}

static int deflate_available(void) {
    unsigned info = 0;
    return H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0 &&
           H5Zget_filter_info(H5Z_FILTER_DEFLATE, &info) >= 0 &&
           (info & H5Z_FILTER_CONFIG_ENCODE_ENABLED);
}


static RunLog *create_impl(const char *path, int overwrite, char *err, size_t errlen) {
    char msg[H5MSG_LEN];
    if (!path || !path[0]) return set_err(err, errlen, "cannot create run log: empty path"), NULL;
    if (check_parent_dir("cannot create run log", path, err, errlen) != 0) return NULL;
    // the claim first: the checks below and the create are then one step for other writers
    if (out_claim("cannot create run log", path, err, errlen) != 0) return NULL;
    struct stat st;
    hid_t fapl = -1, f = -1;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            set_err(err, errlen, "cannot create run log '%s': it is a directory", path);
            goto fail;
        }
        if (!overwrite) {
            set_err(err, errlen, "cannot create run log '%s': the file already exists (choose another path, resume it, or ask to overwrite it)",
                    path);
            goto fail;
        }
    }
    // made beside path and renamed onto it (replacing an old log only now) once set up, so a
    // process killed while it sets the file up leaves no log at path; an existing part file
    // is a dead writer's (the claim is held)
    char *part = path_with_suffix(path, ".part");
    if (unlink(part) != 0 && errno != ENOENT) {
        set_err(err, errlen, "cannot create run log '%s': cannot remove the old '%s': %s", path, part,
                strerror(errno));
        free(part);
        goto fail;
    }
    if ((fapl = runlog_make_fapl()) < 0 || (f = H5Fcreate(part, H5F_ACC_EXCL, H5P_DEFAULT, fapl)) < 0) {
        set_err(err, errlen, "cannot create run log '%s' (HDF5: %s)", path, h5_msg(msg));
        free(part);
        goto fail;
    }
    H5Pclose(fapl);
    RunLog *rl = xcalloc(1, sizeof *rl);
    rl->path = xstrdup(path);
    rl->part = part;
    rl->file = f;
    rl->claimed = 1;
    rl->state = ST_SETUP;
    rl->deflate_ok = deflate_available();
    int version = RUNLOG_FORMAT_VERSION;
    const char *what = "format";
    if (write_str_attr(f, "format", RUNLOG_FORMAT) < 0) goto h5fail;
    what = "format_version";
    if (write_attr(f, "format_version", H5T_STD_I32LE, H5T_NATIVE_INT, &version) < 0) goto h5fail;
    what = "grpolab_version";
    if (write_str_attr(f, "grpolab_version", GRPOLAB_VERSION) < 0) goto h5fail;
    what = "grpolab_commit";
    if (write_str_attr(f, "grpolab_commit", grpolab_commit()) < 0) goto h5fail;
    return rl;
h5fail:
    set_err(err, errlen, "cannot write root attribute '%s' of run log '%s' (HDF5: %s)", what, path,
            h5_msg(msg));
    unlink(rl->part);
    runlog_free(rl);
    return NULL;
fail:
    h5_close(fapl);
    out_release(path);
    return NULL;
}

RunLog *runlog_create(const char *path, int overwrite, char *err, size_t errlen) {
    H5Quiet q = h5_quiet();
    RunLog *rl = create_impl(path, overwrite, err, errlen);
    h5_loud(q);
    return rl;
}

// ---------------------------------------------------------------- root attributes
static int set_attr(RunLog *rl, const char *name, hid_t ftype, hid_t mtype, const void *buf,
                    char *err, size_t errlen) {
    char msg[H5MSG_LEN];
    if (!name || !name[0]) return set_err(err, errlen, "run log '%s': empty attribute name", rl->path);
    for (size_t i = 0; i < sizeof RESERVED_ATTRS / sizeof RESERVED_ATTRS[0]; i++)
        if (strcmp(name, RESERVED_ATTRS[i]) == 0)
            return set_err(err, errlen, "run log '%s': root attribute '%s' is reserved for the run log itself",
                           rl->path, name);
    if (rl->state != ST_SETUP)
        return set_err(err, errlen, "run log '%s': cannot set root attribute '%s' after runlog_start_swmr (SWMR allows no new metadata: set attributes first)",
                       rl->path, name);
    H5Quiet q = h5_quiet();
    int ret = 0;
    if (write_attr(rl->file, name, ftype, mtype, buf) < 0)
        ret = set_err(err, errlen, "cannot write root attribute '%s' of run log '%s' (HDF5: %s)",
                      name, rl->path, h5_msg(msg));
    h5_loud(q);
    return ret;
}

int runlog_set_attr_str(RunLog *rl, const char *name, const char *value, char *err, size_t errlen) {
    if (!value) return set_err(err, errlen, "run log '%s': attribute '%s' has a NULL value", rl->path, name ? name : "");
    H5Quiet q = h5_quiet();
    hid_t t = vstr_type();
    h5_loud(q);
    if (t < 0) return set_err(err, errlen, "run log '%s': cannot make a string type", rl->path);
    int r = set_attr(rl, name, t, t, &value, err, errlen);
    H5Tclose(t);
    return r;
}

int runlog_set_attr_i64(RunLog *rl, const char *name, int64_t value, char *err, size_t errlen) {
    return set_attr(rl, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value, err, errlen);
}

int runlog_set_attr_f64(RunLog *rl, const char *name, double value, char *err, size_t errlen) {
    return set_attr(rl, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value, err, errlen);
}

// ---------------------------------------------------------------- tables
static int valid_name(const char *s) { return s && s[0] && !strchr(s, '/') && strcmp(s, ".") != 0; }

// Checks the declaration itself (names, types, docs).
static int check_specs(const RunLog *rl, const char *table, const ColumnSpec *cols, int n_cols,
                       int64_t chunk_rows, int compress, char *err, size_t errlen) {
    if (!valid_name(table))
        return set_err(err, errlen, "run log '%s': invalid table name '%s' (one non-empty name without '/')",
                       rl->path, table ? table : "(null)");
    if (n_cols < 1 || !cols)
        return set_err(err, errlen, "run log '%s': table /%s declares %d columns (needs at least one)",
                       rl->path, table, cols ? n_cols : 0);
    if (chunk_rows < 0 || chunk_rows > (1 << 20))
        return set_err(err, errlen, "run log '%s': table /%s: chunk_rows = %lld (allowed: 0 for the default %d, or 1 .. %d)",
                       rl->path, table, (long long)chunk_rows, RUNLOG_DEFAULT_CHUNK, 1 << 20);
    if (compress != 0 && compress != 1)
        return set_err(err, errlen, "run log '%s': table /%s: compress = %d (allowed: 0 or 1)",
                       rl->path, table, compress);
    for (int c = 0; c < n_cols; c++) {
        if (!valid_name(cols[c].name))
            return set_err(err, errlen, "run log '%s': table /%s: column %d has an invalid name '%s' (one non-empty name without '/')",
                           rl->path, table, c, cols[c].name ? cols[c].name : "(null)");
        if ((unsigned)cols[c].type > COL_F64)
            return set_err(err, errlen, "run log '%s': column /%s/%s has an invalid type %d (allowed: COL_I32, COL_I64, COL_F32, COL_F64)",
                           rl->path, table, cols[c].name, (int)cols[c].type);
        if (!cols[c].doc || !cols[c].doc[0])
            return set_err(err, errlen, "run log '%s': column /%s/%s has no doc (say what it means and its unit)",
                           rl->path, table, cols[c].name);
        for (int k = 0; k < c; k++)
            if (strcmp(cols[k].name, cols[c].name) == 0)
                return set_err(err, errlen, "run log '%s': table /%s declares column '%s' twice",
                               rl->path, table, cols[c].name);
    }
    return 0;
}

static void init_buffering(Table *t, int64_t chunk_rows) {
    t->max_buf = 4 * chunk_rows > 65536 ? 4 * chunk_rows : 65536;
}

static int create_table(RunLog *rl, const char *table, const ColumnSpec *cols, int n_cols,
                        int64_t chunk_rows, int compress, char *err, size_t errlen) {
    char msg[H5MSG_LEN], what[200];
    int ret = -1;
    hid_t g = -1, dcpl = -1, space = -1, str_t = -1;
    Table t = {0};
    hsize_t zero = 0, unlimited = H5S_UNLIMITED, chunk = (hsize_t)chunk_rows;
    snprintf(what, sizeof what, "table /%s", table);
    if ((g = H5Gcreate2(rl->file, table, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
        (dcpl = H5Pcreate(H5P_DATASET_CREATE)) < 0 || H5Pset_chunk(dcpl, 1, &chunk) < 0 ||
        (space = H5Screate_simple(1, &zero, &unlimited)) < 0 || (str_t = vstr_type()) < 0)
        goto h5fail;
    if (compress && rl->deflate_ok && (H5Pset_shuffle(dcpl) < 0 || H5Pset_deflate(dcpl, 4) < 0)) goto h5fail;
    t.name = xstrdup(table);
    t.group = g;
    t.declared = 1;
    t.cols = xcalloc((size_t)n_cols, sizeof *t.cols);
    for (int c = 0; c < n_cols; c++) {
        Column *col = &t.cols[c];
        col->name = xstrdup(cols[c].name);
        col->type = cols[c].type;
        col->dset = -1;
        t.n_cols = c + 1;
        snprintf(what, sizeof what, "dataset /%s/%s", table, cols[c].name);
        col->dset = H5Dcreate2(g, cols[c].name, runlog_file_type(cols[c].type), space, H5P_DEFAULT, dcpl,
                               H5P_DEFAULT);
        if (col->dset < 0 || write_attr(col->dset, "doc", str_t, str_t, &cols[c].doc) < 0)
            goto h5fail;
    }
    init_buffering(&t, chunk_rows);
    rl->tables = realloc(rl->tables, (size_t)(rl->n_tables + 1) * sizeof *rl->tables);
    if (!rl->tables) die("out of memory growing the run log's table list");
    rl->tables[rl->n_tables++] = t;
    g = -1;
    ret = 0;
    goto done;
h5fail:
    set_err(err, errlen, "run log '%s': cannot create %s (HDF5: %s)", rl->path, what, h5_msg(msg));
    for (int c = 0; c < t.n_cols; c++) h5_close(t.cols[c].dset);
    table_free(&t);
done:
    h5_close(str_t);
    h5_close(space);
    h5_close(dcpl);
    h5_close(g);
    return ret;
}

// Resume: matches the declaration against table t read from the file and puts t's columns
// into declaration order.
static int match_table(RunLog *rl, Table *t, const ColumnSpec *cols, int n_cols, char *err,
                       size_t errlen) {
    for (int c = 0; c < n_cols; c++) {
        int k = 0;
        while (k < t->n_cols && strcmp(t->cols[k].name, cols[c].name) != 0) k++;
        if (k == t->n_cols)
            return set_err(err, errlen, "cannot resume run log '%s': table /%s has no column '%s', which this run logs "
                           "(resume with the settings of the run that wrote it, or start a new log)",
                           rl->path, t->name, cols[c].name);
        if (t->cols[k].type != cols[c].type)
            return set_err(err, errlen, "cannot resume run log '%s': column /%s/%s is %s in the file, this run logs %s",
                           rl->path, t->name, cols[c].name, runlog_type_name(t->cols[k].type),
                           runlog_type_name(cols[c].type));
    }
    if (t->n_cols != n_cols) {  // names are unique on both sides: some file column is not declared
        for (int k = 0; k < t->n_cols; k++) {
            int c = 0;
            while (c < n_cols && strcmp(t->cols[k].name, cols[c].name) != 0) c++;
            if (c == n_cols)
                return set_err(err, errlen, "cannot resume run log '%s': table /%s has column '%s', which this run does not log "
                               "(resume with the settings of the run that wrote it, or start a new log)",
                               rl->path, t->name, t->cols[k].name);
        }
    }
    Column *ordered = xcalloc((size_t)n_cols, sizeof *ordered);
    for (int c = 0; c < n_cols; c++)
        for (int k = 0; k < t->n_cols; k++)
            if (strcmp(t->cols[k].name, cols[c].name) == 0) ordered[c] = t->cols[k];
    free(t->cols);
    t->cols = ordered;
    t->declared = 1;
    return 0;
}

int runlog_add_table(RunLog *rl, const char *table, const ColumnSpec *cols, int n_cols,
                     int64_t chunk_rows, int compress, char *err, size_t errlen) {
    if (check_specs(rl, table, cols, n_cols, chunk_rows, compress, err, errlen) != 0) return -1;
    if (rl->state != ST_SETUP)
        return set_err(err, errlen, "run log '%s': cannot add table /%s after runlog_start_swmr (declare every table first)",
                       rl->path, table);
    Table *t = find_table(rl, table);
    if (t && t->declared)
        return set_err(err, errlen, "run log '%s': table /%s is declared twice", rl->path, table);
    if (rl->resume) {
        if (!t)
            return set_err(err, errlen, "cannot resume run log '%s': it has no table /%s, which this run logs "
                           "(resume with the settings of the run that wrote it, or start a new log)",
                           rl->path, table);
        return match_table(rl, t, cols, n_cols, err, errlen);
    }
    H5Quiet q = h5_quiet();
    int r = create_table(rl, table, cols, n_cols, chunk_rows ? chunk_rows : RUNLOG_DEFAULT_CHUNK,
                         compress, err, errlen);
    h5_loud(q);
    return r;
}

const TableColumn *runlog_spec_column(const TableSpec *spec, const char *name) {
    for (int c = 0; spec && name && c < spec->n_cols; c++)
        if (strcmp(spec->cols[c].spec.name, name) == 0) return &spec->cols[c];
    return NULL;
}

// Bytes a column takes in a row of layout (its value, or its pointer).
static size_t slot_size(RowLayout layout, ColType t) {
    return layout == ROW_POINTERS ? sizeof(void *) : runlog_type_size(t);
}

// Checks spec's row layout: every column's slot inside the row, aligned, no two overlapping
// (which would put one value into two columns).
static int check_layout(const RunLog *rl, const TableSpec *spec, char *err, size_t errlen) {
    if (spec->layout != ROW_STRUCT && spec->layout != ROW_POINTERS)
        return set_err(err, errlen, "run log '%s': table /%s has an invalid row layout %d (ROW_STRUCT or ROW_POINTERS)",
                       rl->path, spec->name, (int)spec->layout);
    for (int c = 0; c < spec->n_cols; c++) {
        const TableColumn *a = &spec->cols[c];
        size_t sa = slot_size(spec->layout, a->spec.type);
        if (a->offset + sa > spec->row_size || a->offset % sa != 0)
            return set_err(err, errlen, "run log '%s': column /%s/%s takes bytes %zu..%zu of a row of %zu bytes "
                           "(its slot must lie inside the row, aligned to %zu)",
                           rl->path, spec->name, a->spec.name, a->offset, a->offset + sa, spec->row_size, sa);
        for (int k = 0; k < c; k++) {
            const TableColumn *b = &spec->cols[k];
            size_t sb = slot_size(spec->layout, b->spec.type);
            if (a->offset < b->offset + sb && b->offset < a->offset + sa)
                return set_err(err, errlen, "run log '%s': columns /%s/%s and /%s/%s overlap in the row (offsets %zu and %zu)",
                               rl->path, spec->name, b->spec.name, spec->name, a->spec.name, b->offset, a->offset);
        }
    }
    return 0;
}

int runlog_declare(RunLog *rl, const TableSpec *spec, char *err, size_t errlen) {
    if (!spec) return set_err(err, errlen, "run log '%s': runlog_declare without a table spec", rl->path);
    if (spec->n_cols < 1 || !spec->cols)
        return set_err(err, errlen, "run log '%s': table /%s declares no columns", rl->path,
                       spec->name ? spec->name : "(null)");
    ColumnSpec *cols = xmalloc((size_t)spec->n_cols * sizeof *cols);
    for (int c = 0; c < spec->n_cols; c++) cols[c] = spec->cols[c].spec;
    int r = check_specs(rl, spec->name, cols, spec->n_cols, spec->chunk_rows, spec->compress, err, errlen) != 0 ||
                    check_layout(rl, spec, err, errlen) != 0 ||
                    runlog_add_table(rl, spec->name, cols, spec->n_cols, spec->chunk_rows,
                                     spec->compress, err, errlen) != 0
                ? -1
                : 0;
    free(cols);
    if (r == 0) find_table(rl, spec->name)->spec = spec;
    return r;
}

int64_t runlog_rows(const RunLog *rl, const char *table) {
    const Table *t = rl ? find_table(rl, table) : NULL;
    return t ? t->rows + t->n_buf : -1;
}

// ---------------------------------------------------------------- appending
// Marks rl unusable with the message in err (appends and flushes then fail with it).
static int broken(RunLog *rl, char *err, size_t errlen) {
    rl->state = ST_BROKEN;
    snprintf(rl->broken, sizeof rl->broken, "%s", err && errlen ? err : "a write failed");
    return -1;
}

// Writes n rows (data[c]: n values of column c) at the end of every column of t.
static int write_rows(RunLog *rl, Table *t, int64_t n, const void *const *data, char *err,
                      size_t errlen) {
    char msg[H5MSG_LEN];
    hsize_t start = (hsize_t)t->rows, count = (hsize_t)n, len = (hsize_t)(t->rows + n);
    hid_t mspace = H5Screate_simple(1, &count, NULL);
    if (mspace < 0) {
        set_err(err, errlen, "run log '%s': cannot make a dataspace (HDF5: %s)", rl->path, h5_msg(msg));
        return broken(rl, err, errlen);
    }
    for (int c = 0; c < t->n_cols; c++) {
        Column *col = &t->cols[c];
        hid_t fspace = -1;
        if (H5Dset_extent(col->dset, &len) < 0 || (fspace = H5Dget_space(col->dset)) < 0 ||
            H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0 ||
            H5Dwrite(col->dset, runlog_mem_type(col->type), mspace, fspace, H5P_DEFAULT, data[c]) < 0) {
            set_err(err, errlen, "run log '%s': cannot write %lld rows to /%s/%s (HDF5: %s)",
                    rl->path, (long long)n, t->name, col->name, h5_msg(msg));
            h5_close(fspace);
            H5Sclose(mspace);
            return broken(rl, err, errlen);
        }
        H5Sclose(fspace);
    }
    H5Sclose(mspace);
    t->rows += n;
    return 0;
}

static int write_buffer(RunLog *rl, Table *t, char *err, size_t errlen) {
    if (t->n_buf == 0) return 0;
    const void **data = xmalloc((size_t)t->n_cols * sizeof *data);
    for (int c = 0; c < t->n_cols; c++) data[c] = t->cols[c].buf;
    int r = write_rows(rl, t, t->n_buf, data, err, errlen);
    free(data);
    if (r == 0) t->n_buf = 0;
    return r;
}

static int state_ok(RunLog *rl, const char *what, char *err, size_t errlen) {
    if (rl->state == ST_BROKEN)
        return set_err(err, errlen, "run log '%s': cannot %s after an earlier error: %s", rl->path,
                       what, rl->broken);
    if (rl->state == ST_SETUP)
        return set_err(err, errlen, "run log '%s': cannot %s before runlog_start_swmr", rl->path, what);
    return 0;
}

static int append_impl(RunLog *rl, const char *table, int64_t n, const void *const *data,
                       char *err, size_t errlen) {
    if (state_ok(rl, "append", err, errlen) != 0) return -1;
    Table *t = find_table(rl, table);
    if (!t)
        return set_err(err, errlen, "run log '%s': cannot append to table /%s: it was not declared",
                       rl->path, table ? (table[0] == '/' ? table + 1 : table) : "(null)");
    if (n < 0)
        return set_err(err, errlen, "run log '%s': cannot append %lld rows to /%s", rl->path,
                       (long long)n, t->name);
    if (n == 0) return 0;
    for (int c = 0; c < t->n_cols; c++)
        if (!data || !data[c])
            return set_err(err, errlen, "run log '%s': append to /%s: no data for column '%s'",
                           rl->path, t->name, t->cols[c].name);
    if (t->n_buf + n > t->max_buf && write_buffer(rl, t, err, errlen) != 0) return -1;
    if (n >= t->max_buf) return write_rows(rl, t, n, data, err, errlen);  // large: no copy
    if (t->n_buf + n > t->cap) {
        int64_t cap = t->cap ? t->cap : 256;
        while (cap < t->n_buf + n) cap *= 2;
        if (cap > t->max_buf) cap = t->max_buf;
        for (int c = 0; c < t->n_cols; c++) {
            Column *col = &t->cols[c];
            col->buf = realloc(col->buf, (size_t)cap * runlog_type_size(col->type));
            if (!col->buf) die("out of memory buffering %lld rows of /%s/%s", (long long)cap, t->name, col->name);
        }
        t->cap = cap;
    }
    for (int c = 0; c < t->n_cols; c++) {
        size_t sz = runlog_type_size(t->cols[c].type);
        memcpy(t->cols[c].buf + (size_t)t->n_buf * sz, data[c], (size_t)n * sz);
    }
    t->n_buf += n;
    return 0;
}

int runlog_append(RunLog *rl, const char *table, int64_t n, const void *const *data, char *err,
                  size_t errlen) {
    H5Quiet q = h5_quiet();
    int r = append_impl(rl, table, n, data, err, errlen);
    h5_loud(q);
    return r;
}

// Appends n rows from src laid out as spec says (layout: the one the caller expects).
static int append_spec(RunLog *rl, const TableSpec *spec, RowLayout layout, int64_t n,
                       const void *src, char *err, size_t errlen) {
    static const char *const fn[] = {"runlog_append_rows", "runlog_append_columns"};
    if (!spec) return set_err(err, errlen, "run log '%s': %s without a table spec", rl->path, fn[layout]);
    Table *t = find_table(rl, spec->name);
    if (!t || t->spec != spec)
        return set_err(err, errlen, "run log '%s': cannot append to table /%s with %s: it was not declared with this spec (runlog_declare)",
                       rl->path, spec->name, fn[layout]);
    if (spec->layout != layout)
        return set_err(err, errlen, "run log '%s': table /%s has the other row layout: append with %s",
                       rl->path, spec->name, fn[spec->layout]);
    if (n <= 0 || state_ok(rl, "append", err, errlen) != 0) return append_impl(rl, spec->name, n, NULL, err, errlen);
    if (!src) return set_err(err, errlen, "run log '%s': append to /%s: no rows", rl->path, spec->name);
    const void **data = xmalloc((size_t)spec->n_cols * sizeof *data);
    char *gathered = NULL;
    if (layout == ROW_POINTERS) {
        for (int c = 0; c < spec->n_cols; c++)
            data[c] = *(const void *const *)((const char *)src + spec->cols[c].offset);
    } else {  // gather each column's values out of the n structs
        size_t total = 0;
        for (int c = 0; c < spec->n_cols; c++) total += runlog_type_size(spec->cols[c].spec.type);
        gathered = xmalloc(total * (size_t)n);
        char *dst = gathered;
        for (int c = 0; c < spec->n_cols; c++) {
            size_t sz = runlog_type_size(spec->cols[c].spec.type);
            const char *from = (const char *)src + spec->cols[c].offset;
            for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * sz, from + (size_t)i * spec->row_size, sz);
            data[c] = dst;
            dst += sz * (size_t)n;
        }
    }
    int r = append_impl(rl, spec->name, n, data, err, errlen);
    free(gathered);
    free(data);
    return r;
}

int runlog_append_rows(RunLog *rl, const TableSpec *spec, int64_t n, const void *rows, char *err,
                       size_t errlen) {
    H5Quiet q = h5_quiet();
    int r = append_spec(rl, spec, ROW_STRUCT, n, rows, err, errlen);
    h5_loud(q);
    return r;
}

int runlog_append_columns(RunLog *rl, const TableSpec *spec, int64_t n, const void *columns,
                          char *err, size_t errlen) {
    H5Quiet q = h5_quiet();
    int r = append_spec(rl, spec, ROW_POINTERS, n, columns, err, errlen);
    h5_loud(q);
    return r;
}

static int flush_impl(RunLog *rl, char *err, size_t errlen) {
    char msg[H5MSG_LEN];
    if (rl->state == ST_BROKEN) return state_ok(rl, "flush", err, errlen);
    for (int i = 0; i < rl->n_tables; i++)
        if (write_buffer(rl, &rl->tables[i], err, errlen) != 0) return -1;
    if (H5Fflush(rl->file, H5F_SCOPE_GLOBAL) < 0) {
        set_err(err, errlen, "run log '%s': cannot flush the file (HDF5: %s)", rl->path,
                h5_msg(msg));
        return broken(rl, err, errlen);
    }
    return 0;
}

int runlog_flush(RunLog *rl, char *err, size_t errlen) {
    H5Quiet q = h5_quiet();
    int r = flush_impl(rl, err, errlen);
    h5_loud(q);
    return r;
}

int runlog_close(RunLog *rl, char *err, size_t errlen) {
    if (!rl) return 0;
    char msg[H5MSG_LEN];
    H5Quiet q = h5_quiet();
    int r = 0;
    if (rl->state != ST_BROKEN) r = flush_impl(rl, err, errlen);
    if (publish(rl, r == 0 ? err : NULL, r == 0 ? errlen : 0) != 0) r = -1;
    char *path = xstrdup(rl->path);
    if (runlog_free(rl) != 0 && r == 0)
        r = set_err(err, errlen, "run log '%s': cannot close the file (HDF5: %s)", path,
                    h5_msg(msg));
    free(path);
    h5_loud(q);
    return r;
}

// ---------------------------------------------------------------- SWMR
static int start_impl(RunLog *rl, char *err, size_t errlen) {
    char msg[H5MSG_LEN];
    if (rl->state != ST_SETUP)
        return set_err(err, errlen, "run log '%s': runlog_start_swmr called twice", rl->path);
    for (int i = 0; i < rl->n_tables; i++)
        if (!rl->tables[i].declared)
            return set_err(err, errlen, "cannot resume run log '%s': it has table /%s, which this run does not log "
                           "(resume with the settings of the run that wrote it, or start a new log)",
                           rl->path, rl->tables[i].name);
    // resume: drop the rows from keep_below on (everything is checked; now the file changes)
    for (int i = 0; i < rl->n_tables; i++) {
        Table *t = &rl->tables[i];
        for (int c = 0; c < t->n_cols; c++) {
            Column *col = &t->cols[c];
            hsize_t len = (hsize_t)t->rows;
            if (rl->resume && col->file_len != t->rows && H5Dset_extent(col->dset, &len) < 0) {
                set_err(err, errlen, "cannot resume run log '%s': cannot truncate /%s/%s to %lld rows (HDF5: %s)",
                        rl->path, t->name, col->name, (long long)t->rows, h5_msg(msg));
                return broken(rl, err, errlen);
            }
            col->file_len = t->rows;
        }
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    int64_t pid = (int64_t)getpid();
    if (write_str_attr(rl->file, "writer_host", host) < 0 ||
        write_attr(rl->file, "writer_pid", H5T_STD_I64LE, H5T_NATIVE_INT64, &pid) < 0) {
        set_err(err, errlen, "cannot write root attribute 'writer_host'/'writer_pid' of run log '%s' (HDF5: %s)",
                rl->path, h5_msg(msg));
        return -1;
    }
    if (H5Fstart_swmr_write(rl->file) < 0) {
        set_err(err, errlen, "run log '%s': cannot switch to SWMR writing (HDF5: %s)", rl->path,
                h5_msg(msg));
        return broken(rl, err, errlen);
    }
    if (publish(rl, err, errlen) != 0) return broken(rl, err, errlen);
    rl->state = ST_WRITING;
    return 0;
}

int runlog_start_swmr(RunLog *rl, char *err, size_t errlen) {
    H5Quiet q = h5_quiet();
    int r = start_impl(rl, err, errlen);
    h5_loud(q);
    return r;
}

// ---------------------------------------------------------------- opening existing logs
// Reads one key value (row i of integer dataset d) as int64.
static herr_t read_key(hid_t d, hsize_t i, int64_t *v) {
    hsize_t one = 1;
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(1, &one, NULL);
    herr_t r = (fs < 0 || ms < 0 ||
                H5Sselect_hyperslab(fs, H5S_SELECT_SET, &i, NULL, &one, NULL) < 0 ||
                H5Dread(d, H5T_NATIVE_INT64, ms, fs, H5P_DEFAULT, v) < 0) ? -1 : 0;
    h5_close(ms);
    h5_close(fs);
    return r;
}

// Reads table name of the open file into t (columns in file order, rows = the kept prefix).
static int read_table(RunLog *rl, const char *name, const char *key_col, int64_t keep_below,
                      Table *t, char *err, size_t errlen) {
    char msg[H5MSG_LEN], what[64];
    hid_t ft = -1, sp = -1;
    char **names = NULL;
    int n = 0, ret = -1;
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    t->group = H5Oopen(rl->file, name, H5P_DEFAULT);
    if (t->group < 0) {
        set_err(err, errlen, "cannot resume run log '%s': cannot open /%s (HDF5: %s)", rl->path,
                name, h5_msg(msg));
        return -1;
    }
    if (H5Iget_type(t->group) != H5I_GROUP) {
        set_err(err, errlen, "cannot resume run log '%s': /%s is not a table (a group of columns); it was not written by grpolab",
                rl->path, name);
        return -1;
    }
    if (runlog_list_links(t->group, &names, &n) != 0) {
        set_err(err, errlen, "cannot resume run log '%s': cannot list table /%s (HDF5: %s)",
                rl->path, name, h5_msg(msg));
        return -1;
    }
    t->cols = xcalloc((size_t)(n ? n : 1), sizeof *t->cols);
    int key = -1;
    int64_t common = INT64_MAX;
    for (int c = 0; c < n; c++) {
        Column *col = &t->cols[c];
        col->name = names[c];
        names[c] = NULL;
        col->dset = -1;
        t->n_cols = c + 1;
        if ((col->dset = H5Oopen(t->group, col->name, H5P_DEFAULT)) < 0) goto h5fail;
        if (H5Iget_type(col->dset) != H5I_DATASET) {
            set_err(err, errlen, "cannot resume run log '%s': /%s/%s is not a dataset (a column); it was not written by grpolab",
                    rl->path, name, col->name);
            goto done;
        }
        hsize_t dims[H5S_MAX_RANK], maxdims[H5S_MAX_RANK];
        if ((ft = H5Dget_type(col->dset)) < 0 || (sp = H5Dget_space(col->dset)) < 0) goto h5fail;
        int rank = H5Sget_simple_extent_ndims(sp);
        if (rank != 1 || H5Sget_simple_extent_dims(sp, dims, maxdims) < 0 ||
            maxdims[0] != H5S_UNLIMITED) {
            set_err(err, errlen, "cannot resume run log '%s': /%s/%s is not an extendible 1-D column (rank %d)",
                    rl->path, name, col->name, rank);
            goto done;
        }
        int type = runlog_col_type_of(ft, what, sizeof what);
        if (type < 0) {
            set_err(err, errlen, "cannot resume run log '%s': column /%s/%s holds %s (expected int32, int64, float32 or float64)",
                    rl->path, name, col->name, what);
            goto done;
        }
        col->type = (ColType)type;
        col->file_len = (int64_t)dims[0];
        if (col->file_len < common) common = col->file_len;
        if (strcmp(col->name, key_col) == 0) key = c;
        h5_close(ft);
        h5_close(sp);
        ft = sp = -1;
    }
    if (key < 0) {
        set_err(err, errlen, "cannot resume run log '%s': table /%s has no column '%s' (every table needs it to resume)",
                rl->path, name, key_col);
        goto done;
    }
    if (t->cols[key].type != COL_I32 && t->cols[key].type != COL_I64) {
        set_err(err, errlen, "cannot resume run log '%s': key column /%s/%s is %s, expected an integer column",
                rl->path, name, key_col, runlog_type_name(t->cols[key].type));
        goto done;
    }
    // first row with key >= keep_below among the rows every column has (a writer that died
    // mid-flush can leave the last rows of some columns missing)
    int64_t lo = 0, hi = common;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, v;
        if (read_key(t->cols[key].dset, (hsize_t)mid, &v) < 0) {
            set_err(err, errlen, "cannot resume run log '%s': cannot read row %lld of /%s/%s (truncated or corrupt? HDF5: %s)",
                    rl->path, (long long)mid, name, key_col, h5_msg(msg));
            goto done;
        }
        if (v < keep_below) lo = mid + 1;
        else hi = mid;
    }
    t->rows = lo;
    hid_t dcpl = H5Dget_create_plist(t->cols[key].dset);
    hsize_t chunk = 0;
    if (dcpl < 0 || H5Pget_layout(dcpl) != H5D_CHUNKED || H5Pget_chunk(dcpl, 1, &chunk) != 1)
        chunk = RUNLOG_DEFAULT_CHUNK;
    h5_close(dcpl);
    init_buffering(t, (int64_t)chunk);
    ret = 0;
    goto done;
h5fail:
    set_err(err, errlen, "cannot resume run log '%s': cannot open column /%s/%s (HDF5: %s)",
            rl->path, name, t->cols[t->n_cols - 1].name, h5_msg(msg));
done:
    runlog_free_names(names, n);
    h5_close(sp);
    h5_close(ft);
    return ret;
}

// The file is marked as open by a writer. Returns 1 if that writer is known to be gone (it
// ran on this host and its pid no longer exists), 0 if it may still run; a description of it
// in who.
static int writer_gone(const char *path, char *who, size_t len) {
    snprintf(who, len, "an unknown process");
    hid_t fapl = h5_swmr_read_fapl();
    hid_t f = fapl < 0 ? -1 : H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
    h5_close(fapl);
    if (f < 0) return 0;
    char *host = NULL, *pid_s = NULL, me[256] = "";
    int gone = 0;
    if (runlog_read_attr_text(path, f, "writer_host", &host, NULL, 0) == 1 &&
        runlog_read_attr_text(path, f, "writer_pid", &pid_s, NULL, 0) == 1) {
        long long pid = strtoll(pid_s, NULL, 10);
        snprintf(who, len, "pid %lld on host %s", pid, host);
        gethostname(me, sizeof me - 1);
        // our own pid: a restarted container reuses pids; the old writer is not this process
        if (strcmp(host, me) == 0 && pid > 0 && pid <= INT_MAX &&
            ((pid_t)pid == getpid() || (kill((pid_t)pid, 0) != 0 && errno == ESRCH)))
            gone = 1;
    }
    free(host);
    free(pid_s);
    H5Fclose(f);
    return gone;
}

// Opens path for writing; takes over a file left marked "open for writing" by a dead writer.
static hid_t open_rdwr(const char *path, char *err, size_t errlen) {
    char msg[H5MSG_LEN], who[320];
    hid_t fapl = runlog_make_fapl(), f = -1;
    if (fapl < 0) {
        set_err(err, errlen, "cannot resume run log '%s': file access properties (HDF5: %s)", path,
                h5_msg(msg));
        return -1;
    }
    f = H5Fopen(path, H5F_ACC_RDWR, fapl);
    if (f < 0) {
        int marked = h5_stack_has("already open for write");
        h5_msg(msg);
        if (!marked) {
            set_err(err, errlen, "cannot resume run log '%s': cannot open it for writing (is another process using it? HDF5: %s)",
                    path, msg);
        } else if (!writer_gone(path, who, sizeof who)) {
            set_err(err, errlen, "cannot resume run log '%s': it is still marked as being written by %s. "
                    "If no process writes it any more (the run died), clear the mark with `h5clear -s '%s'` and resume again",
                    path, who, path);
        } else {  // the writer died: clear the file's "open for writing" mark, as h5clear -s does
            hbool_t clear = 1;
            if (H5Pset(fapl, "clear_status_flags", &clear) < 0 ||
                (f = H5Fopen(path, H5F_ACC_RDWR, fapl)) < 0)
                set_err(err, errlen, "cannot resume run log '%s': its writer (%s) died without closing it, and taking it over failed "
                        "(HDF5: %s); run `h5clear -s '%s'` and resume again", path, who, h5_msg(msg), path);
        }
    }
    H5Pclose(fapl);
    return f;
}

// h5_copy_file's finish of runlog_save_copy: the copy's "open for writing" mark cleared (as
// h5clear -s does) and its format checked.
static int finish_copy(const char *tmp, void *arg, char *err, size_t errlen) {
    const char *dst = arg;
    char msg[H5MSG_LEN];
    hbool_t clear = 1;
    hid_t fapl = runlog_make_fapl(), f = -1;
    if (fapl < 0 || H5Pset(fapl, "clear_status_flags", &clear) < 0 ||
        (f = H5Fopen(tmp, H5F_ACC_RDWR, fapl)) < 0) {
        set_err(err, errlen, "cannot copy run log to '%s': the copy '%s' does not open (HDF5: %s)",
                dst, tmp, h5_msg(msg));
        h5_close(fapl);
        return -1;
    }
    H5Pclose(fapl);
    int r = runlog_check_format(dst, f, err, errlen);
    if (H5Fclose(f) < 0 && r == 0)
        r = set_err(err, errlen, "cannot copy run log to '%s': cannot close the copy '%s' (HDF5: %s)",
                    dst, tmp, h5_msg(msg));
    return r;
}

int runlog_save_copy(const char *src, const char *dst, char *err, size_t errlen) {
    H5Quiet q = h5_quiet();
    int r = h5_copy_file("cannot copy run log to", src, dst, finish_copy, (void *)dst, err, errlen);
    h5_loud(q);
    return r;
}

int runlog_keep_copy(RunLog *rl, const char *dst, char *err, size_t errlen) {
    if (runlog_flush(rl, err, errlen) != 0) return -1;
    return runlog_save_copy(rl->part ? rl->part : rl->path, dst, err, errlen);
}

static RunLog *resume_impl(const char *path, const char *key_col, int64_t keep_below, char *err,
                           size_t errlen) {
    char msg[H5MSG_LEN];
    if (!key_col || !key_col[0])
        return set_err(err, errlen, "cannot resume run log '%s': empty key column name", path ? path : ""), NULL;
    if (runlog_check_file(path, "cannot resume run log", err, errlen) != 0) return NULL;
    hid_t f = open_rdwr(path, err, errlen);  // refuses a log a live writer has open
    if (f < 0) return NULL;
    if (out_claim("cannot resume run log", path, err, errlen) != 0) {  // and one being created
        H5Fclose(f);
        return NULL;
    }
    RunLog *rl = xcalloc(1, sizeof *rl);
    rl->path = xstrdup(path);
    rl->file = f;
    rl->claimed = 1;
    rl->state = ST_SETUP;
    rl->resume = 1;
    rl->deflate_ok = deflate_available();
    char **names = NULL;
    int n = 0;
    if (runlog_check_format(path, f, err, errlen) != 0) goto fail;
    if (runlog_list_links(f, &names, &n) != 0) {
        set_err(err, errlen, "cannot resume run log '%s': cannot list its tables (HDF5: %s)", path,
                h5_msg(msg));
        goto fail;
    }
    rl->tables = xcalloc((size_t)(n ? n : 1), sizeof *rl->tables);
    for (int i = 0; i < n; i++) {
        rl->n_tables = i + 1;
        if (read_table(rl, names[i], key_col, keep_below, &rl->tables[i], err, errlen) != 0) goto fail;
    }
    runlog_free_names(names, n);
    return rl;
fail:
    runlog_free_names(names, n);
    runlog_free(rl);
    return NULL;
}

RunLog *runlog_open_resume(const char *path, const char *key_col, int64_t keep_below, char *err,
                           size_t errlen) {
    H5Quiet q = h5_quiet();
    RunLog *rl = resume_impl(path, key_col, keep_below, err, errlen);
    h5_loud(q);
    return rl;
}
