// tokenizer.h: the character-level tokenizer of the embedded world.
//
// One fixed vocabulary (at most 64 ids, stored in every checkpoint as tok_str(0..V-1)):
//   0 "<pad>" (never generated)  1 "<eos>"  2 "<think>"  3 "</think>"  4 "<answer>"
//   5 "</answer>"  6 "\boxed{"  then one id per character:
//   0-9, space + - * ( ) = newline . , : ? }, a-z, U, A
// The multi-character tags are matched greedily as single tokens when encoding; any other
// character outside the vocabulary (e.g. '<' not starting a tag, uppercase other than U/A,
// '\' not starting "\boxed{") is an error the caller sees, never a silent drop.
#ifndef GRPOLAB_TOKENIZER_H
#define GRPOLAB_TOKENIZER_H

#include <stddef.h>

typedef struct Tokenizer Tokenizer;

enum { TOK_PAD = 0, TOK_EOS = 1 };

// The one built-in vocabulary (static, never freed, safe to share between threads).
const Tokenizer *tokenizer_default(void);

int tok_vocab_size(const Tokenizer *t);
// The string of token id (e.g. "<eos>", "7", "\n"); NULL if id is out of range.
const char *tok_str(const Tokenizer *t, int id);
// The token strings in id order, as checkpoints store them: the first min(cap, vocabulary
// size) into out; returns how many.
int tok_strings(const Tokenizer *t, const char **out, int cap);
// The id of a token string ("<think>", "+"), -1 if the vocabulary has none.
int tok_id(const Tokenizer *t, const char *token_string);

// Encodes text into ids (at most max_ids). Returns the number of tokens, or -1 with a
// message in err: "unknown character 'X' (0x..) at offset k" or "text needs more than
// max_ids tokens". "<eos>" and "<pad>" in the text encode to their ids.
int tok_encode(const Tokenizer *t, const char *text, int *ids, int max_ids, char *err,
               size_t errlen);

// Decodes ids into out (NUL-terminated); <eos> and <pad> decode to nothing. Returns the
// text length, or -1 if an id is out of range or out (cap bytes) is too small.
int tok_decode(const Tokenizer *t, const int *ids, int n, char *out, size_t cap);

#endif
