#!/usr/bin/env bash
# Packs what a GPU machine without MPI or HDF5 needs to run the GPU checks:
# the shared libraries the CUDA test and benchmark binaries load (found with
# ldd) go to gpu-run/lib, except the C library and the CUDA libraries, which a
# GPU machine has (the lent machines carry cuBLAS, cuDNN and NCCL in their
# Python packages; perf/gpu_check.sh finds them there).
# Then carry gpu-run to the GPU machine and run: bash perf/gpu_check.sh OUTDIR
# Usage: scripts/pack-gpu-run.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rm -rf gpu-run && mkdir -p gpu-run/lib
for bin in "$build/tests/burstpool_cuda_tests" "$build/bp_gpu_layers"; do
  [[ -x $bin ]] || { echo "missing $bin: build with the CUDA backend first" >&2; exit 1; }
  ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) ;;  # the machine's own
      libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnccl*) ;;        # the GPU machine's own
      *) cp -Ln "$lib" gpu-run/lib/ ;;
    esac
  done
done
# Compressed, so that it and the build fit the 64 MiB a lent machine's call carries.
tar -C gpu-run -cJf gpu-run/lib.tar.xz lib && rm -rf gpu-run/lib
cp "$build/tests/burstpool_cuda_tests" "$build/bp_gpu_layers" gpu-run/
du -sh gpu-run
