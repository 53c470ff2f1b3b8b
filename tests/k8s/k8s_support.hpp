#pragma once
// The device plugin tests' hosts: the recorded topology fixtures' `gpuorch topo --json` output
// (tests/fixtures/topo/<host>/expected/topo.json) and the hand-made MIG-partitioned H100
// (tests/fixtures/k8s/h100-mig.json), read through the static inventory path.
#include <filesystem>
#include <string>

#include "gpuorch/topology/json_read.hpp"
#include "support/paths.hpp"

namespace gpuorch::test {

inline std::string topo_json_path(const std::string& host) {
  const std::filesystem::path fixtures(::gpuorch::test::fixtures_dir());
  if (host == "h100-mig") return (fixtures / "k8s/h100-mig.json").string();
  return (fixtures / "topo" / host / "expected/topo.json").string();
}

inline topology::Host fixture_host(const std::string& host) {
  return topology::load_host_json(topo_json_path(host));
}

}  // namespace gpuorch::test
