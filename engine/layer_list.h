/* The layer registry (docs/ARCHITECTURE.md §8): every layer type a config may name, declared
 * once, in the order the config's messages list them, as
 *
 *     MP_LAYER(type, make, nrequired, (keys...))
 *
 * type: the name in model.layers (an identifier); make: the mp_layer_make function that builds
 * it from an mp_layer_spec (defined beside the layer's class, declared by engine/layer.h from
 * this list); keys: the model.layers keys it takes besides "type" and "name", the first
 * `nrequired` of them required ((NULL) for none). Including this file with MP_LAYER defined
 * generates the declarations of the make functions (engine/layer.h), the model's dispatch by
 * type (engine/model.c), and the config schema's list of types and its key rules
 * (src/config_schema.c), from which configs/README.md's key table is generated;
 * tests/unit/test_layer_registry.c checks that every entry is accepted by the config with its
 * keys, builds, and is named in the documentation. Deliberately without an include guard; it
 * undefines MP_LAYER at its end. */
MP_LAYER(linear, mp_layer_linear_make, 1, ("out", "per_token", "tie"))
MP_LAYER(relu, mp_layer_relu_make, 0, (NULL))
MP_LAYER(conv2d, mp_layer_conv2d_make, 2,
         ("out", "kernel", "stride", "pad", "dilation", "groups", "bias"))
MP_LAYER(batchnorm, mp_layer_batchnorm_make, 0, ("eps", "momentum"))
MP_LAYER(maxpool, mp_layer_pool_make, 1, ("kernel", "stride", "pad"))
MP_LAYER(avgpool, mp_layer_pool_make, 1, ("kernel", "stride", "pad"))
MP_LAYER(gavgpool, mp_layer_global_avgpool_make, 0, (NULL))
MP_LAYER(dropout, mp_layer_dropout_make, 1, ("p"))
MP_LAYER(flatten, mp_layer_flatten_make, 0, (NULL))
MP_LAYER(basic, mp_layer_residual_make, 1, ("out", "stride"))
MP_LAYER(bottleneck, mp_layer_residual_make, 2, ("out", "width", "stride", "groups"))
MP_LAYER(wide, mp_layer_residual_make, 1, ("out", "stride", "p"))
MP_LAYER(layernorm, mp_layer_layernorm_make, 0, ("eps"))
MP_LAYER(gelu, mp_layer_gelu_make, 0, (NULL))
MP_LAYER(embedding, mp_layer_embedding_make, 1, ("out", "vocab"))
MP_LAYER(posembed, mp_layer_posembed_make, 0, (NULL))
MP_LAYER(attention, mp_layer_attention_make, 0, ("heads", "causal", "p", "attention"))
MP_LAYER(transformer, mp_layer_transformer_make, 0,
         ("heads", "causal", "p", "eps", "attention"))
#undef MP_LAYER
