#pragma once
// topology::Host: the hardware truth of one machine (DESIGN.md). Discovery fills it; the matrix,
// JSON, labels, telemetry and the scheduler's cluster::NodeSpec are all derived from it.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuorch/topology/cpuset.hpp"
#include "gpuorch/topology/path.hpp"

namespace gpuorch::topology {

enum class Vendor { kNvidia, kAmd };
const char* to_string(Vendor v);

// Where a PCI function sits: its address and the bridges above it, top (root port) first. The
// host bridge is the sysfs "pciDDDD:BB" root; two devices under different host bridges only meet
// in the CPU.
struct PciLocation {
  std::string address;               // "0000:19:00.0", lower case
  std::string host_bridge;           // "pci0000:15"; empty when unknown
  std::vector<std::string> bridges;  // bridge addresses from the root port down to the parent
  bool known = false;                // false when the ancestry could not be read
};

struct PcieLink {
  int gen = 0;  // 1..6; 0 = unknown
  int width = 0;
  int max_gen = 0;
  int max_width = 0;
};

// What NVML says a MIG device has (nvmlDeviceGetAttributes_v2 on its handle): the SMs and engines
// GFD labels, which vary per product and are not a function of the slices.
struct MigAttributes {
  int multiprocessors = 0;
  int copy_engines = 0, decoders = 0, encoders = 0, jpeg_engines = 0, ofa_engines = 0;
  int gpu_instance_slices = 0, compute_instance_slices = 0;
};
// The fields by the names recordings and topology JSON give them.
inline constexpr std::array<std::pair<const char*, int MigAttributes::*>, 8> kMigAttributeFields{{
    {"multiprocessors", &MigAttributes::multiprocessors},
    {"copy_engines", &MigAttributes::copy_engines},
    {"decoders", &MigAttributes::decoders},
    {"encoders", &MigAttributes::encoders},
    {"jpeg_engines", &MigAttributes::jpeg_engines},
    {"ofa_engines", &MigAttributes::ofa_engines},
    {"gpu_instance_slices", &MigAttributes::gpu_instance_slices},
    {"compute_instance_slices", &MigAttributes::compute_instance_slices},
}};

struct MigInstance {
  int gpu_instance = -1;
  int compute_instance = -1;
  std::string profile;  // "3g.40gb"; empty when only procfs told us it exists
  std::string uuid;
  std::int64_t memory_mib = 0;
  std::optional<MigAttributes> attributes;  // absent: NVML could not say (or an old recording)
};

struct Mig {
  bool capable = false;
  bool enabled = false;
  bool pending_enabled = false;
  std::vector<MigInstance> instances;
};

struct Gpu {
  int index = 0;  // NVML / card order
  Vendor vendor = Vendor::kNvidia;
  std::string model;  // marketing name: "NVIDIA H100 80GB HBM3", "AMD Instinct MI250"
  std::string uuid;
  PciLocation pci;
  std::uint32_t pci_device_id = 0;  // 0x2330
  std::uint32_t pci_class = 0;      // 0x030200
  std::int64_t memory_mib = 0;      // 0 = unknown
  int numa_node = -1;
  IdSet local_cpus;
  int minor = -1;                    // /dev/nvidiaN or the DRM card number
  int render_minor = -1;             // AMD: /dev/dri/renderD<N>
  int cc_major = -1, cc_minor = -1;  // NVIDIA compute capability
  std::string gfx_target;            // AMD: "gfx90a"
  int compute_units = 0;             // AMD CUs
  int simd_count = 0;
  std::string family;  // "hopper" (NVIDIA) or "AI" (AMD)
  std::uint64_t xgmi_hive = 0;
  int nvlink_links = 0;    // active NVLinks
  int nvswitch_links = 0;  // of which end in an NVSwitch
  PcieLink pcie;
  Mig mig;
  std::string source;  // "nvml", "procfs", "sysfs+kfd"
};

struct NicPort {
  int port = 0;
  std::string state;       // "ACTIVE"
  std::string phys_state;  // "LinkUp"
  double rate_gbps = 0;
  std::string link_layer;  // "InfiniBand" or "Ethernet"
};

struct Nic {
  std::string name;  // "mlx5_0"
  PciLocation pci;
  int numa_node = -1;
  IdSet local_cpus;
  std::string node_guid;
  std::string firmware;
  std::vector<NicPort> ports;
};

struct NumaNode {
  int id = 0;
  IdSet cpus;
  std::int64_t memory_mib = 0;
  std::vector<int> distances;  // to every node, in node order; empty when unknown
};

// Links between two devices of the matrix (GPUs first, then NICs).
struct Link {
  int a = 0, b = 0;        // device indices, a < b
  Path path = Path::kSys;  // the best connection: NV#/XGMI over the PCIe path
  Path pcie = Path::kSys;  // the PCIe/CPU path alone
  int nvlinks = 0;
  int xgmi_weight = 0;
  std::int64_t xgmi_bandwidth_mbps = 0;
};

struct Host {
  std::string hostname;
  std::string machine;          // DMI product name
  std::string driver_version;   // NVIDIA driver or amdgpu module version
  int cuda_driver_version = 0;  // 12040 = CUDA 12.4
  int logical_cpus = 0;
  int cores = 0;     // 0 = unknown
  int packages = 0;  // 0 = unknown
  IdSet online_cpus;
  std::int64_t memory_mib = 0;
  std::vector<NumaNode> numa_nodes;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::vector<Link> links;         // every pair of devices, a < b
  std::vector<std::string> notes;  // one line each: what could not be seen and why

  [[nodiscard]] std::size_t device_count() const { return gpus.size() + nics.size(); }
  [[nodiscard]] std::string device_name(std::size_t i) const;  // "GPU0", "NIC3"
  [[nodiscard]] const Link* link(std::size_t a, std::size_t b) const;
};

}  // namespace gpuorch::topology
