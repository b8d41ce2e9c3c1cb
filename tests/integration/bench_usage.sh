#!/usr/bin/env bash
# The side-by-side and inference bench scripts refuse bad settings with exit 2 and one line on
# stderr, before running anything: bench/ab_builds.sh without a config, with a build directory
# that holds no mpdist, with a config that does not exist, or with a non-integer or zero
# MPDIST_AB_ROUNDS / _THREADS / _TIMEOUT; bench/inference.sh with an unknown model, a
# non-integer MPDIST_INF_ROUNDS, or an MPDIST_INF_DATA without Fashion-MNIST; bench_batchnorm
# with a zero, non-integer or trailing-junk count, a vector level outside 0-3 or a fourth
# argument; bench_batchnorm, bench_attention and bench_optim with a mistyped MPDIST_CPU_GEMM;
# bench/bn_levels_ab.sh with one build, a build without bench_batchnorm or a zero
# round count; bench/ckpt_stall.sh with a zero round count or a non-integer save interval;
# bench/activation_plan.sh with a zero batch, an unknown opt level or model, or a list of levels
# or models set but blank (empty, or only blanks);
# tests/gpu/graphs.sh with a non-integer round or step count, an unknown device or a build
# without mpdist; tests/gpu/conv_algo.sh with a non-integer round count, a speed switch other
# than 0 or 1 or a build without mpdist; bench/gpu_profiles.sh with too few steps, an unknown
# device, preset or batch, or no mpdist; bench_loader with 2 synthetic channels, a LIMIT that
# is not a number, or a seventh argument. mpirun is a stub that records any call, and none may
# be made.
source "$(dirname "$0")/common.bash"
cd "$SRC"
stubs=$TMP/stubs
mkdir -p "$stubs" "$TMP/empty"
printf '#!/bin/sh\necho "mpirun $*" >>"%s/called"\nexit 97\n' "$TMP" >"$stubs/mpirun"
chmod +x "$stubs/mpirun"
build=$(dirname "$MPDIST")
cfg=$SRC/configs/fashion-mnist-mlp.cfg

# usage REGEX ENV... -- CMD...: exit 2, REGEX on stderr, nothing launched
usage() {
  local regex=$1 envs=() rc=0
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  rm -f "$TMP/called"
  env PATH="$stubs:$PATH" ${envs[@]+"${envs[@]}"} timeout 60 "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  if [ "$rc" = 2 ] && grep -Eq -- "$regex" "$TMP/err" && [ ! -e "$TMP/called" ]; then
    echo "ok: ${envs[*]-} $*: exit 2: $(head -1 "$TMP/err")"
  else
    echo "FAIL: ${envs[*]-} $*: exit $rc (want 2), stderr want /$regex/:"
    sed 's/^/    stderr: /' "$TMP/err" | head -5
    [ ! -e "$TMP/called" ] || sed 's/^/    called: /' "$TMP/called"
    failures=$((failures + 1))
  fi
}

usage '^usage: bench/ab_builds.sh' -- bash bench/ab_builds.sh "$build" "$build"
usage "^graphs: MPDIST_GPU_GRAPH_ROUNDS must be a positive integer \(got 'x'\)\$" MPDIST_GPU_GRAPH_ROUNDS=x -- bash tests/gpu/graphs.sh "$build" "$TMP/g"
usage "^graphs: no mpdist in $TMP/empty\$" -- bash tests/gpu/graphs.sh "$TMP/empty" "$TMP/g"
usage "^graphs: MPDIST_GPU_GRAPH_DEVICE must be cuda or cpu \(got 'tpu'\)\$" MPDIST_GPU_GRAPH_DEVICE=tpu -- bash tests/gpu/graphs.sh "$build" "$TMP/g"
usage "^graphs: MPDIST_GPU_GRAPH_STEPS must be a positive integer \(got '0'\)\$" MPDIST_GPU_GRAPH_STEPS=0 -- bash tests/gpu/graphs.sh "$build" "$TMP/g"
usage "^conv_algo: MPDIST_GPU_CONV_ROUNDS must be a positive integer \(got 'x'\)\$" MPDIST_GPU_CONV_ROUNDS=x -- bash tests/gpu/conv_algo.sh "$build" "$TMP/c"
usage "^conv_algo: MPDIST_GPU_CONV_SPEED must be 0 or 1 \(got '2'\)\$" MPDIST_GPU_CONV_SPEED=2 -- bash tests/gpu/conv_algo.sh "$build" "$TMP/c"
usage "^conv_algo: no mpdist in $TMP/empty\$" -- bash tests/gpu/conv_algo.sh "$TMP/empty" "$TMP/c"
usage "^ab_builds: no mpdist in $TMP/empty\$" -- bash bench/ab_builds.sh "$TMP/empty" "$build" "$cfg"
usage "^ab_builds: no config $TMP/none.cfg\$" -- bash bench/ab_builds.sh "$build" "$build" "$TMP/none.cfg"
for args in "0" "two" "2x" "2 0" "2 20 4" "2 20 x" "2 20 12" "2 20 1 1"; do
  # shellcheck disable=SC2086 # the words are the arguments
  usage '^bench_batchnorm: usage: bench_batchnorm' -- "$build/bench_batchnorm" $args
done
for v in MPDIST_AB_ROUNDS MPDIST_AB_THREADS MPDIST_AB_TIMEOUT; do
  usage "^ab_builds: $v must be a positive integer, not '0'\$" "$v=0" -- bash bench/ab_builds.sh "$build" "$build" "$cfg"
  usage "^ab_builds: $v must be a positive integer, not 'two'\$" "$v=two" -- bash bench/ab_builds.sh "$build" "$build" "$cfg"
done
# a mistyped path switch would time the default path under another's name
for b in bench_batchnorm bench_attention bench_optim; do
  usage "^$b: error: MPDIST_CPU_GEMM: \"openbals\" is not one of its values \(openblas\)\$" \
    MPDIST_CPU_GEMM=openbals -- "$build/$b"
done
usage '^bn_levels_ab: usage: bench/bn_levels_ab.sh' -- bash bench/bn_levels_ab.sh "$build"
usage "^bn_levels_ab: $TMP/empty/bench_batchnorm: not built\$" -- bash bench/bn_levels_ab.sh "$build" "$TMP/empty"
usage "^bn_levels_ab: ROUNDS must be a positive integer, not '0'\$" -- bash bench/bn_levels_ab.sh "$build" "$build" 0

usage '^ckpt_stall: ROUNDS must be 1-99$' -- bash bench/ckpt_stall.sh 0
usage '^ckpt_stall: EVERY must be 1-99$' -- bash bench/ckpt_stall.sh 3 x
usage "^inference: unknown model 'vgg'" "MPDIST_BENCH_BUILD=$build" -- bash bench/inference.sh vgg
usage "^activation_plan: MPDIST_PLAN_BATCH must be a positive integer \(got '0'\)\$" "MPDIST_BENCH_BUILD=$build" "MPDIST_PLAN_BATCH=0" -- bash bench/activation_plan.sh
usage "^activation_plan: unknown opt level 'O5' \(O0 to O3\)\$" "MPDIST_BENCH_BUILD=$build" "MPDIST_PLAN_LEVELS=O2 O5" -- bash bench/activation_plan.sh
usage "^activation_plan: unknown model 'vgg'" "MPDIST_BENCH_BUILD=$build" "MPDIST_PLAN_MODELS=resnet20 vgg" -- bash bench/activation_plan.sh
# (MPDIST_PLAN_OUT and a batch of 0 for mpdist: a script that ran anyway would write here and
# stop at its first dry run)
for blank in "" "  " " 	 "; do
  usage '^activation_plan: MPDIST_PLAN_LEVELS names no opt level' "MPDIST_BENCH_BUILD=$build" "MPDIST_PLAN_OUT=$TMP/plan" \
    "MPDIST_PLAN_LEVELS=$blank" -- bash bench/activation_plan.sh -- --set data.batch_size=0
  usage '^activation_plan: MPDIST_PLAN_MODELS names no model' "MPDIST_BENCH_BUILD=$build" "MPDIST_PLAN_OUT=$TMP/plan" \
    "MPDIST_PLAN_MODELS=$blank" -- bash bench/activation_plan.sh -- --set data.batch_size=0
done
usage '^inference: rounds must be an integer >= 1' "MPDIST_BENCH_BUILD=$build" MPDIST_INF_ROUNDS=x -- bash bench/inference.sh cnn_bn
usage "^inference: no Fashion-MNIST in $TMP/empty " "MPDIST_BENCH_BUILD=$build" "MPDIST_INF_DATA=$TMP/empty" -- bash bench/inference.sh cnn_bn
usage '^gpu_profiles: MPDIST_PROFILES_STEPS must be 12 or more$' "MPDIST_BIN=$MPDIST" MPDIST_PROFILES_STEPS=5 -- bash bench/gpu_profiles.sh "$TMP/gp"
usage '^gpu_profiles: MPDIST_PROFILES_DEVICE must be cuda or cpu$' "MPDIST_BIN=$MPDIST" MPDIST_PROFILES_DEVICE=tpu -- bash bench/gpu_profiles.sh "$TMP/gp"
usage "^gpu_profiles: MPDIST_PROFILES_BATCHES: '0' is not a batch size\$" "MPDIST_BIN=$MPDIST" "MPDIST_PROFILES_BATCHES=128 0" -- bash bench/gpu_profiles.sh "$TMP/gp"
mkdir -p "$TMP/gp2" && echo kept >"$TMP/gp2/profiles.md"
usage "^gpu_profiles: unknown preset 'vgg'" "MPDIST_BIN=$MPDIST" "MPDIST_PROFILES_MODELS=gpt vgg" -- bash bench/gpu_profiles.sh "$TMP/gp2"
expect_ok "a refused gpu_profiles.sh leaves the last table and makes no runs/" \
  test "$(cat "$TMP/gp2/profiles.md")" = kept -a ! -e "$TMP/gp2/runs"
usage "^scaling_profiles: unknown preset 'vgg'" "MPDIST_BIN=$MPDIST" "MPDIST_SCALING_MODELS=vgg" -- bash bench/scaling_profiles.sh "$TMP/sp"
expect_ok "a refused scaling_profiles.sh makes no runs/" test ! -e "$TMP/sp/runs"
usage '^gpu_profiles: .*: no mpdist' "MPDIST_BIN=$TMP/empty/mpdist" -- bash bench/gpu_profiles.sh "$TMP/gp"
inside=$SRC/venv-probe.$$ # (a venv inside the repository is refused, and nothing made for it)
usage "^torch_venv: $inside/x/venv is inside the repository" "MPDIST_TORCH_VENV=$inside/x/venv" -- bash "$SRC/bench/torch_venv.sh"
expect_ok "a refused torch_venv.sh makes no directory" test ! -e "$inside"
rm -rf "$inside"
usage '^bench_loader: synthetic: CHANNELS must be 1 or 3 \(got 2\)$' -- "$build/bench_loader" synthetic 32 2 1
usage '^usage: bench_loader ROOT SIZE' -- "$build/bench_loader" synthetic 32 3 1 1 12x
usage '^usage: bench_loader ROOT SIZE' -- "$build/bench_loader" synthetic 32 3 1 1 10 extra
finish
