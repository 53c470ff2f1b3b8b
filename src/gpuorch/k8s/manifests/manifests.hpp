#pragma once
// `gpuorch manifests`: the Kubernetes objects that deploy gpuorch on a cluster (docs/manifests.md):
// namespace, service accounts and least-privilege RBAC, the device plugin DaemonSet(s) with its
// sharing ConfigMap, the exporter DaemonSet + Service with Prometheus scrape annotations, the
// node labeller DaemonSet that applies `gpuorch topo --labels`, and the scheduler: its Deployment
// (two replicas, leader election), least-privilege RBAC and the PodGroup CRD
// (podgroups.scheduling.x-k8s.io, scheduler-plugins' coscheduling API).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/k8s/deviceplugin/config.hpp"
#include "gpuorch/k8s/manifests/manifest_options.hpp"

namespace gpuorch::k8s {

struct ManifestOptions {
  // What scripts/build-image tags (docs/manifests.md, "The image").
  std::string image = "ghcr.io/gpuorch/gpuorch:" GPUORCH_VERSION;
  std::string mps_image = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04";
  std::string ns = "gpuorch";
  std::string vendor = "nvidia";  // nvidia, amd or both
  SharingKind sharing = SharingKind::kNone;
  int replicas = 4;
  int exporter_port = 9400;
  // `gpuorch scheduler`: ServiceAccount, ClusterRole(Binding), leader-election Role(Binding) and
  // Deployment; with it the PodGroup CRD unless podgroup_crd is false (scheduler-plugins may have
  // installed it already), and the Queue CRD unless queue_crd is false (KAI-Scheduler's own).
  bool scheduler = true;
  bool podgroup_crd = true;
  bool queue_crd = true;
  // flags.migStrategy of the NVIDIA plugin's ConfigMap and the labeller's MIG_STRATEGY; other
  // than none, the NVIDIA containers that read GPUs get what seeing MIG devices takes
  // (NVIDIA_MIG_MONITOR_DEVICES=all and CAP_SYS_ADMIN).
  MigStrategy mig_strategy = MigStrategy::kNone;
  // The DRA driver (docs/dra.md) instead of the device plugin DaemonSets: GPUs as DRA devices,
  // with its DeviceClasses and RBAC. The plugin's ConfigMap stays: the labeller reads it.
  bool dra = false;
  // `gpuorch admission-check` for Kueue (docs/kueue.md): its Deployment (two replicas, leader
  // election), RBAC, and the AdmissionCheck gpuorch-placeable a ClusterQueue names. Kueue's CRDs
  // must be installed first.
  bool kueue = false;
  PodOptions pod;  // pull secrets and policy, placement, resources, RuntimeClass
};

// The scheduler's port for /metrics, /healthz and /readyz in the Deployment.
inline constexpr int kSchedulerPort = 10261;
// The admission check's port for the same, in its Deployment.
inline constexpr int kAdmissionCheckPort = 10263;

struct Manifest {
  std::string file;  // "10-device-plugin-nvidia.yaml": order of application
  nlohmann::ordered_json object;
};

// Throws base::InputError for options that make no sense (replicas < 2 with sharing, MPS on AMD,
// what check_pod_options refuses).
std::vector<Manifest> make_manifests(const ManifestOptions& options);
// One object as YAML (strings that YAML would read as numbers or booleans are quoted).
std::string to_yaml(const nlohmann::ordered_json& object);

}  // namespace gpuorch::k8s
