#!/usr/bin/env bash
# perf/gpu_check.sh rehearsed where there is no GPU: its dry run prints the
# default plan, correctness sections first, totalling at most 420 s; without
# the kit, and with a kit but no GPU, it stops at once with one line saying
# why, and leaves that line in OUTDIR/summary.txt and a results.tar.gz (at
# most the files a GPU machine's run brings back).
# Usage: gpu_check.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"
check=$src/perf/gpu_check.sh

plan=$(GPU_CHECK_DRY_RUN=1 bash "$check" "$work/dry") || fail "dry run: exit $?"
echo "$plan"
order=$(echo "$plan" | awk 'NF == 2 && $1 != "total" {printf "%s ", $1}')
[[ $order == "setup tests e2e "* ]] || fail "dry run: correctness is not first: $order"
total=$(echo "$plan" | awk '$1 == "total" {print $2 + 0}')
[[ -n $total ]] && ((total <= 420)) || fail "dry run: total '$total' s, more than 420"
[[ ! -e $work/dry ]] || fail "dry run: it made its output folder"
GPU_CHECK_DRY_RUN=1 GPU_CHECK_SECTIONS="tests nonsense" bash "$check" "$work/dry" >/dev/null 2>"$work/dry.err" &&
  fail "dry run: an unknown section accepted"
grep -q "unknown section 'nonsense'" "$work/dry.err" || fail "dry run: $(cat "$work/dry.err")"

# stops OUTDIR EXIT MESSAGE [ENV...]: the check stops within 5 s with EXIT and MESSAGE as its only summary line.
stops() {
  local dir=$1 code=$2 message=$3 rc start=$SECONDS
  shift 3
  env "$@" bash "$check" "$work/$dir" >"$work/$dir.out" 2>&1
  rc=$?
  ((rc == code)) || fail "$dir: exit $rc, expected $code: $(tail -2 "$work/$dir.out")"
  ((SECONDS - start <= 5)) || fail "$dir: took $((SECONDS - start)) s to stop"
  [[ $(cat "$work/$dir/summary.txt") == "$message" ]] || fail "$dir: summary $(cat "$work/$dir/summary.txt")"
  tar -tzf "$work/$dir/results.tar.gz" | grep -q log.txt || fail "$dir: no log in results.tar.gz"
  [[ $(ls "$work/$dir" | wc -l) -le 4 ]] || fail "$dir: more than 4 files: $(ls "$work/$dir")"
}
stops no_kit 2 "perf/gpu_check.sh: $work/nokit/ is missing: run scripts/pack-gpu-run.sh first and carry gpu-run" \
  GPU_CHECK_KIT="$work/nokit"
mkdir -p "$work/kit" "$work/fakebin"
touch "$work/kit/lib.tar.xz"
cp "$bin" "$work/kit/burstpool"
printf '#!/bin/sh\nexit 9\n' >"$work/fakebin/nvidia-smi"  # a driver that answers nothing, as on a machine without a GPU
chmod +x "$work/fakebin/nvidia-smi"
stops no_gpu 1 "perf/gpu_check.sh: no NVIDIA GPU here (nvidia-smi failed): nothing to check" \
  GPU_CHECK_KIT="$work/kit" PATH="$work/fakebin:$PATH"
finish gpu_check
