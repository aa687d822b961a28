// checkpoint.h: model checkpoints as HDF5 files a PyTorch user can open with h5py.
//
// Layout (format "grpolab-checkpoint", version 1):
//   root attributes
//     format = "grpolab-checkpoint"     format_version = 1 (int32)
//     grpolab_version = GRPOLAB_VERSION step (int64)
//     model.<field> for every ModelConfig field (ints int32, floats float32: exact round trip)
//     config            resolved config as INI text (only when given)
//     run_id            the train run log the checkpoint belongs to (only when given)
//     init_config       pretrain --init: the config stored in the model it continued from
//     init_fingerprint  pretrain --init: FNV-1a-64 of that model's weights (resume_init_fingerprint)
//     tokenizer.vocab   1-D variable-length strings, token strings in id order (only when given)
//   /<tensor name>      one float32 dataset per parameter tensor, named and shaped as in the
//                       model's table, e.g. f['layers.0.attn.wq'] is (NH*hd, C)
//   /optimizer          (only with the optimizer) attribute adam_step (int64, AdamW steps taken)
//   /optimizer/m/<name>, /optimizer/v/<name>   AdamW first and second moments, same shapes
//
// Saving is atomic: the file is built in memory, written to "<path>.tmp", synced, then renamed
// over path (or linked to it where an existing path must not be replaced), so a crash or a
// full disk never leaves a half-written file under the real name nor destroys the old
// checkpoint, and no temporary file is left behind. While it saves, the process holds the
// claim on path (h5util.h out_claim): a second writer of the same path is refused. The parent
// directory must exist (it is not created).
//
// Every function returns 0 on success, or -1 with a message in err that names the file and
// what was expected and found (missing, not HDF5, truncated, wrong format or version, missing
// tensor, wrong shape or dtype, config mismatch, a model.* attribute outside the range of its
// config key, a parameter count the file is too small to hold, a vocabulary that is not one
// distinct non-empty string per token id, a NaN or infinite value in a tensor). A failed load
// leaves the model untouched.
#ifndef GRPOLAB_CHECKPOINT_H
#define GRPOLAB_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define CHECKPOINT_FORMAT "grpolab-checkpoint"
#define CHECKPOINT_FORMAT_VERSION 1

typedef struct {
    const char *const *vocab;  // tokenizer vocabulary, token strings in id order (may be NULL/0);
    int n_vocab;               // tokens may hold any bytes except NUL; n_vocab <= vocab_size
    const char *config_text;   // resolved config as INI text (may be NULL)
    int64_t step;              // training step the checkpoint was taken at
    int with_optimizer;        // also store AdamW m and v and the AdamW step count
    int keep_existing;         // 1: an existing file at path is an error (no --overwrite)
    const char *run_id;        // the run log's run_id (train's checkpoints; may be NULL)
    const char *init_config;   // pretrain --init: the init's stored config (may be NULL)
    const char *init_fingerprint;  // pretrain --init: the init's weights' fingerprint (may be NULL)
} CkptInfo;

// Writes the parameters of m (and, with info->with_optimizer, its AdamW state) with the
// metadata in info (NULL: no vocab, no config text, step 0, no optimizer).
int checkpoint_save(const char *path, Model *m, const CkptInfo *info, char *err, size_t errlen);

// Reads only the metadata (to build a Model before loading): model config (validated: every
// model.* attribute within its config key's range, and the file large enough for the
// parameters it describes), vocab (when present: model.vocab_size distinct non-empty strings),
// as a malloc'd array of malloc'd strings, NULL/0 when the file has none; free with
// checkpoint_free_vocab), config text (malloc'd, NULL when the file has none), step, and
// whether the file holds optimizer state. Any out-pointer may be NULL.
int checkpoint_read_meta(const char *path, ModelConfig *cfg, char ***vocab, int *n_vocab,
                         char **config_text, int64_t *step, int *has_optimizer, char *err,
                         size_t errlen);
void checkpoint_free_vocab(char **vocab, int n_vocab);
// The root attribute run_id as a malloc'd string in *run_id: 1, or 0 when the file has none
// (*run_id NULL), or -1 with a message.
int checkpoint_read_run_id(const char *path, char **run_id, char *err, size_t errlen);
// Any scalar string root attribute (as checkpoint_read_run_id): 1 and a malloc'd *out, 0 when
// the file has none (*out NULL), -1 with a message.
int checkpoint_read_str_attr(const char *path, const char *name, char **out, char *err, size_t errlen);

// Checks that the checkpoint at path stores exactly the tokenizer vocabulary vocab[0..n-1]
// (the world's): 0 if so, else -1 with a message naming the file and the first difference (no
// vocabulary, fewer or more tokens, a duplicate token, token i differs). missing_ok: a file
// without a vocabulary passes (one written by a test or an older `grpolab init`).
int checkpoint_check_vocab(const char *path, const char *const *vocab, int n, int missing_ok,
                           char *err, size_t errlen);

// Loads every tensor of m's table into m. m's config must equal the file's (a mismatch names
// the field, the file's value and the model's). load_optimizer: also AdamW m, v and step
// (an error if the file holds none). On error m is left unchanged.
int checkpoint_load(const char *path, Model *m, int load_optimizer, char *err, size_t errlen);

#endif
