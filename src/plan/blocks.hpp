#pragma once
// The model as the planner walks it (src/plan/planner.cpp, at_once.cpp).
#include <string>
#include <vector>

#include "burstpool/planner.hpp"

namespace burstpool {

// Chains, and fork/join blocks whose branches are chains (possibly empty),
// by topological position.
struct Block {
  std::vector<int> chain;                     // layers run one after another (chain block)
  int fork = -1, join = -1;                   // fork/join block
  std::vector<std::vector<int>> branches;     // layers of each branch, fork excluded, join excluded
};

// The model's blocks in order; a structure that is neither is refused,
// naming `source` and the layer.
std::vector<Block> decompose(const CostModel& cm, const std::string& source);

}  // namespace burstpool
