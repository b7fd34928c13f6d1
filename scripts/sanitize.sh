#!/usr/bin/env bash
# Builds the unit and MPI tests with AddressSanitizer + UndefinedBehaviorSanitizer
# in ./build-sanitize (host code only, no CUDA, no benchmarks) and runs them.
# Any memory error, leak or undefined behaviour fails the run.
# Usage: scripts/sanitize.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DBURSTPOOL_SANITIZE=ON -DBURSTPOOL_CUDA=OFF -DBURSTPOOL_PERF=OFF
cmake --build build-sanitize -j "$(nproc)" --target burstpool_unit_tests burstpool_mpi_tests
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
# Leaks inside Open MPI, hwloc and OpenBLAS are theirs, listed in lsan.supp.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export LSAN_OPTIONS="suppressions=$root/tests/sanitize/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd build-sanitize
ctest --output-on-failure -j "$(nproc)" -E '^e2e_' "$@"
