/* Training checkpoints (docs/ARCHITECTURE.md §6) between a training state (src/train_state.h)
 * and an HDF5 file:
 *   /meta      attributes: format_version, kind ("full" | "export"), step, epoch, opt_level,
 *              half, world_size, global_batch, mpdist_version, model, config (the full text)
 *   /params/<name>               FP32 master values (the widened half values at O3)
 *   /buffers/<name>              BatchNorm running statistics (FP32)
 *   /optim                       attributes name, steps, slots; /optim/<name>/<slot> (FP32:
 *                                momentum_buffer for SGD, exp_avg and exp_avg_sq for Adam)
 *   /scaler                      attributes scale, growth_tracker, hysteresis_left,
 *                                skipped_steps, consecutive_skips, dynamic
 *   /rng                         attributes algorithm, seed, columns; dataset state
 *                                (world_size, 4) int64: each rank's generator position
 *   /data                        attributes epoch, position (samples of the epoch consumed
 *                                by all ranks), batch_size, world_size, dataset_size,
 *                                dataset_digest (mp_dataset_digest; none for token shards)
 * Rank 0 writes and reads the file; the other ranks receive the state by broadcast, so only
 * rank 0 needs to see the file system. An export file holds /meta (kind "export", dtype) and
 * /params and /buffers in one dtype, with no training state. */
#ifndef MP_CHECKPOINT_H
#define MP_CHECKPOINT_H

#include <stdbool.h>

#include "io/h5file.h"
#include "src/train_state.h"

/* The format this mpdist writes. 2: every dataset carries its digest (io/h5_digest.h), and files
 * of format 2 or later are refused without one; format 1 files (no digests) still load. */
#define MP_CKPT_FORMAT 2
#define MP_CKPT_FORMAT_DIGESTS 2

/* Checks every attribute of open checkpoint r (of kind "full" or "export") against what a run
 * could have written: /meta's kind, opt level, half type, model name and counters, and for a
 * full checkpoint /data, /scaler and /optim (their counters within the run's steps, the batch
 * they imply, the optimizer's slots). MP_ECKPT naming the first impossible value.
 * mp_checkpoint_open calls it. */
mp_status mp_checkpoint_check_attrs(mp_h5r *r, const char *kind);

/* Opens checkpoint `path` for reading and checks its format version (MP_ECKPT for a newer or
 * invalid one); when kind is not NULL, *kind gets "full" or "export" (the caller frees it).
 * On failure *r is NULL. */
mp_status mp_checkpoint_open(const char *path, mp_h5r **r, char **kind);

/* Saves the training state after `at->step` steps into the checkpoint directory as
 * ckpt-<step>.h5 (rank 0 writes, through a temporary file), and writes its path to
 * path[0..size) on rank 0. With t->whole (ZeRO-1 without a whole copy) every rank calls it: each
 * sharded parameter is gathered from its owners into a buffer of the largest parameter's size,
 * one at a time, as rank 0 writes it. MP_ECKPT on rank 0 when the file cannot be written. */
mp_status mp_checkpoint_save(mp_train_state *t, const mp_resume_point *at, char *path, size_t size);

/* On rank 0, after a save at `step`: removes the oldest checkpoints beyond checkpoint.keep,
 * never the one of `step`. A failure only warns on stderr (the new file is safe). */
void mp_checkpoint_prune(const mp_train_state *t, int64_t step);

/* Rank 0: loads a full checkpoint into the training state (parameters and their half copies,
 * buffers, optimizer state, scaler, resume point: *t->start); mp_train_share_start then gives it
 * to every rank. MP_ECKPT with the file and dataset named for a
 * corrupt, truncated, foreign (another model or optimizer), newer or exported file. */
mp_status mp_checkpoint_load(mp_train_state *t, const char *path);

/* Rank 0: resolves checkpoint.resume = "auto" (or --resume auto): the newest file of
 * checkpoint.dir that loads, reporting on stderr each newer one that does not (or, when none
 * loads and all fail for the newest's reason, that reason once, in the error). Writes the path
 * used to path[0..size), or "" when the directory holds no checkpoint (a fresh start).
 * MP_ECKPT when there are checkpoints but none loads; MP_EUSAGE without checkpoint.dir. */
mp_status mp_checkpoint_load_auto(mp_train_state *t, char *path, size_t size);

/* Loads only the weights (/params and /buffers) of a full or exported checkpoint written for
 * config c's model (/meta model is its model.preset) into a model, at any opt level and half
 * type: the stored values (FP32 masters where the run had them) are rounded into c's precision
 * (rank 0; mp_train_sync shares them). For sample, eval and the like; --resume stays strict. */
mp_status mp_checkpoint_load_weights(mp_model *m, const char *path, const mp_config *c);

/* Writes an export file of `in`'s weights in dtype `dt` (MP_F32, MP_F16 or MP_BF16) to
 * `out`, with its /meta (config and model description) and kind "export". With keep_bn_fp32
 * the BatchNorm layers' parameters and running statistics stay FP32 (a BatchNorm layer: a
 * prefix P with a buffer P.running_mean; its parameters are P.weight and P.bias). /meta gets
 * attribute "batchnorm_dtype" when the model has BatchNorm layers. LayerNorm's parameters are
 * written in dt. MP_EUSAGE, before anything is written, for an empty `out`, one that is not a
 * regular file (a directory, device or FIFO), `in` itself, or a training checkpoint (kind
 * "full"): export replaces only a missing file, an earlier export or a file that is no
 * checkpoint; and for a value beyond dt's range (export it in a wider dtype). *has_batchnorm
 * (when not NULL) says whether the model has BatchNorm layers, for the caller's report. */
mp_status mp_checkpoint_export(const char *in, const char *out, mp_dtype dt, bool keep_bn_fp32,
                               bool *has_batchnorm);

/* Prints a checkpoint's meta, parameter table (name, shape, dtype, norm), buffers, scaler and
 * optimizer summary, reading every dataset (so a corrupt one fails with its name). */
mp_status mp_checkpoint_inspect(const char *path, FILE *out);

#endif
