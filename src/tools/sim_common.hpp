// SPDX-License-Identifier: MIT
// Shared pieces of specdec-sim: reading the request, typed field access that reports the field by
// name, and the exit-status-2 error path.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/io/json.hpp"
#include "specdec/verify/cascade.hpp"

namespace specdec::sim {

using Json = nlohmann::json;

/// Thrown for a bad request; main() prints "specdec-sim: <field>: <problem>" and exits with 2.
using UsageError = specdec::Error;

/// A list field of the wrong length is a usage error naming the field.
inline void check_length(const std::string& field, std::size_t got, std::size_t expected) {
  if (got != expected) {
    throw UsageError(field, fmt::format("has {} elements, expected {}", got, expected));
  }
}

/// What a run may use, from the command line.
struct Limits {
  /// Bytes a request may need (estimated before allocating); larger requests are rejected.
  std::uint64_t max_memory = std::uint64_t{4} << 30;
  /// Seconds between progress lines on stderr (the first after this long; 0 = every update).
  double progress_seconds = 2.0;
  /// Parse and validate the request, then stop before the long computation (for fuzzing).
  bool validate_only = false;
};

/// Rejects any field not in `allowed` (a misspelt field must not be silently ignored).
inline void check_known_fields(const Json& request, std::initializer_list<const char*> allowed) {
  if (!request.is_object()) throw UsageError("input", "must be a JSON object");
  const std::set<std::string> names(allowed.begin(), allowed.end());
  for (const auto& [key, value] : request.items()) {
    if (!names.count(key)) throw UsageError(io::escape_for_message(key), "unknown field");
  }
}

inline const Json* find(const Json& request, const char* field) {
  const auto it = request.find(field);
  return it == request.end() || it->is_null() ? nullptr : &*it;
}

inline double get_number(const Json& request, const char* field, double fallback) {
  const Json* v = find(request, field);
  if (!v) return fallback;
  if (!v->is_number()) throw UsageError(field, "must be a number");
  return v->get<double>();
}

inline std::int64_t get_integer(const Json& request, const char* field, std::int64_t fallback) {
  const Json* v = find(request, field);
  if (!v) return fallback;
  if (!v->is_number_integer()) throw UsageError(field, "must be an integer");
  // Above INT64_MAX the value is unsigned: report it as written, never as its wrapped self.
  if (v->is_number_unsigned()) {
    const auto value = v->get<std::uint64_t>();
    if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw UsageError(field, fmt::format("{} is outside [{}, {}]", value,
                                          std::numeric_limits<std::int64_t>::min(),
                                          std::numeric_limits<std::int64_t>::max()));
    }
    return static_cast<std::int64_t>(value);
  }
  return v->get<std::int64_t>();
}

/// An integer field within [lowest, highest].
inline std::int64_t get_integer_in(const Json& request, const char* field, std::int64_t fallback,
                                   std::int64_t lowest, std::int64_t highest) {
  const auto value = get_integer(request, field, fallback);
  if (value < lowest || value > highest) {
    throw UsageError(field, fmt::format("{} is outside [{}, {}]", value, lowest, highest));
  }
  return value;
}

/// The smallest non-zero temperature: below it 1 / temperature overflows the warp's logits.
inline constexpr double kMinTemperature = 1e-6;

/// `temperature`: 0 (greedy) or a finite number >= kMinTemperature.
inline float get_temperature(const Json& request) {
  const double t = get_number(request, "temperature", 1.0);
  if (!(t == 0.0 || (t >= kMinTemperature && t <= 1e30))) {
    throw UsageError("temperature",
                     fmt::format("{} must be 0 (greedy) or in [{}, 1e30]", t, kMinTemperature));
  }
  return static_cast<float>(t);
}

inline bool get_bool(const Json& request, const char* field, bool fallback) {
  const Json* v = find(request, field);
  if (!v) return fallback;
  if (!v->is_boolean()) throw UsageError(field, "must be true or false");
  return v->get<bool>();
}

inline std::string get_string(const Json& request, const char* field, const std::string& fallback) {
  const Json* v = find(request, field);
  if (!v) return fallback;
  if (!v->is_string()) throw UsageError(field, "must be a string");
  return v->get<std::string>();
}

inline std::string require_string(const Json& request, const char* field) {
  if (!find(request, field)) throw UsageError(field, "is required");
  return get_string(request, field, "");
}

/// A required array of numbers.
inline std::vector<float> require_row(const Json& request, const char* field) {
  const Json* v = find(request, field);
  if (!v) throw UsageError(field, "is required");
  if (!v->is_array() || v->empty()) throw UsageError(field, "must be a non-empty array of numbers");
  std::vector<float> row;
  row.reserve(v->size());
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_number()) {
      throw UsageError(std::string(field) + "[" + std::to_string(i) + "]", "must be a number");
    }
    row.push_back((*v)[i].get<float>());
  }
  return row;
}

/// Progress lines on stderr for runs that take a while: nothing for the first
/// `Limits::progress_seconds`, then one line per interval. Thread-safe.
class Progress {
 public:
  Progress(const char* command, const char* unit, std::int64_t total, double interval_seconds)
      : command_(command),
        unit_(unit),
        total_(total),
        interval_(interval_seconds),
        start_(std::chrono::steady_clock::now()),
        next_(interval_seconds) {}

  void advance(std::int64_t count = 1) {
    const auto done = done_.fetch_add(count, std::memory_order_relaxed) + count;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < next_.load(std::memory_order_relaxed)) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    if (elapsed < next_.load(std::memory_order_relaxed)) return;
    next_.store(elapsed + interval_, std::memory_order_relaxed);
    const double fraction =
        total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1;
    std::fputs(fmt::format("specdec-sim: {}: {} of {} {} ({:.0f}%), {:.1f} s elapsed, about {:.0f} "
                           "s left\n",
                           command_, done, total_, unit_, 100.0 * fraction, elapsed,
                           fraction > 0 ? elapsed * (1.0 - fraction) / fraction : 0.0)
                   .c_str(),
               stderr);
  }

 private:
  const char* command_;
  const char* unit_;
  std::int64_t total_;
  double interval_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<std::int64_t> done_{0};
  std::atomic<double> next_;
  std::mutex mutex_;
};

/// The cascade deferral rule called `name` (the "rule" field of both subcommands).
inline Deferral parse_deferral(const std::string& name) {
  for (int d = 0; d <= static_cast<int>(Deferral::kTokenV3); ++d) {
    if (deferral_name(static_cast<Deferral>(d)) == name) return static_cast<Deferral>(d);
  }
  throw UsageError("rule", "unknown deferral rule '" + name +
                               "' (expected chow, diff, opt, difflog, optlog, bild, token_v1, "
                               "token_v2 or token_v3)");
}

/// Subcommands: each reads one request object and returns the response object.
Json run_verify(const Json& request, const Limits& limits);
Json run_decode(const Json& request, const Limits& limits);

}  // namespace specdec::sim
