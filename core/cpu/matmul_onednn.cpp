#include "core/cpu/matmul_onednn.h"

#include <new>
#include <string>
#include <unordered_map>

namespace seedvae::cpu {

using dnnl::memory;
using dt = dnnl::memory::data_type;

struct MatmulOneDnn::Plan {
  dnnl::matmul prim;
  memory::desc a_md, b_md, c_md, bias_md, scratch_md;
  uint64_t last_use = 0;
};

namespace {
std::string describe(const MatmulProblem& p) {
  return "matmul [" + std::to_string(p.m) + " x " + std::to_string(p.k) + "] x [" +
         std::to_string(p.k) + " x " + std::to_string(p.n) + "]";
}
}  // namespace

MatmulOneDnn::MatmulOneDnn(OneDnnContext& ctx, std::shared_ptr<MemoryCounters> counters)
    : ctx_(ctx), counters_(std::move(counters)) {}

MatmulOneDnn::~MatmulOneDnn() = default;

Result<MatmulOneDnn::Plan*> MatmulOneDnn::plan_for(const MatmulProblem& p) {
  const Key key = {p.m,
                   p.n,
                   p.k,
                   p.lda,
                   p.ldb,
                   p.ldc,
                   p.b_transposed ? 1 : 0,
                   p.bias ? 1 : 0,
                   p.accumulate ? 1 : 0};
  if (auto it = plans_.find(key); it != plans_.end()) {
    it->second->last_use = ++clock_;
    return it->second.get();
  }
  try {
    auto plan = std::make_unique<Plan>();
    plan->a_md = memory::desc({p.m, p.k}, dt::f32, memory::dims{p.lda, 1});
    plan->b_md = p.b_transposed ? memory::desc({p.k, p.n}, dt::f32, memory::dims{1, p.ldb})
                                : memory::desc({p.k, p.n}, dt::f32, memory::dims{p.ldb, 1});
    plan->c_md = memory::desc({p.m, p.n}, dt::f32, memory::dims{p.ldc, 1});
    plan->bias_md = memory::desc({1, p.n}, dt::f32, memory::dims{p.n, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (p.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.f);
      attr.set_post_ops(ops);
    }
    const auto desc = p.bias ? dnnl::matmul::desc(plan->a_md, plan->b_md, plan->bias_md, plan->c_md)
                             : dnnl::matmul::desc(plan->a_md, plan->b_md, plan->c_md);
    const dnnl::matmul::primitive_desc pd(desc, attr, ctx_.engine);
    plan->scratch_md = pd.scratchpad_desc();
    plan->prim = dnnl::matmul(pd);
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
    return onednn_status(e, describe(p));
  } catch (const std::bad_alloc&) {
    return out_of_memory("out of memory creating the oneDNN primitive for " + describe(p));
  }
}

Status MatmulOneDnn::run(const MatmulProblem& p, const float* a, const float* b, const float* bias,
                         float* c) {
  SEEDVAE_ASSIGN_OR_RETURN(Plan * plan, plan_for(p));
  try {
    auto& eng = ctx_.engine;
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, memory(plan->a_md, eng, const_cast<float*>(a))},
        {DNNL_ARG_WEIGHTS, memory(plan->b_md, eng, const_cast<float*>(b))},
        {DNNL_ARG_DST, memory(plan->c_md, eng, c)}};
    if (p.bias) args.emplace(DNNL_ARG_BIAS, memory(plan->bias_md, eng, const_cast<float*>(bias)));
    Buffer scratch;
    if (plan->scratch_md.get_size() > 0) {
      SEEDVAE_ASSIGN_OR_RETURN(
          scratch, Buffer::allocate(static_cast<int64_t>(plan->scratch_md.get_size()), counters_,
                                    "scratchpad of " + describe(p)));
      args.emplace(DNNL_ARG_SCRATCHPAD, memory(plan->scratch_md, eng, scratch.data()));
    }
    plan->prim.execute(ctx_.stream, args);
    ctx_.stream.wait();
    return Status::ok();
  } catch (const dnnl::error& e) {
    return onednn_status(e, describe(p));
  } catch (const std::bad_alloc&) {
    return out_of_memory("out of memory running " + describe(p));
  }
}

}  // namespace seedvae::cpu
