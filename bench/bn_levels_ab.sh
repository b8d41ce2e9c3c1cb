#!/usr/bin/env bash
# bench_batchnorm of two CPU builds side by side, alternating, the second at every vector level of
# engine/backend_cpu/isa.h (3 AVX512BF16, 2 AVX512, 1 AVX2, 0 baseline; a level the CPU lacks runs
# at the highest it has). Prints, per build/level and dtype, the fastest round's forward, backward
# and sums-only ms per step (both cnn_bn BatchNorm layers, 2 threads, 30 steps).
#
# Usage: bench/bn_levels_ab.sh BEFORE_BUILD AFTER_BUILD [ROUNDS (default 5)]
#   BEFORE_BUILD, AFTER_BUILD   build directories holding bench_batchnorm (AFTER's takes LEVEL)
# Exits 2 on a usage error.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
die() { echo "bn_levels_ab: $*" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: bench/bn_levels_ab.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]"
for b in "$1" "$2"; do [ -x "$b/bench_batchnorm" ] || die "$b/bench_batchnorm: not built"; done
rounds=${3:-5}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer, not '$rounds'"
# run BUILD LABEL [LEVEL]: one bench_batchnorm run's three dtype rows, each prefixed by LABEL (a
# level's label is the level the bench reports it ran at, so a capped level the CPU lacks shows)
run() {
  local out label=$2
  out=$("$1/bench_batchnorm" 2 30 ${3:+"$3"})
  [ -z "${3:-}" ] || label=level$(sed -n '1s/.*vector level \([0-9]\).*/\1/p' <<<"$out")
  tail -3 <<<"$out" | sed "s#^#$label #"
}
for r in $(seq "$rounds"); do
  run "$1" before
  for l in 3 2 1 0; do run "$2" "" "$l"; done
done | awk '{k=$1" "$2; if(!(k in f)||$3<f[k])f[k]=$3; if(!(k in g)||$4<g[k])g[k]=$4;
             if(!(k in h)||$7<h[k])h[k]=$7}
            END{for(k in f) printf "%-14s fwd %.3f bwd %.3f sums %s\n", k, f[k], g[k], h[k]}' | sort
