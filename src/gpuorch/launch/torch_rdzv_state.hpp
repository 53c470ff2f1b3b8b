#pragma once
// PyTorch's c10d rendezvous state (torch.distributed.elastic.rendezvous.dynamic_rendezvous
// `_RendezvousState`), as torchrun's agents keep it pickled in their store: the round, whether it
// is complete or closed, the last-call deadline, the participants and their ranks, the wait list
// (and, in PyTorch 2.x, the redundancy list), and each node's last heartbeat. A node is a
// `_NodeDesc(host, pid, local_id)`. Read from and written to pickle bytes (py_pickle.hpp) so a
// gpuorch agent and torchrun's agents share one rendezvous (docs/launch.md, c10d rendezvous).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuorch::launch {

// What differs between PyTorch versions in the pickled state. PyTorch 1.x keeps the node's host
// as `fqdn` and naive UTC datetimes (`datetime.utcnow()`); current 2.x names it `addr`, keeps
// aware UTC datetimes (`datetime.now(timezone.utc)`) and a `redundancy_list`. A peer that reads
// the other kind fails (a missing attribute, naive compared with aware), so a state is always
// written back in the kind it was read in.
struct TorchStateDialect {
  std::string node_field = "addr";
  bool aware_times = true;
  bool redundancy_list = true;
};
inline TorchStateDialect torch1_dialect() { return {"fqdn", false, false}; }
inline TorchStateDialect torch2_dialect() { return {}; }

struct TorchNode {
  std::string host;  // fqdn or addr
  std::int64_t pid = 0;
  std::int64_t local_id = 0;
  // Python's order for the dataclass (field by field): it decides the ranks.
  auto operator<=>(const TorchNode&) const = default;
  bool operator==(const TorchNode&) const = default;
  [[nodiscard]] std::string text() const;  // "host_pid_localid", as PyTorch prints it
};

using UtcMicros = std::int64_t;  // microseconds since the Unix epoch, UTC

struct TorchRdzvState {
  std::int64_t round = 0;
  bool complete = false;
  std::optional<UtcMicros> deadline;
  bool closed = false;
  std::vector<std::pair<TorchNode, std::int64_t>> participants;  // node, rank
  std::vector<TorchNode> wait_list;
  std::vector<TorchNode> redundancy_list;
  std::vector<std::pair<TorchNode, UtcMicros>> last_heartbeats;
  TorchStateDialect dialect;

  [[nodiscard]] const std::int64_t* rank_of(const TorchNode& n) const;
  [[nodiscard]] bool waiting(const TorchNode& n) const;
};

// Throws pickle::PickleError naming what is wrong. Where the bytes show no node or no time, the
// dialect stays `fallback`'s.
TorchRdzvState decode_torch_state(std::string_view pickle_bytes, const TorchStateDialect& fallback);
std::string encode_torch_state(const TorchRdzvState& state);

}  // namespace gpuorch::launch
