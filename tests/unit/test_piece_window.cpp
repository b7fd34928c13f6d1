// The window over a background job's device pieces (piece_window.hpp), on a
// stand-in device whose markers count the pieces queued: never more than the
// limit in flight, waits oldest first and only when the window is full, and
// drain() leaves nothing in flight.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "burstpool/piece_window.hpp"

namespace burstpool {
namespace {

struct StandInDevice {
  int queued = 0;           // pieces launched so far
  int done = 0;             // pieces the device has finished (advanced by waits only)
  int most_in_flight = 0;   // queued - done, at its largest when a piece is launched
  std::vector<int> waited;  // the markers waited for, in order
  void launch() {
    ++queued;
    most_in_flight = std::max(most_in_flight, queued - done);
  }
};

// A window whose markers are the device's count of pieces queued; waiting
// for one finishes every piece up to it.
PieceWindow<int> window_on(StandInDevice& d, int limit) {
  return PieceWindow<int>(
      limit, [&d] { return d.queued; },
      [&d](int& upto) {
        d.waited.push_back(upto);
        d.done = std::max(d.done, upto);
      });
}

void run_pieces(PieceWindow<int>& window, StandInDevice& device, int pieces) {
  for (int p = 0; p < pieces; ++p) {
    device.launch();
    window.piece_queued();
  }
}

TEST(PieceWindow, KeepsAtMostTheLimitInFlightAndWaitsOldestFirst) {
  StandInDevice d;
  PieceWindow<int> window = window_on(d, 2);
  run_pieces(window, d, 5);
  EXPECT_EQ(d.most_in_flight, 2);
  EXPECT_EQ(d.waited, (std::vector<int>{1, 2, 3, 4}));  // each piece waited for once the next is queued
  EXPECT_EQ(window.in_flight(), 1);
  window.drain();
  EXPECT_EQ(window.in_flight(), 0);
  EXPECT_EQ(d.done, 5);
}

TEST(PieceWindow, LimitOneWaitsForEachPieceAsTheOldPathDid) {
  StandInDevice d;
  PieceWindow<int> window = window_on(d, 1);
  run_pieces(window, d, 3);
  EXPECT_EQ(d.most_in_flight, 1);
  EXPECT_EQ(d.waited, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(window.in_flight(), 0);
}

TEST(PieceWindow, ALargerWindowWaitsLess) {
  StandInDevice d;
  PieceWindow<int> window = window_on(d, 4);
  run_pieces(window, d, 6);
  EXPECT_EQ(d.most_in_flight, 4);
  EXPECT_EQ(d.waited, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(window.limit(), 4);
  EXPECT_EQ(PieceWindow<int>(0, [] { return 0; }, [](int&) {}).limit(), 1) << "a limit below 1 means 1";
}

}  // namespace
}  // namespace burstpool
