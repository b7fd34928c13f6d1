#include "comm/wait.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "burstpool/error.hpp"

namespace burstpool {
namespace {

std::mutex g_policy_mutex;
WaitPolicy g_policy;
std::atomic<bool> g_polite{false};  // read on every wait without the lock
thread_local const std::atomic<bool>* t_cancel = nullptr;

bool cancelled() { return t_cancel && t_cancel->load(std::memory_order_relaxed); }

}  // namespace

void set_wait_policy(const WaitPolicy& policy) {
  std::lock_guard<std::mutex> lock(g_policy_mutex);
  g_policy = policy;
  g_polite.store(policy.polite);
  // Sleeps of tens of microseconds are only short with a small timer slack
  // (the default rounds them up by 50 us). Applies to the calling thread,
  // which is the one that waits on the foreground's behalf.
  if (policy.polite) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

WaitPolicy wait_policy() {
  std::lock_guard<std::mutex> lock(g_policy_mutex);
  return g_policy;
}

void set_wait_cancel_flag(const std::atomic<bool>* flag) { t_cancel = flag; }
bool waits_cancellable() { return t_cancel != nullptr; }

double predicted_sleep_seconds(const WaitPolicy& p, const WaitSite* site) {
  if (!site) return 0;
  const double expected_us = site->expected() * 1e6;
  if (expected_us <= p.spin_us || expected_us < p.predict_min_us) return 0;
  return p.predict * site->expected();
}

void wait_all(int count, MPI_Request* requests, WaitSite* site) {
  if (count == 0) return;
  if (!g_polite.load(std::memory_order_relaxed) && !t_cancel) {
    BP_MPI_CHECK(MPI_Waitall(count, requests, MPI_STATUSES_IGNORE));
    return;
  }
  const WaitPolicy p = wait_policy();
  using Clock = std::chrono::steady_clock;
  using Seconds = std::chrono::duration<double>;
  const auto start = Clock::now();
  const auto spin_until = start + std::chrono::microseconds(p.spin_us);
  const Seconds shortest(p.sleep_us * 1e-6), longest(p.max_sleep_us * 1e-6);
  // Sleep through most of the expected wait (polling only every `longest`),
  // then poll with backed-off sleeps.
  const auto predicted_until =
      start + std::chrono::duration_cast<Clock::duration>(Seconds(predicted_sleep_seconds(p, site)));
  for (;;) {
    int done = 0;
    BP_MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
    if (done) break;
    if (cancelled()) throw WaitCancelled();
    if (!p.polite && !t_cancel) continue;  // a background thread always sleeps: it never needs the latency
    const auto now = Clock::now();
    if (now < predicted_until)
      std::this_thread::sleep_for(std::min<Seconds>(predicted_until - now, longest));
    else if (now >= spin_until)
      std::this_thread::sleep_for(std::min(std::max(shortest, p.backoff * Seconds(now - start)), longest));
  }
  if (site) site->record(Seconds(Clock::now() - start).count());
}

}  // namespace burstpool
