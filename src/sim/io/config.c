// config.c: INI parser, --set overrides and schema validation (contract in config.h).
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../../common.h"

// One value per schema row: i for INT and BOOL, f for FLOAT, s (malloc'd) for STRING
// and ENUM (ENUM in the schema's spelling).
typedef struct {
    int64_t i;
    double f;
    char *s;
} CfgValue;

struct Config {
    const CfgKey *schema;
    int n;
    CfgValue *val;  // (n)
    char *was_set;  // (n) 1 if set by a file or --set
    Settings typed;    // val as the fields of settings.h, kept equal by sync()
    SettingsSet typed_set;
};

// ---------------------------------------------------------------- small helpers

static const char *TYPE_NAME[] = {"int", "float", "bool", "string", "enum"};

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c; }

// Case-insensitive (ASCII) comparison of a[0..alen) with the C string b.
static int eq_ci(const char *a, size_t alen, const char *b) {
    size_t i = 0;
    for (; i < alen && b[i]; i++)
        if (lower(a[i]) != lower(b[i])) return 0;
    return i == alen && b[i] == '\0';
}

// Trims whitespace from both ends of [*s, *s + *len).
static void trim(const char **s, size_t *len) {
    while (*len > 0 && is_space((*s)[0])) (*s)++, (*len)--;
    while (*len > 0 && is_space((*s)[*len - 1])) (*len)--;
}

static char *xstrndup(const char *s, size_t n) {
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

// Case-insensitive edit distance (insert, delete, substitute, swap two neighbours:
// "d_modle" is one edit from "d_model"); long inputs count as far apart.
static int edit_distance(const char *a, const char *b) {
    enum { MAXL = 64 };
    size_t na = strlen(a), nb = strlen(b);
    if (na >= MAXL || nb >= MAXL) return 1000;
    int d[MAXL + 1][MAXL + 1];
    for (size_t i = 0; i <= na; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= nb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            int best = d[i - 1][j - 1] + (lower(a[i - 1]) != lower(b[j - 1]));
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
                lower(a[i - 2]) == lower(b[j - 1]) && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[na][nb];
}

// A suggestion is offered when at most 2 edits away and not a complete rewrite.
static int close_enough(const char *typed, const char *cand) {
    int d = edit_distance(typed, cand);
    return d <= 2 && d < (int)strlen(typed);
}

// Shortest "%.*g" text of x that reads back to exactly x; numbers in [1, 1e16) are
// written without an exponent (500000, not 5e+05).
static void format_double(char *buf, size_t len, double x) {
    double ax = fabs(x);
    int digits = ax >= 1 && ax < 1e16 ? (int)floor(log10(ax)) + 1 : 0;  // before the point
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, len, "%.*g", p > digits ? p : digits, x);
        if (strtod(buf, NULL) == x) return;
    }
}

// Growable text buffer for config_to_ini.
typedef struct {
    char *p;
    size_t len, cap;
} Buf;

GL_PRINTF(2, 3) static void buf_add(Buf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) die("config: formatting failed");
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap <= b->len + (size_t)n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) die("out of memory allocating %zu bytes", cap);
        b->p = p;
        b->cap = cap;
    }
}

// Error message under construction in the caller's buffer (truncated if it is short).
typedef struct {
    char *p;
    size_t cap, len;
} Msg;

GL_PRINTF(2, 3) static void msg_add(Msg *m, const char *fmt, ...) {
    if (!m->p || m->cap == 0 || m->len + 1 >= m->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(m->p + m->len, m->cap - m->len, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    m->len += (size_t)n;
    if (m->len >= m->cap) m->len = m->cap - 1;
}

// Where a value came from: a file line, or a --set assignment.
typedef struct {
    const char *file;  // NULL for --set
    int line;
    const char *set;   // the --set text
} Loc;

// Starts an error message with its location; returns a Msg to append the rest to.
static Msg msg_start(char *err, size_t errlen, const Loc *loc) {
    Msg m = {err, errlen, 0};
    if (err && errlen) err[0] = '\0';
    if (loc->file)
        msg_add(&m, "%s:%d: ", loc->file, loc->line);
    else
        msg_add(&m, "--set '%s': ", loc->set);
    return m;
}

// Appends at most 80 characters of s[0..len), marking a cut with "...".
static void msg_add_clipped(Msg *m, const char *s, size_t len) {
    if (len > 80)
        msg_add(m, "%.77s...", s);
    else
        msg_add(m, "%.*s", (int)len, s);
}

// ---------------------------------------------------------------- schema lookups

static int find_key(const Config *c, const char *sec, size_t seclen, const char *key,
                    size_t keylen) {
    for (int i = 0; i < c->n; i++) {
        const CfgKey *k = &c->schema[i];
        if (strlen(k->section) == seclen && strncmp(k->section, sec, seclen) == 0 &&
            strlen(k->key) == keylen && strncmp(k->key, key, keylen) == 0)
            return i;
    }
    return -1;
}

const CfgKey *config_schema_key(const char *name) {
    const char *dot = name ? strchr(name, '.') : NULL;
    if (!dot) return NULL;
    for (int i = 0; i < CONFIG_SCHEMA_LEN; i++) {
        const CfgKey *k = &CONFIG_SCHEMA[i];
        if (strlen(k->section) == (size_t)(dot - name) && strncmp(k->section, name, (size_t)(dot - name)) == 0 &&
            strcmp(k->key, dot + 1) == 0)
            return k;
    }
    return NULL;
}

static int section_known(const Config *c, const char *sec, size_t seclen) {
    for (int i = 0; i < c->n; i++)
        if (strlen(c->schema[i].section) == seclen &&
            strncmp(c->schema[i].section, sec, seclen) == 0)
            return 1;
    return 0;
}

// 1 if row i is the first row of its section (sections listed in order of first use).
static int first_of_section(const Config *c, int i) {
    for (int j = 0; j < i; j++)
        if (strcmp(c->schema[j].section, c->schema[i].section) == 0) return 0;
    return 1;
}

static void msg_add_sections(Msg *m, const Config *c) {
    int first = 1;
    for (int i = 0; i < c->n; i++)
        if (first_of_section(c, i)) {
            msg_add(m, "%s%s", first ? "" : ", ", c->schema[i].section);
            first = 0;
        }
}

static int unknown_section(const Config *c, Msg *m, const char *sec, size_t seclen) {
    char *typed = xstrndup(sec, seclen);
    msg_add(m, "unknown section [%s]", typed);
    for (int i = 0; i < c->n; i++)
        if (first_of_section(c, i) && close_enough(typed, c->schema[i].section)) {
            msg_add(m, " (did you mean [%s]?)", c->schema[i].section);
            break;
        }
    msg_add(m, "; sections: ");
    msg_add_sections(m, c);
    free(typed);
    return -1;
}

// "unknown key 'sec.key' (did you mean 'x.y'?); keys of [sec]: a, b, c". The section is known.
static int unknown_key(const Config *c, Msg *m, const char *sec, size_t seclen, const char *key,
                       size_t keylen) {
    char *s = xstrndup(sec, seclen), *k = xstrndup(key, keylen);
    msg_add(m, "unknown key '%s.%s'", s, k);
    // Best guess: the same name (any case) in this section (score 0) or in another
    // section (1), else the closest key of this section (1 + edits).
    int best = -1, bestscore = 1000;
    for (int i = 0; i < c->n; i++) {
        const CfgKey *ck = &c->schema[i];
        int same_sec = strcmp(ck->section, s) == 0, d = edit_distance(k, ck->key), score;
        if (d == 0)
            score = same_sec ? 0 : 1;
        else if (same_sec && close_enough(k, ck->key))
            score = 1 + d;
        else
            continue;
        if (score < bestscore) bestscore = score, best = i;
    }
    if (best >= 0)
        msg_add(m, " (did you mean '%s.%s'?)", c->schema[best].section, c->schema[best].key);
    msg_add(m, "; keys of [%s]: ", s);
    int first = 1;
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->schema[i].section, s) == 0) {
            msg_add(m, "%s%s", first ? "" : ", ", c->schema[i].key);
            first = 0;
        }
    free(s);
    free(k);
    return -1;
}

// Index of the key "section.key" or die(): asking for a key not in the schema is a bug.
static int lookup(const Config *c, const char *name, const char *fn) {
    const char *dot = strchr(name, '.');
    int i = dot ? find_key(c, name, (size_t)(dot - name), dot + 1, strlen(dot + 1)) : -1;
    if (i < 0) die("%s('%s'): no such key in the config schema", fn, name);
    return i;
}

// ---------------------------------------------------------------- values

// Writes what values of k are allowed, e.g. "[1, 128]", "auto|cpu|cuda".
static void format_range(char *buf, size_t len, const CfgKey *k) {
    char lo[32], hi[32];
    switch (k->type) {
    case CFG_INT:
        snprintf(buf, len, "[%.0f, %.0f]", k->min, k->max);
        break;
    case CFG_FLOAT:
        format_double(lo, sizeof lo, k->min);
        format_double(hi, sizeof hi, k->max);
        snprintf(buf, len, "[%s, %s]", lo, hi);
        break;
    case CFG_BOOL:
        snprintf(buf, len, "true|false|1|0|yes|no|on|off");
        break;
    case CFG_STRING:
        snprintf(buf, len, "any text");
        break;
    case CFG_ENUM:
        snprintf(buf, len, "%s", k->choices);
        break;
    }
}

// Parses text (already unquoted) as a value of k into *out. On error appends
// "sec.key = 'text': reason (allowed: ...)" to m and returns -1.
static int parse_value(const CfgKey *k, const char *text, CfgValue *out, Msg *m) {
    char allowed[96];
    format_range(allowed, sizeof allowed, k);
    size_t n = strlen(text);
    memset(out, 0, sizeof *out);
    switch (k->type) {
    case CFG_INT: {
        const char *p = text + (text[0] == '+' || text[0] == '-');
        int digits = *p != '\0';
        for (; *p; p++) digits &= (*p >= '0' && *p <= '9');
        if (!digits) {
            msg_add(m, "%s.%s = '%s': not an integer (allowed: integer in %s)", k->section, k->key,
                    text, allowed);
            return -1;
        }
        errno = 0;
        long long v = strtoll(text, NULL, 10);
        // Out of range also when it overflows int64 (ERANGE); compare as doubles is not
        // exact near 2^63, so compare in integers, with the bounds clamped to int64.
        int64_t lo = k->min <= -9.2e18 ? INT64_MIN : (int64_t)k->min;
        int64_t hi = k->max >= 9.2e18 ? INT64_MAX : (int64_t)k->max;
        if (errno == ERANGE || v < lo || v > hi) {
            msg_add(m, "%s.%s = %s: out of range (allowed: %s)", k->section, k->key, text, allowed);
            return -1;
        }
        out->i = v;
        return 0;
    }
    case CFG_FLOAT: {
        char *end = NULL;
        errno = 0;
        double v = n ? strtod(text, &end) : 0;
        // decimal only, as for integers: strtod's hexadecimal floats ("0x1p3") are refused
        if (n == 0 || end != text + n || is_space(text[0]) || strpbrk(text, "xX")) {
            msg_add(m, "%s.%s = '%s': not a number (allowed: number in %s)", k->section, k->key,
                    text, allowed);
            return -1;
        }
        if (isnan(v) || (isinf(v) && errno != ERANGE)) {
            msg_add(m, "%s.%s = '%s': not a finite number (allowed: number in %s)", k->section,
                    k->key, text, allowed);
            return -1;
        }
        if (isinf(v) || v < k->min || v > k->max) {
            msg_add(m, "%s.%s = %s: out of range (allowed: %s)", k->section, k->key, text, allowed);
            return -1;
        }
        out->f = v;
        return 0;
    }
    case CFG_BOOL: {
        static const char *T[] = {"true", "1", "yes", "on"}, *F[] = {"false", "0", "no", "off"};
        for (int i = 0; i < 4; i++) {
            if (eq_ci(text, n, T[i])) return out->i = 1, 0;
            if (eq_ci(text, n, F[i])) return out->i = 0, 0;
        }
        msg_add(m, "%s.%s = '%s': not a boolean (allowed: %s)", k->section, k->key, text, allowed);
        return -1;
    }
    case CFG_STRING:
        out->s = xstrdup(text);
        return 0;
    case CFG_ENUM:
        for (const char *p = k->choices; *p;) {
            size_t len = strcspn(p, "|");
            if (eq_ci(p, len, text)) {
                out->s = xstrndup(p, len);
                return 0;
            }
            p += len + (p[len] == '|');
        }
        msg_add(m, "%s.%s = '%s': not one of %s", k->section, k->key, text, k->choices);
        return -1;
    }
    return -1;
}

// Reads the value text s[0..len) (after '=') into a malloc'd string *out: a value that
// starts with '"' is a quoted string (escapes \" and \\); with comments, an unquoted
// value ends at '#' or ';' that follows whitespace (or starts the value). On error
// appends "name = '...': reason" to m.
static int lex_value(const char *s, size_t len, int comments, const char *name, char **out,
                     Msg *m) {
    trim(&s, &len);
    *out = NULL;
    if (len > 0 && s[0] == '"') {
        char *v = xmalloc(len + 1);
        size_t o = 0, i = 1;
        for (; i < len && s[i] != '"'; i++) {
            if (s[i] == '\\') {
                if (i + 1 < len && (s[i + 1] == '"' || s[i + 1] == '\\')) {
                    v[o++] = s[++i];
                    continue;
                }
                if (i + 1 < len) {
                    msg_add(m, "%s = '", name);
                    msg_add_clipped(m, s, len);
                    msg_add(m, "': unknown escape '\\%c' in quoted string (allowed: \\\" and \\\\)",
                            s[i + 1]);
                    free(v);
                    return -1;
                }
            }
            v[o++] = s[i];
        }
        v[o] = '\0';
        if (i >= len) {
            msg_add(m, "%s = '", name);
            msg_add_clipped(m, s, len);
            msg_add(m, "': unterminated quoted string (missing closing '\"')");
            free(v);
            return -1;
        }
        const char *rest = s + i + 1;
        size_t restlen = len - i - 1;
        trim(&rest, &restlen);
        if (restlen > 0 && !(comments && (rest[0] == '#' || rest[0] == ';') &&
                             is_space(s[i + 1]))) {
            msg_add(m, "%s = '", name);
            msg_add_clipped(m, s, len);
            msg_add(m, "': unexpected text after the closing quote%s",
                    comments ? " (a comment starts with ' #' or ' ;')" : "");
            free(v);
            return -1;
        }
        *out = v;
        return 0;
    }
    if (comments)
        for (size_t i = 0; i < len; i++)
            if ((s[i] == '#' || s[i] == ';') && (i == 0 || is_space(s[i - 1]))) {
                len = i;
                trim(&s, &len);
                break;
            }
    *out = xstrndup(s, len);
    return 0;
}

// ---------------------------------------------------------------- Config

// Copies key i's value and flag into its field of c->typed and c->typed_set.
static void sync(Config *c, int i) {
    const CfgKey *k = &c->schema[i];
    char *field = (char *)&c->typed + k->offset;
    const CfgValue *v = &c->val[i];
    switch (k->ctype) {
        case CFG_C_INT: *(int *)field = (int)v->i; break;  // the table's range fits an int
        case CFG_C_INT64: *(int64_t *)field = v->i; break;
        case CFG_C_DOUBLE: *(double *)field = v->f; break;
        case CFG_C_BOOL: *(bool *)field = v->i != 0; break;
        case CFG_C_STR: *(const char **)field = v->s; break;
    }
    *((bool *)((char *)&c->typed_set + k->set_offset)) = c->was_set[i] != 0;
}

const Settings *config_settings(const Config *c) { return &c->typed; }
const SettingsSet *config_settings_set(const Config *c) { return &c->typed_set; }

static Config *config_new_schema(const CfgKey *schema, int n) {
    Config *c = xcalloc(1, sizeof *c);
    c->schema = schema;
    c->n = n;
    c->val = xcalloc((size_t)n, sizeof *c->val);
    c->was_set = xcalloc((size_t)n, 1);
    char err[512];
    for (int i = 0; i < n; i++) {
        const CfgKey *k = &schema[i];
        Msg m = {err, sizeof err, 0};
        if (!k->def || parse_value(k, k->def, &c->val[i], &m) != 0)
            die("config schema: bad default of %s.%s: %s", k->section, k->key,
                k->def ? err : "missing");
        static const CfgCType want[] = {[CFG_INT] = CFG_C_INT, [CFG_FLOAT] = CFG_C_DOUBLE,
                                         [CFG_BOOL] = CFG_C_BOOL, [CFG_STRING] = CFG_C_STR,
                                         [CFG_ENUM] = CFG_C_STR};
        if (k->ctype != want[k->type] && !(k->type == CFG_INT && k->ctype == CFG_C_INT64))
            die("config schema: %s.%s: its C type does not hold a %s", k->section, k->key,
                TYPE_NAME[k->type]);
        if (k->ctype == CFG_C_INT && (k->min < INT_MIN || k->max > INT_MAX))
            die("config schema: %s.%s: range [%g, %g] does not fit an int", k->section, k->key,
                k->min, k->max);
        sync(c, i);
    }
    return c;
}

Config *config_new(void) { return config_new_schema(CONFIG_SCHEMA, CONFIG_SCHEMA_LEN); }

void config_free(Config *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) free(c->val[i].s);
    free(c->val);
    free(c->was_set);
    free(c);
}

// Stores v as the value of key i (takes ownership of v.s).
static void commit(Config *c, int i, CfgValue v) {
    free(c->val[i].s);
    c->val[i] = v;
    c->was_set[i] = 1;
    sync(c, i);
}

int config_load_text(Config *c, const char *text, const char *name, char *err, size_t errlen) {
    if (!name) name = "<config>";
    CfgValue *stage = xcalloc((size_t)c->n, sizeof *stage);
    int *line_of = xcalloc((size_t)c->n, sizeof *line_of);  // 0: not in this text
    const char *sec = NULL;  // current section, a pointer into the schema
    int rc = 0, lineno = 0;
    const char *p = text;
    if ((unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB && (unsigned char)p[2] == 0xBF)
        p += 3;  // UTF-8 byte order mark
    while (*p && rc == 0) {
        lineno++;
        const char *s = p;
        size_t len = strcspn(p, "\n");
        p += len + (p[len] == '\n');
        trim(&s, &len);
        if (len == 0 || s[0] == '#' || s[0] == ';') continue;
        Loc loc = {name, lineno, NULL};

        if (s[0] == '[') {
            const char *close = memchr(s, ']', len);
            if (!close) {
                Msg m = msg_start(err, errlen, &loc);
                msg_add(&m, "missing ']' in section header '");
                msg_add_clipped(&m, s, len);
                msg_add(&m, "'");
                rc = -1;
                break;
            }
            const char *rest = close + 1;
            size_t restlen = len - (size_t)(rest - s);
            trim(&rest, &restlen);
            if (restlen > 0 && rest[0] != '#' && rest[0] != ';') {
                Msg m = msg_start(err, errlen, &loc);
                msg_add(&m, "unexpected text after section header: '");
                msg_add_clipped(&m, rest, restlen);
                msg_add(&m, "'");
                rc = -1;
                break;
            }
            const char *nm = s + 1;
            size_t nmlen = (size_t)(close - nm);
            trim(&nm, &nmlen);
            sec = NULL;
            for (int i = 0; i < c->n && !sec; i++)
                if (strlen(c->schema[i].section) == nmlen &&
                    strncmp(c->schema[i].section, nm, nmlen) == 0)
                    sec = c->schema[i].section;
            if (!sec) {
                Msg m = msg_start(err, errlen, &loc);
                rc = unknown_section(c, &m, nm, nmlen);
            }
            continue;
        }

        const char *eq = memchr(s, '=', len);
        const char *key = s;
        size_t keylen = eq ? (size_t)(eq - s) : 0;
        trim(&key, &keylen);
        if (!eq || keylen == 0) {
            Msg m = msg_start(err, errlen, &loc);
            msg_add(&m, "expected 'key = value', '[section]' or a comment, got '");
            msg_add_clipped(&m, s, len);
            msg_add(&m, "'");
            rc = -1;
            break;
        }
        if (!sec) {
            Msg m = msg_start(err, errlen, &loc);
            msg_add(&m, "key '%.*s' is outside any section", (int)keylen, key);
            int home = -1;
            for (int i = 0; i < c->n && home < 0; i++)
                if (strlen(c->schema[i].key) == keylen &&
                    strncmp(c->schema[i].key, key, keylen) == 0)
                    home = i;
            if (home >= 0)
                msg_add(&m, " (put it under [%s])", c->schema[home].section);
            else {
                msg_add(&m, "; start the file with a [section] header (sections: ");
                msg_add_sections(&m, c);
                msg_add(&m, ")");
            }
            rc = -1;
            break;
        }
        char *fullname = xasprintf("%s.%.*s", sec, (int)keylen, key);
        char *value = NULL;
        Msg m = msg_start(err, errlen, &loc);
        int k = -1;
        if (lex_value(eq + 1, len - (size_t)(eq + 1 - s), 1, fullname, &value, &m) != 0) {
            rc = -1;
        } else if ((k = find_key(c, sec, strlen(sec), key, keylen)) < 0) {
            rc = unknown_key(c, &m, sec, strlen(sec), key, keylen);
        } else if (line_of[k]) {
            msg_add(&m, "duplicate key '%s' (first set at %s:%d)", fullname, name, line_of[k]);
            rc = -1;
        } else if (parse_value(&c->schema[k], value, &stage[k], &m) != 0) {
            rc = -1;
        } else {
            line_of[k] = lineno;
        }
        free(value);
        free(fullname);
    }
    for (int i = 0; i < c->n; i++) {
        if (!line_of[i]) continue;
        if (rc == 0)
            commit(c, i, stage[i]);
        else
            free(stage[i].s);
    }
    free(stage);
    free(line_of);
    if (rc == 0 && err && errlen) err[0] = '\0';
    return rc;
}

Config *config_from_stored(const char *text, const char *path, char *err, size_t errlen) {
    Config *c = config_new();
    char name[4200], msg[768];
    snprintf(name, sizeof name, "%s (attribute 'config')", path);
    if (config_load_text(c, text, name, msg, sizeof msg) != 0) {
        set_err(err, errlen, "the stored config does not read with this grpolab: %s", msg);
        config_free(c);
        return NULL;
    }
    return c;
}

int config_load_file(Config *c, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return set_err(err, errlen, "cannot open config '%s': %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *text = xmalloc(cap);
    for (;;) {
        n += fread(text + n, 1, cap - 1 - n, f);
        if (n < cap - 1) break;
        cap *= 2;
        char *t = realloc(text, cap);
        if (!t) die("out of memory allocating %zu bytes", cap);
        text = t;
    }
    int bad = ferror(f);
    int saved = errno;
    fclose(f);
    text[n] = '\0';
    int rc;
    if (bad)
        rc = set_err(err, errlen, "cannot read config '%s': %s", path, strerror(saved));
    else if (strlen(text) != n)
        rc = set_err(err, errlen, "config '%s' contains a NUL byte (not a text file?)", path);
    else
        rc = config_load_text(c, text, path, err, errlen);
    free(text);
    return rc;
}

int config_set(Config *c, const char *a, char *err, size_t errlen) {
    Loc loc = {NULL, 0, a};
    const char *eq = strchr(a, '=');
    const char *name = a;
    size_t namelen = eq ? (size_t)(eq - a) : strlen(a);
    trim(&name, &namelen);
    const char *dot = memchr(name, '.', namelen);
    if (!eq || !dot || dot == name || dot + 1 == name + namelen) {
        Msg m = msg_start(err, errlen, &loc);
        msg_add(&m, "expected section.key=value");
        // "d_model=3": name the section if the key lives in exactly one.
        int home = -1, count = 0;
        for (int i = 0; i < c->n && !dot; i++)
            if (strlen(c->schema[i].key) == namelen &&
                strncmp(c->schema[i].key, name, namelen) == 0)
                home = i, count++;
        if (count == 1 && eq)
            msg_add(&m, " (did you mean '%s.%s'?)", c->schema[home].section, a);
        return -1;
    }
    const char *sec = name, *key = dot + 1;
    size_t seclen = (size_t)(dot - name), keylen = namelen - seclen - 1;
    Msg m = msg_start(err, errlen, &loc);
    if (!section_known(c, sec, seclen)) return unknown_section(c, &m, sec, seclen);
    int k = find_key(c, sec, seclen, key, keylen);
    if (k < 0) return unknown_key(c, &m, sec, seclen, key, keylen);
    const CfgKey *ck = &c->schema[k];
    char *fullname = xasprintf("%s.%s", ck->section, ck->key);
    char *value = NULL;
    int rc = lex_value(eq + 1, strlen(eq + 1), 0, fullname, &value, &m);
    free(fullname);
    if (rc == 0 && strpbrk(value, "\n\r")) {
        msg_add(&m, "%s.%s: value contains a line break", ck->section, ck->key);
        rc = -1;
    }
    CfgValue v;
    if (rc == 0 && parse_value(ck, value, &v, &m) == 0)
        commit(c, k, v);
    else
        rc = -1;
    free(value);
    if (rc == 0 && err && errlen) err[0] = '\0';
    return rc;
}

// ---------------------------------------------------------------- getters

static int lookup_typed(const Config *c, const char *name, const char *fn, CfgType t1,
                        CfgType t2) {
    int i = lookup(c, name, fn);
    CfgType t = c->schema[i].type;
    if (t != t1 && t != t2) die("%s('%s'): the key is of type %s", fn, name, TYPE_NAME[t]);
    return i;
}

int64_t config_int(const Config *c, const char *name) {
    return c->val[lookup_typed(c, name, "config_int", CFG_INT, CFG_INT)].i;
}

double config_float(const Config *c, const char *name) {
    return c->val[lookup_typed(c, name, "config_float", CFG_FLOAT, CFG_FLOAT)].f;
}

int config_bool(const Config *c, const char *name) {
    return (int)c->val[lookup_typed(c, name, "config_bool", CFG_BOOL, CFG_BOOL)].i;
}

const char *config_str(const Config *c, const char *name) {
    return c->val[lookup_typed(c, name, "config_str", CFG_STRING, CFG_ENUM)].s;
}

double config_number(const Config *c, const char *name) {
    int i = lookup_typed(c, name, "config_number", CFG_INT, CFG_FLOAT);
    return c->schema[i].type == CFG_INT ? (double)c->val[i].i : c->val[i].f;
}

int config_was_set(const Config *c, const char *name) {
    return c->was_set[lookup(c, name, "config_was_set")];
}

// ---------------------------------------------------------------- output

// Appends the value text of key i as it would appear in a file.
static void format_value(Buf *b, const CfgKey *k, const CfgValue *v) {
    char num[40];
    switch (k->type) {
    case CFG_INT:
        buf_add(b, "%" PRId64, v->i);
        break;
    case CFG_FLOAT:
        format_double(num, sizeof num, v->f);
        buf_add(b, "%s", num);
        break;
    case CFG_BOOL:
        buf_add(b, "%s", v->i ? "true" : "false");
        break;
    case CFG_STRING:
        buf_add(b, "\"");
        for (const char *s = v->s; *s; s++) buf_add(b, "%s%c", (*s == '"' || *s == '\\') ? "\\" : "", *s);
        buf_add(b, "\"");
        break;
    case CFG_ENUM:
        buf_add(b, "%s", v->s);
        break;
    }
}

char *config_to_ini(const Config *c) {
    Buf b = {0};
    buf_add(&b, "%s", "");  // an empty schema still gives a (empty) string
    for (int i = 0; i < c->n; i++) {
        if (!first_of_section(c, i)) continue;
        const char *sec = c->schema[i].section;
        buf_add(&b, "%s[%s]\n", b.len ? "\n" : "", sec);
        for (int j = i; j < c->n; j++) {
            if (strcmp(c->schema[j].section, sec) != 0) continue;
            buf_add(&b, "%s = ", c->schema[j].key);
            format_value(&b, &c->schema[j], &c->val[j]);
            buf_add(&b, "\n");
        }
    }
    return b.p;
}

int config_diff(const Config *a, const Config *b, const char *const *ignore, int n_ignore,
                char *out, size_t outlen) {
    if (a->schema != b->schema || a->n != b->n) die("config_diff: configs of different schemas");
    Msg m = {out, outlen, 0};
    if (out && outlen) out[0] = '\0';
    int n_diff = 0;
    for (int i = 0; i < a->n; i++) {
        const CfgKey *k = &a->schema[i];
        char name[128];
        snprintf(name, sizeof name, "%s.%s", k->section, k->key);
        int skip = 0;
        size_t ls = strlen(k->section);
        for (int j = 0; j < n_ignore && !skip; j++) {
            // "section.*" skips a whole section
            skip = strcmp(ignore[j], name) == 0 ||
                   (strncmp(ignore[j], k->section, ls) == 0 && strcmp(ignore[j] + ls, ".*") == 0);
        }
        if (skip) continue;
        Buf va = {0}, vb = {0};
        format_value(&va, k, &a->val[i]);
        format_value(&vb, k, &b->val[i]);
        if (strcmp(va.p, vb.p) != 0) {
            msg_add(&m, "%s%s = ", n_diff ? "; " : "", name);
            msg_add_clipped(&m, va.p, strlen(va.p));
            msg_add(&m, " vs ");
            msg_add_clipped(&m, vb.p, strlen(vb.p));
            n_diff++;
        }
        free(va.p);
        free(vb.p);
    }
    return n_diff;
}

// The cells of key k's row of `grpolab config --keys`: name, type, default, allowed, meaning.
enum { KEY_CELLS = 5 };
typedef struct {
    char name[128], def[128], allowed[512];
    const char *cell[KEY_CELLS];
} KeyRow;

static void key_row(const CfgKey *k, KeyRow *r) {
    snprintf(r->name, sizeof r->name, "%s.%s", k->section, k->key);
    snprintf(r->def, sizeof r->def, k->type == CFG_STRING ? "\"%s\"" : "%s", k->def);
    format_range(r->allowed, sizeof r->allowed, k);
    const char *cell[KEY_CELLS] = {r->name, TYPE_NAME[k->type], r->def, r->allowed, k->help ? k->help : ""};
    memcpy(r->cell, cell, sizeof cell);
}

// One row: Markdown ("| a | b |", '|' in a cell written "\|") or plain text (columns padded to
// width, two spaces apart, the last one not padded).
static void print_key_row(FILE *f, const char *const cell[KEY_CELLS], const int width[KEY_CELLS],
                          bool markdown) {
    for (int c = 0; c < KEY_CELLS; c++) {
        if (markdown) {
            fputs(c ? " | " : "| ", f);
            for (const char *p = cell[c]; *p; p++) {
                if (*p == '|') fputc('\\', f);
                fputc(*p, f);
            }
        } else if (c < KEY_CELLS - 1) {
            fprintf(f, "%-*s  ", width[c], cell[c]);
        } else {
            fputs(cell[c], f);
        }
    }
    fputs(markdown ? " |\n" : "\n", f);
}

void config_print_keys(FILE *f, bool markdown) {
    static const char *const head[KEY_CELLS] = {"key", "type", "default", "allowed", "meaning"};
    int width[KEY_CELLS] = {0};
    for (int i = -1; i < CONFIG_SCHEMA_LEN; i++) {
        KeyRow r;
        if (i >= 0) key_row(&CONFIG_SCHEMA[i], &r);
        for (int c = 0; c < KEY_CELLS; c++) {
            int w = (int)strlen(i < 0 ? head[c] : r.cell[c]);
            if (w > width[c]) width[c] = w;
        }
    }
    print_key_row(f, head, width, markdown);
    if (markdown) fputs("|---|---|---|---|---|\n", f);
    for (int i = 0; i < CONFIG_SCHEMA_LEN; i++) {
        KeyRow r;
        key_row(&CONFIG_SCHEMA[i], &r);
        print_key_row(f, r.cell, width, markdown);
    }
}
