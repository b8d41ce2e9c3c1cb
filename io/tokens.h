/* Token shards (data.format = "tokens"): tokenised corpora in the flat binary files that llm.c
 * and nanoGPT write, read window by window, never whole. The datasets are mp_dataset's with
 * `tokens` set (io/dataset.h); the sampler, the loader and resume treat their windows exactly
 * as text windows. */
#ifndef MP_TOKENS_H
#define MP_TOKENS_H

#include "io/dataset.h"

/* llm.c's shard header: 256 little-endian int32, [0] this magic, [1] the version (1: uint16
 * tokens, GPT-2's tokenizer; 2: uint32 tokens), [2] the number of tokens, which follow it. */
#define MP_TOKENS_MAGIC 20240520
#define MP_TOKENS_HEADER_BYTES 1024

/* Loads the token shards under `path` for windows of `context` tokens (data.context, 2..4096):
 * `path` is a directory whose regular files named *.bin (not hidden) are the shards, in strcmp
 * order of their names; a shard whose name contains "val" belongs to the validation split (*test),
 * every other one to the training split (*train). A shard that starts with llm.c's header
 * (MP_TOKENS_MAGIC) has its tokens' width from the header's version and must hold exactly the
 * tokens it announces; any other shard is headerless (nanoGPT's train.bin and val.bin) with
 * `token_bytes` (2 or 4) a token, and a size that is a multiple of it. Every token must be below
 * `vocab` (data.num_classes, 2..1000000): checked after every shard's size and header, by reading
 * the shards once in pieces of 1 MiB (a batch checks its windows again). Windows never cross a
 * shard's end: a training shard of n tokens holds n / context - 1 windows (its windows shift by a
 * per-epoch offset in [0, context), as text's do), a validation shard (n - 1) / context. A limit >
 * 0 keeps only the first `limit` windows of its split. Both datasets get h = 1, w = context, c = 1,
 * num_classes = vocab; each keeps its shards' names, sizes and window counts, and opens a shard
 * when a batch reads it. Errors, one line each, with both datasets left zeroed: MP_EUSAGE for a
 * context, vocab or token_bytes out of range; MP_EDATA naming the file or directory for a missing
 * directory, one without a training or a validation shard, a header with an unknown version or a
 * token count that disagrees with the file's size, a headerless size that is not a whole number of
 * tokens, a token >= vocab (with its position), a split without one whole window, a read error;
 * MP_ESTOPPED when a stop signal comes during the check of the tokens (engine/stop.h). It is
 * mp_tokens_open, then mp_tokens_check of every piece. */
mp_status mp_tokens_load(mp_dataset *train, mp_dataset *test, const char *path, int context,
                         int token_bytes, int64_t vocab, int64_t train_limit, int64_t test_limit);

/* mp_tokens_load without the check of the tokens: every shard's size and header, and the
 * windows. Its errors are mp_tokens_load's but for a token >= vocab and MP_ESTOPPED. */
mp_status mp_tokens_open(mp_dataset *train, mp_dataset *test, const char *path, int context,
                         int token_bytes, int64_t vocab, int64_t train_limit, int64_t test_limit);

/* The pieces of 1 MiB (the last of a shard shorter) of the shards of train and test (as
 * mp_tokens_open made them), numbered from 0: the training shards' in order, then the
 * validation shards'. */
int64_t mp_tokens_pieces(const mp_dataset *train, const mp_dataset *test);

/* Checks the tokens of pieces first, first + stride, ... (at most count of them, none past the
 * last; stride >= 1, else MP_EINTERNAL) against the datasets' num_classes, polling for a stop
 * before each, and stops at the first that fails: MP_OK, or mp_tokens_load's MP_EDATA for a
 * token >= vocab (the piece's first), a shard that cannot be opened or read, and MP_ESTOPPED;
 * *at (unless NULL) is then the piece's number, -1 after MP_OK. Ranks share the check by taking
 * pieces rank, rank + ranks, ... (src/train_data.c), and report the lowest failed piece. */
mp_status mp_tokens_check(const mp_dataset *train, const mp_dataset *test, int64_t first,
                          int64_t count, int64_t stride, int64_t *at);

/* Gathers the windows idx[0..n) of token dataset d for (seed, epoch) as mp_text_batch does: x
 * (n, 1, T, 1) of dtype `dt` holds the window's first T tokens as values (exact in FP32 below
 * 2^24; the embedding's input is FP32), y (n * T) the token after each. Reads each window with
 * one pread of its shard. MP_EDATA naming the shard when the read fails or comes back short
 * (the file changed since it was loaded); x and y are then unspecified. Thread-safe. */
mp_status mp_tokens_batch(const mp_dataset *d, const int64_t *idx, int64_t n, uint64_t seed,
                          int64_t epoch, mp_dtype dt, void *x, int32_t *y);

/* Frees a token set (mp_dataset_free calls it); NULL is ignored. */
void mp_tokens_free(mp_tokens *t);

#endif
