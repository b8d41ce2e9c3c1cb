#!/usr/bin/env bash
# The GPU step benchmark's report (issue 44), without a GPU: bench/gpu_step_report.py on a
# sample of runs in bench/gpu_step.sh's raw.csv format (tests/data/gpu_step_raw.csv: resnet20 at
# batch 128 with round 1's images/s and memory from the H200 run of 2026-11-27 and the other
# rounds, device times and host bytes made up; wrn16-4 at batch 512 with a failed mpdist round and
# torch.compile failing every round). Checked: a row is the median over the rounds with its
# range; the ratio to PyTorch is the median of the rounds' ratios to the faster PyTorch amp (here
# amp-compile, not amp), or to amp where compile failed; device memory comes from
# device_peak_bytes, not the device's whole use or the host's; the goals are judged on the medians
# and on device memory, and one that fails only on the median says so; failures are counted and
# named. The transformers (issue 49): gpt's O2 rows against the fastest PyTorch amp (amp-bf16)
# in tokens/s and memory, and none of the convolutional goals. Then bench/gpu_step.sh's dry run:
# the rounds alternate mpdist and PyTorch (reversed in even rounds), with at least 200 timed steps
# after the warm-up; gpt and gpt2-small take their configs, batches and the text; bad settings
# are refused.
source "$(dirname "$0")/common.bash"
cd "$SRC"

check() {
  if [ "$2" = "$3" ]; then echo "ok: $1"; else
    echo "FAIL: $1: want '$2', got '$3'"; failures=$((failures + 1)); fi
}
rc=0
python3 bench/gpu_step_report.py tests/data/gpu_step_raw.csv "$TMP/rep" "# GPU: NVIDIA H200, 570.86.15; sample" \
  >"$TMP/out" 2>&1 || rc=$?
check "exit 1: runs failed and goals missed" 1 "$rc"
check "the header first" "# GPU: NVIDIA H200, 570.86.15; sample" "$(head -1 "$TMP/rep/table.txt")"
row() { grep -E "^$1 +$2 $3 " "$TMP/rep/table.txt" | tr -s ' '; }
# model batch row images/s [min, max] step_ms dev_ms dev_MiB used_MiB host_MiB TFLOP/s vs_PyT [min, max] x_O0 mem_O0 status
check "O2: median and range over the rounds, ratios of the rounds" \
  "resnet20 128 O2 13145 [12000, 16000] 9.74 8.76 418.7 1574 250 1.1 0.88 [0.83, 1.03] 0.88 0.63 ok" "$(row resnet20 128 O2)"
check "O0 against PyTorch fp32" "1.00 [0.97, 1.05]" "$(row resnet20 128 O0 | awk '{ print $13, $14, $15 }')"
check "the faster amp is named" "resnet20 batch 128: the faster PyTorch amp is PyTorch-amp-compile." \
  "$(grep '^resnet20 batch 128: the faster' "$TMP/rep/table.txt")"
check "where compile failed, amp is the reference" "0.53 [0.52, 0.55]" "$(row wrn16-4 512 O2 | awk '{ print $13, $14, $15 }')"
check "a failed round is counted and named" "1 of 3 runs failed: exit 6: mpdist: error: communication timeout" \
  "$(row wrn16-4 512 O2 | sed 's/.* ok$//; s/^.*[0-9] \([0-9]* of\)/\1/')"
check "torch.compile's failure said once" \
  "wrn16-4 batch 512: torch.compile did not work on this machine in 3 of 3 rounds: BackendCompilerFailed: no triton" \
  "$(grep 'torch.compile did not work' "$TMP/rep/table.txt")"
goal() { grep -F "$1" "$TMP/rep/goals.txt"; }
check "a goal on the medians" \
  "PASS resnet20 batch 128: O0 >= 1.0x PyTorch fp32 images/s (issue 48) (1.00x, rounds 0.97-1.05)" \
  "$(goal 'resnet20 batch 128: O0 >= 1.0x')"
check "a goal that fails inside the range says so" \
  "FAIL resnet20 batch 128: O2 fp16 >= 1.2x PyTorch amp images/s (issue 7) (1.06x, rounds 0.96-1.33): fails on the median only, inside the rounds' range" \
  "$(goal 'resnet20 batch 128: O2 fp16 >= 1.2x PyTorch amp')"
check "a goal on device memory" \
  "FAIL resnet20 batch 128: O2 fp16 device memory <= PyTorch-amp-compile's (issue 48) (2.93x)" \
  "$(goal 'resnet20 batch 128: O2 fp16 device memory <= PyTorch-amp-compile')"
check "goals counted" "gpu_step: 4 runs failed, 9 goals missed" "$(tail -1 "$TMP/out")"
check "table.csv: header, columns, a row per configuration" \
  "# GPU: NVIDIA H200, 570.86.15; sample|model,batch,row,runs,images_per_s,images_per_s_min,images_per_s_max,step_ms,device_ms,device_peak_bytes,device_used_peak_bytes,host_peak_bytes,tflops,reference,vs_pytorch,vs_pytorch_min,vs_pytorch_max,speedup_vs_O0,device_mem_vs_O0,input_wait_s,loader_fill_ms,skipped_steps,failed_runs|12" \
  "$(head -2 "$TMP/rep/table.csv" | tr '\n' '|')$(wc -l <"$TMP/rep/table.csv")"
sed 's/,O2,/,O9,/' tests/data/gpu_step_raw.csv >"$TMP/bad.csv"
rc=0; python3 bench/gpu_step_report.py "$TMP/bad.csv" "$TMP/bad" 2>"$TMP/err" >/dev/null || rc=$?
check "an unknown row: exit 2" "2: gpu_step_report: $TMP/bad.csv: unknown row 'O9'" "$rc: $(cat "$TMP/err")"
cut -d, -f1-7 tests/data/gpu_step_raw.csv >"$TMP/short.csv"
rc=0; python3 bench/gpu_step_report.py "$TMP/short.csv" "$TMP/bad" 2>"$TMP/err" >/dev/null || rc=$?
check "missing columns: exit 2" "2" "$rc"

# The transformers (issue 49): O2 fp16 and bf16 against the fastest PyTorch amp (here amp-bf16),
# in sequences/s, which are tokens/s, and device memory; made-up numbers.
{
  head -1 tests/data/gpu_step_raw.csv
  for r in 1 2; do
    echo "gpt,32,O2,$r,ok,$((3000 + 100 * r)),9,9,100000000,,,,,,x"
    echo "gpt,32,O2-bf16,$r,ok,$((4000 + 100 * r)),8,8,90000000,,,,,,x"
    echo "gpt,32,PyTorch-amp,$r,ok,3000,9,9,80000000,,,,,,x"
    echo "gpt,32,PyTorch-amp-bf16,$r,ok,$((3200 + 100 * r)),9,9,95000000,,,,,,x"
  done
} >"$TMP/gpt.csv"
rc=0
python3 bench/gpu_step_report.py "$TMP/gpt.csv" "$TMP/gpt" "# gpt" >"$TMP/gpt.out" 2>&1 || rc=$?
check "gpt: a goal missed, exit 1" 1 "$rc"
check "gpt: the fastest amp is amp-bf16" "gpt batch 32: the faster PyTorch amp is PyTorch-amp-bf16." \
  "$(grep '^gpt batch 32: the faster' "$TMP/gpt/table.txt")"
check "gpt: issue 49's goals, O2 fp16 and bf16, tokens/s and memory" \
  "FAIL gpt batch 32: O2 >= 1.2x the best PyTorch amp (PyTorch-amp-bf16) tokens/s (issue 49) (0.94x, rounds 0.94-0.94)|FAIL gpt batch 32: O2 device memory <= PyTorch-amp-bf16's (issue 49) (1.05x)|PASS gpt batch 32: O2-bf16 >= 1.2x the best PyTorch amp (PyTorch-amp-bf16) tokens/s (issue 49) (1.24x, rounds 1.24-1.24)|PASS gpt batch 32: O2-bf16 device memory <= PyTorch-amp-bf16's (issue 49) (0.95x)" \
  "$(tr '\n' '|' <"$TMP/gpt/goals.txt" | sed 's/|$//')"
check "gpt: no convolutional goal" "0" "$(grep -c 'issue 7\|issue 48' "$TMP/gpt/goals.txt")"

# The dry run: what would run, in which order.
dry() { env MPDIST_GPU_STEP_DRY=1 MPDIST_BENCH_BUILD="$TMP/none" "$@" bash bench/gpu_step.sh 2>"$TMP/err"; }
dry MPDIST_GPU_STEP_MODELS=resnet20 MPDIST_GPU_STEP_BATCHES=128 MPDIST_GPU_STEP_ROWS="O0 O2-bf16" \
  MPDIST_GPU_STEP_TORCH="fp32 amp-compile" >"$TMP/dry"
order=$(grep -E '^timeout' "$TMP/dry" | sed -nE 's/.*amp\.opt_level=([^ ]*) .*amp\.half=([^ ]*) .*/\1-\2/p; s/.*--mode ([^ ]*) .*/\1/p' | tr '\n' ' ')
check "three rounds, alternating, reversed in even rounds" \
  "O0-fp16 O2-bf16 fp32 amp-compile amp-compile fp32 O2-bf16 O0-fp16 O0-fp16 O2-bf16 fp32 amp-compile " "$order"
check "mpdist: 240 steps in windows of 20, every run" "6" "$(grep -c 'train.max_steps=240 .*log.every=20' "$TMP/dry")"
check "mpdist: its rank not bound to one core, as PyTorch's process is not" "6" "$(grep -c 'mpirun -np 1 --bind-to none ' "$TMP/dry")"
check "mpdist: cuDNN's algorithms timed, every run" "6" "$(grep -c 'amp.conv_algo=timed ' "$TMP/dry")"
check "PyTorch: 220 timed steps after 20 warm-up, every run" "6" "$(grep -c -- '--steps 220 --warmup 20' "$TMP/dry")"
dry MPDIST_GPU_STEP_MODELS="gpt gpt2-small" MPDIST_GPU_STEP_ROWS=O2 MPDIST_GPU_STEP_TORCH=amp-bf16 \
  MPDIST_GPU_STEP_ROUNDS=1 MPDIST_GPU_STEP_TEXT=/text >"$TMP/dry"
check "gpt: its config, batch 32, the text, attention auto; gpt2-small: batch 8" \
  "configs/fortunes-gpt.cfg 32 /text auto|configs/gpt2-small.cfg 8 /text auto|" \
  "$(grep -E '^timeout.*mpdist' "$TMP/dry" | sed -E 's/.*mpdist ([^ ]*) .*data.path=\\"([^\\]*)\\".*model.attention=\\"([a-z]*)\\".*data.batch_size=([0-9]*) .*/\1 \4 \2 \3/' | tr '\n' '|')"
check "PyTorch: gpt and gpt2-small at their batches, amp-bf16" \
  "--model gpt --batch 32 --mode amp-bf16|--model gpt2-small --batch 8 --mode amp-bf16|" \
  "$(grep -oE -- '--model [^ ]* --batch [0-9]* --mode [^ ]*' "$TMP/dry" | tr '\n' '|')"
for bad in "MPDIST_GPU_STEP_ROWS=O9" "MPDIST_GPU_STEP_ATTENTION=fast" "MPDIST_GPU_STEP_TORCH=compile" "MPDIST_GPU_STEP_CONV_ALGO=fast" "MPDIST_GPU_STEP_ROUNDS=0" "MPDIST_GPU_STEP_STEPS=40"; do
  rc=0; dry "$bad" >/dev/null || rc=$?
  check "$bad refused with exit 2 and one line" "2 1" "$rc $(wc -l <"$TMP/err")"
done
finish
