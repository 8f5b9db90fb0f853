#include "core/media/prefetch.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <new>
#include <span>
#include <string>

#include "core/base/thread_name.h"
#include "core/media/sample_clip.h"

namespace seedvae::media {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int64_t frames_of(const HostTensor& t) {
  return t.empty() ? 0 : t.shape()[2];
}

// [a, b] along T where either may be empty.
Result<HostTensor> join(HostTensor a, HostTensor b) {
  if (frames_of(a) == 0) return b;
  if (frames_of(b) == 0) return a;
  const HostTensor parts[2] = {std::move(a), std::move(b)};
  return concat_time(std::span<const HostTensor>(parts, 2));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// PrefetchReader

PrefetchReader::PrefetchReader(ChunkProducer produce, int64_t first_chunk, int64_t chunk, int depth,
                               const CancelToken* cancel)
    : produce_(std::move(produce)),
      first_chunk_(std::max<int64_t>(1, first_chunk)),
      chunk_(std::max<int64_t>(1, chunk)),
      depth_(std::max(1, depth)),
      cancel_(cancel),
      thread_([this] { run(); }) {}

PrefetchReader::~PrefetchReader() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
    stop_.request();  // a read in progress stops at its next frame (kCancelled, discarded)
  }
  space_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PrefetchReader::run() {
  set_current_thread_name("seedvae-read");
  for (int64_t i = 0;; ++i) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      space_.wait(lk, [&] { return stopping_ || static_cast<int>(queue_.size()) < depth_; });
      if (stopping_) return;
      producing_ = true;
      stats_.peak_ahead = std::max(stats_.peak_ahead, static_cast<int64_t>(queue_.size()) + 1);
    }
    const int64_t want = i == 0 ? first_chunk_ : chunk_;
    const auto t0 = Clock::now();
    Result<HostTensor> r = internal_error("prefetch: no result");
    try {
      r = produce_(want, &stop_);
    } catch (const std::bad_alloc&) {
      r = out_of_memory("prefetch: out of memory while reading frames");
    } catch (const std::exception& e) {
      r = internal_error(std::string("prefetch: ") + e.what());
    } catch (...) {
      r = internal_error("prefetch: unknown exception while reading frames");
    }
    const double secs = seconds_since(t0);
    const bool last = !r.is_ok() || frames_of(*r) < want;
    {
      std::lock_guard<std::mutex> lk(mu_);
      stats_.read_seconds += secs;
      ++stats_.chunks_read;
      producing_ = false;
      queue_.push_back(std::move(r));
      if (last) done_ = true;
    }
    data_.notify_all();
    if (last) return;
  }
}

Result<HostTensor> PrefetchReader::next() {
  const auto t0 = Clock::now();
  std::unique_lock<std::mutex> lk(mu_);
  if (error_) return *error_;
  while (queue_.empty()) {
    if (done_) return HostTensor{};
    if (cancel_ != nullptr && cancel_->requested()) {
      stats_.wait_seconds += seconds_since(t0);
      return cancelled();
    }
    data_.wait_for(lk, std::chrono::milliseconds(20));  // polls the caller's cancel token
  }
  Result<HostTensor> r = std::move(queue_.front());
  queue_.pop_front();
  stats_.wait_seconds += seconds_since(t0);
  if (!r.is_ok()) error_ = r.status();
  lk.unlock();
  space_.notify_all();
  return r;
}

PrefetchStats PrefetchReader::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

std::pair<int64_t, int64_t> encoder_chunk_frames(int chunk_latents, int temporal_factor,
                                                 bool lone_head) {
  if (chunk_latents <= 0) {
    const int64_t all = std::numeric_limits<int64_t>::max();
    return {all, all};
  }
  const int64_t c = static_cast<int64_t>(chunk_latents) * temporal_factor;
  return {lone_head ? 1 : c + 1, c};
}

// ---------------------------------------------------------------------------------------------
// VideoFrameSource

ChunkProducer sample_frames(int width, int height, int64_t frames, int64_t first) {
  auto next = std::make_shared<int64_t>(std::clamp<int64_t>(first, 0, frames));
  return [=](int64_t max_frames, const CancelToken* stop) -> Result<HostTensor> {
    if (stop) SEEDVAE_TRY(stop->check());
    const int64_t k = std::min(max_frames, frames - *next);
    if (k <= 0) return HostTensor{};
    // Frame by frame: a stop (cancel, or the reader going away) waits for one frame at most.
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor out, generate_sample_frames(width, height, *next, k, stop));
    *next += k;
    return out;
  };
}

Result<std::unique_ptr<VideoFrameSource>> VideoFrameSource::open(
    const std::filesystem::path& source, const VideoSourceOptions& options,
    const CancelToken* cancel) {
  std::unique_ptr<VideoFrameSource> s(new VideoFrameSource());
  s->opts_ = options;
  ReadOptions ro = options.read;
  if (options.resume_frames > 0) {  // start up to 4 frames before the resume point
    s->lead_ = std::min<int64_t>(4, options.resume_frames);
    const int64_t skip = options.resume_frames - s->lead_;
    ro.first_frame += skip * std::max(1, ro.stride);
    if (ro.max_frames >= 0) ro.max_frames = std::max<int64_t>(0, ro.max_frames - skip);
  }
  SEEDVAE_ASSIGN_OR_RETURN(FrameReader reader, FrameReader::open(source, ro, cancel));
  s->fps_ = reader.fps();
  if (const int64_t n = reader.expected_frames(); n >= 0) {
    s->expected_ = n + std::max<int64_t>(0, options.resume_frames - s->lead_);
  }
  s->reader_.emplace(std::move(reader));
  FrameReader* r = &*s->reader_;
  s->produce_ = [r](int64_t n, const CancelToken* stop) { return r->read(n, stop); };
  return start(std::move(s), cancel);
}

Result<std::unique_ptr<VideoFrameSource>> VideoFrameSource::sample(
    int width, int height, int64_t frames, const VideoSourceOptions& options,
    const CancelToken* cancel) {
  if (width < 1 || height < 1 || frames < 1) {
    return invalid_argument("the sample clip needs a size and frames >= 1, got " +
                            std::to_string(width) + "x" + std::to_string(height) + "x" +
                            std::to_string(frames));
  }
  std::unique_ptr<VideoFrameSource> s(new VideoFrameSource());
  s->opts_ = options;
  s->fps_ = 24;
  s->expected_ = frames;
  if (options.resume_frames > 0) s->lead_ = std::min<int64_t>(4, options.resume_frames);
  ChunkProducer produce =
      sample_frames(width, height, frames, std::max<int64_t>(0, options.resume_frames - s->lead_));
  s->produce_ = [produce, cancel](int64_t n, const CancelToken* stop) -> Result<HostTensor> {
    if (cancel) SEEDVAE_TRY(cancel->check());
    return produce(n, stop);
  };
  return start(std::move(s), cancel);
}

Result<std::unique_ptr<VideoFrameSource>> VideoFrameSource::start(
    std::unique_ptr<VideoFrameSource> s, const CancelToken* cancel) {
  const VideoSourceOptions& options = s->opts_;
  if (options.spatial_multiple < 1) {
    return invalid_argument("spatial_multiple must be >= 1, got " +
                            std::to_string(options.spatial_multiple));
  }
  if (options.prefetch && options.prefetch_depth < 1) {
    return invalid_argument("prefetch_depth must be >= 1, got " +
                            std::to_string(options.prefetch_depth));
  }
  if (options.prefetch) {
    s->prefetch_ =
        std::make_unique<PrefetchReader>(s->produce_, s->lead_ + options.first_chunk_frames,
                                         options.chunk_frames, options.prefetch_depth, cancel);
  }
  return s;
}

VideoFrameSource::~VideoFrameSource() {
  prefetch_.reset();  // join the reader thread before the producer it calls goes away
}

// The next n (or, at the end, fewer) unpadded frames.
Result<HostTensor> VideoFrameSource::raw_next(int64_t n) {
  if (!prefetch_) {
    if (raw_end_) return HostTensor{};
    const auto t0 = Clock::now();
    Result<HostTensor> r = produce_(n, nullptr);
    const double secs = seconds_since(t0);
    direct_.read_seconds += secs;
    direct_.wait_seconds += secs;
    ++direct_.chunks_read;
    direct_.peak_ahead = 1;
    if (r.is_ok() && frames_of(*r) < n) raw_end_ = true;
    return r;
  }
  while (frames_of(pending_) < n && !raw_end_) {
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor c, prefetch_->next());
    if (frames_of(c) == 0) {
      raw_end_ = true;
      break;
    }
    SEEDVAE_ASSIGN_OR_RETURN(pending_, join(std::move(pending_), std::move(c)));
  }
  const int64_t have = frames_of(pending_);
  if (have <= n) return std::exchange(pending_, HostTensor{});  // the usual case: no copy
  HostTensor out = slice_time(pending_, 0, n);
  pending_ = slice_time(pending_, n, have);
  return out;
}

// `count` temporal padding frames for the clip of plan_.frames frames, from history_.
Result<HostTensor> VideoFrameSource::pad_frames(int64_t count) {
  const int64_t T = plan_.frames;
  const std::vector<int64_t> idx = temporal_source_indices(T, T + count, opts_.temporal_pad);
  const int64_t hist = frames_of(history_);
  std::vector<HostTensor> parts;
  for (int64_t j = T; j < T + count; ++j) {
    const int64_t pos = idx[static_cast<size_t>(j)] - (T - hist);
    if (pos < 0 || pos >= hist) {
      return internal_error("temporal padding needs frame " +
                            std::to_string(idx[static_cast<size_t>(j)]) + " of " +
                            std::to_string(T) + ", no longer kept");
    }
    parts.push_back(slice_time(history_, pos, pos + 1));
  }
  return concat_time(parts);
}

Status VideoFrameSource::read_lead() {
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor raw, raw_next(lead_));
  if (frames_of(raw) < lead_) {
    return invalid_argument("the input has fewer frames than the " +
                            std::to_string(opts_.resume_frames) + " the resumed job had read");
  }
  const Shape& s = raw.shape();
  plan_ = plan_padding(1, s[3], s[4], opts_.spatial_multiple);
  if (plan_.height == plan_.padded_height && plan_.width == plan_.padded_width) {
    history_ = std::move(raw);
  } else {
    const PadPlan chunk{lead_, plan_.height,        plan_.width,
                        lead_, plan_.padded_height, plan_.padded_width};
    SEEDVAE_ASSIGN_OR_RETURN(history_, apply_padding(raw, chunk, opts_.temporal_pad));
  }
  plan_.frames = opts_.resume_frames;
  plan_.padded_frames = 0;
  lead_ = 0;
  return Status::ok();
}

Result<HostTensor> VideoFrameSource::next(int64_t max_frames) {
  if (max_frames < 1) {
    return invalid_argument("VideoFrameSource::next needs max_frames >= 1, got " +
                            std::to_string(max_frames));
  }
  if (lead_ > 0) SEEDVAE_TRY(read_lead());
  HostTensor out;
  if (frames_of(tail_) > 0) {  // padding frames left over from a previous (smaller) request
    out = std::exchange(tail_, HostTensor{});
  } else if (!finished_) {
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor raw, raw_next(max_frames));
    const int64_t k = frames_of(raw);
    if (k > 0) {
      if (opts_.on_frames) {
        const auto th = Clock::now();
        const Status st = opts_.on_frames(raw);
        hook_seconds_ += seconds_since(th);
        SEEDVAE_TRY(st);
      }
      const Shape& s = raw.shape();
      if (plan_.frames == 0) {
        plan_ = plan_padding(1, s[3], s[4], opts_.spatial_multiple);
        plan_.frames = plan_.padded_frames = 0;
      }
      // Spatial padding of this chunk: the same right/bottom pad apply_padding() gives the clip
      // (none needed: the frames as they are, no copy).
      if (plan_.height == plan_.padded_height && plan_.width == plan_.padded_width) {
        out = std::move(raw);
      } else {
        const PadPlan chunk{k, plan_.height,        plan_.width,
                            k, plan_.padded_height, plan_.padded_width};
        SEEDVAE_ASSIGN_OR_RETURN(out, apply_padding(raw, chunk, opts_.temporal_pad));
      }
      raw = {};
      plan_.frames += k;
      // The last (up to) 4 padded frames, copied from this chunk alone when it has them.
      if (k >= 4) {
        history_ = slice_time(out, k - 4, k);
      } else {
        SEEDVAE_ASSIGN_OR_RETURN(HostTensor h, join(std::move(history_), out));
        const int64_t hn = frames_of(h);
        history_ = hn > 4 ? slice_time(h, hn - 4, hn) : std::move(h);
      }
    }
    if (k < max_frames) {  // the end of the stream: pad to 4n+1 into this chunk
      if (plan_.frames == 0) return internal_error("the frame reader returned no frames");
      plan_.padded_frames = next_4n_plus_1(plan_.frames);
      const int64_t pad = plan_.padded_frames - plan_.frames;
      if (pad > 0) {
        SEEDVAE_ASSIGN_OR_RETURN(HostTensor p, pad_frames(pad));
        SEEDVAE_ASSIGN_OR_RETURN(out, join(std::move(out), std::move(p)));
      }
      finished_ = true;
      history_ = {};
      const int64_t n = frames_of(out);
      if (n > max_frames) {
        tail_ = slice_time(out, max_frames, n);
        out = slice_time(out, 0, max_frames);
      }
    }
  }
  return out;
}

PrefetchStats VideoFrameSource::stats() const {
  PrefetchStats st = prefetch_ ? prefetch_->stats() : direct_;
  st.hook_seconds = hook_seconds_;
  return st;
}

std::string VideoFrameSource::warning() const {
  return finished_ && reader_ ? reader_->warning() : std::string();
}

}  // namespace seedvae::media
