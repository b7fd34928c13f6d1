# Set-up shared by the end-to-end scripts (sourced; ctest runs only
# tests/e2e/*.sh). From the script's arguments BINARY SOURCE_DIR: absolute
# $bin and $src; one OpenMP thread; Open MPI allowed to run as root, waiting
# ranks yielding their core; a scratch folder $work removed on exit; a
# failure count kept by fail() and reported by finish(); python_with; h5same; corrupt;
# background_job; synthetic_job (lib/jobs.sh).
# Usage: source "$(dirname "$0")/lib/harness.sh" "$@"
bin=$(realpath "$1")
src=$(realpath "$2")
source "$(dirname "${BASH_SOURCE[0]}")/jobs.sh"
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
# python_with MODULE...: the first of python3 and Debian's /usr/bin/python3
# that imports every MODULE (empty when none does).
python_with() {
  local candidate modules="$*"
  for candidate in python3 /usr/bin/python3; do
    "$candidate" -c "import ${modules// /, }" 2>/dev/null && { echo "$candidate"; return; }
  done
}
# h5same A B: checkpoints A and B hold the same training state bit for bit:
# everything but /history, the run's record of seconds and evaluations.
h5same() { h5diff -d 0 --exclude-path /history "$1" "$2" >/dev/null; }
# corrupt FILE: flips the bits of the byte in the middle of FILE (weight data
# in a checkpoint), as a disk or a partial copy might.
corrupt() {
  python3 - "$1" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[len(data) // 2] ^= 0xFF
open(path, "wb").write(bytes(data))
PY
}
# A background job for the multiplexing tests: an MLP trained data parallel
# on synthetic data, long enough to outlast the foreground.
# Usage: background_job FILE [DEVICE]
background_job() {
  cat >"$1" <<JOB
[job]
model = $src/jobs/models/mlp.ini
seed = 9
device = ${2:-cpu}
[data]
source = synthetic
synthetic_train_samples = 1024
synthetic_test_samples = 0
[train]
batch_size = 64
steps = 100000
[optimizer]
lr = 0.02
JOB
}
