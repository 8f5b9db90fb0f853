// Host work handed off by the engine thread to one thread of its own, run in the order posted:
// a long video's round trip measures and writes chunk k there while the engine encodes and
// decodes chunk k + 1. Written by hand: the standard library has no bounded task queue, and a
// thread pool (OpenMP's, std::async) neither keeps the order nor bounds what waits.
//
// Bounded: post() blocks while `depth` tasks wait, so at most depth + 1 chunks are held beyond
// the engine's. The first task that fails stops the worker: the tasks after it are dropped and
// every later post() and drain() returns its Status. Shutdown: the destructor drops the waiting
// tasks, lets the running one finish and joins.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "core/base/status.h"

namespace seedvae {

class SerialWorker {
 public:
  // Starts the thread, named `name` (core/base/thread_name.h).
  explicit SerialWorker(std::string name, int depth = 1);
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Queues `task` (waiting while `depth` tasks wait); the first failure so far, if any, instead.
  Status post(std::function<Status()> task);
  // Waits until every posted task has run; the first failure, if any.
  Status drain();
  // Seconds the callers of post() and drain() waited for the worker.
  double wait_seconds() const;

 private:
  void run();

  const std::string name_;
  const size_t depth_;
  mutable std::mutex mu_;
  std::condition_variable space_, idle_, work_;
  std::deque<std::function<Status()>> queue_;
  bool running_ = false;   // a task is running
  bool stopping_ = false;  // the destructor was called
  Status error_;           // the first failure
  double wait_s_ = 0;
  std::thread thread_;  // last: started after everything above exists
};

}  // namespace seedvae
