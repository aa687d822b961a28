// objective_table2.c: `grpolab objective --table2`, today's version of the paper's Table 2
// (which PPO/GRPO implementations divide the loss by the response length), generated from the
// preset map (objective.c): each framework's default loss aggregation is a preset's, its
// per-token coefficient c_i is kernels/objective.h's aggregation_coef, and its settings for
// the length-normalised (grpo) and the unbiased (dr_grpo) loss are the map's framework columns.
#include <stdio.h>
#include <string.h>

#include "objective.h"

void objective_md_cell(const char *s, FILE *f) {
    fputs("| ", f);
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s, f);
    }
    fputc(' ', f);
}

// What each framework does when its GRPO loss is left at its defaults, as read at a commit.
// preset: the preset whose aggregation (the only knob Table 2 is about) is that default.
typedef struct {
    const char *name, *repo, *commit, *setting, *preset;
} FrameworkDefault;

static const FrameworkDefault FRAMEWORKS[] = {
    {"TRL", "huggingface/trl", "006d32c",
     "GRPOConfig loss_type=\"dapo\" (trl/trainer/grpo_config.py)", "dapo"},
    {"verl", "volcengine/verl", "03d67c6",
     "actor.loss_agg_mode=token-mean (verl/trainer/config/actor/actor.yaml)", "dapo"},
    {"OpenRLHF", "OpenRLHF/OpenRLHF", "3c3be62",
     "--actor.policy_loss_type ppo: a token-mean over the optimizer step (openrlhf/models/loss.py)", "dapo"},
    {"oat", "sail-sg/oat", "c1a074c",
     "critic_type=drgrpo: token sum / generate_max_length (oat/args.py, oat/algorithms/ppo.py)", "dr_grpo"},
};
#define N_FRAMEWORKS (int)(sizeof FRAMEWORKS / sizeof FRAMEWORKS[0])

int objective_framework_count(void) { return N_FRAMEWORKS; }

// The preset index of a name, -1 if none.
static int preset_index(const char *name) {
    for (int i = 0; i < objective_preset_count(); i++)
        if (strcmp(objective_preset_info(i, NULL)->name, name) == 0) return i;
    return -1;
}

int objective_framework_default(int k, const char **name, Aggregation *agg) {
    if (k < 0 || k >= N_FRAMEWORKS) return -1;
    ObjectiveConfig o;
    if (objective_preset(FRAMEWORKS[k].preset, 300, &o) != 0) return -1;
    if (name) *name = FRAMEWORKS[k].name;
    if (agg) *agg = o.aggregation;
    return 0;
}

int aggregation_divides_by_length(Aggregation agg) {
    // c_i of two responses of different lengths in the same minibatch (the same M, the same
    // total of tokens and the same L_max): it differs exactly when c_i holds 1/|o_i|
    return aggregation_coef(agg, 8, 10, 1000.0, 300) != aggregation_coef(agg, 8, 20, 1000.0, 300);
}

// The c_i of an aggregation in the notation of docs/objectives.md.
static const char *coef_text(Aggregation a) {
    switch (a) {
        case AGG_SEQ_MEAN_TOKEN_MEAN: return "1 / (M \\|o_i\\|)";
        case AGG_SEQ_MEAN_TOKEN_SUM_NORM: return "1 / (M L_max)";
        case AGG_TOKEN_MEAN: return "1 / sum_j \\|o_j\\|";
        case AGG_SEQ_MEAN_TOKEN_SUM: return "1 / M";
        case AGG_TOKEN_SUM: default: return "1";
    }
}

// The framework's column of preset i in the map.
static const char *column(const ObjectiveInfo *in, int k) {
    switch (k) {
        case 0: return in->trl;
        case 1: return in->verl;
        case 2: return in->openrlhf;
        default: return in->oat;
    }
}

void objective_print_table2(FILE *f) {
    int grpo = preset_index("grpo"), dr = preset_index("dr_grpo");
    const ObjectiveInfo *gi = objective_preset_info(grpo, NULL), *di = objective_preset_info(dr, NULL);
    fprintf(f, "| framework | default read at | default loss | = preset's aggregation | c_i | divides by \\|o_i\\| | "
            "the per-response mean (grpo) | the unbiased loss (dr_grpo) |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < N_FRAMEWORKS; k++) {
        const FrameworkDefault *fw = &FRAMEWORKS[k];
        Aggregation agg;
        if (objective_framework_default(k, NULL, &agg) != 0) {
            fprintf(f, "| %s | preset '%s' is not in the map |\n", fw->name, fw->preset);
            continue;
        }
        char at[96], agg_cell[96];
        snprintf(at, sizeof at, "%s@%s", fw->repo, fw->commit);
        snprintf(agg_cell, sizeof agg_cell, "%s (%s)", fw->preset, aggregation_name(agg));
        objective_md_cell(fw->name, f);
        objective_md_cell(at, f);
        objective_md_cell(fw->setting, f);
        objective_md_cell(agg_cell, f);
        fprintf(f, "| %s ", coef_text(agg));
        objective_md_cell(aggregation_divides_by_length(agg) ? "yes" : "no", f);
        objective_md_cell(column(gi, k), f);
        objective_md_cell(column(di, k), f);
        fprintf(f, "|\n");
    }
}
