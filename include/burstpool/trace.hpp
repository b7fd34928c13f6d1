#pragma once
// Per-rank timelines in the Chrome / Perfetto trace-event format (JSON;
// open in ui.perfetto.dev or chrome://tracing): one process per rank, one
// thread per track. `train --trace` records them as a run goes; `simulate
// --trace` writes a predicted step in the same form, so the two can be
// opened side by side.
//
// Every event says whether it is the rank's main thread at work ("busy":
// computing a layer or the update, moving slices, waiting for gradient
// sums), which is what the metrics count as compute, transfer and allreduce
// seconds. The rest of a step is idle: idle_gaps() turns it into "idle"
// events, so a rank's idle events add up to its metrics' idle_seconds.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace burstpool {

enum class Track : int { main = 0, transfers = 1, gradient_sync = 2, background = 3 };

struct TraceEvent {
  int rank = 0;
  Track track = Track::main;
  std::string name;
  double start_s = 0, duration_s = 0;  // from the trace's time zero
  bool busy = false;                   // the rank's main thread at work (not idle)
};

// The parts of [from, to] that none of the `busy` intervals ({start, end},
// in any order, overlapping or not) cover, as {start, end} in time order.
std::vector<std::pair<double, double>> uncovered(std::vector<std::pair<double, double>> busy, double from, double to);

// "idle" events (main track) for the parts of [from, to] that none of rank's
// busy events cover.
std::vector<TraceEvent> idle_gaps(std::span<const TraceEvent> events, int rank, double from, double to);

// The trace-event JSON of `events` on `ranks` ranks: complete ("X") events in
// microseconds, plus names for each process ("rank r") and track; `title`
// goes into its metadata.
nlohmann::json trace_json(const std::vector<TraceEvent>& events, int ranks, const std::string& title);

// Records this process's events while training. Off unless enable() was
// called, and then only for the steps asked for: every hook in the step code
// costs one relaxed atomic load when off. Thread-safe (a background job's
// thread records too).
class Tracer {
 public:
  using Clock = std::chrono::steady_clock;

  // Collective over MPI_COMM_WORLD: a barrier, then time zero. Steps
  // [first_step, end_step) are recorded, with what runs between them
  // (evaluations, checkpoints).
  void enable(int64_t first_step, int64_t end_step);
  bool enabled() const { return enabled_; }
  bool active() const { return active_.load(std::memory_order_relaxed); }
  // Around each training step, at the times the step's seconds are measured
  // between: recording starts or stops with the window; end_step adds the
  // step's "step N" event and its idle gaps.
  void begin_step(int64_t step, Clock::time_point start);
  void end_step(Clock::time_point end);
  // An event from `start` to now (or `end`); ignored unless active().
  void span(Track track, std::string name, Clock::time_point start, bool busy) {
    span(track, std::move(name), start, Clock::now(), busy);
  }
  void span(Track track, std::string name, Clock::time_point start, Clock::time_point end, bool busy);
  // Collective over MPI_COMM_WORLD: every rank's events go to rank 0, which
  // writes them to `path` (atomically). Returns how many events were written.
  size_t write(const std::string& path, const std::string& title);

 private:
  double since_zero(Clock::time_point t) const { return std::chrono::duration<double>(t - zero_).count(); }

  bool enabled_ = false;
  std::atomic<bool> active_{false};
  int64_t first_ = 0, end_ = 0, step_ = -1;
  Clock::time_point zero_, step_start_;
  size_t step_first_event_ = 0;
  std::mutex mutex_;
  std::vector<TraceEvent> events_;
  bool full_ = false;  // stopped at kMaxEvents
};

// The process's tracer (like the run log, one per process).
Tracer& tracer();

}  // namespace burstpool
