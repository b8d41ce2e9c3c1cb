/* Rules between keys that each pass their own range but contradict each other: the dynamic
 * loss scale's floor, first value and ceiling; a decaying schedule's final learning rate; a
 * preset's depth; text data's classes and augmentation; the norm-layer key and its alias.
 * Each refusal names both keys, each with the place it was given ("FILE:LINE", "--set KEY")
 * or "default". Runs after every key has been read, on the filled mp_config. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "engine/presets.h"
#include "src/config_internal.h"
#include "src/config_schema.h"

/* Where key was given, without the key: "FILE:LINE", "--set KEY" or "default". */
static void given_at(const mp_config *c, const char *key, char *buf, size_t cap)
{
    const char *w = mp_config_where(c, key);
    if (!w) {
        snprintf(buf, cap, "default");
        return;
    }
    size_t n = strlen(w), k = strlen(key);
    if (strncmp(w, "--set ", 6) != 0 && n > k + 2 && strcmp(w + n - k, key) == 0)
        n -= k + 2; /* "FILE:LINE: KEY" */
    snprintf(buf, cap, "%.*s", (int)n, w);
}

/* Refuses lo > hi, blaming the key the user gave (lo's if both or neither were given). */
static mp_status ordered(const mp_config *c, const char *lo_key, double lo, const char *hi_key,
                         double hi, const char *why)
{
    if (lo <= hi)
        return MP_OK;
    bool blame_lo = mp_config_given(c, lo_key) || !mp_config_given(c, hi_key);
    const char *key = blame_lo ? lo_key : hi_key, *other = blame_lo ? hi_key : lo_key;
    const char *where = mp_config_where(c, key);
    char at[700];
    given_at(c, other, at, sizeof at);
    return mp_config_fail("%s: %.10g is %s %s = %.10g (%s): %s", where ? where : key,
                          blame_lo ? lo : hi, blame_lo ? "above" : "below", other,
                          blame_lo ? hi : lo, at, why);
}

int mp_config_preset_specs(const mp_config *c, bool cuda, mp_layer_spec *specs)
{
    const char *attn = c->model.attention;
    mp_preset_args pa = {c->model.hidden, c->model.nhidden, c->model.depth, c->model.widen,
                         c->model.cardinality, c->model.width, c->model.dropout,
                         c->model.dim, c->model.heads, c->model.patch,
                         strcmp(c->model.stem, "conv") == 0,
                         strcmp(attn, "matrix") == 0 || (cuda && strcmp(attn, "auto") == 0)};
    return mp_preset_specs(c->model.preset, &pa, c->data.num_classes, specs);
}

/* A preset must be buildable: mp_preset_specs refuses a depth the architecture cannot have or
 * that needs more layers than a model may hold, or heads that do not divide the width, and
 * says which ("model.<key>: why": the refusal is placed at that key). */
static mp_status preset_buildable(const mp_config *c)
{
    if (c->model.nlayers > 0)
        return MP_OK;
    mp_layer_spec specs[MP_MAX_LAYERS];
    if (mp_config_preset_specs(c, false, specs) >= 0)
        return MP_OK;
    const char *msg = mp_error_message(), *key = "model.preset", *colon = strstr(msg, ": ");
    char named[64];
    if (colon && colon - msg < (ptrdiff_t)sizeof named) {
        snprintf(named, sizeof named, "%.*s", (int)(colon - msg), msg);
        if (mp_config_key_find(named)) {
            key = named;
            msg = colon + 2;
        }
    }
    const char *where = mp_config_where(c, key);
    char at[700];
    given_at(c, "model.preset", at, sizeof at);
    return mp_config_fail("%s: %s (model.preset = \"%s\", %s)", where ? where : key, msg,
                          c->model.preset, at);
}

/* Token shards name their directory and their vocabulary (no default fits anyone's data),
 * have tokens of 2 or 4 bytes, and are not augmented. */
static mp_status token_rules(const mp_config *c)
{
    if (strcmp(c->data.format, "tokens") != 0)
        return MP_OK;
    static const char *const needed[2] = {"data.path", "data.num_classes"};
    static const char *const why[2] = {"the directory of the *.bin shards",
                                       "the vocabulary, e.g. 50257 for GPT-2's tokenizer"};
    for (int k = 0; k < 2; k++)
        if (!mp_config_given(c, needed[k]))
            return mp_config_fail("%s: token data needs %s: give %s", c->path, needed[k],
                                  why[k]);
    if (c->data.token_bytes != 2 && c->data.token_bytes != 4) {
        const char *where = mp_config_where(c, "data.token_bytes");
        return mp_config_fail("%s: tokens are 2 (uint16) or 4 (uint32) bytes (got %lld)",
                              where ? where : "data.token_bytes", (long long)c->data.token_bytes);
    }
    if (c->data.augment) {
        const char *where = mp_config_where(c, "data.augment");
        return mp_config_fail("%s: token data is not augmented (random crop and flip are for "
                              "images): set it false", where ? where : "data.augment");
    }
    return MP_OK;
}

/* HDF5 data and image folders name their file or directory (the default path is a directory
 * of IDX files); folders have 1 or 3 channels. */
static mp_status hdf5_rules(const mp_config *c)
{
    bool h5 = strcmp(c->data.format, "hdf5") == 0, folder = strcmp(c->data.format, "folder") == 0;
    if ((h5 || folder) && !mp_config_given(c, "data.path"))
        return mp_config_fail("%s: %s data needs data.path: give the %s", c->path,
                              c->data.format, h5 ? "HDF5 file" : "folder's root");
    if (folder && c->data.channels == 2) {
        const char *where = mp_config_where(c, "data.channels");
        return mp_config_fail("%s: image folders have 1 (luminance) or 3 (RGB) channels",
                              where ? where : "data.channels");
    }
    if (folder && c->data.resize > 0 && c->data.resize < c->data.image_size) {
        const char *where = mp_config_where(c, "data.resize");
        return mp_config_fail("%s: test images are resized to at least data.image_size = %lld "
                              "before the centre crop (got %lld; 0 = image_size / 0.875)",
                              where ? where : "data.resize", (long long)c->data.image_size,
                              (long long)c->data.resize);
    }
    return MP_OK;
}

/* Text data has the 256 byte values as classes and is never augmented (the random crop and
 * flip are for images). */
static mp_status text_rules(const mp_config *c)
{
    if (strcmp(c->data.format, "text") != 0)
        return MP_OK;
    if (c->data.num_classes != 256) {
        const char *where = mp_config_where(c, "data.num_classes");
        return mp_config_fail("%s: text data has 256 classes, the byte values (got %lld; leave "
                              "it unset)", where ? where : "data.num_classes",
                              (long long)c->data.num_classes);
    }
    if (c->data.augment) {
        const char *where = mp_config_where(c, "data.augment");
        return mp_config_fail("%s: text data is not augmented (random crop and flip are for "
                              "images): set it false", where ? where : "data.augment");
    }
    return MP_OK;
}

/* amp.keep_batchnorm_fp32 is an alias of amp.keep_norm_fp32: both may be given only alike. */
static mp_status norm_alias(const mp_config *c)
{
    if (!mp_config_given(c, "amp.keep_norm_fp32") ||
        !mp_config_given(c, "amp.keep_batchnorm_fp32") ||
        c->amp.keep_norm_fp32 == c->amp.keep_batchnorm_fp32)
        return MP_OK;
    char at[700];
    given_at(c, "amp.keep_norm_fp32", at, sizeof at);
    return mp_config_fail("%s: %s contradicts amp.keep_norm_fp32 = %s (%s), of which it is the "
                          "older name", mp_config_where(c, "amp.keep_batchnorm_fp32"),
                          c->amp.keep_batchnorm_fp32 ? "true" : "false",
                          c->amp.keep_norm_fp32 ? "true" : "false", at);
}

mp_status mp_config_check_rules(const mp_config *c)
{
    MP_TRY(norm_alias(c));
    MP_TRY(text_rules(c));
    MP_TRY(token_rules(c));
    MP_TRY(hdf5_rules(c));
    MP_TRY(ordered(c, "amp.min_scale", c->amp.min_scale, "amp.max_scale", c->amp.max_scale,
                   "the loss scale's floor cannot be above its ceiling"));
    if (c->amp.loss_scale == 0.0) { /* dynamic: the scaler starts at init_scale unclamped */
        MP_TRY(ordered(c, "amp.init_scale", c->amp.init_scale, "amp.max_scale",
                       c->amp.max_scale,
                       "the first loss scale must lie in [amp.min_scale, amp.max_scale]"));
        MP_TRY(ordered(c, "amp.min_scale", c->amp.min_scale, "amp.init_scale",
                       c->amp.init_scale,
                       "the first loss scale must lie in [amp.min_scale, amp.max_scale]"));
    }
    if (strcmp(c->schedule.type, "cosine") == 0 || strcmp(c->schedule.type, "linear") == 0)
        MP_TRY(ordered(c, "schedule.min_lr", c->schedule.min_lr, "optim.lr", c->optim.lr,
                       "a cosine or linear schedule decays from optim.lr down to min_lr"));
    return preset_buildable(c);
}
