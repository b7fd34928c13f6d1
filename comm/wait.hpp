#pragma once
// Waiting for MPI requests without taking the core from a background job.
//
// A plain MPI_Waitall spins: a rank waiting for a slice keeps its core busy,
// and a background job on that core (an idle-priority thread) never runs. In
// polite mode (process-wide, switched on while a background job runs) a wait
// polls MPI_Testall for `spin_us`, then sleeps between polls, so the core
// goes to the background thread while the foreground waits; the foreground's
// wake-up preempts it at once (normal beats idle priority). Each sleep lasts
// max(sleep_us, backoff x the time waited so far): long waits hand the core
// over in long pieces (short ones would cost the background a context switch
// and a cold cache every few microseconds), while the foreground wakes at most
// about `backoff` of its wait late.
//
// A wait site (one place in the step that waits, the same every step) learns
// how long its last wait took; a polite wait there sleeps through `predict`
// of that time before backing off (in pieces of at most `max_sleep_us`, see
// below), so the background gets the foreground's idle stretch in long
// pieces, and the foreground, which waits about as
// long every step, is not woken late. Only where that time is at least
// `predict_min_us`: a rank that sleeps wakes late and to a cache the
// background has used, which a wait of a millisecond does not repay
// (LeNet-5's burst plan on a 1 Gbit/s link ran 1.16-1.20x slower beside the
// background with its ~1 ms waits predicted, 0.97-1.13x without).
//
// No sleep lasts longer than `max_sleep_us`: MPI advances a rank's other
// requests (a slice it sends after the receiver's go-ahead, a receive whose
// sender waits for its acknowledgement) only while the rank polls, so a rank
// asleep for the whole of a predicted wait holds up the peers it owes data
// (measured: steps 85-300 ms late on a 3 Gbit/s TCP link, one in seven).
//
// A thread may also set a cancel flag (a background thread does): a wait that
// sees it raised throws WaitCancelled and leaves its requests pending. This is
// how a background job whose peer died stops waiting for it. MPI may still
// complete a cancelled request later, so its buffers must stay allocated:
// the background job's model buffers are kept to the end of the process
// (src/multiplex/multiplex.cpp), Communicator::sum leaks its copy, and the executor's
// slice exchanges, whose receive buffers are temporary, never run in a
// background job (it is data parallel).
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>

namespace burstpool {

struct WaitPolicy {
  bool polite = false;
  int spin_us = 20;   // polling before the first sleep
  int sleep_us = 20;  // shortest sleep between polls after that
  double backoff = 0.02;
  double predict = 0.8;
  int max_sleep_us = 1000;  // the longest sleep between polls
  int predict_min_us = 2000;  // the shortest expected wait that is slept through
};

struct WaitSite {
  double last_seconds = 0, previous_seconds = 0;  // the last two waits here
  // The shorter of the last two: one long outlier does not make the next wait late.
  double expected() const { return std::min(last_seconds, previous_seconds); }
  void record(double seconds) {
    previous_seconds = last_seconds;
    last_seconds = seconds;
  }
};
// How long a polite wait at `site` first sleeps through: `predict` of the
// site's expected wait where that is at least `predict_min_us` (and longer
// than the spin), else 0.
double predicted_sleep_seconds(const WaitPolicy& policy, const WaitSite* site);

void set_wait_policy(const WaitPolicy& policy);
WaitPolicy wait_policy();

// For the calling thread only; nullptr clears it.
void set_wait_cancel_flag(const std::atomic<bool>* flag);
// Whether the calling thread's waits can be cancelled (it has a flag).
bool waits_cancellable();

struct WaitCancelled : std::runtime_error {
  WaitCancelled() : std::runtime_error("wait cancelled: the job is being stopped") {}
};

// MPI_Waitall under the current policy. `site` (optional) is where in the
// step this wait is. Throws Error on an MPI error.
void wait_all(int count, MPI_Request* requests, WaitSite* site = nullptr);

}  // namespace burstpool
