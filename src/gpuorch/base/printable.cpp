#include "gpuorch/base/printable.hpp"

#include <fmt/format.h>

namespace gpuorch::base {

std::string printable(std::string_view value, std::size_t max) {
  const std::string_view kept = value.substr(0, max);
  std::string out;
  out.reserve(kept.size() + 16);
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const auto u = static_cast<unsigned char>(kept[i]);
    const bool c1 = u == 0xc2 && i + 1 < kept.size() &&
                    static_cast<unsigned char>(kept[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(kept[i + 1]) <= 0x9f;
    if (u == '\n') {
      out += "\\n";
    } else if (u == '\r') {
      out += "\\r";
    } else if (u == '\t') {
      out += "\\t";
    } else if (u == '\\') {
      out += "\\\\";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else if (c1) {
      out += fmt::format("\\xc2\\x{:02x}", static_cast<unsigned char>(kept[++i]));
    } else {
      out += kept[i];
    }
  }
  if (value.size() > kept.size()) {
    out += fmt::format("... ({} more bytes)", value.size() - kept.size());
  }
  return out;
}

std::string quoted_printable(std::string_view value, std::size_t max) {
  return fmt::format("'{}'", printable(value, max));
}

}  // namespace gpuorch::base
