#!/usr/bin/env bash
# The GPU checks in one run of at most 7 minutes on one GPU: correctness first,
# then the figures, each part sized to fit.
#
#   section      what
#   setup        unpack the kit's libraries and Open MPI
#   tests        the CUDA unit tests (layers and model against their CPU twins)
#   e2e          tests/e2e/cuda_device.sh: 20 LeNet-5 steps on the GPU against
#                the CPU in fp32, tf32 and bf16, with CUDA graphs, a burst plan
#                and data parallel on 2 ranks, learners, a background job
#   steps        whole training steps at batch 32: LeNet-5 eager, layer by layer
#                (device_calls = per_layer) and with CUDA graphs, 2 alternating
#                rounds; vgg16 eager and layer by layer (its CUDA-graph steps
#                are cudnn_cache's runs)
#   mux1         one process hosting both jobs: a vgg16 foreground at batch 4,
#                8, 16 and 32, alone and beside a small-VGG background
#   precision    vgg16 steps at batch 32 in fp32, tf32 and bf16 against
#                PyTorch on the same GPU (fp32, tf32, its defaults, bf16)
#   learners     sma learners auto-tuned on the GPU, the average model on the
#                device against sent up every step; shadow with 2 learners
#   cudnn_cache  vgg16 with CUDA graphs and measured algorithms written to
#                [job] cudnn_cache once, reused by two runs that must repeat
#                its loss to the bit; and with the heuristic default
# Each section's estimated seconds are in `estimate` below (the dry run
# prints them and their total), from earlier runs' timings on an H200 (start-up
# of a vgg16 run about 7 s, of a LeNet-5 run about 2 s; perf/results/gpu/).
#
# Not in the default run (name them in GPU_CHECK_SECTIONS): layers (the
# per-layer benchmark against PyTorch), multiplex (2 ranks sharing the GPU),
# profile (vgg16's layer profile and the plan it gives for 8 GPUs).
#
# Every command runs under `timeout -k` within one deadline (GPU_CHECK_SECONDS,
# default 410 s from the start): a part that no longer fits is skipped and
# says so, and a hung GPU step is killed. Results are written as they come:
# OUTDIR/summary.txt gets one line per command (passed, failed with its exit
# status, timed out, or skipped and why), and OUTDIR/results.tar.gz (the log,
# every metrics file and each section's summary) is packed again after each
# command, so a run cut short keeps what it did. Those are the only files in
# OUTDIR (with at most a results.tar.gz.part from a cut packing).
#
# Needs gpu-run/ from scripts/pack-gpu-run.sh (the binaries, their libraries
# and Open MPI for a machine without them). GPU_CHECK_DRY_RUN=1 prints the
# plan and its estimated seconds and exits, on any machine.
# Environment: GPU_CHECK_SECTIONS (default: setup tests e2e steps mux1
# precision learners cudnn_cache; setup always runs first), GPU_CHECK_SECONDS,
# GPU_CHECK_KIT (the kit's folder, default gpu-run), GPU_CHECK_MUX_CAUSES=1
# (mux1 also measures what held the background back: binding, thread
# priority, CUDA waits; 40 s more).
# Usage: perf/gpu_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: perf/gpu_check.sh OUTDIR}
declare -A estimate=([setup]=15 [tests]=20 [e2e]=60 [steps]=45 [mux1]=85 [precision]=65 [learners]=40
                     [cudnn_cache]=50 [layers]=60 [multiplex]=70 [profile]=30)
sections=${GPU_CHECK_SECTIONS:-setup tests e2e steps mux1 precision learners cudnn_cache}
budget=${GPU_CHECK_SECONDS:-410}
kit=${GPU_CHECK_KIT:-gpu-run}  # scripts/pack-gpu-run.sh's folder
[[ " $sections " == *" setup "* ]] || sections="setup $sections"  # every section needs the kit unpacked

if [[ ${GPU_CHECK_DRY_RUN:-0} == 1 ]]; then
  total=0
  echo "perf/gpu_check.sh plan (deadline ${budget}s):"
  for name in $sections; do
    [[ -n ${estimate[$name]:-} ]] || { echo "unknown section '$name'" >&2; exit 2; }
    printf '  %-12s %4ss\n' "$name" "${estimate[$name]}"
    total=$((total + estimate[$name]))
  done
  printf '  %-12s %4ss\n' total "$total"
  ((total <= 420)) || echo "  over 420 s: more than a 7-minute GPU lease holds after its start-up"
  exit 0
fi

mkdir -p "$out"
work=/tmp/gpu-check/results  # packed into $out/results.tar.gz after every command
rm -rf /tmp/gpu-check && mkdir -p "$work" /tmp/gpu-check/kit/bin /tmp/gpu-check/mux
log=$work/log.txt
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$log" >>"$summary"; }
pack() {
  tar -C "$work" -czf "$out/results.tar.gz.part" . 2>/dev/null && mv "$out/results.tar.gz.part" "$out/results.tar.gz"
}
# Without the kit or a GPU there is nothing to check: one line, and stop.
[[ -f $kit/lib.tar.xz && -x $kit/burstpool ]] ||
  { note "perf/gpu_check.sh: $kit/ is missing: run scripts/pack-gpu-run.sh first and carry gpu-run"; pack; exit 2; }
nvidia-smi >/dev/null 2>&1 ||
  { note "perf/gpu_check.sh: no NVIDIA GPU here (nvidia-smi failed): nothing to check"; pack; exit 1; }

deadline=$((SECONDS + budget))
section() { echo "=== $* (at ${SECONDS}s)" | tee -a "$log"; }
# run NAME ESTIMATE LIMIT COMMAND...: runs COMMAND (output to the log) when
# ESTIMATE seconds still fit before the deadline, under `timeout -k` at LIMIT
# seconds or what is left; one line in the summary either way. Returns the
# command's status, 125 when skipped.
run() {
  local name=$1 est=$2 limit=$3 left rc t0=$SECONDS
  shift 3
  left=$((deadline - SECONDS - 5))  # 5 s for the kill after the term
  if ((left < est)); then
    note "$name: skipped (${est}s needed, $((left > 0 ? left : 0))s left)"
    return 125
  fi
  ((limit <= left)) || limit=$left
  echo "--- $name: $*" >>"$log"
  timeout -k 5 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  case $rc in
    0) note "$name: passed ($((SECONDS - t0))s)" ;;
    124 | 137) note "$name: timed out after ${limit}s" ;;
    *) note "$name: failed (exit $rc, $((SECONDS - t0))s)" ;;
  esac
  pack
  return $rc
}
# summarise NAME SCRIPT ARGS...: a section's summary JSON from its runs' files (python).
summarise() {
  local name=$1
  shift
  timeout -k 2 20 python3 "$@" >>"$log" 2>&1 || note "$name summary: failed (exit $?)"
  pack
}
train=("$kit/burstpool" train)
# A synthetic-data job of MODEL at BATCH on the GPU, from the LeNet-5 job.
synthetic=(jobs/fashion_mnist_lenet.ini --set data.source=synthetic --set data.synthetic_train_samples=512
           --set data.synthetic_test_samples=0 --set job.device=cuda --set train.batch_size=32)
model() { echo "--set job.model=$PWD/jobs/models/$1.ini"; }

check_setup() {
  section "setup"
  tar -C /tmp/gpu-check/kit -xJf "$kit"/lib.tar.xz
  # Packed libraries first, then the CUDA libraries of the machine's toolkit or Python packages.
  local cuda_libs= d py_libs lib found
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [[ -d $d ]] && cuda_libs+=":$d"; done
  py_libs=$(python3 -c "import glob, os, nvidia; print(':'.join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + '/*/lib/*.so*')})))" 2>/dev/null)
  export LD_LIBRARY_PATH="/tmp/gpu-check/kit/lib:${py_libs}${cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for lib in $(ldd "$kit"/burstpool_cuda_tests "$kit"/burstpool | awk '/not found/ {print $1}' | sort -u); do
    found=$(find /usr /opt -name "$lib" -print -quit 2>/dev/null)
    [[ -n $found ]] && LD_LIBRARY_PATH+=":$(dirname "$found")"
  done
  ldd "$kit"/burstpool_cuda_tests "$kit"/burstpool | grep -E "not found|cud|nccl|cublas" >>"$log"
  nvidia-smi >>"$log" 2>&1
  # Open MPI, added to / without replacing any file there (paths under /usr and /etc).
  tar -C / --skip-old-files --keep-directory-symlink -xJf "$kit"/mpi-root.tar.xz 2>>"$log"
  ldconfig
  ln -sf /usr/bin/orterun /tmp/gpu-check/kit/bin/mpirun
  cp "$kit"/h5diff /tmp/gpu-check/kit/bin/
  # Shared memory between the ranks without cross-memory attach (containers often forbid it).
  export PATH=/tmp/gpu-check/kit/bin:$PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none \
    OMPI_MCA_mca_base_component_show_load_errors=0
  run "setup: mpirun -np 2 hostname" 3 20 mpirun -np 2 hostname
  run "setup: burstpool --version" 2 20 "$kit"/burstpool --version
}

check_tests() {
  section "CUDA tests"
  run "tests: burstpool_cuda_tests" 20 90 "$kit"/burstpool_cuda_tests --gtest_output=json:"$work/cuda_tests.json"
}

check_e2e() {
  section "e2e: the GPU against the CPU"
  run "e2e cuda_device" 60 150 bash tests/e2e/cuda_device.sh "$kit"/burstpool .
  grep -E "largest weight difference|multiplexing:" "$log" | tail -30
}

check_steps() {
  section "training steps at batch 32: LeNet-5 eager, per_layer, CUDA graphs (2 rounds); vgg16 eager, per_layer"
  local m round variant steps est graphs calls
  for round in 1 2; do
    for m in lenet5 vgg16; do
      [[ $m == vgg16 && $round == 2 ]] && continue
      for variant in eager per_layer graphs; do
        [[ $m == vgg16 && $variant == graphs ]] && continue
        steps=1000 est=4 graphs=true calls=whole_model
        [[ $m == vgg16 ]] && steps=40 est=11
        [[ $variant == eager || $variant == per_layer ]] && graphs=false
        [[ $variant == per_layer ]] && calls=per_layer
        run "steps $m $variant round $round" $est 40 "${train[@]}" "${synthetic[@]}" $(model $m) \
          --set job.cuda_graphs=$graphs --set job.device_calls=$calls --steps $steps \
          --metrics "$work/steps_${m}_${variant}_$round.json"
      done
    done
  done
  summarise steps - "$work" "$work/training_steps.json" <<'PY'
import glob, json, re, statistics, sys
folder, out = sys.argv[1], sys.argv[2]
runs = {}
for path in sorted(glob.glob(f"{folder}/steps_*_[0-9].json")):
    runs.setdefault(re.match(r".*/steps_(.+)_\d\.json", path).group(1), []).append(json.load(open(path)))
summary = {key: {"runs": len(ms),
                 "median_ms_per_step": statistics.median(1e3 * m["train_seconds"] / m["steps"] for m in ms),
                 "median_samples_per_second": statistics.median(m["samples_per_second"] for m in ms)}
           for key, ms in runs.items()}
json.dump(summary, open(out, "w"), indent=1)
for k, v in summary.items():
    print(k, v)
PY
}

# mux1_job FILE MODEL BATCH: a foreground job on the GPU with the small-VGG
# background (least-priority stream), data parallel on one rank.
mux1_job() {
  local mux=/tmp/gpu-check/mux
  sed -e "s|^model = ../models/|model = $PWD/jobs/models/|" -e 's/^\[job\]$/[job]\ndevice = cuda/' \
    jobs/multiplex/background_vgg_small.ini >"$mux/bg1.ini"
  sed -e "s|^model = ../models/vgg_small.ini|model = $PWD/jobs/models/$2.ini|" -e 's/^\[job\]$/[job]\ndevice = cuda/' \
    -e "s|^batch_size = 32|batch_size = $3|" -e "s|^job = background_vgg_small.ini|job = $mux/bg1.ini|" \
    -e "s|^synthetic_train_samples = 4096|synthetic_train_samples = 512|" \
    -e '/^\[parallel\]$/d' -e '/^plan = /d' jobs/multiplex/foreground_vgg_small.ini >"$1"
}

# mux1_run NAME BINDING STEPS [--set ...]: one rank, mpirun --bind-to BINDING.
mux1_run() {
  local name=$1 binding=$2 steps=$3
  shift 3
  (unset OMPI_MCA_mpi_yield_when_idle
   run "mux1 $name" 10 40 mpirun --bind-to "$binding" -np 1 "$kit"/burstpool train "$job1" --steps "$steps" \
     --set train.log_every=100 "$@" --metrics "$work/mux1_$name.json")
}

check_mux1() {
  section "multiplexing in one process: a vgg16 foreground at batch 4 to 32 beside a small-VGG background"
  local job1=/tmp/gpu-check/mux/fg1.ini batch
  if [[ ${GPU_CHECK_MUX_CAUSES:-0} == 1 ]]; then
    # One change at a time from the first settings (bound core, SCHED_IDLE, spinning waits), then today's defaults.
    mux1_job "$job1" vgg_small 32
    mux1_run cause_before core 300 --set background.thread_priority=idle --set background.cuda_wait=spin
    mux1_run cause_unbound none 300 --set background.thread_priority=idle --set background.cuda_wait=spin
    mux1_run cause_priority core 300 --set background.thread_priority=normal --set background.cuda_wait=spin
    mux1_run cause_blocking core 300 --set background.thread_priority=idle --set background.cuda_wait=block
    mux1_run cause_after none 300
  fi
  for batch in 4 8 16 32; do
    mux1_job "$job1" vgg16 "$batch"
    mux1_run "b${batch}_alone_1" none 60 --set background.job=none
    mux1_run "b${batch}_shared_1" none 60
  done
  mkdir -p /tmp/gpu-check/mux1
  for f in "$work"/mux1_*.json; do [[ -e $f ]] && cp "$f" "/tmp/gpu-check/mux1/${f##*/mux1_}"; done
  summarise mux1 perf/mux1_summary.py /tmp/gpu-check/mux1 "$work/mux1.json"
}

check_precision() {
  section "vgg16 steps at batch 32 by precision: burstpool fp32, tf32, bf16; PyTorch fp32, tf32, defaults, bf16"
  local precision
  for precision in fp32 tf32 bf16; do
    run "precision vgg16 $precision" 12 45 "${train[@]}" "${synthetic[@]}" $(model vgg16) --set job.cuda_graphs=true \
      --set job.cudnn_algorithms=measured --set job.precision=$precision --steps 40 \
      --metrics "$work/prec_vgg16_32_${precision}_1.json"
  done
  if python3 -c "import torch" 2>/dev/null; then
    run "precision PyTorch vgg16" 25 60 sh -c "python3 perf/torch_gpu_peer.py jobs/models/vgg16.ini --batch 32 --step \
      --repeats 10 >'$work/prec_torch_vgg16_32_1.json'"
  else
    note "precision PyTorch vgg16: skipped (no PyTorch on this machine)"
  fi
  summarise precision - "$work" "$work/precision.json" <<'PY'
import glob, json, re, statistics, sys
folder, out = sys.argv[1], sys.argv[2]
runs = {}
for path in glob.glob(f"{folder}/prec_*.json"):
    try:
        m = json.load(open(path))
    except ValueError:
        continue
    t = re.match(r".*/prec_torch_(\w+?)_(\d+)_\d\.json", path)
    if t:
        for key, value in m.items():
            if key.endswith("_train_step_ms") or key.endswith("_peak_mib"):
                runs.setdefault(f"{t.group(1)} {t.group(2)} torch {key}", []).append(value)
        continue
    b = re.match(r".*/prec_(\w+?)_(\d+)_(fp32|tf32|bf16)_\d\.json", path)
    if b and m.get("steps"):
        runs.setdefault(f"{b.group(1)} {b.group(2)} burstpool {b.group(3)}_train_step_ms", []).append(
            1e3 * m["train_seconds"] / m["steps"])
summary = {k: {"median": statistics.median(v), "runs": v} for k, v in sorted(runs.items())}
json.dump(summary, open(out, "w"), indent=1)
for k, v in summary.items():
    print(k, round(v["median"], 3))
PY
}

check_learners() {
  section "learners on the GPU: sma auto-tuned up to 4, z on the device against sent up; shadow with 2"
  # sma_average = device keeps z on each learner's GPU (only c_j down and the
  # summed Delta up per iteration), host sends z up before every step.
  local where
  for where in device host; do
    run "learners sma z on the $where" 12 40 "${train[@]}" "${synthetic[@]}" $(model vgg_small) \
      --set data.synthetic_train_samples=4096 --set train.learner_batch_size=32 --steps 150 --set train.log_every=50 \
      --set sync.strategy=sma --set sync.learners=0 --set sync.max_learners=4 --set sync.autotune_steps=10 \
      --set optimizer.nesterov=false --set sync.sma_average=$where --metrics "$work/learners_${where}_32.json"
  done
  run "learners shadow 2" 10 40 "${train[@]}" "${synthetic[@]}" $(model vgg_small) --set data.synthetic_train_samples=4096 \
    --set train.learner_batch_size=32 --steps 150 --set train.log_every=50 --set sync.strategy=shadow \
    --set sync.learners=2 --set optimizer.nesterov=false --metrics "$work/learners_shadow2_32.json"
  summarise learners - "$work" "$work/learners_cuda.json" <<'PY'
import glob, json, re, sys
folder, out = sys.argv[1], sys.argv[2]
summary = {}
for path in sorted(glob.glob(f"{folder}/learners_*_*.json")):
    where, batch = re.match(r".*/learners_(device|host|shadow\d)_(\d+)\.json", path).groups()
    m = json.load(open(path))
    summary[f"{where} batch {batch}"] = {"trials": m.get("learner_tuning"), "chosen_learners": m["learners_per_rank"],
                                         "samples_per_second": m["samples_per_second"],
                                         "shadow_rounds": m.get("shadow_rounds")}
json.dump(summary, open(out, "w"), indent=1)
for k, v in summary.items():
    print(k, v)
PY
}

check_cudnn_cache() {
  section "cudnn_cache: vgg16 at batch 32, measured algorithms written once and reused, against the heuristic default"
  # Run 1 measures and writes the cache; runs 2 and 3 must say they reuse it
  # and give run 1's final loss to the bit (the same algorithms and math
  # types, deterministic ones); h1 is the heuristic default it would replace.
  local r how
  for r in 1 2 3 h1; do
    how=measured
    local cache=(--set job.cudnn_cache=$work/vgg16.cudnn.json)
    [[ $r == h1 ]] && how=heuristic cache=()
    run "cudnn_cache run $r ($how)" 12 40 "${train[@]}" "${synthetic[@]}" $(model vgg16) --set job.cuda_graphs=true \
      --set job.cudnn_algorithms=$how "${cache[@]}" --steps 40 --metrics "$work/cache_$r.json"
  done
  grep "cudnn cache" "$log" | tail -3
  summarise cudnn_cache - "$work" "$work/cudnn_cache.json" <<'PY'
import json, sys
folder, out = sys.argv[1], sys.argv[2]
runs = {}
for run in ["1", "2", "3", "h1"]:
    try:
        m = json.load(open(f"{folder}/cache_{run}.json"))
        runs[run] = {"final_loss": m["final_loss"], "ms_per_step": 1e3 * m["train_seconds"] / m["steps"]}
    except (OSError, ValueError, KeyError):
        pass
measured = [runs[r]["final_loss"] for r in ("1", "2", "3") if r in runs]
summary = {"runs": runs, "measured_runs_equal_bitwise": len(measured) == 3 and len(set(measured)) == 1}
json.dump(summary, open(out, "w"), indent=1)
print(json.dumps(summary))
PY
}

check_layers() {
  section "per-layer benchmark at batch 32: LeNet-5's algorithms; vgg16 per cuDNN algorithm choice; PyTorch"
  local how suffix
  run "layers lenet5" 5 30 "$kit"/bp_gpu_layers jobs/models/lenet5.ini --batch 32 --repeats 3
  for how in heuristic measured gemm; do
    suffix=_$how
    [[ $how == heuristic ]] && suffix=
    run "layers vgg16 $how" 12 60 "$kit"/bp_gpu_layers jobs/models/vgg16.ini --batch 32 --repeats 20 \
      --algorithms $how --out "$work/vgg16_layers$suffix.json"
  done
  if python3 -c "import torch" 2>/dev/null; then
    run "layers PyTorch vgg16" 20 90 sh -c "python3 perf/torch_gpu_peer.py jobs/models/vgg16.ini --batch 32 \
      >'$work/torch_vgg16.json'"
  fi
}

check_multiplex() {
  section "multiplexing on one GPU: 2 ranks sharing it, and one rank"
  # Small-VGG foreground (batch 32) with the "alternate" burst plan and data
  # parallel on 2 ranks, and data parallel on one rank, each alone and with a
  # small-VGG background on the GPU's least-priority stream.
  local mux=/tmp/gpu-check/mux plan r ranks extra
  sed -e "s|^model = ../models/|model = $PWD/jobs/models/|" -e 's/^\[job\]$/[job]\ndevice = cuda/' \
    jobs/multiplex/background_vgg_small.ini >"$mux/bg.ini"
  for plan in alternate data_parallel one_rank; do
    sed -e "s|^model = ../models/|model = $PWD/jobs/models/|" \
      -e "s|^plan = .*|plan = $PWD/jobs/multiplex/vgg_small_alternate_2ranks.json|" \
      -e "s|^job = background_vgg_small.ini|job = $mux/bg.ini|" jobs/multiplex/foreground_vgg_small.ini >"$mux/fg_$plan.ini"
    [[ $plan != alternate ]] && sed -i -e '/^\[parallel\]$/d' -e '/^plan = /d' "$mux/fg_$plan.ini"
    ranks=2
    [[ $plan == one_rank ]] && ranks=1
    for r in alone shared; do
      extra=()
      [[ $r == alone ]] && extra=(--set background.job=none)
      (unset OMPI_MCA_mpi_yield_when_idle
       run "multiplex $plan $r" 10 60 mpirun -np $ranks "$kit"/burstpool train "$mux/fg_$plan.ini" \
         --set job.device=cuda --set train.steps=500 --set train.log_every=250 "${extra[@]}" \
         --metrics "$work/multiplex_${plan}_$r.json")
    done
  done
}

check_profile() {
  section "layer profile of vgg16 on the GPU, and the plan it gives for 8 GPUs"
  # The plan's link figures are an assumption (NVLink-class: 100 GB/s, 5 us), not measured.
  run "profile vgg16" 20 60 "$kit"/burstpool profile jobs/models/vgg16.ini --device cuda --batches 4,8,32 \
    --out "$work/vgg16_profile_cuda.json" &&
    run "plan vgg16 for 8 GPUs" 5 30 "$kit"/burstpool plan jobs/models/vgg16.ini \
      --profile "$work/vgg16_profile_cuda.json" --ranks 8 --global-batch 64 --amp-limit 2 --bandwidth 100 \
      --latency 5 --out "$work/vgg16_plan_8.json"
}

echo "perf/gpu_check.sh: sections $sections; deadline ${budget}s" | tee -a "$log"
for name in $sections; do
  [[ -n ${estimate[$name]:-} ]] || { note "unknown section '$name'"; continue; }
  "check_$name"
done
note "done at ${SECONDS}s"
pack
