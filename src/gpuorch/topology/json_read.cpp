#include "gpuorch/topology/json_read.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/json_check.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/topology/json.hpp"

namespace gpuorch::topology {
namespace {

using Json = nlohmann::json;

struct Reader {
  const std::string& file;

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    base::fail_input(fmt::format("{}: {}: {}", file, where, what));
  }
  const Json& field(const Json& obj, const std::string& where, const char* key) const {
    if (!obj.is_object() || !obj.contains(key)) fail(where, fmt::format("missing \"{}\"", key));
    return obj.at(key);
  }
  std::string str(const Json& obj, const std::string& where, const char* key) const {
    const Json& v = field(obj, where, key);
    if (v.is_null()) return {};
    if (!v.is_string()) fail(where, fmt::format("\"{}\" is not a string", key));
    return v.get<std::string>();
  }
  // null or absent reads as `absent`.
  long long integer(const Json& obj, const std::string& where, const char* key,
                    long long absent) const {
    if (!obj.contains(key) || obj.at(key).is_null()) return absent;
    const Json& v = obj.at(key);
    if (!v.is_number_integer()) fail(where, fmt::format("\"{}\" is not an integer", key));
    if (v.is_number_unsigned() && v.get<unsigned long long>() > LLONG_MAX) {
      fail(where, fmt::format("\"{}\" is out of range", key));
    }
    return v.get<long long>();
  }
  // An integer that fits an int (ids, counts, indices); null or absent reads as `absent`.
  int int32(const Json& obj, const std::string& where, const char* key, int absent) const {
    const long long v = integer(obj, where, key, absent);
    if (v < INT_MIN || v > INT_MAX) fail(where, fmt::format("\"{}\" {} is out of range", key, v));
    return static_cast<int>(v);
  }
  bool boolean(const Json& obj, const std::string& where, const char* key) const {
    if (!obj.contains(key)) return false;
    const Json& v = obj.at(key);
    if (!v.is_boolean()) fail(where, fmt::format("\"{}\" is not true or false", key));
    return v.get<bool>();
  }
  // A CPU list ("0-55,112-167"); absent or null is the empty set.
  IdSet cpus(const Json& obj, const std::string& where, const char* key) const {
    if (!obj.contains(key) || obj.at(key).is_null()) return {};
    const Json& v = obj.at(key);
    const auto parsed = v.is_string() ? parse_id_list(v.get<std::string>()) : std::nullopt;
    if (!parsed) fail(where, fmt::format("\"{}\" is not a CPU list", key));
    return *parsed;
  }
  const Json& array(const Json& obj, const std::string& where, const char* key) const {
    const Json& v = field(obj, where, key);
    if (!v.is_array()) fail(where, fmt::format("\"{}\" is not an array", key));
    return v;
  }
};

// "MAJOR.MINOR" (a CUDA version, a compute capability) as `gpuorch topo --json` writes it. Bounded:
// a file, not the driver, is speaking here, and NVML's encoding (major * 1000) must not overflow.
std::pair<int, int> dotted_version(const Reader& r, const std::string& where, const char* key,
                                   const std::string& text) {
  const auto part = [&](std::string_view digits) {
    int v = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || v < 0 ||
        v > 999) {
      r.fail(where, fmt::format("\"{}\" is \"{}\", not MAJOR.MINOR (e.g. \"12.4\")", key, text));
    }
    return v;
  };
  const auto dot = text.find('.');
  const std::string_view all{text};
  const int major = part(all.substr(0, dot));
  return {major, dot == std::string::npos ? 0 : part(all.substr(dot + 1))};
}

std::string opt_str(const Json& obj, const char* key) {
  return obj.contains(key) && obj.at(key).is_string() ? obj.at(key).get<std::string>()
                                                      : std::string();
}

PciLocation read_pci(const Reader& r, const Json& j, const std::string& where) {
  PciLocation p;
  p.address = r.str(j, where, "pci");
  if (j.contains("pci_location") && j["pci_location"].is_object()) {
    const Json& l = j["pci_location"];
    p.host_bridge = opt_str(l, "host_bridge");
    if (l.contains("bridges") && l["bridges"].is_array()) {
      for (const auto& b : l["bridges"]) {
        if (b.is_string()) p.bridges.push_back(b.get<std::string>());
      }
    }
    p.known = r.boolean(l, where + ".pci_location", "ancestry_known");
  }
  return p;
}

std::uint64_t hex(const std::string& text) {
  try {
    return text.empty() ? 0 : std::stoull(text, nullptr, 16);
  } catch (const std::exception&) {
    return 0;
  }
}

constexpr int kMaxNvLinks = 64;  // links between two GPUs (18 on H100/H200)

Path parse_path(const Reader& r, const std::string& where, const std::string& text, int& nvlinks) {
  static const std::pair<const char*, Path> kNames[] = {
      {"X", Path::kSelf},  {"XGMI", Path::kXgmi}, {"PIX", Path::kPix}, {"PXB", Path::kPxb},
      {"PHB", Path::kPhb}, {"NODE", Path::kNode}, {"SYS", Path::kSys},
  };
  for (const auto& [name, path] : kNames) {
    if (text == name) return path;
  }
  if (text.size() > 2 && text.starts_with("NV") &&
      std::all_of(text.begin() + 2, text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const auto [end, ec] = std::from_chars(text.data() + 2, text.data() + text.size(), nvlinks);
    if (ec != std::errc{} || end != text.data() + text.size() || nvlinks < 1 ||
        nvlinks > kMaxNvLinks) {
      r.fail(where, fmt::format("path \"{}\": an NVLink count is 1 to {}", text, kMaxNvLinks));
    }
    return Path::kNvLink;
  }
  r.fail(where, fmt::format("unknown path \"{}\"", text));
}

Gpu read_gpu(const Reader& r, const Json& j, std::size_t i) {
  const std::string where = fmt::format("gpus[{}]", i);
  Gpu g;
  g.index = r.int32(j, where, "index", static_cast<int>(i));
  const std::string vendor = r.str(j, where, "vendor");
  if (vendor == "nvidia") {
    g.vendor = Vendor::kNvidia;
  } else if (vendor == "amd") {
    g.vendor = Vendor::kAmd;
  } else {
    r.fail(where, fmt::format("unknown vendor \"{}\" (nvidia or amd)", vendor));
  }
  g.model = r.str(j, where, "model");
  g.uuid = r.str(j, where, "uuid");
  g.pci = read_pci(r, j, where);
  g.pci_device_id = static_cast<std::uint32_t>(hex(opt_str(j, "pci_device_id")));
  if (const std::string cc = opt_str(j, "compute_capability"); !cc.empty()) {
    std::tie(g.cc_major, g.cc_minor) = dotted_version(r, where, "compute_capability", cc);
  }
  g.gfx_target = opt_str(j, "gfx_target");
  g.compute_units = r.int32(j, where, "compute_units", 0);
  g.xgmi_hive = hex(opt_str(j, "xgmi_hive"));
  if (j.contains("pcie") && j["pcie"].is_object()) {
    const Json& p = j["pcie"];
    g.pcie.gen = r.int32(p, where + ".pcie", "gen", 0);
    g.pcie.width = r.int32(p, where + ".pcie", "width", 0);
    g.pcie.max_gen = r.int32(p, where + ".pcie", "max_gen", 0);
    g.pcie.max_width = r.int32(p, where + ".pcie", "max_width", 0);
  }
  g.memory_mib = r.integer(j, where, "memory_mib", 0);
  g.numa_node = r.int32(j, where, "numa_node", -1);
  g.local_cpus = r.cpus(j, where, "local_cpus");
  g.minor = r.int32(j, where, "minor", -1);
  g.render_minor = r.int32(j, where, "render_minor", -1);
  g.nvlink_links = r.int32(j, where, "nvlinks", 0);
  g.nvswitch_links = r.int32(j, where, "nvswitch_links", 0);
  if (j.contains("family") && j["family"].is_string()) g.family = j["family"].get<std::string>();
  if (j.contains("source") && j["source"].is_string()) g.source = j["source"].get<std::string>();
  if (j.contains("mig")) {
    const Json& m = j["mig"];
    const std::string mw = where + ".mig";
    g.mig.capable = r.boolean(m, mw, "capable");
    g.mig.enabled = r.boolean(m, mw, "enabled");
    g.mig.pending_enabled = r.boolean(m, mw, "pending_enabled");
    const Json& inst = r.array(m, mw, "instances");
    for (std::size_t k = 0; k < inst.size(); ++k) {
      const std::string iw = fmt::format("{}.instances[{}]", mw, k);
      MigInstance mi;
      mi.gpu_instance = r.int32(inst[k], iw, "gpu_instance", -1);
      mi.compute_instance = r.int32(inst[k], iw, "compute_instance", -1);
      mi.profile = r.str(inst[k], iw, "profile");
      mi.uuid = r.str(inst[k], iw, "uuid");
      mi.memory_mib = r.integer(inst[k], iw, "memory_mib", 0);
      if (inst[k].contains("attributes") && !inst[k]["attributes"].is_null()) {
        const Json& a = inst[k]["attributes"];
        if (!a.is_object()) r.fail(iw, "\"attributes\" is not an object");
        MigAttributes at;
        for (const auto& [key, member] : kMigAttributeFields) {
          at.*member = r.int32(a, iw + ".attributes", key, 0);
          if (at.*member < 0) r.fail(iw + ".attributes", fmt::format("\"{}\" is negative", key));
        }
        mi.attributes = at;
      }
      g.mig.instances.push_back(std::move(mi));
    }
  }
  return g;
}

// What the rest relies on: NUMA node ids unique and >= 0, every GPU's and NIC's NUMA node one of
// them (or -1: unknown), GPU indices unique and >= 0.
void validate(const Reader& r, const Host& h) {
  std::set<int> nodes;
  for (std::size_t i = 0; i < h.numa_nodes.size(); ++i) {
    const int id = h.numa_nodes[i].id;
    const std::string where = fmt::format("numa_nodes[{}]", i);
    if (id < 0) r.fail(where, fmt::format("NUMA node id {} is negative", id));
    if (!nodes.insert(id).second) r.fail(where, fmt::format("NUMA node {} is listed twice", id));
  }
  const auto known = [&](int node, const std::string& where) {
    if (node == -1 || nodes.count(node)) return;
    r.fail(where, fmt::format("\"numa_node\": {} is not in \"numa_nodes\" (ids {}), nor -1", node,
                              nodes.empty() ? std::string("none")
                                            : fmt::format("{}", fmt::join(nodes, ", "))));
  };
  std::set<int> indices;
  for (std::size_t i = 0; i < h.gpus.size(); ++i) {
    const std::string where = fmt::format("gpus[{}]", i);
    const int index = h.gpus[i].index;
    if (index < 0) r.fail(where, fmt::format("GPU index {} is negative", index));
    if (!indices.insert(index).second) {
      r.fail(where, fmt::format("GPU index {} is used twice", index));
    }
    known(h.gpus[i].numa_node, where);
  }
  for (std::size_t i = 0; i < h.nics.size(); ++i) {
    known(h.nics[i].numa_node, fmt::format("nics[{}]", i));
  }
}

}  // namespace

Host host_from_json_text(const std::string& text, const std::string& file) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::parse_error& e) {
    const auto upto = std::min<std::size_t>(e.byte, text.size());
    const auto line = 1 + static_cast<std::size_t>(std::count(
                              text.begin(), text.begin() + static_cast<long>(upto), '\n'));
    base::fail_input(file, line, "not valid JSON");
  } catch (const Json::exception& e) {
    // A number past the double range (1e400): nlohmann names the token but not where it is.
    const std::string what = e.what();
    const auto open = what.find('\''), close = what.rfind('\'');
    const std::string token =
        open != std::string::npos && close > open ? what.substr(open + 1, close - open - 1) : "";
    const auto at = token.empty() ? std::string::npos : text.find(token);
    if (at == std::string::npos) base::fail_input(fmt::format("{}: a number out of range", file));
    const auto line = 1 + static_cast<std::size_t>(
                              std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
    base::fail_input(file, line, fmt::format("number {} is out of range", token));
  }
  const Reader r{file};
  if (!j.is_object()) r.fail("top level", "not a JSON object");
  base::require_no_control_json(j, file);
  const std::string schema = r.str(j, "top level", "schema");
  if (schema != kTopologySchema) {
    r.fail("schema", fmt::format("\"{}\" is not {} (the output of `gpuorch topo --json`)", schema,
                                 kTopologySchema));
  }
  Host h;
  h.hostname = r.str(j, "top level", "hostname");
  if (j.contains("machine") && j["machine"].is_string())
    h.machine = j["machine"].get<std::string>();
  h.driver_version = opt_str(j, "driver_version");
  if (const std::string cuda = opt_str(j, "cuda_driver_version"); !cuda.empty()) {
    const auto [major, minor] = dotted_version(r, "top level", "cuda_driver_version", cuda);
    if (minor > 99)
      r.fail("top level", fmt::format("cuda_driver_version \"{}\": minor above 99", cuda));
    h.cuda_driver_version = major * 1000 + minor * 10;
  }
  h.memory_mib = r.integer(j, "top level", "memory_mib", 0);
  if (j.contains("cpus") && j["cpus"].is_object()) {
    const Json& c = j["cpus"];
    h.logical_cpus = r.int32(c, "cpus", "logical", 0);
    h.cores = r.int32(c, "cpus", "cores", 0);
    h.packages = r.int32(c, "cpus", "packages", 0);
    h.online_cpus = r.cpus(c, "cpus", "online");
  }
  if (j.contains("numa_nodes")) {
    const Json& nodes = r.array(j, "top level", "numa_nodes");
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      NumaNode n;
      const std::string where = fmt::format("numa_nodes[{}]", i);
      n.id = r.int32(nodes[i], where, "id", 0);
      n.cpus = r.cpus(nodes[i], where, "cpus");
      n.memory_mib = r.integer(nodes[i], where, "memory_mib", 0);
      if (nodes[i].contains("distances") && nodes[i]["distances"].is_array()) {
        for (const auto& d : nodes[i]["distances"]) {
          if (d.is_number_integer()) n.distances.push_back(d.get<int>());
        }
      }
      h.numa_nodes.push_back(std::move(n));
    }
  }
  const Json& gpus = r.array(j, "top level", "gpus");
  for (std::size_t i = 0; i < gpus.size(); ++i) h.gpus.push_back(read_gpu(r, gpus[i], i));
  if (j.contains("nics")) {
    const Json& nics = r.array(j, "top level", "nics");
    for (std::size_t i = 0; i < nics.size(); ++i) {
      const std::string where = fmt::format("nics[{}]", i);
      Nic n;
      n.name = r.str(nics[i], where, "name");
      n.pci = read_pci(r, nics[i], where);
      n.firmware = opt_str(nics[i], "firmware");
      n.numa_node = r.int32(nics[i], where, "numa_node", -1);
      n.local_cpus = r.cpus(nics[i], where, "local_cpus");
      if (nics[i].contains("node_guid") && nics[i]["node_guid"].is_string()) {
        n.node_guid = nics[i]["node_guid"].get<std::string>();
      }
      if (nics[i].contains("ports") && nics[i]["ports"].is_array()) {
        for (const auto& p : nics[i]["ports"]) {
          NicPort port;
          port.port = r.int32(p, where + ".ports", "port", 0);
          if (p.contains("state") && p["state"].is_string()) port.state = p["state"];
          if (p.contains("phys_state") && p["phys_state"].is_string()) {
            port.phys_state = p["phys_state"];
          }
          if (p.contains("rate_gbps") && p["rate_gbps"].is_number())
            port.rate_gbps = p["rate_gbps"];
          if (p.contains("link_layer") && p["link_layer"].is_string()) {
            port.link_layer = p["link_layer"];
          }
          n.ports.push_back(std::move(port));
        }
      }
      h.nics.push_back(std::move(n));
    }
  }
  const auto device_index = [&](const std::string& where, const std::string& name) -> int {
    for (std::size_t d = 0; d < h.device_count(); ++d) {
      if (h.device_name(d) == name) return static_cast<int>(d);
    }
    r.fail(where, fmt::format("no device \"{}\"", name));
  };
  if (j.contains("links")) {
    const Json& links = r.array(j, "top level", "links");
    for (std::size_t i = 0; i < links.size(); ++i) {
      const std::string where = fmt::format("links[{}]", i);
      Link l;
      l.a = device_index(where, r.str(links[i], where, "a"));
      l.b = device_index(where, r.str(links[i], where, "b"));
      if (l.a > l.b) std::swap(l.a, l.b);
      int nv = 0, ignored = 0;
      l.path = parse_path(r, where, r.str(links[i], where, "path"), nv);
      l.pcie = parse_path(r, where, r.str(links[i], where, "pcie_path"), ignored);
      l.nvlinks = r.int32(links[i], where, "nvlinks", nv);
      if (links[i].contains("xgmi")) {
        l.xgmi_weight = r.int32(links[i]["xgmi"], where + ".xgmi", "weight", 0);
        l.xgmi_bandwidth_mbps =
            r.integer(links[i]["xgmi"], where + ".xgmi", "max_bandwidth_mbps", 0);
      }
      h.links.push_back(l);
    }
  }
  validate(r, h);
  if (j.contains("notes") && j["notes"].is_array()) {
    for (const auto& n : j["notes"]) {
      if (n.is_string()) h.notes.push_back(n.get<std::string>());
    }
  }
  return h;
}

Host load_host_json(const std::string& path) {
  return host_from_json_text(
      base::read_input_file(path, "topology file", base::kConfigFileMaxBytes), path);
}

}  // namespace gpuorch::topology
