#pragma once
// Plans: which ranks run each layer.
//
// A plan file is JSON:
//   {"global_batch": B, "ranks": N,
//    "layers": [{"name": "<layer>", "ranks": "0-7"}, ...]}
// with one entry per layer of the model. A layer's ranks are a string of
// ranks and inclusive ranges ("0-7", "0,2,4-6", ascending, no overlap) or a
// JSON array of ranks ([0, 1, 2]); plans are written with ranges. A layer's samples are split as
// evenly as possible over its ranks in the order listed: rank set[i] holds
// samples [offset(i), offset(i) + count(i)) of every global batch.
#include <cstdint>
#include <string>
#include <vector>

#include "burstpool/spec.hpp"

namespace burstpool {

using RankSet = std::vector<int>;  // ascending, distinct world ranks

// Sample range of one rank within a batch.
struct Slice {
  int offset = 0, count = 0;
  int end() const { return offset + count; }
};

// The even split of `batch` samples over `parts` ranks: the first batch % parts
// get one more. Any batch and part count, not only powers of two.
Slice even_slice(int batch, int parts, int index);

struct Plan {
  int global_batch = 0;
  int ranks = 0;
  std::vector<std::string> layer_names;  // as in the file
  std::vector<RankSet> layer_ranks;      // parallel to layer_names
  std::string source;                    // file, for messages

  // The rank set of layer `name` (throws if absent).
  const RankSet& ranks_of(const std::string& name) const;
  // Position of `rank` in the set, -1 if the layer does not run there.
  static int position(const RankSet& set, int rank);
  // This rank's slice of `batch` samples for a layer on `set` (count 0 if not held).
  static Slice slice_of(const RankSet& set, int rank, int batch);
};

// Every layer on ranks 0..N-1.
Plan data_parallel_plan(const ModelSpec& model, int ranks, int global_batch);
// Plain data parallelism in a world of world_size ranks: every layer on the
// first min(world_size, global_batch) ranks (a batch smaller than the world
// leaves the other ranks without work); plan.ranks = world_size.
Plan data_parallel_plan_within(const ModelSpec& model, int world_size, int global_batch);

// "0,2,4-6" as {0, 2, 4, 5, 6}: ascending, no rank twice, every rank in
// [0, ranks). Errors name `where` ("plan.json: layer 'fc'") and the part at fault.
RankSet parse_rank_ranges(const std::string& text, int ranks, const std::string& where);
// The shortest such text for an ascending set: {0, 1, 2, 3, 5} as "0-3,5".
std::string rank_ranges(const RankSet& set);

Plan load_plan(const std::string& path);
void save_plan(const Plan& plan, const std::string& path);
// Rejects, with a message naming the plan file and the layer, a plan that does
// not fit the model or the world: missing or unknown layers, empty rank sets,
// ranks out of range or repeated, a batch smaller than a layer's rank count,
// or a plan written for another rank count than `world_size`.
void validate_plan(const Plan& plan, const ModelSpec& model, int world_size);

}  // namespace burstpool
