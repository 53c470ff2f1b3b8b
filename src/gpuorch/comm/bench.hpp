#pragma once
// gpuorch bench: the nccl-tests protocol (sizes, bus-bandwidth factors, table, footer) without any
// GPU code, so it is unit-tested on any machine. The GPU backend (nccl_backend.cpp) measures; this
// formats.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuorch::comm {

enum class Collective {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  alltoall,
  sendrecv
};

struct DataType {
  std::string_view name;  // nccl-tests spelling: float, double, int32, ...
  int nccl = 0;           // ncclDataType_t value
  std::size_t bytes = 0;  // element size
  bool floating = false;
};

struct RedOp {
  std::string_view name;  // sum, prod, max, min, avg
  int nccl = 0;           // ncclRedOp_t value
};

std::optional<Collective> parse_collective(std::string_view name);
std::string_view collective_name(Collective c);
const std::vector<std::string_view>& collective_names();
bool has_redop(Collective c);
bool has_root(Collective c);
// busbw = algbw x factor (nccl-tests doc/PERFORMANCE.md).
double busbw_factor(Collective c, int nranks);
// Whether size = count x element size x nranks (the whole gathered / scattered array).
bool size_is_whole_array(Collective c);
// Whether gpuorch runs an in-place variant (alltoall and sendrecv: out-of-place only).
bool has_in_place(Collective c);

// "8", "64K", "1M", "8G" (powers of 1024, as nccl-tests). Throws base::InputError.
std::size_t parse_size(std::string_view text, std::string_view flag);
std::optional<DataType> parse_type(std::string_view name);
std::optional<RedOp> parse_op(std::string_view name);

struct Options {
  Collective collective = Collective::all_reduce;
  std::string backend = "gpu";
  std::size_t min_bytes = 32ull << 20;
  std::size_t max_bytes = 32ull << 20;
  std::size_t step_bytes = 1ull << 20;
  double step_factor = 1.0;  // > 1: multiplicative steps (-f)
  int gpus = 1;              // -g
  int ranks = 0;             // host backend: processes in the run (0: the -g GPUs)
  int iters = 20;            // -n
  int warmup = 1;            // -w
  int check = 1;             // -c
  int root = 0;              // -r
  int blocking = 0;          // -z
  DataType type{"float", 7, 4, true};
  RedOp op{"sum", 0};
  bool json = false;
  std::string nccl_library = "libnccl.so.2";  // dlopen name or path
};

// Checks ranges and ordering; throws base::InputError with one line.
void validate(const Options& o);

struct SizePoint {
  std::size_t bytes = 0;  // printed size: max(send, recv) bytes
  std::size_t count = 0;  // per-rank element count (nccl-tests "count")
};
// The nccl-tests sweep: from -b to -e, times -f (if > 1) or plus -i.
std::vector<SizePoint> size_sweep(const Options& o, int nranks);

struct Timing {
  double time_us = 0;
  double algbw = 0;  // GB/s, 1e9 bytes
  double busbw = 0;
  long long wrong = -1;  // -1: not checked (N/A)
};

struct Row {
  SizePoint size;
  Timing out_of_place;
  std::optional<Timing> in_place;
};

Timing make_timing(Collective c, int nranks, std::size_t bytes, double seconds, long long wrong);

struct RunInfo {
  int nranks = 0;
  std::vector<std::string> devices;  // "device 0 [0000:18:00.0] NVIDIA H200"
  std::string library;               // "NCCL 2.28.3"
};

std::string header(const Options& o, const RunInfo& info);
std::string table_header();
std::string format_row(const Options& o, const Row& r);
// "# Out of bounds values", "# Avg bus bandwidth" (mean over every printed busbw), closing line.
double average_busbw(const std::vector<Row>& rows);
std::string footer(const Options& o, const std::vector<Row>& rows);
nlohmann::ordered_json to_json(const Options& o, const RunInfo& info, const std::vector<Row>& rows);

// The element a rank contributes at index i (small integers: every reduction is exact) and what the
// collective must leave there; the backend fills and checks with these.
double input_value(const Options& o, int rank, std::size_t i);
double reduced_value(const Options& o, int nranks, std::size_t i);

}  // namespace gpuorch::comm
