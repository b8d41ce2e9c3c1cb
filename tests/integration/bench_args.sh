#!/usr/bin/env bash
# The benchmark and scaling scripts refuse a bad argument before anything runs (found by a probe of
# them as a user runs them): one line on stderr naming it, exit 2, and no launcher called (mpirun
# and srun are replaced on PATH by stubs that record any call). Each case once failed later, or
# ran anyway: a rank count of 0 (mpirun -np 0 takes every slot), an unknown model trained as the
# MLP, a level without its half type, --rounds without a value, --deflate abc skipped, a sweep of
# 0 parallel jobs, 0 rounds, an empty --ranks or --opt, --steps 0 (no limit), --link-gbs 0 (a
# division by zero after the runs), a negative latency, a rank count given twice.
source "$(dirname "$0")/common.bash"
cd "$SRC"
stubs=$TMP/stubs
mkdir -p "$stubs"
for c in mpirun mpiexec srun sbatch; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/called"\nexit 97\n' "$c" "$TMP" >"$stubs/$c"
  chmod +x "$stubs/$c"
done
export MPDIST_BENCH_BUILD=$(dirname "$MPDIST")
# refused REGEX ENV... -- CMD...: CMD (with the ENV assignments) exits 2 with one stderr line
# matching REGEX, and calls no launcher
refused() {
  local regex=$1 envs=() rc=0
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  rm -f "$TMP/called"
  env PATH="$stubs:$PATH" ${envs[@]+"${envs[@]}"} timeout 60 "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  if [ "$rc" = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ] && grep -Eq -- "$regex" "$TMP/err" &&
     [ ! -e "$TMP/called" ]; then
    echo "ok: ${envs[*]} ${*#$SRC/}: exit 2: $(cat "$TMP/err")"
  else
    echo "FAIL: ${envs[*]} $*: exit $rc (want 2, one line /$regex/, no launcher):"
    sed 's/^/    /' "$TMP/err" "$TMP/called" 2>/dev/null | head -10
    failures=$((failures + 1))
  fi
}
CFG=configs/fashion-mnist-mlp.cfg
refused "a rank count must be a whole number >= 1 \(got '0'\)" -- bash bench/ranks.sh 0
refused "unknown model 'cnnbn'" -- bash bench/opt_levels.sh cnnbn
refused "'O2' is not a level and half type" MPDIST_BENCH_LEVELS=O2 -- bash bench/opt_levels.sh mlp
refused "^usage: bench/checkpoint.sh" -- bash bench/checkpoint.sh --rounds
refused "--deflate a level 0-9" -- bash bench/checkpoint.sh --deflate abc
refused "MPDIST_SWEEP_JOBS must be a whole number >= 1" MPDIST_SWEEP_JOBS=0 -- bash bench/lr_sweep.sh mlp
refused "MPDIST_MEM_STEPS and MPDIST_MEM_ROUNDS must be" MPDIST_MEM_ROUNDS=0 -- bash bench/memory.sh
refused "--ranks: give at least one rank count" -- bash cluster/scaling.sh "$CFG" --ranks ""
refused "--opt: give at least one opt level" -- bash cluster/scaling.sh "$CFG" --opt " "
refused "--steps: a whole number >= 1 \(got '0'\)" -- bash cluster/scaling.sh "$CFG" --steps 0
refused "--batch: a whole number >= 1 \(got 'abc'\)" -- bash cluster/scaling.sh "$CFG" --mode strong --batch abc
refused "--link-gbs: a bandwidth > 0" -- bash cluster/scaling.sh "$CFG" --link-gbs 0
refused "--link-us: a latency >= 0" -- bash cluster/scaling.sh "$CFG" --link-us -5
refused "--ranks: 1 given twice" -- bash cluster/scaling.sh "$CFG" --ranks "2 1 1"
finish
