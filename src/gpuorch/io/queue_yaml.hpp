#pragma once
// Queues from KAI-Scheduler's Queue manifests (apiVersion scheduling.run.ai/v2, kind Queue, one
// per YAML document, or a `kind: List` of them), the file `sim timeline --queues` and the
// Kubernetes scheduler both read:
//
//   apiVersion: scheduling.run.ai/v2
//   kind: Queue
//   metadata: {name: team-a}
//   spec:
//     parentQueue: research        # optional; only leaf queues hold jobs
//     priority: 100                # optional, default 0; higher queues are served first
//     resources:
//       gpu: {quota: 8, limit: -1, overQuotaWeight: 1}      # GPUs, fractions allowed
//       cpu: {quota: -1, limit: -1, overQuotaWeight: 1}     # millicores
//       memory: {quota: -1, limit: -1, overQuotaWeight: 1}  # MB
//       gpuModels:                 # gpuorch's extension: GPUs per model, tried in this order
//         - {model: NVIDIA-A100-SXM4-80GB, quota: 4, limit: 8, overQuotaWeight: 1}
//
// Every mistake (an unknown key, a negative quota other than -1, a quota above the limit, a
// parent that is not defined, a cycle, a name defined twice, more GPU models in all than
// workload::kMaxQueueGpuModels) is one InputError "file:line: what".
#include <string>
#include <vector>

#include "gpuorch/workload/queue_spec.hpp"

namespace gpuorch::io {

std::vector<workload::QueueSpec> load_queues(const std::string& path);
std::vector<workload::QueueSpec> parse_queues(const std::string& text, const std::string& path);

}  // namespace gpuorch::io
