#pragma once
// Field values that reach a terminal, a CSV or a Kubernetes object must not carry control
// characters: an ESC in a model name rewrites the screen, a NUL in a pod name cuts it short in
// whatever reads the output next. Each reader checks every field it keeps with these, wherever
// in the file the field is (a check on the first bytes of a file alone misses the rest).
#include <cstddef>
#include <string>
#include <string_view>

namespace gpuorch::base {

// The offset of the first control character in `value` (C0 other than tab, DEL, and C1 as UTF-8
// writes it, U+0080..U+009F), or npos. A tab is refused too unless `allow_tab`.
std::size_t find_control(std::string_view value, bool allow_tab = false);

// Throws InputError "file:line: <what> holds a control character (0x1b) at byte N" when
// find_control finds one; line 0 leaves the line out.
void require_no_control(std::string_view value, const std::string& file, std::size_t line,
                        std::string_view what, bool allow_tab = false);

}  // namespace gpuorch::base
