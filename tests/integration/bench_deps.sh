#!/usr/bin/env bash
# The bench scripts check packages and never install them: launch/deps.sh --check with a package
# missing exits 2 and prints the one apt-get command that installs it, and installs nothing;
# with none missing it is silent; bench/opt_levels.sh and bench/lr_sweep.sh (which check) stop
# that way before building anything; and no bench or cluster script calls apt, sudo or
# launch/deps.sh without --check. dpkg-query is a stub that reports STUB_MISSING as not installed;
# apt-get, apt, sudo and cmake are stubs that record any call.
source "$(dirname "$0")/common.bash"
cd "$SRC"
stubs=$TMP/stubs
mkdir -p "$stubs"
for c in apt apt-get sudo cmake; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/called"\nexit 97\n' "$c" "$TMP" >"$stubs/$c"
done
cat >"$stubs/dpkg-query" <<'S'
#!/bin/sh
for p; do :; done
case " $STUB_MISSING " in *" $p "*) exit 1 ;; esac
printf 'install ok installed'
S
chmod +x "$stubs"/*

# run WANT-EXIT WANT-STDERR-REGEX MISSING CMD...: an empty REGEX wants nothing on stderr
run() {
  local want=$1 regex=$2 missing=$3 rc=0
  shift 3
  rm -f "$TMP/called"
  PATH="$stubs:$PATH" STUB_MISSING=$missing timeout 60 "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  local said=0
  if [ -n "$regex" ]; then grep -Eq -- "$regex" "$TMP/err" && said=1; else [ -s "$TMP/err" ] || said=1; fi
  if [ "$rc" = "$want" ] && [ ! -e "$TMP/called" ] && [ "$said" = 1 ]; then
    echo "ok: $* (missing: ${missing:-none}): exit $rc"
  else
    echo "FAIL: $* (missing: ${missing:-none}): exit $rc (want $want), stderr want /$regex/"
    sed 's/^/    stderr: /' "$TMP/err" | head -5
    [ ! -e "$TMP/called" ] || sed 's/^/    called: /' "$TMP/called"
    failures=$((failures + 1))
  fi
}

cmd='^  (sudo )?apt-get install -y --no-install-recommends'
run 2 "$cmd libcjson-dev gnuplot-nox\$" "libcjson-dev gnuplot-nox" bash launch/deps.sh --check gnuplot-nox
run 0 '' "" bash launch/deps.sh --check gnuplot-nox
[ ! -s "$TMP/out" ] || { echo "FAIL: deps.sh --check printed on stdout"; failures=$((failures + 1)); }
run 2 "$cmd gnuplot-nox\$" gnuplot-nox bash bench/opt_levels.sh mlp
run 2 "$cmd libopenblas-dev\$" libopenblas-dev bash bench/lr_sweep.sh mlp

for f in bench/*.sh cluster/*.sh cluster/*/*.sh cluster/slurm/*.sbatch; do
  bad=$(grep -nE '(^|[;&|]|then|do)[[:space:]]*("?\$\{?[a-z_]*\}?"?[[:space:]]*)?(sudo|apt|apt-get|(bash[[:space:]]+)?[^[:space:]"]*launch/deps\.sh)([[:space:]]|$)' "$f" |
        grep -v 'deps\.sh --check' || true)
  if [ -n "$bad" ]; then
    echo "FAIL: $f installs packages:"; echo "$bad" | sed 's/^/    /'; failures=$((failures + 1))
  fi
done
finish
