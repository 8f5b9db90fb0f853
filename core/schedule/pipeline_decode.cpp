#include "core/schedule/pipeline_decode.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <utility>

#include "core/backend/counting_backend.h"
#include "core/schedule/copy_pipeline.h"

namespace seedvae {

// ---- the plan ----------------------------------------------------------------------------------

std::string PipelinePlan::describe_share(int i) const {
  const auto b = static_cast<size_t>(bounds[static_cast<size_t>(i)]);
  const auto e = static_cast<size_t>(bounds[static_cast<size_t>(i) + 1]);
  std::string s = std::to_string(b) + "-" + std::to_string(e);
  if (e <= units.size() && b < e) s += " (" + units[b] + " .. " + units[e - 1] + ")";
  return s;
}

std::string PipelinePlan::describe() const {
  std::string s;
  for (int i = 0; i < shares(); ++i) s += (i > 0 ? " | " : "") + describe_share(i);
  return s;
}

namespace {

// The cost model's rates, fitted to the per-block GPU times of the bf16 1080p decode on an H100
// (docs/benchmarks.md, "Where the GPU time goes"): time = FLOPs / rate + bytes made / rate puts
// up_blocks.1, .2 and .3 within 5 % of their measured share. A byte made costs about 1300 FLOPs:
// every tensor made is also read (often more than once), and the norms, adds and copies around
// it are bound by memory. The cut depends only on the ratio.
constexpr double kConvFlopsPerSecond = 900e12;
constexpr double kBytesPerSecond = 0.7e12;

// Cuts costs[0 .. n) into `shares` consecutive non-empty runs minimising the largest sum.
std::vector<int> balanced_bounds(const std::vector<double>& costs, int shares) {
  const int n = static_cast<int>(costs.size());
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[static_cast<size_t>(i)];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[k][j]: the least largest sum of k runs covering the first j units; from[k][j]: the
  // start of the last run
  std::vector<std::vector<double>> best(static_cast<size_t>(shares) + 1,
                                        std::vector<double>(static_cast<size_t>(n) + 1, kInf));
  std::vector<std::vector<int>> from(static_cast<size_t>(shares) + 1,
                                     std::vector<int>(static_cast<size_t>(n) + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= shares; ++k) {
    for (int j = k; j <= n; ++j) {
      for (int i = k - 1; i < j; ++i) {
        const double v = std::max(best[k - 1][i], prefix[j] - prefix[i]);
        if (v < best[k][j]) {
          best[k][j] = v;
          from[k][j] = i;
        }
      }
    }
  }
  std::vector<int> bounds(static_cast<size_t>(shares) + 1, 0);
  bounds[static_cast<size_t>(shares)] = n;
  for (int k = shares; k > 0; --k) bounds[k - 1] = from[k][bounds[k]];
  return bounds;
}

}  // namespace

Result<PipelinePlan> plan_pipeline(const VaeWeights& weights, int shares, int64_t latent_height,
                                   int64_t latent_width, const StreamOptions& options,
                                   const std::vector<int>& cuts, DType dtype) {
  if (shares < 1) return invalid_argument("a pipelined decode needs at least one device");
  CountingBackend cb(dtype, BackendMemoryModel::cuda(), dtype_size(dtype));
  SEEDVAE_ASSIGN_OR_RETURN(std::unique_ptr<VideoVae> model, make_dry_video_vae(cb, weights));
  PipelinePlan plan;
  plan.units = model->decoder_units();
  const int n = static_cast<int>(plan.units.size());
  if (n == 0) {
    return unsupported("the " + std::string(family_name(weights.family)) +
                       " decoder runs whole on one device (no pipelined decode yet)");
  }
  if (shares > n) {
    return invalid_argument(std::to_string(shares) + " devices for a decoder of " +
                            std::to_string(n) + " units");
  }

  // Each unit's cost on a steady chunk (after a first chunk, so the causal state is in place):
  // the chunk runs unit by unit, as shares of one unit each would run it (the same ops).
  const int64_t z = model->latent_channels();
  const int64_t steady = std::max(1, options.chunk_latents);
  const int64_t head = options.lone_head ? 1 : steady + 1;
  CausalState state;
  const Tensor first = cb.declare(Shape{1, z, head, latent_height, latent_width});
  SEEDVAE_TRY(model->decode_chunk(first, state, options.chunk_options(0, -1)).take_status());
  Tensor x = cb.declare(Shape{1, z, steady, latent_height, latent_width});
  std::vector<double> costs(static_cast<size_t>(n));
  for (int u = 0; u < n; ++u) {
    cb.reset_flops();
    ChunkOptions co = options.chunk_options(1, -1);
    co.first_unit = u;
    co.end_unit = u + 1;
    SEEDVAE_ASSIGN_OR_RETURN(x, model->decode_chunk(x, state, co));
    costs[static_cast<size_t>(u)] =
        cb.flops() / kConvFlopsPerSecond + cb.made_bytes() / kBytesPerSecond;
  }

  if (cuts.empty()) {
    plan.bounds = balanced_bounds(costs, shares);
  } else {
    if (static_cast<int>(cuts.size()) != shares - 1) {
      return invalid_argument(std::to_string(cuts.size()) + " cuts for " + std::to_string(shares) +
                              " devices: give one fewer than the devices");
    }
    plan.bounds.push_back(0);
    for (int c : cuts) {
      if (c <= plan.bounds.back() || c >= n) {
        return invalid_argument("pipeline cut " + std::to_string(c) +
                                ": the cuts must rise within (0, " + std::to_string(n) + ")");
      }
      plan.bounds.push_back(c);
    }
    plan.bounds.push_back(n);
  }
  for (int s = 0; s < shares; ++s) {
    double sum = 0;
    for (int u = plan.bounds[s]; u < plan.bounds[s + 1]; ++u) sum += costs[u];
    plan.share_seconds.push_back(sum);
  }
  return plan;
}

// ---- the decode --------------------------------------------------------------------------------

namespace {

// Everything the devices share, under one lock (a few events per chunk).
class Pipeline {
 public:
  struct Item {
    int64_t chunk = 0;
    int64_t first_frame = 0;  // of the chunk's output
    Tensor t;
  };
  // Between share s and s + 1: at most kDepth activations wait; the receiver gives each one back
  // (`spent`) for its sender's thread to release. Two, so that the sender goes on while the
  // receiver's thread is busy with its own host work (the last share's downloads take ~60 ms
  // of a 1080p chunk's ~110 ms): with one, the first card waited 1.2 s of an 8.2 s decode on
  // two H200 (docs/scaling.md). The cost: one more activation held by the sender.
  static constexpr size_t kDepth = 2;
  struct Handoff {
    std::deque<Item> queue;
    std::vector<Tensor> spent;
    int in_flight = 0;
    bool closed = false;
    Backend* sender = nullptr;
  };
  // A chunk's frames [first_frame, first_frame + count): in `frames`, or in the gathered
  // output when the decode gathers.
  struct Output {
    int64_t chunk = 0;
    int64_t first_frame = 0, count = 0;
    HostTensor frames;
  };

  Pipeline(int shares, bool gather, int64_t out_frames)
      : gather(gather), out_frames(out_frames), handoffs_(static_cast<size_t>(shares)) {}

  // The whole output [1, C, out_frames, H, W] when gathering: made by the last share at its first
  // chunk and written by it alone (download_frames, frame-placed); the calling thread reads a
  // chunk's frames after taking its Output.
  const bool gather;
  const int64_t out_frames;
  HostTensor gathered;

  // Chunk buffers the calling thread has finished with, for the last share to download into
  // again (so each chunk does not fault fresh pages in).
  HostTensor take_buffer(const Shape& shape) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->shape() == shape) {
          HostTensor b = std::move(*it);
          free_.erase(it);
          return b;
        }
      }
    }
    return {};
  }
  void return_buffer(HostTensor b) {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < 4) free_.push_back(std::move(b));
  }

  void fail(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.is_ok()) error_ = std::move(s);
    cv_.notify_all();
  }
  Status error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  // The sender of handoff s (its thread): waits for room (fewer than kDepth queued), then queues
  // the activation. While it
  // waits, `idle` (the calling thread's outputs) runs without the lock. False once any device
  // failed.
  template <typename Idle>
  bool push(int s, Item item, Idle idle) {
    std::unique_lock<std::mutex> lock(mu_);
    Handoff& h = handoffs_[static_cast<size_t>(s)];
    for (;;) {
      if (!error_.is_ok()) return false;
      if (h.queue.size() < kDepth) break;
      if (!outputs_.empty()) {
        lock.unlock();
        idle();
        lock.lock();
        continue;
      }
      cv_.wait(lock);
    }
    h.queue.push_back(std::move(item));
    cv_.notify_all();
    return true;
  }
  // The receiver of handoff s: the next activation, or nothing at the end or after a failure.
  std::optional<Item> pop(int s) {
    std::unique_lock<std::mutex> lock(mu_);
    Handoff& h = handoffs_[static_cast<size_t>(s)];
    cv_.wait(lock, [&] { return !error_.is_ok() || !h.queue.empty() || h.closed; });
    if (!error_.is_ok() || h.queue.empty()) return std::nullopt;
    Item item = std::move(h.queue.front());
    h.queue.pop_front();
    ++h.in_flight;
    cv_.notify_all();  // room for the sender
    return item;
  }
  // The receiver is done with an activation it popped.
  void give_back(int s, Tensor t) {
    std::lock_guard<std::mutex> lock(mu_);
    Handoff& h = handoffs_[static_cast<size_t>(s)];
    h.spent.push_back(std::move(t));
    --h.in_flight;
    cv_.notify_all();
  }
  // The sender's thread: the activations given back so far (released by the caller).
  std::vector<Tensor> collect(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(handoffs_[static_cast<size_t>(s)].spent, {});
  }
  void set_sender(int s, Backend* b) {
    std::lock_guard<std::mutex> lock(mu_);
    handoffs_[static_cast<size_t>(s)].sender = b;
  }
  Backend* sender(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    return handoffs_[static_cast<size_t>(s)].sender;
  }
  // The sender's way out: no more activations; waits until the receiver holds none of its
  // tensors, and returns every one not released yet (queued after a failure, or given back).
  std::vector<Tensor> close(int s) {
    std::unique_lock<std::mutex> lock(mu_);
    Handoff& h = handoffs_[static_cast<size_t>(s)];
    h.closed = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return h.in_flight == 0 && (h.queue.empty() || !error_.is_ok()); });
    std::vector<Tensor> out = std::exchange(h.spent, {});
    for (Item& i : h.queue) out.push_back(std::move(i.t));
    h.queue.clear();
    return out;
  }

  // The last share's frames for the calling thread.
  void put_output(Output o) {
    std::lock_guard<std::mutex> lock(mu_);
    outputs_.push_back(std::move(o));
    cv_.notify_all();
  }
  void close_outputs() {
    std::lock_guard<std::mutex> lock(mu_);
    outputs_closed_ = true;
    cv_.notify_all();
  }
  // Every output ready now; with `wait`, blocks until there is one, the last share ended or any
  // device failed.
  std::deque<Output> take_outputs(bool wait, bool* ended) {
    std::unique_lock<std::mutex> lock(mu_);
    if (wait) {
      cv_.wait(lock, [&] { return !outputs_.empty() || outputs_closed_ || !error_.is_ok(); });
    }
    *ended = outputs_closed_ || !error_.is_ok();
    return std::exchange(outputs_, {});
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Status error_;
  std::vector<Handoff> handoffs_;  // [s]: from share s to share s + 1
  std::deque<Output> outputs_;
  bool outputs_closed_ = false;
  std::vector<HostTensor> free_;
};

ChunkOptions share_options(const StreamOptions& options, const PipelinePlan& plan, int share,
                           int64_t chunk, int64_t tile) {
  ChunkOptions co = options.chunk_options(chunk, tile);
  co.first_unit = plan.bounds[static_cast<size_t>(share)];
  co.end_unit = plan.bounds[static_cast<size_t>(share) + 1];
  return co;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Share s >= 1 on its worker thread, for one decode: imports each activation from share s - 1,
// runs its units, and hands the result on (or, the last share, downloads the frames).
void run_share(Pipeline& pipe, int s, VideoVae& model, const PipelinePlan& plan,
               const StreamOptions& options, const StreamHooks& hooks, PipelineStats& stats) {
  const bool last = s == plan.shares() - 1;
  Backend& backend = model.backend();
  if (!last) pipe.set_sender(s, &backend);
  backend.reset_peak();
  CausalState state;
  double busy = 0;
  int64_t imported = 0;
  double import_ms = 0;
  std::vector<Tensor> spent;
  PipelineWaits waits;
  CopyPipeline copies(backend, options.async_tiles);
  for (;;) {
    auto tw = std::chrono::steady_clock::now();
    auto item = pipe.pop(s - 1);
    waits.input_ms += ms_since(tw);
    if (!item) break;
    const auto t0 = std::chrono::steady_clock::now();
    // the previous chunk's work first, so the copy's own time shows (import_ms)
    Status st = backend.synchronize();
    waits.sync_ms += ms_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    Result<Tensor> x = internal_error("not imported");
    if (st.is_ok()) {
      x = backend.import_tensor(*pipe.sender(s - 1), item->t);
      st = x.status();
    }
    import_ms += ms_since(t1);
    pipe.give_back(s - 1, std::move(item->t));
    if (st.is_ok()) imported += x->shape.numel() * dtype_size(x->dtype);
    if (st.is_ok() && hooks.cancel) st = hooks.cancel->check();
    Result<Tensor> y = internal_error("not run");
    if (st.is_ok()) {
      tw = std::chrono::steady_clock::now();
      y = model.decode_chunk(x.value(), state,
                             share_options(options, plan, s, item->chunk, hooks.tile));
      waits.enqueue_ms += ms_since(tw);
      st = y.status();
    }
    x = Tensor{};
    tw = std::chrono::steady_clock::now();
    if (st.is_ok() && last) {
      // downloaded while the next chunk computes (as the single-device stream does)
      const Shape ys = y->shape;
      auto o = std::make_shared<Pipeline::Output>(
          Pipeline::Output{item->chunk, item->first_frame, ys[2], {}});
      if (pipe.gather) {
        if (pipe.gathered.empty()) {
          Shape whole = ys;
          whole[2] = pipe.out_frames;
          Result<HostTensor> made = HostTensor::create(DType::kF32, whole);
          st = made.status();
          if (st.is_ok()) pipe.gathered = std::move(made).value();
        }
        if (st.is_ok() && item->first_frame + ys[2] > pipe.out_frames) {
          st = internal_error("the pipeline produced too many frames");
        }
        if (st.is_ok()) st = copies.download(y.value(), pipe.gathered, item->first_frame);
      } else {
        o->frames = pipe.take_buffer(ys);
        if (o->frames.empty()) {
          Result<HostTensor> made = HostTensor::create(DType::kF32, ys);
          st = made.status();
          if (st.is_ok()) o->frames = std::move(made).value();
        }
        if (st.is_ok()) st = copies.download(y.value(), o->frames, 0);
      }
      y = Tensor{};
      if (st.is_ok()) {
        st = copies.end_step([&pipe, o]() {
          pipe.put_output(std::move(*o));
          return Status::ok();
        });
      }
      waits.host_ms += ms_since(tw);
    } else if (st.is_ok()) {
      st = backend.synchronize();  // the next share reads it from another stream
      waits.sync_ms += ms_since(tw);
      spent = pipe.collect(s);
      spent.clear();
      tw = std::chrono::steady_clock::now();
      const bool pushed =
          st.is_ok() && pipe.push(s, {item->chunk, item->first_frame, std::move(y).value()}, [] {});
      waits.output_ms += ms_since(tw);
      if (st.is_ok() && !pushed) break;
    }
    busy += ms_since(t0);
    if (!st.is_ok()) {
      pipe.fail(st.with_context("device share " + std::to_string(s)));
      break;
    }
  }
  if (last) {
    const auto t0 = std::chrono::steady_clock::now();
    if (Status st = copies.drain(); !st.is_ok()) {
      pipe.fail(st.with_context("device share " + std::to_string(s)));
    }
    busy += ms_since(t0);
  }
  // drain what is still queued for this share (after a failure), then close its own handoff
  while (auto item = pipe.pop(s - 1)) pipe.give_back(s - 1, std::move(item->t));
  if (last) {
    pipe.close_outputs();
  } else {
    spent = pipe.close(s);
    spent.clear();
  }
  state.reset();
  stats.busy_ms[static_cast<size_t>(s)] = busy;
  stats.memory[static_cast<size_t>(s)] = backend.memory_stats();
  stats.backends[static_cast<size_t>(s)] = backend.name();
  stats.imported_bytes[static_cast<size_t>(s)] = imported;
  stats.import_ms[static_cast<size_t>(s)] = import_ms;
  stats.waits[static_cast<size_t>(s)] = waits;
}

}  // namespace

// ---- the decode ------------------------------------------------------------------------------

Result<HostTensor> decode_pipelined(DeviceWorkers& devices, const PipelinePlan& plan,
                                    const HostTensor& latent, const StreamOptions& options,
                                    const StreamHooks& hooks, PipelineStats* stats_out) {
  VideoVae& first = devices.first();
  const Shape& s = latent.shape();
  if (s.rank() != 5 || s[0] != 1 || s[2] < 1) {
    return invalid_argument("decode needs a [1, C, t, h, w] latent, got " + s.to_string());
  }
  const int shares = plan.shares();
  const auto chunks = plan_chunks(s[2], options.chunk_latents, options.lone_head);
  const auto total = static_cast<int64_t>(chunks.size());
  const int f = first.temporal_factor();
  const int64_t out_frames = (s[2] - 1) * f + 1;
  if (shares != devices.devices() ||
      static_cast<size_t>(plan.bounds.back()) != first.decoder_units().size()) {
    return invalid_argument("the pipeline plan does not fit this decoder and its devices");
  }
  if (shares == 1) return decode_latent(first, latent, options, hooks);

  PipelineStats stats;
  stats.backends.resize(static_cast<size_t>(shares));
  stats.busy_ms.resize(static_cast<size_t>(shares));
  stats.memory.resize(static_cast<size_t>(shares));
  stats.imported_bytes.resize(static_cast<size_t>(shares));
  stats.import_ms.resize(static_cast<size_t>(shares));
  stats.waits.resize(static_cast<size_t>(shares));
  Pipeline pipe(shares, hooks.gathers(), out_frames);
  Backend& backend = first.backend();
  pipe.set_sender(0, &backend);
  // The calling thread: share 0, and the frames as they arrive.
  HostTensor out;
  int64_t produced = 0, received = 0;
  Status sink_status;
  auto deliver = [&](bool wait) -> bool {  // false: the last share has ended
    bool ended = false;
    std::deque<Pipeline::Output> ready = pipe.take_outputs(wait, &ended);
    for (Pipeline::Output& o : ready) {
      if (sink_status.is_ok()) {
        sink_status = [&]() -> Status {
          if (hooks.on_chunk) {
            SEEDVAE_TRY(hooks.on_chunk(
                o.first_frame,
                pipe.gather ? slice_time(pipe.gathered, o.first_frame, o.first_frame + o.count)
                            : o.frames));
          }
          if (hooks.progress) hooks.progress->report("decode", o.chunk + 1, total);
          return Status::ok();
        }();
        if (!sink_status.is_ok()) pipe.fail(sink_status);
      }
      produced += o.count;
      ++received;
      if (!o.frames.empty()) pipe.return_buffer(std::move(o.frames));
    }
    return !ended;
  };

  CausalState state;
  double busy = 0, host_ms = 0;
  PipelineWaits& waits = stats.waits[0];
  auto share0 = [&] {
    for (int64_t i = 0; i < total; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      Status st = hooks.cancel ? hooks.cancel->check() : Status::ok();
      Result<Tensor> y = internal_error("not run");
      const auto [b, e] = chunks[static_cast<size_t>(i)];
      if (st.is_ok()) {
        const bool whole = b == 0 && e == s[2];
        Result<Tensor> x = backend.upload(whole ? latent : slice_time(latent, b, e));
        st = x.status();
        if (st.is_ok()) {
          const auto e0 = std::chrono::steady_clock::now();
          y = first.decode_chunk(x.value(), state, share_options(options, plan, 0, i, hooks.tile));
          waits.enqueue_ms += ms_since(e0);
          st = y.status();
        }
        // the host's work on finished chunks while the device computes this one
        const auto h0 = std::chrono::steady_clock::now();
        deliver(false);
        host_ms += ms_since(h0);
        const auto s0 = std::chrono::steady_clock::now();
        if (st.is_ok()) st = backend.synchronize();
        waits.sync_ms += ms_since(s0);
      }
      if (!st.is_ok()) {
        pipe.fail(st);
        break;
      }
      std::vector<Tensor> spent = pipe.collect(0);
      spent.clear();
      busy += ms_since(t0);
      const int64_t first_frame = b == 0 ? 0 : b * f - (f - 1);
      const auto p0 = std::chrono::steady_clock::now();
      double idle_ms = 0;
      const bool pushed = pipe.push(0, {i, first_frame, std::move(y).value()}, [&] {
        const auto d0 = std::chrono::steady_clock::now();
        deliver(false);
        idle_ms += ms_since(d0);
      });
      waits.output_ms += ms_since(p0) - idle_ms;
      waits.host_ms += idle_ms;
      if (!pushed) break;
    }
    std::vector<Tensor> spent = pipe.close(0);
    spent.clear();
    while (deliver(true)) {
    }
    deliver(false);
  };
  // every share's failure goes to the pipeline (pipe.error() below): the tasks return ok
  (void)devices.run([&](int d, VideoVae& model) -> Status {
    if (d == 0) {
      share0();
    } else {
      run_share(pipe, d, model, plan, options, hooks, stats);
    }
    return Status::ok();
  });
  state.reset();
  first.flush_telemetry();
  stats.busy_ms[0] = busy - host_ms;
  waits.host_ms += host_ms;
  stats.memory[0] = backend.memory_stats();
  stats.backends[0] = backend.name();
  if (stats_out) *stats_out = std::move(stats);

  SEEDVAE_TRY(pipe.error());
  if (pipe.gather) out = std::move(pipe.gathered);
  if (received != total || produced != out_frames) {
    return internal_error("the pipeline produced " + std::to_string(produced) + " frames in " +
                          std::to_string(received) + " chunks, expected " +
                          std::to_string(out_frames) + " in " + std::to_string(total));
  }
  return out;
}

Result<HostTensor> decode_latent_pipelined(VideoVae& first, const DeviceEngineFactory& make,
                                           const PipelinePlan& plan, const HostTensor& latent,
                                           const StreamOptions& options, const StreamHooks& hooks,
                                           PipelineStats* stats) {
  SEEDVAE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceWorkers> devices,
                           DeviceWorkers::create(first, make, plan.shares()));
  return decode_pipelined(*devices, plan, latent, options, hooks, stats);
}

}  // namespace seedvae
