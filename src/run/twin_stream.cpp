#include "run/twin_stream.hpp"

namespace burstpool {

TwinStream::TwinStream(bool async) : async_(async) {
  if (async_) worker_ = std::thread([this] { run(); });
}

TwinStream::~TwinStream() {
  if (!async_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = queued_;
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void TwinStream::launch(std::function<void()> work) {
  if (!async_) return work();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
    ++queued_;
  }
}

uint64_t TwinStream::record() {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_;
}

void TwinStream::wait(uint64_t event) {
  if (!async_) return;
  std::unique_lock<std::mutex> lock(mutex_);
  if (event > released_) released_ = event;
  changed_.notify_all();
  changed_.wait(lock, [&] { return done_ >= event || error_; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void TwinStream::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return done_ < released_ || (stopping_ && queue_.empty()); });
    if (done_ >= released_) return;  // stopping, nothing left
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr failed;
    try {
      work();
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    ++done_;
    if (failed && !error_) error_ = failed;
    changed_.notify_all();
  }
}

}  // namespace burstpool
