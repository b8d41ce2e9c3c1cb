#!/usr/bin/env bash
# Makes fuzz_ckpt_objects' base checkpoint (tests/fuzz/ckpt_base.h5: a 784-3-10 MLP trained 2
# steps at O2 fp16 with SGD momentum, today's format) and its seed corpus
# (tests/fuzz/corpus/ckpt_objects/): 8-byte edit records, one file per case of issue 45 (see
# fuzz_ckpt_objects.c for the record's bytes). Run from anywhere after a build:
#   tests/fuzz/make_ckpt_seeds.sh [BUILD_DIR]      (default build)
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
build=${1:-build}
[ -x "$build/mpdist" ] || { echo "make_ckpt_seeds: no $build/mpdist" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source launch/env.sh
mpirun -np 1 "$build/mpdist" configs/fashion-mnist-mlp.cfg --set 'model.hidden=[3]' \
  --set data.train_limit=256 --set data.test_limit=64 --set train.max_steps=2 \
  --set amp.opt_level=O2 --set log.progress=none --set "checkpoint.dir=\"$tmp/ck\"" >/dev/null
cp "$(ls "$tmp"/ck/ckpt-*.h5 | tail -1)" tests/fuzz/ckpt_base.h5
out=tests/fuzz/corpus/ckpt_objects
mkdir -p "$out"
rm -f "$out"/*
# seed NAME BYTES...: one file of 8-byte records, each given as 8 octal or \x bytes
seed() { local name=$1; shift; printf "$*" >"$out/$name"; }
seed untouched        '\x02\x00\x01\x00\x00\x00\x00\x00'
seed meta-step-x2     '\x02\x00\x02\x00\x00\x00\x00\x00'
seed meta-step-x1000  '\x02\x00\x04\x00\x00\x00\x00\x00'
seed meta-step-empty  '\x02\x00\x00\x00\x00\x00\x00\x00'
seed scaler-scale-x64 '\x0e\x00\x03\x00\x00\x00\x00\x00'
seed data-position-x1000 '\x16\x00\x04\x00\x00\x00\x00\x00'
seed consecutive-x2   '\x12\x00\x02\x00\x00\x00\x00\x00'
seed kind-two-strings '\x01\x06\x00\x00\x00\x00\x00\x00'
seed half-fp8         '\x05\x01fp8\x00\x00\x00'
seed model-cnn        '\x09\x01cnn\x00\x00\x00'
seed slots-exp-av     '\x0d\x01exp_av'
seed meta-epoch-neg   '\x03\x03\x01\x00\x00\x00\x00\x00'
seed meta-epoch-max   '\x03\x03\x09\x00\x00\x00\x00\x00'
seed global-batch-0   '\x07\x03\x00\x00\x00\x00\x00\x00'
seed growth-max       '\x0f\x03\x09\x00\x00\x00\x00\x00'
seed data-accum-0     '\x18\x03\x00\x00\x00\x00\x00\x00'
seed data-batch-0     '\x17\x03\x00\x00\x00\x00\x00\x00'
seed data-world-0     '\x19\x03\x00\x00\x00\x00\x00\x00'
seed static-65536     '\x13\x03\x00\x00\x00\x00\x00\x00\x0e\x02\x06\x00\x00\x00\x00\x00'
seed step-as-double   '\x02\x02\x05\x00\x00\x00\x00\x00'
seed step-as-byte     '\x02\x05\xff\x00\x00\x00\x00\x00'
seed format-removed   '\x00\x04\x00\x00\x00\x00\x00\x00'
seed digest-removed   '\x1b\x04\x00\x00\x00\x00\x00\x00'
seed params-zero      '\x1c\x00\x00\x00\x00\x00\x00\x00\x1d\x00\x00\x00\x00\x00\x00\x00\x1e\x00\x00\x00\x00\x00\x00\x00'
seed params-nan       '\x1c\x00\x0c\x00\x00\x00\x00\x00'
seed momentum-inf     '\x1f\x00\x0d\x00\x00\x00\x00\x00'
seed rng-state-zero   '\x20\x00\x00\x00\x00\x00\x00\x00'
echo "make_ckpt_seeds: tests/fuzz/ckpt_base.h5 and $(ls "$out" | wc -l) seeds in $out"
