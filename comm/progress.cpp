#include "comm/progress.hpp"

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "burstpool/runtime.hpp"

namespace burstpool {
namespace {

struct Pump {
  std::mutex mutex;
  std::condition_variable wake;
  int interval_us = 0;
  int in_flight = 0;
  bool stop = false;
  std::thread thread;

  void loop() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stop) {
      wake.wait(lock, [&] { return stop || in_flight > 0; });
      while (!stop && in_flight > 0) {
        const auto pause = std::chrono::microseconds(interval_us);
        lock.unlock();
        int found = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &found, MPI_STATUS_IGNORE);
        std::this_thread::sleep_for(pause);
        lock.lock();
      }
    }
  }
};

// Never destroyed: a process that ends without finalize_mpi (MPI_Abort after
// an error on another rank) must not run ~thread on a running helper, which
// would call std::terminate.
Pump& pump() {
  static Pump* p = new Pump;
  return *p;
}

bool thread_multiple() {
  int initialized = 0, level = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Query_thread(&level);
  return initialized && level == MPI_THREAD_MULTIPLE;
}

}  // namespace

void set_progress_interval_us(int microseconds) {
  Pump& p = pump();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.interval_us = microseconds > 0 && thread_multiple() ? microseconds : 0;
}

namespace {
thread_local bool t_use_helper = true;
}  // namespace

void use_progress_helper_on_this_thread(bool on) { t_use_helper = on; }

bool progress_begin() {
  if (!t_use_helper) return false;
  Pump& p = pump();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.interval_us == 0 || p.stop) return false;
  if (!p.thread.joinable()) {
    p.thread = std::thread([&p] { p.loop(); });
    before_mpi_finalize(stop_progress_thread);
  }
  if (p.in_flight++ == 0) p.wake.notify_one();
  return true;
}

void progress_end() {
  Pump& p = pump();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.in_flight > 0) --p.in_flight;
}

void stop_progress_thread() {
  Pump& p = pump();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    p.stop = true;
    p.wake.notify_one();
  }
  if (p.thread.joinable()) p.thread.join();
}

}  // namespace burstpool
