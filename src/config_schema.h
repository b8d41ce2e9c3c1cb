/* The configuration schema, internal to src/config*.c: one table entry per key with its type,
 * default, bounds, allowed strings, meaning and the mp_config field it fills (by offset), so
 * reading, checking, printing and documenting are all driven by the same table.
 * Invariants: every key's path is "<group>.<name>" with <group> in mp_config_groups; a key's
 * default satisfies its own constraints; the field at `offset` has the type its kind implies
 * (int64_t, double, bool, char[size]). */
#ifndef MP_CONFIG_SCHEMA_H
#define MP_CONFIG_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum mp_key_type {
    MP_KEY_INT,       /* int64_t; libconfig int or int64 */
    MP_KEY_FLOAT,     /* double; libconfig float, or int (converted) */
    MP_KEY_BOOL,      /* bool */
    MP_KEY_STRING,    /* char[size], NUL-terminated */
    MP_KEY_INT_ARRAY, /* int64_t[max_count] plus an int count at count_offset */
    MP_KEY_LAYERS,    /* mp_layer_spec[max_count] plus an int count; entries use mp_layer_keys */
    MP_KEY_SCALE      /* double: a number within bounds, or the key's word (stored as 0) */
} mp_key_type;

typedef enum mp_bound {
    MP_BOUND_NONE = 0,
    MP_BOUND_INCL, /* value may equal the bound */
    MP_BOUND_EXCL  /* value must differ from the bound */
} mp_bound;

/* Key flags. */
#define MP_KEY_NONEMPTY 1u /* string: must not be "" */
#define MP_KEY_IDENT 2u    /* string: only [A-Za-z0-9_.] */
#define MP_KEY_PRESET 4u   /* a parameter of the preset model: conflicts with model.layers */

#define MP_KEY_MAX_ALLOWED 24

typedef struct mp_key {
    const char *path;    /* "optim.lr"; for mp_layer_keys the name inside one layer ("out") */
    mp_key_type type;
    const char *def;     /* default in libconfig syntax; NULL: no default (absent = unset) */
    mp_bound lo, hi;     /* bounds on numbers (on each element for int arrays) */
    double min, max;
    const char *allowed[MP_KEY_MAX_ALLOWED + 1]; /* strings: NULL-terminated; none = any */
    unsigned flags;
    size_t offset, size;  /* the field inside mp_config (mp_layer_spec for layer keys) */
    size_t count_offset;  /* arrays: the int count field */
    int max_count;        /* arrays: at most this many entries (at least 1) */
    const char *meaning;  /* one line for the reference table */
    const char *word;     /* MP_KEY_SCALE: the word that stands for 0 ("dynamic", "world") */
} mp_key;

/* Every top-level key, grouped by group in mp_config_groups order. */
extern const mp_key mp_config_keys[];
extern const int mp_config_nkeys;

/* The keys of one entry of model.layers; offsets are into mp_layer_spec. */
extern const mp_key mp_layer_keys[];
extern const int mp_layer_nkeys;

/* How layer `type` takes layer key `key`: 0 not allowed, 1 optional, 2 required ("type" and
 * "name" are allowed for every type). */
int mp_layer_key_rule(const char *type, const char *key);

/* The accepted top-level groups, in the order the resolved text prints them. */
extern const char *const mp_config_groups[];
extern const int mp_config_ngroups;

/* The entry for dotted `path` in mp_config_keys, or NULL. */
const mp_key *mp_config_key_find(const char *path);

/* The entry named `name` in mp_layer_keys, or NULL. */
const mp_key *mp_layer_key_find(const char *name);

/* True when `name` is one of mp_config_groups. */
bool mp_config_group_known(const char *name);

/* Room for any key's constraint text (the longest: the layer types' list). */
#define MP_KEY_RULE_MAX 512

/* Writes k's constraint as text ("in [1, 65536]", "> 0", "one of \"O0\", \"O1\""; "" if none)
 * into buf (always NUL-terminated; MP_KEY_RULE_MAX holds any). */
void mp_key_describe(const mp_key *k, char *buf, size_t cap);

/* The name of k's type as messages and the reference print it ("int", "int array", ...). */
const char *mp_key_type_name(mp_key_type t);

/* True when `v` satisfies k's bounds. */
bool mp_key_in_range(const mp_key *k, double v);

/* A known name (full key path or group; a layer key when `layer` is true) to suggest for the
 * unknown `name`: one edit away, else a key with the same last part in another group ("lr" ->
 * "optim.lr"), else two edits away (one for names of up to 3 characters); NULL if none. */
const char *mp_config_suggest(const char *name, bool layer);

#endif
