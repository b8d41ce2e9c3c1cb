#!/usr/bin/env bash
# launch/mpdist-run keeps the development settings (Open MPI as root, oversubscription) to local
# runs: set outside Slurm, and said so; not set inside a Slurm allocation or with --production
# (or MPDIST_PRODUCTION=1), where a value the caller exported is left as it is; one BLAS thread
# per rank everywhere. mpirun and srun are stubs that print what they were given.
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
finish
