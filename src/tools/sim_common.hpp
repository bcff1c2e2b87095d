// SPDX-License-Identifier: MIT
// Shared pieces of specdec-sim: reading the request, typed field access that reports the field by
// name, and the exit-status-2 error path.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "specdec/core/error.hpp"

namespace specdec::sim {

using Json = nlohmann::json;

/// Thrown for a bad request; main() prints "specdec-sim: <field>: <problem>" and exits with 2.
using UsageError = specdec::Error;

/// Rejects any field not in `allowed` (a misspelt field must not be silently ignored).
inline void check_known_fields(const Json& request, std::initializer_list<const char*> allowed) {
  if (!request.is_object()) throw UsageError("input", "must be a JSON object");
  const std::set<std::string> names(allowed.begin(), allowed.end());
  for (const auto& [key, value] : request.items()) {
    if (!names.count(key)) throw UsageError(key, "unknown field");
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
  return v->get<std::int64_t>();
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

/// Subcommands: each reads one request object and returns the response object.
Json run_verify(const Json& request);
Json run_decode(const Json& request);

}  // namespace specdec::sim
