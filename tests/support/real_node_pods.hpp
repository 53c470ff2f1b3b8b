#pragma once
// What the real-node tests (tests/e2e/real_node*_test.cpp) run in their pods: busybox pods, and
// the workers of a training job (`gpuorch launch` with c10d rendezvous and the launcher tests'
// DDP script on Gloo), with the helpers that read them back. docs/k8s-testenv.md, "End-to-end
// tests".
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/k8s/api/api_client.hpp"
#include "support/control_plane.hpp"
#include "support/paths.hpp"

#define SKIP_WITHOUT_REAL_NODES()                                                       \
  do {                                                                                  \
    const std::string why = ::gpuorch::test::ControlPlane::real_nodes_unavailable();    \
    if (!why.empty()) GTEST_SKIP() << "real nodes cannot run on this machine: " << why; \
  } while (false)

// The training tests also need Debian's python3-torch on the machine (mounted into the pods).
#define SKIP_WITHOUT_REAL_NODES_OR_TORCH()                                                     \
  do {                                                                                         \
    SKIP_WITHOUT_REAL_NODES();                                                                 \
    if (std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") != 0) {  \
      GTEST_SKIP() << "python3-torch is not installed (/usr/bin/python3 cannot import torch)"; \
    }                                                                                          \
  } while (false)

namespace gpuorch::test {

using nlohmann::json;

inline const std::string kPods = "/api/v1/namespaces/default/pods";
inline const std::string kWorkloadImage = "docker.io/library/busybox:local";

// Seconds since `start`, for the durations the tests print.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline json busybox_pod(const std::string& name, const std::string& script) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"restartPolicy", "Never"},
            {"terminationGracePeriodSeconds", 1},
            {"containers", json::array({{{"name", "c"},
                                         {"image", kWorkloadImage},
                                         {"imagePullPolicy", "Never"},
                                         {"command", {"sh", "-c", script}}}})}}}};
}

inline std::string phase(const json& pod) { return pod["status"].value("phase", ""); }
inline bool finished(const json& pod) {
  return phase(pod) == "Succeeded" || phase(pod) == "Failed";
}

inline std::string pod_log(k8s::ApiClient& api, const std::string& name) {
  const auto r = api.request("GET", fmt::format("{}/{}/log", kPods, name), nullptr, "");
  return r.status == 200 ? r.body : fmt::format("(log answered {}: {})", r.status, r.body);
}

// The job a training pod belongs to: its rendezvous id (also the pods' `app` label), its
// `--nnodes` (N, or MIN:MAX for an elastic job) and its PodGroup.
struct TrainingJob {
  std::string rdzv_id = "real-node-ddp";
  std::string nnodes = "2";
  std::string group = "ddp";
  std::vector<std::string> launch_args;  // more `gpuorch launch` flags (--max-restarts, ...)
};

// One worker pod of the training job: `gpuorch launch` (c10d rendezvous) running the launcher
// tests' DDP script on Gloo. The image holds only busybox: the machine's /usr (Debian's python3
// and python3-torch) and /etc/alternatives (where libblas.so.3 points) are mounted read-only, and
// so are the gpuorch binary of this build and the script's folder. hostNetwork: the two nodes'
// pod networks are not routed to each other (nothing here routes), so the pods meet on loopback,
// each under its own address (127.0.0.1, 127.0.0.2): in a pod the launcher's pid is 1 and under
// hostNetwork the host name is the machine's, so (host, pid) would name both nodes alike.
inline json training_pod(const std::string& name, const std::string& node, int rank, int port,
                         const std::vector<std::string>& train_args = {"--steps", "10"},
                         const TrainingJob& job = {}) {
  const std::string launch_dir = std::string(fixtures_dir()) + "/launch";
  json pod = busybox_pod(name, "");
  auto& c = pod["spec"]["containers"][0];
  c["command"] = {
      "sh",
      "-c",
      "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; exec \"$0\" \"$@\"",
      "/opt/gpuorch/gpuorch",
      "launch",
      "--nnodes",
      job.nnodes,
      "--nproc-per-node",
      "1",
      "--rdzv-backend",
      "c10d",
      "--rdzv-endpoint",
      fmt::format("127.0.0.1:{}", port),
      "--rdzv-id",
      job.rdzv_id,
      "--local-addr",
      fmt::format("127.0.0.{}", rank + 1),
      "--",
      "/usr/bin/python3",
      "/opt/train/ddp_train.py",
  };
  for (const auto& a : train_args) c["command"].push_back(a);
  auto& command = c["command"];
  const json extra = job.launch_args;
  command.insert(std::find(command.begin(), command.end(), "--nnodes") + 2, extra.begin(),
                 extra.end());
  c["env"] = {{{"name", "GLOO_SOCKET_IFNAME"}, {"value", "lo"}},
              {{"name", "GPUORCH_TORCH_BACKEND"}, {"value", "gloo"}}};
  c["resources"] = {{"requests", {{"cpu", "100m"}, {"nvidia.com/gpu", "1"}}},
                    {"limits", {{"nvidia.com/gpu", "1"}}}};
  c["volumeMounts"] = {
      {{"name", "usr"}, {"mountPath", "/usr"}, {"readOnly", true}},
      {{"name", "alternatives"}, {"mountPath", "/etc/alternatives"}, {"readOnly", true}},
      {{"name", "gpuorch"}, {"mountPath", "/opt/gpuorch/gpuorch"}, {"readOnly", true}},
      {{"name", "train"}, {"mountPath", "/opt/train"}, {"readOnly", true}}};
  auto host_path = [](const std::string& volume, const std::string& path, const std::string& type) {
    return json{{"name", volume}, {"hostPath", {{"path", path}, {"type", type}}}};
  };
  pod["spec"]["volumes"] = {host_path("usr", "/usr", "Directory"),
                            host_path("alternatives", "/etc/alternatives", "Directory"),
                            host_path("gpuorch", binary_path(), "File"),
                            host_path("train", launch_dir, "Directory")};
  pod["spec"]["hostNetwork"] = true;
  pod["spec"]["schedulerName"] = "gpuorch";
  if (!node.empty()) pod["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", node}};
  // One gang: the PodGroup `job.group`, placed all or nothing (or elastic, with --queues).
  pod["metadata"]["labels"] = {{"app", job.rdzv_id}, {"scheduling.x-k8s.io/pod-group", job.group}};
  return pod;
}

}  // namespace gpuorch::test
