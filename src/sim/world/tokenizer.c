// tokenizer.c: the fixed character-level vocabulary (see tokenizer.h).
#include "tokenizer.h"

#include <string.h>

#include "../../common.h"

#define TOK_N_SPECIAL 7

struct Tokenizer {
    int n;
    const char *const *str;
};

// Vocabulary in id order. The single characters must stay in the same order as CHARS.
static const char *const VOCAB[] = {
    "<pad>", "<eos>", "<think>", "</think>", "<answer>", "</answer>", "\\boxed{",
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
    " ", "+", "-", "*", "(", ")", "=", "\n", ".", ",", ":", "?", "}",
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m",
    "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z",
    "U", "A",
};
static const char CHARS[] = "0123456789 +-*()=\n.,:?}abcdefghijklmnopqrstuvwxyzUA";

_Static_assert(sizeof(VOCAB) / sizeof(VOCAB[0]) == TOK_N_SPECIAL + sizeof(CHARS) - 1,
               "VOCAB and CHARS disagree");
_Static_assert(sizeof(VOCAB) / sizeof(VOCAB[0]) <= 64, "vocabulary must fit 64 ids");

static const Tokenizer DEFAULT_TOKENIZER = {(int)(sizeof(VOCAB) / sizeof(VOCAB[0])), VOCAB};

const Tokenizer *tokenizer_default(void) { return &DEFAULT_TOKENIZER; }

int tok_vocab_size(const Tokenizer *t) { return t->n; }

const char *tok_str(const Tokenizer *t, int id) {
    return (id >= 0 && id < t->n) ? t->str[id] : NULL;
}

int tok_strings(const Tokenizer *t, const char **out, int cap) {
    int n = t->n < cap ? t->n : cap;
    for (int i = 0; i < n; i++) out[i] = t->str[i];
    return n;
}

int tok_id(const Tokenizer *t, const char *s) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->str[i], s) == 0) return i;
    return -1;
}

int tok_encode(const Tokenizer *t, const char *text, int *ids, int max_ids, char *err,
               size_t errlen) {
    int n = 0;
    size_t i = 0;
    while (text[i]) {
        int id = -1;
        size_t len = 1;
        if (text[i] == '<' || text[i] == '\\') {
            // multi-character tags: greedy, the longest that matches
            for (int s = 0; s < TOK_N_SPECIAL; s++) {
                size_t l = strlen(t->str[s]);
                if (l > (id < 0 ? 0 : len) && strncmp(text + i, t->str[s], l) == 0) {
                    id = s;
                    len = l;
                }
            }
        } else {
            const char *p = strchr(CHARS, text[i]);
            if (p) id = TOK_N_SPECIAL + (int)(p - CHARS);
        }
        if (id < 0) {
            unsigned char c = (unsigned char)text[i];
            if (c >= 32 && c < 127)
                return set_err(err, errlen, "unknown character '%c' (0x%02x) at offset %zu", c,
                               c, i);
            return set_err(err, errlen, "unknown character 0x%02x at offset %zu", c, i);
        }
        if (n >= max_ids)
            return set_err(err, errlen, "text needs more than %d tokens (stopped at offset %zu)",
                           max_ids, i);
        ids[n++] = id;
        i += len;
    }
    return n;
}

int tok_decode(const Tokenizer *t, const int *ids, int n, char *out, size_t cap) {
    if (cap == 0) return -1;
    size_t len = 0;
    out[0] = '\0';
    for (int k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= t->n) return -1;
        if (ids[k] == TOK_PAD || ids[k] == TOK_EOS) continue;
        const char *s = t->str[ids[k]];
        size_t l = strlen(s);
        if (len + l + 1 > cap) return -1;
        memcpy(out + len, s, l + 1);
        len += l;
    }
    return (int)len;
}
