#!/usr/bin/env bash
# [job] precision = bf16 on the CPU and the twin device: the twin's
# whole-model path gives the CPU's checkpoint bit for bit; bf16 trains as
# well as fp32 without being fp32; the learners take bf16 too. (That a bf16
# step leaves the fp32 master weights as they were is tests/unit/test_bf16.cpp's.)
# Usage: bf16.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

synthetic_job "$work/job.ini" "$src/jobs/models/lenet5.ini" "steps = 80" "eval_every = 40" "[optimizer]" "lr = 0.02"
train() {  # train NAME [args]: $work/NAME.h5 and NAME.json
  local name=$1
  shift
  timeout 300 "$bin" train "$work/job.ini" --checkpoint "$work/$name.h5" --metrics "$work/$name.json" "$@" \
    >"$work/$name.out" 2>"$work/$name.err" || fail "$name: exit $?: $(tail -3 "$work/$name.err")"
}
train fp32
train bf16 --set job.precision=bf16
train bf16-twin --set job.precision=bf16 --set job.device=twin
train bf16-sma --set job.precision=bf16 --set sync.strategy=sma --set sync.learners=2

if h5same "$work/bf16.h5" "$work/bf16-twin.h5"; then
  echo "ok   bf16 on the twin device gives the CPU's checkpoint bit for bit"
else
  fail "bf16: the twin and the CPU differ"
fi
h5same "$work/bf16.h5" "$work/fp32.h5" && fail "bf16 gave fp32's checkpoint: nothing was rounded"

python3 - "$work" <<'PY' || fail "bf16 did not train as fp32 does"
import json, sys
acc = {}
for run in ("fp32", "bf16", "bf16-sma"):
    m = json.load(open(f"{sys.argv[1]}/{run}.json"))
    acc[run] = m["evaluations"][-1]["test_accuracy"]
print("test accuracy:", acc)
assert acc["fp32"] > 0.9, acc
assert acc["bf16"] > acc["fp32"] - 0.05 and acc["bf16-sma"] > 0.9, acc
PY

finish bf16
