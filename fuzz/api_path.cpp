// Kubernetes API paths built from names a peer or a file gives (k8s/api/api_path.hpp, issue 30: a
// bind request's pod name with '/', '?' or ".." addressed other resources). The input is a
// namespace, a line break, then a name. Checked beyond "no crash":
// - percent_encode keeps the unreserved characters, writes every other byte as %XX (upper-case
//   hex), decodes back to its input, and never yields "." or "..";
// - is_dns1123_label / is_dns1123_subdomain agree with a plain reading of Kubernetes' rule, and
//   require_* throw InvalidName exactly when the check fails, with a one-line, bounded what();
// - pod_path / node_path / namespaced_path succeed exactly for valid names, and then give the path
//   with the names as they are (a valid name never needs encoding);
// - base::printable (which those messages use) leaves no control character and decodes back.
#include "gpuorch/k8s/api/api_path.hpp"

#include <cstdlib>
#include <regex>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "gpuorch/base/printable.hpp"

namespace {

namespace k8s = gpuorch::k8s;

void check(bool ok) {
  if (!ok) std::abort();
}

bool unreserved(unsigned char u) {
  return (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || u == '-' ||
         u == '.' || u == '_' || u == '~';
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // lower-case hex is not what percent_encode writes
}

void check_encoding(std::string_view s) {
  const std::string out = k8s::percent_encode(s);
  check(out != "." && out != ".." && out.find('/') == std::string::npos);
  std::string back;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto u = static_cast<unsigned char>(out[i]);
    if (u == '%') {
      check(i + 2 < out.size());
      const int hi = hex(out[i + 1]), lo = hex(out[i + 2]);
      check(hi >= 0 && lo >= 0);
      const auto decoded = static_cast<unsigned char>(hi * 16 + lo);
      // An unreserved byte is kept as it is, but for the dot-segments "." and "..".
      check(!unreserved(decoded) || s == "." || s == "..");
      back += static_cast<char>(decoded);
      i += 2;
    } else {
      check(unreserved(u));
      back += out[i];
    }
  }
  check(back == s);
}

// Kubernetes' rules as apimachinery writes them (regular expressions and lengths), an oracle
// independent of api_path.cpp's hand-written scan.
bool reference_label(std::string_view s) {
  static const std::regex label("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  return s.size() <= 63 && std::regex_match(s.begin(), s.end(), label);
}

bool reference_subdomain(std::string_view s) {
  static const std::regex subdomain(
      "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  return !s.empty() && s.size() <= 253 && std::regex_match(s.begin(), s.end(), subdomain);
}

int lower_hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// What printable writes, read back: \n \r \t \\ \xhh.
std::string unprintable(std::string_view p) {
  std::string out;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '\\') {
      out += p[i];
      continue;
    }
    check(i + 1 < p.size());
    const char e = p[++i];
    if (e == 'n') {
      out += '\n';
    } else if (e == 'r') {
      out += '\r';
    } else if (e == 't') {
      out += '\t';
    } else if (e == '\\') {
      out += '\\';
    } else {
      check(e == 'x' && i + 2 < p.size());
      const int hi = lower_hex(p[i + 1]), lo = lower_hex(p[i + 2]);
      check(hi >= 0 && lo >= 0);
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
  }
  return out;
}

// One line, no control character (C0, DEL, C1 as UTF-8), and not much longer than the cut.
void check_one_line(std::string_view text, std::size_t max) {
  check(text.size() <= max);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    check(u >= 0x20 && u != 0x7f);
    if (u == 0xc2 && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      check(next < 0x80 || next > 0x9f);
    }
  }
}

void check_printable(std::string_view s) {
  const std::string whole = gpuorch::base::printable(s, s.size());
  check_one_line(whole, 4 * s.size());
  check(unprintable(whole) == s);
  const std::string cut = gpuorch::base::printable(s);
  check_one_line(cut, 4 * gpuorch::base::kPrintableMax + 40);
}

// require(s) throws InvalidName exactly when `valid` is false, with a one-line message.
template <typename F>
void check_refusal(F&& require, bool valid) {
  try {
    require();
    check(valid);
  } catch (const k8s::InvalidName& e) {
    check(!valid);
    check_one_line(e.what(), 4 * gpuorch::base::kPrintableMax + 200);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = gpuorch::fuzz::text_of(data, size);
  const std::size_t nl = text.find('\n');
  const std::string_view ns = std::string_view(text).substr(0, nl);
  const std::string_view name =
      nl == std::string::npos ? std::string_view() : std::string_view(text).substr(nl + 1);

  for (const std::string_view s : {std::string_view(text), ns, name}) {
    check_encoding(s);
    check_printable(s);
    check(k8s::is_dns1123_label(s) == reference_label(s));
    check(k8s::is_dns1123_subdomain(s) == reference_subdomain(s));
    check_refusal([&] { k8s::require_dns1123_label(s, "namespace"); }, reference_label(s));
    check_refusal([&] { k8s::require_dns1123_subdomain(s, "pod name"); }, reference_subdomain(s));
  }

  const bool ns_ok = reference_label(ns), name_ok = reference_subdomain(name);
  check_refusal(
      [&] {
        const std::string path = k8s::pod_path(ns, name, "binding");
        check(path ==
              "/api/v1/namespaces/" + std::string(ns) + "/pods/" + std::string(name) + "/binding");
      },
      ns_ok && name_ok);
  check_refusal([&] { check(k8s::node_path(name) == "/api/v1/nodes/" + std::string(name)); },
                name_ok);
  check_refusal(
      [&] {
        const std::string path =
            k8s::namespaced_path("/apis/coordination.k8s.io/v1", ns, "leases", name);
        std::string want = "/apis/coordination.k8s.io/v1/namespaces/" + std::string(ns) + "/leases";
        if (!name.empty()) want += "/" + std::string(name);
        check(path == want);
      },
      ns_ok && (name.empty() || name_ok));
  return 0;
}
