// SPDX-License-Identifier: MIT
// specdec-sim: try the library's algorithms on your own distributions without writing C++.
//   specdec-sim verify [request.json]     (reads stdin without a file)
//   specdec-sim decode [request.json]
// Writes one JSON object to stdout. Bad input: exit status 2 and one line on stderr.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "sim_common.hpp"

namespace {

int usage_error(const std::string& message) {
  std::cerr << "specdec-sim: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace specdec::sim;
  if (argc < 2 || argc > 3) {
    return usage_error("usage: specdec-sim verify|decode [request.json]");
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h") {
    std::cout << "usage: specdec-sim verify|decode [request.json]\n"
                 "Reads one JSON request (from the file, or stdin) and writes one JSON object.\n";
    return 0;
  }
  if (command != "verify" && command != "decode") {
    return usage_error("command: unknown command '" + command + "' (expected verify or decode)");
  }
  std::string text;
  if (argc == 3) {
    std::ifstream file(argv[2]);
    if (!file) return usage_error(std::string("input: cannot open '") + argv[2] + "'");
    text.assign(std::istreambuf_iterator<char>(file), {});
  } else {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  }
  try {
    const Json request = Json::parse(text);
    const Json response = command == "verify" ? run_verify(request) : run_decode(request);
    std::cout << response.dump() << "\n";
    return 0;
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    return usage_error("input: malformed JSON (" + what.substr(what.find(']') + 2) + ")");
  } catch (const specdec::Error& e) {
    return usage_error(e.what());
  } catch (const Json::exception& e) {
    return usage_error(std::string("input: ") + e.what());
  }
}
