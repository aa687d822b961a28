// checkpoint.c: model checkpoints as HDF5 (layout in checkpoint.h).
//
// HDF5's automatic error printing is switched off around our calls; every failed call
// becomes one message naming the file, what was being done and HDF5's own innermost error.
// All HDF5 ids of a function are closed at its single cleanup label.
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "../io/config.h"
#include "../io/h5util.h"

#include "../../common.h"

// ---------------------------------------------------------------- model config as attributes
typedef struct {
    const char *name;  // attribute name
    int is_float;      // 0: int (stored int32), 1: float (stored float32)
    size_t offset;     // in ModelConfig
} CfgField;

#define INT_FIELD(f) {"model." #f, 0, offsetof(ModelConfig, f)}
#define FLOAT_FIELD(f) {"model." #f, 1, offsetof(ModelConfig, f)}
static const CfgField CFG_FIELDS[] = {
    INT_FIELD(vocab_size), INT_FIELD(d_model),     INT_FIELD(n_layers),
    INT_FIELD(n_heads),    INT_FIELD(n_kv_heads),  INT_FIELD(d_ff),
    INT_FIELD(max_seq_len), INT_FIELD(tied_embeddings), FLOAT_FIELD(rope_theta),
    FLOAT_FIELD(norm_eps),
};
#undef INT_FIELD
#undef FLOAT_FIELD
#define N_CFG_FIELDS ((int)(sizeof CFG_FIELDS / sizeof CFG_FIELDS[0]))
_Static_assert(sizeof(ModelConfig) == 8 * sizeof(int) + 2 * sizeof(float),
               "ModelConfig changed: update CFG_FIELDS in checkpoint.c");

static int *cfg_int(ModelConfig *c, const CfgField *f) { return (int *)((char *)c + f->offset); }
static float *cfg_float(ModelConfig *c, const CfgField *f) {
    return (float *)((char *)c + f->offset);
}

// ---------------------------------------------------------------- HDF5 helpers
// "(64, 32)"; "(64,)" for 1-D, like a Python shape tuple.
static const char *fmt_shape(char *buf, size_t len, int rank, const hsize_t *dims) {
    size_t k = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < rank && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%llu", i ? ", " : "",
                              (unsigned long long)dims[i]);
    if (k < len) snprintf(buf + k, len - k, rank == 1 ? ",)" : ")");
    return buf;
}

// ---------------------------------------------------------------- attribute readers
// Each returns 1 if the attribute was read, 0 if it is absent, -1 on error (message in err).

// The numeric attribute name of obj (owner: "root" or "/optimizer", for messages): one
// element of class cls (H5T_INTEGER or H5T_FLOAT), read as mtype into out.
static int read_num_attr(const char *path, hid_t obj, const char *owner, const char *name,
                         H5T_class_t cls, hid_t mtype, void *out, char *err, size_t errlen) {
    char msg[H5MSG_LEN];
    int ret = -1;
    hid_t a = -1, t = -1, s = -1;
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0) goto h5fail;
    if (ex == 0) return 0;
    if ((a = H5Aopen(obj, name, H5P_DEFAULT)) < 0 || (t = H5Aget_type(a)) < 0 ||
        (s = H5Aget_space(a)) < 0)
        goto h5fail;
    if (H5Tget_class(t) != cls || H5Sget_simple_extent_npoints(s) != 1) {
        char found[64];
        if (H5Tget_class(t) != cls)
            snprintf(found, sizeof found, "a %s", class_name(H5Tget_class(t)));
        else
            snprintf(found, sizeof found, "%lld values", (long long)H5Sget_simple_extent_npoints(s));
        set_err(err, errlen, "checkpoint '%s': %s attribute '%s' is not a single %s (found %s)",
                path, owner, name, cls == H5T_FLOAT ? "float" : "integer", found);
        goto done;
    }
    if (H5Aread(a, mtype, out) < 0) goto h5fail;
    ret = 1;
    goto done;
h5fail:
    set_err(err, errlen, "checkpoint '%s': cannot read %s attribute '%s' (HDF5: %s)", path, owner,
            name, h5_msg(msg));
done:
    h5_close(s);
    h5_close(t);
    h5_close(a);
    return ret;
}

// The string attribute name of obj (scalar or 1-D; fixed or variable length) as a malloc'd
// array of *n malloc'd strings.
static int read_str_attr(const char *path, hid_t obj, const char *name, char ***out, int *n,
                         char *err, size_t errlen) {
    char msg[H5MSG_LEN];
    int ret = -1;
    hid_t a = -1, ft = -1, mt = -1, sp = -1;
    char **strs = NULL, **raw = NULL;
    char *fixed = NULL;
    hssize_t count = 0;
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0) goto h5fail;
    if (ex == 0) return 0;
    if ((a = H5Aopen(obj, name, H5P_DEFAULT)) < 0 || (ft = H5Aget_type(a)) < 0 ||
        (sp = H5Aget_space(a)) < 0)
        goto h5fail;
    count = H5Sget_simple_extent_npoints(sp);
    if (H5Tget_class(ft) == H5T_STRING && count >= 0 &&
        (double)count * (double)H5Tget_size(ft) > h5_file_bytes(obj)) {  // each string takes bytes
        set_err(err, errlen, "checkpoint '%s': root attribute '%s' claims %lld strings of %zu bytes, more "
                "than the file holds (corrupt?)", path, name, (long long)count, H5Tget_size(ft));
        goto done;
    }
    if (H5Tget_class(ft) != H5T_STRING || H5Sget_simple_extent_ndims(sp) > 1 || count < 0 ||
        count > INT_MAX) {
        set_err(err, errlen, "checkpoint '%s': root attribute '%s' is not a string or 1-D array of strings (found %s)",
                path, name, class_name(H5Tget_class(ft)));
        goto done;
    }
    strs = xcalloc((size_t)count, sizeof *strs);
    if (H5Tis_variable_str(ft) > 0) {
        if ((mt = H5Tcopy(H5T_C_S1)) < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0 ||
            H5Tset_cset(mt, H5Tget_cset(ft)) < 0)
            goto h5fail;
        raw = xcalloc((size_t)count, sizeof *raw);
        if (H5Aread(a, mt, raw) < 0) goto h5fail;
        for (hssize_t i = 0; i < count; i++) strs[i] = xstrdup(raw[i] ? raw[i] : "");
        vlen_reclaim(mt, sp, raw);
    } else {  // fixed length: read as stored, each string ends at its first NUL or its size
        size_t size = H5Tget_size(ft);
        fixed = xcalloc((size_t)count, size);
        if (H5Aread(a, ft, fixed) < 0) goto h5fail;
        for (hssize_t i = 0; i < count; i++) {
            const char *s = fixed + (size_t)i * size;
            size_t len = 0;
            while (len < size && s[len]) len++;
            strs[i] = xmalloc(len + 1);
            memcpy(strs[i], s, len);
            strs[i][len] = '\0';
        }
    }
    *out = strs;
    *n = (int)count;
    strs = NULL;
    ret = 1;
    goto done;
h5fail:
    set_err(err, errlen, "checkpoint '%s': cannot read root attribute '%s' (HDF5: %s)", path,
            name, h5_msg(msg));
done:
    if (strs) checkpoint_free_vocab(strs, (int)count);
    free(raw);
    free(fixed);
    h5_close(mt);
    h5_close(sp);
    h5_close(ft);
    h5_close(a);
    return ret;
}

// A scalar string attribute as one malloc'd string.
static int read_str1_attr(const char *path, hid_t obj, const char *name, char **out, char *err,
                          size_t errlen) {
    char **strs = NULL;
    int n = 0;
    int r = read_str_attr(path, obj, name, &strs, &n, err, errlen);
    if (r != 1) return r;
    if (n != 1) {
        checkpoint_free_vocab(strs, n);
        return set_err(err, errlen, "checkpoint '%s': root attribute '%s' holds %d strings, expected one",
                       path, name, n);
    }
    *out = strs[0];
    free(strs);
    return 1;
}

// ---------------------------------------------------------------- opening and metadata
// Opens path read-only and checks the format name and version. Returns the file id or -1.
static hid_t open_checkpoint(const char *path, char *err, size_t errlen) {
    char msg[H5MSG_LEN];
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return set_err(err, errlen, "cannot open checkpoint '%s': file does not exist", path);
        return set_err(err, errlen, "cannot open checkpoint '%s': %s", path, strerror(errno));
    }
    if (S_ISDIR(st.st_mode))
        return set_err(err, errlen, "cannot open checkpoint '%s': it is a directory", path);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return set_err(err, errlen, "cannot open checkpoint '%s': %s", path, strerror(errno));
    close(fd);
    if (H5Fis_hdf5(path) <= 0)
        return set_err(err, errlen, "checkpoint '%s' is not an HDF5 file (or is truncated/corrupt)",
                       path);
    char why[256];
    if (h5_check_global_heaps(path, why, sizeof why) != 0)
        return set_err(err, errlen, "checkpoint '%s' is corrupt (%s)", path, why);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return set_err(err, errlen, "checkpoint '%s' is truncated or corrupt (HDF5: %s)", path,
                       h5_msg(msg));

    char *format = NULL, *writer = NULL;
    int64_t version = 0;
    int r = read_str1_attr(path, f, "format", &format, err, errlen);
    if (r < 0) goto fail;
    if (r == 0 || strcmp(format, CHECKPOINT_FORMAT) != 0) {
        set_err(err, errlen, "'%s' is not a grpolab checkpoint (root attribute 'format' %s%s%s; expected \"%s\")",
                path, r == 0 ? "missing" : "is \"", r == 0 ? "" : format, r == 0 ? "" : "\"",
                CHECKPOINT_FORMAT);
        goto fail;
    }
    r = read_num_attr(path, f, "root", "format_version", H5T_INTEGER, H5T_NATIVE_INT64, &version,
                      err, errlen);
    if (r < 0) goto fail;
    if (r == 0) {
        set_err(err, errlen, "checkpoint '%s' has no root attribute 'format_version' (expected %d)",
                path, CHECKPOINT_FORMAT_VERSION);
        goto fail;
    }
    if (version != CHECKPOINT_FORMAT_VERSION) {
        char by[96] = "";
        if (read_str1_attr(path, f, "grpolab_version", &writer, NULL, 0) == 1)
            snprintf(by, sizeof by, " (written by grpolab %s)", writer);
        set_err(err, errlen, "checkpoint '%s' has format_version %lld%s, this grpolab (%s) reads version %d "
                "(re-create it with this grpolab's pretrain, or use a matching grpolab)",
                path, (long long)version, by, GRPOLAB_VERSION, CHECKPOINT_FORMAT_VERSION);
        goto fail;
    }
    free(format);
    return f;
fail:
    free(format);
    free(writer);
    H5Fclose(f);
    return -1;
}

// The parameter count of a model of config c (model.c's size table, counted as a double: no
// overflow for configs far outside the schema's ranges); checked against model_num_params by
// tests/test_checkpoint.c through checkpoint_read_meta.
static double model_config_num_params(const ModelConfig *c) {
    double C = c->d_model, hd = (double)c->d_model / c->n_heads, F = c->d_ff, V = c->vocab_size;
    double layer = 2 * C + (c->n_heads + 2.0 * c->n_kv_heads) * hd * C + C * c->n_heads * hd + 3 * F * C;
    return V * C * (c->tied_embeddings ? 1 : 2) + c->n_layers * layer + C;
}

// Reads every model.* attribute into cfg and validates the result.
static int read_config(const char *path, hid_t f, ModelConfig *cfg, char *err, size_t errlen) {
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < N_CFG_FIELDS; i++) {
        const CfgField *fd = &CFG_FIELDS[i];
        int64_t iv = 0;
        double dv = 0;
        int r = fd->is_float ? read_num_attr(path, f, "root", fd->name, H5T_FLOAT, H5T_NATIVE_DOUBLE,
                                             &dv, err, errlen)
                             : read_num_attr(path, f, "root", fd->name, H5T_INTEGER, H5T_NATIVE_INT64,
                                             &iv, err, errlen);
        if (r < 0) return -1;
        if (r == 0)
            return set_err(err, errlen, "checkpoint '%s': root attribute '%s' (model config) is missing",
                           path, fd->name);
        // the range of the config key of the same name: a corrupt value is refused here, not
        // met as an absurd allocation later
        const CfgKey *k = config_schema_key(fd->name);
        double v = fd->is_float ? dv : (double)iv, lo = k && k->type != CFG_BOOL ? k->min : 0,
               hi = k && k->type != CFG_BOOL ? k->max : 1;
        if (!(v >= lo && v <= hi))
            return set_err(err, errlen, "checkpoint '%s': root attribute '%s' is %.9g, outside the "
                           "allowed %g .. %g (corrupt, or not a model of this grpolab)", path,
                           fd->name, v, lo, hi);
        if (fd->is_float)
            *cfg_float(cfg, fd) = (float)dv;
        else
            *cfg_int(cfg, fd) = (int)iv;
    }
    char why[256];
    if (model_config_validate(cfg, why, sizeof why) != 0)
        return set_err(err, errlen, "checkpoint '%s' holds an invalid model config: %s", path, why);
    // the tensors are stored uncompressed: a file smaller than the parameters is not this model
    double params = model_config_num_params(cfg);
    hsize_t fsize = 0;
    if (H5Fget_filesize(f, &fsize) >= 0 && params * 4.0 > (double)fsize)
        return set_err(err, errlen, "checkpoint '%s': its model config describes %.0f parameters "
                       "(%.0f bytes), more than the file's %llu bytes (corrupt model.* attributes?)",
                       path, params, params * 4.0, (unsigned long long)fsize);
    return 0;
}



void checkpoint_free_vocab(char **vocab, int n_vocab) {
    if (!vocab) return;
    for (int i = 0; i < n_vocab; i++) free(vocab[i]);
    free(vocab);
}

int checkpoint_read_meta(const char *path, ModelConfig *cfg, char ***vocab, int *n_vocab,
                         char **config_text, int64_t *step, int *has_optimizer, char *err,
                         size_t errlen) {
    H5Quiet q = h5_quiet();
    char msg[H5MSG_LEN];
    int ret = -1;
    char **voc = NULL, *text = NULL;
    int nv = 0;
    int64_t st = 0;
    ModelConfig c;
    hid_t f = open_checkpoint(path, err, errlen);
    if (f < 0) goto done;
    if (read_config(path, f, &c, err, errlen) != 0) goto done;
    int r = read_num_attr(path, f, "root", "step", H5T_INTEGER, H5T_NATIVE_INT64, &st, err, errlen);
    if (r < 0) goto done;
    if (r == 0) {
        set_err(err, errlen, "checkpoint '%s': root attribute 'step' is missing", path);
        goto done;
    }
    if (read_str_attr(path, f, "tokenizer.vocab", &voc, &nv, err, errlen) < 0) goto done;
    if (nv > c.vocab_size) {
        set_err(err, errlen, "checkpoint '%s': tokenizer.vocab holds %d tokens, more than model.vocab_size = %d",
                path, nv, c.vocab_size);
        goto done;
    }
    if (read_str1_attr(path, f, "config", &text, err, errlen) < 0) goto done;
    htri_t opt = H5Lexists(f, "optimizer", H5P_DEFAULT);
    if (opt < 0) {
        set_err(err, errlen, "checkpoint '%s': cannot look up /optimizer (HDF5: %s)", path, h5_msg(msg));
        goto done;
    }
    if (cfg) *cfg = c;
    if (step) *step = st;
    if (has_optimizer) *has_optimizer = opt > 0;
    if (vocab) {
        *vocab = voc;
        voc = NULL;
    }
    if (n_vocab) *n_vocab = vocab ? nv : 0;
    if (config_text) {
        *config_text = text;
        text = NULL;
    }
    ret = 0;
done:
    checkpoint_free_vocab(voc, nv);
    free(text);
    h5_close(f);
    h5_loud(q);
    return ret;
}

int checkpoint_read_str_attr(const char *path, const char *name, char **out, char *err, size_t errlen) {
    H5Quiet q = h5_quiet();
    *out = NULL;
    hid_t f = open_checkpoint(path, err, errlen);
    int r = f < 0 ? -1 : read_str1_attr(path, f, name, out, err, errlen);
    h5_close(f);
    h5_loud(q);
    return r;
}

int checkpoint_read_run_id(const char *path, char **run_id, char *err, size_t errlen) {
    return checkpoint_read_str_attr(path, "run_id", run_id, err, errlen);
}

int checkpoint_check_vocab(const char *path, const char *const *vocab, int n, int missing_ok,
                           char *err, size_t errlen) {
    char **got = NULL;
    int ng = 0;
    if (checkpoint_read_meta(path, NULL, &got, &ng, NULL, NULL, NULL, err, errlen) != 0) return -1;
    int ret = 0;
    if (!got) {
        if (!missing_ok)
            ret = set_err(err, errlen, "checkpoint '%s' stores no tokenizer vocabulary (attribute "
                          "'tokenizer.vocab'): not a model of this world's tokenizer (write it with "
                          "grpolab pretrain or init)", path);
        return ret;
    }
    for (int i = 0; i < ng && ret == 0; i++)
        for (int j = 0; j < i && ret == 0; j++)
            if (strcmp(got[i], got[j]) == 0)
                ret = set_err(err, errlen, "checkpoint '%s': tokenizer.vocab token %d \"%s\" duplicates "
                              "token %d (corrupt vocabulary)", path, i, got[i], j);
    if (ret == 0 && ng != n)
        ret = set_err(err, errlen, "checkpoint '%s': tokenizer.vocab has %d tokens, this world's "
                      "tokenizer has %d: not a model of this world", path, ng, n);
    for (int i = 0; i < n && ret == 0; i++)
        if (strcmp(got[i], vocab[i]) != 0)
            ret = set_err(err, errlen, "checkpoint '%s': tokenizer.vocab token %d is \"%s\", this "
                          "world's tokenizer has \"%s\": not a model of this world", path, i,
                          got[i], vocab[i]);
    checkpoint_free_vocab(got, ng);
    return ret;
}

// ---------------------------------------------------------------- tensors
// Writes tensor t of base (host, n_params floats) as a float32 dataset named t->name in loc.
static herr_t write_tensor(hid_t loc, const ParamTensor *t, const float *base) {
    hsize_t dims[2] = {(hsize_t)t->shape[0], (hsize_t)t->shape[1]};
    hid_t sp = H5Screate_simple(t->ndim, dims, NULL);
    if (sp < 0) return -1;
    hid_t d = H5Dcreate2(loc, t->name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t r = d < 0 ? -1 : H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, base + t->offset);
    if (d >= 0 && H5Dclose(d) < 0) r = -1;
    H5Sclose(sp);
    return r;
}

// Reads dataset t->name of loc (shown as prefix + name) into base + t->offset after checking
// that it is a float dataset of t's shape.
static int read_tensor(const char *path, hid_t loc, const char *prefix, const ParamTensor *t,
                       float *base, char *err, size_t errlen) {
    char msg[H5MSG_LEN], s1[96], s2[96];
    int ret = -1;
    hid_t d = -1, ft = -1, sp = -1;
    htri_t ex = H5Lexists(loc, t->name, H5P_DEFAULT);
    if (ex == 0) return set_err(err, errlen, "checkpoint '%s': tensor '%s%s' is missing", path, prefix, t->name);
    if (ex < 0 || (d = H5Dopen2(loc, t->name, H5P_DEFAULT)) < 0 || (ft = H5Dget_type(d)) < 0 ||
        (sp = H5Dget_space(d)) < 0) {
        set_err(err, errlen, "checkpoint '%s': cannot open tensor '%s%s' as a dataset (HDF5: %s)",
                path, prefix, t->name, h5_msg(msg));
        goto done;
    }
    if (H5Tget_class(ft) != H5T_FLOAT) {
        set_err(err, errlen, "checkpoint '%s': tensor '%s%s' has %s elements, expected float32",
                path, prefix, t->name, class_name(H5Tget_class(ft)));
        goto done;
    }
    hsize_t dims[H5S_MAX_RANK];
    hsize_t want[2] = {(hsize_t)t->shape[0], (hsize_t)t->shape[1]};
    int rank = H5Sget_simple_extent_ndims(sp);
    if (rank < 0 || rank > H5S_MAX_RANK || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
        set_err(err, errlen, "checkpoint '%s': cannot read the shape of tensor '%s%s' (HDF5: %s)",
                path, prefix, t->name, h5_msg(msg));
        goto done;
    }
    int same = rank == t->ndim;
    for (int i = 0; same && i < rank; i++) same = dims[i] == want[i];
    if (!same) {
        set_err(err, errlen, "checkpoint '%s': tensor '%s%s' has shape %s, expected %s for this model config",
                path, prefix, t->name, fmt_shape(s1, sizeof s1, rank, dims),
                fmt_shape(s2, sizeof s2, t->ndim, want));
        goto done;
    }
    if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, base + t->offset) < 0) {
        set_err(err, errlen, "checkpoint '%s': cannot read tensor '%s%s' (truncated or corrupt? HDF5: %s)",
                path, prefix, t->name, h5_msg(msg));
        goto done;
    }
    // a NaN or infinite weight makes every forward NaN: refuse it here, naming the tensor
    const float *v = base + t->offset;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < t->numel; i++)
        if (!isfinite(v[i]) && bad++ == 0) first = i;
    if (bad) {
        set_err(err, errlen, "checkpoint '%s': tensor '%s%s' holds %zu non-finite value%s (the first, "
                "%g, at flat index %zu): the model it was saved from had diverged; use an earlier "
                "checkpoint", path, prefix, t->name, bad, bad == 1 ? "" : "s", v[first], first);
        goto done;
    }
    ret = 0;
done:
    h5_close(sp);
    h5_close(ft);
    h5_close(d);
    return ret;
}

// Reads every tensor of m's table from group loc into base (host, n_params floats).
static int read_tensors(const char *path, hid_t loc, const char *prefix, const Model *m,
                        float *base, char *err, size_t errlen) {
    for (int i = 0; i < model_num_tensors(m); i++)
        if (read_tensor(path, loc, prefix, model_tensor(m, i), base, err, errlen) != 0) return -1;
    return 0;
}

// ---------------------------------------------------------------- load
int checkpoint_load(const char *path, Model *m, int load_optimizer, char *err, size_t errlen) {
    H5Quiet q = h5_quiet();
    char msg[H5MSG_LEN];
    int ret = -1;
    hid_t f = -1, opt = -1, gm = -1, gv = -1;
    float *hp = NULL, *hm = NULL, *hv = NULL;
    int64_t adam_step = 0;
    size_t n = model_num_params(m);

    if ((f = open_checkpoint(path, err, errlen)) < 0) goto done;
    ModelConfig fc, mc = *model_config(m);
    if (read_config(path, f, &fc, err, errlen) != 0) goto done;
    for (int i = 0; i < N_CFG_FIELDS; i++) {
        const CfgField *fd = &CFG_FIELDS[i];
        if (fd->is_float && *cfg_float(&fc, fd) != *cfg_float(&mc, fd)) {
            set_err(err, errlen, "checkpoint '%s': %s is %.9g, the model being loaded has %.9g",
                    path, fd->name, *cfg_float(&fc, fd), *cfg_float(&mc, fd));
            goto done;
        }
        if (!fd->is_float && *cfg_int(&fc, fd) != *cfg_int(&mc, fd)) {
            set_err(err, errlen, "checkpoint '%s': %s is %d, the model being loaded has %d", path,
                    fd->name, *cfg_int(&fc, fd), *cfg_int(&mc, fd));
            goto done;
        }
    }
    hp = xmalloc(n * sizeof(float));
    if (read_tensors(path, f, "", m, hp, err, errlen) != 0) goto done;

    if (load_optimizer) {
        htri_t ex = H5Lexists(f, "optimizer", H5P_DEFAULT);
        if (ex == 0) {
            set_err(err, errlen, "checkpoint '%s' holds no optimizer state (needed to resume; it was "
                    "saved without the optimizer)", path);
            goto done;
        }
        if (ex < 0 || (opt = H5Gopen2(f, "optimizer", H5P_DEFAULT)) < 0) {
            set_err(err, errlen, "checkpoint '%s': cannot open group /optimizer (HDF5: %s)", path,
                    h5_msg(msg));
            goto done;
        }
        int r = read_num_attr(path, opt, "/optimizer", "adam_step", H5T_INTEGER, H5T_NATIVE_INT64,
                              &adam_step, err, errlen);
        if (r < 0) goto done;
        if (r == 0) {
            set_err(err, errlen, "checkpoint '%s': /optimizer attribute 'adam_step' is missing", path);
            goto done;
        }
        if (adam_step < 0 || adam_step > INT_MAX) {
            set_err(err, errlen, "checkpoint '%s': /optimizer attribute 'adam_step' is %lld, expected 0 .. %d",
                    path, (long long)adam_step, INT_MAX);
            goto done;
        }
        const char *names[2] = {"m", "v"};
        hid_t *groups[2] = {&gm, &gv};
        for (int k = 0; k < 2; k++) {
            ex = H5Lexists(opt, names[k], H5P_DEFAULT);
            if (ex <= 0 || (*groups[k] = H5Gopen2(opt, names[k], H5P_DEFAULT)) < 0) {
                set_err(err, errlen, "checkpoint '%s': group /optimizer/%s is %s", path, names[k],
                        ex == 0 ? "missing" : "unreadable");
                goto done;
            }
        }
        hm = xmalloc(n * sizeof(float));
        hv = xmalloc(n * sizeof(float));
        if (read_tensors(path, gm, "optimizer/m/", m, hm, err, errlen) != 0 ||
            read_tensors(path, gv, "optimizer/v/", m, hv, err, errlen) != 0)
            goto done;
    }

    // everything was read and checked: only now does the model change
    Backend *bk = model_backend(m);
    bk_upload(bk, model_params(m), hp, n * sizeof(float));
    if (load_optimizer) {
        bk_upload(bk, model_adam_m(m), hm, n * sizeof(float));
        bk_upload(bk, model_adam_v(m), hv, n * sizeof(float));
        model_set_adam_step(m, (int)adam_step);
    }
    ret = 0;
done:
    free(hp);
    free(hm);
    free(hv);
    h5_close(gv);
    h5_close(gm);
    h5_close(opt);
    h5_close(f);
    h5_loud(q);
    return ret;
}

// ---------------------------------------------------------------- save

static herr_t write_attr(hid_t obj, const char *name, hid_t ftype, hid_t mtype, hid_t space,
                         const void *buf) {
    hid_t a = H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) return -1;
    herr_t r = H5Awrite(a, mtype, buf);
    if (H5Aclose(a) < 0) r = -1;
    return r;
}

int checkpoint_save(const char *path, Model *m, const CkptInfo *info, char *err, size_t errlen) {
    const CkptInfo none = {0};
    if (!info) info = &none;
    const ModelConfig *c = model_config(m);
    if (!path || !path[0]) return set_err(err, errlen, "cannot save checkpoint: empty path");
    if (info->n_vocab < 0 || (info->n_vocab > 0 && !info->vocab))
        return set_err(err, errlen, "cannot save checkpoint '%s': n_vocab = %d without a vocabulary",
                       path, info->n_vocab);
    if (info->n_vocab > c->vocab_size)
        return set_err(err, errlen, "cannot save checkpoint '%s': the tokenizer has %d tokens, more than model.vocab_size = %d",
                       path, info->n_vocab, c->vocab_size);
    for (int i = 0; i < info->n_vocab; i++)
        if (!info->vocab[i])
            return set_err(err, errlen, "cannot save checkpoint '%s': token %d of the vocabulary is NULL",
                           path, i);
    const char *what = "cannot save checkpoint";
    if (check_out_path(what, path, !info->keep_existing, err, errlen) != 0) return -1;
    if (out_claim(what, path, err, errlen) != 0) return -1;

    H5Quiet q = h5_quiet();
    char msg[H5MSG_LEN], obj[160] = "";
    int ret = -1;
    size_t n = model_num_params(m);
    float *host = xmalloc(n * sizeof(float));
    hid_t fapl = -1, f = -1, scalar = -1, str_t = -1, vspace = -1, opt = -1, g = -1;

#define TRY(call, ...)                                   \
    do {                                                 \
        if ((call) < 0) {                                \
            snprintf(obj, sizeof obj, __VA_ARGS__);      \
            goto h5fail;                                 \
        }                                                \
    } while (0)

    // The 1.8 file format (readable by any HDF5 >= 1.8, h5py included) stores attributes
    // over 64 KiB (a large tokenizer vocabulary) densely.
    TRY(fapl = H5Pcreate(H5P_FILE_ACCESS), "a file access property list");
    TRY(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST), "the file format bounds");
    // built in memory, written in one go by h5_tmp_commit (h5util.h)
    if ((f = h5_tmp_create(what, path, fapl, err, errlen)) < 0) goto done;
    TRY(scalar = H5Screate(H5S_SCALAR), "a dataspace");
    TRY(str_t = H5Tcopy(H5T_C_S1), "a string type");
    TRY(H5Tset_size(str_t, H5T_VARIABLE), "a string type");
    TRY(H5Tset_cset(str_t, H5T_CSET_UTF8), "a string type");

    const char *format = CHECKPOINT_FORMAT, *version = GRPOLAB_VERSION, *commit = grpolab_commit();
    int format_version = CHECKPOINT_FORMAT_VERSION;
    TRY(write_attr(f, "format", str_t, str_t, scalar, &format), "attribute 'format'");
    TRY(write_attr(f, "format_version", H5T_STD_I32LE, H5T_NATIVE_INT, scalar, &format_version),
        "attribute 'format_version'");
    TRY(write_attr(f, "grpolab_version", str_t, str_t, scalar, &version), "attribute 'grpolab_version'");
    TRY(write_attr(f, "grpolab_commit", str_t, str_t, scalar, &commit), "attribute 'grpolab_commit'");
    TRY(write_attr(f, "step", H5T_STD_I64LE, H5T_NATIVE_INT64, scalar, &info->step), "attribute 'step'");
    ModelConfig cc = *c;
    for (int i = 0; i < N_CFG_FIELDS; i++) {
        const CfgField *fd = &CFG_FIELDS[i];
        if (fd->is_float)
            TRY(write_attr(f, fd->name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, scalar, cfg_float(&cc, fd)),
                "attribute '%s'", fd->name);
        else
            TRY(write_attr(f, fd->name, H5T_STD_I32LE, H5T_NATIVE_INT, scalar, cfg_int(&cc, fd)),
                "attribute '%s'", fd->name);
    }
    if (info->config_text)
        TRY(write_attr(f, "config", str_t, str_t, scalar, &info->config_text), "attribute 'config'");
    if (info->run_id)
        TRY(write_attr(f, "run_id", str_t, str_t, scalar, &info->run_id), "attribute 'run_id'");
    if (info->init_config)
        TRY(write_attr(f, "init_config", str_t, str_t, scalar, &info->init_config), "attribute 'init_config'");
    if (info->init_fingerprint)
        TRY(write_attr(f, "init_fingerprint", str_t, str_t, scalar, &info->init_fingerprint),
            "attribute 'init_fingerprint'");
    if (info->n_vocab > 0) {
        hsize_t nv = (hsize_t)info->n_vocab;
        TRY(vspace = H5Screate_simple(1, &nv, NULL), "a dataspace");
        TRY(write_attr(f, "tokenizer.vocab", str_t, str_t, vspace, info->vocab),
            "attribute 'tokenizer.vocab'");
    }

    Backend *bk = model_backend(m);
    bk_download(bk, host, model_params(m), n * sizeof(float));
    for (int i = 0; i < model_num_tensors(m); i++)
        TRY(write_tensor(f, model_tensor(m, i), host), "tensor '%s'", model_tensor(m, i)->name);

    if (info->with_optimizer) {
        int64_t adam_step = model_adam_step(m);
        TRY(opt = H5Gcreate2(f, "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "group /optimizer");
        TRY(write_attr(opt, "adam_step", H5T_STD_I64LE, H5T_NATIVE_INT64, scalar, &adam_step),
            "attribute /optimizer adam_step");
        const char *names[2] = {"m", "v"};
        float *bufs[2] = {model_adam_m(m), model_adam_v(m)};
        for (int k = 0; k < 2; k++) {
            TRY(g = H5Gcreate2(opt, names[k], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                "group /optimizer/%s", names[k]);
            bk_download(bk, host, bufs[k], n * sizeof(float));
            for (int i = 0; i < model_num_tensors(m); i++)
                TRY(write_tensor(g, model_tensor(m, i), host), "tensor 'optimizer/%s/%s'",
                    names[k], model_tensor(m, i)->name);
            h5_close(g);
            g = -1;
        }
    }
#undef TRY

    h5_close(opt);
    opt = -1;
    ret = h5_tmp_commit(f, what, path, !info->keep_existing, err, errlen);
    f = -1;
    goto done;
h5fail:
    set_err(err, errlen, "cannot save checkpoint '%s': cannot write %s (HDF5: %s)", path, obj, h5_msg(msg));
done:
    h5_close(g);
    h5_close(opt);
    h5_close(vspace);
    h5_close(str_t);
    h5_close(scalar);
    if (f >= 0) h5_tmp_discard(f, path);
    h5_close(fapl);
    free(host);
    h5_loud(q);
    out_release(path);
    return ret;
}
