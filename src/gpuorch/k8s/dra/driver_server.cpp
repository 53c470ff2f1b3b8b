#include "gpuorch/k8s/dra/driver_server.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/printable.hpp"
#include "gpuorch/k8s/dra/dra_api.hpp"
#include "gpuorch/k8s/kubelet/private_socket.hpp"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace gpuorch::k8s::dra {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The DRA service as a registration names it: the kubelet's short name for the gRPC service
// k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin (proto/dra/v1 says why they differ).
constexpr const char* kDraService = "v1.DRAPlugin";

ClaimRef ref_of(const drapb::Claim& c) { return {c.namespace_(), c.uid(), c.name()}; }

class DraService final : public drapb::DRAPlugin::Service {
 public:
  DraService(ClaimPreparer& preparer, int max_claims)
      : preparer_(preparer), max_claims_(max_claims) {}

  grpc::Status NodePrepareResources(grpc::ServerContext*,
                                    const drapb::NodePrepareResourcesRequest* req,
                                    drapb::NodePrepareResourcesResponse* out) override {
    if (const auto s = check_size(req->claims_size()); !s.ok()) return s;
    for (const auto& c : req->claims()) {
      drapb::NodePrepareResourceResponse answer;
      try {
        for (const auto& d : preparer_.prepare(ref_of(c))) {
          auto* dev = answer.add_devices();
          for (const auto& r : d.requests) dev->add_request_names(r);
          dev->set_pool_name(d.pool);
          dev->set_device_name(d.device);
          for (const auto& id : d.cdi_device_ids) dev->add_cdi_device_ids(id);
        }
      } catch (const std::exception& e) {
        answer.Clear();
        answer.set_error(e.what());
      }
      (*out->mutable_claims())[c.uid()] = std::move(answer);
    }
    return grpc::Status::OK;
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                      const drapb::NodeUnprepareResourcesRequest* req,
                                      drapb::NodeUnprepareResourcesResponse* out) override {
    if (const auto s = check_size(req->claims_size()); !s.ok()) return s;
    for (const auto& c : req->claims()) {
      drapb::NodeUnprepareResourceResponse answer;
      try {
        preparer_.unprepare(ref_of(c));
      } catch (const std::exception& e) {
        answer.set_error(e.what());
      }
      (*out->mutable_claims())[c.uid()] = std::move(answer);
    }
    return grpc::Status::OK;
  }

 private:
  [[nodiscard]] grpc::Status check_size(int claims) const {
    if (claims <= max_claims_) return grpc::Status::OK;
    return {grpc::StatusCode::INVALID_ARGUMENT,
            fmt::format("{} claims in one call; at most {}", claims, max_claims_)};
  }

  ClaimPreparer& preparer_;
  int max_claims_;
};

class RegistrationService final : public pluginregistration::Registration::Service {
 public:
  RegistrationService(std::string driver, std::string endpoint,
                      std::function<void(const std::string&)> log)
      : driver_(std::move(driver)), endpoint_(std::move(endpoint)), log_(std::move(log)) {}

  grpc::Status GetInfo(grpc::ServerContext*, const pluginregistration::InfoRequest*,
                       pluginregistration::PluginInfo* out) override {
    out->set_type("DRAPlugin");
    out->set_name(driver_);
    out->set_endpoint(endpoint_);
    out->add_supported_versions(kDraService);
    return grpc::Status::OK;
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*,
                                        const pluginregistration::RegistrationStatus* s,
                                        pluginregistration::RegistrationStatusResponse*) override {
    registered_ = s->plugin_registered();
    ++notifications_;
    if (log_) {
      log_(s->plugin_registered()
               ? fmt::format("registered with the kubelet as DRA driver {}", driver_)
               : fmt::format("the kubelet refused the registration: {}",
                             base::printable(s->error(), 400)));
    }
    return grpc::Status::OK;
  }

  std::atomic<bool> registered_{false};
  std::atomic<int> notifications_{0};

 private:
  std::string driver_, endpoint_;
  std::function<void(const std::string&)> log_;
};

void require_writable_dir(const std::string& dir, const char* what) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    base::fail_input(fmt::format("{}: the {} is not a directory", dir, what));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    base::fail_input(fmt::format("{}: the {} is not writable", dir, what));
  }
}

}  // namespace

struct DriverServer::Impl {
  DriverServerOptions options;
  std::string dra_path, registration_path;
  std::unique_ptr<DraService> dra;
  std::unique_ptr<RegistrationService> registration;
  std::unique_ptr<grpc::Server> dra_server, registration_server;

  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }
  static void stop(std::unique_ptr<grpc::Server>& s, const std::string& path) {
    if (!s) return;
    s->Shutdown(std::chrono::system_clock::now() + 1s);
    s->Wait();
    s.reset();
    std::error_code ec;
    fs::remove(path, ec);
  }
};

DriverServer::DriverServer(ClaimPreparer& preparer, DriverServerOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.options = std::move(options);
  if (m.options.plugin_dir.empty()) {
    m.options.plugin_dir = "/var/lib/kubelet/plugins/" + m.options.driver;
  }
  require_writable_dir(m.options.registry_dir, "kubelet's plugins_registry directory");
  std::error_code ec;
  fs::create_directories(m.options.plugin_dir, ec);
  require_writable_dir(m.options.plugin_dir, "driver's plugin directory");
  // The kubelet dials the endpoint as given: an absolute path.
  m.dra_path = fs::absolute(fs::path(m.options.plugin_dir) / "dra.sock").string();
  m.registration_path =
      (fs::path(m.options.registry_dir) / (m.options.driver + "-reg.sock")).string();
  m.dra = std::make_unique<DraService>(preparer, m.options.max_claims);
  m.registration =
      std::make_unique<RegistrationService>(m.options.driver, m.dra_path, m.options.log);
  std::string error;
  grpc::ServerBuilder dra;
  dra.RegisterService(m.dra.get());
  m.dra_server = start_private_server(dra, m.dra_path, error);
  if (!m.dra_server) throw std::runtime_error(error);
  grpc::ServerBuilder reg;
  reg.RegisterService(m.registration.get());
  m.registration_server = start_private_server(reg, m.registration_path, error);
  if (!m.registration_server) {
    Impl::stop(m.dra_server, m.dra_path);
    throw std::runtime_error(error);
  }
  m.log(fmt::format("serving {} on {}; registration on {}", kDraService, m.dra_path,
                    m.registration_path));
}

DriverServer::~DriverServer() {
  // The registration first: a kubelet must not find a driver whose service is gone.
  Impl::stop(impl_->registration_server, impl_->registration_path);
  Impl::stop(impl_->dra_server, impl_->dra_path);
}

std::string DriverServer::dra_socket() const { return impl_->dra_path; }
std::string DriverServer::registration_socket() const { return impl_->registration_path; }
bool DriverServer::registered() const { return impl_->registration->registered_; }
int DriverServer::notifications() const { return impl_->registration->notifications_; }

}  // namespace gpuorch::k8s::dra
