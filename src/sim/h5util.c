// h5util.c: see h5util.h.
#include "h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common.h"

static char *dir_of(const char *path);

H5Quiet h5_quiet(void) {
    H5Quiet q;
    H5Eget_auto2(H5E_DEFAULT, &q.func, &q.data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return q;
}
void h5_loud(H5Quiet q) { H5Eset_auto2(H5E_DEFAULT, q.func, q.data); }

typedef struct {
    char *buf;
    int os_errno;  // the first "errno = N" (N > 0) in the stack, 0 if none
} MsgWalk;
static herr_t walk_desc(unsigned n, const H5E_error2_t *e, void *data) {
    MsgWalk *w = data;
    if (n == 0 && e->desc) snprintf(w->buf, H5MSG_LEN, "%s", e->desc);
    const char *p = e->desc ? strstr(e->desc, "errno = ") : NULL;
    if (p && !w->os_errno) w->os_errno = atoi(p + 8);
    return 0;
}
const char *h5_msg(char buf[H5MSG_LEN]) {
    buf[0] = '\0';
    MsgWalk w = {buf, 0};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_desc, &w);
    if (w.os_errno > 0)  // HDF5's descriptions of system errors repeat the (long) path
        snprintf(buf, H5MSG_LEN, "%s", strerror(w.os_errno));
    else if (!buf[0])
        snprintf(buf, H5MSG_LEN, "unknown HDF5 error");
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
    char *dir = dir_of(path);
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

// The directory part of path ("." for a bare name), malloc'd.
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    char *dir = xmalloc(len + 1);
    memcpy(dir, slash ? path : ".", len);
    dir[len] = '\0';
    return dir;
}

int check_out_path(const char *what, const char *path, int replace, char *err, size_t errlen) {
    if (!path || !path[0]) return set_err(err, errlen, "%s: empty path", what);
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return set_err(err, errlen, "%s '%s': it is a directory", what, path);
        if (!replace)
            return set_err(err, errlen, "%s '%s': it already exists (replace it with --overwrite, or "
                           "choose another path)", what, path);
    }
    if (check_parent_dir(what, path, err, errlen) != 0) return -1;
    char *dir = dir_of(path);
    int ret = 0;
    if (access(dir, W_OK | X_OK) != 0)
        ret = set_err(err, errlen, "%s '%s': cannot create files in directory '%s': %s", what, path,
                      dir, strerror(errno));
    free(dir);
    return ret;
}

// ---------------------------------------------------------------- output claims
typedef struct {
    dev_t dev;
    ino_t ino;
    int fd;     // holds the flock
    int count;  // out_claim calls not yet released
    char *lock_path;
} Claim;
enum { MAX_CLAIMS = 32 };
static Claim claims[MAX_CLAIMS];

// path + suffix, malloc'd ("<path>.lock", "<path>.tmp").
static char *with_suffix(const char *path, const char *suffix) {
    size_t n = strlen(path), k = strlen(suffix);
    char *p = xmalloc(n + k + 1);
    memcpy(p, path, n);
    memcpy(p + n, suffix, k + 1);
    return p;
}

int out_claim(const char *what, const char *path, char *err, size_t errlen) {
    if (!path || !path[0]) return set_err(err, errlen, "%s: empty path", what);
    char *lp = with_suffix(path, ".lock");
    int ret = -1, attempt_left_none = 1;
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0) {
            set_err(err, errlen, "%s '%s': cannot create its lock file '%s': %s", what, path, lp,
                    strerror(errno));
            attempt_left_none = 0;
            break;
        }
        struct stat st, now;
        if (fstat(fd, &st) != 0) {
            set_err(err, errlen, "%s '%s': lock file '%s': %s", what, path, lp, strerror(errno));
            close(fd);
            attempt_left_none = 0;
            break;
        }
        int k = -1;
        for (int i = 0; i < MAX_CLAIMS && k < 0; i++)
            if (claims[i].count > 0 && claims[i].dev == st.st_dev && claims[i].ino == st.st_ino) k = i;
        if (k >= 0) {  // this process holds it already
            close(fd);
            claims[k].count++;
            ret = 0;
            attempt_left_none = 0;
            break;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            char pid[32] = "";
            ssize_t r = pread(fd, pid, sizeof pid - 1, 0);
            pid[r > 0 ? r : 0] = '\0';
            pid[strcspn(pid, "\n")] = '\0';
            if (e == EWOULDBLOCK)
                set_err(err, errlen, "%s '%s': another process%s%s%s is writing it (it holds the lock "
                        "'%s'); wait for it to finish, or choose another path", what, path,
                        pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "", lp);
            else
                set_err(err, errlen, "%s '%s': cannot lock '%s': %s", what, path, lp, strerror(e));
            close(fd);
            attempt_left_none = 0;
            break;
        }
        // the holder before us may have removed the file between our open and our lock
        if (stat(lp, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
            close(fd);
            continue;
        }
        for (int i = 0; i < MAX_CLAIMS && k < 0; i++)
            if (claims[i].count == 0) k = i;
        if (k < 0) die("out_claim: more than %d outputs claimed at once", MAX_CLAIMS);
        char pid[32];
        int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
            // the pid is only for messages; the flock is the claim
        }
        claims[k] = (Claim){st.st_dev, st.st_ino, fd, 1, lp};
        return 0;
    }
    if (ret != 0 && attempt_left_none)
        set_err(err, errlen, "%s '%s': its lock file '%s' keeps being replaced", what, path, lp);
    free(lp);
    return ret;
}

void out_release(const char *path) {
    if (!path) return;
    char *lp = with_suffix(path, ".lock");
    struct stat st;
    if (stat(lp, &st) == 0)
        for (int i = 0; i < MAX_CLAIMS; i++)
            if (claims[i].count > 0 && claims[i].dev == st.st_dev && claims[i].ino == st.st_ino) {
                if (--claims[i].count == 0) {
                    unlink(claims[i].lock_path);  // before the unlock: see out_claim's re-check
                    close(claims[i].fd);
                    free(claims[i].lock_path);
                    claims[i].lock_path = NULL;
                }
                break;
            }
    free(lp);
}

// ---------------------------------------------------------------- writing a file in one go
// fsync of a file or directory; filesystems that cannot sync (EINVAL) are not an error.
static int sync_path(const char *p, int is_dir) {
    int fd = open(p, (is_dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return -1;
    int r = fsync(fd);
    if (r != 0 && errno == EINVAL) r = 0;
    int e = errno;
    close(fd);
    errno = e;
    return r;
}


hid_t h5_tmp_create(const char *what, const char *path, hid_t fapl, char *err, size_t errlen) {
    char *tmp = with_suffix(path, ".tmp"), msg[H5MSG_LEN];
    hid_t f = -1, p = -1;
    // the caller holds the claim on path: an existing temporary file is a dead writer's
    int fd = unlink(tmp) == 0 || errno == ENOENT ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666) : -1;
    if (fd < 0) {
        set_err(err, errlen, "%s '%s': cannot create '%s': %s", what, path, tmp, strerror(errno));
        goto done;
    }
    close(fd);
    if ((p = fapl == H5P_DEFAULT ? H5Pcreate(H5P_FILE_ACCESS) : H5Pcopy(fapl)) < 0 ||
        H5Pset_fapl_core(p, (size_t)1 << 16, 1) < 0 ||
        (f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, p)) < 0) {
        set_err(err, errlen, "%s '%s': cannot create '%s' (HDF5: %s)", what, path, tmp, h5_msg(msg));
        unlink(tmp);
    }
done:
    if (p >= 0) H5Pclose(p);
    free(tmp);
    return f;
}

int h5_tmp_commit(hid_t f, const char *what, const char *path, int replace, char *err, size_t errlen) {
    char *tmp = with_suffix(path, ".tmp"), msg[H5MSG_LEN];
    int ret = -1;
    if (H5Fclose(f) < 0) {  // the one write of the whole file
        set_err(err, errlen, "%s '%s': cannot write '%s': %s", what, path, tmp, h5_msg(msg));
        goto done;
    }
    if (sync_path(tmp, 0) != 0) {
        set_err(err, errlen, "%s '%s': cannot sync '%s' to disk: %s", what, path, tmp, strerror(errno));
        goto done;
    }
    if (replace ? rename(tmp, path) != 0 : link(tmp, path) != 0) {
        if (!replace && errno == EEXIST)
            set_err(err, errlen, "%s '%s': it already exists (replace it with --overwrite, or choose "
                    "another path)", what, path);
        else
            set_err(err, errlen, "%s '%s': cannot %s '%s' to it: %s", what, path,
                    replace ? "rename" : "link", tmp, strerror(errno));
        goto done;
    }
    char *dir = dir_of(path);  // make the rename itself durable (best effort)
    sync_path(dir, 1);
    free(dir);
    ret = 0;
done:
    if (ret != 0 || !replace) unlink(tmp);
    free(tmp);
    return ret;
}

void h5_tmp_discard(hid_t f, const char *path) {
    if (f >= 0) H5Fclose(f);
    char *tmp = with_suffix(path, ".tmp");
    unlink(tmp);
    free(tmp);
}
