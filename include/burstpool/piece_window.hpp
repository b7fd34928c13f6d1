#pragma once
// A window over a background job's pieces of device work (a layer's forward
// or backward each): at most `limit` pieces are in flight on its stream, and
// the host waits for a piece only when `limit` newer ones would otherwise be
// outstanding, instead of after every piece. Before each launch the gate is
// asked (the executor's before-layer hook), so the background still yields
// within a piece or two of the foreground's need, while the device always has
// the next piece queued behind the running one.
//
// Marker is what the device gives for "the work queued so far" (a CUDA event
// on the GPU; a counter in the tests): `mark()` records one after the piece
// just queued, `wait(m)` returns once the work up to m is done. Header-only,
// so the CPU tests drive the same code the GPU model runs.
#include <deque>
#include <functional>
#include <utility>

namespace burstpool {

template <class Marker>
class PieceWindow {
 public:
  PieceWindow(int limit, std::function<Marker()> mark, std::function<void(Marker&)> wait)
      : limit_(limit < 1 ? 1 : limit), mark_(std::move(mark)), wait_(std::move(wait)) {}

  // After a piece is queued and before the next one is asked for: marks it,
  // then waits for the oldest pieces until fewer than `limit` remain in flight.
  void piece_queued() {
    in_flight_.push_back(mark_());
    while (static_cast<int>(in_flight_.size()) >= limit_) {
      wait_(in_flight_.front());
      in_flight_.pop_front();
    }
  }
  // Waits for every piece in flight (the end of a step, a stop).
  void drain() {
    while (!in_flight_.empty()) {
      wait_(in_flight_.front());
      in_flight_.pop_front();
    }
  }
  int in_flight() const { return static_cast<int>(in_flight_.size()); }
  int limit() const { return limit_; }

 private:
  const int limit_;
  std::function<Marker()> mark_;
  std::function<void(Marker&)> wait_;
  std::deque<Marker> in_flight_;
};

}  // namespace burstpool
