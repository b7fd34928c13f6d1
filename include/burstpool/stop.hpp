#pragma once
// Stopping a training run early and cleanly. SIGTERM (Slurm at a time limit,
// or scancel) and SIGUSR1 (sbatch --signal=USR1@SECONDS: a warning ahead of
// the limit) make the trainer finish its current step; the ranks agree on it
// in a small reduction per step (one rank receiving the signal is enough),
// write the checkpoint and metrics, and `burstpool train` exits with
// kStoppedExitStatus. A second such signal ends the process at once, as
// without the handlers.
#include <mpi.h>

#include <memory>

namespace burstpool {

// EX_TEMPFAIL: not finished; --resume continues (slurm/train.sbatch requeues).
constexpr int kStoppedExitStatus = 75;

// Installs the handlers (the train command does, after MPI starts).
void install_stop_handlers();
// The first stop signal this process received, 0 if none.
int stop_signal();
// "SIGTERM", "SIGUSR1", or "signal N".
const char* stop_signal_name(int signal);

// One vote per step over `comm`: start() sends this rank's (the signal it
// received, if any) without waiting, finish() waits and returns the largest
// signal number any rank sent, 0 to go on. Every rank of comm calls both,
// in the same steps.
class StopVote {
 public:
  explicit StopVote(MPI_Comm comm) : comm_(comm) {}
  ~StopVote();
  StopVote(const StopVote&) = delete;
  StopVote& operator=(const StopVote&) = delete;
  void start();
  int finish();

 private:
  MPI_Comm comm_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::unique_ptr<int[]> votes_ = std::make_unique<int[]>(2);  // this rank's, the largest
};

}  // namespace burstpool
