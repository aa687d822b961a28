// h5util.c: see h5util.h.
#include "h5util.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common.h"

static char *dir_of(const char *path);

H5Quiet h5_quiet(void) {
    H5Quiet q;
    H5Eget_auto2(H5E_DEFAULT, &q.func, &q.data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return q;
}
void h5_loud(H5Quiet q) { H5Eset_auto2(H5E_DEFAULT, q.func, q.data); }
void h5_quiet_for_good(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

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

static herr_t walk_find(unsigned n, const H5E_error2_t *e, void *data) {
    const char **needle = data;
    if (*needle && e->desc && strstr(e->desc, *needle)) *needle = NULL;
    return 0;
}
int h5_stack_has(const char *needle) {
    const char *p = needle;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_find, &p);
    return p == NULL;
}

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

// Checks the collection at byte `at` of fd (file size n) if it is one: 0 if well formed or
// not a collection, -1 with a message.
static int check_collection(int fd, size_t at, size_t n, const unsigned char hdr[16], char *why,
                            size_t len) {
    if (hdr[4] != 1 || hdr[5] || hdr[6] || hdr[7]) return 0;  // not a collection header
    uint64_t size = le64(hdr + 8);
    if (size < 4096 || size > n - at || size > ((uint64_t)1 << 31)) return 0;  // HDF5 rejects it
    unsigned char *p = xmalloc((size_t)size);
    int ret = 0;
    if (pread(fd, p, (size_t)size, (off_t)at) == (ssize_t)size) {
        // objects: index (2), references (2), reserved (4), size (8), data padded to 8 bytes;
        // index 0 is the free space that ends the list
        for (uint64_t o = 16; o + 16 <= size;) {
            unsigned idx = (unsigned)p[o] | (unsigned)p[o + 1] << 8;
            if (idx == 0) break;
            uint64_t osize = le64(p + o + 8), need = 16 + ((osize + 7) & ~(uint64_t)7);
            if (osize > size || need > size - o) {
                ret = set_err(why, len, "global heap collection at byte %zu: object %u claims %llu "
                              "bytes, past the collection's end", at, idx, (unsigned long long)osize);
                break;
            }
            o += need;
        }
    }
    free(p);
    return ret;
}

int h5_check_global_heaps(const char *path, char *why, size_t len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;  // the open that follows reports it
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 32) {
        close(fd);
        return 0;
    }
    // read() rather than mmap: a sparse file on a full filesystem would raise SIGBUS
    size_t n = (size_t)st.st_size, chunk = (size_t)1 << 20;
    unsigned char *buf = xmalloc(chunk + 16);
    int ret = 0;
    for (size_t base = 0; ret == 0 && base < n; base += chunk) {
        size_t want = n - base < chunk + 16 ? n - base : chunk + 16;  // 16 bytes of overlap
        ssize_t got = pread(fd, buf, want, (off_t)base);
        if (got < 20) break;
        const unsigned char *p = buf;
        size_t end = (size_t)got - 16 < chunk ? (size_t)got - 16 : chunk;  // headers starting here
        while (ret == 0 && (p = memmem(p, (size_t)got - (size_t)(p - buf), "GCOL", 4)) &&
               (size_t)(p - buf) <= end) {
            if ((size_t)(p - buf) + 16 <= (size_t)got)
                ret = check_collection(fd, base + (size_t)(p - buf), n, p, why, len);
            p += 4;
        }
    }
    free(buf);
    close(fd);
    return ret;
}

double h5_file_bytes(hid_t obj) {
    hid_t f = H5Iget_file_id(obj);
    hsize_t n = 0;
    if (f < 0 || H5Fget_filesize(f, &n) < 0) n = 0;
    if (f >= 0) H5Fclose(f);
    return (double)n;
}

hid_t h5_swmr_read_fapl(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0 && H5Pset_metadata_read_attempts(fapl, 8) < 0) {
        H5Pclose(fapl);
        return -1;
    }
    return fapl;
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

char *path_with_suffix(const char *path, const char *suffix) {
    size_t n = strlen(path), k = strlen(suffix);
    char *p = xmalloc(n + k + 1);
    memcpy(p, path, n);
    memcpy(p + n, suffix, k + 1);
    return p;
}

int out_claim(const char *what, const char *path, char *err, size_t errlen) {
    if (!path || !path[0]) return set_err(err, errlen, "%s: empty path", what);
    char *lp = path_with_suffix(path, ".lock");
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
    char *lp = path_with_suffix(path, ".lock");
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

long out_writer(const char *path) {
    char *lp = path_with_suffix(path, ".lock");
    struct stat st;
    long pid = 0;
    FILE *f = stat(lp, &st) == 0 ? fopen(lp, "r") : NULL;
    free(lp);
    if (!f) return 0;
    if (fscanf(f, "%ld", &pid) != 1 || pid <= 0) pid = 0;
    fclose(f);
    if (!pid) return 0;
    FILE *locks = fopen("/proc/locks", "r");
    if (!locks) return kill((pid_t)pid, 0) == 0 || errno == EPERM ? pid : 0;
    // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (waiters: "1: -> FLOCK ...")
    char line[256];
    long held = 0;
    while (!held && fgets(line, sizeof line, locks)) {
        char type[16];
        long p;
        unsigned maj, min;
        unsigned long long ino;
        if (sscanf(line, "%*[^:]: %15s %*s %*s %ld %x:%x:%llu", type, &p, &maj, &min, &ino) == 5 &&
            strcmp(type, "FLOCK") == 0 && p == pid && ino == (unsigned long long)st.st_ino)
            held = pid;
    }
    fclose(locks);
    return held;
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
    char msg[H5MSG_LEN];
    hid_t f = -1, p = fapl == H5P_DEFAULT ? H5Pcreate(H5P_FILE_ACCESS) : H5Pcopy(fapl);
    if (p < 0 || H5Pset_fapl_core(p, (size_t)1 << 16, 0) < 0 ||
        (f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, p)) < 0)  // no backing store: path untouched
        set_err(err, errlen, "%s '%s': cannot create the file in memory (HDF5: %s)", what, path, h5_msg(msg));
    if (p >= 0) H5Pclose(p);
    return f;
}

// HDF5's Jenkins lookup3 metadata checksum (exported by libhdf5 since 1.8.7; H5private.h).
uint32_t H5_checksum_metadata(const void *data, size_t len, uint32_t initval);

// H5Fget_file_image of HDF5 1.10 stores the superblock's final end-of-file address in the
// image without updating a version 2/3 superblock's checksum: recompute it, so the image
// reads back. Layout: signature 8, version, sizeof offsets, sizeof lengths, flags, four
// addresses, then the checksum.
static void fix_superblock_checksum(unsigned char *img, size_t n) {
    if (n < 12 || img[8] < 2) return;
    size_t body = 12 + 4 * (size_t)img[9];
    if (body + 4 > n) return;
    uint32_t c = H5_checksum_metadata(img, body, 0);
    for (int i = 0; i < 4; i++) img[body + (size_t)i] = (unsigned char)(c >> (8 * i));
}

// The temporary file tmp of path, created exclusively after removing a dead writer's (the
// caller holds the claim on path). The descriptor, or -1 with a message.
static int create_tmp(const char *what, const char *path, const char *tmp, char *err, size_t errlen) {
    if (unlink(tmp) != 0 && errno != ENOENT)
        return set_err(err, errlen, "%s '%s': cannot remove the old '%s': %s", what, path, tmp, strerror(errno));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return set_err(err, errlen, "%s '%s': cannot create '%s': %s", what, path, tmp, strerror(errno));
    return fd;
}

// Writes the n bytes of buf to fd, the bytes done .. done + n of total bytes of tmp. 0, or
// -1 with a message.
static int write_all(int fd, const void *buf, size_t n, size_t done, size_t total, const char *what,
                     const char *path, const char *tmp, char *err, size_t errlen) {
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, (const char *)buf + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return set_err(err, errlen, "%s '%s': cannot write '%s' (%zu of %zu bytes written): %s", what,
                           path, tmp, done + off, total, w < 0 ? strerror(errno) : "no progress");
        off += (size_t)w;
    }
    return 0;
}

// Syncs fd (a filesystem that cannot sync is not an error) and closes it in every case. 0, or
// -1 with a message.
static int sync_close(int fd, const char *what, const char *path, const char *tmp, char *err, size_t errlen) {
    if (fsync(fd) != 0 && errno != EINVAL) {
        set_err(err, errlen, "%s '%s': cannot sync '%s' to disk: %s", what, path, tmp, strerror(errno));
        close(fd);
        return -1;
    }
    if (close(fd) != 0)
        return set_err(err, errlen, "%s '%s': cannot finish writing '%s': %s", what, path, tmp, strerror(errno));
    return 0;
}

int h5_tmp_commit(hid_t f, const char *what, const char *path, int replace, char *err, size_t errlen) {
    char *tmp = path_with_suffix(path, ".tmp"), msg[H5MSG_LEN];
    int ret = -1, made = 0;
    unsigned char *img = NULL;
    ssize_t n = H5Fflush(f, H5F_SCOPE_GLOBAL) < 0 ? -1 : H5Fget_file_image(f, NULL, 0);
    if (n > 0) {
        img = xmalloc((size_t)n);
        if (H5Fget_file_image(f, img, (size_t)n) != n) n = -1;
    }
    if (n <= 0) {
        set_err(err, errlen, "%s '%s': cannot take the image of the file built in memory (HDF5: %s)",
                what, path, h5_msg(msg));
        goto done;
    }
    fix_superblock_checksum(img, (size_t)n);
    int fd = create_tmp(what, path, tmp, err, errlen);
    if (fd < 0) goto done;
    made = 1;
    if (write_all(fd, img, (size_t)n, 0, (size_t)n, what, path, tmp, err, errlen) != 0) {
        close(fd);
        goto done;
    }
    if (sync_close(fd, what, path, tmp, err, errlen) != 0) goto done;
    if (replace ? rename(tmp, path) != 0 : link(tmp, path) != 0) {
        if (!replace && errno == EEXIST)
            set_err(err, errlen, "%s '%s': it already exists (replace it with --overwrite, or choose "
                    "another path)", what, path);
        else
            set_err(err, errlen, "%s '%s': cannot %s '%s' to it: %s", what, path,
                    replace ? "rename" : "link", tmp, strerror(errno));
        goto done;
    }
    made = !replace;  // a link leaves tmp as a second name
    char *dir = dir_of(path);  // make the rename itself durable (best effort)
    sync_path(dir, 1);
    free(dir);
    ret = 0;
done:
    if (made) unlink(tmp);
    H5Fclose(f);  // in memory only: nothing to write
    free(img);
    free(tmp);
    return ret;
}

void h5_tmp_discard(hid_t f, const char *path) {
    (void)path;  // nothing was written under it
    if (f >= 0) H5Fclose(f);
}

// ---------------------------------------------------------------- copying a file
int h5_copy_file(const char *what, const char *src, const char *dst,
                 int (*finish)(const char *tmp, void *arg, char *err, size_t errlen), void *arg,
                 char *err, size_t errlen) {
    char *tmp = path_with_suffix(dst, ".tmp");
    int in = -1, out = -1, ret = -1, made = 0;
    enum { BUF = 1 << 20 };
    char *buf = xmalloc(BUF);
    struct stat st;
    if ((in = open(src, O_RDONLY | O_CLOEXEC)) < 0 || fstat(in, &st) != 0) {
        set_err(err, errlen, "%s '%s': cannot read '%s': %s", what, dst, src, strerror(errno));
        goto done;
    }
    if ((out = create_tmp(what, dst, tmp, err, errlen)) < 0) goto done;
    made = 1;
    for (size_t copied = 0;;) {
        ssize_t r = read(in, buf, BUF);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            set_err(err, errlen, "%s '%s': cannot read '%s': %s", what, dst, src, strerror(errno));
            goto done;
        }
        if (r == 0) break;
        if (write_all(out, buf, (size_t)r, copied, (size_t)st.st_size, what, dst, tmp, err, errlen) != 0)
            goto done;
        copied += (size_t)r;
    }
    int c = sync_close(out, what, dst, tmp, err, errlen);
    out = -1;
    if (c != 0 || (finish && finish(tmp, arg, err, errlen) != 0)) goto done;
    if (rename(tmp, dst) != 0) {
        set_err(err, errlen, "%s '%s': cannot rename '%s' to it: %s", what, dst, tmp, strerror(errno));
        goto done;
    }
    made = 0;
    char *dir = dir_of(dst);  // make the rename itself durable (best effort)
    sync_path(dir, 1);
    free(dir);
    ret = 0;
done:
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    if (made) unlink(tmp);
    free(buf);
    free(tmp);
    return ret;
}
