#pragma once
// The connection between two devices, in the vocabulary of `nvidia-smi topo -m` and NCCL, from
// closest to farthest.
#include <string>

namespace gpuorch::topology {

enum class Path { kSelf, kNvLink, kXgmi, kPix, kPxb, kPhb, kNode, kSys };

// "X", "NV18", "XGMI", "PIX", ... (`nvlinks` is the # of NV#).
std::string to_string(Path p, int nvlinks = 0);

struct PciLocation;

// The PCIe/CPU path between two PCI functions. Devices behind one PCIe switch (or one port) are
// PIX; behind nested switches PXB; under different root ports of one host bridge PHB; under
// different host bridges NODE when on the same NUMA node, else SYS. Unknown ancestry gives SYS
// unless the NUMA nodes say NODE: never closer than what is known.
Path pcie_path(const PciLocation& a, int numa_a, const PciLocation& b, int numa_b);

}  // namespace gpuorch::topology
