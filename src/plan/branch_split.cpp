#include "plan/branch_split.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace burstpool {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One group's counts in its placement: (count, forward, backward), allowed ones only.
struct Option {
  int count;
  double forward, backward;
};

std::vector<Option> options_of(const PhaseTimes& t) {
  std::vector<Option> out;
  for (size_t c = 1; c < t.forward.size(); ++c)
    if (t.forward[c] < kInf && t.backward[c] < kInf) out.push_back({static_cast<int>(c), t.forward[c], t.backward[c]});
  return out;
}

// The fewest ranks a group needs with its forward within tf and backward within tb; 0: none fits.
int fewest(const std::vector<Option>& options, double tf, double tb) {
  int best = 0;
  for (const Option& o : options)
    if (o.forward <= tf && o.backward <= tb && (best == 0 || o.count < best)) best = o.count;
  return best;
}

// With the forward bound tf: the least slowest backward of a split that fits, and its counts.
double least_backward(const std::vector<std::vector<Option>>& groups, int ranks, double tf, double floor,
                      std::vector<int>& counts) {
  std::vector<double> bounds{floor};
  for (const auto& g : groups)
    for (const Option& o : g)
      if (o.forward <= tf && o.backward >= floor) bounds.push_back(o.backward);
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  auto needed = [&](double tb) {
    long total = 0;
    for (const auto& g : groups) {
      const int c = fewest(g, tf, tb);
      if (c == 0) return std::numeric_limits<long>::max();
      total += c;
    }
    return total;
  };
  // The ranks needed fall as the bound grows: the first bound that fits.
  auto first = std::partition_point(bounds.begin(), bounds.end(), [&](double tb) { return needed(tb) > ranks; });
  if (first == bounds.end()) return kInf;
  for (size_t g = 0; g < groups.size(); ++g) counts[g] = fewest(groups[g], tf, *first);
  return *first;
}

BranchSplit split_with_main(const std::vector<BranchTimes>& groups, int main, int ranks, double floor_f,
                            double floor_b, double beat) {
  std::vector<std::vector<Option>> options;
  double least_f = floor_f, least_b = floor_b;  // no split is faster in either phase
  for (size_t g = 0; g < groups.size(); ++g) {
    options.push_back(options_of(static_cast<int>(g) == main ? groups[g].prefix : groups[g].apart));
    if (options.back().empty()) return {kInf, main, {}};
    double f = kInf, b = kInf;
    for (const Option& o : options.back()) f = std::min(f, o.forward), b = std::min(b, o.backward);
    least_f = std::max(least_f, f), least_b = std::max(least_b, b);
  }
  std::vector<double> forward_bounds{least_f};
  for (const auto& g : options)
    for (const Option& o : g)
      if (o.forward >= least_f) forward_bounds.push_back(o.forward);
  std::sort(forward_bounds.begin(), forward_bounds.end());
  forward_bounds.erase(std::unique(forward_bounds.begin(), forward_bounds.end()), forward_bounds.end());
  BranchSplit best{kInf, main, std::vector<int>(groups.size(), 0)};
  std::vector<int> counts(groups.size(), 0);
  for (double tf : forward_bounds) {
    if (tf + least_b >= std::min(best.time, beat)) break;  // larger bounds only cost more
    const double tb = least_backward(options, ranks, tf, floor_b, counts);
    if (tf + tb < best.time && tf + tb < beat) best.time = tf + tb, best.counts = counts;
  }
  return best;
}

}  // namespace

BranchSplit best_split(const std::vector<BranchTimes>& groups, int ranks, double floor_forward, double floor_backward,
                       double beat) {
  BranchSplit best{kInf, -1, {}};
  if (groups.size() < 2) return best;
  for (int main = 0; main < static_cast<int>(groups.size()); ++main) {
    BranchSplit s = split_with_main(groups, main, ranks, floor_forward, floor_backward, std::min(beat, best.time));
    if (s.time < best.time) best = std::move(s);
  }
  return best;
}

}  // namespace burstpool
