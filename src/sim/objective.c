// objective.c: the table of presets and the [objective] config section (objective.h).
#include "objective.h"

#include <stdio.h>
#include <string.h>

#include "../common.h"

static const char *const BASELINE_NAMES[] = {"group_mean", "leave_one_out"};
static const char *const SCALE_NAMES[] = {"group_std", "batch_std", "none"};
static const char *const AGG_NAMES[] = {"seq_mean_token_mean", "seq_mean_token_sum_norm",
                                        "token_mean", "seq_mean_token_sum"};

const char *baseline_name(Baseline b) { return BASELINE_NAMES[b]; }
const char *scale_name(Scale s) { return SCALE_NAMES[s]; }
const char *aggregation_name(Aggregation a) { return AGG_NAMES[a]; }

static int find_name(const char *const *names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

// The presets: every knob's default, one row each (docs/config.md, "Objective presets").
// std_ddof 1 is what the paper's code (oat), TRL and verl use; l_max 0 is the sampler's
// budget; dapo's eps_high 0.28 is DAPO's clip-higher.
static const ObjectiveConfig PRESETS[] = {
    // preset, baseline, scale, std_ddof, std_eps, aggregation, l_max, eps_low, eps_high, beta,
    // dynamic_sampling
    {"grpo",    BASELINE_GROUP_MEAN,    SCALE_GROUP_STD, 1, 1e-6f, AGG_SEQ_MEAN_TOKEN_MEAN,     0, 0.2f, 0.2f,  0.0f, 0},
    {"dr_grpo", BASELINE_GROUP_MEAN,    SCALE_NONE,      1, 1e-6f, AGG_SEQ_MEAN_TOKEN_SUM_NORM, 0, 0.2f, 0.2f,  0.0f, 0},
    {"dapo",    BASELINE_GROUP_MEAN,    SCALE_GROUP_STD, 1, 1e-6f, AGG_TOKEN_MEAN,              0, 0.2f, 0.28f, 0.0f, 0},
    {"rloo",    BASELINE_LEAVE_ONE_OUT, SCALE_NONE,      1, 1e-6f, AGG_SEQ_MEAN_TOKEN_SUM,      0, 0.2f, 0.2f,  0.0f, 0},
};
#define N_PRESETS (int)(sizeof PRESETS / sizeof PRESETS[0])

int objective_preset(const char *name, int max_new_tokens, ObjectiveConfig *o) {
    for (int i = 0; i < N_PRESETS; i++) {
        if (strcmp(PRESETS[i].preset, name) != 0) continue;
        *o = PRESETS[i];
        if (o->l_max == 0) o->l_max = max_new_tokens;
        return 0;
    }
    return -1;
}

int objective_from_config(const Config *c, int max_new_tokens, ObjectiveConfig *o, char *err,
                          size_t errlen) {
    const char *preset = config_str(c, "objective.preset");
    if (objective_preset(preset, max_new_tokens, o) != 0)  // the schema admits only presets
        return set_err(err, errlen, "objective.preset = '%s': no such preset", preset);
    // enum knobs: "preset" keeps the preset's value (the schema admits only known names)
    const char *s = config_str(c, "objective.baseline");
    if (strcmp(s, "preset") != 0) o->baseline = (Baseline)find_name(BASELINE_NAMES, 2, s);
    s = config_str(c, "objective.scale");
    if (strcmp(s, "preset") != 0) o->scale = (Scale)find_name(SCALE_NAMES, 3, s);
    s = config_str(c, "objective.aggregation");
    if (strcmp(s, "preset") != 0) o->aggregation = (Aggregation)find_name(AGG_NAMES, 4, s);
    // other knobs: the config's value only where the config sets one
    if (config_was_set(c, "objective.std_ddof")) o->std_ddof = (int)config_int(c, "objective.std_ddof");
    if (config_was_set(c, "objective.std_eps")) o->std_eps = (float)config_float(c, "objective.std_eps");
    if (config_was_set(c, "objective.l_max")) {
        int l_max = (int)config_int(c, "objective.l_max");
        o->l_max = l_max > 0 ? l_max : max_new_tokens;
    }
    if (config_was_set(c, "objective.eps_low")) o->eps_low = (float)config_float(c, "objective.eps_low");
    if (config_was_set(c, "objective.eps_high")) o->eps_high = (float)config_float(c, "objective.eps_high");
    if (config_was_set(c, "objective.beta")) o->beta = (float)config_float(c, "objective.beta");
    if (config_was_set(c, "objective.dynamic_sampling"))
        o->dynamic_sampling = config_bool(c, "objective.dynamic_sampling");
    if (o->l_max < 1)
        return set_err(err, errlen, "objective.l_max = %d: must be >= 1 (0 = the sampler's budget)", o->l_max);
    return 0;
}
