#include "gpuorch/doctor/nccl_name_list.hpp"

#include <charconv>
#include <sstream>

namespace gpuorch::doctor {

std::optional<NameList> parse_name_list(const std::string& value, bool with_ports) {
  NameList list;
  std::string rest = value;
  if (!rest.empty() && rest.front() == '^') {
    list.exclude = true;
    rest.erase(0, 1);
  }
  if (!rest.empty() && rest.front() == '=') {
    list.exact = true;
    rest.erase(0, 1);
  }
  std::istringstream in(rest);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    NameList::Entry e;
    const std::size_t colon = with_ports ? item.find(':') : std::string::npos;
    e.name = item.substr(0, colon);
    if (colon != std::string::npos) {
      int port = 0;
      const char* begin = item.data() + colon + 1;
      const char* end = item.data() + item.size();
      const auto [ptr, ec] = std::from_chars(begin, end, port);
      if (ec != std::errc() || ptr != end || begin == end) return std::nullopt;
      e.port = port;
    }
    list.entries.push_back(std::move(e));
  }
  return list;
}

bool selects(const NameList& list, const NameList::Entry& entry, const std::string& device) {
  return list.exact ? device == entry.name : device.rfind(entry.name, 0) == 0;
}

std::vector<std::string> selected(const NameList& list, const std::vector<std::string>& devices) {
  std::vector<std::string> out;
  for (const auto& d : devices) {
    bool named = false;
    for (const auto& e : list.entries) named = named || selects(list, e, d);
    if (named != list.exclude) out.push_back(d);
  }
  return out;
}

}  // namespace gpuorch::doctor
