#include "core/schedule/device_workers.h"

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/base/thread_name.h"

namespace seedvae {

struct DeviceWorkers::Impl {
  VideoVae* first = nullptr;
  DeviceEngineFactory make;
  int devices = 1;
  std::vector<std::thread> workers;

  std::mutex mu;
  std::condition_variable cv;
  int ready = 0;      // workers that have made their engine (or failed to)
  Status make_error;  // the first failure to make one
  bool quit = false;
  int64_t generation = 0;  // one per run()
  int finished = 0;        // workers done with the current task
  const Task* task = nullptr;
  std::vector<Status> results;  // per device, of the current task

  void worker(int d) {
    set_current_thread_name(("seedvae-dev" + std::to_string(d)).c_str());
    Result<DeviceEngine> made = make(d);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!made.is_ok() && make_error.is_ok()) {
        make_error = made.status().with_context("device share " + std::to_string(d));
      }
      ++ready;
      cv.notify_all();
    }
    if (!made.is_ok()) return;
    DeviceEngine engine = std::move(made).value();
    int64_t seen = 0;
    for (;;) {
      const Task* t = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return quit || generation != seen; });
        if (quit) break;
        seen = generation;
        t = task;
      }
      Status st = (*t)(d, *engine.model);
      std::lock_guard<std::mutex> lock(mu);
      results[static_cast<size_t>(d)] = std::move(st);
      ++finished;
      cv.notify_all();
    }
  }  // the engine goes with its thread

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu);
      quit = true;
      cv.notify_all();
    }
    for (std::thread& w : workers) w.join();
    workers.clear();
  }
};

DeviceWorkers::DeviceWorkers(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DeviceWorkers::~DeviceWorkers() {
  impl_->stop();
}

int DeviceWorkers::devices() const {
  return impl_->devices;
}

VideoVae& DeviceWorkers::first() const {
  return *impl_->first;
}

Result<std::unique_ptr<DeviceWorkers>> DeviceWorkers::create(VideoVae& first,
                                                             DeviceEngineFactory make,
                                                             int devices) {
  if (devices < 1) return invalid_argument("a job on several devices needs at least one");
  auto impl = std::make_unique<Impl>();
  impl->first = &first;
  impl->make = std::move(make);
  impl->devices = devices;
  Impl* im = impl.get();
  (void)first.backend().save_tuning();
  for (int i = 1; i < devices; ++i) im->workers.emplace_back([im, i] { im->worker(i); });
  Status error;
  {
    std::unique_lock<std::mutex> lock(im->mu);
    im->cv.wait(lock, [&] { return im->ready == devices - 1; });
    error = im->make_error;
  }
  if (!error.is_ok()) {
    im->stop();
    return error;
  }
  return std::unique_ptr<DeviceWorkers>(new DeviceWorkers(std::move(impl)));
}

Status DeviceWorkers::run(const Task& task) {
  Impl& im = *impl_;
  {
    std::lock_guard<std::mutex> lock(im.mu);
    im.task = &task;
    im.results.assign(static_cast<size_t>(im.devices), Status::ok());
    im.finished = 0;
    ++im.generation;
    im.cv.notify_all();
  }
  Status own = task(0, *im.first);
  std::unique_lock<std::mutex> lock(im.mu);
  im.cv.wait(lock, [&] { return im.finished == im.devices - 1; });
  im.task = nullptr;
  if (!own.is_ok()) return own;
  for (const Status& st : im.results) {
    if (!st.is_ok()) return st;
  }
  return Status::ok();
}

}  // namespace seedvae
