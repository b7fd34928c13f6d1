#include <gtest/gtest.h>

#include "burstpool/trace.hpp"

namespace burstpool {
namespace {

// Busy events of one rank, overlapping, nested, touching and outside the
// window, against gaps worked out by hand; other ranks' and non-busy events
// do not count.
TEST(Trace, IdleGapsAreWhatBusyEventsLeave) {
  const std::vector<TraceEvent> events = {
      {0, Track::main, "a", 1.0, 2.0, true},           // [1, 3)
      {0, Track::transfers, "b", 2.5, 1.0, true},      // [2.5, 3.5): overlaps a
      {0, Track::main, "c", 2.6, 0.2, true},           // inside a
      {0, Track::gradient_sync, "d", 3.5, 0.5, true},  // touches b: [3.5, 4)
      {0, Track::main, "read", 5.0, 1.0, false},       // not busy: stays idle
      {1, Track::main, "other rank", 4.0, 3.0, true},
      {0, Track::main, "late", 9.0, 2.0, true},  // runs past the window's end
  };
  const std::vector<TraceEvent> gaps = idle_gaps(events, 0, 0.5, 10.0);
  ASSERT_EQ(gaps.size(), 2u);
  EXPECT_DOUBLE_EQ(gaps[0].start_s, 0.5);
  EXPECT_DOUBLE_EQ(gaps[0].duration_s, 0.5);
  EXPECT_DOUBLE_EQ(gaps[1].start_s, 4.0);
  EXPECT_DOUBLE_EQ(gaps[1].duration_s, 5.0);
  for (const TraceEvent& g : gaps) EXPECT_TRUE(g.name == "idle" && !g.busy && g.rank == 0 && g.track == Track::main);
  EXPECT_TRUE(idle_gaps(events, 2, 0.0, 1.0).size() == 1) << "a rank without events is idle throughout";
}

// Complete events in microseconds with the rank as process and the track as
// thread, and a name for every process and track.
TEST(Trace, JsonIsTheTraceEventFormat) {
  const nlohmann::json t = trace_json({{1, Track::transfers, "send", 0.25, 0.001, true}}, 2, "test");
  const nlohmann::json& list = t.at("traceEvents");
  int names = 0;
  for (const auto& e : list) {
    if (e["ph"] == "M" && e["name"] == "thread_name") ++names;
    if (e["ph"] != "X") continue;
    EXPECT_EQ(e["pid"], 1);
    EXPECT_EQ(e["tid"], 1);
    EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 250000.0);
    EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1000.0);
  }
  EXPECT_EQ(names, 2 * 4);
  EXPECT_EQ(t.at("otherData").at("title"), "test");
}

}  // namespace
}  // namespace burstpool
