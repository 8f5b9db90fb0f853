// cuDNN convolution runner: descriptors and algorithm choice cached per problem key, optional
// persisted autotune cache, temporal splitting for 32-bit indexing. See conv3d_cudnn.h.
#include "gpu/cudnn/conv3d_cudnn.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "gpu/allocator.h"
#include "gpu/cuda_check.h"
#include "gpu/cudnn/cudnn_util.h"

namespace seedvae::gpu {
namespace {

cudnnDataType_t dnn_type(ElemType t) {
  switch (t) {
    case ElemType::kF32: return CUDNN_DATA_FLOAT;
    case ElemType::kF16: return CUDNN_DATA_HALF;
    case ElemType::kBF16: return CUDNN_DATA_BFLOAT16;
  }
  return CUDNN_DATA_FLOAT;
}

const char* type_name(ElemType t) {
  return t == ElemType::kF32 ? "f32" : t == ElemType::kF16 ? "f16" : "bf16";
}

bool fits_int(int64_t v) {
  return v >= 0 && v <= 0x7fffffffLL;
}

}  // namespace

struct Conv3dCudnn::Descs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Choice choice;
  bool chosen = false;
  ~Descs() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

Result<std::unique_ptr<Conv3dCudnn>> Conv3dCudnn::create(Stream stream,
                                                         std::shared_ptr<DeviceAllocator> alloc,
                                                         ConvOptions options) {
  std::unique_ptr<Conv3dCudnn> c(new Conv3dCudnn());
  cudnnHandle_t h = nullptr;
  const Status made = make_cudnn_handle(stream, &h, "convolutions");
  c->handle_ = h;
  SEEDVAE_TRY(made);
  c->stream_ = stream;
  c->alloc_ = std::move(alloc);
  c->options_ = std::move(options);
  if (c->options_.max_elements < 1 || c->options_.max_elements > 0x7fffffffLL) {
    c->options_.max_elements = 0x7fffffffLL;
  }
  if (c->options_.autotune) c->load_cache();
  return c;
}

Conv3dCudnn::~Conv3dCudnn() {
  (void)save_cache();
  descs_.clear();
  if (handle_) cudnnDestroy(static_cast<cudnnHandle_t>(handle_));
}

int Conv3dCudnn::version() const {
  return static_cast<int>(cudnnGetVersion());
}

std::map<std::string, Conv3dCudnn::Choice> Conv3dCudnn::read_cache_file() const {
  std::map<std::string, Choice> out;
  std::ifstream in(options_.cache_file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    Choice c;
    if (std::getline(ls, key, '\t') && (ls >> c.algo >> c.math >> c.workspace)) out[key] = c;
  }
  return out;
}

void Conv3dCudnn::load_cache() {
  if (options_.cache_file.empty()) return;
  for (const auto& [key, c] : read_cache_file()) {
    choices_[key] = c;
    ++stats_.loaded;
  }
}

Status Conv3dCudnn::save_cache() {
  if (!dirty_ || options_.cache_file.empty() || !options_.autotune) return Status::ok();
  std::error_code ec;
  std::filesystem::create_directories(options_.cache_file.parent_path(), ec);
  // Other backends of this process (the devices of a pipelined decode) or other processes may
  // have saved choices since this one loaded the file: theirs are kept, ours win, and each
  // writer has its own temporary file.
  std::map<std::string, Choice> merged = read_cache_file();
  for (const auto& [k, c] : choices_) merged[k] = c;
  const auto tmp = options_.cache_file.string() + ".tmp." +
                   std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& [k, c] : merged) {
      out << k << '\t' << c.algo << ' ' << c.math << ' ' << c.workspace << '\n';
    }
    if (!out) return io_error("cannot write the cuDNN autotune cache " + tmp);
  }
  std::filesystem::rename(tmp, options_.cache_file, ec);
  if (ec) return io_error("cannot replace " + options_.cache_file.string() + ": " + ec.message());
  dirty_ = false;
  return Status::ok();
}

Status Conv3dCudnn::run(const ConvProblem& p, const void* x, const void* w, void* y,
                        const std::string& what) {
  const int64_t to = p.out_t(), ho = p.out_h(), wo = p.out_w();
  if (to < 1 || ho < 1 || wo < 1) return invalid_argument(what + ": empty output");
  const int64_t hw = p.h * p.w, ohw = ho * wo, es = elem_size(p.type);
  const int64_t lim = options_.max_elements;
  const int64_t per_in = (lim / std::max<int64_t>(1, p.cin * hw) - p.kt) / p.st + 1;
  const int64_t per_out = lim / std::max<int64_t>(1, p.cout * ohw);
  const int64_t per = std::min({to, per_in, per_out});
  if (per < 1) {
    if (p.layout == Layout::kNDHWC) return run_bands(p, x, w, y, what);
    return unsupported(what + ": a single output frame of this convolution exceeds cuDNN's " +
                       "32-bit indexing in the NCDHW layout; use channels-last or spatial tiles");
  }
  const auto* xb = static_cast<const char*>(x);
  auto* yb = static_cast<char*>(y);
  if (p.layout == Layout::kNDHWC) {
    for (int64_t o0 = 0; o0 < to; o0 += per) {
      const int64_t o1 = std::min(to, o0 + per);
      const int64_t t_in = (o1 - o0 - 1) * p.st + p.kt;
      ConvProblem q = p;
      q.t = t_in;
      SEEDVAE_TRY(run_piece(q, t_in, 0, 0, xb + o0 * p.st * hw * p.cin * es, w,
                            yb + o0 * ohw * p.cout * es, what));
    }
    return Status::ok();
  }
  // NCDHW
  const bool strided_ok = fits_int(p.cin * p.t * hw) && fits_int(p.cout * to * ohw);
  for (int64_t o0 = 0; o0 < to; o0 += per) {
    const int64_t o1 = std::min(to, o0 + per);
    const int64_t t_in = (o1 - o0 - 1) * p.st + p.kt;
    const int64_t tp = o1 - o0;
    ConvProblem q = p;
    q.t = t_in;
    if (strided_ok) {
      SEEDVAE_TRY(run_piece(q, t_in, p.t * hw, to * ohw, xb + o0 * p.st * hw * es, w,
                            yb + o0 * ohw * es, what));
      continue;
    }
    SEEDVAE_ASSIGN_OR_RETURN(
        BlockPtr xs,
        alloc_->allocate(static_cast<size_t>(p.cin * t_in * hw * es), what + " input piece"));
    SEEDVAE_ASSIGN_OR_RETURN(
        BlockPtr ys,
        alloc_->allocate(static_cast<size_t>(p.cout * tp * ohw * es), what + " output piece"));
    SEEDVAE_CUDA_TRY(
        cudaMemcpy2DAsync(xs->ptr, t_in * hw * es, xb + o0 * p.st * hw * es, p.t * hw * es,
                          t_in * hw * es, p.cin, cudaMemcpyDeviceToDevice, stream_),
        what + " gather");
    SEEDVAE_TRY(run_piece(q, t_in, t_in * hw, tp * ohw, xs->ptr, w, ys->ptr, what));
    SEEDVAE_CUDA_TRY(cudaMemcpy2DAsync(yb + o0 * ohw * es, to * ohw * es, ys->ptr, tp * ohw * es,
                                       tp * ohw * es, p.cout, cudaMemcpyDeviceToDevice, stream_),
                     what + " scatter");
  }
  return Status::ok();
}

Status Conv3dCudnn::run_bands(const ConvProblem& p, const void* x, const void* w, void* y,
                              const std::string& what) {
  // One output frame at a time, in bands of output rows. A band's input window (kt frames of the
  // band's rows plus the kernel's halo) is gathered into scratch with the rows outside the frame
  // zeroed -- the convolution's own zero padding in H -- and convolved without H padding; in
  // NDHWC the band's output rows of one frame are contiguous, so cuDNN writes them in place.
  const int64_t to = p.out_t(), ho = p.out_h(), wo = p.out_w(), es = elem_size(p.type);
  const int64_t in_row = p.w * p.cin, out_row = wo * p.cout;  // elements per row
  // Scratch of at most 128 Mi elements, and every piece within 32-bit indexing.
  const int64_t lim = std::min<int64_t>(options_.max_elements, int64_t{128} << 20);
  const int64_t fit_rows = lim / (p.kt * in_row);  // input rows of kt frames within the limit
  const int64_t by_in = fit_rows < p.kh ? 0 : (fit_rows - p.kh) / p.sh + 1;
  const int64_t by_out = lim / out_row;
  const int64_t band = std::min({ho, by_in, by_out});
  if (band < 1) {
    return unsupported(what + ": one output row of this convolution exceeds cuDNN's 32-bit " +
                       "indexing; use spatial tiles");
  }
  const int64_t rows_max = (band - 1) * p.sh + p.kh;
  SEEDVAE_ASSIGN_OR_RETURN(
      BlockPtr xs,
      alloc_->allocate(static_cast<size_t>(p.kt * rows_max * in_row * es), what + " input band"));
  const auto* xb = static_cast<const char*>(x);
  auto* yb = static_cast<char*>(y);
  const int64_t frame_in = p.h * in_row * es;
  for (int64_t o = 0; o < to; ++o) {
    for (int64_t r0 = 0; r0 < ho; r0 += band) {
      const int64_t r1 = std::min(ho, r0 + band);
      const int64_t rows = (r1 - r0 - 1) * p.sh + p.kh;  // window rows
      const int64_t y0 = r0 * p.sh - p.ph;               // first window row in the frame
      const int64_t a = std::max<int64_t>(0, -y0), b = std::min(rows, p.h - y0);  // inside
      const int64_t pitch = rows * in_row * es;
      char* dst = static_cast<char*>(xs->ptr);
      if (a > 0) {
        SEEDVAE_CUDA_TRY(cudaMemset2DAsync(dst, pitch, 0, a * in_row * es, p.kt, stream_),
                         what + " band pad");
      }
      if (b < rows) {
        SEEDVAE_CUDA_TRY(cudaMemset2DAsync(dst + std::max(a, b) * in_row * es, pitch, 0,
                                           (rows - std::max(a, b)) * in_row * es, p.kt, stream_),
                         what + " band pad");
      }
      // One copy per frame: a 4K frame's pitch exceeds what cudaMemcpy2D accepts (2^31 bytes).
      for (int64_t f = 0; f < p.kt && b > a; ++f) {
        SEEDVAE_CUDA_TRY(cudaMemcpyAsync(dst + f * pitch + a * in_row * es,
                                         xb + (o * p.st + f) * frame_in + (y0 + a) * in_row * es,
                                         static_cast<size_t>((b - a) * in_row * es),
                                         cudaMemcpyDeviceToDevice, stream_),
                         what + " band gather");
      }
      ConvProblem q = p;
      q.t = p.kt;
      q.h = rows;
      q.ph = 0;
      SEEDVAE_TRY(run_piece(q, p.kt, 0, 0, dst, w, yb + (o * ho + r0) * out_row * es, what));
    }
  }
  ++stats_.band_splits;
  return Status::ok();
}

Status Conv3dCudnn::run_piece(const ConvProblem& p, int64_t t_in, int64_t x_cstride,
                              int64_t y_cstride, const void* x, const void* w, void* y,
                              const std::string& what) {
  const int64_t ho = p.out_h(), wo = p.out_w(), to = p.out_t();
  const int64_t hw = p.h * p.w, ohw = ho * wo;
  const bool last = p.layout == Layout::kNDHWC;
  if (last) {
    x_cstride = 1;
    y_cstride = 1;
  }
  std::ostringstream ks;
  ks << (last ? "ndhwc" : "ncdhw") << ' ' << type_name(p.type) << ' '
     << (p.math == MathMode::kTf32 ? "tf32" : "strict") << " x" << p.cin << 'x' << t_in << 'x'
     << p.h << 'x' << p.w << " cs" << x_cstride << " w" << p.cout << 'x' << p.kt << 'x' << p.kh
     << 'x' << p.kw << " s" << p.st << p.sh << p.sw << " p" << p.ph << p.pw << " ys" << y_cstride;
  const std::string key = ks.str();
  const std::string where = what + " [" + key + "]";

  auto& cache = descs_;
  auto it = cache.find(key);
  Descs* d = nullptr;
  if (it == cache.end()) {
    auto nd = std::make_unique<Descs>();
    const cudnnDataType_t dt = dnn_type(p.type);
    int xdims[5] = {1, static_cast<int>(p.cin), static_cast<int>(t_in), static_cast<int>(p.h),
                    static_cast<int>(p.w)};
    int xstr[5];
    int ydims[5] = {1, static_cast<int>(p.cout), static_cast<int>(to), static_cast<int>(ho),
                    static_cast<int>(wo)};
    int ystr[5];
    if (last) {
      const int64_t xs[5] = {t_in * hw * p.cin, 1, hw * p.cin, p.w * p.cin, p.cin};
      const int64_t ys[5] = {to * ohw * p.cout, 1, ohw * p.cout, wo * p.cout, p.cout};
      for (int i = 0; i < 5; ++i) {
        xstr[i] = static_cast<int>(xs[i]);
        ystr[i] = static_cast<int>(ys[i]);
      }
    } else {
      const int64_t xs[5] = {p.cin * x_cstride, x_cstride, hw, p.w, 1};
      const int64_t ys[5] = {p.cout * y_cstride, y_cstride, ohw, wo, 1};
      for (int i = 0; i < 5; ++i) {
        xstr[i] = static_cast<int>(xs[i]);
        ystr[i] = static_cast<int>(ys[i]);
      }
    }
    SEEDVAE_TRY(cudnn_status(cudnnCreateTensorDescriptor(&nd->x), where));
    SEEDVAE_TRY(
        cudnn_status(cudnnSetTensorNdDescriptor(nd->x, dt, 5, xdims, xstr), where + " input"));
    SEEDVAE_TRY(cudnn_status(cudnnCreateTensorDescriptor(&nd->y), where));
    SEEDVAE_TRY(
        cudnn_status(cudnnSetTensorNdDescriptor(nd->y, dt, 5, ydims, ystr), where + " output"));
    SEEDVAE_TRY(cudnn_status(cudnnCreateFilterDescriptor(&nd->w), where));
    const int wdims[5] = {static_cast<int>(p.cout), static_cast<int>(p.cin), static_cast<int>(p.kt),
                          static_cast<int>(p.kh), static_cast<int>(p.kw)};
    SEEDVAE_TRY(cudnn_status(cudnnSetFilterNdDescriptor(
                                 nd->w, dt, last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, 5, wdims),
                             where + " filter"));
    SEEDVAE_TRY(cudnn_status(cudnnCreateConvolutionDescriptor(&nd->conv), where));
    const int pads[3] = {0, p.ph, p.pw};
    const int strides[3] = {p.st, p.sh, p.sw};
    const int dil[3] = {1, 1, 1};
    SEEDVAE_TRY(
        cudnn_status(cudnnSetConvolutionNdDescriptor(nd->conv, 3, pads, strides, dil,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                     where + " convolution"));
    int outd[5] = {};
    SEEDVAE_TRY(cudnn_status(cudnnGetConvolutionNdForwardOutputDim(nd->conv, nd->x, nd->w, 5, outd),
                             where + " output dims"));
    if (outd[1] != ydims[1] || outd[2] != ydims[2] || outd[3] != ydims[3] || outd[4] != ydims[4]) {
      return internal_error(where + ": cuDNN output dims disagree with the shape rule");
    }
    d = nd.get();
    cache.emplace(key, std::move(nd));
  } else {
    d = it->second.get();
  }

  auto h = static_cast<cudnnHandle_t>(handle_);
  const bool strict_f32 = p.type == ElemType::kF32 && p.math == MathMode::kStrict;
  const cudnnMathType_t base_math = strict_f32                 ? CUDNN_FMA_MATH
                                    : p.type == ElemType::kF32 ? CUDNN_DEFAULT_MATH
                                                               : CUDNN_TENSOR_OP_MATH;
  if (!d->chosen) {
    auto cit = options_.autotune ? choices_.find(key) : choices_.end();
    if (cit != choices_.end()) {
      d->choice = cit->second;
    } else {
      SEEDVAE_TRY(cudnn_status(cudnnSetConvolutionMathType(d->conv, base_math), where));
      constexpr int kMax = 16;
      cudnnConvolutionFwdAlgoPerf_t perf[kMax];
      int returned = 0;
      BlockPtr ws;
      int64_t ws_bytes = options_.workspace_limit;
      if (options_.autotune) {
        while (true) {
          auto r = alloc_->allocate(static_cast<size_t>(ws_bytes), "cuDNN autotune workspace");
          if (r) {
            ws = std::move(r).value();
            break;
          }
          if (ws_bytes == 0) return r.take_status();
          ws_bytes = ws_bytes > (int64_t{16} << 20) ? ws_bytes / 2 : 0;
        }
        SEEDVAE_TRY(cudnn_status(cudnnFindConvolutionForwardAlgorithmEx(
                                     h, d->x, x, d->w, w, d->conv, d->y, y, kMax, &returned, perf,
                                     ws->ptr, static_cast<size_t>(ws_bytes)),
                                 where + " algorithm search"));
        ++stats_.searched;
      } else {
        SEEDVAE_TRY(cudnn_status(cudnnGetConvolutionForwardAlgorithm_v7(
                                     h, d->x, d->w, d->conv, d->y, kMax, &returned, perf),
                                 where + " algorithm heuristic"));
        ++stats_.heuristic;
      }
      bool found = false;
      for (int i = 0; i < returned && !found; ++i) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        if (static_cast<int64_t>(perf[i].memory) > ws_bytes) continue;
        if (strict_f32 && perf[i].mathType != CUDNN_FMA_MATH) continue;
        d->choice.algo = static_cast<int>(perf[i].algo);
        d->choice.math = static_cast<int>(perf[i].mathType);
        d->choice.workspace = static_cast<int64_t>(perf[i].memory);
        found = true;
      }
      if (!found) {
        std::string cands;
        for (int i = 0; i < returned; ++i) {
          cands += " [algo " + std::to_string(static_cast<int>(perf[i].algo)) + " " +
                   cudnnGetErrorString(perf[i].status) + " ws " +
                   format_bytes(static_cast<int64_t>(perf[i].memory)) + " math " +
                   std::to_string(static_cast<int>(perf[i].mathType)) + "]";
        }
        return unsupported(where + ": cuDNN offers no algorithm within the " +
                           format_bytes(ws_bytes) + " workspace limit" +
                           (strict_f32 ? " without TF32 (try --precision tf32 or NCDHW)" : "") +
                           "; candidates:" + cands);
      }
      if (options_.autotune) {
        choices_[key] = d->choice;
        dirty_ = true;
      }
    }
    SEEDVAE_TRY(cudnn_status(
        cudnnSetConvolutionMathType(d->conv, static_cast<cudnnMathType_t>(d->choice.math)), where));
    d->chosen = true;
  }
  BlockPtr ws;
  if (d->choice.workspace > 0) {
    SEEDVAE_ASSIGN_OR_RETURN(ws, alloc_->allocate(static_cast<size_t>(d->choice.workspace),
                                                  "cuDNN workspace of " + what));
  }
  const float alpha = 1.f, beta = 0.f;
  return cudnn_status(
      cudnnConvolutionForward(h, &alpha, d->x, x, d->w, w, d->conv,
                              static_cast<cudnnConvolutionFwdAlgo_t>(d->choice.algo),
                              ws ? ws->ptr : nullptr, static_cast<size_t>(d->choice.workspace),
                              &beta, d->y, y),
      where);
}

}  // namespace seedvae::gpu
