#pragma once
// A value that came from a peer or a file, made safe to put into a log line or a one-line error:
// a CR/LF in a pod name sent to the extender forged a log line of its own (issue 30), an ESC
// rewrites the terminal, and a 50 MB value made a 52 MB line. Control characters (C0, DEL, and
// C1 as UTF-8 writes it) and the backslash are escaped (\n, \r, \t, \\, \xNN), the rest is kept
// byte for byte, and the result is cut after `max` bytes of the value with how much was left out.
#include <cstddef>
#include <string>
#include <string_view>

namespace gpuorch::base {

inline constexpr std::size_t kPrintableMax = 200;

[[nodiscard]] std::string printable(std::string_view value, std::size_t max = kPrintableMax);
// printable() between single quotes: 'pod\n1'.
[[nodiscard]] std::string quoted_printable(std::string_view value, std::size_t max = kPrintableMax);

}  // namespace gpuorch::base
