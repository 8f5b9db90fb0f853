#include "core/schedule/tiled.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include "core/schedule/copy_pipeline.h"
#include "core/schedule/device_workers.h"
#include "core/schedule/exact_tiling.h"
#include "core/schedule/planner.h"
#include "core/schedule/wan_tiles.h"
#include "core/vae/wan_model.h"

namespace seedvae {

std::string_view tiling_mode_name(TilingMode mode) {
  switch (mode) {
    case TilingMode::kOff: return "off";
    case TilingMode::kBlend: return "blend";
    case TilingMode::kExact: return "exact";
  }
  return "?";
}

Result<TilingMode> parse_tiling_mode(std::string_view s) {
  if (s == "off" || s == "none") return TilingMode::kOff;
  if (s == "blend") return TilingMode::kBlend;
  if (s == "exact") return TilingMode::kExact;
  return invalid_argument("tiling mode must be off, blend or exact, got '" + std::string(s) + "'");
}

namespace {

using Clock = std::chrono::steady_clock;

// A tile's causal state parked on the host between temporal chunks.
struct ParkedState {
  bool started = false;
  std::map<std::string, HostTensor> memory;
  int64_t bytes() const {
    int64_t n = 0;
    for (const auto& [k, t] : memory) n += t.nbytes();
    return n;
  }
};

// Moves a tile's causal state to the host through `pipe`: its downloads join the step being built,
// and convert_parked() turns it into the backend's activation dtype (lossless, half the host
// memory for fp16/bf16) when that step is finished -- before the state is unparked, at least one
// chunk later, since the scheduler drains the pipeline at the end of every chunk.
Status park_async(CopyPipeline& pipe, CausalState& state, ParkedState& parked) {
  parked.started = state.started;
  parked.memory.clear();
  for (auto& [k, t] : state.memory) {
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor h, HostTensor::create(DType::kF32, t.shape));
    auto [it, inserted] = parked.memory.emplace(k, std::move(h));
    SEEDVAE_TRY(pipe.download(t, it->second, 0));
  }
  state.reset();
  return Status::ok();
}

void convert_parked(ParkedState& parked, DType dtype) {
  if (dtype == DType::kF32) return;
  for (auto& [k, h] : parked.memory) h = h.to(dtype);
}

Status unpark(Backend& backend, const ParkedState& parked, CausalState& state) {
  state.reset();
  state.started = parked.started;
  for (const auto& [k, h] : parked.memory) {
    SEEDVAE_ASSIGN_OR_RETURN(Tensor t, backend.upload(h));
    state.memory.emplace(k, std::move(t));
  }
  return Status::ok();
}

// Region [y, y+h) x [x, x+w) of a 5-D host tensor (any dtype), as fp32.
HostTensor crop_hw(const HostTensor& src_any, int64_t y0, int64_t x0, int64_t h, int64_t w) {
  const HostTensor src = src_any.dtype() == DType::kF32 ? src_any : src_any.to(DType::kF32);
  const Shape& s = src.shape();
  HostTensor out(DType::kF32, Shape{s[0], s[1], s[2], h, w});
  const int64_t planes = s[0] * s[1] * s[2];
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t y = 0; y < h; ++y) {
      std::memcpy(out.data<float>() + (p * h + y) * w,
                  src.data<float>() + (p * s[3] + y0 + y) * s[4] + x0,
                  static_cast<size_t>(w) * sizeof(float));
    }
  }
  return out;
}

Result<VaeModel*> seedvr2_model(VideoVae& model) {
  if (auto* m = dynamic_cast<VaeModel*>(&model)) return m;
  return unsupported("blend tiling is SeedVR2's reference tiling; a " +
                     std::string(family_name(model.family())) +
                     " VAE runs untiled or with exact tiling (--tiling exact)");
}

// Finished steps of a tiled run, applied on the calling thread in the order one device runs
// them (the key: a step's place in that order), whichever device finished them and when: blending
// is a sum, whose rounding depends on its order.
class OrderedSteps {
 public:
  // Any thread: step `key` is finished; `apply` blends it.
  void put(int64_t key, std::function<Status()> apply) {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.emplace(key, std::move(apply));
    cv_.notify_all();
  }
  // Any thread: a device has failed; apply() waits no more.
  void stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    cv_.notify_all();
  }
  // The calling thread: applies the finished steps that come next in order, up to key `end`;
  // with `wait`, until all of them are applied (or stop()).
  Status apply(int64_t end, bool wait) {
    for (;;) {
      std::function<Status()> f;
      {
        std::unique_lock<std::mutex> lock(mu_);
        auto next_ready = [&] { return !ready_.empty() && ready_.begin()->first == next_; };
        if (wait) cv_.wait(lock, [&] { return stopped_ || next_ >= end || next_ready(); });
        if (next_ >= end || !next_ready()) return Status::ok();
        f = std::move(ready_.begin()->second);
        ready_.erase(ready_.begin());
      }
      SEEDVAE_TRY(f());
      std::lock_guard<std::mutex> lock(mu_);
      ++next_;
    }
  }
  int64_t applied() {
    std::lock_guard<std::mutex> lock(mu_);
    return next_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, std::function<Status()>> ready_;
  int64_t next_ = 0;
  bool stopped_ = false;
};

struct BlendJob {
  VaeModel& model;
  const HostTensor& input;
  const TileOptions& options;
  const StreamOptions& stream;
  const StreamHooks& hooks;
  TileHooks* tile_hooks;
  bool encode;
};

// Blended tiling, chunk-major. Encode: input pixels, output moments blended in latent units.
// Decode: latent input, output pixels blended in pixels.
Result<HostTensor> run_blend(const BlendJob& job) {
  VaeModel& model = job.model;
  Backend& backend = model.backend();
  const VaeConfig& cfg = model.config();
  const int sf = cfg.spatial_factor();
  const int tf = cfg.temporal_factor();
  const Shape& is = job.input.shape();
  const auto t0 = Clock::now();

  const int64_t lat_h = job.encode ? (is[3] + sf - 1) / sf : is[3];
  const int64_t lat_w = job.encode ? (is[4] + sf - 1) / sf : is[4];
  SEEDVAE_ASSIGN_OR_RETURN(TilePlan plan,
                           make_tile_plan(lat_h, lat_w, job.options.spec, job.options.layout, sf));
  TileRunReport* report = job.tile_hooks ? job.tile_hooks->report : nullptr;

  // Temporal chunks of the input (latents for decode, frames for encode).
  const int64_t latents = job.encode ? (is[2] - 1) / tf + 1 : is[2];
  auto chunks = plan_chunks(latents, job.stream.chunk_latents, job.stream.lone_head);
  std::vector<std::pair<int64_t, int64_t>> in_ranges = chunks;
  if (job.encode) {
    for (auto& [b, e] : in_ranges) {
      b = b == 0 ? 0 : (b - 1) * tf + 1;
      e = (e - 1) * tf + 1;
    }
  }

  const BlendSpace space = job.encode ? BlendSpace::kLatents : BlendSpace::kPixels;
  const int64_t unit = job.encode ? 1 : sf;  // output units per latent
  const int64_t out_h = job.encode ? lat_h : is[3] * sf;
  const int64_t out_w = job.encode ? lat_w : is[4] * sf;
  const int64_t ntiles = static_cast<int64_t>(plan.tiles.size());

  // Weights per tile (separable) and their accumulated sum (the same for every chunk).
  std::vector<std::vector<float>> wrows(static_cast<size_t>(plan.rows.count()));
  std::vector<std::vector<float>> wcols(static_cast<size_t>(plan.cols.count()));
  for (int64_t r = 0; r < plan.rows.count(); ++r) {
    wrows[static_cast<size_t>(r)] = axis_blend_weights(plan, true, r, space);
  }
  for (int64_t c = 0; c < plan.cols.count(); ++c) {
    wcols[static_cast<size_t>(c)] = axis_blend_weights(plan, false, c, space);
  }
  std::vector<float> cnt(static_cast<size_t>(out_h * out_w), 0.f);
  for (const PlannedTile& t : plan.tiles) {
    const auto& wr = wrows[static_cast<size_t>(t.row)];
    const auto& wc = wcols[static_cast<size_t>(t.col)];
    const int64_t oy = t.latent.y * unit, ox = t.latent.x * unit;
    for (size_t i = 0; i < wr.size(); ++i) {
      for (size_t j = 0; j < wc.size(); ++j) {
        cnt[static_cast<size_t>((oy + static_cast<int64_t>(i)) * out_w + ox) + j] += wr[i] * wc[j];
      }
    }
  }

  if (report) {
    report->mode = TilingMode::kBlend;
    report->plan = plan;
    report->rects.clear();
    report->output_rects.clear();
    for (const PlannedTile& t : plan.tiles) {
      report->rects.push_back(job.encode ? Rect{t.pixel.y, t.pixel.x,
                                                std::min(t.pixel.h, is[3] - t.pixel.y),
                                                std::min(t.pixel.w, is[4] - t.pixel.x)}
                                         : t.pixel);
      report->output_rects.push_back(job.encode ? t.latent : t.pixel);
    }
    report->tile_sums.assign(static_cast<size_t>(ntiles), {});
    report->tile_counts.assign(static_cast<size_t>(ntiles), 0);
    report->chunks = static_cast<int64_t>(chunks.size());
    report->tiles_run = 0;
    report->host_state_bytes = 0;
  }

  // Output frames per chunk (decode: 4t-3 for the first chunk, 4t later; encode: latents).
  std::vector<int64_t> out_first(chunks.size() + 1, 0);
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const int64_t n = chunks[ci].second - chunks[ci].first;
    out_first[ci + 1] = out_first[ci] + (job.encode ? n : (ci == 0 ? tf * n - (tf - 1) : tf * n));
  }
  const int64_t out_t_total = out_first.back();
  const int64_t out_c = job.encode ? 2 * cfg.latent_channels : cfg.out_channels;

  // Order: chunk-major parks every tile's causal state on the host between chunks (bounded by
  // the frame, streams chunks out); tile-major keeps one state on the backend and accumulates the
  // whole clip (bounded by the clip). Auto picks the smaller host footprint.
  bool tile_major = job.options.order == TileOrder::kTileMajor;
  if (job.options.order == TileOrder::kAuto) {
    const int64_t clip_bytes = 4 * out_c * out_t_total * out_h * out_w;
    int64_t tile_area = 0;
    for (const PlannedTile& t : plan.tiles) tile_area += t.latent.area();
    const double area_factor = static_cast<double>(tile_area) / static_cast<double>(lat_h * lat_w);
    const int64_t state_bytes = static_cast<int64_t>(
        area_factor * static_cast<double>(causal_state_bytes(
                          cfg, job.encode, lat_h, lat_w, job.stream.chunk_latents,
                          dtype_size(backend.activation_dtype()))));
    const int64_t chunk_acc = 4 * out_c * (out_first.size() > 1 ? out_first[1] : 0) * out_h * out_w;
    tile_major = chunks.size() > 1 && ntiles > 1 && clip_bytes < state_bytes + chunk_acc &&
                 job.hooks.gathers();  // streaming out: only chunk-major is bounded
  }
  if (report) report->tile_major = tile_major;

  std::vector<ParkedState> parked(tile_major ? 0 : static_cast<size_t>(ntiles));
  const auto nchunks = static_cast<int64_t>(chunks.size());
  const int64_t total_steps = ntiles * nchunks;
  int64_t steps = 0;
  const std::string stage = job.encode ? "encode tiles" : "decode tiles";
  const DType park_dtype = backend.activation_dtype();

  // Several devices (TileOptions::devices, more than one tile): whichever device is free takes the
  // next tile in index order -- chunk-major, the tile's chunk (its causal state is parked on the
  // host, so any device can take it up); tile-major, every chunk of the tile -- on its own thread
  // and backend. The steps' outputs are blended on the calling thread in the one-device order
  // (OrderedSteps), so every output pixel is the one-device sum, bit for bit, when each device
  // computes a tile as device 0 would (the same kernels: DeviceWorkers::create shares the tuning).
  DeviceWorkers* devices = job.options.devices;
  if (devices != nullptr && &devices->first() != &model) {
    return invalid_argument("blend tiles over several devices: the run's model is not device 0's");
  }
  if (devices != nullptr && (ntiles < 2 || devices->devices() < 2)) devices = nullptr;
  const int lanes = devices ? devices->devices() : 1;
  OrderedSteps ordered;
  std::atomic<int64_t> next_work{0};
  std::atomic<bool> stopping{false};
  std::vector<TileDeviceStats> lane_stats(static_cast<size_t>(lanes));
  std::vector<int64_t> lane_state_bytes(static_cast<size_t>(lanes), 0);  // tile-major: the largest

  // The blend of one finished (tile, chunk) step on the calling thread: report it and accumulate
  // it into `sum` (frames [frame0, frame0 + T) of its T axis).
  auto blend_step = [&](const PlannedTile& pt, size_t ci, const HostTensor& y, HostTensor& sum,
                        int64_t frame0) -> Status {
    const auto ti = static_cast<size_t>(pt.index);
    const Shape& ys = y.shape();
    const Shape& as = sum.shape();
    const auto& wr = wrows[static_cast<size_t>(pt.row)];
    const auto& wc = wcols[static_cast<size_t>(pt.col)];
    const int64_t th = static_cast<int64_t>(wr.size()), tw = static_cast<int64_t>(wc.size());
    if (ys[1] != out_c || ys[3] < th || ys[4] < tw || frame0 + ys[2] > as[2]) {
      return internal_error("tile " + std::to_string(pt.index) + " output " + ys.to_string() +
                            " does not fit its " + std::to_string(th) + "x" + std::to_string(tw) +
                            " region");
    }
    if (job.tile_hooks && job.tile_hooks->on_tile) {
      TileEvent ev;
      ev.index = pt.index;
      ev.total = ntiles;
      ev.chunk = static_cast<int64_t>(ci);
      ev.first_frame = out_first[ci];
      ev.pixel = job.encode ? Rect{pt.pixel.y, pt.pixel.x, std::min(pt.pixel.h, is[3] - pt.pixel.y),
                                   std::min(pt.pixel.w, is[4] - pt.pixel.x)}
                            : pt.pixel;
      ev.latent = pt.latent;
      ev.data = &y;
      SEEDVAE_TRY(job.tile_hooks->on_tile(ev));
    }
    // sum += (tile * w_h) * w_w, as upstream (pt.mul_(w_h).mul_(w_w); result += tile).
    const int64_t oy = pt.latent.y * unit, ox = pt.latent.x * unit;
    if (report) report->tile_sums[ti].resize(static_cast<size_t>(out_c), 0.0);
    // on every core, a plane (channel and frame) each: the sums of the clip's frames on the host
    // are the serial part of a run over several devices; each pixel's sum keeps its order, and
    // the planes' sums for the report are added in plane order
    const int64_t planes = out_c * ys[2];
    std::vector<double> plane_sums(static_cast<size_t>(planes), 0.0);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      const int64_t c = p / ys[2], f = p % ys[2];
      const float* src = y.data<float>() + p * ys[3] * ys[4];
      float* dst = sum.data<float>() + ((c * as[2] + frame0 + f) * out_h) * out_w;
      double plane_sum = 0;
      for (int64_t i = 0; i < th; ++i) {
        const float whi = wr[static_cast<size_t>(i)];
        const float* sr = src + i * ys[4];
        float* d = dst + (oy + i) * out_w + ox;
        for (int64_t j = 0; j < tw; ++j) {
          d[j] += (sr[j] * whi) * wc[static_cast<size_t>(j)];
          plane_sum += sr[j];
        }
      }
      plane_sums[static_cast<size_t>(p)] = plane_sum;
    }
    if (report) {
      for (int64_t p = 0; p < planes; ++p) {
        report->tile_sums[ti][static_cast<size_t>(p / ys[2])] += plane_sums[static_cast<size_t>(p)];
      }
    }
    if (report) {
      report->tile_counts[ti] += ys[2] * th * tw;
      ++report->tiles_run;
    }
    ++steps;
    if (job.hooks.progress) job.hooks.progress->report(stage, steps, total_steps);
    return Status::ok();
  };

  // One (tile, chunk) step on a device's model `m`: run the tile's chunk with `state`, download
  // its output through `pipe` (at once or while the next step computes:
  // StreamOptions::async_tiles), then hand it to `ordered` as step `key` of the one-device order.
  // `park_into`, if given, receives the tile's causal state (chunk-major order) in the same step.
  auto step = [&](VaeModel& m, CopyPipeline& pipe, const PlannedTile& tile, size_t ci,
                  const HostTensor& chunk_in, CausalState& state, HostTensor& acc, int64_t frame0,
                  ParkedState* park_into, int64_t key) -> Status {
    if (job.hooks.cancel) SEEDVAE_TRY(job.hooks.cancel->check());
    Backend& be = m.backend();
    const VaeModel::SummarySpan summary = m.begin_summary();
    HostTensor tin;
    if (job.encode) {
      const int64_t y1 = std::min(tile.latent.y_end() * sf, is[3]);
      const int64_t x1 = std::min(tile.latent.x_end() * sf, is[4]);
      tin = crop_hw(chunk_in, tile.latent.y * sf, tile.latent.x * sf, y1 - tile.latent.y * sf,
                    x1 - tile.latent.x * sf);
    } else {
      tin = crop_hw(chunk_in, tile.latent.y, tile.latent.x, tile.latent.h, tile.latent.w);
    }
    SEEDVAE_ASSIGN_OR_RETURN(Tensor x, be.upload(tin));
    tin = HostTensor();
    const ChunkOptions chunk_options =
        job.stream.chunk_options(static_cast<int64_t>(ci), tile.index);
    Result<Tensor> yr = job.encode ? m.encode_chunk(x, state, chunk_options)
                                   : m.decode_chunk(x, state, chunk_options);
    if (!yr.is_ok()) return yr.take_status().with_context("tile " + std::to_string(tile.index));
    x = {};
    Tensor yt = std::move(yr).value();
    if (yt.shape.rank() != 5) {
      return internal_error("tile " + std::to_string(tile.index) + " output " +
                            yt.shape.to_string() + " is not 5-D");
    }
    // the output lands here; shared with the finish step, which runs after the copy
    auto out = std::make_shared<HostTensor>();
    SEEDVAE_ASSIGN_OR_RETURN(*out, HostTensor::create(DType::kF32, yt.shape));
    SEEDVAE_TRY(pipe.download(yt, *out, 0));
    yt = {};
    if (park_into) SEEDVAE_TRY(park_async(pipe, state, *park_into));
    SEEDVAE_TRY(m.end_summary("tile", summary, static_cast<int64_t>(ci), tile.index));
    return pipe.end_step([&, out, ci, frame0, park_into, key, tp = &tile, ap = &acc]() -> Status {
      if (park_into) convert_parked(*park_into, park_dtype);
      ordered.put(key, [&blend_step, out, ci, frame0, tp, ap]() {
        return blend_step(*tp, ci, *out, *ap, frame0);
      });
      return Status::ok();
    });
  };

  // Runs `work` (the steps of one device: it takes tiles from next_work) on every device at once,
  // device 0 on the calling thread blending every device's steps up to `end_key` as they come.
  auto run_lanes = [&](int64_t end_key,
                       const std::function<Status(VaeModel&, CopyPipeline&, int)>& work) -> Status {
    next_work = 0;
    auto lane = [&](int d, VaeModel& m) -> Status {
      Backend& be = m.backend();
      const auto lane_start = Clock::now();
      CopyPipeline pipe(be, job.stream.async_tiles);
      Status st = work(m, pipe, d);
      if (st.is_ok()) st = pipe.drain();
      m.flush_telemetry();
      TileDeviceStats& ls = lane_stats[static_cast<size_t>(d)];
      ls.busy_ms += std::chrono::duration<double, std::milli>(Clock::now() - lane_start).count();
      ls.backend = be.name();
      ls.memory = be.memory_stats();
      if (!st.is_ok()) {
        stopping = true;
        ordered.stop();
        return devices && st.code() != StatusCode::kCancelled
                   ? st.with_context("device " + std::to_string(d))
                   : st;
      }
      // the other devices' steps (a device that failed stops the wait; its error is returned);
      // a blend that fails (a hook's error, a cancel) stops the others too
      if (d != 0) return Status::ok();
      st = ordered.apply(end_key, true);
      if (!st.is_ok()) stopping = true;
      return st;
    };
    Status st = devices ? devices->run([&](int d, VideoVae& vm) -> Status {
      if (d == 0) return lane(0, model);
      SEEDVAE_ASSIGN_OR_RETURN(VaeModel * m, seedvr2_model(vm));
      return lane(d, *m);
    })
                        : lane(0, model);
    SEEDVAE_TRY(st);
    if (ordered.applied() != end_key) {
      return internal_error("tiled run stopped at step " + std::to_string(ordered.applied()) +
                            " of " + std::to_string(end_key));
    }
    return Status::ok();
  };
  // the next tile for device d, or -1 (none left, or a device failed)
  auto take_tile = [&](int d) -> int64_t {
    if (stopping) return -1;
    const int64_t t = next_work++;
    if (t >= ntiles) return -1;
    ++lane_stats[static_cast<size_t>(d)].tiles;
    return t;
  };
  if (devices) {
    // the other devices' peaks are this run's own (device 0's is the caller's)
    const DeviceWorkers::Task reset = [](int d, VideoVae& vm) {
      if (d > 0) vm.backend().reset_peak();
      return Status::ok();
    };
    SEEDVAE_TRY(devices->run(reset));
  }
  auto normalise = [&](HostTensor& acc) {
    const int64_t hw = out_h * out_w;
    const int64_t planes = acc.shape()[1] * acc.shape()[2];
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      float* d = acc.data<float>() + p * hw;
      for (int64_t i = 0; i < hw; ++i) d[i] /= std::max(cnt[static_cast<size_t>(i)], 1e-6f);
    }
  };
  auto chunk_input = [&](size_t ci) {
    const auto [b, e] = in_ranges[ci];
    return (b == 0 && e == is[2]) ? job.input : slice_time(job.input, b, e);
  };

  HostTensor result;
  if (tile_major) {
    SEEDVAE_ASSIGN_OR_RETURN(
        HostTensor acc,
        HostTensor::create(DType::kF32, Shape{1, out_c, out_t_total, out_h, out_w}));
    auto tiles_whole = [&](VaeModel& m, CopyPipeline& pipe, int d) -> Status {
      for (int64_t t = take_tile(d); t >= 0; t = take_tile(d)) {
        const PlannedTile& tile = plan.tiles[static_cast<size_t>(t)];
        CausalState state;
        for (size_t ci = 0; ci < chunks.size(); ++ci) {
          SEEDVAE_TRY(step(m, pipe, tile, ci, chunk_input(ci), state, acc, out_first[ci], nullptr,
                           t * nchunks + static_cast<int64_t>(ci)));
          if (d == 0) SEEDVAE_TRY(ordered.apply(total_steps, false));
        }
        int64_t& most = lane_state_bytes[static_cast<size_t>(d)];
        most = std::max(most, state.bytes());
      }
      return Status::ok();
    };
    SEEDVAE_TRY(run_lanes(total_steps, tiles_whole));
    if (report) {
      report->host_state_bytes =
          *std::max_element(lane_state_bytes.begin(), lane_state_bytes.end());
    }
    normalise(acc);
    if (job.hooks.on_chunk) {
      for (size_t ci = 0; ci < chunks.size(); ++ci) {
        SEEDVAE_TRY(
            job.hooks.on_chunk(out_first[ci], slice_time(acc, out_first[ci], out_first[ci + 1])));
      }
    }
    result = std::move(acc);
  } else {
    CausalState single_state;  // one tile: its state stays on the (one) backend
    std::vector<HostTensor> pieces;
    for (size_t ci = 0; ci < chunks.size(); ++ci) {
      const HostTensor chunk_in = chunk_input(ci);
      SEEDVAE_ASSIGN_OR_RETURN(
          HostTensor acc,
          HostTensor::create(DType::kF32,
                             Shape{1, out_c, out_first[ci + 1] - out_first[ci], out_h, out_w}));
      const int64_t end_key = (static_cast<int64_t>(ci) + 1) * ntiles;
      auto tiles_of_chunk = [&](VaeModel& m, CopyPipeline& pipe, int d) -> Status {
        for (int64_t t = take_tile(d); t >= 0; t = take_tile(d)) {
          const PlannedTile& tile = plan.tiles[static_cast<size_t>(t)];
          CausalState local;
          CausalState& state = ntiles == 1 ? single_state : local;
          if (ci > 0 && ntiles > 1) SEEDVAE_TRY(unpark(m.backend(), parked[t], state));
          const bool park_it = ntiles > 1 && ci + 1 < chunks.size();
          SEEDVAE_TRY(step(m, pipe, tile, ci, chunk_in, state, acc, 0,
                           park_it ? &parked[static_cast<size_t>(t)] : nullptr,
                           static_cast<int64_t>(ci) * ntiles + t));
          if (d == 0) SEEDVAE_TRY(ordered.apply(end_key, false));
        }
        return Status::ok();
      };
      SEEDVAE_TRY(run_lanes(end_key, tiles_of_chunk));
      if (report) {
        int64_t all = 0;
        for (const ParkedState& p : parked) all += p.bytes();
        report->host_state_bytes = std::max(report->host_state_bytes, all);
      }
      normalise(acc);
      if (job.hooks.on_chunk) SEEDVAE_TRY(job.hooks.on_chunk(out_first[ci], acc));
      if (job.hooks.gathers()) pieces.push_back(std::move(acc));
    }
    if (!pieces.empty()) {
      SEEDVAE_ASSIGN_OR_RETURN(result, concat_time(pieces));
    }
  }
  if (report) {
    report->backend_peak_bytes = backend.memory_stats().peak_bytes;
    report->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (devices) report->devices = std::move(lane_stats);
  }
  return result;
}

// Exact tiling: the model run on an ExactTilingBackend over the model's own backend, chunk by
// chunk (chunk-major: finished chunks stream out through on_chunk as with the untiled path).
Result<HostTensor> run_exact(VideoVae& model, const HostTensor& input, const TileOptions& options,
                             const StreamOptions& stream, const StreamHooks& hooks,
                             TileHooks* tile_hooks, bool encode) {
  if (options.weights == nullptr) {
    return invalid_argument("exact tiling needs the host weights (TileOptions::weights)");
  }
  const VaeWeights& weights = *options.weights;
  const auto* seedvr2 = dynamic_cast<const VaeModel*>(&model);
  const auto* wan = dynamic_cast<const WanModel*>(&model);
  if (weights.family != model.family() || (seedvr2 && !(weights.config == seedvr2->config())) ||
      (wan && !(weights.wan == wan->config()))) {
    return invalid_argument("exact tiling: TileOptions::weights (" + weights.describe() +
                            ") do not match the model");
  }
  if (options.spec.tile_h < 1 || options.spec.tile_w < 1) {
    return invalid_argument("exact tiling: tile " + std::to_string(options.spec.tile_w) + "x" +
                            std::to_string(options.spec.tile_h) + " px is empty");
  }
  if (stream.hires_chunk_frames > 0 && seedvr2) return exact_tiling_refuses_hires();
  const auto t0 = Clock::now();
  const int tf = model.temporal_factor(), sf = model.spatial_factor();
  const Shape& s = input.shape();
  if (s.rank() != 5 || s[0] != 1 || s[2] < 1 || (encode && (s[2] - 1) % tf != 0)) {
    return invalid_argument(std::string(encode ? "encode needs a [1, 3, 4n+1, H, W] video"
                                               : "decode needs a [1, C, t, h, w] latent") +
                            ", got " + s.to_string());
  }
  const int64_t full_h = encode ? s[3] : s[3] * sf, full_w = encode ? s[4] : s[4] * sf;
  const ExactTilingOptions exact{options.spec.tile_h, options.spec.tile_w,
                                 options.exact_keep_weights};
  ExactTilingBackend tiles(model.backend(), exact, options.weights);
  tiles.set_frame(full_h, full_w);
  SEEDVAE_ASSIGN_OR_RETURN(std::unique_ptr<VideoVae> made, make_video_vae(tiles, weights));
  VideoVae& tiled = *made;
  if (seedvr2) tiled.set_telemetry(seedvr2->telemetry());
  const int64_t latents = encode ? (s[2] - 1) / tf + 1 : s[2];
  auto ranges = plan_chunks(latents, stream.chunk_latents);
  if (encode) {
    for (auto& [b, e] : ranges) {
      b = b == 0 ? 0 : (b - 1) * tf + 1;
      e = (e - 1) * tf + 1;
    }
  }
  TileRunReport* report = tile_hooks ? tile_hooks->report : nullptr;
  if (report) {
    *report = TileRunReport{};
    report->mode = TilingMode::kExact;
    report->chunks = static_cast<int64_t>(ranges.size());
  }
  SEEDVAE_ASSIGN_OR_RETURN(
      const int64_t per_chunk,
      wan ? exact_steps_per_chunk(weights.wan, encode, full_h, full_w, exact)
          : exact_steps_per_chunk(weights.config, encode, full_h, full_w, exact));
  ExactTilingBackend::Hooks th;
  th.cancel = hooks.cancel;
  th.progress = hooks.progress;
  th.stage = encode ? "encode exact" : "decode exact";
  th.steps_total = per_chunk * static_cast<int64_t>(ranges.size());
  // the output layer: its tiles are the run's (Wan: the head's last convolution)
  th.final_weight = wan ? (encode ? "encoder.head.2.weight" : "decoder.head.2.weight")
                        : (encode ? "encoder.conv_out.weight" : "decoder.conv_out.weight");
  th.spatial_factor = sf;
  th.output_scale = wan && !encode ? wan->config().patch_size : 1;
  th.report = report;
  if (tile_hooks) th.on_tile = tile_hooks->on_tile;
  tiles.set_hooks(std::move(th));
  CausalState state;
  std::vector<HostTensor> pieces;
  int64_t produced = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (hooks.cancel) SEEDVAE_TRY(hooks.cancel->check());
    const auto [b, e] = ranges[i];
    tiles.hooks().chunk = static_cast<int64_t>(i);
    tiles.hooks().first_frame = produced;
    SEEDVAE_ASSIGN_OR_RETURN(Tensor x,
                             tiles.upload((b == 0 && e == s[2]) ? input : slice_time(input, b, e)));
    const ChunkOptions chunk_options{.chunk = static_cast<int64_t>(i), .tile = -1};
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, encode ? tiled.encode_chunk(x, state, chunk_options)
                                              : tiled.decode_chunk(x, state, chunk_options));
    x = {};
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor out, tiles.download(y));
    y = {};
    tiled.flush_telemetry();
    if (report) report->host_state_bytes = std::max(report->host_state_bytes, state.bytes());
    if (hooks.on_chunk) SEEDVAE_TRY(hooks.on_chunk(produced, out));
    produced += out.shape()[2];
    if (hooks.gathers()) pieces.push_back(std::move(out));
  }
  if (report) {
    const int64_t lat_h = encode ? s[3] / sf : s[3];
    const int64_t lat_w = encode ? s[4] / sf : s[4];
    TileSpec spec = options.spec;
    spec.overlap_h = spec.overlap_w = 0;
    spec.tile_h = std::max<int64_t>(spec.tile_h, sf);
    spec.tile_w = std::max<int64_t>(spec.tile_w, sf);
    if (auto p = make_tile_plan(lat_h, lat_w, spec, TileLayout::kUniform, sf)) {
      report->plan = std::move(*p);
    }
    report->backend_peak_bytes = model.backend().memory_stats().peak_bytes;
    report->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  if (pieces.empty()) return HostTensor{};
  return concat_time(pieces);
}

Result<HostTensor> run_off(VideoVae& model, const HostTensor& input, const StreamOptions& stream,
                           const StreamHooks& hooks, TileHooks* tile_hooks, bool encode) {
  const auto t0 = Clock::now();
  Result<HostTensor> out = encode ? encode_video(model, input, stream, hooks)
                                  : decode_latent(model, input, stream, hooks);
  if (out.is_ok() && tile_hooks && tile_hooks->report) {
    TileRunReport& r = *tile_hooks->report;
    r = TileRunReport{};
    r.mode = TilingMode::kOff;
    const int64_t f = encode ? 1 : model.spatial_factor();  // the output's scale
    const int64_t d = encode ? model.spatial_factor() : 1;
    r.rects.push_back({0, 0, input.shape()[3], input.shape()[4]});
    r.output_rects.push_back({0, 0, input.shape()[3] * f / d, input.shape()[4] * f / d});
    r.backend_peak_bytes = model.backend().memory_stats().peak_bytes;
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return out;
}

}  // namespace

Status exact_tiling_refuses_hires() {
  return invalid_argument(
      "--hires-chunk does not apply to SeedVR2's --tiling exact, which runs layer by layer on "
      "tiles (its memory is already bounded by the tile); drop one");
}

// The SeedVR2 network behind `model` for blend tiling, which reproduces SeedVR2's reference
// tiling (its blending, overlaps and layout).
Result<HostTensor> tiled_decode(VideoVae& model, const HostTensor& latent,
                                const TileOptions& options, const StreamOptions& stream,
                                const StreamHooks& hooks, TileHooks* tile_hooks) {
  const Shape& s = latent.shape();
  if (s.rank() != 5 || s[0] != 1 || s[2] < 1) {
    return invalid_argument("decode needs a [1, C, t, h, w] latent, got " + s.to_string());
  }
  if (s[1] != model.latent_channels()) {
    return invalid_argument("decoder input must be [1, " + std::to_string(model.latent_channels()) +
                            ", t, h, w], got " + s.to_string());
  }
  if (options.mode == TilingMode::kOff) {
    return run_off(model, latent, stream, hooks, tile_hooks, false);
  }
  if (options.mode == TilingMode::kExact) {
    if (auto* wan = dynamic_cast<WanModel*>(&model)) {
      // halo tiles: the same result at the plain decode's pace (no host round trip per op)
      const WanTileOptions wo{.tile_h = options.spec.tile_h, .tile_w = options.spec.tile_w};
      return wan_tiled_decode(*wan, latent, wo, stream, hooks, tile_hooks);
    }
    return run_exact(model, latent, options, stream, hooks, tile_hooks, false);
  }
  SEEDVAE_ASSIGN_OR_RETURN(VaeModel * m, seedvr2_model(model));
  return run_blend({*m, latent, options, stream, hooks, tile_hooks, false});
}

Result<HostTensor> tiled_encode(VideoVae& model, const HostTensor& video,
                                const TileOptions& options, const StreamOptions& stream,
                                const StreamHooks& hooks, TileHooks* tile_hooks) {
  const Shape& s = video.shape();
  const int f = model.temporal_factor();
  const int sf = model.spatial_factor();
  if (s.rank() != 5 || s[0] != 1 || s[2] < 1 || (s[2] - 1) % f != 0) {
    return invalid_argument("encode needs a [1, 3, 4n+1, H, W] video, got " + s.to_string());
  }
  if (s[3] % sf || s[4] % sf) {
    return invalid_argument("frame size " + std::to_string(s[4]) + "x" + std::to_string(s[3]) +
                            " is not a multiple of " + std::to_string(sf));
  }
  if (options.mode == TilingMode::kOff) {
    return run_off(model, video, stream, hooks, tile_hooks, true);
  }
  if (options.mode == TilingMode::kExact) {
    return run_exact(model, video, options, stream, hooks, tile_hooks, true);
  }
  SEEDVAE_ASSIGN_OR_RETURN(VaeModel * m, seedvr2_model(model));
  return run_blend({*m, video, options, stream, hooks, tile_hooks, true});
}

}  // namespace seedvae
