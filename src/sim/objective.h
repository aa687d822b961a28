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

#include "../kernels/objective.h"
#include "config.h"

// The [objective] section: the preset's knobs, then each knob the config sets. l_max 0
// (in a preset or a config) means the sampler's budget max_new_tokens. -1 with a message
// naming the key on error.
int objective_from_config(const Config *c, int max_new_tokens, ObjectiveConfig *out, char *err,
                          size_t errlen);
// The knobs of a preset with nothing overridden; -1 if the name is unknown.
int objective_preset(const char *name, int max_new_tokens, ObjectiveConfig *out);
const char *baseline_name(Baseline b);
const char *scale_name(Scale s);
const char *aggregation_name(Aggregation a);

#endif
