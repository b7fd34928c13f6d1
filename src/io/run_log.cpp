#include "burstpool/run_log.hpp"

#include <cmath>

#include "burstpool/error.hpp"
#include "burstpool/runtime.hpp"

namespace burstpool {

void RunLog::open(const std::string& path) {
  close();
  if (path.empty() || world().rank != 0) return;
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw Error(fmt::format("[output] log {}: cannot open for appending", path));
  path_ = path;
}

void RunLog::close() {
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

void RunLog::record(const char* event, double wall_seconds, nlohmann::json fields) {
  if (!file_) return;
  fields["event"] = event;
  fields["wall_seconds"] = wall_seconds;
  for (auto& [key, value] : fields.items())  // JSON has no NaN or infinity
    if (value.is_number_float() && !std::isfinite(value.get<double>())) value = nullptr;
  const std::string line = fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  // A full disk loses log lines, not the run: the metrics and checkpoints say what it did.
  if (std::fputs(line.c_str(), file_) < 0 || std::fflush(file_) != 0) {
    fmt::print(stderr, "burstpool: warning: [output] log {}: write failed; no more records go there\n", path_);
    close();
  }
}

void RunLog::progress(double wall_seconds, int64_t step, double epoch, double loss, double samples_per_second,
                      double lr) {
  record("progress", wall_seconds,
         {{"step", step}, {"epoch", epoch}, {"loss", loss}, {"samples_per_second", samples_per_second}, {"lr", lr}});
}

void RunLog::evaluation(double wall_seconds, int64_t step, double epoch, double accuracy, double loss) {
  record("evaluation", wall_seconds, {{"step", step}, {"epoch", epoch}, {"accuracy", accuracy}, {"loss", loss}});
}

RunLog& run_log() {
  static RunLog log;
  return log;
}

}  // namespace burstpool
