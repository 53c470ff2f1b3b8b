#pragma once
// An NCCL_DEBUG=INFO log (NCCL's own lines, plus PyTorch's ProcessGroupNCCL watchdog lines that
// usually surround them) read into what a person looks for in it: the transport NCCL chose for
// each peer connection, the rings and trees, the WARN lines, the network it picked, the ranks that
// finished init, and the collective timeouts; and every line the catalogue knows
// (nccl_catalogue.hpp: NCCL's, RCCL's and PyTorch's messages with their meaning), counted per entry
// with the facts they establish. Lines of other programs are skipped, so a whole job log can be
// given.
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpuorch/doctor/nccl_catalogue.hpp"

namespace gpuorch::doctor {

// The transport families of NCCL's "via ..." connection lines.
enum class Transport { kP2p, kShm, kNetIb, kNetSocket, kNetOther, kCollNet, kOther };
const char* to_string(Transport t);

struct NcclConnection {
  std::size_t line = 0;
  int channel = 0;
  int from_rank = 0, to_rank = 0;
  Transport transport = Transport::kOther;
  std::string via;   // as logged: "P2P/IPC/read", "NET/IB/0/GDRDMA", "SHM/direct/direct"
  bool gdr = false;  // NET/IB with GPUDirect RDMA
};

struct NcclWarning {
  std::size_t line = 0;
  std::string host;
  std::string source;   // "misc/socket.cc:441", may be empty
  std::string message;  // text after "NCCL WARN "
};

struct NcclRank {
  int rank = 0, nranks = 0, cuda_dev = -1;
  std::string host, pid, bus_id, comm_id;
};

// One watchdog report of PyTorch's ProcessGroupNCCL: a collective that did not finish in time.
struct CollectiveTimeout {
  std::size_t line = 0;
  int rank = 0;
  long long seq = 0;
  std::string op;  // "ALLREDUCE"
  long long timeout_ms = 0, ran_ms = 0;
};

// "detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed ...: 1579"
struct WatchdogProgress {
  int rank = 0;
  long long at_work = 0, last_enqueued = -1, last_completed = -1;
};

// The lines of one catalogue entry: counted, and the first one kept with its values.
struct CatalogueHit {
  const CatalogueEntry* entry = nullptr;
  std::size_t format = 0;  // of the first line
  std::size_t first_line = 0, count = 0;
  std::string text;                 // the first line's message as logged
  std::vector<std::string> values;  // its fields
  std::string host, rank;           // of the first line ("" when the line does not say)
  std::set<std::string> hosts;
};

struct NcclLog {
  std::size_t lines = 0, nccl_lines = 0;
  std::string version;          // "2.18.1+cuda12.1"
  std::set<std::string> hosts;  // from the line prefixes
  std::vector<NcclConnection> connections;
  std::map<int, std::vector<int>> rings;  // channel -> rank order (the last one logged)
  std::set<int> tree_channels;
  std::vector<std::string> graph_types;           // "NVL/PIX" of the "Pattern ..., type X/Y" lines
  std::vector<std::string> networks;              // "Using network IB"; distinct, in order
  std::vector<std::string> no_ib_device_hosts;    // hosts that logged "NET/IB : No device found"
  std::map<std::string, std::string> socket_ifs;  // host -> interface NCCL's sockets use ("lo")
  std::map<std::string, std::string> env;         // "NCCL_P2P_DISABLE set by environment to 1"
  std::vector<NcclWarning> warnings;
  std::map<int, NcclRank> init_complete;  // rank -> its "Init COMPLETE" line
  std::optional<int> nranks;
  std::optional<int> nnodes;  // "... nRanks 16 nNodes 2 localRanks 8 ..." (2.19 on)
  std::vector<CollectiveTimeout> timeouts;
  std::map<int, WatchdogProgress> progress;  // rank -> its latest watchdog progress line
  std::vector<CatalogueHit> hits;            // one per catalogue entry seen, by first line
  std::map<const CatalogueEntry*, std::size_t> hit_index;  // entry -> its place in `hits`
  std::map<std::string, std::set<std::string>> facts;      // fact -> hosts that showed it
  std::size_t recognised = 0;                              // lines a catalogue entry read
};

// The longest line searched for NCCL's text: NCCL formats its lines in 1 KiB buffers, and a
// longer line (another program's) is skipped, as std::regex recurses once per byte of it.
inline constexpr std::size_t kNcclMaxLineBytes = 4096;

// Reads `text` (the file `name`, for messages). Throws base::InputError "name: ..." when there is
// not one NCCL line in it. A number too large for its field (a rank of 99999999999999999999) makes
// its line one this reader cannot read, skipped like any other.
NcclLog parse_nccl_log(const std::string& text, const std::string& name,
                       const Catalogue& catalogue = builtin_catalogue());

// The same from the file at `path`, one line at a time (base::LineReader: a regular file of at
// most base::kLogFileMaxBytes, lines over kNcclMaxLineBytes skipped).
NcclLog read_nccl_log(const std::string& path, const Catalogue& catalogue = builtin_catalogue());

}  // namespace gpuorch::doctor
