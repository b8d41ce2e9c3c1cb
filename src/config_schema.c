/* The configuration schema: the one table of every key (type, default, bounds, allowed strings,
 * meaning, and the mp_config field it fills), the lookups and descriptions built on it, and the
 * Markdown reference printed from it. Adding a key is one line here plus its mp_config field. */
#include "src/config_schema.h"

#include <stdint.h>
#include <string.h>

#include "src/config.h"

#define CF(m) .offset = offsetof(mp_config, m), .size = sizeof(((mp_config *)0)->m)
#define LF(m) .offset = offsetof(mp_layer_spec, m), .size = sizeof(((mp_layer_spec *)0)->m)
#define COUNT(m, n) .count_offset = offsetof(mp_config, m), .max_count = (n)
#define GE(a) .lo = MP_BOUND_INCL, .min = (a)
#define GT(a) .lo = MP_BOUND_EXCL, .min = (a)
#define LE(b) .hi = MP_BOUND_INCL, .max = (b)
#define LT(b) .hi = MP_BOUND_EXCL, .max = (b)
#define ONE_OF(...) .allowed = {__VA_ARGS__}

const char *const mp_config_groups[] = {"data",  "model", "amp",        "optim", "schedule",
                                        "train", "comm",  "checkpoint", "log"};
const int mp_config_ngroups = (int)(sizeof mp_config_groups / sizeof mp_config_groups[0]);

const mp_key mp_config_keys[] = {
    {"data.path", MP_KEY_STRING, "\"/usr/share/datasets/fashion-mnist\"", .flags = MP_KEY_NONEMPTY,
     CF(data.path),
     .meaning = "Directory with the dataset files; text: a file or a directory of text files "
                "(unset: /usr/share/games/fortunes, Debian's fortunes); tokens: the directory of "
                "the *.bin shards (must be given)."},
    {"data.format", MP_KEY_STRING, "\"idx\"",
     ONE_OF("idx", "cifar10", "synthetic", "text", "tokens", "hdf5", "folder"),
     CF(data.format),
     .meaning = "Dataset files: idx (MNIST, Fashion-MNIST: *-idx?-ubyte[.gz]), cifar10 (the "
                "binary version: data_batch_1..5.bin, test_batch.bin), synthetic (made in "
                "memory from train.seed, no files: data.synthetic_*), or text (bytes for a "
                "language model: windows of data.context bytes, each byte's label the next "
                "byte; a directory is read recursively in name order, skipping *.dat, ckpt-*.h5 "
                "and hidden files), or tokens (token shards as llm.c and nanoGPT write them: the "
                "*.bin files of data.path, those named *val* the test split; windows of "
                "data.context tokens, each token's label the next one; data.num_classes is the "
                "vocabulary), or hdf5 "
                "(an HDF5 file, data.path, with images and labels in the datasets data.train_* "
                "and data.test_*, read a sample at a time), or folder (JPEG and PNG files in "
                "data.path/train/CLASS/ and data.path/val/CLASS/, as torchvision's ImageFolder "
                "reads them, decoded on the loader's threads)."},
    {"data.synthetic_shape", MP_KEY_INT_ARRAY, "[32, 32, 3]", GE(1), LE(4096),
     CF(data.synthetic_shape), COUNT(data.nsynthetic_shape, 3),
     .meaning = "synthetic: image height, width and channels."},
    {"data.synthetic_train", MP_KEY_INT, "50000", GE(1), LE(100000000), CF(data.synthetic_train),
     .meaning = "synthetic: training samples."},
    {"data.synthetic_test", MP_KEY_INT, "10000", GE(1), LE(100000000), CF(data.synthetic_test),
     .meaning = "synthetic: test samples."},
    {"data.augment", MP_KEY_BOOL, "false", CF(data.augment),
     .meaning = "Random crop after zero padding by data.pad_crop, and horizontal flip, of "
                "training images; deterministic per (train.seed, epoch, sample)."},
    {"data.pad_crop", MP_KEY_INT, "4", GE(0), LE(64), CF(data.pad_crop),
     .meaning = "Padding of the random crop (data.augment)."},
    {"data.loader_threads", MP_KEY_INT, "1", GE(0), LE(64), CF(data.loader_threads),
     .meaning = "Threads per rank preparing batches ahead of the step; 0 = in the step. "
                "Batches are identical whatever the number."},
    {"data.loader_nice", MP_KEY_INT, "19", GE(0), LE(19), CF(data.loader_nice),
     .meaning = "Added to the loader threads' nice value (Linux: per thread), so that on a core "
                "they share with the step they yield to it and to the gradient all-reduce "
                "(docs/ARCHITECTURE.md §2); 0 = the rank's own priority."},
    {"data.prefetch", MP_KEY_INT, "2", GE(1), LE(64), CF(data.prefetch),
     .meaning = "Batches prepared ahead per rank."},
    {"data.batch_size", MP_KEY_INT, "64", GE(1), LE(65536), CF(data.batch_size),
     .meaning = "Samples per step on each rank (the global batch is this times the ranks)."},
    {"data.num_classes", MP_KEY_INT, "10", GE(2), LE(1000000), CF(data.num_classes),
     .meaning = "Number of classes: the output features of the last layer (text: 256, the byte "
                "values, which is also its default; tokens: the vocabulary, which must be "
                "given, e.g. 50257 for GPT-2's tokenizer)."},
    {"data.mean", MP_KEY_FLOAT, "0.2860", CF(data.mean),
     .meaning = "Normalisation: inputs are (pixel/255 - mean) / std. cifar10 without mean/std "
                "given: per channel (0.4914, 0.4822, 0.4465) / (0.2470, 0.2435, 0.2616)."},
    {"data.std", MP_KEY_FLOAT, "0.3530", GT(0), CF(data.std),
     .meaning = "Normalisation divisor (see data.mean)."},
    {"data.shuffle", MP_KEY_BOOL, "true", CF(data.shuffle),
     .meaning = "Reshuffle the training set every epoch (seeded by train.seed)."},
    {"data.drop_last", MP_KEY_BOOL, "false", CF(data.drop_last),
     .meaning = "Drop the last incomplete batch of each epoch (a rank's share of the training set "
                "smaller than data.batch_size is refused: every batch would be dropped)."},
    {"data.train_limit", MP_KEY_INT, "0", GE(0), CF(data.train_limit),
     .meaning = "Use only the first N training samples (text, tokens: windows); 0 = all."},
    {"data.test_limit", MP_KEY_INT, "0", GE(0), CF(data.test_limit),
     .meaning = "Use only the first N test samples (text, tokens: windows); 0 = all."},
    {"data.context", MP_KEY_INT, "128", GE(2), LE(4096), CF(data.context),
     .meaning = "text, tokens: bytes or tokens per sample (the sequence length); each epoch the "
                "training windows start at an offset drawn from (train.seed, epoch)."},
    {"data.token_bytes", MP_KEY_INT, "2", CF(data.token_bytes),
     .meaning = "tokens: bytes a token in a shard without llm.c's header, 2 (uint16, nanoGPT's "
                "train.bin) or 4 (uint32); a shard with the header says it itself."},
    {"data.train_images", MP_KEY_STRING, "\"train/images\"", .flags = MP_KEY_NONEMPTY,
     CF(data.train_images),
     .meaning = "hdf5: the training images' dataset, (N, H, W, C), (N, C, H, W) with "
                "data.layout = \"nchw\", or (N, H, W); uint8 pixels or float values."},
    {"data.train_labels", MP_KEY_STRING, "\"train/labels\"", .flags = MP_KEY_NONEMPTY,
     CF(data.train_labels),
     .meaning = "hdf5: the training labels' dataset, (N) integers in [0, data.num_classes)."},
    {"data.test_images", MP_KEY_STRING, "\"test/images\"", .flags = MP_KEY_NONEMPTY,
     CF(data.test_images), .meaning = "hdf5: the test images' dataset (as data.train_images)."},
    {"data.test_labels", MP_KEY_STRING, "\"test/labels\"", .flags = MP_KEY_NONEMPTY,
     CF(data.test_labels), .meaning = "hdf5: the test labels' dataset (as data.train_labels)."},
    {"data.layout", MP_KEY_STRING, "\"nhwc\"", ONE_OF("nhwc", "nchw"), CF(data.layout),
     .meaning = "hdf5: the layout of 4-D image datasets: nhwc (channels last, as numpy "
                "images) or nchw (channels first, as PyTorch tensors)."},
    {"data.chunk_cache_mb", MP_KEY_INT, "16", GE(0), LE(65536), CF(data.chunk_cache_mb),
     .meaning = "hdf5: MiB of HDF5's chunk cache for each image dataset (a compressed chunk is "
                "decoded once while it stays in the cache)."},
    {"data.image_size", MP_KEY_INT, "224", GE(8), LE(1024), CF(data.image_size),
     .meaning = "folder: the side of the square samples; training images are cropped and "
                "resized to it (random resized crop and flip with data.augment), test images "
                "resized to data.resize and centre-cropped."},
    {"data.channels", MP_KEY_INT, "3", GE(1), LE(3), CF(data.channels),
     .meaning = "folder: 3 (RGB) or 1 (luminance); data.mean and data.std default to "
                "ImageNet's per-channel values for RGB."},
    {"data.resize", MP_KEY_INT, "0", GE(0), LE(4096), CF(data.resize),
     .meaning = "folder: the shorter side test images are resized to before the centre crop; "
                "0 = data.image_size / 0.875 (256 for 224)."},
    {"data.val_fraction", MP_KEY_FLOAT, "0.1", GT(0), LE(0.5), CF(data.val_fraction),
     .meaning = "text: the last fraction of the corpus's bytes, held out as the test split "
                "(its loss also in bits per byte)."},

    {"model.preset", MP_KEY_STRING, "\"mlp\"",
     ONE_OF("mlp", "cnn", "cnn_bn", "resnet20", "wrn", "resnext", "vit", "gpt"),
     .flags = MP_KEY_PRESET,
     CF(model.preset),
     .meaning = "Built-in model: mlp (model.hidden), cnn (2 conv + pooling + FC), cnn_bn (with "
                "BatchNorm), resnet20 (CIFAR ResNet, model.depth), wrn (Wide ResNet, model.depth "
                "and widen), resnext (CIFAR ResNeXt, model.depth, cardinality, width), vit (Vision "
                "Transformer on patches, model.depth, dim, heads, patch, dropout), gpt (byte-level "
                "causal transformer for data.format \"text\", the same keys). Becomes "
                "\"custom\" when model.layers is given (not both)."},
    {"model.hidden", MP_KEY_INT_ARRAY, "[256, 128]", GE(1), LE(1000000), .flags = MP_KEY_PRESET,
     CF(model.hidden), COUNT(model.nhidden, MP_MAX_HIDDEN),
     .meaning = "mlp: widths of the hidden linear layers, each followed by a ReLU (1 to 16)."},
    {"model.depth", MP_KEY_INT, "0", GE(0), LE(1000), .flags = MP_KEY_PRESET, CF(model.depth),
     .meaning = "resnet20, wrn, resnext: depth; 0 = 20, 16, 29 (6n+2, 6n+4, 9n+2). vit, gpt: "
                "transformer blocks; 0 = 4."},
    {"model.widen", MP_KEY_INT, "4", GE(1), LE(64), .flags = MP_KEY_PRESET, CF(model.widen),
     .meaning = "wrn: widening factor (WRN-16-4, WRN-28-10)."},
    {"model.cardinality", MP_KEY_INT, "8", GE(1), LE(256), .flags = MP_KEY_PRESET,
     CF(model.cardinality), .meaning = "resnext: groups of the 3x3 convolutions."},
    {"model.width", MP_KEY_INT, "64", GE(1), LE(1024), .flags = MP_KEY_PRESET, CF(model.width),
     .meaning = "resnext: width of each group in the first stage."},
    {"model.dropout", MP_KEY_FLOAT, "0.0", GE(0), LT(1), .flags = MP_KEY_PRESET,
     CF(model.dropout), .meaning = "wrn: dropout between the convolutions of each block; vit, "
                                   "gpt: dropout on the attention probabilities and on the "
                                   "residual branches (gpt: also after the embeddings)."},
    {"model.dim", MP_KEY_INT, "128", GE(1), LE(8192), .flags = MP_KEY_PRESET, CF(model.dim),
     .meaning = "vit, gpt: token width (a multiple of model.heads)."},
    {"model.heads", MP_KEY_INT, "4", GE(1), LE(1024), .flags = MP_KEY_PRESET, CF(model.heads),
     .meaning = "vit, gpt: attention heads."},
    {"model.patch", MP_KEY_INT, "7", GE(1), LE(28), .flags = MP_KEY_PRESET, CF(model.patch),
     .meaning = "vit: side of the square patches (stride = side) of the 28x28 image: 7 gives "
                "16 tokens, 4 gives 49; pixels past the last whole patch are not seen."},
    {"model.stem", MP_KEY_STRING, "\"patch\"", ONE_OF("patch", "conv"), .flags = MP_KEY_PRESET,
     CF(model.stem),
     .meaning = "vit: how images become tokens: patch (one convolution, model.patch) or conv "
                "(Xiao et al.'s stem: three 3x3 stride-2 convolutions with BatchNorm and ReLU, "
                "32, 64, 128 channels, to 4x4 = 16 tokens, then a 1x1 convolution)."},
    {"model.attention", MP_KEY_STRING, "\"auto\"", ONE_OF("auto", "flash", "matrix"),
     .flags = MP_KEY_PRESET, CF(model.attention),
     .meaning = "vit, gpt: the blocks' attention: flash (tiled: an online softmax over key "
                "tiles keeps 2 numbers per token and head for backward, which recomputes the "
                "probabilities; memory linear in the tokens), matrix (keeps the T x T "
                "probabilities), or auto: matrix on CUDA (the scalar tiled kernel was 9.6x "
                "slower at context 1024 on an H200; its tensor-core version, for half inputs, "
                "has not run on a GPU yet), flash elsewhere."},
    {"model.recompute", MP_KEY_BOOL, "false", CF(model.recompute),
     .meaning = "Activation recomputation of the composite blocks (residual and transformer "
                "blocks): forward keeps only each block's input and output, and backward runs "
                "the block's forward again first, so the blocks' inner activations share one "
                "block's storage. Gradients are bitwise those without it (dropout masks repeat; "
                "BatchNorm statistics are updated once); about one more forward's compute."},
    {"model.layers", MP_KEY_LAYERS, NULL, CF(model.layers), COUNT(model.nlayers, MP_MAX_LAYERS),
     .meaning = "Custom model replacing the preset: a list of layer groups (1 to 64), "
                "e.g. ({ type = \"linear\"; out = 10; })."},

    {"amp.opt_level", MP_KEY_STRING, "\"O0\"", ONE_OF("O0", "O1", "O2", "O3"), CF(amp.opt_level),
     .meaning = "Mixed-precision level: O0 FP32, O1 per-op casts, O2 half weights with FP32 "
                "master weights, O3 pure half."},
    {"amp.half", MP_KEY_STRING, "\"fp16\"", ONE_OF("fp16", "bf16"), CF(amp.half),
     .meaning = "The 16-bit type used by O1 to O3."},
    {"amp.device", MP_KEY_STRING, "\"cpu\"", ONE_OF("cpu", "cuda", "auto"), CF(amp.device),
     .meaning = "Where to compute; auto = cuda when available, else cpu."},
    {"amp.keep_norm_fp32", MP_KEY_BOOL, NULL, CF(amp.keep_norm_fp32),
     .meaning = "Norm layers' (BatchNorm, LayerNorm) weight and bias in FP32 (unset: true at "
                "O0-O2, false at O3)."},
    {"amp.keep_batchnorm_fp32", MP_KEY_BOOL, NULL, CF(amp.keep_batchnorm_fp32),
     .meaning = "The older name of amp.keep_norm_fp32 (Apex's), an alias: giving both with "
                "different values is an error."},
    {"amp.master_weights", MP_KEY_BOOL, NULL, CF(amp.master_weights),
     .meaning = "FP32 master weights for a half model (unset: true at O2 only)."},
    {"amp.loss_scale", MP_KEY_SCALE, NULL, GT(0), LE(16777216), CF(amp.loss_scale), .word = "dynamic",
     .meaning = "\"dynamic\" or a static scale (unset: dynamic at O1/O2 with fp16, else 1)."},
    {"amp.allow_tf32", MP_KEY_BOOL, "false", CF(amp.allow_tf32),
     .meaning = "Let FP32 GEMMs and convolutions use TF32 tensor cores (GPU only)."},
    {"amp.conv_workspace_mb", MP_KEY_INT, "256", GE(0), LE(65536), CF(amp.conv_workspace_mb),
     .meaning = "Most cuDNN workspace a convolution algorithm may use, in MiB (GPU only)."},
    {"amp.conv_algo", MP_KEY_STRING, "\"heuristic\"", ONE_OF("heuristic", "timed"),
     CF(amp.conv_algo),
     .meaning = "How cuDNN's convolution algorithm is chosen per shape: heuristic (cuDNN's "
                "first listed that fits; the same choice in every run) or timed (the fastest of a "
                "timed trial, as PyTorch's cudnn.benchmark, FP32 convolutions timed in NHWC "
                "and on NCHW copies; may differ between runs, and with it the last bits) (GPU "
                "only)."},
    {"amp.deterministic", MP_KEY_BOOL, "false", CF(amp.deterministic),
     .meaning = "Convolutions take only algorithms cuDNN lists as deterministic (as PyTorch's "
                "cudnn.deterministic), so that two runs of the same config on the same GPU end "
                "bitwise equal with amp.conv_algo = \"heuristic\" (a timed trial may pick "
                "another deterministic algorithm each run); every other op is deterministic "
                "already (GPU only; the CPU always is)."},
    {"amp.cuda_graphs", MP_KEY_STRING, "\"auto\"", ONE_OF("auto", "on", "off"),
     CF(amp.cuda_graphs),
     .meaning = "Capture the training step as a graph after warm-up steps and replay it (CUDA "
                "graphs): auto on CUDA where the run allows it (one rank, or several over NCCL with "
                "their collectives captured with the step; no profile), on to insist (also on "
                "the staged CPU backend, which records and replays the same way; an error "
                "where it cannot), off never."},
    {"amp.init_scale", MP_KEY_FLOAT, "65536.0", GT(0), LE(16777216), CF(amp.init_scale),
     .meaning = "Dynamic loss scale: the first scale."},
    {"amp.growth_factor", MP_KEY_FLOAT, "2.0", GT(1), LE(1000), CF(amp.growth_factor),
     .meaning = "Dynamic loss scale: factor after growth_interval good steps."},
    {"amp.backoff_factor", MP_KEY_FLOAT, "0.5", GT(0), LT(1), CF(amp.backoff_factor),
     .meaning = "Dynamic loss scale: factor after an overflow."},
    {"amp.growth_interval", MP_KEY_INT, "2000", GE(1), CF(amp.growth_interval),
     .meaning = "Dynamic loss scale: good steps in a row before growing."},
    {"amp.hysteresis", MP_KEY_INT, "1", GE(1), LE(1000), CF(amp.hysteresis),
     .meaning = "Dynamic loss scale: overflows tolerated before backing off (DeepSpeed's)."},
    {"amp.min_scale", MP_KEY_FLOAT, "1.0", GT(0), CF(amp.min_scale),
     .meaning = "Dynamic loss scale: floor."},
    {"amp.max_scale", MP_KEY_FLOAT, "16777216.0", GT(0), CF(amp.max_scale),
     .meaning = "Dynamic loss scale: ceiling (2^24)."},
    {"amp.max_consecutive_skips", MP_KEY_INT, "100", GE(0), CF(amp.max_consecutive_skips),
     .meaning = "Stop with exit code 5 after this many skipped steps in a row; 0 = never."},
    {"amp.scale_margin", MP_KEY_INT, "4", GE(-1), LE(30), CF(amp.scale_margin),
     .meaning = "Dynamic loss scale with fp16 gradients (O2, O3, a half wire): after a good "
                "step, halve the scale until the largest gradient fills at most 2^-margin of "
                "fp16's range, so growing gradients do not overflow and skip the steps that "
                "carry them; -1 = off (PyTorch GradScaler's rule alone)."},

    {"optim.name", MP_KEY_STRING, "\"sgd\"", ONE_OF("sgd", "adam", "adamw"), CF(optim.name),
     .meaning = "Optimizer (torch.optim semantics)."},
    {"optim.lr", MP_KEY_FLOAT, "0.1", GT(0), LE(1000), CF(optim.lr),
     .meaning = "Learning rate at the start of the schedule."},
    {"optim.momentum", MP_KEY_FLOAT, "0.9", GE(0), LT(1), CF(optim.momentum),
     .meaning = "SGD momentum factor."},
    {"optim.dampening", MP_KEY_FLOAT, "0.0", GE(0), LE(1), CF(optim.dampening),
     .meaning = "Dampening of the momentum."},
    {"optim.weight_decay", MP_KEY_FLOAT, "0.0", GE(0), CF(optim.weight_decay),
     .meaning = "L2 penalty added to the gradient (PyTorch SGD weight_decay)."},
    {"optim.nesterov", MP_KEY_BOOL, "false", CF(optim.nesterov),
     .meaning = "Nesterov momentum; needs momentum > 0 and dampening = 0."},
    {"optim.beta1", MP_KEY_FLOAT, "0.9", GE(0), LT(1), CF(optim.beta1),
     .meaning = "Adam/AdamW: first-moment decay."},
    {"optim.beta2", MP_KEY_FLOAT, "0.999", GE(0), LT(1), CF(optim.beta2),
     .meaning = "Adam/AdamW: second-moment decay."},
    {"optim.eps", MP_KEY_FLOAT, "1e-8", GT(0), LE(1), CF(optim.eps),
     .meaning = "Adam/AdamW: added to the denominator."},
    {"optim.clip_grad_norm", MP_KEY_FLOAT, "0.0", GE(0), CF(optim.clip_grad_norm),
     .meaning = "Clip the global norm of the unscaled gradients to this; 0 = off."},
    {"optim.zero", MP_KEY_INT, "0", GE(0), LE(1), CF(optim.zero),
     .meaning = "ZeRO stage (DeepSpeed's name): 1 shards the FP32 master weights and the "
                "optimizer state over the ranks (each owns a contiguous 1/N of every flat "
                "parameter group), gradients are reduce-scattered instead of all-reduced, each "
                "rank steps its block and the updated weights are all-gathered; checkpoints "
                "still hold whole tensors. 0 = every rank holds everything."},

    {"schedule.type", MP_KEY_STRING, "\"constant\"",
     ONE_OF("constant", "step", "cosine", "linear"), CF(schedule.type),
     .meaning = "Learning-rate schedule after the warm-up: constant; step (times gamma every "
                "step_epochs); cosine or linear (down to min_lr at the end)."},
    {"schedule.warmup_epochs", MP_KEY_FLOAT, "0.0", GE(0), LE(1e6), CF(schedule.warmup_epochs),
     .meaning = "Linear warm-up from 0 to optim.lr over this many epochs first."},
    {"schedule.step_epochs", MP_KEY_FLOAT, "30.0", GT(0), LE(1e6), CF(schedule.step_epochs),
     .meaning = "step: epochs between decays."},
    {"schedule.gamma", MP_KEY_FLOAT, "0.1", GT(0), LE(1), CF(schedule.gamma),
     .meaning = "step: decay factor."},
    {"schedule.min_lr", MP_KEY_FLOAT, "0.0", GE(0), CF(schedule.min_lr),
     .meaning = "cosine, linear: final learning rate."},

    {"train.epochs", MP_KEY_INT, "10", GE(1), LE(100000), CF(train.epochs),
     .meaning = "Passes over the training set."},
    {"train.accum_steps", MP_KEY_INT, "1", GE(1), LE(4096), CF(train.accum_steps),
     .meaning = "Micro-batches of data.batch_size per optimizer step on each rank (gradient "
                "accumulation; the global batch is batch_size x ranks x accum_steps): "
                "gradients travel once, after the last micro-batch (DDP's no_sync), each "
                "micro-batch's loss gradient is divided by their number, and the schedule, "
                "step counts, metrics and checkpoints count optimizer steps; an epoch's last "
                "step takes the micro-batches left."},
    {"train.max_steps", MP_KEY_INT, "0", GE(0), CF(train.max_steps),
     .meaning = "Stop after this many steps; 0 = no limit."},
    {"train.seed", MP_KEY_INT, "42", GE(0), CF(train.seed),
     .meaning = "Seed of initialisation and shuffling, the same on every rank "
                "(above 2147483647 write it with an L suffix)."},
    {"train.step_budget", MP_KEY_INT, "0", GE(0), CF(train.step_budget),
     .meaning = "Steps this invocation may take before it saves a checkpoint and stops with "
                "exit code 0 (a job's share of a long run; the schedule still spans the whole "
                "run); 0 = no budget."},
    {"train.label_smoothing", MP_KEY_FLOAT, "0.0", GE(0), LT(1), CF(train.label_smoothing),
     .meaning = "Label smoothing of the training loss (PyTorch's); test loss is plain."},
    {"train.eval_every", MP_KEY_INT, "1", GE(0), CF(train.eval_every),
     .meaning = "Epochs between test-set evaluations; 0 = only at the end."},

    {"comm.backend", MP_KEY_STRING, "\"auto\"", ONE_OF("auto", "mpi", "nccl"),
     CF(comm.backend),
     .meaning = "Gradient all-reduce backend: nccl (GPU memory, one GPU per rank), mpi, or auto "
                "= NCCL when every rank has a GPU of its own and the build has NCCL, else MPI "
                "(the choice and the reason are printed)."},
    {"comm.bucket_mb", MP_KEY_FLOAT, "25.0", GT(0), LE(4096), CF(comm.bucket_mb),
     .meaning = "Gradient bucket size in MiB on the wire; a bucket's all-reduce starts as soon "
                "as backward has written it (PyTorch DDP's bucket_cap_mb)."},
    {"comm.first_bucket_mb", MP_KEY_FLOAT, "1.0", GT(0), LE(4096), CF(comm.first_bucket_mb),
     .meaning = "Size of the first (last layers') bucket in MiB, small so communication starts "
                "early."},
    {"comm.grad_dtype", MP_KEY_STRING, "\"auto\"", ONE_OF("auto", "fp32", "fp16", "bf16"),
     CF(comm.grad_dtype),
     .meaning = "Gradients on the wire: auto = the gradients' own dtype (FP32 at O0/O1, half at "
                "O2/O3); fp16 or bf16 compress FP32 gradients."},
    {"comm.predivide", MP_KEY_SCALE, "\"world\"", GE(1e-3), LE(1e6), CF(comm.predivide),
     .word = "world",
     .meaning = "Divide gradients by this before the sum and by world/predivide after it "
                "(Apex's gradient_predivide_factor); \"world\" = all before (PyTorch DDP's "
                "mean), so a half sum over many ranks overflows no sooner than on one; 1.0 = "
                "all after. At least 1e-3: a smaller one multiplies the gradients past what "
                "they can hold, so every step would overflow and be skipped."},
    {"comm.overlap", MP_KEY_BOOL, "true", CF(comm.overlap),
     .meaning = "Start bucket all-reduces during backward; false = all after backward."},
    {"comm.timeout_s", MP_KEY_FLOAT, "600.0", GT(0), LE(604800), CF(comm.timeout_s),
     .meaning = "Watchdog: a collective not finished after this many seconds ends the job on "
                "every rank with exit code 6."},
    {"comm.share_gpu", MP_KEY_BOOL, "false", CF(comm.share_gpu),
     .meaning = "A testing mode that gives no speed: ranks that share a GPU still use NCCL, each "
                "made a host of its own to NCCL (NCCL_HOSTID per rank) and talking over sockets "
                "(NCCL_NET=Socket, NCCL_SOCKET_IFNAME=lo on one host, NCCL_MNNVL_ENABLE=0, each "
                "unless set), so a one-GPU machine runs NCCL between ranks; false = such ranks "
                "take MPI (comm.backend auto) or are refused (nccl)."},

    {"checkpoint.dir", MP_KEY_STRING, "\"\"", CF(checkpoint.dir),
     .meaning = "Directory of the HDF5 checkpoints ckpt-<step>.h5 (created); \"\" = no "
                "checkpoints."},
    {"checkpoint.every_steps", MP_KEY_INT, "0", GE(0), CF(checkpoint.every_steps),
     .meaning = "Steps between checkpoints; 0 = only at the end, at train.step_budget and on "
                "SIGTERM/SIGUSR1."},
    {"checkpoint.at_end", MP_KEY_BOOL, "true", CF(checkpoint.at_end),
     .meaning = "Save a checkpoint when training ends."},
    {"checkpoint.keep", MP_KEY_INT, "3", GE(1), LE(1000000), CF(checkpoint.keep),
     .meaning = "Checkpoint files kept in checkpoint.dir after a save: the one just written and "
                "the newest of lower steps; older ones are removed (files of higher steps, left "
                "by a run resumed from an older file, are neither counted nor removed)."},
    {"checkpoint.deflate", MP_KEY_INT, "0", GE(0), LE(9), CF(checkpoint.deflate),
     .meaning = "gzip level of the checkpoint datasets (0 = none); Fletcher32 checksums are "
                "always on."},
    {"checkpoint.async", MP_KEY_BOOL, "false", CF(checkpoint.async),
     .meaning = "Save in the background: at the step boundary rank 0 copies the state into a "
                "host snapshot (kept for the next save; host memory of the state's size) and "
                "training goes on while a thread writes the same file; at most one save in "
                "flight (the next waits for it). false = every rank waits for the write."},
    {"checkpoint.resume", MP_KEY_STRING, "\"\"", CF(checkpoint.resume),
     .meaning = "Resume from this checkpoint file (refused when checkpoint.dir holds a newer "
                "one, which the run's saves would replace), or \"auto\": the newest valid one in "
                "checkpoint.dir (none there: start afresh); \"\" = start afresh. --resume "
                "overrides it."},
    {"checkpoint.init", MP_KEY_STRING, "\"\"", CF(checkpoint.init),
     .meaning = "A fresh run starts from the weights of this checkpoint (full or exported, "
                "written at any opt level and half type) instead of random ones, as for "
                "fine-tuning: optimizer state, loss scale, step and data order start anew. "
                "Not used when the run resumes from a checkpoint; \"\" = none."},

    {"log.metrics", MP_KEY_STRING, "\"\"", CF(log.metrics),
     .meaning = "JSON Lines metrics file written by rank 0 (replaced, or on a resume kept up to "
                "the checkpoint's step; a file that holds something else, a checkpoint's name in "
                "checkpoint.dir or a FIFO nobody reads is refused); \"\" = none."},
    {"log.every", MP_KEY_INT, "50", GE(1), LE(1000000000), CF(log.every),
     .meaning = "Steps between step records and plain progress lines."},
    {"log.progress", MP_KEY_STRING, "\"auto\"", ONE_OF("auto", "bar", "plain", "none"),
     CF(log.progress),
     .meaning = "Progress display: auto (bar on a terminal, else plain), bar, plain, none."},
    {"log.profile", MP_KEY_BOOL, "false", CF(log.profile),
     .meaning = "Time every op of the training steps by kind and phase (the first step left "
                "out): a table on rank 0's output at the end and \"profile_ms\" in the summary "
                "record. On a GPU the device is synchronised around every op, which slows the "
                "run (see log.profile_clock)."},
    {"log.profile_clock", MP_KEY_STRING, "\"host\"", ONE_OF("host", "device"),
     CF(log.profile_clock),
     .meaning = "The profile's clock: host (the device synchronised around every op: an op's "
                "issue and execution, nothing overlapped) or device (a clock mark, a CUDA event, "
                "at each op's begin and end and one wait a step: the device's time from the work "
                "before the op finishing to the op's finishing, idle gaps while the host issues "
                "it included; the step runs as without the profile but for the marks; the CPU "
                "backend's marks are the host clock)."},
    {"log.trace", MP_KEY_STRING, "\"\"", CF(log.trace),
     .meaning = "Directory (created) for a timeline of the training: each rank writes "
                "rank-<R>.json, Chrome trace-event JSON on rank 0's clock (forward and backward "
                "per layer, each collective from its start to its end, waits, the optimizer, "
                "data, checkpoints, evaluation); bench/trace_merge.py DIR joins them into "
                "DIR/trace.json for Perfetto. Nothing is synchronised for it; on a CUDA build "
                "the same spans are NVTX ranges. \"\" = none."},
};
const int mp_config_nkeys = (int)(sizeof mp_config_keys / sizeof mp_config_keys[0]);

const mp_key mp_layer_keys[] = {
    {"type", MP_KEY_STRING, NULL,
     .allowed = {
#define MP_LAYER(type, make, nrequired, keys) #type,
#include "engine/layer_list.h"
     },
     LF(type), .meaning = "Layer kind (required)."},
    {"out", MP_KEY_INT, NULL, GE(1), LE(1000000), LF(out),
     .meaning = "linear: output features; conv2d and blocks: output channels; embedding: "
                "width (required)."},
    {"kernel", MP_KEY_INT, NULL, GE(1), LE(64), LF(kernel),
     .meaning = "conv2d, maxpool, avgpool: square kernel/window size (required)."},
    {"stride", MP_KEY_INT, "0", GE(0), LE(64), LF(stride),
     .meaning = "conv2d, pools, blocks: stride; 0 = 1 for conv2d and blocks, the window for pools."},
    {"pad", MP_KEY_INT, "0", GE(0), LE(64), LF(pad),
     .meaning = "conv2d, maxpool, avgpool: zero padding on each side."},
    {"dilation", MP_KEY_INT, "1", GE(1), LE(64), LF(dilation), .meaning = "conv2d: dilation."},
    {"groups", MP_KEY_INT, "1", GE(1), LE(65536), LF(groups),
     .meaning = "conv2d, bottleneck: groups (channels must divide by it; ResNeXt cardinality)."},
    {"bias", MP_KEY_BOOL, "true", LF(bias), .meaning = "conv2d: add a bias."},
    {"p", MP_KEY_FLOAT, NULL, GE(0), LT(1), LF(p),
     .meaning = "dropout: drop probability (required); wide: dropout between the convs; "
                "attention: on the probabilities; transformer: on the probabilities and both "
                "residual branches."},
    {"width", MP_KEY_INT, NULL, GE(1), LE(100000), LF(width),
     .meaning = "bottleneck: inner width (required)."},
    {"eps", MP_KEY_FLOAT, "1e-5", GT(0), LE(1), LF(eps),
     .meaning = "batchnorm, layernorm, transformer: epsilon."},
    {"momentum", MP_KEY_FLOAT, "0.1", GE(0), LE(1), LF(momentum),
     .meaning = "batchnorm: running-statistics momentum (PyTorch's)."},
    {"heads", MP_KEY_INT, "1", GE(1), LE(1024), LF(heads),
     .meaning = "attention, transformer: heads (dividing the width)."},
    {"causal", MP_KEY_BOOL, "false", LF(causal),
     .meaning = "attention, transformer: no position attends to a later one."},
    {"attention", MP_KEY_STRING, "\"flash\"", ONE_OF("flash", "matrix"), LF(attention),
     .meaning = "attention, transformer: flash (tiled, saving 2 numbers per token and head; "
                "heads of at most 128 columns) or matrix (saving the T x T probabilities)."},
    {"per_token", MP_KEY_BOOL, "false", LF(per_token),
     .meaning = "linear: over the last dimension of each position (PyTorch's nn.Linear on "
                "(N, T, D)) instead of the flattened sample."},
    {"tie", MP_KEY_BOOL, "false", LF(tie),
     .meaning = "linear: per token, sharing the first embedding layer's weight (no bias)."},
    {"vocab", MP_KEY_INT, "0", GE(0), LE(1000000), LF(vocab),
     .meaning = "embedding: vocabulary, at least data.num_classes (the data's ids); 0 = "
                "data.num_classes."},
    {"name", MP_KEY_STRING, "\"\"", .flags = MP_KEY_IDENT, LF(name),
     .meaning = "Parameter name prefix of letters, digits, '_' and '.'; \"\" = layers.<index>."},
};

/* Which layer keys each type takes, the required ones first, up to `nrequired`
 * (engine/layer_list.h). */
#define MP_LAYER_KEYS(...) __VA_ARGS__
static const struct {
    const char *type;
    int nrequired;
    const char *keys[8];
} mp_layer_rules[] = {
#define MP_LAYER(type, make, nrequired, keys) {#type, nrequired, {MP_LAYER_KEYS keys}},
#include "engine/layer_list.h"
};
_Static_assert(sizeof mp_layer_rules / sizeof mp_layer_rules[0] <= MP_KEY_MAX_ALLOWED,
               "model.layers' type list holds every registered layer");

int mp_layer_key_rule(const char *type, const char *key)
{
    if (strcmp(key, "type") == 0 || strcmp(key, "name") == 0)
        return 1;
    for (size_t i = 0; i < sizeof mp_layer_rules / sizeof mp_layer_rules[0]; i++) {
        if (strcmp(mp_layer_rules[i].type, type) != 0)
            continue;
        for (int j = 0; j < 8 && mp_layer_rules[i].keys[j]; j++)
            if (strcmp(mp_layer_rules[i].keys[j], key) == 0)
                return j < mp_layer_rules[i].nrequired ? 2 : 1;
    }
    return 0;
}
const int mp_layer_nkeys = (int)(sizeof mp_layer_keys / sizeof mp_layer_keys[0]);

const mp_key *mp_config_key_find(const char *path)
{
    for (int i = 0; i < mp_config_nkeys; i++)
        if (strcmp(mp_config_keys[i].path, path) == 0)
            return &mp_config_keys[i];
    return NULL;
}

const mp_key *mp_layer_key_find(const char *name)
{
    for (int i = 0; i < mp_layer_nkeys; i++)
        if (strcmp(mp_layer_keys[i].path, name) == 0)
            return &mp_layer_keys[i];
    return NULL;
}

bool mp_config_group_known(const char *name)
{
    for (int i = 0; i < mp_config_ngroups; i++)
        if (strcmp(mp_config_groups[i], name) == 0)
            return true;
    return false;
}

const char *mp_key_type_name(mp_key_type t)
{
    switch (t) {
    case MP_KEY_INT: return "int";
    case MP_KEY_FLOAT: return "float";
    case MP_KEY_BOOL: return "bool";
    case MP_KEY_STRING: return "string";
    case MP_KEY_INT_ARRAY: return "int array";
    case MP_KEY_LAYERS: return "list of layer groups";
    case MP_KEY_SCALE: return "float or word";
    }
    return "?";
}

bool mp_key_in_range(const mp_key *k, double v)
{
    if (k->lo == MP_BOUND_INCL && !(v >= k->min))
        return false;
    if (k->lo == MP_BOUND_EXCL && !(v > k->min))
        return false;
    if (k->hi == MP_BOUND_INCL && !(v <= k->max))
        return false;
    if (k->hi == MP_BOUND_EXCL && !(v < k->max))
        return false;
    return true;
}

void mp_key_describe(const mp_key *k, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
#define ADD(...)                                                                    \
    do {                                                                            \
        int w_ = snprintf(buf + used, cap - used, __VA_ARGS__);                     \
        used = (w_ < 0 || (size_t)w_ >= cap - used) ? cap - 1 : used + (size_t)w_; \
    } while (0)
    if (k->allowed[0]) {
        ADD("one of");
        for (int i = 0; k->allowed[i]; i++)
            ADD("%s \"%s\"", i ? "," : "", k->allowed[i]);
    } else if (k->lo && k->hi) {
        ADD("in %c%.15g, %.15g%c", k->lo == MP_BOUND_INCL ? '[' : '(', k->min, k->max,
            k->hi == MP_BOUND_INCL ? ']' : ')');
    } else if (k->lo) {
        ADD("%s %.15g", k->lo == MP_BOUND_INCL ? ">=" : ">", k->min);
    } else if (k->hi) {
        ADD("%s %.15g", k->hi == MP_BOUND_INCL ? "<=" : "<", k->max);
    } else if (k->flags & MP_KEY_NONEMPTY) {
        ADD("non-empty");
    }
#undef ADD
}

/* Levenshtein distance, capped: anything over 8 counts as 9. */
static int edit_distance(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    if (na > 64 || nb > 64 || (na > nb ? na - nb : nb - na) > 8)
        return 9;
    int row[65];
    for (size_t j = 0; j <= nb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

static const char *leaf_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : path;
}

const char *mp_config_suggest(const char *name, bool layer)
{
    int limit = strlen(name) <= 3 ? 1 : 2;
    const char *best = NULL;
    int bestd = limit + 1;
    const mp_key *keys = layer ? mp_layer_keys : mp_config_keys;
    int nkeys = layer ? mp_layer_nkeys : mp_config_nkeys;
    for (int i = 0; i < nkeys; i++) {
        int d = edit_distance(name, keys[i].path);
        if (d < bestd) {
            bestd = d;
            best = keys[i].path;
        }
    }
    for (int i = 0; !layer && i < mp_config_ngroups; i++) {
        int d = edit_distance(name, mp_config_groups[i]);
        if (d < bestd) {
            bestd = d;
            best = mp_config_groups[i];
        }
    }
    if ((best && bestd <= 1) || layer)
        return best;
    /* The right name in the wrong group (or at the top level): "lr" -> "optim.lr". */
    for (int i = 0; i < nkeys; i++)
        if (strcmp(leaf_of(name), leaf_of(keys[i].path)) == 0)
            return keys[i].path;
    return best;
}

static void reference_row(FILE *out, const char *prefix, const mp_key *k)
{
    char rule[MP_KEY_RULE_MAX];
    mp_key_describe(k, rule, sizeof rule);
    fprintf(out, "| `%s%s` | %s | %s%s%s | %s", prefix, k->path, mp_key_type_name(k->type),
            k->def ? "`" : "", k->def ? k->def : "(unset)", k->def ? "`" : "", k->meaning);
    if (rule[0])
        fprintf(out, " %s be %s.", k->type == MP_KEY_INT_ARRAY ? "Each entry must" : "Must",
                rule);
    fputs(" |\n", out);
}

void mp_config_reference(FILE *out)
{
    fputs("| key | type | default | meaning |\n|---|---|---|---|\n", out);
    for (int i = 0; i < mp_config_nkeys; i++) {
        reference_row(out, "", &mp_config_keys[i]);
        if (mp_config_keys[i].type == MP_KEY_LAYERS)
            for (int j = 0; j < mp_layer_nkeys; j++)
                reference_row(out, "model.layers.[N].", &mp_layer_keys[j]);
    }
    bool any = false;
    for (int g = 0; g < mp_config_ngroups; g++) {
        size_t n = strlen(mp_config_groups[g]);
        bool empty = true;
        for (int i = 0; i < mp_config_nkeys && empty; i++)
            empty = !(strncmp(mp_config_keys[i].path, mp_config_groups[g], n) == 0 &&
                      mp_config_keys[i].path[n] == '.');
        if (empty)
            fprintf(out, "%s`%s`", any ? ", " : "\nGroups accepted with no keys yet: ",
                    mp_config_groups[g]);
        any = any || empty;
    }
    if (any)
        fputs(" (any key inside is an unknown key).\n", out);
}
