#!/usr/bin/env bash
# The GPU checks of issue #7 in one run, for a lent GPU machine: the CUDA
# layers against their CPU twins, the per-layer vgg16 benchmark at batch 32,
# and PyTorch on the same GPU when it is installed there. Needs a build with
# the CUDA backend packed by scripts/pack-gpu-run.sh into gpu-run/ (the two
# binaries and their libraries), carried to the GPU machine. Writes
# everything under OUTDIR.
# Usage: perf/gpu_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: perf/gpu_check.sh OUTDIR}
mkdir -p "$out" /tmp/gpu-run
tar -C /tmp/gpu-run -xJf gpu-run/lib.tar.xz
# Packed libraries first, then the CUDA libraries of the machine's toolkit or Python packages.
cuda_libs=
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [[ -d $d ]] && cuda_libs+=":$d"; done
py_libs=$(python3 -c "import glob, os, nvidia; print(':'.join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + '/*/lib/*.so*')})))" 2>/dev/null)
export LD_LIBRARY_PATH="/tmp/gpu-run/lib:${py_libs}${cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >"$out/env.txt"
ldd gpu-run/burstpool_cuda_tests | grep "not found" >>"$out/env.txt"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
gpu-run/burstpool_cuda_tests --gtest_output=json:"$out/cuda_tests.json" >"$out/cuda_tests.txt" 2>&1
echo "cuda tests: exit $?"
gpu-run/bp_gpu_layers jobs/models/vgg16.ini --batch 32 --repeats 20 --out "$out/vgg16_layers.json" \
  >"$out/vgg16_layers.txt" 2>&1
echo "layer benchmark: exit $?"
tail -1 "$out/vgg16_layers.txt"
if python3 -c "import torch" 2>/dev/null; then
  python3 perf/torch_gpu_peer.py jobs/models/vgg16.ini --batch 32 >"$out/torch_vgg16.json" 2>&1
  cat "$out/torch_vgg16.json"
else
  echo "no PyTorch on this machine" | tee "$out/torch_vgg16.json"
fi
