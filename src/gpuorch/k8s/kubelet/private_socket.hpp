#pragma once
// A gRPC server on a unix socket only its owner may connect to: the kubelet's plugin sockets hand
// out devices, and the kubelet runs as root. gRPC binds with the process umask (0777 under
// umask 0), so the socket is bound under umask 0177 (born 0600; the umask is the process's, so one
// bind at a time, whichever plugin binds) and then chmod-ed to say so.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace gpuorch::k8s {

// `builder` with its services registered; listens on unix:`path` (a stale socket there is
// removed first). Null with `error` set when gRPC cannot listen or the mode cannot be set.
std::unique_ptr<grpc::Server> start_private_server(grpc::ServerBuilder& builder,
                                                   const std::string& path, std::string& error);

}  // namespace gpuorch::k8s
