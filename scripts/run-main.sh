#!/usr/bin/env bash
# README command (1): install what is missing, build, and train the main job
# (LeNet-5 on Fashion-MNIST, 3 epochs) on 2 ranks with a plan made at
# start-up (--plan auto: profiles measured once, cached in burstpool-profiles/),
# printing the plan's summary, its predicted and measured step and the test
# accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
# Open MPI refuses root without the first two; waiting ranks yield their core.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
mpirun -np 2 --oversubscribe ./build/burstpool train jobs/fashion_mnist_lenet.ini --plan auto \
  --metrics fashion_mnist_lenet.metrics.json
