// SPDX-License-Identifier: MIT
// Host fills of many draws of one RandomStream: the one place the library fills uniforms or Gumbels
// in bulk. The Philox rounds run on 16 counters side by side (detail::philox4x32_10_lanes, which
// the compiler vectorises) and the Gumbel transform's logs go through Eigen's vectorised log,
// whose bits packet_log reproduces: every value equals stream.uniform(first + i) /
// stream.gumbel(first + i) bit for bit.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <span>

#include "specdec/core/packet_log.hpp"
#include "specdec/core/philox.hpp"

#if defined(EIGEN_VECTORIZE_FMA) && !SPECDEC_PACKET_FMA
#error "specdec: Eigen's packet multiply-add fuses but packet_log's does not"
#endif

namespace specdec::detail {

/// packet_log as an Eigen functor: Eigen's vectorised log on packets and its scalar twin on the
/// entries a vectorised loop leaves to scalar code, so each entry's bits are packet_log's whatever
/// the row's alignment or length.
struct PacketLogOp {
  float operator()(float x) const { return packet_log(x); }
  template <class Packet>
  Packet packetOp(const Packet& x) const {
    return Eigen::internal::plog(x);
  }
};

}  // namespace specdec::detail

namespace Eigen::internal {
template <>
struct functor_traits<specdec::detail::PacketLogOp> {
  enum {
    Cost = functor_traits<scalar_log_op<float>>::Cost,
    PacketAccess = packet_traits<float>::HasLog
  };
};
}  // namespace Eigen::internal

namespace specdec {
namespace detail {

inline constexpr int kPhiloxLanes = 16;

/// Draws 4*first_block .. 4*(first_block + kPhiloxLanes) - 1 of `s` as open uniforms.
inline void philox_uniform_batch(const RandomStream& s, std::uint32_t first_block, float* out) {
  std::uint32_t x[kPhiloxLanes], y[kPhiloxLanes], z[kPhiloxLanes], w[kPhiloxLanes];
  for (int j = 0; j < kPhiloxLanes; ++j) {
    const Uint4 c = s.counter(first_block + static_cast<std::uint32_t>(j));
    x[j] = c.x;
    y[j] = c.y;
    z[j] = c.z;
    w[j] = c.w;
  }
  philox4x32_10_lanes<kPhiloxLanes>(x, y, z, w, s.key());
  for (int j = 0; j < kPhiloxLanes; ++j) {
    out[4 * j + 0] = bits_to_open_uniform(x[j]);
    out[4 * j + 1] = bits_to_open_uniform(y[j]);
    out[4 * j + 2] = bits_to_open_uniform(z[j]);
    out[4 * j + 3] = bits_to_open_uniform(w[j]);
  }
}

/// values[i] = uniform_to_gumbel(values[i]), vectorised.
inline void uniforms_to_gumbels(std::span<float> values) {
  auto g = Eigen::Map<Eigen::ArrayXf>(values.data(), static_cast<Eigen::Index>(values.size()));
  const PacketLogOp log_op;
  g = -(-g.unaryExpr(log_op)).unaryExpr(log_op);
}

}  // namespace detail

/// out[i] = stream.uniform(first + i).
inline void fill_uniforms(const RandomStream& stream, std::uint32_t first, std::span<float> out) {
  float* values = out.data();
  const auto n = static_cast<std::int64_t>(out.size());
  // Draws up to a Philox block boundary one at a time, then 16 blocks at once, then the rest.
  const std::int64_t head = std::min<std::int64_t>(n, (4u - (first & 3u)) & 3u);
  for (std::int64_t i = 0; i < head; ++i) {
    values[i] = stream.uniform(first + static_cast<std::uint32_t>(i));
  }
  constexpr std::int64_t kBatch = 4 * detail::kPhiloxLanes;
  const std::int64_t batches = (n - head) / kBatch;
  for (std::int64_t b = 0; b < batches; ++b) {
    const std::int64_t i = head + b * kBatch;
    detail::philox_uniform_batch(stream, (first + static_cast<std::uint32_t>(i)) >> 2, values + i);
  }
  const std::int64_t done = head + batches * kBatch;
  const int tail = static_cast<int>(n - done);  // fewer than kBatch
  for (int j = 0; j < tail; ++j) {
    values[done + j] = stream.uniform(first + static_cast<std::uint32_t>(done + j));
  }
}

/// out[i] = stream.gumbel(first + i), bit for bit.
inline void fill_gumbels(const RandomStream& stream, std::uint32_t first, std::span<float> out) {
  fill_uniforms(stream, first, out);
  detail::uniforms_to_gumbels(out);
}

}  // namespace specdec
