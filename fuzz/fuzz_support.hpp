#pragma once
// What every fuzz target shares: the input as text, and the one rule they check beyond "no crash,
// no sanitizer report": a reader of user files may refuse its input only with base::InputError
// (one "file:line: ..." line, exit code 2). Any other exception escapes to libFuzzer, which stops
// and saves the input as a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpuorch/base/error.hpp"

namespace gpuorch::fuzz {

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

template <typename F>
void input_errors_only(F&& parse) {
  try {
    parse();
  } catch (const base::InputError&) {
  }
}

}  // namespace gpuorch::fuzz
