// GoogleTest main for tests run under mpiexec: initialises MPI as the
// burstpool binary does (init_mpi: world() set up for code that trains),
// prints from rank 0 only, and makes every rank agree on the result, so a failure on any
// rank fails the ctest entry.
#include <gtest/gtest.h>
#include <mpi.h>

#include "burstpool/runtime.hpp"

int main(int argc, char** argv) {
  burstpool::init_mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any && rank == 0 && !failed) std::printf("a test failed on another rank\n");
  burstpool::finalize_mpi();
  return any;
}
