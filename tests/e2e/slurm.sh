#!/usr/bin/env bash
# End to end on a real single-node Slurm (slurm/local-cluster.sh): submits
# slurm/train.sbatch and slurm/sweep.sbatch with sbatch and checks their
# results, requeues a running job and checks that it resumes, and kills one
# rank with SIGKILL under srun and checks that the job ends without hanging,
# and signals a job as Slurm does before its time limit: it checkpoints,
# requeues itself and finishes.
# Usage: slurm.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
bin=$(realpath "$1")
src=$(realpath "$2")
source "$src/tests/e2e/lib/jobs.sh"
for exe in sbatch srun slurmctld slurmd munged; do
  command -v "$exe" >/dev/null || { echo "FAIL: $exe missing (scripts/install-deps.sh installs slurm-wlm and munge)"; exit 1; }
done
export BURSTPOOL_SLURM_DIR
BURSTPOOL_SLURM_DIR=$(mktemp -d)
work=$(mktemp -d)
cleanup() {
  bash "$src/slurm/local-cluster.sh" stop >/dev/null
  rm -rf "$work" "$BURSTPOOL_SLURM_DIR"
}
trap cleanup EXIT
started=$(bash "$src/slurm/local-cluster.sh" start) || { echo "FAIL: local Slurm did not start"; exit 1; }
eval "$started"
export BURSTPOOL_HOME=$src BURSTPOOL=$bin BURSTPOOL_OUT=$work/runs
cd "$work"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

job_file() {  # job_file NAME STEPS
  synthetic_job "$work/$1.ini" "$src/jobs/models/lenet5.ini" "steps = $2" "log_every = 100"
  echo "$work/$1.ini"
}

state_of() { scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
# wait_done JOBID SECONDS: until the job has ended. Only a final state counts:
# a requeued job passes through COMPLETING, REQUEUED and PENDING, and a busy
# controller may not answer at all for a moment (an empty state).
wait_done() {
  for _ in $(seq 1 $(($2 * 5))); do
    case $(state_of "$1") in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) return 0 ;;
    esac
    scontrol show job "$1" 2>&1 | grep -q "Invalid job id" && return 0  # purged after it ended
    sleep 0.2
  done
  return 1
}
# start_now JOBID: Slurm holds a requeued batch job back for a while before it
# may start again; bring its start forward once the first run has been torn
# down: the job pending again and its step daemons gone (a step launched while
# they linger fails with "aborted before step completely launched").
start_now() {
  for _ in $(seq 1 150); do [[ $(state_of "$1") == RUNNING ]] || break; sleep 0.2; done
  for _ in $(seq 1 150); do pgrep -f "slurmstepd: \[$1\." >/dev/null || break; sleep 0.2; done
  for _ in $(seq 1 300); do
    case $(state_of "$1") in
      PENDING) scontrol update JobId="$1" StartTime=now 2>/dev/null ;;
      RUNNING | COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) return 0 ;;
    esac
    sleep 0.2
  done
}

# 1. A training job on 2 ranks.
id=$(sbatch --parsable --wait --ntasks=2 "$src/slurm/train.sbatch" "$(job_file small 60)")
m="$work/runs/small-$id.metrics.json"
if [[ -f $m ]] && python3 -c "import json,sys; m=json.load(open('$m')); sys.exit(0 if m['ranks']==2 and m['steps']==60 else 1)" &&
  [[ -f $work/runs/small-$id.ckpt.h5 ]]; then
  echo "ok   train.sbatch: job $id, 2 ranks, metrics and checkpoint named after the job"
else
  fail "train.sbatch job $id"; cat "$work"/burstpool-train-"$id".out | tail
fi

echo "   ($(date +%T))"
# 2. Requeued while running: the job resumes from its checkpoint.
id=$(sbatch --parsable --ntasks=2 "$src/slurm/train.sbatch" "$(job_file long 4000)" --set output.checkpoint_every=50)
ckpt="$work/runs/long-$id.ckpt.h5"
for _ in $(seq 1 300); do [[ -f $ckpt ]] && break; sleep 0.1; done
scontrol requeue "$id"
start_now "$id"
wait_done "$id" 240 || fail "requeued job $id did not finish"
log="$work/burstpool-train-$id.out"
if grep -q "restart 1" "$log" && grep -q "resuming from the checkpoint of step" "$log" &&
  python3 -c "import json,sys; sys.exit(0 if json.load(open('$work/runs/long-$id.metrics.json'))['steps']==4000 else 1)"; then
  echo "ok   requeue: job $id restarted and $(grep -m1 -o 'resuming from the checkpoint of step [0-9]*' "$log")"
else
  fail "requeue of job $id"; tail -n 20 "$log"
fi

echo "   ($(date +%T))"
# 3. A strong-scaling sweep, each point run twice: one metrics file per run, a
#    table of medians and a plot.
id=$(BURSTPOOL_REPEATS=2 BURSTPOOL_MODES="dp burst" sbatch --parsable --wait --ntasks=2 "$src/slurm/sweep.sbatch" \
  "$(job_file sweep 80)")
sweep="$work/runs/sweep-$id"
if [[ -f $sweep/ranks-1-r1.json && -f $sweep/ranks-1-r2.json && -f $sweep/ranks-2-r1.json &&
  -f $sweep/ranks-2-r2.json && -f $sweep/burst-ranks-2-r2.json ]] && grep -q "^| dp | 2 | 2 |" "$sweep/summary.md" &&
  grep -q "^| burst | 2 | 2 |" "$sweep/summary.md" &&
  [[ $(head -c 4 "$sweep/scaling.png" | od -An -c | tr -d ' ') == "211PNG" ]]; then
  echo "ok   sweep.sbatch: job $id wrote {,burst-}ranks-{1,2}-r{1,2}.json, summary.md and scaling.png"
else
  fail "sweep job $id"; ls "$sweep"; tail "$work/burstpool-sweep-$id.out"
fi

echo "   ($(date +%T))"
# 4. kill -9 of one rank under srun ends the whole job within seconds.
id=$(sbatch --parsable --ntasks=2 "$src/slurm/train.sbatch" "$(job_file victim 100000)")
victim=""
for _ in $(seq 1 300); do
  victim=$(scontrol listpids "$id" 2>/dev/null | awk 'NR > 1 {print $1}' | while read -r p; do
    [[ $(cat /proc/"$p"/comm 2>/dev/null) == burstpool ]] && echo "$p"; done | tail -n 1)
  [[ -n $victim ]] && grep -q "^step 100/" "$work/burstpool-train-$id.out" 2>/dev/null && break
  sleep 0.1
done
if [[ -z $victim ]]; then
  fail "kill -9 under srun: no rank of job $id found"; scancel "$id"
else
  start=$(date +%s)
  kill -9 "$victim"
  if wait_done "$id" 60; then
    echo "ok   kill -9 of rank pid $victim under srun: job $id ended ($(state_of "$id")) after $(($(date +%s) - start)) s"
  else
    fail "job $id still running 60 s after a rank was killed"; scancel "$id"
  fi
fi

echo "   ($(date +%T))"
# 5. A stop signal (what --signal=USR1@120 sends ahead of the time limit):
#    burstpool checkpoints and exits 75, train.sbatch requeues the job, and
#    it finishes from the checkpoint. The signal travels through slurmctld and
#    slurmd, which on a loaded machine took over 4 s: the job is long enough
#    (about 25 s unloaded) that it is still running when the signal lands.
steps=20000
id=$(sbatch --parsable --ntasks=2 "$src/slurm/train.sbatch" "$(job_file signalled $steps)")
log="$work/burstpool-train-$id.out"
for _ in $(seq 1 300); do grep -q "^step 100/" "$log" 2>/dev/null && break; sleep 0.1; done
scancel --signal=USR1 "$id"
for _ in $(seq 1 150); do grep -q "requeueing job" "$log" 2>/dev/null && break; sleep 0.2; done
# Until the requeue takes, the job can show as ended (the first run exited
# 75); on a loaded machine it did once, and the test stopped waiting before
# the second run began. Bring the start forward until that run has begun.
for _ in $(seq 1 300); do
  grep -q "restart 1" "$log" 2>/dev/null && break
  start_now "$id"
  sleep 0.2
done
wait_done "$id" 240 || fail "signalled job $id did not finish"
if grep -q "stopped early by SIGUSR1 after" "$log" && grep -q "restart 1" "$log" &&
  grep -q "resuming from the checkpoint of step" "$log" &&
  python3 -c "import json,sys; m=json.load(open('$work/runs/signalled-$id.metrics.json')); sys.exit(0 if m['steps']==$steps and m['stopped_by'] is None else 1)"; then
  echo "ok   scancel --signal=USR1: job $id $(grep -m1 -o 'stopped early by SIGUSR1 after [0-9]* steps' "$log"), requeued itself, $(grep -m1 -o 'resuming from the checkpoint of step [0-9]*' "$log"), finished"
else
  fail "signalled job $id"; tail -n 20 "$log"
fi

echo "slurm: $failures failure(s)"
[[ $failures -eq 0 ]]
