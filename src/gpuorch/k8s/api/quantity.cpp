#include "gpuorch/k8s/api/quantity.hpp"

#include <cctype>
#include <charconv>

namespace gpuorch::k8s {
namespace {

// 128 bits hold 30 decimal digits times any scale that still fits an int64 result.
__extension__ typedef __int128 Wide;

// value = mantissa x 10^exp10 x 2^exp2, mantissa >= 0.
struct Parsed {
  Wide mantissa = 0;
  int exp10 = 0;
  int exp2 = 0;
};

constexpr Wide kLimit = static_cast<Wide>(1) << 100;  // far above any int64 result

std::optional<Parsed> parse(std::string_view s) {
  Parsed p;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    if (s[i] == '-') return std::nullopt;  // no resource is negative
    ++i;
  }
  int digits = 0;
  bool point = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) break;
    if (++digits > 30) return std::nullopt;
    p.mantissa = p.mantissa * 10 + (c - '0');
    if (point) --p.exp10;
  }
  if (digits == 0) return std::nullopt;
  const std::string_view suffix = s.substr(i);
  struct Suffix {
    std::string_view name;
    int exp10;
    int exp2;
  };
  static constexpr Suffix kSuffixes[] = {
      {"", 0, 0},    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
      {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10}, {"Mi", 0, 20},
      {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
  };
  for (const auto& x : kSuffixes) {
    if (suffix == x.name) {
      p.exp10 += x.exp10;
      p.exp2 += x.exp2;
      return p;
    }
  }
  if (suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    int e = 0;
    const char* first = suffix.data() + 1;
    if (*first == '+') ++first;
    const auto [end, ec] = std::from_chars(first, suffix.data() + suffix.size(), e);
    if (ec != std::errc() || end != suffix.data() + suffix.size() || e < -40 || e > 40) {
      return std::nullopt;
    }
    p.exp10 += e;
    return p;
  }
  return std::nullopt;
}

// mantissa x 10^exp10 x 2^exp2, rounded up or down to an integer; nullopt beyond int64.
std::optional<std::int64_t> to_integer(Parsed p, bool round_up) {
  Wide v = p.mantissa;
  Wide divisor = 1;
  for (; p.exp10 > 0; --p.exp10) {
    if ((v *= 10) > kLimit) return std::nullopt;
  }
  for (; p.exp2 > 0; --p.exp2) {
    if ((v *= 2) > kLimit) return std::nullopt;
  }
  for (; p.exp10 < 0; ++p.exp10) {
    if ((divisor *= 10) > kLimit) return round_up && v > 0 ? 1 : 0;
  }
  for (; p.exp2 < 0; ++p.exp2) {
    if ((divisor *= 2) > kLimit) return round_up && v > 0 ? 1 : 0;
  }
  Wide q = v / divisor;
  if (round_up && q * divisor != v) ++q;
  if (q > INT64_MAX) return std::nullopt;
  return static_cast<std::int64_t>(q);
}

}  // namespace

std::optional<std::int64_t> quantity_milli(std::string_view text) {
  auto p = parse(text);
  if (!p) return std::nullopt;
  p->exp10 += 3;
  return to_integer(*p, true);
}

std::optional<std::int64_t> quantity_mib(std::string_view text, bool round_up) {
  auto p = parse(text);
  if (!p) return std::nullopt;
  p->exp2 -= 20;
  return to_integer(*p, round_up);
}

std::optional<std::int64_t> quantity_count(std::string_view text) {
  const auto p = parse(text);
  if (!p) return std::nullopt;
  const auto down = to_integer(*p, false);
  const auto up = to_integer(*p, true);
  if (!down || down != up) return std::nullopt;
  return down;
}

}  // namespace gpuorch::k8s
