#pragma once
// [output] log: the run's progress as JSON Lines, one record per progress
// line and per evaluation, and at its start and end, written by rank 0 as they happen and flushed line
// by line, so a run can be followed (tail -f) or plotted while it trains, and
// what it did is kept if it dies. The file is appended to: a resumed run
// continues it. Records (every one has "event" and "wall_seconds", the
// seconds since the first run of the job started):
//   {"event": "start", "job", "first_step", "ranks"}
//   {"event": "progress", "step", "epoch", "loss", "samples_per_second", "lr"}
//   {"event": "evaluation", "step", "epoch", "accuracy", "loss"}
//   {"event": "end", "steps", "stopped_by", "reached_target", "samples_per_second"}
// "step" counts optimizer steps (iterations for sma, shadow and local-sgd).
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace burstpool {

class RunLog {
 public:
  // Opens `path` for appending on world rank 0; empty: no log (every call is a no-op).
  void open(const std::string& path);
  void close();
  bool active() const { return file_ != nullptr; }
  // Adds "event" and "wall_seconds" to `fields` and writes them as one line.
  void record(const char* event, double wall_seconds, nlohmann::json fields);
  void progress(double wall_seconds, int64_t step, double epoch, double loss, double samples_per_second, double lr);
  void evaluation(double wall_seconds, int64_t step, double epoch, double accuracy, double loss);
  ~RunLog() { close(); }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

// The process's run log (like stdout, one per process): train opens it.
RunLog& run_log();

}  // namespace burstpool
