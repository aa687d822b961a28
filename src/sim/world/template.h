// template.h: prompt templates, the verifier (reward), and the per-response behaviour
// analysis. The reasoning markers are defined here once and used by both the corpus
// generator (corpus.c), which writes them, and verify_response, which reads them.
//
// Formats (prompt | response, "<eos>" ends generation besides the stop token):
//   r1     "User: 3+4*2\nAssistant: <think>"
//          | " 4*2=8. 3+8=11. </think> <answer> 11 </answer>"       stop token "</answer>"
//   boxed  "answer in \boxed{}.\n3+4*2\n"  | "4*2=8. 3+8=11.\n\boxed{11}" then <eos>
//   none   "3+4*2\n"                        | "4*2=8. 3+8=11.\nanswer: 11"   then <eos>
//
// Format rules (format_ok) and which answer counts:
//   r1     the first "</think>" is followed (whitespace aside) by "<answer>", one numeral,
//          "</answer>", and then nothing but whitespace. That answer counts.
//   boxed  some "\boxed{<numeral>}"; the last one counts.
//   none   the last line is "answer: <numeral>"; the last "answer:" counts.
// When the format fails, the answer is still extracted (for `correct`), first match of:
// the r1 answer after "</think>", the last <answer>...</answer>, the last \boxed{...}, the
// last "answer:" line. A numeral is compared as a careful checker would: surrounding
// whitespace, a leading '+', '-' with or without a space ("- 3" is -3), leading zeros,
// "-0" == 0, a trailing "." or ".0" are accepted; anything else ("3.5", "1,000", "9 10",
// 19+ digits) is not a numeral.
#ifndef GRPOLAB_TEMPLATE_H
#define GRPOLAB_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"
#include "world.h"

// ---- reasoning markers (single source for the corpus and the verifier)
// A step is "<a><op><b>=<value>." (a negative right operand is written "(-3)"); items of the
// reasoning are separated by one space.
#define MARK_RESTATE "find "     // "find 3+4*2."          restating the question
#define MARK_CHECK "check "      // "check 4*2=8 ok."      re-check of a step...
#define MARK_OK " ok"            //                        ...that agrees
#define MARK_NO " no"            // "check 4*2=9 no."      ...that visibly disagrees
#define MARK_REDO "redo "        // "redo 4*2=8."          the step computed again
#define MARK_RESTART "restart."  // "restart. 4*2=9. ..."  going back to the first step
#define MARK_GUESS "guess "      // "guess 12."            a quick guess after a disagreement
#define MARK_ANSWER "answer:"    // "answer: 11"           final line of the plain format
#define MARK_BOXED "\\boxed{"
// the characters of a step "a op b=v" (what follows MARK_CHECK up to the verdict)
#define STEP_CHARS "0123456789+-*()="
// looped: at least this many disagreeing checks of the same step ("a op b", the text before
// '=') in a row among the disagreements, the first one included
#define LOOP_MIN_DISAGREE 3

typedef enum { TEMPLATE_R1 = 0, TEMPLATE_BOXED = 1, TEMPLATE_NONE = 2 } Template;
#define TEMPLATE_COUNT 3

// "r1", "boxed", "none" -> 0; -1 otherwise.
int template_parse(const char *name, Template *out);
const char *template_name(Template t);

// Writes the prompt the model continues; returns its length, or -1 if cap is too small.
int template_prompt(Template t, const Task *task, char *out, size_t cap);
// The token after which generation stops besides <eos>: r1 "</answer>"; boxed, none: -1.
int template_stop_token(const Tokenizer *tk, Template t);

typedef struct {
    int reward;      // 1 iff stopped, formatted correctly and the final answer equals the truth
    int format_ok;   // the template's format was followed
    int truncated;   // no stop (eos / stop tag) within the budget
    int correct;     // the extracted answer equals the truth (regardless of format)
    int has_answer;
    int64_t answer;  // the extracted answer, if any
    // behaviour flags read from the reasoning markers
    int self_checked;  // at least one "check "
    int disagreement;  // at least one check ending " no"
    int recovered;     // disagreement, then "redo " after it, answer correct, not looped/gave up
    int looped;        // LOOP_MIN_DISAGREE disagreeing checks of the same step in a row
    int gave_up;       // "guess " after a disagreement
    int n_checks;          // number of checks
    int n_disagreements;   // number of checks that disagree
} Verdict;

// Scores the response text (the generated tokens decoded, <eos> excluded). `stopped` is 1
// if generation ended with <eos> or the stop token within the budget, 0 if it was cut.
void verify_response(Template t, const Task *task, const char *response_text, int stopped,
                     Verdict *v);

// ---- the world's reward rule (world.reward_rule, docs/world.md)
// REWARD_OUTCOME: the reward is verify_response's, the final answer's. A redo after a
// disagreement is a fresh computation and can still earn it.
// REWARD_DISAGREEMENT_FAILS: a response with a visible self-check disagreement (a check
// ending " no") scores 0 whatever its answer.
// REWARD_FALSE_STEP_FAILS: a response with a false step on the record scores 0 whatever its
// answer, as from a grader that checks every step of the derivation. A step is a clause
// "a op b=v" outside a check (a redo's included); one that does not parse as a step is
// false. Checks are not steps: a check that miscopies a right step costs nothing.
// Under both strict rules every continuation after a checked error fails alike, so the
// length of such a failure is a choice that reward does not make.
// REWARD_FIRST_REDO_FORGIVES: as REWARD_FALSE_STEP_FAILS, except that a false first pass is
// forgiven when it is checked and redone right at once: the step is followed directly by
// ". check <its a op b>=... no. redo <its a op b>=<the right value>". A false redo is never
// forgiven, so checking pays, but after a failed first redo every continuation fails alike.
typedef enum {
    REWARD_OUTCOME = 0,
    REWARD_DISAGREEMENT_FAILS = 1,
    REWARD_FALSE_STEP_FAILS = 2,
    REWARD_FIRST_REDO_FORGIVES = 3
} RewardRule;
// "outcome", "disagreement_fails", "false_step_fails", "first_redo_forgives" -> 0; -1
// otherwise.
int reward_rule_parse(const char *name, RewardRule *out);
// Applies the rule to v, the verdict verify_response gave for `response_text`: only
// v->reward changes (the flags, `correct` and `recovered` stay the verifier's).
void verdict_apply_rule(Verdict *v, const char *response_text, RewardRule rule);
// 1 if the text has a false step as defined above (exposed for tests)
int template_has_false_step(const char *response_text);
// 1 if the text has a false step that REWARD_FIRST_REDO_FORGIVES does not forgive
int template_has_unforgiven_step(const char *response_text);

// ---- the environment's check verdict (world.check_verdict = environment)
// A sampler environment (SamplerConfig.env): when the response so far ends with a check
// clause and a space, "check <a><op><b>=<v> ", the environment writes the verdict the way
// a calculator would: "ok" if a op b equals v, "no" otherwise (also when the clause does not
// parse as a step: a check that checks nothing disagrees). a is an integer, b an integer or
// "(-n)", op one of + - *, as the corpus writes steps. Returns the number of tokens written
// to out (2, or 0 when the response does not end with such a clause). Operands and values
// longer than 15 digits do not parse.
int template_env_verdict(const int *tokens, int len, int *out, int cap);
// the same decision on text: "ok", "no" or NULL (exposed for tests)
const char *template_env_verdict_text(const char *text);

// ---- step clauses and failure kinds (`grpolab eval --failure-profile`, docs/corpus.md)
// One clause "a op b=v" of a response, in order: a step (first pass, also after "restart."),
// a redo, or a check with its verdict.
typedef enum { CLAUSE_STEP = 0, CLAUSE_REDO = 1, CLAUSE_CHECK = 2 } ClauseKind;
typedef struct {
    ClauseKind kind;
    char op;
    int64_t a, b, v;
    int right;    // a op b == v
    int verdict;  // checks: 1 " ok", 0 " no", -1 none written
} StepClause;
// The clauses that parse as steps (others are skipped), at most cap; returns their count.
int template_step_clauses(const char *text, StepClause *out, int cap);

// Why a response failed, and how its redos after disagreements went.
typedef enum { FAIL_NONE = 0, FAIL_GAP = 1, FAIL_SLIP = 2, FAIL_OTHER = 3 } FailKind;
typedef struct {
    FailKind kind;  // NONE: reward 1; else by the first false step outside the checks: GAP if
                    // it uses a gap fact of the table, SLIP if not; OTHER: no false step (a
                    // wrong guess, format, truncation with right steps)
    // [0] slips (facts that are no gap), [1] gaps: disagreements with a false step (a run of
    // re-checks of one step counts once), those followed by a redo of the same step, and of
    // those the redos that are right and those that repeat the rejected value
    int disagree[2], redos[2], redos_right[2], redos_same[2];
} FailureKind;
void template_failure_kind(const char *text, int reward, const WorldGaps *gaps, FailureKind *fk);

// Parses a numeral as described above from s[0..n). 0 and *out, or -1.
int template_parse_numeral(const char *s, size_t n, int64_t *out);

#endif
