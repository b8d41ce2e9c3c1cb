#!/usr/bin/env bash
# Training runs on 1, 2 and 4 ranks (a real Fashion-MNIST subset) finish, print the test
# accuracy, and write JSON Lines whose records are in order and whose summary names the world.
source "$(dirname "$0")/common.bash"

for np in 1 2 4; do
  m=$TMP/np$np/metrics.jsonl
  timeout 300 mpirun -np $np "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" \
    --set data.train_limit=4096 --set data.test_limit=1000 --set train.epochs=2 \
    --set log.every=10 --set "log.metrics=\"$m\"" >"$TMP/out" 2>&1 || {
    echo "FAIL: np $np exited $?"; cat "$TMP/out"; exit 1; }
  acc=$(sed -n 's/^test accuracy: //p' "$TMP/out")
  [ -n "$acc" ] || { echo "FAIL: np $np printed no test accuracy"; cat "$TMP/out"; exit 1; }
  head -1 "$m" | grep -q '^{"type":"step","step":10,' || { echo "FAIL: first record"; head -2 "$m"; exit 1; }
  tail -1 "$m" | grep -q "^{\"type\":\"summary\",\"world_size\":$np," || { echo "FAIL: summary"; tail -1 "$m"; exit 1; }
  tail -1 "$m" | grep -q '"amp":{"weights":"fp32","master_weights":false,"gemm":"fp32","batchnorm_params":"fp32","keep_batchnorm_fp32":true,"loss_scale":1,"grads":"fp32"}' ||
    { echo "FAIL: summary lacks the resolved opt-level table"; tail -1 "$m"; exit 1; }
  [ "$(grep -c '"type":"eval"' "$m")" = 2 ] || { echo "FAIL: want 2 eval records"; exit 1; }
  # Only rank 0 speaks: one banner, one accuracy line.
  [ "$(grep -c '^mpdist ' "$TMP/out")" = 1 ] || { echo "FAIL: banner count"; cat "$TMP/out"; exit 1; }
  awk -v a="$acc" -v np=$np 'BEGIN { if (a < 0.70) { print "FAIL: np " np " accuracy " a; exit 1 } }'
  echo "ok: np $np accuracy $acc"
done
