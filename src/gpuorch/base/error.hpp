#pragma once
// Errors that cross the library boundary. Invalid input is reported once, with its location, and
// the CLI turns it into exit code 2; everything else is a bug or an environment failure.
#include <cstddef>
#include <stdexcept>
#include <string>

namespace gpuorch::base {

// Bad user input: a file, a flag value, a YAML key. what() is one line: "file:line: problem".
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

[[noreturn]] void fail_input(const std::string& file, std::size_t line, const std::string& problem);
[[noreturn]] void fail_input(const std::string& problem);

}  // namespace gpuorch::base
