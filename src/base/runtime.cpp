#include "burstpool/runtime.hpp"

#include <cblas.h>
#include <mpi.h>
#include <malloc.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <thread>

#include "burstpool/error.hpp"
#include "burstpool/spec.hpp"

namespace burstpool {
namespace {
WorldInfo g_world;
bool g_mpi = false;
std::vector<std::function<void()>> g_before_finalize;

// The CPUs the calling thread may run on: its affinity mask, or every
// online CPU where the mask cannot be read.
cpu_set_t affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return set;
  const int online = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int c = 0; c < online && c < CPU_SETSIZE; ++c) CPU_SET(c, &set);
  return set;
}
// Open MPI's non-blocking allreduce mallocs a scratch buffer for every sum
// (over 2 ranks, half the sum) and frees it when the sum ends. glibc serves a
// block past its mmap threshold (at most 32 MiB) by a fresh mmap and gives
// freed memory at the heap's top back to the kernel, so every sum of a large
// bucket faulted its scratch pages in anew, on the computing rank's core: on
// a VM, `profile --network` over shared memory on 2 ranks timed 64 MiB at
// 153 ms against 12 ms with freed memory kept (16 MiB: 3.2 against 2.3), and
// a 25 MiB sum took 0.94 against 0.22 ms of the core per MB. So freed memory
// stays in the heap for the next sum: no mmap for large blocks, no trimming
// (the heap keeps its peak, which the run reaches every step anyway).
void keep_freed_memory() {
  if (malloc_left_alone()) return;
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
}
}  // namespace

bool malloc_left_alone() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, "glibc.malloc.")) return true;
  for (const char* name : {"MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"})
    if (std::getenv(name)) return true;
  const char* system = std::getenv("BURSTPOOL_SYSTEM_MALLOC");
  return system && std::strcmp(system, "0") != 0;
}

WorldInfo init_mpi(int* argc, char*** argv) {
  for (int i = 0; i < *argc; ++i) {
    if (i) g_world.command_line += ' ';
    g_world.command_line += (*argv)[i];
  }
  // Gradient sums are MPI_Iallreduce calls in place. Open MPI's non-blocking
  // collectives (libnbc) pick a reduce-then-broadcast tree for those unless
  // told otherwise, which moves twice a ring's bytes through one rank: on a
  // link shaped to 1 Gbit/s, 16 MiB over 2 ranks took 262 ms against the
  // ring's 140 ms (shared memory: 32 against 14 ms at 64 MiB). Ask for the ring
  // unless the user chose; other MPI libraries ignore the variable.
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
  keep_freed_memory();
  int provided = 0;
  BP_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  g_mpi = true;
  // Errors come back as codes and go through BP_MPI_CHECK instead of aborting silently.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_world.size);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  g_world.host = host;
  // Node-local rank from MPI itself, whatever launched us (mpirun, srun).
  MPI_Comm node;
  BP_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world.rank, MPI_INFO_NULL, &node));
  MPI_Comm_rank(node, &g_world.local_rank);
  MPI_Comm_size(node, &g_world.local_size);
  MPI_Comm_free(&node);
  const char* slurm_job = std::getenv("SLURM_JOB_ID");
  g_world.job_id = slurm_job && *slurm_job ? slurm_job : "local";
  if (provided < MPI_THREAD_FUNNELED)
    die(fmt::format("MPI provides thread level {}, burstpool needs at least MPI_THREAD_FUNNELED ({})", provided,
                    MPI_THREAD_FUNNELED));
  return g_world;
}

std::vector<std::pair<std::string, int>> world_hosts() {
  constexpr int kName = 256;
  std::vector<char> names(static_cast<size_t>(kName) * g_world.size, 0), mine(kName, 0);
  g_world.host.copy(mine.data(), kName - 1);
  if (g_mpi)
    BP_MPI_CHECK(MPI_Allgather(mine.data(), kName, MPI_CHAR, names.data(), kName, MPI_CHAR, MPI_COMM_WORLD));
  else
    names = mine;
  std::vector<std::pair<std::string, int>> hosts;
  for (int r = 0; r < g_world.size; ++r) {
    const std::string name(names.data() + static_cast<size_t>(r) * kName);
    auto it = std::find_if(hosts.begin(), hosts.end(), [&](const auto& h) { return h.first == name; });
    if (it == hosts.end())
      hosts.emplace_back(name, 1);
    else
      ++it->second;
  }
  return hosts;
}

int usable_cores() {
  const cpu_set_t set = affinity();
  return CPU_COUNT(&set);
}

int node_cores() {
  // The affinity mask as words, so that the node's ranks can OR theirs together.
  constexpr int kWords = CPU_SETSIZE / 64;
  std::vector<unsigned long long> cpus(kWords, 0);
  const cpu_set_t set = affinity();
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus[c / 64] |= 1ULL << (c % 64);
  if (g_mpi) {
    MPI_Comm node;
    BP_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world.rank, MPI_INFO_NULL, &node));
    BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, cpus.data(), kWords, MPI_UNSIGNED_LONG_LONG, MPI_BOR, node));
    MPI_Comm_free(&node);
  }
  int count = 0;
  for (unsigned long long word : cpus) count += std::popcount(word);
  return count;
}

void before_mpi_finalize(std::function<void()> fn) { g_before_finalize.push_back(std::move(fn)); }

void finalize_mpi() {
  for (const auto& fn : g_before_finalize) fn();
  g_before_finalize.clear();
  if (g_mpi) MPI_Finalize();
  g_mpi = false;
}

const WorldInfo& world() { return g_world; }

double sum_over_world(double local) {
  double total = 0;
  BP_MPI_CHECK(MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  return total;
}

void sum_over_world(float* values, size_t count) {
  BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
}

std::string expand_output_path(const std::string& pattern, const std::string& job_name) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    auto take = [&](const char* key, const std::string& value) {
      const size_t n = std::strlen(key);
      if (pattern.compare(i, n, key) != 0) return false;
      out += value;
      i += n - 1;
      return true;
    };
    if (take("{job_id}", g_world.job_id) || take("{job}", job_name) || take("{ranks}", std::to_string(g_world.size)))
      continue;
    if (pattern[i] == '{') {
      const size_t end = pattern.find('}', i);
      throw Error(fmt::format("output path '{}': unknown placeholder {} (known: {{job_id}}, {{job}}, {{ranks}})",
                              pattern, pattern.substr(i, end == std::string::npos ? end : end - i + 1)));
    }
    out += pattern[i];
  }
  return out;
}

int configure_threads(int requested) {
  int threads = requested;
  if (threads <= 0) {
    const char* env = std::getenv("OMP_NUM_THREADS");
    int from_env = 0;
    if (env && parse_int(env, from_env) && from_env > 0)
      threads = from_env;
    else if (g_world.size > 1)
      threads = 1;
    else
      threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  omp_set_num_threads(threads);
  openblas_set_num_threads(1);  // kernels thread with OpenMP; see cpu::gemm
  return threads;
}

std::string error_line(const std::string& message) {
  std::string clean;
  for (unsigned char c : message)
    clean += (c < 0x20 || c == 0x7f) ? fmt::format("\\x{:02x}", c) : std::string(1, static_cast<char>(c));
  return g_world.size > 1 ? fmt::format("burstpool: error on rank {} ({}): {}\n", g_world.rank, g_world.host, clean)
                          : fmt::format("burstpool: error: {}\n", clean);
}

void die(const std::string& message, int status) {
  std::fputs(error_line(message).c_str(), stderr);
  std::fflush(stderr);
  if (g_mpi && g_world.size > 1) MPI_Abort(MPI_COMM_WORLD, status);
  finalize_mpi();  // one rank: a clean MPI exit, so Open MPI adds no noise
  std::exit(status);
}

}  // namespace burstpool
