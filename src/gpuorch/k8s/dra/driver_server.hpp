#pragma once
// The kubelet's two sockets of `gpuorch dra-driver`: the DRA service (gRPC
// k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin, "v1.DRAPlugin" in a registration) on
// <plugin dir>/dra.sock, and the plugin registration service on
// <plugins_registry>/<driver>-reg.sock, which the kubelet's plugin watcher finds, asks GetInfo
// (type DRAPlugin, the driver's name, the DRA socket, "v1.DRAPlugin") and answers with
// NotifyRegistrationStatus. The DRA socket is served before the registration socket appears, so
// the kubelet never finds a driver it cannot call. A kubelet that restarts walks the registry
// again: nothing to redo here.
//
// Everything a peer sends is checked before use: a claim reference that cannot name a claim is
// that claim's error, more than max_claims claims in one call are refused, and bytes that are not
// the message are gRPC's to refuse; no request ends the process or holds the others.
#include <functional>
#include <memory>
#include <string>

#include "gpuorch/k8s/dra/claim_preparer.hpp"

namespace gpuorch::k8s::dra {

struct DriverServerOptions {
  std::string driver;
  std::string registry_dir = "/var/lib/kubelet/plugins_registry";
  std::string plugin_dir;  // default "/var/lib/kubelet/plugins/<driver>"
  int max_claims = 128;    // per call: each may cost an API server read
  std::function<void(const std::string&)> log;
};

class DriverServer {
 public:
  // Serves both sockets (mode 0600: the kubelet runs as root). Throws base::InputError when a
  // directory is missing or not writable, std::runtime_error when gRPC cannot listen.
  DriverServer(ClaimPreparer& preparer, DriverServerOptions options);
  // Stops serving and removes both sockets.
  ~DriverServer();
  DriverServer(const DriverServer&) = delete;
  DriverServer& operator=(const DriverServer&) = delete;

  [[nodiscard]] std::string dra_socket() const;
  [[nodiscard]] std::string registration_socket() const;
  // Whether the kubelet's last NotifyRegistrationStatus said registered, and how many came.
  [[nodiscard]] bool registered() const;
  [[nodiscard]] int notifications() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuorch::k8s::dra
