#include "communicator.hpp"

#include <algorithm>
#include <set>

#include "burstpool/error.hpp"

namespace burstpool {

Communicator::Communicator(MPI_Comm comm, RankSet ranks) : comm_(comm), ranks_(std::move(ranks)) {}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

void Communicator::sum(double* values, size_t count) const {
  if (size() > 1) BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(count), MPI_DOUBLE, MPI_SUM, comm_));
}

void Communicator::sum(float* values, size_t count) const {
  if (size() > 1) BP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_));
}

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

const Communicator& GroupCache::group(const RankSet& ranks) const {
  auto it = groups_.find(ranks);
  BP_CHECK(it != groups_.end(), "no communicator was made for this rank set");
  return *it->second;
}

}  // namespace burstpool
