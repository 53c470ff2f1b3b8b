#include "gpuorch/k8s/kubelet/private_socket.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

namespace gpuorch::k8s {

std::unique_ptr<grpc::Server> start_private_server(grpc::ServerBuilder& builder,
                                                   const std::string& path, std::string& error) {
  static std::mutex umask_mutex;
  std::error_code ec;
  std::filesystem::remove(path, ec);  // a stale socket of an earlier run
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  std::unique_ptr<grpc::Server> server;
  {
    const std::lock_guard lock(umask_mutex);
    const mode_t old = ::umask(0177);
    server = builder.BuildAndStart();
    ::umask(old);
  }
  if (!server) {
    error = fmt::format("cannot listen on {}", path);
    return nullptr;
  }
  if (::chmod(path.c_str(), 0600) != 0) {
    error = fmt::format("cannot make {} mode 0600: {}", path, std::strerror(errno));
    server->Shutdown();
    server->Wait();
    std::filesystem::remove(path, ec);
    return nullptr;
  }
  return server;
}

}  // namespace gpuorch::k8s
