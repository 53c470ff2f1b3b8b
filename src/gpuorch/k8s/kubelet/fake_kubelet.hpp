#pragma once
// The kubelet's side of the device plugin API, built from the same .proto as the plugin: a
// Registration server on <dir>/kubelet.sock that, like the kubelet (devicemanager server.go),
// checks the version and the resource name and connects back to the plugin's endpoint before
// Register returns; and a client of each registered DevicePlugin. The CI harness (tests/k8s) and
// `gpuorch kubelet-harness` (the hardware check) drive the plugin through it.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace gpuorch::k8s {

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string directory);
  ~FakeKubelet();
  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  void start();  // serve Registration on <dir>/kubelet.sock
  void stop();   // stop serving and remove kubelet.sock
  // What a new kubelet does: stop, delete every socket in the directory, serve again.
  void restart();

  // Accepted RegisterRequests, in order.
  std::vector<v1beta1::RegisterRequest> registrations() const;
  // Waits until at least `n` registrations were accepted since the start.
  bool wait_registrations(std::size_t n, std::chrono::milliseconds timeout) const;

  // A client of a registered plugin (`endpoint` is the RegisterRequest's).
  std::unique_ptr<v1beta1::DevicePlugin::Stub> connect(const std::string& endpoint) const;
  [[nodiscard]] const std::string& directory() const { return dir_; }

 private:
  class Service;
  std::string dir_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

// Reads one ListAndWatch stream on a thread and keeps every message.
class DeviceWatch {
 public:
  explicit DeviceWatch(v1beta1::DevicePlugin::Stub& stub);
  ~DeviceWatch();
  DeviceWatch(const DeviceWatch&) = delete;
  DeviceWatch& operator=(const DeviceWatch&) = delete;

  std::vector<v1beta1::ListAndWatchResponse> updates() const;
  // Waits until `n` messages have arrived, or the stream ended.
  bool wait_updates(std::size_t n, std::chrono::milliseconds timeout) const;
  // Waits until the stream ends (the plugin stopped); true when it did.
  bool wait_end(std::chrono::milliseconds timeout) const;
  void cancel();

 private:
  grpc::ClientContext ctx_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<v1beta1::ListAndWatchResponse> updates_;
  bool ended_ = false;
  std::thread thread_;
};

}  // namespace gpuorch::k8s
