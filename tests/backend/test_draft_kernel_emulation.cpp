// SPDX-License-Identifier: MIT
// The CUDA drafting kernels' source (Gumbel-top-k, stochastic-beam-search levels), run on the host
// through emulation/emulated_cuda.hpp (one std::thread per CUDA thread), against the CPU backend:
// equal bit for bit, since both compute every perturbed value with the same scalar code.
#include "emulation/emulated_cuda.hpp"
// The emulation must come first: the kernel header then sees its built-ins.
#include <Eigen/Core>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "specdec/backend/cpu/draft_batch.hpp"
#include "specdec/backend/cuda/detail/draft_kernels.cuh"
#include "specdec/draft/gumbel_topk.hpp"
#include "specdec/draft/stochastic_beam.hpp"
#include "specdec/toy/random.hpp"
#include "tree_cases.hpp"

using namespace specdec;
using specdec::test::draft_stream;
namespace kernels = specdec::backend::cuda_impl::detail;

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

template <RowKind kind, class T>
TopK run_gumbel_kernel(const std::vector<T>& rows, std::int64_t n_rows, std::int64_t vocab,
                       std::int64_t stride, std::int64_t k,
                       const std::vector<RandomStream>& streams, unsigned int threads) {
  const auto cells = static_cast<std::size_t>(n_rows * k);
  TopK got{std::vector<Token>(cells, -7), std::vector<float>(cells, 7.0f),
           std::vector<std::int32_t>(static_cast<std::size_t>(n_rows), -7)};
  std::vector<float> perturbed(static_cast<std::size_t>(n_rows * vocab));
  for (std::int64_t r = 0; r < n_rows; ++r) {
    run_emulated_block(threads, static_cast<unsigned int>(r), [&] {
      kernels::gumbel_top_k_kernel<kind, T>(
          rows.data(), stride, static_cast<int>(vocab), static_cast<int>(k), streams.data(),
          perturbed.data(), got.tokens.data(), k, got.values.data(), k, got.counts.data());
    });
  }
  return got;
}

template <class T>
TopK run_gumbel_cpu(RowKind kind, const std::vector<T>& rows, std::int64_t n_rows,
                    std::int64_t vocab, std::int64_t stride, std::int64_t k,
                    const std::vector<RandomStream>& streams) {
  const auto cells = static_cast<std::size_t>(n_rows * k);
  TopK want{std::vector<Token>(cells), std::vector<float>(cells),
            std::vector<std::int32_t>(static_cast<std::size_t>(n_rows))};
  Workspace ws(workspace_size(backend::cpu, GumbelTopKBatchShape{n_rows, vocab, k}));
  gumbel_top_k_batch(
      backend::cpu.with_threads(2),
      GumbelTopKBatchArgs<T>{.kind = kind,
                             .rows = MatrixView<const T>(rows.data(), n_rows, vocab, stride),
                             .k = k,
                             .streams = streams,
                             .tokens = MatrixView<Token>(want.tokens.data(), n_rows, k),
                             .values = MatrixView<float>(want.values.data(), n_rows, k),
                             .counts = want.counts},
      ws);
  return want;
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

template <RowKind kind, class T>
void check_gumbel(const std::vector<float>& rows, std::int64_t vocab, std::int64_t stride,
                  std::int64_t k, unsigned int threads) {
  const auto n_rows = static_cast<std::int64_t>(rows.size()) / vocab;
  const auto typed = with_stride<T>(rows, vocab, stride);
  const auto streams = streams_for(n_rows, 21);
  const auto want = run_gumbel_cpu(kind, typed, n_rows, vocab, stride, k, streams);
  const auto got = run_gumbel_kernel<kind, T>(typed, n_rows, vocab, stride, k, streams, threads);
  CAPTURE(kind == RowKind::kProbabilities, sizeof(T), stride, k, threads);
  CHECK(got.counts == want.counts);
  CHECK(got.tokens == want.tokens);
  CHECK(got.values == want.values);
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

TEST_CASE("the emulated Gumbel-top-k kernel equals the CPU backend", "[backend][cuda_kernel]") {
  const std::int64_t vocab = 301;  // not a multiple of a packet: vectorised loops have tails
  const auto probs = probability_rows(5, vocab, 7);
  const auto logits = log_rows(probs);
  for (const unsigned int threads : {32u, 64u}) {
    check_gumbel<RowKind::kProbabilities, float>(probs, vocab, vocab, 6, threads);
    check_gumbel<RowKind::kLogWeights, float>(logits, vocab, vocab + 5, 6, threads);
  }
  check_gumbel<RowKind::kProbabilities, float>(probs, vocab, vocab, 1, 32);
  // k above the CPU's heap limit (256): its nth_element path.
  check_gumbel<RowKind::kLogWeights, float>(logits, vocab, vocab, 280, 64);
}

TEST_CASE("the emulated Gumbel-top-k kernel takes fp16 and bf16 rows", "[backend][cuda_kernel]") {
  const std::int64_t vocab = 203;
  const auto probs = probability_rows(4, vocab, 9);
  const auto logits = log_rows(probs);
  check_gumbel<RowKind::kLogWeights, Eigen::half>(logits, vocab, vocab, 5, 32);
  check_gumbel<RowKind::kLogWeights, Eigen::bfloat16>(logits, vocab, vocab + 3, 5, 64);
  check_gumbel<RowKind::kProbabilities, Eigen::half>(probs, vocab, vocab, 5, 64);
}

TEST_CASE("the emulated top-k selection ranks ties by token id like the CPU",
          "[backend][cuda_kernel]") {
  // Perturbed values from a small set: many equal values, banned (-inf) and NaN entries, +0 and -0.
  const int n = 150;
  const float pattern[] = {1.5f, 0.25f, -INFINITY, 2.0f,  0.25f, std::nanf(""),
                           0.0f, -0.0f, 1.5f,      -3.0f, 0.25f};
  std::vector<float> perturbed;
  for (int i = 0; i < n; ++i) perturbed.push_back(pattern[(i * 7 + i / 11) % 11]);
  static kernels::TopKShared sh;
  for (const int k : {1, 3, 13, 14, 40, 100, 150}) {
    for (const unsigned int threads : {32u, 64u}) {
      std::vector<std::int32_t> index(static_cast<std::size_t>(n));
      const auto want = detail::select_top_k_of_row(perturbed.data(), n, k, index.data());
      int got = -1;
      std::vector<std::int32_t> ids;
      run_emulated_block(threads, 0, [&] {
        const int kk = kernels::top_k_block(perturbed.data(), n, k, sh);
        if (threadIdx.x == 0) {
          got = kk;
          ids.assign(sh.sorted_ids, sh.sorted_ids + kk);
        }
      });
      CAPTURE(k, threads);
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
};

void run_level_cpu(Level& l, const std::vector<RandomStream>& streams) {
  l.clear_outputs();
  const auto b = l.batch, w = l.width;
  Workspace ws(workspace_size(backend::cpu, BeamLevelBatchShape{b, w, l.vocab}));
  stochastic_beam_level_batch(
      backend::cpu.with_threads(2),
      BeamLevelBatchArgs{.draft_rows = MatrixView<const float>(l.draft.data(), b * w, l.vocab),
                         .beam_counts = l.counts,
                         .nodes = MatrixView<const std::int32_t>(l.nodes.data(), b, w),
                         .log_probs = MatrixView<const float>(l.log_probs.data(), b, w),
                         .scores = MatrixView<const float>(l.scores.data(), b, w),
                         .streams = streams,
                         .next_parents = MatrixView<std::int32_t>(l.next_parents.data(), b, w),
                         .next_tokens = MatrixView<Token>(l.next_tokens.data(), b, w),
                         .next_log_probs = MatrixView<float>(l.next_log_probs.data(), b, w),
                         .next_scores = MatrixView<float>(l.next_scores.data(), b, w),
                         .next_counts = l.next_counts},
      ws);
}

void run_level_kernels(Level& l, const std::vector<RandomStream>& streams, unsigned int threads) {
  l.clear_outputs();
  const auto b = l.batch, w = l.width;
  const backend::cuda_impl::BeamLevelArgs args{l.draft.data(),
                                               l.vocab,
                                               l.counts.data(),
                                               l.nodes.data(),
                                               w,
                                               l.log_probs.data(),
                                               w,
                                               l.scores.data(),
                                               w,
                                               l.next_parents.data(),
                                               w,
                                               l.next_tokens.data(),
                                               w,
                                               l.next_log_probs.data(),
                                               w,
                                               l.next_scores.data(),
                                               w,
                                               l.next_counts.data()};
  std::vector<float> perturbed(static_cast<std::size_t>(b * w * l.vocab));
  std::vector<detail::BeamCandidate> candidates(static_cast<std::size_t>(b * w * w));
  std::vector<std::int32_t> children(static_cast<std::size_t>(b * w), -5);
  for (std::int64_t beam = 0; beam < b * w; ++beam) {
    run_emulated_block(threads, static_cast<unsigned int>(beam), [&] {
      kernels::beam_expand_kernel(args, static_cast<int>(w), static_cast<int>(l.vocab),
                                  streams.data(), perturbed.data(), candidates.data(),
                                  children.data());
    });
  }
  for (std::int64_t s = 0; s < b; ++s) {
    run_emulated_block(threads, static_cast<unsigned int>(s), [&] {
      kernels::beam_select_kernel(args, static_cast<int>(w), candidates.data(), children.data());
    });
  }
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
  const std::int64_t batch = 3, width = 3, vocab = 90;
  toy::ToyRandom rng(12);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 4; ++i) rows.push_back(toy::dirichlet(vocab, 0.4, rng));
  std::vector<float> sparse(static_cast<std::size_t>(vocab), 0.0f);
  sparse[4] = 0.7f, sparse[80] = 0.3f;  // two children only: fewer live beams than the width
  const std::vector<std::vector<float>> roots = {rows[0], sparse, rows[2]};
  std::vector<RandomStream> streams;
  for (std::uint32_t s = 0; s < batch; ++s) streams.push_back(draft_stream(40, s));
  for (const unsigned int threads : {32u, 64u}) {
    Level cpu = root_level(batch, width, vocab, roots);
    Level gpu = cpu;
    std::int32_t next_node = 0;
    for (int level = 0; level < 3; ++level) {
      run_level_cpu(cpu, streams);
      run_level_kernels(gpu, streams, threads);
      CAPTURE(threads, level);
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
  run_level_kernels(gpu, streams, 32);
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
