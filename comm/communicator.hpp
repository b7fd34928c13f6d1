#pragma once
// Rank groups. A Communicator owns the MPI communicator of one rank set; a
// GroupCache makes one per distinct rank set of a plan, once, and hands them
// out by rank set. Every job (foreground, background) has its own cache built
// over its own duplicate of the world communicator, so jobs never share tags,
// requests or collective sequences.
#include <mpi.h>

#include <map>
#include <memory>
#include <vector>

#include "burstpool/plan.hpp"

namespace burstpool {

class Communicator {
 public:
  // Takes ownership of `comm` (MPI_COMM_NULL on ranks outside the set).
  Communicator(MPI_Comm comm, RankSet ranks);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  MPI_Comm get() const { return comm_; }
  const RankSet& ranks() const { return ranks_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  bool member() const { return comm_ != MPI_COMM_NULL; }

  // Sums `count` values over the group, in place (blocking).
  void sum(double* values, size_t count) const;
  void sum(float* values, size_t count) const;

 private:
  void sum(void* values, size_t count, MPI_Datatype type) const;
  MPI_Comm comm_;
  RankSet ranks_;
};

class GroupCache {
 public:
  // Collective over `world`: every rank calls it with the same rank sets.
  // `world` is duplicated and the duplicate owned, so the caller's tags and
  // collectives stay apart from this cache's.
  GroupCache(MPI_Comm world, const std::vector<RankSet>& sets);
  ~GroupCache();
  GroupCache(const GroupCache&) = delete;
  GroupCache& operator=(const GroupCache&) = delete;

  MPI_Comm world() const { return world_; }  // the owned duplicate, for point-to-point traffic
  int rank() const { return rank_; }
  int size() const { return size_; }
  const Communicator& group(const RankSet& ranks) const;
  // Every group of the plan (this rank a member or not), in one order on every rank.
  std::vector<const Communicator*> groups() const;

 private:
  MPI_Comm world_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::map<RankSet, std::unique_ptr<Communicator>> groups_;
};

}  // namespace burstpool
