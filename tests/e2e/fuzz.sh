#!/usr/bin/env bash
# Mutation fuzzing of every input burstpool reads (INI, plan JSON, HDF5 model,
# data and checkpoint): 300 seeded cases, each of which must end in exit 0 or
# in one error line naming a file or key, never a signal, hang or OOM.
# Usage: fuzz.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
bin=$1 src=$2
keep=$(mktemp -d)
trap 'rm -rf "$keep"' EXIT
if python3 "$src/tests/fuzz/fuzz.py" "$bin" --cases "${BURSTPOOL_FUZZ_CASES:-300}" --seed "${BURSTPOOL_FUZZ_SEED:-1}" \
  --jobs 4 --keep "$keep"; then
  exit 0
fi
echo "failing cases (job files, inputs and stderr):"
for d in "$keep"/*/; do echo "== $d"; cat "$d/stderr.txt" | tail -3; done
exit 1
