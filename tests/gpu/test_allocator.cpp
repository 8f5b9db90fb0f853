// The caching allocator's stream-ordered free (gpu/allocator.h): a block whose last use is a copy
// on another stream goes back to the cache at once, and the compute stream waits for that copy
// before it reuses the memory. The copy is held back by a host callback, so without the wait the
// compute stream's overwrite would land first and the host would read the new bytes.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu/allocator.h"
#include "gpu/cuda_backend.h"
#include "tests/gpu/gpu_test.h"

namespace {

using seedvae::gpu::BlockPtr;
using seedvae::gpu::DeviceAllocator;

void sleep_200ms(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

struct Streams {
  cudaStream_t compute = nullptr, copy = nullptr, gate = nullptr;
  Streams() {
    cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&gate, cudaStreamNonBlocking);
  }
  ~Streams() {
    for (cudaStream_t s : {compute, copy, gate}) {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
  }
};

// Fills `block` with `before` on the compute stream, queues its copy to the host on the copy
// stream behind a 200 ms host callback, frees the block with the copy's event, reuses it at once
// and allocates a block of the same size at once, overwriting it on the compute stream. With
// `limit`, the allocator may reserve only one such block, so it must reuse the pending one.
// Returns the bytes that reached the host.
std::vector<unsigned char> copy_then_reuse(bool caching, bool limit, int64_t* waits,
                                           bool* same_ptr) {
  constexpr size_t kBytes = size_t{8} << 20;
  std::vector<unsigned char> host_out;
  Streams s;
  auto alloc = std::make_shared<DeviceAllocator>(caching, s.compute);
  if (limit) alloc->set_reserve_limit(static_cast<int64_t>(kBytes));
  void* pinned = nullptr;
  if (cudaMallocHost(&pinned, kBytes) != cudaSuccess) return host_out;
  std::memset(pinned, 0, kBytes);
  {
    auto a = alloc->allocate(kBytes, "test block");
    if (!a.is_ok()) return host_out;
    BlockPtr block = std::move(a).value();
    void* first_ptr = block->ptr;
    cudaMemsetAsync(block->ptr, 0xAB, kBytes, s.compute);
    cudaEvent_t filled = nullptr, gate_open = nullptr, copied = nullptr;
    cudaEventCreateWithFlags(&filled, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&gate_open, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&copied, cudaEventDisableTiming);
    cudaEventRecord(filled, s.compute);
    cudaLaunchHostFunc(s.gate, sleep_200ms, nullptr);
    cudaEventRecord(gate_open, s.gate);
    cudaStreamWaitEvent(s.copy, filled, 0);
    cudaStreamWaitEvent(s.copy, gate_open, 0);
    cudaMemcpyAsync(pinned, block->ptr, kBytes, cudaMemcpyDeviceToHost, s.copy);
    cudaEventRecord(copied, s.copy);
    block->free_after = copied;  // the allocator owns the event now
    block.reset();

    auto b = alloc->allocate(kBytes, "reused block");
    if (!b.is_ok()) return host_out;
    BlockPtr again = std::move(b).value();
    *same_ptr = again->ptr == first_ptr;
    cudaMemsetAsync(again->ptr, 0x00, kBytes, s.compute);
    cudaStreamSynchronize(s.compute);
    cudaStreamSynchronize(s.copy);
    cudaEventDestroy(filled);
    cudaEventDestroy(gate_open);
  }
  *waits = alloc->stats().stream_waits;
  host_out.assign(static_cast<unsigned char*>(pinned),
                  static_cast<unsigned char*>(pinned) + kBytes);
  cudaFreeHost(pinned);
  return host_out;
}

int64_t count_not(const std::vector<unsigned char>& v, unsigned char value) {
  int64_t n = 0;
  for (unsigned char c : v) n += c != value;
  return n;
}

// Without room for a second block (reserve limit), the pending block is reused in stream order.
GPU_TEST(stream_ordered_free_waits_for_the_other_streams_copy) {
  int64_t waits = -1;
  bool same = false;
  const auto host = copy_then_reuse(true, true, &waits, &same);
  CHECK(!host.empty());
  CHECK_MSG(same, "the freed block was not reused from the cache");
  CHECK_MSG(waits == 1, "stream waits: " + std::to_string(waits));
  const int64_t wrong = count_not(host, 0xAB);
  CHECK_MSG(wrong == 0,
            std::to_string(wrong) + " bytes reached the host after the reuse overwrote them");
  CHECK(cudaGetLastError() == cudaSuccess);
}

// With room, a new block is taken instead: no stall of the compute stream, the copy intact.
GPU_TEST(pending_block_is_left_alone_while_there_is_room) {
  int64_t waits = -1;
  bool same = true;
  const auto host = copy_then_reuse(true, false, &waits, &same);
  CHECK(!host.empty());
  CHECK_MSG(!same, "the block still being copied was reused although there was room");
  CHECK_MSG(waits == 0, "stream waits: " + std::to_string(waits));
  const int64_t wrong = count_not(host, 0xAB);
  CHECK_MSG(wrong == 0, std::to_string(wrong) + " bytes wrong on the host");
  CHECK(cudaGetLastError() == cudaSuccess);
}

GPU_TEST(plain_cudamalloc_frees_after_the_other_streams_copy) {
  int64_t waits = -1;
  bool same = false;
  const auto host = copy_then_reuse(false, false, &waits, &same);
  CHECK(!host.empty());
  CHECK(waits == 0);
  const int64_t wrong = count_not(host, 0xAB);
  CHECK_MSG(wrong == 0, std::to_string(wrong) + " bytes wrong on the host");
  CHECK(cudaGetLastError() == cudaSuccess);
}

// Out of room, the allocator asks its owner to reclaim (the CUDA backend drops prefetched state):
// a request over the reserve limit succeeds once the hook frees a block, and fails cleanly with
// out of memory when the hook has nothing to give.
GPU_TEST(reclaim_hook_makes_room_or_fails_cleanly) {
  Streams s;
  auto alloc = std::make_shared<DeviceAllocator>(true, s.compute);
  constexpr size_t kMiB = size_t{1} << 20;
  alloc->set_reserve_limit(static_cast<int64_t>(8 * kMiB));
  REQUIRE_OK(BlockPtr held, alloc->allocate(8 * kMiB, "prefetched state"));
  int calls = 0;
  alloc->set_reclaim([&]() -> int64_t {
    ++calls;
    if (!held) return 0;
    const auto bytes = static_cast<int64_t>(held->bytes);
    held.reset();
    return bytes;
  });
  REQUIRE_OK(BlockPtr fresh, alloc->allocate(6 * kMiB, "needed now"));
  CHECK_MSG(calls == 1, "reclaim calls: " + std::to_string(calls));
  CHECK(alloc->stats().reserved_bytes <= static_cast<int64_t>(8 * kMiB));
  auto over = alloc->allocate(4 * kMiB, "over the limit");
  CHECK(!over.is_ok() && over.status().code() == seedvae::StatusCode::kOutOfMemory);
  CHECK_MSG(calls == 2, "reclaim calls: " + std::to_string(calls));
  alloc->set_reclaim(nullptr);
  CHECK(cudaGetLastError() == cudaSuccess);
}

// The memory census lists what was live at the peak: here two blocks, though one of them is freed
// and a third, smaller, allocated afterwards; reset_peak() starts over from what is live then.
GPU_TEST(census_lists_what_was_live_at_the_peak) {
  Streams s;
  auto alloc = std::make_shared<DeviceAllocator>(true, s.compute);
  alloc->set_census(true);
  constexpr size_t kMiB = size_t{1} << 20;
  REQUIRE_OK(BlockPtr a, alloc->allocate(8 * kMiB, "tensor a"));
  REQUIRE_OK(BlockPtr b, alloc->allocate(4 * kMiB, "tensor b"));
  a.reset();
  REQUIRE_OK(BlockPtr c, alloc->allocate(2 * kMiB, "tensor c"));
  auto census = alloc->peak_census();
  CHECK_MSG(census.size() == 2, std::to_string(census.size()) + " entries");
  if (census.size() == 2) {
    CHECK(census[0].what == "tensor a" && census[0].bytes == int64_t{8} << 20 &&
          census[0].count == 1);
    CHECK(census[1].what == "tensor b" && census[1].bytes == int64_t{4} << 20);
  }
  alloc->reset_peak();  // live now: b and c
  REQUIRE_OK(BlockPtr d, alloc->allocate(1 * kMiB, "tensor c"));
  census = alloc->peak_census();
  CHECK_MSG(census.size() == 2, std::to_string(census.size()) + " entries after reset");
  if (census.size() == 2) {
    CHECK(census[0].what == "tensor b");
    CHECK(census[1].what == "tensor c" && census[1].count == 2 &&
          census[1].bytes == int64_t{3} << 20);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto info = seedvae::gpu::runtime_info();
  if (!info.error.empty()) gpu_test::skip_all(info.error.c_str());
  return gpu_test::run_all(argc, argv);
}
