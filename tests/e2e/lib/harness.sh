# Set-up shared by the end-to-end scripts (sourced; ctest runs only
# tests/e2e/*.sh). From the script's arguments BINARY SOURCE_DIR: absolute
# $bin and $src; one OpenMP thread; Open MPI allowed to run as root, waiting
# ranks yielding their core; a scratch folder $work removed on exit; a
# failure count kept by fail() and reported by finish().
# Usage: source "$(dirname "$0")/lib/harness.sh" "$@"
bin=$(realpath "$1")
src=$(realpath "$2")
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# A script's last line: prints the count and is the script's exit status.
finish() {
  echo "$1: $failures failure(s)"
  [[ $failures -eq 0 ]]
}
