#pragma once
// Slice redistribution between two rank sets. When a layer's rank set differs
// from its producer's, sample slices move point to point: in forward the
// producer's activations go to the consumer's ranks, in backward the
// gradients come back. Data that stays on a rank is copied, not sent.
#include <vector>

#include "burstpool/plan.hpp"

namespace burstpool {

// One piece: global samples [offset, offset + count) held by `from` in the
// producer's slicing and needed by `to` in the consumer's.
struct Piece {
  int from, to;
  int offset, count;
};

// Every non-empty overlap between the producer's and the consumer's slices of
// `batch` samples, including pieces a rank keeps (from == to).
std::vector<Piece> overlap_pieces(const RankSet& producer, const RankSet& consumer, int batch);

}  // namespace burstpool
