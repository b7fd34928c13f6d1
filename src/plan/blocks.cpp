#include "plan/blocks.hpp"

#include "burstpool/error.hpp"

namespace burstpool {

std::vector<Block> decompose(const CostModel& cm, const std::string& source) {
  const int L = cm.layers();
  std::vector<std::vector<int>> consumers(L);
  for (int i = 0; i < L; ++i)
    for (int p : cm.inputs()[i]) consumers[p].push_back(i);
  std::vector<Block> blocks;
  int c = 0;  // the input layer comes first in topological order
  BP_CHECK(cm.inputs()[0].empty(), "first layer is not the input");
  Block chain;
  chain.chain.push_back(0);
  auto unsupported = [&](int at) {
    return Error(fmt::format("{}: the planner handles chains and single-level fork/join blocks; the structure at layer "
                             "'{}' is neither",
                             source, cm.names()[at]));
  };
  while (!consumers[c].empty()) {
    if (consumers[c].size() == 1 && cm.inputs()[consumers[c][0]].size() == 1) {
      c = consumers[c][0];
      chain.chain.push_back(c);
      continue;
    }
    if (consumers[c].size() == 1) throw unsupported(consumers[c][0]);
    blocks.push_back(chain);
    chain = Block();
    Block fj;
    fj.fork = c;
    for (int first : consumers[c]) {
      std::vector<int> branch;
      int n = first;
      while (cm.inputs()[n].size() == 1 && consumers[n].size() == 1) {
        branch.push_back(n);
        n = consumers[n][0];
      }
      if (cm.inputs()[n].size() < 2) throw unsupported(n);
      if (fj.join < 0) fj.join = n;
      if (fj.join != n) throw unsupported(n);
      fj.branches.push_back(branch);
    }
    if (cm.inputs()[fj.join].size() != fj.branches.size()) throw unsupported(fj.join);
    blocks.push_back(fj);
    c = fj.join;
    chain.chain.push_back(c);
  }
  blocks.push_back(chain);
  return blocks;
}

}  // namespace burstpool
