// corpus.h: the pretraining corpus, question / reasoning / answer documents that behave like
// a base model's writing, self-reflection included (docs/corpus.md has samples).
//
// A document is the prompt of its format (exactly template_prompt()), the response, and
// "<eos>", as text. The reasoning evaluates the question one binary operation per step in
// precedence order ("4*2=8. 3+8=11."), optionally restated first ("find 3+4*2."). Each step
// is written wrong with a probability that rises with the level and the operand size; an
// unchecked wrong step stays silent and propagates. A step is re-checked with probability
// p_check_step (p_check_step_r1 in r1 documents): "check 4*2=8 ok."; a check of a wrong step
// disagrees ("check 4*2=9 no.") unless it misses, and a check of a right step says ok unless
// it raises a false alarm. From a disagreement the document goes on one of three ways:
//   recover  "redo 4*2=8." and continues (correct unless a later step errs silently);
//   loop     loop_min_cycles (default LOOP_MIN_DISAGREE-1) or more further wrong attempts
//            ("redo 4*2=7. check 4*2=7 no." or "restart." and the steps again), one more
//            each time with probability loop_continue_p (spread over the digit facts by
//            loop_continue_spread: some facts are retried longer), then goes on with the last wrong
//            value, or with p_loop_give_up gives up ("guess 12."); with p_loop_repeat every
//            attempt repeats the checked wrong value (a literal repetition, as a language
//            model's loops are). Loops often run past the budget, where the document is cut
//            at max_doc_tokens without <eos>;
//   give up  "guess 12." with a wrong number, and ends.
// With p_recheck, the disagreement is first followed by Geometric(p_recheck) re-checks of the
// same step that disagree again ("check 4*2=9 no. check 4*2=9 no."): a copy, no new value.
// Knowledge gaps (gap_share > 0): besides these random slips, the writer believes a fixed
// table of digit facts wrong (world_gap, fixed by gap_seed). A step that uses a gap fact is
// written with the believed value every time (a first pass right only with p_gap_right), a
// check of it says ok unless the writer doubts it (p_gap_doubt), and every redo or loop
// attempt after a disagreement writes the believed value again: a gap cannot be retried away.
// Every probability is a knob of CorpusParams. Draws are Philox at (seed, purpose, index):
// the task of document i depends only on (seed, i, its level), the behaviour draws on a
// separate stream.
#ifndef GRPOLAB_CORPUS_H
#define GRPOLAB_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "template.h"

typedef struct {
    double p_template_r1;     // share of documents in the r1 format
    double p_template_boxed;  // share in the boxed format; the rest is the plain (none) format
    double p_r1_off_format;   // r1-prompted documents that end in another format (no tags)
    double p_restate;         // the reasoning starts by restating the question
    double p_check_step;      // per step, plain and boxed documents
    double p_check_step_r1;   // per step, r1 documents (the r1 writer checks more)
    double check_add_factor;  // x the check probability of a + or - step (0: the writer
                              // checks only its multiplications)
    int check_by_fact;        // 1: whether a step is checked is the fact's, not a coin's: the
                              // writer checks a op b iff world_check_draw() is below the
                              // step's check probability, every time (0: a coin per step)
    double p_error_by_level[WORLD_NUM_LEVELS];  // per step, by the question's level
    double error_hard_factor;  // x error probability: multiplication of two numbers >= 10
    double error_easy_factor;  // x error probability: both operands one digit
    double p_check_miss;       // a check of a wrong step says ok
    double p_false_alarm;      // a check of a right step says no
    double p_recover, p_loop, p_give_up;  // what follows a disagreement (weights, normalised)
    double loop_continue_p;    // after the minimum, one more loop cycle with this probability
    double loop_continue_spread;  // stubbornness: a loop at the step a op b goes on with
                               // sigmoid(logit(loop_continue_p) + spread u), u in [-1, 1] the
                               // world's per-fact number (world_stubbornness; 0: no spread)
    double p_loop_restart;     // a loop cycle restarts from the first step (else redoes)
    double p_loop_repeat;      // a loop repeats the checked wrong value in every attempt
                               // (a literal repetition) instead of a new wrong value each
    double p_loop_give_up;     // a loop ends with a guess (give up) instead of going on
    double p_recheck;          // after a disagreement, check the same step again (it disagrees
                               // again), once more each time with this probability
    double gap_share;          // knowledge gaps: share of the digit facts believed wrong
                               // (world_gap; 0: none, the default corpus)
    double p_gap_right;        // a first pass of a gap fact is written right anyway
    double p_gap_doubt;        // a check of a gap fact written wrong disagrees (else ok: the
                               // writer believes it); a redo or loop after it writes the same
                               // believed value again, so it cannot recover
    uint64_t gap_seed;         // seed of the world's fact tables, gaps and stubbornness (world.seed)
    double level_weights[WORLD_NUM_LEVELS];  // level mix of the corpus
    int loop_min_cycles;       // a loop writes at least this many further wrong attempts
    int loop_max_cycles;       // ... and at most this many (0: no cap but the writer's own limit)
    int max_doc_tokens;        // context: longer documents are cut here (no <eos>)
    double general_share;      // share of general documents (no arithmetic; corpus_general_text)
    double qa_share;           // share of question-answer documents: the question and a short
                               // correct solution in the document's format (no restate, checks,
                               // slips, gaps or off-format endings)
} CorpusParams;

CorpusParams corpus_params_default(void);
// 0 if every knob is in range, else -1 and a message naming the knob, value and range.
int corpus_params_validate(const CorpusParams *p, char *err, size_t errlen);
// The probability that a loop at the step a op b writes one more attempt (loop_continue_p,
// spread over the facts by loop_continue_spread; docs/corpus.md).
double corpus_loop_continue(const CorpusParams *p, char op, int64_t a, int64_t b);

typedef enum { DOC_MATH = 0, DOC_GENERAL = 1, DOC_QA = 2 } DocKind;

typedef struct {
    DocKind kind;      // which of the three kinds the document is (general_share, qa_share)
    int level;         // (general documents: 0, no task)
    Template format;   // the document's prompt
    int off_format;    // an r1 document that ends in another format
    int n_steps;       // steps of the question (first passes)
    int n_errors;      // first passes written wrong (slips and gaps)
    int n_gap_steps;   // first passes that use a gap fact
    int n_gap_errors;  // ... written with the believed wrong value
    double err_expect; // sum of the error probabilities of the first passes
    int has_error;     // n_errors > 0
    int n_checks, self_checked;  // all checks (loop cycles' included)
    int n_step_checks;   // checks of first passes
    int n_checked_wrong; // ... of which the step was wrong
    int n_disagree, disagreement;
    int n_missed, n_false_alarms;  // checks of wrong steps that said ok / right steps that said no
    int n_recover, n_loop, n_give_up;  // how the disagreements went on (generator's choice)
    int loop_cycles;   // further wrong attempts drawn for loops (written until the cut)
    int n_loop_flagged; // runs of LOOP_MIN_DISAGREE or more disagreements of one step (re-checks
                        // and loop attempts): the verifier's looped flag
    int loop_repeats;  // loops that repeated the checked wrong value (p_loop_repeat)
    int loop_give_ups; // loops that ended with a guess (p_loop_give_up)
    int rechecks;      // re-checks after disagreements (p_recheck)
    int recovered;     // n_recover > 0, correct, no loop, no give-up
    int looped;        // n_loop_flagged > 0 (with the default knobs: n_loop > 0)
    int gave_up;       // n_give_up > 0
    int truncated;     // cut at max_doc_tokens (no <eos>)
    int correct;       // not truncated and the final answer equals the truth
    int prompt_chars;  // the prompt is the first prompt_chars bytes of the text
    int prompt_tokens;
    int length_tokens;    // whole document (prompt + response + <eos>) in tokens
    int response_tokens;  // response + <eos> (what the model generates)
    int retries;       // over-long non-looping drafts redrawn before this one
} DocInfo;

// Writes document `index` as text into out (cap bytes; 4096 is always enough for
// max_doc_tokens <= 1024). Returns its length in bytes, or -1 if cap is too small.
// info may be NULL. The prompt part is the first info->prompt_chars bytes.
int corpus_document(const CorpusParams *p, uint64_t seed, int64_t index, char *out, size_t cap,
                    DocInfo *info);

// The kind of document `index`: DOC_MATH unless general_share or qa_share is set; drawn on a
// stream of its own, so the other documents of an index keep their task and behaviour.
DocKind corpus_doc_kind(const CorpusParams *p, uint64_t seed, int64_t index);

// A general document: sentences of made-up words over the tokenizer's lowercase letters,
// separated by spaces, commas and newlines, ending in '.' or '?', then "<eos>"; no digit and
// no arithmetic symbol. Its length is drawn from [GENERAL_MIN_TOKENS, GENERAL_MAX_TOKENS]
// (capped at max_tokens). Returns the length in bytes, -1 if cap is too small.
#define GENERAL_MIN_TOKENS 30
#define GENERAL_MAX_TOKENS 200
int corpus_general_text(uint64_t seed, int64_t index, int max_tokens, char *out, size_t cap);

// The task of document `index` (the question and answer its reasoning is about).
void corpus_task(const CorpusParams *p, uint64_t seed, int64_t index, Task *out);

#endif
