// SPDX-License-Identifier: MIT
// specdec-sim: try the library's algorithms on your own distributions without writing C++.
//   specdec-sim verify|decode [--max-memory BYTES] [--progress SECONDS] [request.json]
// Reads stdin without a file. Writes one JSON object to stdout. Bad input, or anything else that
// stops a run, gives exit status 2 and one line on stderr.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <new>
#include <string>

#include "sim_common.hpp"

namespace {

constexpr const char* kUsage =
    "usage: specdec-sim verify|decode [--max-memory BYTES] [--progress SECONDS] [request.json]";

/// Prints the message on one line: control characters from user text are escaped.
int usage_error(const std::string& message) {
  std::string line;
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    line += byte < 0x20 || byte == 0x7f ? fmt::format("\\u{:04x}", byte) : std::string(1, c);
  }
  std::cerr << "specdec-sim: " << line << "\n";
  return 2;
}

/// A byte count with an optional K, M or G suffix (powers of 1024).
std::uint64_t parse_bytes(const std::string& text) {
  std::size_t end = 0;
  unsigned long long value = 0;
  try {
    if (text.empty() || text[0] == '-') throw std::invalid_argument("negative");
    value = std::stoull(text, &end);
  } catch (const std::exception&) {
    throw specdec::Error("--max-memory", "'" + specdec::io::escape_for_message(text) +
                                             "' is not a byte count (e.g. 4G, 512M, 1000000)");
  }
  const std::string suffix = text.substr(end);
  int shift = 0;
  if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  else if (!suffix.empty()) {
    throw specdec::Error("--max-memory", "'" + specdec::io::escape_for_message(text) +
                                             "' has an unknown suffix (K, M or G)");
  }
  if (value > (std::numeric_limits<std::uint64_t>::max() >> shift)) {
    throw specdec::Error("--max-memory", fmt::format("{} x {} overflows uint64", value,
                                                     std::uint64_t{1} << shift));
  }
  return value << shift;
}

double parse_seconds(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(value >= 0.0 && value <= 1e6)) {
    throw specdec::Error("--progress", "'" + specdec::io::escape_for_message(text) +
                                           "' is not a number of seconds in [0, 10^6]");
  }
  return value;
}

int run(int argc, char** argv) {
  using namespace specdec::sim;
  if (argc < 2) return usage_error(kUsage);
  const std::string command = argv[1];
  if (command == "--help" || command == "-h") {
    std::cout << kUsage
              << "\n"
                 "Reads one JSON request (from the file, or stdin) and writes one JSON object.\n"
                 "  --max-memory BYTES  reject requests estimated to need more (default 4G)\n"
                 "  --progress SECONDS  progress lines on stderr after and every SECONDS "
                 "(default 2)\n";
    return 0;
  }
  if (command != "verify" && command != "decode") {
    return usage_error("command: unknown command '" + specdec::io::escape_for_message(command) +
                       "' (expected verify or decode)");
  }
  Limits limits;
  std::string path;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--max-memory" || arg == "--progress") && i + 1 < argc) {
      const std::string value = argv[++i];
      if (arg == "--max-memory")
        limits.max_memory = parse_bytes(value);
      else
        limits.progress_seconds = parse_seconds(value);
    } else if (arg.starts_with("--") || !path.empty()) {
      return usage_error(kUsage);
    } else {
      path = arg;
    }
  }
  std::string text;
  if (!path.empty()) {
    std::ifstream file(path);
    if (!file) {
      return usage_error("input: cannot open '" + specdec::io::escape_for_message(path) + "'");
    }
    text.assign(std::istreambuf_iterator<char>(file), {});
    if (file.bad()) {
      return usage_error("input: cannot read '" + specdec::io::escape_for_message(path) + "'");
    }
  } else {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  }
  const Json request = specdec::io::parse_json_strict(text, "input");
  const Json response =
      command == "verify" ? run_verify(request, limits) : run_decode(request, limits);
  std::cout << response.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Every failure is one line and status 2; nothing escapes as an abort.
  try {
    return run(argc, argv);
  } catch (const specdec::Error& e) {
    return usage_error(e.what());
  } catch (const nlohmann::json::exception& e) {
    return usage_error(std::string("input: ") + e.what());
  } catch (const std::bad_alloc&) {
    return usage_error("memory: out of memory (lower the request's sizes or --max-memory)");
  } catch (const std::exception& e) {
    return usage_error(std::string("error: ") + e.what());
  } catch (...) {
    return usage_error("error: unknown exception");
  }
}
