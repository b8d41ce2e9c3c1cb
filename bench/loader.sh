#!/usr/bin/env bash
# The input pipeline against PyTorch's (issue 50): decode + augment images/s on JPEG folders,
# mpdist's loader alone (bench_loader: libjpeg-turbo, random resized crop and flip, normalised
# FP32 batches of 128) with 1 and 2 threads beside PyTorch's DataLoader (bench/torch_loader.py:
# torchvision's ImageFolder, PIL, the same transform) with 0, 1 and 2 workers, each setting in
# ROUNDS alternating rounds; per framework its best images/s per core (mpdist: threads cores;
# PyTorch: workers cores, 1 for 0 workers) and the ratio; goal: mpdist >= 2x. Then resnet20
# trains from the Fashion-MNIST JPEG folder at batch 128 (1 rank, 2 threads, augmentation on)
# and the summary's input_wait must stay under 5% of the step time.
# Folders (tests/util/make_folder.c, from Debian's Fashion-MNIST): fm, 10,000 training images
# of 28 x 28 gray; fm224, 2,000 of them upscaled to 224 x 224 RGB (nearest pixel). JPEG quality
# 90. PyTorch: the venv of bench/torch_venv.sh (the current release, with torchvision).
# Usage: bench/loader.sh. Environment: MPDIST_BENCH_BUILD (default build), MPDIST_LOADER_ROUNDS
# (3), MPDIST_LOADER_OUT (runs/bench-loader). Exits 0 when both goals hold, 1 when one does
# not, 2 when something is missing.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
build=${MPDIST_BENCH_BUILD:-build}
rounds=${MPDIST_LOADER_ROUNDS:-3}
out=${MPDIST_LOADER_OUT:-runs/bench-loader}
fm=/usr/share/datasets/fashion-mnist
die() { echo "loader: $*" >&2; exit 2; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "rounds must be an integer >= 1 (got '$rounds')"
for b in mpdist bench_loader tests/make_folder; do
  [ -x "$build/$b" ] || die "$build/$b not found (MPDIST_BENCH_BUILD=$build)"
done
[ -d "$fm" ] || die "no Fashion-MNIST in $fm (Debian: dataset-fashion-mnist)"
py=$(bash bench/torch_venv.sh) || die "no PyTorch with torchvision: bash bench/torch_venv.sh --install"
mkdir -p "$out"
[ -d "$out/fm" ] || "$build/tests/make_folder" "$fm" "$out/fm" 10000 100 0 jpeg
[ -d "$out/fm224" ] || "$build/tests/make_folder" "$fm" "$out/fm224" 2000 100 224 jpeg

raw=$out/raw.csv
echo "folder,framework,setting,cores,round,images_per_s" >"$raw"
one() { # one FOLDER SIZE CH FRAMEWORK SETTING ROUND
  local f=$1 size=$2 ch=$3 fw=$4 n=$5 r=$6 line rate
  if [ "$fw" = mpdist ]; then
    line=$(OMP_NUM_THREADS=1 "$build/bench_loader" "$out/$f" "$size" "$ch" "$n" 1)
  else
    line=$("$py" bench/torch_loader.py "$out/$f" "$size" "$ch" "$n" 1 2>/dev/null)
  fi
  rate=$(sed -E 's/.*images_per_s=([0-9.]+).*/\1/' <<<"$line")
  local cores=$((n > 0 ? n : 1))
  echo "$f,$fw,$n,$cores,$r,$rate" >>"$raw"
  echo "== $f round $r: $line"
}
settings=("mpdist 1" "mpdist 2" "torch 0" "torch 1" "torch 2")
for spec in "fm 28 1" "fm224 224 3"; do
  read -r f size ch <<<"$spec"
  for ((r = 1; r <= rounds; r++)); do # even rounds in reverse order
    for ((k = 0; k < ${#settings[@]}; k++)); do
      if ((r % 2 == 0)); then s=${settings[${#settings[@]} - 1 - k]}; else s=${settings[k]}; fi
      one "$f" "$size" "$ch" $s "$r"
    done
  done
done

# resnet20 from the JPEG folder: the share of the step spent waiting for input.
OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 "$build/mpdist" configs/fashion-mnist-mlp.cfg \
  --set 'model.preset="resnet20"' --set 'data.format="folder"' --set "data.path=\"$out/fm\"" \
  --set data.image_size=28 --set data.channels=1 --set data.augment=true \
  --set data.batch_size=128 --set train.max_steps=40 --set train.eval_every=0 \
  --set data.test_limit=100 --set "checkpoint.dir=\"$out/ck-$$\"" \
  --set "log.metrics=\"$out/resnet20.jsonl\"" >"$out/resnet20.out" 2>&1 ||
  { tail -3 "$out/resnet20.out" >&2; die "the resnet20 run failed"; }
rm -rf "$out/ck-$$"

/usr/bin/python3 - "$raw" "$out/resnet20.jsonl" "$(nproc)" <<'EOF' | tee "$out/table.md"
import csv, json, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
summary = [json.loads(l) for l in open(sys.argv[2]) if '"summary"' in l][-1]
print(f"CPU: {sys.argv[3]} cores; JPEG folders from Fashion-MNIST; batches of 128, random resized crop and flip, FP32\n")
print("| folder | framework | setting | cores | images/s (median) | per core | range |")
print("|---|---|---|---:|---:|---:|---|")
ok = True
for folder in ("fm", "fm224"):
    best = {}
    for fw, unit in (("mpdist", "threads"), ("torch", "workers")):
        for n in sorted({r["setting"] for r in rows if r["folder"] == folder and r["framework"] == fw}):
            v = [float(r["images_per_s"]) for r in rows
                 if r["folder"] == folder and r["framework"] == fw and r["setting"] == n]
            cores = max(1, int(n))
            med = statistics.median(v)
            print(f"| {folder} | {fw} | {unit}={n} | {cores} | {med:,.0f} | {med / cores:,.0f} "
                  f"| {min(v):,.0f}-{max(v):,.0f} |")
            best[fw] = max(best.get(fw, 0), med / cores)
    ratio = best["mpdist"] / best["torch"]
    ok &= ratio >= 2
    print(f"| {folder} | **ratio of the best per core** | | | | **{ratio:.2f}x** | |")
t = summary["time_s"]
share = t["input_wait"] / t["steps"]
ok &= share < 0.05
print(f"\nresnet20 from the fm JPEG folder, batch 128, 1 rank x 2 threads, {summary['steps']} steps: "
      f"input_wait {t['input_wait']:.3f} s of {t['steps']:.2f} s of steps ({100 * share:.2f}%)")
print("\ngoals: mpdist >= 2x PyTorch's images/s per core on both folders; input_wait < 5%: "
      + ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
EOF
