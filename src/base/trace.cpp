#include "burstpool/trace.hpp"

#include <mpi.h>

#include <algorithm>

#include "burstpool/error.hpp"
#include "burstpool/json_io.hpp"
#include "burstpool/runtime.hpp"

namespace burstpool {
namespace {

// Events kept per rank: a trace of a long run at every layer would not fit
// in memory or open in a viewer; --trace-steps picks a window.
constexpr size_t kMaxEvents = 2'000'000;

const char* track_name(int track) {
  switch (track) {
    case 0: return "main thread";
    case 1: return "transfers";
    case 2: return "gradient sync";
    default: return "background job";
  }
}

nlohmann::json event_json(const TraceEvent& e) {
  return {{"name", e.name}, {"ph", "X"}, {"pid", e.rank}, {"tid", static_cast<int>(e.track)},
          {"ts", e.start_s * 1e6}, {"dur", e.duration_s * 1e6}, {"cat", e.busy ? "busy" : "other"}};
}

}  // namespace

std::vector<std::pair<double, double>> uncovered(std::vector<std::pair<double, double>> busy, double from, double to) {
  std::sort(busy.begin(), busy.end());
  std::vector<std::pair<double, double>> gaps;
  double at = from;
  auto gap_until = [&](double end) {
    if (end > at) gaps.emplace_back(at, end);
  };
  for (const auto& [start, end] : busy) {
    if (end <= at) continue;
    if (start >= to) break;
    gap_until(std::min(start, to));
    at = std::max(at, end);
  }
  gap_until(to);
  return gaps;
}

std::vector<TraceEvent> idle_gaps(std::span<const TraceEvent> events, int rank, double from, double to) {
  std::vector<std::pair<double, double>> busy;
  for (const TraceEvent& e : events)
    if (e.busy && e.rank == rank) busy.emplace_back(e.start_s, e.start_s + e.duration_s);
  std::vector<TraceEvent> gaps;
  for (const auto& [start, end] : uncovered(std::move(busy), from, to))
    gaps.push_back({rank, Track::main, "idle", start, end - start, false});
  return gaps;
}

nlohmann::json trace_json(const std::vector<TraceEvent>& events, int ranks, const std::string& title) {
  nlohmann::json list = nlohmann::json::array();
  for (int r = 0; r < ranks; ++r) {
    list.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"args", {{"name", fmt::format("rank {}", r)}}}});
    list.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", r}, {"args", {{"sort_index", r}}}});
    for (int t = 0; t < 4; ++t)
      list.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", r}, {"tid", t}, {"args", {{"name", track_name(t)}}}});
  }
  for (const TraceEvent& e : events) list.push_back(event_json(e));
  return {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}, {"otherData", {{"title", title}}}};
}

void Tracer::enable(int64_t first_step, int64_t end_step) {
  BP_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  zero_ = Clock::now();
  first_ = first_step;
  end_ = end_step;
  enabled_ = true;
}

void Tracer::begin_step(int64_t step, Clock::time_point start) {
  if (!enabled_) return;
  step_ = step;
  active_.store(step >= first_ && step < end_ && !full_, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  step_start_ = start;
  step_first_event_ = events_.size();
}

void Tracer::end_step(Clock::time_point now) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const int rank = world().rank;
  const double from = since_zero(step_start_), to = since_zero(now);
  const std::vector<TraceEvent> gaps =
      idle_gaps(std::span<const TraceEvent>(events_).subspan(step_first_event_), rank, from, to);
  events_.push_back({rank, Track::main, fmt::format("step {}", step_), from, to - from, false});
  events_.insert(events_.end(), gaps.begin(), gaps.end());
}

void Tracer::span(Track track, std::string name, Clock::time_point start, Clock::time_point end, bool busy) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (events_.size() >= kMaxEvents) {
    if (!full_ && world().rank == 0)
      fmt::print(stderr, "burstpool: warning: the trace holds {} events; later steps are not traced (narrow "
                         "--trace-steps)\n", kMaxEvents);
    full_ = true;
    return;
  }
  events_.push_back({world().rank, track, std::move(name), since_zero(start),
                     std::chrono::duration<double>(end - start).count(), busy});
}

size_t Tracer::write(const std::string& path, const std::string& title) {
  active_.store(false);
  std::string mine;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    nlohmann::json list = nlohmann::json::array();
    for (const TraceEvent& e : events_)
      list.push_back({e.rank, static_cast<int>(e.track), e.name, e.start_s, e.duration_s, e.busy});
    mine = list.dump();
  }
  const WorldInfo& w = world();
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(w.size), offsets(w.size);
  BP_MPI_CHECK(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  std::string all;
  if (w.rank == 0) {
    for (int r = 1; r < w.size; ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
    all.resize(static_cast<size_t>(offsets.back()) + lengths.back());
  }
  BP_MPI_CHECK(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
                           MPI_COMM_WORLD));
  if (w.rank != 0) return 0;
  std::vector<TraceEvent> events;
  for (int r = 0; r < w.size; ++r)
    for (const auto& e : nlohmann::json::parse(all.substr(offsets[r], lengths[r])))
      events.push_back({e[0].get<int>(), static_cast<Track>(e[1].get<int>()), e[2].get<std::string>(),
                        e[3].get<double>(), e[4].get<double>(), e[5].get<bool>()});
  write_json(path, trace_json(events, w.size, title));
  return events.size();
}

Tracer& tracer() {
  static Tracer t;
  return t;
}

}  // namespace burstpool
