#include "plan/branch_split.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace burstpool {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The fewest ranks that keep one placement of a branch at or under a
// threshold: its (time, count) pairs sorted by time, with the least count up
// to each.
class FewestRanks {
 public:
  explicit FewestRanks(const std::vector<double>& times) {
    for (size_t c = 1; c < times.size(); ++c)
      if (times[c] < kInf) by_time_.emplace_back(times[c], static_cast<int>(c));
    std::sort(by_time_.begin(), by_time_.end());
    int fewest = std::numeric_limits<int>::max();
    for (auto& [time, count] : by_time_) count = fewest = std::min(fewest, count);
  }
  // 0: no count is that fast.
  int at(double threshold) const {
    auto it = std::upper_bound(by_time_.begin(), by_time_.end(), std::make_pair(threshold, std::numeric_limits<int>::max()));
    return it == by_time_.begin() ? 0 : std::prev(it)->second;
  }
  void add_times(std::vector<double>& out) const {
    for (const auto& [time, count] : by_time_) out.push_back(time);
  }

 private:
  std::vector<std::pair<double, int>> by_time_;
};

// With `main` on the prefix: the least feasible threshold and its counts.
BranchSplit split_with_main(const std::vector<FewestRanks>& prefix, const std::vector<FewestRanks>& apart, int main,
                            int ranks, double floor) {
  const size_t n = prefix.size();
  auto fewest = [&](double threshold, std::vector<int>* counts) {
    long total = 0;
    for (size_t b = 0; b < n; ++b) {
      const int c = static_cast<int>(b) == main ? prefix[b].at(threshold) : apart[b].at(threshold);
      if (c == 0) return std::numeric_limits<long>::max();
      total += c;
      if (counts) (*counts)[b] = c;
    }
    return total;
  };
  std::vector<double> thresholds{floor};
  for (size_t b = 0; b < n; ++b) (static_cast<int>(b) == main ? prefix[b] : apart[b]).add_times(thresholds);
  std::sort(thresholds.begin(), thresholds.end());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
  thresholds.erase(thresholds.begin(), std::lower_bound(thresholds.begin(), thresholds.end(), floor));
  // The ranks needed fall as the threshold grows: the first threshold that fits.
  auto first = std::partition_point(thresholds.begin(), thresholds.end(),
                                    [&](double t) { return fewest(t, nullptr) > ranks; });
  BranchSplit split{kInf, main, std::vector<int>(n, 0)};
  if (first == thresholds.end()) return split;
  split.time = *first;
  fewest(*first, &split.counts);
  return split;
}

}  // namespace

BranchSplit best_split(const std::vector<BranchTimes>& branches, int ranks, double floor) {
  std::vector<FewestRanks> prefix, apart;
  for (const BranchTimes& b : branches) {
    prefix.emplace_back(b.prefix);
    apart.emplace_back(b.apart);
  }
  BranchSplit best{kInf, -1, {}};
  if (branches.size() < 2) return best;
  for (int main = 0; main < static_cast<int>(branches.size()); ++main) {
    BranchSplit s = split_with_main(prefix, apart, main, ranks, floor);
    if (s.time < best.time) best = std::move(s);
  }
  return best;
}

}  // namespace burstpool
