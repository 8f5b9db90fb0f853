#include "app/cuda_cli_options.h"

#include <CLI/CLI.hpp>

namespace seedvae::app {

void add_backend_options(CLI::App* cmd, BackendRequest& r) {
  const std::string g = "CUDA engine";
  cmd->add_option("--device", r.device, "CUDA device index")
      ->check(CLI::NonNegativeNumber)
      ->group(g);
  cmd->add_option("--precision", r.precision,
                  "fp32 (TF32 off), tf32, fp16 or bf16 weights and activations; norm statistics "
                  "and softmax stay fp32 (default fp32)")
      ->check(CLI::IsMember({"fp32", "tf32", "fp16", "bf16"}))
      ->group(g);
  cmd->add_flag("!--no-autotune", r.autotune,
                "take cuDNN's heuristic algorithm instead of timing every algorithm once per shape")
      ->group(g);
  cmd->add_option("--autotune-cache", r.autotune_cache,
                  "file for persisted cuDNN autotune results (\"auto\": per-user cache folder, "
                  "\"\": none)")
      ->group(g);
  cmd->add_flag("!--no-channels-last", r.channels_last,
                "keep activations in NCDHW instead of NDHWC (channels-last)")
      ->group(g);
  cmd->add_flag("!--no-fused-gn", r.fused_gn_silu, "run GroupNorm and SiLU as separate passes")
      ->group(g);
  cmd->add_flag("!--no-fused-attention", r.fused_attention,
                "materialise the attention scores (cuBLAS) instead of the flash-style kernel")
      ->group(g);
  cmd->add_flag("!--no-caching-allocator", r.caching_allocator,
                "plain cudaMalloc/cudaFree per tensor instead of the caching allocator")
      ->group(g);
  cmd->add_flag("!--no-buffer-reuse", r.buffer_reuse,
                "fresh buffers for causal padding instead of writing context frames in place")
      ->group(g);
  cmd->add_flag("!--no-fused-bias", r.fuse_bias,
                "add each convolution's bias in a pass of its own instead of in its consumer")
      ->group(g);
  cmd->add_flag("--offload-state", r.offload_state,
                "keep the causal state (the frames carried between temporal chunks) in pinned host "
                "memory, prefetched back while the GPU computes: less device memory, same output")
      ->group(g);
  cmd->add_option("--offload-window-mib", r.offload_window_mib,
                  "with --offload-state: how much offloaded state may be back on the device "
                  "ahead of use (MiB, default 1024); larger prefetches earlier, smaller saves more")
      ->check(CLI::Range(0, 1 << 20))
      ->group(g);
  cmd->add_flag("--cuda-graphs", r.cuda_graphs,
                "record each chunk's GPU work once per chunk shape and replay it for later chunks "
                "(one launch instead of ~250); needs the state on the device (not with "
                "--offload-state)")
      ->group(g);
  cmd->add_option("--cudnn-workspace-mib", r.cudnn_workspace_mib,
                  "cuDNN workspace limit per convolution (MiB, default 512)")
      ->check(CLI::Range(0, 1 << 20))
      ->group(g);
}

}  // namespace seedvae::app
