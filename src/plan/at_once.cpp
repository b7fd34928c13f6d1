#include "plan/at_once.hpp"

#include <algorithm>
#include <functional>
#include <limits>

namespace burstpool {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

BlockAtOnce::BlockAtOnce(const CostModel& cm, const Block& b, int ranks, bool layer_time)
    : cm_(cm), b_(b), n_(ranks), layer_time_(layer_time) {
  // Each branch's own forward and backward time (G split into its phases,
  // Sync with the backward) with every layer on c ranks, for each c every
  // layer allows; infinite elsewhere, and for an empty branch.
  for (const auto& branch : b.branches) {
    PhaseTimes body{std::vector<double>(n_ + 1, kInf), std::vector<double>(n_ + 1, kInf)};
    for (int c = 1; c <= n_ && !branch.empty(); ++c) {
      double forward = 0, backward = 0;
      for (int layer : branch) {
        const bool ok = cm_.allowed(layer, c);
        forward += ok ? cm_.forward(layer, c) : kInf;
        backward += ok ? cm_.backward(layer, c) + cm_.sync(layer, c) : kInf;
      }
      body.forward[c] = forward, body.backward[c] = backward;
      if (forward < kInf) top_ = std::max(top_, c);
    }
    bodies_.push_back(body);
  }
  // No block at once is faster than its slowest branch's layers on their best counts, forward and backward.
  double forward = 0, backward = 0;
  for (size_t br = 0; br < b.branches.size(); ++br)
    if (!b.branches[br].empty()) {
      forward = std::max(forward, *std::min_element(bodies_[br].forward.begin(), bodies_[br].forward.end()));
      backward = std::max(backward, *std::min_element(bodies_[br].backward.begin(), bodies_[br].backward.end()));
    }
  bound_ = forward + backward;
  const long nonempty = std::count_if(b.branches.begin(), b.branches.end(), [](const auto& br) { return !br.empty(); });
  ways_ = groupings(static_cast<int>(nonempty));
}

Placement BlockAtOnce::best(int nf, int nj, double beat) const {
  const Block& b = b_;
  double floor = 0, identity_into = 0;  // an identity branch's transfer, half in each phase
  std::vector<BranchTimes> times;       // per non-empty branch
  std::vector<size_t> index;            // its branch
  for (size_t br = 0; br < b.branches.size(); ++br) {
    const auto& branch = b.branches[br];
    if (branch.empty()) {
      const double x = cm_.transfer(b.fork, nf, nj);
      floor = std::max(floor, x / 2), identity_into += x;
      continue;
    }
    auto none = [&] { return PhaseTimes{std::vector<double>(top_ + 1, kInf), std::vector<double>(top_ + 1, kInf)}; };
    BranchTimes bt{none(), none()};
    for (int c = 1; c <= top_; ++c) {
      if (bodies_[br].forward[c] == kInf) continue;
      const double in_p = cm_.transfer(b.fork, nf, c), in_a = cm_.transfer_apart(b.fork, nf, c);
      const double out_p = cm_.transfer(branch.back(), c, nj), out_a = cm_.transfer_apart(branch.back(), c, nj);
      if (!layer_time_ || cm_.allowed(branch.front(), c, in_p)) {
        bt.prefix.forward[c] = (in_p + out_p) / 2 + bodies_[br].forward[c];
        bt.prefix.backward[c] = (in_p + out_p) / 2 + bodies_[br].backward[c];
      }
      if (!layer_time_ || cm_.allowed(branch.front(), c, in_a)) {
        bt.apart.forward[c] = (in_a + out_a) / 2 + bodies_[br].forward[c];
        bt.apart.backward[c] = (in_a + out_a) / 2 + bodies_[br].backward[c];
      }
    }
    times.push_back(std::move(bt));
    index.push_back(br);
  }
  // Per branch its least forward and backward: a group is no faster than their sums over its branches.
  std::vector<std::pair<double, double>> least;
  for (const BranchTimes& t : times)
    least.emplace_back(std::min(*std::min_element(t.prefix.forward.begin(), t.prefix.forward.end()),
                                *std::min_element(t.apart.forward.begin(), t.apart.forward.end())),
                       std::min(*std::min_element(t.prefix.backward.begin(), t.prefix.backward.end()),
                                *std::min_element(t.apart.backward.begin(), t.apart.backward.end())));
  Placement best;
  for (const std::vector<int>& group_of : ways_) {
    const int groups = *std::max_element(group_of.begin(), group_of.end()) + 1;
    if (groups < 2) continue;
    std::vector<std::pair<double, double>> group_least(groups, {0.0, 0.0});
    for (size_t k = 0; k < index.size(); ++k)
      group_least[group_of[k]].first += least[k].first, group_least[group_of[k]].second += least[k].second;
    double forward = floor, backward = floor;
    for (const auto& [f, bw] : group_least) forward = std::max(forward, f), backward = std::max(backward, bw);
    if (forward + backward >= std::min(beat, best.time)) continue;
    auto zero = [&] { return PhaseTimes{std::vector<double>(top_ + 1, 0.0), std::vector<double>(top_ + 1, 0.0)}; };
    std::vector<BranchTimes> sums(groups, BranchTimes{zero(), zero()});
    for (size_t k = 0; k < index.size(); ++k)
      for (int c = 1; c <= top_; ++c) {
        BranchTimes& g = sums[group_of[k]];
        g.prefix.forward[c] += times[k].prefix.forward[c], g.prefix.backward[c] += times[k].prefix.backward[c];
        g.apart.forward[c] += times[k].apart.forward[c], g.apart.backward[c] += times[k].apart.backward[c];
      }
    if (least_cost(sums, floor) >= std::min(beat, best.time)) continue;
    const BranchSplit split = best_split(sums, n_, floor, floor, std::min(beat, best.time));
    if (split.main < 0 || !(split.time < best.time)) continue;
    best = place(index, group_of, split, nj);
    best.into_join += identity_into;
  }
  return best;
}

// No split of these groups is faster: each group at its fastest count, forward and backward apart.
double BlockAtOnce::least_cost(const std::vector<BranchTimes>& groups, double floor) {
  double forward = floor, backward = floor;
  for (const BranchTimes& g : groups) {
    double f = kInf, b = kInf;
    for (const PhaseTimes* t : {&g.prefix, &g.apart})
      for (size_t c = 1; c < t->forward.size(); ++c) f = std::min(f, t->forward[c]), b = std::min(b, t->backward[c]);
    forward = std::max(forward, f), backward = std::max(backward, b);
  }
  return forward + backward;
}

// Every way to put k branches into groups, as each branch's group number
// (the first branch of each group numbered in order of appearance).
std::vector<std::vector<int>> BlockAtOnce::groupings(int k) {
  std::vector<std::vector<int>> all;
  std::vector<int> g(k, 0);
  std::function<void(int, int)> grow = [&](int i, int used) {
    if (i == k) return all.push_back(g);
    for (int v = 0; v <= used && v < k; ++v) {
      g[i] = v;
      grow(i + 1, std::max(used, v + 1));
    }
  };
  if (k > 0) grow(0, 0);
  return all;
}

// Ranks for a split of groups: the main group on the prefix, the others
// after it in group order; each branch takes its group's range.
Placement BlockAtOnce::place(const std::vector<size_t>& index, const std::vector<int>& group_of,
                const BranchSplit& split, int nj) const {
  const Block& b = b_;
  Placement p;
  p.time = split.time;
  p.count.assign(b.branches.size(), 0);
  p.first.assign(b.branches.size(), 0);
  std::vector<int> first(split.counts.size(), 0);
  for (int g = 0, next = split.counts[split.main]; g < static_cast<int>(split.counts.size()); ++g)
    if (g != split.main) first[g] = next, next += split.counts[g];
  for (size_t k = 0; k < index.size(); ++k) {
    const int g = group_of[k], c = split.counts[g], last = b.branches[index[k]].back();
    p.count[index[k]] = c, p.first[index[k]] = first[g];
    p.into_join += g == split.main ? cm_.transfer(last, c, nj) : cm_.transfer_apart(last, c, nj);
  }
  return p;
}

}  // namespace burstpool
