#include "gpuorch/discover/tree.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <system_error>

#include "gpuorch/base/read_file.hpp"

namespace gpuorch::discover {
namespace fs = std::filesystem;
namespace {

// sysfs attributes are at most a page; recorded JSON/XML are read elsewhere.
constexpr std::uintmax_t kMaxFile = 1 << 20;

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) {
    return c != ' ' && c != '\n' && c != '\t' && c != '\r';
  };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

}  // namespace

std::string quote_content(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 40)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u >= 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  if (text.size() > 40) out += "...";
  return "'" + out + "'";
}

Tree::Tree(fs::path root, Diagnostics* diag) : root_(std::move(root)), diag_(diag) {
  std::error_code ec;
  canonical_root_ = fs::canonical(root_, ec);
  if (ec) canonical_root_ = root_;
  live_ = canonical_root_ == "/";
}

std::string Tree::display(const std::string& rel) const {
  if (live_) return "/" + rel;
  return (root_ / rel).string();
}

fs::path Tree::absolute(const std::string& rel) const { return root_ / rel; }

void Tree::problem(const std::string& rel, const std::string& what) const {
  if (diag_) diag_->problem(display(rel), what);
}

bool Tree::exists(const std::string& rel) const {
  std::error_code ec;
  return fs::exists(fs::symlink_status(root_ / rel, ec)) && !ec;
}

std::optional<std::string> Tree::text(const std::string& rel, bool expected) const {
  const fs::path p = root_ / rel;
  std::error_code ec;
  const auto st = fs::status(p, ec);
  if (ec || !fs::exists(st)) {
    if (fs::is_symlink(fs::symlink_status(p, ec))) {
      problem(rel, "dangling symlink");
    } else if (expected) {
      problem(rel, "missing");
    }
    return std::nullopt;
  }
  if (fs::is_directory(st)) {
    problem(rel, "is a directory, expected a file");
    return std::nullopt;
  }
  // A regular file of at most 1 MiB: a FIFO in a recorded tree would otherwise block for good.
  std::string why;
  auto out = base::read_bounded(p.string(), kMaxFile, why);
  if (!out) problem(rel, why);
  return out;
}

std::optional<std::string> Tree::line(const std::string& rel, bool expected) const {
  auto t = text(rel, expected);
  if (!t) return std::nullopt;
  const std::size_t nl = t->find('\n');
  if (nl != std::string::npos) t->resize(nl);
  return trim(*t);
}

std::optional<std::int64_t> Tree::integer(const std::string& rel, bool expected) const {
  const auto l = line(rel, expected);
  if (!l) return std::nullopt;
  std::string s = *l;
  int base = 10;
  if (s.rfind("0x", 0) == 0 || s.rfind("0X", 0) == 0) {
    s = s.substr(2);
    base = 16;
  }
  std::int64_t v = 0;
  const char* begin = s.data();
  const auto [p, ec] = std::from_chars(begin, begin + s.size(), v, base);
  if (s.empty() || ec != std::errc() || p != begin + s.size()) {
    problem(rel, fmt::format("expected an integer, found {}", quote_content(*l)));
    return std::nullopt;
  }
  return v;
}

std::vector<std::string> Tree::list(const std::string& rel) const {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(root_ / rel, ec);
  if (ec) return out;
  for (const auto& e : it) {
    out.push_back(e.path().filename().string());
    if (out.size() > 100000) break;  // bounds the work a pathological tree can cause
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> Tree::resolve(const std::string& rel) const {
  std::error_code ec;
  // Relative symlinks resolve inside a recording; absolute ones would point at this machine.
  const fs::path real = fs::canonical(root_ / rel, ec);
  if (ec) {
    if (fs::is_symlink(fs::symlink_status(root_ / rel, ec))) problem(rel, "dangling symlink");
    return std::nullopt;
  }
  const std::string r = real.string();
  const std::string base = canonical_root_.string();
  if (live_) return r.substr(1);
  if (r.size() <= base.size() || r.compare(0, base.size(), base) != 0 || r[base.size()] != '/') {
    problem(rel, "symlink points outside the recorded tree");
    return std::nullopt;
  }
  return r.substr(base.size() + 1);
}

}  // namespace gpuorch::discover
