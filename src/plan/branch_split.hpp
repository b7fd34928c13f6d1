#pragma once
// Branches of a fork at the same time: how to share the ranks among them.
//
// Each group of a fork/join block's branches may run on a rank range of its
// own. One group, the main one, keeps the prefix (ranks 0..c-1, shared with
// the fork's and the join's first ranks, so its slices move as between
// prefixes); the others take disjoint ranges after it, and every sample they
// use moves in and out. Forward and backward are separate meeting points:
// every group's forward ends before the join's, and every group's backward
// before the fork's, with the rest of the network in between. So a split
// costs its slowest forward plus its slowest backward, not its slowest
// forward-and-backward: a pooling branch, dear forward and cheap backward,
// beside a convolution branch, the other way round, balances only in sum.
//
// Given each group's forward and backward time at every count it may take,
// in both placements, the best split is found exactly: for each candidate
// bound TF on the forward (a forward time of some group at some count), the
// groups may take only the counts whose forward fits under TF, and among
// those the split that makes the slowest backward fastest is a small
// knapsack over counts, solved by bisection over the backward times (the
// fewest ranks each group needs falls as the bound grows). The best split
// costs min over TF of TF + that backward; bounds whose TF plus the least
// backward possible cannot win are skipped.
#include <limits>
#include <vector>

namespace burstpool {

// One placement's times at each count (index = rank count, [0] unused); an
// infinite time: that count is not allowed.
struct PhaseTimes {
  std::vector<double> forward, backward;
};

// One group's times on the prefix (ranks 0..c-1) and apart (c ranks of its
// own, after the prefix group's).
struct BranchTimes {
  PhaseTimes prefix, apart;
};

struct BranchSplit {
  double time;              // slowest forward + slowest backward, floors included; infinite: no split fits
  int main = -1;            // the group on the prefix
  std::vector<int> counts;  // per group
};

// The best split of at most `ranks` ranks among `groups` (at least two), one
// of them on the prefix, with what runs beside them regardless (an identity
// branch's transfers) taking floor_forward and floor_backward. Ties go to
// the lowest main group. Only splits cheaper than `beat` are looked for
// (none: time is infinite).
BranchSplit best_split(const std::vector<BranchTimes>& groups, int ranks, double floor_forward, double floor_backward,
                       double beat = std::numeric_limits<double>::infinity());

}  // namespace burstpool
