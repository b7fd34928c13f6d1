#!/usr/bin/env bash
# Bad input ends in exactly one clear error line on stderr that names the file
# and the line, key or dataset, with exit status 1 (not a crash signal).
# Usage: bad_input.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

# expect_error NAME PATTERN ARGS...: runs burstpool ARGS, checks the contract.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  "$bin" "$@" >"$work/out" 2>"$work/err"
  local rc=$? lines
  lines=$(wc -l <"$work/err")
  if [[ $rc -ne 1 || $lines -ne 1 ]] || ! grep -qE -- "$pattern" "$work/err"; then
    echo "FAIL $name: exit $rc, $lines stderr line(s), wanted /$pattern/:"
    sed 's/^/    /' "$work/err"
    failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$work/err")"
  fi
}

# A job around a model file, on a small synthetic set.
job_for() {
  cat >"$work/$1.job.ini" <<JOB
[job]
model = $2
[data]
source = synthetic
synthetic_train_samples = 64
synthetic_test_samples = 0
[train]
batch_size = 8
JOB
  echo "$work/$1.job.ini"
}

model_with() {  # model_with NAME TEXT: writes NAME.ini (input 1x8x8 + given layers)
  printf '[data]\ntype = input\nshape = 1,8,8\n%s' "$2" >"$work/$1.ini"
  echo "$work/$1.ini"
}

tail_layers='
[flat]
type = flatten
inputs = conv
[fc]
type = linear
inputs = flat
out_features = 3
[loss]
type = softmax_cross_entropy
inputs = fc
'

m=$(model_with unknown_key "
[conv]
type = conv2d
inputs = data
out_channels = 2
kernel = 3
strides = 2
$tail_layers")
expect_error "unknown key" "unknown_key\.ini:10: layer 'conv' \(conv2d\), key 'strides': unknown key" \
  train "$(job_for unknown_key "$m")" --steps 1

m=$(model_with missing_value "
[conv]
type = conv2d
inputs = data
out_channels =
kernel = 3
$tail_layers")
expect_error "missing value" "missing_value\.ini:8: \[conv\] key 'out_channels' has no value" \
  train "$(job_for missing_value "$m")" --steps 1

m=$(model_with bad_type "
[conv]
type = convolution
inputs = data
$tail_layers")
expect_error "bad layer type" "bad_type\.ini:6: layer 'conv' has unknown type 'convolution'" \
  train "$(job_for bad_type "$m")" --steps 1

m=$(model_with unknown_input "
[conv]
type = conv2d
inputs = dat
out_channels = 2
kernel = 3
$tail_layers")
expect_error "unknown input name" "unknown_input\.ini:7: layer 'conv' has unknown input 'dat'" \
  train "$(job_for unknown_input "$m")" --steps 1

m=$(model_with shape_mismatch "
[conv]
type = conv2d
inputs = data
out_channels = 2
kernel = 3
[conv_b]
type = conv2d
inputs = data
out_channels = 2
kernel = 5
[sum]
type = add
inputs = conv, conv_b
[flat]
type = flatten
inputs = sum
[fc]
type = linear
inputs = flat
out_features = 3
[loss]
type = softmax_cross_entropy
inputs = fc
")
expect_error "shape mismatch" "shape_mismatch\.ini:15: layer 'sum' \(add\): all inputs must have the same shape" \
  train "$(job_for shape_mismatch "$m")" --steps 1

printf '[job]\nmodel = %s\n[train]\nbatch_sise = 8\n' "$src/jobs/models/mlp.ini" >"$work/job_key.ini"
expect_error "unknown job key" "job_key\.ini:4: \[train\] unknown key 'batch_sise'" train "$work/job_key.ini"

expect_error "bad --set" "--set train\.steps=many: \[train\] steps: 'many' is not an integer" \
  train "$src/jobs/fashion_mnist_mlp.ini" --set train.steps=many
expect_error "CUDA graphs on the CPU" "\[job\] cuda_graphs: needs device = cuda" \
  train "$src/jobs/fashion_mnist_mlp.ini" --set job.cuda_graphs=true
expect_error "measured cuDNN algorithms on the CPU" "\[job\] cudnn_algorithms: measured needs device = cuda" \
  train "$src/jobs/fashion_mnist_mlp.ini" --set job.cudnn_algorithms=measured
expect_error "unknown cuDNN algorithm choice" "\[job\] cudnn_algorithms: 'fastest'" \
  train "$src/jobs/fashion_mnist_mlp.ini" --set job.device=cuda --set job.cudnn_algorithms=fastest

expect_error "missing job file" "nowhere\.ini: cannot open INI file" train "$work/nowhere.ini"

# Missing data: a Fashion-MNIST folder without the files.
mkdir -p "$work/empty"
expect_error "missing data file" "$work/empty/train-images-idx3-ubyte: cannot open data file" \
  train "$src/jobs/fashion_mnist_mlp.ini" --set data.dir="$work/empty" --steps 1

# Truncated data: real Fashion-MNIST header, data cut short.
mkdir -p "$work/cut"
python3 - "$work/cut" <<'PY'
import gzip, struct, sys
d = sys.argv[1]
with gzip.open(f"{d}/train-images-idx3-ubyte.gz", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, 100, 28, 28) + bytes(28 * 28 * 10))  # 10 of 100 images
with gzip.open(f"{d}/train-labels-idx1-ubyte.gz", "wb") as f:
    f.write(struct.pack(">II", 0x801, 100) + bytes(100))
PY
expect_error "truncated data file" "train-images-idx3-ubyte\.gz: truncated IDX data" \
  train "$src/jobs/fashion_mnist_mlp.ini" --set data.dir="$work/cut" --steps 1

# HDF5 dataset with a wrong dataset name.
"$bin" convert "$src/jobs/models/mlp.ini" "$work/mlp.h5" >/dev/null
cat >"$work/h5job.ini" <<JOB
[job]
model = $src/jobs/models/mlp.ini
[data]
source = hdf5
train_file = $work/mlp.h5
images_dataset = pixels
JOB
expect_error "missing HDF5 dataset" "mlp\.h5: dataset 'pixels' is missing" train "$work/h5job.ini" --steps 1

# Truncated HDF5 model file (with weights, cut in half).
"$bin" convert "$src/jobs/models/lenet5.ini" "$work/full.h5" --init-weights >/dev/null
head -c $(($(stat -c %s "$work/full.h5") / 2)) "$work/full.h5" >"$work/cut.h5"
expect_error "truncated HDF5 model" "cut\.h5: " train "$(job_for cut "$work/cut.h5")" --steps 1
expect_error "truncated HDF5 convert" "cut\.h5: " convert "$work/cut.h5" "$work/out.ini"

# A plan that does not fit the model is refused before training.
"$bin" plan --data-parallel "$src/jobs/models/mlp.ini" --ranks 1 --global-batch 64 --out "$work/plan.json" >/dev/null
sed -i 's/"fc2"/"fc9"/' "$work/plan.json"
expect_error "plan with an unknown layer" "plan\.json: layer 'fc9' is not in model 'mlp'" \
  train "$src/jobs/fashion_mnist_mlp.ini" --plan "$work/plan.json" --steps 1
expect_error "plan ranks below 1" "--ranks 0 must be >= 1" \
  plan --data-parallel "$src/jobs/models/mlp.ini" --ranks 0 --global-batch 64 --out "$work/p0.json"

# Planner inputs: a profile of another model, N < 1, B < 1, A < 1, a bad network file.
"$bin" profile "$src/jobs/models/mlp.ini" --batches 1,2 --warmup 0 --repeats 1 --out "$work/mlp.prof.json" >/dev/null
expect_error "profile of another model" "mlp\.prof\.json: this profile belongs to model 'mlp'" \
  plan "$src/jobs/models/lenet5.ini" --profile "$work/mlp.prof.json" --bandwidth 10 --latency 5 --ranks 2 --global-batch 8
expect_error "planner N < 1" "--ranks 0 must be >= 1" \
  plan "$src/jobs/models/mlp.ini" --profile "$work/mlp.prof.json" --bandwidth 10 --latency 5 --ranks 0 --global-batch 8
expect_error "planner B < 1" "--global-batch 0 must be >= 1" \
  plan "$src/jobs/models/mlp.ini" --profile "$work/mlp.prof.json" --bandwidth 10 --latency 5 --ranks 2 --global-batch 0
expect_error "amplification limit < 1" "--amp-limit 0.5 must be >= 1" \
  plan "$src/jobs/models/mlp.ini" --profile "$work/mlp.prof.json" --bandwidth 10 --latency 5 --ranks 2 --global-batch 8 \
  --amp-limit 0.5
expect_error "infinite bandwidth" "plan: --bandwidth and --latency must be finite numbers" \
  plan "$src/jobs/models/mlp.ini" --profile "$work/mlp.prof.json" --bandwidth inf --latency 5 --ranks 2 --global-batch 8
expect_error "empty batch in a list" "--batches: '' is not a positive integer" \
  profile "$src/jobs/models/mlp.ini" --batches 1,,2 --out "$work/never.json"

# A list value with a comma too many, a NUL byte in a value, and weights asked
# of a format that cannot hold them: refused, not read as something else.
m=$(model_with trailing_kernel "
[conv]
type = conv2d
inputs = data
out_channels = 2
kernel = 3,
$tail_layers")
expect_error "trailing comma in a pair" "trailing_kernel\.ini:9: layer 'conv' \(conv2d\), key 'kernel': '3,' is not an integer" \
  train "$(job_for trailing_kernel "$m")" --steps 1
printf '[data]\ntype = input\nshape = 1,8,8,\n%s' "$tail_layers" | sed 's/inputs = conv$/inputs = data/' >"$work/trailing_shape.ini"
expect_error "trailing comma in a shape" "trailing_shape\.ini:3: .*key 'shape': '1,8,8,' is not C\[,H\[,W\]\]" \
  train "$(job_for trailing_shape "$work/trailing_shape.ini")" --steps 1
m=$(model_with trailing_inputs "
[conv]
type = conv2d
inputs = data,
out_channels = 2
kernel = 3
$tail_layers")
expect_error "trailing comma in inputs" "trailing_inputs\.ini:7: layer 'conv' has an empty name in 'inputs'" \
  train "$(job_for trailing_inputs "$m")" --steps 1
m=$(model_with nul_value "
[conv]
type = conv2d
inputs = data
out_channels = 2
kernel = 3
$tail_layers")
sed -i 's/^out_channels = 2$/out_channels = 2\x00junk/' "$m"
expect_error "NUL byte in a value" "nul_value\.ini:8: the line holds a NUL byte" train "$(job_for nul_value "$m")" --steps 1
expect_error "weights into INI" "convert: --init-weights needs an HDF5 output \(\.h5\)" \
  convert "$src/jobs/models/mlp.ini" "$work/weights.ini" --init-weights
expect_error "negative seed" "convert: --seed -1 is negative" \
  convert "$src/jobs/models/mlp.ini" "$work/weights.h5" --init-weights --seed -1

echo '{"p2p": {"latency_s": -1e-6, "bandwidth_bytes_per_s": 1e9}, "allreduce": {"latency_s": 1e-6}}' >"$work/net.json"
expect_error "network file with a negative number" "net\.json: p2p\.latency_s = -1e-06 is negative" \
  plan "$src/jobs/models/mlp.ini" --profile "$work/mlp.prof.json" --network "$work/net.json" --ranks 2 --global-batch 8
echo '{"p2p": {"latency_s": 1e-6, "bandwidth_bytes_per_s": 1e9}, "allreduce": {"latency_s": 1e-6}}' >"$work/net.json"
expect_error "network file with a missing number" "net\.json: missing number allreduce\.bandwidth_bytes_per_s" \
  plan "$src/jobs/models/mlp.ini" --profile "$work/mlp.prof.json" --network "$work/net.json" --ranks 2 --global-batch 8

# Numbers outside their documented ranges, and rules across keys (docs/jobs.md).
mlp_job="$src/jobs/fashion_mnist_mlp.ini"
expect_error "lr far too large" "--set optimizer\.lr=1e12: \[optimizer\] lr: 1000000000000 is outside \(0, 100\]" \
  train "$mlp_job" --set optimizer.lr=1e12
expect_error "sma alpha 0" "\[sync\] alpha: 0 is outside \(0, 1\]" \
  train "$mlp_job" --set sync.strategy=sma --set sync.alpha=0
expect_error "shadow pause for ever" "\[sync\] shadow_pause_ms: 1000000000000 is outside \[0, 60000\]" \
  train "$mlp_job" --set sync.strategy=shadow --set sync.shadow_pause_ms=1e12
# Known only once the learners are counted: 2 learners on 1 rank, so N = 2 and alpha must stay under 2/3.
expect_error "shadow elastic alpha that diverges" "\[sync\] shadow_alpha = 0\.7 with 2 models averaged: .* under 2 / \(models \+ 1\) = 0\.667" \
  train "$(job_for elastic "$src/jobs/models/mlp.ini")" --set sync.strategy=shadow --set sync.learners=2 \
  --set train.learner_batch_size=8 --set sync.shadow_rule=elastic --set sync.shadow_alpha=0.7
expect_error "background backoff 10" "\[background\] wait_backoff: 10 is outside \[0, 1\]" \
  train "$mlp_job" --set background.wait_backoff=10
expect_error "min_lr above lr" "\[schedule\] min_lr: 0\.5 is outside \[0, optimizer\.lr\] = \[0, 0\.1\]" \
  train "$mlp_job" --set schedule.type=cosine --set optimizer.lr=0.1 --set schedule.min_lr=0.5
printf '[job]\nmodel = %s\n[data]\nsource = synthetic\nsynthetic_test_samples = 0\n[train]\ntarget_accuracy = 0.9\nstop_at_target = true\n' \
  "$src/jobs/models/mlp.ini" >"$work/no_test.ini"
expect_error "stop at a target without a test set" "no_test\.ini:8: \[train\] stop_at_target: needs a test set" \
  train "$work/no_test.ini"

# Command-line numbers must be positive (the seed may be 0): one line, exit 2 (a usage error).
for flag in "--steps -1" "--epochs 0" "--batch-size -1" "--seed -1"; do
  # shellcheck disable=SC2086
  "$bin" train "$mlp_job" $flag >"$work/out" 2>"$work/err"
  rc=$?
  if [[ $rc -eq 2 && $(wc -l <"$work/err") -eq 1 ]] && grep -q -- "${flag% *}" "$work/err"; then
    echo "ok   train $flag: $(cat "$work/err")"
  else
    echo "FAIL train $flag: exit $rc"; sed 's/^/    /' "$work/err"; failures=$((failures + 1))
  fi
done

# Inputs that are not regular files end in one line, not a spin or a flood of memory.
expect_error "model that is a device" "\[job\] model: /dev/urandom is not a regular file" \
  train "$(job_for urandom /dev/urandom)" --steps 1
ln -s /dev/zero "$work/zero-link.ini"
expect_error "model linked to /dev/zero" "\[job\] model: .*zero-link\.ini is not a regular file" \
  train "$(job_for zero "$work/zero-link.ini")" --steps 1
mkdir -p "$work/zeros"
ln -s /dev/zero "$work/zeros/train-images-idx3-ubyte"
expect_error "IDX file linked to /dev/zero" "train-images-idx3-ubyte: the data file is not a regular file" \
  train "$src/jobs/fashion_mnist_mlp.ini" --set data.dir="$work/zeros" --steps 1
mkdir -p "$work/a_plan_folder"
expect_error "plan that is a folder" "$work/a_plan_folder: the plan file is not a regular file" \
  train "$src/jobs/fashion_mnist_mlp.ini" --plan "$work/a_plan_folder" --steps 1
mkdir -p "$work/a_model_folder"
expect_error "model that is a folder" "\[job\] model: .*a_model_folder is not a regular file" \
  train "$(job_for folder "$work/a_model_folder")" --steps 1

# Runs that cannot fit in memory are refused before anything large is allocated,
# naming the estimate and the largest layers; [job] memory_limit_gb overrides
# what is assumed available.
m=$(printf '[data]\ntype = input\nshape = 3,1024,1024\n[big]\ntype = conv2d\ninputs = data\nout_channels = 64\nkernel = 3\npadding = 1\n[pool]\ntype = maxpool2d\ninputs = big\nkernel = 64\n%s' \
  "${tail_layers//inputs = conv/inputs = pool}" >"$work/huge.ini"; echo "$work/huge.ini")
expect_error "activations beyond the node's memory" \
  "huge\.job\.ini: the run does not fit in memory: the 1 rank\(s\) on .* need about [0-9.]+ GiB together but [0-9.]+ [GMT]iB is available \((MemAvailable in /proc/meminfo|the cgroup's memory limit less its usage)\).*largest layers: big " \
  train "$(job_for huge "$m")" --batch-size 64 --steps 1
expect_error "below memory_limit_gb" \
  "mlp\.ini: the run does not fit in memory: .* but 1 MiB is available \(\[job\] memory_limit_gb = 0\.000976562\).*largest layers: fc1 " \
  train "$mlp_job" --set job.memory_limit_gb=0.0009765625 --steps 1
# More than 2^31 - 1 parameters: refused by the estimate, and, with the estimate
# overridden, by the model before its flat buffers' sizes could wrap.
printf '[data]\ntype = input\nshape = 1,256,256\n[flat]\ntype = flatten\ninputs = data\n[fc]\ntype = linear\ninputs = flat\nout_features = 40000\n[loss]\ntype = softmax_cross_entropy\ninputs = fc\n' >"$work/wide.ini"
expect_error "2.6e9 parameters, estimated" "wide\.job\.ini: the run does not fit in memory: .*parameters 19\.5 GiB.*largest layers: fc 29\.3 GiB" \
  train "$(job_for wide "$work/wide.ini")" --steps 1 --set job.memory_limit_gb=16
expect_error "2.6e9 parameters, estimate overridden" "wide\.ini: the model has 2621480000 parameters and 0 state values; burstpool holds at most 2147483647" \
  train "$(job_for wide "$work/wide.ini")" --steps 1 --set job.memory_limit_gb=100000
"$bin" train "$(job_for fits "$src/jobs/models/mlp.ini")" --steps 1 --set job.memory_limit_gb=1 >"$work/out" 2>&1 ||
  fail "a run that fits under memory_limit_gb = 1: $(cat "$work/out")"

# Outputs are checked before training, not after it.
expect_error "metrics in a missing folder" "\[output\] metrics $work/nowhere/m\.json: the folder $work/nowhere does not exist" \
  train "$mlp_job" --metrics "$work/nowhere/m.json"
expect_error "metrics where the checkpoint goes" "\[output\] checkpoint $work/same\.h5: another output of this run" \
  train "$mlp_job" --checkpoint "$work/same.h5" --metrics "$work/same.h5"
expect_error "cudnn cache in a missing folder" "\[job\] cudnn_cache $work/nowhere/c\.json: the folder $work/nowhere does not exist" \
  train "$mlp_job" --set job.device=cuda --set job.cudnn_algorithms=measured --set job.cudnn_cache="$work/nowhere/c.json"
mkdir -p "$work/a_folder"
expect_error "checkpoint path is a folder" "\[output\] checkpoint $work/a_folder: is a folder" \
  train "$mlp_job" --checkpoint "$work/a_folder"
expect_error "unknown placeholder" "output path '$work/\{jobid\}\.json': unknown placeholder \{jobid\}" \
  train "$mlp_job" --metrics "$work/{jobid}.json"
printf '[job]\nmodel = %s\n[data]\nsource = synthetic\n[sync]\nstrategy = sma\n' "$src/jobs/models/mlp.ini" >"$work/sma_bg.ini"
printf '[job]\nmodel = %s\n[data]\nsource = synthetic\n[train]\nsteps = 50\n[background]\njob = sma_bg.ini\n' \
  "$src/jobs/models/mlp.ini" >"$work/with_sma_bg.ini"
expect_error "background job with a small-batch strategy" "sma_bg\.ini: \[sync\] strategy: a background job trains with ssgd" \
  train "$work/with_sma_bg.ini"

printf '[job]\nmodel = %s\n[data]\nsource = synthetic\nsynthetic_train_samples = 16\nsynthetic_test_samples = 0\n[train]\nbatch_size = 32\n' \
  "$src/jobs/models/mlp.ini" >"$work/big_batch.ini"
expect_error "batch larger than the data set" "big_batch\.ini: \[train\] batch_size: 32 is more than the 16 training samples of synthetic" \
  train "$work/big_batch.ini" --steps 1

# A dead writer's temporary checkpoint is removed at the start; a live one's is not.
tiny=$(job_for tiny "$src/jobs/models/mlp.ini")
touch "$work/c.h5.tmp.999999999" "$work/c.h5.tmp.$$"
"$bin" train "$tiny" --steps 2 --checkpoint "$work/c.h5" >"$work/out" 2>&1 || fail "stale temporaries: exit $?"
[[ ! -e "$work/c.h5.tmp.999999999" && -e "$work/c.h5.tmp.$$" ]] && grep -q "removed $work/c.h5.tmp.999999999" "$work/out" ||
  fail "stale temporaries: $(ls "$work" | grep tmp) / $(cat "$work/out")"

# Metrics that cannot be written at the end (their folder vanished) are kept in the working folder.
mkdir -p "$work/gone" "$work/cwd"
(cd "$work/cwd" && exec "$bin" train "$tiny" --steps 20000 --set train.log_every=50 --set optimizer.lr=0.01 \
  --metrics "$work/gone/m.json" \
  >"$work/late.out" 2>"$work/late.err") &
late=$!
for _ in $(seq 100); do grep -q "^step" "$work/late.out" 2>/dev/null && break; sleep 0.1; done
rm -rf "$work/gone"
wait $late || fail "metrics fallback: exit $?"
[[ -s "$work/cwd/m.json" ]] && grep -q "could not write the metrics to $work/gone/m.json; they are in m.json" "$work/late.err" ||
  fail "metrics fallback: $(cat "$work/late.err")"

# A checkpoint write that runs out of space: one line and exit 1 (it used to
# crash in HDF5's exit handler after the message), and no temporary left.
mkdir -p "$work/full"
if mount -t tmpfs -o size=64k tmpfs "$work/full" 2>/dev/null; then
  expect_error "disk full during a checkpoint" "full/c\.h5\.tmp\.[0-9]+: cannot write dataset" \
    train "$(job_for full "$src/jobs/models/lenet5.ini")" --steps 2 --checkpoint "$work/full/c.h5"
  [[ -z $(ls -A "$work/full") ]] || fail "disk full: left $(ls -A "$work/full")"
  umount "$work/full"
else
  echo "skip disk full during a checkpoint: no small tmpfs can be mounted here (needs root)"
fi

# Under MPI, a failing rank stops every rank with the message, without hanging.
if command -v mpirun >/dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
  start=$(date +%s)
  timeout 60 mpirun -np 2 --oversubscribe "$bin" train "$work/job_key.ini" >"$work/out" 2>"$work/err"
  rc=$?
  if [[ $rc -eq 0 || $rc -eq 124 ]] || ! grep -q "unknown key 'batch_sise'" "$work/err"; then
    echo "FAIL mpirun -np 2 with a bad job: exit $rc after $(($(date +%s) - start)) s"
    sed 's/^/    /' "$work/err"
    failures=$((failures + 1))
  else
    echo "ok   mpirun -np 2 with a bad job: exit $rc after $(($(date +%s) - start)) s"
  fi
  # A background job whose batch cannot be split over the ranks names its file and key.
  printf '[job]\nmodel = %s\n[data]\nsource = synthetic\n[train]\nbatch_size = 1\n' "$src/jobs/models/mlp.ini" >"$work/bg_batch1.ini"
  printf '[job]\nmodel = %s\n[data]\nsource = synthetic\n[train]\nsteps = 50\n[background]\njob = bg_batch1.ini\n' \
    "$src/jobs/models/mlp.ini" >"$work/fg_of_batch1.ini"
  timeout 60 mpirun -np 2 --oversubscribe "$bin" train "$work/fg_of_batch1.ini" >"$work/out" 2>"$work/err"
  rc=$?
  if [[ $rc -eq 1 ]] && grep -q "bg_batch1\.ini: \[train\] batch_size: 1 is below the 2 ranks" "$work/err"; then
    echo "ok   background batch 1 on 2 ranks: $(grep -m1 bg_batch1 "$work/err")"
  else
    echo "FAIL background batch 1 on 2 ranks: exit $rc"; sed 's/^/    /' "$work/err"; failures=$((failures + 1))
  fi
fi

finish bad_input
