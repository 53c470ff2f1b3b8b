#pragma once
// A message format as NCCL, RCCL and PyTorch write it (printf: "rank %d and rank %d both on CUDA
// device %lx") turned into a matcher for the lines it prints. The catalogue keeps the format itself
// (a fact about the library) rather than a hand-written regular expression, so an entry reads as
// the message does and a version's change of wording is a second format, not a regex edit.
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace gpuorch::doctor {

struct MessageFormat {
  std::string format;  // as the library writes it
  // The longest fixed text of the format: a line without it cannot match, so the regular
  // expression (slow, and recursive in libstdc++) runs only on the few lines that hold it.
  std::string key;
  // The fixed text the format starts with ("" when it starts with a conversion).
  std::string head;
  std::size_t conversions = 0;
  std::size_t fixed = 0;  // characters of fixed text: the more, the more specific the format
  bool anywhere = false;  // the text may sit inside a longer line (PyTorch's messages)
  std::string pattern;    // the regular expression, valid by construction
  // Compiled on first use: doctor loads 1,500 formats and a log meets a few dozen, and compiling
  // them all was most of its start-up. Copies share one compiled expression.
  [[nodiscard]] const std::regex& re() const;

 private:
  struct Compiled {
    std::once_flag once;
    std::optional<std::regex> re;
  };
  std::shared_ptr<Compiled> compiled_ = std::make_shared<Compiled>();
};

// Throws std::invalid_argument("...") for a conversion this reader does not know or a format with
// too little fixed text to be told from other lines.
MessageFormat compile_format(const std::string& format, bool anywhere);

// The values of the conversions when `text` is a line of this format (trailing blanks and a
// trailing '.' NCCL sometimes adds are tolerated), else nullopt.
std::optional<std::vector<std::string>> match_format(const MessageFormat& f, std::string_view text);

// `format` with its conversions filled in (1, 2, ... for numbers, s1, s2 for strings): the line a
// test feeds back to check that the format recognises its own output.
std::string example_line(const std::string& format);

}  // namespace gpuorch::doctor
