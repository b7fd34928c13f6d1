#include "run/run_record.hpp"

#include <algorithm>
#include <cstdio>

#include "burstpool/profile.hpp"
#include "burstpool/run_log.hpp"
#include "burstpool/stop.hpp"
#include "burstpool/trainer.hpp"

namespace burstpool {

RunRecord::RunRecord(RunSteps& run) : run_(run), r_(*run.result()) {
  int ranks = 1;
  MPI_Comm_size(run.comm(), &ranks);
  run_log().record("start", run.wall(),
                   {{"job", run.job_config().name}, {"first_step", run.steps_done()}, {"ranks", ranks}});
}

void RunRecord::step(double seconds, int64_t samples) {
  r_.train_seconds += seconds;
  run_seconds_ += seconds;
  run_samples_ += samples;
  window_seconds_ += seconds;
  ++window_steps_;
  window_samples_ += samples;
  keep_step_seconds(seconds);
}

void RunRecord::keep_step_seconds(double seconds) {
  constexpr size_t kKept = 1 << 16;
  if (steps_seen_++ % step_stride_ != 0) return;
  step_seconds_.push_back(static_cast<float>(seconds));
  if (step_seconds_.size() < kKept) return;
  for (size_t i = 0; 2 * i < step_seconds_.size(); ++i) step_seconds_[i] = step_seconds_[2 * i];
  step_seconds_.resize((step_seconds_.size() + 1) / 2);
  step_stride_ *= 2;
}

void RunRecord::waited(double seconds) {
  r_.train_seconds += seconds;
  run_seconds_ += seconds;
  window_seconds_ += seconds;
}

void RunRecord::loss(double loss) {
  window_loss_ += loss;
  ++window_losses_;
}

WindowFigures RunRecord::window() const {
  WindowFigures w;
  w.steps = window_steps_;
  w.loss = window_loss_ / static_cast<double>(std::max<int64_t>(1, window_losses_));  // the losses agreed in the window
  w.samples_per_second = static_cast<double>(window_samples_) / std::max(1e-9, window_seconds_);
  return w;
}

void RunRecord::progress() {
  const WindowFigures w = window();
  r_.final_loss = w.loss;
  const ProgressPoint at = run_.progress(w);
  std::fflush(stdout);
  run_log().progress(run_.wall(), at.step, at.epoch, w.loss, w.samples_per_second, at.lr);
  window_loss_ = window_seconds_ = 0;
  window_steps_ = window_samples_ = window_losses_ = 0;
}

void RunRecord::finish(const LoopEnd& end) {
  if (window_losses_ > 0) r_.final_loss = window().loss;  // ended between progress lines, or lagged losses came in
  if (end.stop) r_.stopped_by = stop_signal_name(end.stop);
  r_.samples_per_second = static_cast<double>(run_samples_) / std::max(1e-9, run_seconds_);
  r_.median_step_seconds = median({step_seconds_.begin(), step_seconds_.end()});  // 0 without steps
  r_.achieved_gflops = 3.0 * r_.forward_gflop_per_sample * r_.samples_per_second;
  r_.wall_seconds = run_.wall();
  run_log().record("end", r_.wall_seconds,
                   {{"steps", run_.steps_done()},
                    {"stopped_by", r_.stopped_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(r_.stopped_by)},
                    {"reached_target", end.reached_target},
                    {"samples_per_second", r_.samples_per_second}});
}

}  // namespace burstpool
