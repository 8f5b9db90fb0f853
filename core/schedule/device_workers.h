// The engines of one job on several devices of one host: device 0's engine is the caller's (the
// session's model, used on the calling thread); every other device gets a worker thread that makes
// its own backend and model (DeviceEngineFactory) and owns them as long as the DeviceWorkers live,
// since a backend's tensors are released only by the thread that made them ("one thread owns a
// GPU"). Two schedules run on them: the pipelined decode (pipeline_decode.h: the decoder cut into
// consecutive shares) and blend tiles spread over the devices (tiled.h: whole tiles per device).
#pragma once

#include <functional>
#include <memory>

#include "core/backend/backend.h"
#include "core/vae/video_vae.h"

namespace seedvae {

// One device's engine.
struct DeviceEngine {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<VideoVae> model;  // destroyed before the backend
  DeviceEngine() = default;
  DeviceEngine(DeviceEngine&&) = default;
  DeviceEngine& operator=(DeviceEngine&&) = default;
  ~DeviceEngine() { model.reset(); }
};
// Makes the engine of device `index` (1 .. devices - 1) on the calling thread, which then owns it.
using DeviceEngineFactory = std::function<Result<DeviceEngine>(int index)>;

class DeviceWorkers {
 public:
  // Starts the workers of devices 1 .. devices - 1 and waits until each has made its engine; the
  // first failure is returned ("device share 2: ..."). Whatever `first`'s backend has tuned is
  // saved first, so that the others load it when they are made: the same convolution algorithms,
  // the same output (a cache that cannot be written costs only their own tuning).
  static Result<std::unique_ptr<DeviceWorkers>> create(VideoVae& first, DeviceEngineFactory make,
                                                       int devices);
  ~DeviceWorkers();  // stops the workers; each destroys its engine on its own thread
  DeviceWorkers(const DeviceWorkers&) = delete;
  DeviceWorkers& operator=(const DeviceWorkers&) = delete;

  int devices() const;
  VideoVae& first() const;

  // Runs task(0, first) on the calling thread and task(d, device d's model) on device d's thread,
  // all at once, and returns when every one has returned: the first failure in device order. Not
  // thread-safe: called from the thread that owns `first`. After a failure an engine may be
  // unusable (a device error): make new workers.
  using Task = std::function<Status(int device, VideoVae& model)>;
  Status run(const Task& task);

  struct Impl;

 private:
  explicit DeviceWorkers(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace seedvae
