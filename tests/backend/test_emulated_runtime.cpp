// SPDX-License-Identifier: MIT
// The host emulation of CUDA itself (emulation/): small kernels that pin down what the ledger
// records (bytes, never-written bytes, sectors of coalesced and strided warp accesses) and that
// the built-ins behave as on a GPU (2-D grids, atomics and fences, ballots and shuffles). Then
// graph-safe entry points: with device-resident offsets and streams a call copies, allocates and
// synchronises nothing, and its captured graph replays on new inputs as a fresh call would.
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the kernels below then see its built-ins.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/backend/cpu/fill_random.hpp"
#include "specdec/backend/cpu/tree_mask_batch.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/backend/cuda/fill_random.hpp"
#include "specdec/backend/cuda/tree_mask_batch.hpp"
#include "specdec/backend/cuda/verify_batch.hpp"
#include "tree_cases.hpp"

namespace kernels = specdec::backend::cuda_impl::detail;
namespace emu = specdec::emulation;
using kernels::Global;

namespace {

// Kernel code cannot reach global memory around the ledger: a view neither dereferences nor
// converts to its pointer.
template <class G>
concept Dereferenceable = requires(G g) {
  *g;
};
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

namespace {

/// A call on `stream` (nullptr: the legacy default stream, not captured).
using GraphCall = std::function<void(cudaStream_t)>;

/// Captures `call` on a new stream and instantiates the graph, runs `write_new` (new contents of
/// the same device buffers), replays the graph and reads the outputs with `read`; then runs
/// `call` afresh on those inputs. Returns {replayed, fresh}.
template <class Read>
auto graph_replay(const GraphCall& call, const std::function<void()>& write_new, const Read& read) {
  emu::ledger.reset();
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  call(stream);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  CHECK(emu::ledger.counts.launches == 0);  // recorded, not run
  CHECK(emu::ledger.counts.captured_launches >= 1);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph) == cudaSuccess);
  write_new();
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  auto replayed = read();
  call(nullptr);
  auto fresh = read();
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaStreamDestroy(stream) == cudaSuccess);
  return std::pair{std::move(replayed), std::move(fresh)};
}

/// A capture of `call` (host arrays staged into a workspace of `staging_bytes`) fails with a
/// specdec::Error naming `host_name` and the device field to use; the capture is invalidated.
using StagedCall = std::function<void(cudaStream_t, specdec::backend::DeviceWorkspace)>;

void graph_capture_refused(std::size_t staging_bytes, const StagedCall& call,
                           const std::string& host_name, const std::string& device_name) {
  ProbeBuffer<unsigned char> staging("workspace", std::vector<unsigned char>(staging_bytes), false);
  const specdec::backend::DeviceWorkspace ws{staging.data.data(), staging.data.size()};
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK_THROWS_AS(call(stream, ws), specdec::Error);
  CHECK_THROWS_WITH(call(stream, ws),
                    Catch::StartsWith(host_name + ":") && Catch::Contains(device_name));
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  CHECK(graph == nullptr);
  (void)cudaGetLastError();
}

/// The call copies, allocates and synchronises nothing: it runs its launches only.
void graph_check_device_resident(const GraphCall& call, std::uint64_t launches) {
  emu::ledger.reset();
  call(nullptr);
  CHECK(emu::ledger.counts.copies() == 0);
  CHECK(emu::ledger.counts.memsets == 0);
  CHECK(emu::ledger.counts.allocations == 0);
  CHECK(emu::ledger.counts.syncs == 0);
  CHECK(emu::ledger.counts.launches == launches);
}

/// Checks `call` device-resident, then replays its graph after `write_new`: returns the outputs
/// (`read`), which equal a fresh call's and differ from those on the first inputs.
template <class Read>
auto graph_replay_new_inputs(const GraphCall& call, const std::function<void()>& write_new,
                             const Read& read) {
  graph_check_device_resident(call, 1);
  const auto on_first = read();
  auto replay = graph_replay(call, write_new, read);
  CHECK(replay.first == replay.second);
  CHECK(replay.second != on_first);
  return std::move(replay.second);
}

/// The trees of `c` in reverse order, with new streams: new offsets, tokens, rows and draws in
/// buffers of the same sizes.
specdec::test::TreeCase graph_reversed(const specdec::test::TreeCase& c, std::uint64_t seed) {
  specdec::test::TreeCase r;
  r.vocab = c.vocab;
  const auto v = static_cast<std::size_t>(c.vocab);
  for (std::size_t b = c.offsets.size() - 1; b-- > 0;) {
    const auto begin = static_cast<std::size_t>(c.offsets[b]);
    const auto end = static_cast<std::size_t>(c.offsets[b + 1]);
    r.tokens.insert(r.tokens.end(), c.tokens.begin() + begin, c.tokens.begin() + end);
    r.parents.insert(r.parents.end(), c.parents.begin() + begin, c.parents.begin() + end);
    const auto rows = (begin + b) * v, rows_end = (end + b + 1) * v;
    r.target.insert(r.target.end(), c.target.begin() + rows, c.target.begin() + rows_end);
    r.draft.insert(r.draft.end(), c.draft.begin() + rows, c.draft.begin() + rows_end);
    r.offsets.push_back(r.offsets.back() + static_cast<std::int32_t>(end - begin));
    r.streams.push_back(specdec::test::verify_stream(seed, static_cast<std::uint32_t>(b), 2));
  }
  return r;
}

/// verify_tree_batch's workspace bytes for the trees of `c`.
std::size_t graph_tree_workspace(const specdec::test::TreeCase& c) {
  std::int64_t largest = 0;
  for (std::size_t b = 0; b + 1 < c.offsets.size(); ++b)
    largest = std::max<std::int64_t>(largest, c.offsets[b + 1] - c.offsets[b]);
  return specdec::backend::cuda_impl::tree_workspace_size(
      static_cast<std::int64_t>(c.streams.size()), largest, c.vocab);
}

/// A tree batch in emulated device memory, offsets and streams included.
struct GraphTrees {
  explicit GraphTrees(const specdec::test::TreeCase& c)
      : offsets("offsets", c.offsets, true),
        tokens("tokens", c.tokens, true),
        parents("parents", c.parents, true),
        target("target", c.target, true),
        draft("draft", c.draft, true),
        streams("streams", c.streams, true),
        accepted_nodes("accepted_nodes", std::vector<std::int32_t>(c.tokens.size(), -7), true),
        accepted("accepted", std::vector<std::int32_t>(c.streams.size(), -7), true),
        final_tokens("final_tokens", std::vector<std::int32_t>(c.streams.size(), -7), true),
        bonus("bonus", std::vector<std::uint8_t>(c.streams.size(), 7), true),
        vocab(c.vocab) {}

  void write(const specdec::test::TreeCase& c) {
    REQUIRE(c.tokens.size() == tokens.data.size());
    offsets.data = c.offsets;
    tokens.data = c.tokens;
    parents.data = c.parents;
    target.data = c.target;
    draft.data = c.draft;
    streams.data = c.streams;
  }
  specdec::test::TreeResult result() const {
    return {accepted_nodes.data, accepted.data, final_tokens.data, bonus.data};
  }
  /// TreeBatchArgs over the device buffers: device offsets and streams, or the host ones of `c`.
  specdec::TreeBatchArgs args(const specdec::test::TreeCase* host, bool draft_rows) {
    const auto batch = static_cast<std::int64_t>(accepted.data.size());
    const auto rows = static_cast<std::int64_t>(tokens.data.size()) + batch;
    specdec::TreeBatchArgs a{
        .trees = {tokens.data, parents.data},
        .target_rows = {target.data.data(), rows, vocab},
        .draft_rows = draft_rows ? specdec::MatrixView<const float>(draft.data.data(), rows, vocab)
                                 : specdec::MatrixView<const float>{},
        .accepted_nodes = accepted_nodes.data,
        .accepted = accepted.data,
        .final_tokens = final_tokens.data,
        .bonus = bonus.data};
    if (host != nullptr) {
      a.node_offsets = host->offsets;
      a.streams = host->streams;
    } else {
      a.node_offsets = specdec::on_device(offsets.data.data(), offsets.data.size());
      a.streams = specdec::on_device(streams.data.data(), streams.data.size());
    }
    return a;
  }

  ProbeBuffer<std::int32_t> offsets, tokens, parents;
  ProbeBuffer<float> target, draft;
  ProbeBuffer<specdec::RandomStream> streams;
  ProbeBuffer<std::int32_t> accepted_nodes, accepted, final_tokens;
  ProbeBuffer<std::uint8_t> bonus;
  std::int64_t vocab;
};

}  // namespace

TEST_CASE("graph: verify_tree_batch with device offsets and streams replays on new inputs",
          "[backend][cuda_kernel][graph]") {
  using namespace specdec;
  emu::ledger.clear();
  const test::TreeCase first = test::make_trees(3, 96, 71);
  const test::TreeCase second = graph_reversed(first, 72);
  GraphTrees d(first);
  ProbeBuffer<unsigned char> ws("workspace",
                                std::vector<unsigned char>(graph_tree_workspace(first)), false);
  const backend::DeviceWorkspace dws{ws.data.data(), ws.data.size()};
  const GraphCall call = [&](cudaStream_t s) {
    verify_tree_batch(backend::cuda.on(s), Recursive{}, d.args(nullptr, true), dws);
  };
  graph_check_device_resident(call, 1);
  const test::TreeResult on_first = d.result();
  CHECK(on_first.accepted == test::tree_oracle(Recursive{}, first).accepted);
  const auto [replayed, fresh] = graph_replay(
      call, [&] { d.write(second); }, [&] { return d.result(); });
  CHECK(replayed == fresh);
  CHECK(fresh.accepted == test::tree_oracle(Recursive{}, second).accepted);
  CHECK(fresh.final_tokens != on_first.final_tokens);  // the replay saw the new inputs
  // Host offsets and streams are staged by a copy, which a capture refuses.
  graph_capture_refused(
      graph_tree_workspace(first),
      [&](cudaStream_t s, backend::DeviceWorkspace staging) {
        verify_tree_batch(backend::cuda.on(s), MultiRound{}, d.args(&second, true), staging);
      },
      "node_offsets", "on_device");
}

TEST_CASE("graph: verify_tree_batch_target_only with device offsets and streams replays",
          "[backend][cuda_kernel][graph]") {
  using namespace specdec;
  emu::ledger.clear();
  const test::TreeCase first = test::make_trees(3, 96, 73);
  const test::TreeCase second = graph_reversed(first, 74);
  GraphTrees d(first);
  const GraphCall call = [&](cudaStream_t s) {
    // Device offsets and streams: no staging, so no workspace.
    verify_tree_batch_target_only(backend::cuda.on(s), d.args(nullptr, false),
                                  backend::DeviceWorkspace{});
  };
  graph_check_device_resident(call, 1);
  const test::TreeResult on_first = d.result();
  const auto [replayed, fresh] = graph_replay(
      call, [&] { d.write(second); }, [&] { return d.result(); });
  CHECK(replayed == fresh);
  CHECK(fresh.final_tokens != on_first.final_tokens);
  Workspace cpu_ws;
  std::vector<std::int32_t> want(second.streams.size());
  std::vector<std::int32_t> want_nodes(second.tokens.size(), -7), want_tokens(want.size());
  verify_tree_batch_target_only(
      backend::cpu,
      TreeBatchArgs{
          .node_offsets = second.offsets,
          .trees = second.view(),
          .target_rows = {second.target.data(),
                          static_cast<std::int64_t>(second.tokens.size() + second.streams.size()),
                          second.vocab},
          .streams = second.streams,
          .accepted_nodes = want_nodes,
          .accepted = want,
          .final_tokens = want_tokens},
      cpu_ws);
  CHECK(fresh.accepted == want);
  CHECK(fresh.final_tokens == want_tokens);
  graph_capture_refused(
      4096,
      [&](cudaStream_t s, backend::DeviceWorkspace staging) {
        verify_tree_batch_target_only(backend::cuda.on(s), d.args(&second, false), staging);
      },
      "node_offsets", "on_device");
}

TEST_CASE("graph: a tree batch's device arrays are sized by the caller",
          "[backend][cuda_kernel][graph]") {
  using namespace specdec;
  emu::ledger.clear();
  const test::TreeCase c = test::make_trees(2, 32, 75);
  GraphTrees d(c);
  TreeBatchArgs a = d.args(nullptr, false);
  a.node_offsets = on_device(d.offsets.data.data(), 1);
  CHECK_THROWS_WITH(verify_tree_batch_target_only(backend::cuda, a, backend::DeviceWorkspace{}),
                    Catch::StartsWith("node_offsets:"));
  a = d.args(nullptr, false);
  a.streams = on_device(d.streams.data.data(), 1);
  CHECK_THROWS_WITH(verify_tree_batch_target_only(backend::cuda, a, backend::DeviceWorkspace{}),
                    Catch::StartsWith("streams:"));
  // On the CPU backend the device arrays are host memory: the same tokens as host spans.
  Workspace ws;
  a = d.args(nullptr, false);
  verify_tree_batch_target_only(backend::cpu, a, ws);
  const test::TreeResult with_device = d.result();
  verify_tree_batch_target_only(backend::cpu, d.args(&c, false), ws);
  CHECK(d.result() == with_device);
  CHECK(emu::ledger.counts.launches == 0);
}

TEST_CASE("graph: fill_random with device streams replays on new streams",
          "[backend][cuda_kernel][graph]") {
  using namespace specdec;
  emu::ledger.clear();
  const std::int64_t rows = 3, count = 40;
  std::vector<RandomStream> first, second;
  for (std::uint32_t s = 0; s < rows; ++s) {
    first.push_back(test::verify_stream(81, s, 4));
    second.push_back(test::verify_stream(82, s, 9));
  }
  ProbeBuffer<RandomStream> streams("streams", first, true);
  ProbeBuffer<float> out("out", std::vector<float>(static_cast<std::size_t>(rows * count)), false);
  const MatrixView<float> view(out.data.data(), rows, count);
  const GraphCall call = [&](cudaStream_t s) {
    fill_random(backend::cuda.on(s),
                FillRandomArgs{.streams = on_device(streams.data.data(), streams.data.size()),
                               .first = 7,
                               .out = view,
                               .kind = RandomKind::kGumbel},
                backend::DeviceWorkspace{});
  };
  graph_check_device_resident(call, 1);
  const auto [replayed, fresh] = graph_replay(
      call, [&] { streams.data = second; }, [&] { return out.data; });
  CHECK(replayed == fresh);
  std::vector<float> want(out.data.size());
  Workspace ws;
  fill_random(backend::cpu, second, 7, MatrixView<float>(want.data(), rows, count),
              RandomKind::kGumbel, ws);
  CHECK(fresh == want);
  graph_capture_refused(
      1024,
      [&](cudaStream_t s, backend::DeviceWorkspace staging) {
        fill_random(backend::cuda.on(s), second, 7, view, RandomKind::kUniform, staging);
      },
      "streams", "on_device");
  CHECK_THROWS_WITH(
      fill_random(backend::cuda,
                  FillRandomArgs{.streams = on_device(streams.data.data(), 2), .out = view},
                  backend::DeviceWorkspace{}),
      Catch::StartsWith("out:"));
}

namespace {

/// The trees of a forest in reverse order (new offsets and parents in buffers of the same size).
specdec::test::Forest graph_reversed_forest(const specdec::test::Forest& f) {
  specdec::test::Forest r;
  for (std::size_t b = f.trees.size(); b-- > 0;) {
    const auto& t = f.trees[b];
    r.tokens.insert(r.tokens.end(), t.tokens.begin(), t.tokens.end());
    r.parents.insert(r.parents.end(), t.parents.begin(), t.parents.end());
    r.offsets.push_back(r.offsets.back() + t.size());
    r.trees.push_back(t);
  }
  return r;
}

}  // namespace

TEST_CASE("graph: packed_tree_masks_batch with device offsets replays on new trees",
          "[backend][cuda_kernel][graph]") {
  using namespace specdec;
  emu::ledger.clear();
  const test::Forest first = test::random_forest(4, 83);
  const test::Forest second = graph_reversed_forest(first);
  const auto total = static_cast<std::int64_t>(first.parents.size());
  const std::int64_t words = 3;
  ProbeBuffer<std::int32_t> offsets("offsets", first.offsets, true);
  ProbeBuffer<std::int32_t> parents("parents", first.parents, true);
  ProbeBuffer<std::uint32_t> masks(
      "masks", std::vector<std::uint32_t>(static_cast<std::size_t>(total * 3)), false);
  const MatrixView<std::uint32_t> view(masks.data.data(), total, words);
  const GraphCall call = [&](cudaStream_t s) {
    packed_tree_masks_batch(backend::cuda.on(s),
                            TreeMaskBatchArgs{.node_offsets = on_device(offsets.data.data(), 5),
                                              .trees = {first.tokens, parents.data},
                                              .masks = view},
                            backend::DeviceWorkspace{});
  };
  const auto fresh = graph_replay_new_inputs(
      call,
      [&] {
        offsets.data = second.offsets;
        parents.data = second.parents;
      },
      [&] { return masks.data; });
  std::vector<std::uint32_t> want(masks.data.size());
  Workspace ws;
  packed_tree_masks_batch(backend::cpu, second.offsets, second.view(),
                          MatrixView<std::uint32_t>(want.data(), total, words), ws);
  CHECK(fresh == want);
  graph_capture_refused(
      1024,
      [&](cudaStream_t s, backend::DeviceWorkspace staging) {
        packed_tree_masks_batch(backend::cuda.on(s), second.offsets, second.view(), view, staging);
      },
      "node_offsets", "on_device");
}

TEST_CASE("graph: tree_positions_batch with device offsets and context lengths replays",
          "[backend][cuda_kernel][graph]") {
  using namespace specdec;
  emu::ledger.clear();
  const test::Forest first = test::random_forest(4, 84);
  const test::Forest second = graph_reversed_forest(first);
  const std::vector<std::int32_t> contexts_first{5, 1, 9, 30}, contexts_second{2, 7, 1, 11};
  ProbeBuffer<std::int32_t> offsets("offsets", first.offsets, true);
  ProbeBuffer<std::int32_t> parents("parents", first.parents, true);
  ProbeBuffer<std::int32_t> contexts("contexts", contexts_first, true);
  ProbeBuffer<std::int32_t> positions("positions", std::vector<std::int32_t>(first.parents.size()),
                                      false);
  const GraphCall call = [&](cudaStream_t s) {
    tree_positions_batch(backend::cuda.on(s),
                         TreePositionsBatchArgs{
                             .node_offsets = on_device(offsets.data.data(), 5),
                             .trees = {first.tokens, parents.data},
                             .context_lengths = on_device(contexts.data.data(), 4),
                             .positions = positions.data},
                         backend::DeviceWorkspace{});
  };
  const auto fresh = graph_replay_new_inputs(
      call,
      [&] {
        offsets.data = second.offsets;
        parents.data = second.parents;
        contexts.data = contexts_second;
      },
      [&] { return positions.data; });
  std::vector<std::int32_t> want(positions.data.size());
  Workspace ws;
  tree_positions_batch(backend::cpu, second.offsets, second.view(), contexts_second, want, ws);
  CHECK(fresh == want);
  graph_capture_refused(
      1024,
      [&](cudaStream_t s, backend::DeviceWorkspace staging) {
        tree_positions_batch(backend::cuda.on(s), second.offsets, second.view(), contexts_second,
                             positions.data, staging);
      },
      "node_offsets", "on_device");
}
