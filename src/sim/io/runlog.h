// runlog.h: the run log, an append-only HDF5 file of tables that h5py can read while the run
// is still writing it (SWMR), and a small reader for the tests and the analysis tools.
//
// Layout (format "grpolab-runlog", version 1):
//   root attributes
//     format = "grpolab-runlog"    format_version = 1 (int32)    grpolab_version (string)
//     writer_host, writer_pid      the process that last opened the log for writing
//     anything the caller sets with runlog_set_attr_* (config text, seed, backend, ...)
//   /<table>/<column>   one group per table, one 1-D dataset per column, all columns of a
//                       table equally long (one row per record). int32/int64/float32/float64
//                       little-endian, chunked, unlimited length, per table uncompressed or
//                       shuffle + deflate 4.
//                       Each dataset has a string attribute "doc" (meaning and unit).
//
// Writing, in this order:
//   runlog_create (or runlog_open_resume)
//   runlog_set_attr_* ...          root attributes (set before runlog_start_swmr)
//   runlog_declare ...             every table (declared before runlog_start_swmr), from its
//                                  TableSpec (grpolab's tables: logschema.h); runlog_add_table
//                                  declares one from its columns alone
//   runlog_start_swmr              from here on readers may open the file while it grows
//   { runlog_append_rows ... ; runlog_flush } per step (runlog_append_columns for
//                                  ROW_POINTERS tables, runlog_append by column position for
//                                  tables of runlog_add_table)
//   runlog_close
// Appended rows are buffered in memory per table and written when the buffer is full or at
// runlog_flush, so millions of small appends cost a few HDF5 writes; a batch larger than the
// buffer is written straight from the caller's arrays. After runlog_flush returns, everything
// appended so far is on disk and visible to SWMR readers. Readers may briefly see the columns
// of one table with different lengths (the flush writes one column after the other): use the
// shortest.
//
// Resume: runlog_open_resume opens an existing log for appending and finds, in every table,
// the rows whose key column (e.g. "step") is < keep_below (tables are appended in key order, so
// these are a prefix). The caller declares the same tables again with runlog_add_table, which
// checks that the file's columns are the same (names and types); runlog_start_swmr checks that
// every table of the file was declared, and only then drops the rows from keep_below on. Until
// runlog_start_swmr nothing in the file changes, so a mismatch leaves the log as it was. Every
// table must have the key column. A log whose writer died without closing it (killed, crashed)
// is marked "open for writing" in the file; open_resume takes it over when writer_host is this
// machine and writer_pid is no longer running, and otherwise refuses with a message that says
// how to clear the mark (h5clear -s) once no process writes the file any more.
// The log holds no gap only if it was flushed up to the resumed step: flush the log before
// saving the checkpoint you resume from, and check runlog_rows(rl, "train") after resuming.
//
// Every function that takes err returns -1 (or NULL) on failure with a message in err that
// names the file, the table or dataset and what was expected and found. After a failed write
// the log refuses further appends (its tables may be uneven); close it.
#ifndef GRPOLAB_RUNLOG_H
#define GRPOLAB_RUNLOG_H

#include <stddef.h>
#include <stdint.h>

#define RUNLOG_FORMAT "grpolab-runlog"
#define RUNLOG_FORMAT_VERSION 1
#define RUNLOG_DEFAULT_CHUNK 4096  // rows per chunk when runlog_add_table gets chunk_rows = 0

typedef enum { COL_I32, COL_I64, COL_F32, COL_F64 } ColType;  // int32_t int64_t float double

typedef struct {
    const char *name;  // dataset name within the table: no '/', unique in the table
    ColType type;
    const char *doc;   // required: meaning and unit, stored as the dataset's attribute "doc"
} ColumnSpec;

// A table together with the C struct its rows are appended from, so that values are matched to
// columns by name (the struct's fields), never by position. Two layouts:
//   ROW_STRUCT   one struct per row, a field per column (offset: offsetof the field; the
//                field's type is the column's); runlog_append_rows appends n structs.
//   ROW_POINTERS one struct for n rows, a pointer field per column to n values of its type
//                (offset: offsetof the pointer); runlog_append_columns appends it. For tables
//                of millions of rows (per token), which are produced column by column.
typedef enum { ROW_STRUCT, ROW_POINTERS } RowLayout;

typedef struct {
    ColumnSpec spec;   // name, type and doc, as stored
    const char *unit;  // the values' unit, for the docs ("tokens", "s"; "": none); not stored
    size_t offset;     // where the column's value (ROW_STRUCT) or pointer (ROW_POINTERS) lies in a row
} TableColumn;

typedef struct {
    const char *name;        // the group, as in runlog_add_table
    const char *rows;        // what one row is, for the docs ("one row per RL step")
    const TableColumn *cols;
    int n_cols;
    RowLayout layout;
    size_t row_size;         // sizeof the struct the offsets point into
    int64_t chunk_rows;      // as in runlog_add_table
    int compress;
} TableSpec;

typedef struct RunLog RunLog;

// Creates a new run log at path. An existing path is an error unless overwrite (then it is
// replaced). The parent directory must exist. The file is made as "<path>.part" and renamed
// onto path by runlog_start_swmr (or runlog_close), so path never holds a log cut short while
// it was set up (a process killed then leaves only the part file, which the next create
// replaces); an old log at path is replaced only then.
RunLog *runlog_create(const char *path, int overwrite, char *err, size_t errlen);

// Root attributes (replacing one of the same name); only before runlog_start_swmr. The names
// format, format_version, writer_host and writer_pid are reserved.
int runlog_set_attr_str(RunLog *rl, const char *name, const char *value, char *err, size_t errlen);
int runlog_set_attr_i64(RunLog *rl, const char *name, int64_t value, char *err, size_t errlen);
int runlog_set_attr_f64(RunLog *rl, const char *name, double value, char *err, size_t errlen);

// Declares table (a group name without '/') with n_cols columns, in the order runlog_append
// takes them. Only before runlog_start_swmr.
// chunk_rows: rows per HDF5 chunk (0: RUNLOG_DEFAULT_CHUNK). compress: 1 stores chunks with
// shuffle + deflate 4 (when HDF5 has deflate), 0 uncompressed. Under SWMR, HDF5 never reuses
// the old space of a compressed chunk that is rewritten with a new size, and every flush that
// ends inside a chunk rewrites it: each flush leaves about one compressed partial chunk per
// column behind. So compress tables that grow by many chunks per flush (per-token rows:
// chunk 4096..65536, compress 1) and store small per-step tables uncompressed (one row per
// step: chunk ~1024, compress 0), whose chunks are rewritten in place.
// On resume both are ignored (the file's are kept) and the file must hold table with exactly
// these columns and types (in any order).
int runlog_add_table(RunLog *rl, const char *table, const ColumnSpec *cols, int n_cols,
                     int64_t chunk_rows, int compress, char *err, size_t errlen);

// runlog_add_table for a TableSpec, after checking its row layout (every column's value lies
// inside row_size, no two overlap, pointers are aligned); the table then takes
// runlog_append_rows / runlog_append_columns with this same spec (and runlog_append).
int runlog_declare(RunLog *rl, const TableSpec *spec, char *err, size_t errlen);

// The column of spec named name, or NULL.
const TableColumn *runlog_spec_column(const TableSpec *spec, const char *name);

// Ends the setup: records writer_host/writer_pid, (resume) truncates the tables, and switches
// the file to SWMR writing, after which readers may open it. Appends need it.
int runlog_start_swmr(RunLog *rl, char *err, size_t errlen);

// Appends n rows to table: data[c] points to n values of column c's type, columns in
// declaration order. Buffered: on disk at the latest at the next runlog_flush.
int runlog_append(RunLog *rl, const char *table, int64_t n, const void *const *data, char *err,
                  size_t errlen);

// Appends n rows of a table declared with runlog_declare(spec): ROW_STRUCT, rows points to n
// structs of spec->row_size bytes (runlog_append_rows); ROW_POINTERS, columns points to one
// struct whose pointer fields each point to n values (runlog_append_columns). An error if the
// table was declared with another spec or layout.
int runlog_append_rows(RunLog *rl, const TableSpec *spec, int64_t n, const void *rows, char *err,
                       size_t errlen);
int runlog_append_columns(RunLog *rl, const TableSpec *spec, int64_t n, const void *columns,
                          char *err, size_t errlen);

// Writes every buffered row and flushes the file (H5Fflush): call once per step.
int runlog_flush(RunLog *rl, char *err, size_t errlen);

// Flushes and closes; frees rl (also after errors; rl may be NULL). -1 if the final flush or
// close failed (disk full?): the rows appended since the last successful flush may be lost.
int runlog_close(RunLog *rl, char *err, size_t errlen);

// Opens the run log at path for appending after the rows whose integer column key_col is
// < keep_below (see "Resume" above). Returns the log in setup state: declare the tables, then
// runlog_start_swmr.
RunLog *runlog_open_resume(const char *path, const char *key_col, int64_t keep_below, char *err,
                           size_t errlen);

// Rows of table: written + buffered (on resume, before runlog_start_swmr: the rows that will
// be kept). -1 if the table is not declared (on resume: not in the file).
int64_t runlog_rows(const RunLog *rl, const char *table);

// A writer killed in the middle of a flush can leave its log unreadable, the rows of long
// before included: HDF5 changes chunk indices and dataset sizes in place, and a flush cut
// short leaves them half written. A writer that must survive being killed therefore keeps a
// copy of the log as of a moment it chose (after runlog_flush) and goes on from the copy.
// runlog_save_copy copies the log at src byte for byte to dst, clears the copy's "open for
// writing" mark (it then reads with any HDF5 tool), checks that it opens as a run log, and
// renames it into place: dst is always a whole copy of one flushed state, never a partial
// one. The caller holds the claim on dst (h5util.h out_claim). Copying a copy back onto the
// log is the same call.
int runlog_save_copy(const char *src, const char *dst, char *err, size_t errlen);
// runlog_flush, then runlog_save_copy of rl's file (a new log before runlog_start_swmr
// included: its tables declared, no rows) to dst.
int runlog_keep_copy(RunLog *rl, const char *dst, char *err, size_t errlen);

// ---------------------------------------------------------------- reading
// Opens a run log read-only; a log that is being written (SWMR) or whose writer died is fine.
// Errors: missing file, not HDF5, truncated or corrupt, not a grpolab run log (says what its
// format attribute is), wrong format version, locked by a writer that has not started SWMR.
// Do not open a reader on a file this process is writing (HDF5 shares the open file).
typedef struct RunLogReader RunLogReader;
RunLogReader *runlog_reader_open(const char *path, char *err, size_t errlen);

// 1 if dataset ("train/reward_mean", a leading '/' is allowed) exists and is a dataset, else 0.
int runlog_reader_has(const RunLogReader *rd, const char *dataset);
// 1 if the file has this root attribute, else 0.
int runlog_reader_has_attr(const RunLogReader *rd, const char *name);

// Reads the 1-D numeric dataset as doubles (int64 exact up to 2^53) into a malloc'd array of
// *n values (n may be 0; free the result). Each call sees the rows flushed so far. NULL on
// error: missing table or column (the message lists what exists), wrong rank, non-numeric
// type, unreadable data.
double *runlog_read_column(RunLogReader *rd, const char *dataset, int64_t *n, char *err,
                           size_t errlen);

// A root attribute as a malloc'd string: strings as stored, numbers as decimal text (integers
// exactly, floats with %.17g). NULL on error (missing attribute, array or other type).
char *runlog_read_attr_str(RunLogReader *rd, const char *name, char *err, size_t errlen);

int runlog_reader_close(RunLogReader *rd);  // 0, or -1 if HDF5 reported an error on close

// ---------------------------------------------------------------- copying
// Copies the run log src to dst without the tables named in drop (n_drop names; each must be a
// table of src): the root attributes, and every other table with its columns, their "doc"
// attributes, chunking and filters (column by column). src may be a log still being written: the copy
// holds the rows flushed so far (its columns may then differ in length by the last flush, as a
// reader sees them). The copy is written to a temporary file beside dst and renamed onto dst
// at the end, so a failure leaves neither a partial dst nor a changed one; an existing dst is
// replaced only with overwrite, and never when it is src itself.
int runlog_copy(const char *src, const char *dst, const char *const *drop, int n_drop, int overwrite,
                char *err, size_t errlen);

#endif
