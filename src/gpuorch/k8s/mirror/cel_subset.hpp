#pragma once
// The part of CEL (Common Expression Language) that DRA device selectors use, evaluated against
// one device of a ResourceSlice. No maintained C++ CEL implementation can be had from the package
// sources this project builds from (Debian 12 has none; PyPI's and NuGet's are Python and C#), so
// gpuorch scheduler parses a documented subset itself (docs/dra.md, "The CEL subset") with a
// small recursive-descent parser. An expression outside the subset is refused when it is parsed
// (never evaluated as something else), so a claim that uses one is Unschedulable, never given a
// wrong device.
//
// The subset: `device.driver`, `device.attributes["domain"].name` and `...["domain"]["name"]`,
// `device.capacity["domain"].name`; literals (strings, ints, true/false, lists); `== != < <= > >=`
// (ints; strings; versions), `in` (a list, or a map's keys), `&& || !`, parentheses;
// `has(device.attributes["domain"].name)`; `quantity("40Gi")` with `compareTo`, `isGreaterThan`,
// `isLessThan`; `semver("1.2.3")` with the same three; `startsWith`, `endsWith`, `contains` on
// strings. `&&` and `||` follow CEL: false && error is false, true || error is true.
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>

namespace gpuorch::k8s {

// A semantic version (major.minor.patch; pre-release and build ignored for ordering).
struct SemVer {
  std::int64_t major = 0, minor = 0, patch = 0;
  auto operator<=>(const SemVer&) const = default;
};

// One attribute value of a device: the API's int, bool, string or version.
using DeviceAttribute = std::variant<std::int64_t, bool, std::string, SemVer>;

// A device as a selector sees it. Attribute and capacity names are fully qualified
// ("gpu.gpuorch.io/productName"): a slice's unqualified names get the driver's domain.
struct SelectorDevice {
  std::string driver;
  std::map<std::string, DeviceAttribute> attributes;
  std::map<std::string, std::int64_t> capacity_milli;  // quantities in milli units
};

// A parsed expression. parse() throws SelectorError for text outside the subset or malformed.
class DeviceSelector {
 public:
  static DeviceSelector parse(const std::string& expression);
  // Whether the device matches; throws SelectorError for a runtime error (an attribute the
  // device lacks, a comparison of different types), as CEL's evaluation errors.
  [[nodiscard]] bool matches(const SelectorDevice& device) const;
  [[nodiscard]] const std::string& text() const { return text_; }

  struct Node;

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

// Outside the subset, malformed, or (from matches) a runtime error; what() names the reason.
class SelectorError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "1.2.3" (a pre-release or build suffix allowed, not ordered); false when it is not one.
bool parse_semver(const std::string& text, SemVer& out);

}  // namespace gpuorch::k8s
