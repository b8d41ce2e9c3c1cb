#!/usr/bin/env bash
# The command line and the configuration through the real binary: help, version, info,
# dry runs, and every kind of bad command line and bad config (exit 2, one line naming file,
# line and key), alone and under mpirun with 2 ranks.
source "$(dirname "$0")/common.bash"
cd "$TMP"

out=$("$MPDIST" --help) && grep -q '^usage: mpdist' <<<"$out" || { echo "FAIL: --help"; exit 1; }
"$MPDIST" --version | grep -Eq '^mpdist [0-9]+\.[0-9]+\.[0-9]+$' || { echo "FAIL: --version"; exit 1; }
info=$("$MPDIST" info)
for key in backends blas mpi nccl hdf5 libconfig; do
  grep -q "^$key: " <<<"$info" || { echo "FAIL: info lacks $key"; echo "$info"; exit 1; }
done
grep -q '^mpi: Open MPI v4' <<<"$info" || { echo "FAIL: info mpi version"; exit 1; }

dry=$("$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --dry-run --set model.hidden=[100])
grep -q '^total parameters: 79510$' <<<"$dry" || { echo "FAIL: dry-run parameter count"; echo "$dry"; exit 1; }
grep -q '^  hidden = \[100\];' <<<"$dry" || { echo "FAIL: dry-run resolved config"; exit 1; }
! grep -q '^note: schedule.warmup_epochs' <<<"$dry" || { echo "FAIL: a warm-up note without warm-up"; exit 1; }
dry=$("$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --dry-run --set schedule.warmup_epochs=2 \
  --set train.max_steps=100)
grep -q '^note: schedule.warmup_epochs = 2 is 1876 steps, more than the run.s 100: .*at most 0.0533 of it' <<<"$dry" ||
  { echo "FAIL: no note of a warm-up longer than the run"; grep '^note' <<<"$dry"; exit 1; }
test ! -e runs || { echo "FAIL: a dry run wrote files"; exit 1; }
cat >"$TMP/layers.cfg" <<'CFG'
model: { layers = ( { type = "linear"; out = 64; name = "hidden"; },
                    { type = "relu"; },
                    { type = "linear"; out = 10; name = "head"; } ); };
CFG
dry=$("$MPDIST" "$TMP/layers.cfg" --dry-run)
grep -Eq '^hidden +linear +\(N, 64\) +50240$' <<<"$dry" && grep -Eq '^head +linear +\(N, 10\) +650$' <<<"$dry" ||
  { echo "FAIL: explicit layers dry run"; echo "$dry"; exit 1; }

cat >"$TMP/conv.cfg" <<'CFG'
model: { layers = ( { type = "conv2d"; out = 8; kernel = 5; stride = 2; pad = 2; bias = false; },
                    { type = "batchnorm"; }, { type = "relu"; }, { type = "maxpool"; kernel = 2; },
                    { type = "gavgpool"; }, { type = "dropout"; p = 0.5; },
                    { type = "linear"; out = 10; name = "head"; } ); };
CFG
dry=$("$MPDIST" "$TMP/conv.cfg" --dry-run --set amp.opt_level=O2)
grep -Eq '^layers.0 +conv2d +\(N, 14, 14, 8\) +200$' <<<"$dry" && grep -Eq '^layers.3 +maxpool +\(N, 7, 7, 8\) +0$' <<<"$dry" &&
  grep -Eq '^head +linear +\(N, 10\) +90$' <<<"$dry" && grep -q 'opt level O2 (fp16): weights fp16, master weights fp32' <<<"$dry" &&
  grep -q '{ type = "conv2d"; out = 8; kernel = 5; stride = 2; pad = 2; dilation = 1; groups = 1; bias = false; }' <<<"$dry" ||
  { echo "FAIL: conv layers dry run"; echo "$dry"; exit 1; }

# The transformer presets and the same GPT written as model.layers: layer tables, parameter
# counts (the tied head has none), the opt-level line with the norm layers.
dry=$("$MPDIST" "$SRC/configs/fashion-mnist-vit.cfg" --dry-run --set amp.opt_level=O1)
grep -Eq '^stem.conv3 +conv2d +\(N, 4, 4, 128\) +73728$' <<<"$dry" && grep -Eq '^patch +conv2d +\(N, 4, 4, 128\) +16512$' <<<"$dry" &&
  grep -Eq '^blocks.3 +transformer +\(N, 4, 4, 128\) +198272$' <<<"$dry" && grep -Eq '^pool +gavgpool +\(N, 128\) +0$' <<<"$dry" &&
  grep -q '^total parameters: 906090$' <<<"$dry" && grep -q "norm layers' params fp32, LayerNorm output fp32" <<<"$dry" ||
  { echo "FAIL: vit dry run"; echo "$dry"; exit 1; }
dry=$("$MPDIST" "$SRC/configs/fashion-mnist-vit.cfg" --dry-run --set model.stem=patch --set model.patch=4)
grep -Eq '^patch +conv2d +\(N, 7, 7, 128\) +2176$' <<<"$dry" && grep -q '^total parameters: 803082$' <<<"$dry" ||
  { echo "FAIL: vit dry run with 4x4 patches"; echo "$dry"; exit 1; }
for i in $(seq 400); do echo "$i: the quick brown fox jumps over the lazy dog."; done >"$TMP/corpus.txt"
gpt=(--set data.path="$TMP/corpus.txt" --set data.context=16 --set model.dim=32 --set model.depth=1 --set model.heads=2)
dry=$("$MPDIST" "$SRC/configs/fortunes-gpt.cfg" --dry-run "${gpt[@]}" --set amp.opt_level=O2)
grep -Eq '^wte +embedding +\(N, 1, 16, 32\) +8192$' <<<"$dry" && grep -Eq '^head +linear +\(N, 1, 16, 256\) +0$' <<<"$dry" &&
  grep -q '^total parameters: 21472$' <<<"$dry" && grep -q 'opt level O2 (fp16): weights fp16' <<<"$dry" ||
  { echo "FAIL: gpt dry run"; echo "$dry"; exit 1; }
cat >"$TMP/gpt_layers.cfg" <<'CFG'
data: { format = "text"; context = 16; };
model: { layers = ( { type = "embedding"; out = 32; name = "wte"; }, { type = "posembed"; name = "wpe"; },
                    { type = "transformer"; heads = 2; causal = true; name = "blocks.0"; },
                    { type = "layernorm"; name = "ln_f"; },
                    { type = "linear"; out = 256; tie = true; name = "head"; } ); };
CFG
dry=$("$MPDIST" "$TMP/gpt_layers.cfg" --dry-run --set data.path="$TMP/corpus.txt")
grep -q '^total parameters: 21472$' <<<"$dry" && grep -Eq '^blocks.0 +transformer +\(N, 1, 16, 32\) +12704$' <<<"$dry" ||
  { echo "FAIL: gpt as model.layers dry run"; echo "$dry"; exit 1; }

# A directory of text is read whole: the run's own metrics or trace inside it would become
# training text in the next run (and change its split): refused, before anything is written.
mkdir -p "$TMP/corpus" && cp "$TMP/corpus.txt" "$TMP/corpus/a.txt"
expect_exit 2 "log.metrics: $TMP/corpus/runs/m.jsonl lies inside $TMP/corpus, which data.format \"text\" reads whole" \
  "$MPDIST" "$SRC/configs/fortunes-gpt.cfg" "${gpt[@]}" --set data.path="\"$TMP/corpus\"" --set "log.metrics=\"$TMP/corpus/runs/m.jsonl\""
expect_exit 2 "log.trace: $TMP/corpus/\.\./corpus/tr lies inside $TMP/corpus," \
  "$MPDIST" "$SRC/configs/fortunes-gpt.cfg" "${gpt[@]}" --set data.path="\"$TMP/corpus\"" --set "log.trace=\"$TMP/corpus/../corpus/tr\""
expect_ok "the refused run created nothing in the corpus" test ! -e "$TMP/corpus/runs"

# A classifier on text: the outputs per sample do not match the labels per sample; a language
# model on images: its embedding takes token ids; an embedding smaller than the data's ids.
expect_exit 2 "the model gives 1 outputs per sample \(a classifier\) but the data has 16 labels" \
  "$MPDIST" "$SRC/configs/fortunes-gpt.cfg" --dry-run "${gpt[@]}" --set model.preset=mlp
expect_exit 2 "model: its first layer, an embedding, takes token ids, but data.format \"idx\" gives images" \
  "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --dry-run --set model.preset=gpt --set model.depth=1
sed 's/name = "wte"; }/name = "wte"; vocab = 100; }/' "$TMP/gpt_layers.cfg" >"$TMP/gpt_vocab.cfg"
expect_exit 2 "model.layers.\[0\]: layer wte: vocab 100 is less than data.num_classes \(256\)" \
  "$MPDIST" "$TMP/gpt_vocab.cfg" --dry-run --set data.path="$TMP/corpus.txt"
expect_exit 2 "optim.zero: must be in \[0, 1\] \(got 2\)" "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set optim.zero=2
expect_exit 2 "train.accum_steps: must be in \[1, 4096\] \(got 0\)" "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set train.accum_steps=0
expect_exit 2 "data.loader_nice: must be in \[0, 19\] \(got 20\)" "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set data.loader_nice=20
expect_exit 2 "model.recompute: wrong type: expected bool" "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set model.recompute=3
expect_exit 2 "no config file" "$MPDIST"
expect_exit 2 "unknown option '--frobnicate'" "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --frobnicate
expect_exit 2 "--set needs a value" "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set
expect_exit 2 "unexpected argument 'b.cfg'" "$MPDIST" a.cfg b.cfg
expect_exit 2 "unknown command 'evall' \(train, eval, sample" "$MPDIST" evall "$SRC/configs/fashion-mnist-mlp.cfg"
expect_exit 2 "--checkpoint: the path is empty" "$MPDIST" eval "$SRC/configs/fashion-mnist-mlp.cfg" --checkpoint ""
expect_exit 2 "the config path is empty" "$MPDIST" eval "" --checkpoint x.h5
expect_exit 2 "the config path is empty" "$MPDIST" ""
expect_exit 2 "--resume: the path is empty \(a checkpoint, or auto; a fresh start" "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --resume=
expect_exit 2 "$TMP/missing.cfg: cannot read" "$MPDIST" "$TMP/missing.cfg"
expect_exit 2 "usage: mpdist eval CONFIG.cfg --checkpoint" "$MPDIST" eval x.cfg
expect_exit 2 "usage: mpdist export FILE.h5 OUT.h5" "$MPDIST" export a.h5
expect_exit 2 "unexpected argument 'b.h5'" "$MPDIST" inspect a.h5 b.h5
expect_exit 2 "unexpected argument 'extra'" "$MPDIST" info extra
expect_exit 2 "usage: mpdist inspect FILE.h5" "$MPDIST" inspect
expect_exit 2 "--resume is an option of mpdist train" "$MPDIST" inspect a.h5 --resume auto
# Under mpirun a command-line error is printed once, not once per rank.
expect_exit 2 "--resume needs a value" mpirun -np 2 "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --resume
expect_exit 2 "unknown option '--frobnicate'" mpirun -np 2 "$MPDIST" x.cfg --frobnicate
# Synthetic data of more channels than an image may have (it crashed), or more than memory
# holds for both splits (refused before the training split took minutes to fill), or too few
# samples for the ranks (named as synthetic data, not data.path); an embedding fed images.
SYN=("$SRC/configs/fashion-mnist-mlp.cfg" --set data.format=synthetic --set train.max_steps=2 --set log.progress=none)
expect_exit 2 "^mpdist: error: --set data.synthetic_shape: 16 channels, more than the 4 an image may have$" \
  "$MPDIST" "${SYN[@]}" --set 'data.synthetic_shape=[1,1,16]'
expect_exit 3 "synthetic data: the train and test splits: 100001 images of 4096x4096x4 needs 100001 x 4096" \
  "$MPDIST" "${SYN[@]}" --set 'data.synthetic_shape=[4096,4096,4]' --set data.synthetic_train=100000 --set data.synthetic_test=1
# (the rank count is the usage error: exit 2, 3 before 2026-12-03)
expect_exit 2 "^mpdist: error: synthetic data: 1 training sample cannot be shared by 2 ranks: start at most 1 rank, or train on more data$" \
  mpirun -np 2 "$MPDIST" "${SYN[@]}" --set data.synthetic_train=1
expect_exit 2 "model: its first layer, an embedding, takes token ids, but data.format \"idx\" gives images" \
  "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set 'model.layers=({type="embedding"; out=8;},{type="flatten";},{type="linear"; out=10;})'
# A model bigger than the host is refused before anything is allocated.
expect_exit 2 "model: needs [0-9.]+ GiB per rank \\(1000796000010 parameters" mpirun -np 2 "$MPDIST" \
  "$SRC/configs/fashion-mnist-mlp.cfg" --set "model.hidden=[1000000, 1000000]"

# bad_config NAME REGEX CONTENT: the file fails with exit 2 on 1 and 2 ranks.
bad_config() {
  printf '%b' "$3" >"$TMP/$1.cfg"
  expect_exit 2 "$2" "$MPDIST" "$TMP/$1.cfg"
  expect_exit 2 "$2" mpirun -np 2 "$MPDIST" "$TMP/$1.cfg"
}
bad_config syntax "syntax.cfg:2: syntax error" 'data: { batch_size = 64; };\noptim: { lr = ; };\n'
bad_config unknown "unknown.cfg:3: optim.lr_decay: unknown key" 'optim: {\n  lr = 0.1;\n  lr_decay = 0.5;\n};\n'
bad_config group "group.cfg:1: trainer: unknown group" 'trainer: { epochs = 1; };\n'
bad_config type "type.cfg:1: data.batch_size: wrong type: expected int, got string" 'data: { batch_size = "64"; };\n'
bad_config range "range.cfg:2: optim.lr: must be" '\noptim: { lr = -0.5; };\n'
bad_config range0 "range0.cfg:1: data.batch_size: must be in \\[1, 65536\\] \\(got 0\\)" 'data: { batch_size = 0; };\n'
bad_config enum 'enum.cfg:1: amp.opt_level: must be one of "O0", "O1", "O2", "O3" \(got "O4"\)' 'amp: { opt_level = "O4"; };\n'
bad_config convalgo 'convalgo.cfg:1: amp.conv_algo: must be one of "heuristic", "timed" \(got "fastest"\)' 'amp: { conv_algo = "fastest"; };\n'
bad_config graphs 'graphs.cfg:1: amp.cuda_graphs: must be one of "auto", "on", "off" \(got "yes"\)' 'amp: { cuda_graphs = "yes"; };\n'
bad_config profclock 'profclock.cfg:1: log.profile_clock: must be one of "host", "device" \(got "gpu"\)' 'log: { profile_clock = "gpu"; };\n'
bad_config layer "layer.cfg:1: model.layers.\\[0\\].out: missing" 'model: { layers = ( { type = "linear"; } ); };\n'
bad_config classes "classes.cfg:1: model.layers.\\[1\\]: model: the last layer \\(layers.1\\) produces 7 features but the data has 10 classes" 'model: { layers = ( { type = "linear"; out = 32; }, { type = "linear"; out = 7; } ); };\n'
bad_config bigint "bigint.cfg:1: train.max_steps: integer 4294967396 does not fit in 32 bits" 'train: { max_steps = 4294967396; };\n'
bad_config convkernel "convkernel.cfg:1: model.layers.\\[0\\].kernel: missing: required for conv2d layers" 'model: { layers = ( { type = "conv2d"; out = 8; } ); };\n'
bad_config relukernel "relukernel.cfg:2: model.layers.\\[1\\].kernel: not allowed for relu layers" 'model: { layers = ( { type = "flatten"; },\n { type = "relu"; kernel = 3; } ); };\n'
bad_config dropp "dropp.cfg:1: model.layers.\\[0\\].p: must be in \\[0, 1\\) \\(got 1\\)" 'model: { layers = ( { type = "dropout"; p = 1.0; } ); };\n'
bad_config heads "heads.cfg:2: model.layers.\\[0\\].heads: not allowed for conv2d layers" 'model: { layers = ( { type = "conv2d"; out = 8; kernel = 3;\n heads = 2; } ); };\n'
bad_config alias "alias.cfg:3: amp.keep_batchnorm_fp32: true contradicts amp.keep_norm_fp32 = false \\(.*alias.cfg:2\\), of which it is the older name" 'amp: {\n  keep_norm_fp32 = false;\n  keep_batchnorm_fp32 = true;\n};\n'
bad_config nesterov "nesterov.cfg:1: optim.nesterov: requires optim.momentum > 0" 'optim: { momentum = 0.0; nesterov = true; };\n'
expect_exit 2 "--set optim.lrr: unknown key" "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set optim.lrr=1
expect_exit 2 "--set train.epochs: wrong type" "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set train.epochs=many
expect_exit 2 "--set junk: expected key.path=value" "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set junk
expect_exit 2 "--set amp.device: \"cuda\": " "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set amp.device=cuda
expect_exit 2 "--set comm.backend: nccl, but " "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set comm.backend=nccl
expect_exit 2 'amp.loss_scale: must be "dynamic" or a number \(got "auto"\)' "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set amp.loss_scale=auto
expect_exit 2 '--set data.drop_last: each rank.s share of the training set \(50 samples\) is less than data.batch_size = 64' \
  "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set data.train_limit=50 --set data.drop_last=true
# A mistyped path switch in the environment is a usage error before anything is read (it fell back
# to the default path in silence before 2026-12-03), said once on 2 ranks; "0" and "" are fine.
expect_exit 2 '^mpdist: error: MPDIST_CPU_GEMM: "openbals" is not one of its values \(openblas\)$' \
  env MPDIST_CPU_GEMM=openbals mpirun -np 2 "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --dry-run
expect_exit 2 '^mpdist: error: MPDIST_CPU_ISA: "avx3" is not one of its values \(base, avx2, avx512\)$' \
  env MPDIST_CPU_ISA=avx3 "$MPDIST" info
# Only rank 1's environment is wrong (an MPMD launch): it says so (it exited 2 without a word,
# as the error came before MPI's start-up, where only rank 0 speaks).
expect_exit 2 '^mpdist: error: MPDIST_CPU_ISA: "bogus" is not one of its values' \
  mpirun -np 1 "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --dry-run : \
  -np 1 env MPDIST_CPU_ISA=bogus "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --dry-run
expect_ok "MPDIST_CPU_STAGED=0 and an empty MPDIST_CPU_CONV" env MPDIST_CPU_STAGED=0 MPDIST_CPU_CONV= \
  "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --dry-run
# Output that cannot be written is an error (issue 45): stdout on a full disk (/dev/full) turns a
# success into exit 1 with a line on stderr, for a training run and for the small commands.
full() { # full WHAT CMD...: exit 1, "cannot write the output to stdout (No space left on device)"
  local what=$1 rc=0
  shift
  timeout 120 "$@" >/dev/full 2>"$TMP/err" || rc=$?
  if [ "$rc" = 1 ] && grep -q '^mpdist: error: cannot write the output to stdout (No space left on device)$' "$TMP/err"; then
    echo "ok: $what > /dev/full: exit 1"
  else
    echo "FAIL: $what > /dev/full: exit $rc (want 1):"; sed 's/^/    /' "$TMP/err" | head -5
    failures=$((failures + 1))
  fi
}
full train "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set data.train_limit=256 --set data.test_limit=64 \
  --set train.max_steps=2 --set log.progress=none
full --version "$MPDIST" --version
full --help "$MPDIST" --help
full info "$MPDIST" info
# A closed pipe on stdout (`| head -1`) is the same error for a training run, not a SIGPIPE that
# ends it silently (exit 141) before its checkpoint: it trains on, saves, and exits 1.
rc=$( { timeout 120 "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set data.train_limit=256 \
        --set data.test_limit=64 --set train.max_steps=40 --set log.every=1 --set log.progress=none \
        --set "checkpoint.dir=\"$TMP/pipe\"" 2>"$TMP/err"; echo $? >"$TMP/rc"; } | head -1 >/dev/null
      cat "$TMP/rc")
if [ "$rc" = 1 ] && grep -q '^mpdist: error: cannot write the output to stdout (Broken pipe)$' "$TMP/err" &&
   [ -f "$TMP/pipe/ckpt-00000040.h5" ]; then
  echo "ok: train | head -1: exit 1, the checkpoint of step 40 saved"
else
  echo "FAIL: train | head -1: exit $rc (want 1, and ckpt-00000040.h5):"; sed 's/^/    /' "$TMP/err" | head -5
  ls "$TMP/pipe" 2>&1 | head -3
  failures=$((failures + 1))
fi
finish
