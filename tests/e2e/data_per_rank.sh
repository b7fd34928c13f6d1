#!/usr/bin/env bash
# [data] read = batches: on 2 ranks, from a 48 MiB training file, each rank's
# peak resident memory is below read = whole's by most of the file (it holds
# only the labels and its share of a batch), and both modes train to the same
# checkpoint, bit for bit. Runs perf/data_memory.py at a small size (the 1 GiB
# figures are in perf/results/data_memory.md).
# Skipped, with a message, where no Python has h5py.
# Usage: data_per_rank.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

python=$(python_with h5py numpy)
[[ -n $python ]] || { echo "skip: no Python with h5py here (Debian: python3-h5py)"; exit 0; }

"$python" "$src/perf/data_memory.py" --binary "$bin" --mb 48 --ranks 2 --steps 20 --rounds 1 \
  --out "$work/result" >"$work/out" 2>&1 || fail "data_memory.py: $(tail -5 "$work/out")"
if out=$("$python" - "$work/result.json" <<'PY' 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
whole, batches = r["whole"]["peak_resident_mib_per_rank"], r["batches"]["peak_resident_mib_per_rank"]
assert r["identical_checkpoints"], "the two modes trained differently"
for k, (w, b) in enumerate(zip(whole, batches)):
    assert w - b > 0.75 * r["file_mib"], f"rank {k}: whole {w:.0f} MiB, batches {b:.0f} MiB, file {r['file_mib']:.0f} MiB"
print(f"file {r['file_mib']:.0f} MiB: peak per rank {', '.join(f'{w:.0f}' for w in whole)} MiB read whole, "
      f"{', '.join(f'{b:.0f}' for b in batches)} MiB read per batch; same checkpoint")
PY
); then echo "ok   $out"; else fail "$out"; fi
finish data_per_rank
