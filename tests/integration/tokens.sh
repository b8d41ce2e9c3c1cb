#!/usr/bin/env bash
# Token shards (data.format = "tokens", io/tokens.c) end to end. The README's shard-writing
# snippet, run as the README prints it, writes llm.c shards of one fortunes file's bytes; gpt
# trains on them on 2 ranks with the step and test losses of data.format = "text" on that file
# (the same windows on the same ranks), bit for bit, also with 0 and 3 loader threads; uint32
# shards of a 1024-token vocabulary train; bad shards and configs end with exit 3 and 2 and one
# line naming the file or key (a bad token found by the rank that checks its piece, too); and a
# 4 GiB shard (sparse) trains under a `ulimit -v` that a whole-file read of it exceeds.
source "$(dirname "$0")/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
PY=/usr/bin/python3
CORPUS=/usr/share/games/fortunes/fortunes
[ -r "$CORPUS" ] || { echo "skip: $CORPUS (Debian's fortunes) is not installed"; exit 77; }

# The README's snippet: the python block after the "snippet: write_shard" marker.
awk '/<!-- snippet: write_shard -->/ {on = 1; next} on && /^```python/ {code = 1; next}
     code && /^```/ {exit} code {print}' "$SRC/README.md" >"$TMP/write_shard.py"
grep -q "def write_shard" "$TMP/write_shard.py" || { echo "FAIL: README has no write_shard snippet"; exit 1; }

# Shards of the corpus's bytes, split where data.format = "text" splits it (val_fraction 0.1).
mkdir -p "$TMP/u16" "$TMP/u32"
"$PY" - "$TMP" "$CORPUS" <<EOF
import sys, numpy as np
exec(open(sys.argv[1] + "/write_shard.py").read())
data = np.frombuffer(open(sys.argv[2], "rb").read(), dtype=np.uint8)
val = int(len(data) * 0.1)
write_shard(sys.argv[1] + "/u16/fortunes_train_000000.bin", data[:len(data) - val])
write_shard(sys.argv[1] + "/u16/fortunes_val_000000.bin", data[len(data) - val:])
wide = data.astype(np.uint32) * 4 + np.arange(len(data)) % 4   # 1024 tokens
write_shard(sys.argv[1] + "/u32/wide_train_000000.bin", wide[:len(data) - val], np.uint32)
write_shard(sys.argv[1] + "/u32/wide_val_000000.bin", wide[len(data) - val:], np.uint32)
EOF

run() { # run NAME [MPDIST ARGS]: 2 ranks, gpt, 12 steps
  local name=$1
  shift
  timeout 300 mpirun -np 2 "$MPDIST" "$SRC/configs/fortunes-gpt.cfg" --set train.epochs=4 \
    --set train.max_steps=12 \
    --set log.every=1 --set data.test_limit=64 --set "checkpoint.dir=\"$TMP/ck-$name\"" \
    --set "log.metrics=\"$TMP/$name.jsonl\"" "$@" >"$TMP/$name.out" 2>&1 ||
    { echo "FAIL: run $name exited $?"; tail -5 "$TMP/$name.out"; exit 1; }
}
losses() { # the step and eval losses of a metrics file, one per line
  "$PY" -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") in ("step", "eval"):
        print(r["type"], repr(r["loss"]))' "$1"
}
tokens=(--set 'data.format="tokens"' --set "data.path=\"$TMP/u16\"" --set data.num_classes=256)
run text --set "data.path=\"$CORPUS\""
run tok1 "${tokens[@]}"
run tok0 "${tokens[@]}" --set data.loader_threads=0
run tok3 "${tokens[@]}" --set data.loader_threads=3 --set data.prefetch=1
[ "$(losses "$TMP/text.jsonl" | grep -c '^step')" = 12 ] || { echo "FAIL: want 12 step losses"; exit 1; }
for name in tok1 tok0 tok3; do
  expect_ok "$name: the losses of text data on the same bytes" \
    cmp <(losses "$TMP/text.jsonl") <(losses "$TMP/$name.jsonl")
done
run wide --set 'data.format="tokens"' --set "data.path=\"$TMP/u32\"" --set data.num_classes=1024
expect_ok "uint32 shards of 1024 tokens train" grep -q '^done: 12 steps' "$TMP/wide.out"
# mpdist eval on 2 ranks of the text and token runs' last checkpoints: both formats load the
# training split too, and the ranks' data must agree (every rank's digest, not rank 0's alone).
for name in text tok1; do
  ck=$(ls "$TMP/ck-$name"/*.h5 | sort | tail -1)
  if [ "$name" = text ]; then data=(--set "data.path=\"$CORPUS\""); else data=("${tokens[@]}"); fi
  expect_ok "eval on 2 ranks ($name)" timeout 120 mpirun -np 2 "$MPDIST" eval \
    "$SRC/configs/fortunes-gpt.cfg" --set data.test_limit=64 "${data[@]}" --checkpoint "$ck"
done

# Bad shards: exit 3 naming the file; bad configs: exit 2 naming the key.
one=("$MPDIST" "$SRC/configs/fortunes-gpt.cfg" --set train.max_steps=1
  --set "checkpoint.dir=\"$TMP/ck-bad\"" --set "log.metrics=\"$TMP/bad.jsonl\""
  --set 'data.format="tokens"')
expect_exit 3 'fortunes_train_000000.bin: token [0-9]+ is [0-9]+, not below the vocabulary \(data.num_classes = 100\)' \
  "${one[@]}" --set "data.path=\"$TMP/u16\"" --set data.num_classes=100
cp -r "$TMP/u16" "$TMP/cut" && truncate -s -1 "$TMP/cut/fortunes_val_000000.bin"
expect_exit 3 'cut/fortunes_val_000000.bin: the header announces' \
  "${one[@]}" --set "data.path=\"$TMP/cut\"" --set data.num_classes=256
cp -r "$TMP/u16" "$TMP/head" && head -c 12 "$TMP/u16/fortunes_val_000000.bin" >"$TMP/head/fortunes_val_000000.bin"
expect_exit 3 "head/fortunes_val_000000.bin: starts with llm.c's header magic but holds 12 bytes, less than the 1024-byte header" \
  "${one[@]}" --set "data.path=\"$TMP/head\"" --set data.num_classes=256
mkdir -p "$TMP/noval" && cp "$TMP/u16/fortunes_train_000000.bin" "$TMP/noval/"
expect_exit 3 'noval: no validation shard' "${one[@]}" --set "data.path=\"$TMP/noval\"" --set data.num_classes=256
# 2 ranks share the token check: rank 1 takes the shard's second MiB, rank 0 its third, each
# with a bad token; one error line, exit 3, naming the first in the file (rank 1's), not rank 0's.
mkdir -p "$TMP/share"
"$PY" -c 'import sys, numpy as np
a = np.zeros(3 << 19, dtype=np.uint16); a[(1 << 19) + 10] = 255; a[(2 << 19) + 5] = 254
a.tofile(sys.argv[1] + "/x_train.bin")
np.zeros(4096, dtype=np.uint16).tofile(sys.argv[1] + "/x_val.bin")' "$TMP/share"
expect_exit 3 'share/x_train.bin: token 524298 is 255, not below the vocabulary' \
  timeout 120 mpirun -np 2 "${one[@]}" --set "data.path=\"$TMP/share\"" --set data.num_classes=100
# Ranks that read different corpora (per-node copies that differ) stop before any collective
# could go out of step: exit 3, one line naming the rank.
expect_exit 3 'rank 1 on .* reads other data than rank 0 from data.path .*share' \
  timeout 120 mpirun -np 1 "${one[@]}" --set "data.path=\"$TMP/u16\"" --set data.num_classes=256 \
  : -np 1 "${one[@]}" --set "data.path=\"$TMP/share\"" --set data.num_classes=256
expect_exit 2 'token data needs data.num_classes' "${one[@]}" --set "data.path=\"$TMP/u16\""
expect_exit 2 'data.token_bytes.*2 \(uint16\) or 4 \(uint32\)' \
  "${one[@]}" --set "data.path=\"$TMP/u16\"" --set data.num_classes=256 --set data.token_bytes=3

# Larger than memory may allow: a 4 GiB headerless shard of zeros (sparse: no disk, no memory
# until read) trains under an address-space limit 2 GiB below its size, which a whole-file
# read of it exceeds (checked with python under the same limit).
mkdir -p "$TMP/big"
truncate -s 4G "$TMP/big/huge_train.bin"
cp "$TMP/u16/fortunes_val_000000.bin" "$TMP/big/small_val.bin"
expect_larger_than_memory $((2 * 1024 * 1024)) "the 4 GiB shard" \
  "open('$TMP/big/huge_train.bin', 'rb').read()" "$SRC/configs/fortunes-gpt.cfg" \
  --set data.test_limit=8 --set 'data.format="tokens"' --set "data.path=\"$TMP/big\"" \
  --set data.num_classes=256
finish
