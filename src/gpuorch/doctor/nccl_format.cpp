// printf formats to regular expressions. Only what the libraries' formats use is accepted: flags,
// width and precision (numbers or '*'), the length modifiers and the conversions of C's printf;
// anything else is an error, so a typo in a hand-written catalogue entry is caught when it loads.
#include "gpuorch/doctor/nccl_format.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace gpuorch::doctor {
namespace {

// The fewest characters of fixed text a format needs: "%s: %d" would match nearly any line.
constexpr std::size_t kMinKey = 6;

struct Conversion {
  std::size_t end = 0;  // one past the conversion character
  char conv = 0;
  bool width = false;  // a width pads with blanks, which the pattern must allow
};

// The conversion starting at format[at] == '%'.
Conversion read_conversion(const std::string& f, std::size_t at) {
  std::size_t i = at + 1;
  while (i < f.size() && std::string_view("-+ #0").find(f[i]) != std::string_view::npos) ++i;
  Conversion c;
  const std::size_t width_at = i;
  while (i < f.size() && (f[i] == '*' || (f[i] >= '0' && f[i] <= '9'))) ++i;
  c.width = i > width_at;
  if (i < f.size() && f[i] == '.') {
    ++i;
    while (i < f.size() && (f[i] == '*' || (f[i] >= '0' && f[i] <= '9'))) ++i;
  }
  for (const char* len : {"hh", "ll", "h", "l", "z", "j", "t", "L", "q"}) {
    const std::string_view l(len);
    if (f.compare(i, l.size(), l) == 0) {
      i += l.size();
      break;
    }
  }
  if (i >= f.size() || std::string_view("diouxXeEfgGcspm%").find(f[i]) == std::string_view::npos) {
    throw std::invalid_argument(fmt::format("unknown conversion '{}' at offset {} of the format",
                                            f.substr(at, i + 1 - at), at));
  }
  c.conv = f[i];
  c.end = i + 1;
  return c;
}

std::string pattern_of(const Conversion& c) {
  const std::string pad = c.width ? " *" : "";
  switch (c.conv) {
    case 'd':
    case 'i':
      return pad + R"((-?\d+))";
    case 'u':
      return pad + R"((\d+))";
    case 'o':
      return pad + "([0-7]+)";
    case 'x':
    case 'X':
      return pad + "((?:0x)?[0-9a-fA-F]+)";
    case 'p':
      return pad + R"(((?:0x)?[0-9a-fA-F]+|\(nil\)))";
    case 'e':
    case 'E':
    case 'f':
    case 'g':
    case 'G':
      return pad + R"((-?(?:[0-9.]+(?:[eE][-+]?\d+)?|nan|inf)))";
    case 'c':
      return "(.)";
    default:  // 's', and glibc's 'm' (strerror(errno), no argument)
      return pad + "(.*?)";
  }
}

std::string escaped(std::string_view literal) {
  std::string out;
  for (const char ch : literal) {
    if (std::string_view(R"(\^$.|?*+()[]{}/)").find(ch) != std::string_view::npos) out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

MessageFormat compile_format(const std::string& format, bool anywhere) {
  MessageFormat m;
  m.format = format;
  m.anywhere = anywhere;
  std::string body;
  std::string literal;  // the fixed text since the last conversion
  bool at_start = true;
  auto close_literal = [&] {
    m.fixed += literal.size();
    if (literal.size() > m.key.size()) m.key = literal;
    if (at_start) m.head = literal;
    body += escaped(literal);
    literal.clear();
  };
  for (std::size_t i = 0; i < format.size();) {
    if (format[i] != '%') {
      literal += format[i++];
      continue;
    }
    const Conversion c = read_conversion(format, i);
    i = c.end;
    if (c.conv == '%') {
      literal += '%';
      continue;
    }
    close_literal();
    at_start = false;
    body += pattern_of(c);
    ++m.conversions;
  }
  close_literal();
  if (m.key.size() < kMinKey) {
    throw std::invalid_argument(fmt::format(
        "the format has less than {} characters of fixed text, so it would match nearly any line",
        kMinKey));
  }
  // NCCL ends some messages with '.', some writers add blanks or a '\r'; both are tolerated.
  m.pattern = anywhere ? body : "^" + body + R"([\s.]*$)";
  return m;
}

const std::regex& MessageFormat::re() const {
  std::call_once(compiled_->once, [this] { compiled_->re.emplace(pattern); });
  return *compiled_->re;
}

std::optional<std::vector<std::string>> match_format(const MessageFormat& f,
                                                     std::string_view text) {
  if (text.find(f.key) == std::string_view::npos) return std::nullopt;
  std::match_results<std::string_view::const_iterator> m;
  const bool ok = f.anywhere ? std::regex_search(text.begin(), text.end(), m, f.re())
                             : std::regex_match(text.begin(), text.end(), m, f.re());
  if (!ok) return std::nullopt;
  std::vector<std::string> values;
  for (std::size_t i = 1; i < m.size(); ++i) values.push_back(m[i].str());
  return values;
}

std::string example_line(const std::string& format) {
  std::string out;
  int n = 0;
  for (std::size_t i = 0; i < format.size();) {
    if (format[i] != '%') {
      out += format[i++];
      continue;
    }
    const Conversion c = read_conversion(format, i);
    i = c.end;
    if (c.conv == '%') {
      out += '%';
      continue;
    }
    ++n;
    switch (c.conv) {
      case 's':
      case 'm':
        out += fmt::format("s{}", n);
        break;
      case 'c':
        out += 'c';
        break;
      case 'p':
        out += fmt::format("0x{:x}", n);
        break;
      case 'e':
      case 'E':
      case 'f':
      case 'g':
      case 'G':
        out += fmt::format("{}.5", n);
        break;
      case 'x':
      case 'X':
        out += fmt::format("{:x}", n);
        break;
      default:
        out += fmt::format("{}", n);
    }
  }
  return out;
}

}  // namespace gpuorch::doctor
