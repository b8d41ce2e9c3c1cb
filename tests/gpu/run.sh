#!/usr/bin/env bash
# On the GPU machine (no network, root, an image with nvcc, CMake, gcc/g++ and python3 with the
# nvidia-cudnn/nccl wheels): unpacks the Debian 12 packages that tests/gpu/pack-deps.sh put in DIR
# into a private prefix, points the build at them, builds mpdist with the CUDA backend into
# build-gpu, runs the tests labelled gpu, trains the cnn_bn Fashion-MNIST model for one epoch on
# the GPU, and prints a summary. Exits non-zero when any step fails. See tests/gpu/README.md.
#
# Usage (from the repository root): tests/gpu/run.sh [DIR]      (DIR defaults to .gpu-deps)
#   OUT                       also write the full log to $OUT/gpu-run.log (else /tmp/mpdist-gpu-run.log)
#                             and the report to $OUT/gpu-report.txt (else /tmp/mpdist-gpu-report.txt):
#                             one file to keep under bench/results/ (date, machine, GPU, driver,
#                             CUDA/cuBLAS/cuDNN/NCCL/MPI versions, every gpu test with its result,
#                             the training run's accuracy, the table and benchmark lines, PASS/FAIL)
#   MPDIST_GPU_PACK=0         keep $OUT as it is; by default everything in it but gpu-run.log and
#                             gpu-report.txt is packed into $OUT/gpu-out.tgz at the end (no *.h5),
#                             since the device tool brings back only a few files
#   MPDIST_GPU_DRY=1          stop after unpacking and checking the environment (no build)
#   MPDIST_GPU_PREFIX         where the packages are unpacked (default /tmp/mpdist-deps; emptied first)
#   CMAKE_CUDA_ARCHITECTURES  default 90 (H100/H200)
#   MPDIST_GPU_CTEST_TIMEOUT  seconds for all the gpu tests together (default 1800)
#   MPDIST_GPU_TRAIN=0        skip the training run
#   MPDIST_GPU_TRAIN_ARGS     extra arguments for mpdist, e.g. "--set amp.opt_level=O2"
#   MPDIST_GPU_TRAIN_TIMEOUT  seconds (default 300)
#   MPDIST_GPU_RUN_TIMEOUT    seconds per training run in the NCCL, graphs and convolution stages
#                             (default 300 for NCCL's, 600 for the others')
#   MPDIST_GPU_NCCL=0         skip the multi-rank NCCL stage (tests/gpu/nccl_ranks.sh: 2 and 4
#                             ranks through NCCL on the one GPU, shared under comm.share_gpu:
#                             checkpoints bitwise the MPI route's, comm_hidden, a stopped rank);
#                             its lines to $OUT/nccl-ranks.txt, its runs under $OUT/nccl-ranks/
#   MPDIST_GPU_GRAPHS=0       skip the CUDA graphs stage (tests/gpu/graphs.sh: resnet20 at O2 and
#                             O0 captured against eager, bitwise checkpoints after 30 steps, and
#                             images/s of both at batch 128 and 512 in alternating rounds); its
#                             lines to $OUT/graphs/graphs.txt
#   MPDIST_GPU_CONV=0         skip the convolution-algorithm stage (tests/gpu/conv_algo.sh:
#                             amp.conv_algo timed against heuristic on resnet20 at O2 and O0,
#                             plans printed and chosen as asked, losses close); its lines to
#                             $OUT/conv-algo/conv-algo.txt. MPDIST_GPU_CONV_SPEED=1 adds its
#                             speed rows (WRN-16-4 batch 512 at O0 and O2, about 2 minutes)
#   MPDIST_GPU_JPEG=0         skip the JPEG decode stage (tests/gpu/jpeg.sh: bench_jpeg on Fashion-
#                             MNIST written as JPEG folders, 28 x 28 and 224 x 224: nvJPEG's
#                             images/s beside libjpeg-turbo's on one thread, pixels checked);
#                             its lines to $OUT/jpeg/jpeg.txt
#   MPDIST_GPU_TABLE=1        then the opt-level table (bench/opt_levels.sh cnn_bn, 2 ranks on
#                             the GPU, 8 epochs each of O0, O1, O2, O3, O2 bf16) and the O2
#                             accuracy against the CPU run's in bench/results/table.csv (Done
#                             means of issue 6: within 0.5 points); table to $OUT/gpu-table.txt
#   MPDIST_GPU_STEP=1         then the one-GPU step benchmark (bench/gpu_step.sh: WRN-16-4 and
#                             resnet20 on synthetic data at O0-O3 against PyTorch fp32, amp and
#                             amp with torch.compile, in alternating rounds, with device time and
#                             device memory, and the goals of issues 7 and 48); table to
#                             $OUT/gpu-step-table.txt and .csv, every run to $OUT/gpu-step-raw.csv.
#                             MPDIST_GPU_STEP_* settings (models, batches, rows, PyTorch modes,
#                             steps, rounds) pass through to it
#   MPDIST_GPU_GPT=1          then the transformers (tests/gpu/transformers.sh --device cuda: gpt
#                             and vit at O0, O2 fp16 and O2 bf16 for 200 steps, each logged loss
#                             within the CPU's band of bench/results/cpu-band-*.csv; GPT-2 small's
#                             shape, context 1024, 30 steps with tiled and (T, T) attention);
#                             report to $OUT/transformers/transformers.txt. Needs the fortunes
#                             text (packed by pack-deps.sh with the data)
#   MPDIST_GPU_SCALING=1      then step profiles for the scaling model (bench/scaling_profiles.sh:
#                             resnet20, WRN-16-4 and gpt at O0 and O2, each with log.profile for
#                             the ready times and without for the step; docs/scaling.md); to
#                             $OUT/scaling-profiles/ (PRESET-OPT.json, runs/). Needs the fortunes text
#   MPDIST_GPU_PROFILES=1     then per-op profiles on both clocks (bench/gpu_profiles.sh: resnet20,
#                             WRN-16-4 and gpt at O2, host clock beside device clock: launch-bound
#                             ops against kernel-bound ones); to $OUT/profiles/profiles.md (runs/).
#                             MPDIST_PROFILES_* settings pass through to it. Needs the fortunes text
#   MPDIST_GPU_INF=1          then inference per precision on the GPU (bench/inference.sh with
#                             --set amp.device=cuda: fp32, fp16 and fp16 with FP32 BatchNorm
#                             exports of cnn_bn, resnet20 and resnext); table to
#                             $OUT/gpu-inference.md. MPDIST_INF_* settings pass through to it
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac

cd "$(dirname "$0")/../.."
dir=${1:-.gpu-deps}
prefix=${MPDIST_GPU_PREFIX:-/tmp/mpdist-deps}
build="build-gpu"
arch=x86_64-linux-gnu
lib=$prefix/usr/lib/$arch
log=/tmp/mpdist-gpu-run.log report=/tmp/mpdist-gpu-report.txt
[ -z "${OUT:-}" ] || log=$OUT/gpu-run.log report=$OUT/gpu-report.txt
mkdir -p "$(dirname "$log")"
: >"$log"
exec 3>&1 4>&2
exec > >(tee -a "$log") 2>&1
tee_pid=$!
start=$(date +%s)

gpu="not queried" deps="not run" build_state="not run" tests="not run" train="not run"
nccl="not run" graphs="not run" conv="not run" jpeg="not run"
table="not run (MPDIST_GPU_TABLE=1 runs it)"
gpu_step="not run (MPDIST_GPU_STEP=1 runs it)"
inference="not run (MPDIST_GPU_INF=1 runs it)"
gpt="not run (MPDIST_GPU_GPT=1 runs it)"
scaling="not run (MPDIST_GPU_SCALING=1 runs it)"
profiles="not run (MPDIST_GPU_PROFILES=1 runs it)"
failures=0 build_rc=1 tests_rc=1 train_rc=1

summary() {
  local rc=$?
  [ "$rc" -eq 0 ] || [ "$deps" != "not run" ] || deps="failed (exit $rc)"
  [ "$rc" -eq 0 ] || failures=$((failures + 1))
  echo
  echo "== summary ($(($(date +%s) - start)) s)"
  printf '%-11s%s\n' "gpu:" "$gpu" "deps:" "$deps" "build:" "$build_state" "gpu tests:" "$tests" \
    "training:" "$train" "nccl ranks:" "$nccl" "graphs:" "$graphs" "conv algo:" "$conv" \
    "nvjpeg:" "$jpeg" "opt table:" "$table" "gpu step:" "$gpu_step" "transformers:" "$gpt" "scaling:" "$scaling" "profiles:" "$profiles" "inference:" "$inference" "log:" "$log"
  local result=PASS
  [ "$failures" -eq 0 ] || result=FAIL
  echo "result:    $result"
  write_report "$result" || echo "run: warning: cannot write $report" >&2
  echo "report:    $report"
  pack_out
  exec 1>&3 2>&4
  wait "$tee_pid" 2>/dev/null || true
  [ "$result" = PASS ] || exit 1
}
trap summary EXIT

# pack_out: the device tool brings back only a few files of $OUT (8 on 2026-11-30), so all of it
# but the log and the report goes into $OUT/gpu-out.tgz, checkpoints (*.h5) left out.
pack_out() {
  local items=()
  [ -n "${OUT:-}" ] && [ "${MPDIST_GPU_PACK:-1}" != 0 ] || return 0
  mapfile -t items < <(cd "$OUT" && ls -A | grep -vxE 'gpu-run\.log|gpu-report\.txt|gpu-out\.tgz')
  [ ${#items[@]} -gt 0 ] || return 0
  local limit=$((15 << 20)) # under the device tool's limit on a file brought back
  if tar czf "$OUT/gpu-out.tgz" -C "$OUT" --exclude='*.h5' "${items[@]}" &&
     [ "$(stat -c %s "$OUT/gpu-out.tgz")" -le "$limit" ]; then
    (cd "$OUT" && rm -rf "${items[@]}")
    echo "packed:    $OUT/gpu-out.tgz (${#items[@]} entries of \$OUT but the log and the report)"
  else
    rm -f "$OUT/gpu-out.tgz"
    echo "run: warning: cannot pack $OUT into one gpu-out.tgz under 15 MiB; left as it is" >&2
  fi
}

# write_report RESULT: the run in one file: where and when, the versions `mpdist info` printed,
# the summary's lines, and each gpu test with its result and time as ctest reported it.
write_report() {
  {
    echo "mpdist GPU run report: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n), $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"')"
    echo "commit:       $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
    printf '%-14s%s\n' "gpu:" "$gpu"
    if [ -s "$build/info.log" ]; then
      grep -E '^(mpdist|cuda runtime|cuda driver|cublas|cudnn|nccl|gpus|mpi|hdf5|blas):' "$build/info.log" |
        sed -E 's/^([^:]*): */\1:|/' | awk -F'|' '{ printf "%-14s%s\n", $1, $2 }'
    else
      echo "versions:     unknown (mpdist info did not run)"
    fi
    printf '%-14s%s\n' "deps:" "$deps" "build:" "$build_state" "gpu tests:" "$tests"
    if [ -s "$build/gpu-ctest.log" ]; then
      sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) [ .*]*(Passed|Failed|\*\*\*Failed|\*\*\*Skipped|\*\*\*Timeout|Not Run|[^0-9]*)[ ]*([0-9.]+ sec)?.*/  \1 \2 \3/p' \
        "$build/gpu-ctest.log" | sed 's/\*\*\*//' | awk '{ printf "  %-24s %-8s %s %s\n", $1, $2, $3, $4 }'
    fi
    printf '%-14s%s\n' "training:" "$train" "nccl ranks:" "$nccl" "graphs:" "$graphs" \
      "conv algo:" "$conv" "nvjpeg:" "$jpeg" "opt table:" "$table" \
      "gpu step:" "$gpu_step" "transformers:" "$gpt" "scaling:" "$scaling" \
      "profiles:" "$profiles" "inference:" "$inference" "log:" "$log" "result:" "$1"
    [ ! -s "${nccl_report:-}" ] || sed 's/^/  /' "$nccl_report"
    [ ! -s "${graphs_report:-}" ] || sed 's/^/  /' "$graphs_report"
    [ ! -s "${conv_report:-}" ] || sed 's/^/  /' "$conv_report"
    [ ! -s "${gpt_out:-}/transformers.txt" ] || sed 's/^/  /' "$gpt_out/transformers.txt"
    [ ! -s "${jpeg_report:-}" ] || sed 's/^/  /' "$jpeg_report"
  } >"$report"
}

die() { echo "run: $*" >&2; exit 1; }
fail() { echo "run: $*" >&2; failures=$((failures + 1)); }

# step VAR FUNCTION: runs FUNCTION in a subshell that stops at its first failing command and
# stores its exit code in VAR, so that a failed step still lets the summary print.
step() {
  local _var=$1 _status
  shift
  set +e
  (set -e; "$@")
  _status=$?
  set -e
  printf -v "$_var" '%s' "$_status"
}

echo "== mpdist GPU run: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"')"

# The GPU and the Python wheels are queried before LD_LIBRARY_PATH points at the Debian libraries.
if command -v nvidia-smi >/dev/null; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | paste -sd';' -) ||
    gpu="none (nvidia-smi failed: $gpu)"
else
  gpu="none (nvidia-smi not found)"
fi
echo "gpu: $gpu"
have_gpu=0
case $gpu in none*) ;; *) have_gpu=1 ;; esac

wheel_dir() {
  python3 - "$1" <<'EOF' 2>/dev/null
import importlib, os, sys
m = importlib.import_module(sys.argv[1])
print(os.path.dirname(m.__file__) if getattr(m, "__file__", None) else list(m.__path__)[0])
EOF
}
for var in CUDNN_HOME:nvidia.cudnn:libcudnn.so.9 NCCL_HOME:nvidia.nccl:libnccl.so.2; do
  IFS=: read -r name module so <<<"$var"
  if [ -z "${!name:-}" ] && command -v python3 >/dev/null && home=$(wheel_dir "$module") && [ -n "$home" ]; then
    export "$name=$home"
  fi
  if [ -n "${!name:-}" ]; then
    [ -e "${!name}/lib/$so" ] || echo "run: warning: $name=${!name} has no lib/$so" >&2
    echo "$name=${!name}"
  else
    echo "run: warning: $name not set and python3 cannot import $module; CMake looks beside the CUDA toolkit" >&2
  fi
done

echo "== unpacking $dir into $prefix"
deps=failed
[ -d "$dir" ] || die "$dir not found: run tests/gpu/pack-deps.sh on a networked Debian 12 machine and carry $dir"
shopt -s nullglob
debs=("$dir"/*.deb)
[ ${#debs[@]} -gt 0 ] || die "no .deb files in $dir: run tests/gpu/pack-deps.sh"
case $prefix in /?*/?*) ;; *) die "MPDIST_GPU_PREFIX must be an absolute path at least two levels deep (got '$prefix')" ;; esac
rm -rf "$prefix"
mkdir -p "$prefix"
for deb in "${debs[@]}"; do
  if command -v dpkg >/dev/null; then
    dpkg -x "$deb" "$prefix"
  else
    member=$(ar t "$deb" | grep '^data\.tar')
    case $member in
      *.xz) ar p "$deb" "$member" | tar -xJ -C "$prefix" ;;
      *.zst) ar p "$deb" "$member" | tar --zstd -x -C "$prefix" ;;
      *.gz) ar p "$deb" "$member" | tar -xz -C "$prefix" ;;
      *) ar p "$deb" "$member" | tar -x -C "$prefix" ;;
    esac
  fi
done
# Merged /usr as on the image (zlib1g and libnl ship /lib), absolute symlinks into the prefix,
# and /usr in pkg-config and CMake package files rewritten to the prefix.
for d in lib lib64 bin sbin; do
  if [ -d "$prefix/$d" ] && [ ! -L "$prefix/$d" ]; then
    mkdir -p "$prefix/usr/$d"
    cp -a "$prefix/$d/." "$prefix/usr/$d/"
    rm -rf "${prefix:?}/$d"
    ln -s "usr/$d" "$prefix/$d"
  fi
done
find "$prefix" -type l -lname '/*' -print0 | while IFS= read -r -d '' link; do
  ln -sfn "$prefix$(readlink "$link")" "$link"
done
find "$prefix" -type f \( -name '*.pc' -o -name '*.cmake' \) -print0 |
  xargs -0 -r sed -i -E "s#(^|[=\"' ;(]|-I|-L)/usr\b#\1$prefix/usr#g"

# Settings of the host's own MPI (NGC images set some) would steer this Open MPI wrong.
mapfile -t inherited < <(compgen -e | grep -E '^(OMPI_MCA_|OPAL_|PMIX_|PRTE_)' || true)
if [ ${#inherited[@]} -gt 0 ]; then
  echo "unsetting inherited ${inherited[*]}"
  unset "${inherited[@]}"
fi
# PyTorch (bench/pytorch_ref.py) runs with the host's python3 and library path, not the pack's.
host_python=$(command -v python3 || echo python3)
host_ld_library_path=${LD_LIBRARY_PATH:-}
export PATH="$prefix/usr/bin:$PATH"
export LD_LIBRARY_PATH="$lib:$lib/openblas-pthread:$lib/hdf5/serial:$lib/openmpi/lib:$lib/pmix2/lib${CUDNN_HOME:+:$CUDNN_HOME/lib}${NCCL_HOME:+:$NCCL_HOME/lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG_LIBDIR="$lib/pkgconfig:$prefix/usr/share/pkgconfig"
export PKG_CONFIG_PATH=$PKG_CONFIG_LIBDIR
export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export OPAL_PREFIX=$prefix/usr OPAL_SYSCONFDIR=$prefix/etc/openmpi PMIX_PREFIX=$lib/pmix2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Containers often forbid the cross-process reads (CMA) of Open MPI's shared-memory transport.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# Open MPI 4.1's rsh launcher will not start without ssh or rsh on PATH, even when every rank is
# local (it then never calls the agent); GPU images often have neither.
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=false
printf '%s\n' "PATH=$PATH" "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" "PKG_CONFIG_LIBDIR=$PKG_CONFIG_LIBDIR" \
  "CMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH" "OPAL_PREFIX=$OPAL_PREFIX" "PMIX_PREFIX=$PMIX_PREFIX"

echo "== checking the environment"
need=$(awk '/^glibc-min:/ {print $2}' "$dir/manifest.txt" 2>/dev/null || true)
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [ -n "$need" ] && [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
  die "glibc $have here, the packed Debian libraries need $need"
fi
echo "glibc $have (the pack needs ${need:-?})"
unresolved=$(find "$prefix/usr/bin" "$lib" -type f \( -perm -u+x -o -name '*.so*' \) -print0 |
  while IFS= read -r -d '' f; do
    [ "$(head -c4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    ldd "$f" 2>&1 | grep -E 'not found' | sed "s#^#${f#"$prefix"}: #" || true
  done)
[ -z "$unresolved" ] || { echo "$unresolved"; die "packed programs or libraries need libraries this machine lacks (above)"; }
echo "every packed program and library resolves its libraries"

for tool in cmake gcc g++; do
  command -v "$tool" >/dev/null || die "$tool not found (nvcc needs gcc and g++ as its host compiler)"
done
nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
[ -n "$nvcc" ] || die "nvcc not found (PATH, /usr/local/cuda/bin)"
cmake_version=$(cmake --version | awk 'NR == 1 {print $3}')
[ "$(printf '3.24\n%s\n' "$cmake_version" | sort -V | head -1)" = 3.24 ] ||
  die "cmake $cmake_version is older than 3.24, which CMakeLists.txt needs"
echo "cmake $cmake_version, $(gcc --version | head -1), nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), ninja: $(command -v ninja || echo none)"
for tool in mpirun mpiexec mpicc pkg-config h5dump; do
  [ "$(command -v "$tool")" = "$prefix/usr/bin/$tool" ] || die "$tool is not the packed one ($(command -v "$tool" || echo missing))"
done
ompi_info --path all | grep -E '^ *(Prefix|Libdir|Pkglibdir|Sysconfdir):' || die "ompi_info failed"
echo "mpicc: $(mpicc -showme)"
for module in libconfig openblas cmocka libcjson; do
  flags=$(pkg-config --cflags --libs "$module") || die "pkg-config cannot find $module"
  echo "pkg-config $module: $flags"
done
timeout 60 mpirun -np 2 true || die "mpirun -np 2 true failed"
echo "mpirun -np 2: ok"
data=$prefix/usr/share/datasets/fashion-mnist
[ -e "$data/train-images-idx3-ubyte.gz" ] || data=/usr/share/datasets/fashion-mnist
[ -e "$data/train-images-idx3-ubyte.gz" ] || data=""
deps="ok (${#debs[@]} packages in $prefix${data:+, Fashion-MNIST in $data})"

if [ "${MPDIST_GPU_DRY:-0}" = 1 ]; then
  build_state="not run (MPDIST_GPU_DRY=1)" tests="not run (MPDIST_GPU_DRY=1)" train="not run (MPDIST_GPU_DRY=1)"
  exit 0
fi

do_build() {
  local tmp
  tmp=$(mktemp -d)
  printf '#include <cstdio>\nint main() { std::puts("ok"); return 0; }\n' >"$tmp/probe.cpp"
  g++ "$tmp/probe.cpp" -o "$tmp/probe" || { echo "run: g++ cannot build a C++ program (nvcc needs it)" >&2; exit 1; }
  rm -rf "$tmp"
  mkdir -p "$build"
  local generator=()
  [ -f "$build/CMakeCache.txt" ] || ! command -v ninja >/dev/null || generator=(-G Ninja)
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-90}" -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DMPDIST_CUDA=ON -DMPDIST_WERROR=OFF -DMPI_C_COMPILER="$prefix/usr/bin/mpicc" -DMPIEXEC_EXECUTABLE="$prefix/usr/bin/mpiexec" \
    -DPKG_CONFIG_EXECUTABLE="$prefix/usr/bin/pkg-config" -DHDF5_ROOT="$lib/hdf5/serial" | tee "$build/configure.log"
  grep -q 'mpdist: CUDA backend ON' "$build/configure.log" ||
    { echo "run: configured without the CUDA backend (see 'mpdist: CUDA backend' above)" >&2; exit 1; }
  cmake --build "$build" -j"$(nproc)" 2>&1 | tee "$build/build.log"
  # The image's compiler is not Debian 12's: its warnings are reported here, not made errors.
  echo "compiler warnings: $(grep -c 'warning:' "$build/build.log" || true)"
  echo "== mpdist info"
  timeout 60 mpirun -np 1 "$build/mpdist" info | tee "$build/info.log" ||
    echo "run: warning: mpdist info exited $?" >&2
}
echo "== build ($build, Release, CUDA architectures ${CMAKE_CUDA_ARCHITECTURES:-90})"
step build_rc do_build
if [ "$build_rc" -eq 0 ]; then
  build_state=ok
else
  build_state="failed (exit $build_rc)"
  fail "build failed"
fi

do_tests() {
  cd "$build"
  timeout -k 10 "${MPDIST_GPU_CTEST_TIMEOUT:-1800}" ctest -L gpu --output-on-failure --no-tests=error |
    tee gpu-ctest.log
}
if [ "$build_state" = ok ]; then
  echo "== ctest -L gpu"
  : >"$build/gpu-ctest.log"
  step tests_rc do_tests
  total=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+:' "$build/gpu-ctest.log" || true)
  passed=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+:.* Passed +[0-9.]+ sec' "$build/gpu-ctest.log" || true)
  skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+:.*\*\*\*Skipped' "$build/gpu-ctest.log" || true)
  tests="$passed passed, $((total - passed - skipped)) failed, $skipped skipped (of $total)"
  if [ "$tests_rc" -ne 0 ] || [ "$total" -eq 0 ] || [ $((total - passed - skipped)) -ne 0 ]; then
    [ "$total" -ne 0 ] || tests="none run (ctest exit $tests_rc: no tests labelled gpu?)"
    fail "gpu tests failed"
  elif [ "$skipped" -eq "$total" ] && [ "$have_gpu" = 1 ]; then
    tests="$tests: all skipped although nvidia-smi sees a GPU"
    fail "every gpu test skipped"
  fi
  [ -z "${OUT:-}" ] || cp "$build/Testing/Temporary/LastTest.log" "$OUT/gpu-ctest-LastTest.log" 2>/dev/null || true
else
  tests="not run (build failed)"
fi

config=configs/fashion-mnist-cnn-bn.cfg
do_train() {
  local metrics=$build/gpu-train-metrics.jsonl extra=()
  read -ra extra <<<"${MPDIST_GPU_TRAIN_ARGS:-}"
  rm -rf "$metrics" "$build/gpu-train-ckpt"
  timeout "${MPDIST_GPU_TRAIN_TIMEOUT:-300}" mpirun -np 1 "$build/mpdist" "$config" --set amp.device=cuda \
    --set "data.path=\"$data\"" --set train.epochs=1 --set log.progress=plain \
    --set "log.metrics=\"$metrics\"" --set "checkpoint.dir=\"$build/gpu-train-ckpt\"" \
    ${extra[@]+"${extra[@]}"} | tee "$build/gpu-train.log"
  [ -z "${OUT:-}" ] || cp "$metrics" "$OUT/gpu-train-metrics.jsonl" 2>/dev/null || true
}
# mpdist eval of the training run's last checkpoint on the GPU, at the run's opt level and at O2
# (whose half copy a forward-only model loads straight from the stored FP32 values, without
# masters): each accuracy within 0.1 point of the one training ended with (the same level gives
# it exactly on the CPU: tests/integration/checkpoint_files.sh). Prints "LEVEL ACCURACY" lines.
do_train_eval() {
  local ck extra=() args
  read -ra extra <<<"${MPDIST_GPU_TRAIN_ARGS:-}"
  ck=$(ls "$build"/gpu-train-ckpt/ckpt-*.h5 | tail -1)
  for args in "" "--set amp.opt_level=O2"; do
    echo "${args:-its level} $(timeout 120 mpirun -np 1 "$build/mpdist" eval "$config" --set amp.device=cuda \
      --set "data.path=\"$data\"" ${extra[@]+"${extra[@]}"} $args --checkpoint "$ck" |
      sed -n 's/^test accuracy: //p')"
  done >"$build/gpu-train-eval.txt"
  cat "$build/gpu-train-eval.txt"
  awk -v want="$accuracy" 'NF < 2 || $NF - want > 0.001 || want - $NF > 0.001 { bad = 1 } END { exit bad || NR != 2 }' \
    "$build/gpu-train-eval.txt"
}
if [ "${MPDIST_GPU_TRAIN:-1}" = 0 ]; then
  train="skipped (MPDIST_GPU_TRAIN=0)"
elif [ "$build_state" != ok ]; then
  train="not run (build failed)"
elif [ -z "$data" ]; then
  train="skipped (no Fashion-MNIST: pack it with tests/gpu/pack-deps.sh)"
elif [ ! -f "$config" ]; then
  train="failed ($config not found)"
  fail "$config not found"
else
  echo "== training: $config, 1 epoch, amp.device=cuda ${MPDIST_GPU_TRAIN_ARGS:-}"
  train_start=$(date +%s)
  : >"$build/gpu-train.log"
  step train_rc do_train
  accuracy=$(sed -n 's/^test accuracy: //p' "$build/gpu-train.log" | tail -1)
  if [ "$train_rc" -eq 0 ] && [ -n "$accuracy" ]; then
    train="test accuracy: $accuracy after 1 epoch of cnn_bn on the GPU ($(($(date +%s) - train_start)) s)"
    echo "== mpdist eval of its checkpoint on the GPU, at its level and at O2 (no masters)"
    eval_rc=1
    step eval_rc do_train_eval
    train+="; eval of its checkpoint: $(paste -sd, "$build/gpu-train-eval.txt" 2>/dev/null) (exit $eval_rc)"
    [ "$eval_rc" -eq 0 ] || fail "eval of the trained checkpoint: not within 0.1 point of training's accuracy"
  else
    train="failed (exit $train_rc${accuracy:+, test accuracy: $accuracy})"
    fail "training failed"
  fi
fi

# tests/gpu/nccl_ranks.sh: NCCL between 2 and 4 ranks on the shared GPU (issue 46).
nccl_out=${OUT:-$build}/nccl-ranks
nccl_report=$nccl_out/nccl-ranks.txt
do_nccl() {
  bash tests/gpu/nccl_ranks.sh "$build" "$data" "$nccl_out"
}
if [ "${MPDIST_GPU_NCCL:-1}" = 0 ]; then
  nccl="skipped (MPDIST_GPU_NCCL=0)"
elif [ "$build_state" != ok ] || [ -z "$data" ]; then
  nccl="not run (build failed or no Fashion-MNIST)"
else
  echo "== NCCL between ranks on the one GPU (comm.share_gpu): 2 and 4 ranks"
  nccl_rc=1
  step nccl_rc do_nccl
  nccl="$(grep -c '^PASS' "$nccl_report" 2>/dev/null || true) checks passed, $(grep -c '^FAIL' "$nccl_report" 2>/dev/null || true) failed (exit $nccl_rc; $nccl_report)"
  [ "$nccl_rc" -eq 0 ] || fail "multi-rank NCCL stage failed"
fi

# checks_stage VAR SWITCH TITLE REPORT CMD...: a stage whose script writes PASS/FAIL lines to
# REPORT, skipped when the environment variable SWITCH is 0 (it runs by default) or the build
# failed; VAR gets the summary's line, and a failed stage fails the run.
checks_stage() {
  local var=$1 switch=$2 title=$3 report=$4 rc=1 line
  shift 4
  if [ "${!switch:-1}" = 0 ]; then
    line="skipped ($switch=0)"
  elif [ "$build_state" != ok ]; then
    line="not run (build failed)"
  else
    echo "== $title"
    step rc "$@"
    line="$(grep -c '^PASS' "$report" 2>/dev/null || true) checks passed, $(grep -c '^FAIL' "$report" 2>/dev/null || true) failed (exit $rc; $report)"
    [ "$rc" -eq 0 ] || fail "$title: stage failed"
  fi
  printf -v "$var" '%s' "$line"
}

# The fortunes text (packed by pack-deps.sh with the data) for the gpt runs.
fortunes=$prefix/usr/share/games/fortunes
[ -d "$fortunes" ] || fortunes=/usr/share/games/fortunes

# tests/gpu/graphs.sh: the step as a CUDA graph against eager (issue 48).
graphs_out=${OUT:-$build}/graphs
graphs_report=$graphs_out/graphs.txt
checks_stage graphs MPDIST_GPU_GRAPHS "CUDA graphs: resnet20, WRN and gpt with dropout captured against eager" \
  "$graphs_report" env "MPDIST_GPU_GRAPH_TEXT=$fortunes" bash tests/gpu/graphs.sh "$build" "$graphs_out"

# tests/gpu/conv_algo.sh: timed cuDNN algorithms against the heuristic's (issue 48).
conv_out=${OUT:-$build}/conv-algo
conv_report=$conv_out/conv-algo.txt
checks_stage conv MPDIST_GPU_CONV "convolution algorithms: amp.conv_algo timed against heuristic" \
  "$conv_report" env "MPDIST_GPU_CONV_SPEED=${MPDIST_GPU_CONV_SPEED:-0}" bash tests/gpu/conv_algo.sh \
  "$build" "$conv_out"

# tests/gpu/jpeg.sh: nvJPEG's decode beside libjpeg-turbo's (issue 50).
jpeg_out=${OUT:-$build}/jpeg
jpeg_report=$jpeg_out/jpeg.txt
if [ -n "$data" ]; then
  checks_stage jpeg MPDIST_GPU_JPEG "JPEG decode: nvJPEG beside libjpeg-turbo" "$jpeg_report" \
    bash tests/gpu/jpeg.sh "$build" "$data" "$jpeg_out"
else
  jpeg="not run (no Fashion-MNIST to write the JPEG folders from)"
fi

# The O2 fp16 accuracy of cnn_bn in a table.csv (bench/opt_levels.sh's columns).
o2_accuracy() { awk -F, '$1 == "cnn_bn" && $2 == "O2" && $3 == "fp16" && $4 == "ok" { print $12 }' "$1"; }
do_table() {
  MPDIST_BENCH_BUILD=$build bash bench/opt_levels.sh cnn_bn -- --set amp.device=cuda \
    --set "data.path=\"$data\""
  [ -z "${OUT:-}" ] || cp runs/bench-opt/table.txt "$OUT/gpu-table.txt"
}
if [ "${MPDIST_GPU_TABLE:-0}" = 1 ] && [ "$build_state" = ok ] && [ -n "$data" ]; then
  echo "== opt-level table on the GPU: cnn_bn, 2 ranks, 8 epochs per level"
  table_rc=1
  step table_rc do_table
  gpu_acc=$(o2_accuracy runs/bench-opt/table.csv 2>/dev/null || true)
  cpu_acc=$(o2_accuracy bench/results/table.csv)
  if [ "$table_rc" -eq 0 ] && [ -n "$gpu_acc" ]; then
    if awk -v g="$gpu_acc" -v c="$cpu_acc" 'BEGIN { exit !(g >= c - 0.005) }'; then
      table="O2 fp16 accuracy $gpu_acc on the GPU, $cpu_acc on the CPU: within 0.5 points"
    else
      table="O2 fp16 accuracy $gpu_acc on the GPU, $cpu_acc on the CPU: more than 0.5 points lower"
      fail "O2 accuracy on the GPU below the CPU's by more than 0.5 points"
    fi
  else
    table="failed (exit $table_rc; see runs/bench-opt/)"
    fail "opt-level table failed"
  fi
fi

# bench/gpu_step.sh: mpdist's step at O0-O3 against PyTorch on one GPU, and the step goals.
do_gpu_step() {
  local rc=0
  MPDIST_BENCH_BUILD=$build MPDIST_PYTHON=$host_python MPDIST_GPU_STEP_TEXT=$fortunes \
    MPDIST_PYTHON_LD_LIBRARY_PATH=$host_ld_library_path bash bench/gpu_step.sh || rc=$?
  if [ -n "${OUT:-}" ]; then
    cp runs/bench-gpu/table.txt "$OUT/gpu-step-table.txt" 2>/dev/null || true
    cp runs/bench-gpu/table.csv "$OUT/gpu-step-table.csv" 2>/dev/null || true
    cp runs/bench-gpu/raw.csv "$OUT/gpu-step-raw.csv" 2>/dev/null || true
  fi
  return "$rc"
}
if [ "${MPDIST_GPU_STEP:-0}" = 1 ] && [ "$build_state" = ok ]; then
  echo "== one-GPU step benchmark: WRN-16-4 and resnet20, O0-O3 against PyTorch"
  step_rc=1
  step step_rc do_gpu_step
  goals=runs/bench-gpu/goals.txt
  if [ -s "$goals" ]; then
    gpu_step="$(grep -c '^PASS' "$goals" || true) of $(wc -l <"$goals") goals pass, $(awk -F, 'NR > 1 && $5 != "ok"' runs/bench-gpu/raw.csv | wc -l) runs failed (exit $step_rc; runs/bench-gpu/table.txt)"
  else
    gpu_step="failed (exit $step_rc; see runs/bench-gpu/)"
  fi
  [ "$step_rc" -eq 0 ] || fail "gpu step benchmark: a run failed or a goal was missed"
elif [ "${MPDIST_GPU_STEP:-0}" = 1 ]; then
  gpu_step="not run (build failed)"
fi

# tests/gpu/transformers.sh: gpt and vit against the CPU's loss band, GPT-2 small's shape (issue 49).
gpt_out=${OUT:-$build}/transformers
do_gpt() { bash tests/gpu/transformers.sh --device cuda "$build" "$fortunes" "$data" "$gpt_out"; }
if [ "${MPDIST_GPU_GPT:-0}" = 1 ] && [ "$build_state" = ok ] && [ -n "$data" ] && [ -d "$fortunes" ]; then
  echo "== transformers on the GPU: gpt, vit against the CPU band; GPT-2 small's shape"
  gpt_rc=1
  step gpt_rc do_gpt
  gpt="$(grep -c '^PASS' "$gpt_out/transformers.txt" 2>/dev/null || true) checks passed, $(grep -c '^FAIL' "$gpt_out/transformers.txt" 2>/dev/null || true) failed (exit $gpt_rc; $gpt_out/transformers.txt)"
  [ "$gpt_rc" -eq 0 ] || fail "transformers stage failed"
elif [ "${MPDIST_GPU_GPT:-0}" = 1 ]; then
  gpt="not run (build failed, or no Fashion-MNIST or fortunes text)"
fi

# bench/scaling_profiles.sh on the GPU: the scaling model's profiles (issue 52).
scaling_out=${OUT:-$build}/scaling-profiles
do_scaling() {
  MPDIST_BIN=$build/mpdist MPDIST_SCALING_FORTUNES=$fortunes bash bench/scaling_profiles.sh "$scaling_out"
}
if [ "${MPDIST_GPU_SCALING:-0}" = 1 ] && [ "$build_state" = ok ] && [ -d "$fortunes" ]; then
  echo "== step profiles for the scaling model: resnet20, WRN-16-4, gpt at O0 and O2"
  scaling_rc=1
  step scaling_rc do_scaling
  scaling="$(ls "$scaling_out"/*.json 2>/dev/null | wc -l) profiles (exit $scaling_rc; $scaling_out)"
  [ "$scaling_rc" -eq 0 ] || fail "scaling profiles failed"
elif [ "${MPDIST_GPU_SCALING:-0}" = 1 ]; then
  scaling="not run (build failed, or no fortunes text)"
fi

# bench/gpu_profiles.sh: per-op profiles on the host clock beside the device clock (issue 48).
profiles_out=${OUT:-$build}/profiles
do_profiles() {
  MPDIST_BIN=$build/mpdist MPDIST_PROFILES_FORTUNES=$fortunes bash bench/gpu_profiles.sh "$profiles_out"
}
if [ "${MPDIST_GPU_PROFILES:-0}" = 1 ] && [ "$build_state" = ok ] && [ -d "$fortunes" ]; then
  echo "== per-op profiles, host clock beside device clock: resnet20, WRN-16-4, gpt"
  profiles_rc=1
  step profiles_rc do_profiles
  profiles="$(grep -c '^## ' "$profiles_out/profiles.md" 2>/dev/null || true) tables (exit $profiles_rc; $profiles_out/profiles.md)"
  [ "$profiles_rc" -eq 0 ] || fail "per-op profiles failed"
elif [ "${MPDIST_GPU_PROFILES:-0}" = 1 ]; then
  profiles="not run (build failed, or no fortunes text)"
fi

# bench/inference.sh on the GPU: each model trained at O0, exported three ways, evaluated.
do_inference() {
  MPDIST_BENCH_BUILD=$build MPDIST_INF_DATA=$data bash bench/inference.sh -- --set amp.device=cuda
  [ -z "${OUT:-}" ] || cp runs/bench-inf/table.md "$OUT/gpu-inference.md"
}
if [ "${MPDIST_GPU_INF:-0}" = 1 ] && [ "$build_state" = ok ] && [ -n "$data" ]; then
  echo "== inference per precision on the GPU: cnn_bn, resnet20, resnext"
  inf_rc=1
  step inf_rc do_inference
  if [ "$inf_rc" -eq 0 ]; then
    inference="ok (runs/bench-inf/table.md)"
  else
    inference="failed (exit $inf_rc; see runs/bench-inf/)"
    fail "inference benchmark failed"
  fi
elif [ "${MPDIST_GPU_INF:-0}" = 1 ]; then
  inference="not run (build failed or no Fashion-MNIST)"
fi
