#pragma once
// Process-wide set-up: MPI, thread counts, and the one error exit.
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace burstpool {

struct WorldInfo {
  int rank = 0;
  int size = 1;
  int local_rank = 0;   // among the ranks on this node (chooses the GPU on GPU nodes)
  int local_size = 1;
  std::string host;
  std::string job_id;   // SLURM_JOB_ID under Slurm, else "local"
  std::string command_line;  // as launched, for the metrics' record of the run
};

// Collective: every host of the run with the number of its ranks, in rank order of first appearance.
std::vector<std::pair<std::string, int>> world_hosts();

// The cores the calling thread may run on (its affinity mask).
int usable_cores();

// Collective: how many cores this node's ranks may run on together (the
// union of their affinity masks). More ranks (times threads) than that share
// cores: oversubscribed.
int node_cores();

// Expands {job_id}, {job} and {ranks} in an output path, so runs under Slurm
// name their files after the Slurm job.
std::string expand_output_path(const std::string& pattern, const std::string& job_name);

// Whether init_mpi leaves glibc's malloc as it is: the user set it
// (GLIBC_TUNABLES with glibc.malloc.*, or MALLOC_MMAP_MAX_,
// MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_), or asked for its defaults
// (BURSTPOOL_SYSTEM_MALLOC=1). Otherwise init_mpi keeps freed memory in the
// heap for the next gradient sum's scratch buffer (docs/parallel.md).
bool malloc_left_alone();

// MPI_Init_thread asking for MPI_THREAD_MULTIPLE (background jobs and
// synchronisation threads call MPI); fails if less than `required` is given.
WorldInfo init_mpi(int* argc, char*** argv);
void finalize_mpi();
// `fn` runs in finalize_mpi, before MPI_Finalize (helper threads that call MPI stop there).
void before_mpi_finalize(std::function<void()> fn);
const WorldInfo& world();

// Wall seconds on the steady clock since t.
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Sums over every rank of MPI_COMM_WORLD (blocking; every rank calls them).
double sum_over_world(double local);
void sum_over_world(float* values, size_t count);  // in place

// Chooses threads per rank and applies them to OpenMP (BLAS itself stays
// single-threaded and is split across OpenMP threads by the kernels):
// `requested` > 0 wins; else OMP_NUM_THREADS; else 1 when several ranks share
// the node under MPI; else every core. Returns the count used.
int configure_threads(int requested);

// "burstpool: error: <message>\n", with rank and host when there are several
// ranks. Control characters from user input (a byte-flipped file name or
// key) are written as \xNN, so the message stays one line.
std::string error_line(const std::string& message);
// Prints error_line(message) on stderr and ends every rank: MPI_Abort when
// more than one rank runs, exit(status) otherwise.
[[noreturn]] void die(const std::string& message, int status = 1);

}  // namespace burstpool
