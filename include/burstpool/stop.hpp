#pragma once
// Stopping a training run early and cleanly. SIGTERM (Slurm at a time limit,
// or scancel) and SIGUSR1 (sbatch --signal=USR1@SECONDS: a warning ahead of
// the limit) make the trainer finish its current step; the ranks agree on it
// in the run loop's reduction after each step (loop.hpp: one rank receiving
// the signal is enough), write the checkpoint and metrics, and `burstpool
// train` exits with kStoppedExitStatus. A second such signal ends the
// process at once, as without the handlers.

namespace burstpool {

// EX_TEMPFAIL: not finished; --resume continues (slurm/train.sbatch requeues).
constexpr int kStoppedExitStatus = 75;

// Installs the handlers (the train command does, after MPI starts).
void install_stop_handlers();
// The first stop signal this process received, 0 if none.
int stop_signal();
// "SIGTERM", "SIGUSR1", or "signal N".
const char* stop_signal_name(int signal);

}  // namespace burstpool
