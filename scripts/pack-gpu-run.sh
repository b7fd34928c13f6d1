#!/usr/bin/env bash
# Packs what a GPU machine without MPI or HDF5 needs to run the GPU checks
# (perf/gpu_check.sh) into gpu-run/:
# - the CUDA test binary, the layer benchmark, burstpool and h5diff;
# - lib.tar.xz: the shared libraries they load (found with ldd), except the C
#   library and the CUDA libraries, which a GPU machine has (machines without a
#   CUDA install may carry cuBLAS, cuDNN and NCCL in Python packages; gpu_check.sh finds
#   them there);
# - mpi-root.tar.xz: Open MPI's launcher, plugins, help texts and settings
#   (the files of Debian's openmpi-bin, openmpi-common, libopenmpi3, libpmix2,
#   hwloc and libevent packages) and the libraries the plugins load, at their
#   paths under /usr, for gpu_check.sh to add to the machine's / (never
#   replacing a file that is there).
# Then carry gpu-run to the GPU machine and run: bash perf/gpu_check.sh OUTDIR
# Usage: scripts/pack-gpu-run.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bins=("$build/tests/burstpool_cuda_tests" "$build/bp_gpu_layers" "$build/burstpool" "$(command -v h5diff)")
rm -rf gpu-run && mkdir -p gpu-run/lib gpu-run/mpi-root/usr/lib/x86_64-linux-gnu
for bin in "${bins[@]}"; do
  [[ -x $bin ]] || { echo "missing $bin: build with the CUDA backend first (and install hdf5-tools)" >&2; exit 1; }
done
machine_own() {  # libraries every Linux machine, or every GPU machine, has
  case $(basename "$1") in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnccl*) return 0 ;;
  esac
  return 1
}
for bin in "${bins[@]}"; do
  ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do machine_own "$lib" || cp -Ln "$lib" gpu-run/lib/; done
done
# Compressed, so that it and the build fit a 64 MiB upload to a remote GPU machine.
tar -C gpu-run -cJf gpu-run/lib.tar.xz lib && rm -rf gpu-run/lib
cp "${bins[@]}" gpu-run/

packages="openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 libevent-2.1-7 libevent-core-2.1-7
          libevent-pthreads-2.1-7"
dpkg -L $packages | while read -r f; do
  [[ -f $f || -L $f ]] && [[ ! -d $f ]] || continue
  case $f in /usr/share/doc/*|/usr/share/man/*|/usr/share/lintian/*) continue ;; esac
  cp -P --parents "$f" gpu-run/mpi-root/
done
# What the launcher and the plugins load besides the packages' own libraries.
find gpu-run/mpi-root -type f | while read -r f; do
  file -L "$f" | grep -q ELF && ldd "$f" 2>/dev/null | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  machine_own "$lib" || cp -Ln "$lib" gpu-run/mpi-root/usr/lib/x86_64-linux-gnu/ 2>/dev/null || true
done
tar -C gpu-run/mpi-root -cJf gpu-run/mpi-root.tar.xz usr etc && rm -rf gpu-run/mpi-root
du -sh gpu-run
