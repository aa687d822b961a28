// world.h: the embedded task world, integer arithmetic questions in five difficulty levels
// (the role MATH's levels 1-5 play in the paper), a training pool and five held-out
// evaluation benchmarks.
//
// Levels (operators + - *, no division; see docs/world.md for the exact ranges):
//   1  one + or -, operands 1-30                             "17-25"
//   2  two operations, one or two *, * on one-digit operands  "4+6*7"
//   3  three operations, at most one pair of parentheses      "(12-5)*8+3"
//   4  four operations, one or two pairs of parentheses, operands up to 70 (* up to 25)
//   5  four or five operations, nested parentheses, a two-digit by two-digit multiplication
// Every intermediate value and every answer is below 10000 in absolute value; answers can
// be negative ("-16").
//
// Train/eval split: every question text belongs to exactly one partition, decided by a hash
// of the text alone (independent of the seed): world_split_of(). The training pool only
// draws SPLIT_TRAIN questions and the benchmarks only SPLIT_EVAL questions, so no benchmark
// question is ever a training question, for any pair of seeds.
//
// Determinism: every draw is Philox (kernels/philox.h) at (seed, counter), counter =
// purpose << 48 | index, the draw number as Philox's sub-counter (WorldRng).
#ifndef GRPOLAB_WORLD_H
#define GRPOLAB_WORLD_H

#include <stdint.h>

#define WORLD_NUM_LEVELS 5
#define WORLD_LEVEL_OOD 0  // Task.level of the out-of-distribution benchmarks' tasks
#define WORLD_QUESTION_CAP 96
#define WORLD_MAX_ABS_VALUE 9999  // bound on every intermediate value and answer

typedef struct {
    int64_t index;   // index in its pool or benchmark
    int level;       // 1..5, or WORLD_LEVEL_OOD (0) for long_ood / bignum_ood tasks
    char question[WORLD_QUESTION_CAP];  // the bare expression, e.g. "3+4*2"
    int64_t answer;  // its exact integer value
    uint64_t hash;   // world_hash(question) (FNV-1a 64), for leak tests
} Task;

typedef enum { SPLIT_TRAIN = 0, SPLIT_EVAL = 1 } Split;

// ---- training pool (unbounded index)
// Level drawn uniformly from 1..5.
void world_train_task(uint64_t seed, int64_t index, Task *out);
// Level drawn with the given (non-negative, not all zero) weights of levels 1..5.
void world_train_task_mix(uint64_t seed, int64_t index, const double level_weights[5], Task *out);
// A training-partition task of a given level (1..5) from an independent stream
// (purpose >= WORLD_PURPOSE_USER, e.g. the corpus uses its own).
void world_level_task(uint64_t seed, uint64_t purpose, int64_t index, int level, Task *out);

// ---- the out-of-distribution training pool (the GSM-8K analogue of Fig. 6; docs/world.md)
// 3-4 additions and subtractions of operands 1-30, no multiplication, at most one pair of
// parentheses, every value within 999: several steps like levels 3-4, but of the easy
// operations of level 1 only, a kind of question that no level and no benchmark has. Its
// own stream (WORLD_PURPOSE_TRAIN_OOD), the training partition; Task.level is
// WORLD_LEVEL_OOD.
void world_ood_train_task(uint64_t seed, int64_t index, Task *out);

// ---- question sets: which pool and levels a training run draws (train.question_set)
typedef struct {
    const char *name;  // the config value: "level1", "levels1-3", "all", "ood"
    const char *desc;  // one line: what it holds and the paper's set it plays
    int ood;           // 1: the out-of-distribution pool (weights unused)
    double weights[WORLD_NUM_LEVELS];  // level weights of the main pool (world_train_task_mix)
} WorldQuestionSet;
int world_num_question_sets(void);
const WorldQuestionSet *world_question_set(int i);               // NULL if out of range
const WorldQuestionSet *world_question_set_find(const char *name);  // NULL if none
// Question `index` of the set: the main pool with the set's weights, or the OOD pool.
void world_question_set_task(const WorldQuestionSet *qs, uint64_t seed, int64_t index, Task *out);

// ---- benchmarks (held out; each of fixed make-up, no duplicate question inside one)
int world_num_benchmarks(void);                        // 5
const char *world_benchmark_name(int b);               // "mixed500", "hard30", ...; NULL if out of range
const char *world_benchmark_description(int b);        // one line: what it contains
int world_benchmark_size(int b);                       // -1 if out of range
int world_benchmark_find(const char *name);            // index of a name, -1 if none
// Task j (0 <= j < size) of benchmark b. A whole benchmark is generated (and de-duplicated)
// on the first call for (seed, b) and kept in a per-thread cache of one benchmark, so loop
// over j inside b (or use world_benchmark_tasks).
void world_benchmark_task(uint64_t seed, int b, int j, Task *out);
// All world_benchmark_size(b) tasks of benchmark b into out.
void world_benchmark_tasks(uint64_t seed, int b, Task *out);

// ---- question text
uint64_t world_hash(const char *question);
Split world_split_of(const char *question);  // the partition a question belongs to

// One binary operation of the evaluation order (post-order, left operand first, the order
// the corpus writes the steps in). Operand a is the literal `a` if a_step < 0, else the
// value of step a_step (same for b).
typedef struct {
    char op;  // '+', '-' or '*'
    int a_step, b_step;
    int64_t a, b;   // operand values (literal or the referenced step's value)
    int64_t value;  // a op b
} WorldStep;

// Parses an expression of non-negative integer literals, + - *, parentheses (no unary
// minus, no spaces) and lists its steps. Returns the number of steps (0 for a bare number)
// or -1 if the text is not such an expression or needs more than max_steps steps.
int world_steps(const char *expr, WorldStep *steps, int max_steps);
// Value of such an expression: 0, or -1 if it does not parse.
int world_eval(const char *expr, int64_t *value);

typedef struct {
    int n_ops, n_mul, n_paren_pairs, paren_depth;
    int64_t max_operand;    // largest literal
    int64_t max_abs_value;  // largest |intermediate value|, answer included
    int n_big_mul;          // multiplications of two literals >= 10
} TaskStats;
int world_task_stats(const char *expr, TaskStats *st);  // 0, or -1 if it does not parse

// ---- knowledge gaps: digit facts the world's writer believes wrong (docs/corpus.md)
// A step a op b uses the fact of its units column: op with the units digits x = |a| % 10 and
// y = |b| % 10. The table marks a share of the cells (op, x, y) with x, y in 2..9 as gaps,
// by a hash of (seed, op, x, y) alone; for + and * the cell of (y, x) is the cell of (x, y).
// A writer who believes a gap fact is off by e in {-2, -1, +1, +2} (fixed per cell) in that
// column, so it writes every such step as the truth moved by e away from zero (towards it
// when e < 0; a truth of 0 becomes e), the same wrong value every time. share 0 (the default world) has no gaps.
typedef struct {
    double share;   // [0, 1]: share of the cells that are gaps
    uint64_t seed;  // the table's seed (world.seed)
} WorldGaps;
// 1 if a op b is a gap fact of g (then *wrong, if not NULL, is the value believed), else 0.
int world_gap(const WorldGaps *g, char op, int64_t a, int64_t b, int64_t *wrong);

// ---- stubbornness: how long the world's writer keeps retrying a step that a check rejected
// A number u in [-1, 1] per cell (op, x, y) of the units column, x, y in 0..9 (one cell for
// (x, y) and (y, x) under + and *), uniform over the cells, by a hash of (seed, op, x, y)
// alone and independent of the gap table. The corpus's loops at a step go on the longer the
// larger u is (corpus.loop_continue_spread); 0 for an unknown op.
double world_stubbornness(uint64_t seed, char op, int64_t a, int64_t b);

// ---- checks by fact: which steps the world's writer checks (corpus.check_by_fact)
// A number in [0, 1) per cell (op, x, y) of the units column, as above, by a hash of
// (seed, op, x, y) alone and independent of the gap and stubbornness tables: the writer checks
// the step a op b when it is below the step's check probability, every time; 0 for an
// unknown op.
double world_check_draw(uint64_t seed, char op, int64_t a, int64_t b);

// ---- random stream shared by the world's generators
enum {
    WORLD_PURPOSE_TRAIN = 1,
    WORLD_PURPOSE_BENCH = 2,  // + benchmark index (2..6)
    WORLD_PURPOSE_TRAIN_OOD = 7,  // the out-of-distribution training pool
    WORLD_PURPOSE_USER = 16,  // first purpose free for other generators (corpus: 16, 17)
};
typedef struct {
    uint64_t seed, counter;
    uint32_t draw;
} WorldRng;
WorldRng world_rng(uint64_t seed, uint64_t purpose, int64_t index);
uint32_t world_rng_u32(WorldRng *r);
double world_rng_u01(WorldRng *r);           // [0,1), 32-bit resolution
int world_rng_int(WorldRng *r, int lo, int hi);  // uniform in [lo, hi]
// Index drawn with the given non-negative weights (n entries, not all zero).
int world_rng_pick(WorldRng *r, const double *weights, int n);

#endif
