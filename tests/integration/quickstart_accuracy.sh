#!/usr/bin/env bash
# labels: integration nosan
# The quickstart's training exactly as the README runs it (2 ranks, the whole Fashion-MNIST,
# the shipped config) reaches the published MLP baseline, and 4 ranks finish the same config.
# A floor, not the README's number: OpenBLAS picks its kernels by CPU, so the accuracy differs in
# the third decimal between machines; with the kernels of nine CPU families (OPENBLAS_CORETYPE)
# it ended between 0.8978 and 0.9018 (docs/reproducibility.md), 0.018 above this floor.
# The time is printed, not asserted: machines are shared (bench/ranks.sh measures speed).
source "$(dirname "$0")/common.bash"
cd "$TMP"
for np in 2 4; do
  start=$(date +%s)
  timeout 600 mpirun -np $np "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set log.progress=plain \
    >"$TMP/out$np" 2>&1 || { echo "FAIL: np $np exited $?"; tail -20 "$TMP/out$np"; exit 1; }
  acc=$(sed -n 's/^test accuracy: //p' "$TMP/out$np")
  elapsed=$(( $(date +%s) - start ))
  echo "np $np: test accuracy $acc in $elapsed s"
  [ -n "$acc" ] || { echo "FAIL: np $np printed no accuracy"; tail -5 "$TMP/out$np"; exit 1; }
  if [ "$np" = 2 ] && ! awk -v a="$acc" 'BEGIN { exit !(a >= 0.880) }'; then
    echo "FAIL: accuracy $acc < 0.880 (published MLP baseline 0.883)"; exit 1
  fi
done
test -s runs/fashion-mnist-mlp/metrics.jsonl || { echo "FAIL: no metrics file"; exit 1; }
echo "ok"
