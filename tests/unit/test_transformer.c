/* Transformer models as the engine builds them: FP64 finite-difference checks of every parameter
 * of a tiny byte-level GPT (token and position embeddings, a causal pre-LN block with dropout
 * on the probabilities and both branches, the final LayerNorm and a head tied to the token
 * embedding, so the shared weight's gradient is the sum of both uses) and of a tiny ViT (patch
 * convolution, position embedding, a non-causal block, LayerNorm, mean pooling, linear); the
 * causal mask through a whole block (a later position never reaches an earlier output, exactly);
 * the presets' parameter counts against hand-computed totals; the dtypes the opt levels give
 * a transformer's layers; and the attention's saved bytes against the context (linear when
 * tiled). Every model-level check runs with tiled attention (the default) and the (T, T) path. */
#include "tests/util/test_util.h"

#include <math.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/model.h"
#include "engine/presets.h"
#include "engine/rng.h"
#include "tests/util/test_model.h"

/* Builds specs over in (FP64 policy), fills x (ids below vocab when ids, else uniform), and
 * checks every parameter's gradient against central differences. */
static void check_model(const mp_layer_spec *specs, int nspecs, const int64_t in[3],
                        int64_t classes, bool ids)
{
    mp_amp_policy a = mp_test_f64_policy();
    mp_model m;
    const int64_t n = 2;
    if (mp_model_build(&m, mp_backend_cpu(), specs, nspecs, in, classes, n, &a) != MP_OK)
        fail_msg("%s", mp_error_message());
    assert_int_equal(mp_model_init(&m, 7), MP_OK);
    m.step = 3;
    mp_rng rng;
    mp_rng_seed(&rng, 9, 0);
    mp_param_group *gn = &m.params.groups[MP_GROUP_NORM];
    for (int64_t i = 0; i < gn->total; i++) /* LayerNorm weights away from 1, biases from 0 */
        ((double *)gn->model.data)[i] += 0.3 * (2 * mp_rng_uniform(&rng) - 1);
    int64_t xs[4] = {n, in[0], in[1], in[2]};
    mp_tensor x = mp_tensor_alloc(mp_model_input_dtype(&m), 4, xs, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < mp_tensor_numel(&x); i++)
        mp_store(x.data, x.dtype, (size_t)i,
                 ids ? (double)(int)(mp_rng_uniform(&rng) * (double)classes)
                     : 2 * mp_rng_uniform(&rng) - 1);
    int64_t zs[2] = {n * m.positions, classes};
    mp_tensor dz = mp_tensor_alloc(MP_F64, 2, zs, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < mp_tensor_numel(&dz); i++)
        ((double *)dz.data)[i] = 2 * mp_rng_uniform(&rng) - 1;
    mp_test_model_gradcheck(&m, &x, &dz);
    mp_tensor_free(&x);
    mp_tensor_free(&dz);
    mp_model_free(&m);
}

static mp_layer_spec spec(const char *type, const char *name)
{
    mp_layer_spec s;
    memset(&s, 0, sizeof s);
    snprintf(s.type, sizeof s.type, "%s", type);
    snprintf(s.name, sizeof s.name, "%s", name);
    s.bias = true;
    return s;
}

static void test_gpt_gradients(void **state)
{
    (void)state;
    for (int matrix = 0; matrix < 2; matrix++) { /* tiled attention, then the (T, T) path */
        mp_preset_args pa = {.depth = 1, .dim = 8, .heads = 2, .dropout = 0.25,
                             .matrix_attention = matrix};
        mp_layer_spec specs[MP_MAX_LAYERS];
        int n = mp_preset_specs("gpt", &pa, 11, specs);
        assert_true(n > 0);
        const int64_t in[3] = {1, 5, 1};
        check_model(specs, n, in, 11, true);
    }
}

static void test_vit_gradients(void **state)
{
    (void)state;
    mp_layer_spec specs[6] = {spec("conv2d", "patch"), spec("posembed", "pos"),
                              spec("transformer", "blocks.0"), spec("layernorm", "ln_f"),
                              spec("gavgpool", "pool"), spec("linear", "head")};
    specs[0].out = 6;
    specs[0].kernel = 2;
    specs[0].stride = 2;
    specs[2].heads = 3;
    specs[5].out = 3;
    const int64_t in[3] = {4, 6, 1};
    check_model(specs, 6, in, 3, false);
}

/* dP (the position embedding's gradient, the block input's gradient summed over the batch)
 * for an output gradient at position t only: every row after t is exactly zero, rows up to t
 * are not (the block mixes them). */
static void test_causal_block(void **state)
{
    (void)state;
    enum { T = 6, D = 8 };
    mp_layer_spec specs[2] = {spec("posembed", "pos"), spec("transformer", "blocks.0")};
    specs[1].heads = 2;
    specs[1].causal = true;
    mp_amp_policy a = mp_test_f64_policy();
    mp_model m;
    const int64_t in[3] = {1, T, D};
    assert_int_equal(mp_model_build(&m, mp_backend_cpu(), specs, 2, in, D, 2, &a), MP_OK);
    assert_int_equal(mp_model_init(&m, 3), MP_OK);
    assert_int_equal(m.positions, T);
    mp_rng rng;
    mp_rng_seed(&rng, 4, 0);
    int64_t xs[4] = {2, 1, T, D}, zs[2] = {2 * T, D};
    mp_tensor x = mp_tensor_alloc(MP_F64, 4, xs, MP_MEM_WORKSPACE);
    mp_tensor dz = mp_tensor_alloc(MP_F64, 2, zs, MP_MEM_WORKSPACE);
    for (int64_t i = 0; i < mp_tensor_numel(&x); i++)
        ((double *)x.data)[i] = 2 * mp_rng_uniform(&rng) - 1;
    const double *dp = m.params.groups[MP_GROUP_WEIGHTS].grad.data; /* pos.weight is first */
    for (int t = 0; t < T; t++) {
        memset(dz.data, 0, (size_t)mp_tensor_bytes(&dz));
        for (int s = 0; s < 2; s++)
            for (int c = 0; c < D; c++)
                ((double *)dz.data)[(s * T + t) * D + c] = 2 * mp_rng_uniform(&rng) - 1;
        const mp_tensor *z;
        assert_int_equal(mp_model_forward(&m, &x, true, &z), MP_OK);
        assert_int_equal(mp_model_backward(&m, &x, &dz), MP_OK);
        for (int r = 0; r < T; r++) {
            double mag = 0;
            for (int c = 0; c < D; c++) {
                if (r > t && dp[r * D + c] != 0.0)
                    fail_msg("output %d depends on later position %d: d/dx = %g", t, r,
                             dp[r * D + c]);
                mag += fabs(dp[r * D + c]);
            }
            if (r <= t && mag == 0.0)
                fail_msg("output %d has no gradient from position %d", t, r);
        }
    }
    mp_tensor_free(&x);
    mp_tensor_free(&dz);
    mp_model_free(&m);
}

static int64_t preset_params(const char *name, const mp_preset_args *pa, const int64_t in[3],
                             int64_t classes)
{
    mp_layer_spec specs[MP_MAX_LAYERS];
    int n = mp_preset_specs(name, pa, classes, specs);
    if (n < 0)
        fail_msg("%s", mp_error_message());
    int64_t params = 0, acts = 0;
    if (mp_model_plan(specs, n, in, classes, 1, &params, &acts) != MP_OK)
        fail_msg("%s", mp_error_message());
    return params;
}

/* A block of width d: two LayerNorms (2d each), qkv (3d^2 + 3d), proj (d^2 + d), fc (4d^2 + 4d),
 * proj (4d^2 + d). */
static int64_t block_params(int64_t d) { return 12 * d * d + 13 * d; }

static void test_preset_counts(void **state)
{
    (void)state;
    mp_preset_args pa = {.depth = 4, .dim = 128, .heads = 4};
    const int64_t img[3] = {28, 28, 1}, txt[3] = {1, 128, 1};
    int64_t d = 128;
    int64_t vit = (49 * d + d) + 16 * d + 4 * block_params(d) + 2 * d + (d * 10 + 10);
    assert_int_equal(preset_params("vit", &pa, img, 10), vit);
    pa.patch = 4; /* 49 tokens of 4x4 pixels: 33 d fewer patch weights, 33 d more positions */
    mp_layer_spec specs[MP_MAX_LAYERS];
    assert_true(mp_preset_specs("vit", &pa, 10, specs) > 0);
    assert_int_equal(specs[0].kernel, 4);
    assert_int_equal(specs[0].stride, 4);
    assert_int_equal(preset_params("vit", &pa, img, 10), vit);
    /* The convolutional stem: 3x3 convolutions 1-32-64-128 without bias, three BatchNorms,
     * a 1x1 convolution to d, 16 positions. */
    pa.conv_stem = true;
    int64_t stem = 9 * (32 + 32 * 64 + 64 * 128) + 2 * (32 + 64 + 128) + (128 * d + d);
    assert_int_equal(preset_params("vit", &pa, img, 10), vit - (49 * d + d) + stem);
    int64_t gpt = 256 * d + 128 * d + 4 * block_params(d) + 2 * d; /* the head is tied */
    assert_int_equal(preset_params("gpt", &pa, txt, 256), gpt);
}

/* The dtypes of a transformer's activations: the residual stream in the weights' dtype, GEMM
 * outputs in the compute dtype, LayerNorm's output FP32 at O1 (autocast's rule), attention
 * probabilities in the compute dtype (the tiled path's row statistics in FP32); LayerNorm parameters FP32 unless O3 drops them. A
 * training step runs at every level, with dropout (at O1 the branches' last dropout gets its
 * gradient from the FP32 residual sum). */
static void test_opt_level_dtypes(void **state)
{
    (void)state;
    mp_preset_args pa = {.depth = 1, .dim = 16, .heads = 2, .dropout = 0.1};
    mp_layer_spec specs[MP_MAX_LAYERS];
    const int64_t in[3] = {1, 8, 1};
    const mp_opt_level levels[4] = {MP_O0, MP_O1, MP_O2, MP_O3};
    for (int k = 0; k < 8; k++) { /* tiled attention, then the (T, T) path */
        int i = k % 4;
        pa.matrix_attention = k >= 4;
        int n = mp_preset_specs("gpt", &pa, 256, specs);
        mp_amp_defaults d = mp_amp_level_defaults(levels[i], MP_BF16);
        mp_amp_policy a = mp_amp_resolve(levels[i], MP_BF16, d.keep_batchnorm_fp32,
                                         d.master_weights, d.loss_scale, false);
        mp_model m;
        assert_int_equal(mp_model_build(&m, mp_backend_cpu(), specs, n, in, 256, 2, &a), MP_OK);
        assert_int_equal(mp_model_input_dtype(&m), MP_F32); /* token ids */
        mp_block *b = m.layers[3].block;                     /* wte, wpe, drop, blocks.0 */
        assert_non_null(b);
        mp_dtype stream = levels[i] >= MP_O2 ? MP_BF16 : MP_F32;
        mp_dtype compute = levels[i] == MP_O0 ? MP_F32 : MP_BF16;
        assert_int_equal(m.acts[0].dtype, stream);
        assert_int_equal(m.acts[3].dtype, stream);
        assert_int_equal(b->acts[0][0].dtype, levels[i] == MP_O1 ? MP_F32 : stream); /* ln1 */
        assert_int_equal(b->acts[0][1].dtype, compute);                            /* qkv */
        assert_int_equal(b->layers[0][2].save.dtype, /* the row statistics, or the probs */
                         pa.matrix_attention ? compute : MP_F32);
        assert_int_equal(m.params.groups[MP_GROUP_NORM].spec.model,
                         levels[i] == MP_O3 ? MP_BF16 : MP_F32);
        const mp_tensor *z;
        int64_t xs[4] = {2, 1, 8, 1};
        mp_tensor x = mp_tensor_alloc(MP_F32, 4, xs, MP_MEM_WORKSPACE);
        for (int64_t e = 0; e < 16; e++)
            ((float *)x.data)[e] = (float)((e * 37) % 256);
        assert_int_equal(mp_model_init(&m, 1), MP_OK);
        assert_int_equal(mp_model_forward(&m, &x, true, &z), MP_OK);
        assert_int_equal(z->shape[0], 16);
        assert_int_equal(z->shape[1], 256);
        mp_tensor dz = mp_tensor_alloc(z->dtype, 2, z->shape, MP_MEM_WORKSPACE);
        for (int64_t e = 0; e < mp_tensor_numel(&dz); e++)
            mp_store(dz.data, dz.dtype, (size_t)e, (double)(e % 7 - 3) / 64);
        if (mp_model_backward(&m, &x, &dz) != MP_OK)
            fail_msg("%s: %s", mp_opt_level_name(levels[i]), mp_error_message());
        mp_tensor_free(&dz);
        mp_tensor_free(&x);
        mp_model_free(&m);
    }
}

/* A gpt block's attention layer over contexts T = 128, 256, 512, 1024 (batch 2, 4 heads of
 * width 128, O2 bf16): its saved tensor, as the model allocates it (the allocator's activation
 * counter), grows linearly in T with the tiled ops (2 FP32 numbers per token and head: 8x the
 * tokens, 8x the bytes) and as T^2 with the (T, T) path, which the check tells apart. */
static int64_t saved_bytes(bool matrix, int64_t T)
{
    mp_preset_args pa = {.depth = 1, .dim = 128, .heads = 4, .matrix_attention = matrix};
    mp_layer_spec specs[MP_MAX_LAYERS];
    int n = mp_preset_specs("gpt", &pa, 256, specs);
    const int64_t in[3] = {1, T, 1};
    mp_amp_defaults d = mp_amp_level_defaults(MP_O2, MP_BF16);
    mp_amp_policy a = mp_amp_resolve(MP_O2, MP_BF16, d.keep_batchnorm_fp32, d.master_weights,
                                     d.loss_scale, false);
    mp_model m;
    int64_t before = mp_mem_current(MP_MEM_ACTIVATIONS);
    assert_int_equal(mp_model_build(&m, mp_backend_cpu(), specs, n, in, 256, 2, &a), MP_OK);
    int b = 0;
    while (!m.layers[b].block) /* blocks.0 */
        b++;
    const mp_tensor *save = &m.layers[b].block->layers[0][2].save; /* its attn */
    int64_t acts = mp_mem_current(MP_MEM_ACTIVATIONS) - before, bytes = mp_tensor_bytes(save);
    assert_true(bytes > 0 && bytes < acts); /* counted among the activations */
    assert_int_equal(bytes, matrix ? 2 * 4 * T * T * 2 : 2 * 4 * T * 2 * 4);
    mp_model_free(&m);
    assert_int_equal(mp_mem_current(MP_MEM_ACTIVATIONS), before);
    return bytes;
}

static void test_attention_memory_linear(void **state)
{
    (void)state;
    int64_t tiled[4], full[4];
    for (int k = 0; k < 4; k++) {
        tiled[k] = saved_bytes(false, 128 << k);
        full[k] = saved_bytes(true, 128 << k);
        print_message("T = %d: attention saves %lld bytes tiled, %lld as (T, T)\n", 128 << k,
                      (long long)tiled[k], (long long)full[k]);
    }
    for (int k = 1; k < 4; k++) {
        assert_int_equal(tiled[k], 2 * tiled[k - 1]); /* linear */
        assert_int_equal(full[k], 4 * full[k - 1]);   /* quadratic */
    }
}

/* Bad transformer specs are refused with a message naming the layer. */
static void test_refusals(void **state)
{
    (void)state;
    mp_layer_spec s[2] = {spec("posembed", "pos"), spec("transformer", "blocks.0")};
    s[1].heads = 3; /* does not divide 8 */
    const int64_t in[3] = {1, 4, 8};
    int64_t params, acts;
    assert_int_equal(mp_model_plan(s, 2, in, 8, 1, &params, &acts), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "blocks.0"));
    const int64_t wide[3] = {1, 4, 258}; /* 2 heads of 129 columns: too wide to tile */
    s[1].heads = 2;
    assert_int_equal(mp_model_plan(s, 2, wide, 8, 1, &params, &acts), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "attention = \"matrix\""));
    snprintf(s[1].attention, sizeof s[1].attention, "matrix"); /* which takes them */
    assert_int_equal(mp_model_plan(s, 2, wide, 8, 1, &params, &acts), MP_OK);
    mp_layer_spec h[2] = {spec("posembed", "pos"), spec("linear", "head")};
    h[1].out = 8;
    h[1].tie = true; /* no embedding to tie to */
    assert_int_equal(mp_model_plan(h, 2, in, 8, 1, &params, &acts), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "embedding"));
    mp_layer_spec e[1] = {spec("embedding", "wte")};
    e[0].out = 4;
    assert_int_equal(mp_model_plan(e, 1, in, 8, 1, &params, &acts), MP_EUSAGE); /* 8 ids/pos */
    const int64_t ids[3] = {1, 4, 1};
    mp_layer_spec late[2] = {spec("posembed", "pos"), spec("embedding", "wte")};
    late[1].out = 4;
    assert_int_equal(mp_model_plan(late, 2, ids, 8, 1, &params, &acts), MP_EUSAGE);
    assert_non_null(strstr(mp_error_message(), "wte: an embedding must be the first layer"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_gradients),   cmocka_unit_test(test_vit_gradients),
        cmocka_unit_test(test_causal_block),    cmocka_unit_test(test_preset_counts),
        cmocka_unit_test(test_opt_level_dtypes), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_attention_memory_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
