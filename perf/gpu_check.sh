#!/usr/bin/env bash
# The GPU checks in one run, for a GPU machine without MPI, in sections run
# most needed first:
#   mux1       one process hosting both jobs: first what held the background
#              back (one bound core, SCHED_IDLE, spinning waits: one
#              measurement each, small-VGG at batch 32), then a vgg16
#              foreground at per-GPU batch 4, 8, 16 and 32 beside a small-VGG
#              background, alone and shared, 2 alternating rounds
#              (GPU_CHECK_MUX_ROUNDS); mux1.json holds each point;
#   precision  whole training steps of vgg16 and resnet20 at batch 32 and 128
#              in fp32, tf32 and bf16 ([job] precision, measured cuDNN algorithms,
#              CUDA graphs) against PyTorch on the same GPU in fp32, tf32, at
#              its defaults (TF32 convolutions) and in bf16 autocast, with
#              peak GPU memory; 2 alternating rounds; precision.json;
#   learners   sma learners auto-tuned on the GPU (up to 4), the average model
#              kept on the device against sent up every step, learner batch
#              16 and 32; then shadow with 1 and 2 learners, replicas on the
#              GPU (samples/s and averaging rounds);
#   tests      the CUDA layers and model against their CPU twins;
#   layers     the per-layer benchmark at batch 32 (LeNet-5's chosen cuDNN
#              algorithms; vgg16 with each [job] cudnn_algorithms choice named
#              in GPU_CHECK_LAYER_ALGORITHMS, default all three) and PyTorch on
#              the same GPU when it is installed there;
#   e2e        tests/e2e/cuda_device.sh with the carried Open MPI (GPU against
#              CPU, 2 ranks against 1 on the GPU, a burst plan, a background job);
#   multiplex  2 ranks sharing the GPU: a small-VGG foreground with a burst
#              plan and data parallel, a small-VGG background on the
#              low-priority stream; and one rank with both jobs (one GPU each);
#   steps      whole training steps of LeNet-5 and vgg16 (GPU_CHECK_STEP_MODELS),
#              eager, eager layer by layer (device_calls = per_layer: the
#              executor's one path), with CUDA graphs, and vgg16 with measured
#              algorithms;
#   profile    the layer profile of vgg16 on the GPU and the plan it gives;
#   cudnn_cache  vgg16 with measured algorithms kept in [job] cudnn_cache:
#              written once, reused by two more runs that must repeat the
#              first's final loss to the bit, against the heuristic default.
# GPU_CHECK_SECTIONS names the sections to run (default: all, in that order).
# Every step has a timeout within one deadline (GPU_CHECK_SECONDS, default
# 470 s from the start), so one hang cannot use up the lease: a part that no
# longer fits is skipped and says so.
# Needs gpu-run/ from scripts/pack-gpu-run.sh, carried to the GPU machine.
# Writes log.txt and the JSON results under OUTDIR (at most 8 files come back).
# Usage: perf/gpu_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: perf/gpu_check.sh OUTDIR}
log=$out/log.txt
mkdir -p "$out" /tmp/gpu-run/bin /tmp/gpu-run/mux
section() { echo "=== $* (at ${SECONDS}s)" | tee -a "$log"; }
deadline=$((SECONDS + ${GPU_CHECK_SECONDS:-470}))
# fits SECONDS WHAT: true when SECONDS more fit before the deadline, else says WHAT is skipped.
fits() {
  (( deadline - SECONDS >= $1 )) && return 0
  echo "skipped: $2 (${1}s needed, $((deadline - SECONDS))s left)" | tee -a "$log"
  return 1
}
# limit SECONDS: SECONDS, or what is left before the deadline if less (at least 1: timeout 0 means none).
limit() {
  local left=$((deadline - SECONDS))
  (( left < $1 )) || left=$1
  (( left >= 1 )) || left=1
  echo "$left"
}
# Without the kit or a GPU there is nothing to check: say so in one line and
# fail, instead of running every section into "command not found".
[[ -f gpu-run/lib.tar.xz && -x gpu-run/burstpool ]] ||
  { echo "perf/gpu_check.sh: gpu-run/ is missing: run scripts/pack-gpu-run.sh first and carry gpu-run" | tee -a "$log"; exit 2; }
nvidia-smi >/dev/null 2>&1 ||
  { echo "perf/gpu_check.sh: no NVIDIA GPU here (nvidia-smi failed): nothing to check" | tee -a "$log"; exit 1; }
tar -C /tmp/gpu-run -xJf gpu-run/lib.tar.xz
# Packed libraries first, then the CUDA libraries of the machine's toolkit or Python packages.
cuda_libs=
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [[ -d $d ]] && cuda_libs+=":$d"; done
py_libs=$(python3 -c "import glob, os, nvidia; print(':'.join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + '/*/lib/*.so*')})))" 2>/dev/null)
export LD_LIBRARY_PATH="/tmp/gpu-run/lib:${py_libs}${cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
section environment
# A library still not found: look for it anywhere under /usr and /opt.
for lib in $(ldd gpu-run/burstpool_cuda_tests gpu-run/burstpool | awk '/not found/ {print $1}' | sort -u); do
  found=$(find /usr /opt -name "$lib" -print -quit 2>/dev/null)
  [[ -n $found ]] && LD_LIBRARY_PATH+=":$(dirname "$found")"
done
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >>"$log"
ldd gpu-run/burstpool_cuda_tests gpu-run/burstpool | grep -E "not found|cud|nccl|cublas" >>"$log"
nvidia-smi >>"$log" 2>&1

check_tests() {
  section "CUDA tests"
  timeout "$(limit 180)" gpu-run/burstpool_cuda_tests --gtest_output=json:"$out/cuda_tests.json" >>"$log" 2>&1
  echo "cuda tests: exit $?" | tee -a "$log"
}

check_layers() {
  section "LeNet-5's cuDNN algorithms at batch 32 and 16 (log only)"
  local batch how rc
  for batch in 32 16; do
    timeout "$(limit 60)" gpu-run/bp_gpu_layers jobs/models/lenet5.ini --batch $batch --repeats 3 2>&1 |
      grep -E "^conv|^step" >>"$log"
  done
  for how in ${GPU_CHECK_LAYER_ALGORITHMS:-heuristic measured gemm}; do
    section "vgg16 layers, batch 32, $how cuDNN algorithms"
    local suffix=_$how
    [[ $how == heuristic ]] && suffix=
    timeout "$(limit 120)" gpu-run/bp_gpu_layers jobs/models/vgg16.ini --batch 32 --repeats 20 --algorithms $how \
      --out "$out/vgg16_layers$suffix.json" >>"$log" 2>&1
    rc=$?
    tail -1 "$log"  # the benchmark's summary line
    echo "layer benchmark ($how): exit $rc" | tee -a "$log"
  done
  if python3 -c "import torch" 2>/dev/null; then
    timeout "$(limit 150)" python3 perf/torch_gpu_peer.py jobs/models/vgg16.ini --batch 32 >"$out/torch_vgg16.json" 2>>"$log"
    cat "$out/torch_vgg16.json"
  else
    echo "no PyTorch on this machine" | tee "$out/torch_vgg16.json"
  fi
}

mpi_ready=
setup_mpi() {
  [[ -n $mpi_ready ]] && return
  mpi_ready=1
  section "Open MPI"
  # Added to / without replacing any file there; the paths are all under /usr and /etc.
  tar -C / --skip-old-files --keep-directory-symlink -xJf gpu-run/mpi-root.tar.xz 2>>"$log"
  ldconfig
  ln -sf /usr/bin/orterun /tmp/gpu-run/bin/mpirun
  cp gpu-run/h5diff /tmp/gpu-run/bin/
  # Shared memory between the ranks without cross-memory attach (containers often forbid it).
  export PATH=/tmp/gpu-run/bin:$PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none \
    OMPI_MCA_mca_base_component_show_load_errors=0
  timeout "$(limit 60)" mpirun -np 2 hostname >>"$log" 2>&1
  echo "mpirun: exit $?" | tee -a "$log"
}

check_e2e() {
  setup_mpi
  section "e2e cuda_device"
  fits 60 "e2e cuda_device" &&
    timeout "$(limit 240)" bash tests/e2e/cuda_device.sh gpu-run/burstpool . >>"$log" 2>&1
  echo "e2e cuda_device: exit $?" | tee -a "$log"
  grep -E "largest weight difference|multiplexing:" "$log" | tail -20
}

# mux1_job FILE MODEL BATCH: a foreground job on the GPU with the small-VGG
# background (least-priority stream), data parallel on one rank.
mux1_job() {
  local mux=/tmp/gpu-run/mux
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
  fits 25 "mux1 $name" || return 1
  (unset OMPI_MCA_mpi_yield_when_idle
   timeout "$(limit 90)" mpirun --bind-to "$binding" -np 1 gpu-run/burstpool train "$job1" --steps "$steps" \
     --set train.log_every=100 "$@" --metrics "/tmp/gpu-run/mux/$name.json") >>"$log" 2>&1
  echo "mux1 $name: exit $?" | tee -a "$log"
}

check_mux1() {
  setup_mpi
  section "multiplexing in one process: what held the background back, then vgg16 at small batches"
  local job1=/tmp/gpu-run/mux/fg1.ini round batch
  mux1_job "$job1" vgg_small 32
  # One change at a time from the settings of the earlier run (bound core,
  # SCHED_IDLE, spinning waits), then all three changed (today's defaults).
  mux1_run cause_before core 400 --set background.thread_priority=idle --set background.cuda_wait=spin
  mux1_run cause_unbound none 400 --set background.thread_priority=idle --set background.cuda_wait=spin
  mux1_run cause_priority core 400 --set background.thread_priority=normal --set background.cuda_wait=spin
  mux1_run cause_blocking core 400 --set background.thread_priority=idle --set background.cuda_wait=block
  mux1_run cause_after none 400
  for round in $(seq "${GPU_CHECK_MUX_ROUNDS:-2}"); do
    for batch in 4 8 16 32; do
      mux1_job "$job1" vgg16 "$batch"
      mux1_run "b${batch}_alone_$round" none 300 --set background.job=none
      mux1_run "b${batch}_shared_$round" none 300
    done
  done
  python3 perf/mux1_summary.py /tmp/gpu-run/mux "$out/mux1.json" 2>&1 | tee -a "$log"
}

check_multiplex() {
  setup_mpi
  section "multiplexing on one GPU: 2 ranks sharing it, and one rank"
  # Small-VGG foreground (batch 32) with the "alternate" burst plan (each layer
  # on one rank, the ranks taking turns) and data parallel on 2 ranks, and data
  # parallel on one rank; each alone and with a data-parallel small-VGG
  # background (batch 64) on the GPU's least-priority stream, as
  # perf/multiplex.py does on CPUs. Two ranks on one GPU are two processes,
  # whose work the GPU time-slices: stream priorities order work only within
  # a process, as on one rank.
  local mux=/tmp/gpu-run/mux plan run ranks extra
  sed -e "s|^model = ../models/|model = $PWD/jobs/models/|" -e 's/^\[job\]$/[job]\ndevice = cuda/' \
    jobs/multiplex/background_vgg_small.ini >"$mux/bg.ini"
  for plan in alternate data_parallel one_rank; do
    sed -e "s|^model = ../models/|model = $PWD/jobs/models/|" \
      -e "s|^plan = .*|plan = $PWD/jobs/multiplex/vgg_small_alternate_2ranks.json|" \
      -e "s|^job = background_vgg_small.ini|job = $mux/bg.ini|" jobs/multiplex/foreground_vgg_small.ini >"$mux/fg_$plan.ini"
    [[ $plan != alternate ]] && sed -i -e '/^\[parallel\]$/d' -e '/^plan = /d' "$mux/fg_$plan.ini"
    ranks=2
    [[ $plan == one_rank ]] && ranks=1
    for run in alone shared; do
      fits 30 "multiplex $plan $run" || continue
      extra=()
      [[ $run == alone ]] && extra=(--set background.job=none)
      (unset OMPI_MCA_mpi_yield_when_idle
       timeout "$(limit 120)" mpirun -np $ranks gpu-run/burstpool train "$mux/fg_$plan.ini" --set job.device=cuda \
         --set train.steps=1000 --set train.log_every=250 "${extra[@]}" --metrics "$mux/${plan}_$run.json") >>"$log" 2>&1
      echo "multiplex $plan $run: exit $?" | tee -a "$log"
    done
  done
  python3 - "$mux" "$out/multiplex.json" <<'PY' 2>&1 | tee -a "$log"
import json, os, sys
mux, out = sys.argv[1], sys.argv[2]
summary = {}
for plan in ("alternate", "data_parallel", "one_rank"):
    paths = [f"{mux}/{plan}_{run}.json" for run in ("alone", "shared")]
    if not all(os.path.exists(p) for p in paths):
        summary[plan] = "a run failed or was skipped: see log.txt"
        continue
    alone, shared = (json.load(open(p)) for p in paths)
    summary[plan] = {
        "foreground_alone_samples_per_second": alone["samples_per_second"],
        "foreground_shared_samples_per_second": shared["foreground_samples_per_second"],
        "slowdown_vs_separate_run": alone["samples_per_second"] / shared["foreground_samples_per_second"],
        "foreground_slowdown": shared["foreground_slowdown"],
        "background_samples_per_second": shared["background_samples_per_second"],
        "cluster_throughput_vs_data_parallel": shared["cluster_throughput_vs_data_parallel"],
        "cluster_throughput_vs_own_plan": shared["cluster_throughput_vs_own_plan"],
        "background": shared["background"],
    }
json.dump(summary, open(out, "w"), indent=1)
for plan, s in summary.items():
    print(plan, s if isinstance(s, str) else {k: v for k, v in s.items() if k != "background"})
PY
}

check_steps() {
  section "training steps on one rank at batch 32: eager, eager layer by layer (device_calls = per_layer), CUDA graphs, vgg16 also with measured algorithms; 3 alternating rounds"
  # Whole training steps of burstpool itself (input upload, forward, backward,
  # SGD), beside the per-layer sums above; LeNet-5 is where launches weigh most.
  local model round variant steps
  for model in ${GPU_CHECK_STEP_MODELS:-lenet5 vgg16}; do
    for round in 1 2 3; do
      local variants=(eager per_layer graphs)
      [[ $model == vgg16 ]] && variants+=(graphs_measured)
      for variant in "${variants[@]}"; do
        fits 20 "$model $variant round $round" || continue
        steps=3000
        [[ $model == vgg16 ]] && steps=100
        local how=heuristic graphs=true calls=whole_model
        [[ $variant == eager || $variant == per_layer ]] && graphs=false
        [[ $variant == per_layer ]] && calls=per_layer
        [[ $variant == graphs_measured ]] && how=measured
        timeout "$(limit 60)" gpu-run/burstpool train jobs/fashion_mnist_lenet.ini --set job.model=$PWD/jobs/models/$model.ini \
          --set data.source=synthetic --set data.synthetic_train_samples=256 --set data.synthetic_test_samples=0 \
          --set job.device=cuda --set job.cuda_graphs=$graphs --set job.device_calls=$calls \
          --set job.cudnn_algorithms=$how --set train.batch_size=32 \
          --steps $steps --metrics /tmp/gpu-run/steps_${model}_${variant}_$round.json >>"$log" 2>&1
        echo "$model $variant round $round: exit $?" | tee -a "$log"
      done
    done
  done
  python3 - "$out/training_steps.json" <<'PY' 2>&1 | tee -a "$log"
import glob, json, os, re, statistics, sys
summary = {}
for path in sorted(glob.glob("/tmp/gpu-run/steps_*_1.json") + glob.glob("/tmp/gpu-run/steps_*_[23].json")):
    key = re.match(r".*/steps_(.+)_\d\.json", path).group(1)
    summary.setdefault(key, []).append(json.load(open(path)))
for key, runs in summary.items():
    summary[key] = {
        "runs": len(runs),
        "median_ms_per_step": statistics.median(1e3 * m["train_seconds"] / m["steps"] for m in runs),
        "median_samples_per_second": statistics.median(m["samples_per_second"] for m in runs)}
json.dump(summary, open(sys.argv[1], "w"), indent=1)
for k, v in summary.items():
    print(k, v)
PY
}

check_precision() {
  section "training steps by precision: burstpool fp32, tf32 and bf16 against PyTorch fp32, tf32, defaults and bf16"
  local model batch round precision steps
  for round in 1 2; do
    for model in vgg16 resnet20; do
      for batch in 32 128; do
        for precision in fp32 tf32 bf16; do
          fits 30 "$model batch $batch $precision round $round" || continue
          steps=60
          [[ $model == resnet20 ]] && steps=300
          timeout "$(limit 90)" gpu-run/burstpool train jobs/fashion_mnist_lenet.ini --set job.model=$PWD/jobs/models/$model.ini \
            --set data.source=synthetic --set data.synthetic_train_samples=512 --set data.synthetic_test_samples=0 \
            --set job.device=cuda --set job.cuda_graphs=true --set job.cudnn_algorithms=measured \
            --set job.precision=$precision --set train.batch_size=$batch --steps $steps \
            --metrics /tmp/gpu-run/prec_${model}_${batch}_${precision}_$round.json >>"$log" 2>&1
          echo "$model batch $batch $precision round $round: exit $?" | tee -a "$log"
        done
        if python3 -c "import torch" 2>/dev/null && fits 40 "PyTorch $model batch $batch round $round"; then
          timeout "$(limit 120)" python3 perf/torch_gpu_peer.py jobs/models/$model.ini --batch $batch --step \
            >/tmp/gpu-run/prec_torch_${model}_${batch}_$round.json 2>>"$log"
          echo "PyTorch $model batch $batch round $round: exit $?" | tee -a "$log"
        fi
      done
    done
  done
  python3 - "$out/precision.json" <<'PY' 2>&1 | tee -a "$log"
import glob, json, re, statistics, sys
runs = {}
for path in glob.glob("/tmp/gpu-run/prec_*.json"):
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
json.dump(summary, open(sys.argv[1], "w"), indent=1)
for k, v in summary.items():
    print(k, round(v["median"], 3))
PY
}

check_learners() {
  section "sma learners on the GPU, auto-tuned up to 4: the average model on the device against sent up each step"
  # The learners of a rank side by side on the GPU, each with its own streams;
  # [sync] sma_average = device keeps z on each learner's GPU (only c_j down
  # and the summed Delta up per iteration), host sends z up before every
  # step (docs/learners.md). The auto-tuner's trials (learners, samples/s)
  # are the figures; small-VGG at learner batch 16 and 32.
  local batch where
  for batch in 16 32; do
    for where in device host; do
      fits 40 "sma learners $where batch $batch" || continue
      timeout "$(limit 90)" gpu-run/burstpool train jobs/fashion_mnist_lenet.ini \
        --set job.model=$PWD/jobs/models/vgg_small.ini --set data.source=synthetic \
        --set data.synthetic_train_samples=4096 --set data.synthetic_test_samples=0 --set job.device=cuda \
        --set train.learner_batch_size=$batch --steps 300 --set train.log_every=100 --set sync.strategy=sma \
        --set sync.learners=0 --set sync.max_learners=4 --set sync.autotune_steps=20 --set optimizer.nesterov=false \
        --set sync.sma_average=$where --metrics "/tmp/gpu-run/learners_${where}_$batch.json" >>"$log" 2>&1
      echo "sma learners $where batch $batch: exit $?" | tee -a "$log"
    done
  done
  # shadow: the replicas stay on the GPU; a round downloads a snapshot and
  # uploads a correction per replica at the end of one of its steps.
  local k
  for batch in 16 32; do
    for k in 1 2; do
      fits 30 "shadow learners $k batch $batch" || continue
      timeout "$(limit 60)" gpu-run/burstpool train jobs/fashion_mnist_lenet.ini \
        --set job.model=$PWD/jobs/models/vgg_small.ini --set data.source=synthetic \
        --set data.synthetic_train_samples=4096 --set data.synthetic_test_samples=0 --set job.device=cuda \
        --set train.learner_batch_size=$batch --steps 300 --set train.log_every=100 --set sync.strategy=shadow \
        --set sync.learners=$k --set optimizer.nesterov=false \
        --metrics "/tmp/gpu-run/learners_shadow${k}_$batch.json" >>"$log" 2>&1
      echo "shadow learners $k batch $batch: exit $?" | tee -a "$log"
    done
  done
  python3 - "$out/learners_cuda.json" <<'PY' 2>&1 | tee -a "$log"
import glob, json, os, re, sys
summary = {}
for path in sorted(glob.glob("/tmp/gpu-run/learners_*_*.json")):
    where, batch = re.match(r".*/learners_(device|host|shadow\d)_(\d+)\.json", path).groups()
    m = json.load(open(path))
    summary[f"{where} batch {batch}"] = {"trials": m.get("learner_tuning"), "chosen_learners": m["learners_per_rank"],
                                         "samples_per_second": m["samples_per_second"],
                                         "shadow_rounds": m.get("shadow_rounds")}
json.dump(summary, open(sys.argv[1], "w"), indent=1)
for k, v in summary.items():
    print(k, v)
PY
}

check_cudnn_cache() {
  section "cudnn_cache: vgg16 at batch 32, measured algorithms written once and reused, against the heuristic default"
  # Run 1 measures and writes the cache; runs 2 and 3 must say they reuse it
  # and give run 1's final loss to the bit (the same algorithms, deterministic
  # ones); the heuristic runs are the default it would replace.
  local run how
  rm -f /tmp/gpu-run/vgg16.cudnn.json
  for run in 1 2 3 h1 h2; do
    fits 30 "cudnn_cache run $run" || continue
    how=measured
    [[ $run == h* ]] && how=heuristic
    local cache=(--set job.cudnn_cache=/tmp/gpu-run/vgg16.cudnn.json)
    [[ $how == heuristic ]] && cache=()
    timeout "$(limit 90)" gpu-run/burstpool train jobs/fashion_mnist_lenet.ini --set job.model=$PWD/jobs/models/vgg16.ini \
      --set data.source=synthetic --set data.synthetic_train_samples=512 --set data.synthetic_test_samples=0 \
      --set job.device=cuda --set job.cuda_graphs=true --set job.cudnn_algorithms=$how "${cache[@]}" \
      --set train.batch_size=32 --steps 60 --metrics /tmp/gpu-run/cache_$run.json >/tmp/gpu-run/cache_$run.out 2>&1
    echo "cudnn_cache run $run ($how): exit $?; $(grep -m1 'cudnn cache' /tmp/gpu-run/cache_$run.out)" | tee -a "$log"
  done
  cp /tmp/gpu-run/vgg16.cudnn.json "$out/" 2>/dev/null
  python3 - "$out/cudnn_cache.json" <<'PY' 2>&1 | tee -a "$log"
import json, sys
runs = {}
for run in ["1", "2", "3", "h1", "h2"]:
    try:
        m = json.load(open(f"/tmp/gpu-run/cache_{run}.json"))
        runs[run] = {"final_loss": m["final_loss"], "ms_per_step": 1e3 * m["train_seconds"] / m["steps"]}
    except (OSError, ValueError, KeyError):
        pass
measured = [runs[r]["final_loss"] for r in ("1", "2", "3") if r in runs]
summary = {"runs": runs, "measured_runs_equal_bitwise": len(measured) == 3 and len(set(measured)) == 1}
json.dump(summary, open(sys.argv[1], "w"), indent=1)
print(json.dumps(summary))
PY
}

check_profile() {
  section "layer profile of vgg16 on the GPU, and the plan it gives for 8 GPUs"
  # What the planner needs on a GPU cluster (docs/profiles.md); the plan's link
  # figures are an assumption (NVLink-class: 100 GB/s, 5 us), not measured.
  fits 30 "profile and plan" || return
  timeout "$(limit 90)" gpu-run/burstpool profile jobs/models/vgg16.ini --device cuda --batches 4,8,32 \
    --out "$out/vgg16_profile_cuda.json" >>"$log" 2>&1
  echo "profile: exit $?" | tee -a "$log"
  timeout "$(limit 60)" gpu-run/burstpool plan jobs/models/vgg16.ini --profile "$out/vgg16_profile_cuda.json" --ranks 8 \
    --global-batch 64 --amp-limit 2 --bandwidth 100 --latency 5 --out /tmp/gpu-run/vgg16_plan_8.json >>"$log" 2>&1
  echo "plan: exit $?" | tee -a "$log"
}

for name in ${GPU_CHECK_SECTIONS:-mux1 precision learners tests layers e2e multiplex steps profile cudnn_cache}; do
  "check_$name"
done
