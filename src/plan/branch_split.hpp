#pragma once
// Branches of a fork at the same time: how to share the ranks among them.
//
// Each branch of a fork/join block may run on a rank range of its own. One
// branch, the main one, keeps the prefix (ranks 0..c-1, shared with the
// fork's and the join's first ranks, so its slices move as between
// prefixes); the others take disjoint ranges after it, and every sample
// they use moves in and out. Given each branch's time at every count it may
// take, in both placements, the split that makes the slowest branch fastest
// is a small knapsack over counts: for a threshold T each branch needs the
// fewest ranks that bring it under T, and T is feasible while those add up
// to at most the ranks there are. The fewest ranks needed falls as T grows,
// so the least feasible T is found by bisection over the branches' times.
#include <vector>

namespace burstpool {

// One branch's time at each count (index = rank count, [0] unused); an
// infinite time: that count is not allowed.
struct BranchTimes {
  std::vector<double> prefix;  // on ranks 0..c-1
  std::vector<double> apart;   // on c ranks of their own, after the prefix branch's
};

struct BranchSplit {
  double time;                       // the slowest branch's, at least `floor`; infinite: no split fits
  int main = -1;                     // the branch on the prefix
  std::vector<int> counts;           // per branch
};

// The best split of at most `ranks` ranks among `branches` (at least two),
// one of them on the prefix, with `floor` the time of what runs beside them
// regardless (an identity branch's transfer). Ties go to the lowest main
// branch and, for it, to the fewest ranks.
BranchSplit best_split(const std::vector<BranchTimes>& branches, int ranks, double floor);

}  // namespace burstpool
