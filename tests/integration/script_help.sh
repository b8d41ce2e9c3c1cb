#!/usr/bin/env bash
# Every script a user or developer runs (found by listing launch/, cluster/, bench/, tests/*.sh,
# tests/gpu/ and tests/fuzz/*.sh, so a new one is checked too) answers --help and -h with its
# usage on stdout and exit 0, within 20 s, and does nothing else: package managers, compilers,
# build tools, launchers and Slurm commands are replaced on PATH by stubs that record any call,
# and none may be called. Files that are only sourced (no #! line, "sourced" in their first lines:
# launch/env.sh, cluster/slurm/job.sh, site.env) are listed and skipped.
source "$(dirname "$0")/common.bash"
cd "$SRC"

stubs=$TMP/stubs
mkdir -p "$stubs"
for c in apt apt-get sudo dpkg dpkg-query cmake make ctest gcc cc nvcc mpirun mpiexec srun sbatch \
         squeue scancel munged slurmctld slurmd gnuplot nvidia-smi curl wget pip pip3; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/called"\nexit 97\n' "$c" "$TMP" >"$stubs/$c"
  chmod +x "$stubs/$c"
done

scripts=() sourced=()
while IFS= read -r f; do
  first=$(head -1 "$f")
  case $f in
    *.sh | *.py | *.sbatch | *.env | */mpdist-run) ;;
    *) [[ $first == '#!'* ]] || continue ;; # READMEs, C sources, templates
  esac
  if [[ $first != '#!'* ]] && head -3 "$f" | grep -qi sourced; then sourced+=("$f"); else scripts+=("$f"); fi
done < <({ find launch cluster tests/gpu -type f; find bench tests tests/fuzz -maxdepth 1 -type f; } 2>/dev/null | sort)
echo "sourced, not run (skipped): ${sourced[*]}"
[ ${#scripts[@]} -ge 20 ] || { echo "FAIL: only ${#scripts[@]} scripts found: ${scripts[*]}"; exit 1; }

for f in "${scripts[@]}"; do
  interp=$(sed -n '1s/^#! *\(\/usr\/bin\/env  *\)\{0,1\}//p' "$f")
  before=$failures
  for opt in --help -h; do
    rm -f "$TMP/called"
    rc=0
    (cd "$TMP" && PATH="$stubs:$PATH" timeout 20 ${interp:-bash} "$SRC/$f" "$opt") >"$TMP/out" 2>"$TMP/err" || rc=$?
    if [ "$rc" != 0 ] || [ ! -s "$TMP/out" ] || [ -e "$TMP/called" ]; then
      echo "FAIL: $f $opt: exit $rc (want 0), $(wc -l <"$TMP/out") line(s) on stdout (want some)"
      [ ! -e "$TMP/called" ] || sed 's/^/    called: /' "$TMP/called"
      head -5 "$TMP/err" | sed 's/^/    stderr: /'
      failures=$((failures + 1))
    fi
  done
  [ "$failures" != "$before" ] || echo "ok: $f --help, -h: $(head -1 "$TMP/out" | cut -c1-70)"
done
echo "${#scripts[@]} scripts checked"
finish
