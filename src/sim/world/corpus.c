// corpus.c: the pretraining document generator (see corpus.h).
#include "corpus.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common.h"

enum {
    PURPOSE_CORPUS_TASK = WORLD_PURPOSE_USER,       // the question (world_level_task)
    PURPOSE_CORPUS_LEVEL = WORLD_PURPOSE_USER + 1,  // the question's level
    PURPOSE_CORPUS_DOC = WORLD_PURPOSE_USER + 2,    // format and behaviour draws
    PURPOSE_CORPUS_KIND = WORLD_PURPOSE_USER + 3,   // math, general or question-answer
    PURPOSE_CORPUS_TEXT = WORLD_PURPOSE_USER + 4,   // a general document's words
    PURPOSE_CORPUS_LEXICON = WORLD_PURPOSE_USER + 5,  // the made-up words of general text
};

#define MAX_STEPS 16
#define MAX_LOOP_CYCLES 30
#define DRAFT_CAP 8192
#define MAX_DRAFTS 50

CorpusParams corpus_params_default(void) {
    CorpusParams p = {
        .p_template_r1 = 0.30,
        .p_template_boxed = 0.15,
        .p_r1_off_format = 0.30,
        .p_restate = 0.20,
        .p_check_step = 0.20,
        .p_check_step_r1 = 0.60,
        .check_add_factor = 1.0,
        .p_error_by_level = {0.02, 0.05, 0.08, 0.12, 0.16},
        .error_hard_factor = 2.0,
        .error_easy_factor = 0.5,
        .p_check_miss = 0.10,
        .p_false_alarm = 0.02,
        .p_recover = 0.60,
        .p_loop = 0.25,
        .p_give_up = 0.15,
        .loop_continue_p = 0.70,
        .loop_continue_spread = 0.0,
        .p_loop_restart = 0.30,
        .loop_min_cycles = LOOP_MIN_DISAGREE - 1,
        .loop_max_cycles = 0,
        .p_loop_repeat = 0.0,
        .p_loop_give_up = 0.0,
        .p_recheck = 0.0,
        .gap_share = 0.0,
        .p_gap_right = 0.0,
        .p_gap_doubt = 0.0,
        .gap_seed = 2025,
        .level_weights = {1, 1, 1, 1, 1},
        .max_doc_tokens = 256,
    };
    return p;
}

static int check_prob(const char *name, double v, double hi, char *err, size_t errlen) {
    if (!(v >= 0.0 && v <= hi))
        return set_err(err, errlen, "corpus: %s = %g out of range (allowed: [0, %g])", name, v, hi);
    return 0;
}

int corpus_params_validate(const CorpusParams *p, char *err, size_t errlen) {
    struct {
        const char *name;
        double v, hi;
    } probs[] = {
        {"p_template_r1", p->p_template_r1, 1},     {"p_template_boxed", p->p_template_boxed, 1},
        {"p_r1_off_format", p->p_r1_off_format, 1}, {"p_restate", p->p_restate, 1},
        {"p_check_step", p->p_check_step, 1},       {"p_check_step_r1", p->p_check_step_r1, 1},
        {"p_check_miss", p->p_check_miss, 1},       {"p_false_alarm", p->p_false_alarm, 1},
        {"p_recover", p->p_recover, 1},             {"p_loop", p->p_loop, 1},
        {"p_give_up", p->p_give_up, 1},             {"loop_continue_p", p->loop_continue_p, 0.95},
        {"p_loop_restart", p->p_loop_restart, 1},   {"error_hard_factor", p->error_hard_factor, 10},
        {"error_easy_factor", p->error_easy_factor, 10},
        {"p_loop_repeat", p->p_loop_repeat, 1},     {"p_loop_give_up", p->p_loop_give_up, 1},
        {"p_recheck", p->p_recheck, 0.95},
        {"gap_share", p->gap_share, 1},             {"p_gap_right", p->p_gap_right, 1},
        {"p_gap_doubt", p->p_gap_doubt, 1},         {"loop_continue_spread", p->loop_continue_spread, 8},
        {"check_add_factor", p->check_add_factor, 1},
        {"general_share", p->general_share, 1},     {"qa_share", p->qa_share, 1},
    };
    for (size_t i = 0; i < sizeof probs / sizeof probs[0]; i++)
        if (check_prob(probs[i].name, probs[i].v, probs[i].hi, err, errlen)) return -1;
    char name[64];
    double wsum = 0;
    for (int l = 0; l < WORLD_NUM_LEVELS; l++) {
        snprintf(name, sizeof name, "p_error_by_level[%d]", l + 1);
        if (check_prob(name, p->p_error_by_level[l], 1, err, errlen)) return -1;
        snprintf(name, sizeof name, "level_weights[%d]", l + 1);
        if (check_prob(name, p->level_weights[l], 1e9, err, errlen)) return -1;
        wsum += p->level_weights[l];
    }
    if (!(wsum > 0)) return set_err(err, errlen, "corpus: level_weights are all zero");
    if (p->general_share + p->qa_share > 1.0 + 1e-12)
        return set_err(err, errlen, "corpus: general_share + qa_share = %g exceeds 1",
                       p->general_share + p->qa_share);
    if (p->p_template_r1 + p->p_template_boxed > 1.0 + 1e-12)
        return set_err(err, errlen, "corpus: p_template_r1 + p_template_boxed = %g exceeds 1",
                       p->p_template_r1 + p->p_template_boxed);
    if (!(p->p_recover + p->p_loop + p->p_give_up > 0))
        return set_err(err, errlen, "corpus: p_recover + p_loop + p_give_up must be > 0");
    if (p->loop_min_cycles < 1 || p->loop_min_cycles > 16)
        return set_err(err, errlen, "corpus: loop_min_cycles = %d out of range (allowed: [1, 16])",
                       p->loop_min_cycles);
    if (p->loop_max_cycles != 0 &&
        (p->loop_max_cycles < p->loop_min_cycles || p->loop_max_cycles > MAX_LOOP_CYCLES))
        return set_err(err, errlen,
                       "corpus: loop_max_cycles = %d out of range (allowed: 0, or [loop_min_cycles = %d, %d])",
                       p->loop_max_cycles, p->loop_min_cycles, MAX_LOOP_CYCLES);
    if (p->max_doc_tokens < 96 || p->max_doc_tokens > 1024)
        return set_err(err, errlen, "corpus: max_doc_tokens = %d out of range (allowed: [96, 1024])",
                       p->max_doc_tokens);
    return 0;
}

// ---------------------------------------------------------------- text building

typedef struct {
    char *s;
    size_t len, cap;
    int overflow;
} BoundedText;

GL_PRINTF(2, 3) static void put(BoundedText *b, const char *fmt, ...) {
    if (b->overflow) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= b->cap - b->len) {
        b->overflow = 1;
        b->s[b->len] = '\0';
        return;
    }
    b->len += (size_t)n;
}

typedef struct {
    BoundedText *buf;
    Template format;
    int items;  // reasoning items written so far
} Writer;

// Items of the reasoning are separated by one space; r1's reasoning starts with one too.
static void sep(Writer *w) {
    if (w->items++ > 0 || w->format == TEMPLATE_R1) put(w->buf, " ");
}

// "<prefix>a op b=v<suffix>", a negative right operand in parentheses.
static void put_step(Writer *w, const char *prefix, int64_t a, char op, int64_t b, int64_t v,
                     const char *suffix) {
    sep(w);
    if (b < 0)
        put(w->buf, "%s%lld%c(%lld)=%lld%s", prefix, (long long)a, op, (long long)b, (long long)v,
            suffix);
    else
        put(w->buf, "%s%lld%c%lld=%lld%s", prefix, (long long)a, op, (long long)b, (long long)v,
            suffix);
}

// ---------------------------------------------------------------- behaviour helpers

static int64_t apply(char op, int64_t a, int64_t b) {
    return op == '+' ? a + b : op == '-' ? a - b : a * b;
}

static int64_t iabs(int64_t v) { return v < 0 ? -v : v; }

// A plausible wrong result: off by one or two, a carry slip of ten, or a digit slip
// (a digit changed, or two neighbours swapped). Never equal to v.
static int64_t wrong_value(WorldRng *r, int64_t v) {
    int64_t a = iabs(v);
    for (int tries = 0; tries < 16; tries++) {
        double u = world_rng_u01(r);
        int64_t w;
        if (u < 0.45 || a < 10) {
            int d = world_rng_int(r, 1, a < 10 ? 3 : 2);
            w = v + (world_rng_int(r, 0, 1) ? d : -d);
        } else if (u < 0.65) {
            w = v + (world_rng_int(r, 0, 1) ? 10 : -10);
        } else {
            char s[24];
            int n = snprintf(s, sizeof s, "%lld", (long long)a);
            if (u < 0.8) {
                int i = world_rng_int(r, 0, n - 2);
                char t = s[i];
                s[i] = s[i + 1];
                s[i + 1] = t;
                if (s[0] == '0') continue;
            } else {
                int i = world_rng_int(r, 0, n - 1);
                s[i] = (char)('0' + world_rng_int(r, i == 0 ? 1 : 0, 9));
            }
            w = strtoll(s, NULL, 10) * (v < 0 ? -1 : 1);
        }
        if (w != v && iabs(w) <= 99999) return w;
    }
    return v + 1;
}

// Draws from the geometric distribution: the number of further successes at probability q.
static int geometric(WorldRng *r, double q, int cap) {
    int k = 0;
    while (k < cap && world_rng_u01(r) < q) k++;
    return k;
}

// The probability that a loop at the step a op b writes one more attempt: loop_continue_p,
// moved in logit by the fact's stubbornness (world_stubbornness) times loop_continue_spread,
// and at most 0.95. Without spread it is loop_continue_p exactly (the default corpus).
double corpus_loop_continue(const CorpusParams *p, char op, int64_t a, int64_t b) {
    if (!(p->loop_continue_spread > 0)) return p->loop_continue_p;
    double q = p->loop_continue_p;
    if (!(q > 0)) return 0;
    double z = log(q / (1 - q)) + p->loop_continue_spread * world_stubbornness(p->gap_seed, op, a, b);
    q = 1 / (1 + exp(-z));
    return q < 0.95 ? q : 0.95;
}

// ---------------------------------------------------------------- one draft

typedef struct {
    int64_t a, b, v;
    char op;
} Written;

// A give-up: "guess N." with a wrong number, which becomes the document's final answer.
static int64_t write_guess(Writer *w, WorldRng *r, const Task *task) {
    int64_t g = wrong_value(r, task->answer);
    sep(w);
    put(w->buf, "%s%lld.", MARK_GUESS, (long long)g);
    return g;
}

// Loop attempts and re-checks past the context are not written, the document is cut there
// (tags are the only multi-character tokens, and before the ending a draft holds at most
// one: tokens > characters - 8).
static int past_context(const BoundedText *b, const CorpusParams *p) {
    return b->len >= (size_t)p->max_doc_tokens + 256;
}

// Writes the response of one draft into b; fills the behaviour counters of info.
static void write_response(const CorpusParams *p, WorldRng *r, const Task *task, Template fmt,
                           int off_style, BoundedText *b, DocInfo *info) {
    WorldStep st[MAX_STEPS];
    int n = world_steps(task->question, st, MAX_STEPS);
    if (n < 1) die("corpus: cannot parse question '%s'", task->question);
    Writer w = {b, fmt, 0};
    Written wr[MAX_STEPS];
    double pc = fmt == TEMPLATE_R1 ? p->p_check_step_r1 : p->p_check_step;
    double branch_w[3] = {p->p_recover, p->p_loop, p->p_give_up};
    WorldGaps gaps = {p->gap_share, p->gap_seed};
    info->n_steps = n;

    if (world_rng_u01(r) < p->p_restate) {
        sep(&w);
        put(b, "%s%s.", MARK_RESTATE, task->question);
    }
    int64_t final = 0;
    int final_set = 0;
    for (int k = 0; k < n && !final_set; k++) {
        char op = st[k].op;
        int64_t a = st[k].a_step < 0 ? st[k].a : wr[st[k].a_step].v;
        int64_t bb = st[k].b_step < 0 ? st[k].b : wr[st[k].b_step].v;
        int64_t truth = apply(op, a, bb);
        double pe = p->p_error_by_level[task->level - 1];
        if (op == '*' && iabs(a) >= 10 && iabs(bb) >= 10) pe *= p->error_hard_factor;
        else if (iabs(a) < 10 && iabs(bb) < 10) pe *= p->error_easy_factor;
        if (pe > 0.95) pe = 0.95;
        int64_t v = truth, believed = truth;
        // a gap fact replaces the random slip: the believed value, the same every time (its
        // draws are skipped without gaps, so the default corpus is unchanged)
        int gap = world_gap(&gaps, op, a, bb, &believed);
        if (gap) {
            info->n_gap_steps++;
            if (!(p->p_gap_right > 0 && world_rng_u01(r) < p->p_gap_right)) {
                v = believed;
                info->n_errors++;
                info->n_gap_errors++;
            }
        } else {
            info->err_expect += pe;
            if (world_rng_u01(r) < pe) {
                v = wrong_value(r, truth);
                info->n_errors++;
            }
        }
        put_step(&w, "", a, op, bb, v, ".");
        // the draw is the same as without the factor, so a factor of 1 changes no document; by
        // fact, the coin is drawn and not used, so the rest of the document keeps its draws
        double check_u = world_rng_u01(r);
        if (p->check_by_fact) check_u = world_check_draw(p->gap_seed, op, a, bb);
        if (check_u < (op == '*' ? pc : pc * p->check_add_factor)) {
            info->n_checks++;
            info->n_step_checks++;
            info->n_checked_wrong += v != truth;
            int says_no;
            if (gap && v == believed) {  // the writer believes it: ok unless in doubt
                says_no = world_rng_u01(r) < p->p_gap_doubt;
                info->n_missed += !says_no;
            } else if (v != truth) {
                says_no = !(world_rng_u01(r) < p->p_check_miss);
                info->n_missed += !says_no;
            } else {
                says_no = world_rng_u01(r) < p->p_false_alarm;
                info->n_false_alarms += says_no;
            }
            put_step(&w, MARK_CHECK, a, op, bb, v, says_no ? MARK_NO "." : MARK_OK ".");
            if (says_no) {
                info->n_disagree++;
                // re-checks of the same step that disagree again (a copy of the clause: no
                // new value, so they cannot recover); drawn only when the knob is set, so
                // the default corpus is unchanged
                int run = 1;
                if (p->p_recheck > 0) {
                    int k = geometric(r, p->p_recheck, MAX_LOOP_CYCLES);
                    for (int c = 0; c < k && !past_context(b, p); c++) {
                        put_step(&w, MARK_CHECK, a, op, bb, v, MARK_NO ".");
                        info->n_checks++;
                        info->n_disagree++;
                    }
                    info->rechecks += k;
                    run += k;
                }
                int branch = world_rng_pick(r, branch_w, 3);
                if (branch == 0) {  // recover (a gap fact is redone as believed, wrong)
                    info->n_recover++;
                    v = believed;
                    put_step(&w, MARK_REDO, a, op, bb, v, ".");
                } else if (branch == 1) {  // loop
                    info->n_loop++;
                    int extra = p->loop_max_cycles ? p->loop_max_cycles - p->loop_min_cycles
                                                   : MAX_LOOP_CYCLES;
                    int cycles = p->loop_min_cycles + geometric(r, corpus_loop_continue(p, op, a, bb), extra);
                    info->loop_cycles += cycles;
                    // a repeating loop writes the checked wrong value again in every attempt
                    // (a wrong value if the check was a false alarm); the draws are skipped
                    // when the knob is 0, so the default corpus is unchanged
                    int repeat = p->p_loop_repeat > 0 && world_rng_u01(r) < p->p_loop_repeat;
                    int64_t v_rep = v;
                    if (repeat && v == truth) v_rep = wrong_value(r, truth);
                    if (gap) {  // every attempt at a gap fact writes the believed value
                        repeat = 1;
                        v_rep = believed;
                    }
                    info->loop_repeats += repeat;
                    run += cycles;
                    for (int c = 0; c < cycles && !past_context(b, p); c++) {
                        v = repeat ? v_rep : wrong_value(r, truth);
                        if (world_rng_u01(r) < p->p_loop_restart) {
                            sep(&w);
                            put(b, "%s", MARK_RESTART);
                            for (int j = 0; j < k; j++)
                                put_step(&w, "", wr[j].a, wr[j].op, wr[j].b, wr[j].v, ".");
                            put_step(&w, "", a, op, bb, v, ".");
                        } else {
                            put_step(&w, MARK_REDO, a, op, bb, v, ".");
                        }
                        put_step(&w, MARK_CHECK, a, op, bb, v, MARK_NO ".");
                        info->n_checks++;
                        info->n_disagree++;
                    }
                    if (p->p_loop_give_up > 0 && world_rng_u01(r) < p->p_loop_give_up) {
                        info->loop_give_ups++;
                        final = write_guess(&w, r, task);
                        final_set = 1;
                    }
                } else {  // give up
                    info->n_give_up++;
                    final = write_guess(&w, r, task);
                    final_set = 1;
                }
                // the verifier flags a loop from LOOP_MIN_DISAGREE disagreements of one step
                // in a row (re-checks and loop attempts)
                if (run >= LOOP_MIN_DISAGREE) info->n_loop_flagged++;
            }
        }
        wr[k] = (Written){a, bb, v, op};
    }
    if (!final_set) final = wr[n - 1].v;

    // the ending of the format
    long long f = (long long)final;
    if (fmt == TEMPLATE_R1 && off_style == 0) put(b, " </think> <answer> %lld </answer>", f);
    else if (fmt == TEMPLATE_BOXED || (fmt == TEMPLATE_R1 && off_style == 2))
        put(b, "\n%s%lld}", MARK_BOXED, f);
    else if (fmt == TEMPLATE_R1 && off_style == 3) put(b, " </think> %s %lld", MARK_ANSWER, f);
    else put(b, "\n%s %lld", MARK_ANSWER, f);
    info->correct = final == task->answer;
}

// ---------------------------------------------------------------- general documents

#define LEXICON_SIZE 600
#define LEXICON_SEED 20250321u  // the made-up language is the same in every world

// Word w of the lexicon: one to three syllables of a consonant, a vowel and now and then a
// closing consonant, so that no word is a digit, an operator or a tag.
static void lexicon_word(int w, char *out) {
    static const char cons[] = "bcdfghjklmnprstvwz", vow[] = "aeiou";
    WorldRng r = world_rng(LEXICON_SEED, PURPOSE_CORPUS_LEXICON, w);
    int syl = 1 + world_rng_pick(&r, (const double[]){0.3, 0.5, 0.2}, 3), n = 0;
    for (int k = 0; k < syl; k++) {
        out[n++] = cons[world_rng_int(&r, 0, (int)sizeof cons - 2)];
        out[n++] = vow[world_rng_int(&r, 0, (int)sizeof vow - 2)];
        if (world_rng_u01(&r) < 0.3) out[n++] = cons[world_rng_int(&r, 0, (int)sizeof cons - 2)];
    }
    out[n] = '\0';
}

int corpus_general_text(uint64_t seed, int64_t index, int max_tokens, char *out, size_t cap) {
    WorldRng r = world_rng(seed, PURPOSE_CORPUS_TEXT, index);
    int target = world_rng_int(&r, GENERAL_MIN_TOKENS, GENERAL_MAX_TOKENS);
    if (target > max_tokens - 1) target = max_tokens - 1;  // one token for <eos>
    BoundedText b = {out, 0, cap, 0};
    if (cap) out[0] = '\0';
    int words = 0;  // in the sentence
    for (;;) {
        // a word (frequent words are short: the index is Zipf-like)
        char word[16];
        double u = world_rng_u01(&r);
        lexicon_word((int)(LEXICON_SIZE * u * u * u), word);
        int len = (int)strlen(word);
        // every character is one token; the word, its separator and an ending must fit
        if ((int)b.len + len + 2 > target) break;
        put(&b, "%s%s", words ? " " : "", word);
        words++;
        double v = world_rng_u01(&r);
        if (words >= 4 && v < 0.15) {  // the sentence ends
            put(&b, "%s", world_rng_u01(&r) < 0.15 ? "?" : ".");
            put(&b, "%s", world_rng_u01(&r) < 0.2 ? "\n" : " ");
            words = 0;
        } else if (words >= 2 && v < 0.22) {
            put(&b, ",");
        }
    }
    // end on a full stop, then <eos>
    while (b.len > 0 && (out[b.len - 1] == ' ' || out[b.len - 1] == '\n' || out[b.len - 1] == ',')) b.len--;
    if (b.len == 0 || (out[b.len - 1] != '.' && out[b.len - 1] != '?')) {
        if (cap > b.len) out[b.len] = '\0';
        put(&b, ".");
    }
    if (cap > b.len) out[b.len] = '\0';
    put(&b, "<eos>");
    return b.overflow ? -1 : (int)b.len;
}

DocKind corpus_doc_kind(const CorpusParams *p, uint64_t seed, int64_t index) {
    if (!(p->general_share > 0) && !(p->qa_share > 0)) return DOC_MATH;  // no draw: the default corpus
    WorldRng r = world_rng(seed, PURPOSE_CORPUS_KIND, index);
    double u = world_rng_u01(&r);
    return u < p->general_share ? DOC_GENERAL : u < p->general_share + p->qa_share ? DOC_QA : DOC_MATH;
}

// ---------------------------------------------------------------- documents

static int doc_level(const CorpusParams *p, uint64_t seed, int64_t index) {
    WorldRng r = world_rng(seed, PURPOSE_CORPUS_LEVEL, index);
    return 1 + world_rng_pick(&r, p->level_weights, WORLD_NUM_LEVELS);
}

void corpus_task(const CorpusParams *p, uint64_t seed, int64_t index, Task *out) {
    world_level_task(seed, PURPOSE_CORPUS_TASK, index, doc_level(p, seed, index), out);
}

int corpus_document(const CorpusParams *p, uint64_t seed, int64_t index, char *out, size_t cap,
                    DocInfo *info_out) {
    const Tokenizer *tk = tokenizer_default();
    DocKind kind = corpus_doc_kind(p, seed, index);
    if (kind == DOC_GENERAL) {
        int len = corpus_general_text(seed, index, p->max_doc_tokens, out, cap);
        if (len < 0) return -1;
        if (info_out) {
            memset(info_out, 0, sizeof *info_out);
            info_out->kind = DOC_GENERAL;
            info_out->format = TEMPLATE_NONE;
            int ids[DRAFT_CAP];  // one token per character, <eos> one
            char err[128];
            info_out->length_tokens = tok_encode(tk, out, ids, DRAFT_CAP, err, sizeof err);
            if (info_out->length_tokens < 0) die("corpus: general document %lld: %s", (long long)index, err);
            info_out->response_tokens = info_out->length_tokens;
        }
        return len;
    }
    // a question-answer document: the same draws, with the writer's behaviour switched off
    CorpusParams qa;
    if (kind == DOC_QA) {
        qa = *p;
        qa.p_restate = qa.p_check_step = qa.p_check_step_r1 = qa.p_r1_off_format = 0;
        qa.gap_share = 0;
        for (int l = 0; l < WORLD_NUM_LEVELS; l++) qa.p_error_by_level[l] = 0;
        p = &qa;
    }
    Task task;
    corpus_task(p, seed, index, &task);
    WorldRng r = world_rng(seed, PURPOSE_CORPUS_DOC, index);
    double fw[3] = {p->p_template_r1, p->p_template_boxed,
                    1.0 - p->p_template_r1 - p->p_template_boxed};
    Template fmt = (Template)world_rng_pick(&r, fw, 3);  // enum order: r1, boxed, none
    int off_style = 0;  // r1: 0 tags; off-format: 1 plain ending, 2 boxed, 3 "</think> answer:"
    if (fmt == TEMPLATE_R1 && world_rng_u01(&r) < p->p_r1_off_format) {
        static const double style_w[3] = {0.5, 0.25, 0.25};
        off_style = 1 + world_rng_pick(&r, style_w, 3);
    }

    static _Thread_local char draft[DRAFT_CAP];
    static _Thread_local int ids[DRAFT_CAP];
    DocInfo info;
    int n_tok = 0, prompt_len = 0;
    for (int attempt = 0;; attempt++) {
        memset(&info, 0, sizeof info);
        info.kind = kind;
        info.level = task.level;
        info.format = fmt;
        info.off_format = off_style != 0;
        info.retries = attempt;
        BoundedText b = {draft, 0, sizeof draft, 0};
        prompt_len = template_prompt(fmt, &task, draft, sizeof draft);
        if (prompt_len < 0) die("corpus: prompt does not fit");
        b.len = (size_t)prompt_len;
        write_response(p, &r, &task, fmt, off_style, &b, &info);
        put(&b, "<eos>");
        if (b.overflow) die("corpus: document %lld overflows the draft buffer", (long long)index);
        char err[128];
        n_tok = tok_encode(tk, draft, ids, DRAFT_CAP, err, sizeof err);
        if (n_tok < 0) die("corpus: document %lld: %s", (long long)index, err);
        // over-long drafts that do not loop are redrawn (same task and format)
        if (n_tok <= p->max_doc_tokens || info.n_loop > 0 || info.n_loop_flagged > 0 ||
            attempt + 1 >= MAX_DRAFTS)
            break;
    }
    info.prompt_chars = prompt_len;
    int len;
    if (n_tok > p->max_doc_tokens) {  // cut at the context (a loop, or a draft that never fit)
        len = tok_decode(tk, ids, p->max_doc_tokens, out, cap);
        if (len < 0) return -1;
        info.truncated = 1;
        info.correct = 0;
        n_tok = p->max_doc_tokens;
    } else {
        len = (int)strlen(draft);
        if ((size_t)len + 1 > cap) return -1;
        memcpy(out, draft, (size_t)len + 1);
    }
    char perr[96];
    int pids[WORLD_QUESTION_CAP + 64];
    draft[prompt_len] = '\0';
    info.prompt_tokens = tok_encode(tk, draft, pids, WORLD_QUESTION_CAP + 64, perr, sizeof perr);
    if (info.prompt_tokens < 0) die("corpus: prompt of document %lld: %s", (long long)index, perr);
    info.length_tokens = n_tok;
    info.response_tokens = n_tok - info.prompt_tokens;
    info.has_error = info.n_errors > 0;
    info.self_checked = info.n_checks > 0;
    info.disagreement = info.n_disagree > 0;
    info.looped = info.n_loop_flagged > 0;
    info.gave_up = info.n_give_up > 0 || info.loop_give_ups > 0;
    info.recovered = info.n_recover > 0 && info.correct && !info.looped && !info.gave_up;
    if (info_out) *info_out = info;
    return len;
}
