#include "comm/communicator.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>

#include "burstpool/error.hpp"
#include "comm/wait.hpp"

namespace burstpool {

Communicator::Communicator(MPI_Comm comm, RankSet ranks) : comm_(comm), ranks_(std::move(ranks)) {}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

// Non-blocking reduction and a wait under the process's wait policy, so a
// rank waiting here leaves its core to a background job (comm/wait.hpp).
// In place, except where the calling thread's waits can be cancelled (a
// background job's): a cancelled wait leaves the request pending and MPI may
// still write into the buffer later, so such a thread reduces a heap copy that
// is then left allocated instead of the caller's (often short-lived) memory.
void Communicator::sum(void* values, size_t count, MPI_Datatype type) const {
  if (size() <= 1) return;
  std::unique_ptr<char[]> copy;
  void* buffer = values;
  size_t bytes = 0;
  if (waits_cancellable()) {
    int type_size = 0;
    MPI_Type_size(type, &type_size);
    bytes = count * static_cast<size_t>(type_size);
    copy = std::make_unique<char[]>(bytes);
    std::memcpy(copy.get(), values, bytes);
    buffer = copy.get();
  }
  MPI_Request request;
  BP_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer, static_cast<int>(count), type, MPI_SUM, comm_, &request));
  try {
    wait_all(1, &request);
  } catch (const WaitCancelled&) {
    (void)copy.release();
    throw;
  }
  if (copy) std::memcpy(values, copy.get(), bytes);
}

void Communicator::sum(double* values, size_t count) const { sum(values, count, MPI_DOUBLE); }
void Communicator::sum(float* values, size_t count) const { sum(values, count, MPI_FLOAT); }

GroupCache::GroupCache(MPI_Comm world, const std::vector<RankSet>& sets) {
  BP_MPI_CHECK(MPI_Comm_dup(world, &world_));
  MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(world_, &rank_);
  MPI_Comm_size(world_, &size_);
  // Split in one agreed order (sorted, deduplicated); each split is collective over world_.
  std::set<RankSet> distinct(sets.begin(), sets.end());
  for (const RankSet& set : distinct) {
    const bool in = std::find(set.begin(), set.end(), rank_) != set.end();
    MPI_Comm comm = MPI_COMM_NULL;
    BP_MPI_CHECK(MPI_Comm_split(world_, in ? 0 : MPI_UNDEFINED, rank_, &comm));
    if (comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    groups_.emplace(set, std::make_unique<Communicator>(comm, set));
  }
}

GroupCache::~GroupCache() {
  groups_.clear();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (world_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&world_);
}

std::vector<const Communicator*> GroupCache::groups() const {
  std::vector<const Communicator*> all;
  for (const auto& [ranks, group] : groups_) all.push_back(group.get());  // ordered by rank set
  return all;
}

const Communicator& GroupCache::group(const RankSet& ranks) const {
  auto it = groups_.find(ranks);
  BP_CHECK(it != groups_.end(), "no communicator was made for this rank set");
  return *it->second;
}

}  // namespace burstpool
