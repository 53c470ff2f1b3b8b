#include "gpuorch/base/error.hpp"

#include <fmt/format.h>

#include <string_view>

namespace gpuorch::base {
namespace {

// The longest message: the readers cut the values they quote (base/printable.hpp), and this
// catches one they missed, so that no input turns into a megabyte line on stderr.
constexpr std::size_t kMaxMessageBytes = 4096;

// The message must stay one line even when it quotes the input (a key, a name, or a parser's
// message that shows the offending character): control characters are written as escapes.
std::string one_line(const std::string& full) {
  const std::string_view message = std::string_view(full).substr(0, kMaxMessageBytes);
  std::string out;
  out.reserve(message.size());
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out.push_back(c);
    }
  }
  if (full.size() > message.size()) {
    out += fmt::format("... ({} more bytes)", full.size() - message.size());
  }
  return out;
}

}  // namespace

void fail_input(const std::string& file, std::size_t line, const std::string& problem) {
  if (line == 0) throw InputError(one_line(fmt::format("{}: {}", file, problem)));
  throw InputError(one_line(fmt::format("{}:{}: {}", file, line, problem)));
}

void fail_input(const std::string& problem) { throw InputError(one_line(problem)); }

}  // namespace gpuorch::base
