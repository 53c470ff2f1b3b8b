#include "cli/node_inputs.hpp"

#include <filesystem>

#include "gpuorch/io/inventory.hpp"
#include "gpuorch/io/openb.hpp"
#include "gpuorch/k8s/mirror/slice_inventory.hpp"

namespace gpuorch::cli {

std::vector<cluster::NodeSpec> load_node_list(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".yaml" || ext == ".yml") return io::load_inventory(path);
  // The slices' translation is the Kubernetes layer's (k8s/mirror/slice_inventory.hpp says why).
  if (ext == ".json") return k8s::load_resource_slices(path);
  return io::load_openb_nodes(path);
}

}  // namespace gpuorch::cli
