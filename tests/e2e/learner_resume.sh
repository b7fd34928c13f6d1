#!/usr/bin/env bash
# Checkpoints and --resume of the small-batch strategies (docs/learners.md):
# a stopped or killed sma or local-sgd run, resumed, ends bit for bit as the
# uninterrupted run (every replica, its momentum and statistics, z and the
# progress); a checkpoint of 2 ranks x 1 learner resumes on 1 rank x 2
# learners; shadow resumes and learns; the twin device resumes like the CPU;
# a corrupt newest checkpoint is refused for the previous one; checkpoints of
# another strategy or a learner count the ranks cannot take are refused.
# Usage: learner_resume.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"
command -v mpirun >/dev/null || { echo "mpirun missing"; exit 1; }

cat >"$work/job.ini" <<JOB
[job]
model = $src/jobs/models/vgg_small.ini
seed = 5
[data]
source = synthetic
synthetic_train_samples = 512
synthetic_test_samples = 64
[train]
batch_size = 8
steps = 40
eval_every = 10
log_every = 10
[optimizer]
lr = 0.01
momentum = 0.9
[sync]
strategy = sma
learners = 2
alpha = 0.2
local_steps = 4
[output]
checkpoint_every = 5
JOB
# run RANKS NAME [args]: trains with checkpoint $work/NAME.h5, output in $work/NAME.out
run() {
  local ranks=$1 name=$2
  shift 2
  timeout 300 mpirun -np "$ranks" --oversubscribe "$bin" train "$work/job.ini" --checkpoint "$work/$name.h5" "$@" \
    >"$work/$name.out" 2>&1
}
# same A B [OBJECT]: A.h5 and B.h5 bit for bit equal (everything, or OBJECT)
same() {
  if [[ $# -eq 3 ]]; then h5diff -d 0 "$work/$1.h5" "$work/$2.h5" "$3" "$3" >/dev/null; else h5same "$work/$1.h5" "$work/$2.h5"; fi
}
resumed_from() { grep -o "resuming from the checkpoint of iteration [0-9]*" "$work/$1.out"; }

# 1. sma and local-sgd, 2 ranks x 2 learners: stopped at iteration 17 (a
#    checkpoint at the stop), resumed: the whole file equals the uninterrupted
#    run's, replicas, momenta, z and progress included.
for strategy in sma local-sgd; do
  s=(--set sync.strategy=$strategy)
  run 2 "$strategy-ref" "${s[@]}" || fail "$strategy: reference run: $(tail -2 "$work/$strategy-ref.out")"
  run 2 "$strategy" "${s[@]}" --steps 17 || fail "$strategy: first run"
  run 2 "$strategy" "${s[@]}" --resume || fail "$strategy: resume: $(tail -2 "$work/$strategy.out")"
  if same "$strategy-ref" "$strategy" && [[ $(resumed_from "$strategy") == *" 17" ]]; then
    echo "ok   $strategy 2x2: stopped at 17, $(resumed_from "$strategy"): every replica identical to the uninterrupted run"
  else
    fail "$strategy: resumed run differs from the uninterrupted one"
  fi
done

# 2. Killed: one rank of a running sma job is killed once a checkpoint
#    exists; the job is resumed until it finishes.
mpirun -np 2 "$bin" train "$work/job.ini" --checkpoint "$work/killed.h5" >/dev/null 2>&1 &
launcher=$!
for _ in $(seq 1 400); do [[ -f $work/killed.h5 ]] && break; sleep 0.02; done
victim=$(pgrep -P "$launcher" -x burstpool | tail -n 1)
[[ -n $victim ]] && kill -9 "$victim"
timeout 60 tail --pid="$launcher" -f /dev/null
for _ in 1 2 3; do run 2 killed --resume && break; done
step=$(resumed_from killed | grep -o '[0-9]*$')
if [[ -z $victim || -z $step || $step -ge 40 ]]; then
  fail "sma killed: no rank was killed before the end (victim '$victim', resumed at '$step')"
elif same sma-ref killed; then
  echo "ok   sma, rank pid $victim killed, resumed from iteration $step: identical to the uninterrupted run"
else
  fail "sma killed and resumed: differs from the uninterrupted run ($(tail -2 "$work/killed.out"))"
fi

# 3. 2 ranks x 1 learner resumed on 1 rank x 2 learners: replica g takes
#    learner batch g on any rank count, so the result is the 2x1 run's.
run 2 ref21 --set sync.learners=1 || fail "2x1 reference"
run 2 to12 --set sync.learners=1 --steps 13 || fail "2x1 first run"
run 1 to12 --set sync.learners=2 --resume || fail "1x2 resume: $(tail -2 "$work/to12.out")"
if same ref21 to12 /weights && same ref21 to12 /average && same ref21 to12 /learners; then
  echo "ok   2 ranks x 1 learner stopped at 13, resumed on 1 rank x 2 learners: identical to the 2x1 run"
else
  fail "2x1 resumed as 1x2 differs"
fi

# 4. shadow (asynchronous, so not repeatable bit for bit): resumes and learns.
s=(--set sync.strategy=shadow --set sync.learners=1)
run 2 shadow "${s[@]}" --steps 13 || fail "shadow first run"
run 2 shadow "${s[@]}" --resume || fail "shadow resume: $(tail -2 "$work/shadow.out")"
accuracy=$(grep -o "done: 40 steps.*test accuracy [0-9.]*" "$work/shadow.out" | grep -o '[0-9.]*$')
if [[ $(resumed_from shadow) == *" 13" ]] && python3 -c "import sys; sys.exit(float('${accuracy:-0}') < 0.9)"; then
  echo "ok   shadow: $(resumed_from shadow), test accuracy $accuracy at the end"
else
  fail "shadow resume: $(tail -2 "$work/shadow.out")"
fi

# 5. The device path (twin device): a periodic checkpoint takes the
#    replicas from the device (the one of iteration 10, with evaluations at
#    7 and 14 so that none brought them to the host first), and a resume puts
#    statistics and parameters back; the result is the CPU's uninterrupted
#    run (evaluations leave the training state as it was).
run 1 cpu12 || fail "1 rank reference"
run 1 twin --set job.device=twin --set train.eval_every=7 --steps 13 || fail "twin first run"
mv "$work/twin.h5.prev" "$work/twin.h5"
run 1 twin --set job.device=twin --set train.eval_every=7 --resume || fail "twin resume"
if same cpu12 twin && [[ $(resumed_from twin) == *" 10" ]]; then
  echo "ok   twin device: periodic checkpoint of iteration 10, $(resumed_from twin): identical to the uninterrupted CPU run"
else
  fail "twin device: resumed run differs from the CPU's"
fi

# 6. A corrupt newest checkpoint is refused; the previous one (iteration 10,
#    the cadence's last before 13) is used and the result is unchanged.
run 1 corrupt --steps 13 || fail "corrupt: first run"
corrupt "$work/corrupt.h5"
run 1 corrupt --resume || fail "corrupt: resume: $(tail -2 "$work/corrupt.out")"
if grep -q "warning: refused .*corrupt.h5: checksum mismatch (corrupt checkpoint)" "$work/corrupt.out" &&
  [[ $(resumed_from corrupt) == *" 10" ]] && same cpu12 corrupt; then
  echo "ok   corrupt checkpoint refused, $(resumed_from corrupt) (.prev): identical result"
else
  fail "corrupt checkpoint: $(head -3 "$work/corrupt.out")"
fi

# 7. Checkpoints by wall time (checkpoint_seconds, no step cadence): one is
#    written part way, and a resume from it ends as the uninterrupted run.
run 1 timed --set output.checkpoint_every=0 --set output.checkpoint_seconds=0.2 || fail "timed: run"
step=$(h5dump -a /progress/step "$work/timed.h5.prev" 2>/dev/null | grep -o '(0): [0-9]*' | cut -d' ' -f2)
cp "$work/timed.h5.prev" "$work/timed.h5"
run 1 timed --set output.checkpoint_every=0 --resume || fail "timed: resume"
if [[ -n $step && $step -lt 40 ]] && [[ $(resumed_from timed) == *" $step" ]] && same cpu12 timed; then
  echo "ok   checkpoints every 0.2 s: one at iteration $step, resumed from it: identical result"
else
  fail "checkpoint_seconds: step '$step': $(tail -2 "$work/timed.out")"
fi

# 8. Refused: another strategy, ssgd from a learner checkpoint, a learner
#    count the ranks cannot take.
expect() {  # expect WHAT PATTERN RANKS [args]
  local what=$1 pattern=$2 ranks=$3
  shift 3
  cp "$work/cpu12.h5" "$work/bad.h5"
  run "$ranks" bad --resume "$@" && { fail "$what: accepted"; return; }
  grep -Eq -- "$pattern" "$work/bad.out" && echo "ok   refused $what: $(grep -m1 -o 'error.*' "$work/bad.out")" ||
    fail "$what: $(tail -2 "$work/bad.out")"
}
expect "another strategy" "checkpoint of a \[sync\] strategy = sma run, the job has strategy local-sgd" 1 \
  --set sync.strategy=local-sgd
expect "ssgd" "checkpoint of a small-batch run \(\[sync\] strategy = sma\); resume it with that strategy" 1 \
  --set sync.strategy=ssgd
expect "3 ranks for 2 learners" "holds 2 learners in all, which 3 rank\(s\) with \[sync\] learners = 1 cannot take" 3 \
  --set sync.learners=1
expect "another seed" "checkpoint was trained with seed 5, the job has seed 6" 1 --set job.seed=6

finish learner_resume
