// h5util.h: the HDF5 helpers shared by checkpoint.c and the run log (runlog_*.c): quiet error handling that
// turns a failed call into HDF5's own innermost message, closing any id, checks on paths, and
// the rules every command that writes a file follows (docs/cli.md, "Failure behaviour"):
//   - an output is claimed before it is written (out_claim): two processes never write the
//     same path, the second is refused with a message naming the first;
//   - an output path is checked before any work (check_out_path): its directory exists and
//     is writable, it is not a directory, and it does not exist unless it may be replaced;
//   - a file written in one go (checkpoint, stripped log) is built in memory and written by
//     h5_tmp_commit to a temporary file renamed into place: a full disk gives errno's reason,
//     never a crash inside HDF5, and nothing half-written is left behind.
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
// Switches it off for the rest of the process (grpolab's main): every HDF5 failure is
// reported by its caller, with h5_msg. It also keeps HDF5's shutdown at exit quiet where a
// file with corrupt metadata could not be closed: HDF5 then gives up after 100 tries and,
// only while automatic printing is on, prints "HDF5: infinite loop closing library" and a
// line of its internal modules after the command's own message.
void h5_quiet_for_good(void);

#define H5MSG_LEN 256
// HDF5's own message for the call that just failed: the operating system's reason when HDF5
// reports one ("No space left on device", "Permission denied"), else its innermost (most
// specific) error. Call it before any other HDF5 call: each call clears the error stack.
const char *h5_msg(char buf[H5MSG_LEN]);

// 1 if a message of the current HDF5 error stack contains needle (call it, like h5_msg,
// before any other HDF5 call).
int h5_stack_has(const char *needle);

// File access properties for opening a file that a writer may be changing (SWMR read) with
// the metadata read attempts bounded: HDF5 retries a failed checksum, sleeping longer each
// time, up to 100 times by default, which on a corrupt file that nobody writes is a hang.
// Open files plainly first and use this only for a file marked as being written. -1 on error.
hid_t h5_swmr_read_fapl(void);

// 0 if every global heap collection in the file at path is well formed, else -1 with "<where>:
// <what is wrong>" in why. HDF5 keeps variable-length strings (a run log's config, a
// checkpoint's vocabulary) in global heap collections, which carry no checksum, and HDF5 1.10
// copies their objects by the sizes stored there without checking them against the
// collection: a corrupt one crashes or hangs inside HDF5. Readers call this before opening a
// file, so such a file is refused with a message instead. The file is scanned for collections
// ("GCOL", version 1, zero reserved bytes, a plausible size) and each object's size is checked
// against the collection's end.
int h5_check_global_heaps(const char *path, char *why, size_t len);

// The size in bytes of the file that holds object obj (0 if HDF5 cannot say). Readers bound
// what they allocate for a dataset or attribute by it: corrupt metadata can claim any size.
double h5_file_bytes(hid_t obj);

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

// 0 if path may be written: its directory exists and this process may create files in it,
// path is not a directory, and path does not exist unless replace; else -1 with
// "<what> '<path>': <reason>" (an existing file: "it already exists (replace it with
// --overwrite, or choose another path)").
int check_out_path(const char *what, const char *path, int replace, char *err, size_t errlen);

// path + suffix, malloc'd ("<path>.lock", "<path>.tmp", "<log>.ckpt.h5").
char *path_with_suffix(const char *path, const char *suffix);

// Claims path for writing: an exclusive lock (flock) on "<path>.lock", created beside it and
// removed by out_release. The lock dies with the process, so a crashed writer leaves at most
// an unlocked lock file that the next claim takes over. -1 with "<what> '<path>': another
// process (pid N) is writing it" when another process holds it. Re-entrant within a process:
// each out_claim of a held path needs its own out_release.
int out_claim(const char *what, const char *path, char *err, size_t errlen);
void out_release(const char *path);
// The pid of the process on this machine that holds the claim on path (out_claim), or 0 if
// none does: the pid written in "<path>.lock" if that process holds a flock on the file
// (/proc/locks; without it, if the process exists). Takes no lock, so it never gets in a
// writer's way. A writer on another machine (a shared file system) is not seen.
long out_writer(const char *path);

// An HDF5 file built in memory (core driver, nothing on disk) to become path: h5_tmp_commit
// writes its image to "<path>.tmp" with plain write() calls, syncs it and renames it into
// place, so a full disk is a write() error with errno's reason, never a failed write inside
// HDF5 (which can leave HDF5 crashing at exit). The caller holds the claim on path
// (out_claim), so an existing temporary file is a dead writer's and is replaced. -1 with a
// message on error.
hid_t h5_tmp_create(const char *what, const char *path, hid_t fapl, char *err, size_t errlen);
// Writes f as "<path>.tmp", syncs it, then renames it over path (replace) or links it to path
// (!replace: an existing path is an error, checked atomically). On any failure the temporary
// file is removed and path is unchanged. Closes f in every case.
int h5_tmp_commit(hid_t f, const char *what, const char *path, int replace, char *err, size_t errlen);
// Closes f (if >= 0) without writing anything: after a failure while building it.
void h5_tmp_discard(hid_t f, const char *path);

// Copies the file src byte for byte to "<dst>.tmp", syncs it, lets finish (if not NULL) change
// the copy (finish(tmp, arg, err, errlen): 0, or -1 with a message), then renames it over dst.
// The caller holds the claim on dst (out_claim), so an existing temporary file is a dead
// writer's and is replaced. On any failure the temporary file is removed and dst is
// unchanged. -1 with "<what> '<dst>': <reason>".
int h5_copy_file(const char *what, const char *src, const char *dst,
                 int (*finish)(const char *tmp, void *arg, char *err, size_t errlen), void *arg,
                 char *err, size_t errlen);

#endif
