// h5util.c: see h5util.h.
#include "h5util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common.h"

H5Quiet h5_quiet(void) {
    H5Quiet q;
    H5Eget_auto2(H5E_DEFAULT, &q.func, &q.data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return q;
}
void h5_loud(H5Quiet q) { H5Eset_auto2(H5E_DEFAULT, q.func, q.data); }

static herr_t first_desc(unsigned n, const H5E_error2_t *e, void *data) {
    if (n == 0 && e->desc) snprintf((char *)data, H5MSG_LEN, "%s", e->desc);
    return 0;
}
const char *h5_msg(char buf[H5MSG_LEN]) {
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, first_desc, buf);
    if (!buf[0]) snprintf(buf, H5MSG_LEN, "unknown HDF5 error");
    return buf;
}

int h5_close(hid_t id) {
    if (id < 0) return 0;
    herr_t r = 0;
    switch (H5Iget_type(id)) {
    case H5I_FILE: r = H5Fclose(id); break;
    case H5I_GROUP: r = H5Gclose(id); break;
    case H5I_DATASET: r = H5Dclose(id); break;
    case H5I_ATTR: r = H5Aclose(id); break;
    case H5I_DATATYPE: r = H5Tclose(id); break;
    case H5I_DATASPACE: r = H5Sclose(id); break;
    case H5I_GENPROP_LST: r = H5Pclose(id); break;
    default: break;
    }
    return r < 0 ? -1 : 0;
}

void vlen_reclaim(hid_t type, hid_t space, void *buf) {
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(type, space, H5P_DEFAULT, buf);
#else
    H5Dvlen_reclaim(type, space, H5P_DEFAULT, buf);
#endif
}

const char *class_name(H5T_class_t c) {
    switch (c) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "float";
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum";
    case H5T_ARRAY: return "array";
    default: return "non-numeric";
    }
}

int check_parent_dir(const char *what, const char *path, char *err, size_t errlen) {
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    char *dir = xmalloc(len + 1);
    memcpy(dir, slash ? path : ".", len);
    dir[len] = '\0';
    struct stat st;
    int ret = 0;
    if (stat(dir, &st) != 0)
        ret = set_err(err, errlen, "%s '%s': directory '%s' %s", what, path, dir,
                      errno == ENOENT ? "does not exist (create it first)" : strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        ret = set_err(err, errlen, "%s '%s': '%s' is not a directory", what, path, dir);
    free(dir);
    return ret;
}
