#!/usr/bin/env bash
# launch/mpdist-run keeps the development settings (Open MPI as root, oversubscription) to local
# runs: set outside Slurm, and said so; not set inside a Slurm allocation or with --production
# (or MPDIST_PRODUCTION=1), where a value the caller exported is left as it is;
# OPENBLAS_NUM_THREADS=1 everywhere unless set. mpirun and srun are stubs that print what they
# were given.
source "$(dirname "$0")/common.bash"

stubs=$TMP/stubs
mkdir -p "$stubs"
for c in mpirun srun; do
  cat >"$stubs/$c" <<S
#!/bin/sh
if [ "\$1" = --mpi=list ]; then echo "\${STUB_MPI_LIST:-none pmix}"; exit 0; fi
echo "$c \$* | root=\${OMPI_ALLOW_RUN_AS_ROOT:-unset} confirm=\${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-unset} oversubscribe=\${OMPI_MCA_rmaps_base_oversubscribe:-unset} blas=\${OPENBLAS_NUM_THREADS:-unset}"
S
  chmod +x "$stubs/$c"
done
dev='root=1 confirm=1 oversubscribe=1 blas=1'
prod='root=unset confirm=unset oversubscribe=unset blas=1'

# check WHAT WANT-STDOUT WANT-STDERR-REGEX [VAR=VALUE...] -- MPDIST-RUN-ARGS...: runs mpdist-run in
# an environment without the settings (plus the VARs) and compares what the stub saw.
check() {
  local what=$1 want=$2 err=$3 vars=()
  shift 3
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  local got rc=0
  got=$(env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -u OMPI_MCA_rmaps_base_oversubscribe \
    -u OPENBLAS_NUM_THREADS -u SLURM_JOB_ID -u MPDIST_PRODUCTION PATH="$stubs:$PATH" MPDIST_BIN="$MPDIST" \
    "${vars[@]}" "$SRC/launch/mpdist-run" "$@" 2>"$TMP/err") || rc=$?
  if [ "$rc" = 0 ] && [ "$got" = "$want" ] && grep -Eq -- "$err" "$TMP/err"; then
    echo "ok: $what"
  else
    echo "FAIL: $what: exit $rc"; echo "    got:  $got"; echo "    want: $want"; sed 's/^/    stderr: /' "$TMP/err"
    failures=$((failures + 1))
  fi
}

check "local run: development settings, said on stderr" "mpirun -np 2 $MPDIST a.cfg --set x=1 | $dev" \
  'local development settings' -- -n 2 a.cfg --set x=1
check "local run with --production: none" "mpirun -np 2 $MPDIST a.cfg | $prod" \
  '^mpdist-run: mpirun -np 2' -- --production -n 2 a.cfg
check "local run with MPDIST_PRODUCTION=1: none" "mpirun -np 1 $MPDIST a.cfg | $prod" \
  '^mpdist-run: mpirun -np 1' MPDIST_PRODUCTION=1 -- a.cfg
check "Slurm job, srun with PMIx: none" "srun --mpi=pmix -n 4 $MPDIST a.cfg | $prod" \
  '^mpdist-run: srun --mpi=pmix' SLURM_JOB_ID=17 -- -n 4 a.cfg
check "Slurm job, mpirun fallback: none" "mpirun $MPDIST a.cfg | $prod" 'no PMIx plugin' \
  SLURM_JOB_ID=17 STUB_MPI_LIST=none -- a.cfg
check "Slurm job: the caller's own settings are kept" "srun --mpi=pmix $MPDIST a.cfg | root=1 confirm=unset oversubscribe=unset blas=3" \
  '^mpdist-run: srun' SLURM_JOB_ID=17 OMPI_ALLOW_RUN_AS_ROOT=1 OPENBLAS_NUM_THREADS=3 -- a.cfg
if grep -q 'development settings' "$TMP/err"; then
  echo "FAIL: a Slurm run mentions development settings"; failures=$((failures + 1))
fi

# A launcher that outlives a rank's communication failure (mpirun waiting on a daemon it cannot
# reach; tests/integration/box_faults.sh makes the real one) is ended MPDIST_HANG_GRACE_S later
# with exit 6; its stderr passes through unchanged.
hung=$TMP/hung
mkdir -p "$hung"
printf '#!/bin/sh
echo "mpdist: error: comm: timed out after 5 s (comm.timeout_s) in x at step 3; ranks that did not arrive: 1 (h2)" >&2
exec sleep 60
' >"$hung/mpirun"
chmod +x "$hung/mpirun"
rc=0
t0=$SECONDS
PATH="$hung:$PATH" MPDIST_BIN=$MPDIST MPDIST_HANG_GRACE_S=2 timeout 30 "$SRC/launch/mpdist-run" -n 2 a.cfg 2>"$TMP/err" || rc=$?
took=$((SECONDS - t0))
if [ "$rc" = 6 ] && [ "$took" -le 5 ] && grep -q '^mpdist: error: comm: timed out' "$TMP/err" &&
   grep -q '^mpdist-run: a rank reported a communication failure and the launcher is still running 2 s later' "$TMP/err"; then
  echo "ok: a launcher hung after a comm error is ended with exit 6 after $took s"
else
  echo "FAIL: hung launcher: exit $rc after $took s"; sed 's/^/    stderr: /' "$TMP/err"
  failures=$((failures + 1))
fi
# The same with MPDIST_HANG_GRACE_S=08: a leading 0 is decimal (08 was an octal error, and the
# guard ended the launcher at once).
rc=0
t0=$SECONDS
PATH="$hung:$PATH" MPDIST_BIN=$MPDIST MPDIST_HANG_GRACE_S=08 timeout 30 "$SRC/launch/mpdist-run" -n 2 a.cfg 2>"$TMP/err" || rc=$?
took=$((SECONDS - t0))
expect_ok "MPDIST_HANG_GRACE_S=08: exit 6 after 8 s ($rc after $took s)" \
  test "$rc" = 6 -a "$took" -ge 8 -a "$(grep -c 'still running 8 s later' "$TMP/err")" = 1
# Bad settings of mpdist-run itself: exit 2 and one line, before anything is launched.
usage() { # usage WHAT REGEX VAR=VALUE... -- ARGS...
  local what=$1 regex=$2 vars=() rc=0
  shift 2
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  env PATH="$stubs:$PATH" MPDIST_BIN="$MPDIST" "${vars[@]}" "$SRC/launch/mpdist-run" "$@" >"$TMP/out" 2>&1 || rc=$?
  expect_ok "$what: exit 2, one line: $(head -c 300 "$TMP/out")" \
    test "$rc" = 2 -a "$(wc -l <"$TMP/out")" = 1 -a "$(grep -cE -- "$regex" "$TMP/out")" = 1
}
usage "MPDIST_HANG_GRACE_S=x" "MPDIST_HANG_GRACE_S must be a whole number" MPDIST_HANG_GRACE_S=x -- a.cfg
usage "MPDIST_HANG_GRACE_S of 20 digits" "MPDIST_HANG_GRACE_S must be a whole number of seconds, at most 99999" \
  MPDIST_HANG_GRACE_S=99999999999999999999 -- a.cfg
usage "MPDIST_RESTART_DELAY_S=100000" "MPDIST_RESTART_DELAY_S must be" MPDIST_RESTART_DELAY_S=100000 -- a.cfg
usage "-n 4294967296 (mpirun would wrap it)" "-n needs a rank count, at most 9999999" -- -n 4294967296 a.cfg
usage "MPDIST_PRODUCTION=yes" "MPDIST_PRODUCTION must be 0 or 1 \(got 'yes'\)" MPDIST_PRODUCTION=yes -- a.cfg
usage "MPDIST_BIN a directory" "is not built" MPDIST_BIN="$TMP" -- a.cfg
usage "MPDIST_RESTART_LOG in a missing directory" "MPDIST_RESTART_LOG: cannot append to" \
  MPDIST_RESTART_LOG="$TMP/nodir/r.log" -- --max-restarts 1 a.cfg
check "MPDIST_RESTART_LOG without --max-restarts: not opened" "mpirun -np 1 $MPDIST a.cfg | $dev" \
  'local development' MPDIST_RESTART_LOG="$TMP/nodir/r.log" -- a.cfg
check "MPDIST_RESTART_LOG=/dev/null (a device) with --max-restarts: taken" "mpirun -np 1 $MPDIST a.cfg --restartable | $dev" \
  'local development' MPDIST_RESTART_LOG=/dev/null -- --max-restarts 1 a.cfg
expect_ok "a restart log is not made where no restart may write it" test ! -e "$TMP/nodir"
usage "TMPDIR missing" "TMPDIR '$TMP/nodir' is not a writable directory" TMPDIR="$TMP/nodir" -- a.cfg
# MPDIST_MPIRUN_ARGS is split at blanks and never globbed against the current directory.
touch "$TMP/fake1"
cd "$TMP"
check "MPDIST_MPIRUN_ARGS with a '*': kept as it is" "mpirun -np 1 --x fake* $MPDIST a.cfg | $dev" \
  'local development' MPDIST_MPIRUN_ARGS='--x fake*' -- a.cfg
finish
