// SPDX-License-Identifier: MIT
// The host emulation of CUDA itself (emulation/): small kernels that pin down what the ledger
// records (bytes, never-written bytes, sectors of coalesced and strided warp accesses) and that
// the built-ins behave as on a GPU (2-D grids, atomics and fences, ballots and shuffles).
#include "emulation/emulated_cuda.hpp"
// The emulation must come first: the kernels below then see its built-ins.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"

namespace kernels = specdec::backend::cuda_impl::detail;
namespace emu = specdec_emulation;
using kernels::Global;

namespace {

// Kernel code cannot reach global memory around the ledger: a view neither dereferences nor
// converts to its pointer.
template <class G>
concept Dereferenceable = requires(G g) { *g; };
static_assert(!Dereferenceable<Global<const float>> && !Dereferenceable<Global<float>>);
static_assert(!std::is_convertible_v<Global<float>, float*> &&
              !std::is_convertible_v<Global<const float>, const float*>);

/// out[i] = in[i * stride] for i < n, one element per thread.
__global__ void probe_gather(Global<const float> in, int stride, Global<float> out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[static_cast<std::int64_t>(i) * stride];
}

/// out[4 i .. 4 i + 3] = in[4 i .. 4 i + 3] by one 16-byte load per thread.
__global__ void probe_vector_copy(Global<const float> in, Global<float> out) {
  const std::int64_t i = 4 * static_cast<std::int64_t>(blockIdx.x * blockDim.x + threadIdx.x);
  const auto v = in.load_vec<4>(i);
  for (int j = 0; j < 4; ++j) out[i + j] = v.v[j];
}

/// Every thread adds 1 to counts[0]; the last block to finish (after a fence) writes the number
/// of blocks it saw finish before it to counts[1], and each cell (x, y) of the grid gets marked.
__global__ void probe_atomics(Global<unsigned int> counts, Global<unsigned int> cells) {
  counts.atomic_add(0, 1u);
  __shared__ unsigned int finished;
  __syncthreads();
  if (threadIdx.x == 0) {
    cells[blockIdx.y * gridDim.x + blockIdx.x] = 1u;
    __threadfence();
    finished = counts.atomic_add(2, 1u);
    if (finished == gridDim.x * gridDim.y - 1) counts[1] = finished;
  }
}

/// Lane l of warp w writes its ballot of (lane % 3 == 0), and the values lane 5, lane l + 1 and
/// lane l - 2 hold.
__global__ void probe_warp(Global<unsigned int> out) {
  const unsigned int lane = threadIdx.x & 31u;
  const unsigned int value = 100u * (threadIdx.x >> 5) + lane;
  const std::int64_t at = 4 * static_cast<std::int64_t>(threadIdx.x);
  out[at] = __ballot_sync(0xffffffffu, lane % 3 == 0);
  out[at + 1] = __shfl_sync(0xffffffffu, value, 5);
  out[at + 2] = __shfl_down_sync(0xffffffffu, value, 1);
  out[at + 3] = __shfl_up_sync(0xffffffffu, value, 2);
}

template <class T>
struct ProbeBuffer {
  ProbeBuffer(const char* name, std::vector<T> init, bool initialised) : data(std::move(init)) {
    emu::ledger.add(name, data.data(), data.size() * sizeof(T), initialised);
  }
  ~ProbeBuffer() { emu::ledger.remove(data.data()); }
  ProbeBuffer(const ProbeBuffer&) = delete;
  ProbeBuffer& operator=(const ProbeBuffer&) = delete;
  std::vector<T> data;
};

}  // namespace

TEST_CASE("emulated runtime: the ledger counts bytes and sectors of coalesced and strided loads",
          "[backend][cuda_kernel]") {
  emu::ledger.clear();
  // 256-byte aligned, as device allocations are.
  alignas(256) static float in[64 * 8];
  for (int i = 0; i < 64 * 8; ++i) in[i] = static_cast<float>(i);
  emu::ledger.add("in", in, sizeof in, true);
  ProbeBuffer<float> out("out", std::vector<float>(64), false);
  for (const int stride : {1, 8}) {
    emu::ledger.reset();
    REQUIRE(kernels::launch(probe_gather, 2, 32, nullptr, in, stride, out.data.data(), 64) ==
            cudaSuccess);
    CHECK(out.data[63] == static_cast<float>(63 * stride));
    const emu::Traffic t = emu::ledger.region("in").traffic;
    CHECK(t.read == 64 * 4);
    CHECK(t.unwritten_reads == 0);
    // Stride 1: 128 bytes per warp in 4 sectors; stride 8 (32 bytes): one sector per lane.
    CHECK(t.sectors == (stride == 1 ? 8u : 64u));
    CHECK(t.sector_efficiency() == Approx(stride == 1 ? 1.0 : 0.125));
  }
  CHECK(emu::ledger.region("out").traffic.written == 64 * 4);
  emu::ledger.remove(in);
}

TEST_CASE("emulated runtime: the ledger reports reads of bytes nothing wrote",
          "[backend][cuda_kernel]") {
  emu::ledger.clear();
  ProbeBuffer<float> fresh("fresh", std::vector<float>(32), false);
  ProbeBuffer<float> out("out", std::vector<float>(32), false);
  REQUIRE(kernels::launch(probe_gather, 1, 32, nullptr, fresh.data.data(), 1, out.data.data(),
                          32) == cudaSuccess);
  CHECK(emu::ledger.region("fresh").traffic.unwritten_reads == 32 * 4);
  // A copy writes them.
  const std::vector<float> host(32, 2.0f);
  REQUIRE(cudaMemcpyAsync(fresh.data.data(), host.data(), 32 * 4, cudaMemcpyHostToDevice) ==
          cudaSuccess);
  emu::ledger.reset();
  REQUIRE(kernels::launch(probe_gather, 1, 32, nullptr, fresh.data.data(), 1, out.data.data(),
                          32) == cudaSuccess);
  CHECK(emu::ledger.region("fresh").traffic.unwritten_reads == 0);
}

TEST_CASE("emulated runtime: 16-byte vector loads move whole sectors", "[backend][cuda_kernel]") {
  emu::ledger.clear();
  std::vector<float> values(256);
  for (int i = 0; i < 256; ++i) values[static_cast<std::size_t>(i)] = 0.5f * static_cast<float>(i);
  alignas(256) static float in[256];
  std::copy(values.begin(), values.end(), in);
  emu::ledger.add("in", in, sizeof in, true);
  ProbeBuffer<float> out("out", std::vector<float>(256), false);
  REQUIRE(kernels::launch(probe_vector_copy, 2, 32, nullptr, in, out.data.data()) == cudaSuccess);
  CHECK(out.data == values);
  const emu::Traffic t = emu::ledger.region("in").traffic;
  CHECK(t.read == 256 * 4);
  CHECK(t.sectors == 32u);  // 512 bytes per warp access: 16 sectors, 2 warps
  emu::ledger.remove(in);
}

TEST_CASE("emulated runtime: atomics, fences and a 2-D grid find the last block to finish",
          "[backend][cuda_kernel]") {
  emu::ledger.clear();
  for (const std::uint64_t seed : {1, 2}) {
    emu::ledger.seed = seed;
    ProbeBuffer<unsigned int> counts("counts", std::vector<unsigned int>(3, 0u), true);
    ProbeBuffer<unsigned int> cells("cells", std::vector<unsigned int>(12, 0u), false);
    REQUIRE(kernels::launch(probe_atomics, dim3(4, 3), 64, nullptr, counts.data.data(),
                            cells.data.data()) == cudaSuccess);
    CHECK(counts.data[0] == 12u * 64u);
    CHECK(counts.data[1] == 11u);
    CHECK(cells.data == std::vector<unsigned int>(12, 1u));
  }
  emu::ledger.seed = 1;
  CHECK(emu::ledger.counts.launches == 2);
}

TEST_CASE("emulated runtime: ballots and shuffles exchange values within a warp",
          "[backend][cuda_kernel]") {
  emu::ledger.clear();
  ProbeBuffer<unsigned int> out("out", std::vector<unsigned int>(4 * 64), false);
  REQUIRE(kernels::launch(probe_warp, 1, 64, nullptr, out.data.data()) == cudaSuccess);
  unsigned int ballot = 0;
  for (unsigned int lane = 0; lane < 32; lane += 3) ballot |= 1u << lane;
  int wrong = 0;
  for (unsigned int t = 0; t < 64; ++t) {
    const unsigned int lane = t & 31u, base = 100u * (t >> 5);
    const unsigned int* o = out.data.data() + 4 * t;
    wrong += o[0] == ballot ? 0 : 1;
    wrong += o[1] == base + 5 ? 0 : 1;
    wrong += o[2] == base + (lane + 1 < 32 ? lane + 1 : lane) ? 0 : 1;
    wrong += o[3] == base + (lane >= 2 ? lane - 2 : lane) ? 0 : 1;
  }
  CHECK(wrong == 0);
}

TEST_CASE("emulated runtime: a launch outside the limits fails with its own error",
          "[backend][cuda_kernel]") {
  emu::ledger.clear();
  ProbeBuffer<unsigned int> out("out", std::vector<unsigned int>(4 * 64), false);
  CHECK(kernels::launch(probe_warp, 1, 2048, nullptr, out.data.data()) ==
        cudaErrorInvalidConfiguration);
  CHECK(kernels::launch(probe_warp, 0, 64, nullptr, out.data.data()) ==
        cudaErrorInvalidConfiguration);
  CHECK(emu::ledger.counts.launches == 0);
  (void)cudaGetLastError();
}
