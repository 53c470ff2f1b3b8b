#pragma once
// Ports and addresses for the workers' c10d store (MASTER_ADDR:MASTER_PORT).
#include <string>

namespace gpuorch::launch {

// A TCP port the kernel considers free on `addr` now (bind to port 0). Like torchrun's choice it
// can race with another program; the store binds it moments later.
int pick_free_port(const std::string& addr);
// Whether a listener could bind `addr:port` now (SO_REUSEADDR, as the c10d store does).
bool port_available(const std::string& addr, int port);
// The local address the kernel would use to reach host:port (no packet is sent); "127.0.0.1"
// when the host cannot be resolved.
std::string local_address_towards(const std::string& host, int port);

}  // namespace gpuorch::launch
