#include "burstpool/loop.hpp"

#include "burstpool/job.hpp"
#include "burstpool/trainer.hpp"

namespace burstpool {

bool RunSteps::checkpoint_due(std::chrono::steady_clock::time_point since) const {
  return burstpool::checkpoint_due(job_, steps_done() - 1, since);
}

LoopEnd run_loop(RunSteps& run) {
  using Clock = std::chrono::steady_clock;
  const JobConfig& job = run.job_config();
  LoopEnd end;
  Clock::time_point last_checkpoint = Clock::now();
  while (!run.finished()) {
    const int stop = run.step();
    const int64_t done = run.steps_done();
    const bool last = run.finished();
    if (!last && !stop && run.checkpoint_due(last_checkpoint)) {
      run.checkpoint();
      last_checkpoint = Clock::now();
    }
    if (done % job.log_every == 0 || last || stop) run.progress();
    if (stop) {  // the run's final checkpoint and metrics follow, no evaluation: the scheduler's kill may be near
      end.stop_signal = stop;
      break;
    }
    if (run.evaluate(last)) {
      end.reached_target = true;
      break;
    }
  }
  return end;
}

}  // namespace burstpool
