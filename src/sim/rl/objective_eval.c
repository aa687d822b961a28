// objective_eval.c: `grpolab objective --eval FILE` (objective.h): one batch's advantages and
// token weights under a preset, from a text file, so that other implementations (the
// frameworks of scripts/conformance.py) can be compared with the trainer's own arithmetic
// (kn_group_advantages and kn_token_weights on the CPU backend, one minibatch of every
// response, one micro-batch).
//
// The file: words separated by white space, '#' to the end of a line a comment.
//   preset NAME                 the objective preset (first)
//   set KEY=VALUE               an [objective] key (or world.max_new_tokens), any number
//   groups P G                  P groups of G responses
//   rewards r_1 .. r_PG
//   greedy g_1 .. g_P           the greedy responses' rewards (the greedy baseline needs them)
//   response L lp_1..lp_L old_1..old_L env_1..env_L    P*G times, in group order: the log-probs
//                               under pi_theta and pi_old of the response's L tokens, and 1 for
//                               a token the environment wrote (else 0)
// The output (stdout) is JSON: the resolved knobs' preset name, the advantages A_i, the
// aggregation coefficients c_i and every response's token weights w = -dL/dlog pi (0 on the
// environment's tokens), L the sum over the batch of c_i times the token losses.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common.h"
#include "../../kernels/kernels.h"
#include "objective.h"

typedef struct {
    FILE *f;
    const char *path;
    int line;
} Words;

// The next word into buf (at most n-1 characters); 0 at the end of the file.
static int next_word(Words *w, char *buf, size_t n) {
    int ch;
    for (;;) {
        ch = fgetc(w->f);
        if (ch == '#')
            while (ch != '\n' && ch != EOF) ch = fgetc(w->f);
        if (ch == '\n') w->line++;
        if (ch == EOF) return 0;
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') break;
    }
    size_t k = 0;
    while (ch != EOF && ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r' && ch != '#') {
        if (k + 1 < n) buf[k++] = (char)ch;
        ch = fgetc(w->f);
    }
    if (ch == '\n' || ch == '#') ungetc(ch, w->f);  // the line ends after this word
    buf[k] = '\0';
    return 1;
}

static int eval_fail(const Words *w, const char *what, const char *value) {
    fprintf(stderr, "grpolab objective: error: %s, line %d: %s '%s'\n", w->path, w->line, what, value);
    return 2;
}

// A number of the key `what` into *x; 0, or non-zero with the message printed.
static int read_num(Words *w, const char *what, double *x) {
    char buf[64], *end;
    if (!next_word(w, buf, sizeof buf)) return eval_fail(w, what, "(end of file)");
    errno = 0;
    *x = strtod(buf, &end);
    if (*end || errno) return eval_fail(w, what, buf);
    return 0;
}

static int read_count(Words *w, const char *what, int lo, int hi, int *n) {
    double x;
    if (read_num(w, what, &x)) return 2;
    if (x != (int)x || x < lo || x > hi) {
        char buf[64];
        snprintf(buf, sizeof buf, "%g (an integer in [%d, %d])", x, lo, hi);
        return eval_fail(w, what, buf);
    }
    *n = (int)x;
    return 0;
}

typedef struct {
    int P, G, n, have_greedy;
    float *rewards, *greedy;
    int *len;
    float **logp, **old;
    unsigned char **env;
} EvalBatch;

static void batch_free(EvalBatch *b) {
    for (int k = 0; k < b->n && b->logp; k++) {
        free(b->logp[k]);
        free(b->old[k]);
        free(b->env[k]);
    }
    free(b->logp);
    free(b->old);
    free(b->env);
    free(b->rewards);
    free(b->greedy);
    free(b->len);
}

// Reads the file into *b and the config *c; 0 or 2 with the message printed.
static int read_batch(Words *w, Config *c, EvalBatch *b) {
    char key[512], err[512];
    int have_preset = 0, got = 0;
    b->have_greedy = 0;
    while (next_word(w, key, sizeof key)) {
        if (strcmp(key, "preset") == 0 || strcmp(key, "set") == 0) {
            char v[480], kv[512];
            if (!next_word(w, v, sizeof v)) return eval_fail(w, key, "(end of file)");
            snprintf(kv, sizeof kv, "%s%s", key[0] == 'p' ? "objective.preset=" : "", v);
            if (key[0] == 's' && strncmp(v, "objective.", 10) != 0 && strncmp(v, "world.max_new_tokens=", 21) != 0)
                return eval_fail(w, "set: only objective.* and world.max_new_tokens", v);
            if (config_set(c, kv, err, sizeof err) != 0) return eval_fail(w, err, v);
            have_preset |= key[0] == 'p';
        } else if (strcmp(key, "groups") == 0) {
            if (b->n) return eval_fail(w, "groups given twice", key);
            if (read_count(w, "groups P", 1, 1 << 16, &b->P) || read_count(w, "groups G", 2, 1 << 16, &b->G))
                return 2;
            b->n = b->P * b->G;
            b->rewards = xcalloc((size_t)b->n, sizeof(float));
            b->greedy = xcalloc((size_t)b->P, sizeof(float));
            b->len = xcalloc((size_t)b->n, sizeof(int));
            b->logp = xcalloc((size_t)b->n, sizeof(float *));
            b->old = xcalloc((size_t)b->n, sizeof(float *));
            b->env = xcalloc((size_t)b->n, sizeof(unsigned char *));
        } else if (!b->n) {
            return eval_fail(w, "expected preset, set or groups before", key);
        } else if (strcmp(key, "rewards") == 0 || strcmp(key, "greedy") == 0) {
            int m = key[0] == 'r' ? b->n : b->P;
            float *dst = key[0] == 'r' ? b->rewards : b->greedy;
            b->have_greedy |= key[0] == 'g';
            for (int i = 0; i < m; i++) {
                double x;
                if (read_num(w, key, &x)) return 2;
                dst[i] = (float)x;
            }
        } else if (strcmp(key, "response") == 0) {
            if (got == b->n) return eval_fail(w, "more responses than P*G", key);
            int L;
            if (read_count(w, "response length", 1, 1 << 20, &L)) return 2;
            b->len[got] = L;
            b->logp[got] = xmalloc((size_t)L * sizeof(float));
            b->old[got] = xmalloc((size_t)L * sizeof(float));
            b->env[got] = xmalloc((size_t)L);
            for (int pass = 0; pass < 3; pass++)
                for (int t = 0; t < L; t++) {
                    double x;
                    if (read_num(w, pass == 0 ? "logp" : pass == 1 ? "logp_old" : "env", &x)) return 2;
                    if (pass == 0) b->logp[got][t] = (float)x;
                    else if (pass == 1) b->old[got][t] = (float)x;
                    else if (x != 0 && x != 1) return eval_fail(w, "env (0 or 1)", "not 0 or 1");
                    else b->env[got][t] = (unsigned char)x;
                }
            got++;
        } else {
            return eval_fail(w, "unknown key", key);
        }
    }
    if (!have_preset) return eval_fail(w, "no preset given", "preset");
    if (!b->n) return eval_fail(w, "no groups given", "groups");
    if (got != b->n) {
        char buf[64];
        snprintf(buf, sizeof buf, "%d of %d", got, b->n);
        return eval_fail(w, "responses", buf);
    }
    return 0;
}

static void print_array(const char *name, const float *x, int n, FILE *f) {
    fprintf(f, "\"%s\": [", name);
    for (int i = 0; i < n; i++) fprintf(f, "%s%.9g", i ? ", " : "", (double)x[i]);
    fprintf(f, "]");
}

int objective_eval(const char *path) {
    Words w = {fopen(path, "r"), path, 1};
    if (!w.f) {
        fprintf(stderr, "grpolab objective: error: cannot open %s: %s\n", path, strerror(errno));
        return 2;
    }
    Config *c = config_new();
    EvalBatch b = {0};
    int rc = read_batch(&w, c, &b);
    fclose(w.f);
    char err[512];
    ObjectiveConfig oc;
    int T = 0;
    for (int k = 0; k < b.n; k++) T = b.len[k] > T ? b.len[k] : T;
    if (rc == 0 && objective_from_config(c, config_settings(c)->world.max_new_tokens, &oc, err, sizeof err) != 0) {
        fprintf(stderr, "grpolab objective: error: %s: %s\n", path, err);
        rc = 2;
    } else if (rc == 0 && oc.baseline == BASELINE_GREEDY && !b.have_greedy) {
        fprintf(stderr, "grpolab objective: error: %s: objective.baseline = greedy needs the line "
                "'greedy g_1 .. g_P'\n", path);
        rc = 2;
    }
    Backend *bk = rc == 0 ? backend_create(BACKEND_CPU, err, sizeof err) : NULL;
    if (rc == 0 && !bk) {
        fprintf(stderr, "grpolab objective: error: %s\n", err);
        rc = 2;
    }
    if (rc != 0) {
        batch_free(&b);
        config_free(c);
        return rc;
    }
    // the trainer's (n, T) layout, every response from position 0
    size_t NT = (size_t)b.n * T;
    float *adv = xcalloc((size_t)b.n, sizeof(float)), *coef = xcalloc((size_t)b.n, sizeof(float));
    float *lp = xcalloc(NT, sizeof(float)), *old = xcalloc(NT, sizeof(float));
    float *wt = xcalloc(NT, sizeof(float)), *loss = xcalloc(NT, sizeof(float));
    unsigned char *mask = xcalloc(NT, 1);
    int *start = xcalloc((size_t)b.n, sizeof(int));
    double sum_len = 0;
    for (int k = 0; k < b.n; k++) {
        memcpy(lp + (size_t)k * T, b.logp[k], (size_t)b.len[k] * sizeof(float));
        memcpy(old + (size_t)k * T, b.old[k], (size_t)b.len[k] * sizeof(float));
        memcpy(mask + (size_t)k * T, b.env[k], (size_t)b.len[k]);
        sum_len += b.len[k];
    }
    kn_group_advantages(bk, adv, NULL, NULL, b.rewards, b.len, b.greedy, b.P, b.G, &oc);
    kn_token_weights(bk, wt, loss, NULL, coef, NULL, NULL, lp, old, NULL, mask, adv, start, b.len, b.n,
                     T, b.n, sum_len, &oc);
    double L = 0;
    for (int k = 0; k < b.n; k++)
        for (int t = 0; t < b.len[k]; t++) L += (double)coef[k] * loss[(size_t)k * T + t];
    printf("{\"preset\": \"%s\", \"l_max\": %d, \"loss\": %.9g,\n ", oc.preset, oc.l_max, L);
    print_array("advantages", adv, b.n, stdout);
    printf(",\n ");
    print_array("coef", coef, b.n, stdout);
    printf(",\n \"weights\": [");
    for (int k = 0; k < b.n; k++) {
        printf("%s\n  [", k ? "," : "");
        for (int t = 0; t < b.len[k]; t++) printf("%s%.9g", t ? ", " : "", (double)wt[(size_t)k * T + t]);
        printf("]");
    }
    printf("]}\n");
    free(adv);
    free(coef);
    free(lp);
    free(old);
    free(wt);
    free(loss);
    free(mask);
    free(start);
    backend_destroy(bk);
    batch_free(&b);
    config_free(c);
    return 0;
}
