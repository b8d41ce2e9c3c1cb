# What mpdist's exit codes mean, and which a restart can fix (sourced by launch/mpdist-run and
# cluster/slurm/job.sh, not run). mpdist: 0 done, 1 internal error, 2 usage or config, 3 data,
# 4 checkpoint, 5 divergence, 6 communication failure, 128 + N stopped by signal N without a
# checkpoint.dir; a launcher adds its own codes, 128 + N when a rank or the launcher was ended by
# signal N.

# mp_exit_cause RC: prints what exit code RC means, in a few words.
mp_exit_cause() {
  case $1 in
    0) echo "done" ;;
    1) echo "an internal error, or the launcher's own failure" ;;
    2) echo "a usage or config error" ;;
    3) echo "a data error" ;;
    4) echo "a checkpoint error" ;;
    5) echo "the run diverged" ;;
    6) echo "a communication failure: a lost rank or host" ;;
    138 | 143) echo "stopped by $([ "$1" = 138 ] && echo SIGUSR1 || echo SIGTERM): a stop request, or a rank ended by it" ;;
    *) if [ "$1" -gt 128 ]; then echo "a rank or the launcher ended by signal $(($1 - 128))"
       else echo "a failed rank"; fi ;;
  esac
}

# mp_exit_restartable RC: succeeds when a run that failed with RC may succeed when started again
# from its newest checkpoint: not for 0, not for 2-5, which would fail the same way, and not for
# 138 and 143, a stop asked for with SIGUSR1 or SIGTERM (mpdist exits so when it had no
# checkpoint.dir to save into; with one it saves and exits 0).
mp_exit_restartable() {
  case $1 in
    0 | 2 | 3 | 4 | 5 | 138 | 143) return 1 ;;
    *) return 0 ;;
  esac
}

# mp_exit_not_restarted RC: why a run that exited RC (not restartable) is not started again.
mp_exit_not_restarted() {
  case $1 in
    138 | 143) echo "a stop was asked for" ;;
    *) echo "a restart would fail the same way" ;;
  esac
}
