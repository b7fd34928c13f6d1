#!/usr/bin/env bash
# README command (1): install what is missing, build, and train the main job
# (LeNet-5 on Fashion-MNIST, 3 epochs) on its defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
./build/burstpool train jobs/fashion_mnist_lenet.ini --metrics fashion_mnist_lenet.metrics.json
