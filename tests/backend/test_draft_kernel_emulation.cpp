// SPDX-License-Identifier: MIT
// The CUDA drafting kernels' source (Gumbel-top-k, stochastic-beam-search levels), run on the host
// through the library's CUDA emulation (one fiber per CUDA thread, blocks in a seeded random order)
// by the public entry points on backend::cuda, against the CPU backend: equal bit for bit, since
// both compute every perturbed value with the same scalar code and rank them alike.
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the kernel header then sees its built-ins.
#include <Eigen/Core>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "specdec/backend/cpu/draft_batch.hpp"
#include "specdec/backend/cuda/detail/draft_kernels.cuh"
#include "specdec/backend/cuda/draft_batch.hpp"
#include "specdec/backend/cuda/row_split.hpp"
#include "specdec/core/tile_sum.hpp"
#include "specdec/draft/gumbel_topk.hpp"
#include "specdec/draft/stochastic_beam.hpp"
#include "specdec/toy/random.hpp"
#include "tree_cases.hpp"

using namespace specdec;
using specdec::test::draft_stream;
namespace kernels = specdec::backend::cuda_impl::detail;
namespace draft_emu = specdec::emulation;

static_assert(backend::cuda_impl::kRowSplitTile == detail::kSumTile,
              "a row split's tiles are the CPU's summation tiles");

namespace {

struct TopK {
  std::vector<Token> tokens;
  std::vector<float> values;
  std::vector<std::int32_t> counts;
};

/// Rows `stride` apart (stride >= vocab; the gap holds NaN, which must never be read).
template <class T>
std::vector<T> with_stride(const std::vector<float>& rows, std::int64_t vocab,
                           std::int64_t stride) {
  const auto n_rows = static_cast<std::int64_t>(rows.size()) / vocab;
  std::vector<T> out(static_cast<std::size_t>(n_rows * stride),
                     static_cast<T>(std::numeric_limits<float>::quiet_NaN()));
  for (std::int64_t r = 0; r < n_rows; ++r) {
    for (std::int64_t x = 0; x < vocab; ++x) {
      out[static_cast<std::size_t>(r * stride + x)] =
          static_cast<T>(rows[static_cast<std::size_t>(r * vocab + x)]);
    }
  }
  return out;
}

enum class On { kCpu, kCuda };

/// Gumbel-top-k of `rows` (n_rows x vocab, `stride` apart) through a backend's entry point: the
/// CPU's (two threads), or backend::cuda's (the launcher and kernel under emulation). The
/// outputs start at -7 (values at 7), so a cell left unwritten shows.
template <class T>
TopK run_gumbel(On on, RowKind kind, const std::vector<T>& rows, std::int64_t n_rows,
                std::int64_t vocab, std::int64_t stride, std::int64_t k,
                const std::vector<RandomStream>& streams) {
  const auto cells = static_cast<std::size_t>(n_rows * k);
  TopK out{std::vector<Token>(cells, -7), std::vector<float>(cells, 7.0f),
           std::vector<std::int32_t>(static_cast<std::size_t>(n_rows), -7)};
  const GumbelTopKBatchArgs<T> args{.kind = kind,
                                    .rows = MatrixView<const T>(rows.data(), n_rows, vocab, stride),
                                    .k = k,
                                    .streams = streams,
                                    .tokens = MatrixView<Token>(out.tokens.data(), n_rows, k),
                                    .values = MatrixView<float>(out.values.data(), n_rows, k),
                                    .counts = out.counts};
  const GumbelTopKBatchShape shape{n_rows, vocab, k};
  if (on == On::kCuda) {
    std::vector<unsigned char> ws(workspace_size(backend::cuda, shape));
    gumbel_top_k_batch(backend::cuda, args, backend::DeviceWorkspace{ws.data(), ws.size()});
  } else {
    Workspace ws(workspace_size(backend::cpu, shape));
    gumbel_top_k_batch(backend::cpu.with_threads(2), args, ws);
  }
  return out;
}

/// Probability rows with a sparse row (two allowed tokens: fewer than k) and a row whose allowed
/// tokens alternate with banned ones.
std::vector<float> probability_rows(std::int64_t n_rows, std::int64_t vocab, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  std::vector<float> rows;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    auto row = toy::dirichlet(vocab, 0.3, rng);
    if (r == 1) {
      std::fill(row.begin(), row.end(), 0.0f);
      row[5] = 0.75f, row[static_cast<std::size_t>(vocab) - 1] = 0.25f;
    }
    if (r == 2) {
      double sum = 0.0;
      for (std::size_t i = 0; i < row.size(); ++i) {
        if (i % 2 == 1) row[i] = 0.0f;
        sum += row[i];
      }
      for (auto& p : row) p = static_cast<float>(p / sum);
    }
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

std::vector<float> log_rows(const std::vector<float>& probs) {
  std::vector<float> out;
  for (const float p : probs) out.push_back(p > 0.0f ? std::log(p) * 1.3f + 0.4f : -INFINITY);
  return out;
}

std::vector<RandomStream> streams_for(std::int64_t n_rows, std::uint64_t seed) {
  std::vector<RandomStream> streams;
  for (std::int64_t r = 0; r < n_rows; ++r)
    streams.push_back(draft_stream(seed, static_cast<std::uint32_t>(r)));
  return streams;
}

/// The CUDA entry point against the CPU backend on `rows` (as T, rows `stride` apart), under
/// `orders` block orders. Entries listed in `nan_on_device` are NaN in the device rows and banned
/// (-inf or 0) in the CPU's: a NaN after perturbation is never drawn.
template <class T>
void check_gumbel(RowKind kind, const std::vector<float>& rows, std::int64_t vocab,
                  std::int64_t stride, std::int64_t k, int orders = 1,
                  const std::vector<std::size_t>& nan_on_device = {}) {
  const auto n_rows = static_cast<std::int64_t>(rows.size()) / vocab;
  std::vector<float> banned = rows, nans = rows;
  for (const std::size_t i : nan_on_device) {
    banned[i] = kind == RowKind::kProbabilities ? 0.0f : -INFINITY;
    nans[i] = std::numeric_limits<float>::quiet_NaN();
  }
  const auto streams = streams_for(n_rows, 21);
  const auto want = run_gumbel(On::kCpu, kind, with_stride<T>(banned, vocab, stride), n_rows,
                               vocab, stride, k, streams);
  const auto device_rows = with_stride<T>(nans, vocab, stride);
  const auto split =
      backend::cuda_impl::draft_row_split(n_rows, vocab, backend::cuda_impl::kH100Sms);
  for (int order = 1; order <= orders; ++order) {
    const auto seed = static_cast<std::uint64_t>(order);
    draft_emu::ledger.seed = seed;
    const auto got = run_gumbel(On::kCuda, kind, device_rows, n_rows, vocab, stride, k, streams);
    CAPTURE(kind == RowKind::kProbabilities, sizeof(T), vocab, stride, k, seed,
            split.blocks_per_row);
    CHECK(got.counts == want.counts);
    CHECK(got.tokens == want.tokens);
    CHECK(got.values == want.values);
  }
  draft_emu::ledger.seed = 1;
}

}  // namespace

TEST_CASE("packet_log equals Eigen's vectorised log bit for bit", "[backend][cuda_kernel]") {
  // Every 97th float from the smallest normal up, through the packet path; then perturb_row_host
  // (head and tail entries of unaligned rows run the scalar path) against gumbel_perturbed.
  std::vector<float> values;
  for (std::uint32_t bits = 0x00800000u; bits < 0x7f800000u; bits += 97u * 4099u) {
    values.push_back(detail::bits_float(bits));
  }
  // Eigen's own (aligned) arrays: every entry but the last few goes through packets.
  const Eigen::ArrayXf x =
      Eigen::Map<const Eigen::ArrayXf>(values.data(), static_cast<Eigen::Index>(values.size()));
  const Eigen::ArrayXf y = x.log();
  std::size_t mismatches = 0;
  for (Eigen::Index i = 0; i + 16 < x.size(); ++i) {  // the tail may be libm's
    mismatches += detail::float_bits(detail::packet_log(x[i])) == detail::float_bits(y[i]) ? 0 : 1;
  }
  CHECK(mismatches == 0);
  CHECK(detail::packet_log(0.0f) == -INFINITY);
  CHECK(detail::packet_log(INFINITY) == INFINITY);
  CHECK(std::isnan(detail::packet_log(-1.0f)));

  const auto probs = probability_rows(2, 101, 3);
  const auto stream = draft_stream(8, 1);
  std::vector<float> perturbed(110);
  for (std::size_t offset : {0u, 1u, 3u}) {  // unaligned starts: scalar heads
    detail::perturb_row_host<RowKind::kProbabilities>(probs.data(), 101, stream, 0,
                                                      perturbed.data() + offset);
    for (std::uint32_t i = 0; i < 101; ++i) {
      const float want =
          detail::gumbel_perturbed<RowKind::kProbabilities>(probs[i], stream.uniform(i));
      CHECK(detail::float_bits(perturbed[offset + i]) == detail::float_bits(want));
    }
  }
}

TEST_CASE("Gumbel-top-k on emulated CUDA equals the CPU backend with 1, 2 and 4 blocks per row",
          "[backend][cuda_kernel]") {
  using backend::cuda_impl::draft_row_split;
  using backend::cuda_impl::kH100Sms;
  // Two tiles a block (few rows, 132 SMs): V = 2000, two tiles: one block per row; 4000: two;
  // 7 * 1024: four, the last of one tile.
  REQUIRE(draft_row_split(3, 2000, kH100Sms).blocks_per_row == 1);
  REQUIRE(draft_row_split(3, 4000, kH100Sms).blocks_per_row == 2);
  REQUIRE(draft_row_split(3, 7 * 1024, kH100Sms).blocks_per_row == 4);
  for (const std::int64_t vocab : {2000, 4000, 7 * 1024}) {
    const auto probs = probability_rows(3, vocab, 7);
    const int orders = vocab > 2048 ? 2 : 1;  // split rows: two block orders
    check_gumbel<float>(RowKind::kProbabilities, probs, vocab, vocab, 8, orders);
    check_gumbel<float>(RowKind::kLogWeights, log_rows(probs), vocab, vocab + 5, 1);
  }
  const auto probs = probability_rows(3, 2000, 8);
  check_gumbel<float>(RowKind::kProbabilities, probs, 2000, 2000, 1);
  check_gumbel<float>(RowKind::kLogWeights, log_rows(probs), 2000, 2000, 8, 2);
}

TEST_CASE("Gumbel-top-k on emulated CUDA takes fp16 and bf16 rows, split or not",
          "[backend][cuda_kernel]") {
  for (const std::int64_t vocab : {203, 2100}) {
    const auto probs = probability_rows(3, vocab, 9);
    const auto logits = log_rows(probs);
    check_gumbel<Eigen::half>(RowKind::kLogWeights, logits, vocab, vocab, 8);
    check_gumbel<Eigen::bfloat16>(RowKind::kLogWeights, logits, vocab, vocab + 3, 5);
    check_gumbel<Eigen::half>(RowKind::kProbabilities, probs, vocab, vocab, 1);
  }
}

TEST_CASE("Gumbel-top-k on emulated CUDA: banned, NaN and scarce entries as the CPU, large k",
          "[backend][cuda_kernel]") {
  // Row 1 has two drawable tokens (fewer than k), row 2 every other token banned; NaN entries
  // on the device (where the CPU's row is banned, so that its probabilities still sum to 1) are
  // never drawn; row 2 has one in each of its three blocks.
  const std::int64_t vocab = 3000;
  const auto probs = probability_rows(3, vocab, 10);
  const std::vector<std::size_t> nans = {3000 + 3, 3000 + 1500, 6000 + 1, 6000 + 1025, 6000 + 2999};
  check_gumbel<float>(RowKind::kProbabilities, probs, vocab, vocab, 8, 1, nans);
  check_gumbel<float>(RowKind::kLogWeights, log_rows(probs), vocab, vocab, 8, 1, nans);
  // k above the CPU's heap limit (256): its nth_element path; lists of more than a round.
  const auto small = probability_rows(3, 1200, 11);
  check_gumbel<float>(RowKind::kLogWeights, log_rows(small), 1200, 1200, 280);
}

TEST_CASE("the emulated top-k merge ranks ties by token id like the CPU",
          "[backend][cuda_kernel]") {
  // Perturbed values from a small set: many equal values, banned (-inf) and NaN entries, +0 and
  // -0. A block's rounds (unordered entrants, merged as lists of one) and the last block's merge
  // of block lists (in ranking order) against the CPU's selection.
  const int n = 150;
  const float pattern[] = {1.5f, 0.25f, -INFINITY, 2.0f,  0.25f, std::nanf(""),
                           0.0f, -0.0f, 1.5f,      -3.0f, 0.25f};
  std::vector<float> perturbed;
  for (int i = 0; i < n; ++i) perturbed.push_back(pattern[(i * 7 + i / 11) % 11]);
  static kernels::SplitTopKShared sh;
  for (const int k : {1, 3, 13, 14, 40, 100, 150}) {
    for (const int chunk : {7, 64}) {
      std::vector<std::int32_t> index(static_cast<std::size_t>(n));
      const auto want = detail::select_top_k_of_row(perturbed.data(), n, k, index.data());
      int got = -1;
      std::vector<std::int32_t> ids;
      const int blocks = (n + chunk - 1) / chunk;
      std::vector<float> list_values(static_cast<std::size_t>(blocks * k));
      std::vector<std::int32_t> list_ids(static_cast<std::size_t>(blocks * k));
      std::vector<std::int32_t> list_counts(static_cast<std::size_t>(blocks));
      std::vector<unsigned int> counters(1, 0u);
      const kernels::TopKLists lists{list_values.data(), list_ids.data(), list_counts.data(),
                                     counters.data()};
      run_emulated_block(32, 0, [&] {
        // Block y takes `chunk` entries in two rounds (unordered entrants) and keeps its list;
        // then the lists are merged in block order (ordered entrants).
        for (int y = 0; y < blocks; ++y) {
          int kept = 0;
          const int end = std::min(n, (y + 1) * chunk);
          for (int base = y * chunk; base < end; base += (chunk + 1) / 2) {
            if (threadIdx.x == 0) {
              int s = 0;
              for (int i = base; i < std::min(end, base + (chunk + 1) / 2); ++i) {
                const float v = perturbed[static_cast<std::size_t>(i)];
                if (kernels::enters_list(v, i, kept, k, sh)) {
                  sh.candidate_values[s] = v;
                  sh.list_counts[s] = 1;
                  sh.candidate_ids[s++] = i;
                }
              }
              sh.count = s;
            }
            __syncthreads();
            const int s = sh.count;
            __syncthreads();
            // Each entrant a list of one, merged into one sorted list, then into the block's.
            const int sorted = s > 0 ? kernels::merge_sorted_lists(s, 1, k, sh) : 0;
            if (sorted > 0) kept = kernels::merge_candidates(kept, sorted, k, sh);
          }
          for (int j = static_cast<int>(threadIdx.x); j < kept; j += 32) {
            list_values[static_cast<std::size_t>(y * k + j)] = sh.list_values[j];
            list_ids[static_cast<std::size_t>(y * k + j)] = sh.list_ids[j];
          }
          if (threadIdx.x == 0) list_counts[static_cast<std::size_t>(y)] = kept;
          __syncthreads();
        }
        const int kept = kernels::merge_block_lists(lists, 0, blocks, k, sh);
        if (threadIdx.x == 0) {
          got = kept;
          ids.assign(sh.list_ids, sh.list_ids + kept);
        }
      });
      CAPTURE(k, chunk);
      REQUIRE(got == want);
      CHECK(ids == std::vector<std::int32_t>(index.begin(), index.begin() + want));
    }
  }
}

TEST_CASE("the emulated beam selection ranks ties by parent then token like the CPU",
          "[backend][cuda_kernel]") {
  // One sequence, width 4, three live beams whose candidates tie on their scores; beam 0 lists
  // its tied children out of token order.
  const int width = 4;
  std::vector<detail::BeamCandidate> candidates(16, {-1.0, 0.0f, -9, -9, 0});
  const auto set = [&](int beam, int j, double score, Token token) {
    candidates[static_cast<std::size_t>(beam * width + j)] = {
        score, static_cast<float>(-0.5 * (beam + 1) - 0.01 * token), beam, token, 0};
  };
  set(0, 0, 0.5, 9), set(0, 1, 0.5, 7), set(0, 2, 0.5, 3), set(0, 3, -0.0, 5);
  set(1, 0, 0.5, 2), set(1, 1, 0.0, 1);
  set(2, 0, 1.0, 4), set(2, 1, 0.5, 0), set(2, 2, 0.0, 6);
  const std::vector<std::int32_t> children = {4, 2, 3, 0};
  for (const std::int32_t count : {3, 2, 1}) {
    std::vector<detail::BeamCandidate> live;
    for (int i = 0; i < count; ++i) {
      for (int j = 0; j < children[static_cast<std::size_t>(i)]; ++j)
        live.push_back(candidates[static_cast<std::size_t>(i * width + j)]);
    }
    const auto kept = detail::keep_best(live, static_cast<std::size_t>(width));
    std::vector<std::int32_t> parents(4, 7), tokens(4, 7), next_count(1, 7);
    std::vector<float> log_probs(4), scores(4);
    const std::vector<std::int32_t> counts = {count};
    const backend::cuda_impl::BeamLevelArgs args{nullptr,
                                                 0,
                                                 counts.data(),
                                                 nullptr,
                                                 0,
                                                 nullptr,
                                                 0,
                                                 nullptr,
                                                 0,
                                                 parents.data(),
                                                 width,
                                                 tokens.data(),
                                                 width,
                                                 log_probs.data(),
                                                 width,
                                                 scores.data(),
                                                 width,
                                                 next_count.data()};
    for (const unsigned int threads : {32u, 64u}) {
      run_emulated_block(threads, 0, [&] {
        kernels::beam_select_kernel(args, width, candidates.data(), children.data());
      });
      CAPTURE(count, threads);
      REQUIRE(next_count[0] == static_cast<std::int32_t>(kept));
      for (std::size_t j = 0; j < 4; ++j) {
        if (j < kept) {
          CHECK(parents[j] == live[j].parent);
          CHECK(tokens[j] == live[j].token);
          CHECK(log_probs[j] == live[j].log_prob);
          CHECK(scores[j] == static_cast<float>(live[j].score));
        } else {
          CHECK(parents[j] == -1);
          CHECK(tokens[j] == kNoToken);
          CHECK(scores[j] == -INFINITY);
        }
      }
    }
  }
}

namespace {

/// The inputs and outputs of one beam level for B sequences of width W.
struct Level {
  std::int64_t batch, width, vocab;
  std::vector<float> draft;
  std::vector<std::int32_t> counts, nodes;
  std::vector<float> log_probs, scores;
  std::vector<std::int32_t> next_parents, next_counts;
  std::vector<Token> next_tokens;
  std::vector<float> next_log_probs, next_scores;

  void clear_outputs() {
    const auto cells = static_cast<std::size_t>(batch * width);
    next_parents.assign(cells, 7);
    next_tokens.assign(cells, 7);
    next_log_probs.assign(cells, 7.0f);
    next_scores.assign(cells, 7.0f);
    next_counts.assign(static_cast<std::size_t>(batch), 7);
  }

  /// The level's arguments: its rows and beams in, the next beams out.
  BeamLevelBatchArgs args(Resident<const RandomStream> streams) {
    const auto b = batch, w = width;
    return {.draft_rows = MatrixView<const float>(draft.data(), b * w, vocab),
            .beam_counts = counts,
            .nodes = MatrixView<const std::int32_t>(nodes.data(), b, w),
            .log_probs = MatrixView<const float>(log_probs.data(), b, w),
            .scores = MatrixView<const float>(scores.data(), b, w),
            .streams = streams,
            .next_parents = MatrixView<std::int32_t>(next_parents.data(), b, w),
            .next_tokens = MatrixView<Token>(next_tokens.data(), b, w),
            .next_log_probs = MatrixView<float>(next_log_probs.data(), b, w),
            .next_scores = MatrixView<float>(next_scores.data(), b, w),
            .next_counts = next_counts};
  }
};

void run_level_cpu(Level& l, const std::vector<RandomStream>& streams) {
  l.clear_outputs();
  Workspace ws(workspace_size(backend::cpu, BeamLevelBatchShape{l.batch, l.width, l.vocab}));
  stochastic_beam_level_batch(backend::cpu.with_threads(2), l.args(streams), ws);
}

/// One level through backend::cuda's entry point (launcher and kernels under emulation).
void run_level_cuda(Level& l, const std::vector<RandomStream>& streams) {
  l.clear_outputs();
  std::vector<unsigned char> ws(
      workspace_size(backend::cuda, BeamLevelBatchShape{l.batch, l.width, l.vocab}));
  stochastic_beam_level_batch(backend::cuda, l.args(streams),
                              backend::DeviceWorkspace{ws.data(), ws.size()});
}

/// Level 0 of B sequences: the root only, root rows from `rows`.
Level root_level(std::int64_t batch, std::int64_t width, std::int64_t vocab,
                 const std::vector<std::vector<float>>& rows) {
  const auto cells = static_cast<std::size_t>(batch * width);
  Level l{batch,
          width,
          vocab,
          std::vector<float>(cells * static_cast<std::size_t>(vocab), 0.0f),
          std::vector<std::int32_t>(static_cast<std::size_t>(batch), 1),
          std::vector<std::int32_t>(cells, kRootNode),
          std::vector<float>(cells, 0.0f),
          std::vector<float>(cells, 0.0f),
          {},
          {},
          {},
          {},
          {}};
  for (std::int64_t s = 0; s < batch; ++s) {
    const auto& row = rows[static_cast<std::size_t>(s) % rows.size()];
    std::copy(row.begin(), row.end(),
              l.draft.begin() + static_cast<std::ptrdiff_t>(s * width * vocab));
  }
  return l;
}

/// The next level from a level's outputs: node ids counted per sequence, each beam's draft row
/// picked from `rows` by its node id.
void advance(Level& l, const std::vector<std::vector<float>>& rows, std::int32_t& next_node) {
  const auto w = static_cast<std::size_t>(l.width), v = static_cast<std::size_t>(l.vocab);
  std::fill(l.draft.begin(), l.draft.end(), 0.0f);
  for (std::size_t s = 0; s < static_cast<std::size_t>(l.batch); ++s) {
    l.counts[s] = l.next_counts[s];
    for (std::size_t j = 0; j < static_cast<std::size_t>(l.next_counts[s]); ++j) {
      l.nodes[s * w + j] = next_node + static_cast<std::int32_t>(j);
      l.log_probs[s * w + j] = l.next_log_probs[s * w + j];
      l.scores[s * w + j] = l.next_scores[s * w + j];
      const auto& row = rows[(s + j + static_cast<std::size_t>(next_node)) % rows.size()];
      std::copy(row.begin(), row.end(),
                l.draft.begin() + static_cast<std::ptrdiff_t>((s * w + j) * v));
    }
  }
  next_node += static_cast<std::int32_t>(w);
}

}  // namespace

TEST_CASE("the emulated beam level kernels equal the CPU backend level by level",
          "[backend][cuda_kernel]") {
  // V = 90: one block per beam row; V = 3000: two of two tiles and one (9 beam rows, 132 SMs).
  REQUIRE(backend::cuda_impl::draft_row_split(9, 3000, backend::cuda_impl::kH100Sms)
              .blocks_per_row == 2);
  const std::int64_t batch = 3, width = 3;
  for (const std::int64_t vocab : {90, 3000}) {
    toy::ToyRandom rng(12);
    std::vector<std::vector<float>> rows;
    for (int i = 0; i < 4; ++i) rows.push_back(toy::dirichlet(vocab, 0.4, rng));
    std::vector<float> sparse(static_cast<std::size_t>(vocab), 0.0f);
    sparse[4] = 0.7f, sparse[80] = 0.3f;  // two children only: fewer live beams than the width
    const std::vector<std::vector<float>> roots = {rows[0], sparse, rows[2]};
    std::vector<RandomStream> streams;
    for (std::uint32_t s = 0; s < batch; ++s) streams.push_back(draft_stream(40, s));
    Level cpu = root_level(batch, width, vocab, roots);
    Level gpu = cpu;
    std::int32_t next_node = 0;
    for (int level = 0; level < (vocab < 1024 ? 3 : 2); ++level) {
      draft_emu::ledger.seed = static_cast<std::uint64_t>(level + 1);
      run_level_cpu(cpu, streams);
      run_level_cuda(gpu, streams);
      CAPTURE(vocab, level);
      CHECK(gpu.next_counts == cpu.next_counts);
      CHECK(gpu.next_parents == cpu.next_parents);
      CHECK(gpu.next_tokens == cpu.next_tokens);
      CHECK(gpu.next_log_probs == cpu.next_log_probs);
      CHECK(gpu.next_scores == cpu.next_scores);
      if (level == 0) CHECK(cpu.next_counts[1] == 2);
      std::int32_t gpu_next = next_node;
      advance(cpu, rows, next_node);
      advance(gpu, rows, gpu_next);
    }
  }
  draft_emu::ledger.seed = 1;
}

TEST_CASE("the emulated beam level kernels clamp device beam counts", "[backend][cuda_kernel]") {
  // Counts are device memory the host cannot check: below 0 gives no extensions, above the width
  // counts as the width.
  const std::int64_t batch = 2, width = 2, vocab = 40;
  toy::ToyRandom rng(3);
  const std::vector<std::vector<float>> rows = {toy::dirichlet(vocab, 0.5, rng),
                                                toy::dirichlet(vocab, 0.5, rng)};
  std::vector<RandomStream> streams = {draft_stream(2, 0), draft_stream(2, 1)};
  Level cpu = root_level(batch, width, vocab, rows);
  std::copy(rows[1].begin(), rows[1].end(), cpu.draft.begin() + vocab);  // beam 1 of sequence 0
  cpu.counts = {2, 1};
  Level gpu = cpu;
  gpu.counts = {9, -3};
  run_level_cpu(cpu, streams);
  run_level_cuda(gpu, streams);
  CHECK(gpu.next_counts == std::vector<std::int32_t>{2, 0});
  for (std::size_t j = 0; j < 2; ++j) {
    CHECK(gpu.next_parents[j] == cpu.next_parents[j]);
    CHECK(gpu.next_tokens[j] == cpu.next_tokens[j]);
    CHECK(gpu.next_scores[j] == cpu.next_scores[j]);
    CHECK(gpu.next_parents[2 + j] == -1);
    CHECK(gpu.next_tokens[2 + j] == kNoToken);
    CHECK(gpu.next_log_probs[2 + j] == -INFINITY);
  }
}

namespace {

/// The graph of `call` captured on `stream`; the ledger is reset first, so it then holds what the
/// capture did.
cudaGraph_t captured_graph(cudaStream_t stream, const std::function<void(cudaStream_t)>& call) {
  draft_emu::ledger.reset();
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  call(stream);
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  return graph;
}

}  // namespace

TEST_CASE("Gumbel-top-k with device streams is captured once and replays with new streams and rows",
          "[backend][cuda_kernel]") {
  const std::int64_t n_rows = 3, vocab = 2000, k = 4;  // two blocks per row
  std::vector<float> rows = log_rows(probability_rows(n_rows, vocab, 13));
  std::vector<RandomStream> device_streams = streams_for(n_rows, 30);  // device memory here
  const auto cells = static_cast<std::size_t>(n_rows * k);
  std::vector<Token> tokens(cells);
  std::vector<float> values(cells);
  std::vector<std::int32_t> counts(static_cast<std::size_t>(n_rows));
  std::vector<unsigned char> ws(
      workspace_size(backend::cuda, GumbelTopKBatchShape{n_rows, vocab, k}));
  const GumbelTopKBatchArgs<float> args{
      .kind = RowKind::kLogWeights,
      .rows = MatrixView<const float>(rows.data(), n_rows, vocab),
      .k = k,
      .streams = on_device(device_streams.data(), device_streams.size()),
      .tokens = MatrixView<Token>(tokens.data(), n_rows, k),
      .values = MatrixView<float>(values.data(), n_rows, k),
      .counts = counts};
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  cudaGraph_t graph = captured_graph(stream, [&](cudaStream_t s) {
    gumbel_top_k_batch(backend::cuda.on(s), args, backend::DeviceWorkspace{ws.data(), ws.size()});
  });
  CHECK(draft_emu::ledger.counts.launches == 0);
  CHECK(draft_emu::ledger.counts.captured_launches == 1);
  CHECK(draft_emu::ledger.counts.copies() == 0);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph) == cudaSuccess);
  for (const std::uint64_t seed : {31u, 32u}) {
    const auto new_streams = streams_for(n_rows, seed);
    const auto new_rows = log_rows(probability_rows(n_rows, vocab, seed));
    std::copy(new_streams.begin(), new_streams.end(), device_streams.begin());
    std::copy(new_rows.begin(), new_rows.end(), rows.begin());
    draft_emu::ledger.reset();
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    CHECK(draft_emu::ledger.counts.launches == 1);
    CHECK(draft_emu::ledger.counts.copies() == 0);
    CHECK(draft_emu::ledger.counts.syncs == 0);
    CHECK(draft_emu::ledger.counts.allocations == 0);
    const auto fresh =
        run_gumbel(On::kCuda, RowKind::kLogWeights, rows, n_rows, vocab, vocab, k, new_streams);
    CAPTURE(seed);
    CHECK(tokens == fresh.tokens);
    CHECK(values == fresh.values);
    CHECK(counts == fresh.counts);
  }
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
}

TEST_CASE("a beam level with device streams is captured once and replays with new streams and rows",
          "[backend][cuda_kernel]") {
  const std::int64_t batch = 2, width = 2, vocab = 1500;  // two blocks per beam row
  toy::ToyRandom rng(14);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 4; ++i) rows.push_back(toy::dirichlet(vocab, 0.4, rng));
  Level level = root_level(batch, width, vocab, {rows[0], rows[1]});
  level.clear_outputs();
  std::vector<RandomStream> device_streams = {draft_stream(50, 0), draft_stream(50, 1)};
  std::vector<unsigned char> ws(
      workspace_size(backend::cuda, BeamLevelBatchShape{batch, width, vocab}));
  const BeamLevelBatchArgs args =
      level.args(on_device(device_streams.data(), device_streams.size()));
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  cudaGraph_t graph = captured_graph(stream, [&](cudaStream_t s) {
    stochastic_beam_level_batch(backend::cuda.on(s), args,
                                backend::DeviceWorkspace{ws.data(), ws.size()});
  });
  CHECK(draft_emu::ledger.counts.captured_launches == 2);
  CHECK(draft_emu::ledger.counts.copies() == 0);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph) == cudaSuccess);
  for (const std::uint32_t seed : {51u, 52u}) {
    const std::vector<RandomStream> new_streams = {draft_stream(seed, 0), draft_stream(seed, 1)};
    std::copy(new_streams.begin(), new_streams.end(), device_streams.begin());
    Level fresh = root_level(batch, width, vocab, {rows[seed % 4], rows[(seed + 1) % 4]});
    std::copy(fresh.draft.begin(), fresh.draft.end(), level.draft.begin());
    draft_emu::ledger.reset();
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    CHECK(draft_emu::ledger.counts.launches == 2);
    CHECK(draft_emu::ledger.counts.copies() == 0);
    run_level_cuda(fresh, new_streams);
    CAPTURE(seed);
    CHECK(level.next_counts == fresh.next_counts);
    CHECK(level.next_parents == fresh.next_parents);
    CHECK(level.next_tokens == fresh.next_tokens);
    CHECK(level.next_scores == fresh.next_scores);
    CHECK(level.next_log_probs == fresh.next_log_probs);
  }
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
}

TEST_CASE("streams on the device are sized by the caller, and read as host memory on the CPU",
          "[backend][cuda_kernel]") {
  const std::int64_t n_rows = 2, vocab = 16, k = 2;
  const std::vector<float> rows = log_rows(probability_rows(n_rows, vocab, 5));
  const auto streams = streams_for(n_rows, 3);
  std::vector<Token> tokens(4), host_tokens(4);
  std::vector<std::int32_t> counts(2), host_counts(2);
  std::vector<unsigned char> ws(
      workspace_size(backend::cuda, GumbelTopKBatchShape{n_rows, vocab, k}));
  GumbelTopKBatchArgs<float> args{.rows = MatrixView<const float>(rows.data(), n_rows, vocab),
                                  .k = k,
                                  .streams = on_device(streams.data(), 1),
                                  .tokens = MatrixView<Token>(tokens.data(), n_rows, k),
                                  .counts = counts};
  CHECK_THROWS_WITH(
      gumbel_top_k_batch(backend::cuda, args, backend::DeviceWorkspace{ws.data(), ws.size()}),
      Catch::Contains("streams: has 1 elements, expected 2"));
  args.streams = on_device(streams.data(), streams.size());
  Workspace cpu_ws(workspace_size(backend::cpu, GumbelTopKBatchShape{n_rows, vocab, k}));
  gumbel_top_k_batch(backend::cpu, args, cpu_ws);
  GumbelTopKBatchArgs<float> host = args;
  host.streams = streams;
  host.tokens = MatrixView<Token>(host_tokens.data(), n_rows, k);
  host.counts = host_counts;
  gumbel_top_k_batch(backend::cpu, host, cpu_ws);
  CHECK(tokens == host_tokens);
  CHECK(counts == host_counts);
}
