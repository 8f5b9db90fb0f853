// Which implementation of the CPU backend's convolutions and matrix products this build uses
// (SEEDVAE_CPU_ONEDNN, set by core/cpu/CMakeLists.txt from SEEDVAE_WITH_ONEDNN):
//   1: oneDNN primitives (conv3d_onednn.h, matmul_onednn.h), the fast path on x86-64 Linux;
//   0: the portable kernels (conv3d_portable.h, matmul_portable.h): implicit GEMM on Eigen, for
//      toolchains without a oneDNN build (the mingw-w64 Windows CLI, other architectures).
// Both take the same problem descriptions (op_problems.h) and are checked against the same naive
// references (tests/cpu). Internal to core/cpu.
#pragma once

#include <string>

#include "core/cpu/cpu_storage.h"  // checks that SEEDVAE_CPU_ONEDNN is defined

#if SEEDVAE_CPU_ONEDNN
#include "core/cpu/conv3d_onednn.h"
#include "core/cpu/matmul_onednn.h"
#include "core/cpu/onednn_context.h"
#else
#include "core/cpu/conv3d_portable.h"
#include "core/cpu/matmul_portable.h"
#endif

namespace seedvae::cpu {

#if SEEDVAE_CPU_ONEDNN
using GemmContext = OneDnnContext;
using Conv3dEngine = Conv3dOneDnn;
using MatmulEngine = MatmulOneDnn;
#else
using GemmContext = PortableContext;
using Conv3dEngine = Conv3dPortable;
using MatmulEngine = MatmulPortable;
#endif

// "oneDNN 2.6.3" or "portable kernels (Eigen 3.4.0 GEMM)": what the backend's name shows.
std::string gemm_engine_name();

}  // namespace seedvae::cpu
