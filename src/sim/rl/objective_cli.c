// objective_cli.c: `grpolab objective` (objective.h): the presets' knobs, formulas and the
// settings of other frameworks, as text for the terminal and as docs/objectives.md's table.
#include <stdio.h>
#include <string.h>

#include "../io/cli.h"
#include "objective.h"

// One line of a preset's knobs (l_max 0: the sampler's budget).
static void print_knobs(const ObjectiveConfig *o, FILE *f) {
    fprintf(f, "baseline=%s scale=%s aggregation=%s token_mean_scope=%s ratio=%s clip=%s "
            "eps_low=%g eps_high=%g", baseline_name(o->baseline), scale_name(o->scale),
            aggregation_name(o->aggregation), scope_name(o->scope), ratio_name(o->ratio),
            clip_name(o->clip), o->eps_low, o->eps_high);
    if (o->clip == CLIP_SAPO) fprintf(f, " tau_pos=%g tau_neg=%g", o->tau_pos, o->tau_neg);
    if (o->clip_ratio_c != 0) fprintf(f, " clip_ratio_c=%g", o->clip_ratio_c);
}

void objective_print_show(int i, FILE *f) {
    ObjectiveConfig o;
    const ObjectiveInfo *in = objective_preset_info(i, &o);
    fprintf(f, "%s: %s\n", in->name, in->source);
    fprintf(f, "  knobs:     ");
    print_knobs(&o, f);
    fprintf(f, "\n            std_ddof=%d std_eps=%g l_max=%s beta=%g dynamic_sampling=%s\n",
            o.std_ddof, o.std_eps, o.l_max ? "(set)" : "0 (world.max_new_tokens)", o.beta,
            o.dynamic_sampling ? "true" : "false");
    fprintf(f, "  advantage: %s\n", in->advantage);
    fprintf(f, "  weight:    %s\n", in->weight);
    fprintf(f, "  TRL:       %s\n", in->trl);
    fprintf(f, "  verl:      %s\n", in->verl);
    fprintf(f, "  OpenRLHF:  %s\n", in->openrlhf);
    fprintf(f, "  oat:       %s\n", in->oat);
    fprintf(f, "  read at:   %s\n", OBJECTIVE_MAP_READ_AT);
}

void objective_print_md(FILE *f) {
    fprintf(f, "| preset | knobs | advantage A_i | token weight w = -dL/dlog pi | source |\n");
    fprintf(f, "|---|---|---|---|---|\n");
    for (int i = 0; i < objective_preset_count(); i++) {
        ObjectiveConfig o;
        const ObjectiveInfo *in = objective_preset_info(i, &o);
        char knobs[512];
        FILE *m = fmemopen(knobs, sizeof knobs, "w");
        print_knobs(&o, m);
        fputc('\0', m);
        fclose(m);
        objective_md_cell(in->name, f);
        objective_md_cell(knobs, f);
        objective_md_cell(in->advantage, f);
        objective_md_cell(in->weight, f);
        objective_md_cell(in->source, f);
        fprintf(f, "|\n");
    }
    fprintf(f, "\n| preset | TRL | verl | OpenRLHF | oat |\n|---|---|---|---|---|\n");
    for (int i = 0; i < objective_preset_count(); i++) {
        const ObjectiveInfo *in = objective_preset_info(i, NULL);
        objective_md_cell(in->name, f);
        objective_md_cell(in->trl, f);
        objective_md_cell(in->verl, f);
        objective_md_cell(in->openrlhf, f);
        objective_md_cell(in->oat, f);
        fprintf(f, "|\n");
    }
}

int objective_cli(int argc, char **argv) {
    static const CliOption opts[] = {
        {"list", NULL, "list the presets, one line each"},
        {"show", "NAME", "a preset's knobs, formulas and the settings of TRL, verl, OpenRLHF and oat"},
        {"markdown", NULL, "the tables of docs/objectives.md"},
        {"table2", NULL, "the paper's Table 2 today: each framework's default loss and whether it divides by the response length"},
        {"eval", "FILE", "a batch's advantages and token weights under a preset, as JSON "
                         "(the input format: src/sim/rl/objective_eval.c; scripts/conformance.py)"},
    };
    static const CliSpec spec = {"objective", "The objective presets (src/sim/rl/objective.c): their knobs, "
                                 "advantage and token-weight formulas, and the same objective's "
                                 "settings in other frameworks.",
                                 "--list | --show NAME | --markdown | --table2 | --eval FILE", opts, 5, 0, NULL};
    CliArgs a;
    int rc = cli_parse(&spec, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : 2;
    const char *name = cli_get(&spec, &a, "show"), *eval = cli_get(&spec, &a, "eval");
    int list = cli_flag(&spec, &a, "list"), md = cli_flag(&spec, &a, "markdown");
    int table2 = cli_flag(&spec, &a, "table2");
    if ((name != NULL) + (eval != NULL) + list + md + table2 != 1) {
        fprintf(stderr, "grpolab objective: error: give one of --list, --show NAME, --markdown, --table2, "
                "--eval FILE\n");
        return 2;
    }
    if (table2) {
        objective_print_table2(stdout);
        return 0;
    }
    if (eval) return objective_eval(eval);
    if (md) {
        objective_print_md(stdout);
        return 0;
    }
    for (int i = 0; i < objective_preset_count(); i++) {
        ObjectiveConfig o;
        const ObjectiveInfo *in = objective_preset_info(i, &o);
        if (list) {
            printf("%-22s ratio %-8s clip %-5s baseline %-15s scale %-12s aggregation %s\n", in->name,
                   ratio_name(o.ratio), clip_name(o.clip), baseline_name(o.baseline),
                   scale_name(o.scale), aggregation_name(o.aggregation));
        } else if (strcmp(in->name, name) == 0) {
            objective_print_show(i, stdout);
            return 0;
        }
    }
    if (list) return 0;
    fprintf(stderr, "grpolab objective: error: no preset '%s' (grpolab objective --list)\n", name);
    return 2;
}
