// objective.c: presets, the [objective] config section, and the batch-level loop of the
// advantages. Every formula is in objective.h.
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

// The presets of DESIGN.md's table: only defaults for the independent knobs.
int objective_preset(const char *name, int max_new_tokens, ObjectiveConfig *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->preset, sizeof o->preset, "%s", name);
    o->std_ddof = 1;  // what the paper's code (oat), TRL and verl use
    o->std_eps = 1e-6f;
    o->l_max = max_new_tokens;
    o->eps_low = 0.2f;
    o->eps_high = 0.2f;
    if (strcmp(name, "grpo") == 0) {
        o->baseline = BASELINE_GROUP_MEAN;
        o->scale = SCALE_GROUP_STD;
        o->aggregation = AGG_SEQ_MEAN_TOKEN_MEAN;
    } else if (strcmp(name, "dr_grpo") == 0) {
        o->baseline = BASELINE_GROUP_MEAN;
        o->scale = SCALE_NONE;
        o->aggregation = AGG_SEQ_MEAN_TOKEN_SUM_NORM;
    } else if (strcmp(name, "dapo") == 0) {
        o->baseline = BASELINE_GROUP_MEAN;
        o->scale = SCALE_GROUP_STD;
        o->aggregation = AGG_TOKEN_MEAN;
        o->eps_high = 0.28f;  // clip-higher
    } else if (strcmp(name, "rloo") == 0) {
        o->baseline = BASELINE_LEAVE_ONE_OUT;
        o->scale = SCALE_NONE;
        o->aggregation = AGG_SEQ_MEAN_TOKEN_SUM;
    } else {
        return -1;
    }
    return 0;
}

int objective_from_config(const Config *c, int max_new_tokens, ObjectiveConfig *o, char *err,
                          size_t errlen) {
    const char *preset = config_str(c, "objective.preset");
    if (objective_preset(preset, max_new_tokens, o) != 0)
        return set_err(err, errlen, "objective.preset = '%s': not one of grpo|dr_grpo|dapo|rloo", preset);
    const char *s = config_str(c, "objective.baseline");
    if (strcmp(s, "preset") != 0) o->baseline = (Baseline)find_name(BASELINE_NAMES, 2, s);
    s = config_str(c, "objective.scale");
    if (strcmp(s, "preset") != 0) o->scale = (Scale)find_name(SCALE_NAMES, 3, s);
    s = config_str(c, "objective.aggregation");
    if (strcmp(s, "preset") != 0) o->aggregation = (Aggregation)find_name(AGG_NAMES, 4, s);
    o->std_ddof = (int)config_int(c, "objective.std_ddof");
    o->std_eps = (float)config_float(c, "objective.std_eps");
    int l_max = (int)config_int(c, "objective.l_max");
    if (l_max > 0) o->l_max = l_max;
    o->eps_low = (float)config_float(c, "objective.eps_low");
    if (config_was_set(c, "objective.eps_high") || strcmp(o->preset, "dapo") != 0)
        o->eps_high = (float)config_float(c, "objective.eps_high");
    o->beta = (float)config_float(c, "objective.beta");
    o->dynamic_sampling = config_bool(c, "objective.dynamic_sampling");
    if (o->l_max < 1)
        return set_err(err, errlen, "objective.l_max = %d: must be >= 1 (0 = the sampler's budget)", o->l_max);
    return 0;
}

void compute_advantages(const ObjectiveConfig *oc, const float *rewards, int P, int G, float *adv,
                        float *group_mean, float *group_std) {
    double batch_std = oc->scale == SCALE_BATCH_STD ? reward_std(rewards, P * G, oc->std_ddof) : 0;
    for (int g = 0; g < P; g++)
        group_advantages(oc, rewards + (size_t)g * G, G, batch_std, adv + (size_t)g * G,
                         group_mean ? group_mean + g : NULL, group_std ? group_std + g : NULL);
}
