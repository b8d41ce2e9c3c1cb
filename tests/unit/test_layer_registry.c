/* The layer registry (engine/layer_list.h) is the one list of layer types: every entry is the
 * config's, in order, with exactly its keys (required ones required); every layer key of the
 * schema is taken by some type; a config naming each type with its required keys loads, and the
 * model it describes builds on the CPU with a layer of that type; and configs/README.md and
 * docs/usage.md name every type. A type added to the list without its make function fails to
 * link; one whose make function builds another class fails here. */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h"
#include "src/config.h"
#include "src/config_schema.h"

#define MP_LAYER_KEYS(...) __VA_ARGS__
static const struct {
    const char *type;
    int nrequired;
    const char *keys[8];
} REGISTRY[] = {
#define MP_LAYER(type, make, nrequired, keys) {#type, nrequired, {MP_LAYER_KEYS keys}},
#include "engine/layer_list.h"
};
enum { NTYPES = sizeof REGISTRY / sizeof REGISTRY[0] };

/* How many keys REGISTRY[i] lists. */
static int nkeys(int i)
{
    int n = 0;
    while (n < 8 && REGISTRY[i].keys[n])
        n++;
    return n;
}

static void test_config_types_are_the_registry(void **state)
{
    (void)state;
    const mp_key *type = mp_layer_key_find("type");
    assert_non_null(type);
    int n = 0;
    while (type->allowed[n])
        n++;
    assert_int_equal(n, NTYPES);
    for (int i = 0; i < NTYPES; i++)
        assert_string_equal(type->allowed[i], REGISTRY[i].type);
}

static void test_keys_are_the_registry(void **state)
{
    (void)state;
    for (int i = 0; i < NTYPES; i++) {
        for (int j = 0; j < nkeys(i); j++) {
            assert_non_null(mp_layer_key_find(REGISTRY[i].keys[j]));
            assert_int_equal(mp_layer_key_rule(REGISTRY[i].type, REGISTRY[i].keys[j]),
                             j < REGISTRY[i].nrequired ? 2 : 1);
        }
        for (int k = 0; k < mp_layer_nkeys; k++) { /* and no other key */
            const char *key = mp_layer_keys[k].path;
            bool listed = strcmp(key, "type") == 0 || strcmp(key, "name") == 0;
            for (int j = 0; j < nkeys(i); j++)
                listed = listed || strcmp(key, REGISTRY[i].keys[j]) == 0;
            if (listed != (mp_layer_key_rule(REGISTRY[i].type, key) > 0))
                fail_msg("%s: key %s allowed %d, listed %d", REGISTRY[i].type, key,
                         !listed, listed);
        }
    }
    for (int k = 0; k < mp_layer_nkeys; k++) { /* every key has a type that takes it */
        bool used = false;
        for (int i = 0; i < NTYPES; i++)
            used = used || mp_layer_key_rule(REGISTRY[i].type, mp_layer_keys[k].path) > 0;
        if (!used)
            fail_msg("layer key %s is taken by no registered type", mp_layer_keys[k].path);
    }
}

/* A value for each key a type may require. */
static const char *required_value(const char *key)
{
    if (strcmp(key, "kernel") == 0)
        return "2";
    if (strcmp(key, "p") == 0)
        return "0.1";
    if (strcmp(key, "width") == 0)
        return "4";
    return "8"; /* out */
}

/* The layers around type i, so that the model is whole: token models start with an embedding
 * and end with a per-token head; the others take 8x8x8 images and end with a classifier. */
static bool tokens(const char *type)
{
    return strcmp(type, "embedding") == 0 || strcmp(type, "posembed") == 0 ||
           strcmp(type, "attention") == 0 || strcmp(type, "transformer") == 0;
}

/* Loads a config whose model.layers has type i between its context's layers, and builds its
 * model on the CPU: the layer at type i's place must be of its class. */
static void build_one(int i)
{
    const char *t = REGISTRY[i].type;
    char layer[256] = "", text[1024], path[1200];
    snprintf(layer, sizeof layer, "{ type = \"%s\";", t);
    for (int j = 0; j < REGISTRY[i].nrequired; j++)
        snprintf(layer + strlen(layer), sizeof layer - strlen(layer), " %s = %s;",
                 REGISTRY[i].keys[j], required_value(REGISTRY[i].keys[j]));
    if (strcmp(t, "attention") == 0 || strcmp(t, "transformer") == 0)
        snprintf(layer + strlen(layer), sizeof layer - strlen(layer), " heads = 2;");
    strcat(layer, " }");
    const char *pre = "", *post = "{ type = \"flatten\"; }, { type = \"linear\"; out = 10; }";
    if (tokens(t)) {
        pre = strcmp(t, "embedding") == 0   ? ""
              : strcmp(t, "attention") == 0 ? "{ type = \"embedding\"; out = 48; },"
                                            : "{ type = \"embedding\"; out = 16; },";
        post = "{ type = \"linear\"; out = 10; per_token = true; }";
    }
    snprintf(text, sizeof text, "model = { layers = ( %s %s, %s ); };\n", pre, layer, post);
    snprintf(path, sizeof path, "%s/%s.cfg", mp_test_dir("test_layer_registry"), t);
    mp_test_write_file(path, text, strlen(text), 0);
    mp_config c;
    if (mp_config_load(&c, path, NULL, 0) != MP_OK)
        fail_msg("%s: %s (config: %s)", t, mp_error_message(), text);
    int at = pre[0] ? 1 : 0;
    assert_string_equal(c.model.layers[at].type, t);
    int64_t in[3] = {8, 8, 8}, tok[3] = {1, 8, 1};
    mp_model m;
    memset(&m, 0, sizeof m);
    if (mp_model_build(&m, mp_backend_cpu(), c.model.layers, c.model.nlayers,
                       tokens(t) ? tok : in, 10, 4, NULL) != MP_OK)
        fail_msg("%s: %s (config: %s)", t, mp_error_message(), text);
    const char *built = m.layers[at].cls->type;
    bool block = strcmp(built, "residual") == 0; /* basic, bottleneck and wide */
    if (strcmp(built, t) != 0 && !block)
        fail_msg("type %s built a %s layer", t, built);
    mp_model_free(&m);
    mp_config_free(&c);
}

static void test_every_type_loads_and_builds(void **state)
{
    (void)state;
    for (int i = 0; i < NTYPES; i++)
        build_one(i);
}

/* The whole file at path, NUL-terminated (fails the test when it cannot be read). */
static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (int ch; (ch = fgetc(f)) != EOF;) {
        if (len + 2 > cap)
            buf = realloc(buf, cap = cap ? 2 * cap : 65536);
        assert_non_null(buf);
        buf[len++] = (char)ch;
    }
    fclose(f);
    if (!buf)
        buf = calloc(1, 1);
    buf[len] = '\0';
    return buf;
}

/* Whether the file at MPDIST_SRC/rel names every type as "`type`" or "\"type\"". */
static void names_every_type(const char *rel)
{
    const char *src = getenv("MPDIST_SRC");
    if (!src)
        skip();
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", src, rel);
    char *doc = read_all(path);
    for (int i = 0; i < NTYPES; i++) {
        char tick[64], quote[64];
        snprintf(tick, sizeof tick, "`%s`", REGISTRY[i].type);
        snprintf(quote, sizeof quote, "\"%s\"", REGISTRY[i].type);
        if (!strstr(doc, tick) && !strstr(doc, quote))
            fail_msg("%s does not name the layer type %s", rel, REGISTRY[i].type);
    }
    free(doc);
}

static void test_docs_name_every_type(void **state)
{
    (void)state;
    names_every_type("configs/README.md");
    names_every_type("docs/usage.md");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_types_are_the_registry),
        cmocka_unit_test(test_keys_are_the_registry),
        cmocka_unit_test(test_every_type_loads_and_builds),
        cmocka_unit_test(test_docs_name_every_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
