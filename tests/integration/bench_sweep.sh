#!/usr/bin/env bash
# labels: integration nosan
# bench/cpu_speed.sh compares each framework at its best setting (issue 44). First its sweep
# logic (bench/cpu_sweep.py) on made-up runs whose answers are known by hand: the finalists are
# the top screened settings; the best is the finalist with the highest median over the rounds,
# not the best screened one; a finalist that failed a round cannot win; the best PyTorch is the
# peer with the higher median; a ratio of bests is the median of the rounds' ratios, not the ratio
# of the medians; the goals are judged on it; every setting has its row in settings.csv; with a
# bf16 level, the bf16 level's ratio to the faster PyTorch under autocast. Then the
# whole script on a tiny mlp (5 steps, 512 images, Debian's PyTorch): the grid's settings are
# screened, the finalists run in every round, each run had the threads and ranks its setting
# names, and the tables name the winners.
source "$(dirname "$0")/common.bash"
cd "$SRC"

# check WHAT EXPECTED ACTUAL
check() {
  if [ "$2" = "$3" ]; then echo "ok: $1 ($3)"; else
    echo "FAIL: $1: want '$2', got '$3'"; failures=$((failures + 1)); fi
}

raw=$TMP/raw.csv
{
  echo "model,stage,round,framework,setting,status,samples_per_s,tokens_per_s,final_loss,test_loss,version,log"
  # mpdist-O0: screened s2 > s3 > s1, s4 failed; in the rounds s3's median (270) beats s2's (250)
  echo "cnn_bn,screen,0,mpdist-O0,s1,ok,100,100,1,1,v,l"
  echo "cnn_bn,screen,0,mpdist-O0,s2,ok,300,300,1,1,v,l"
  echo "cnn_bn,screen,0,mpdist-O0,s3,ok,200,200,1,1,v,l"
  echo "cnn_bn,screen,0,mpdist-O0,s4,failed: exit 1,,,,,v,l"
  # mpdist-O2-fp16: its screened best failed round 2, so the other finalist wins
  echo "cnn_bn,screen,0,mpdist-O2-fp16,h1,ok,500,500,1,1,v,l"
  echo "cnn_bn,screen,0,mpdist-O2-fp16,h2,ok,400,400,1,1,v,l"
  echo "cnn_bn,screen,0,pytorch-a,t1,ok,100,100,1,1,1.13,l"
  echo "cnn_bn,screen,0,pytorch-b,t1,ok,50,50,1,1,2.15,l"
  echo "cnn_bn,screen,0,pytorch-b,t2,ok,150,150,1,1,2.15,l"
  for r in 1 2 3; do
    s2=(0 250 260 240) s3=(0 100 270 280) h1=(0 900 0 900) h2=(0 300 320 310) a=(0 100 100 100) b=(0 120 200 90)
    echo "cnn_bn,round,$r,mpdist-O0,s2,ok,${s2[r]},,1,1,v,l"
    echo "cnn_bn,round,$r,mpdist-O0,s3,ok,${s3[r]},,1,1,v,l"
    if [ "$r" = 2 ]; then echo "cnn_bn,round,$r,mpdist-O2-fp16,h1,failed: exit 3,,,,,v,l"
    else echo "cnn_bn,round,$r,mpdist-O2-fp16,h1,ok,${h1[r]},,1,1,v,l"; fi
    echo "cnn_bn,round,$r,mpdist-O2-fp16,h2,ok,${h2[r]},,1,1,v,l"
    echo "cnn_bn,round,$r,pytorch-a,t1,ok,${a[r]},,1,1,1.13,l"
    echo "cnn_bn,round,$r,pytorch-b,t2,ok,${b[r]},,1,1,2.15,l"
  done
} >"$raw"
sweep() { python3 bench/cpu_sweep.py "$@"; }
check "finalists are the top screened" "s2 s3" "$(sweep finalists "$raw" cnn_bn mpdist-O0 2 | tr '\n' ' ' | sed 's/ $//')"
check "the best screened" "s2" "$(sweep best-screened "$raw" cnn_bn mpdist-O0)"
check "a setting's screening rate" "200" "$(sweep rate "$raw" cnn_bn mpdist-O0 s3)"
check "a failed setting has no rate" "1" "$(sweep rate "$raw" cnn_bn mpdist-O0 s4 >/dev/null; echo $?)"
rc=0
sweep report "$raw" "$TMP/rep" >"$TMP/report" 2>"$TMP/report.err" || rc=$?
check "report exits 1 (a run failed, a goal missed)" 1 "$rc"
row() { grep "^| $1 |" "$TMP/report"; }
# | framework | version | best setting | rate | range | vs best PyTorch | loss |
check "O0's best is the finalist with the higher median" "s3 | 270 | [100, 280]" \
  "$(row mpdist-O0 | awk -F' [|] ' '{ print $3 " | " $4 " | " $5 }')"
check "a finalist that failed a round cannot win" "h2 | 310" "$(row mpdist-O2-fp16 | awk -F' [|] ' '{ print $3 " | " $4 }')"
check "the best PyTorch is the peer with the higher median" "1.00" "$(row pytorch-b | awk -F' [|] ' '{ print $6 }')"
# rounds' ratios s3/b: 100/120, 270/200, 280/90 -> median 1.35 (the medians' ratio would be 2.25)
check "the ratio of bests is the median of the rounds' ratios" "1.35" "$(row mpdist-O0 | awk -F' [|] ' '{ print $6 }')"
# h2/s3 in the rounds: 300/100, 320/270, 310/280 -> median 1.19
check "the side-by-side row" "| cnn_bn | images/s | 270 | 310 | 100 | 120 | 1.35 | 1.19 |" "$(row cnn_bn)"
check "goal judged on the ratio of bests" "FAIL cnn_bn: mpdist O0 >= 1.3x the best PyTorch's images/s (1.35x)" \
  "$(grep 'O0 >= 1.3x' "$TMP/rep/goals.txt" | sed 's/^PASS/FAIL/')"
check "a goal that holds passes" "PASS" "$(grep -o '^PASS cnn_bn: mpdist O0' "$TMP/rep/goals.txt" | cut -c1-4)"
check "the half level's goal" "PASS cnn_bn: O2-fp16 >= 0.85x O0 (1.19x)" "$(grep O2-fp16 "$TMP/rep/goals.txt")"
check "every setting has its row in settings.csv" "9" "$(tail -n +2 "$TMP/rep/settings.csv" | wc -l)"
check "a finalist's row" "cnn_bn,mpdist-O0,s3,200,270,100,280,3,1,1" "$(grep ',s3,' "$TMP/rep/settings.csv")"
check "a setting screened only" "cnn_bn,mpdist-O0,s1,100,,,,0,0,0" "$(grep ',s1,' "$TMP/rep/settings.csv")"
check "the failed run is named on stderr" "1" "$(grep -c 'mpdist-O2-fp16 \[h1\]: failed: exit 3' "$TMP/report.err")"

# With a bf16 level, the peers under autocast to bf16 are frameworks of their own: the FP32 peer
# stays the O0 goal's, and the bf16 level's ratio is to the faster AMP peer (b: median 150), the
# median of the rounds' ratios: 120/150, 130/100, 110/200 -> 0.80.
raw2=$TMP/raw2.csv
{
  echo "model,stage,round,framework,setting,status,samples_per_s,tokens_per_s,final_loss,test_loss,version,log"
  for r in 0 1 2 3; do
    st=round; [ "$r" = 0 ] && st=screen
    o2=(120 120 130 110) bamp=(150 150 100 200)
    echo "gpt,$st,$r,mpdist-O0,s,ok,1,100,1,1,v,l"
    echo "gpt,$st,$r,mpdist-O2-bf16,s,ok,1,${o2[r]},1,1,v,l"
    echo "gpt,$st,$r,pytorch-a,t,ok,1,80,1,1,2.15,l"
    echo "gpt,$st,$r,pytorch-a-amp-bf16,t,ok,1,90,1,1,2.15,l"
    echo "gpt,$st,$r,pytorch-b-amp-bf16,t,ok,1,${bamp[r]},1,1,1.13,l"
  done
} >"$raw2"
sweep report "$raw2" "$TMP/rep2" >"$TMP/report2" 2>&1 || true
check "the AMP peers' columns" "| model | unit | O0 | O2-bf16 | PyTorch a | PyTorch a-amp-bf16 | PyTorch b-amp-bf16 | O0/best PyTorch | O2-bf16/O0 | O2-bf16/best PyTorch AMP |" \
  "$(grep '^| model |' "$TMP/report2")"
check "one separator cell a column" "$(grep -m1 '^| model |' "$TMP/report2" | tr -cd '|' | wc -c)" \
  "$(grep -m1 '^|---' "$TMP/report2" | tr -cd '|' | wc -c)"
check "the bf16 level against the faster AMP peer" "| gpt | tokens/s | 100 | 120 | 80 | 90 | 150 | 1.25 | 1.20 | 0.80 |" \
  "$(grep '^| gpt |' "$TMP/report2")"

# The whole script, tiny: two settings per framework, one finalist, two rounds; no fast paths
# (which settings those add depends on the CPU: cap=avx512 where it has AVX-512 and PyTorch's
# kernels do not use it, as on the AMD EPYC VMs of 2026-11-30).
out=$TMP/bench
rc=0
MPDIST_BENCH_BUILD=$(dirname "$MPDIST") MPDIST_TCPU_OUT=$out MPDIST_CPU_LEVELS="O0" MPDIST_TCPU_FASTPATHS=0 \
  MPDIST_TCPU_PEERS="debian=/usr/bin/python3" MPDIST_TCPU_MPDIST_GRID="ranks=1/omp=1/blas=1 ranks=2/omp=1/blas=1" \
  MPDIST_TCPU_TORCH_GRID="threads=1/blas=1 threads=2/blas=1" MPDIST_TCPU_FINALISTS=1 MPDIST_TCPU_REPEATS=2 \
  MPDIST_TCPU_STEPS=5 MPDIST_TCPU_EVERY=2 MPDIST_TCPU_TEST=64 MPDIST_TCPU_BATCH=64 MPDIST_TCPU_THREADS=2 \
  timeout 300 bash bench/cpu_speed.sh mlp -- --set data.train_limit=512 >"$TMP/run.out" 2>&1 || rc=$?
# exit 1: the tiny run misses issue 21's mlp goal or not; anything but 0 or 1 is a failure
case $rc in 0 | 1) echo "ok: cpu_speed.sh exit $rc" ;; *) echo "FAIL: cpu_speed.sh exit $rc"; tail -20 "$TMP/run.out"; failures=$((failures + 1)) ;; esac
check "every run ok" "0" "$(awk -F, 'NR > 1 && $6 != "ok"' "$out/raw.csv" | wc -l)"
check "screening: the grid of each framework" "mpdist-O0 ranks=1/omp=1/blas=1;mpdist-O0 ranks=2/omp=1/blas=1;pytorch-debian threads=1/blas=1;pytorch-debian threads=2/blas=1;" \
  "$(awk -F, '$2 == "screen" { printf "%s %s;", $4, $5 }' "$out/raw.csv")"
fin_m=$(python3 bench/cpu_sweep.py finalists "$out/raw.csv" mlp mpdist-O0 1)
fin_t=$(python3 bench/cpu_sweep.py finalists "$out/raw.csv" mlp pytorch-debian 1)
check "rounds: the finalists, side by side, alternating" "1 mpdist-O0 $fin_m;1 pytorch-debian $fin_t;2 pytorch-debian $fin_t;2 mpdist-O0 $fin_m;" \
  "$(awk -F, '$2 == "round" { printf "%s %s %s;", $3, $4, $5 }' "$out/raw.csv")"
check "ranks=2 ran 2 ranks of one thread, the global batch kept" "2 ranks global batch 64 1 CPU thread per rank" \
  "$(sed -n 's/^mpdist [^:]*: \([0-9]* ranks\),.*\(global batch [0-9]*\), \(.*\)$/\1 \2 \3/p' "$out"/mlp-screen0-mpdist-O0-ranks-2_*.log)"
check "PyTorch ran with the setting's threads" '"threads": 1 "threads": 2' \
  "$(grep -ho '"threads": [0-9]*' "$out"/mlp-screen0-pytorch-debian-threads-1_*.log) $(grep -ho '"threads": [0-9]*' "$out"/mlp-screen0-pytorch-debian-threads-2_*.log)"
check "PyTorch ran with OPENBLAS_NUM_THREADS=1" '"openblas_threads": "1"' "$(grep -ho '"openblas_threads": "[0-9]*"' "$out"/mlp-screen0-pytorch-debian-threads-2_*.log)"
check "the winners in the table" "2" "$(grep -cE "^\| (mpdist-O0 \| [^|]* \| $fin_m|pytorch-debian \| [^|]* \| $fin_t) \|" "$out/table.md")"
check "the machine in the table" "1" "$(grep -cE '^CPU: [0-9]+ cores, ' "$out/table.md")"
check "the per-op table of the winner" "1" "$(grep -c "^mlp, O0 \[$fin_m\]:" "$out/profile.md")"
finish
