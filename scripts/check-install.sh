#!/usr/bin/env bash
# A cluster-style build: configured without tests (-DBURSTPOOL_TESTS=OFF),
# installed with `cmake --install` into a temporary prefix, and the installed
# binary run: --version, then a 20-step job from the installed job files.
# CI runs it; it leaves nothing behind but ./build-install.
# Usage: scripts/check-install.sh
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake -S . -B build-install -DCMAKE_BUILD_TYPE=Release -DBURSTPOOL_TESTS=OFF -DBURSTPOOL_CUDA=OFF -DBURSTPOOL_PERF=OFF
cmake --build build-install -j "$(nproc)"
cmake --install build-install --prefix "$prefix"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$prefix/bin/burstpool" --version | tee "$prefix/version.txt"
grep -q "^burstpool [0-9.]* (commit " "$prefix/version.txt" || { echo "check-install: --version says no version" >&2; exit 1; }
for f in jobs/fashion_mnist_mlp.ini jobs/models/mlp.ini slurm/train.sbatch docs/jobs.md scripts/run-main.sh README.md; do
  [[ -e $prefix/share/burstpool/$f ]] || { echo "check-install: $f was not installed" >&2; exit 1; }
done
(cd "$prefix" && bin/burstpool train share/burstpool/jobs/fashion_mnist_mlp.ini --steps 20 --metrics m.json)
python3 -c "import json,sys; m=json.load(open('$prefix/m.json')); sys.exit(0 if m['steps']==20 else 1)" ||
  { echo "check-install: the installed binary did not train 20 steps" >&2; exit 1; }
echo "check-install: the installed burstpool reports its version and trains"
