// runlog_internal.h: what the run log's writer (runlog_write.c) and reader (runlog_read.c)
// share, defined in runlog_common.c; no other file includes it (the contract is runlog.h).
//
// HDF5's automatic error printing is switched off inside every public function; every failed
// call becomes one message naming the file, the table or dataset and HDF5's own innermost
// error. All HDF5 ids a function opens for itself are closed at its single cleanup label; the
// ids a RunLog keeps (file, groups, datasets) are closed by runlog_close.
#ifndef GRPOLAB_RUNLOG_INTERNAL_H
#define GRPOLAB_RUNLOG_INTERNAL_H

#include <stddef.h>

#include <hdf5.h>

#include "runlog.h"

// File access properties of the format: HDF5 1.10 (superblock 3, needed for SWMR), readable
// by every HDF5 >= 1.10. -1 on error; the caller closes them.
hid_t runlog_make_fapl(void);

// Reads the scalar attribute name of obj as a malloc'd string (numbers as decimal text).
// Returns 1 if read, 0 if absent, -1 on error (message in err; who: "run log '<path>'").
int runlog_read_attr_text(const char *path, hid_t obj, const char *name, char **out, char *err,
                          size_t errlen);

// The names of the links in group loc as a malloc'd array of *n malloc'd strings (by name);
// runlog_free_names frees them. runlog_link_list writes "a, b, c" (or "none") into buf.
int runlog_list_links(hid_t loc, char ***names, int *n);
void runlog_free_names(char **names, int n);
const char *runlog_link_list(hid_t loc, char *buf, size_t len);

// Checks path before HDF5 sees it: exists, not a directory, readable, HDF5. who: "run log" or
// "cannot resume run log".
int runlog_check_file(const char *path, const char *who, char *err, size_t errlen);
// Checks the root attributes format and format_version of an open file.
int runlog_check_format(const char *path, hid_t f, char *err, size_t errlen);

// A column type's HDF5 file type (little-endian), memory type, size in bytes and name
// ("int32", ...). runlog_col_type_of: the ColType of a stored dataset type; -1 if it is none
// of them (a name for it in what).
hid_t runlog_file_type(ColType t);
hid_t runlog_mem_type(ColType t);
size_t runlog_type_size(ColType t);
const char *runlog_type_name(ColType t);
int runlog_col_type_of(hid_t ft, char *what, size_t len);

#endif
