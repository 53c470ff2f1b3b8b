#pragma once
// Loaders for the openb trace formats (Alibaba clusterdata, cluster-trace-gpu-v2023):
//   nodes: sn,cpu_milli,memory_mib,gpu,model
//   pods:  name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,
//          deletion_time,scheduled_time]   (the multigpu files have only the first five columns)
#include <cstddef>
#include <string>
#include <vector>

#include "gpuorch/base/csv.hpp"
#include "gpuorch/cluster/node_spec.hpp"
#include "gpuorch/workload/pod_spec.hpp"

namespace gpuorch::cluster {
class Cluster;
}

namespace gpuorch::io {

// Pods in file order with the line each came from, for messages that point at the input.
struct PodTrace {
  std::string path;
  std::vector<workload::PodSpec> pods;
  std::vector<std::size_t> lines;
};

std::vector<cluster::NodeSpec> load_openb_nodes(const std::string& path);
PodTrace load_openb_pods(const std::string& path);
// The same from a table already read (base::parse_csv of bytes in memory, for the fuzzers).
std::vector<cluster::NodeSpec> openb_nodes(const base::CsvTable& table);
PodTrace openb_pods(const base::CsvTable& table);

// One warning line per GPU model that pods ask for and the cluster lacks
// ("file:line: GPU model 'X' is not in the cluster; 12 pods ask only for models it lacks").
std::vector<std::string> unknown_model_warnings(const PodTrace& trace,
                                                const cluster::Cluster& cluster);

}  // namespace gpuorch::io
