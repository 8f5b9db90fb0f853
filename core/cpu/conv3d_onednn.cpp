// See conv3d_onednn.h. PyTorch equivalent: F.conv3d(x, w, b, stride, padding=0) after
// F.pad(x, (pad_left, pad_right, pad_top, pad_bottom)); oneDNN's padding_l/padding_r take the
// asymmetric spatial padding directly (temporal padding is always 0: callers use causal_pad).
#include "core/cpu/conv3d_onednn.h"

#include <new>
#include <string>
#include <unordered_map>

namespace seedvae::cpu {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

struct Conv3dOneDnn::Plan {
  dnnl::convolution_forward conv;
  memory::desc src_md, dst_md, wei_md, bias_md, scratch_md;
  memory::dims wei_dims;
  uint64_t last_use = 0;
};

namespace {

constexpr size_t kMaxPackedPerWeight = 4;

std::string problem_string(const ConvProblem& pr) {
  auto s = [](int64_t v) { return std::to_string(v); };
  return "conv3d x [" + s(pr.x.n) + ", " + s(pr.x.c) + ", " + s(pr.x.t) + ", " + s(pr.x.h) + ", " +
         s(pr.x.w) + "] w [" + s(pr.cout) + ", " + s(pr.x.c) + ", " + s(pr.kt) + ", " + s(pr.kh) +
         ", " + s(pr.kw) + "]";
}

}  // namespace

Conv3dOneDnn::Conv3dOneDnn(OneDnnContext& ctx, std::shared_ptr<MemoryCounters> counters)
    : ctx_(ctx), counters_(std::move(counters)) {}

Conv3dOneDnn::~Conv3dOneDnn() = default;

Result<Conv3dOneDnn::Plan*> Conv3dOneDnn::plan_for(const ConvProblem& pr) {
  const Key key = {pr.x.n,
                   pr.x.c,
                   pr.x.t,
                   pr.x.h,
                   pr.x.w,
                   pr.cout,
                   pr.kt,
                   pr.kh,
                   pr.kw,
                   pr.p.stride_t,
                   pr.p.stride_h,
                   pr.p.stride_w,
                   pr.p.pad_top,
                   pr.p.pad_bottom,
                   pr.p.pad_left,
                   pr.p.pad_right,
                   pr.has_bias ? 1 : 0};
  if (auto it = plans_.find(key); it != plans_.end()) {
    it->second->last_use = ++clock_;
    return it->second.get();
  }

  try {
    auto plan = std::make_unique<Plan>();
    const memory::dims src_dims = {pr.x.n, pr.x.c, pr.x.t, pr.x.h, pr.x.w};
    plan->wei_dims = {pr.cout, pr.x.c, pr.kt, pr.kh, pr.kw};
    const memory::dims dst_dims = {pr.y.n, pr.y.c, pr.y.t, pr.y.h, pr.y.w};
    const memory::dims strides = {pr.p.stride_t, pr.p.stride_h, pr.p.stride_w};
    const memory::dims pad_l = {0, pr.p.pad_top, pr.p.pad_left};
    const memory::dims pad_r = {0, pr.p.pad_bottom, pr.p.pad_right};

    plan->src_md = memory::desc(src_dims, dt::f32, tag::ndhwc);
    plan->dst_md = memory::desc(dst_dims, dt::f32, tag::ndhwc);
    const memory::desc wei_any(plan->wei_dims, dt::f32, tag::any);
    plan->bias_md = memory::desc({pr.cout}, dt::f32, tag::x);

    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto desc =
        pr.has_bias ? dnnl::convolution_forward::desc(
                          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                          plan->src_md, wei_any, plan->bias_md, plan->dst_md, strides, pad_l, pad_r)
                    : dnnl::convolution_forward::desc(
                          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                          plan->src_md, wei_any, plan->dst_md, strides, pad_l, pad_r);
    const dnnl::convolution_forward::primitive_desc pd(desc, attr, ctx_.engine);
    plan->wei_md = pd.weights_desc();
    plan->scratch_md = pd.scratchpad_desc();
    plan->conv = dnnl::convolution_forward(pd);
    if (plans_.size() >= kMaxPlans) {  // evict the least recently used
      auto lru = plans_.begin();
      for (auto it = plans_.begin(); it != plans_.end(); ++it) {
        if (it->second->last_use < lru->second->last_use) lru = it;
      }
      plans_.erase(lru);
    }
    plan->last_use = ++clock_;
    Plan* raw = plan.get();
    plans_.emplace(key, std::move(plan));
    return raw;
  } catch (const dnnl::error& e) {
    return onednn_status(e, problem_string(pr));
  } catch (const std::bad_alloc&) {
    return out_of_memory("out of memory creating the oneDNN primitive for " + problem_string(pr));
  }
}

Status Conv3dOneDnn::run(const ConvProblem& pr, const float* x, CpuStorage& weights,
                         const float* bias, float* y) {
  SEEDVAE_ASSIGN_OR_RETURN(Plan * plan, plan_for(pr));
  auto& eng = ctx_.engine;
  try {
    // Weights in the primitive's layout: reuse a pack stored on the weight tensor, or make one.
    const memory::desc wei_user(plan->wei_dims, dt::f32,
                                weights.layout == Layout::kPlain ? tag::oidhw : tag::odhwi);
    void* wei_ptr = weights.f32();
    if (plan->wei_md != wei_user) {
      PackedWeight* found = nullptr;
      for (auto& pw : weights.packed) {
        if (pw.desc == plan->wei_md) found = &pw;
      }
      if (found == nullptr) {
        SEEDVAE_ASSIGN_OR_RETURN(
            Buffer buf, Buffer::allocate(static_cast<int64_t>(plan->wei_md.get_size()), counters_,
                                         "packed weights of " + problem_string(pr)));
        memory user(wei_user, eng, weights.f32());
        memory packed(plan->wei_md, eng, buf.data());
        dnnl::reorder(user, packed).execute(ctx_.stream, user, packed);
        ctx_.stream.wait();
        if (weights.packed.size() >= kMaxPackedPerWeight) {
          weights.packed.erase(weights.packed.begin());
        }
        weights.packed.push_back({plan->wei_md, std::move(buf)});
        found = &weights.packed.back();
      }
      wei_ptr = found->buffer.data();
    }

    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, memory(plan->src_md, eng, const_cast<float*>(x))},
        {DNNL_ARG_WEIGHTS, memory(plan->wei_md, eng, wei_ptr)},
        {DNNL_ARG_DST, memory(plan->dst_md, eng, y)}};
    if (pr.has_bias) {
      args.emplace(DNNL_ARG_BIAS, memory(plan->bias_md, eng, const_cast<float*>(bias)));
    }
    Buffer scratch;
    if (plan->scratch_md.get_size() > 0) {
      SEEDVAE_ASSIGN_OR_RETURN(
          scratch, Buffer::allocate(static_cast<int64_t>(plan->scratch_md.get_size()), counters_,
                                    "scratchpad of " + problem_string(pr)));
      args.emplace(DNNL_ARG_SCRATCHPAD, memory(plan->scratch_md, eng, scratch.data()));
    }
    plan->conv.execute(ctx_.stream, args);
    ctx_.stream.wait();
    return Status::ok();
  } catch (const dnnl::error& e) {
    return onednn_status(e, problem_string(pr));
  } catch (const std::bad_alloc&) {
    return out_of_memory("out of memory running " + problem_string(pr));
  }
}

}  // namespace seedvae::cpu
