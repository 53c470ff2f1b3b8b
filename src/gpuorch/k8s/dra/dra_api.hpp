#pragma once
// The kubelet's DRA plugin API (proto/dra/v1) under a short name: its C++ namespace follows the
// proto package, k8s.io.kubelet.pkg.apis.dra.v1, whose leading `k8s` inside gpuorch's own
// namespaces would name gpuorch::k8s.
#include "dra/v1/api.grpc.pb.h"

namespace gpuorch::k8s::dra {
namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;
}  // namespace gpuorch::k8s::dra
