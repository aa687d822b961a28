// config.h: grpolab's settings: INI files with [sections], `--set section.key=value`
// overrides, and validation against one schema table (config_schema.c, made from the table
// of settings.h).
//
// File syntax:
//   [section]            header; every key belongs to the last header above it
//   key = value          whitespace around key and value is trimmed
//   # comment, ; comment full line, or after whitespace at the end of a line
//   key = "a \"q\" \\ b" double-quoted value, escapes \" and \\ only; '#' inside is literal
// Types: int (decimal, optional sign), float (finite, decimal strtod syntax: hexadecimal floats
// such as 0x1p3 are refused, as they are for int), bool
// (true/false/1/0/yes/no/on/off, any case), string, enum (one of "a|b|c", any case,
// stored in the schema's spelling). INT and FLOAT values must lie in [min, max].
//
// Errors are returned, never printed: -1 and a message in err that starts with where
// the value came from ("file:line: " or "--set '...': ") and names the key, the value
// and what is allowed. The CLI prints "grpolab: error: <message>" and exits 2.
// A call that fails leaves the Config unchanged.
//
// Adding a setting: one row in the table of settings.h; code reads it as a field of
// config_settings(c). The string-keyed getters below serve tests and code that walks the
// schema (a key named by data, such as a sweep's axis), never a key written in code.
#ifndef GRPOLAB_CONFIG_H
#define GRPOLAB_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "settings.h"

typedef enum { CFG_INT, CFG_FLOAT, CFG_BOOL, CFG_STRING, CFG_ENUM } CfgType;
// The C type of a key's field in Settings.
typedef enum { CFG_C_INT, CFG_C_INT64, CFG_C_DOUBLE, CFG_C_BOOL, CFG_C_STR } CfgCType;

typedef struct {
    const char *section, *key;
    CfgType type;
    const char *def;      // default value as text, parsed like a file value
    double min, max;      // inclusive range for INT and FLOAT (ignored otherwise)
    const char *choices;  // ENUM: "a|b|c" (NULL otherwise)
    const char *help;     // one line, shown by `grpolab config --keys` and docs/config.md
    size_t offset;        // of the key's field in Settings
    size_t set_offset;    // of its flag in SettingsSet
    CfgCType ctype;       // the field's type
} CfgKey;

// The global schema (config_schema.c, made from the table of settings.h).
extern const CfgKey CONFIG_SCHEMA[];
extern const int CONFIG_SCHEMA_LEN;

// The schema row of "section.key", NULL if there is none. Readers of stored values (a
// checkpoint's model.* attributes) check them against its range.
const CfgKey *config_schema_key(const char *name);

typedef struct Config Config;

// A config with every key of CONFIG_SCHEMA at its default. An invalid default in the
// schema is a programming error: die() with the key and the reason.
Config *config_new(void);
void config_free(Config *c);

// Reads an INI file and applies it on top of c. Keys not in the file keep their value.
// 0 ok; -1 and a message (unreadable file, syntax, unknown key, bad value, duplicate key).
int config_load_file(Config *c, const char *path, char *err, size_t errlen);
// Same for INI text in memory; name_for_errors is used as the file name in messages
// (NULL: "<config>"). Used for config text stored in HDF5 run logs.
int config_load_text(Config *c, const char *text, const char *name_for_errors, char *err,
                     size_t errlen);
// The config stored as text in the file at path (a run log's or a checkpoint's 'config'
// attribute), as a new Config; NULL and a message ("the stored config does not read with this
// grpolab: ...") if it does not load. Does not take text.
Config *config_from_stored(const char *text, const char *path, char *err, size_t errlen);
// Applies one command-line override "section.key=value". The value is taken verbatim
// after trimming (no comments); a value wholly in double quotes is unquoted.
int config_set(Config *c, const char *assignment, char *err, size_t errlen);

// The values as typed fields (settings.h), and which keys a file or --set gave. The pointers
// live as long as c; the values they show follow every change of c.
const Settings *config_settings(const Config *c);
const SettingsSet *config_settings_set(const Config *c);

// Typed getters by "section.key". An unknown name, or a getter of the wrong type, is a
// programming error: die(). config_str serves STRING and ENUM keys; the pointer lives
// until the key is next changed or the Config is freed.
int64_t config_int(const Config *c, const char *name);
double config_float(const Config *c, const char *name);
int config_bool(const Config *c, const char *name);
const char *config_str(const Config *c, const char *name);
// The value of an INT or FLOAT key named by data (a sweep's axis) as a double. An unknown name
// or another type is a programming error: die().
double config_number(const Config *c, const char *name);
// 1 if the key was given by a file or --set (even if equal to its default), else 0.
// Unknown name: die().
int config_was_set(const Config *c, const char *name);

// The resolved config as INI text: every key, sections in order of first appearance in
// the schema, keys in schema order; strings quoted; floats in the shortest form that
// reads back to the same double. config_load_text of it gives an equal config.
// malloc'd; the caller frees.
char *config_to_ini(const Config *c);

// Compares two configs key by key (their resolved values, as config_to_ini writes them),
// skipping the "section.key" names in ignore ("section.*" skips a whole section). Returns
// the number of keys that differ and lists them in out as "section.key = <a> vs <b>; ..."
// (cut to outlen; out may be NULL).
int config_diff(const Config *a, const Config *b, const char *const *ignore, int n_ignore,
                char *out, size_t outlen);

// The table of every key, in the schema's order: a header, then per key section.key, type,
// default, allowed values and help. markdown: the Markdown table of docs/config.md (`make
// docs-config` writes it there); else plain text in padded columns.
void config_print_keys(FILE *f, bool markdown);

#endif
