# Development settings for local runs on a small machine, sourced by the tests, the quickstart,
# the bench scripts and launch/mpdist-run outside Slurm (not inside Slurm, not with --production):
# running as root needs Open MPI's explicit consent; more ranks than cores needs oversubscribe;
# one CPU thread per rank keeps ranks from fighting over cores (unless OMP_NUM_THREADS is set,
# which mpdist reads first).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
