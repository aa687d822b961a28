// objective.h: the objective presets and the [objective] config section. The knobs
// (ObjectiveConfig) and every formula of them are kernels/objective.h's.
//
// A preset is a row of default values, one for every knob; a key of the [objective] section
// overrides its preset's value only when the config sets it (a file or --set; an enum key
// set to "preset" keeps the preset's value). A config read back from a stored text (a run
// log's 'config' attribute) has every key set to the value the text holds.
#ifndef GRPOLAB_OBJECTIVE_H
#define GRPOLAB_OBJECTIVE_H

#include <stddef.h>
#include <stdio.h>

#include "../../kernels/objective.h"
#include "../io/config.h"

// The [objective] section: the preset's knobs, then each knob the config sets. l_max 0
// (in a preset or a config) means the sampler's budget max_new_tokens. -1 with a message
// naming the key on error.
int objective_from_config(const Config *c, int max_new_tokens, ObjectiveConfig *out, char *err,
                          size_t errlen);
// The knobs a run log's root attributes list: 0 .. count-1, objective.preset first. Knob i of o:
// returns its key ("objective.std_eps") and sets *kind: 's' a name (the preset, an enum's value)
// in *text, or 'i' an int, 'f' a float, 'b' a bool (0/1) in *num.
int objective_knob_count(void);
const char *objective_knob(int i, const ObjectiveConfig *o, char *kind, const char **text,
                           double *num);
// The config's knobs whose value differs from o's (the knobs objective_from_config resolved
// from c) because the config does not set them: the preset's value is used, not the one the
// config's text shows. Calls each with the key, the kind ('i' int, 'f' float, 'b' bool) and
// the value used, in the order of the knobs; stops with -1 when each returns non-zero, else 0.
int objective_unset_knobs(const Config *c, int max_new_tokens, const ObjectiveConfig *o,
                          int (*each)(void *ctx, const char *key, char kind, double used), void *ctx);
// The knobs of a preset with nothing overridden; -1 if the name is unknown.
int objective_preset(const char *name, int max_new_tokens, ObjectiveConfig *out);
// -1 with a message naming the keys if the knobs do not go together (ratio none needs clip
// none; geo_mean takes clip ppo or none; SAPO's temperatures > 0; l_max >= 1; clip_ratio_c
// 0 or > 1, and only with clip ppo on a token or sequence ratio).
int objective_check(const ObjectiveConfig *o, char *err, size_t errlen);

// What a preset is: its source, its advantage and token weight in the paper's notation, and
// the settings of TRL, verl, OpenRLHF and oat that give the same objective ("none..." where
// none does).
typedef struct {
    const char *name, *source, *advantage, *weight, *trl, *verl, *openrlhf, *oat;
} ObjectiveInfo;
int objective_preset_count(void);
// The releases and commits the framework columns were read at (docs/objectives.md, "Versions").
extern const char OBJECTIVE_MAP_READ_AT[];
// Preset i (0 .. count-1): its description, and its knobs into *knobs if not NULL (l_max 0:
// the sampler's budget). NULL past the end.
const ObjectiveInfo *objective_preset_info(int i, ObjectiveConfig *knobs);

// `grpolab objective` (objective_cli.c): --list, --show NAME, --markdown, --eval FILE.
int objective_cli(int argc, char **argv);
// --eval FILE (objective_eval.c): a batch's advantages and token weights as JSON on stdout;
// 0, or 2 with a message naming the file, line and value.
int objective_eval(const char *path);
// Preset i's knobs, formulas and framework settings as text (--show).
void objective_print_show(int i, FILE *f);
// The tables of docs/objectives.md (--markdown; tests/test_conformance.c keeps them equal).
void objective_print_md(FILE *f);
// A markdown table cell of text s ('|' escaped; objective_table2.c).
void objective_md_cell(const char *s, FILE *f);

// Today's version of the paper's Table 2 (objective_table2.c, --table2): per framework, the
// commit its settings were read at, its default loss aggregation (a preset's), c_i, whether
// it divides by the response length, and the map's settings for grpo and dr_grpo.
void objective_print_table2(FILE *f);
int objective_framework_count(void);
// Framework k's name and default aggregation; -1 past the end.
int objective_framework_default(int k, const char **name, Aggregation *agg);
// 1 if the aggregation's c_i (aggregation_coef) holds 1/|o_i|: two responses of different
// lengths in one minibatch get different coefficients.
int aggregation_divides_by_length(Aggregation agg);

const char *baseline_name(Baseline b);
const char *scale_name(Scale s);
const char *aggregation_name(Aggregation a);
const char *ratio_name(RatioLevel r);
const char *clip_name(ClipStyle c);
const char *scope_name(TokenMeanScope s);

#endif
