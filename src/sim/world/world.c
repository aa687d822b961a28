// world.c: task generator, benchmarks and expression parsing (see world.h).
//
// A question is a random binary expression tree printed with the parentheses its structure
// needs (a child in parentheses when its precedence is lower than its parent's, or equal
// and it is the right operand: "a-(b+c)", "a*(b*c)"). Level constraints (parentheses,
// nesting, big multiplications, value bounds) are met by rejection; the train/eval
// partition of the text is met by rejection too.
#include "world.h"

#include <string.h>

#include "../../common.h"
#include "../../kernels/philox.h"

// ---------------------------------------------------------------- random stream

WorldRng world_rng(uint64_t seed, uint64_t purpose, int64_t index) {
    WorldRng r = {seed, (purpose << 48) ^ ((uint64_t)index & 0xFFFFFFFFFFFFull), 0};
    return r;
}

uint32_t world_rng_u32(WorldRng *r) { return philox_draw(r->seed, r->counter, r->draw++).v[0]; }

double world_rng_u01(WorldRng *r) { return world_rng_u32(r) * (1.0 / 4294967296.0); }

int world_rng_int(WorldRng *r, int lo, int hi) {
    uint64_t span = (uint64_t)((int64_t)hi - lo + 1);
    return lo + (int)(((uint64_t)world_rng_u32(r) * span) >> 32);
}

int world_rng_pick(WorldRng *r, const double *w, int n) {
    double total = 0;
    for (int i = 0; i < n; i++) total += w[i] > 0 ? w[i] : 0;
    double u = world_rng_u01(r) * total;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (w[i] <= 0) continue;
        last = i;
        if (u < w[i]) return i;
        u -= w[i];
    }
    return last;
}

// ---------------------------------------------------------------- hashing, partition

uint64_t world_hash(const char *q) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *q; q++) {
        h ^= (unsigned char)*q;
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t mix64(uint64_t z) {  // splitmix64 finaliser
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// A quarter of all question texts are held out for evaluation.
Split world_split_of(const char *q) {
    return (mix64(world_hash(q)) >> 62) == 3 ? SPLIT_EVAL : SPLIT_TRAIN;
}

// ---------------------------------------------------------------- knowledge gaps

// The cell of a op b's units column: op index k (+ - *) and units digits x, y, ordered for
// the commutative + and *. 0, or -1 for an unknown op.
static int fact_cell(char op, int64_t a, int64_t b, int *k, int *x, int *y) {
    *x = (int)((a < 0 ? -a : a) % 10), *y = (int)((b < 0 ? -b : b) % 10);
    *k = op == '+' ? 0 : op == '-' ? 1 : op == '*' ? 2 : -1;
    if (*k < 0) return -1;
    if (op != '-' && *x > *y) {  // + and * are commutative: one cell for (x, y) and (y, x)
        int t = *x;
        *x = *y;
        *y = t;
    }
    return 0;
}

// The hash of cell (k, x, y) of one of the world's fact tables: a function of (seed, table
// salt, cell) alone, so tables with other salts are independent; and its top 53 bits as a
// number in [0, 1).
static uint64_t cell_hash(uint64_t seed, uint64_t salt, int k, int x, int y) {
    return mix64(seed ^ mix64(salt + (uint64_t)(k * 100 + x * 10 + y)));
}
static double hash_u01(uint64_t h) { return (double)(h >> 11) * (1.0 / 9007199254740992.0); }

int world_gap(const WorldGaps *g, char op, int64_t a, int64_t b, int64_t *wrong) {
    if (!g || !(g->share > 0)) return 0;
    int k, x, y;
    if (fact_cell(op, a, b, &k, &x, &y) != 0) return 0;
    if (x < 2 || y < 2) return 0;  // facts with 0 and 1 are never wrong
    uint64_t h = cell_hash(g->seed, 0x6761707300000000ull, k, x, y);
    if (hash_u01(h) >= g->share) return 0;
    static const int64_t OFF[4] = {-2, -1, 1, 2};
    int64_t e = OFF[h & 3];
    int64_t truth = op == '+' ? a + b : op == '-' ? a - b : a * b;
    if (wrong) *wrong = truth + (truth < 0 ? -e : e);
    return 1;
}

double world_stubbornness(uint64_t seed, char op, int64_t a, int64_t b) {
    int k, x, y;
    if (fact_cell(op, a, b, &k, &x, &y) != 0) return 0;
    return 2.0 * hash_u01(cell_hash(seed, 0x7374756200000000ull, k, x, y)) - 1.0;
}

double world_check_draw(uint64_t seed, char op, int64_t a, int64_t b) {
    int k, x, y;
    if (fact_cell(op, a, b, &k, &x, &y) != 0) return 0;
    return hash_u01(cell_hash(seed, 0x6368656b00000000ull, k, x, y));
}

// ---------------------------------------------------------------- level specs

typedef struct {
    int ops_min, ops_max;
    double w_op[3];          // weights of + - *
    int add_lo, add_hi;      // literals that are not an operand of *
    int mul_lo, mul_hi;      // literals that are an operand of *
    int paren_min, paren_max;  // pairs of parentheses
    int depth_min;           // nesting depth of parentheses
    int mul_min;             // at least this many *
    int big_mul_min;         // at least this many * of two literals >= 10
    int64_t vmax;            // bound on |every intermediate value|, answer included
} Spec;

static const Spec LEVEL_SPEC[WORLD_NUM_LEVELS] = {
    {1, 1, {0.5, 0.5, 0.0}, 1, 30, 2, 9, 0, 0, 0, 0, 0, 99},
    {2, 2, {0.35, 0.35, 0.3}, 1, 40, 2, 9, 0, 0, 0, 1, 0, 999},
    {3, 3, {0.35, 0.35, 0.3}, 1, 50, 2, 12, 0, 1, 0, 1, 0, 999},
    {4, 4, {0.3, 0.3, 0.4}, 1, 70, 2, 25, 1, 2, 0, 1, 0, 2999},
    {4, 5, {0.3, 0.3, 0.4}, 1, 99, 6, 35, 2, 3, 2, 1, 1, 9999},
};
// Out-of-distribution benchmarks: longer expressions than any level (small operands), and
// three-digit operands (larger than any level).
static const Spec SPEC_LONG = {6, 7, {0.4, 0.4, 0.2}, 1, 20, 2, 9, 0, 1, 0, 1, 0, 999};
static const Spec SPEC_BIG = {2, 2, {0.5, 0.5, 0.0}, 100, 999, 2, 9, 0, 1, 0, 0, 0, 9999};
// The out-of-distribution training pool: chains of additions and subtractions.
static const Spec SPEC_CHAIN = {3, 4, {0.5, 0.5, 0.0}, 1, 30, 2, 9, 0, 1, 0, 0, 0, 999};

// ---------------------------------------------------------------- expression trees

#define MAX_NODES 32

typedef struct {
    char op;  // 0: literal
    int l, r;
    int64_t v;
} Node;

typedef struct {
    Node n[MAX_NODES];
    int count;
} Tree;

static int tree_gen(Tree *t, WorldRng *r, const Spec *s, int n_ops, int under_mul) {
    int id = t->count++;
    Node *nd = &t->n[id];
    if (n_ops == 0) {
        nd->op = 0;
        nd->l = nd->r = -1;
        nd->v = under_mul ? world_rng_int(r, s->mul_lo, s->mul_hi)
                          : world_rng_int(r, s->add_lo, s->add_hi);
        return id;
    }
    static const char OPS[3] = {'+', '-', '*'};
    char op = OPS[world_rng_pick(r, s->w_op, 3)];
    int left_ops = world_rng_int(r, 0, n_ops - 1);
    int l = tree_gen(t, r, s, left_ops, op == '*');
    int rr = tree_gen(t, r, s, n_ops - 1 - left_ops, op == '*');
    nd = &t->n[id];
    nd->op = op;
    nd->l = l;
    nd->r = rr;
    return id;
}

static int prec(char op) { return op == 0 ? 3 : op == '*' ? 2 : 1; }

// Evaluates node i; 0 if every value stays within the bound, else -1.
static int tree_eval(Tree *t, int i, int64_t vmax) {
    Node *nd = &t->n[i];
    if (nd->op == 0) return 0;
    if (tree_eval(t, nd->l, vmax) || tree_eval(t, nd->r, vmax)) return -1;
    int64_t a = t->n[nd->l].v, b = t->n[nd->r].v;
    nd->v = nd->op == '+' ? a + b : nd->op == '-' ? a - b : a * b;
    return (nd->v > vmax || nd->v < -vmax) ? -1 : 0;
}

typedef struct {
    char *buf;
    size_t len, cap;
    int pairs, depth, max_depth;
    int overflow;
} Printer;

static void pr_char(Printer *p, char c) {
    if (p->len + 1 < p->cap) p->buf[p->len++] = c;
    else p->overflow = 1;
}

static void tree_print(Printer *p, const Tree *t, int i, int parent_prec, int is_right) {
    const Node *nd = &t->n[i];
    if (nd->op == 0) {
        char num[24];
        int k = snprintf(num, sizeof num, "%lld", (long long)nd->v);
        for (int j = 0; j < k; j++) pr_char(p, num[j]);
        return;
    }
    int paren = prec(nd->op) < parent_prec || (is_right && prec(nd->op) == parent_prec);
    if (paren) {
        pr_char(p, '(');
        p->pairs++;
        if (++p->depth > p->max_depth) p->max_depth = p->depth;
    }
    tree_print(p, t, nd->l, prec(nd->op), 0);
    pr_char(p, nd->op);
    tree_print(p, t, nd->r, prec(nd->op), 1);
    if (paren) {
        pr_char(p, ')');
        p->depth--;
    }
}

// One candidate question of spec s; 0 if it meets the spec (text in q), else -1.
static int candidate(WorldRng *r, const Spec *s, char *q, size_t cap, int64_t *answer) {
    Tree t;
    t.count = 0;
    int n_ops = world_rng_int(r, s->ops_min, s->ops_max);
    int root = tree_gen(&t, r, s, n_ops, 0);
    if (tree_eval(&t, root, s->vmax)) return -1;
    int n_mul = 0, n_big = 0;
    for (int i = 0; i < t.count; i++) {
        const Node *nd = &t.n[i];
        if (nd->op != '*') continue;
        n_mul++;
        const Node *a = &t.n[nd->l], *b = &t.n[nd->r];
        if (a->op == 0 && b->op == 0 && a->v >= 10 && b->v >= 10) n_big++;
    }
    if (n_mul < s->mul_min || n_big < s->big_mul_min) return -1;
    Printer p = {q, 0, cap, 0, 0, 0, 0};
    tree_print(&p, &t, root, 0, 0);
    q[p.len] = '\0';
    if (p.overflow || p.pairs < s->paren_min || p.pairs > s->paren_max ||
        p.max_depth < s->depth_min)
        return -1;
    *answer = t.n[root].v;
    return 0;
}

#define MAX_ATTEMPTS 1000000

// Draws candidates until one meets the spec, lies in the wanted partition and is accepted
// by `reject` (NULL: all are).
static void gen_task(WorldRng *r, const Spec *s, Split want, int level, int64_t index,
                     int (*reject)(const Task *, void *), void *ctx, Task *out) {
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        int64_t answer;
        if (candidate(r, s, out->question, sizeof out->question, &answer)) continue;
        if (world_split_of(out->question) != want) continue;
        out->index = index;
        out->level = level;
        out->answer = answer;
        out->hash = world_hash(out->question);
        if (reject && reject(out, ctx)) continue;
        return;
    }
    die("world: no question met the spec of level %d after %d attempts", level, MAX_ATTEMPTS);
}

// ---------------------------------------------------------------- training pool

static const double UNIFORM_LEVELS[WORLD_NUM_LEVELS] = {1, 1, 1, 1, 1};

void world_train_task_mix(uint64_t seed, int64_t index, const double level_weights[5],
                          Task *out) {
    WorldRng r = world_rng(seed, WORLD_PURPOSE_TRAIN, index);
    int level = 1 + world_rng_pick(&r, level_weights, WORLD_NUM_LEVELS);
    gen_task(&r, &LEVEL_SPEC[level - 1], SPLIT_TRAIN, level, index, NULL, NULL, out);
}

void world_train_task(uint64_t seed, int64_t index, Task *out) {
    world_train_task_mix(seed, index, UNIFORM_LEVELS, out);
}

void world_level_task(uint64_t seed, uint64_t purpose, int64_t index, int level, Task *out) {
    if (level < 1 || level > WORLD_NUM_LEVELS) die("world: level %d out of range 1..5", level);
    WorldRng r = world_rng(seed, purpose, index);
    gen_task(&r, &LEVEL_SPEC[level - 1], SPLIT_TRAIN, level, index, NULL, NULL, out);
}

void world_ood_train_task(uint64_t seed, int64_t index, Task *out) {
    WorldRng r = world_rng(seed, WORLD_PURPOSE_TRAIN_OOD, index);
    gen_task(&r, &SPEC_CHAIN, SPLIT_TRAIN, WORLD_LEVEL_OOD, index, NULL, NULL, out);
}

// ---------------------------------------------------------------- question sets

static const WorldQuestionSet QSETS[] = {
    {"level1", "level 1 only: one addition or subtraction (the narrowest, easiest set)", 0, {1, 0, 0, 0, 0}},
    {"levels1-3", "levels 1-3 uniformly (the fig5 configs' pool)", 0, {1, 1, 1, 0, 0}},
    {"all", "levels 1-5 uniformly, the coverage of the benchmarks (the MATH analogue)", 0, {1, 1, 1, 1, 1}},
    {"ood", "3-4 additions and subtractions of operands 1-30, a kind no level has (the GSM-8K analogue)", 1,
     {0, 0, 0, 0, 0}},
};
#define N_QSETS (int)(sizeof QSETS / sizeof QSETS[0])

int world_num_question_sets(void) { return N_QSETS; }
const WorldQuestionSet *world_question_set(int i) { return i >= 0 && i < N_QSETS ? &QSETS[i] : NULL; }
const WorldQuestionSet *world_question_set_find(const char *name) {
    for (int i = 0; name && i < N_QSETS; i++)
        if (strcmp(QSETS[i].name, name) == 0) return &QSETS[i];
    return NULL;
}

void world_question_set_task(const WorldQuestionSet *qs, uint64_t seed, int64_t index, Task *out) {
    if (qs->ood) world_ood_train_task(seed, index, out);
    else world_train_task_mix(seed, index, qs->weights, out);
}

// ---------------------------------------------------------------- benchmarks

typedef struct {
    const char *name, *desc;
    int size;
} Benchmark;

#define N_BENCH 5
#define BENCH_MAX_SIZE 500

static const Benchmark BENCH[N_BENCH] = {
    {"mixed500", "all levels 1-5, 100 questions each (like MATH500)", 500},
    {"hard30", "level 5 only: nested parentheses, two-digit multiplications (like AIME)", 30},
    {"medium80", "levels 3 and 4, 40 questions each (like AMC)", 80},
    {"long_ood", "6-7 operations with small operands, longer than any training question", 100},
    {"bignum_ood", "2 additions/subtractions of three-digit operands, larger than any training "
                   "operand", 100},
};

int world_num_benchmarks(void) { return N_BENCH; }
const char *world_benchmark_name(int b) { return b >= 0 && b < N_BENCH ? BENCH[b].name : NULL; }
const char *world_benchmark_description(int b) {
    return b >= 0 && b < N_BENCH ? BENCH[b].desc : NULL;
}
int world_benchmark_size(int b) { return b >= 0 && b < N_BENCH ? BENCH[b].size : -1; }
int world_benchmark_find(const char *name) {
    for (int b = 0; b < N_BENCH; b++)
        if (strcmp(BENCH[b].name, name) == 0) return b;
    return -1;
}

// Which spec and level question j of benchmark b has.
static const Spec *bench_spec(int b, int j, int *level) {
    switch (b) {
    case 0: *level = 1 + j % 5; return &LEVEL_SPEC[*level - 1];
    case 1: *level = 5; return &LEVEL_SPEC[4];
    case 2: *level = 3 + j % 2; return &LEVEL_SPEC[*level - 1];
    case 3: *level = WORLD_LEVEL_OOD; return &SPEC_LONG;
    default: *level = WORLD_LEVEL_OOD; return &SPEC_BIG;
    }
}

typedef struct {
    const Task *tasks;
    int n;
} SeenSet;

static int reject_seen(const Task *t, void *ctx) {
    const SeenSet *s = ctx;
    for (int i = 0; i < s->n; i++)
        if (s->tasks[i].hash == t->hash && strcmp(s->tasks[i].question, t->question) == 0)
            return 1;
    return 0;
}

typedef struct {
    int valid;
    uint64_t seed;
    int b;
    Task tasks[BENCH_MAX_SIZE];
} BenchCache;

static _Thread_local BenchCache bench_cache;

// The whole benchmark b, in order, without duplicates.
static void bench_generate(uint64_t seed, int b, Task *tasks) {
    for (int i = 0; i < BENCH[b].size; i++) {
        int level;
        const Spec *s = bench_spec(b, i, &level);
        WorldRng r = world_rng(seed, WORLD_PURPOSE_BENCH + (uint64_t)b, i);
        SeenSet seen = {tasks, i};
        gen_task(&r, s, SPLIT_EVAL, level, i, reject_seen, &seen, &tasks[i]);
    }
}

void world_benchmark_tasks(uint64_t seed, int b, Task *out) {
    if (b < 0 || b >= N_BENCH) die("world: benchmark %d out of range 0..%d", b, N_BENCH - 1);
    bench_generate(seed, b, out);
}

void world_benchmark_task(uint64_t seed, int b, int j, Task *out) {
    if (b < 0 || b >= N_BENCH) die("world: benchmark %d out of range 0..%d", b, N_BENCH - 1);
    if (j < 0 || j >= BENCH[b].size)
        die("world: question %d out of range of benchmark %s (size %d)", j, BENCH[b].name,
            BENCH[b].size);
    BenchCache *c = &bench_cache;
    if (!c->valid || c->seed != seed || c->b != b) {
        bench_generate(seed, b, c->tasks);
        c->valid = 1;
        c->seed = seed;
        c->b = b;
    }
    *out = c->tasks[j];
}

// ---------------------------------------------------------------- parsing

typedef struct {
    const char *s;
    size_t pos;
    WorldStep *steps;
    int n, max;
    int err;
    int pairs, depth, max_depth, n_big_mul;
    int64_t max_operand, max_abs;
} Parser;

typedef struct {
    int step;  // -1: literal
    int64_t v;
} Operand;

static void note_value(Parser *p, int64_t v) {
    int64_t a = v < 0 ? -v : v;
    if (a > p->max_abs) p->max_abs = a;
}

static Operand parse_expr(Parser *p);

static Operand parse_factor(Parser *p) {
    Operand o = {-1, 0};
    char c = p->s[p->pos];
    if (c == '(') {
        p->pos++;
        if (++p->depth > p->max_depth) p->max_depth = p->depth;
        p->pairs++;
        o = parse_expr(p);
        if (p->s[p->pos] != ')') p->err = 1;
        else p->pos++;
        p->depth--;
        return o;
    }
    if (c < '0' || c > '9') {
        p->err = 1;
        return o;
    }
    int digits = 0;
    while (p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        if (++digits > 15) p->err = 1;
        else o.v = o.v * 10 + (p->s[p->pos] - '0');
        p->pos++;
    }
    if (o.v > p->max_operand) p->max_operand = o.v;
    note_value(p, o.v);
    return o;
}

static Operand emit(Parser *p, char op, Operand a, Operand b) {
    Operand o = {-1, 0};
    if (p->err) return o;
    if (p->n >= p->max) {
        p->err = 1;
        return o;
    }
    // values stay far inside int64 for anything the parser accepts (15 digits, bounded ops)
    int64_t v;
    if (op == '+' ? __builtin_add_overflow(a.v, b.v, &v)
                  : op == '-' ? __builtin_sub_overflow(a.v, b.v, &v)
                              : __builtin_mul_overflow(a.v, b.v, &v)) {
        p->err = 1;
        return o;
    }
    if (op == '*' && a.step < 0 && b.step < 0 && a.v >= 10 && b.v >= 10) p->n_big_mul++;
    WorldStep *st = &p->steps[p->n];
    st->op = op;
    st->a_step = a.step;
    st->b_step = b.step;
    st->a = a.v;
    st->b = b.v;
    st->value = v;
    note_value(p, v);
    o.step = p->n++;
    o.v = v;
    return o;
}

static Operand parse_term(Parser *p) {
    Operand a = parse_factor(p);
    while (!p->err && p->s[p->pos] == '*') {
        p->pos++;
        Operand b = parse_factor(p);
        a = emit(p, '*', a, b);
    }
    return a;
}

static Operand parse_expr(Parser *p) {
    Operand a = parse_term(p);
    while (!p->err && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) {
        char op = p->s[p->pos++];
        Operand b = parse_term(p);
        a = emit(p, op, a, b);
    }
    return a;
}

static int parse_all(Parser *p, const char *expr, WorldStep *steps, int max, int64_t *value) {
    memset(p, 0, sizeof *p);
    p->s = expr;
    p->steps = steps;
    p->max = max;
    Operand o = parse_expr(p);
    if (p->err || p->s[p->pos] != '\0') return -1;
    if (value) *value = o.v;
    return p->n;
}

#define PARSE_MAX_STEPS 64

int world_steps(const char *expr, WorldStep *steps, int max_steps) {
    Parser p;
    return parse_all(&p, expr, steps, max_steps, NULL);
}

int world_eval(const char *expr, int64_t *value) {
    Parser p;
    WorldStep steps[PARSE_MAX_STEPS];
    return parse_all(&p, expr, steps, PARSE_MAX_STEPS, value) < 0 ? -1 : 0;
}

int world_task_stats(const char *expr, TaskStats *st) {
    Parser p;
    WorldStep steps[PARSE_MAX_STEPS];
    int n = parse_all(&p, expr, steps, PARSE_MAX_STEPS, NULL);
    if (n < 0) return -1;
    memset(st, 0, sizeof *st);
    st->n_ops = n;
    for (int i = 0; i < n; i++) st->n_mul += steps[i].op == '*';
    st->n_paren_pairs = p.pairs;
    st->paren_depth = p.max_depth;
    st->max_operand = p.max_operand;
    st->max_abs_value = p.max_abs;
    st->n_big_mul = p.n_big_mul;
    return 0;
}
