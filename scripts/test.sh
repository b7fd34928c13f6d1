#!/usr/bin/env bash
# README command (2): install what is missing, build, and run every test
# (unit tests, finite-difference gradient checks, end-to-end CLI tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
scripts/build.sh
# Open MPI refuses root without these; tests run ranks as whoever runs them.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd build
ctest --output-on-failure -j "$(nproc)"
cd ..
# A build without tests, installed into a temporary prefix and run from there.
scripts/check-install.sh
# The same tests, and a fuzzing run, under AddressSanitizer + UBSan.
scripts/sanitize.sh
