#pragma once
// Keeping non-blocking MPI operations moving while the rank computes.
//
// Open MPI advances a non-blocking operation only inside MPI calls: the next
// round of a non-blocking allreduce (libnbc's ring) and, over TCP, the
// fragments beyond what the socket buffers hold, wait for the rank's next
// MPI call. The executor makes one between layers, but one layer's backward
// can take tens of milliseconds, in which a link would move far more than
// the socket buffers hold. So, while operations are in flight, a helper
// thread of the process turns MPI's progress engine every `interval`
// (MPI_Iprobe on MPI_COMM_SELF, which matches nothing) and sleeps in between;
// when nothing is in flight it waits on a condition variable and costs
// nothing.
//
// Gradient sums (MpiGroupReducer) count their operations in flight here.
// Slice exchanges do not: for a burst plan of vgg16_cifar at 1 Gbit/s the
// helper changed nothing measurable (medians of 3 alternating rounds, 100.4
// against 101.8 samples/s without it).
//
// Process-wide, like the wait policy (comm/wait.hpp): MPI's progress engine
// is the process's. Needs MPI_THREAD_MULTIPLE; without it the helper is never
// started. Every start of an operation is matched by one finish. Its effect,
// measured: docs/parallel.md.
namespace burstpool {

// 0: no helper thread. Takes effect for operations started afterwards.
void set_progress_interval_us(int microseconds);
// Whether operations started on the calling thread use the helper (default
// yes). A background job's thread opts out: the helper runs at normal
// priority and would take the foreground's core every interval for sums
// that, by design, wait for the foreground's idle time.
void use_progress_helper_on_this_thread(bool on);
// Operations that need progress have started: true when the helper now
// counts them, and then progress_end() must follow once they have completed.
bool progress_begin();
void progress_end();
// Stops and joins the helper thread; finalize_mpi calls it once the thread
// has started.
void stop_progress_thread();

}  // namespace burstpool
