// sweep.c: the sweep file reader, the grid's runs and the manifest (contract in sweep.h).
#include "sweep.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common.h"
#include "../rl/setup.h"

// ---------------------------------------------------------------- small helpers

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// [s, s + *len) without the whitespace at both ends.
static const char *trimmed(const char *s, size_t *len) {
    while (*len > 0 && is_blank(s[0])) s++, (*len)--;
    while (*len > 0 && is_blank(s[*len - 1])) (*len)--;
    return s;
}

static char *dup_n(const char *s, size_t n) {
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void push(char ***list, int *n, char *item) {
    char **p = realloc(*list, ((size_t)*n + 1) * sizeof **list);
    if (!p) die("out of memory growing a list of %d", *n + 1);
    *list = p;
    (*list)[(*n)++] = item;
}

// The default config with one assignment applied: 0, or -1 with config_set's message.
static int check_assignment(const char *key, const char *value, char *msg, size_t msglen) {
    Config *c = config_new();
    char *a = xasprintf("%s=%s", key, value);
    int rc = config_set(c, a, msg, msglen);
    free(a);
    config_free(c);
    return rc;
}

// "a..b" with integers a <= b: 1 and the bounds; 0 if the text is not a range.
static int parse_range(const char *v, long long *a, long long *b) {
    const char *dots = strstr(v, "..");
    if (!dots || dots == v) return 0;
    char *end;
    errno = 0;
    *a = strtoll(v, &end, 10);
    if (end != dots || errno) return 0;
    *b = strtoll(dots + 2, &end, 10);
    return dots[2] != '\0' && *end == '\0' && !errno;
}

// ---------------------------------------------------------------- the file

typedef struct {
    const char *file;
    int line;
    char *err;
    size_t errlen;
} Where;

GL_PRINTF(2, 3) static int fail(const Where *w, const char *fmt, ...) {
    if (!w->err || !w->errlen) return -1;
    int n = w->line > 0 ? snprintf(w->err, w->errlen, "%s:%d: ", w->file, w->line)
                        : snprintf(w->err, w->errlen, "%s: ", w->file);
    if (n < 0 || (size_t)n >= w->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err + n, w->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

// One [grid] line: the comma-separated values (ranges expanded), each checked.
static int read_axis(SweepAxis *ax, const char *key, const char *text, const Where *w) {
    char *buf = xstrdup(text);
    int rc = 0;
    char *item = buf;
    for (;;) {
        char *comma = strchr(item, ',');
        size_t len = comma ? (size_t)(comma - item) : strlen(item);
        const char *v = trimmed(item, &len);
        if (len == 0) {
            rc = fail(w, "[grid] %s = '%s': an empty value (expected a comma-separated list, e.g. "
                      "grpo, dr_grpo, or a range of integers, e.g. 1234..1237)", key, text);
            break;
        }
        char *value = dup_n(v, len);
        long long a, b;
        int range = parse_range(value, &a, &b);
        if (range && (b < a || b - a >= SWEEP_MAX_RUNS)) {
            rc = fail(w, "[grid] %s: range '%s': expected FIRST..LAST with FIRST <= LAST and at "
                      "most %d values", key, value, SWEEP_MAX_RUNS);
            free(value);
            break;
        }
        for (long long x = range ? a : 0; rc == 0 && x <= (range ? b : 0); x++) {
            char num[32];
            if (range) snprintf(num, sizeof num, "%lld", x);
            const char *one = range ? num : value;
            char msg[768];
            if (check_assignment(key, one, msg, sizeof msg) != 0) {
                rc = fail(w, "[grid] %s: value '%s' is refused: %s", key, one, msg);
                break;
            }
            for (int j = 0; j < ax->n_values; j++)
                if (strcmp(ax->values[j], one) == 0) {
                    rc = fail(w, "[grid] %s: value '%s' is listed twice", key, one);
                    break;
                }
            if (rc == 0 && ax->n_values >= SWEEP_MAX_RUNS)
                rc = fail(w, "[grid] %s: more than %d values", key, SWEEP_MAX_RUNS);
            if (rc == 0) push(&ax->values, &ax->n_values, xstrdup(one));
        }
        free(value);
        if (rc != 0 || !comma) break;
        item = comma + 1;
    }
    free(buf);
    return rc;
}

// A [slurm] string option: one word of the characters sbatch options take.
static int slurm_word(char **dst, const char *key, const char *v, const Where *w) {
    for (const char *p = v; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("_.:,+-=/", *p)))
            return fail(w, "[slurm] %s = '%s': expected one word of letters, digits and _.:,+-=/", key, v);
    if (!*v) return fail(w, "[slurm] %s: an empty value", key);
    free(*dst);
    *dst = xstrdup(v);
    return 0;
}

static int slurm_int(int *dst, const char *key, const char *v, int lo, int hi, const Where *w) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        return fail(w, "[slurm] %s = '%s': expected an integer in [%d, %d]", key, v, lo, hi);
    *dst = (int)x;
    return 0;
}

static int read_slurm_key(SweepSlurm *sl, const char *key, const char *v, const Where *w) {
    if (strcmp(key, "partition") == 0) return slurm_word(&sl->partition, key, v, w);
    if (strcmp(key, "account") == 0) return slurm_word(&sl->account, key, v, w);
    if (strcmp(key, "time") == 0) return slurm_word(&sl->time, key, v, w);
    if (strcmp(key, "mem") == 0) return slurm_word(&sl->mem, key, v, w);
    if (strcmp(key, "cpus") == 0) return slurm_int(&sl->cpus, key, v, 1, 4096, w);
    if (strcmp(key, "gpus") == 0) return slurm_int(&sl->gpus, key, v, 0, 64, w);
    if (strcmp(key, "max_parallel") == 0) return slurm_int(&sl->max_parallel, key, v, 0, SWEEP_MAX_RUNS, w);
    if (strcmp(key, "signal") == 0) return slurm_int(&sl->signal_secs, key, v, 0, 65535, w);
    if (strcmp(key, "requeue") == 0) {
        int yes = !strcmp(v, "true") || !strcmp(v, "1"), no = !strcmp(v, "false") || !strcmp(v, "0");
        if (!yes && !no) return fail(w, "[slurm] requeue = '%s': expected true or false", v);
        sl->requeue = yes;
        return 0;
    }
    return fail(w, "[slurm] unknown key '%s' (allowed: partition, account, time, mem, cpus, gpus, "
                "max_parallel, signal, requeue)", key);
}

// Keys of one section seen so far, for duplicates.
static int seen_before(char ***seen, int *n_seen, const char *sec, const char *key) {
    char *full = xasprintf("%s/%s", sec, key);
    for (int i = 0; i < *n_seen; i++)
        if (strcmp((*seen)[i], full) == 0) {
            free(full);
            return 1;
        }
    push(seen, n_seen, full);
    return 0;
}

static int read_line(Sweep *s, const char *sec, const char *key, const char *value, const Where *w) {
    if (strcmp(sec, "sweep") == 0) {
        char **dst = strcmp(key, "config") == 0 ? &s->config
                     : strcmp(key, "out") == 0  ? &s->out
                     : strcmp(key, "name") == 0 ? &s->name
                     : strcmp(key, "run_name") == 0 ? &s->run_name
                                                : NULL;
        if (!dst) return fail(w, "[sweep] unknown key '%s' (allowed: config, out, name, run_name)", key);
        if (!*value) return fail(w, "[sweep] %s: an empty value", key);
        free(*dst);
        *dst = xstrdup(value);
        return 0;
    }
    if (strcmp(sec, "slurm") == 0) return read_slurm_key(&s->slurm, key, value, w);
    if (strcmp(key, "run.out") == 0)
        return fail(w, "[%s] run.out: the sweep names each run's log (OUT/NAME.h5); set [sweep] out instead", sec);
    if (strcmp(sec, "set") == 0) {
        char msg[768];
        if (check_assignment(key, value, msg, sizeof msg) != 0)
            return fail(w, "[set] %s = '%s' is refused: %s", key, value, msg);
        push(&s->sets, &s->n_sets, xasprintf("%s=%s", key, value));
        return 0;
    }
    // [grid]
    if (s->n_axes >= SWEEP_MAX_AXES) return fail(w, "[grid] more than %d keys", SWEEP_MAX_AXES);
    SweepAxis *ax = &s->axes[s->n_axes];
    memset(ax, 0, sizeof *ax);
    ax->key = xstrdup(key);
    s->n_axes++;
    return read_axis(ax, key, value, w);
}

// The value text of a line: trimmed, without a trailing comment (' #' or ' ;').
static char *line_value(const char *v, size_t len) {
    for (size_t i = 1; i < len; i++)
        if ((v[i] == '#' || v[i] == ';') && is_blank(v[i - 1])) {
            len = i;
            break;
        }
    v = trimmed(v, &len);
    return dup_n(v, len);
}

static int name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._+-", c);
}

// The axis whose key is the n characters at k; -1 if none.
static int axis_of(const Sweep *s, const char *k, size_t n) {
    for (int a = 0; a < s->n_axes; a++)
        if (strlen(s->axes[a].key) == n && strncmp(s->axes[a].key, k, n) == 0) return a;
    return -1;
}

// [sweep] run_name: text of name characters and {KEY} of grid keys, every grid key used (or
// two runs could get one name).
static int check_run_name(const Sweep *s, const Where *w) {
    int used[SWEEP_MAX_AXES] = {0};
    for (const char *p = s->run_name; *p; p++) {
        if (*p == '{') {
            size_t n = strcspn(p + 1, "{}");
            int a = p[1 + n] == '}' ? axis_of(s, p + 1, n) : -1;
            if (a < 0)
                return fail(w, "[sweep] run_name = '%s': '{%.*s}' is not a [grid] key in braces",
                            s->run_name, (int)n, p + 1);
            used[a] = 1;
            p += n + 1;
        } else if (!name_char(*p)) {
            return fail(w, "[sweep] run_name = '%s': '%c' is not allowed outside {KEY} (only "
                        "A-Z a-z 0-9 . _ + -)", s->run_name, *p);
        }
    }
    for (int a = 0; a < s->n_axes; a++)
        if (!used[a])
            return fail(w, "[sweep] run_name = '%s' does not name the [grid] key %s: add {%s}",
                        s->run_name, s->axes[a].key, s->axes[a].key);
    return 0;
}

// After the file: required keys, the grid's size and labels.
static int finish(Sweep *s, const Where *w) {
    if (!s->config) return fail(w, "[sweep] config = FILE is missing (the base config of every run)");
    if (!s->out) return fail(w, "[sweep] out = DIR is missing (the directory of the run logs)");
    if (s->n_axes == 0)
        return fail(w, "[grid] is missing or empty: give at least one key with its values, e.g. "
                    "run.seed = 1234..1237");
    for (int a = 0; a < s->n_axes; a++)
        for (int j = 0; j < s->n_sets; j++) {
            size_t kl = strlen(s->axes[a].key);
            if (strncmp(s->sets[j], s->axes[a].key, kl) == 0 && s->sets[j][kl] == '=')
                return fail(w, "%s is both in [set] and in [grid]: keep one", s->axes[a].key);
        }
    long long n = 1;
    for (int a = 0; a < s->n_axes; a++) {
        n *= s->axes[a].n_values;
        if (n > SWEEP_MAX_RUNS)
            return fail(w, "[grid] has more than %d combinations", SWEEP_MAX_RUNS);
    }
    s->n_runs = (int)n;
    for (int a = 0; a < s->n_axes; a++) {
        const char *dot = strchr(s->axes[a].key, '.');
        const char *lab = dot ? dot + 1 : s->axes[a].key;
        int shared = 0;
        for (int b = 0; b < s->n_axes; b++) {
            const char *d2 = strchr(s->axes[b].key, '.');
            shared |= b != a && strcmp(d2 ? d2 + 1 : s->axes[b].key, lab) == 0;
        }
        s->axes[a].label = xstrdup(shared ? s->axes[a].key : lab);
    }
    if (s->run_name && check_run_name(s, w) != 0) return -1;
    if (!s->name) {
        const char *base = strrchr(w->file, '/');
        base = base ? base + 1 : w->file;
        size_t len = strcspn(base, ".");
        s->name = dup_n(base, len ? len : strlen(base));
    }
    return 0;
}

Sweep *sweep_load_text(const char *text, const char *name, char *err, size_t errlen) {
    Sweep *s = xcalloc(1, sizeof *s);
    s->path = xstrdup(name);
    s->slurm.cpus = 1;
    s->slurm.signal_secs = SWEEP_SIGNAL_SECS;
    s->slurm.requeue = 1;
    Where w = {name, 0, err, errlen};
    char sec[16] = "";
    char **seen = NULL;
    int n_seen = 0, rc = 0;
    for (const char *p = text; *p && rc == 0;) {
        w.line++;
        size_t len = strcspn(p, "\n");
        const char *l = p;
        p += len + (p[len] == '\n');
        l = trimmed(l, &len);
        if (len == 0 || l[0] == '#' || l[0] == ';') continue;
        if (l[0] == '[') {
            const char *close = memchr(l, ']', len);
            size_t nl = close ? (size_t)(close - l - 1) : 0;
            const char *nm = close ? trimmed(l + 1, &nl) : l;
            int known = close && nl < sizeof sec;
            if (known) {
                memcpy(sec, nm, nl);
                sec[nl] = '\0';
                known = !strcmp(sec, "sweep") || !strcmp(sec, "set") || !strcmp(sec, "grid") || !strcmp(sec, "slurm");
            }
            if (!known)
                rc = fail(&w, "unknown section '%.*s' (allowed: [sweep], [set], [grid], [slurm])", (int)len, l);
            continue;
        }
        const char *eq = memchr(l, '=', len);
        size_t kl = eq ? (size_t)(eq - l) : 0;
        const char *k = trimmed(l, &kl);
        if (!eq || kl == 0) {
            rc = fail(&w, "expected 'key = value', '[section]' or a comment, got '%.*s'", (int)len, l);
            break;
        }
        if (!sec[0]) {
            rc = fail(&w, "'%.*s' is outside any section (start with [sweep])", (int)kl, k);
            break;
        }
        char *key = dup_n(k, kl);
        char *value = line_value(eq + 1, len - (size_t)(eq + 1 - l));
        if (seen_before(&seen, &n_seen, sec, key))
            rc = fail(&w, "[%s] %s is given twice", sec, key);
        else
            rc = read_line(s, sec, key, value, &w);
        free(key);
        free(value);
    }
    for (int i = 0; i < n_seen; i++) free(seen[i]);
    free(seen);
    w.line = 0;
    if (rc == 0) rc = finish(s, &w);
    if (rc != 0) {
        sweep_free(s);
        return NULL;
    }
    return s;
}

Sweep *sweep_load(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, errlen, "cannot open sweep file '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *text = xmalloc(cap);
    while ((n += fread(text + n, 1, cap - 1 - n, f)) == cap - 1) {
        cap *= 2;
        char *t = realloc(text, cap);
        if (!t) die("out of memory allocating %zu bytes", cap);
        text = t;
    }
    int bad = ferror(f);
    fclose(f);
    text[n] = '\0';
    Sweep *s = NULL;
    if (bad)
        set_err(err, errlen, "cannot read sweep file '%s'", path);
    else if (strlen(text) != n)
        set_err(err, errlen, "sweep file '%s' contains a NUL byte (not a text file?)", path);
    else
        s = sweep_load_text(text, path, err, errlen);
    free(text);
    return s;
}

void sweep_free(Sweep *s) {
    if (!s) return;
    for (int a = 0; a < s->n_axes; a++) {
        sweep_free_sets(s->axes[a].values, s->axes[a].n_values);
        free(s->axes[a].key);
        free(s->axes[a].label);
    }
    sweep_free_sets(s->sets, s->n_sets);
    free(s->path);
    free(s->name);
    free(s->run_name);
    free(s->config);
    free(s->out);
    free(s->slurm.partition);
    free(s->slurm.account);
    free(s->slurm.time);
    free(s->slurm.mem);
    free(s);
}

// ---------------------------------------------------------------- runs

void sweep_run_indices(const Sweep *s, int i, int *idx) {
    for (int a = s->n_axes - 1; a >= 0; a--) {
        idx[a] = i % s->axes[a].n_values;
        i /= s->axes[a].n_values;
    }
}

// Appends text (n characters) to buf at *o, characters outside [A-Za-z0-9._+-] as '-' when
// value; -1 if it does not fit.
static int put_name(char *buf, size_t len, size_t *o, const char *text, size_t n, int value) {
    if (*o + n >= len) return -1;
    for (size_t j = 0; j < n; j++) buf[(*o)++] = value && !name_char(text[j]) ? '-' : text[j];
    buf[*o] = '\0';
    return 0;
}

int sweep_run_name(const Sweep *s, int i, char *buf, size_t len) {
    int idx[SWEEP_MAX_AXES];
    sweep_run_indices(s, i, idx);
    size_t o = 0;
    if (len == 0) return -1;
    buf[0] = '\0';
    if (s->run_name) {  // checked by check_run_name: every {KEY} is an axis
        for (const char *p = s->run_name; *p; p++) {
            if (*p == '{') {
                size_t n = strcspn(p + 1, "}");
                int a = axis_of(s, p + 1, n);
                const char *v = s->axes[a].values[idx[a]];
                if (put_name(buf, len, &o, v, strlen(v), 1) != 0) return -1;
                p += n + 1;
            } else if (put_name(buf, len, &o, p, 1, 0) != 0) {
                return -1;
            }
        }
        return 0;
    }
    for (int a = 0; a < s->n_axes; a++) {
        const char *lab = s->axes[a].label, *v = s->axes[a].values[idx[a]];
        if ((a && put_name(buf, len, &o, "_", 1, 0) != 0) || put_name(buf, len, &o, lab, strlen(lab), 0) != 0 ||
            put_name(buf, len, &o, "-", 1, 0) != 0 || put_name(buf, len, &o, v, strlen(v), 1) != 0)
            return -1;
    }
    return 0;
}

char *sweep_run_path(const Sweep *s, int i) {
    char name[1024];
    if (sweep_run_name(s, i, name, sizeof name) != 0) die("sweep: run %d's name is too long", i);
    return xasprintf("%s/%s.h5", s->out, name);
}

char **sweep_run_grid_sets(const Sweep *s, int i) {
    int idx[SWEEP_MAX_AXES];
    sweep_run_indices(s, i, idx);
    char **sets = xcalloc((size_t)s->n_axes + 1, sizeof *sets);
    for (int a = 0; a < s->n_axes; a++) {
        const char *k = s->axes[a].key, *v = s->axes[a].values[idx[a]];
        sets[a] = xasprintf("%s=%s", k, v);
    }
    return sets;
}

void sweep_free_sets(char **sets, int n) {
    if (!sets) return;
    for (int i = 0; i < n; i++) free(sets[i]);
    free(sets);
}

Config *sweep_run_config(const Sweep *s, int i, char *err, size_t errlen) {
    Config *c = config_new();
    char msg[1024], name[1024];
    if (sweep_run_name(s, i, name, sizeof name) != 0) snprintf(name, sizeof name, "%d", i);
    if (config_load_file(c, s->config, msg, sizeof msg) != 0) {
        set_err(err, errlen, "%s: [sweep] config: %s", s->path, msg);
        config_free(c);
        return NULL;
    }
    char **grid = sweep_run_grid_sets(s, i);
    int rc = 0;
    for (int j = 0; j < s->n_sets + s->n_axes && rc == 0; j++) {
        const char *a = j < s->n_sets ? s->sets[j] : grid[j - s->n_sets];
        if (config_set(c, a, msg, sizeof msg) != 0)
            rc = set_err(err, errlen, "%s: run %d (%s): %s", s->path, i, name, msg);
    }
    ModelConfig mc;
    if (rc == 0 && setup_model_config(c, &mc, msg, sizeof msg) != 0)
        rc = set_err(err, errlen, "%s: run %d (%s), on %s: %s", s->path, i, name, s->config, msg);
    sweep_free_sets(grid, s->n_axes);
    if (rc != 0) {
        config_free(c);
        return NULL;
    }
    return c;
}

int sweep_check(const Sweep *s, char *err, size_t errlen) {
    char **names = xcalloc((size_t)s->n_runs, sizeof *names);
    int rc = 0;
    for (int i = 0; i < s->n_runs && rc == 0; i++) {
        char name[1024];
        if (sweep_run_name(s, i, name, sizeof name) != 0) {
            rc = set_err(err, errlen, "%s: run %d: its name is longer than %zu characters: fewer or "
                         "shorter [grid] values", s->path, i, sizeof name - 1);
            break;
        }
        for (int j = 0; j < i && rc == 0; j++)
            if (strcmp(names[j], name) == 0)
                rc = set_err(err, errlen, "%s: runs %d and %d are both named '%s' (values that differ "
                             "only in characters outside [A-Za-z0-9._+-]): write the values apart",
                             s->path, j, i, name);
        names[i] = xstrdup(name);
        Config *c = rc == 0 ? sweep_run_config(s, i, err, errlen) : NULL;
        if (!c) rc = -1;
        config_free(c);
    }
    for (int i = 0; i < s->n_runs; i++) free(names[i]);
    free(names);
    return rc;
}

// ---------------------------------------------------------------- manifest

#define MANIFEST "sweep.runs"

// mkdir -p path.
static int make_dirs(const char *path, char *err, size_t errlen) {
    char *p = xstrdup(path);
    int rc = 0;
    for (char *q = p + 1;; q++) {
        if (*q != '/' && *q != '\0') continue;
        char c = *q;
        *q = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            rc = set_err(err, errlen, "cannot create directory '%s': %s", p, strerror(errno));
            break;
        }
        *q = c;
        if (!c) break;
    }
    free(p);
    return rc;
}

int sweep_make_out_dir(const Sweep *s, char *err, size_t errlen) { return make_dirs(s->out, err, errlen); }

int sweep_write_manifest(const Sweep *s, char *err, size_t errlen) {
    if (make_dirs(s->out, err, errlen) != 0) return -1;
    char *path = xasprintf("%s/%s", s->out, MANIFEST);
    FILE *f = fopen(path, "w");
    if (!f) {
        set_err(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        free(path);
        return -1;
    }
    fprintf(f, "# grpolab sweep '%s' (%s): one run per line, its name and grid values; the run's "
            "log is NAME.h5 beside this file\n", s->name, s->path);
    for (int i = 0; i < s->n_runs; i++) {
        char name[1024];
        sweep_run_name(s, i, name, sizeof name);
        char **grid = sweep_run_grid_sets(s, i);
        fprintf(f, "%s", name);
        for (int a = 0; a < s->n_axes; a++) fprintf(f, "\t%s", grid[a]);
        fprintf(f, "\n");
        sweep_free_sets(grid, s->n_axes);
    }
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad) set_err(err, errlen, "cannot write '%s'", path);
    free(path);
    return bad ? -1 : 0;
}

// The value of key in a manifest line's fields ("\tkey=value\t..."), or NULL; its length in *len.
static const char *manifest_value(const char *fields, const char *key, size_t *len) {
    size_t kl = strlen(key);
    for (const char *f = fields; (f = strchr(f, '\t')) != NULL;) {
        f++;
        if (strncmp(f, key, kl) == 0 && f[kl] == '=') {
            *len = strcspn(f + kl + 1, "\t");
            return f + kl + 1;
        }
    }
    return NULL;
}

int sweep_expand_dir(const char *path, char ***runs, char ***groups, char *note, size_t notelen,
                     char *err, size_t errlen) {
    struct stat st;
    *runs = NULL;
    if (groups) *groups = NULL;
    if (note && notelen) note[0] = '\0';
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    char *mpath = xasprintf("%s/%s", path, MANIFEST);
    FILE *f = fopen(mpath, "r");
    if (!f) {
        set_err(err, errlen, "'%s' is a directory without a sweep manifest (%s: %s): give run logs, "
                "or the out directory of a `grpolab sweep run` or `sweep slurm`", path, mpath, strerror(errno));
        free(mpath);
        return -1;
    }
    char **lines = NULL, line[8192];
    int n = 0, n_lines = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\n")] = '\0';
        size_t len = strcspn(line, "\t");
        push(runs, &n, xasprintf("%s/%.*s.h5", path, (int)len, line));
        push(&lines, &n_lines, xstrdup(line));
    }
    fclose(f);
    if (n == 0) {
        set_err(err, errlen, "sweep manifest '%s' lists no run", mpath);
        free(mpath);
        return -1;
    }
    free(mpath);
    // the grid's keys (those of the first run) whose value differs between runs, besides
    // objective.preset and run.seed: the runs' group is their objective and these values
    char keys[SWEEP_MAX_AXES][128];
    int n_keys = 0;
    for (const char *fl = strchr(lines[0], '\t'); fl && n_keys < SWEEP_MAX_AXES; fl = strchr(fl, '\t')) {
        fl++;
        size_t kl = strcspn(fl, "=\t"), l0 = 0, li = 0;
        if (kl >= sizeof keys[0]) continue;
        snprintf(keys[n_keys], sizeof keys[0], "%.*s", (int)kl, fl);
        if (!strcmp(keys[n_keys], "objective.preset") || !strcmp(keys[n_keys], "run.seed")) continue;
        const char *v0 = manifest_value(lines[0], keys[n_keys], &l0);
        int varies = 0;
        for (int i = 1; i < n && !varies; i++) {
            const char *vi = manifest_value(lines[i], keys[n_keys], &li);
            varies = !v0 || !vi || li != l0 || strncmp(vi, v0, l0) != 0;
        }
        if (!varies) continue;
        if (note) {
            size_t o = strlen(note);
            snprintf(note + o, notelen - o, "%s%s", n_keys ? ", " : "", keys[n_keys]);
        }
        n_keys++;
    }
    if (groups) *groups = xcalloc((size_t)n, sizeof **groups);
    for (int i = 0; groups && i < n; i++) {
        char g[256] = "";
        for (int k = 0; k < n_keys; k++) {
            size_t len = 0, o = strlen(g);
            const char *v = manifest_value(lines[i], keys[k], &len);
            const char *dot = strchr(keys[k], '.');
            snprintf(g + o, sizeof g - o, "%s%s-%.*s", o ? "_" : "", dot ? dot + 1 : keys[k], (int)len, v ? v : "");
        }
        (*groups)[i] = xstrdup(g);
    }
    sweep_free_sets(lines, n);
    return n;
}
