// runlog_read.c: the HDF5 run log's reader and runlog_copy (layout and contract in runlog.h;
// shared with the writer and conventions: runlog_internal.h).
#include "runlog_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <hdf5.h>

#include "h5util.h"

#include "../../common.h"

// ---------------------------------------------------------------- the reader
struct RunLogReader {
    char *path;
    hid_t file;
    int swmr;  // opened for SWMR reading: datasets are refreshed before reading
};

static RunLogReader *reader_open_impl(const char *path, char *err, size_t errlen) {
    char msg[H5MSG_LEN];
    if (runlog_check_file(path, "run log", err, errlen) != 0) return NULL;
    // A finished log opens plainly. Only a log marked as being written (a live SWMR writer, or
    // one that died) is read with SWMR, whose retries of failed checksums are bounded
    // (h5_swmr_read_fapl): on a corrupt file nobody writes they would sleep for minutes.
    int swmr = 0;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0 && h5_stack_has("already open for write")) {
        hid_t fapl = h5_swmr_read_fapl();
        swmr = 1;
        f = fapl < 0 ? -1 : H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
        h5_close(fapl);
    }
    if (f < 0) {
        int locked = h5_stack_has("unable to lock"), marked = h5_stack_has("already open for write");
        h5_msg(msg);
        if (locked)
            set_err(err, errlen, "cannot open run log '%s': a process is writing it and has not started SWMR yet (HDF5: %s)",
                    path, msg);
        else if (marked)
            set_err(err, errlen, "cannot open run log '%s': it is marked as being written without SWMR (its writer is still "
                    "setting up, or died before runlog_start_swmr; if no process writes it any more, `h5clear -s '%s'` clears the mark)",
                    path, path);
        else
            set_err(err, errlen, "cannot open run log '%s': truncated or corrupt (HDF5: %s)", path, msg);
        return NULL;
    }
    if (runlog_check_format(path, f, err, errlen) != 0) {
        H5Fclose(f);
        return NULL;
    }
    RunLogReader *rd = xcalloc(1, sizeof *rd);
    rd->path = xstrdup(path);
    rd->file = f;
    rd->swmr = swmr;
    return rd;
}

RunLogReader *runlog_reader_open(const char *path, char *err, size_t errlen) {
    H5Quiet q = h5_quiet();
    RunLogReader *rd = reader_open_impl(path, err, errlen);
    h5_loud(q);
    return rd;
}

int runlog_reader_close(RunLogReader *rd) {
    if (!rd) return 0;
    H5Quiet q = h5_quiet();
    int r = h5_close(rd->file);
    h5_loud(q);
    free(rd->path);
    free(rd);
    return r;
}

// Opens object "a/b/c" (leading '/' allowed) of rd's file. Returns its id, or -1 with the
// missing part described in err ("has no table '/a' (tables: ...)").
static hid_t open_object(const RunLogReader *rd, const char *name, char *err, size_t errlen) {
    char msg[H5MSG_LEN], list[512];
    while (*name == '/') name++;
    if (!name[0]) return set_err(err, errlen, "run log '%s': empty dataset name", rd->path);
    char *p = xstrdup(name);  // split in place; name still holds the whole path for messages
    char *part = p;
    hid_t loc = -1, obj = -1;
    if ((loc = H5Gopen2(rd->file, "/", H5P_DEFAULT)) < 0) goto h5fail;
    for (;;) {
        char *slash = strchr(part, '/');
        if (slash) *slash = '\0';
        htri_t ex = part[0] ? H5Lexists(loc, part, H5P_DEFAULT) : 0;
        if (ex < 0) goto h5fail;
        if (ex == 0) {
            if (part == p)
                set_err(err, errlen, "run log '%s' has no table '/%s' (tables: %s)", rd->path, part,
                        runlog_link_list(loc, list, sizeof list));
            else
                set_err(err, errlen, "run log '%s': table '/%.*s' has no column '%s' (columns: %s)",
                        rd->path, (int)(part - p - 1), name, part, runlog_link_list(loc, list, sizeof list));
            goto fail;
        }
        if ((obj = H5Oopen(loc, part, H5P_DEFAULT)) < 0) goto h5fail;
        if (!slash) break;
        if (H5Iget_type(obj) != H5I_GROUP) {
            set_err(err, errlen, "run log '%s': '/%.*s' is not a table (group)", rd->path,
                    (int)(slash - p), name);
            goto fail;
        }
        h5_close(loc);
        loc = obj;
        obj = -1;
        part = slash + 1;
    }
    h5_close(loc);
    free(p);
    return obj;
h5fail:
    set_err(err, errlen, "run log '%s': cannot open '/%s' (HDF5: %s)", rd->path, name, h5_msg(msg));
fail:
    h5_close(obj);
    h5_close(loc);
    free(p);
    return -1;
}

int runlog_reader_has_attr(const RunLogReader *rd, const char *name) {
    if (!rd || !name || !name[0]) return 0;
    H5Quiet q = h5_quiet();
    int r = H5Aexists(rd->file, name) > 0;
    h5_loud(q);
    return r;
}

int runlog_reader_has(const RunLogReader *rd, const char *dataset) {
    if (!rd || !dataset) return 0;
    H5Quiet q = h5_quiet();
    hid_t obj = open_object(rd, dataset, NULL, 0);
    int r = obj >= 0 && H5Iget_type(obj) == H5I_DATASET;
    h5_close(obj);
    h5_loud(q);
    return r;
}

static double *read_column_impl(RunLogReader *rd, const char *dataset, int64_t *n, char *err,
                                size_t errlen) {
    char msg[H5MSG_LEN];
    double *out = NULL;
    hid_t d = -1, ft = -1, sp = -1;
    while (dataset && *dataset == '/') dataset++;
    if (!dataset) dataset = "";
    if ((d = open_object(rd, dataset, err, errlen)) < 0) return NULL;
    if (H5Iget_type(d) != H5I_DATASET) {
        set_err(err, errlen, "run log '%s': '/%s' is a group, not a dataset (name a column: '/%s/<column>')",
                rd->path, dataset, dataset);
        goto done;
    }
    if (rd->swmr && H5Drefresh(d) < 0) goto h5fail;
    if ((ft = H5Dget_type(d)) < 0 || (sp = H5Dget_space(d)) < 0) goto h5fail;
    H5T_class_t cls = H5Tget_class(ft);
    if (cls != H5T_INTEGER && cls != H5T_FLOAT) {
        set_err(err, errlen, "run log '%s': dataset '/%s' holds %s values, expected numbers", rd->path,
                dataset, class_name(cls));
        goto done;
    }
    int rank = H5Sget_simple_extent_ndims(sp);
    hsize_t dims[H5S_MAX_RANK];
    if (rank < 0 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) goto h5fail;
    if (rank != 1) {
        set_err(err, errlen, "run log '%s': dataset '/%s' has rank %d, expected a 1-D column", rd->path,
                dataset, rank);
        goto done;
    }
    // what the file can hold: its stored bytes, decompressed at most ~1000-fold (deflate's limit)
    double raw = (double)dims[0] * (double)H5Tget_size(ft), stored = (double)H5Dget_storage_size(d);
    if (raw > 1100.0 * stored + (1 << 20)) {
        set_err(err, errlen, "run log '%s': dataset '/%s' claims %llu rows (%.0f bytes) but stores %.0f "
                "bytes (corrupt?)", rd->path, dataset, (unsigned long long)dims[0], raw, stored);
        goto done;
    }
    out = xmalloc((size_t)dims[0] * sizeof *out);
    if (dims[0] > 0 && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
        free(out);
        out = NULL;
        set_err(err, errlen, "run log '%s': cannot read dataset '/%s' (truncated or corrupt? HDF5: %s)",
                rd->path, dataset, h5_msg(msg));
        goto done;
    }
    *n = (int64_t)dims[0];
    goto done;
h5fail:
    set_err(err, errlen, "run log '%s': cannot read dataset '/%s' (HDF5: %s)", rd->path, dataset,
            h5_msg(msg));
done:
    h5_close(sp);
    h5_close(ft);
    h5_close(d);
    return out;
}

double *runlog_read_column(RunLogReader *rd, const char *dataset, int64_t *n, char *err,
                           size_t errlen) {
    H5Quiet q = h5_quiet();
    int64_t dummy;
    double *r = read_column_impl(rd, dataset, n ? n : &dummy, err, errlen);
    h5_loud(q);
    return r;
}

char *runlog_read_attr_str(RunLogReader *rd, const char *name, char *err, size_t errlen) {
    if (!name || !name[0]) return set_err(err, errlen, "run log '%s': empty attribute name", rd->path), NULL;
    H5Quiet q = h5_quiet();
    char *out = NULL;
    int r = runlog_read_attr_text(rd->path, rd->file, name, &out, err, errlen);
    if (r == 0)
        set_err(err, errlen, "run log '%s' has no root attribute '%s'", rd->path, name);
    h5_loud(q);
    return r == 1 ? out : NULL;
}

// ---------------------------------------------------------------- copying
// Copies every attribute of object from to object to (same names, types and shapes). On
// failure name holds the attribute's name.
static int copy_attrs(hid_t from, hid_t to, char *name, size_t len) {
    H5O_info_t info;
#if H5_VERSION_GE(1, 12, 0)
    if (H5Oget_info3(from, &info, H5O_INFO_NUM_ATTRS) < 0) return -1;
#else
    if (H5Oget_info2(from, &info, H5O_INFO_NUM_ATTRS) < 0) return -1;
#endif
    for (hsize_t i = 0; i < info.num_attrs; i++) {
        snprintf(name, len, "#%llu", (unsigned long long)i);
        if (H5Aget_name_by_idx(from, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, len, H5P_DEFAULT) < 0)
            return -1;
        hid_t a = -1, t = -1, s = -1, b = -1;
        void *buf = NULL;
        int ok = 0;
        hssize_t npts;
        size_t size;
        if ((a = H5Aopen(from, name, H5P_DEFAULT)) < 0 || (t = H5Aget_type(a)) < 0 ||
            (s = H5Aget_space(a)) < 0 || (npts = H5Sget_simple_extent_npoints(s)) < 0 ||
            (size = H5Tget_size(t)) == 0)
            goto next;
        // the file's own type serves as the memory type: numbers stay as stored, variable
        // strings come back as char pointers (reclaimed below)
        if ((double)(npts + 1) * (double)size > h5_file_bytes(from) + 65536.0) goto next;  // corrupt
        buf = xcalloc((size_t)npts + 1, size);
        if (H5Aread(a, t, buf) < 0) goto next;
        if ((b = H5Acreate2(to, name, t, s, H5P_DEFAULT, H5P_DEFAULT)) >= 0 && H5Awrite(b, t, buf) >= 0)
            ok = 1;
        vlen_reclaim(t, s, buf);
    next:
        free(buf);
        h5_close(b);
        h5_close(s);
        h5_close(t);
        h5_close(a);
        if (!ok) return -1;
    }
    return 0;
}

// Copies table `name` of from_root (a group of 1-D numeric columns) to to_root: each column
// with its type, shape, chunking and filters, its data and its attributes. Done by hand rather
// than with H5Ocopy, whose failure path on a corrupt source crashes inside HDF5 1.10; every
// size is checked against what the file stores before anything is allocated. On failure what
// names the column (or the table) and the message is in err.
static int copy_table(hid_t from_root, hid_t to_root, const char *name, char *what, size_t wlen,
                      char *err, size_t errlen) {
    char msg[H5MSG_LEN], attr[256];
    int ret = -1, n = 0;
    char **cols = NULL;
    hid_t g = -1, ng = -1, d = -1, nd = -1, t = -1, sp = -1, dcpl = -1;
    void *buf = NULL;
    snprintf(what, wlen, "/%s", name);
    if ((g = H5Gopen2(from_root, name, H5P_DEFAULT)) < 0 || runlog_list_links(g, &cols, &n) != 0 ||
        (ng = H5Gcreate2(to_root, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
        copy_attrs(g, ng, attr, sizeof attr) != 0)
        goto h5fail;
    for (int c = 0; c < n; c++) {
        snprintf(what, wlen, "/%s/%s", name, cols[c]);
        if ((d = H5Dopen2(g, cols[c], H5P_DEFAULT)) < 0 || (t = H5Dget_type(d)) < 0 ||
            (sp = H5Dget_space(d)) < 0 || (dcpl = H5Dget_create_plist(d)) < 0)
            goto h5fail;
        H5T_class_t cls = H5Tget_class(t);
        hssize_t npts = H5Sget_simple_extent_npoints(sp);
        double raw = (double)npts * (double)H5Tget_size(t), stored = (double)H5Dget_storage_size(d);
        if ((cls != H5T_INTEGER && cls != H5T_FLOAT) || npts < 0 || raw > 1100.0 * stored + (1 << 20)) {
            set_err(err, errlen, "%s is not a column of numbers this file can hold (%s, %lld values "
                    "in %.0f stored bytes; corrupt?)", what, class_name(cls), (long long)npts, stored);
            goto done;
        }
        buf = xmalloc((size_t)npts * H5Tget_size(t) + 1);
        if ((nd = H5Dcreate2(ng, cols[c], t, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0 ||
            (npts > 0 && (H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0 ||
                          H5Dwrite(nd, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)) ||
            copy_attrs(d, nd, attr, sizeof attr) != 0)
            goto h5fail;
        free(buf);
        buf = NULL;
        h5_close(nd), h5_close(dcpl), h5_close(sp), h5_close(t), h5_close(d);
        nd = dcpl = sp = t = d = -1;
    }
    ret = 0;
    goto done;
h5fail:
    set_err(err, errlen, "cannot copy %s (truncated or corrupt? HDF5: %s)", what, h5_msg(msg));
done:
    free(buf);
    runlog_free_names(cols, n);
    h5_close(nd), h5_close(dcpl), h5_close(sp), h5_close(t), h5_close(d);
    h5_close(ng), h5_close(g);
    return ret;
}

// May the copy of the (existing) run log src go to dst? Not onto a directory, not onto src
// itself, onto another existing file only with overwrite, and only into a directory.
static int check_copy_target(const char *src, const char *dst, int overwrite, char *err, size_t errlen) {
    struct stat ss, ds;
    if (stat(src, &ss) != 0) return set_err(err, errlen, "run log '%s': %s", src, strerror(errno));
    if (stat(dst, &ds) == 0) {
        if (S_ISDIR(ds.st_mode))
            return set_err(err, errlen, "cannot write '%s': it is a directory", dst);
        if (ds.st_dev == ss.st_dev && ds.st_ino == ss.st_ino)
            return set_err(err, errlen, "cannot copy run log '%s' onto itself ('%s'): give another output path", src, dst);
        if (!overwrite)
            return set_err(err, errlen, "cannot write '%s': the file already exists (choose another path, or ask to overwrite it)", dst);
    }
    return check_parent_dir("cannot write", dst, err, errlen);
}

static int copy_impl(const char *src, const char *dst, const char *const *drop, int n_drop,
                     int overwrite, char *err, size_t errlen) {
    char msg[H5MSG_LEN], list[512];
    if (!dst || !dst[0]) return set_err(err, errlen, "cannot copy run log '%s': empty output path", src);
    RunLogReader *rd = reader_open_impl(src, err, errlen);  // every check of src
    if (!rd) return -1;
    if (check_copy_target(src, dst, overwrite, err, errlen) != 0 ||
        out_claim("cannot write", dst, err, errlen) != 0) {
        runlog_reader_close(rd);
        return -1;
    }
    int ret = -1;
    hid_t fapl = -1, out = -1, sroot = -1, droot = -1;
    char **names = NULL;
    int n_names = 0;
    const char *tmp = dst;  // the name messages give the copy
    char attr[256];

    if ((sroot = H5Gopen2(rd->file, "/", H5P_DEFAULT)) < 0 || runlog_list_links(sroot, &names, &n_names) != 0) {
        set_err(err, errlen, "run log '%s': cannot list its tables (HDF5: %s)", src, h5_msg(msg));
        goto done;
    }
    for (int k = 0; k < n_drop; k++) {
        int found = 0;
        for (int i = 0; i < n_names; i++) found |= strcmp(names[i], drop[k]) == 0;
        if (!found) {
            set_err(err, errlen, "run log '%s' has no table '/%s' to leave out (tables: %s)", src, drop[k],
                    runlog_link_list(sroot, list, sizeof list));
            goto done;
        }
    }
    // built in memory and written in one go (h5util.h h5_tmp_create): a full disk is a clear
    // error, never a failed write inside HDF5
    if ((fapl = runlog_make_fapl()) < 0) {
        set_err(err, errlen, "cannot write '%s': file access properties (HDF5: %s)", dst, h5_msg(msg));
        goto done;
    }
    if ((out = h5_tmp_create("cannot write", dst, fapl, err, errlen)) < 0) goto done;
    if ((droot = H5Gopen2(out, "/", H5P_DEFAULT)) < 0) goto h5fail;
    if (copy_attrs(sroot, droot, attr, sizeof attr) != 0) {
        set_err(err, errlen, "cannot copy root attribute '%s' of run log '%s' to '%s' (HDF5: %s)", attr, src,
                tmp, h5_msg(msg));
        goto done;
    }
    for (int i = 0; i < n_names; i++) {
        int skip = 0;
        for (int k = 0; k < n_drop; k++) skip |= strcmp(names[i], drop[k]) == 0;
        if (skip) continue;
        char what[300], why[512];
        if (copy_table(sroot, droot, names[i], what, sizeof what, why, sizeof why) != 0) {
            set_err(err, errlen, "run log '%s' to '%s': %s", src, tmp, why);
            goto done;
        }
    }
    h5_close(droot);
    droot = -1;
    ret = h5_tmp_commit(out, "cannot write", dst, overwrite, err, errlen);
    out = -1;
    goto done;
h5fail:
    set_err(err, errlen, "cannot write '%s' (HDF5: %s)", dst, h5_msg(msg));
done:
    h5_close(droot);
    if (out >= 0) h5_tmp_discard(out, dst);
    h5_close(fapl);
    h5_close(sroot);
    runlog_free_names(names, n_names);
    runlog_reader_close(rd);
    out_release(dst);
    return ret;
}

int runlog_copy(const char *src, const char *dst, const char *const *drop, int n_drop, int overwrite,
                char *err, size_t errlen) {
    H5Quiet q = h5_quiet();
    int r = copy_impl(src, dst, drop, n_drop, overwrite, err, errlen);
    h5_loud(q);
    return r;
}
