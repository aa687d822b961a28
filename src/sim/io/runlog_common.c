// runlog_common.c: what the run log's writer and reader share (declared and described in
// runlog_internal.h).
#include "runlog_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "h5util.h"

#include "../../common.h"

hid_t runlog_make_fapl(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return -1;
#if H5_VERSION_GE(1, 10, 2)
    H5F_libver_t v110 = H5F_LIBVER_V110;
#else
    H5F_libver_t v110 = H5F_LIBVER_LATEST;
#endif
    if (H5Pset_libver_bounds(fapl, v110, v110) < 0) {
        H5Pclose(fapl);
        return -1;
    }
    return fapl;
}

int runlog_read_attr_text(const char *path, hid_t obj, const char *name, char **out, char *err,
                          size_t errlen) {
    char msg[H5MSG_LEN];
    int ret = -1;
    hid_t a = -1, ft = -1, mt = -1, sp = -1;
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0) goto h5fail;
    if (ex == 0) return 0;
    if ((a = H5Aopen(obj, name, H5P_DEFAULT)) < 0 || (ft = H5Aget_type(a)) < 0 ||
        (sp = H5Aget_space(a)) < 0)
        goto h5fail;
    H5T_class_t cls = H5Tget_class(ft);
    hssize_t count = H5Sget_simple_extent_npoints(sp);
    if (count != 1 || (cls != H5T_STRING && cls != H5T_INTEGER && cls != H5T_FLOAT)) {
        set_err(err, errlen, "run log '%s': root attribute '%s' is not a single string or number (found %lld %s values)",
                path, name, (long long)count, class_name(cls));
        goto done;
    }
    char num[64];
    if (cls == H5T_INTEGER) {
        long long v;
        if (H5Aread(a, H5T_NATIVE_LLONG, &v) < 0) goto h5fail;
        snprintf(num, sizeof num, "%lld", v);
        *out = xstrdup(num);
    } else if (cls == H5T_FLOAT) {
        double v;
        if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0) goto h5fail;
        snprintf(num, sizeof num, "%.17g", v);
        *out = xstrdup(num);
    } else if (H5Tis_variable_str(ft) > 0) {
        char *raw = NULL;
        if ((mt = H5Tcopy(H5T_C_S1)) < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0 ||
            H5Tset_cset(mt, H5Tget_cset(ft)) < 0 || H5Aread(a, mt, &raw) < 0)
            goto h5fail;
        *out = xstrdup(raw ? raw : "");
        vlen_reclaim(mt, sp, &raw);
    } else {  // fixed length: ends at its first NUL or its size
        size_t size = H5Tget_size(ft);
        if ((double)size > h5_file_bytes(obj)) {
            set_err(err, errlen, "run log '%s': root attribute '%s' claims a %zu-byte string, more than "
                    "the file holds (corrupt?)", path, name, size);
            goto done;
        }
        char *fixed = xcalloc(size + 1, 1);
        if (H5Aread(a, ft, fixed) < 0) {
            free(fixed);
            goto h5fail;
        }
        *out = fixed;
    }
    ret = 1;
    goto done;
h5fail:
    set_err(err, errlen, "run log '%s': cannot read root attribute '%s' (HDF5: %s)", path, name,
            h5_msg(msg));
done:
    h5_close(mt);
    h5_close(sp);
    h5_close(ft);
    h5_close(a);
    return ret;
}

int runlog_list_links(hid_t loc, char ***names, int *n) {
    H5G_info_t info;
    *names = NULL;
    *n = 0;
    if (H5Gget_info(loc, &info) < 0 || info.nlinks > INT_MAX) return -1;
    char **v = xcalloc(info.nlinks, sizeof *v);
    for (hsize_t i = 0; i < info.nlinks; i++) {
        ssize_t len = H5Lget_name_by_idx(loc, ".", H5_INDEX_NAME, H5_ITER_INC, i, NULL, 0, H5P_DEFAULT);
        if (len < 0) {
            for (hsize_t k = 0; k < i; k++) free(v[k]);
            free(v);
            return -1;
        }
        v[i] = xmalloc((size_t)len + 1);
        H5Lget_name_by_idx(loc, ".", H5_INDEX_NAME, H5_ITER_INC, i, v[i], (size_t)len + 1, H5P_DEFAULT);
    }
    *names = v;
    *n = (int)info.nlinks;
    return 0;
}

void runlog_free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

const char *runlog_link_list(hid_t loc, char *buf, size_t len) {
    char **names;
    int n;
    if (runlog_list_links(loc, &names, &n) != 0) return snprintf(buf, len, "unknown"), buf;
    size_t k = (size_t)snprintf(buf, len, "%s", n ? "" : "none");
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "", names[i]);
    runlog_free_names(names, n);
    return buf;
}

int runlog_check_file(const char *path, const char *who, char *err, size_t errlen) {
    struct stat st;
    if (!path || !path[0]) return set_err(err, errlen, "%s: empty path", who);
    if (stat(path, &st) != 0)
        return set_err(err, errlen, "%s '%s': %s", who, path,
                       errno == ENOENT ? "file does not exist" : strerror(errno));
    if (S_ISDIR(st.st_mode)) return set_err(err, errlen, "%s '%s': it is a directory", who, path);
    FILE *f = fopen(path, "rb");
    if (!f) return set_err(err, errlen, "%s '%s': %s", who, path, strerror(errno));
    fclose(f);
    if (H5Fis_hdf5(path) <= 0)
        return set_err(err, errlen, "%s '%s': not an HDF5 file (or truncated/corrupt)", who, path);
    char why[256];
    if (h5_check_global_heaps(path, why, sizeof why) != 0)
        return set_err(err, errlen, "%s '%s' is corrupt (%s)", who, path, why);
    return 0;
}

int runlog_check_format(const char *path, hid_t f, char *err, size_t errlen) {
    char *format = NULL, *version = NULL, *writer = NULL;
    int ret = -1;
    int r = runlog_read_attr_text(path, f, "format", &format, err, errlen);
    if (r < 0) goto done;
    if (r == 0 || strcmp(format, RUNLOG_FORMAT) != 0) {
        set_err(err, errlen, "'%s' is not a grpolab run log (root attribute 'format' %s%s%s; expected \"%s\")",
                path, r == 0 ? "is missing" : "is \"", r == 0 ? "" : format, r == 0 ? "" : "\"",
                RUNLOG_FORMAT);
        goto done;
    }
    r = runlog_read_attr_text(path, f, "format_version", &version, err, errlen);
    if (r < 0) goto done;
    if (r == 0) {
        set_err(err, errlen, "run log '%s' has no root attribute 'format_version' (expected %d)",
                path, RUNLOG_FORMAT_VERSION);
        goto done;
    }
    if (strtoll(version, NULL, 10) != RUNLOG_FORMAT_VERSION || strchr(version, '.')) {
        char by[96] = "";
        if (runlog_read_attr_text(path, f, "grpolab_version", &writer, NULL, 0) == 1)
            snprintf(by, sizeof by, " (written by grpolab %s)", writer);
        set_err(err, errlen, "run log '%s' has format_version %s%s, this grpolab (%s) reads version %d "
                "(use a matching grpolab)", path, version, by, GRPOLAB_VERSION, RUNLOG_FORMAT_VERSION);
        goto done;
    }
    ret = 0;
done:
    free(format);
    free(version);
    free(writer);
    return ret;
}

// ---------------------------------------------------------------- column types
hid_t runlog_file_type(ColType t) {
    switch (t) {
    case COL_I32: return H5T_STD_I32LE;
    case COL_I64: return H5T_STD_I64LE;
    case COL_F32: return H5T_IEEE_F32LE;
    default: return H5T_IEEE_F64LE;
    }
}
hid_t runlog_mem_type(ColType t) {
    switch (t) {
    case COL_I32: return H5T_NATIVE_INT32;
    case COL_I64: return H5T_NATIVE_INT64;
    case COL_F32: return H5T_NATIVE_FLOAT;
    default: return H5T_NATIVE_DOUBLE;
    }
}
size_t runlog_type_size(ColType t) { return t == COL_I32 || t == COL_F32 ? 4 : 8; }
const char *runlog_type_name(ColType t) {
    static const char *names[] = {"int32", "int64", "float32", "float64"};
    return (unsigned)t < 4 ? names[t] : "invalid";
}

int runlog_col_type_of(hid_t ft, char *what, size_t len) {
    H5T_class_t c = H5Tget_class(ft);
    size_t size = H5Tget_size(ft);
    if (c == H5T_INTEGER && H5Tget_sign(ft) == H5T_SGN_2 && (size == 4 || size == 8))
        return size == 4 ? COL_I32 : COL_I64;
    if (c == H5T_FLOAT && (size == 4 || size == 8)) return size == 4 ? COL_F32 : COL_F64;
    snprintf(what, len, "%s%s of %zu bytes",
             c == H5T_INTEGER && H5Tget_sign(ft) != H5T_SGN_2 ? "unsigned " : "", class_name(c),
             size);
    return -1;
}
