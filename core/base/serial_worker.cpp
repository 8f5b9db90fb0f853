#include "core/base/serial_worker.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/base/thread_name.h"

namespace seedvae {

SerialWorker::SerialWorker(std::string name, int depth)
    : name_(std::move(name)),
      depth_(static_cast<size_t>(std::max(1, depth))),
      thread_([this] { run(); }) {}

SerialWorker::~SerialWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  work_.notify_all();
  space_.notify_all();
  idle_.notify_all();
  thread_.join();
}

Status SerialWorker::post(std::function<Status()> task) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto t0 = std::chrono::steady_clock::now();
  space_.wait(lock, [&] { return queue_.size() < depth_ || !error_.is_ok() || stopping_; });
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!error_.is_ok()) return error_;
  if (stopping_) return cancelled("the worker " + name_ + " is shutting down");
  queue_.push_back(std::move(task));
  work_.notify_one();
  return Status::ok();
}

Status SerialWorker::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto t0 = std::chrono::steady_clock::now();
  idle_.wait(lock, [&] { return (queue_.empty() && !running_) || stopping_; });
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return error_;
}

double SerialWorker::wait_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wait_s_;
}

void SerialWorker::run() {
  set_current_thread_name(name_.c_str());
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (stopping_) return;
    std::function<Status()> task = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    space_.notify_one();
    lock.unlock();
    Status st = task();
    task = nullptr;  // what it captured goes before the worker reports idle
    lock.lock();
    running_ = false;
    if (!st.is_ok() && error_.is_ok()) {
      error_ = std::move(st);
      queue_.clear();  // the failure stops the tasks after it
      space_.notify_all();
    }
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace seedvae
