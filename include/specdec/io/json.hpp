// SPDX-License-Identifier: MIT
// Strict JSON reading for the library's file formats and the tool: a duplicate key is an error,
// not "the last one wins", and a message quoting user text stays on one line.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "specdec/core/error.hpp"

namespace specdec::io {

/// `text` with control characters, quotes and backslashes escaped as in a JSON string, so that an
/// error message quoting a key or a value read from a file is one line of printable text.
inline std::string escape_for_message(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\u{:04x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

/// Parses `text` as JSON, rejecting an object that repeats a key (RFC 8259 leaves such input
/// undefined; here it is an error naming the key). Throws specdec::Error named `argument` for
/// malformed JSON or a repeated key.
inline nlohmann::json parse_json_strict(std::string_view text, const std::string& argument) {
  // One set of seen keys per open object; the parser reports keys in document order.
  std::vector<std::set<std::string>> open_objects;
  std::string repeated;
  const auto callback = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end && !open_objects.empty()) {
      open_objects.pop_back();
    } else if (event == Event::key && !open_objects.empty() && repeated.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) repeated = key;
    }
    return true;
  };
  nlohmann::json out;
  try {
    out = nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e690
    const std::string what = e.what();
    const auto bracket = what.find("] ");
    detail::fail(
        argument, "malformed JSON ({})",
        escape_for_message(bracket == std::string::npos ? what : what.substr(bracket + 2)));
  }
  if (!repeated.empty()) {
    detail::fail(argument, "the key \"{}\" appears twice in one object",
                 escape_for_message(repeated));
  }
  return out;
}

}  // namespace specdec::io
