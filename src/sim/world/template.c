// template.c: prompts, the verifier and the behaviour analysis (see template.h).
#include "template.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const TEMPLATE_NAMES[TEMPLATE_COUNT] = {"r1", "boxed", "none"};

int template_parse(const char *name, Template *out) {
    for (int t = 0; t < TEMPLATE_COUNT; t++)
        if (strcmp(name, TEMPLATE_NAMES[t]) == 0) {
            *out = (Template)t;
            return 0;
        }
    return -1;
}

const char *template_name(Template t) {
    return (int)t >= 0 && (int)t < TEMPLATE_COUNT ? TEMPLATE_NAMES[t] : "?";
}

int template_prompt(Template t, const Task *task, char *out, size_t cap) {
    int n;
    switch (t) {
    case TEMPLATE_R1: n = snprintf(out, cap, "User: %s\nAssistant: <think>", task->question); break;
    case TEMPLATE_BOXED: n = snprintf(out, cap, "answer in \\boxed{}.\n%s\n", task->question); break;
    default: n = snprintf(out, cap, "%s\n", task->question); break;
    }
    return (n < 0 || (size_t)n >= cap) ? -1 : n;
}

int template_stop_token(const Tokenizer *tk, Template t) {
    return t == TEMPLATE_R1 ? tok_id(tk, "</answer>") : -1;
}

// ---------------------------------------------------------------- numerals

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

int template_parse_numeral(const char *s, size_t n, int64_t *out) {
    size_t i = 0;
    while (n > 0 && is_ws(s[n - 1])) n--;
    while (i < n && is_ws(s[i])) i++;
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) {
        neg = s[i] == '-';
        i++;
        while (i < n && s[i] == ' ') i++;
    }
    int64_t v = 0;
    int any = 0, digits = 0;  // leading zeros do not count towards the 18-digit limit
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        any = 1;
        if (v == 0 && s[i] == '0') continue;
        if (++digits > 18) return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (!any) return -1;
    if (i < n && s[i] == '.') {  // "11." or "11.00": still an integer
        for (i++; i < n && s[i] == '0'; i++) {
        }
    }
    if (i != n) return -1;
    *out = neg ? -v : v;
    return 0;
}

// ---------------------------------------------------------------- answer extraction

typedef struct {
    const char *begin, *end;  // the numeral's text
    const char *after;        // first character after the construct
} Span;

static const char *find_last(const char *text, const char *needle) {
    const char *last = NULL;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) last = p;
    return last;
}

static int only_ws(const char *p) {
    for (; *p; p++)
        if (!is_ws(*p)) return 0;
    return 1;
}

// r1: the first "</think>", whitespace, "<answer>" ... "</answer>".
static int span_r1(const char *text, Span *sp) {
    const char *p = strstr(text, "</think>");
    if (!p) return 0;
    p += strlen("</think>");
    while (is_ws(*p)) p++;
    if (strncmp(p, "<answer>", 8) != 0) return 0;
    p += 8;
    const char *e = strstr(p, "</answer>");
    if (!e) return 0;
    sp->begin = p;
    sp->end = e;
    sp->after = e + strlen("</answer>");
    return 1;
}

static int span_last_answer_block(const char *text, Span *sp) {
    for (const char *p = find_last(text, "<answer>"); p;) {
        const char *e = strstr(p + 8, "</answer>");
        if (!e) {  // an unclosed last block: try the one before it
            const char *prev = NULL;
            for (const char *q = strstr(text, "<answer>"); q && q < p; q = strstr(q + 1, "<answer>"))
                prev = q;
            p = prev;
            continue;
        }
        sp->begin = p + 8;
        sp->end = e;
        sp->after = e + strlen("</answer>");
        return 1;
    }
    return 0;
}

static int span_last_boxed(const char *text, Span *sp) {
    const char *p = find_last(text, MARK_BOXED);
    if (!p) return 0;
    p += strlen(MARK_BOXED);
    const char *e = strchr(p, '}');
    if (!e) return 0;
    sp->begin = p;
    sp->end = e;
    sp->after = e + 1;
    return 1;
}

static int span_last_answer_line(const char *text, Span *sp) {
    const char *p = find_last(text, MARK_ANSWER);
    if (!p) return 0;
    p += strlen(MARK_ANSWER);
    const char *e = strchr(p, '\n');
    if (!e) e = p + strlen(p);
    sp->begin = p;
    sp->end = e;
    sp->after = e;
    return 1;
}

static int span_value(const Span *sp, int64_t *v) {
    return template_parse_numeral(sp->begin, (size_t)(sp->end - sp->begin), v) == 0;
}

// ---------------------------------------------------------------- the environment's verdict

// an integer of 1..15 digits with an optional leading '-' at *p; advances *p
static int parse_int(const char **p, const char *end, int64_t *out) {
    const char *q = *p;
    int neg = 0, digits = 0;
    if (q < end && *q == '-') {
        neg = 1;
        q++;
    }
    int64_t v = 0;
    while (q < end && *q >= '0' && *q <= '9') {
        if (++digits > 15) return -1;
        v = v * 10 + (*q++ - '0');
    }
    if (digits == 0) return -1;
    *out = neg ? -v : v;
    *p = q;
    return 0;
}

// "a op b=v" (b possibly "(-n)") exactly filling [s, end): 0 and its parts, or -1 if it is
// not a step
static int parse_step(const char *s, const char *end, int64_t *a, char *op, int64_t *b,
                      int64_t *v) {
    if (parse_int(&s, end, a) != 0 || s >= end || !strchr("+-*", *s)) return -1;
    *op = *s++;
    if (s < end && *s == '(') {
        s++;
        if (s >= end || *s != '-' || parse_int(&s, end, b) != 0 || s >= end || *s != ')') return -1;
        s++;
    } else if (s < end && *s == '-') {
        return -1;  // a negative right operand is written "(-n)"
    } else if (parse_int(&s, end, b) != 0) {
        return -1;
    }
    if (s >= end || *s++ != '=' || parse_int(&s, end, v) != 0 || s != end) return -1;
    return 0;
}

// a op b == v, for |a|, |b| < 1e15: a sum fits int64, a product may not (then no v of 15
// digits equals it)
static int step_true(int64_t a, char op, int64_t b, int64_t v) {
    int64_t abs_a = a < 0 ? -a : a;
    if (op == '*' && abs_a != 0 && (b > INT64_MAX / abs_a || b < -(INT64_MAX / abs_a))) return 0;
    int64_t r = op == '+' ? a + b : op == '-' ? a - b : a * b;
    return r == v;
}

// The step exactly filling [s, end): 1 if a op b == v, 0 if not, -1 if it is not a step
static int check_step(const char *s, const char *end) {
    int64_t a, b, v;
    char op;
    if (parse_step(s, end, &a, &op, &b, &v) != 0) return -1;
    return step_true(a, op, b, v);
}

const char *template_env_verdict_text(const char *text) {
    size_t n = strlen(text);
    if (n < 2 || text[n - 1] != ' ') return NULL;
    const char *end = text + n - 1, *c = NULL;
    for (const char *q = strstr(text, MARK_CHECK); q && q < end; q = strstr(q + 1, MARK_CHECK)) c = q;
    if (!c) return NULL;
    const char *e = c + strlen(MARK_CHECK);
    if (e >= end) return NULL;
    for (const char *q = e; q < end; q++)
        if (!strchr(STEP_CHARS, *q)) return NULL;
    if (!memchr(e, '=', (size_t)(end - e))) return NULL;  // the value is not written yet
    return check_step(e, end) == 1 ? MARK_OK + 1 : MARK_NO + 1;
}

int template_env_verdict(const int *tokens, int len, int *out, int cap) {
    // a clause is short: the last 64 tokens hold it (a longer tail is no step of the corpus)
    enum { TAIL = 64 };
    if (len < 1 || cap < 2) return 0;
    const Tokenizer *tk = tokenizer_default();
    const char *last = tok_str(tk, tokens[len - 1]);
    if (!last || strcmp(last, " ") != 0) return 0;
    int from = len > TAIL ? len - TAIL : 0;
    char text[TAIL * 16 + 1];
    if (tok_decode(tk, tokens + from, len - from, text, sizeof text) < 0) return 0;
    const char *verdict = template_env_verdict_text(text);
    if (!verdict) return 0;
    char one[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        one[0] = verdict[k];
        out[k] = tok_id(tk, one);
    }
    return 2;
}

// ---------------------------------------------------------------- behaviour

static void read_behaviour(const char *text, Verdict *v) {
    const char *first_no = NULL;
    const char *run_expr = NULL;  // the step of the current run of disagreements
    size_t run_len = 0;
    int run = 0;
    for (const char *c = strstr(text, MARK_CHECK); c; c = strstr(c + 1, MARK_CHECK)) {
        v->n_checks++;
        const char *e = c + strlen(MARK_CHECK), *q = e;
        while (*q && strchr(STEP_CHARS, *q)) q++;
        if (strncmp(q, MARK_NO, strlen(MARK_NO)) != 0) continue;
        v->n_disagreements++;
        if (!first_no) first_no = q;
        // the checked step "a op b" is the text before '='
        const char *eq = memchr(e, '=', (size_t)(q - e));
        size_t len = eq ? (size_t)(eq - e) : (size_t)(q - e);
        if (run_expr && len == run_len && strncmp(run_expr, e, len) == 0) run++;
        else run = 1;
        run_expr = e;
        run_len = len;
        if (run >= LOOP_MIN_DISAGREE) v->looped = 1;
    }
    v->self_checked = v->n_checks > 0;
    v->disagreement = v->n_disagreements > 0;
    if (first_no) {
        v->gave_up = strstr(first_no, MARK_GUESS) != NULL;
        v->recovered = strstr(first_no, MARK_REDO) != NULL && v->correct && !v->looped &&
                       !v->gave_up;
    }
}

void verify_response(Template t, const Task *task, const char *text, int stopped, Verdict *v) {
    memset(v, 0, sizeof *v);
    v->truncated = !stopped;
    Span sp;
    int64_t val = 0;
    switch (t) {
    case TEMPLATE_R1:
        if (span_r1(text, &sp) && span_value(&sp, &val)) {
            v->has_answer = 1;
            v->format_ok = only_ws(sp.after);
        }
        break;
    case TEMPLATE_BOXED:
        if (span_last_boxed(text, &sp) && span_value(&sp, &val)) v->has_answer = v->format_ok = 1;
        break;
    default:
        if (span_last_answer_line(text, &sp) && span_value(&sp, &val)) {
            v->has_answer = 1;
            v->format_ok = only_ws(sp.after);
        }
        break;
    }
    // lenient extraction for `correct` when the template's own construct gave no numeral
    if (!v->has_answer) {
        int (*const cascade[4])(const char *, Span *) = {span_r1, span_last_answer_block,
                                                         span_last_boxed, span_last_answer_line};
        for (int k = 0; k < 4 && !v->has_answer; k++)
            if (cascade[k](text, &sp) && span_value(&sp, &val)) v->has_answer = 1;
    }
    v->answer = v->has_answer ? val : 0;
    v->correct = v->has_answer && val == task->answer;
    v->reward = stopped && v->format_ok && v->correct;
    read_behaviour(text, v);
}

// ---------------------------------------------------------------- the reward rule

int reward_rule_parse(const char *name, RewardRule *out) {
    static const char *const names[] = {"outcome", "disagreement_fails", "false_step_fails",
                                        "first_redo_forgives"};
    for (int k = 0; k < (int)(sizeof names / sizeof names[0]); k++)
        if (strcmp(name, names[k]) == 0) {
            *out = (RewardRule)k;
            return 0;
        }
    return -1;
}

// 1 if [s - strlen(mark), s) within text is `mark`
static int preceded_by(const char *text, const char *s, const char *mark) {
    size_t n = strlen(mark);
    return (size_t)(s - text) >= n && strncmp(s - n, mark, n) == 0;
}

// The value's end for the clause whose '=' is at q: an optional '-' and the digits.
static const char *value_end(const char *q) {
    const char *e = q + 1;
    if (*e == '-') e++;
    while (*e >= '0' && *e <= '9') e++;
    return e;
}

// p past ". <mark>" if the text at p is that, else NULL
static const char *after_clause_mark(const char *p, const char *mark) {
    size_t n = strlen(mark);
    return strncmp(p, ". ", 2) == 0 && strncmp(p + 2, mark, n) == 0 ? p + 2 + n : NULL;
}

// 1 if the false step [s, e) (its '=' at q) is followed at once by ". check <same a op b>=...
// no." (once or more: re-checks) and ". redo <same a op b>=<right value>": refuted and
// redone right at the first try
static int redone_right_at_once(const char *s, const char *q, const char *e) {
    const size_t lhs = (size_t)(q - s) + 1;  // "a op b=", the '=' included
    const char *p = e, *c;
    int checks = 0;
    for (; (c = after_clause_mark(p, MARK_CHECK)); checks++) {
        if (strncmp(c, s, lhs) != 0) return 0;
        while (*c && strchr(STEP_CHARS, *c)) c++;
        if (strncmp(c, MARK_NO, strlen(MARK_NO)) != 0) return 0;
        p = c + strlen(MARK_NO);
    }
    const char *r = checks ? after_clause_mark(p, MARK_REDO) : NULL;
    return r && strncmp(r, s, lhs) == 0 && check_step(r, value_end(r + lhs - 1)) == 1;
}

// 1 if the response has a false step (a clause "a op b=v" outside a check that is wrong or
// does not parse), not counting, when forgive_first_redo, first passes redone right at once
static int has_bad_step(const char *text, int forgive_first_redo) {
    static const char *const OPERAND = "0123456789+-*()";
    for (const char *q = strchr(text, '='); q; q = strchr(q + 1, '=')) {
        const char *s = q, *e = value_end(q);
        while (s > text && strchr(OPERAND, s[-1])) s--;
        if (preceded_by(text, s, MARK_CHECK) || check_step(s, e) == 1) continue;
        // a redo gets no second chance; a first pass does if its first redo is right
        if (!forgive_first_redo || preceded_by(text, s, MARK_REDO) || !redone_right_at_once(s, q, e))
            return 1;
    }
    return 0;
}

int template_has_false_step(const char *text) { return has_bad_step(text, 0); }

int template_has_unforgiven_step(const char *text) { return has_bad_step(text, 1); }

void verdict_apply_rule(Verdict *v, const char *text, RewardRule rule) {
    if (rule == REWARD_DISAGREEMENT_FAILS && v->disagreement) v->reward = 0;
    if (rule == REWARD_FALSE_STEP_FAILS && v->reward && template_has_false_step(text)) v->reward = 0;
    if (rule == REWARD_FIRST_REDO_FORGIVES && v->reward && template_has_unforgiven_step(text))
        v->reward = 0;
}

// ---------------------------------------------------------------- step clauses, failure kinds

int template_step_clauses(const char *text, StepClause *out, int cap) {
    static const char *const OPERAND = "0123456789+-*()";
    int n = 0;
    for (const char *q = strchr(text, '='); q && n < cap; q = strchr(q + 1, '=')) {
        const char *s = q, *e = value_end(q);
        while (s > text && strchr(OPERAND, s[-1])) s--;
        StepClause c;
        if (parse_step(s, e, &c.a, &c.op, &c.b, &c.v) != 0) continue;
        c.right = step_true(c.a, c.op, c.b, c.v);
        c.kind = preceded_by(text, s, MARK_CHECK) ? CLAUSE_CHECK
                 : preceded_by(text, s, MARK_REDO) ? CLAUSE_REDO
                                                   : CLAUSE_STEP;
        c.verdict = -1;
        if (c.kind == CLAUSE_CHECK) {
            if (strncmp(e, MARK_OK, strlen(MARK_OK)) == 0) c.verdict = 1;
            else if (strncmp(e, MARK_NO, strlen(MARK_NO)) == 0) c.verdict = 0;
        }
        out[n++] = c;
    }
    return n;
}

#define FAILURE_MAX_CLAUSES 256

void template_failure_kind(const char *text, int reward, const WorldGaps *gaps, FailureKind *fk) {
    memset(fk, 0, sizeof *fk);
    StepClause c[FAILURE_MAX_CLAUSES];
    int n = template_step_clauses(text, c, FAILURE_MAX_CLAUSES);
    fk->kind = reward ? FAIL_NONE : FAIL_OTHER;
    for (int i = 0; i < n && !reward; i++) {
        if (c[i].kind == CLAUSE_CHECK || c[i].right) continue;
        fk->kind = world_gap(gaps, c[i].op, c[i].a, c[i].b, NULL) ? FAIL_GAP : FAIL_SLIP;
        break;
    }
    // every disagreement with a false step, and the redo of the same step that follows it
    // (re-checks of that step in between)
    for (int i = 0; i < n; i++) {
        if (c[i].kind != CLAUSE_CHECK || c[i].verdict != 0 || c[i].right) continue;
        int j = i + 1;
        while (j < n && c[j].kind == CLAUSE_CHECK && c[j].op == c[i].op && c[j].a == c[i].a &&
               c[j].b == c[i].b)
            j++;
        int gap = world_gap(gaps, c[i].op, c[i].a, c[i].b, NULL);
        fk->disagree[gap]++;
        if (j < n && c[j].kind == CLAUSE_REDO && c[j].op == c[i].op && c[j].a == c[i].a &&
            c[j].b == c[i].b) {
            fk->redos[gap]++;
            fk->redos_right[gap] += c[j].right;
            fk->redos_same[gap] += c[j].v == c[i].v;
        }
        i = j - 1;  // the re-checks belong to this disagreement
    }
}
