#include "gpuorch/base/json_check.hpp"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "gpuorch/base/printable.hpp"
#include "gpuorch/base/text_check.hpp"

namespace gpuorch::base {
namespace {

// A JSON pointer as a message shows it: nested thousands deep, the whole pointer would push what
// is wrong past the message's cut (base/error.cpp keeps 4096 bytes).
std::string shown(const std::string& pointer) { return pointer.empty() ? "/" : printable(pointer); }

}  // namespace

void require_no_control_json(const nlohmann::json& doc, const std::string& file) {
  // An explicit stack: a document nested thousands deep must not exhaust the call stack.
  std::vector<std::pair<const nlohmann::json*, std::string>> todo{{&doc, ""}};
  while (!todo.empty()) {
    auto [value, pointer] = std::move(todo.back());
    todo.pop_back();
    if (value->is_string()) {
      require_no_control(value->get_ref<const std::string&>(), file, 0, shown(pointer));
    } else if (value->is_object()) {
      for (auto it = value->begin(); it != value->end(); ++it) {
        require_no_control(it.key(), file, 0, fmt::format("a key in {}", shown(pointer)));
        todo.emplace_back(&it.value(), pointer + "/" + it.key());
      }
    } else if (value->is_array()) {
      for (std::size_t i = 0; i < value->size(); ++i) {
        todo.emplace_back(&(*value)[i], fmt::format("{}/{}", pointer, i));
      }
    }
  }
}

}  // namespace gpuorch::base
