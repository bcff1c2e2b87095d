// SPDX-License-Identifier: MIT
// Stable numerics over one row. Two layers:
//  - row functions in specdec::detail (pointer + size, SPECDEC_HOST_DEVICE, no allocation);
//  - host functions in specdec that validate sizes and call the row functions.
// Inputs may be float or a half / bfloat16 type convertible to float (Eigen::half, Eigen::bfloat16);
// everything is computed in float, sums by blocked_sum.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/blocked_sum.hpp"
#include "specdec/core/exponential.hpp"
#include "specdec/core/log_space.hpp"
#include "specdec/core/order_key.hpp"
#include "specdec/core/packet_log.hpp"
#include "specdec/core/scalar.hpp"

namespace specdec {

namespace detail {

/// Largest value of a row (-inf for an empty row), by integer keys (the loop vectorises).
template <class T>
SPECDEC_HOST_DEVICE float row_max(const T* x, std::int64_t n) {
  std::int32_t best = signed_order_key(kNegInf);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t key = signed_order_key(to_float(x[i]));
    best = key > best ? key : best;
  }
  return from_signed_order_key(best);
}

/// Index of the largest value, ties to the lowest index (-0 is taken as +0, which it equals): the
/// largest key, then the first block of 64 holding it (both loops vectorise), then its entry.
template <class T>
SPECDEC_HOST_DEVICE std::int64_t row_argmax(const T* x, std::int64_t n) {
  const auto key = [=](std::int64_t i) { return signed_order_key(to_float(x[i]) + 0.0f); };
  std::int32_t best = signed_order_key(kNegInf);
  for (std::int64_t i = 0; i < n; ++i) best = key(i) > best ? key(i) : best;
  constexpr std::int64_t kBlock = 64;
  std::int64_t b = 0;
  for (; b + kBlock <= n; b += kBlock) {
    std::int32_t found = 0;
    for (std::int64_t j = 0; j < kBlock; ++j) found |= key(b + j) == best ? 1 : 0;
    if (found != 0) break;
  }
  for (std::int64_t i = b; i < n; ++i) {
    if (key(i) == best) return i;
  }
  return 0;
}

template <class T>
SPECDEC_HOST_DEVICE float row_log_sum_exp(const T* x, std::int64_t n) {
  const float m = row_max(x, n);
  if (m == kNegInf) return kNegInf;
  float s = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) s += expf(to_float(x[i]) - m);
  return m + logf(s);
}

/// out = softmax(x / temperature); temperature > 0. Returns the normaliser's log (log-sum-exp).
template <class T>
SPECDEC_HOST_DEVICE float row_softmax(const T* x, float* out, std::int64_t n,
                                      float temperature = 1.0f) {
  const float inv_t = 1.0f / temperature;
  const float m = row_max(x, n) * inv_t;
  float s = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = expf(to_float(x[i]) * inv_t - m);
    s += out[i];
  }
  const float inv_s = 1.0f / s;
  for (std::int64_t i = 0; i < n; ++i) out[i] *= inv_s;
  return m + logf(s);
}

/// Shannon entropy in nats of a probability row (0 log 0 = 0): -p log p summed by blocked_sum,
/// the log packet_log's of max(p, smallest normal float) (a zero's term is then 0), so the loop
/// vectorises.
template <class T>
SPECDEC_HOST_DEVICE float row_entropy(const T* p, std::int64_t n) {
  return static_cast<float>(blocked_sum(
      [=](std::int64_t i) {
        const float v = to_float(p[i]);
        const auto bits = static_cast<std::int32_t>(float_bits(v));
        return -v * packet_log(bits_float(static_cast<std::uint32_t>(bits > 0x00800000 ? bits : 0x00800000)));
      },
      0, n));
}

/// sum_x [a(x) - b(x)]+ (= TV(a, b) when both sum to one), summed by blocked_sum.
template <class T, class U>
SPECDEC_HOST_DEVICE float row_positive_mass(const T* a, const U* b, std::int64_t n) {
  return static_cast<float>(blocked_sum(
      [=](std::int64_t i) {
        const float d = to_float(a[i]) - to_float(b[i]);
        return d > 0.0f ? d : 0.0f;
      },
      0, n));
}

inline void check_not_empty(std::string_view name, std::size_t size) {
  if (size == 0) fail(name, "the row is empty");
}
inline void check_same_size(std::string_view name, std::size_t got, std::size_t expected) {
  if (got != expected) fail(name, "has {} elements, expected {}", got, expected);
}

/// The checks softmax and log_softmax share (`function` names the caller in the temperature's
/// error); returns the largest logit.
template <class T>
float checked_softmax_max(std::span<const T> logits, std::string_view out_name,
                          std::size_t out_size, float temperature, std::string_view function) {
  check_not_empty("logits", logits.size());
  check_same_size(out_name, out_size, logits.size());
  if (!(temperature > 0.0f) || !std::isfinite(temperature)) {
    fail("temperature", "{} must be finite and > 0 for {}", temperature, function);
  }
  const float m = row_max(logits.data(), static_cast<std::int64_t>(logits.size()));
  if (m == kNegInf) fail("logits", "every logit is -inf");
  return m;
}

}  // namespace detail

/// log(sum(exp(x))), stable for any finite or -inf inputs (-inf when every input is -inf).
template <class T = float>
float log_sum_exp(std::type_identity_t<std::span<const T>> x) {
  detail::check_not_empty("x", x.size());
  const T* a = x.data();
  const auto n = static_cast<std::int64_t>(x.size());
  const float m = detail::row_max(a, n);
  if (m == kNegInf) return kNegInf;
  const double sum =
      detail::blocked_sum([=](std::int64_t i) { return detail::exp_flush(detail::to_float(a[i]) - m); }, 0, n);
  return m + std::log(static_cast<float>(sum));
}

/// probabilities = softmax(logits / temperature). Sizes must match; temperature > 0.
template <class T = float>
void softmax(std::type_identity_t<std::span<const T>> logits, std::span<float> probabilities,
             float temperature = 1.0f) {
  const float m = detail::checked_softmax_max<T>(logits, "probabilities", probabilities.size(),
                                                 temperature, "softmax");
  const T* a = logits.data();
  float* out = probabilities.data();
  const auto n = static_cast<std::int64_t>(logits.size());
  const float inv_t = 1.0f / temperature;
  for (std::int64_t i = 0; i < n; ++i) out[i] = detail::exp_flush((detail::to_float(a[i]) - m) * inv_t);
  const auto inv_sum = static_cast<float>(1.0 / detail::blocked_sum([=](std::int64_t i) { return out[i]; }, 0, n));
  for (std::int64_t i = 0; i < n; ++i) out[i] *= inv_sum;
}

/// log_probabilities = log_softmax(logits / temperature).
template <class T = float>
void log_softmax(std::type_identity_t<std::span<const T>> logits,
                 std::span<float> log_probabilities, float temperature = 1.0f) {
  const float m = detail::checked_softmax_max<T>(
      logits, "log_probabilities", log_probabilities.size(), temperature, "log_softmax");
  const T* a = logits.data();
  float* out = log_probabilities.data();
  const auto n = static_cast<std::int64_t>(logits.size());
  const float inv_t = 1.0f / temperature;
  for (std::int64_t i = 0; i < n; ++i) out[i] = (detail::to_float(a[i]) - m) * inv_t;
  const auto log_sum = static_cast<float>(
      std::log(detail::blocked_sum([=](std::int64_t i) { return detail::exp_flush(out[i]); }, 0, n)));
  for (std::int64_t i = 0; i < n; ++i) out[i] -= log_sum;
}

/// Entropy in nats of a probability row.
template <class T = float>
float entropy(std::type_identity_t<std::span<const T>> probabilities) {
  detail::check_not_empty("probabilities", probabilities.size());
  return detail::row_entropy(probabilities.data(), static_cast<std::int64_t>(probabilities.size()));
}

/// Total-variation distance sum_x [a(x) - b(x)]+ = (1/2) sum_x |a(x) - b(x)|.
template <class T = float, class U = T>
float tv_distance(std::type_identity_t<std::span<const T>> a,
                  std::type_identity_t<std::span<const U>> b) {
  detail::check_not_empty("a", a.size());
  detail::check_same_size("b", b.size(), a.size());
  const T* x = a.data();
  const U* y = b.data();
  return 0.5f * static_cast<float>(detail::blocked_sum(
                    [=](std::int64_t i) {
                      const float d = detail::to_float(x[i]) - detail::to_float(y[i]);
                      return d < 0.0f ? -d : d;
                    },
                    0, static_cast<std::int64_t>(a.size())));
}

}  // namespace specdec
