#pragma once
// The twin device's stand-in for a CUDA stream (src/run/twin_device.cpp).
//
// Synchronous (the default): launch() runs the work at once, on the caller's
// thread, and waiting is a no-op: the twin as it always was, whose results
// a test can read the moment a call returns.
//
// Asynchronous (BURSTPOOL_TWIN=async, or TwinOptions::async): launched work
// is queued in order and run by a worker thread of the stream's own, and
// only when someone waits for it (synchronize, or wait on an event from
// record). A GPU's stream runs behind the host by an amount that depends on
// timing, so a missing synchronisation there fails only sometimes; here the
// work has always not run yet, so a host read that skips the wait reads
// stale values every time and the test comparing them fails.
//
// Work must not call MPI (it runs on another thread, and only when waited
// for: a collective inside it could wait for a peer that waits for us). An
// exception thrown by launched work is rethrown by the next wait.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace burstpool {

class TwinStream {
 public:
  explicit TwinStream(bool async);
  ~TwinStream();  // runs what is queued, then ends the worker
  TwinStream(const TwinStream&) = delete;
  TwinStream& operator=(const TwinStream&) = delete;

  bool async() const { return async_; }
  void launch(std::function<void()> work);
  // An event: the work queued so far. wait(event) returns once it has run.
  uint64_t record();
  void wait(uint64_t event);
  void synchronize() { wait(record()); }

 private:
  void run();  // the worker
  bool async_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  uint64_t queued_ = 0, done_ = 0, released_ = 0;  // counts of work: launched, run, allowed to run
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace burstpool
