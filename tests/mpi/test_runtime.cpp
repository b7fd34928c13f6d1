// What init_mpi sets up for the whole process, checked as the ranks run.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

#include "burstpool/runtime.hpp"

namespace {

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Allocates `bytes`, writes every page and frees them; returns the page
// faults that took.
long faults_of_a_block(size_t bytes) {
  const long before = minor_faults();
  char* block = static_cast<char*>(std::malloc(bytes));
  std::memset(block, 1, bytes);
  asm volatile("" : : "r"(block) : "memory");  // the writes happen
  std::free(block);
  return minor_faults() - before;
}

// init_mpi keeps freed memory in the heap: a block the size of a large
// gradient sum's scratch buffer (MPI's allreduce mallocs one per sum), freed
// and taken again, does not fault its pages in again (glibc's defaults map
// it afresh each time: 64 MiB = 16384 pages of 4 KiB, all faulting).
TEST(Runtime, FreedMemoryStaysInTheHeapForTheNextSum) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the address sanitizer's allocator ignores mallopt";
#endif
  if (burstpool::malloc_left_alone()) GTEST_SKIP() << "the environment sets malloc or asks for glibc's defaults";
  constexpr size_t kBytes = 64u << 20;
  faults_of_a_block(kBytes);  // the heap grows to it once
  EXPECT_LT(faults_of_a_block(kBytes), 1000) << "the second block's pages were faulted in again";
}

}  // namespace
