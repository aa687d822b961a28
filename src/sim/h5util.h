// h5util.h: the HDF5 helpers shared by checkpoint.c and runlog.c: quiet error handling that
// turns a failed call into HDF5's own innermost message, closing any id, and checks on paths.
#ifndef GRPOLAB_H5UTIL_H
#define GRPOLAB_H5UTIL_H

#include <stddef.h>

#include <hdf5.h>

typedef struct {
    H5E_auto2_t func;
    void *data;
} H5Quiet;

// Switches HDF5's automatic error printing off; h5_loud restores what was there.
H5Quiet h5_quiet(void);
void h5_loud(H5Quiet q);

#define H5MSG_LEN 256
// HDF5's own message for the call that just failed: its innermost (most specific) error.
const char *h5_msg(char buf[H5MSG_LEN]);

// Closes any HDF5 id (negative: nothing to close); -1 if the close failed.
int h5_close(hid_t id);

// Frees the variable-length data HDF5 allocated in buf.
void vlen_reclaim(hid_t type, hid_t space, void *buf);

// "integer", "float", "string", ... for messages.
const char *class_name(H5T_class_t c);

// 0 if the directory part of path exists and is a directory, else -1 with
// "<what> '<path>': directory '<dir>' does not exist (create it first)" (what: e.g.
// "cannot save checkpoint").
int check_parent_dir(const char *what, const char *path, char *err, size_t errlen);

#endif
