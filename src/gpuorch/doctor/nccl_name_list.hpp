#pragma once
// NCCL's device-list syntax, shared by NCCL_SOCKET_IFNAME and NCCL_IB_HCA: comma-separated
// prefixes, "^" before the list excludes, "=" before the list makes every entry an exact name, and
// NCCL_IB_HCA entries may name a port ("mlx5_0:1") (NCCL env docs; misc/utils.cc parseStringList).
#include <optional>
#include <string>
#include <vector>

namespace gpuorch::doctor {

struct NameList {
  bool exclude = false;
  bool exact = false;
  struct Entry {
    std::string name;
    std::optional<int> port;
  };
  std::vector<Entry> entries;
};

// `with_ports`: read ":N" after a name (NCCL_IB_HCA). nullopt when a port is not a number.
std::optional<NameList> parse_name_list(const std::string& value, bool with_ports);
// Whether `entry` selects `device` (prefix, or whole name when exact).
bool selects(const NameList& list, const NameList::Entry& entry, const std::string& device);
// The devices of `devices` the list lets NCCL use.
std::vector<std::string> selected(const NameList& list, const std::vector<std::string>& devices);

}  // namespace gpuorch::doctor
