#!/usr/bin/env bash
# Installs, from Debian 12 packages, whatever burstpool needs and is missing.
# Usage (as root): scripts/install-deps.sh [--perf | --tests]
#   --perf adds PyTorch, the peer of the benchmarks in perf/;
#   --tests adds PyTorch, h5py and Pillow, for the tests of scripts/h5_to_torch.py
#   and scripts/to_hdf5.py.
# libdnnl-dev is oneDNN, the optional CPU convolution backend; Debian builds it
# with OpenCL, so its CMake package needs the OpenCL headers (a recommendation
# that --no-install-recommends would skip).
# slurm-wlm and munge serve the local single-node Slurm of the tests (slurm/local-cluster.sh).
set -euo pipefail
packages=(build-essential cmake pkg-config git python3
  openmpi-bin libopenmpi-dev libhdf5-dev hdf5-tools libopenblas-dev zlib1g-dev
  libinih-dev libcli11-dev nlohmann-json3-dev libfmt-dev libdnnl-dev ocl-icd-opencl-dev googletest libgtest-dev
  dataset-fashion-mnist slurm-wlm munge python3-matplotlib)
case ${1:-} in
  --perf) packages+=(python3-torch) ;;
  --tests) packages+=(python3-torch python3-h5py python3-pil) ;;
  "") ;;
  *) echo "usage: scripts/install-deps.sh [--perf | --tests]" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "all build dependencies present"
fi
