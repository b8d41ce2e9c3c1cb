/* The validated configuration: a libconfig file plus --set overrides, checked against the
 * schema in config_schema.c (every key, its type, default, range and meaning). */
#ifndef MP_CONFIG_H
#define MP_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/model.h"
#include "engine/status.h"

#define MP_MAX_HIDDEN 16
#define MP_TEXT_DEFAULT_PATH "/usr/share/games/fortunes" /* data.path of text data unless given */

typedef struct mp_config {
    char path[512]; /* the file it was read from */
    struct {
        char path[512];     /* directory with the dataset files (text: a file or directory) */
        char format[16]; /* "idx" | "cifar10" | "synthetic" | "text" | "tokens" | "hdf5" | "folder" */
        int64_t batch_size; /* per rank */
        int64_t num_classes;
        double mean, std;   /* normalisation of pixel/255 (cifar10 unset: per channel) */
        bool augment;       /* random crop (pad_crop) and horizontal flip of training images */
        int64_t pad_crop;
        int64_t loader_threads, loader_nice, prefetch;
        bool shuffle, drop_last;
        int64_t train_limit, test_limit; /* 0 = all samples */
        int64_t synthetic_shape[3];      /* H, W, C of data.format "synthetic" */
        int nsynthetic_shape;
        int64_t synthetic_train, synthetic_test;
        int64_t context;                 /* text, tokens: bytes or tokens per sample (T) */
        int64_t token_bytes;             /* tokens: bytes a token of a headerless shard */
        char train_images[128], train_labels[128]; /* hdf5: dataset paths in the file */
        char test_images[128], test_labels[128];
        char layout[8];                  /* hdf5: "nhwc" | "nchw" */
        int64_t chunk_cache_mb;          /* hdf5: chunk cache per image dataset */
        int64_t image_size, channels, resize; /* folder: sample side, 1 or 3, eval resize */
        double val_fraction;             /* text: the corpus's tail held out for validation */
    } data;
    struct {
        char preset[32];                 /* "mlp" | "custom" (set when model.layers is given) */
        int64_t hidden[MP_MAX_HIDDEN];
        int nhidden;
        int64_t depth, widen, cardinality, width; /* resnet20, wrn, resnext */
        double dropout;                           /* wrn, vit, gpt */
        int64_t dim, heads;                       /* vit, gpt */
        int64_t patch;                            /* vit */
        char stem[8];                             /* vit: "patch" | "conv" */
        char attention[8];                        /* vit, gpt: "auto" | "flash" | "matrix" */
        bool recompute;                  /* composite blocks recompute their activations */
        mp_layer_spec layers[MP_MAX_LAYERS];
        int nlayers;                     /* > 0 when model.layers was given */
    } model;
    struct {
        char opt_level[4]; /* "O0".."O3" */
        char half[8];      /* "fp16" | "bf16" */
        char device[8];    /* "cpu" | "cuda" | "auto" */
        bool keep_norm_fp32, master_weights; /* the level's defaults unless given */
        bool keep_batchnorm_fp32;          /* the alias of keep_norm_fp32, resolved to it */
        double loss_scale;  /* 0 = dynamic; the level's default unless given */
        bool allow_tf32;
        int64_t conv_workspace_mb;
        char conv_algo[12];  /* "heuristic" | "timed" */
        bool deterministic;  /* convolutions take deterministic cuDNN algorithms only */
        char cuda_graphs[8]; /* "auto" | "on" | "off" */
        double init_scale, growth_factor, backoff_factor, min_scale, max_scale;
        int64_t growth_interval, hysteresis, max_consecutive_skips, scale_margin;
    } amp;
    struct {
        char name[16]; /* "sgd" | "adam" | "adamw" */
        double lr, momentum, dampening, weight_decay;
        bool nesterov;
        double beta1, beta2, eps;
        double clip_grad_norm; /* 0 = no clipping */
        int64_t zero;          /* ZeRO stage: 0 or 1 (sharded masters and optimizer state) */
    } optim;
    struct {
        char type[16];      /* "constant" | "step" | "cosine" | "linear" */
        double warmup_epochs; /* linear warm-up from 0 before any schedule */
        double step_epochs; /* step: decay every this many epochs */
        double gamma;       /* step: factor */
        double min_lr;      /* cosine: floor */
    } schedule;
    struct {
        int64_t epochs;
        int64_t max_steps; /* 0 = no limit; stops the run after this many steps */
        int64_t accum_steps; /* micro-batches per optimizer step (gradient accumulation) */
        uint64_t seed;
        int64_t eval_every; /* epochs between test evaluations; 0 = only at the end */
        double label_smoothing; /* of the training loss */
        int64_t step_budget; /* 0 = none; else steps this invocation takes before it stops */
    } train;
    struct {
        char backend[8];    /* "auto" | "mpi" */
        double bucket_mb, first_bucket_mb; /* MiB on the wire */
        char grad_dtype[8]; /* "auto" | "fp32" | "fp16" | "bf16" */
        double predivide;   /* divide before the sum by this, after it by world / this;
                               0 = "world" */
        bool overlap;       /* buckets start during backward */
        double timeout_s;   /* the watchdog's limit per collective */
        bool share_gpu;     /* ranks may share a GPU under NCCL (a testing mode) */
    } comm;
    struct {
        char dir[512];      /* "" = no checkpoints */
        int64_t every_steps; /* 0 = only at the end, the step budget and signals */
        bool at_end;
        int64_t keep;       /* newest files kept */
        int64_t deflate;    /* gzip level, 0 = none */
        bool async;         /* a writer thread writes from a host snapshot */
        char resume[512];   /* "" | "auto" | a path */
        char init[512];     /* "" | a checkpoint whose weights start a fresh run */
    } checkpoint;
    struct {
        char metrics[512]; /* JSON Lines path; "" = none */
        int64_t every;     /* steps between step records and plain progress lines */
        char progress[8];  /* "auto" | "bar" | "plain" | "none" */
        bool profile;      /* time every op of the training steps (engine/profile.h) */
        char profile_clock[8]; /* "host" | "device" */
        char trace[512];   /* a directory for each rank's timeline (engine/trace.h); "" = none */
    } log;
    char *text; /* the resolved configuration in libconfig syntax, owned */
    uint64_t given[4]; /* bit i: mp_config_keys[i] was in the file or a --set */
    struct mp_config_place *places; /* where each given key was written, owned */
    int nplaces;
} mp_config;

/* Where a key was given: "FILE:LINE: KEY" or "--set KEY" (the prefix of a message). */
typedef struct mp_config_place {
    char *key;   /* "optim.lr", "model.layers.[3]" */
    char *where;
} mp_config_place;

/* Reads `path`, applies the `nsets` overrides ("key.path=value", value in libconfig syntax, a
 * bare word taken as a string), validates everything and fills *c (defaults for absent keys).
 * Any problem is MP_EUSAGE with one line naming file, line and key, e.g.
 * "train.cfg:12: optim.lr: must be > 0 (got -1)" or "--set optim.lr: ...". */
mp_status mp_config_load(mp_config *c, const char *path, const char *const *sets, int nsets);

/* Whether the key at `path` ("amp.loss_scale") was given in the file or by --set. */
bool mp_config_given(const mp_config *c, const char *path);

/* The per-channel normalisation c's data format brings for its first 3 channels where
 * data.mean or data.std is not given: CIFAR-10's own statistics, and ImageNet's for 3-channel
 * image folders (as torchvision's examples use). True with them in mean and std; false for
 * formats whose single data.mean and data.std (given or default) apply to every channel. */
bool mp_config_channel_norm(const mp_config *c, double mean[3], double std[3]);

/* Where the key at `path` ("model.depth", or "model.layers.[N]" for a layer's group) was given,
 * as a message prefix "FILE:LINE: KEY" or "--set KEY"; NULL if it was not. Owned by c. */
const char *mp_config_where(const mp_config *c, const char *path);

/* mp_config_where's prefix, or "FILE: KEY" (c->path) when the key took its default, in buf
 * (cap bytes); returns buf. For checks made after loading, that name the key as the loader's
 * errors do. */
const char *mp_config_key_at(const mp_config *c, const char *path, char *buf, size_t cap);

/* The preset model's layer specs (room for MP_MAX_LAYERS) from the model.* keys: their count,
 * or -1 with mp_preset_specs's MP_EUSAGE message ("model.depth: ..."). `cuda`: the model runs
 * on the CUDA backend, where model.attention = "auto" keeps the (T, T) probabilities. */
int mp_config_preset_specs(const mp_config *c, bool cuda, mp_layer_spec *specs);

/* Prints the resolved configuration (every key, defaults included) in libconfig syntax. */
void mp_config_print(const mp_config *c, FILE *out);

/* Prints the reference table of every key (key, type, default, meaning) as Markdown. */
void mp_config_reference(FILE *out);

/* Frees what mp_config_load allocated. */
void mp_config_free(mp_config *c);

#endif
