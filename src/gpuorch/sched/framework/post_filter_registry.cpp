#include "gpuorch/sched/framework/post_filter_registry.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace gpuorch::sched {

void PostFilterRegistry::add(std::unique_ptr<PostFilterPlugin> plugin) {
  for (const auto& p : plugins_) {
    if (p->name() == plugin->name()) {
      throw std::invalid_argument(
          fmt::format("a post-filter named {} is registered", plugin->name()));
    }
  }
  plugins_.push_back(std::move(plugin));
}

std::vector<std::string_view> PostFilterRegistry::names() const {
  std::vector<std::string_view> out;
  out.reserve(plugins_.size());
  for (const auto& p : plugins_) out.push_back(p->name());
  return out;
}

PostFilterResult PostFilterRegistry::run(const PostFilterArgs& args) {
  std::vector<std::string> why;
  for (const auto& p : plugins_) {
    PostFilterResult r = p->post_filter(args);
    if (r.success()) return r;
    if (!r.message.empty()) why.push_back(fmt::format("{}: {}", p->name(), r.message));
  }
  PostFilterResult none;
  none.message = fmt::format("{}", fmt::join(why, "; "));
  return none;
}

}  // namespace gpuorch::sched
