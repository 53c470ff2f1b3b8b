#include "gpuorch/k8s/kubelet/fake_kubelet.hpp"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <filesystem>

namespace gpuorch::k8s {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class FakeKubelet::Service final : public v1beta1::Registration::Service {
 public:
  explicit Service(std::string dir) : dir_(std::move(dir)) {}

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    if (req->version() != "v1beta1") {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              fmt::format("unsupported API version {}", req->version())};
    }
    const auto& name = req->resource_name();
    const auto slash = name.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == name.size() ||
        name.find("kubernetes.io/") != std::string::npos) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              fmt::format("invalid extended resource name {}", name)};
    }
    // The kubelet connects back and asks for the options before Register returns.
    auto channel = grpc::CreateChannel("unix:" + (fs::path(dir_) / req->endpoint()).string(),
                                       grpc::InsecureChannelCredentials());
    auto stub = v1beta1::DevicePlugin::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1beta1::Empty empty;
    v1beta1::DevicePluginOptions options;
    const auto s = stub->GetDevicePluginOptions(&ctx, empty, &options);
    if (!s.ok()) {
      return {grpc::StatusCode::UNAVAILABLE,
              fmt::format("cannot reach the plugin at {}: {}", req->endpoint(), s.error_message())};
    }
    {
      std::lock_guard lock(mu_);
      accepted_.push_back(*req);
    }
    cv_.notify_all();
    return grpc::Status::OK;
  }

  std::vector<v1beta1::RegisterRequest> accepted() const {
    std::lock_guard lock(mu_);
    return accepted_;
  }
  bool wait(std::size_t n, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return accepted_.size() >= n; });
  }

 private:
  std::string dir_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<v1beta1::RegisterRequest> accepted_;
};

FakeKubelet::FakeKubelet(std::string directory)
    : dir_(std::move(directory)), service_(std::make_unique<Service>(dir_)) {}

FakeKubelet::~FakeKubelet() { stop(); }

void FakeKubelet::start() {
  const std::string path = (fs::path(dir_) / "kubelet.sock").string();
  std::error_code ec;
  fs::remove(path, ec);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.RegisterService(service_.get());
  server_ = b.BuildAndStart();
  if (!server_) throw std::runtime_error("fake kubelet: cannot serve on " + path);
}

void FakeKubelet::stop() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + 1s);
    server_->Wait();
    server_.reset();
  }
  std::error_code ec;
  fs::remove(fs::path(dir_) / "kubelet.sock", ec);
}

void FakeKubelet::restart() {
  stop();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (entry.is_socket(ec)) fs::remove(entry.path(), ec);
  }
  start();
}

std::vector<v1beta1::RegisterRequest> FakeKubelet::registrations() const {
  return service_->accepted();
}

bool FakeKubelet::wait_registrations(std::size_t n, std::chrono::milliseconds timeout) const {
  return service_->wait(n, timeout);
}

std::unique_ptr<v1beta1::DevicePlugin::Stub> FakeKubelet::connect(
    const std::string& endpoint) const {
  return v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
      "unix:" + (fs::path(dir_) / endpoint).string(), grpc::InsecureChannelCredentials()));
}

DeviceWatch::DeviceWatch(v1beta1::DevicePlugin::Stub& stub) {
  thread_ = std::thread([this, &stub] {
    v1beta1::Empty empty;
    auto reader = stub.ListAndWatch(&ctx_, empty);
    v1beta1::ListAndWatchResponse msg;
    while (reader->Read(&msg)) {
      {
        std::lock_guard lock(mu_);
        updates_.push_back(msg);
      }
      cv_.notify_all();
    }
    reader->Finish();
    {
      std::lock_guard lock(mu_);
      ended_ = true;
    }
    cv_.notify_all();
  });
}

DeviceWatch::~DeviceWatch() {
  cancel();
  if (thread_.joinable()) thread_.join();
}

void DeviceWatch::cancel() { ctx_.TryCancel(); }

std::vector<v1beta1::ListAndWatchResponse> DeviceWatch::updates() const {
  std::lock_guard lock(mu_);
  return updates_;
}

bool DeviceWatch::wait_updates(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return updates_.size() >= n || ended_; }) &&
         updates_.size() >= n;
}

bool DeviceWatch::wait_end(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return ended_; });
}

}  // namespace gpuorch::k8s
