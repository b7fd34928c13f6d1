#!/usr/bin/env bash
# [output] log: every record parses as JSON, there is one progress record per
# progress line and one evaluation record per evaluation, the last evaluation
# is the one in the metrics, and --resume appends to the log (both runs'
# records, in order) instead of overwriting it; on 2 ranks and for sma too.
# The metrics' "run" object names the version, libraries, hosts and command.
# Usage: run_log.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

synthetic_job "$work/job.ini" "$src/jobs/models/mlp.ini" "log_every = 4" "eval_every = 8" "[optimizer]" "lr = 0.05"

# check_log LOG METRICS FIRST_STEPS...: the log's records against the metrics;
# FIRST_STEPS: the first_step of each "start" record, in order.
check_log() {
  python3 - "$@" <<'PY'
import json, sys
log, metrics, starts = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
records = [json.loads(line) for line in open(log)]  # every line one JSON record
m = json.load(open(metrics))
assert [r["first_step"] for r in records if r["event"] == "start"] == starts, "start records"
progress = [r for r in records if r["event"] == "progress"]
evals = [r for r in records if r["event"] == "evaluation"]
assert progress and evals, "no progress or evaluation records"
for r in progress:
    assert all(k in r for k in ("wall_seconds", "step", "epoch", "loss", "samples_per_second", "lr")), r
steps = [r["step"] for r in progress]
assert steps == sorted(steps), f"progress steps out of order: {steps}"
walls = [r["wall_seconds"] for r in records]
assert walls == sorted(walls), "wall seconds go back"
last, final = evals[-1], m["evaluations"][-1]
assert last["step"] == final["step"] and abs(last["accuracy"] - final["test_accuracy"]) < 1e-12 \
    and abs(last["loss"] - final["test_loss"]) < 1e-9, f"last evaluation {last} is not the metrics' {final}"
assert len(evals) == len(m["evaluations"]), f"{len(evals)} evaluation records, {len(m['evaluations'])} in the metrics"
run = m["run"]  # the metrics' record of what ran where
assert run["burstpool"]["version"] and run["burstpool"]["mpi"] and run["burstpool"]["hdf5"], run["burstpool"]
assert sum(h["ranks"] for h in run["hosts"]) == m["ranks"] == run["ranks"], run["hosts"]
assert " train " in run["command_line"] and run["device"] == "CPU", run
print(f"{len(records)} records, {len(progress)} progress, {len(evals)} evaluations, last at step {last['step']}")
PY
}

# One run, then a resumed one: the log keeps both.
"$bin" train "$work/job.ini" --steps 16 --checkpoint "$work/c.h5" --metrics "$work/m1.json" \
  --set "output.log=$work/{job}.jsonl" >"$work/out1" 2>&1 || fail "first run: $(tail -3 "$work/out1")"
if out=$(check_log "$work/job.jsonl" "$work/m1.json" 0 2>&1); then echo "ok   one run: $out"; else fail "one run: $out"; fi
[[ $(grep -c '"event":"progress"' "$work/job.jsonl") -eq $(grep -c '^step ' "$work/out1") ]] ||
  fail "one progress record per progress line"
"$bin" train "$work/job.ini" --steps 32 --checkpoint "$work/c.h5" --metrics "$work/m2.json" --resume \
  --set "output.log=$work/{job}.jsonl" >"$work/out2" 2>&1 || fail "resumed run: $(tail -3 "$work/out2")"
if out=$(check_log "$work/job.jsonl" "$work/m2.json" 0 16 2>&1); then echo "ok   resumed run appends: $out"; else fail "resume: $out"; fi

# Two ranks, and the small-batch loop: rank 0 writes every record once.
mpirun -np 2 --oversubscribe "$bin" train "$work/job.ini" --steps 16 --metrics "$work/m3.json" \
  --set "output.log=$work/two.jsonl" >"$work/out3" 2>&1 || fail "2 ranks: $(tail -3 "$work/out3")"
if out=$(check_log "$work/two.jsonl" "$work/m3.json" 0 2>&1); then echo "ok   2 ranks: $out"; else fail "2 ranks: $out"; fi
"$bin" train "$work/job.ini" --steps 16 --metrics "$work/m4.json" --set sync.strategy=sma --set sync.learners=2 \
  --set "output.log=$work/sma.jsonl" >"$work/out4" 2>&1 || fail "sma: $(tail -3 "$work/out4")"
if out=$(check_log "$work/sma.jsonl" "$work/m4.json" 0 2>&1); then echo "ok   sma: $out"; else fail "sma: $out"; fi

# scripts/plot_run.py draws the logs (where a Python with matplotlib is installed).
python=$(python_with matplotlib)
if [[ -n $python ]]; then
  "$python" "$src/scripts/plot_run.py" "$work/job.jsonl" "$work/two.jsonl" "$work/sma.jsonl" --out "$work/runs.png" \
    >"$work/plot.out" 2>&1 || fail "plot_run.py: $(cat "$work/plot.out")"
  if [[ $(head -c 8 "$work/runs.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]]; then
    echo "ok   plot_run.py: $(cat "$work/plot.out")"
  else
    fail "plot_run.py wrote no PNG"
  fi
else
  echo "skip plot_run.py: no Python with matplotlib here"
fi

finish run_log
