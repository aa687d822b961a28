// config_schema.c: the config schema, one row per setting of the table in settings.h (see
// config.h), each with where its value goes in Settings.
#include <stddef.h>

#include "config.h"

// The C type of a Settings field (settings.h's C type column).
#define CTYPE_OF(sec, key)                                                                    \
    _Generic(((Settings *)0)->sec.key, int: CFG_C_INT, int64_t: CFG_C_INT64,                  \
             double: CFG_C_DOUBLE, bool: CFG_C_BOOL, const char *: CFG_C_STR)
#define SCHEMA_ROW(sec, key, type, ctype, def, min, max, choices, help)                        \
    {#sec, #key, CFG_##type, def, min, max, choices, help, offsetof(Settings, sec.key),       \
     offsetof(SettingsSet, sec.key), CTYPE_OF(sec, key)},

const CfgKey CONFIG_SCHEMA[] = {SETTINGS_ROWS(SCHEMA_ROW)};

const int CONFIG_SCHEMA_LEN = (int)(sizeof CONFIG_SCHEMA / sizeof CONFIG_SCHEMA[0]);
