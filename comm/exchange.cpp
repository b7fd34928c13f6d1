#include "comm/exchange.hpp"

#include <algorithm>

namespace burstpool {

std::vector<Piece> overlap_pieces(const RankSet& producer, const RankSet& consumer, int batch) {
  std::vector<Piece> pieces;
  for (size_t i = 0; i < producer.size(); ++i) {
    const Slice a = even_slice(batch, static_cast<int>(producer.size()), static_cast<int>(i));
    for (size_t j = 0; j < consumer.size(); ++j) {
      const Slice b = even_slice(batch, static_cast<int>(consumer.size()), static_cast<int>(j));
      const int lo = std::max(a.offset, b.offset), hi = std::min(a.end(), b.end());
      if (hi > lo) pieces.push_back({producer[i], consumer[j], lo, hi - lo});
    }
  }
  return pieces;
}

}  // namespace burstpool
