#include "gpuorch/launch/recorded_host.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpuorch/base/error.hpp"
#include "gpuorch/topology/json.hpp"

namespace gpuorch::launch {
namespace {

using Json = nlohmann::json;
using topology::IdSet;
using topology::Path;

struct Reader {
  std::string file;

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    base::fail_input(fmt::format("{}: {}: {}", file, where, what));
  }
  int integer(const Json& j, const char* key, const std::string& where, int fallback) const {
    if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
    if (!j.at(key).is_number_integer()) fail(where, fmt::format("\"{}\" is not an integer", key));
    return j.at(key).get<int>();
  }
  std::string text(const Json& j, const char* key) const {
    if (!j.is_object() || !j.contains(key) || !j.at(key).is_string()) return {};
    return j.at(key).get<std::string>();
  }
  IdSet ids(const Json& j, const char* key, const std::string& where) const {
    const auto parsed = topology::parse_id_list(text(j, key));
    if (!parsed) fail(where, fmt::format("\"{}\" is not a CPU list", key));
    return *parsed;
  }
  const Json& array(const Json& j, const char* key) const {
    static const Json kEmpty = Json::array();
    if (!j.contains(key)) return kEmpty;
    if (!j.at(key).is_array()) fail(key, "not an array");
    return j.at(key);
  }
  topology::PciLocation pci(const Json& j) const {
    topology::PciLocation p;
    p.address = text(j, "pci");
    if (j.contains("pci_location") && j.at("pci_location").is_object()) {
      const Json& l = j.at("pci_location");
      p.host_bridge = text(l, "host_bridge");
      for (const auto& b : l.value("bridges", Json::array())) {
        if (b.is_string()) p.bridges.push_back(b.get<std::string>());
      }
      p.known = l.value("ancestry_known", false);
    }
    return p;
  }
};

// "NV18" is NVLink with 18 links; the other names as `gpuorch topo` prints them.
bool parse_path(const std::string& s, Path& path, int& nvlinks) {
  nvlinks = 0;
  if (s.size() > 2 && s.compare(0, 2, "NV") == 0 &&
      s.find_first_not_of("0123456789", 2) == std::string::npos) {
    nvlinks = std::stoi(s.substr(2));
    path = Path::kNvLink;
    return true;
  }
  static const std::pair<const char*, Path> kNames[] = {
      {"X", Path::kSelf},  {"XGMI", Path::kXgmi}, {"PIX", Path::kPix}, {"PXB", Path::kPxb},
      {"PHB", Path::kPhb}, {"NODE", Path::kNode}, {"SYS", Path::kSys}};
  for (const auto& [name, p] : kNames) {
    if (s == name) {
      path = p;
      return true;
    }
  }
  return false;
}

topology::Host read_host(const Json& j, const Reader& r) {
  topology::Host h;
  h.hostname = r.text(j, "hostname");
  h.machine = r.text(j, "machine");
  const Json cpus = j.value("cpus", Json::object());
  h.logical_cpus = r.integer(cpus, "logical", "cpus", 0);
  h.cores = r.integer(cpus, "cores", "cpus", 0);
  h.packages = r.integer(cpus, "packages", "cpus", 0);
  h.online_cpus = r.ids(cpus, "online", "cpus");
  const auto& nodes = r.array(j, "numa_nodes");
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string where = fmt::format("numa_nodes[{}]", i);
    topology::NumaNode n;
    n.id = r.integer(nodes[i], "id", where, static_cast<int>(i));
    n.cpus = r.ids(nodes[i], "cpus", where);
    h.numa_nodes.push_back(std::move(n));
  }
  const auto& gpus = r.array(j, "gpus");
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const std::string where = fmt::format("gpus[{}]", i);
    topology::Gpu g;
    g.index = r.integer(gpus[i], "index", where, static_cast<int>(i));
    const std::string vendor = r.text(gpus[i], "vendor");
    if (vendor != "nvidia" && vendor != "amd") {
      r.fail(where, fmt::format("unknown vendor \"{}\" (nvidia or amd)", vendor));
    }
    g.vendor = vendor == "amd" ? topology::Vendor::kAmd : topology::Vendor::kNvidia;
    g.model = r.text(gpus[i], "model");
    g.uuid = r.text(gpus[i], "uuid");
    g.pci = r.pci(gpus[i]);
    g.numa_node = r.integer(gpus[i], "numa_node", where, -1);
    g.local_cpus = r.ids(gpus[i], "local_cpus", where);
    h.gpus.push_back(std::move(g));
  }
  const auto& nics = r.array(j, "nics");
  for (std::size_t i = 0; i < nics.size(); ++i) {
    const std::string where = fmt::format("nics[{}]", i);
    topology::Nic n;
    n.name = r.text(nics[i], "name");
    if (n.name.empty()) r.fail(where, "no \"name\"");
    n.pci = r.pci(nics[i]);
    n.numa_node = r.integer(nics[i], "numa_node", where, -1);
    n.local_cpus = r.ids(nics[i], "local_cpus", where);
    for (const auto& p : nics[i].value("ports", Json::array())) {
      topology::NicPort port;
      port.port = r.integer(p, "port", where, 0);
      port.state = r.text(p, "state");
      port.link_layer = r.text(p, "link_layer");
      n.ports.push_back(std::move(port));
    }
    h.nics.push_back(std::move(n));
  }
  const auto device = [&](const std::string& name, const std::string& where) {
    for (std::size_t d = 0; d < h.device_count(); ++d) {
      if (h.device_name(d) == name) return static_cast<int>(d);
    }
    r.fail(where, fmt::format("no device \"{}\"", name));
  };
  const auto& links = r.array(j, "links");
  for (std::size_t i = 0; i < links.size(); ++i) {
    const std::string where = fmt::format("links[{}]", i);
    topology::Link l;
    l.a = device(r.text(links[i], "a"), where);
    l.b = device(r.text(links[i], "b"), where);
    if (l.a > l.b) std::swap(l.a, l.b);
    int ignored = 0;
    if (!parse_path(r.text(links[i], "path"), l.path, l.nvlinks)) r.fail(where, "unknown \"path\"");
    if (!parse_path(r.text(links[i], "pcie_path"), l.pcie, ignored)) l.pcie = l.path;
    h.links.push_back(l);
  }
  return h;
}

}  // namespace

topology::Host load_recorded_host(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) base::fail_input(fmt::format("{}: cannot read the topology file", path));
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  const auto j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) base::fail_input(path, 0, "not a JSON object");
  if (j.value("schema", std::string()) != topology::kTopologySchema) {
    base::fail_input(path, 0,
                     fmt::format("not the output of `gpuorch topo --json` (schema is not {})",
                                 topology::kTopologySchema));
  }
  return read_host(j, Reader{path});
}

}  // namespace gpuorch::launch
