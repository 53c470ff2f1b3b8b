#include "gpuorch/base/text_check.hpp"

#include <fmt/format.h>

#include "gpuorch/base/error.hpp"

namespace gpuorch::base {

std::size_t find_control(std::string_view value, bool allow_tab) {
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto u = static_cast<unsigned char>(value[i]);
    if (u == '\t' && allow_tab) continue;
    if (u < 0x20 || u == 0x7f) return i;
    // U+0080..U+009F: 0xC2 then 0x80..0x9F (CSI is U+009B).
    if (u == 0xc2 && i + 1 < value.size()) {
      const auto next = static_cast<unsigned char>(value[i + 1]);
      if (next >= 0x80 && next <= 0x9f) return i;
    }
  }
  return std::string_view::npos;
}

void require_no_control(std::string_view value, const std::string& file, std::size_t line,
                        std::string_view what, bool allow_tab) {
  const std::size_t at = find_control(value, allow_tab);
  if (at == std::string_view::npos) return;
  auto code = static_cast<unsigned>(static_cast<unsigned char>(value[at]));
  if (code == 0xc2) code = static_cast<unsigned char>(value[at + 1]);
  fail_input(file, line,
             fmt::format("{} holds a control character (0x{:02x}) at byte {}", what, code, at));
}

}  // namespace gpuorch::base
