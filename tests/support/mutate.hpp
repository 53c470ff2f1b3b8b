#pragma once
// Seeded random corruptions of a text input, for the mutation tests: byte flips, deleted,
// duplicated and swapped lines, truncation, inserted commas, quotes, NULs, YAML punctuation,
// and numbers replaced by huge, negative or otherwise wrong ones.
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "gpuorch/base/rng.hpp"

namespace gpuorch::test {

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

inline std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

inline std::string mutate_once(std::string text, base::Rng& rng) {
  constexpr std::array<std::string_view, 12> kNumbers{"99999999999999999999999",
                                                      "9223372036854775807",
                                                      "9223372036854775808",
                                                      "-1",
                                                      "1001",
                                                      "65",
                                                      "1e9",
                                                      "0x10",
                                                      "",
                                                      "0",
                                                      "4294967296",
                                                      "-9223372036854775808"};
  constexpr std::array<std::string_view, 16> kSnippets{
      ",",        "\"",   std::string_view("\0", 1),
      "\r",       "\t",   ": ",
      "- ",       "[",    "{",
      "}",        "&a",   "*a",
      "\xc3\xa9", "\xff", "'",
      "|"};
  auto at = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng.below(n)); };
  switch (rng.below(10)) {
    case 0:  // flip a byte
      if (!text.empty()) text[at(text.size())] = static_cast<char>(rng.below(256));
      break;
    case 1: {  // delete a line
      auto lines = split_lines(text);
      if (!lines.empty())
        lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(at(lines.size())));
      text = join_lines(lines);
      break;
    }
    case 2: {  // duplicate a line
      auto lines = split_lines(text);
      if (!lines.empty()) {
        const auto k = at(lines.size());
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(k), lines[k]);
      }
      text = join_lines(lines);
      break;
    }
    case 3:  // truncate
      text.resize(at(text.size() + 1));
      break;
    case 4:  // insert a comma
      text.insert(at(text.size() + 1), ",");
      break;
    case 5:  // insert a quote or a NUL
      text.insert(at(text.size() + 1),
                  rng.below(2) == 0 ? std::string("\"") : std::string(1, '\0'));
      break;
    case 6: {  // replace a number by a wrong one
      std::vector<std::size_t> starts;
      for (std::size_t i = 0; i < text.size(); ++i) {
        const bool digit = text[i] >= '0' && text[i] <= '9';
        const bool prev = i > 0 && text[i - 1] >= '0' && text[i - 1] <= '9';
        if (digit && !prev) starts.push_back(i);
      }
      if (starts.empty()) break;
      const std::size_t s = starts[at(starts.size())];
      std::size_t e = s;
      while (e < text.size() && text[e] >= '0' && text[e] <= '9') ++e;
      text.replace(s, e - s, kNumbers[at(kNumbers.size())]);
      break;
    }
    case 7:  // insert punctuation or odd bytes
      text.insert(at(text.size() + 1), kSnippets[at(kSnippets.size())]);
      break;
    case 8: {  // swap two lines (the header may move)
      auto lines = split_lines(text);
      if (lines.size() >= 2) std::swap(lines[at(lines.size())], lines[at(lines.size())]);
      text = join_lines(lines);
      break;
    }
    default:  // delete a span
      if (!text.empty()) {
        const auto s = at(text.size());
        text.erase(s, at(16) + 1);
      }
      break;
  }
  return text;
}

// One to three corruptions.
inline std::string mutate(std::string text, base::Rng& rng) {
  const auto n = 1 + rng.below(3);
  for (std::uint64_t i = 0; i < n; ++i) text = mutate_once(std::move(text), rng);
  return text;
}

// Printable form of an input for a failure message.
inline std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u >= 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace gpuorch::test
